//! Absolute priorities in `sim grid` on random small grids: the simulator drives the
//! service's broker, and after every event its own record of what runs where is held to the
//! invariants `properties/preempt.rs` holds the broker's small driver to (the same checker,
//! `foresight-core/tests/levels_check`): no processor is double-booked at any instant
//! (suspended jobs hold none), after a cycle no job waits on processors lower levels hold,
//! and every accepted global job ends.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

#[path = "../../../foresight-core/tests/levels_check/mod.rs"]
mod levels_check;

use foresight_sim::grid::{
    lookahead_trace, lookahead_watched, simulate_grid, BrokerKind, GridConfig, LookaheadTrace,
    TracedJob,
};
use levels_check::Sight;
use proptest::prelude::*;

/// A grid of `sizes` clusters with local load `load`, and a global stream of `levels`
/// levels, a share `requeue` of its jobs requeueable, arriving `rate` an hour for 3 hours.
fn grid(sizes: &[u32], load: f64, levels: u32, requeue: f64, rate: f64, seed: u64) -> String {
    let mut text =
        "days = 0.125\ncycle_seconds = 60\nlead_time_seconds = 0\nhorizon_hours = 24\n".to_string();
    for (k, procs) in sizes.iter().enumerate() {
        text.push_str(&format!(
            "[[cluster]]\nname = \"c{k}\"\nprocs = {procs}\n\
             local = {{ load = {load}, seed = {} }}\n",
            seed + k as u64
        ));
    }
    let most = sizes.iter().copied().max().unwrap_or(1);
    text.push_str(&format!(
        "[global]\narrivals_per_hour = {rate}\nprocs = [1, {most}]\n\
         runtime_seconds = [60, 1800]\nprice = [1.0, 1.0]\nlevels = {levels}\n\
         requeue_share = {requeue}\nseed = {seed}\n"
    ));
    text
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn levels_in_sim_grid_keep_the_brokers_invariants(
        sizes in proptest::collection::vec(4u32..=8, 1..=2),
        load in 0.0f64..0.6,
        requeue in prop_oneof![Just(0.0), Just(0.5), Just(1.0)],
        rate in 4.0f64..20.0,
        seed in 0u64..1_000,
    ) {
        let cfg = GridConfig::parse(&grid(&sizes, load, 4, requeue, rate, seed), "grid.toml")
            .unwrap();
        let mut failure: Option<String> = None;
        let mut cycles = 0u64;
        let report = lookahead_watched(&cfg, &mut |m| {
            if failure.is_some() {
                return;
            }
            let sight = Sight { broker: m.broker, now: m.now, running: m.running };
            let mut checked = sight.capacity();
            if m.cycle {
                cycles += 1;
                checked = checked.and_then(|()| {
                    sight.no_job_waits_on_lower_levels(m.requeued, m.started_global)
                });
            }
            failure = checked.err();
        })
        .unwrap();
        prop_assert!(failure.is_none(), "{}", failure.unwrap_or_default());
        prop_assert!(cycles > 0);
        prop_assert_eq!(report.global_unfinished, 0, "{:?}", report);
        prop_assert_eq!(
            report.global.jobs + report.global_refused + report.global_cancelled,
            report.global_submitted
        );
        let levels = report.levels.unwrap();
        let finished: u64 = levels.per_level.iter().map(|l| l.finished).sum();
        prop_assert_eq!(finished, report.global.jobs);
        prop_assert!(levels.resumptions + levels.requeues <= levels.preemptions);
        if requeue == 0.0 {
            prop_assert_eq!(levels.requeues, 0);
            prop_assert_eq!(levels.lost_proc_seconds, 0.0);
        }
        if requeue == 1.0 {
            prop_assert_eq!(levels.resumptions, 0);
            prop_assert_eq!(levels.requeues, levels.preemptions);
        }
    }
}

/// The random grids do preempt: the property above is not vacuous.
#[test]
fn a_loaded_grid_of_four_levels_preempts_suspends_and_requeues() {
    let cfg = GridConfig::parse(&grid(&[8, 6], 0.3, 4, 0.5, 16.0, 7), "grid.toml").unwrap();
    let r = simulate_grid(&cfg, BrokerKind::Lookahead).unwrap();
    let levels = r.levels.unwrap();
    assert!(levels.preemptions > 0, "{levels:?}");
    assert!(levels.resumptions > 0 && levels.requeues > 0, "{levels:?}");
    assert!(levels.lost_proc_seconds > 0.0, "{levels:?}");
    assert_eq!(r.global_unfinished, 0);
    assert_eq!(levels.per_level.len(), 4);
}

/// One cluster of 4 with one local job of 1 s at 0, and a global trace of two whole-cluster jobs: the
/// first (SWF job 1) submitted at 0 for 1000 s, the second at 100 for 200 s, their queues
/// (`q1`, `q2`) read as levels.
fn two_jobs(dir: &std::path::Path, q1: i64, q2: i64) -> String {
    let trace = dir.join(format!("global-{q1}-{q2}.swf"));
    std::fs::write(
        &trace,
        format!(
            "; MaxProcs: 4\n\
             1 0 -1 1000 4 -1 -1 4 1000 -1 1 1 1 -1 {q1} -1 -1 -1\n\
             2 100 -1 200 4 -1 -1 4 200 -1 1 1 1 -1 {q2} -1 -1 -1\n"
        ),
    )
    .unwrap();
    let local = dir.join("local.swf");
    std::fs::write(&local, "1 0 -1 1 1 -1 -1 1 1 -1 1 1 1 -1 1 -1 -1 -1\n").unwrap();
    format!(
        "days = 1\ncycle_seconds = 60\nlead_time_seconds = 0\nhorizon_hours = 24\n\
         [[cluster]]\nname = \"c0\"\nprocs = 4\nlocal = {{ trace = {:?} }}\n\
         [global]\ntrace = {:?}\nprice = [1.0, 1.0]\nlevels = 2\nlevels_from_queue = true\n",
        local.display().to_string(),
        trace.display().to_string()
    )
}

#[test]
fn levels_can_be_read_from_the_traces_queue_numbers() {
    let dir = tempfile::tempdir().unwrap();
    // The second job is of the higher level: it suspends the first, whose end moves by the
    // second's run.
    let cfg = GridConfig::parse(&two_jobs(dir.path(), 0, 1), "grid.toml").unwrap();
    let t = lookahead_trace(&cfg).unwrap();
    let levels: Vec<u32> = t.global.iter().map(|(g, _)| g.priority).collect();
    assert_eq!(levels, [0, 1]);
    // (start, end) of each, the start being its last (a resumption's).
    let run = |t: &LookaheadTrace, i: u64| {
        let start = t.starts[0][&TracedJob::Global(i)].0;
        (start, t.ends[i as usize].unwrap().0)
    };
    let ((s1, e1), (s2, e2)) = (run(&t, 0), run(&t, 1));
    // Cycles every 60 s: the first starts at the cycle at 60 and runs 60 s; the second,
    // submitted at 100, suspends it at 120 and runs to 320; the first resumes at the cycle
    // at 360 with 940 s left.
    assert_eq!((s2, e2), (120, 320));
    assert_eq!((s1, e1), (360, 1300));
    // The other way round nothing is preempted: the first runs through, the second starts
    // at the cycle after its end.
    let cfg = GridConfig::parse(&two_jobs(dir.path(), 1, 0), "grid.toml").unwrap();
    let t = lookahead_trace(&cfg).unwrap();
    let ((s1, e1), (s2, e2)) = (run(&t, 0), run(&t, 1));
    assert_eq!([(s1, e1), (s2, e2)], [(60, 1060), (1080, 1280)]);
}

#[test]
fn a_queue_outside_the_levels_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let text = two_jobs(dir.path(), 0, 5);
    let e = GridConfig::parse(&text, "grid.toml")
        .and_then(|cfg| lookahead_trace(&cfg).map(|_| ()))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("job 2: queue 5 is not a level within 0..2"),
        "{e}"
    );
    assert!(e.contains("global-0-5.swf"), "{e}");
    let synthetic =
        "days = 1\n[[cluster]]\nname = \"c0\"\nprocs = 4\nlocal = { load = 0.0, seed = 1 }\n\
                     [global]\nprice = [1.0, 1.0]\nlevels = 2\nlevels_from_queue = true\n";
    let e = GridConfig::parse(synthetic, "grid.toml")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("global.levels_from_queue needs global.trace"),
        "{e}"
    );
}
