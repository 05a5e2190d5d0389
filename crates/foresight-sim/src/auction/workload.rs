//! The seeded streams of one run: a Poisson local stream per site and the stationary global
//! stream, generated in seconds and then multiplied by the integer `time_scale`, so that a
//! scaled workload is exactly the unscaled one with every time multiplied.

use super::config::AuctionSimConfig;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

/// A job of a site's owners: it runs only there and is never preempted by global jobs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LocalJob {
    /// Submission, seconds.
    pub submit: i64,
    /// Processors.
    pub procs: u32,
    /// Runtime, seconds.
    pub runtime: i64,
}

/// A job of the global stream.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GlobalSpec {
    /// Arrival in the global queue, seconds.
    pub submit: i64,
    /// Processors.
    pub procs: u32,
    /// Runtime, seconds.
    pub runtime: i64,
    /// Absolute priority, 0 the lowest.
    pub priority: u8,
    /// The site holding its input.
    pub home: usize,
    /// Input size, MB.
    pub input_mb: f64,
}

/// Both streams of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Streams {
    /// Per site, in submission order.
    pub local: Vec<Vec<LocalJob>>,
    /// In arrival order.
    pub global: Vec<GlobalSpec>,
}

/// An exponential draw of mean `mean`.
fn exp(rng: &mut Pcg64, mean: f64) -> f64 {
    -mean * (1.0 - rng.gen::<f64>()).ln()
}

/// A lognormal draw of mean `mean` and coefficient of variation `cv` (Box–Muller).
fn lognormal(rng: &mut Pcg64, mean: f64, cv: f64) -> f64 {
    let s2 = (1.0 + cv * cv).ln();
    let mu = mean.ln() - s2 / 2.0;
    let (u1, u2): (f64, f64) = (1.0 - rng.gen::<f64>(), rng.gen());
    let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
    (mu + s2.sqrt() * z).exp()
}

fn mean_of(v: &[u32]) -> f64 {
    v.iter().map(|&x| f64::from(x)).sum::<f64>() / v.len().max(1) as f64
}

/// The streams of run `seed`. Local streams go on for 200 mean runtimes after the last
/// global arrival, far past the end of any run that keeps up with its load.
pub fn generate(cfg: &AuctionSimConfig, seed: u64) -> Streams {
    let g = &cfg.global;
    let k = i64::from(cfg.time_scale);
    let mean = g.mean_runtime_seconds;
    let runtime = |rng: &mut Pcg64| (lognormal(rng, mean, g.runtime_cv).round() as i64).max(1) * k;
    let total: u32 = cfg.site.iter().map(|s| s.nodes * s.cores_per_node).sum();
    let mut rng = Pcg64::seed_from_u64(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xA0C7);
    let gap = mean_of(&g.procs) * mean / (g.load * f64::from(total));
    let mut t = 0.0;
    let mut global = Vec::with_capacity(g.jobs);
    for _ in 0..g.jobs {
        t += exp(&mut rng, gap);
        global.push(GlobalSpec {
            submit: (t.round() as i64) * k,
            procs: g.procs[rng.gen_range(0..g.procs.len())],
            runtime: runtime(&mut rng),
            priority: rng.gen_range(0..g.priorities),
            home: rng.gen_range(0..cfg.site.len()),
            input_mb: rng.gen_range(g.input_mb[0]..=g.input_mb[1]),
        });
    }
    let horizon = t + 200.0 * mean;
    let local = cfg
        .site
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut rng = Pcg64::seed_from_u64(seed.wrapping_mul(31).wrapping_add(i as u64 + 1));
            let procs = f64::from(s.nodes * s.cores_per_node);
            let mut jobs = Vec::new();
            if s.local_load <= 0.0 {
                return jobs;
            }
            let gap = mean_of(&g.local_procs) * mean / (s.local_load * procs);
            let mut t = 0.0;
            loop {
                t += exp(&mut rng, gap);
                if t > horizon {
                    break jobs;
                }
                jobs.push(LocalJob {
                    submit: (t.round() as i64) * k,
                    procs: g.local_procs[rng.gen_range(0..g.local_procs.len())],
                    runtime: runtime(&mut rng),
                });
            }
        })
        .collect();
    Streams { local, global }
}
