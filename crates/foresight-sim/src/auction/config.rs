//! The decentralized grid to simulate (`auction.toml`): sites, their local streams, the global
//! stream and the auction's options. Every assumption seed 001 leaves open is a field here.

use foresight_core::auction::AuctionConfig;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The experiment. Times are seconds, but only their ratios matter: the auction measures in
/// the mean runtime, so scaling every time here by the same factor (`time_scale`) gives the
/// same results in units of the mean runtime, up to rounding: an auction's length is rounded
/// to whole seconds, which is negligible from a `time_scale` of 1000 on (within 10⁻⁴) but
/// moves results by a few per cent at small scales.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AuctionSimConfig {
    /// The installations (sites), each with its dispatcher and local stream.
    pub site: Vec<SiteConfig>,
    /// Staging links: bandwidth and latency within a centre and between centres.
    #[serde(default)]
    pub network: NetworkConfig,
    /// The global stream.
    pub global: GlobalConfig,
    /// The auction's options (`alpha` is overridden by `--alpha-sweep`).
    #[serde(default)]
    pub auction: AuctionConfig,
    /// Runs per α (seeds `seed`, `seed + 1`, …); `--seeds` overrides.
    #[serde(default = "default_seeds")]
    pub seeds: u64,
    /// First seed.
    #[serde(default)]
    pub seed: u64,
    /// Finished jobs the online mean runtime is taken over.
    #[serde(default = "default_window")]
    pub tracker_window: usize,
    /// What the auction's unit measures: `runtime` (the seed's definition of у.е.) or
    /// `response` (its conclusion's wording).
    #[serde(default)]
    pub normaliser: Normaliser,
    /// How often a site's dispatcher reads the global queue for new auctions, in mean
    /// runtimes of the workload (`global.mean_runtime_seconds`); sites read at evenly spread
    /// phases. 0 (the default): every dispatcher sees a new auction at once. Between reads a
    /// dispatcher re-bids on load changes only in the auctions it has seen.
    #[serde(default)]
    pub dispatcher_poll: f64,
    /// Multiplies every time of the workload (arrivals, runtimes, staging): results in units
    /// of the mean runtime do not change (the seed's main claim, a property test).
    #[serde(default = "one_u")]
    pub time_scale: u32,
}

fn default_seeds() -> u64 {
    10
}
fn default_window() -> usize {
    50
}
fn one_u() -> u32 {
    1
}

/// What feeds the online mean the auction measures in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Normaliser {
    /// Runtimes of finished jobs, local and global (the seed's у.е.).
    #[default]
    Runtime,
    /// Response times of finished jobs.
    Response,
}

/// One installation.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SiteConfig {
    /// Unique name.
    pub name: String,
    /// Its supercomputer centre (sites of one centre share a fast link).
    pub centre: String,
    /// Compute nodes (the seed: 4 to 8 MVS-100K modules).
    pub nodes: u32,
    /// Cores per node (an MVS-100K module had two quad-core Xeons: 8).
    #[serde(default = "default_cores")]
    pub cores_per_node: u32,
    /// The owners' stream: offered load as a share of the site's processors.
    pub local_load: f64,
}

fn default_cores() -> u32 {
    8
}

/// Staging links.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct NetworkConfig {
    /// Bandwidth between two sites of one centre, MB/s.
    pub intra_centre_mb_s: f64,
    /// Bandwidth between centres, MB/s.
    pub inter_centre_mb_s: f64,
    /// Latency of any transfer between sites, seconds.
    pub latency_seconds: f64,
}

impl Default for NetworkConfig {
    fn default() -> Self {
        NetworkConfig {
            intra_centre_mb_s: 100.0,
            inter_centre_mb_s: 10.0,
            latency_seconds: 1.0,
        }
    }
}

/// The global stream and the jobs' shape (local jobs share the runtime distribution).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GlobalConfig {
    /// Jobs (the seed: 400).
    pub jobs: usize,
    /// Offered load of the global stream as a share of all processors: sets its Poisson rate.
    pub load: f64,
    /// Absolute priority levels, drawn uniformly (the seed: 4); 0 is the lowest.
    #[serde(default = "default_levels")]
    pub priorities: u8,
    /// Processor counts of global jobs, drawn uniformly (NPB kernels run on powers of two).
    #[serde(default = "default_global_procs")]
    pub procs: Vec<u32>,
    /// Processor counts of local jobs, drawn uniformly.
    #[serde(default = "default_local_procs")]
    pub local_procs: Vec<u32>,
    /// Mean runtime, seconds (every job: lognormal with this mean).
    pub mean_runtime_seconds: f64,
    /// Coefficient of variation of the lognormal runtime.
    #[serde(default = "one")]
    pub runtime_cv: f64,
    /// Input size of a global job, MB, uniform in this range; its home site is uniform.
    #[serde(default = "default_input")]
    pub input_mb: [f64; 2],
}

fn default_levels() -> u8 {
    4
}
fn default_global_procs() -> Vec<u32> {
    vec![4, 8, 16, 32]
}
fn default_local_procs() -> Vec<u32> {
    vec![1, 2, 4, 8, 16]
}
fn one() -> f64 {
    1.0
}
fn default_input() -> [f64; 2] {
    [100.0, 2000.0]
}

impl AuctionSimConfig {
    /// Reads and checks a configuration file, naming the file and every problem.
    pub fn read(path: &Path) -> Result<AuctionSimConfig, String> {
        let name = path.display();
        let text = crate::input::read_text(path).map_err(|e| format!("{name}: {e}"))?;
        AuctionSimConfig::parse(&text).map_err(|e| format!("{name}: {e}"))
    }

    /// Parses and checks configuration text.
    pub fn parse(text: &str) -> Result<AuctionSimConfig, String> {
        let cfg: AuctionSimConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        let p = cfg.problems();
        if p.is_empty() {
            Ok(cfg)
        } else {
            Err(p.join("; "))
        }
    }

    /// Every problem, one message each naming the field.
    pub fn problems(&self) -> Vec<String> {
        let mut p: Vec<String> = self
            .auction
            .problems()
            .into_iter()
            .map(|m| format!("auction.{m}"))
            .collect();
        if self.site.is_empty() {
            p.push("at least one [[site]] is needed".into());
        }
        let mut names = std::collections::BTreeSet::new();
        let finite_nonneg = |x: f64| x.is_finite() && x >= 0.0;
        for s in &self.site {
            if !names.insert(&s.name) {
                p.push(format!("site {:?} is defined twice", s.name));
            }
            if s.nodes == 0 || s.cores_per_node == 0 {
                p.push(format!(
                    "site {:?}: nodes and cores_per_node must be at least 1",
                    s.name
                ));
            }
            if !(finite_nonneg(s.local_load) && s.local_load < 1.0) {
                p.push(format!(
                    "site {:?}: local_load must be within [0, 1), got {}",
                    s.name, s.local_load
                ));
            }
        }
        let n = &self.network;
        for (k, v) in [
            ("network.intra_centre_mb_s", n.intra_centre_mb_s),
            ("network.inter_centre_mb_s", n.inter_centre_mb_s),
        ] {
            if !(v.is_finite() && v > 0.0) {
                p.push(format!("{k} must be positive, got {v}"));
            }
        }
        if !finite_nonneg(n.latency_seconds) {
            p.push("network.latency_seconds must be >= 0".into());
        }
        let g = &self.global;
        if g.jobs == 0 {
            p.push("global.jobs must be at least 1".into());
        }
        if !(g.load.is_finite() && g.load > 0.0) {
            p.push(format!("global.load must be positive, got {}", g.load));
        }
        if g.priorities == 0 {
            p.push("global.priorities must be at least 1".into());
        }
        let smallest = self
            .site
            .iter()
            .map(|s| s.nodes * s.cores_per_node)
            .max()
            .unwrap_or(0);
        for (k, v) in [
            ("global.procs", &g.procs),
            ("global.local_procs", &g.local_procs),
        ] {
            if v.is_empty() || v.contains(&0) {
                p.push(format!("{k} must list processor counts >= 1"));
            }
        }
        if let Some(big) = g.procs.iter().find(|&&x| x > smallest) {
            p.push(format!(
                "global.procs: {big} processors fit on no site (the largest has {smallest})"
            ));
        }
        for s in &self.site {
            let size = s.nodes * s.cores_per_node;
            if g.local_procs.iter().any(|&x| x > size) {
                p.push(format!(
                    "global.local_procs: a local job larger than site {:?} ({size} processors)",
                    s.name
                ));
            }
        }
        if !(g.mean_runtime_seconds.is_finite() && g.mean_runtime_seconds >= 1.0) {
            p.push("global.mean_runtime_seconds must be at least 1".into());
        }
        if !(g.runtime_cv.is_finite() && g.runtime_cv >= 0.0) {
            p.push("global.runtime_cv must be >= 0".into());
        }
        if !(finite_nonneg(g.input_mb[0]) && g.input_mb[0] <= g.input_mb[1]) {
            p.push("global.input_mb must be [min, max] with 0 <= min <= max".into());
        }
        if !finite_nonneg(self.dispatcher_poll) {
            p.push(format!(
                "dispatcher_poll must be a number >= 0, got {}",
                self.dispatcher_poll
            ));
        }
        if self.seeds == 0 {
            p.push("seeds must be at least 1".into());
        }
        if self.time_scale == 0 {
            p.push("time_scale must be at least 1".into());
        }
        p
    }
}
