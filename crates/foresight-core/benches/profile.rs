//! Criterion benchmarks of the availability profile and of one backfill pass.
//!
//! - `earliest/random/N`, `earliest/full/N`: [`Profile::earliest`] on a profile of about N
//!   steps, for random requests and for requests of the whole machine (a walk to the end).
//! - `take_give/N`: [`Profile::take`] then [`Profile::give`] of a random span (plan mutation;
//!   the pair restores an equal profile, so the state does not drift between iterations).
//! - `horizons/N`, `first_free/N`: the two per-pass lookup tables, from random instants.
//! - `backfill/{easy,conservative}`: one [`LocalScheduler::schedule`] pass on 1024
//!   processors full of running jobs with 5 000 waiting jobs, at an instant at which one
//!   running job in eight has just finished early (so there are holes to backfill and, under
//!   conservative, reservations to compress).
//!
//! Random inputs come from a fixed-seed LCG, so every run measures the same work.
//! Run with `cargo bench -p foresight-core`; filter with e.g. `-- earliest`.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, SamplingMode};
use foresight_core::{
    Action, Dur, FirstFree, Horizons, Job, JobId, LocalScheduler, Policy, Profile, Time,
};
use std::hint::black_box;
use std::time::Duration;

/// Processors of every benchmarked machine.
const CAPACITY: u32 = 1024;
/// Profile sizes, in steps.
const SIZES: [usize; 3] = [100, 1_000, 10_000];
/// Waiting jobs in the backfill benchmark.
const WAITING: u64 = 5_000;
/// Precomputed requests per benchmark, cycled through (a power of two).
const QUERIES: usize = 1024;

/// Knuth's MMIX linear congruential generator: enough randomness for inputs, no dependency.
struct Lcg(u64);

impl Lcg {
    fn new(seed: u64) -> Lcg {
        Lcg(seed)
    }

    fn next_u32(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 32) as u32
    }

    /// Uniform in `0..n` (`n` at most 2^32).
    fn below(&mut self, n: u64) -> u64 {
        (u64::from(self.next_u32()) * n) >> 32
    }

    /// Uniform in `lo..=hi`.
    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
}

/// A random span: start, length, processors.
#[derive(Clone, Copy)]
struct Span {
    start: Time,
    dur: Dur,
    procs: u32,
}

impl Span {
    fn end(&self) -> Time {
        self.start + self.dur
    }
}

/// Seconds of plan per step: with spans of 2 h on average and 64 processors on average,
/// this keeps the machine about half used, so most `take`s fit.
const SECS_PER_STEP: u64 = 500;

fn random_span(rng: &mut Lcg, horizon: u64) -> Span {
    Span {
        start: Time(rng.below(horizon) as i64),
        dur: Dur(rng.between(60, 4 * 3600) as i64),
        procs: rng.between(1, 128) as u32,
    }
}

/// A profile of `CAPACITY` processors with at least `steps` breakpoints, built by taking
/// random spans that fit (so it never overbooks).
fn build_profile(steps: usize, seed: u64) -> Profile {
    let mut rng = Lcg::new(seed);
    let horizon = steps as u64 * SECS_PER_STEP;
    let mut p = Profile::new(CAPACITY);
    let mut attempts = 0usize;
    while p.steps().len() < steps {
        attempts += 1;
        assert!(
            attempts < 100 * steps,
            "profile saturated before {steps} steps"
        );
        let s = random_span(&mut rng, horizon);
        if p.fits(s.start, s.procs, s.dur) {
            p.take(s.start, s.end(), s.procs);
        }
    }
    debug_assert!(p.is_consistent());
    p
}

fn bench_profile(c: &mut Criterion) {
    let mut group = c.benchmark_group("profile");
    group
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(20);
    for &n in &SIZES {
        let profile = build_profile(n, 0x5eed ^ n as u64);
        let horizon = n as u64 * SECS_PER_STEP;
        let mut rng = Lcg::new(42);

        // (a) earliest: random requests from random instants, and whole-machine requests
        // from the start (the answer lies after the last span: a walk over every step).
        let random: Vec<Span> = (0..QUERIES)
            .map(|_| Span {
                start: Time(rng.below(horizon) as i64),
                dur: Dur(rng.between(60, 12 * 3600) as i64),
                procs: rng.between(1, u64::from(CAPACITY)) as u32,
            })
            .collect();
        let mut k = 0usize;
        group.bench_function(format!("earliest/random/{n}"), |b| {
            b.iter(|| {
                let q = random[k & (QUERIES - 1)];
                k = k.wrapping_add(1);
                black_box(profile.earliest(black_box(q.start), q.procs, q.dur))
            });
        });
        group.bench_function(format!("earliest/full/{n}"), |b| {
            b.iter(|| black_box(profile.earliest(black_box(Time(0)), CAPACITY, Dur::hours(1))));
        });

        // (b) take then give: plan a span and drop it again.
        let spans: Vec<Span> = (0..QUERIES)
            .map(|_| random_span(&mut rng, horizon))
            .collect();
        let mut mutable = profile.clone();
        let mut k = 0usize;
        group.bench_function(format!("take_give/{n}"), |b| {
            b.iter(|| {
                let s = spans[k & (QUERIES - 1)];
                k = k.wrapping_add(1);
                mutable.take(s.start, s.end(), s.procs);
                mutable.give(s.start, s.end(), s.procs);
                black_box(mutable.steps().len())
            });
        });
        assert_eq!(mutable, profile, "take then give must restore the profile");

        // (c) the per-pass lookup tables, from random instants (at the profile's start the
        // machine is idle and both walks would stop at once).
        let mut out = Horizons::default();
        let mut k = 0usize;
        group.bench_function(format!("horizons/{n}"), |b| {
            b.iter(|| {
                let q = random[k & (QUERIES - 1)];
                k = k.wrapping_add(1);
                profile.horizons(black_box(q.start), &mut out);
                black_box(out.get(q.procs))
            });
        });
        let mut out = FirstFree::default();
        let mut k = 0usize;
        group.bench_function(format!("first_free/{n}"), |b| {
            b.iter(|| {
                let q = random[k & (QUERIES - 1)];
                k = k.wrapping_add(1);
                profile.first_free(black_box(q.start), &mut out);
                black_box(out.get(q.procs))
            });
        });
    }
    group.finish();
}

/// Processors of a random job: mostly powers of two, as on real machines.
fn random_procs(rng: &mut Lcg) -> u32 {
    if rng.below(10) < 7 {
        1 << rng.below(9) // 1..=256
    } else {
        rng.between(1, u64::from(CAPACITY / 2)) as u32
    }
}

/// A random estimate, log-uniform-ish between 10 min and about 42 h: never shorter than
/// [`NOW`], so that nothing started at 0 ends, and no reservation made at 0 comes due,
/// before the benchmarked pass (the caller would have had to run a pass at that instant).
fn random_estimate(rng: &mut Lcg) -> Dur {
    let base = 600u64 << rng.below(8);
    Dur((base + rng.below(base)) as i64)
}

/// When the benchmarked pass runs: some running jobs finished early just before.
const NOW: Time = Time(300);

/// The scheduler state the backfill benchmark starts from: the machine filled at time 0 (jobs
/// submitted and started one by one until no processor is left), 5 000 jobs submitted behind
/// them and a pass at 0 (EASY makes one reservation, conservative 5 000), then one running
/// job in eight finished early at [`NOW`]. No other event falls in `(0, NOW]`, so the state is
/// one a real caller can reach. The benchmarked call is `schedule(NOW)`.
fn backfill_state(policy: Policy) -> LocalScheduler {
    let mut rng = Lcg::new(7);
    let mut sched = LocalScheduler::new(CAPACITY, policy);
    let mut out: Vec<Action> = Vec::new();
    let mut running = Vec::new();
    let mut id = 0u64;
    loop {
        let free = sched.pool().free_at(Time(0));
        let Ok(free) = u32::try_from(free) else {
            break;
        };
        if free == 0 {
            break;
        }
        // Small filler jobs (1 to 32 processors), so the machine holds many of them.
        let procs = (1u32 << rng.below(6)).min(free);
        let job = Job::new(JobId(id), Time(0), procs, random_estimate(&mut rng));
        sched.submit(job).expect("valid running job");
        sched.schedule(Time(0), &mut out);
        running.push(JobId(id));
        id += 1;
    }
    assert_eq!(sched.running(), running.len(), "every filler job started");
    for _ in 0..WAITING {
        let job = Job::new(
            JobId(id),
            Time(0),
            random_procs(&mut rng),
            random_estimate(&mut rng),
        );
        sched.submit(job).expect("valid waiting job");
        id += 1;
    }
    out.clear();
    sched.schedule(Time(0), &mut out);
    assert!(
        out.iter()
            .all(|a| !matches!(a, Action::Reserve { start, .. } if *start <= NOW)),
        "a reservation comes due before the benchmarked pass"
    );
    for &job in running.iter().step_by(8) {
        sched.finish(NOW, job).expect("running job finishes");
    }
    assert!(sched.pool().is_consistent());
    sched
}

fn bench_backfill(c: &mut Criterion) {
    let mut group = c.benchmark_group("backfill");
    group.sample_size(20).sampling_mode(SamplingMode::Flat);
    // Criterion's measurement time counts only the routine, not the clone made before each
    // call (about 1 ms for 5 000 jobs). An EASY pass takes tens of microseconds, so two
    // seconds of it would cost a minute of clones: give it a tenth of a second (thousands of
    // passes). A conservative pass takes over 100 ms: 20 samples of one pass each, with room
    // to spare.
    for (name, policy, measure, warm_up) in [
        ("easy", Policy::easy(), 100, 50),
        ("conservative", Policy::conservative(), 3_000, 300),
    ] {
        let state = backfill_state(policy);
        assert!(
            state.waiting() >= WAITING as usize - 64,
            "queue mostly waiting"
        );
        // The pass must leave a consistent plan (checked once, outside the measurement).
        let mut check = state.clone();
        check.schedule(NOW, &mut Vec::new());
        assert!(check.pool().is_consistent(), "{name}: pass overbooked");
        group
            .measurement_time(Duration::from_millis(measure))
            .warm_up_time(Duration::from_millis(warm_up));
        group.bench_function(format!("{name}/pass"), |b| {
            b.iter_batched(
                || (state.clone(), Vec::with_capacity(256)),
                |(mut sched, mut actions): (LocalScheduler, Vec<Action>)| {
                    sched.schedule(black_box(NOW), &mut actions);
                    (sched, actions)
                },
                BatchSize::PerIteration,
            );
        });
    }
    group.finish();
}

criterion_group!(benches, bench_profile, bench_backfill);
criterion_main!(benches);
