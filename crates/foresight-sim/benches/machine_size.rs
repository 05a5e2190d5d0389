//! Criterion benchmark: the cost of `sim run` follows the jobs, not the machine size.
//!
//! Replays one archive trace (NASA-iPSC, a 128-processor machine, 18 066 simulated jobs)
//! under EASY and conservative backfilling on machines of P = 128, 10⁶ and 2³² − 1
//! processors. The times at 10⁶ and 2³² − 1 should not exceed the time at 128: nothing in the
//! simulator is sized by the machine.
//!
//! The trace is read in place from `$FORESIGHT_TRACES`, else `../shared/traces` beside the
//! checkout; without it the benchmark says so and measures nothing.
//! Run with `cargo bench -p foresight-sim --bench machine_size`.

#![allow(clippy::unwrap_used, clippy::print_stderr)] // a benchmark fails loudly by design

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode};
use foresight_core::Policy;
use foresight_sim::{simulate, Semantics, Trace, Workload};
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

const TRACE: &str = "NASA-iPSC-1993-3.1-cln.swf.gz";
const SIZES: [(u32, &str); 3] = [(128, "128"), (1_000_000, "1e6"), (u32::MAX, "2^32-1")];

fn trace() -> Option<Trace> {
    let dir = std::env::var_os("FORESIGHT_TRACES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces")
        });
    let path = dir.join(TRACE);
    if !path.exists() {
        eprintln!(
            "machine_size: {} not found (set FORESIGHT_TRACES): skipped",
            path.display()
        );
        return None;
    }
    Some(Trace::read(&path, false).unwrap())
}

fn machine_size(c: &mut Criterion) {
    let Some(trace) = trace() else { return };
    let mut group = c.benchmark_group("machine_size");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for (procs, name) in SIZES {
        let workload = Workload::from_trace(&trace, procs, Semantics::Pyss);
        for policy in [Policy::easy(), Policy::conservative()] {
            group.bench_function(format!("{}/{name}", policy.name()), |b| {
                b.iter(|| {
                    let out = simulate(
                        black_box(&workload),
                        procs,
                        &policy,
                        Semantics::Pyss,
                        &mut |_| {},
                    )
                    .unwrap();
                    black_box(out.metrics.mean_wait)
                });
            });
        }
    }
    group.finish();
}

criterion_group!(benches, machine_size);
criterion_main!(benches);
