//! Administrative advance reservations: a number of processors held during `[start, end)`
//! for the jobs an access-control list admits (seed 004: resources, time, ACL).

use crate::ids::{AccountId, ClassId, GroupId, JobId, QosId, ReservationId, UserId};
use crate::job::Job;
use crate::time::Interval;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Who may run inside a reservation. A job is admitted when any one list names one of its
/// credentials, or when the reservation is for exactly that job. An empty ACL admits no one:
/// such a reservation blocks its processors (maintenance).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acl {
    /// Users admitted.
    pub users: BTreeSet<UserId>,
    /// Groups admitted.
    pub groups: BTreeSet<GroupId>,
    /// Accounts admitted.
    pub accounts: BTreeSet<AccountId>,
    /// Classes admitted.
    pub classes: BTreeSet<ClassId>,
    /// QoS levels admitted.
    pub qos: BTreeSet<QosId>,
    /// The one job this reservation was made for, if any.
    pub job: Option<JobId>,
}

impl Acl {
    /// Admits nobody: the processors are simply unavailable during the window.
    pub fn nobody() -> Acl {
        Acl::default()
    }

    /// Admits the listed users.
    pub fn users(users: impl IntoIterator<Item = UserId>) -> Acl {
        Acl {
            users: users.into_iter().collect(),
            ..Acl::default()
        }
    }

    /// True when the job may run inside the reservation.
    pub fn admits(&self, job: &Job) -> bool {
        self.job == Some(job.id)
            || self.users.contains(&job.cred.user)
            || self.groups.contains(&job.cred.group)
            || self.accounts.contains(&job.cred.account)
            || self.classes.contains(&job.cred.class)
            || self.qos.contains(&job.cred.qos)
    }
}

/// Processors held during a window for the jobs an ACL admits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminReservation {
    /// Unique id.
    pub id: ReservationId,
    /// Processors held.
    pub procs: u32,
    /// When they are held.
    pub window: Interval,
    /// Who may use them.
    pub acl: Acl,
}
