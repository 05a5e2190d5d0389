//! Absolute priorities (seed 001): which running global jobs a waiting job of a higher
//! priority level takes processors from, and in which order waiting jobs — suspended ones and
//! queued ones — are served. Pure arithmetic over counts; the broker applies it
//! ([`crate::broker::Broker`]'s cycle), so the service and the simulator preempt alike.
//!
//! Rules:
//! - only global jobs of a **strictly lower** priority level are ever taken from; local jobs
//!   of a cluster (its own users' work) are never candidates;
//! - the lowest level goes first, and within a level the job that started last (the least
//!   work stopped), then the highest id;
//! - no more jobs are taken than needed: once enough processors are found, every chosen job
//!   whose processors are not needed after all is left running (last chosen first);
//! - waiting jobs are served by level, highest first; within a level a preempted job comes
//!   before a queued one (it was running first), earlier preempted before later, then by id.

use crate::ids::JobId;
use crate::time::Time;
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;

/// How a preempted job gives its processors back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Preemption {
    /// Stopped where it is (SIGSTOP, `scontrol suspend`), its processes kept; continued
    /// later on the same cluster. Suspended time counts neither against its walltime nor in
    /// its charge.
    Suspend,
    /// Killed and queued again: it runs anew as its next attempt (progress lost unless it
    /// checkpoints). Only for jobs that say they may be requeued.
    Requeue,
}

impl Preemption {
    /// For a job that says whether it may be requeued.
    pub fn of(requeue: bool) -> Preemption {
        if requeue {
            Preemption::Requeue
        } else {
            Preemption::Suspend
        }
    }
}

/// A running global job holding processors of one cluster: a candidate to preempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The job.
    pub job: JobId,
    /// Its priority level.
    pub priority: u32,
    /// Processors it holds on the cluster.
    pub procs: u32,
    /// When it started (or last resumed).
    pub started: Time,
}

/// The jobs to preempt on one cluster so that a job of `priority` needing `need` of its
/// processors can start now, when `idle` of them are idle already: empty when it fits
/// without preemption, `None` when even every holder of a lower level would not free enough.
pub fn victims(need: u32, idle: u32, priority: u32, holders: &[Holder]) -> Option<Vec<JobId>> {
    if idle >= need {
        return Some(Vec::new());
    }
    let mut lower: Vec<&Holder> = holders.iter().filter(|h| h.priority < priority).collect();
    lower.sort_by_key(|h| (h.priority, Reverse(h.started), Reverse(h.job)));
    let mut chosen: Vec<&Holder> = Vec::new();
    let mut freed = u64::from(idle);
    for h in lower {
        if freed >= u64::from(need) {
            break;
        }
        freed += u64::from(h.procs);
        chosen.push(h);
    }
    if freed < u64::from(need) {
        return None;
    }
    // Leave running every chosen job not needed after all, the last chosen first.
    for i in (0..chosen.len()).rev() {
        let p = u64::from(chosen[i].procs);
        if freed - p >= u64::from(need) {
            freed -= p;
            chosen.remove(i);
        }
    }
    Some(chosen.into_iter().map(|h| h.job).collect())
}

/// Where a waiting job stands in the order waiting jobs are served: sort ascending.
/// `preempted_at` is when a suspended job was stopped (`None` for a queued job).
pub fn service_order(
    priority: u32,
    preempted_at: Option<Time>,
    job: JobId,
) -> (Reverse<u32>, bool, Time, JobId) {
    (
        Reverse(priority),
        preempted_at.is_none(),
        preempted_at.unwrap_or(Time::MIN),
        job,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(job: u64, priority: u32, procs: u32, started: i64) -> Holder {
        Holder {
            job: JobId(job),
            priority,
            procs,
            started: Time(started),
        }
    }

    fn ids(v: &[u64]) -> Vec<JobId> {
        v.iter().map(|&i| JobId(i)).collect()
    }

    #[test]
    fn hand_checked_cases() {
        struct Case {
            name: &'static str,
            need: u32,
            idle: u32,
            priority: u32,
            holders: Vec<Holder>,
            want: Option<Vec<JobId>>,
        }
        let cases = [
            Case {
                name: "fits idle: nobody preempted",
                need: 2,
                idle: 2,
                priority: 3,
                holders: vec![h(1, 0, 4, 0)],
                want: Some(vec![]),
            },
            Case {
                name: "equal level is never taken",
                need: 4,
                idle: 0,
                priority: 1,
                holders: vec![h(1, 1, 4, 0)],
                want: None,
            },
            Case {
                name: "lowest level first",
                need: 2,
                idle: 0,
                priority: 3,
                holders: vec![h(1, 2, 2, 0), h(2, 0, 2, 0), h(3, 1, 2, 0)],
                want: Some(ids(&[2])),
            },
            Case {
                name: "within a level the latest started",
                need: 2,
                idle: 0,
                priority: 3,
                holders: vec![h(1, 0, 2, 10), h(2, 0, 2, 30), h(3, 0, 2, 20)],
                want: Some(ids(&[2])),
            },
            Case {
                name: "idle processors count",
                need: 4,
                idle: 2,
                priority: 1,
                holders: vec![h(1, 0, 2, 0), h(2, 0, 2, 5)],
                want: Some(ids(&[2])),
            },
            Case {
                name: "a small low job not needed once a larger one is taken stays",
                need: 4,
                idle: 0,
                priority: 2,
                holders: vec![h(1, 0, 1, 0), h(2, 1, 4, 0)],
                want: Some(ids(&[2])),
            },
            Case {
                name: "not enough even with every lower job",
                need: 8,
                idle: 1,
                priority: 2,
                holders: vec![h(1, 0, 3, 0), h(2, 1, 3, 0), h(3, 2, 4, 0)],
                want: None,
            },
            Case {
                name: "several needed",
                need: 5,
                idle: 1,
                priority: 2,
                holders: vec![h(1, 0, 2, 0), h(2, 1, 2, 0), h(3, 0, 2, 9)],
                want: Some(ids(&[3, 1])),
            },
        ];
        for c in cases {
            assert_eq!(
                victims(c.need, c.idle, c.priority, &c.holders),
                c.want,
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn service_order_puts_levels_then_preempted_first() {
        let mut v = [
            (service_order(0, None, JobId(1)), 1),
            (service_order(2, None, JobId(2)), 2),
            (service_order(2, Some(Time(50)), JobId(9)), 3),
            (service_order(2, Some(Time(40)), JobId(8)), 4),
            (service_order(1, Some(Time(10)), JobId(3)), 5),
        ];
        v.sort();
        let order: Vec<u32> = v.iter().map(|x| x.1).collect();
        assert_eq!(order, vec![4, 3, 2, 5, 1]);
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// A choice frees enough, takes only strictly lower levels, and is minimal: no
            /// chosen job could be left running. `None` only when all lower jobs are too few.
            #[test]
            fn victims_are_enough_lower_and_minimal(
                need in 1u32..32,
                idle in 0u32..32,
                priority in 0u32..4,
                raw in proptest::collection::vec((0u32..4, 1u32..8, 0i64..100), 0..10),
            ) {
                let holders: Vec<Holder> = raw
                    .iter()
                    .enumerate()
                    .map(|(i, &(p, n, s))| h(i as u64 + 1, p, n, s))
                    .collect();
                let lower: u32 = holders.iter().filter(|x| x.priority < priority).map(|x| x.procs).sum();
                match victims(need, idle, priority, &holders) {
                    None => prop_assert!(idle + lower < need),
                    Some(v) => {
                        let chosen: Vec<&Holder> = holders.iter().filter(|x| v.contains(&x.job)).collect();
                        prop_assert_eq!(chosen.len(), v.len());
                        prop_assert!(chosen.iter().all(|x| x.priority < priority));
                        let freed: u32 = idle + chosen.iter().map(|x| x.procs).sum::<u32>();
                        prop_assert!(freed >= need);
                        for x in &chosen {
                            prop_assert!(freed - x.procs < need, "{:?} not needed", x.job);
                        }
                    }
                }
            }
        }
    }
}
