//! Runtime prediction in the simulator on hand-checked traces: Tsafrir's predictor fed by the
//! runs that finished, the corrections when a job outlives its prediction (the paper's steps,
//! or straight to the estimate), the starvation guard, and runs past the estimate kept with
//! `overrun`.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use foresight_core::predict::{Correction, Predictor};
use foresight_core::{Dur, Policy};
use foresight_sim::workload::Converter;
use foresight_sim::{simulate_with, Prediction, Semantics, SimOutput, Trace, Workload};

/// Four processors, `tsafrir-last1` corrected to the estimate, unguarded (the variant that
/// predicts from a single run). User 1's job 1 runs 10 s, so their job 2 (estimate 100) is
/// predicted at 10 but runs 30: at 30 it is planned to its estimate (120), user 2's job 3 (the whole
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
    let policy = Policy {
        correction: Correction::Estimate,
        starvation_guard: false,
        ..Policy::easy()
    };
    run_with(text, predictor, overrun, &policy)
}

fn run_with(text: &str, predictor: Predictor, overrun: bool, policy: &Policy) -> SimOutput {
    let trace = Trace::parse(text, "tiny.swf", false).unwrap();
    let procs = trace.header.machine_size().unwrap().unwrap();
    let conv = Converter::new(procs, Semantics::Default).overrun(overrun);
    let w = Workload::from_trace_with(&trace, conv);
    let prediction = Prediction { predictor, overrun };
    simulate_with(
        &w,
        procs,
        policy,
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
    let out = run(USERS, Predictor::TsafrirLast1, false);
    assert_eq!(column(&out, |o| o.start.secs()), vec![0, 20, 50, 30]);
    assert_eq!(column(&out, |o| o.end.secs()), vec![10, 50, 60, 35]);
    assert_eq!(column(&out, |o| o.plan), vec![100, 10, 100, 10]);
    assert_eq!(column(&out, |o| i64::from(o.corrections)), vec![0, 1, 0, 0]);
    assert_eq!(out.metrics.mean_wait, (25.0 + 4.0) / 4.0);

    let plain = run(USERS, Predictor::None, false);
    assert_eq!(column(&plain, |o| o.start.secs()), vec![0, 20, 50, 60]);
    assert_eq!(column(&plain, |o| o.plan), vec![100, 100, 100, 100]);
}

/// The paper's predictor needs two terminated jobs of the user: on the same trace user 1's
/// job 2 (one terminated job before it) and job 4 (one terminated by 26) are planned by
/// their estimates, and the schedule is plain EASY's.
#[test]
fn the_papers_predictor_waits_for_two_terminated_jobs() {
    let out = run(USERS, Predictor::Tsafrir, false);
    let plain = run(USERS, Predictor::None, false);
    assert_eq!(column(&out, |o| o.plan), vec![100, 100, 100, 100]);
    assert_eq!(
        column(&out, |o| o.start.secs()),
        column(&plain, |o| o.start.secs())
    );
}

/// Four processors. User 1's jobs 1 and 2 run 10 s each, so their job 5 (estimate 1000,
/// runs 500) is predicted at 10. User 2's job 3 takes three processors from 20 to 120; user
/// 3's job 4 (the whole machine, 10 s) is reserved at 120.
///
/// Unguarded, job 5 backfills at 22 on its prediction (ends by 32, before 120), outlives it
/// and climbs the paper's steps: 10 + 1 min (to 92), 10 + 5 min (to 332, past 120: job 4 is
/// moved to 332), 10 + 15 min (to 932: job 4 to 932); job 5 ends at 522 and job 4 starts
/// then, 501 s after its submission. Corrected to the estimate instead, job 5 is planned to
/// 1000 at 32 (job 4 to 1022), once, and job 4 also starts at 522.
///
/// Guarded from the first second, job 5 may not pass: run to its estimate (1022) it would hold a processor job 4
/// needs at its EASY shadow time (120). Job 4 runs 120–130 and job 5 from 130, as under
/// plain EASY.
///
/// ```text
///              0   22  120 130       522 532
/// unguarded    j1,j2 [j3  ]
///                  [ job 5 (1 proc)   ][j4]
/// guarded      j1,j2 [j3  ][j4][ job 5 ...
/// ```
const STARVE: &str = "; MaxProcs: 4
1  0 -1  10 1 -1 -1 1 1000 -1 1 1 1 -1 1 -1 -1 -1
2  0 -1  10 1 -1 -1 1 1000 -1 1 1 1 -1 1 -1 -1 -1
3 20 -1 100 3 -1 -1 3  100 -1 1 2 1 -1 1 -1 -1 -1
4 21 -1  10 4 -1 -1 4   10 -1 1 3 1 -1 1 -1 -1 -1
5 22 -1 500 1 -1 -1 1 1000 -1 1 1 1 -1 1 -1 -1 -1
";

#[test]
fn the_guard_keeps_easys_start_for_the_reserved_job() {
    let policy = |correction, starvation_guard| Policy {
        correction,
        starvation_guard,
        guard_after: Dur(0),
        ..Policy::easy()
    };
    let open = run_with(
        STARVE,
        Predictor::Tsafrir,
        false,
        &policy(Correction::Incremental, false),
    );
    assert_eq!(column(&open, |o| o.start.secs()), vec![0, 0, 20, 522, 22]);
    assert_eq!(column(&open, |o| o.plan), vec![1000, 1000, 100, 10, 10]);
    assert_eq!(
        column(&open, |o| i64::from(o.corrections)),
        vec![0, 0, 0, 0, 3]
    );
    assert_eq!(open.metrics.max_wait, 501);

    let to_estimate = run_with(
        STARVE,
        Predictor::Tsafrir,
        false,
        &policy(Correction::Estimate, false),
    );
    assert_eq!(
        column(&to_estimate, |o| o.start.secs()),
        vec![0, 0, 20, 522, 22]
    );
    assert_eq!(
        column(&to_estimate, |o| i64::from(o.corrections)),
        vec![0, 0, 0, 0, 1]
    );

    let guarded = run_with(
        STARVE,
        Predictor::Tsafrir,
        false,
        &policy(Correction::Incremental, true),
    );
    assert_eq!(
        column(&guarded, |o| o.start.secs()),
        vec![0, 0, 20, 120, 130]
    );
    // Started at 130 on its prediction, job 5 still climbs the steps (to 140, 200, 440).
    assert_eq!(
        column(&guarded, |o| i64::from(o.corrections)),
        vec![0, 0, 0, 0, 3]
    );
    assert_eq!(guarded.metrics.max_wait, 108);
    let plain = run_with(STARVE, Predictor::None, false, &Policy::easy());
    assert_eq!(
        column(&plain, |o| o.start.secs()),
        column(&guarded, |o| o.start.secs())
    );
    // Job 4 has waited 1 s at 22: a guard from 2 s on lets job 5 pass, as unguarded.
    let later = Policy {
        guard_after: Dur(2),
        ..policy(Correction::Incremental, true)
    };
    let late = run_with(STARVE, Predictor::Tsafrir, false, &later);
    assert_eq!(column(&late, |o| o.start.secs()), vec![0, 0, 20, 522, 22]);
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
    for (predictor, guard) in [
        (Predictor::None, true),
        (Predictor::Tsafrir, false),
        (Predictor::Tsafrir, true),
        (Predictor::TsafrirLast1, false),
        (Predictor::App, true),
    ] {
        for order in [
            foresight_core::BackfillOrder::Fcfs,
            foresight_core::BackfillOrder::Spf,
        ] {
            let policy = Policy {
                backfill_order: order,
                starvation_guard: guard,
                guard_after: Dur(0),
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
