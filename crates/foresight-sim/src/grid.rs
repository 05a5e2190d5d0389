//! Grid simulation: several clusters, each with its own local stream and local policy, and a
//! global stream brokered by the lookahead planner ([`foresight_core::grid::plan_cycle`]) or
//! by a baseline, so that the planner's gain is measured, not claimed.
//!
//! Brokers:
//! - `lookahead`: every cycle the planner plans the global queue on all clusters' forecasts;
//!   jobs due within the lead time get reservations on every cluster they use (two-phase:
//!   all or none) and start there at the reserved second, co-allocated if need be.
//! - `queue`: each global job is sent, on arrival, to the one cluster where it would start
//!   earliest and queued there as an ordinary job (jobs larger than every cluster cannot run).
//! - `dedicated:F`: a fraction F of every cluster is taken from its owners for global jobs,
//!   which are queued on the partition where they would start earliest.
//!
//! Budgets (`[[user]]`; users without an entry have none): a job whose worst-case charge
//! exceeds what is left of its user's budget is refused on arrival. `lookahead` charges the
//! planned cost of the slots, taken from the budget when the job is reserved. `queue` and
//! `dedicated` hold the most the job can cost where it is queued (base tariff × processors ×
//! estimate there) from its queuing — refusing it if that is more than is left — and at its
//! start charge the base tariff for what it uses and return the rest. No budget goes below
//! zero; the report gives each user's charge and what is left.

use crate::swf::Trace;
use crate::workload::{Semantics, Workload};
use foresight_core::forecast::Tariff;
use foresight_core::grid::{plan_cycle, ClusterView, Decision, GlobalJob, Part, PlannerConfig};
use foresight_core::policy::ALL;
use foresight_core::reservation::{Acl, AdminReservation};
use foresight_core::select::{Criterion, Processor};
use foresight_core::{
    Action, Dur, Event, Interval, Job, JobId, LocalScheduler, Policy, ReservationId, Time, UserId,
};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// What a grid configuration or run can get wrong.
#[derive(Debug, Error)]
pub enum GridError {
    /// The configuration file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The configuration is not valid TOML for a grid.
    #[error("{path}: {message}")]
    Config {
        /// The file.
        path: String,
        /// What is wrong, naming the key.
        message: String,
    },
    /// A local trace could not be read.
    #[error(transparent)]
    Trace(#[from] crate::swf::SwfError),
    /// The scheduler refused something it should not have.
    #[error("cluster {cluster}: {source}")]
    Core {
        /// The cluster.
        cluster: String,
        /// Why.
        source: foresight_core::CoreError,
    },
}

/// The grid to simulate (`grid.toml`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GridConfig {
    /// Simulated span, days: local jobs submitted later are left out, global arrivals stop.
    pub days: f64,
    /// Planning cycle, seconds.
    #[serde(default = "default_cycle")]
    pub cycle_seconds: i64,
    /// Jobs planned to start within this many seconds are reserved.
    #[serde(default = "default_lead")]
    pub lead_time_seconds: i64,
    /// How far ahead the planner looks, hours.
    #[serde(default = "default_horizon")]
    pub horizon_hours: i64,
    /// Queued global jobs planned per cycle, in order (the rest wait a cycle).
    #[serde(default = "default_plan_depth")]
    pub plan_depth: usize,
    /// The clusters.
    pub cluster: Vec<ClusterConfig>,
    /// Users and their budgets.
    #[serde(default)]
    pub user: Vec<UserConfig>,
    /// The global stream.
    pub global: GlobalStream,
}

fn default_cycle() -> i64 {
    300
}
fn default_lead() -> i64 {
    900
}
fn default_horizon() -> i64 {
    7 * 24
}
fn default_plan_depth() -> usize {
    64
}

/// One cluster of the grid.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// Unique name.
    pub name: String,
    /// Processors (of speed `speed`, or as many as its `groups` hold together).
    pub procs: u32,
    /// Speed of every processor relative to the reference processor; 1.0 when neither this
    /// nor `groups` is given. Give `speed` or `groups`, not both.
    ///
    /// A cluster of one speed is that fast throughout: its local jobs run their trace runtime
    /// (and estimate) divided by it, as do the global jobs placed on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<f64>,
    /// Speed groups, for a cluster whose processors are not all equally fast, e.g.
    /// `groups = [ { procs = 64, speed = 1.0 }, { procs = 32, speed = 2.0 } ]`; their `procs`
    /// must add up to the cluster's `procs`, every speed must be positive. Give `speed` or
    /// `groups`, not both.
    ///
    /// - The lookahead planner sees every processor at its group's speed, so earliest finish
    ///   (or start) is sought over the groups of one cluster as over clusters: a global job's
    ///   part runs its runtime divided by the slowest speed among the processors chosen for
    ///   the job (rounded up). Processors are numbered fastest group first; the forecast lays
    ///   running and reserved work on the lowest-numbered processors, so work already there
    ///   (a running global part, say) is seen on the fast processors rather than leaving them
    ///   to be offered twice. (The local scheduler counts processors only, so which processors
    ///   the work holds is the planner's assumption, rebuilt every cycle.)
    /// - The local scheduler counts processors only and cannot say which group a job lands
    ///   on: local jobs run at reference speed, their runtimes as the trace recorded them.
    /// - The `queue` and `dedicated` baselines queue global jobs at the local scheduler too,
    ///   which promises no group: their jobs run at the cluster's slowest group speed
    ///   (conservative).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<SpeedGroup>>,
    /// Local policy: fcfs, firstfit, easy, conservative, depth:N.
    #[serde(default = "easy")]
    pub policy: String,
    /// Base price per processor-second.
    #[serde(default = "one")]
    pub tariff: f64,
    /// Premium on time planned for local jobs (see `Tariff::local_premium`).
    #[serde(default = "one")]
    pub local_premium: f64,
    /// Link bandwidth to the grid, MB/s.
    #[serde(default = "default_bandwidth")]
    pub bandwidth_mb_s: f64,
    /// Link latency, seconds.
    #[serde(default)]
    pub latency_seconds: i64,
    /// The owners' own stream.
    pub local: LocalStream,
}

/// Processors of one speed inside a cluster (see [`ClusterConfig::groups`]).
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SpeedGroup {
    /// Processors in the group.
    pub procs: u32,
    /// Their speed relative to the reference processor.
    pub speed: f64,
}

impl ClusterConfig {
    /// The cluster's processors by speed: its `groups`, or all `procs` at `speed` (1.0 by
    /// default), in the order given.
    pub fn speed_groups(&self) -> Vec<SpeedGroup> {
        match &self.groups {
            Some(g) => g.clone(),
            None => vec![SpeedGroup {
                procs: self.procs,
                speed: self.speed.unwrap_or(1.0),
            }],
        }
    }

    /// The speed of the slowest processor: what a job placed by the local scheduler, which
    /// promises no particular processors, can count on.
    pub fn slowest_speed(&self) -> f64 {
        self.speed_groups()
            .iter()
            .map(|g| g.speed)
            .fold(f64::INFINITY, f64::min)
    }

    /// The speed local jobs run at: `speed` on a cluster of one speed, the reference speed on
    /// one of speed groups (see [`ClusterConfig::groups`]).
    pub fn local_speed(&self) -> f64 {
        match self.groups {
            Some(_) => 1.0,
            None => self.speed.unwrap_or(1.0),
        }
    }

    /// The planner's processors: the first `n` of the cluster's, fastest group first,
    /// named `<cluster>/p<i>`.
    fn processors(&self, n: u32) -> Vec<Processor> {
        let mut groups = self.speed_groups();
        groups.sort_by(|a, b| b.speed.total_cmp(&a.speed));
        groups
            .iter()
            .flat_map(|g| std::iter::repeat_n(g.speed, g.procs as usize))
            .take(n as usize)
            .enumerate()
            .map(|(i, speed)| Processor {
                id: format!("{}/p{i}", self.name),
                cluster: self.name.clone(),
                speed,
                memory_mb: 0,
                features: Default::default(),
            })
            .collect()
    }

    fn check(&self) -> Result<(), String> {
        let name = &self.name;
        if self.procs == 0 {
            return Err(format!("cluster {name:?}: procs must be at least 1"));
        }
        if let Some(speed) = self.speed {
            if !positive(speed) {
                return Err(format!(
                    "cluster {name:?}: speed must be positive, got {speed}"
                ));
            }
        }
        let Some(groups) = &self.groups else {
            return Ok(());
        };
        if self.speed.is_some() {
            return Err(format!(
                "cluster {name:?}: give either speed or groups, not both"
            ));
        }
        if groups.is_empty() {
            return Err(format!(
                "cluster {name:?}: groups must list at least one group"
            ));
        }
        for (i, g) in groups.iter().enumerate() {
            if g.procs == 0 {
                return Err(format!(
                    "cluster {name:?}: groups[{i}].procs must be at least 1"
                ));
            }
            if !positive(g.speed) {
                return Err(format!(
                    "cluster {name:?}: groups[{i}].speed must be positive, got {}",
                    g.speed
                ));
            }
        }
        let sum: u64 = groups.iter().map(|g| u64::from(g.procs)).sum();
        if sum != u64::from(self.procs) {
            return Err(format!(
                "cluster {name:?}: the procs of groups add up to {sum}, procs is {}",
                self.procs
            ));
        }
        Ok(())
    }
}

fn one() -> f64 {
    1.0
}
fn easy() -> String {
    "easy".into()
}
fn default_bandwidth() -> f64 {
    100.0
}

/// A cluster's local stream: a trace (a window of it, optionally time-scaled) or synthetic.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LocalStream {
    /// SWF trace (relative paths are relative to the configuration file).
    #[serde(default)]
    pub trace: Option<PathBuf>,
    /// Skip this many days of the trace first.
    #[serde(default)]
    pub skip_days: f64,
    /// Multiply inter-arrival times by this (< 1 loads the cluster more).
    #[serde(default = "one")]
    pub time_scale: f64,
    /// Synthetic stream: offered load (used when no trace is given).
    #[serde(default = "default_load")]
    pub load: f64,
    /// Synthetic stream: seed.
    #[serde(default)]
    pub seed: u64,
}

fn default_load() -> f64 {
    0.7
}

/// A user of global jobs. Users of the global stream without an entry have an unlimited
/// budget.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    /// Id (unique).
    pub id: u32,
    /// Budget, in the tariff's currency (>= 0).
    pub budget: f64,
}

/// The global stream: a window of an SWF trace, or seeded synthetic arrivals. Prices, input
/// sizes, homes and the co-allocation switch are drawn (seeded) either way.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GlobalStream {
    /// SWF trace of global jobs (relative to the configuration file); without it the
    /// arrivals are synthetic.
    #[serde(default)]
    pub trace: Option<PathBuf>,
    /// With a trace: skip this many days of it first.
    #[serde(default)]
    pub skip_days: f64,
    /// With a trace: multiply inter-arrival times by this.
    #[serde(default = "one")]
    pub time_scale: f64,
    /// Synthetic: jobs per hour (Poisson).
    #[serde(default = "one")]
    pub arrivals_per_hour: f64,
    /// Synthetic: processors, uniform in this range.
    #[serde(default = "default_global_procs")]
    pub procs: [u32; 2],
    /// Synthetic: runtime, seconds, log-uniform in this range.
    #[serde(default = "default_global_runtime")]
    pub runtime_seconds: [i64; 2],
    /// Synthetic: estimate = runtime × a factor uniform in this range.
    #[serde(default = "default_overestimate")]
    pub estimate_factor: [f64; 2],
    /// Max price per processor-second, uniform in this range.
    pub price: [f64; 2],
    /// Input size, MB.
    #[serde(default)]
    pub input_mb: f64,
    /// Share of jobs that may not span clusters.
    #[serde(default)]
    pub no_coallocation_share: f64,
    /// Seed.
    #[serde(default)]
    pub seed: u64,
}

fn default_global_procs() -> [u32; 2] {
    [1, 64]
}
fn default_global_runtime() -> [i64; 2] {
    [60, 3600]
}
fn default_overestimate() -> [f64; 2] {
    [1.0, 3.0]
}

/// How global jobs reach clusters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum Broker {
    /// The lookahead planner with reservations and co-allocation.
    Lookahead,
    /// Each job queued at the cluster where it would start earliest.
    Queue,
    /// A fraction of every cluster set aside for global jobs.
    Dedicated(f64),
}

impl Broker {
    /// Parses `lookahead`, `queue`, `dedicated:F`.
    pub fn parse(s: &str) -> Option<Broker> {
        match s.split_once(':') {
            None if s == "lookahead" => Some(Broker::Lookahead),
            None if s == "queue" => Some(Broker::Queue),
            Some(("dedicated", f)) => f
                .parse()
                .ok()
                .filter(|f| (0.0..1.0).contains(f))
                .map(Broker::Dedicated),
            _ => None,
        }
    }

    /// The name used on the command line.
    pub fn name(&self) -> String {
        match self {
            Broker::Lookahead => "lookahead".into(),
            Broker::Queue => "queue".into(),
            Broker::Dedicated(f) => format!("dedicated:{f}"),
        }
    }
}

impl GridConfig {
    /// Reads and checks a configuration file.
    pub fn read(path: &Path) -> Result<GridConfig, GridError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| GridError::Io {
            path: name.clone(),
            source,
        })?;
        let mut cfg = GridConfig::parse(&text, &name)?;
        let base = path.parent().unwrap_or(Path::new("."));
        let traces = cfg
            .cluster
            .iter_mut()
            .filter_map(|c| c.local.trace.as_mut())
            .chain(cfg.global.trace.as_mut());
        for t in traces {
            if t.is_relative() {
                *t = base.join(&*t);
            }
        }
        Ok(cfg)
    }

    /// Parses and checks configuration text; `name` names it in errors.
    pub fn parse(text: &str, name: &str) -> Result<GridConfig, GridError> {
        let cfg: GridConfig = toml::from_str(text).map_err(|e| GridError::Config {
            path: name.to_string(),
            message: e.to_string(),
        })?;
        cfg.check().map_err(|message| GridError::Config {
            path: name.to_string(),
            message,
        })?;
        Ok(cfg)
    }

    fn check(&self) -> Result<(), String> {
        if self.cluster.is_empty() {
            return Err("at least one [[cluster]] is needed".into());
        }
        if !positive(self.days) {
            return Err(format!("days must be positive, got {}", self.days));
        }
        if self.cycle_seconds <= 0 {
            return Err(format!(
                "cycle_seconds must be positive, got {}",
                self.cycle_seconds
            ));
        }
        let mut names = std::collections::BTreeSet::new();
        for c in &self.cluster {
            if !names.insert(&c.name) {
                return Err(format!("cluster {:?} is defined twice", c.name));
            }
            c.check()?;
            if !positive(c.bandwidth_mb_s) {
                return Err(format!(
                    "cluster {:?}: bandwidth_mb_s must be positive",
                    c.name
                ));
            }
            c.policy
                .parse::<Policy>()
                .map_err(|e| format!("cluster {:?}: policy {e}", c.name))?;
        }
        let mut ids = std::collections::BTreeSet::new();
        for u in &self.user {
            if !ids.insert(u.id) {
                return Err(format!("user {} is defined twice", u.id));
            }
            if u.budget.is_nan() || u.budget < 0.0 {
                return Err(format!(
                    "user {}: budget must be a number >= 0, got {}",
                    u.id, u.budget
                ));
            }
        }
        let g = &self.global;
        if g.trace.is_some() {
            if !(positive(g.time_scale)) {
                return Err("global.time_scale must be positive".into());
            }
        } else if g.procs[0] == 0 || g.procs[0] > g.procs[1] {
            return Err("global.procs must be [min, max] with 1 <= min <= max".into());
        } else if g.runtime_seconds[0] <= 0 || g.runtime_seconds[0] > g.runtime_seconds[1] {
            return Err("global.runtime_seconds must be [min, max] with 0 < min <= max".into());
        }
        if !(g.price[0] >= 0.0 && g.price[0] <= g.price[1]) {
            return Err("global.price must be [min, max] with 0 <= min <= max".into());
        }
        if !(g.estimate_factor[0] >= 1.0 && g.estimate_factor[0] <= g.estimate_factor[1]) {
            return Err("global.estimate_factor must be [min, max] with 1 <= min <= max".into());
        }
        Ok(())
    }
}

/// A finite number above zero (NaN is not).
fn positive(x: f64) -> bool {
    x.is_finite() && x > 0.0
}

/// Figures for one group of jobs.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GroupReport {
    /// Jobs finished.
    pub jobs: u64,
    /// Mean wait, seconds.
    pub mean_wait: f64,
    /// Mean response, seconds.
    pub mean_response: f64,
    /// Mean bounded slowdown (τ = 10 s).
    pub mean_bsld: f64,
}

/// Per-cluster figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ClusterReport {
    /// The cluster.
    pub name: String,
    /// Its local jobs.
    pub local: GroupReport,
    /// Σ procs·runtime of everything it ran / (P × simulated span).
    pub utilization: f64,
    /// Processor-seconds of global work it ran.
    pub global_proc_seconds: f64,
    /// Local jobs that could not run (larger than what the owners keep).
    pub local_rejected: u64,
}

/// Per-user figures of the global stream.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct UserReport {
    /// The user.
    pub user: u32,
    /// Global jobs submitted.
    pub submitted: u64,
    /// Of them, refused (budget, or larger than anything they could use).
    pub refused: u64,
    /// Of them, finished.
    pub finished: u64,
    /// Mean wait of the finished ones, seconds.
    pub mean_wait: f64,
    /// Mean bounded slowdown (τ = 10 s) of the finished ones.
    pub mean_bsld: f64,
    /// Total charged.
    pub charged: f64,
    /// Budget at the start; none: unlimited (no `[[user]]` entry).
    pub budget: Option<f64>,
    /// Budget left at the end (never below zero); none: unlimited.
    pub remaining: Option<f64>,
}

/// The outcome of a grid run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GridReport {
    /// Broker used.
    pub broker: String,
    /// All local jobs.
    pub local: GroupReport,
    /// Global jobs.
    pub global: GroupReport,
    /// Global jobs submitted.
    pub global_submitted: u64,
    /// Global jobs refused (budget, or larger than anything they could use).
    pub global_refused: u64,
    /// Global jobs still unfinished when the run stopped.
    pub global_unfinished: u64,
    /// Share of finished global jobs that ran on more than one cluster.
    pub coallocated_share: f64,
    /// Total charged to users.
    pub charged: f64,
    /// Largest gap between the first and the last part of one co-allocated job to start,
    /// seconds (0: every part started at its reserved second).
    pub max_start_skew: i64,
    /// Mean local wait with the global stream minus without it, seconds.
    pub local_delay: f64,
    /// Per cluster.
    pub clusters: Vec<ClusterReport>,
    /// Per user of the global stream (every `[[user]]` and every user who submitted), by id.
    pub users: Vec<UserReport>,
    /// Span simulated (first submission to last end), seconds.
    pub span: i64,
}

const GLOBAL_PART: u64 = 1 << 40;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// A job on a cluster ended.
    End { cluster: usize, job: JobId },
    /// A local job is submitted.
    Local { cluster: usize, index: usize },
    /// A global job arrives.
    Global { index: usize },
    /// The planning cycle.
    Cycle,
    /// A cluster should run a pass (a reservation starts or ends).
    Tick { cluster: usize },
}

struct Cluster {
    name: String,
    procs: u32,
    sched: LocalScheduler,
    processors: Vec<Processor>,
    tariff: Tariff,
    bandwidth: f64,
    latency: Dur,
    local: Vec<(Job, Dur)>,
    /// Work per running or finished job: start, end, procs; for the report.
    ran: BTreeMap<JobId, (Time, Time, u32)>,
    ticks: std::collections::BTreeSet<Time>,
    rejected: u64,
}

struct GlobalState {
    job: GlobalJob,
    runtime: Dur,
    start: Option<Time>,
    end: Option<Time>,
    parts_left: u32,
    clusters: u32,
    refused: bool,
    /// What the user paid.
    charged: f64,
    /// Queued by a baseline broker (charged the base tariff for what it used, at its start).
    queued: bool,
    /// What a queued job holds of its user's budget until it starts (the most it can be
    /// charged where it was queued); the difference to the charge is returned at the start.
    held: f64,
    /// Latest start of any of its parts (the first is `start`).
    last_part_start: Option<Time>,
}

/// Loads a local stream: `(job, runtime)` sorted by submission, within `days`.
fn local_stream(
    c: &ClusterConfig,
    procs: u32,
    days: f64,
    index: usize,
) -> Result<(Vec<(Job, Dur)>, u64), GridError> {
    let span = (days * 86_400.0) as i64;
    let w = match &c.local.trace {
        Some(path) => {
            let trace = Trace::read(path, false)?;
            Workload::from_trace(&trace, u32::MAX, Semantics::Default)
        }
        None => {
            let mut w = Workload::synthetic(
                100_000,
                procs.max(1),
                c.local.load,
                c.local.seed.wrapping_add(index as u64),
            );
            // Long enough for any span: cut below.
            w.jobs.retain(|j| j.job.submit.secs() < span);
            w
        }
    };
    let skip = (c.local.skip_days * 86_400.0) as i64;
    let speed = c.local_speed();
    let mut out = Vec::new();
    let mut rejected = 0;
    let first = w
        .jobs
        .iter()
        .map(|j| j.job.submit.secs())
        .find(|&s| s >= skip);
    let Some(origin) = first else {
        return Ok((out, 0));
    };
    for sim in &w.jobs {
        let at = sim.job.submit.secs();
        if at < origin {
            continue;
        }
        let t = ((at - origin) as f64 * c.local.time_scale) as i64;
        if t >= span {
            break;
        }
        if sim.job.procs > procs {
            rejected += 1;
            continue;
        }
        let mut job = sim.job.clone();
        job.id = JobId(out.len() as u64);
        job.submit = Time(t);
        let runtime = Dur(((sim.runtime.as_secs() as f64) / speed).ceil().max(1.0) as i64);
        job.estimate = Dur(((job.estimate.as_secs() as f64) / speed).ceil().max(1.0) as i64);
        let runtime = runtime.min(job.estimate);
        out.push((job, runtime));
    }
    Ok((out, rejected))
}

fn global_stream(
    g: &GlobalStream,
    days: f64,
    users: &[UserConfig],
    clusters: usize,
) -> Result<Vec<(GlobalJob, Dur)>, GridError> {
    let mut rng = Pcg64::seed_from_u64(g.seed);
    let span = days * 86_400.0;
    // (submit, procs, estimate, runtime) of every arrival.
    let arrivals: Vec<(i64, u32, i64, i64)> = match &g.trace {
        Some(path) => {
            let trace = Trace::read(path, false)?;
            let w = Workload::from_trace(&trace, u32::MAX, Semantics::Default);
            let skip = (g.skip_days * 86_400.0) as i64;
            let origin = w
                .jobs
                .iter()
                .map(|j| j.job.submit.secs())
                .find(|&s| s >= skip);
            w.jobs
                .iter()
                .filter(|j| origin.is_some_and(|o| j.job.submit.secs() >= o))
                .map(|j| {
                    let t =
                        ((j.job.submit.secs() - origin.unwrap_or(0)) as f64 * g.time_scale) as i64;
                    (
                        t,
                        j.job.procs,
                        j.job.estimate.as_secs(),
                        j.runtime.as_secs(),
                    )
                })
                .take_while(|a| (a.0 as f64) < span)
                .collect()
        }
        None => {
            let mean_gap = 3600.0 / g.arrivals_per_hour.max(1e-9);
            let mut t = 0.0;
            let mut out = Vec::new();
            loop {
                t += -mean_gap * (1.0 - rng.gen::<f64>()).ln();
                if t >= span {
                    break;
                }
                let procs = rng.gen_range(g.procs[0]..=g.procs[1]);
                let (lo, hi) = (g.runtime_seconds[0] as f64, g.runtime_seconds[1] as f64);
                let runtime = (lo * (hi / lo).powf(rng.gen::<f64>())).round().max(1.0) as i64;
                let factor = rng.gen_range(g.estimate_factor[0]..=g.estimate_factor[1]);
                let estimate = ((runtime as f64) * factor).ceil() as i64;
                out.push((t as i64, procs, estimate, runtime));
            }
            out
        }
    };
    let mut out = Vec::new();
    for (t, procs, estimate, runtime) in arrivals {
        let price = rng.gen_range(g.price[0]..=g.price[1]);
        let user = if users.is_empty() {
            0
        } else {
            users[rng.gen_range(0..users.len())].id
        };
        let id = out.len() as u64;
        out.push((
            GlobalJob {
                id: JobId(id),
                user: UserId(user),
                submit: Time(t),
                procs,
                walltime: Dur(estimate),
                max_price: price,
                input_mb: g.input_mb,
                home: Some(rng.gen_range(0..clusters)),
                co_allocate: rng.gen::<f64>() >= g.no_coallocation_share,
                criterion: Criterion::EarliestFinish,
            },
            Dur(runtime),
        ));
    }
    Ok(out)
}

fn report_group(items: impl Iterator<Item = (Time, Time, Time)>) -> GroupReport {
    let mut r = GroupReport::default();
    for (submit, start, end) in items {
        let wait = (start - submit).as_secs() as f64;
        let resp = (end - submit).as_secs() as f64;
        let run = (end - start).as_secs().max(10) as f64;
        r.jobs += 1;
        r.mean_wait += wait;
        r.mean_response += resp;
        r.mean_bsld += (resp / run).max(1.0);
    }
    if r.jobs > 0 {
        let n = r.jobs as f64;
        r.mean_wait /= n;
        r.mean_response /= n;
        r.mean_bsld /= n;
    }
    r
}

/// Runs the grid with `broker`, and once more without the global stream to measure the delay
/// global jobs cause local ones.
pub fn simulate_grid(cfg: &GridConfig, broker: Broker) -> Result<GridReport, GridError> {
    let with = run(cfg, broker, true)?;
    // Without global jobs every broker leaves the owners their whole clusters.
    let without = run(cfg, Broker::Queue, false)?;
    let mut report = with;
    report.local_delay = report.local.mean_wait - without.local.mean_wait;
    Ok(report)
}

fn run(cfg: &GridConfig, broker: Broker, with_global: bool) -> Result<GridReport, GridError> {
    let days = cfg.days;
    let mut clusters = Vec::new();
    let mut partitions: Vec<LocalScheduler> = Vec::new();
    for (k, c) in cfg.cluster.iter().enumerate() {
        let policy: Policy = c.policy.parse().expect("invariant: checked when read");
        let kept = match broker {
            Broker::Dedicated(f) => {
                let global = ((f64::from(c.procs) * f).round() as u32).min(c.procs - 1);
                partitions.push(LocalScheduler::new(global.max(1), Policy::easy()));
                c.procs - global
            }
            _ => c.procs,
        };
        let (local, rejected) = local_stream(c, kept, days, k)?;
        clusters.push(Cluster {
            name: c.name.clone(),
            procs: c.procs,
            sched: LocalScheduler::new(kept, policy),
            processors: c.processors(kept),
            tariff: Tariff {
                base: c.tariff,
                local_premium: c.local_premium,
            },
            bandwidth: c.bandwidth_mb_s,
            latency: Dur(c.latency_seconds),
            local,
            ran: BTreeMap::new(),
            ticks: Default::default(),
            rejected,
        });
    }
    let mut budgets: BTreeMap<UserId, f64> =
        cfg.user.iter().map(|u| (UserId(u.id), u.budget)).collect();
    let stream = if with_global {
        global_stream(&cfg.global, days, &cfg.user, clusters.len())?
    } else {
        Vec::new()
    };
    let mut globals: Vec<GlobalState> = stream
        .iter()
        .map(|(job, runtime)| GlobalState {
            job: job.clone(),
            runtime: *runtime,
            start: None,
            end: None,
            parts_left: 0,
            clusters: 0,
            refused: false,
            charged: 0.0,
            queued: false,
            held: 0.0,
            last_part_start: None,
        })
        .collect();
    let mut queue: Vec<usize> = Vec::new();
    let mut heap: BinaryHeap<Reverse<(Time, u64, Ev)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut push = |heap: &mut BinaryHeap<Reverse<(Time, u64, Ev)>>, t: Time, ev: Ev| {
        seq += 1;
        heap.push(Reverse((t, seq, ev)));
    };
    for (k, c) in clusters.iter().enumerate() {
        for (i, (job, _)) in c.local.iter().enumerate() {
            push(
                &mut heap,
                job.submit,
                Ev::Local {
                    cluster: k,
                    index: i,
                },
            );
        }
    }
    for (i, g) in globals.iter().enumerate() {
        push(&mut heap, g.job.submit, Ev::Global { index: i });
    }
    let last_arrival = globals.last().map_or(Time(0), |g| g.job.submit);
    if broker == Broker::Lookahead && !globals.is_empty() {
        push(&mut heap, Time(0), Ev::Cycle);
    }
    let give_up = last_arrival + Dur(30 * 86_400);
    let planner = PlannerConfig {
        horizon: Dur::hours(cfg.horizon_hours),
        lead_time: Dur(cfg.lead_time_seconds),
        plan_depth: cfg.plan_depth,
    };
    // Part jobs of global jobs on dedicated partitions / queues: (cluster or partition, job) → global index.
    let mut part_of: BTreeMap<(usize, JobId), usize> = BTreeMap::new();
    let mut actions = Vec::new();
    let n_clusters = clusters.len();
    while let Some(Reverse((now, _, ev))) = heap.pop() {
        // Which scheduler an event concerns: clusters 0..n, dedicated partitions n..2n.
        let mut touched: Vec<usize> = Vec::new();
        match ev {
            Ev::Local { cluster, index } => {
                let job = clusters[cluster].local[index].0.clone();
                clusters[cluster]
                    .sched
                    .handle(now, Event::Submit(job), &mut actions)
                    .map_err(|source| GridError::Core {
                        cluster: clusters[cluster].name.clone(),
                        source,
                    })?;
                touched.push(cluster);
            }
            Ev::End { cluster, job } => {
                let name = clusters
                    .get(cluster % n_clusters)
                    .map(|c| c.name.clone())
                    .unwrap_or_default();
                let sched = if cluster < n_clusters {
                    &mut clusters[cluster].sched
                } else {
                    &mut partitions[cluster - n_clusters]
                };
                sched
                    .handle(now, Event::Finish(job), &mut actions)
                    .map_err(|source| GridError::Core {
                        cluster: name,
                        source,
                    })?;
                if let Some(&g) = part_of.get(&(cluster, job)) {
                    let gs = &mut globals[g];
                    gs.parts_left -= 1;
                    if gs.parts_left == 0 {
                        gs.end = Some(now);
                    }
                    if broker == Broker::Lookahead && cluster < n_clusters {
                        let _ = clusters[cluster]
                            .sched
                            .remove_reservation(now, ReservationId(job.0));
                    }
                }
                touched.push(cluster);
            }
            Ev::Tick { cluster } => {
                clusters[cluster].ticks.remove(&now);
                clusters[cluster]
                    .sched
                    .handle(now, Event::Tick, &mut actions)
                    .map_err(|source| GridError::Core {
                        cluster: clusters[cluster].name.clone(),
                        source,
                    })?;
                touched.push(cluster);
            }
            Ev::Global { index } => {
                let g = &mut globals[index];
                let budget = budgets.get(&g.job.user).copied().unwrap_or(f64::INFINITY);
                if g.job.worst_case_charge() > budget {
                    g.refused = true;
                    continue;
                }
                match broker {
                    Broker::Lookahead => queue.push(index),
                    Broker::Queue | Broker::Dedicated(_) => {
                        let targets = match broker {
                            Broker::Queue => 0..n_clusters,
                            _ => n_clusters..2 * n_clusters,
                        };
                        let best =
                            earliest_target(targets, &clusters, &partitions, cfg, &g.job, now);
                        let Some((t, speed)) = best else {
                            g.refused = true;
                            continue;
                        };
                        let est = Dur(((g.job.walltime.as_secs() as f64) / speed).ceil() as i64);
                        let run =
                            Dur(((g.runtime.as_secs() as f64) / speed).ceil() as i64).min(est);
                        // Hold the most it can be charged there until it starts.
                        let held = clusters[t % n_clusters].tariff.base
                            * f64::from(g.job.procs)
                            * est.as_secs() as f64;
                        if let Some(b) = budgets.get_mut(&g.job.user) {
                            if held > *b {
                                g.refused = true;
                                continue;
                            }
                            *b -= held;
                        }
                        g.queued = true;
                        g.held = held;
                        let id = JobId(GLOBAL_PART + index as u64);
                        let job = Job::new(id, now, g.job.procs, est).with_user(g.job.user);
                        let sched = if t < n_clusters {
                            &mut clusters[t].sched
                        } else {
                            &mut partitions[t - n_clusters]
                        };
                        sched
                            .handle(now, Event::Submit(job), &mut actions)
                            .map_err(|source| GridError::Core {
                                cluster: cfg.cluster[t % n_clusters].name.clone(),
                                source,
                            })?;
                        g.parts_left = 1;
                        g.clusters = 1;
                        g.runtime = run;
                        part_of.insert((t, id), index);
                        touched.push(t);
                    }
                }
            }
            Ev::Cycle => {
                queue.retain(|&i| globals[i].start.is_none() && !globals[i].refused);
                if !queue.is_empty() {
                    let views: Vec<ClusterView<'_>> = clusters
                        .iter()
                        .map(|c| ClusterView {
                            processors: &c.processors,
                            sched: &c.sched,
                            tariff: &c.tariff,
                            bandwidth_mb_s: c.bandwidth,
                            latency: c.latency,
                        })
                        .collect();
                    let jobs: Vec<GlobalJob> =
                        queue.iter().map(|&i| globals[i].job.clone()).collect();
                    let decisions = plan_cycle(now, &views, &jobs, &planner);
                    drop(views);
                    for d in decisions {
                        match d {
                            Decision::Reserve {
                                job,
                                start,
                                end,
                                cost,
                                parts,
                            } => {
                                let index = job.0 as usize;
                                let budget = budgets
                                    .get(&globals[index].job.user)
                                    .copied()
                                    .unwrap_or(f64::INFINITY);
                                if cost > budget {
                                    globals[index].refused = true;
                                    continue;
                                }
                                let rid = ReservationId(GLOBAL_PART + index as u64);
                                let window = Interval::new(start, end);
                                if !reserve_everywhere(&mut clusters, rid, &parts, window, now) {
                                    continue; // planned again next cycle
                                }
                                if let Some(b) = budgets.get_mut(&globals[index].job.user) {
                                    *b -= cost;
                                }
                                globals[index].charged = cost;
                                let user = globals[index].job.user;
                                let g = &mut globals[index];
                                let slowest =
                                    slowest_chosen(cfg, &parts, g.job.walltime, end - start);
                                let run =
                                    Dur(((g.runtime.as_secs() as f64) / slowest).ceil() as i64)
                                        .min(end - start);
                                g.runtime = run;
                                g.parts_left = parts.len() as u32;
                                g.clusters = parts.len() as u32;
                                g.start = Some(start);
                                for p in &parts {
                                    let id = JobId(rid.0);
                                    let job = Job::new(id, now, p.procs, end - start)
                                        .with_user(user)
                                        .in_reservation(rid, false);
                                    clusters[p.cluster]
                                        .sched
                                        .handle(now, Event::Submit(job), &mut actions)
                                        .map_err(|source| GridError::Core {
                                            cluster: cfg.cluster[p.cluster].name.clone(),
                                            source,
                                        })?;
                                    part_of.insert((p.cluster, id), index);
                                    touched.push(p.cluster);
                                    apply_actions(
                                        now,
                                        p.cluster,
                                        &mut actions,
                                        &mut clusters,
                                        &mut globals,
                                        &mut budgets,
                                        &part_of,
                                        n_clusters,
                                        &mut heap,
                                        &mut push,
                                    )?;
                                }
                            }
                            Decision::Refuse { job, .. } => globals[job.0 as usize].refused = true,
                            Decision::Wait { .. } | Decision::NoFit { .. } => {}
                        }
                    }
                }
                let pending = queue
                    .iter()
                    .any(|&i| globals[i].start.is_none() && !globals[i].refused);
                let next = now + Dur(cfg.cycle_seconds);
                // Keep cycling while jobs wait or more are still to arrive.
                if (pending || now < last_arrival) && next <= give_up {
                    push(&mut heap, next, Ev::Cycle);
                }
            }
        }
        for k in touched {
            apply_actions(
                now,
                k,
                &mut actions,
                &mut clusters,
                &mut globals,
                &mut budgets,
                &part_of,
                n_clusters,
                &mut heap,
                &mut push,
            )?;
        }
        actions.clear();
    }
    Ok(report(broker, &clusters, &globals, &cfg.user, &budgets))
}

/// The figures of a finished run; `users` as configured, `budgets` what is left of theirs.
fn report(
    broker: Broker,
    clusters: &[Cluster],
    globals: &[GlobalState],
    users: &[UserConfig],
    budgets: &BTreeMap<UserId, f64>,
) -> GridReport {
    let mut report = GridReport {
        broker: broker.name(),
        ..GridReport::default()
    };
    let mut first = i64::MAX;
    let mut last = i64::MIN;
    let mut all_local = Vec::new();
    for c in clusters {
        let mut items = Vec::new();
        let mut area = 0.0;
        let mut global_area = 0.0;
        for (id, &(start, end, procs)) in &c.ran {
            first = first.min(start.secs());
            last = last.max(end.secs());
            let a = f64::from(procs) * (end - start).as_secs() as f64;
            area += a;
            if id.0 >= GLOBAL_PART {
                global_area += a;
            } else {
                let submit = c.local[id.0 as usize].0.submit;
                first = first.min(submit.secs());
                items.push((submit, start, end));
            }
        }
        all_local.extend(items.iter().copied());
        report.clusters.push(ClusterReport {
            name: c.name.clone(),
            local: report_group(items.into_iter()),
            utilization: area,
            global_proc_seconds: global_area,
            local_rejected: c.rejected,
        });
    }
    let span = (last - first).max(1);
    for (k, r) in report.clusters.iter_mut().enumerate() {
        r.utilization /= f64::from(clusters[k].procs) * span as f64;
    }
    report.span = span;
    report.local = report_group(all_local.into_iter());
    report.global_submitted = globals.len() as u64;
    report.global_refused = globals.iter().filter(|g| g.refused).count() as u64;
    report.global_unfinished = globals
        .iter()
        .filter(|g| !g.refused && g.end.is_none())
        .count() as u64;
    let done: Vec<&GlobalState> = globals.iter().filter(|g| g.end.is_some()).collect();
    report.global = report_group(done.iter().map(|g| {
        (
            g.job.submit,
            g.start.expect("invariant: ended jobs started"),
            g.end.expect("invariant: filtered"),
        )
    }));
    report.coallocated_share = if done.is_empty() {
        0.0
    } else {
        done.iter().filter(|g| g.clusters > 1).count() as f64 / done.len() as f64
    };
    report.charged = globals.iter().map(|g| g.charged).sum();
    report.max_start_skew = globals
        .iter()
        .filter_map(|g| Some((g.last_part_start? - g.start?).as_secs()))
        .max()
        .unwrap_or(0);
    report.users = report_users(globals, users, budgets);
    report
}

/// Per-user figures: every configured user and every user who submitted, by id.
fn report_users(
    globals: &[GlobalState],
    users: &[UserConfig],
    budgets: &BTreeMap<UserId, f64>,
) -> Vec<UserReport> {
    let mut by_user: BTreeMap<u32, (UserReport, Vec<&GlobalState>)> = BTreeMap::new();
    for u in users {
        let r = UserReport {
            user: u.id,
            budget: Some(u.budget),
            remaining: budgets.get(&UserId(u.id)).copied(),
            ..UserReport::default()
        };
        by_user.insert(u.id, (r, Vec::new()));
    }
    for g in globals {
        let id = g.job.user.0;
        let (r, done) = by_user.entry(id).or_insert_with(|| {
            (
                UserReport {
                    user: id,
                    ..UserReport::default()
                },
                Vec::new(),
            )
        });
        r.submitted += 1;
        r.refused += u64::from(g.refused);
        r.charged += g.charged;
        if g.end.is_some() {
            done.push(g);
        }
    }
    by_user
        .into_values()
        .map(|(mut r, done)| {
            let group = report_group(
                done.iter()
                    .filter_map(|g| Some((g.job.submit, g.start?, g.end?))),
            );
            r.finished = group.jobs;
            r.mean_wait = group.mean_wait;
            r.mean_bsld = group.mean_bsld;
            r
        })
        .collect()
}

/// Two-phase reservation for a global job: hold its processors on every cluster of `parts`
/// for `window`, or, if any cluster refuses, release what was held and report failure.
fn reserve_everywhere(
    clusters: &mut [Cluster],
    rid: ReservationId,
    parts: &[Part],
    window: Interval,
    now: Time,
) -> bool {
    let mut held: Vec<usize> = Vec::new();
    for p in parts {
        let res = AdminReservation {
            id: rid,
            procs: p.procs,
            window,
            acl: Acl {
                job: Some(JobId(rid.0)),
                ..Acl::nobody()
            },
        };
        if clusters[p.cluster]
            .sched
            .add_reservation_displacing(res)
            .is_err()
        {
            for c in held {
                let _ = clusters[c].sched.remove_reservation(now, rid);
            }
            return false;
        }
        held.push(p.cluster);
    }
    true
}

/// The scheduler among `targets` (clusters `0..n`, dedicated partitions `n..2n`) where `job`
/// would start earliest if queued now, by the placement each one's own policy would give it
/// (conservatively, on a copy); with that cluster's speed.
fn earliest_target(
    targets: std::ops::Range<usize>,
    clusters: &[Cluster],
    partitions: &[LocalScheduler],
    cfg: &GridConfig,
    job: &GlobalJob,
    now: Time,
) -> Option<(usize, f64)> {
    let n = clusters.len();
    let mut best: Option<(Time, usize, f64)> = None;
    for t in targets {
        let sched = if t < n {
            &clusters[t].sched
        } else {
            &partitions[t - n]
        };
        let speed = cfg.cluster[t % n].slowest_speed();
        if job.procs > sched.capacity() {
            continue;
        }
        let est = Dur(((job.walltime.as_secs() as f64) / speed).ceil() as i64);
        let mut copy = sched.clone();
        copy.set_reservation_depth(ALL);
        let probe = JobId(u64::MAX);
        if copy.submit(Job::new(probe, now, job.procs, est)).is_err() {
            continue;
        }
        let mut scratch = Vec::new();
        copy.schedule(now, &mut scratch);
        let start = if copy.is_running(probe) {
            now
        } else {
            copy.reservation_of(probe).map_or(Time::MAX, |p| p.start)
        };
        if best.is_none_or(|(b, _, _)| start < b) {
            best = Some((start, t, speed));
        }
    }
    best.map(|(_, t, speed)| (t, speed))
}

/// The speed of the slowest processor the planner chose for a job reserved on `parts` for
/// `window` seconds: the planner runs a job for `ceil(walltime / slowest chosen speed)`, and
/// its decision names clusters and counts, not processors, so the speed is the one among
/// those clusters' groups that gives the window (the slowest such, should two round alike).
/// On clusters of one speed each, this is the slowest of their speeds.
fn slowest_chosen(cfg: &GridConfig, parts: &[Part], walltime: Dur, window: Dur) -> f64 {
    // Every part has a processor of its cluster: none slower than its slowest, and the
    // slowest chosen is no faster than the fastest of any part's cluster.
    let groups: Vec<Vec<SpeedGroup>> = parts
        .iter()
        .map(|p| cfg.cluster[p.cluster].speed_groups())
        .collect();
    let cap = groups
        .iter()
        .map(|g| g.iter().map(|x| x.speed).fold(0.0, f64::max))
        .fold(f64::INFINITY, f64::min);
    let floor = groups
        .iter()
        .flatten()
        .map(|x| x.speed)
        .fold(f64::INFINITY, f64::min);
    groups
        .iter()
        .flatten()
        .map(|x| x.speed)
        .filter(|&s| s <= cap)
        .filter(|&s| Dur((walltime.as_secs() as f64 / s).ceil() as i64) == window)
        .fold(None, |m: Option<f64>, s| Some(m.map_or(s, |m| m.min(s))))
        .unwrap_or(floor)
}

/// Carries out a scheduler's actions: starts schedule ends, reservations and reservation
/// boundaries schedule ticks.
#[allow(clippy::too_many_arguments)]
fn apply_actions(
    now: Time,
    k: usize,
    actions: &mut Vec<Action>,
    clusters: &mut [Cluster],
    globals: &mut [GlobalState],
    budgets: &mut BTreeMap<UserId, f64>,
    part_of: &BTreeMap<(usize, JobId), usize>,
    n_clusters: usize,
    heap: &mut BinaryHeap<Reverse<(Time, u64, Ev)>>,
    push: &mut impl FnMut(&mut BinaryHeap<Reverse<(Time, u64, Ev)>>, Time, Ev),
) -> Result<(), GridError> {
    let owner = k % n_clusters;
    for a in actions.drain(..) {
        match a {
            Action::Start { job, procs, .. } => {
                let runtime = match part_of.get(&(k, job)) {
                    Some(&g) => {
                        let gs = &mut globals[g];
                        gs.start.get_or_insert(now);
                        gs.last_part_start = Some(now);
                        if gs.queued {
                            // Queued brokers charge the base tariff for what was used and
                            // return the rest of what they held.
                            gs.charged = clusters[owner].tariff.base
                                * f64::from(procs)
                                * gs.runtime.as_secs() as f64;
                            if let Some(b) = budgets.get_mut(&gs.job.user) {
                                *b += (gs.held - gs.charged).max(0.0);
                            }
                        }
                        gs.runtime
                    }
                    None => clusters[owner].local[job.0 as usize].1,
                };
                clusters[owner].ran.insert(job, (now, now + runtime, procs));
                push(heap, now + runtime, Ev::End { cluster: k, job });
            }
            Action::Reserve { start, .. } => {
                if k < n_clusters && start > now && clusters[k].ticks.insert(start) {
                    push(heap, start, Ev::Tick { cluster: k });
                }
            }
        }
    }
    if k < n_clusters {
        if let Some(t) = clusters[k].sched.next_boundary(now) {
            if clusters[k].ticks.insert(t) {
                push(heap, t, Ev::Tick { cluster: k });
            }
        }
    }
    Ok(())
}
