//! [`WikiError`]: everything reading, checking, parsing or sending a WIKI message can fail at,
//! and [`BackendError`]: why a [`WikiBackend`](super::WikiBackend) refuses a request.
//!
//! The server sends these messages to the peer as the `RSP=` text of an `SC=-1` reply and logs
//! them, so each names what is wrong (the field, the value, the limit) and never the shared key
//! or the checksum the key would have produced.

use super::record::JobState;
use std::io;
use std::net::IpAddr;
use std::time::Duration;

/// Longest excerpt of offending text kept in an error, in characters.
const EXCERPT_CHARS: usize = 120;

/// A failure of the WIKI protocol layer: framing, checksum, timestamp, parsing, rendering,
/// transport, or a refusal reported by the other side.
#[derive(Debug, thiserror::Error)]
pub enum WikiError {
    /// The shared key is not a number Maui could have been built with.
    #[error(
        "invalid WIKI key {text:?}: expected a decimal number in 0..=4294967295 \
         (the N of Maui's `configure --with-key=N`)"
    )]
    BadKey {
        /// The text given as the key (a key that does not parse is no secret).
        text: String,
    },
    /// The first 8 bytes of a frame are not 8 decimal digits.
    #[error("frame size field {field:?} is not 8 decimal digits")]
    BadSizeField {
        /// The bytes received, lossily decoded.
        field: String,
    },
    /// The size field is 0 or larger than [`MAX_FRAME_BYTES`](super::MAX_FRAME_BYTES).
    #[error("frame size {size} is out of range (1..={max} bytes)")]
    SizeOutOfRange {
        /// The size announced (or, when sending, the size of the frame built).
        size: u64,
        /// The largest size accepted.
        max: usize,
    },
    /// The connection ended, or the buffer stops, before the announced bytes.
    #[error("frame truncated: {got} of {expected} bytes")]
    Truncated {
        /// Bytes announced.
        expected: usize,
        /// Bytes received.
        got: usize,
    },
    /// A buffer holds more bytes than its frame announces.
    #[error("{extra} byte(s) after the end of the frame")]
    TrailingBytes {
        /// How many.
        extra: usize,
    },
    /// The frame body is not `CK=<16 hex> TS=<epoch> AUTH=<user> DT=<data>`.
    #[error("malformed frame: {reason}")]
    MalformedFrame {
        /// What is missing or wrong.
        reason: &'static str,
    },
    /// The checksum does not match the bytes from `TS=` on under the shared key: the peer uses
    /// another key, or the message was altered.
    #[error("checksum {got} does not match the message under the shared key")]
    BadChecksum {
        /// The checksum received.
        got: String,
    },
    /// The timestamp is more than the allowed skew away from this host's clock.
    #[error(
        "timestamp {timestamp} is {} s off this host's clock ({now}); more than {max_secs} s \
         is refused", now.abs_diff(*timestamp)
    )]
    StaleTimestamp {
        /// The `TS=` received.
        timestamp: i64,
        /// This host's clock.
        now: i64,
        /// The skew allowed.
        max_secs: u64,
    },
    /// A step did not finish in time.
    #[error("no {during} within {:.1} s", after.as_secs_f64())]
    Timeout {
        /// What was being waited for ("complete request", "reply", ...).
        during: &'static str,
        /// The time allowed.
        after: Duration,
    },
    /// The network failed.
    #[error("{during}: {source}")]
    Io {
        /// What was being done ("connect to 10.0.0.1:15004", "read the request", ...).
        during: String,
        /// What the OS said.
        #[source]
        source: io::Error,
    },
    /// The server accepts WIKI requests only from its listed peers.
    #[error("peer {peer} is not in the allowed peer list")]
    PeerNotAllowed {
        /// The peer's address.
        peer: IpAddr,
    },
    /// `CMD=` names no command this interface knows.
    #[error(
        "unknown command {name:?} (expected GETNODES, GETJOBS, STARTJOB, CANCELJOB, SUSPENDJOB \
         or RESUMEJOB)"
    )]
    UnknownCommand {
        /// The command received (excerpt).
        name: String,
    },
    /// A request, reply or record list does not parse.
    #[error("malformed {what}: {reason} in {text:?}")]
    Malformed {
        /// What was being parsed ("request", "reply", "node record", ...).
        what: &'static str,
        /// What is wrong.
        reason: String,
        /// The offending text (excerpt).
        text: String,
    },
    /// A `STATE=` value outside the states this interface speaks.
    #[error("unknown {kind} state {value:?} (expected one of {expected})")]
    UnknownState {
        /// "node" or "job".
        kind: &'static str,
        /// The value received (excerpt).
        value: String,
        /// The states accepted.
        expected: &'static str,
    },
    /// A value cannot be written into a message without breaking its syntax (a name with `:`
    /// or `#`, an empty user, a NaN speed, ...). Nothing was sent.
    #[error("{what} {value:?} cannot be sent: {reason}")]
    InvalidValue {
        /// What the value is ("node name", "job id", "AUTH", ...).
        what: &'static str,
        /// The value (excerpt).
        value: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// The other side answered with a negative status code.
    #[error("the WIKI server refused (SC={code}): {reason}")]
    Refused {
        /// The `SC=` received (negative).
        code: i32,
        /// Its `RSP=` (or `RESPONSE=`) text.
        reason: String,
    },
}

impl WikiError {
    /// A [`WikiError::Malformed`] quoting an excerpt of `text`.
    pub(crate) fn malformed(what: &'static str, reason: impl Into<String>, text: &str) -> Self {
        WikiError::Malformed {
            what,
            reason: reason.into(),
            text: excerpt(text),
        }
    }

    /// A [`WikiError::InvalidValue`] quoting an excerpt of `value`.
    pub(crate) fn invalid(what: &'static str, value: &str, reason: &'static str) -> Self {
        WikiError::InvalidValue {
            what,
            value: excerpt(value),
            reason,
        }
    }

    /// A [`WikiError::Io`] saying what was being done.
    pub(crate) fn io(during: impl Into<String>, source: io::Error) -> Self {
        WikiError::Io {
            during: during.into(),
            source,
        }
    }
}

/// At most [`EXCERPT_CHARS`] characters of `text`, with `...` when cut.
pub(crate) fn excerpt(text: &str) -> String {
    match text.char_indices().nth(EXCERPT_CHARS) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_owned(),
    }
}

/// Why a [`WikiBackend`](super::WikiBackend) refuses a request. The server answers `SC=-1` with
/// this message as the reason. Maui defers a job for an hour after one refused `STARTJOB`, so
/// a backend should refuse a start only for what can never succeed as asked, and say why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// The request names a job the cluster does not have.
    #[error("no job {job:?} on this cluster")]
    NoSuchJob {
        /// The job id as received.
        job: String,
    },
    /// The request names a node the cluster does not have.
    #[error("no node {node:?} on this cluster")]
    NoSuchNode {
        /// The node name as received.
        node: String,
    },
    /// A `TASKLIST` asks more processors of a node than it has free now.
    #[error("node {node:?}: {wanted} processor(s) asked, {available} available")]
    ProcessorsBusy {
        /// The node.
        node: String,
        /// Tasks the list places on it.
        wanted: u32,
        /// Its available processors now.
        available: u32,
    },
    /// The job is not in a state the action applies to.
    #[error("job {job:?} is {state}: cannot {action} it")]
    WrongState {
        /// The job.
        job: String,
        /// Its state.
        state: JobState,
        /// What was asked ("start", "suspend", ...).
        action: &'static str,
    },
    /// The job cannot run as asked on this cluster, whatever its load (more tasks than
    /// processors, a task count that differs from the job's, ...).
    #[error("job {job:?} cannot run as asked: {reason}")]
    CannotRun {
        /// The job.
        job: String,
        /// Why.
        reason: String,
    },
    /// The backend cannot answer now (its executor or store failed); a later poll may succeed.
    #[error("the cluster cannot answer now: {reason}")]
    Unavailable {
        /// What failed.
        reason: String,
    },
}
