//! Workflow simulation (`foresight sim workflow`): seeded random workflows of standard shapes
//! mapped by DSC, HEFT and greedy onto a grid whose clusters replay real traces as their
//! owners' load, each mapping then held as reservations while the local streams go on.
//!
//! For every seed `s` the workflow arrives at `T_s = start + s × spacing` (hours into the
//! traces). Every cluster's local stream is replayed up to `T_s` through its local policy;
//! its forecast at `T_s` (running jobs to their estimate, queued jobs at their conservative
//! starts) gives the free profile the mappers see. Each mapping is checked by the core's
//! validator, then its tasks are reserved on their clusters (displacing queued local jobs'
//! reservations where needed, as grid reservations do) and the local streams are replayed
//! on until every local job submitted in `[T_s, T_s + window)` has started.
//!
//! Measured per shape and mapper, as means over the seeds with 95 % confidence intervals
//! (Student's t):
//! - `makespan`: from arrival to the last task's end, seconds (tasks run their planned
//!   time: the plan's prediction is taken as exact, so the reservations hold);
//! - `vs_greedy`: makespan over greedy's for the same seed (a paired ratio: the seeds' load
//!   varies far more than the mappers do);
//! - `slr`: makespan over the critical-path lower bound (each task at its fastest, free
//!   transfers, empty clusters; [`foresight_core::workflow::critical_path`]);
//! - `staging`: the share of the workflow's busy time spent moving data between clusters,
//!   Σ transfers / (Σ transfers + Σ task runtimes);
//! - `local_wait`: mean wait of the local jobs submitted in the window, seconds, and
//!   `local_delay`, its excess over the same seed without the workflow.

mod replay;
pub mod shapes;

use crate::grid::{local_stream, ClusterConfig};
pub use crate::stats::Estimate;
use foresight_core::workflow::{
    check, critical_path, map_dag, Dag, DscConfig, GridState, Mapper, Site, WorkflowError,
};
use foresight_core::{Dur, LocalScheduler, Policy, Time};
use rand::SeedableRng;
use rand_pcg::Pcg64;
use rayon::prelude::*;
use replay::Replay;
use serde::{Deserialize, Serialize};
pub use shapes::{generate, Shape, ShapeParams};
use std::path::Path;
use std::sync::Arc;
use thiserror::Error;

/// What a workflow simulation can get wrong.
#[derive(Debug, Error)]
pub enum WorkflowSimError {
    /// The configuration file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The configuration is invalid; the message names the key.
    #[error("{path}: {message}")]
    Config {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A local stream could not be built.
    #[error(transparent)]
    Grid(#[from] crate::grid::GridError),
    /// A local scheduler refused something it should not have.
    #[error("cluster {cluster}: {source}")]
    Core {
        /// The cluster.
        cluster: String,
        /// Why.
        source: foresight_core::CoreError,
    },
    /// A generated workflow cannot be mapped (a task larger than every cluster, say).
    #[error("seed {seed}, shape {shape}: {source}")]
    Map {
        /// The seed.
        seed: usize,
        /// The shape.
        shape: &'static str,
        /// Why.
        source: WorkflowError,
    },
    /// A mapper broke a rule of the validator: a bug, reported rather than measured.
    #[error("seed {seed}, shape {shape}, mapper {mapper}: invalid mapping: {message}")]
    Invalid {
        /// The seed.
        seed: usize,
        /// The shape.
        shape: &'static str,
        /// The mapper.
        mapper: &'static str,
        /// The violation.
        message: String,
    },
}

/// The experiment (`workflow.toml`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowSimConfig {
    /// Seeds (workflow arrivals) per shape.
    #[serde(default = "default_seeds")]
    pub seeds: usize,
    /// The first arrival, hours into the local streams (after their `skip_days`).
    #[serde(default = "default_start")]
    pub start_hours: f64,
    /// Hours between the arrivals of successive seeds.
    #[serde(default = "default_spacing")]
    pub spacing_hours: f64,
    /// Local jobs submitted within this many hours of the arrival are measured.
    #[serde(default = "default_window")]
    pub window_hours: f64,
    /// The plan's horizon, hours: DSC merges only onto slots starting within it.
    #[serde(default = "default_horizon")]
    pub horizon_hours: i64,
    /// The shapes to generate (all by default).
    #[serde(default = "all_shapes")]
    pub shapes: Vec<Shape>,
    /// Priority of the workflows (DSC's budget grows with it).
    #[serde(default)]
    pub priority: u32,
    /// Size and weight of the workflows.
    #[serde(default)]
    pub workflow: ShapeParams,
    /// DSC's search budget.
    #[serde(default)]
    pub dsc: DscConfig,
    /// The clusters, as in `sim grid` (name, procs, speed, policy, link, local stream).
    pub cluster: Vec<ClusterConfig>,
}

fn default_seeds() -> usize {
    20
}
fn default_start() -> f64 {
    24.0
}
fn default_spacing() -> f64 {
    12.0
}
fn default_window() -> f64 {
    24.0
}
fn default_horizon() -> i64 {
    7 * 24
}
fn all_shapes() -> Vec<Shape> {
    Shape::ALL.to_vec()
}

impl WorkflowSimConfig {
    /// Reads and checks a configuration; local trace paths are relative to the file.
    pub fn read(path: &Path) -> Result<WorkflowSimConfig, WorkflowSimError> {
        let name = path.display().to_string();
        let text = crate::input::read_text(path).map_err(|source| WorkflowSimError::Io {
            path: name.clone(),
            source,
        })?;
        let mut cfg = WorkflowSimConfig::parse(&text, &name)?;
        let base = path.parent().unwrap_or(Path::new("."));
        for c in &mut cfg.cluster {
            if let Some(t) = c.local.trace.as_mut() {
                if t.is_relative() {
                    *t = base.join(&*t);
                }
            }
        }
        Ok(cfg)
    }

    /// Parses and checks a configuration (`name` is for messages).
    pub fn parse(text: &str, name: &str) -> Result<WorkflowSimConfig, WorkflowSimError> {
        let config = |message: String| WorkflowSimError::Config {
            path: name.to_string(),
            message,
        };
        let cfg: WorkflowSimConfig = toml::from_str(text).map_err(|e| config(e.to_string()))?;
        cfg.check().map_err(config)?;
        Ok(cfg)
    }

    fn check(&self) -> Result<(), String> {
        if self.cluster.is_empty() {
            return Err("at least one [[cluster]] is needed".into());
        }
        if self.seeds == 0 {
            return Err("seeds must be at least 1".into());
        }
        if self.shapes.is_empty() {
            return Err("shapes must list at least one shape".into());
        }
        for (k, v) in [
            ("start_hours", self.start_hours),
            ("spacing_hours", self.spacing_hours),
            ("window_hours", self.window_hours),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("{k} must be a number >= 0, got {v}"));
            }
        }
        if self.window_hours <= 0.0 {
            return Err("window_hours must be positive".into());
        }
        if self.horizon_hours <= 0 {
            return Err("horizon_hours must be positive".into());
        }
        self.workflow.check()?;
        let mut names = std::collections::BTreeSet::new();
        for c in &self.cluster {
            if !names.insert(&c.name) {
                return Err(format!("cluster {:?} is defined twice", c.name));
            }
            c.spec.check(true)?;
        }
        let largest = self.cluster.iter().map(|c| c.procs).max().unwrap_or(0);
        if self.workflow.task_procs[1] > largest {
            return Err(format!(
                "workflow.task_procs allows {} processors but the largest cluster has {largest}",
                self.workflow.task_procs[1]
            ));
        }
        Ok(())
    }
}

/// One mapper on one shape, over all seeds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MapperRow {
    /// The shape.
    pub shape: String,
    /// The mapper.
    pub mapper: String,
    /// Seeds measured.
    pub seeds: usize,
    /// Mean number of tasks.
    pub tasks: f64,
    /// Makespan, seconds.
    pub makespan: Estimate,
    /// Makespan over greedy's on the same seed (paired, so the load's variation between
    /// seeds cancels out).
    pub vs_greedy: Estimate,
    /// Schedule length ratio.
    pub slr: Estimate,
    /// Share of busy time spent staging, 0..1.
    pub staging: Estimate,
    /// Mean wait of the local jobs in the window, seconds.
    pub local_wait: Estimate,
    /// `local_wait` minus the same without the workflow, seconds.
    pub local_delay: Estimate,
    /// Merges DSC accepted (0 for the others).
    pub merges: f64,
    /// Tasks whose reservation the local scheduler refused (should stay 0).
    pub refused_holds: usize,
}

/// The whole experiment's result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkflowReport {
    /// Seeds per shape.
    pub seeds: usize,
    /// One row per shape and mapper, shapes in config order, mappers dsc, heft, greedy.
    pub rows: Vec<MapperRow>,
}

/// Per seed, shape and mapper: makespan, slr, staging, local wait, local delay, merges,
/// refused holds, tasks.
type Sample = (f64, f64, f64, f64, f64, usize, usize, usize);

const MAPPERS: [&str; 3] = ["dsc", "heft", "greedy"];

/// Runs the experiment with `cfg.seeds` seeds (or `seeds` when given).
pub fn simulate_workflows(
    cfg: &WorkflowSimConfig,
    seeds: Option<usize>,
) -> Result<WorkflowReport, WorkflowSimError> {
    let seeds = seeds.unwrap_or(cfg.seeds).max(1);
    let hour = 3600.0;
    let arrival = |s: usize| Time(((cfg.start_hours + s as f64 * cfg.spacing_hours) * hour) as i64);
    let window = Dur((cfg.window_hours * hour) as i64);
    let last = arrival(seeds - 1);
    // Enough stream for the last window and for its jobs to start.
    let days = (last.secs() as f64 + 8.0 * window.as_secs() as f64) / 86_400.0;
    let mut replays = Vec::new();
    for (i, c) in cfg.cluster.iter().enumerate() {
        let (jobs, _) = local_stream(c, c.procs, days, i)?;
        let policy: Policy = c.policy.parse().map_err(|e| WorkflowSimError::Config {
            path: c.name.clone(),
            message: format!("policy {e}"),
        })?;
        replays.push(Replay::new(
            LocalScheduler::new(c.procs, policy),
            Arc::new(jobs),
        ));
    }
    let core = |i: usize| {
        let cluster = cfg.cluster[i].name.clone();
        move |source| WorkflowSimError::Core { cluster, source }
    };
    // Snapshots of every cluster at every arrival, replayed forward once.
    let mut snapshots = Vec::with_capacity(seeds);
    for s in 0..seeds {
        for (i, r) in replays.iter_mut().enumerate() {
            r.run_until(arrival(s)).map_err(core(i))?;
        }
        snapshots.push(replays.clone());
    }
    let per_seed: Vec<Vec<Vec<Sample>>> = snapshots
        .into_par_iter()
        .enumerate()
        .map(|(s, snap)| seed_run(cfg, s, arrival(s), window, snap))
        .collect::<Result<_, _>>()?;
    let mut rows = Vec::new();
    for (k, shape) in cfg.shapes.iter().enumerate() {
        for (m, name) in MAPPERS.iter().enumerate() {
            let xs: Vec<&Sample> = per_seed.iter().map(|seed| &seed[k][m]).collect();
            let col = |f: fn(&Sample) -> f64| -> Vec<f64> { xs.iter().map(|x| f(x)).collect() };
            rows.push(MapperRow {
                shape: shape.name().into(),
                mapper: (*name).into(),
                seeds,
                tasks: col(|x| x.7 as f64).iter().sum::<f64>() / seeds as f64,
                makespan: Estimate::ci95(&col(|x| x.0)),
                vs_greedy: Estimate::ci95(
                    &per_seed
                        .iter()
                        .map(|seed| seed[k][m].0 / seed[k][2].0.max(1.0))
                        .collect::<Vec<_>>(),
                ),
                slr: Estimate::ci95(&col(|x| x.1)),
                staging: Estimate::ci95(&col(|x| x.2)),
                local_wait: Estimate::ci95(&col(|x| x.3)),
                local_delay: Estimate::ci95(&col(|x| x.4)),
                merges: col(|x| x.5 as f64).iter().sum::<f64>() / seeds as f64,
                refused_holds: xs.iter().map(|x| x.6).sum(),
            });
        }
    }
    Ok(WorkflowReport { seeds, rows })
}

/// Replays until every local job submitted in `[from, from + window)` has started (or a
/// cap of eight windows), and returns their mean wait.
fn local_wait(
    cfg: &WorkflowSimConfig,
    replays: &mut [Replay],
    from: Time,
    window: Dur,
) -> Result<f64, WorkflowSimError> {
    let (mut sum, mut n) = (0i64, 0usize);
    for (i, r) in replays.iter_mut().enumerate() {
        let mut until = from + window;
        loop {
            r.run_until(until)
                .map_err(|source| WorkflowSimError::Core {
                    cluster: cfg.cluster[i].name.clone(),
                    source,
                })?;
            if r.all_started(from, from + window) || until >= from + Dur(window.as_secs() * 8) {
                break;
            }
            until += window;
        }
        let w = r.waits(from, from + window);
        sum += w.iter().sum::<i64>();
        n += w.len();
    }
    Ok(if n == 0 { 0.0 } else { sum as f64 / n as f64 })
}

/// Every shape and mapper for one seed.
fn seed_run(
    cfg: &WorkflowSimConfig,
    seed: usize,
    now: Time,
    window: Dur,
    snap: Vec<Replay>,
) -> Result<Vec<Vec<Sample>>, WorkflowSimError> {
    let grid = GridState {
        now,
        horizon: now + Dur::hours(cfg.horizon_hours),
        sites: cfg
            .cluster
            .iter()
            .zip(&snap)
            .map(|(c, r)| Site {
                name: c.name.clone(),
                free: r.free_profile(now),
                speed: c.slowest_speed(),
                features: Vec::new(),
                bandwidth_mb_s: c.bandwidth_mb_s,
                latency: Dur(c.latency_seconds),
            })
            .collect(),
    };
    let base_wait = local_wait(cfg, &mut snap.clone(), now, window)?;
    let mut out = Vec::new();
    for (k, &shape) in cfg.shapes.iter().enumerate() {
        let mut rng = Pcg64::seed_from_u64((seed as u64) << 8 | k as u64);
        let mut wf = generate(shape, &cfg.workflow, &mut rng);
        wf.priority = cfg.priority;
        let map_err = |source| WorkflowSimError::Map {
            seed,
            shape: shape.name(),
            source,
        };
        let dag = Dag::new(&wf, &grid).map_err(map_err)?;
        let bound = critical_path(&dag, &grid).as_secs().max(1) as f64;
        let mut row = Vec::new();
        for (m, mapper) in [Mapper::Dsc(cfg.dsc), Mapper::Heft, Mapper::Greedy]
            .iter()
            .enumerate()
        {
            let mapping = map_dag(&dag, &grid, mapper).map_err(map_err)?;
            check(&dag, &grid, &mapping).map_err(|v| WorkflowSimError::Invalid {
                seed,
                shape: shape.name(),
                mapper: MAPPERS[m],
                message: v.to_string(),
            })?;
            let makespan = mapping.makespan().as_secs() as f64;
            let staging = mapping.staging(&dag, &grid).as_secs() as f64;
            let busy: i64 = mapping
                .placements
                .iter()
                .map(|p| (p.end - p.start).as_secs())
                .sum();
            let mut replays = snap.clone();
            let mut refused = 0;
            for (j, (p, t)) in mapping.placements.iter().zip(&wf.tasks).enumerate() {
                // Ids far above any the traces use.
                if !replays[p.site].hold(1 << 40 | j as u64, t.procs, p.start, p.end) {
                    refused += 1;
                }
            }
            let wait = local_wait(cfg, &mut replays, now, window)?;
            row.push((
                makespan,
                makespan / bound,
                staging / (staging + busy as f64).max(1.0),
                wait,
                wait - base_wait,
                mapping.merges,
                refused,
                wf.tasks.len(),
            ));
        }
        out.push(row);
    }
    Ok(out)
}
