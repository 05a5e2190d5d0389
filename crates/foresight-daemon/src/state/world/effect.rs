//! Effects: what a change to the world asks the runtime to do outside the lock.

use foresight_core::broker::Preemption;
use foresight_core::{ClusterId, JobId, ReservationId};
use foresight_rm::{LaunchSpec, PartHandle, ReserveRequest, Submission};

/// Something for the caller to do outside the lock.
#[derive(Clone, Debug)]
pub enum Effect {
    /// Start a job's part on a cluster.
    Launch {
        /// The cluster.
        cluster: ClusterId,
        /// What to run.
        spec: LaunchSpec,
        /// Input files to copy into its working directory first (none when its inputs live
        /// on that cluster); the outcome goes to [`World::staged`](super::World::staged).
        stage: Vec<crate::state::staging::Copy>,
    },
    /// Copy a reserved job's input to the cluster it will start on, ahead of its start
    /// (during the transfer the planner set aside); the outcome goes to
    /// [`World::staged_ahead`](super::World::staged_ahead), and a launch meanwhile waits for it.
    StageAhead {
        /// The cluster.
        cluster: ClusterId,
        /// The job.
        job: u64,
        /// Its attempt.
        attempt: u32,
        /// The files.
        stage: Vec<crate::state::staging::Copy>,
        /// The Unix account the copy is made as (when the service is root).
        unix_user: Option<String>,
    },
    /// Copy a completed job's outputs back from its working directory on the cluster it
    /// ran on; the outcome goes to [`World::outputs_copied`](super::World::outputs_copied).
    StageOutputs {
        /// The job.
        job: u64,
        /// The files: the job's own outputs first, then each workflow edge's (labelled).
        stage: Vec<crate::state::staging::OutputFetch>,
        /// The Unix account the copy is made as (when the service is root).
        unix_user: Option<String>,
        /// The parts that ran at sites on other hosts, which first send these files up
        /// (into `World::uploads_of` their cluster, where `stage` reads them).
        uploads: Vec<crate::state::staging::Upload>,
    },
    /// Stop a running part (cancel, requeue, or a sibling part failed).
    Kill {
        /// The cluster.
        cluster: ClusterId,
        /// Job.
        job: JobId,
        /// Attempt.
        attempt: u32,
    },
    /// SIGSTOP or SIGCONT a running part.
    Pause {
        /// The cluster.
        cluster: ClusterId,
        /// Job.
        job: JobId,
        /// Attempt.
        attempt: u32,
        /// Stop (true) or continue (false).
        stop: bool,
    },
    /// Phase one on a cluster that schedules itself (Slurm): hold a reservation there; the
    /// answer goes to [`World::reservation_answered`](super::World::reservation_answered).
    Reserve {
        /// The cluster.
        cluster: ClusterId,
        /// What to hold.
        request: ReserveRequest,
    },
    /// Give a reservation back to a cluster that schedules itself.
    Release {
        /// The cluster.
        cluster: ClusterId,
        /// Foresight's reservation id.
        reservation: ReservationId,
    },
    /// Submit a part to a cluster that schedules itself; the answer goes to
    /// [`World::part_submitted`](super::World::part_submitted).
    Submit {
        /// The cluster.
        cluster: ClusterId,
        /// What to submit.
        submission: Submission,
        /// Input files to copy into its working directory first; a failed copy goes to
        /// [`World::remote_staged`](super::World::remote_staged) instead of submitting.
        stage: Vec<crate::state::staging::Copy>,
    },
    /// Move a reserved job's reservations (and its submitted parts' begin times) on
    /// clusters that schedule themselves, in order, all or none: when a step fails, the
    /// steps done are moved back; the answer goes to [`World::move_answered`](super::World::move_answered).
    Move {
        /// The job.
        job: JobId,
        /// One per part.
        steps: Vec<MoveStep>,
    },
    /// Cancel a part on a cluster that schedules itself.
    Cancel {
        /// The cluster.
        cluster: ClusterId,
        /// The part.
        part: PartHandle,
    },
    /// Stop the parts of `victims` on clusters that schedule themselves so that job `by`
    /// can start on cluster `cluster` (suspend, or requeue), all or none: when one fails,
    /// those suspended are resumed; the answer goes to [`World::preemption_answered`](super::World::preemption_answered).
    /// A co-allocated victim has a part here for each such cluster it spans.
    Preempt {
        /// Cluster index where `by` starts.
        cluster: ClusterId,
        /// The job to make room for.
        by: JobId,
        /// The parts to stop (cluster index, part), and how.
        victims: Vec<(ClusterId, PartHandle, Preemption)>,
    },
    /// Resume the parts a preemption suspended on clusters that schedule themselves, all
    /// or none: when one fails, those resumed are suspended again; the answer goes to
    /// [`World::resume_answered`](super::World::resume_answered).
    ResumePart {
        /// The job.
        job: JobId,
        /// Its parts (cluster index, part).
        parts: Vec<(ClusterId, PartHandle)>,
    },
    /// [`Effect::Reserve`] for a job that preempted others there: over the processors of
    /// the jobs suspended for it.
    ReserveOverSuspended {
        /// The cluster.
        cluster: ClusterId,
        /// What to hold.
        request: ReserveRequest,
    },
    /// Suspend (true) or resume (false) a part on a cluster that schedules itself.
    Control {
        /// The cluster.
        cluster: ClusterId,
        /// The part.
        part: PartHandle,
        /// Suspend (true) or resume (false).
        stop: bool,
    },
}

/// One part's share of an [`Effect::Move`].
#[derive(Clone, Debug, PartialEq)]
pub struct MoveStep {
    /// The cluster.
    pub cluster: ClusterId,
    /// The reservation at its new window.
    pub to: ReserveRequest,
    /// The reservation at its old window (to undo the step).
    pub back: ReserveRequest,
    /// The part bound to it, once submitted there.
    pub part: Option<PartHandle>,
}
