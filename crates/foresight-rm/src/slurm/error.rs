//! [`SlurmError`]: everything talking to Slurm can fail at, and [`FailureKind`], the class of a
//! failure Slurm reported, recognised from its (stable, English) messages so that the daemon can
//! react to the cause (controller down: cluster unavailable; reservation refused: two-phase
//! release and re-plan) without matching strings itself.
//!
//! Every error names the command as it ran (`SLURM_CONF=... squeue --json`), and parse errors
//! carry the offending text, because an operator must be able to re-run and read it.

use std::io;

/// Longest excerpt of Slurm's output kept in an error, in characters.
pub(crate) const EXCERPT_CHARS: usize = 400;

/// A failure to run a Slurm command, a failure Slurm reported, or output we do not understand.
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    /// The request cannot be turned into a command (bad name, zero processors, ...); nothing ran.
    #[error("invalid Slurm request: {reason}")]
    InvalidRequest {
        /// What is wrong.
        reason: String,
    },
    /// The program could not be started (not installed, not executable, `runuser` missing).
    #[error("`{command}`: cannot run: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// What the OS said.
        #[source]
        source: io::Error,
    },
    /// The command did not finish in time; it was killed.
    #[error("`{command}`: no answer after {seconds} s (killed)")]
    Timeout {
        /// The command line.
        command: String,
        /// The time allowed.
        seconds: u64,
    },
    /// Slurm refused or failed: a non-zero exit status, or (for the `--json` queries, which exit
    /// 0 even when the controller is down) a non-empty `errors` array.
    #[error("`{command}` failed ({kind}, exit status {}): {message}", status_text(*.status))]
    Failed {
        /// The command line.
        command: String,
        /// The exit status; `None` when killed by a signal.
        status: Option<i32>,
        /// The class of the failure.
        kind: FailureKind,
        /// What Slurm said (stderr, else stdout, else the JSON errors), trimmed and truncated.
        message: String,
    },
    /// The command succeeded but printed something this adapter does not understand.
    #[error("`{command}`: cannot understand the output ({reason}): {text:?}")]
    Parse {
        /// The command line.
        command: String,
        /// What was expected or what is wrong.
        reason: String,
        /// The offending text (a line, or an excerpt around a JSON error), truncated.
        text: String,
    },
}

fn status_text(status: Option<i32>) -> String {
    status.map_or_else(|| "none (killed by a signal)".to_owned(), |s| s.to_string())
}

impl SlurmError {
    /// The class of a failure Slurm reported; `None` for the other variants.
    pub fn kind(&self) -> Option<FailureKind> {
        match self {
            SlurmError::Failed { kind, .. } => Some(*kind),
            _ => None,
        }
    }

    /// True when the cluster should be treated as unavailable for now: the controller is
    /// unreachable, a command timed out, or a query reported errors instead of data.
    pub fn is_unavailable(&self) -> bool {
        match self {
            SlurmError::Timeout { .. } => true,
            SlurmError::Failed { kind, .. } => *kind == FailureKind::ControllerUnreachable,
            _ => false,
        }
    }

    pub(crate) fn parse(command: &str, reason: impl Into<String>, text: &str) -> Self {
        SlurmError::Parse {
            command: command.to_owned(),
            reason: reason.into(),
            text: excerpt(text),
        }
    }

    pub(crate) fn invalid(reason: impl Into<String>) -> Self {
        SlurmError::InvalidRequest {
            reason: reason.into(),
        }
    }
}

/// The class of a failure, recognised from Slurm 22.05's messages. [`FailureKind::Other`] when
/// none matches; the message is always kept in [`SlurmError::Failed`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureKind {
    /// `Unable to contact slurm controller (connect failure)`, socket timeouts, and the bare
    /// `Unspecified error` that `squeue --json`/`sinfo --json` report when the controller is down.
    ControllerUnreachable,
    /// `Invalid partition name specified`.
    InvalidPartition,
    /// `Requested reservation is invalid` (no such reservation, or not usable by this user).
    InvalidReservation,
    /// `Requested reservation is in use`: a job (running or pending) is bound to it.
    ReservationInUse,
    /// `Requested nodes are busy`: Slurm cannot find free resources for the reservation.
    ReservationBusy,
    /// `Duplicate reservation name`.
    DuplicateReservation,
    /// `Reservation already started`: any `StartTime=` for a reservation that has begun,
    /// even its own start.
    ReservationStarted,
    /// `Invalid user id`: an unknown user in `Users=`, or a user that may not create reservations
    /// (only root and SlurmUser may, without slurmdbd operators).
    InvalidUser,
    /// `Invalid time specification` / `Invalid time specified` / `Invalid start time`.
    InvalidTime,
    /// `Invalid job id specified`.
    InvalidJobId,
    /// `Job is pending execution`: suspend of a pending job.
    JobPending,
    /// `Job/step already completing or completed`, `Job is no longer pending execution`, ...
    JobStateConflict,
    /// `Access/permission denied`: another user's job.
    AccessDenied,
    /// `Requested node configuration is not available`: the request can never fit.
    UnsatisfiableRequest,
    /// None of the above.
    Other,
}

impl FailureKind {
    /// Recognises the class of a failure from what Slurm printed.
    pub fn classify(message: &str) -> FailureKind {
        let m = message.to_ascii_lowercase();
        let has = |s: &str| m.contains(s);
        if has("unable to contact slurm controller")
            || has("connect failure")
            || has("socket timed out")
            || has("connection refused")
            || has("unspecified error")
        {
            FailureKind::ControllerUnreachable
        } else if has("invalid partition") {
            FailureKind::InvalidPartition
        } else if has("reservation is in use") {
            FailureKind::ReservationInUse
        } else if has("reservation is invalid") || has("invalid reservation") {
            FailureKind::InvalidReservation
        } else if has("requested nodes are busy") {
            FailureKind::ReservationBusy
        } else if has("duplicate reservation name") {
            FailureKind::DuplicateReservation
        } else if has("reservation already started") {
            FailureKind::ReservationStarted
        } else if has("invalid user id") {
            FailureKind::InvalidUser
        } else if has("invalid time") || has("invalid start time") || has("invalid end time") {
            FailureKind::InvalidTime
        } else if has("invalid job id") {
            FailureKind::InvalidJobId
        } else if has("job is pending execution") {
            FailureKind::JobPending
        } else if has("already completing or completed")
            || has("no longer pending")
            || has("job is not suspended")
            || has("job not suspended")
            || has("already suspended")
        {
            FailureKind::JobStateConflict
        } else if has("access/permission denied") || has("access denied") {
            FailureKind::AccessDenied
        } else if has("requested node configuration is not available") {
            FailureKind::UnsatisfiableRequest
        } else {
            FailureKind::Other
        }
    }

    /// True for the refusals of `scontrol create reservation` that mean "not there, not now":
    /// the two-phase reservation is released and the job re-planned, with the reason kept.
    pub fn is_reservation_refused(self) -> bool {
        matches!(
            self,
            FailureKind::ReservationBusy
                | FailureKind::DuplicateReservation
                | FailureKind::InvalidUser
                | FailureKind::InvalidTime
                | FailureKind::InvalidPartition
                | FailureKind::UnsatisfiableRequest
        )
    }
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self {
            FailureKind::ControllerUnreachable => "controller unreachable",
            FailureKind::InvalidPartition => "invalid partition",
            FailureKind::InvalidReservation => "invalid reservation",
            FailureKind::ReservationInUse => "reservation in use",
            FailureKind::ReservationBusy => "nodes busy",
            FailureKind::DuplicateReservation => "duplicate reservation",
            FailureKind::ReservationStarted => "reservation already started",
            FailureKind::InvalidUser => "invalid user",
            FailureKind::InvalidTime => "invalid time",
            FailureKind::InvalidJobId => "invalid job id",
            FailureKind::JobPending => "job pending",
            FailureKind::JobStateConflict => "job state conflict",
            FailureKind::AccessDenied => "access denied",
            FailureKind::UnsatisfiableRequest => "request cannot be satisfied",
            FailureKind::Other => "other",
        };
        f.write_str(s)
    }
}

/// At most [`EXCERPT_CHARS`] characters of `text`, marked when cut.
pub(crate) fn excerpt(text: &str) -> String {
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(EXCERPT_CHARS).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}
