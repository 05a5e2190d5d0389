//! Times one planning cycle of the lookahead planner: 10 000 queued global jobs on 10
//! clusters of 1 000 processors, each busy with local jobs and holding a local queue, over a
//! 7-day horizon. Run: `cargo run --release -p foresight-core --example plan_cycle`.
//!
//! Environment: `QUEUED` (default 10 000) sets the queue; `DEPTH` the planning depth;
//! `REPS` (default 3) how many cycles are timed (the best is printed). `GROWTH`, a list of
//! queue sizes (`GROWTH=1000,10000,100000`), times each size in turn, each from the same
//! seed as `QUEUED` would (same digest), and then prints the log-log slope of the time
//! against the queue between consecutive sizes and fitted over all of them: 1 is linear,
//! 2 quadratic.

#![allow(clippy::disallowed_methods)] // a benchmark reads the clock; the library never does

use foresight_core::forecast::Tariff;
use foresight_core::grid::{plan_cycle, ClusterView, Decision, GlobalJob, PlannerConfig};
use foresight_core::select::{Criterion, Processor};
use foresight_core::{ClusterId, Dur, Event, Job, JobId, LocalScheduler, Policy, Time, UserId};
use std::time::Instant;

/// A fixed-seed LCG: the core has no RNG of its own.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// A number from the environment, or `default`.
fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let reps = env_or("REPS", 3).max(1);
    let Ok(sizes) = std::env::var("GROWTH") else {
        measure(env_or("QUEUED", 10_000), reps);
        return;
    };
    let sizes: Vec<usize> = sizes
        .split(',')
        .map(|v| v.trim().parse().expect("GROWTH lists queue sizes"))
        .collect();
    let points: Vec<(f64, f64)> = sizes
        .iter()
        .map(|&n| (n as f64, measure(n, reps)))
        .collect();
    let slope = |(n0, t0): (f64, f64), (n1, t1): (f64, f64)| (t1 / t0).ln() / (n1 / n0).ln();
    let pairs: Vec<String> = points
        .windows(2)
        .map(|w| format!("{:.2}", slope(w[0], w[1])))
        .collect();
    // Least squares of ln t against ln n.
    let k = points.len() as f64;
    let (xs, ys): (Vec<f64>, Vec<f64>) = points.iter().map(|&(n, t)| (n.ln(), t.ln())).unzip();
    let (mx, my) = (xs.iter().sum::<f64>() / k, ys.iter().sum::<f64>() / k);
    let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
    println!(
        "{{\"sizes\":{sizes:?},\"slopes\":[{}],\"fitted_slope\":{:.2}}}",
        pairs.join(","),
        sxy / sxx
    );
}

/// Builds the grid and a queue of `queued` jobs from a fixed seed, times `reps` planning
/// cycles, prints one JSON line (best time, decisions, digest) and returns the best time.
fn measure(queued: usize, reps: usize) -> f64 {
    let clusters = 10;
    let procs = 1000u32;
    let mut rng = Lcg(42);
    let mut scheds = Vec::new();
    let mut processors = Vec::new();
    for c in 0..clusters {
        let mut s = LocalScheduler::new(procs, Policy::easy());
        let mut out = Vec::new();
        // Local load: jobs of 1–64 processors for 10 min – 12 h; some start, the rest queue.
        for j in 0..400u64 {
            let job = Job::new(
                JobId(j),
                Time(0),
                1 + rng.next(64) as u32,
                Dur(600 + rng.next(12 * 3600) as i64),
            );
            s.handle(Time(0), Event::Submit(job), &mut out)
                .expect("valid job");
        }
        scheds.push(s);
        processors.push(
            (0..procs)
                .map(|i| Processor {
                    id: format!("c{c}/p{i}"),
                    cluster: format!("c{c}"),
                    speed: if c % 2 == 0 { 1.0 } else { 1.5 },
                    memory_mb: 0,
                    features: Default::default(),
                })
                .collect::<Vec<_>>(),
        );
    }
    let tariff = Tariff::default();
    let views: Vec<ClusterView<'_>> = (0..clusters)
        .map(|c| ClusterView {
            processors: &processors[c],
            sched: &scheds[c],
            tariff: &tariff,
            bandwidth_mb_s: 100.0,
            latency: Dur(1),
        })
        .collect();
    let jobs: Vec<GlobalJob> = (0..queued)
        .map(|i| GlobalJob {
            id: JobId(i as u64),
            user: UserId(0),
            submit: Time(0),
            procs: 1 + rng.next(64) as u32,
            walltime: Dur(600 + rng.next(10 * 3600) as i64),
            max_price: 1.0 + rng.next(3) as f64,
            input_mb: 100.0,
            home: Some(ClusterId(rng.next(clusters as u64) as usize)),
            co_allocate: true,
            criterion: Criterion::EarliestStart,
            priority: 0,
            requeue: false,
            begin: None,
            requires: Default::default(),
            licences: Default::default(),
            prediction: None,
        })
        .collect();
    let cfg = PlannerConfig {
        horizon: Dur::hours(7 * 24),
        lead_time: Dur(900),
        plan_depth: env_or("DEPTH", usize::MAX),
    };
    let mut best = f64::INFINITY;
    let mut decisions = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        decisions = plan_cycle(Time(0), &views, &jobs, &cfg);
        best = best.min(t.elapsed().as_secs_f64());
    }
    let reserved = decisions
        .iter()
        .filter(|d| matches!(d, Decision::Reserve { .. }))
        .count();
    let waiting = decisions
        .iter()
        .filter(|d| matches!(d, Decision::Wait { .. }))
        .count();
    let nofit = decisions
        .iter()
        .filter(|d| matches!(d, Decision::NoFit { .. }))
        .count();
    // A digest of every decision, to compare versions of the planner: same digest, same plan.
    // The chosen processors and their speed (and a planned job's end and processors) are left
    // out, and a part's cluster is the bare number, so that digests compare with those taken
    // before decisions carried them and before clusters were typed.
    let digest = decisions.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, d| {
        let text = match d {
            Decision::Reserve {
                job,
                start,
                end,
                cost,
                parts,
                ..
            } => {
                let parts: Vec<String> = parts
                    .iter()
                    .map(|p| format!("Part {{ cluster: {}, procs: {} }}", p.cluster, p.procs))
                    .collect();
                format!(
                    "Reserve {{ job: {job:?}, start: {start:?}, end: {end:?}, cost: {cost:?}, parts: [{}] }}",
                    parts.join(", ")
                )
            }
            Decision::Wait { job, start, .. } => {
                format!("Wait {{ job: {job:?}, start: {start:?} }}")
            }
            other => format!("{other:?}"),
        };
        text
            .bytes()
            .fold(h, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
    });
    println!(
        "{{\"clusters\":{clusters},\"processors\":{},\"queued\":{queued},\"plan_depth\":{},\"seconds\":{best:.3},\"reserved\":{reserved},\"planned\":{waiting},\"no_fit\":{nofit},\"digest\":\"{digest:016x}\"}}",
        clusters * procs as usize,
        cfg.plan_depth.min(queued)
    );
    best
}
