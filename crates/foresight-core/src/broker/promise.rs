//! A bid is a promise (seed 001's decentralized mode): a site that wins a global job starts
//! it at once, preempting what it bid to preempt, or gives it back to the auction at once.
//! [`Broker::promise`] answers, on a copy of the broker, what this broker would do with a job
//! handed to it now — start it in the cycle that takes it in (on idle processors or on those
//! of the lower levels' global jobs it preempts), or leave it waiting — so that a dispatcher
//! bids, and keeps an award, only on processors it can really hand over. Nothing here
//! changes the broker: the cycle that takes the job in decides the same from the same state.

use super::{Broker, BrokerAction, Phase};
use crate::grid::GlobalJob;
use crate::ids::JobId;
use crate::time::Time;

/// What a broker would do now with a global job handed to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Promise {
    /// It starts in the very cycle that takes it in, preempting `victims` (running global
    /// jobs of strictly lower levels; none when idle processors are enough). On a cluster
    /// that schedules itself the start or the preemption is asked of it, and counts as
    /// started here: the answer is that cluster's.
    Starts {
        /// The jobs it preempts, in the order the broker stops them.
        victims: Vec<JobId>,
    },
    /// It would wait: planned to start at `planned` (`None`: not placed at all).
    Waits {
        /// Its planned start, if the cycle placed it.
        planned: Option<Time>,
    },
}

impl Broker {
    /// What this broker would do with global `job` handed to it at `now`, played on a copy
    /// (see the module documentation). `prepaid`: the job was paid for before it came (a
    /// peer dispatcher's award), so it is never weighed against its user's budget here.
    pub fn promise(&self, now: Time, job: GlobalJob, prepaid: bool) -> Promise {
        let id = job.id;
        let mut copy = self.clone();
        copy.submit(now, job);
        if prepaid {
            copy.set_prepaid(id);
        }
        let mut out = Vec::new();
        copy.on_cycle(now, &mut out);
        let victims: Vec<JobId> = out
            .iter()
            .flat_map(|a| match a {
                BrokerAction::Preempted { job, by, .. } if *by == id => vec![*job],
                BrokerAction::PreemptAsked { by, victims, .. } if *by == id => {
                    victims.iter().map(|(v, _)| *v).collect()
                }
                _ => Vec::new(),
            })
            .collect();
        let asked = out
            .iter()
            .any(|a| matches!(a, BrokerAction::PreemptAsked { by, .. } if *by == id));
        match copy.entry(id).map(|e| &e.phase) {
            Some(Phase::Running { .. }) => Promise::Starts { victims },
            Some(Phase::Reserving { start, .. } | Phase::Reserved { start, .. })
                if *start <= now =>
            {
                Promise::Starts { victims }
            }
            _ if asked => Promise::Starts { victims },
            Some(
                Phase::Planned { start, .. }
                | Phase::Reserving { start, .. }
                | Phase::Reserved { start, .. },
            ) => Promise::Waits {
                planned: Some(*start),
            },
            _ => Promise::Waits { planned: None },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::{processors_of, GridCluster, SpeedGroup};
    use crate::grid::PlannerConfig;
    use crate::ids::{ClusterId, ReservationId, UserId};
    use crate::job::Job;
    use crate::policy::Policy;
    use crate::reservation::{Acl, AdminReservation};
    use crate::scheduler::LocalScheduler;
    use crate::select::Criterion;
    use crate::time::{Dur, Interval};

    fn broker() -> Broker {
        let c = GridCluster::new(
            "b",
            processors_of(
                "b",
                &[SpeedGroup {
                    procs: 4,
                    speed: 1.0,
                }],
            ),
            LocalScheduler::new(4, Policy::easy()),
        );
        let planner = PlannerConfig {
            horizon: Dur(86_400),
            lead_time: Dur(0),
            plan_depth: 64,
        };
        Broker::new(vec![c], planner, 1)
    }

    fn global(id: u64, priority: u32, walltime: i64) -> GlobalJob {
        GlobalJob {
            id: JobId(id),
            user: UserId(1),
            submit: Time(0),
            procs: 4,
            walltime: Dur(walltime),
            max_price: 1.0,
            input_mb: 0.0,
            home: None,
            co_allocate: false,
            criterion: Criterion::EarliestFinish,
            priority,
            requeue: false,
            begin: None,
            requires: Default::default(),
            licences: Default::default(),
            prediction: None,
        }
    }

    /// Issue 35 item 5's site b: a global job of level 0 holds all 4 processors and a local
    /// job of 4 waits behind it. A job of level 3 handed over now starts at once by
    /// preempting the low job (the local job does not come first); the copy changes nothing.
    #[test]
    fn a_higher_level_starts_at_once_over_the_local_job_queued_behind_the_victim() {
        let mut b = broker();
        let mut out = Vec::new();
        b.submit(Time(0), global(1, 0, 300));
        b.on_cycle(Time(0), &mut out);
        b.submit_local(
            Time(1),
            ClusterId(0),
            Job::new(JobId(100), Time(1), 4, Dur(120)),
            &mut out,
        )
        .unwrap();
        let before = format!("{:?}", b.entry(JobId(1)).map(|e| &e.phase));
        assert_eq!(
            b.promise(Time(2), global(2, 3, 30), true),
            Promise::Starts {
                victims: vec![JobId(1)]
            }
        );
        assert_eq!(format!("{:?}", b.entry(JobId(1)).map(|e| &e.phase)), before);
        assert!(b.entry(JobId(2)).is_none(), "only the copy took it in");
        // The real cycle decides the same.
        b.submit(Time(2), global(2, 3, 30));
        let mut out = Vec::new();
        b.on_cycle(Time(2), &mut out);
        assert!(matches!(
            b.entry(JobId(2)).map(|e| &e.phase),
            Some(Phase::Running { .. })
        ));
    }

    /// Equal levels never preempt: a job of level 0 handed over beside the running one waits
    /// for its end at 300.
    #[test]
    fn a_job_that_cannot_start_now_waits_with_its_planned_start() {
        let mut b = broker();
        let mut out = Vec::new();
        b.submit(Time(0), global(1, 0, 300));
        b.on_cycle(Time(0), &mut out);
        assert_eq!(
            b.promise(Time(2), global(2, 0, 30), true),
            Promise::Waits {
                planned: Some(Time(300))
            }
        );
    }

    /// Idle processors that an administrative reservation takes in 10 s cannot hold a job
    /// of 30 s now: it would wait until the reservation ends, though they are idle.
    #[test]
    fn idle_processors_reserved_soon_are_no_promise() {
        let mut b = broker();
        let r = AdminReservation {
            id: ReservationId(900),
            procs: 4,
            window: Interval::new(Time(10), Time(130)),
            acl: Acl::nobody(),
        };
        b.clusters[0].sched.add_reservation(r).unwrap();
        assert_eq!(
            b.promise(Time(0), global(2, 3, 30), true),
            Promise::Waits {
                planned: Some(Time(130))
            }
        );
        assert_eq!(
            b.promise(Time(0), global(3, 3, 10), true),
            Promise::Starts { victims: vec![] },
            "a job of 10 s fits before it"
        );
    }
}
