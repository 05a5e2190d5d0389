//! Sweeps: the cartesian product of traces × policies × options (`sweep.toml`), every run on
//! its own core, so that a comparison of policies is one command rather than a shell loop.
//!
//! Each trace is read once and converted once per semantics and load factor; the runs share
//! those workloads. A row holds the same figures `sim run` reports for the same trace,
//! policy and options.

use crate::runner::{simulate, SimError};
use crate::swf::{SwfError, Trace};
use crate::workload::{Semantics, Workload};
use foresight_core::policy::{BackfillChoice, QueueOrder};
use foresight_core::{Policy, Time};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why a sweep could not run.
#[derive(Debug, Error)]
pub enum SweepError {
    /// The configuration file could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The configuration is not valid TOML or has unknown or ill-typed keys.
    #[error("{path}: {message}")]
    Config {
        /// The file.
        path: String,
        /// What is wrong, with the line where TOML says.
        message: String,
    },
    /// A trace could not be read (the error names the file).
    #[error(transparent)]
    Trace(#[from] SwfError),
    /// A trace's header does not give the machine size.
    #[error(
        "{0}: the header has neither MaxProcs nor MaxNodes; give it as {{ path = …, procs = N }}"
    )]
    NoMachineSize(String),
    /// A run failed.
    #[error("{run}: {source}")]
    Sim {
        /// The run, as its row names it.
        run: String,
        /// Why.
        source: SimError,
    },
}

/// A trace of the sweep: a path, or a path with the machine size.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum TraceEntry {
    /// The machine size comes from the header.
    Path(PathBuf),
    /// The machine size is given.
    Sized {
        /// The trace file (plain or .gz).
        path: PathBuf,
        /// Processors.
        procs: u32,
    },
}

impl TraceEntry {
    fn path(&self) -> &Path {
        match self {
            TraceEntry::Path(p) | TraceEntry::Sized { path: p, .. } => p,
        }
    }
}

/// `sweep.toml`: every list is one axis of the product.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SweepConfig {
    /// SWF traces, relative to the configuration file.
    pub traces: Vec<TraceEntry>,
    /// Local policies as `--policy` reads them.
    #[serde(default)]
    pub policies: Vec<String>,
    /// Reservation depths: each adds the policy `depth:N`.
    #[serde(default)]
    pub depth: Vec<u32>,
    /// Backfill choices; empty: each policy's own. `fcfs` never backfills and runs once.
    #[serde(default)]
    pub backfill: Vec<BackfillChoice>,
    /// Queue orders.
    #[serde(default = "default_order")]
    pub order: Vec<QueueOrder>,
    /// Trace semantics.
    #[serde(default = "default_semantics")]
    pub semantics: Vec<Semantics>,
    /// Load factors: submission times are divided by the factor, so 1.2 offers 20 % more
    /// work per unit of time with the same jobs.
    #[serde(default = "default_load")]
    pub load: Vec<f64>,
    /// The folder relative trace paths start from (the configuration file's).
    #[serde(skip)]
    pub base: PathBuf,
}

fn default_order() -> Vec<QueueOrder> {
    vec![QueueOrder::Fcfs]
}
fn default_semantics() -> Vec<Semantics> {
    vec![Semantics::Default]
}
fn default_load() -> Vec<f64> {
    vec![1.0]
}

/// One run of a sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepRun {
    /// Index into the configuration's traces.
    pub trace: usize,
    /// The policy, with its backfill choice and order set.
    pub policy: Policy,
    /// Trace semantics.
    pub semantics: Semantics,
    /// Load factor.
    pub load: f64,
}

/// One row of a sweep's result: the run and the figures `sim run` reports for it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepRow {
    /// The trace as the configuration names it.
    pub trace: String,
    /// Processors simulated.
    pub procs: u32,
    /// Policy name (`sim run --policy`).
    pub policy: String,
    /// Backfill choice.
    pub backfill: String,
    /// Queue order.
    pub order: String,
    /// Trace semantics.
    pub semantics: String,
    /// Load factor.
    pub load: f64,
    /// Jobs simulated.
    pub jobs: u64,
    /// Mean wait, seconds.
    pub mean_wait: f64,
    /// Mean response, seconds.
    pub mean_response: f64,
    /// Mean slowdown.
    pub mean_slowdown: f64,
    /// Mean bounded slowdown (τ = 10 s).
    pub mean_bsld: f64,
    /// Largest wait, seconds.
    pub max_wait: i64,
    /// Utilization, 0..1.
    pub utilization: f64,
    /// Makespan, seconds.
    pub makespan: i64,
}

impl SweepRow {
    /// The run's options in one short label, for tables and figures.
    pub fn label(&self) -> String {
        let mut s = format!("{} {}", self.policy, self.backfill);
        if self.order != "fcfs" {
            s.push_str(&format!(" {}", self.order));
        }
        if self.semantics != "default" {
            s.push_str(&format!(" {}", self.semantics));
        }
        if self.load != 1.0 {
            s.push_str(&format!(" ×{}", self.load));
        }
        s
    }
}

impl SweepConfig {
    /// Reads and checks `path`; relative trace paths start from its folder.
    pub fn read(path: &Path) -> Result<SweepConfig, SweepError> {
        let text = crate::input::read_text(path).map_err(|source| SweepError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let mut cfg = SweepConfig::parse(&text, &path.display().to_string())?;
        cfg.base = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        Ok(cfg)
    }

    /// Parses and checks a configuration; `name` is used in errors.
    pub fn parse(text: &str, name: &str) -> Result<SweepConfig, SweepError> {
        let bad = |message: String| SweepError::Config {
            path: name.to_string(),
            message,
        };
        let cfg: SweepConfig = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
        if cfg.traces.is_empty() {
            return Err(bad("`traces` is empty: name at least one SWF trace".into()));
        }
        if cfg.policies.is_empty() && cfg.depth.is_empty() {
            return Err(bad(
                "give `policies` (fcfs, firstfit, easy, conservative, depth:N…) or `depth`".into(),
            ));
        }
        for p in &cfg.policies {
            p.parse::<Policy>()
                .map_err(|e| bad(format!("policies: {e}")))?;
        }
        for (axis, empty) in [
            ("order", cfg.order.is_empty()),
            ("semantics", cfg.semantics.is_empty()),
            ("load", cfg.load.is_empty()),
        ] {
            if empty {
                return Err(bad(format!(
                    "`{axis}` is empty: leave it out for the default"
                )));
            }
        }
        if let Some(l) = cfg.load.iter().find(|l| !(l.is_finite() && **l > 0.0)) {
            return Err(bad(format!("load {l}: a load factor must be above 0")));
        }
        for t in &cfg.traces {
            if let TraceEntry::Sized { procs: 0, path } = t {
                return Err(bad(format!("{}: procs must be at least 1", path.display())));
            }
        }
        Ok(cfg)
    }

    /// Every run of the product, traces outermost, in a stable order.
    pub fn runs(&self) -> Vec<SweepRun> {
        let mut policies: Vec<Policy> = self
            .policies
            .iter()
            .map(|p| p.parse().expect("invariant: checked by parse"))
            .collect();
        policies.extend(self.depth.iter().map(|&d| Policy::depth(d)));
        let mut out = Vec::new();
        for trace in 0..self.traces.len() {
            for base in &policies {
                let fcfs = base.reservation_depth == 0 && base.backfill == BackfillChoice::None;
                let choices: Vec<Option<BackfillChoice>> = if self.backfill.is_empty() || fcfs {
                    vec![None]
                } else {
                    self.backfill.iter().copied().map(Some).collect()
                };
                for choice in choices {
                    for &order in &self.order {
                        for &semantics in &self.semantics {
                            for &load in &self.load {
                                let mut policy = base.clone();
                                if let Some(c) = choice {
                                    policy.backfill = c;
                                }
                                policy.order = order;
                                out.push(SweepRun {
                                    trace,
                                    policy,
                                    semantics,
                                    load,
                                });
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

/// Divides every submission time by `load` (rounding down keeps the order), so that the
/// same jobs offer `load` times the work per unit of time.
pub fn scale_load(w: &mut Workload, load: f64) {
    if load == 1.0 {
        return;
    }
    for j in &mut w.jobs {
        j.job.submit = Time((j.job.submit.secs() as f64 / load).floor() as i64);
    }
}

/// Runs every run of `cfg` in parallel on rayon's pool (one thread per core by default).
/// `done` is called from the workers as each run finishes. Rows come back in
/// [`SweepConfig::runs`] order.
pub fn run_sweep(
    cfg: &SweepConfig,
    done: &(dyn Fn(&SweepRow) + Sync),
) -> Result<Vec<SweepRow>, SweepError> {
    let traces: Vec<(Trace, u32)> = cfg
        .traces
        .par_iter()
        .map(|t| {
            let path = cfg.base.join(t.path());
            let name = path.display().to_string();
            let trace = Trace::read(&path, false)?;
            let procs = match t {
                TraceEntry::Sized { procs, .. } => *procs,
                TraceEntry::Path(_) => trace
                    .header
                    .machine_size()
                    .map_err(SwfError::from)?
                    .filter(|p| *p > 0)
                    .ok_or_else(|| SweepError::NoMachineSize(name.clone()))?,
            };
            Ok((trace, procs))
        })
        .collect::<Result<_, SweepError>>()?;
    // One workload per (trace, semantics, load), shared by the runs that use it.
    let mut keys: Vec<(usize, Semantics, u64)> = Vec::new();
    for t in 0..traces.len() {
        for &s in &cfg.semantics {
            for &l in &cfg.load {
                keys.push((t, s, l.to_bits()));
            }
        }
    }
    let workloads: Vec<Workload> = keys
        .par_iter()
        .map(|&(t, s, l)| {
            let (trace, procs) = &traces[t];
            let mut w = Workload::from_trace(trace, *procs, s);
            scale_load(&mut w, f64::from_bits(l));
            w
        })
        .collect();
    let runs = cfg.runs();
    runs.par_iter()
        .map(|run| {
            let (_, procs) = traces[run.trace];
            let k = keys
                .iter()
                .position(|&(t, s, l)| {
                    t == run.trace && s == run.semantics && l == run.load.to_bits()
                })
                .expect("invariant: every run's workload was built");
            let mut row = SweepRow {
                trace: cfg.traces[run.trace].path().display().to_string(),
                procs,
                policy: run.policy.name(),
                backfill: format!("{:?}", run.policy.backfill).to_lowercase(),
                order: format!("{:?}", run.policy.order).to_lowercase(),
                semantics: run.semantics.name().to_string(),
                load: run.load,
                jobs: 0,
                mean_wait: 0.0,
                mean_response: 0.0,
                mean_slowdown: 0.0,
                mean_bsld: 0.0,
                max_wait: 0,
                utilization: 0.0,
                makespan: 0,
            };
            let out = simulate(
                &workloads[k],
                procs,
                &run.policy,
                run.semantics,
                &mut |_| {},
            )
            .map_err(|source| SweepError::Sim {
                run: format!("{} {}", row.trace, row.label()),
                source,
            })?;
            let m = out.metrics;
            row.jobs = m.jobs;
            row.mean_wait = m.mean_wait;
            row.mean_response = m.mean_response;
            row.mean_slowdown = m.mean_slowdown;
            row.mean_bsld = m.mean_bsld;
            row.max_wait = m.max_wait;
            row.utilization = m.utilization;
            row.makespan = m.makespan;
            done(&row);
            Ok(row)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_product_has_every_combination_once_and_fcfs_never_backfills() {
        let cfg = SweepConfig::parse(
            r#"
traces = ["a.swf", { path = "b.swf", procs = 8 }]
policies = ["fcfs", "easy"]
depth = [3]
backfill = ["firstfit", "bestfit"]
order = ["fcfs", "sjf"]
load = [1.0, 1.5]
"#,
            "t",
        )
        .expect("valid");
        let runs = cfg.runs();
        // Per trace: fcfs 1 × 2 orders × 2 loads + (easy, depth:3) × 2 backfills × 2 × 2.
        assert_eq!(runs.len(), 2 * (4 + 2 * 2 * 2 * 2));
        for r in &runs {
            if r.policy.name() == "fcfs" {
                assert_eq!(r.policy.backfill, BackfillChoice::None);
            }
        }
        let mut seen: Vec<String> = runs
            .iter()
            .map(|r| format!("{} {:?} {:?} {}", r.trace, r.policy, r.semantics, r.load))
            .collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), runs.len(), "a run is repeated");
    }

    #[test]
    fn bad_configurations_say_what_is_wrong() {
        for (text, want) in [
            ("traces = []\npolicies = [\"easy\"]", "`traces` is empty"),
            ("traces = [\"a\"]", "give `policies`"),
            (
                "traces = [\"a\"]\npolicies = [\"eazy\"]",
                "\"eazy\" is not a policy",
            ),
            (
                "traces = [\"a\"]\npolicies = [\"easy\"]\nload = [0]",
                "load 0",
            ),
            (
                "traces = [\"a\"]\npolicies = [\"easy\"]\nbackfil = []",
                "backfil",
            ),
            (
                "traces = [\"a\"]\npolicies = [\"easy\"]\nbackfill = [\"fast\"]",
                "fast",
            ),
            (
                "traces = [\"a\"]\npolicies = [\"easy\"]\norder = []",
                "`order` is empty",
            ),
        ] {
            let e = SweepConfig::parse(text, "s.toml")
                .expect_err(text)
                .to_string();
            assert!(e.starts_with("s.toml: "), "{e}");
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn load_scaling_divides_submissions_and_keeps_their_order() {
        let mut w = Workload::synthetic(200, 16, 0.7, 3);
        let before: Vec<i64> = w.jobs.iter().map(|j| j.job.submit.secs()).collect();
        scale_load(&mut w, 2.0);
        for (b, j) in before.iter().zip(&w.jobs) {
            assert_eq!(j.job.submit.secs(), b / 2);
        }
        assert!(w
            .jobs
            .windows(2)
            .all(|p| p[0].job.submit <= p[1].job.submit));
    }
}
