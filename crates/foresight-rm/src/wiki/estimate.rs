//! When a WIKI resource manager Foresight schedules would start a job submitted to its queue
//! now: the answer its [`crate::ResourceManager::estimate_start`] gives, as Slurm's
//! `sbatch --test-only` does for a Slurm cluster. Pure: no I/O, no clock.
//!
//! The cluster is the one the scheduling pass sees (see `dispatch`): its running jobs until
//! their limits, its own queue in order, Foresight's reservations that have not begun; the
//! job joins the queue last and the cluster's policy places every waiting job (as
//! `squeue --start` does: each at the start it would get if nothing else arrived).

use super::dispatch::local_view;
use super::mirror::OurPart;
use super::record::{JobRecord, NodeRecord};
use crate::manager::ReserveRequest;
use foresight_core::policy::{Policy, ALL};
use foresight_core::scheduler::JobStatus;
use foresight_core::time::{Dur, Time};
use foresight_core::{Job, JobId};
use std::collections::{BTreeMap, HashMap};

/// The Unix second a job of `procs` processors for `walltime` seconds submitted at `now`
/// would start; `None` when the cluster cannot hold it (more processors than it has up).
#[allow(clippy::too_many_arguments)]
pub fn estimate_start(
    now: i64,
    nodes: &[NodeRecord],
    jobs: &[JobRecord],
    ours: &HashMap<String, OurPart>,
    reservations: &BTreeMap<u64, ReserveRequest>,
    policy: &Policy,
    procs: u32,
    walltime: i64,
) -> Option<i64> {
    let mut sched = local_view(now, nodes, jobs, ours, reservations, &[], policy)?;
    if procs == 0 || procs > sched.capacity() {
        return None;
    }
    // After every job the pass knows (their ids are their indices).
    let probe = JobId(jobs.len() as u64);
    sched
        .submit(Job::new(probe, Time(now), procs, Dur(walltime.max(1))))
        .ok()?;
    sched.set_reservation_depth(ALL);
    let mut actions = Vec::new();
    sched.schedule(Time(now), &mut actions);
    let start = match sched.explain(probe, Time(now))? {
        JobStatus::Running { placement } => placement.start,
        JobStatus::Reserved { start, .. } => start,
        JobStatus::Waiting { earliest, .. } | JobStatus::Deferred { earliest, .. } => earliest?,
    };
    Some(start.secs().max(now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wiki::fixture::nodes;
    use crate::wiki::JobState;

    fn job(id: &str, state: JobState, tasks: u32, limit: u64) -> JobRecord {
        JobRecord {
            queue_time: 900,
            start_time: (state == JobState::Running).then_some(950),
            ..JobRecord::new(id, state, tasks, limit, "ann", "ann")
        }
    }

    #[test]
    fn a_job_starts_now_on_free_processors_else_after_the_running_and_queued_ones() {
        let fcfs = Policy::fcfs();
        let none = HashMap::new();
        let no_res = BTreeMap::new();
        // 4 processors; job 1 runs on 2 of them until 950 + 100 = 1 050.
        let n = nodes(4, &[0, 1]);
        let running = [job("1", JobState::Running, 2, 100)];
        let est = |jobs: &[JobRecord], res: &BTreeMap<u64, ReserveRequest>, procs, wall| {
            estimate_start(1_000, &n, jobs, &none, res, &fcfs, procs, wall)
        };
        assert_eq!(est(&running, &no_res, 2, 60), Some(1_000));
        assert_eq!(est(&running, &no_res, 3, 60), Some(1_050));
        assert_eq!(est(&running, &no_res, 5, 60), None);
        // A queued local job of 4 processors goes first (FCFS): ours after it, at 1 050 + 200.
        let queued = [
            job("1", JobState::Running, 2, 100),
            job("2", JobState::Idle, 4, 200),
        ];
        assert_eq!(est(&queued, &no_res, 1, 60), Some(1_250));
        // A reservation of Foresight's on all 4 processors over [1 050, 1 500), not begun:
        // nothing longer than the 50 s before it fits before its end.
        let res = BTreeMap::from([(
            7,
            ReserveRequest {
                id: 7,
                start: 1_050,
                end: 1_500,
                procs: 4,
            },
        )]);
        assert_eq!(est(&running, &res, 1, 60), Some(1_500));
        // A job that ends before it begins slips in now.
        assert_eq!(est(&running, &res, 1, 5), Some(1_000));
    }
}
