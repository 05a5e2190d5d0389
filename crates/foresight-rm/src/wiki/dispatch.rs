//! Foresight as a WIKI resource manager's scheduler: which queued jobs to start now, and on
//! which processors (the `TASKLIST` of each `STARTJOB`). Pure: no I/O, no clock.
//!
//! - Foresight's parts start once their reservation (or their `begin`) has come, first.
//! - The resource manager's own queued jobs (`Idle` in GETJOBS) are the cluster's local jobs:
//!   the cluster's local policy (the same [`LocalScheduler`] a local cluster runs) decides
//!   which start now, around Foresight's reservations that have not begun.
//! - Processors are the free task slots of [`free_slots`], taken in the resource manager's
//!   node order.

use super::mirror::{free_slots, processors, OurPart};
use super::record::{JobRecord, JobState, NodeRecord};
use crate::manager::ReserveRequest;
use foresight_core::policy::Policy;
use foresight_core::reservation::{Acl, AdminReservation};
use foresight_core::scheduler::{Action, Domain, LocalScheduler};
use foresight_core::time::{Dur, Interval, Time};
use foresight_core::{Job, JobId, ReservationId};
use std::collections::{BTreeMap, HashMap};

/// One `STARTJOB` to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Start {
    /// The job's id in the resource manager.
    pub job: String,
    /// One processor (node name) per task.
    pub tasklist: Vec<String>,
}

/// The jobs to start at `now`, each on the processors named.
pub fn starts(
    now: i64,
    nodes: &[NodeRecord],
    jobs: &[JobRecord],
    ours: &HashMap<String, OurPart>,
    reservations: &BTreeMap<u64, ReserveRequest>,
    policy: &Policy,
) -> Vec<Start> {
    let mut free = free_slots(nodes);
    free.reverse(); // taken from the end: the first node's slots go first
    let mut take = |n: u32| -> Option<Vec<String>> {
        let n = n as usize;
        if n == 0 || n > free.len() {
            return None;
        }
        Some((0..n).filter_map(|_| free.pop()).collect())
    };
    let mut out = Vec::new();
    // Ours whose time has come, by reservation start then id.
    let mut due: Vec<(i64, &JobRecord)> = jobs
        .iter()
        .filter(|j| j.state == JobState::Idle)
        .filter_map(|j| {
            let o = ours.get(&j.id)?;
            // A part bound to a reservation this book does not hold waits: the service
            // either makes it again or withdraws the part.
            let at = match o.reservation {
                Some(r) => reservations.get(&r).map_or(i64::MAX, |r| r.start),
                None => o.begin.unwrap_or(i64::MIN),
            };
            (at <= now).then_some((at, j))
        })
        .collect();
    due.sort_by(|a, b| (a.0, &a.1.id).cmp(&(b.0, &b.1.id)));
    let mut started_ours = Vec::new();
    for (_, j) in due {
        if let Some(tasklist) = take(j.tasks) {
            started_ours.push(j.id.clone());
            out.push(Start {
                job: j.id.clone(),
                tasklist,
            });
        }
    }

    // The local policy over the rest, around our reservations that have not begun.
    let Some(mut sched) = local_view(now, nodes, jobs, ours, reservations, &started_ours, policy)
    else {
        return out;
    };
    let t = Time(now);
    let mut actions = Vec::new();
    sched.schedule(t, &mut actions);
    for a in actions {
        if let Action::Start { job, .. } = a {
            let j = &jobs[job.0 as usize];
            if let Some(tasklist) = take(j.tasks) {
                out.push(Start {
                    job: j.id.clone(),
                    tasklist,
                });
            }
        }
    }
    out
}

/// The cluster as its local policy sees it at `now`: running and suspended jobs (and ours in
/// `started`, being started this pass) until their limits, Foresight's reservations that have
/// not begun, and the resource manager's own queued jobs in queue order. Job ids are indices
/// in `jobs`. `None` when no processor is up.
pub(super) fn local_view(
    now: i64,
    nodes: &[NodeRecord],
    jobs: &[JobRecord],
    ours: &HashMap<String, OurPart>,
    reservations: &BTreeMap<u64, ReserveRequest>,
    started: &[String],
    policy: &Policy,
) -> Option<LocalScheduler> {
    let capacity = processors(nodes);
    if capacity == 0 {
        return None;
    }
    let mut sched = LocalScheduler::new(capacity, policy.clone());
    let t = Time(now);
    let begun = |rid: u64| {
        jobs.iter().any(|j| {
            ours.get(&j.id).and_then(|o| o.reservation) == Some(rid)
                && (matches!(j.state, JobState::Running | JobState::Suspended)
                    || started.contains(&j.id))
        })
    };
    for r in reservations.values() {
        if r.end <= now || begun(r.id) {
            continue;
        }
        let _ = sched.add_reservation(AdminReservation {
            id: ReservationId(r.id),
            procs: r.procs.min(capacity),
            window: Interval::new(Time(r.start.max(now)), Time(r.end)),
            acl: Acl::nobody(),
        });
    }
    let limit = |j: &JobRecord| Dur(i64::try_from(j.wclimit_secs).unwrap_or(i64::MAX).max(1));
    for (n, j) in jobs.iter().enumerate() {
        let running =
            matches!(j.state, JobState::Running | JobState::Suspended) || started.contains(&j.id);
        if !running {
            continue;
        }
        let start = j
            .start_time
            .map_or(now, |s| i64::try_from(s).unwrap_or(now));
        let est = Dur(limit(j).0.max(now - start + 1));
        let job = Job::new(JobId(n as u64), Time(start.min(now)), j.tasks.max(1), est);
        let _ = sched.restore_running(t, job, Time(start.min(now)), Domain::Pool);
    }
    let mut queued: Vec<(u64, &str, usize)> = jobs
        .iter()
        .enumerate()
        .filter(|(_, j)| j.state == JobState::Idle && !ours.contains_key(&j.id))
        .map(|(n, j)| (j.queue_time, j.id.as_str(), n))
        .collect();
    queued.sort_unstable();
    for &(_, _, n) in &queued {
        let j = &jobs[n];
        let submit = Time(i64::try_from(j.queue_time).unwrap_or(now).min(now));
        let _ = sched.submit(Job::new(JobId(n as u64), submit, j.tasks, limit(j)));
    }
    Some(sched)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wiki::fixture::nodes;
    use crate::wiki::NodeState;

    fn job(id: &str, state: JobState, tasks: u32, queued: u64, limit: u64) -> JobRecord {
        JobRecord {
            queue_time: queued,
            ..JobRecord::new(id, state, tasks, limit, "ann", "ann")
        }
    }

    fn ours(ids: &[(&str, u64, Option<u64>)]) -> HashMap<String, OurPart> {
        ids.iter()
            .map(|(ext, job, r)| {
                (
                    (*ext).to_string(),
                    OurPart {
                        job: *job,
                        attempt: 0,
                        reservation: *r,
                        begin: None,
                        outcome: None,
                    },
                )
            })
            .collect()
    }

    fn res(id: u64, start: i64, end: i64, procs: u32) -> BTreeMap<u64, ReserveRequest> {
        BTreeMap::from([(
            id,
            ReserveRequest {
                id,
                start,
                end,
                procs,
            },
        )])
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_string()).collect()
    }

    #[test]
    fn our_part_starts_at_its_reservation_on_the_first_free_processors() {
        let n = nodes(4, &[0]);
        let jobs = [job("20", JobState::Idle, 2, 900, 600)];
        let o = ours(&[("20", 7, Some(3))]);
        let r = res(3, 1_000, 1_600, 2);
        let fcfs = Policy::fcfs();
        assert!(starts(999, &n, &jobs, &o, &r, &fcfs).is_empty());
        assert_eq!(
            starts(1_000, &n, &jobs, &o, &r, &fcfs),
            [Start {
                job: "20".into(),
                tasklist: names(&["p1", "p2"]),
            }]
        );
    }

    #[test]
    fn local_jobs_start_in_queue_order_but_never_into_a_coming_reservation() {
        // 4 processors, all free. Our reservation holds 3 of them from 1 100.
        let n = nodes(4, &[]);
        let jobs = [
            // Local job A: 1 processor for 1 000 s — fits beside the reservation.
            job("1", JobState::Idle, 1, 10, 1_000),
            // Local job B: 2 processors for 1 000 s — would collide with it: waits.
            job("2", JobState::Idle, 2, 20, 1_000),
            // Our part, not due yet.
            job("3", JobState::Idle, 3, 30, 500),
        ];
        let o = ours(&[("3", 9, Some(4))]);
        let r = res(4, 1_100, 1_600, 3);
        let got = starts(1_000, &n, &jobs, &o, &r, &Policy::fcfs());
        assert_eq!(
            got,
            [Start {
                job: "1".into(),
                tasklist: names(&["p0"]),
            }]
        );
        // Without the reservation our part waits (its reservation is not held), and both
        // local jobs start, in queue order.
        let got = starts(1_000, &n, &jobs, &o, &BTreeMap::new(), &Policy::fcfs());
        assert_eq!(
            got,
            [
                Start {
                    job: "1".into(),
                    tasklist: names(&["p0"]),
                },
                Start {
                    job: "2".into(),
                    tasklist: names(&["p1", "p2"]),
                },
            ]
        );
    }

    #[test]
    fn nothing_starts_on_busy_or_down_processors() {
        let mut n = nodes(2, &[0]);
        n[1].state = NodeState::Down;
        let jobs = [job("1", JobState::Idle, 1, 10, 100)];
        assert!(starts(
            1_000,
            &n,
            &jobs,
            &HashMap::new(),
            &BTreeMap::new(),
            &Policy::fcfs()
        )
        .is_empty());
    }
}
