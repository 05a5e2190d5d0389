//! Jobs as a local scheduler sees them: a rigid parallel request of `procs` processors for at
//! most `estimate` seconds, with the credentials that priorities and reservation ACLs read.

use crate::ids::{AccountId, ClassId, GroupId, JobId, QosId, ReservationId, UserId};
use crate::time::{Dur, Time};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Who a job runs as. Priorities, fairshare and reservation ACLs are all keyed by these.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Credentials {
    /// The submitting user.
    pub user: UserId,
    /// The user's group.
    pub group: GroupId,
    /// The account charged.
    pub account: AccountId,
    /// The class (queue) the job was submitted to.
    pub class: ClassId,
    /// The quality of service requested.
    pub qos: QosId,
}

/// A request to run: what the scheduler needs to decide when and where.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// Unique id.
    pub id: JobId,
    /// When the job entered the queue; queue time and FCFS order count from here.
    pub submit: Time,
    /// Processors needed at once, for the whole run.
    pub procs: u32,
    /// The user's runtime estimate (walltime limit): the scheduler plans with it and the
    /// resource manager kills the job when it is reached.
    pub estimate: Dur,
    /// Credentials for priorities and ACLs.
    pub cred: Credentials,
    /// An administrative reservation the job is bound to: it runs inside it.
    pub reservation: Option<ReservationId>,
    /// A job bound to a reservation may also start before the reservation's start, outside it,
    /// when processors are free earlier.
    pub may_start_early: bool,
    /// A predicted runtime shorter than the estimate: the scheduler plans with it, and the
    /// estimate stays the kill time. `None` plans with the estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prediction: Option<Dur>,
    /// Not eligible to start before this instant (`sbatch --begin`): until then it waits
    /// outside the queue, overtaking no one and blocking no one, and its forecast places it
    /// no earlier. `None` is eligible at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub begin: Option<Time>,
    /// Licences held for the whole run, by pool name (`ansys` → 2): the job starts only when
    /// its cluster's pools have that many free for its whole planned run.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub licences: BTreeMap<String, u32>,
}

impl Job {
    /// A job with default credentials and no reservation binding.
    pub fn new(id: JobId, submit: Time, procs: u32, estimate: Dur) -> Job {
        Job {
            id,
            submit,
            procs,
            estimate,
            cred: Credentials::default(),
            reservation: None,
            may_start_early: false,
            prediction: None,
            begin: None,
            licences: BTreeMap::new(),
        }
    }

    /// Sets the licences the job holds while it runs.
    pub fn with_licences(mut self, licences: BTreeMap<String, u32>) -> Job {
        self.licences = licences;
        self
    }

    /// Sets the instant before which the job may not start.
    pub fn with_begin(mut self, begin: Option<Time>) -> Job {
        self.begin = begin;
        self
    }

    /// Sets the predicted runtime the scheduler plans with.
    pub fn with_prediction(mut self, prediction: Option<Dur>) -> Job {
        self.prediction = prediction;
        self
    }

    /// How long the scheduler plans the run to take: the prediction, at least one second and
    /// at most the estimate, or the estimate.
    pub fn plan(&self) -> Dur {
        match self.prediction {
            Some(p) => Dur(p.as_secs().clamp(1, self.estimate.as_secs().max(1))),
            None => self.estimate,
        }
    }

    /// Sets the user.
    pub fn with_user(mut self, user: UserId) -> Job {
        self.cred.user = user;
        self
    }

    /// Sets all credentials.
    pub fn with_cred(mut self, cred: Credentials) -> Job {
        self.cred = cred;
        self
    }

    /// Binds the job to an administrative reservation.
    pub fn in_reservation(mut self, reservation: ReservationId, may_start_early: bool) -> Job {
        self.reservation = Some(reservation);
        self.may_start_early = may_start_early;
        self
    }

    /// Processor-seconds the job may use at most.
    pub fn area(&self) -> i64 {
        i64::from(self.procs) * self.estimate.as_secs()
    }

    /// The planned end of a run starting at `start`.
    pub fn end_if_started(&self, start: Time) -> Time {
        start + self.estimate
    }
}
