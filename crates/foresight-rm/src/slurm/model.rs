//! The typed view of a Slurm cluster the adapter works with: nodes, partitions, jobs,
//! reservations, and the answers of `sbatch`. Times are Unix seconds (UTC); processor counts are
//! Slurm CPUs.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A Slurm job id. Ids restart at 1 in every cluster (and after a controller loses its state),
/// so a `SlurmJobId` means something only together with its cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SlurmJobId(pub u32);

impl fmt::Display for SlurmJobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The base state of a node (`sinfo --json` `state`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NodeState {
    /// No job on it.
    Idle,
    /// Some of its CPUs are allocated.
    Mixed,
    /// All of its CPUs are allocated.
    Allocated,
    /// Down (not responding, or set down).
    Down,
    /// In an error state.
    Error,
    /// Configured for the future; not in service.
    Future,
    /// Not yet known (slurmd has not registered).
    Unknown,
    /// Any other word Slurm used, as printed.
    Other(String),
}

impl NodeState {
    pub(crate) fn from_slurm(s: &str) -> NodeState {
        match s.to_ascii_lowercase().as_str() {
            "idle" => NodeState::Idle,
            "mixed" => NodeState::Mixed,
            "allocated" | "alloc" => NodeState::Allocated,
            "down" => NodeState::Down,
            "error" => NodeState::Error,
            "future" => NodeState::Future,
            "unknown" => NodeState::Unknown,
            _ => NodeState::Other(s.to_owned()),
        }
    }
}

/// One node, from `sinfo --json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// Its name (`c1-n1`).
    pub name: String,
    /// Its base state.
    pub state: NodeState,
    /// State flags, upper case as Slurm prints them: `DRAIN`, `RESERVED`, `NOT_RESPONDING`,
    /// `COMPLETING`, `MAINTENANCE`, `POWERED_DOWN`, ...
    pub flags: Vec<String>,
    /// Configured CPUs.
    pub cpus: u32,
    /// CPUs allocated to jobs now.
    pub alloc_cpus: u32,
    /// CPUs free now.
    pub idle_cpus: u32,
    /// Partitions it belongs to.
    pub partitions: Vec<String>,
    /// Why it is drained or down, as the administrator or Slurm set it.
    pub reason: Option<String>,
    /// Configured memory, MB.
    pub real_memory_mb: u64,
    /// Memory allocated to jobs, MB.
    pub alloc_memory_mb: u64,
}

impl Node {
    /// True when Slurm may start new jobs on it: up (idle, mixed or allocated) and neither
    /// draining nor failing nor in maintenance nor powered down.
    pub fn accepts_jobs(&self) -> bool {
        const BLOCKING: [&str; 8] = [
            "DRAIN",
            "FAIL",
            "NOT_RESPONDING",
            "MAINTENANCE",
            "POWERED_DOWN",
            "POWERING_DOWN",
            "POWER_DOWN",
            "REBOOT_REQUESTED",
        ];
        matches!(
            self.state,
            NodeState::Idle | NodeState::Mixed | NodeState::Allocated
        ) && !self.flags.iter().any(|f| BLOCKING.contains(&f.as_str()))
    }
}

/// A time limit: minutes, or none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TimeLimit {
    /// This many minutes.
    Minutes(u32),
    /// `UNLIMITED` / `INFINITE`.
    Unlimited,
}

impl TimeLimit {
    /// Seconds, `None` when unlimited.
    pub fn as_secs(self) -> Option<i64> {
        match self {
            TimeLimit::Minutes(m) => Some(i64::from(m) * 60),
            TimeLimit::Unlimited => None,
        }
    }
}

/// One partition, from `scontrol show partition -o`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partition {
    /// Its name.
    pub name: String,
    /// Its nodes as a Slurm host list (`c1-n[1-4]`); `None` when it has none.
    pub nodes: Option<String>,
    /// CPUs in it.
    pub total_cpus: u32,
    /// Nodes in it.
    pub total_nodes: u32,
    /// `UP`, `DOWN`, `DRAIN` or `INACTIVE`.
    pub state: String,
    /// The default partition (`Default=YES`).
    pub default: bool,
    /// Time limit of jobs that give none; `None` when the partition sets none.
    pub default_time: Option<TimeLimit>,
    /// Longest time limit allowed.
    pub max_time: TimeLimit,
}

/// A job's state (`squeue --json` `job_state`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum JobState {
    /// Waiting for resources, priority, its begin time, a reservation, a hold, ...
    Pending,
    /// Running.
    Running,
    /// Suspended (`scontrol suspend`).
    Suspended,
    /// Ending: its processes are being cleaned up.
    Completing,
    /// Nodes are being prepared (booted) for it.
    Configuring,
    /// Requeued, about to be pending again.
    Requeued,
    /// Ended with exit code 0.
    Completed,
    /// Cancelled (`scancel`).
    Cancelled,
    /// Ended with a non-zero exit code or could not start.
    Failed,
    /// Killed at its time limit.
    Timeout,
    /// Killed because a node failed.
    NodeFail,
    /// Preempted.
    Preempted,
    /// Its nodes failed to boot.
    BootFail,
    /// Passed its deadline.
    Deadline,
    /// Killed for exceeding its memory.
    OutOfMemory,
    /// Any other word Slurm used, as printed.
    Other(String),
}

impl JobState {
    pub(crate) fn from_slurm(s: &str) -> JobState {
        match s.to_ascii_uppercase().as_str() {
            "PENDING" => JobState::Pending,
            "RUNNING" => JobState::Running,
            "SUSPENDED" => JobState::Suspended,
            "COMPLETING" => JobState::Completing,
            "CONFIGURING" => JobState::Configuring,
            "REQUEUED" | "REQUEUE_FED" | "REQUEUE_HOLD" => JobState::Requeued,
            "COMPLETED" => JobState::Completed,
            "CANCELLED" => JobState::Cancelled,
            "FAILED" => JobState::Failed,
            "TIMEOUT" => JobState::Timeout,
            "NODE_FAIL" => JobState::NodeFail,
            "PREEMPTED" => JobState::Preempted,
            "BOOT_FAIL" => JobState::BootFail,
            "DEADLINE" => JobState::Deadline,
            "OUT_OF_MEMORY" => JobState::OutOfMemory,
            _ => JobState::Other(s.to_owned()),
        }
    }

    /// True while the job holds or waits for resources (not ended).
    pub fn is_active(&self) -> bool {
        matches!(
            self,
            JobState::Pending
                | JobState::Running
                | JobState::Suspended
                | JobState::Completing
                | JobState::Configuring
                | JobState::Requeued
        )
    }

    /// True while the job holds CPUs: running, suspended (Slurm keeps a suspended job's CPUs
    /// unless it is gang-scheduled), completing, configuring.
    pub fn holds_cpus(&self) -> bool {
        matches!(
            self,
            JobState::Running | JobState::Suspended | JobState::Completing | JobState::Configuring
        )
    }
}

/// One job, from `squeue --json` (which lists every job the controller knows, finished ones
/// too until `MinJobAge` passes, and ignores `-j`/`-u` filters in 22.05).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// Its id in its cluster.
    pub id: SlurmJobId,
    /// Its name (`-J`).
    pub name: String,
    /// The user it runs as.
    pub user: String,
    /// Its account; `None` when empty (no accounting).
    pub account: Option<String>,
    /// Its partition.
    pub partition: String,
    /// Its state.
    pub state: JobState,
    /// Why it is pending or how it ended (`Priority`, `Resources`, `BeginTime`,
    /// `Reservation`, `JobHeldUser`, `NonZeroExitCode`, ...); `None` when Slurm says `None`.
    pub reason: Option<String>,
    /// CPUs it has (running) or asks for (pending).
    pub cpus: u32,
    /// Nodes it has or asks for.
    pub node_count: u32,
    /// Its nodes as a host list, once allocated.
    pub nodes: Option<String>,
    /// Its time limit.
    pub time_limit: TimeLimit,
    /// When it was submitted.
    pub submit_time: i64,
    /// When it became (or becomes) eligible: its `--begin`, or the submission.
    pub eligible_time: Option<i64>,
    /// Running or ended: when it started. Pending: **Slurm's own expected start**, computed by
    /// the backfill scheduler (what `squeue --start` prints); `None` when Slurm has none (held,
    /// not yet considered).
    pub start_time: Option<i64>,
    /// Running: start + time limit; ended: when it ended; pending: the expected end.
    pub end_time: Option<i64>,
    /// Its priority (0 when held or suspended).
    pub priority: u64,
    /// The reservation it is bound to.
    pub reservation: Option<String>,
    /// Ended: its exit code (raw wait status >> 8).
    pub exit_code: i32,
    /// Ended: the signal that killed it, if one did.
    pub exit_signal: Option<i32>,
    /// How often it was requeued.
    pub restarts: u32,
    /// Its cluster's name as Slurm reports it (lower case).
    pub cluster: String,
}

/// One advance reservation, from `scontrol show reservation -o`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    /// Its name.
    pub name: String,
    /// Start, Unix seconds.
    pub start: i64,
    /// End, Unix seconds.
    pub end: i64,
    /// Its nodes as a host list; `None` when it has none.
    pub nodes: Option<String>,
    /// How many nodes.
    pub node_count: u32,
    /// How many cores (CPUs here: one thread per core).
    pub core_count: u32,
    /// Its partition, if it names one.
    pub partition: Option<String>,
    /// Its flags (`IGNORE_JOBS`, `MAINT`, `PURGE_COMP`, ...), upper case.
    pub flags: Vec<String>,
    /// The users allowed in it (a leading `-` denies).
    pub users: Vec<String>,
    /// The accounts allowed in it.
    pub accounts: Vec<String>,
    /// `ACTIVE` or `INACTIVE`.
    pub state: String,
    /// For a core reservation, the cores of each node: `(node, core ids)` (`("c1-n1", "0-1")`).
    pub cores: Vec<(String, String)>,
}

impl Reservation {
    /// True when it is in effect now (Slurm's own view, not the clock's).
    pub fn is_active(&self) -> bool {
        self.state.eq_ignore_ascii_case("ACTIVE")
    }
}

/// The answer of `sbatch --parsable`: `ID` or `ID;CLUSTER`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submitted {
    /// The new job's id.
    pub job_id: SlurmJobId,
    /// The cluster it went to, when Slurm says (`sbatch -M`).
    pub cluster: Option<String>,
}

/// The answer of `sbatch --test-only`: `Job N to start at T using C processors on nodes L in
/// partition P`. Slurm uses up a job id for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestOnly {
    /// The id the job would have had (not a job).
    pub job_id: SlurmJobId,
    /// When Slurm would start it, Unix seconds.
    pub start: i64,
    /// Processors it would get.
    pub processors: u32,
    /// The nodes it would get, as a host list.
    pub nodes: String,
    /// The partition, when printed.
    pub partition: Option<String>,
}

/// Everything the forecast needs from one cluster, taken with a fixed number of commands
/// (four, whatever the number of jobs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// When the snapshot was taken (our clock, Unix seconds, before the first query).
    pub taken_at: i64,
    /// The Slurm release that answered (`22.05.8`), from the JSON metadata.
    pub slurm_release: Option<String>,
    /// The nodes.
    pub nodes: Vec<Node>,
    /// The partitions.
    pub partitions: Vec<Partition>,
    /// All jobs the controller knows, finished ones included (filter with
    /// [`JobState::is_active`]).
    pub jobs: Vec<Job>,
    /// All reservations.
    pub reservations: Vec<Reservation>,
}
