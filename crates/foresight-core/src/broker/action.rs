//! What the broker asks its caller to do, and why jobs wait: typed, so that the service and
//! the simulator act on the same decisions and only the words are the caller's.

use crate::broker::preempt::Preemption;
use crate::ids::{ClusterId, JobId, ReservationId, UserId};
use crate::scheduler::Domain;
use crate::time::{Interval, Time};
use serde::{Deserialize, Serialize};
use std::fmt;

/// One part of a global job: processors on one cluster, held by one reservation there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReservedPart {
    /// The cluster.
    pub cluster: ClusterId,
    /// The job reservation holding them.
    pub reservation: ReservationId,
    /// How many.
    pub procs: u32,
    /// The processors the planner chose (indices within the cluster); the local scheduler
    /// counts processors only, so a caller that places work by name keeps these for it.
    pub processors: Vec<u32>,
    /// The reservation's window (on a cluster of coarse granularity, rounded up).
    pub window: Interval,
}

/// Why a global job has not started yet (it stays queued and is planned again).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum WaitReason {
    /// The planner found no window within the horizon now (its words).
    NoWindow(String),
    /// Beyond the number of queued jobs planned per cycle.
    BeyondDepth(usize),
    /// The planned cost is more than the user has left; planned again when the budget grows.
    OverBudget {
        /// The planned cost.
        cost: f64,
        /// What is left.
        left: f64,
    },
    /// A cluster refused the reservation; planned again after `until`.
    ReservationRefused {
        /// The cluster.
        cluster: ClusterId,
        /// What it said.
        detail: String,
        /// Not planned before this.
        until: Time,
    },
    /// Larger than what is reachable while some clusters are down.
    ClustersDown {
        /// Processors asked.
        procs: u32,
        /// The clusters down.
        down: Vec<ClusterId>,
    },
    /// A cluster of its reservation went down before it started.
    LostCluster(ClusterId),
    /// A cluster that schedules itself refused to preempt the jobs it would have run
    /// beside; planned again after `until`.
    PreemptionRefused {
        /// The cluster.
        cluster: ClusterId,
        /// What it said.
        detail: String,
        /// Not planned before this.
        until: Time,
    },
}

impl fmt::Display for WaitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitReason::NoWindow(why) => write!(f, "{why}"),
            WaitReason::BeyondDepth(n) => {
                write!(f, "beyond the planning depth of {n} jobs this cycle")
            }
            WaitReason::OverBudget { cost, left } => write!(
                f,
                "budget: the planned cost {cost:.2} exceeds the remaining {left:.2}"
            ),
            WaitReason::ReservationRefused { detail, .. } => {
                write!(f, "{detail}; planned again")
            }
            WaitReason::ClustersDown { procs, down } => write!(
                f,
                "{procs} processors are more than the clusters up have ({} of them down); \
                 waiting for them",
                down.len()
            ),
            WaitReason::LostCluster(_) => {
                write!(f, "a cluster of its reservation went down; planned again")
            }
            WaitReason::PreemptionRefused { detail, .. } => {
                write!(f, "{detail}; victims left running, planned again")
            }
        }
    }
}

/// Why a global job can never run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Unrunnable {
    /// More processors than the grid (or, without co-allocation, its largest cluster) has.
    TooLarge(String),
}

impl fmt::Display for Unrunnable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unrunnable::TooLarge(why) => write!(f, "{why}"),
        }
    }
}

/// How a job reservation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReservationEnd {
    /// Given back before its end (cancel, hold, a sibling refused, a move of a remote one).
    Released,
    /// Its part ended.
    Finished,
}

/// A decision for the caller to carry out (or record).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum BrokerAction {
    /// A cluster's local scheduler starts a job now: a local job, or a global job's part.
    Start {
        /// The cluster.
        cluster: ClusterId,
        /// The job.
        job: JobId,
        /// Processors.
        procs: u32,
        /// Where they come from.
        domain: Domain,
    },
    /// The cluster must be ticked at `at` (a reservation starts then).
    Wake {
        /// The cluster.
        cluster: ClusterId,
        /// When.
        at: Time,
    },
    /// A global job is planned to start at `start`, beyond the lead time.
    Planned {
        /// The job.
        job: JobId,
        /// The planned start.
        start: Time,
    },
    /// A global job waits.
    Waiting {
        /// The job.
        job: JobId,
        /// Why.
        reason: WaitReason,
    },
    /// Phase one on a cluster that schedules itself: hold this reservation there, then
    /// answer with [`crate::broker::Broker::on_reservation_answered`].
    Ask {
        /// The job.
        job: JobId,
        /// The part to hold.
        part: ReservedPart,
    },
    /// Every part of a global job is held (two-phase done): it is reserved and charged.
    Reserved {
        /// The job.
        job: JobId,
        /// Synchronous start.
        start: Time,
        /// End by the estimate on the slowest chosen processor.
        end: Time,
        /// The charge.
        cost: f64,
        /// Its parts.
        parts: Vec<ReservedPart>,
    },
    /// A reserved global job moved earlier (processors freed up before planned).
    Moved {
        /// The job.
        job: JobId,
        /// The new start.
        start: Time,
        /// The new end.
        end: Time,
        /// Its parts with their new windows.
        parts: Vec<ReservedPart>,
    },
    /// Phase one of a move on clusters that schedule themselves: move every part's
    /// reservation there to its new window, and the part's begin time to `start`, all or
    /// none; then answer with [`crate::broker::Broker::on_move_answered`] (until then the
    /// job stays reserved at its old time).
    MoveAsked {
        /// The job.
        job: JobId,
        /// The new start.
        start: Time,
        /// The new end.
        end: Time,
        /// Its parts with their new windows.
        parts: Vec<ReservedPart>,
    },
    /// A job reservation ended; one on a cluster that schedules itself must be given back
    /// there when released.
    ReservationEnded {
        /// The cluster.
        cluster: ClusterId,
        /// The reservation.
        reservation: ReservationId,
        /// The job it was for.
        job: JobId,
        /// How.
        how: ReservationEnd,
    },
    /// A global job can never run.
    Refused {
        /// The job.
        job: JobId,
        /// Why.
        reason: Unrunnable,
    },
    /// Money moves: positive takes from the user's budget, negative gives back.
    Charge {
        /// The job.
        job: JobId,
        /// Its user.
        user: UserId,
        /// Amount.
        amount: f64,
    },
    /// A running global job gives its processors to `by`, a job of a higher priority level
    /// that could not start otherwise. Its reservations are gone (each also reported by
    /// [`BrokerAction::ReservationEnded`]); the caller stops its parts (`Suspend`: it
    /// resumes later by [`BrokerAction::Resumed`]) or kills them (`Requeue`: once they have
    /// ended it is queued again and runs as a new attempt).
    Preempted {
        /// The job preempted.
        job: JobId,
        /// The job it makes room for.
        by: JobId,
        /// How.
        how: Preemption,
        /// Its parts as they were.
        parts: Vec<ReservedPart>,
    },
    /// On a cluster that schedules itself: stop `victims` (running global jobs of lower
    /// levels, wholly on that cluster) as said, all or none, so that `by` can start there;
    /// then answer with [`crate::broker::Broker::on_preemption_answered`]. Until then they
    /// run and `by` waits, out of the queue.
    PreemptAsked {
        /// The job to make room for.
        by: JobId,
        /// The cluster.
        cluster: ClusterId,
        /// The jobs to stop, and how.
        victims: Vec<(JobId, Preemption)>,
    },
    /// On a cluster that schedules itself: continue suspended job `job`, then answer with
    /// [`crate::broker::Broker::on_resume_answered`]; it holds no processors until then.
    ResumeAsked {
        /// The job.
        job: JobId,
        /// The cluster.
        cluster: ClusterId,
    },
    /// A suspended job continues now, on the clusters it ran on, in new reservations.
    Resumed {
        /// The job.
        job: JobId,
        /// Its new reserved end.
        end: Time,
        /// Its parts in their new reservations.
        parts: Vec<ReservedPart>,
    },
    /// Every part of a global job has ended.
    Ended {
        /// The job.
        job: JobId,
        /// When its first part started.
        start: Time,
        /// When its last part ended.
        end: Time,
    },
}
