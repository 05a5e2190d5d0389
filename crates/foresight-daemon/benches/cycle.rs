//! Criterion benchmarks of one scheduling cycle of the daemon's [`World`] with 10 000 queued
//! jobs (issue 4: "a scheduling cycle with 10 000 queued jobs on the default cluster < 100 ms").
//!
//! Every benchmark builds a fresh world (outside the timing), then times one call:
//!
//! - `cycle/global/first/P`: 10 000 global jobs have just arrived (as after a burst of
//!   submissions): the cycle moves them into the queue and plans them (the planner looks at
//!   the first `plan_depth` = 256 and answers "beyond the planning depth" for the rest).
//! - `cycle/global/steady/P`: the next cycle, one second later, over the same queue (the
//!   periodic re-plan the service runs while global jobs wait).
//! - `cycle/local/P`: 10 000 local jobs (submitted with a cluster, the owner's stream) wait
//!   in the cluster's local queue; the cycle ticks the local scheduler (nothing changed).
//! - `cycle/local-finish/P`: the same, but one running local job has just ended: its report
//!   (a scheduling pass of the local policy over the 10 000 waiting jobs) plus the cycle.
//! - `cycle/mixed/P`: 10 000 queued local jobs plus 256 queued global jobs: the planner must
//!   forecast the long local queue to plan around it.
//! - `accept/local/P`: taking in 10 000 local jobs one by one (what 10 000 single
//!   submissions do under the world lock), as one figure for all 10 000.
//! - `accept/one-local/P`, `accept/one-local-reserved/P`: taking in one more local job when
//!   10 000 wait already; the second with one administrative reservation on the cluster
//!   (as every running or reserved global job also makes one).
//!
//! `P` is the cluster's processor count: 2 (this machine's cores, the default cluster here)
//! and 8. Jobs: 1..=P processors, 60 s to 2 h walltime, fixed-seed random, so every run
//! measures the same work. No I/O happens: `World` only marks the records it changes and queues
//! effects.
//!
//! Run with `cargo bench -p foresight-daemon --bench cycle`; filter with e.g.
//! `-- cycle/global`.
#![allow(clippy::unwrap_used)]

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, SamplingMode};
use foresight_core::time::Time;
use foresight_core::JobId;
use foresight_daemon::config::{ClusterConfig, Config};
use foresight_daemon::state::world::World;
use foresight_rm::Outcome;
use foresight_store::{AclSpec, JobState};
use foresight_store::{JobRecord, UserRecord};
use std::hint::black_box;
use std::time::Duration;

/// Queued jobs in every benchmark.
const QUEUED: u64 = 10_000;
/// Global jobs of the mixed benchmark (the default planning depth).
const MIXED_GLOBAL: u64 = 256;
/// Cluster sizes.
const PROCS: [u32; 2] = [2, 8];
/// The benchmark's clock, seconds since the epoch.
const NOW: i64 = 1_700_000_000;

/// Knuth's MMIX linear congruential generator.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 32) * n) >> 32
    }
}

fn config(procs: u32) -> Config {
    let base = Config::default();
    Config {
        data_dir: std::env::temp_dir().join("foresight-bench-cycle"),
        cluster: vec![ClusterConfig::local("local", procs)],
        ..base
    }
}

fn job(id: u64, procs: u32, walltime: i64, cluster: Option<&str>) -> JobRecord {
    JobRecord {
        id,
        user: "bench".into(),
        procs,
        walltime,
        cluster: cluster.map(str::to_string),
        command: vec!["true".into()],
        cred: Default::default(),
        submitted_at: NOW - 10,
        ..Default::default()
    }
}

/// `n` jobs with ids from `first`, for a cluster of `procs` processors.
fn jobs(first: u64, n: u64, procs: u32, cluster: Option<&str>, seed: u64) -> Vec<JobRecord> {
    let mut rng = Lcg(seed);
    (first..first + n)
        .map(|id| {
            let p = 1 + rng.below(u64::from(procs)) as u32;
            let walltime = 60 + rng.below(7_141) as i64;
            job(id, p, walltime, cluster)
        })
        .collect()
}

fn empty_world(procs: u32) -> World {
    let mut w = World::new(&config(procs));
    w.add_user(UserRecord {
        name: "bench".into(),
        token_hash: "0".repeat(64),
        admin: false,
        budget: None,
        spent: 0.0,
        unix_user: None,
        ..Default::default()
    });
    w
}

/// A world whose `QUEUED` global jobs have arrived but not yet been cycled.
fn world_global(procs: u32) -> World {
    let mut w = empty_world(procs);
    w.accept(Time(NOW), jobs(1, QUEUED, procs, None, 7));
    w
}

/// A world with `QUEUED` local jobs in the local queue (and `global` global arrivals).
fn world_local(procs: u32, global: u64) -> World {
    let mut w = empty_world(procs);
    w.accept(Time(NOW), jobs(1, QUEUED, procs, Some("local"), 11));
    w.accept(Time(NOW), jobs(QUEUED + 1, global, procs, None, 13));
    // Settle: the first cycle starts what fits and queues the arrivals.
    w.cycle(Time(NOW));
    w.effects.clear();
    w
}

/// A running job of cluster 0, with its attempt.
fn running(w: &World) -> (JobId, u32) {
    w.jobs
        .values()
        .find(|j| j.state == JobState::Running)
        .map(|j| (JobId(j.id), j.attempt))
        .unwrap()
}

fn finished(at: i64) -> Outcome {
    Outcome {
        exit_code: Some(0),
        signal: None,
        timed_out: false,
        cancelled: false,
        started_at: NOW,
        ended_at: at,
        error: None,
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("cycle");
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    for procs in PROCS {
        g.bench_function(format!("global/first/{procs}"), |b| {
            b.iter_batched_ref(
                || world_global(procs),
                |w| w.cycle(black_box(Time(NOW))),
                BatchSize::PerIteration,
            );
        });
        g.bench_function(format!("global/steady/{procs}"), |b| {
            b.iter_batched_ref(
                || {
                    let mut w = world_global(procs);
                    w.cycle(Time(NOW));
                    w.effects.clear();
                    w
                },
                |w| w.cycle(black_box(Time(NOW + 1))),
                BatchSize::PerIteration,
            );
        });
        g.bench_function(format!("local/{procs}"), |b| {
            b.iter_batched_ref(
                || world_local(procs, 0),
                |w| w.cycle(black_box(Time(NOW + 1))),
                BatchSize::PerIteration,
            );
        });
        g.bench_function(format!("local-finish/{procs}"), |b| {
            b.iter_batched_ref(
                || {
                    let w = world_local(procs, 0);
                    let (id, attempt) = running(&w);
                    (w, id, attempt)
                },
                |(w, id, attempt)| {
                    let now = black_box(Time(NOW + 1));
                    w.on_finished(
                        now,
                        foresight_core::ClusterId(0),
                        *id,
                        *attempt,
                        &finished(now.secs()),
                    );
                    w.cycle(now);
                },
                BatchSize::PerIteration,
            );
        });
        g.bench_function(format!("mixed/{procs}"), |b| {
            b.iter_batched_ref(
                || world_local(procs, MIXED_GLOBAL),
                |w| w.cycle(black_box(Time(NOW + 1))),
                BatchSize::PerIteration,
            );
        });
    }
    g.finish();

    let mut g = c.benchmark_group("accept");
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    for procs in PROCS {
        for reserved in [false, true] {
            let name = if reserved {
                "one-local-reserved"
            } else {
                "one-local"
            };
            g.bench_function(format!("{name}/{procs}"), |b| {
                b.iter_batched_ref(
                    || {
                        let mut w = world_local(procs, 0);
                        if reserved {
                            let acl = AclSpec {
                                users: vec!["bench".into()],
                                ..AclSpec::default()
                            };
                            w.create_reservation(
                                Time(NOW),
                                "bench",
                                "local",
                                foresight_daemon::state::world::Held::Count(1),
                                NOW + 86_400,
                                NOW + 90_000,
                                acl,
                                None,
                            )
                            .unwrap();
                        }
                        (w, jobs(QUEUED + 1, 1, procs, Some("local"), 17))
                    },
                    |(w, js)| w.accept(black_box(Time(NOW + 1)), std::mem::take(js)),
                    BatchSize::PerIteration,
                );
            });
        }
        g.bench_function(format!("local/{procs}"), |b| {
            b.iter_batched(
                || {
                    (
                        empty_world(procs),
                        jobs(1, QUEUED, procs, Some("local"), 11),
                    )
                },
                |(mut w, js)| {
                    for j in js {
                        w.accept(Time(NOW), vec![j]);
                    }
                    w
                },
                BatchSize::PerIteration,
            );
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
