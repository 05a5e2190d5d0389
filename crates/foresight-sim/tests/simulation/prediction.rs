//! Runtime prediction in the simulator on hand-checked traces: Tsafrir's predictor fed by the
//! runs that finished, the correction when a job outlives its prediction, and runs past the
//! estimate kept with `overrun`.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use foresight_core::predict::Predictor;
use foresight_core::Policy;
use foresight_sim::workload::Converter;
use foresight_sim::{simulate_with, Prediction, Semantics, SimOutput, Trace, Workload};

/// Four processors. User 1's job 1 runs 10 s, so their job 2 (estimate 100) is predicted at
/// 10 but runs 30: at 30 it is planned to its estimate (120), user 2's job 3 (the whole
/// machine) loses its reservation at 30 and gets one at 120, and user 1's job 4 (predicted
/// 10 from job 1, the only run of theirs finished at 26) backfills at 30 beside job 2. Job 2
/// ends at 50 and job 3 moves up to 50.
///
/// ```text
///             0    10   20   30   40   50   60
/// tsafrir     [j1]      [ job 2 (2)    ]
///                                 [j4]      [j3 (4)]
/// estimates   [j1]      [ job 2 (2)    ][j3 (4)][j4]
/// ```
pub const USERS: &str = "; MaxProcs: 4
1  0 -1 10 4 -1 -1 4 100 -1 1 1 1 -1 1 -1 -1 -1
2 20 -1 30 2 -1 -1 2 100 -1 1 1 1 -1 1 -1 -1 -1
3 25 -1 10 4 -1 -1 4 100 -1 1 2 1 -1 1 -1 -1 -1
4 26 -1  5 2 -1 -1 2 100 -1 1 1 1 -1 1 -1 -1 -1
";

fn run(text: &str, predictor: Predictor, overrun: bool) -> SimOutput {
    let trace = Trace::parse(text, "tiny.swf", false).unwrap();
    let procs = trace.header.machine_size().unwrap().unwrap();
    let conv = Converter::new(procs, Semantics::Default).overrun(overrun);
    let w = Workload::from_trace_with(&trace, conv);
    let prediction = Prediction { predictor, overrun };
    simulate_with(
        &w,
        procs,
        &Policy::easy(),
        Semantics::Default,
        &prediction,
        &mut |_| {},
    )
    .unwrap()
}

fn column(out: &SimOutput, f: impl Fn(&foresight_sim::Outcome) -> i64) -> Vec<i64> {
    out.outcomes.iter().map(f).collect()
}

#[test]
fn tsafrir_predictions_backfill_and_a_short_one_is_corrected() {
    let out = run(USERS, Predictor::Tsafrir, false);
    assert_eq!(column(&out, |o| o.start.secs()), vec![0, 20, 50, 30]);
    assert_eq!(column(&out, |o| o.end.secs()), vec![10, 50, 60, 35]);
    assert_eq!(column(&out, |o| o.plan), vec![100, 10, 100, 10]);
    assert_eq!(column(&out, |o| i64::from(o.corrections)), vec![0, 1, 0, 0]);
    assert_eq!(out.metrics.mean_wait, (25.0 + 4.0) / 4.0);

    let plain = run(USERS, Predictor::None, false);
    assert_eq!(column(&plain, |o| o.start.secs()), vec![0, 20, 50, 60]);
    assert_eq!(column(&plain, |o| o.plan), vec![100, 100, 100, 100]);
}

/// Two processors. Job 1 asks for 60 s and runs 200; job 2 (10 s) waits for it. Kept past
/// its estimate, job 1 is planned to 60, then 60 + 1 min, then 60 + 6 min, and ends at 200,
/// where job 2 starts. Clipped, it is killed at 60 and job 2 starts then.
const OVERRUN: &str = "; MaxProcs: 2
1 0 -1 200 2 -1 -1 2 60 -1 1 1 1 -1 1 -1 -1 -1
2 0 -1  10 2 -1 -1 2 10 -1 1 2 1 -1 1 -1 -1 -1
";

#[test]
fn runs_past_the_estimate_climb_the_correction_ladder_when_kept() {
    let kept = run(OVERRUN, Predictor::None, true);
    assert_eq!(column(&kept, |o| o.start.secs()), vec![0, 200]);
    assert_eq!(column(&kept, |o| o.end.secs()), vec![200, 210]);
    assert_eq!(column(&kept, |o| i64::from(o.corrections)), vec![2, 0]);
    let clipped = run(OVERRUN, Predictor::None, false);
    assert_eq!(column(&clipped, |o| o.start.secs()), vec![0, 60]);
    assert_eq!(column(&clipped, |o| o.end.secs()), vec![60, 70]);
    assert_eq!(column(&clipped, |o| i64::from(o.corrections)), vec![0, 0]);
}

/// A synthetic workload under every predictor and both backfill orders, with runs past the
/// estimate kept: never more processors in use than the machine has, and every job that
/// was not allowed to overrun ends by its estimate.
#[test]
fn predicted_runs_never_overbook() {
    let w = Workload::synthetic(600, 32, 0.95, 7);
    for predictor in [Predictor::None, Predictor::Tsafrir, Predictor::App] {
        for order in [
            foresight_core::BackfillOrder::Fcfs,
            foresight_core::BackfillOrder::Spf,
        ] {
            let policy = Policy {
                backfill_order: order,
                ..Policy::easy()
            };
            let prediction = Prediction {
                predictor,
                overrun: false,
            };
            let out = simulate_with(
                &w,
                32,
                &policy,
                Semantics::Default,
                &prediction,
                &mut |_| {},
            )
            .unwrap();
            let mut edges: Vec<(i64, i64)> = Vec::new();
            for o in &out.outcomes {
                assert!(
                    o.runtime() <= o.estimate,
                    "{predictor:?}: killed at the estimate"
                );
                assert!(o.plan <= o.estimate);
                edges.push((o.start.secs(), i64::from(o.procs)));
                edges.push((o.end.secs(), -i64::from(o.procs)));
            }
            edges.sort();
            let mut used = 0;
            for (t, d) in edges {
                used += d;
                assert!(used <= 32, "{predictor:?} {order:?}: {used} in use at {t}");
            }
        }
    }
}
