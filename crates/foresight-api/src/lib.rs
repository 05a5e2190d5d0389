//! The REST API's data (`/api/v1`): what the daemon sends and the CLI reads. Times are
//! seconds since the Unix epoch; absent times are `null`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod array;
mod dependency;
mod duration;
mod job_ref;
mod sites;
pub mod text;
pub mod usage;
mod workflow;

pub use array::ArraySpec;
pub use dependency::{combine, Dependency, DependencyKind, DependencyVerdict};
pub use duration::{format_duration, parse_duration};
pub use job_ref::JobRef;
pub use sites::{AuctionStage, AuctionView, SiteState, SiteView};
pub use workflow::{
    derive_state, edge_file_problem, parse_workflow, EdgeSpec, FailurePolicy, MapperName,
    SubmittedWorkflow, WorkflowSpec, WorkflowState, WorkflowTaskSpec, WorkflowTaskView,
    WorkflowView,
};

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// The API version this crate describes.
pub const API_PREFIX: &str = "/api/v1";

/// Where a job stands. `pending`: waiting to be planned (or held); `planned`: the planner
/// has a start for it beyond the lead time; `reserved`: its processors are reserved;
/// `running`; then one of the final states.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Waiting for the planner (or held).
    #[default]
    Pending,
    /// Planned to start later than the lead time.
    Planned,
    /// Processors reserved; starts at the reserved start.
    Reserved,
    /// Running.
    Running,
    /// Exited with code 0.
    Completed,
    /// Exited non-zero, was killed by a signal, or could not start.
    Failed,
    /// Cancelled by its owner or an administrator.
    Cancelled,
    /// Killed at its walltime.
    Timeout,
}

impl JobState {
    /// Final states never change again.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobState::Completed | JobState::Failed | JobState::Cancelled | JobState::Timeout
        )
    }

    /// The name used on the wire and in tables.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::Planned => "planned",
            JobState::Reserved => "reserved",
            JobState::Running => "running",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
            JobState::Timeout => "timeout",
        }
    }
}

impl std::str::FromStr for JobState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "pending" => JobState::Pending,
            "planned" => JobState::Planned,
            "reserved" => JobState::Reserved,
            "running" => JobState::Running,
            "completed" => JobState::Completed,
            "failed" => JobState::Failed,
            "cancelled" => JobState::Cancelled,
            "timeout" => JobState::Timeout,
            other => return Err(format!("unknown job state {other:?}")),
        })
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A walltime or duration: a JSON number is **seconds**; a string is read as `sbatch --time`
/// reads it, so `"90"` is 90 minutes (also `"10:30"`, `"01:30:00"`, `"2-12"`, `"1-12:00:00"`,
/// `"90s"`, `"1h30m"`, `"2d"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum Walltime {
    /// Whole seconds.
    Seconds(i64),
    /// Text in `sbatch --time` forms (a bare number is minutes) or with units.
    Text(String),
}

impl Walltime {
    /// Seconds, or why the text is not a walltime.
    pub fn seconds(&self) -> Result<i64, String> {
        match self {
            Walltime::Seconds(s) => Ok(*s),
            Walltime::Text(t) => parse_duration(t),
        }
    }
}

fn one() -> u32 {
    1
}

fn yes() -> bool {
    true
}

/// A job to run. Without `cluster` it is a global job, planned over the whole grid; with
/// `cluster` it is a local job of that cluster, queued by the cluster's own policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitJob {
    /// A name for people.
    #[serde(default)]
    pub name: Option<String>,
    /// Processors at once.
    #[serde(default = "one")]
    pub procs: u32,
    /// The run-time limit, on reference processors.
    pub walltime: Walltime,
    /// The most paid per processor-second; unlimited when absent.
    #[serde(default)]
    pub price: Option<f64>,
    /// Run as a local job of this cluster instead of planning it over the grid.
    #[serde(default)]
    pub cluster: Option<String>,
    /// Run inside this advance reservation.
    #[serde(default)]
    pub reservation: Option<u64>,
    /// May a job bound to a reservation start earlier, outside it, if processors are free?
    #[serde(default)]
    pub allow_early_start: bool,
    /// May the planner split it over several clusters at one synchronous start?
    #[serde(default = "yes")]
    pub co_allocate: bool,
    /// Program and arguments.
    pub command: Vec<String>,
    /// Extra environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory (absolute); the job's own directory when absent.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Hold the job: it is not planned until released.
    #[serde(default)]
    pub hold: bool,
    /// Credentials that reservation ACLs read: group, account, class (queue), QoS. Each must
    /// be one an administrator gave the user (refused with 403 naming the field otherwise);
    /// when absent, the user's first one of its kind.
    #[serde(default)]
    pub group: Option<String>,
    /// The account charged (one of the user's).
    #[serde(default)]
    pub account: Option<String>,
    /// The class (queue; one of the user's).
    #[serde(default)]
    pub class: Option<String>,
    /// The quality of service (one of the user's).
    #[serde(default)]
    pub qos: Option<String>,
    /// Wait for other jobs, as `sbatch --dependency`: `afterok:ID[:ID...]`, `afterany:ID`,
    /// `afternotok:ID`, `after:ID`, `singleton`, joined by `,` (all) or `?` (any). Only jobs
    /// the user can see may be named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependency: Option<String>,
    /// Submit an array of tasks, as `sbatch --array`: `0-99%10`, `1,3,5-7`, `0-15:4`. Each
    /// task is a job of its own with `FORESIGHT_ARRAY_TASK_ID` set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array: Option<String>,
    /// Absolute priority level of a global job (0, the lowest, by default): it is planned
    /// before jobs of lower levels and, when it cannot start otherwise, takes at once the
    /// processors of running global jobs of lower levels, which are suspended (or requeued)
    /// and resume when processors free up. Local jobs are never preempted.
    #[serde(default)]
    pub priority: u32,
    /// When preempted, kill the job and queue it again (it checkpoints, or starts over)
    /// instead of suspending it.
    #[serde(default)]
    pub requeue: bool,
    /// Not eligible to start before this instant (seconds since the epoch), as `sbatch
    /// --begin`: it is planned (or queued by its cluster) no earlier. From 0 to year 9999;
    /// an instant already past changes nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub begin: Option<i64>,
    /// Features the cluster must offer (installed software, architecture), as configured in
    /// its `features`: the job is offered only the clusters that have them all, and refused
    /// when none has.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
    /// Licences held for the whole run, by pool (`{"ansys": 2}`): a local job starts only
    /// when its cluster's pools have them free. Refused when a pool is smaller.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub licences: BTreeMap<String, u32>,
    /// The application it runs, for runtime prediction: runs of the same application with
    /// the same processors and arguments predict each other (`predict = "app"`). Unset:
    /// the program (the command's first word).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    /// Input files, measured at submission (a missing or unreadable one is refused) and
    /// copied into the job's working directory on every cluster it runs on other than
    /// the one holding them, before it starts. The planner delays a cluster's slots by the
    /// time its link takes to bring them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputSpec>,
    /// Output files, as HTCondor's `transfer_output_files`: after the job completes (exit
    /// 0; nothing is copied after a failure, a timeout or a cancel), each is copied from
    /// its working directory on the cluster it ran on to the same relative path under its
    /// working directory on the output's cluster, as the job's Unix account.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<OutputSpec>,
}

/// One output file of a job and where it goes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OutputSpec {
    /// Path relative to the job's working directory (no `..`, not absolute), where the
    /// job writes it and where the copy lands.
    pub path: String,
    /// The cluster it is copied to; absent: where the job was submitted (a local job's
    /// cluster; for a global job its input's cluster, else the service's own host, that
    /// is, the working directory it names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
}

/// One input file of a job and where it lives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InputSpec {
    /// Absolute path of the file, as seen on its cluster.
    pub path: String,
    /// The cluster holding it; absent: where the job is submitted (a local job's cluster,
    /// a dispatcher's site, or the service's own host for a global job of the central
    /// service).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
}

/// An input file as accepted: where it lives and its size.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct InputView {
    /// Absolute path on its cluster.
    pub path: String,
    /// The cluster holding it (absent: where the job was submitted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Its size at submission, bytes.
    pub bytes: u64,
}

/// The copy of a job's inputs to one cluster it runs on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StagingView {
    /// The cluster the inputs were copied to.
    pub cluster: String,
    /// When the copy began, seconds since the epoch.
    pub began_at: i64,
    /// When it ended (done or failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
    /// Why it failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Many jobs in one request: accepted all together or not at all.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitBatch {
    /// The jobs.
    pub jobs: Vec<SubmitJob>,
}

/// The id of an accepted job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Submitted {
    /// The job's id.
    pub id: u64,
}

/// The ids of an accepted batch, in request order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SubmittedBatch {
    /// The jobs' ids.
    pub ids: Vec<u64>,
}

/// Processors of one cluster given to a job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PartView {
    /// The cluster.
    pub cluster: String,
    /// How many processors.
    pub procs: u32,
    /// Which (once started).
    #[serde(default)]
    pub processors: Vec<u32>,
    /// When this part started, so that `job history` can time each part of a co-allocated
    /// job as sacct times a job's steps; null before it starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<i64>,
    /// When this part ended (parts of one job may end apart); null while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
}

/// A job as users see it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct JobView {
    /// Id.
    pub id: u64,
    /// Name.
    pub name: Option<String>,
    /// Owner.
    pub user: String,
    /// The account it is charged to, if it names one.
    #[serde(default)]
    pub account: Option<String>,
    /// State.
    pub state: JobState,
    /// Held: not planned until released.
    pub held: bool,
    /// Stopped by `suspend`, or by a job of a higher priority level.
    pub suspended: bool,
    /// Absolute priority level (global jobs).
    #[serde(default)]
    pub priority: u32,
    /// Exit code, once exited normally.
    pub exit_code: Option<i32>,
    /// Signal that ended it, if any.
    pub signal: Option<i32>,
    /// Processors.
    pub procs: u32,
    /// Walltime in seconds.
    pub walltime: i64,
    /// Max price per processor-second, if any.
    pub price: Option<f64>,
    /// The cluster it runs on (the first, when co-allocated), or asked for.
    pub cluster: Option<String>,
    /// Processors per cluster, once reserved.
    pub parts: Vec<PartView>,
    /// Advance reservation it is bound to.
    pub reservation: Option<u64>,
    /// Submitted.
    pub submitted_at: i64,
    /// The start the planner gives it now (or gave it, once started).
    pub planned_start: Option<i64>,
    /// Whether `planned_start` is a promise: a reservation holds it, and the job starts
    /// then or earlier. Otherwise it is a forecast, and `start_caveat` says what may still
    /// make it later.
    #[serde(default)]
    pub start_guaranteed: bool,
    /// Why `planned_start` is a forecast rather than a promise, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_caveat: Option<String>,
    /// The first start the planner gave it, kept to measure estimate accuracy.
    pub first_planned_start: Option<i64>,
    /// Started.
    pub started_at: Option<i64>,
    /// Ended.
    pub ended_at: Option<i64>,
    /// How long it has actually run, in seconds: from its start to when this view was made
    /// (or to its end), less the time it spent suspended (by `job suspend` or by a job of a
    /// higher priority level), which its walltime does not count either. Null before it
    /// starts. Clients show this rather than subtracting `started_at`, which cannot see
    /// suspensions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_secs: Option<i64>,
    /// Charged to the owner's budget.
    pub charged: f64,
    /// Why it is where it is (planner's reason, failure reason), for people. It writes no
    /// instant: the start it is planned or reserved for is `planned_start`.
    pub reason: Option<String>,
    /// Program and arguments.
    pub command: Vec<String>,
    /// Standard output file.
    pub stdout: Option<String>,
    /// Standard error file.
    pub stderr: Option<String>,
    /// For a task of an array job: the array job's id (the id `job list` shows is
    /// `ARRAY_TASK`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_job_id: Option<u64>,
    /// For a task of an array job: its index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_task_id: Option<u32>,
    /// What it waits for, as submitted (`afterok:12,singleton`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependency: Option<String>,
    /// Not eligible to start before this instant (`--begin`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub begin: Option<i64>,
    /// Features its cluster must offer, as submitted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
    /// Licences it holds while it runs, by pool, as submitted.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub licences: BTreeMap<String, u32>,
    /// The application, as named at submission (`--app`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    /// The runtime its cluster's local policy plans with instead of its walltime, which
    /// stays its kill; absent when its cluster does not predict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prediction: Option<PredictionView>,
    /// Its input files, with their sizes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputView>,
    /// Each copy of its inputs to a cluster it runs on, in order (none for a job run
    /// where its inputs live).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub staging: Vec<StagingView>,
    /// Its output files, as submitted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<OutputSpec>,
    /// The copy of its outputs back, once it completed: to which cluster, when, and why
    /// it failed (absent when nothing needed copying).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_staging: Option<StagingView>,
}

/// A job's predicted runtime and where it came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PredictionView {
    /// The runtime planned now, seconds in its walltime's units: on the reference
    /// processor for a global job, on its cluster's for a local one.
    pub seconds: i64,
    /// The predictor: `tsafrir` (the user's last two runs) or `app` (the last runs of the
    /// same application, processors and arguments on the cluster).
    pub predictor: String,
    /// How many finished runs it was drawn from; 0: none, so the walltime.
    pub runs: u32,
    /// How often it was corrected because the job outlived it (then it is the walltime).
    pub corrections: u32,
}

impl JobView {
    /// The id people use: `ID`, or `ARRAY_TASK` for a task of an array job.
    pub fn display_id(&self) -> String {
        match (self.array_job_id, self.array_task_id) {
            (Some(a), Some(t)) => format!("{a}_{t}"),
            _ => self.id.to_string(),
        }
    }
}

/// Why a job has not started, with the facts behind it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Explanation {
    /// The job.
    pub id: u64,
    /// Its state.
    pub state: JobState,
    /// The service's time when it explained: what a reason's `at` is counted from (`in
    /// 2h`), whatever the reader's clock says.
    pub now: i64,
    /// One per reason, most important first.
    pub reasons: Vec<Reason>,
    /// The planned start, if any.
    pub planned_start: Option<i64>,
    /// Whether the planned start is a promise (see [`JobView::start_guaranteed`]).
    #[serde(default)]
    pub start_guaranteed: bool,
    /// What may still make the planned start later, when it is a forecast.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_caveat: Option<String>,
}

/// One reason a job is where it is. The instant it speaks of travels as a number beside
/// the words, never inside them, so that each client shows it in its reader's zone and
/// relative to now without reading the words.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Reason {
    /// For people, without the instant: when `at` is set, the text ends where the instant
    /// goes (`reserved on a from`) and a client writes the instant after it.
    pub text: String,
    /// The instant that completes `text`: a begin time, a reserved or earliest possible
    /// start, the start of a run. Null when the text needs none.
    #[serde(default)]
    pub at: Option<i64>,
}

impl Reason {
    /// A reason that speaks of no instant.
    pub fn new(text: impl Into<String>) -> Reason {
        Reason {
            text: text.into(),
            at: None,
        }
    }

    /// A reason whose text ends on the instant `at`.
    pub fn timed(text: impl Into<String>, at: i64) -> Reason {
        Reason {
            text: text.into(),
            at: Some(at),
        }
    }
}

/// A start-time question: when could such a job start, without submitting it?
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EstimateRequest {
    /// Processors.
    #[serde(default = "one")]
    pub procs: u32,
    /// Walltime.
    pub walltime: Walltime,
    /// Max price per processor-second.
    #[serde(default)]
    pub price: Option<f64>,
    /// May it be split over clusters?
    #[serde(default = "yes")]
    pub co_allocate: bool,
    /// Not before this instant (seconds since the epoch), as a submission's `begin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub begin: Option<i64>,
}

/// The earliest start on one cluster alone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClusterEstimate {
    /// The cluster.
    pub cluster: String,
    /// Earliest start there, or null when it cannot run there within the horizon.
    pub start: Option<i64>,
    /// Why not, when `start` is null.
    pub reason: Option<String>,
    /// The cluster's own resource manager's answer for such a job submitted there now, as a
    /// local job (Slurm: `sbatch --test-only`); absent for clusters Foresight schedules
    /// itself, or when it did not answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_manager_start: Option<i64>,
}

/// The answer to an [`EstimateRequest`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Estimate {
    /// Per cluster.
    pub clusters: Vec<ClusterEstimate>,
    /// Over the whole grid (co-allocation allowed when asked): start, end and parts.
    pub earliest: Option<i64>,
    /// The end by the walltime on the chosen processors.
    pub end: Option<i64>,
    /// Where.
    pub parts: Vec<PartView>,
    /// Cost at the chosen slots' prices.
    pub cost: Option<f64>,
}

/// Who may use a reservation. Names, not ids.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AclSpec {
    /// Users admitted.
    #[serde(default)]
    pub users: Vec<String>,
    /// Groups admitted.
    #[serde(default)]
    pub groups: Vec<String>,
    /// Accounts admitted.
    #[serde(default)]
    pub accounts: Vec<String>,
    /// Classes admitted.
    #[serde(default)]
    pub classes: Vec<String>,
    /// QoS levels admitted.
    #[serde(default)]
    pub qos: Vec<String>,
    /// The one job admitted.
    #[serde(default)]
    pub job: Option<u64>,
}

/// A reservation to make.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateReservation {
    /// The cluster.
    pub cluster: String,
    /// Processors held: a count (the cluster's scheduler keeps that many free), or 0 with
    /// `processors`.
    #[serde(default)]
    pub procs: u32,
    /// These processors (indices within the cluster), instead of any `procs` of them: for
    /// maintenance of given nodes, or a job that must have the same processors.
    #[serde(default)]
    pub processors: Vec<u32>,
    /// Start (seconds since the epoch); now when absent.
    #[serde(default)]
    pub start: Option<i64>,
    /// End; or give `duration`.
    #[serde(default)]
    pub end: Option<i64>,
    /// Length, when `end` is absent.
    #[serde(default)]
    pub duration: Option<Walltime>,
    /// Who may use it.
    #[serde(default)]
    pub acl: AclSpec,
    /// Make it tentative, expiring after this many seconds unless committed (two-phase).
    #[serde(default)]
    pub ttl: Option<i64>,
}

/// A reservation's life: `tentative` (expires after its TTL) → `committed` → `active` →
/// `finished`; or `released` (by request) or `expired` (TTL passed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReservationState {
    /// Held for its TTL, awaiting commit.
    Tentative,
    /// Held.
    Committed,
    /// Its window has begun.
    Active,
    /// Its window is over.
    Finished,
    /// Given back before its end.
    Released,
    /// Not committed in time.
    Expired,
}

impl ReservationState {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ReservationState::Tentative => "tentative",
            ReservationState::Committed => "committed",
            ReservationState::Active => "active",
            ReservationState::Finished => "finished",
            ReservationState::Released => "released",
            ReservationState::Expired => "expired",
        }
    }

    /// Still holding processors?
    pub fn is_live(self) -> bool {
        matches!(
            self,
            ReservationState::Tentative | ReservationState::Committed | ReservationState::Active
        )
    }
}

impl std::str::FromStr for ReservationState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "tentative" => ReservationState::Tentative,
            "committed" => ReservationState::Committed,
            "active" => ReservationState::Active,
            "finished" => ReservationState::Finished,
            "released" => ReservationState::Released,
            "expired" => ReservationState::Expired,
            other => return Err(format!("unknown reservation state {other:?}")),
        })
    }
}

/// A reservation as the API shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReservationView {
    /// Id.
    pub id: u64,
    /// `admin` (made through the API) or `job` (made by the planner for a global job).
    pub kind: String,
    /// Cluster.
    pub cluster: String,
    /// Processors held.
    pub procs: u32,
    /// Which processors, when it names them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processors: Vec<u32>,
    /// Start.
    pub start: i64,
    /// End.
    pub end: i64,
    /// Who may use it.
    pub acl: AclSpec,
    /// State.
    pub state: ReservationState,
    /// When a tentative reservation expires.
    pub expires_at: Option<i64>,
    /// Who made it.
    pub owner: String,
}

/// A cluster as the API shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClusterInfo {
    /// Name.
    pub name: String,
    /// Resource manager kind (`local` or `slurm`).
    pub kind: String,
    /// `up` or `down` (its resource manager does not answer; the planner gives it nothing).
    pub state: String,
    /// Why it is down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Processors.
    pub procs: u32,
    /// Processors busy now.
    pub busy: u32,
    /// Jobs running.
    pub running: usize,
    /// Jobs queued in its local policy.
    pub queued: usize,
    /// Base price per processor-second.
    pub tariff: f64,
    /// Its local policy.
    pub policy: String,
}

/// One slot of the plan: a processor busy or free over `[start, end)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SlotView {
    /// Processor index within its cluster.
    pub processor: u32,
    /// Start.
    pub start: i64,
    /// End.
    pub end: i64,
    /// `free`; `running`; `reserved` (a global job's reservation); `planned` (a global job
    /// planned beyond the lead time, nothing held yet); `forecast` (a queued local job where
    /// its cluster's policy would start it); `held` (an administrative reservation).
    pub occupant: String,
    /// The job or reservation there, if any (other users' jobs are not named).
    pub id: Option<u64>,
    /// Price per processor-second of free time.
    pub cost: Option<f64>,
    /// When a running job's part started: its slot begins no earlier than the window, and
    /// a reader that lists jobs (the dashboard's co-allocated jobs) wants the real start.
    #[serde(default)]
    pub started_at: Option<i64>,
}

/// The plan of one cluster over a window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClusterPlan {
    /// Cluster.
    pub cluster: String,
    /// Processors.
    pub procs: u32,
    /// Window start.
    pub from: i64,
    /// Window end.
    pub to: i64,
    /// Slots, by processor then start.
    pub slots: Vec<SlotView>,
}

/// A user as administrators see it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UserView {
    /// Name.
    pub name: String,
    /// Administrator?
    pub admin: bool,
    /// Budget left, or null for unlimited.
    pub budget: Option<f64>,
    /// Charged so far.
    pub spent: f64,
    /// The Unix account set for the user by an administrator; null: the server's
    /// `[unix_user]` table, else the account of the user's own name.
    #[serde(default)]
    pub unix_user: Option<String>,
    /// The Unix account the user's local jobs run as, whichever rule chose it: what an
    /// administrator reads to know who owns the user's processes and files (`unix_user` is
    /// null for every user the `[unix_user]` table maps). Null from servers that predate it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_as: Option<String>,
    /// Where `runs_as` comes from: `user` (set by an administrator, `unix_user`), `table`
    /// (the server's `[unix_user]` entry for the name), `default` (its `"*"` entry) or
    /// `name` (no mapping: the account of the user's own name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_as_from: Option<String>,
    /// The credentials the user may name in a job (set by administrators).
    #[serde(default)]
    pub credentials: UserCredentials,
    /// Disabled users' tokens are refused; their queued jobs were cancelled.
    #[serde(default)]
    pub disabled: bool,
    /// What the administrator should know about the change just made (a Unix account that
    /// does not exist on the service's host, accepted because the service is not root);
    /// absent when there is nothing to say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// What a user may name in a job for reservation ACLs and accounting: set by
/// administrators, never taken from a job's own claims. The first of each list is the
/// user's default.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UserCredentials {
    /// Groups.
    #[serde(default)]
    pub groups: Vec<String>,
    /// Accounts.
    #[serde(default)]
    pub accounts: Vec<String>,
    /// Classes (queues).
    #[serde(default)]
    pub classes: Vec<String>,
    /// Qualities of service.
    #[serde(default)]
    pub qos: Vec<String>,
}

/// A change of a user's credentials: each list given replaces the user's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CredentialsChange {
    /// Groups.
    #[serde(default)]
    pub groups: Option<Vec<String>>,
    /// Accounts.
    #[serde(default)]
    pub accounts: Option<Vec<String>>,
    /// Classes (queues).
    #[serde(default)]
    pub classes: Option<Vec<String>>,
    /// Qualities of service.
    #[serde(default)]
    pub qos: Option<Vec<String>>,
}

/// Enables or disables a user.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UserStateChange {
    /// True disables: the user's token is refused at once and their queued jobs are
    /// cancelled (running ones finish and are charged); false enables again.
    pub disabled: bool,
}

/// A user to create.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateUser {
    /// Name.
    pub name: String,
    /// Administrator?
    #[serde(default)]
    pub admin: bool,
    /// Budget, or unlimited when absent.
    #[serde(default)]
    pub budget: Option<f64>,
    /// The Unix account the user's local jobs run as when the server is root (default: the
    /// server's `[unix_user]` table, else the account of the user's own name). Only an
    /// account set here or in the table may be root.
    #[serde(default)]
    pub unix_user: Option<String>,
}

/// A change of the Unix account a user's local jobs run as.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UnixUserChange {
    /// The account, or null to go back to the default.
    pub unix_user: Option<String>,
}

/// A created user and the token to give them (shown once).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CreatedUser {
    /// The user.
    pub user: UserView,
    /// Their bearer token.
    pub token: String,
}

/// A budget change: set it, or add to it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetChange {
    /// New budget (null: unlimited) when `set` is given.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<f64>)]
    pub set: Option<Option<f64>>,
    /// Amount to add.
    #[serde(default)]
    pub add: Option<f64>,
}

/// A field that is present, even as `null`: `Some(None)` (serde's default reads a `null` as
/// an absent field).
fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// Every error body: what went wrong, and which request field, if one is to blame.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ApiError {
    /// Machine-readable kind: `bad_request`, `unauthorized`, `forbidden`, `not_found`,
    /// `conflict`, `budget_exceeded`, `internal`.
    pub code: String,
    /// The request field at fault.
    pub field: Option<String>,
    /// What is wrong, for people.
    pub message: String,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{}: {}", field, self.message),
            None => f.write_str(&self.message),
        }
    }
}
