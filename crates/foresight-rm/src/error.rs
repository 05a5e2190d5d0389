//! [`ExecError`]: everything the local executor can fail at. Every variant that concerns one
//! attempt names the job and attempt, and the path, program or process at fault, because the
//! daemon logs these messages as they are and an operator must be able to act on them.

use std::io;
use std::path::PathBuf;

/// A failure of the local executor (not of the job: a job that fails has an [`crate::Outcome`]).
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The executor's root directory cannot be created or resolved.
    #[error("executor root {path}: {source}")]
    Root {
        /// The root directory.
        path: PathBuf,
        /// What the file system said.
        #[source]
        source: io::Error,
    },
    /// The supervisor command prefix is empty.
    #[error(
        "the supervisor command is empty: give at least the program (e.g. [foresight, supervise])"
    )]
    NoSupervisor,
    /// The confinement asked for cannot be had on this host.
    #[error("confinement = \"{wanted}\": {reason}")]
    Confinement {
        /// The setting.
        wanted: crate::cgroup::Confinement,
        /// Why it cannot be had.
        reason: String,
    },
    /// `LocalExecutor::new` was called outside a tokio runtime, which its watchers need.
    #[error("the local executor must be created inside a tokio runtime")]
    NoRuntime,
    /// The launch spec cannot be run as given.
    #[error("job {job} attempt {attempt}: invalid launch spec: {reason}")]
    InvalidSpec {
        /// The job id.
        job: u64,
        /// The attempt.
        attempt: u32,
        /// What is wrong.
        reason: String,
    },
    /// This attempt was launched before: attempts are never reused (requeue = attempt + 1).
    #[error("job {job} attempt {attempt}: already launched ({dir} exists)")]
    AlreadyLaunched {
        /// The job id.
        job: u64,
        /// The attempt.
        attempt: u32,
        /// The attempt's directory.
        dir: PathBuf,
    },
    /// The executor does not know this attempt (it has no directory).
    #[error("job {job} attempt {attempt}: unknown to the executor (no {dir})")]
    NotFound {
        /// The job id.
        job: u64,
        /// The attempt.
        attempt: u32,
        /// The directory that would hold it.
        dir: PathBuf,
    },
    /// Reading or writing one of the attempt's files failed.
    #[error("job {job} attempt {attempt}: {path}: {source}")]
    Io {
        /// The job id.
        job: u64,
        /// The attempt.
        attempt: u32,
        /// The file.
        path: PathBuf,
        /// What the file system said.
        #[source]
        source: io::Error,
    },
    /// One of the attempt's files does not parse.
    #[error("job {job} attempt {attempt}: {path} is not valid: {source}")]
    Corrupt {
        /// The job id.
        job: u64,
        /// The attempt.
        attempt: u32,
        /// The file.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// A file was written by a build with another format version.
    #[error("job {job} attempt {attempt}: {path} has format version {found}, this build reads {supported}")]
    Version {
        /// The job id.
        job: u64,
        /// The attempt.
        attempt: u32,
        /// The file.
        path: PathBuf,
        /// The version in the file.
        found: u32,
        /// The version this build reads and writes.
        supported: u32,
    },
    /// The supervisor process could not be spawned.
    #[error("job {job} attempt {attempt}: cannot start the supervisor {program}: {source}")]
    SupervisorSpawn {
        /// The job id.
        job: u64,
        /// The attempt.
        attempt: u32,
        /// The supervisor program.
        program: String,
        /// What the OS said.
        #[source]
        source: io::Error,
    },
    /// The supervisor started but died, hung or talked nonsense before starting the job.
    #[error("job {job} attempt {attempt}: the supervisor {program} failed before starting the job ({detail}); see {log}")]
    SupervisorFailed {
        /// The job id.
        job: u64,
        /// The attempt.
        attempt: u32,
        /// The supervisor program.
        program: String,
        /// What went wrong.
        detail: String,
        /// The supervisor's stderr, which may say more.
        log: PathBuf,
    },
    /// The supervisor could not start the job's command (missing program, bad working
    /// directory, unwritable output file). The same message is in the attempt's recorded
    /// outcome, so `outcome()` and `adopt()` report it too.
    #[error("job {job} attempt {attempt} did not start: {error}")]
    Start {
        /// The job id.
        job: u64,
        /// The attempt.
        attempt: u32,
        /// The job's program.
        program: String,
        /// Why it did not start, e.g. `no such program: foo`.
        error: String,
    },
    /// Suspend or resume of an attempt that has already ended.
    #[error("job {job} attempt {attempt} has already finished")]
    Finished {
        /// The job id.
        job: u64,
        /// The attempt.
        attempt: u32,
    },
    /// The attempt has no recorded outcome and its supervisor is gone.
    #[error(
        "job {job} attempt {attempt} is lost: its supervisor is gone and {dir} holds no outcome"
    )]
    Lost {
        /// The job id.
        job: u64,
        /// The attempt.
        attempt: u32,
        /// The attempt's directory.
        dir: PathBuf,
    },
    /// Sending a signal failed for another reason than the target being gone.
    #[error("job {job} attempt {attempt}: cannot send {signal} to {target}: {source}")]
    Signal {
        /// The job id.
        job: u64,
        /// The attempt.
        attempt: u32,
        /// The signal.
        signal: nix::sys::signal::Signal,
        /// "supervisor 123" or "process group 456".
        target: String,
        /// What the kernel said.
        #[source]
        source: nix::errno::Errno,
    },
}
