//! Runtime prediction on the archive traces: EASY with user estimates, EASY with predictions
//! (Tsafrir's, and per application), EASY++ (predictions, correction, shortest-predicted-first
//! backfill) and EASY with the true runtimes as estimates, in `default` semantics; mean wait
//! and bounded slowdown of each, and the accuracy of estimates and predictions
//! (mean of min(p, r) / max(p, r)).
//!
//! The traces are read in place from the directory given as the first argument, else
//! `$FORESIGHT_TRACES`, else `../shared/traces` beside the checkout; the trace names that
//! follow (file names) narrow the run. Prints a Markdown table.
//!
//! `cargo run -p foresight-sim --example prediction -- /work/shared/traces`

#![allow(clippy::print_stdout, clippy::print_stderr, clippy::unwrap_used)] // a report tool

use foresight_core::predict::{accuracy, Predictor};
use foresight_core::{BackfillOrder, Dur, Policy};
use foresight_sim::workload::Converter;
use foresight_sim::{simulate_with, Prediction, Semantics, SimOutput, Trace, Workload};
use std::path::PathBuf;
use std::time::Instant;

const ARCHIVE: [&str; 6] = [
    "KTH-SP2-1996-2.1-cln.swf.gz",
    "SDSC-SP2-1998-4.2-cln.swf.gz",
    "CTC-SP2-1996-3.1-cln.swf.gz",
    "NASA-iPSC-1993-3.1-cln.swf.gz",
    "SDSC-DS-2004-2.1-cln.swf.gz",
    "HPC2N-2002-2.2-cln.swf.gz",
];

struct Variant {
    name: &'static str,
    predictor: Predictor,
    order: BackfillOrder,
    true_runtimes: bool,
}

const VARIANTS: [Variant; 6] = [
    Variant {
        name: "EASY",
        predictor: Predictor::None,
        order: BackfillOrder::Fcfs,
        true_runtimes: false,
    },
    Variant {
        name: "EASY+tsafrir",
        predictor: Predictor::Tsafrir,
        order: BackfillOrder::Fcfs,
        true_runtimes: false,
    },
    Variant {
        name: "EASY++",
        predictor: Predictor::Tsafrir,
        order: BackfillOrder::Spf,
        true_runtimes: false,
    },
    Variant {
        name: "EASY+app",
        predictor: Predictor::App,
        order: BackfillOrder::Fcfs,
        true_runtimes: false,
    },
    Variant {
        name: "EASY++app",
        predictor: Predictor::App,
        order: BackfillOrder::Spf,
        true_runtimes: false,
    },
    Variant {
        name: "EASY-true",
        predictor: Predictor::None,
        order: BackfillOrder::Fcfs,
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

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("FORESIGHT_TRACES").map(PathBuf::from))
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces")
        });
    let only: Vec<String> = args.collect();
    println!("| trace | jobs | policy | mean wait (s) | mean bsld | bsld vs EASY | corrections |");
    println!("|---|---:|---|---:|---:|---:|---:|");
    let mut acc_rows = Vec::new();
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
        let mut easy_bsld = f64::NAN;
        let mut acc = [f64::NAN; 3];
        for v in &VARIANTS {
            let t0 = Instant::now();
            let mut w = base.clone();
            if v.true_runtimes {
                for j in &mut w.jobs {
                    j.job.estimate = Dur(j.runtime.as_secs().max(1));
                }
            }
            let policy = Policy {
                backfill_order: v.order,
                ..Policy::easy()
            };
            let prediction = Prediction {
                predictor: v.predictor,
                overrun: false,
            };
            let out = simulate_with(
                &w,
                procs,
                &policy,
                Semantics::Default,
                &prediction,
                &mut |_| {},
            )
            .unwrap();
            let m = &out.metrics;
            if v.name == "EASY" {
                easy_bsld = m.mean_bsld;
                acc[0] = mean_accuracy(&out, |o| o.estimate);
            }
            if v.name == "EASY+tsafrir" {
                acc[1] = mean_accuracy(&out, |o| o.plan);
            }
            if v.name == "EASY+app" {
                acc[2] = mean_accuracy(&out, |o| o.plan);
            }
            let corrections: u64 = out.outcomes.iter().map(|o| u64::from(o.corrections)).sum();
            println!(
                "| {short} | {} | {} | {:.0} | {:.2} | {:+.1} % | {corrections} |",
                m.jobs,
                v.name,
                m.mean_wait,
                m.mean_bsld,
                100.0 * (m.mean_bsld / easy_bsld - 1.0),
            );
            eprintln!("{short} {}: {:.1} s", v.name, t0.elapsed().as_secs_f64());
        }
        acc_rows.push((short, acc));
    }
    println!();
    println!("| trace | accuracy: user estimate | tsafrir | app |");
    println!("|---|---:|---:|---:|");
    for (short, a) in acc_rows {
        println!("| {short} | {:.3} | {:.3} | {:.3} |", a[0], a[1], a[2]);
    }
}
