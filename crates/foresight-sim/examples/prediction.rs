//! Runtime prediction on the archive traces, variant by variant, with the tail of the waits
//! beside the means: EASY; ordering only (shortest-estimate-first backfill, no prediction);
//! predictions only (Tsafrir's predictor, queue-order backfill); EASY++ (predictions and
//! shortest-predicted-first backfill) for each predictor (`tsafrir`, the paper's; and
//! `tsafrir-last1`) and correction (`incremental`, the paper's; `estimate`), without and
//! with the starvation guard; and EASY with the true runtimes as estimates. All in `default`
//! semantics (runtimes cut at the estimate). The guard protects a job once it has waited a
//! day (the default), or `$GUARD_AFTER` seconds.
//!
//! Prints Markdown tables, one row per trace: mean bounded slowdown, mean wait, 99th
//! percentile wait, largest wait, jobs waiting over 1 and 5 days, and the accuracy of
//! estimates and predictions (mean of min(p, r) / max(p, r)).
//!
//! The traces are read in place from the directory given as the first argument, else
//! `$FORESIGHT_TRACES`, else `../shared/traces` beside the checkout; the trace names that
//! follow (file names) narrow the run. With `--sensitivity N` (before the directory), every
//! variant also runs on N copies of each trace with 0.01 % of its jobs removed at random
//! (seeds 1..=N), and the tables give the min–max interval over the copies.
//!
//! `cargo run --release -p foresight-sim --example prediction -- /work/shared/traces`

#![allow(clippy::print_stdout, clippy::print_stderr, clippy::unwrap_used)] // a report tool

use foresight_core::predict::{accuracy, Correction, Predictor};
use foresight_core::{BackfillOrder, Dur, Policy};
use foresight_sim::workload::Converter;
use foresight_sim::{simulate_with, Metrics, Prediction, Semantics, SimOutput, Trace, Workload};
use std::path::PathBuf;

/// The archive traces, in the row order of docs/src/research/prediction.md. NASA-iPSC
/// records no estimates: its estimates are the runtimes, so there EASY already plans with
/// the true runtimes.
const ARCHIVE: [&str; 6] = [
    "KTH-SP2-1996-2.1-cln.swf.gz",
    "SDSC-SP2-1998-4.2-cln.swf.gz",
    "CTC-SP2-1996-3.1-cln.swf.gz",
    "SDSC-DS-2004-2.1-cln.swf.gz",
    "HPC2N-2002-2.2-cln.swf.gz",
    "NASA-iPSC-1993-3.1-cln.swf.gz",
];

struct Variant {
    name: &'static str,
    predictor: Predictor,
    order: BackfillOrder,
    correction: Correction,
    guard: bool,
    true_runtimes: bool,
}

const fn v(
    name: &'static str,
    predictor: Predictor,
    order: BackfillOrder,
    correction: Correction,
    guard: bool,
) -> Variant {
    Variant {
        name,
        predictor,
        order,
        correction,
        guard,
        true_runtimes: false,
    }
}

use BackfillOrder::{Fcfs, Spf};
use Correction::{Estimate, Incremental};
use Predictor::{Tsafrir, TsafrirLast1};

const VARIANTS: [Variant; 12] = [
    v("EASY", Predictor::None, Fcfs, Incremental, true),
    v("ordering only", Predictor::None, Spf, Incremental, true),
    v("predictions only", Tsafrir, Fcfs, Incremental, false),
    v("EASY++", Tsafrir, Spf, Incremental, false),
    v("EASY++ guard", Tsafrir, Spf, Incremental, true),
    v("EASY++ est-corr", Tsafrir, Spf, Estimate, false),
    v("EASY++ est-corr guard", Tsafrir, Spf, Estimate, true),
    v("EASY++ last1", TsafrirLast1, Spf, Incremental, false),
    v("EASY++ last1 guard", TsafrirLast1, Spf, Incremental, true),
    v("EASY++ last1 est-corr", TsafrirLast1, Spf, Estimate, false),
    v(
        "EASY++ last1 est-corr guard",
        TsafrirLast1,
        Spf,
        Estimate,
        true,
    ),
    Variant {
        name: "true runtimes",
        predictor: Predictor::None,
        order: Fcfs,
        correction: Incremental,
        guard: true,
        true_runtimes: true,
    },
];

fn mean_accuracy(out: &SimOutput, plan: impl Fn(&foresight_sim::Outcome) -> i64) -> f64 {
    let n = out.outcomes.len().max(1) as f64;
    out.outcomes
        .iter()
        .map(|o| accuracy(Dur(plan(o)), Dur(o.runtime())))
        .sum::<f64>()
        / n
}

/// The guard's age: `$GUARD_AFTER` seconds, else the default.
fn guard_after() -> Dur {
    std::env::var("GUARD_AFTER")
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .map_or(Policy::easy().guard_after, Dur)
}

fn run(base: &Workload, procs: u32, v: &Variant) -> SimOutput {
    let mut w = base.clone();
    if v.true_runtimes {
        for j in &mut w.jobs {
            j.job.estimate = Dur(j.runtime.as_secs().max(1));
        }
    }
    let policy = Policy {
        backfill_order: v.order,
        correction: v.correction,
        starvation_guard: v.guard,
        guard_after: guard_after(),
        ..Policy::easy()
    };
    let prediction = Prediction {
        predictor: v.predictor,
        overrun: false,
    };
    simulate_with(
        &w,
        procs,
        &policy,
        Semantics::Default,
        &prediction,
        &mut |_| {},
    )
    .unwrap()
}

/// A copy of the workload without `k` jobs drawn by `seed` (a small xorshift, so that the
/// copies are the same on every machine).
fn without_some(base: &Workload, k: usize, seed: u64) -> Workload {
    let mut w = base.clone();
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for _ in 0..k {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let i = (x % w.jobs.len() as u64) as usize;
        w.jobs.remove(i);
    }
    // Ids are arrival indices.
    for (i, j) in w.jobs.iter_mut().enumerate() {
        j.job.id = foresight_core::JobId(i as u64);
    }
    w
}

type Row = (String, Vec<Vec<Metrics>>, [f64; 3]);

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut copies = 0u64;
    if args.first().map(String::as_str) == Some("--sensitivity") {
        copies = args.get(1).and_then(|n| n.parse().ok()).unwrap();
        args.drain(..2);
    }
    let mut args = args.into_iter();
    let dir = args
        .next()
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("FORESIGHT_TRACES").map(PathBuf::from))
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces")
        });
    let only: Vec<String> = args.collect();
    let mut rows: Vec<Row> = Vec::new();
    for name in ARCHIVE {
        if !only.is_empty() && !only.iter().any(|o| o == name) {
            continue;
        }
        let path = dir.join(name);
        if !path.exists() {
            eprintln!("{}: not found, skipped", path.display());
            continue;
        }
        let trace = Trace::read(&path, false).unwrap();
        let procs = trace.header.machine_size().unwrap().unwrap();
        let base = Workload::from_trace_with(&trace, Converter::new(procs, Semantics::Default));
        let short = name.split('-').take(2).collect::<Vec<_>>().join("-");
        let mut acc = [f64::NAN; 3];
        let mut per_variant = Vec::new();
        let drop = (base.jobs.len() as f64 * 1e-4).round().max(1.0) as usize;
        for var in &VARIANTS {
            let t0 = std::time::Instant::now();
            let out = run(&base, procs, var);
            match var.name {
                "EASY" => acc[0] = mean_accuracy(&out, |o| o.estimate),
                "predictions only" => acc[1] = mean_accuracy(&out, |o| o.plan),
                "EASY++ last1" => acc[2] = mean_accuracy(&out, |o| o.plan),
                _ => {}
            }
            let mut ms = vec![out.metrics];
            for seed in 1..=copies {
                ms.push(run(&without_some(&base, drop, seed), procs, var).metrics);
            }
            eprintln!("{short} {}: {:.1} s", var.name, t0.elapsed().as_secs_f64());
            per_variant.push(ms);
        }
        rows.push((short, per_variant, acc));
    }
    let hours = |s: f64| s / 3600.0;
    let days = |s: f64| s / 86_400.0;
    table(
        &rows,
        "Mean bounded slowdown (τ = 10 s)",
        copies,
        |m| m.mean_bsld,
        2,
    );
    table(&rows, "Mean wait (h)", copies, |m| hours(m.mean_wait), 2);
    table(
        &rows,
        "99th percentile wait (h)",
        copies,
        |m| hours(m.p99_wait as f64),
        1,
    );
    table(
        &rows,
        "Largest wait (d)",
        copies,
        |m| days(m.max_wait as f64),
        1,
    );
    table(
        &rows,
        "Jobs waiting over 1 day",
        copies,
        |m| m.over_1d as f64,
        0,
    );
    table(
        &rows,
        "Jobs waiting over 5 days",
        copies,
        |m| m.over_5d as f64,
        0,
    );
    println!("Accuracy, mean of min(p, r) / max(p, r):");
    println!();
    println!("| trace | user estimate | tsafrir | tsafrir-last1 |");
    println!("|---|---:|---:|---:|");
    for (short, _, a) in &rows {
        println!("| {short} | {:.3} | {:.3} | {:.3} |", a[0], a[1], a[2]);
    }
}

/// One table: a row per trace, a column per variant; with copies, the full run's figure and
/// the min–max over the copies.
fn table(rows: &[Row], title: &str, copies: u64, f: impl Fn(&Metrics) -> f64, digits: usize) {
    println!("{title}:");
    println!();
    let names: Vec<&str> = VARIANTS.iter().map(|v| v.name).collect();
    println!("| trace | {} |", names.join(" | "));
    println!("|---|{}", "---:|".repeat(names.len()));
    for (short, per_variant, _) in rows {
        let cells: Vec<String> = per_variant
            .iter()
            .map(|ms| {
                let full = f(&ms[0]);
                if copies == 0 {
                    return format!("{full:.digits$}");
                }
                let vals: Vec<f64> = ms[1..].iter().map(&f).collect();
                let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                format!("{full:.digits$} [{lo:.digits$}–{hi:.digits$}]")
            })
            .collect();
        println!("| {short} | {} |", cells.join(" | "));
    }
    println!();
}
