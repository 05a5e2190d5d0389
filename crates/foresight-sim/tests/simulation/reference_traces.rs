//! The pyss reference figures (mean wait, mean bounded slowdown, utilization) on real
//! Parallel Workloads Archive traces, reproduced within 0.1 %.
//!
//! The traces are read in place from `$FORESIGHT_TRACES`, else `../shared/traces` beside the
//! checkout. Where they are missing the test says so and passes, except under CI (`CI` set),
//! where a missing trace is a failure.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use foresight_core::Policy;
use foresight_sim::{simulate, Semantics, Trace, Workload};
use std::path::PathBuf;

fn traces_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("FORESIGHT_TRACES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces")
        });
    if dir.join("KTH-SP2-1996-2.1-cln.swf.gz").exists() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "reference traces not found in {} (set FORESIGHT_TRACES)",
        dir.display()
    );
    eprintln!("reference traces not found in {}: skipped", dir.display());
    None
}

struct Case {
    trace: &'static str,
    procs: u32,
    policy: fn() -> Policy,
    mean_wait: f64,
    mean_bsld: f64,
    utilization: f64,
}

fn check(cases: &[Case]) {
    let Some(dir) = traces_dir() else { return };
    for c in cases {
        let trace = Trace::read(&dir.join(c.trace), false).expect("trace reads");
        assert_eq!(
            trace.header.machine_size(),
            Ok(Some(c.procs)),
            "{}",
            c.trace
        );
        let workload = Workload::from_trace(&trace, c.procs, Semantics::Pyss);
        let policy = (c.policy)();
        let out = simulate(&workload, c.procs, &policy, Semantics::Pyss, &mut |_| {})
            .expect("simulation runs");
        let m = &out.metrics;
        let name = format!("{} {}", c.trace, policy.name());
        let close = |got: f64, want: f64, decimals: i32| {
            // Within 0.1 %, or equal at the precision the reference was printed with.
            let half_unit = 0.5 * 10f64.powi(-decimals);
            (got - want).abs() <= (want.abs() * 1e-3).max(half_unit)
        };
        assert!(
            close(m.mean_wait, c.mean_wait, 1),
            "{name}: mean wait {} vs {}",
            m.mean_wait,
            c.mean_wait
        );
        assert!(
            close(m.mean_bsld, c.mean_bsld, 2),
            "{name}: mean bsld {} vs {}",
            m.mean_bsld,
            c.mean_bsld
        );
        assert!(
            close(m.utilization, c.utilization, 4),
            "{name}: utilization {} vs {}",
            m.utilization,
            c.utilization
        );
        assert_eq!(m.skipped, 0, "{name}: pyss semantics skips nothing");
    }
}

#[test]
fn kth_sp2_matches_pyss() {
    check(&[
        Case {
            trace: "KTH-SP2-1996-2.1-cln.swf.gz",
            procs: 100,
            policy: Policy::easy,
            mean_wait: 6899.1,
            mean_bsld: 92.87,
            utilization: 0.6990,
        },
        Case {
            trace: "KTH-SP2-1996-2.1-cln.swf.gz",
            procs: 100,
            policy: Policy::conservative,
            mean_wait: 7296.7,
            mean_bsld: 88.29,
            utilization: 0.6990,
        },
        Case {
            trace: "KTH-SP2-1996-2.1-cln.swf.gz",
            procs: 100,
            policy: Policy::fcfs,
            mean_wait: 354156.6,
            mean_bsld: 6829.04,
            utilization: 0.6985,
        },
    ]);
}

#[test]
fn sdsc_sp2_matches_pyss() {
    check(&[
        Case {
            trace: "SDSC-SP2-1998-4.2-cln.swf.gz",
            procs: 128,
            policy: Policy::easy,
            mean_wait: 18941.7,
            mean_bsld: 106.96,
            utilization: 0.8245,
        },
        Case {
            trace: "SDSC-SP2-1998-4.2-cln.swf.gz",
            procs: 128,
            policy: Policy::conservative,
            mean_wait: 19845.7,
            mean_bsld: 110.91,
            utilization: 0.8243,
        },
    ]);
}

#[test]
fn ctc_sp2_matches_pyss() {
    check(&[
        Case {
            trace: "CTC-SP2-1996-3.1-cln.swf.gz",
            procs: 338,
            policy: Policy::easy,
            mean_wait: 13756.5,
            mean_bsld: 48.07,
            utilization: 0.8358,
        },
        Case {
            trace: "CTC-SP2-1996-3.1-cln.swf.gz",
            procs: 338,
            policy: Policy::conservative,
            mean_wait: 17587.8,
            mean_bsld: 54.27,
            utilization: 0.8358,
        },
        Case {
            trace: "CTC-SP2-1996-3.1-cln.swf.gz",
            procs: 338,
            policy: Policy::fcfs,
            mean_wait: 655535.6,
            mean_bsld: 3667.85,
            utilization: 0.7972,
        },
    ]);
}

/// Replaying a file while it is read (what `foresight sim run` does) gives the same schedule
/// as reading it whole first.
#[test]
fn streaming_replay_matches_whole_reads() {
    let Some(dir) = traces_dir() else { return };
    let path = dir.join("SDSC-SP2-1998-4.2-cln.swf.gz");
    for semantics in [Semantics::Pyss, Semantics::Default] {
        let policy = Policy::easy();
        let streamed =
            foresight_sim::replay::replay(&path, None, false, &policy, semantics, &mut |_| {})
                .expect("replay runs");
        let trace = Trace::read(&path, false).expect("trace reads");
        let w = Workload::from_trace(&trace, 128, semantics);
        let whole = simulate(&w, 128, &policy, semantics, &mut |_| {}).expect("simulation runs");
        assert_eq!(streamed.procs, 128);
        assert_eq!(streamed.output.outcomes, whole.outcomes);
        assert_eq!(streamed.output.metrics, whole.metrics);
        assert_eq!(streamed.trace.records.len(), trace.records.len());
    }
}

/// Every trace of the archive set reads without a malformed line, and every policy runs it
/// to the end in default semantics (every accepted job reaches a final state).
#[test]
fn every_trace_runs_under_default_semantics() {
    let Some(dir) = traces_dir() else { return };
    for name in [
        "NASA-iPSC-1993-3.1-cln.swf.gz",
        "lublin_256.swf",
        "KTH-SP2-1996-2.1-cln.swf.gz",
    ] {
        let trace = Trace::read(&dir.join(name), false).expect("trace reads");
        let procs = trace
            .header
            .machine_size()
            .ok()
            .flatten()
            .expect("header has the size");
        let w = Workload::from_trace(&trace, procs, Semantics::Default);
        assert_eq!(
            w.jobs.len() as u64 + w.skipped.total(),
            trace.records.len() as u64,
            "{name}: every record is simulated or counted as skipped"
        );
        for policy in [
            Policy::fcfs(),
            Policy::easy(),
            Policy::depth(4),
            Policy::first_fit(Some(8)),
        ] {
            let out = simulate(&w, procs, &policy, Semantics::Default, &mut |_| {})
                .unwrap_or_else(|e| panic!("{name} {}: {e}", policy.name()));
            assert_eq!(out.outcomes.len(), w.jobs.len());
            assert!(out.metrics.utilization > 0.0 && out.metrics.utilization <= 1.0);
        }
    }
}

/// The default limits of a trace (`swf::Limits`) admit every trace here, the largest
/// (HPC2N, 202 871 jobs, 19 MB uncompressed) included, with room to spare.
#[test]
fn every_archive_trace_reads_within_the_default_swf_limits() {
    let Some(dir) = traces_dir() else { return };
    let limits = foresight_sim::swf::Limits::default();
    for (name, jobs) in [
        ("HPC2N-2002-2.2-cln.swf.gz", 202_871),
        ("SDSC-DS-2004-2.1-cln.swf.gz", 96_069),
        ("lublin_256.swf", 10_000),
    ] {
        let trace = Trace::read_within(&dir.join(name), false, limits).expect(name);
        assert_eq!(trace.records.len(), jobs, "{name}");
        assert!(limits.max_jobs >= 40 * jobs as u64, "{name}");
    }
}
