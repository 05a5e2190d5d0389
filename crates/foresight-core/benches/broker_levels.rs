//! Criterion benchmark of the grid broker's cycle with one priority level against four, on
//! the same workload: with several levels every start the planner decides now is first
//! checked against the waiting jobs of higher levels, which plays the second pass of the
//! levels on two copies of the broker (with and without the start), and waiting jobs are
//! served by level twice a cycle. Those costs are what this measures.
//!
//! The workload: two clusters of 64 processors; 48 global jobs (1–24 processors, 10–60
//! minutes) submitted at 0 and planned there, so that the clusters are full of running
//! jobs and some wait; 48 more submitted at 60 s. Measured: [`Broker::on_cycle`] at 60 s on
//! a copy of that broker (the copy is not timed).
//!
//! Both variants start the cycle from the same state, so that the difference is the cost of
//! the levels and not of other work: the first wave has one level in both (level 0 in
//! `levels/1`, the top level in `levels/4`, which nothing can preempt), so both brokers make
//! the same decisions at 0 (checked before measuring). In the second wave `levels/1` gives
//! every job level 0 and `levels/4` gives job i level i mod 4: the same jobs, planned onto
//! the same running set.
//!
//! Run with `cargo bench -p foresight-core --bench broker_levels`.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use foresight_core::broker::{processors_of, Broker, GridCluster, SpeedGroup};
use foresight_core::grid::{GlobalJob, PlannerConfig};
use foresight_core::select::Criterion as Select;
use foresight_core::{Dur, JobId, LocalScheduler, Policy, Time, UserId};
use std::hint::black_box;

/// Jobs submitted at each of the two instants.
const WAVE: u64 = 48;

/// Knuth's MMIX linear congruential generator: the same jobs on every run.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, lo: u64, hi: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        lo + (self.0 >> 33) % (hi - lo + 1)
    }
}

fn job(id: u64, at: i64, level: u32, rng: &mut Lcg) -> GlobalJob {
    GlobalJob {
        id: JobId(id),
        user: UserId(1),
        submit: Time(at),
        procs: rng.next(1, 24) as u32,
        walltime: Dur(rng.next(600, 3_600) as i64),
        max_price: 1e9,
        input_mb: 0.0,
        home: None,
        co_allocate: id % 4 == 0,
        criterion: Select::EarliestFinish,
        priority: level,
        requeue: false,
        requires: Default::default(),
        begin: None,
        licences: Default::default(),
        prediction: None,
    }
}

/// The broker just before its cycle at 60 s.
fn prepared(levels: u32) -> Broker {
    let clusters = (0..2)
        .map(|k| {
            let name = format!("c{k}");
            GridCluster::new(
                &name,
                processors_of(
                    &name,
                    &[SpeedGroup {
                        procs: 64,
                        speed: 1.0,
                    }],
                ),
                LocalScheduler::new(64, Policy::easy()),
            )
        })
        .collect();
    let planner = PlannerConfig {
        horizon: Dur(86_400),
        lead_time: Dur(0),
        plan_depth: 64,
    };
    let mut b = Broker::new(clusters, planner, 1);
    let mut rng = Lcg(42);
    for id in 1..=WAVE {
        b.submit(Time(0), job(id, 0, levels - 1, &mut rng));
    }
    b.on_cycle(Time(0), &mut Vec::new());
    for id in WAVE + 1..=2 * WAVE {
        let level = (id % u64::from(levels)) as u32;
        b.submit(Time(60), job(id, 60, level, &mut rng));
    }
    b
}

/// Each job's phase: what both variants must agree on before the cycle measured.
fn phases(b: &Broker) -> Vec<(JobId, String)> {
    b.entries()
        .map(|e| (e.job.id, format!("{:?}", e.phase)))
        .collect()
}

fn bench_cycle(c: &mut Criterion) {
    let one = prepared(1);
    let four = prepared(4);
    assert_eq!(
        phases(&one),
        phases(&four),
        "the variants must start the measured cycle from the same state"
    );
    let mut g = c.benchmark_group("levels");
    for (levels, b) in [(1u32, one), (4, four)] {
        g.bench_function(levels.to_string(), |bench| {
            bench.iter_batched(
                || (b.clone(), Vec::new()),
                |(mut b, mut out)| {
                    b.on_cycle(Time(60), &mut out);
                    black_box((b, out))
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench_cycle);
criterion_main!(benches);
