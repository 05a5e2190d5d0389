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

mod licence;
mod run;
mod seeds;
pub use licence::LicenceConfig;
pub use run::{lookahead_trace, lookahead_watched, Moment};
pub use seeds::{simulate_seeds, simulate_seeds_watched, summarize, BrokerRuns, SeedSummary};

use crate::swf::Trace;
use crate::workload::{Semantics, Workload};
pub use foresight_core::broker::{ClusterSpec, SpeedGroup};
use foresight_core::grid::GlobalJob;
use foresight_core::predict::Predictor;
use foresight_core::select::Criterion;
use foresight_core::{BackfillOrder, ClusterId, Dur, Job, JobId, Time, UserId};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
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
    /// Licence pools (`[[licence]]`, the service's keys) and the shares of jobs asking
    /// for them.
    #[serde(default)]
    pub licence: Vec<LicenceConfig>,
    /// Runtime prediction, as the service's key: every cluster's local policy (unless the
    /// cluster sets its own `predict`) and the grid planner for global jobs plan with it;
    /// walltimes stay the kill times.
    #[serde(default)]
    pub predict: Predictor,
    /// Backfill order of every cluster without its own `backfill_order` (`spf` with
    /// `predict`: EASY++).
    #[serde(default)]
    pub backfill_order: BackfillOrder,
    /// Correction of every cluster without its own `correction`, as the service's key
    /// (`estimate` by default: [`foresight_core::predict::correction::grid_default`]).
    #[serde(default = "foresight_core::predict::correction::grid_default")]
    pub correction: foresight_core::predict::Correction,
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

/// One cluster of the grid: what the service's configuration says of a cluster
/// ([`ClusterSpec`], the same keys with the same meaning), and the owners' stream.
///
/// Only in `sim grid`: a cluster of one `speed` is that fast for its local jobs too (they
/// run their trace runtime and estimate divided by it); the `queue` and `dedicated`
/// baselines queue global jobs at the local scheduler, which promises no group, so their
/// jobs run at the cluster's slowest speed (conservative).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// Processors, speeds, policy, prices and link.
    #[serde(flatten)]
    pub spec: ClusterSpec,
    /// The owners' own stream.
    pub local: LocalStream,
}

/// Reads of a cluster's shared settings (`c.name`, `c.procs`, `c.speed_groups()`) go to
/// its [`ClusterSpec`], as they would if the keys were declared here.
impl std::ops::Deref for ClusterConfig {
    type Target = ClusterSpec;
    fn deref(&self) -> &ClusterSpec {
        &self.spec
    }
}

fn one() -> f64 {
    1.0
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
    /// Share of global jobs their users cancel, if they have not started by then (0: none).
    #[serde(default)]
    pub cancel_share: f64,
    /// When a job is cancelled: seconds after its submission, uniform in this range.
    #[serde(default = "default_cancel_after")]
    pub cancel_after_seconds: [i64; 2],
    /// Absolute priority levels of global jobs, each job's drawn uniformly from `0..levels`
    /// (0 the lowest; seed 001 uses 4): a job of a higher level preempts running global
    /// jobs of lower ones. One level: nothing is ever preempted.
    #[serde(default = "one_level")]
    pub levels: u32,
    /// With a trace: each job's level is its SWF queue number (field 15) instead of drawn,
    /// so that a stream written with levels is replayed with the same ones. A queue outside
    /// `0..levels` is refused, naming the job.
    #[serde(default)]
    pub levels_from_queue: bool,
    /// Share of global jobs that, preempted, are killed and run anew from the start
    /// (requeued) rather than suspended and resumed where they stopped.
    #[serde(default)]
    pub requeue_share: f64,
    /// Seed.
    #[serde(default)]
    pub seed: u64,
}

fn one_level() -> u32 {
    1
}

/// Most priority levels a grid may draw from (more would leave most levels empty).
pub const MAX_LEVELS: u32 = 1_000;

fn default_cancel_after() -> [i64; 2] {
    [60, 3600]
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
pub enum BrokerKind {
    /// The lookahead planner with reservations and co-allocation.
    Lookahead,
    /// Each job queued at the cluster where it would start earliest.
    Queue,
    /// A fraction of every cluster set aside for global jobs.
    Dedicated(f64),
}

impl BrokerKind {
    /// Parses `lookahead`, `queue`, `dedicated:F`.
    pub fn parse(s: &str) -> Option<BrokerKind> {
        match s.split_once(':') {
            None if s == "lookahead" => Some(BrokerKind::Lookahead),
            None if s == "queue" => Some(BrokerKind::Queue),
            Some(("dedicated", f)) => f
                .parse()
                .ok()
                .filter(|f| (0.0..1.0).contains(f))
                .map(BrokerKind::Dedicated),
            _ => None,
        }
    }

    /// The name used on the command line.
    pub fn name(&self) -> String {
        match self {
            BrokerKind::Lookahead => "lookahead".into(),
            BrokerKind::Queue => "queue".into(),
            BrokerKind::Dedicated(f) => format!("dedicated:{f}"),
        }
    }
}

impl GridConfig {
    /// Reads and checks a configuration file.
    pub fn read(path: &Path) -> Result<GridConfig, GridError> {
        let name = path.display().to_string();
        let text = crate::input::read_text(path).map_err(|source| GridError::Io {
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
            c.spec.check(true)?;
        }
        let known: Vec<&str> = self.cluster.iter().map(|c| c.name.as_str()).collect();
        licence::check(&self.licence, &known)?;
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
        if !(0.0..=1.0).contains(&g.cancel_share) {
            return Err(format!(
                "global.cancel_share must be within [0, 1], got {}",
                g.cancel_share
            ));
        }
        let [lo, hi] = g.cancel_after_seconds;
        if lo < 0 || lo > hi {
            return Err(
                "global.cancel_after_seconds must be [min, max] with 0 <= min <= max".into(),
            );
        }
        if !(1..=MAX_LEVELS).contains(&g.levels) {
            return Err(format!(
                "global.levels must be within [1, {MAX_LEVELS}], got {}",
                g.levels
            ));
        }
        if g.levels_from_queue && g.trace.is_none() {
            return Err(
                "global.levels_from_queue needs global.trace (synthetic jobs have no \
                        queue)"
                    .into(),
            );
        }
        if !(0.0..=1.0).contains(&g.requeue_share) {
            return Err(format!(
                "global.requeue_share must be within [0, 1], got {}",
                g.requeue_share
            ));
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
    /// Every local job and global part it ran (a part's submission is its global job's),
    /// for the figures.
    #[serde(skip)]
    pub jobs: Vec<crate::plot::Span>,
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
    /// Global jobs their users cancelled before they started (`cancel_share`).
    pub global_cancelled: u64,
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
    /// Processor-seconds left idle while a global job that could have used them waited
    /// (`lookahead` only: the baselines queue global jobs as local ones).
    pub idle_while_waiting: Option<f64>,
    /// Reserved global jobs moved earlier because processors freed up before planned.
    pub moved_earlier: u64,
    /// The grid's predictor (`predict`).
    pub predict: String,
    /// Corrections of running jobs that outlived their prediction: local jobs and global
    /// jobs (a co-allocated job's parts corrected together are one correction).
    pub corrected: u64,
    /// Span simulated (first submission to last end), seconds.
    pub span: i64,
    /// Jobs, local and global, that asked for licences (`[[licence]]`).
    pub with_licences: GroupReport,
    /// Jobs, local and global, that asked for none.
    pub without_licences: GroupReport,
    /// Absolute priorities (`global.levels` above 1): figures per level and preemptions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub levels: Option<LevelsReport>,
}

/// The global jobs of one priority level.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LevelReport {
    /// The level (0 the lowest).
    pub level: u32,
    /// Jobs of this level submitted.
    pub submitted: u64,
    /// Of them, finished.
    pub finished: u64,
    /// Mean wait of the finished ones (submission to first start), seconds.
    pub mean_wait: f64,
    /// Mean response of the finished ones (submission to end), seconds.
    pub mean_response: f64,
    /// Mean bounded slowdown of the finished ones: response over the run time of the
    /// attempt that finished (at least τ = 10 s), so that time spent suspended counts.
    pub mean_bsld: f64,
    /// Times jobs of this level were preempted.
    pub preempted: u64,
}

/// What absolute priorities did in a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LevelsReport {
    /// Per level, the lowest first.
    pub per_level: Vec<LevelReport>,
    /// Running global jobs preempted (suspended or requeued).
    pub preemptions: u64,
    /// Of them, requeued: killed and run anew.
    pub requeues: u64,
    /// Suspended jobs resumed.
    pub resumptions: u64,
    /// Processor-seconds of work requeued jobs had done and lost.
    pub lost_proc_seconds: f64,
}

/// A job of a [`LookaheadTrace`]: local jobs are numbered per cluster, global ones over the
/// grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TracedJob {
    /// A cluster's local job, by its index in that cluster's stream.
    Local(u64),
    /// A global job, by its index in the global stream.
    Global(u64),
}

/// What a `lookahead` run ([`lookahead_trace`]) generated and started.
#[derive(Clone, Debug)]
pub struct LookaheadTrace {
    /// Per cluster, its local jobs (submission, processors, walltime) and their runtimes.
    pub local: Vec<Vec<(Job, Dur)>>,
    /// The global jobs and their runtimes (at speed 1).
    pub global: Vec<(GlobalJob, Dur)>,
    /// When each global job's user cancels it after its submission, if at all.
    pub cancel_after: Vec<Option<Dur>>,
    /// Per cluster, when each job or part that ran there started.
    pub starts: Vec<BTreeMap<TracedJob, Time>>,
    /// When each global job ended (its last part, after any suspensions), if it ran.
    pub ends: Vec<Option<Time>>,
    /// Per cluster, each local job's application (SWF executable; `None`: unknown), which
    /// the `app` predictor keys its statistics by.
    pub apps: Vec<Vec<Option<u64>>>,
    /// Corrections of running jobs that outlived their prediction (local jobs and global
    /// jobs; a co-allocated job's parts corrected together are one correction).
    pub corrected: u64,
}

/// Loads a local stream: `(job, runtime)` sorted by submission, within `days`.
pub(crate) fn local_stream(
    c: &ClusterConfig,
    procs: u32,
    days: f64,
    index: usize,
) -> Result<(Vec<(Job, Dur)>, u64), GridError> {
    local_stream_apps(c, procs, days, index).map(|(jobs, _, rejected)| (jobs, rejected))
}

/// [`local_stream`] with each job's application (SWF executable), for runtime prediction.
pub(crate) fn local_stream_apps(
    c: &ClusterConfig,
    procs: u32,
    days: f64,
    index: usize,
) -> Result<LocalJobs, GridError> {
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
        return Ok((out, Vec::new(), 0));
    };
    let mut apps = Vec::new();
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
        apps.push(sim.app);
    }
    Ok((out, apps, rejected))
}

/// A local stream: `(job, runtime)`, each job's application, and how many jobs were left
/// out as larger than the cluster.
pub(crate) type LocalJobs = (Vec<(Job, Dur)>, Vec<Option<u64>>, u64);

pub(crate) fn global_stream(
    g: &GlobalStream,
    days: f64,
    users: &[UserConfig],
    clusters: usize,
) -> Result<Vec<(GlobalJob, Dur)>, GridError> {
    let mut rng = Pcg64::seed_from_u64(g.seed);
    let span = days * 86_400.0;
    // (submit, procs, estimate, runtime, level) of every arrival.
    let arrivals: Vec<(i64, u32, i64, i64, u32)> = match &g.trace {
        Some(path) => {
            let trace = Trace::read(path, false)?;
            let w = Workload::from_trace(&trace, u32::MAX, Semantics::Default);
            let skip = (g.skip_days * 86_400.0) as i64;
            let origin = w
                .jobs
                .iter()
                .map(|j| j.job.submit.secs())
                .find(|&s| s >= skip);
            let mut out = Vec::new();
            for j in w
                .jobs
                .iter()
                .filter(|j| origin.is_some_and(|o| j.job.submit.secs() >= o))
            {
                let t = ((j.job.submit.secs() - origin.unwrap_or(0)) as f64 * g.time_scale) as i64;
                if t as f64 >= span {
                    break;
                }
                let level = if g.levels_from_queue {
                    let queue = trace.records[j.record].queue;
                    match u32::try_from(queue) {
                        Ok(q) if q < g.levels => q,
                        _ => {
                            return Err(GridError::Config {
                                path: path.display().to_string(),
                                message: format!(
                                    "job {}: queue {queue} is not a level within 0..{} \
                                     (global.levels_from_queue)",
                                    j.trace_id, g.levels
                                ),
                            })
                        }
                    }
                } else {
                    0
                };
                out.push((
                    t,
                    j.job.procs,
                    j.job.estimate.as_secs(),
                    j.runtime.as_secs(),
                    level,
                ));
            }
            out
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
                out.push((t as i64, procs, estimate, runtime, 0));
            }
            out
        }
    };
    let mut out = Vec::new();
    for (t, procs, estimate, runtime, level) in arrivals {
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
                home: Some(ClusterId(rng.gen_range(0..clusters))),
                co_allocate: rng.gen::<f64>() >= g.no_coallocation_share,
                criterion: Criterion::EarliestFinish,
                priority: level,
                requeue: false,
                requires: Default::default(),
                begin: None,
                licences: Default::default(),
                prediction: None,
            },
            Dur(runtime),
        ));
    }
    Ok(out)
}

/// When each of `n` global jobs is cancelled after its submission, if at all: drawn from a
/// generator of its own, so that the stream itself is the same with or without cancels.
pub(crate) fn cancellations(g: &GlobalStream, n: usize) -> Vec<Option<Dur>> {
    if g.cancel_share <= 0.0 {
        return vec![None; n];
    }
    let mut rng = Pcg64::seed_from_u64(g.seed ^ 0x6361_6e63_656c);
    let [lo, hi] = g.cancel_after_seconds;
    (0..n)
        .map(|_| {
            let cancel = rng.gen::<f64>() < g.cancel_share;
            let after = rng.gen_range(lo.min(hi)..=hi.max(lo)).max(0);
            cancel.then_some(Dur(after))
        })
        .collect()
}

/// Each of `n` global jobs' priority level and whether it is requeued when preempted: drawn
/// from a generator of their own, so that the stream itself is the same whatever the levels.
pub(crate) fn levels(g: &GlobalStream, n: usize) -> Vec<(u32, bool)> {
    if g.levels <= 1 && g.requeue_share <= 0.0 {
        return vec![(0, false); n];
    }
    let mut rng = Pcg64::seed_from_u64(g.seed ^ 0x6c65_7665_6c73);
    (0..n)
        .map(|_| {
            let level = rng.gen_range(0..g.levels.max(1));
            (level, rng.gen::<f64>() < g.requeue_share)
        })
        .collect()
}

pub(crate) fn report_group(items: impl Iterator<Item = (Time, Time, Time)>) -> GroupReport {
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
pub fn simulate_grid(cfg: &GridConfig, broker: BrokerKind) -> Result<GridReport, GridError> {
    simulate_grid_watched(cfg, broker, &mut |_| {})
}

/// Where a run of [`simulate_grid_watched`] is, for a progress display: a long grid run
/// otherwise shows nothing for minutes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GridProgress {
    /// Which of the two runs: with the global stream (the broker's), then without it (the
    /// baseline of the owners' own waits).
    pub pass: GridPass,
    /// The run's virtual clock.
    pub now: Time,
    /// When the last job of any stream arrives (the clock runs a little past it, to finish
    /// the work still queued).
    pub last_arrival: Time,
}

/// The two runs [`simulate_grid`] makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GridPass {
    /// The broker's run, with the global stream.
    WithGlobal,
    /// The baseline, local streams only.
    LocalOnly,
}

/// [`simulate_grid`], telling `progress` now and then how far each of its two runs has got.
pub fn simulate_grid_watched(
    cfg: &GridConfig,
    broker: BrokerKind,
    progress: &mut dyn FnMut(GridProgress),
) -> Result<GridReport, GridError> {
    let with = run::run(cfg, broker, true, &mut |now, last_arrival| {
        progress(GridProgress {
            pass: GridPass::WithGlobal,
            now,
            last_arrival,
        })
    })?;
    // Without global jobs every broker leaves the owners their whole clusters.
    let without = run::run(cfg, BrokerKind::Queue, false, &mut |now, last_arrival| {
        progress(GridProgress {
            pass: GridPass::LocalOnly,
            now,
            last_arrival,
        })
    })?;
    let mut report = with;
    report.local_delay = report.local.mean_wait - without.local.mean_wait;
    Ok(report)
}
