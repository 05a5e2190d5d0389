//! Simulator behaviour on small workloads: exact schedules, invariants, determinism, and the
//! SWF reader's refusal to panic on any input.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use foresight_core::policy::BackfillChoice;
use foresight_core::Policy;
use foresight_sim::output::{write_csv, write_swf};
use foresight_sim::{simulate, Semantics, SimOutput, Trace, Workload};
use proptest::prelude::*;

/// Four processors. Job 1 holds two until 100; job 2 needs all four; job 3 (two for 20 s)
/// fits beside job 1 and ends long before job 2 could start, so EASY backfills it at 10.
///
/// ```text
///        0    10   30        100       150   170
/// EASY   [ job1 (2)           ][ job2 (4) ]
///             [j3]
/// FCFS   [ job1 (2)           ][ job2 (4) ][j3]
/// ```
const TINY: &str = "; MaxProcs: 4
1   0 -1 100 2 -1 -1 2 100 -1 1 1 1 -1 1 -1 -1 -1
2   0 -1  50 4 -1 -1 4  50 -1 1 2 1 -1 1 -1 -1 -1
3  10 -1  20 2 -1 -1 2  20 -1 1 3 1 -1 1 -1 -1 -1
";

fn run(text: &str, policy: Policy, semantics: Semantics) -> SimOutput {
    let trace = Trace::parse(text, "tiny.swf", false).unwrap();
    let procs = trace.header.machine_size().unwrap().unwrap();
    let w = Workload::from_trace(&trace, procs, semantics);
    simulate(&w, procs, &policy, semantics, &mut |_| {}).unwrap()
}

fn starts(out: &SimOutput) -> Vec<i64> {
    out.outcomes.iter().map(|o| o.start.secs()).collect()
}

#[test]
fn tiny_trace_exact_starts() {
    for semantics in [Semantics::Default, Semantics::Pyss] {
        assert_eq!(starts(&run(TINY, Policy::easy(), semantics)), [0, 100, 10]);
        assert_eq!(
            starts(&run(TINY, Policy::conservative(), semantics)),
            [0, 100, 10]
        );
        assert_eq!(starts(&run(TINY, Policy::fcfs(), semantics)), [0, 100, 150]);
        assert_eq!(
            starts(&run(TINY, Policy::first_fit(None), semantics)),
            [0, 100, 10]
        );
    }
    let out = run(TINY, Policy::fcfs(), Semantics::Default);
    assert!((out.metrics.mean_wait - 80.0).abs() < 1e-9);
    assert_eq!(out.metrics.makespan, 170);
    // Σ procs·runtime = 200 + 200 + 40 over 4 × 170.
    assert!((out.metrics.utilization - 440.0 / 680.0).abs() < 1e-12);
}

/// TINY on a machine of 2³² − 1 processors, every job scaled: the same decisions, and no
/// state sized by the machine (it used to abort on a 34 GB allocation).
#[test]
fn a_machine_of_u32_max_processors_runs_like_a_small_one() {
    let huge = "; MaxProcs: 4294967295
1   0 -1 100 2147483648 -1 -1 2147483648 100 -1 1 1 1 -1 1 -1 -1 -1
2   0 -1  50 4294967295 -1 -1 4294967295  50 -1 1 2 1 -1 1 -1 -1 -1
3  10 -1  20 2147483647 -1 -1 2147483647  20 -1 1 3 1 -1 1 -1 -1 -1
";
    for semantics in [Semantics::Default, Semantics::Pyss] {
        for (policy, want) in [
            (Policy::easy(), [0, 100, 10]),
            (Policy::conservative(), [0, 100, 10]),
            (Policy::fcfs(), [0, 100, 150]),
            (Policy::first_fit(None), [0, 100, 10]),
        ] {
            let name = policy.name();
            assert_eq!(starts(&run(huge, policy, semantics)), want, "{name}");
        }
    }
}

#[test]
fn default_semantics_kills_at_the_estimate_and_skips_impossible_jobs() {
    let text = "; MaxProcs: 4
1 0 -1 500 1 -1 -1 1 100 -1 1 1 1 -1 1 -1 -1 -1
2 0 -1 0 1 -1 -1 1 100 -1 1 1 1 -1 1 -1 -1 -1
3 0 -1 10 8 -1 -1 8 100 -1 1 1 1 -1 1 -1 -1 -1
4 0 -1 10 -1 -1 -1 -1 100 -1 1 1 1 -1 1 -1 -1 -1
5 5 -1 10 1 -1 -1 -1 -1 -1 1 1 1 -1 1 -1 -1 -1
";
    let out = run(text, Policy::easy(), Semantics::Default);
    assert_eq!(out.metrics.jobs, 2);
    assert_eq!(out.metrics.skipped, 3);
    assert_eq!(out.metrics.cut_at_estimate, 1);
    assert_eq!(out.outcomes[0].runtime(), 100, "killed at its estimate");
    assert_eq!(
        out.outcomes[1].estimate, 10,
        "no requested time: the runtime is the estimate"
    );
    // pyss keeps every job: broken ones become 1-second jobs submitted no earlier than 1.
    let out = run(text, Policy::easy(), Semantics::Pyss);
    assert_eq!(out.metrics.jobs, 5);
    let job = |id: i64| *out.outcomes.iter().find(|o| o.trace_id == id).unwrap();
    assert_eq!(job(2).runtime(), 1);
    assert_eq!(job(2).submit.secs(), 1);
    assert_eq!(job(3).procs, 4, "clamped to the machine");
    // requested time −1: estimate = runtime, actual = max(min(−1, 10), 1) = 1 (as pyss).
    assert_eq!(job(5).runtime(), 1);
    assert_eq!(job(5).estimate, 10);
}

#[test]
fn synthetic_runs_are_deterministic_and_never_overbook() {
    let w = Workload::synthetic(3000, 64, 0.9, 7);
    for mut policy in [
        Policy::easy(),
        Policy::conservative(),
        Policy::depth(3),
        Policy::fcfs(),
    ] {
        for choice in [BackfillChoice::FirstFit, BackfillChoice::BestFit] {
            if policy.reservation_depth == 0 {
                policy.backfill = BackfillChoice::None;
            } else {
                policy.backfill = choice;
            }
            let a = simulate(&w, 64, &policy, Semantics::Default, &mut |_| {}).unwrap();
            let b = simulate(&w, 64, &policy, Semantics::Default, &mut |_| {}).unwrap();
            assert_eq!(
                a.outcomes,
                b.outcomes,
                "{}: same input, same schedule",
                policy.name()
            );
            // Sweep: +procs at start, −procs at end; ends before starts at one instant.
            let mut ev: Vec<(i64, i64)> = a
                .outcomes
                .iter()
                .flat_map(|o| {
                    [
                        (o.start.secs(), i64::from(o.procs)),
                        (o.end.secs(), -i64::from(o.procs)),
                    ]
                })
                .collect();
            ev.sort();
            let mut used = 0;
            for (_, d) in ev {
                used += d;
                assert!(
                    used <= 64,
                    "{}: more than 64 processors in use",
                    policy.name()
                );
            }
            for o in &a.outcomes {
                assert!(o.start >= o.submit);
            }
        }
    }
}

#[test]
fn schedules_write_as_csv_and_swf() {
    let trace = Trace::parse(TINY, "tiny.swf", false).unwrap();
    let w = Workload::from_trace(&trace, 4, Semantics::Default);
    let out = simulate(&w, 4, &Policy::easy(), Semantics::Default, &mut |_| {}).unwrap();
    let mut csv = Vec::new();
    write_csv(&mut csv, &out.outcomes).unwrap();
    let csv = String::from_utf8(csv).unwrap();
    assert!(csv.starts_with("id,trace_id,submit,start,end,wait,runtime,procs,estimate\n"));
    assert!(csv.contains("\n2,3,10,10,30,0,20,2,20\n"), "{csv}");
    let mut swf = Vec::new();
    write_swf(&mut swf, &out.outcomes, Some(&trace), "test").unwrap();
    let again = Trace::parse(std::str::from_utf8(&swf).unwrap(), "out.swf", false).unwrap();
    let waits: Vec<i64> = again.records.iter().map(|r| r.wait).collect();
    assert_eq!(waits, [0, 100, 0]);
    assert_eq!(again.header.max_procs, Some(4));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// No input makes the reader panic: it returns records or an error naming a line.
    #[test]
    fn reader_never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let reader = foresight_sim::SwfReader::new(&bytes[..], "fuzz.swf");
        for r in reader {
            if let Err(e) = r {
                prop_assert!(e.to_string().starts_with("fuzz.swf:"));
            }
        }
    }

    /// Lines made of SWF-like tokens (numbers, signs, dots, junk) never panic either, and
    /// lenient mode accounts for every line.
    #[test]
    fn reader_handles_token_soup(lines in proptest::collection::vec(
        proptest::collection::vec(prop_oneof![
            Just("-1".to_string()), Just("0".to_string()), Just("1.5".to_string()),
            Just("99999999999999999999".to_string()), Just("-".to_string()), Just("1e400".to_string()),
            Just(";".to_string()), Just("x".to_string()), (0i64..100000).prop_map(|n| n.to_string()),
        ], 0..22), 0..30)) {
        let text: String = lines.iter().map(|l| l.join(" ") + "\n").collect();
        let trace = Trace::parse(&text, "soup.swf", true).unwrap();
        let data_lines = lines.iter().filter(|l| !l.is_empty() && l[0] != ";" && !l[0].starts_with(';')).count();
        prop_assert_eq!(trace.records.len() as u64 + trace.malformed, data_lines as u64);
    }
}
