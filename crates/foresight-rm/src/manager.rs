//! The one interface the service has to a cluster's resource manager, whatever runs the
//! cluster: [`ResourceManager`]. It carries the two functions seed 004 asks of a local manager
//! (an estimate of a job's start, and an advance reservation) plus what a metascheduler needs
//! to dispatch and follow jobs: submit bound to a reservation, cancel, suspend, resume,
//! requeue, and a snapshot of the cluster (processors, jobs, reservations) from which the
//! planner's forecast is built.
//!
//! Two implementations: [`LocalCluster`](crate::LocalCluster) (the local executor, where
//! Foresight itself is the resource manager, so its reservations live in the service's own
//! local scheduler) and [`SlurmCluster`](crate::SlurmCluster) (a real Slurm cluster through
//! its commands).

use crate::spec::{LaunchSpec, Outcome};
use crate::{ExecError, SlurmError};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// A part of a Foresight job to run on one cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submission {
    /// What to run, where its output goes, its walltime, and (for the local executor) its
    /// processors.
    pub spec: LaunchSpec,
    /// The Foresight reservation it must run in, if any.
    pub reservation: Option<u64>,
    /// Not to start before this Unix second.
    pub begin: Option<i64>,
}

/// A submitted part, as the resource manager knows it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PartHandle {
    /// The Foresight job.
    pub job: u64,
    /// Its attempt.
    pub attempt: u32,
    /// The resource manager's own id of it (a Slurm job id); `None` for the local executor,
    /// which knows parts by (job, attempt).
    pub external: Option<String>,
}

/// An advance reservation to hold on a cluster: `procs` processors over `[start, end)`, for
/// Foresight's jobs only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReserveRequest {
    /// Foresight's reservation id (the Slurm reservation is named after it).
    pub id: u64,
    /// Unix seconds.
    pub start: i64,
    /// Unix seconds.
    pub end: i64,
    /// How many processors.
    pub procs: u32,
}

/// A part the service submitted (or was about to submit) to a cluster, as its records keep
/// it: given back after a restart to a manager that keeps its book in memory (see
/// [`ResourceManager::restore_book`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BookedPart {
    /// The Foresight job.
    pub job: u64,
    /// Its attempt.
    pub attempt: u32,
    /// The Foresight reservation it runs in, if any.
    pub reservation: Option<u64>,
    /// Not to start before this Unix second.
    pub begin: Option<i64>,
}

/// Where a job is in its resource manager.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RmJobState {
    /// Waiting (for resources, priority, its begin time, its reservation, a hold).
    Pending,
    /// Holding processors and running.
    Running,
    /// Holding processors, stopped.
    Suspended,
    /// Ended; how.
    Ended(Outcome),
}

/// One job of a cluster: a local user's or one of Foresight's parts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RmJob {
    /// The resource manager's id.
    pub external: String,
    /// (job, attempt) when this is a Foresight part, recognised by its name.
    pub foresight: Option<(u64, u32)>,
    /// Its user.
    pub user: String,
    /// Its state.
    pub state: RmJobState,
    /// Processors it holds or asks for.
    pub procs: u32,
    /// Its time limit, seconds (`None` = unlimited).
    pub time_limit: Option<i64>,
    /// When it was submitted.
    pub submitted_at: i64,
    /// Running: when it started. Pending: the resource manager's own expected start, if it
    /// has one.
    pub start: Option<i64>,
    /// Its priority in its queue (higher runs first); drives the cost of the slots it would
    /// occupy in the forecast.
    pub priority: u64,
    /// The name of the reservation it is bound to.
    pub reservation: Option<String>,
}

/// One advance reservation of a cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RmReservation {
    /// Its name.
    pub name: String,
    /// Foresight's reservation id, when the name is one of ours.
    pub foresight: Option<u64>,
    /// Unix seconds.
    pub start: i64,
    /// Unix seconds.
    pub end: i64,
    /// Processors it holds.
    pub procs: u32,
}

/// A cluster as its resource manager sees it at one moment: what the forecast is built from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterState {
    /// When it was taken, Unix seconds.
    pub taken_at: i64,
    /// Processors that accept jobs.
    pub processors: u32,
    /// Every job it knows, ended ones too while it still remembers them.
    pub jobs: Vec<RmJob>,
    /// Every advance reservation.
    pub reservations: Vec<RmReservation>,
}

/// What went wrong talking to a resource manager.
#[derive(Debug, thiserror::Error)]
pub enum RmError {
    /// The local executor failed.
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// A Slurm command failed or printed what we do not understand.
    #[error(transparent)]
    Slurm(#[from] SlurmError),
    /// The request itself cannot be carried out by this resource manager.
    #[error("{0}")]
    Invalid(String),
    /// The resource manager did not answer (a WIKI server or submission route down).
    #[error("{0}")]
    Unreachable(String),
}

impl RmError {
    /// True when the resource manager could not be reached at all (as opposed to refusing a
    /// request): the cluster is then taken as unavailable.
    pub fn is_unreachable(&self) -> bool {
        match self {
            RmError::Slurm(e) => e.is_unavailable(),
            RmError::Unreachable(_) => true,
            _ => false,
        }
    }

    /// True when a start failed for reasons of the machine, not of the job: the supervisor
    /// could not be spawned, or died or hung before starting the job, or the resource
    /// manager was out of reach. The same start may succeed later, so the job is requeued
    /// rather than failed.
    pub fn is_transient(&self) -> bool {
        match self {
            RmError::Exec(
                ExecError::SupervisorSpawn { .. } | ExecError::SupervisorFailed { .. },
            ) => true,
            _ => self.is_unreachable(),
        }
    }
}

/// A cluster's resource manager, as the service drives it. Calls may run concurrently.
#[async_trait]
pub trait ResourceManager: Send + Sync + std::fmt::Debug {
    /// `"local"` or `"slurm"`.
    fn kind(&self) -> &'static str;

    /// True when the service's own local scheduler is this cluster's scheduler (the local
    /// executor): reservations and starts are then decided by the service, and this manager
    /// only runs processes. False when the resource manager schedules by itself (Slurm): the
    /// service mirrors it from [`snapshot`](Self::snapshot)s and talks to it for everything.
    fn scheduled_by_foresight(&self) -> bool;

    /// The cluster now.
    async fn snapshot(&self) -> Result<ClusterState, RmError>;

    /// True while the cluster has not reported since this service started and may still
    /// do so in time (a site reconnecting to a restarted centre, or to a standby that took
    /// over, within its lease): its parts and reservations are left as recorded meanwhile,
    /// rather than taken as lost and planned elsewhere at once.
    fn first_report_pending(&self) -> bool {
        false
    }

    /// When the resource manager itself would start a job of `procs` processors for
    /// `walltime` seconds submitted now (`sbatch --test-only`, Maui's `showstart`); `None`
    /// when it has no opinion beyond the service's own forecast.
    async fn estimate_start(&self, procs: u32, walltime: i64) -> Result<Option<i64>, RmError>;

    /// Holds an advance reservation for Foresight's jobs. Refusals are errors naming why.
    async fn reserve(&self, req: &ReserveRequest) -> Result<(), RmError>;

    /// [`reserve`](Self::reserve) for a job that preempted others here: the processors it
    /// needs are held by jobs just suspended for it (and by their reservations), which a
    /// resource manager that counts a suspended job's processors as busy for reservations
    /// (Slurm) must be told to overlook. The same as `reserve` elsewhere.
    async fn reserve_over_suspended(&self, req: &ReserveRequest) -> Result<(), RmError> {
        self.reserve(req).await
    }

    /// Gives back a reservation made by [`reserve`](Self::reserve). Releasing one that does
    /// not exist is not an error (a retry after a crash).
    async fn release(&self, reservation: u64) -> Result<(), RmError>;

    /// Submits a part; it starts when the resource manager says (at once for the local
    /// executor, at the reservation's start on Slurm).
    async fn submit(&self, sub: &Submission) -> Result<PartHandle, RmError>;

    /// Cancels a part, pending or running.
    async fn cancel(&self, part: &PartHandle) -> Result<(), RmError>;

    /// Stops a running part, keeping its processors.
    async fn suspend(&self, part: &PartHandle) -> Result<(), RmError>;

    /// Continues a suspended part.
    async fn resume(&self, part: &PartHandle) -> Result<(), RmError>;

    /// Puts a part back in the resource manager's queue to run again.
    async fn requeue(&self, part: &PartHandle) -> Result<(), RmError>;

    /// After a restart of the service: the reservations it holds on this cluster and its
    /// parts there, from its records. A manager whose resource manager keeps them (Slurm)
    /// ignores this; one that keeps them itself (a WIKI resource manager, which has no
    /// reservations) rebuilds its book from it, so that nothing is withdrawn or started
    /// twice for having been forgotten.
    fn restore_book(&self, reservations: &[ReserveRequest], parts: &[BookedPart]) {
        let _ = (reservations, parts);
    }

    /// A part's standard output (`stderr`: error) from byte `offset` on, when the resource
    /// manager holds it where the service cannot read it (a WIKI peer serves it over its REST
    /// API); `None` when it is in the service's own output directory.
    async fn output(
        &self,
        part: &PartHandle,
        stderr: bool,
        offset: u64,
    ) -> Result<Option<Vec<u8>>, RmError> {
        let _ = (part, stderr, offset);
        Ok(None)
    }

    /// Brings a part's input files to the cluster's host before its submission, by
    /// `timeout`: how a cluster on another host, which shares no file system with the
    /// service, receives them. Only such managers support it.
    async fn fetch_inputs(
        &self,
        part: &PartHandle,
        files: &[crate::grid::FileOffer],
        timeout: std::time::Duration,
    ) -> Result<crate::grid::Received, RmError> {
        let _ = (files, timeout);
        Err(RmError::Invalid(format!(
            "a {} cluster receives no files (job {}.{})",
            self.kind(),
            part.job,
            part.attempt
        )))
    }

    /// Has the cluster's host send a finished part's files `files` (relative to its working
    /// directory) up to the service, by `timeout`: how a cluster on another host returns
    /// outputs and workflow edges' files. Only such managers support it.
    async fn send_files(
        &self,
        part: &PartHandle,
        files: &[crate::grid::Wanted],
        timeout: std::time::Duration,
    ) -> Result<(Vec<crate::grid::SentFile>, crate::grid::Received), RmError> {
        let _ = (files, timeout);
        Err(RmError::Invalid(format!(
            "a {} cluster sends no files (job {}.{})",
            self.kind(),
            part.job,
            part.attempt
        )))
    }

    /// Moves reservation `to.id` to `[to.start, to.end)` and, when it has been submitted,
    /// the part bound to it to begin at `to.start`: how a resource manager that schedules
    /// itself lets a reserved job start earlier when processors free up. Either both move or
    /// neither does. Only such managers support it.
    async fn move_reservation(
        &self,
        to: &ReserveRequest,
        part: Option<&PartHandle>,
    ) -> Result<(), RmError> {
        let _ = part;
        Err(RmError::Invalid(format!(
            "a {} cluster does not move reservation {}",
            self.kind(),
            to.id
        )))
    }
}
