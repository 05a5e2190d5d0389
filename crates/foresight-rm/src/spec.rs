//! What the daemon asks the executor to run ([`LaunchSpec`]) and what it gets back ([`Outcome`],
//! [`Finished`], [`Adoption`]). These are plain data: the supervisor and the executor exchange
//! them through files in the attempt's directory, so they must survive a daemon restart and
//! (through the versioned file envelopes in `layout`) an upgrade of the binary.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// One attempt of one job, as the supervisor needs it to start and police the job process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchSpec {
    /// The Foresight job id, exported as `FORESIGHT_JOB_ID`.
    pub job: u64,
    /// 0 for the first run, +1 per requeue. Each attempt has its own directory, so a requeued job
    /// never reads the status of its previous run; exported as `FORESIGHT_ATTEMPT`.
    pub attempt: u32,
    /// The cluster the job was placed on, exported as `FORESIGHT_CLUSTER`.
    pub cluster: String,
    /// Assigned virtual processor ids. Their count is `FORESIGHT_PROCS`, the ids themselves
    /// (comma-separated, in this order) are `FORESIGHT_PROCESSORS`: a job may use them to pin
    /// threads, the executor does not pin anything itself.
    pub processors: Vec<u32>,
    /// Program and arguments; must not be empty. The program is looked up in `PATH`.
    pub command: Vec<String>,
    /// What the submitter exported; the job's whole environment is this on top of a default
    /// `PATH` and its account's `HOME`, `USER`, `LOGNAME` and `SHELL`, never the service's
    /// (see [`crate::job_environment`]). The `FORESIGHT_*` variables win over these.
    pub env: Vec<(String, String)>,
    /// Working directory of the job; must be absolute, because the supervisor runs elsewhere.
    pub cwd: PathBuf,
    /// Standard output file; a relative path is taken relative to `cwd` (as Slurm does). The
    /// first attempt truncates it, later attempts append, so a requeued job keeps its history.
    pub stdout: PathBuf,
    /// Standard error file, same rules as `stdout`; may be the same path as `stdout`.
    pub stderr: PathBuf,
    /// Running time allowed, in seconds; time spent suspended does not count (as in Slurm).
    /// 0 means no limit.
    pub walltime_secs: u64,
    /// Seconds between the SIGTERM that ends a job (walltime or cancel) and the SIGKILL.
    pub grace_secs: u64,
    /// The Unix account the job runs as when the supervisor is root (it then refuses to start
    /// the job if the account does not exist); ignored otherwise. `None`: the supervisor's
    /// own account. Absent in specs written before accounts existed.
    #[serde(default)]
    pub unix_user: Option<String>,
    /// At most this many bytes per output file (counting earlier attempts'); the job's
    /// output beyond is dropped and the file ends with a line saying so. `None`: no cap.
    #[serde(default)]
    pub max_output_bytes: Option<u64>,
    /// `stdout` and `stderr` are absolute paths in the service's own output directory (root's,
    /// 0700, where no user can place a link): the supervisor opens them as root, without
    /// following a link, and gives them to the account. Otherwise they are the user's paths,
    /// opened with the account's file access only, so that they reach nothing the user could
    /// not write.
    #[serde(default)]
    pub service_output: bool,
}

/// How an attempt ended, as recorded by its supervisor in `status.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// Some when the job process exited normally.
    pub exit_code: Option<i32>,
    /// Some when the job process was killed by a signal.
    pub signal: Option<i32>,
    /// The supervisor ended the job because its walltime ran out.
    pub timed_out: bool,
    /// A cancel was requested before the job ended (whatever it then died of).
    pub cancelled: bool,
    /// Unix seconds when the job process was spawned.
    pub started_at: i64,
    /// Unix seconds when the end was recorded.
    pub ended_at: i64,
    /// Set when the job could not be started at all (e.g. `no such program: foo`, a bad working
    /// directory) or its supervisor died without recording an outcome.
    pub error: Option<String>,
}

impl Outcome {
    /// True when the job ran and exited with status 0, without timeout, cancel or error.
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out && !self.cancelled && self.error.is_none()
    }

    /// An outcome for an attempt that never ran or whose supervisor vanished.
    pub fn failed(started_at: i64, ended_at: i64, error: String) -> Outcome {
        Outcome {
            exit_code: None,
            signal: None,
            timed_out: false,
            cancelled: false,
            started_at,
            ended_at,
            error: Some(error),
        }
    }
}

/// The event the executor sends on its channel when an attempt it watches has ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finished {
    /// The job id.
    pub job: u64,
    /// The attempt that ended.
    pub attempt: u32,
    /// How it ended.
    pub outcome: Outcome,
}

/// What a restarted daemon finds for an attempt it believed to be running.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Adoption {
    /// Its supervisor is alive: the executor now watches it and will send a [`Finished`] event.
    Running,
    /// It ended while nobody was watching; this is its recorded outcome (no event is sent).
    Finished(Outcome),
    /// No outcome and no live supervisor (unknown attempt, machine reboot, supervisor killed):
    /// the daemon decides whether to requeue.
    Lost,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample_spec() -> LaunchSpec {
        LaunchSpec {
            job: 42,
            attempt: 3,
            cluster: "alpha".into(),
            processors: vec![0, 5, 7],
            command: vec!["sh".into(), "-c".into(), "echo 'hi there'".into()],
            env: vec![("A".into(), "1".into()), ("B".into(), "x=y".into())],
            cwd: "/tmp".into(),
            stdout: "out.txt".into(),
            stderr: "/var/tmp/err.txt".into(),
            walltime_secs: 3600,
            grace_secs: 10,
            unix_user: Some("alice".into()),
            max_output_bytes: Some(1 << 20),
            service_output: false,
        }
    }

    #[test]
    fn launch_spec_round_trips_through_json() {
        let spec = sample_spec();
        let json = serde_json::to_string(&spec).expect("serialise");
        let back: LaunchSpec = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, spec);
    }

    #[test]
    fn outcome_round_trips_through_json() {
        let cases = [
            (
                "exit",
                Outcome {
                    exit_code: Some(7),
                    signal: None,
                    timed_out: false,
                    cancelled: false,
                    started_at: 1_700_000_000,
                    ended_at: 1_700_000_005,
                    error: None,
                },
            ),
            (
                "signal",
                Outcome {
                    exit_code: None,
                    signal: Some(15),
                    timed_out: true,
                    cancelled: true,
                    started_at: 1,
                    ended_at: 2,
                    error: None,
                },
            ),
            (
                "error",
                Outcome::failed(3, 3, "no such program: foo".into()),
            ),
        ];
        for (name, outcome) in cases {
            let json = serde_json::to_string(&outcome).expect("serialise");
            let back: Outcome = serde_json::from_str(&json).expect("parse");
            assert_eq!(back, outcome, "case {name}");
        }
    }

    #[test]
    fn only_a_clean_zero_exit_succeeds() {
        let ok = Outcome {
            exit_code: Some(0),
            signal: None,
            timed_out: false,
            cancelled: false,
            started_at: 0,
            ended_at: 0,
            error: None,
        };
        assert!(ok.succeeded());
        assert!(!Outcome {
            exit_code: Some(1),
            ..ok.clone()
        }
        .succeeded());
        assert!(!Outcome {
            cancelled: true,
            ..ok.clone()
        }
        .succeeded());
        assert!(!Outcome::failed(0, 0, "x".into()).succeeded());
    }
}
