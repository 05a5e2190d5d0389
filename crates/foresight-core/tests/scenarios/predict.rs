//! Hand-checked runs with runtime predictions: the scheduler plans with the prediction, the
//! estimate stays the kill time, a job that outlives its prediction is re-planned, and
//! shortest-predicted-first backfill picks the shorter candidate. Driver rules as in
//! `tests/common/mod.rs` (corrections first at an instant).

use crate::common::{run, spec, Outcome, Spec, World};
use foresight_core::{BackfillOrder, Dur, JobId, Policy, Time};

fn go(capacity: u32, policy: Policy, jobs: Vec<Spec>) -> Outcome {
    let out = run(&World {
        capacity,
        policy,
        reservations: Vec::new(),
        jobs,
    });
    assert!(out.errors.is_empty(), "errors {:?}", out.errors);
    out
}

fn ends(out: &Outcome) -> Vec<(u64, i64)> {
    out.records
        .iter()
        .map(|(id, r)| (id.0, r.end.expect("finished").0))
        .collect()
}

/// 4 processors; job 1 (2 procs, estimate 100) really runs `runtime`; job 2 needs the whole
/// machine; job 3 (2 procs, 60 s) would fill the hole beside job 1.
fn three(runtime: i64, prediction: Option<i64>) -> Vec<Spec> {
    let mut first = spec(1, 0, 2, 100, runtime);
    if let Some(p) = prediction {
        first = first.predicted(p);
    }
    vec![first, spec(2, 0, 4, 50, 50), spec(3, 0, 2, 60, 60)]
}

/// ```text
///            0    20   40   60   80   100  120  140   (1 column = 10 s)
/// estimates  1 ##########                                 job 1 planned to 100
///            2           rrrrr    → compressed to 60
///            3 ######                                     backfilled: ends before 100
/// predicted  1 ####                                       job 1 planned (and ends) at 40
///            2     #####                                  reserved at 40, starts at 40
///            3          ######                            [0, 60) would delay job 2: waits
/// ```
#[test]
fn a_prediction_brings_the_reserved_job_forward() {
    let plain = go(4, Policy::easy(), three(40, None));
    assert_eq!(plain.starts(), vec![(1, 0), (2, 60), (3, 0)]);
    let predicted = go(4, Policy::easy(), three(40, Some(40)));
    assert_eq!(predicted.starts(), vec![(1, 0), (2, 40), (3, 90)]);
    // Job 3 holds EASY's one reservation once job 2 runs.
    assert_eq!(predicted.reserves(), vec![(0, 2, 40), (40, 3, 90)]);
    assert!(predicted.corrections.is_empty());
}

/// Job 1 is predicted at 40 but runs 70: at 40 its plan becomes the estimate (100), job 2's
/// reservation at 40 no longer fits and is placed again at 100, and job 3 now fits beside
/// job 1 before it. Job 1 ends at 70; job 3 holds its processors until 100.
#[test]
fn a_job_outliving_its_prediction_is_planned_to_its_estimate() {
    let out = go(4, Policy::easy(), three(70, Some(40)));
    assert_eq!(out.corrections, vec![(Time(40), JobId(1), Dur(100))]);
    assert_eq!(out.starts(), vec![(1, 0), (2, 100), (3, 40)]);
    assert_eq!(out.reserves(), vec![(0, 2, 40), (40, 2, 100)]);
    assert_eq!(ends(&out), vec![(1, 70), (2, 150), (3, 100)]);
}

/// The estimate stays the kill time: job 1 would run 150 s, its prediction is 40, its
/// estimate 100. It is corrected once, to 100, and killed there.
#[test]
fn the_estimate_stays_the_kill_time() {
    let out = go(4, Policy::easy(), three(150, Some(40)));
    assert_eq!(out.corrections, vec![(Time(40), JobId(1), Dur(100))]);
    assert_eq!(ends(&out)[0], (1, 100));
}

/// Job 1 fills the machine until 5, so that everything else is queued together. Then job 2
/// holds half the machine until 105 and job 3 (the whole machine) is reserved there. Jobs 4
/// (80 s) and 5 (predicted 30 s) both fit the hole alone, not together. Queue-order backfill
/// starts job 4; shortest-predicted-first starts job 5, after which job 4 no longer fits
/// before job 3.
///
/// ```text
///        0    20   40   60   80   100  120  140   (1 column = 10 s, from 5)
/// fcfs   2 ##########
///        3           r#                        at 105
///        4 ########                            backfilled at 5
///        5            ...###                   85..115 would delay job 3: at 115
/// spf    4            ...########              at 115
///        5 ###                                 backfilled at 5
/// ```
#[test]
fn shortest_predicted_first_backfill_takes_the_short_job() {
    let jobs = vec![
        spec(1, 0, 4, 5, 5),
        spec(2, 0, 2, 100, 100),
        spec(3, 0, 4, 10, 10),
        spec(4, 0, 2, 80, 80),
        spec(5, 0, 2, 90, 30).predicted(30),
    ];
    let fcfs = go(4, Policy::easy(), jobs.clone());
    assert_eq!(
        fcfs.starts(),
        vec![(1, 0), (2, 5), (3, 105), (4, 5), (5, 115)]
    );
    let spf = Policy {
        backfill_order: BackfillOrder::Spf,
        ..Policy::easy()
    };
    let out = go(4, spf, jobs);
    assert_eq!(
        out.starts(),
        vec![(1, 0), (2, 5), (3, 105), (4, 115), (5, 5)]
    );
}
