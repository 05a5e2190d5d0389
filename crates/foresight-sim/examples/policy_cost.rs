//! The cost of each local policy on the same traces, side by side: EASY, conservative and
//! EASY with shortest-first backfill (`--backfill-order spf`), in `default` semantics, with a
//! digest of every schedule so that two builds can be checked to decide alike.
//!
//! Arguments: trace files (plain or .gz SWF), each optionally followed by `@PROCS` to replay
//! it on a machine of that size (default: the header's MaxProcs); `--policies a,b,c` narrows
//! the policies (`easy`, `conservative`, `spf`). Prints one tab-separated line per run:
//! trace, policy, jobs, seconds of simulation (reading excluded), mean wait, digest.
//!
//! `cargo run --release -p foresight-sim --example policy_cost -- \
//!     /work/shared/traces/HPC2N-2002-2.2-cln.swf.gz`

#![allow(clippy::print_stdout, clippy::print_stderr, clippy::unwrap_used)] // a report tool

use foresight_core::{BackfillOrder, Policy};
use foresight_sim::{simulate, Semantics, Trace, Workload};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;
use std::time::Instant;

fn policy(name: &str) -> Policy {
    match name {
        "easy" => Policy::easy(),
        "conservative" => Policy::conservative(),
        "spf" => Policy {
            backfill_order: BackfillOrder::Spf,
            ..Policy::easy()
        },
        other => panic!("unknown policy {other:?}: use easy, conservative or spf"),
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut policies = vec!["easy".to_string(), "conservative".into(), "spf".into()];
    let mut traces: Vec<(PathBuf, Option<u32>)> = Vec::new();
    while let Some(a) = args.next() {
        if a == "--policies" {
            let list = args.next().expect("--policies takes a list");
            policies = list.split(',').map(String::from).collect();
            continue;
        }
        match a.rsplit_once('@') {
            Some((path, procs)) => traces.push((path.into(), Some(procs.parse().unwrap()))),
            None => traces.push((a.into(), None)),
        }
    }
    for (path, procs) in traces {
        let trace = Trace::read(&path, false).unwrap();
        let procs = procs.unwrap_or_else(|| trace.header.machine_size().unwrap().unwrap());
        let workload = Workload::from_trace(&trace, procs, Semantics::Default);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for p in &policies {
            let started = Instant::now();
            let out = simulate(
                &workload,
                procs,
                &policy(p),
                Semantics::Default,
                &mut |_| {},
            )
            .unwrap();
            let secs = started.elapsed().as_secs_f64();
            let mut h = DefaultHasher::new();
            for o in &out.outcomes {
                (o.id, o.start, o.end).hash(&mut h);
            }
            println!(
                "{name}@{procs}\t{p}\t{}\t{secs:.3}\t{:.1}\t{:016x}",
                out.outcomes.len(),
                out.metrics.mean_wait,
                h.finish()
            );
        }
    }
}
