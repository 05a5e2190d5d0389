//! Shortest-first backfill from the ordered index decides exactly as the sorted walk of the
//! queue it replaces.

use super::{Action, LocalScheduler};
use crate::ids::JobId;
use crate::job::Job;
use crate::policy::{BackfillOrder, Policy};
use crate::time::{Dur, Time};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// One random job: submit instant, processors, estimate, run time (≤ estimate) and an
/// optional shorter prediction (which brings the starvation guard into play).
type Spec = (i64, u32, i64, i64, Option<i64>);

/// Replays `jobs` second by second on a machine of `capacity` processors and returns every
/// pass's actions; `indexed` false drops the index, so the backfill sorts the queue.
fn replay(jobs: &[Spec], capacity: u32, indexed: bool) -> Vec<(i64, Vec<Action>)> {
    let policy = Policy {
        backfill_order: BackfillOrder::Spf,
        guard_after: Dur(20),
        ..Policy::easy()
    };
    let mut s = LocalScheduler::new(capacity, policy);
    assert!(s.queue.shortest().is_some(), "SPF keeps the index");
    if !indexed {
        s.queue.drop_shortest_index();
    }
    let mut ends: BTreeMap<i64, Vec<JobId>> = BTreeMap::new();
    let mut log = Vec::new();
    for t in 0..400 {
        for id in ends.remove(&t).unwrap_or_default() {
            s.finish(Time(t), id).unwrap();
        }
        for (k, &(submit, procs, estimate, _, prediction)) in jobs.iter().enumerate() {
            if submit == t {
                let job = Job::new(JobId(k as u64), Time(t), procs, Dur(estimate))
                    .with_prediction(prediction.map(Dur));
                s.submit(job).unwrap();
            }
        }
        let mut out = Vec::new();
        s.schedule(Time(t), &mut out);
        for a in &out {
            if let Action::Start { job, .. } = a {
                let run = jobs[job.0 as usize].3;
                ends.entry(t + run).or_default().push(*job);
            }
        }
        if !out.is_empty() {
            log.push((t, out));
        }
    }
    log
}

proptest! {
    /// Every pass starts and reserves the same jobs, in the same order, with the index as
    /// with the sorted queue.
    #[test]
    fn indexed_spf_decides_as_the_sorted_walk(
        jobs in prop::collection::vec(
            (0i64..150, 1u32..=8, 1i64..60, 1i64..60, prop::option::of(1i64..60)),
            1..60,
        ),
    ) {
        let jobs: Vec<Spec> = jobs
            .into_iter()
            .map(|(at, procs, est, run, pred)| {
                // A prediction never shorter than the run: no job outlives its plan here.
                let run = run.min(est);
                (at, procs, est, run, pred.map(|p| p.clamp(run, est)))
            })
            .collect();
        prop_assert_eq!(replay(&jobs, 8, true), replay(&jobs, 8, false));
    }
}
