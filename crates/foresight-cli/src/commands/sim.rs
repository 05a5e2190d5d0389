//! `foresight sim …`: trace-driven simulation.

use super::sim_sweep::plot_dir;
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use foresight_core::policy::{BackfillChoice, BackfillMetric, QueueOrder};
use foresight_core::predict::{Correction, Predictor};
use foresight_core::{BackfillOrder, Policy};
use foresight_sim::grid::{
    simulate_grid_watched, simulate_seeds_watched, summarize, BrokerKind, GridConfig, GridPass,
    GridProgress,
};
use foresight_sim::output::{write_csv, write_swf};
use foresight_sim::plot::{write_run_figures, Panel, Series, Span};
use foresight_sim::replay::replay_with;
use foresight_sim::swf::{Limits, SwfHeader};
use foresight_sim::workload::Skipped;
use foresight_sim::{simulate_with, Converter, Prediction, Semantics, SimOutput, Trace, Workload};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Simulation commands.
#[derive(Subcommand)]
pub enum SimCommand {
    /// Simulate one cluster running one local policy over a trace (or a synthetic workload).
    Run(SimRunOpts),
    /// Simulate a grid of clusters with local streams and a global stream.
    Grid(SimGridOpts),
    /// Run traces × policies × options in parallel and compare them.
    Sweep(super::sim_sweep::SimSweepOpts),
    /// Map seeded workflows by DSC, HEFT and greedy onto a grid with trace-driven local load.
    Workflow(super::sim_workflow::SimWorkflowOpts),
    /// Simulate the decentralized mode: sites bidding for prioritised global jobs in English
    /// auctions, swept over the auction's length α (seed 001).
    Auction(super::sim_auction::SimAuctionOpts),
}

/// Options of `foresight sim grid`.
#[derive(Args)]
pub struct SimGridOpts {
    /// The grid: clusters, their local streams, users, the global stream (TOML).
    #[arg(long, value_name = "grid.toml")]
    config: PathBuf,
    /// How global jobs reach clusters: lookahead, queue or dedicated:FRACTION; `all` runs
    /// the three (dedicated at 0.25) and compares them.
    #[arg(long, default_value = "all")]
    broker: String,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    output: OutputOpt,
    /// Write SVG figures into DIR, per cluster side by side, one series per broker.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
    /// Repeat over N seeds of the random streams (the configured seeds, then +1, +2, …) and
    /// report means with 95 % confidence intervals, and each broker against the first on
    /// the same seeds.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    seeds: u64,
    /// Runtime predictor of the local policies and of the grid planner: none, tsafrir or
    /// app (overrides the configuration's `predict`). Walltimes stay the kill times and a
    /// global job's reservation stays its walltime long.
    #[arg(long, value_name = "PREDICTOR")]
    predict: Option<Predictor>,
    /// Absolute priority levels of the global jobs, drawn uniformly (overrides the
    /// configuration's `global.levels`; 1: nothing is preempted). The report gives the
    /// figures per level and what preemption did.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=i64::from(foresight_sim::grid::MAX_LEVELS)))]
    levels: Option<u32>,
}

/// Options of `foresight sim run`.
#[derive(Args)]
pub struct SimRunOpts {
    /// SWF trace (plain or .gz). Without it, a seeded synthetic workload is simulated.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Machine size in processors (default: the trace header's MaxProcs, else MaxNodes).
    #[arg(long)]
    procs: Option<u32>,
    /// Local policy: fcfs, firstfit, firstfit:CAP, easy, conservative, depth:N.
    #[arg(long, default_value = "easy")]
    policy: String,
    /// Which waiting job fills a hole (Maui BACKFILLPOLICY).
    #[arg(long, value_enum)]
    backfill: Option<BackfillOpt>,
    /// What "best" means for bestfit and greedy (Maui BACKFILLMETRIC).
    #[arg(long, value_enum, default_value = "procseconds")]
    metric: MetricOpt,
    /// Queue order.
    #[arg(long, value_enum, default_value = "fcfs")]
    order: OrderOpt,
    /// How trace fields become jobs and how events at one instant are handled.
    #[arg(long, value_enum, default_value = "default")]
    semantics: SemanticsOpt,
    /// Skip and count malformed trace lines instead of failing.
    #[arg(long)]
    lenient: bool,
    /// The longest trace line read, in bytes; a longer one (a file that is not a trace, an
    /// endless input) stops the run naming the file and the line. SWF lines are about 100.
    #[arg(long, value_name = "BYTES", default_value_t = Limits::MAX_LINE_BYTES,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1 << 30))]
    max_line_bytes: usize,
    /// The most job lines a trace may have (about 150 bytes of memory each, plus the
    /// schedule); the largest archive log has 5.7 million.
    #[arg(long, value_name = "N", default_value_t = Limits::MAX_JOBS,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_jobs: u64,
    /// The most bytes a trace may hold once uncompressed, blank and comment lines included
    /// (default 4 GiB).
    #[arg(long, value_name = "BYTES", default_value_t = Limits::MAX_BYTES,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_trace_bytes: u64,
    /// Write the per-job schedule to FILE.csv or FILE.swf.
    #[arg(long, value_name = "FILE")]
    jobs_out: Option<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    output: OutputOpt,
    /// Synthetic workload: number of jobs.
    #[arg(long, default_value_t = 10_000)]
    jobs: usize,
    /// Synthetic workload: offered load (0..1+).
    #[arg(long, default_value_t = 0.85)]
    load: f64,
    /// Synthetic workload: random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The cluster draws on this licence pool, NAME:COUNT (`ansys:4`); a share of the jobs
    /// (`--licence-share`, synthetic or from `--trace`) asks for 1 to `--licence-max` of it,
    /// and starts only when they are free.
    #[arg(long, value_name = "NAME:COUNT")]
    licence_pool: Option<String>,
    /// Share of jobs asking for licences of `--licence-pool` (seeded by `--seed`).
    #[arg(long, default_value_t = 0.3, requires = "licence_pool")]
    licence_share: f64,
    /// The most licences one job asks for.
    #[arg(long, default_value_t = 1, requires = "licence_pool")]
    licence_max: u32,
    /// Runtime predictor the policy plans with: none (the estimate), tsafrir (mean of the
    /// user's last two terminated jobs, as Tsafrir, Etsion and Feitelson), tsafrir-last1
    /// (the same, or the last one when only one has terminated) or app (median of the last
    /// runs of the same application and processor count). The estimate stays the kill time.
    #[arg(long, default_value = "none", value_name = "PREDICTOR")]
    predict: Predictor,
    /// How the plan of a job that outlives its prediction grows: incremental (the paper's
    /// steps of 1 min, 5 min, 15 min, … past the first prediction) or estimate (straight to
    /// the estimate).
    #[arg(long, default_value = "incremental", value_name = "RULE")]
    correction: Correction,
    /// Let predicted jobs pass the first reserved job even when, run to their estimates,
    /// they would delay it past the start plain EASY guarantees (EASY++ as published).
    #[arg(long)]
    no_starvation_guard: bool,
    /// Seconds the first reserved job must have waited before the starvation guard
    /// protects it (default: a day).
    #[arg(long, value_name = "SECONDS")]
    guard_after: Option<u64>,
    /// Order of backfill candidates: fcfs (queue order) or spf (shortest planned runtime
    /// first). EASY++ is `--policy easy --predict tsafrir --backfill-order spf`.
    #[arg(long, default_value = "fcfs", value_name = "ORDER")]
    backfill_order: BackfillOrder,
    /// Keep trace runtimes that exceed the estimate instead of clipping them at it
    /// (default semantics); such jobs are re-planned as they overrun.
    #[arg(long)]
    no_clip: bool,
    /// Write SVG figures into DIR: utilization, queue length, wait-time CDF, bounded
    /// slowdown by size and by runtime.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
}

impl SimRunOpts {
    /// What the trace may take.
    fn limits(&self) -> Limits {
        Limits {
            max_line_bytes: self.max_line_bytes,
            max_jobs: self.max_jobs,
            max_bytes: self.max_trace_bytes,
            ..Limits::default()
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum BackfillOpt {
    None,
    Firstfit,
    Bestfit,
    Greedy,
}

#[derive(Clone, Copy, ValueEnum)]
enum MetricOpt {
    Procs,
    Walltime,
    Procseconds,
}

#[derive(Clone, Copy, ValueEnum)]
enum OrderOpt {
    Fcfs,
    Sjf,
    Ljf,
    Priority,
}

#[derive(Clone, Copy, ValueEnum)]
enum SemanticsOpt {
    Default,
    Pyss,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OutputOpt {
    Table,
    Json,
}

/// Runs a `sim` subcommand.
pub fn run(cmd: SimCommand) -> Result<()> {
    match cmd {
        SimCommand::Run(opts) => sim_run(opts),
        SimCommand::Grid(opts) => sim_grid(opts),
        SimCommand::Sweep(opts) => super::sim_sweep::sim_sweep(opts),
        SimCommand::Workflow(opts) => super::sim_workflow::sim_workflow(opts),
        SimCommand::Auction(opts) => super::sim_auction::sim_auction(opts),
    }
}

fn sim_run(opts: SimRunOpts) -> Result<()> {
    let mut policy: Policy = opts
        .policy
        .parse()
        .map_err(|e: String| anyhow::anyhow!("--policy {e}"))?;
    if let Some(b) = opts.backfill {
        let fcfs = policy.reservation_depth == 0 && policy.backfill == BackfillChoice::None;
        if fcfs && !matches!(b, BackfillOpt::None) {
            bail!(
                "--policy fcfs never backfills, so --backfill {} does not apply; for \
                 backfilling choose --policy firstfit, easy, conservative or depth:N",
                b.to_possible_value()
                    .expect("invariant: no variant is skipped")
                    .get_name()
            );
        }
        policy.backfill = match b {
            BackfillOpt::None => BackfillChoice::None,
            BackfillOpt::Firstfit => BackfillChoice::FirstFit,
            BackfillOpt::Bestfit => BackfillChoice::BestFit,
            BackfillOpt::Greedy => BackfillChoice::Greedy,
        };
    }
    policy.metric = match opts.metric {
        MetricOpt::Procs => BackfillMetric::Procs,
        MetricOpt::Walltime => BackfillMetric::Walltime,
        MetricOpt::Procseconds => BackfillMetric::ProcSeconds,
    };
    policy.order = match opts.order {
        OrderOpt::Fcfs => QueueOrder::Fcfs,
        OrderOpt::Sjf => QueueOrder::Sjf,
        OrderOpt::Ljf => QueueOrder::Ljf,
        OrderOpt::Priority => QueueOrder::Priority,
    };
    let semantics = match opts.semantics {
        SemanticsOpt::Default => Semantics::Default,
        SemanticsOpt::Pyss => Semantics::Pyss,
    };
    policy.backfill_order = opts.backfill_order;
    policy.correction = opts.correction;
    policy.starvation_guard = !opts.no_starvation_guard;
    if let Some(secs) = opts.guard_after {
        policy.guard_after = foresight_core::Dur(i64::try_from(secs).unwrap_or(i64::MAX));
    }
    // Checked before simulating, so that a bad name or an unwritable place fails at once.
    let jobs_out = opts.jobs_out.as_deref().map(JobsOut::open).transpose()?;
    let plot = opts.plot.as_deref().map(plot_dir).transpose()?;
    let started = Instant::now();
    // Progress on a terminal only: jobs that have arrived in the simulation, out of the
    // synthetic count or the trace header's MaxJobs/MaxRecords (a spinner without them).
    let bar = std::io::stderr().is_terminal().then(|| {
        jobs_bar(match &opts.trace {
            Some(path) => trace_size(path, opts.limits()),
            None => Some(opts.jobs as u64),
        })
    });
    let mut progress = |n: usize| {
        if let Some(b) = &bar {
            b.set_position(n as u64);
        }
    };
    let simulated = simulate_workload(&opts, &policy, semantics, &mut progress);
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let (trace, procs, out, source, skipped) = match simulated {
        Ok(x) => x,
        Err(e) => {
            if let Some(j) = jobs_out {
                j.discard();
            }
            return Err(e);
        }
    };
    let elapsed = started.elapsed();
    if let Some(j) = jobs_out {
        // A synthetic workload has no trace header: give the schedule one, so that it can
        // be read back (`--trace`) on a machine of the same size.
        let synthetic = trace.is_none().then(|| Trace {
            header: SwfHeader {
                max_procs: Some(procs),
                max_nodes: None,
                bad_max_procs: None,
                bad_max_nodes: None,
                lines: vec![
                    format!("; MaxJobs: {}", out.outcomes.len()),
                    format!("; MaxProcs: {procs}"),
                ],
            },
            records: Vec::new(),
            malformed: 0,
            first_malformed: None,
        });
        j.write(
            &out,
            trace.as_ref().or(synthetic.as_ref()),
            &policy,
            semantics,
        )?;
    }
    if let Some(dir) = &plot {
        // A figure names its trace by file, not by where it lies on this machine.
        let title = match &opts.trace {
            Some(path) => source.replacen(
                &path.display().to_string(),
                &path.file_name().map_or_else(
                    || path.display().to_string(),
                    |n| n.to_string_lossy().into(),
                ),
                1,
            ),
            None => source.clone(),
        };
        write_figures(
            dir,
            &format!("{title}, {procs} processors"),
            procs,
            &policy,
            &out,
        )?;
    }
    let malformed = trace.as_ref().map_or(0, |t| t.malformed);
    let first_malformed = trace.as_ref().and_then(|t| t.first_malformed.clone());
    if let Some(first) = &first_malformed {
        // Lenient runs say what they skipped, so a wrong format is not mistaken for noise.
        eprintln!("skipped {malformed} malformed line(s); the first: {first}");
    }
    match opts.output {
        OutputOpt::Json => {
            let m = &out.metrics;
            let doc = json!({
                "trace": source,
                "procs": procs,
                "policy": policy.name(),
                "backfill": format!("{:?}", policy.backfill).to_lowercase(),
                "metric": format!("{:?}", policy.metric).to_lowercase(),
                "order": format!("{:?}", policy.order).to_lowercase(),
                "semantics": semantics.name(),
                "predict": opts.predict.name(),
                "backfill_order": format!("{:?}", policy.backfill_order).to_lowercase(),
                "clip": !opts.no_clip,
                "jobs": m.jobs,
                "skipped": m.skipped,
                "skipped_by_reason": {
                    "no_runtime": skipped.no_runtime,
                    "no_procs": skipped.no_procs,
                    "too_large": skipped.too_large,
                    "bad_submit": skipped.bad_submit,
                },
                "malformed": malformed,
                "first_malformed": first_malformed,
                "cut_at_estimate": m.cut_at_estimate,
                "mean_wait": m.mean_wait,
                "mean_response": m.mean_response,
                "mean_slowdown": m.mean_slowdown,
                "mean_bsld": m.mean_bsld,
                "max_wait": m.max_wait,
                "p99_wait": m.p99_wait,
                "over_1d": m.over_1d,
                "over_5d": m.over_5d,
                "correction": policy.correction.name(),
                "starvation_guard": policy.starvation_guard,
                "guard_after": policy.guard_after.as_secs(),
                "utilization": m.utilization,
                "makespan": m.makespan,
                "by_class": m.by_class,
                "elapsed_seconds": elapsed.as_secs_f64(),
            });
            outln!("{}", serde_json::to_string_pretty(&doc)?);
        }
        OutputOpt::Table => {
            let skipped = Skips {
                reasons: skipped,
                malformed,
                first_malformed,
            };
            print_table(&source, procs, &policy, semantics, &out, &skipped, elapsed)
        }
    }
    Ok(())
}

/// `sim run --plot DIR`: one panel, one series.
fn write_figures(
    dir: &Path,
    source: &str,
    procs: u32,
    policy: &Policy,
    out: &SimOutput,
) -> Result<()> {
    let panel = Panel {
        title: source.to_string(),
        series: vec![Series {
            name: policy.name(),
            procs,
            jobs: out.outcomes.iter().map(Span::from).collect(),
        }],
    };
    let files = write_run_figures(dir, "sim run", &[panel])?;
    eprintln!("wrote {} figures into {}", files.len(), dir.display());
    Ok(())
}

/// What `sim run` simulates: the trace, else the synthetic workload; with the trace read,
/// the machine size and the workload's name.
fn simulate_workload(
    opts: &SimRunOpts,
    policy: &Policy,
    semantics: Semantics,
    progress: &mut dyn FnMut(usize),
) -> Result<(Option<Trace>, u32, SimOutput, String, Skipped)> {
    let prediction = Prediction {
        predictor: opts.predict,
        overrun: opts.no_clip,
    };
    Ok(match &opts.trace {
        Some(path) if opts.licence_pool.is_some() => {
            // Licence demands are drawn over the whole trace, so it is read first.
            let trace = Trace::read_within(path, opts.lenient, opts.limits())
                .with_context(|| format!("reading {}", path.display()))?;
            let procs = match opts.procs {
                Some(p) => p,
                None => trace
                    .header
                    .machine_size()
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
                    .ok_or_else(|| {
                        anyhow::anyhow!(
                            "{}: the header gives no machine size; give --procs",
                            path.display()
                        )
                    })?,
            };
            if procs == 0 {
                bail!("--procs must be at least 1");
            }
            let conv = Converter::new(procs, semantics).overrun(opts.no_clip);
            let w = Workload::from_trace_with(&trace, conv);
            let skipped = w.skipped;
            let mut name = path.display().to_string();
            let out = simulate_licensed_workload(
                opts,
                w,
                procs,
                policy,
                semantics,
                &prediction,
                &mut name,
                progress,
            )
            .with_context(|| format!("simulating {name}"))?;
            (Some(trace), procs, out, name, skipped)
        }
        Some(path) => {
            let source = path.display().to_string();
            let run = replay_with(
                path,
                opts.procs,
                opts.lenient,
                opts.limits(),
                policy,
                semantics,
                &prediction,
                progress,
            )
            .with_context(|| format!("simulating {source}"))?;
            (Some(run.trace), run.procs, run.output, source, run.skipped)
        }
        None => {
            let procs = opts.procs.unwrap_or(256);
            if procs == 0 {
                bail!("--procs must be at least 1");
            }
            let w = Workload::synthetic(opts.jobs, procs, opts.load, opts.seed);
            let mut name = format!(
                "synthetic: {} jobs, load {}, seed {}",
                opts.jobs, opts.load, opts.seed
            );
            let out = match &opts.licence_pool {
                None => simulate_with(&w, procs, policy, semantics, &prediction, progress)
                    .map_err(anyhow::Error::from),
                Some(_) => simulate_licensed_workload(
                    opts,
                    w,
                    procs,
                    policy,
                    semantics,
                    &prediction,
                    &mut name,
                    progress,
                ),
            }
            .with_context(|| format!("simulating {name}"))?;
            (None, procs, out, name, Skipped::default())
        }
    })
}

/// `--licence-pool`: draws the demands over `w` (seeded by `--seed`), names them in `name`,
/// and simulates the cluster drawing on the pool.
#[allow(clippy::too_many_arguments)]
fn simulate_licensed_workload(
    opts: &SimRunOpts,
    w: Workload,
    procs: u32,
    policy: &Policy,
    semantics: Semantics,
    prediction: &Prediction,
    name: &mut String,
    progress: &mut dyn FnMut(usize),
) -> Result<SimOutput> {
    let pool = opts
        .licence_pool
        .as_deref()
        .expect("invariant: called with --licence-pool");
    let (pool, count) = foresight_core::licence::parse_demand(pool)
        .map_err(|e| anyhow::anyhow!("--licence-pool: {e}"))?;
    if !(0.0..=1.0).contains(&opts.licence_share) {
        bail!("--licence-share must be between 0 and 1");
    }
    if opts.licence_max == 0 || opts.licence_max > count {
        bail!(
            "--licence-max must be from 1 to the pool's {count}, got {}",
            opts.licence_max
        );
    }
    name.push_str(&format!(
        ", {}% of jobs asking 1-{} of {count} {pool:?} licences",
        opts.licence_share * 100.0,
        opts.licence_max
    ));
    let w = w.with_licence_demands(&foresight_sim::LicenceDemand {
        pool: pool.clone(),
        share: opts.licence_share,
        max: opts.licence_max,
        seed: opts.seed,
    });
    let asking: std::collections::HashSet<foresight_core::JobId> = w
        .jobs
        .iter()
        .filter(|j| !j.job.licences.is_empty())
        .map(|j| j.job.id)
        .collect();
    let out = foresight_sim::simulate_licensed(
        &w,
        procs,
        policy,
        semantics,
        prediction,
        &[(pool, count)],
        progress,
    )?;
    // The wait of jobs with and without licences: what holding them costs.
    let (mut with, mut without) = ((0usize, 0i64), (0usize, 0i64));
    for o in &out.outcomes {
        let wait = (o.start - o.submit).as_secs();
        let side = if asking.contains(&o.id) {
            &mut with
        } else {
            &mut without
        };
        side.0 += 1;
        side.1 += wait;
    }
    let mean = |(n, sum): (usize, i64)| if n == 0 { 0.0 } else { sum as f64 / n as f64 };
    name.push_str(&format!(
        "; mean wait {:.0} s for the {} jobs asking for licences, {:.0} s for the {} others",
        mean(with),
        with.0,
        mean(without),
        without.0
    ));
    Ok(out)
}

/// A bar of `total` jobs with percentage and ETA, or a spinner counting jobs when the total
/// is unknown. Created before the first job so that the rate it estimates is true.
fn jobs_bar(total: Option<u64>) -> ProgressBar {
    let (bar, template) = match total {
        Some(n) => (
            ProgressBar::new(n),
            "{elapsed_precise} [{wide_bar}] {human_pos}/{human_len} jobs {percent}% ETA {eta}",
        ),
        None => (
            ProgressBar::new_spinner(),
            "{spinner} {elapsed_precise} simulated {human_pos} jobs",
        ),
    };
    bar.set_style(
        ProgressStyle::with_template(template).expect("invariant: the template is valid"),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

/// The number of jobs a trace's header announces (`; MaxJobs:` or `; MaxRecords:`). Only a
/// regular file is looked at: reading a pipe's header here would take it from the run.
fn trace_size(path: &Path, limits: Limits) -> Option<u64> {
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let mut r = foresight_sim::swf::open(path).ok()?.limits(limits);
    let _ = r.next_record();
    r.header().lines.iter().find_map(|l| {
        let l = l.trim_start_matches(';').trim();
        let (k, v) = l.split_once(':')?;
        matches!(k.trim(), "MaxJobs" | "MaxRecords")
            .then(|| v.trim().parse().ok())
            .flatten()
    })
}

/// The `--jobs-out` file, created before the simulation.
struct JobsOut {
    path: PathBuf,
    swf: bool,
    file: File,
}

impl JobsOut {
    fn open(path: &Path) -> Result<JobsOut> {
        let swf = match path.extension().and_then(|e| e.to_str()) {
            Some("csv") => false,
            Some("swf") => true,
            _ => bail!(
                "--jobs-out {}: the name must end in .csv or .swf",
                path.display()
            ),
        };
        let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
        Ok(JobsOut {
            path: path.to_path_buf(),
            swf,
            file,
        })
    }

    /// Removes the file: the simulation failed.
    fn discard(self) {
        drop(self.file);
        let _ = std::fs::remove_file(&self.path);
    }

    fn write(
        self,
        out: &SimOutput,
        trace: Option<&Trace>,
        policy: &Policy,
        semantics: Semantics,
    ) -> Result<()> {
        let path = &self.path;
        let mut w = BufWriter::new(self.file);
        if !self.swf {
            write_csv(&mut w, &out.outcomes)
                .with_context(|| format!("writing {}", path.display()))?;
        } else {
            write_swf(
                &mut w,
                &out.outcomes,
                trace,
                &format!(
                    "schedule simulated by foresight, policy {}, semantics {}",
                    policy.name(),
                    semantics.name()
                ),
            )
            .with_context(|| format!("writing {}", path.display()))?;
        }
        w.flush()
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(())
    }
}

fn human_secs(s: f64) -> String {
    if s >= 86_400.0 {
        format!("{:.1} d", s / 86_400.0)
    } else if s >= 3600.0 {
        format!("{:.1} h", s / 3600.0)
    } else if s >= 60.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{s:.1} s")
    }
}

/// What a run left out of the trace, for the table.
struct Skips {
    reasons: Skipped,
    malformed: u64,
    first_malformed: Option<String>,
}

impl Skips {
    /// "0", or the total with each non-zero reason.
    fn jobs(&self) -> String {
        let r = &self.reasons;
        let parts: Vec<String> = [
            (r.no_runtime, "runtime ≤ 0"),
            (r.no_procs, "processors ≤ 0"),
            (r.too_large, "more processors than the machine"),
            (r.bad_submit, "submit time < 0"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, why)| format!("{n} {why}"))
        .collect();
        if parts.is_empty() {
            r.total().to_string()
        } else {
            format!("{} ({})", r.total(), parts.join(", "))
        }
    }

    fn malformed(&self) -> String {
        match &self.first_malformed {
            Some(first) => format!("{} (first: {first})", self.malformed),
            None => self.malformed.to_string(),
        }
    }
}

fn print_table(
    source: &str,
    procs: u32,
    policy: &Policy,
    semantics: Semantics,
    out: &SimOutput,
    skips: &Skips,
    elapsed: std::time::Duration,
) {
    let m = &out.metrics;
    let rows: Vec<(&str, String)> = vec![
        ("workload", source.to_string()),
        ("processors", procs.to_string()),
        (
            "policy",
            format!(
                "{} (backfill {:?}, metric {:?}, order {:?})",
                policy.name(),
                policy.backfill,
                policy.metric,
                policy.order
            )
            .to_lowercase(),
        ),
        ("semantics", semantics.name().to_string()),
        ("jobs simulated", m.jobs.to_string()),
        ("jobs skipped", skips.jobs()),
        ("malformed lines", skips.malformed()),
        ("cut at estimate", m.cut_at_estimate.to_string()),
        (
            "mean wait",
            format!("{:.1} s ({})", m.mean_wait, human_secs(m.mean_wait)),
        ),
        (
            "mean response",
            format!("{:.1} s ({})", m.mean_response, human_secs(m.mean_response)),
        ),
        ("mean slowdown", format!("{:.2}", m.mean_slowdown)),
        (
            "mean bounded slowdown",
            format!("{:.2} (τ = 10 s)", m.mean_bsld),
        ),
        (
            "max wait",
            format!("{} s ({})", m.max_wait, human_secs(m.max_wait as f64)),
        ),
        (
            "p99 wait",
            format!("{} s ({})", m.p99_wait, human_secs(m.p99_wait as f64)),
        ),
        (
            "waits over 1 d / 5 d",
            format!("{} / {}", m.over_1d, m.over_5d),
        ),
        ("utilization", format!("{:.2} %", m.utilization * 100.0)),
        (
            "makespan",
            format!("{} s ({})", m.makespan, human_secs(m.makespan as f64)),
        ),
        ("simulated in", format!("{:.3} s", elapsed.as_secs_f64())),
    ];
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in rows {
        outln!("{k:>width$}  {v}");
    }
    if !m.by_class.is_empty() {
        outln!();
        outln!(
            "{:>7}  {:>8}  {:>14}  {:>14}  {:>10}",
            "class",
            "jobs",
            "mean wait (s)",
            "response (s)",
            "mean bsld"
        );
        for (class, c) in &m.by_class {
            outln!(
                "{class:>7}  {:>8}  {:>14.1}  {:>14.1}  {:>10.2}",
                c.jobs,
                c.mean_wait,
                c.mean_response,
                c.mean_bsld
            );
        }
    }
}

fn sim_grid(opts: SimGridOpts) -> Result<()> {
    let brokers: Vec<BrokerKind> = if opts.broker == "all" {
        vec![
            BrokerKind::Lookahead,
            BrokerKind::Queue,
            BrokerKind::Dedicated(0.25),
        ]
    } else {
        vec![BrokerKind::parse(&opts.broker).with_context(|| {
            format!(
                "--broker {:?} is not a broker: use lookahead, queue, dedicated:FRACTION (0 <= F < 1) or all",
                opts.broker
            )
        })?]
    };
    let mut cfg = GridConfig::read(&opts.config)?;
    if let Some(p) = opts.predict {
        cfg.predict = p;
    }
    if let Some(n) = opts.levels {
        cfg.global.levels = n;
    }
    if opts.seeds > 1 {
        if opts.plot.is_some() {
            bail!("--plot draws one run: drop --seeds, or set the seed in the configuration");
        }
        return sim_grid_seeds(&opts, &cfg, &brokers);
    }
    let plot = opts.plot.as_deref().map(plot_dir).transpose()?;
    let mut reports = Vec::new();
    // On a terminal: which broker is being simulated, which of its two runs, and how far its
    // virtual clock has got.
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(brokers.len() as u64 * GRID_BAR_PER_BROKER);
        bar.set_style(
            ProgressStyle::with_template("{spinner} {elapsed_precise} [{bar:20}] {msg}")
                .expect("invariant: the template is valid"),
        );
        bar.enable_steady_tick(std::time::Duration::from_millis(100));
        bar
    });
    let count = brokers.len();
    for (i, b) in brokers.into_iter().enumerate() {
        let started = Instant::now();
        let mut show = |p: GridProgress| {
            if let Some(bar) = &bar {
                let (pos, msg) = grid_progress(i, count, b, p);
                bar.set_position(pos);
                bar.set_message(msg);
            }
        };
        let r = simulate_grid_watched(&cfg, b, &mut show).with_context(|| {
            format!(
                "simulating {} with broker {}",
                opts.config.display(),
                b.name()
            )
        })?;
        reports.push((r, started.elapsed()));
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if let Some(dir) = &plot {
        write_grid_figures(dir, &cfg, &reports)?;
    }
    match opts.output {
        OutputOpt::Json => {
            let doc: Vec<_> = reports.iter().map(|(r, _)| r).collect();
            outln!("{}", serde_json::to_string_pretty(&doc)?);
        }
        OutputOpt::Table => {
            outln!(
                "{:<16} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>12} {:>6}",
                "broker",
                "local rej",
                "local wt",
                "local bsd",
                "delay",
                "glob wt",
                "glob bsd",
                "glob done",
                "refused",
                "co-alloc",
                "charged",
                "util"
            );
            for (r, _) in &reports {
                let util = r.clusters.iter().map(|c| c.utilization).sum::<f64>()
                    / r.clusters.len().max(1) as f64;
                let rejected: u64 = r.clusters.iter().map(|c| c.local_rejected).sum();
                outln!(
                    "{:<16} {:>9} {:>8.0}s {:>9.2} {:>8.0}s {:>8.0}s {:>9.2} {:>9} {:>8} {:>7.1}% {:>12.0} {:>5.1}%",
                    r.broker,
                    rejected,
                    r.local.mean_wait,
                    r.local.mean_bsld,
                    r.local_delay,
                    r.global.mean_wait,
                    r.global.mean_bsld,
                    format!("{}/{}", r.global.jobs, r.global_submitted),
                    r.global_refused,
                    r.coallocated_share * 100.0,
                    r.charged,
                    util * 100.0
                );
            }
            print_rejected_note(reports.iter().map(|(r, _)| r));
            for (r, _) in reports.iter().filter(|(r, _)| r.global_cancelled > 0) {
                outln!(
                    "{}: {} global jobs cancelled by their users before they started",
                    r.broker,
                    r.global_cancelled
                );
            }
            outln!();
            outln!(
                "{:<16} {:<10} {:>9} {:>9} {:>7} {:>14}",
                "broker",
                "cluster",
                "local wt",
                "local bsd",
                "util",
                "global proc-h"
            );
            for (r, elapsed) in &reports {
                for c in &r.clusters {
                    outln!(
                        "{:<16} {:<10} {:>8.0}s {:>9.2} {:>6.1}% {:>14.0}",
                        r.broker,
                        c.name,
                        c.local.mean_wait,
                        c.local.mean_bsld,
                        c.utilization * 100.0,
                        c.global_proc_seconds / 3600.0
                    );
                }
                outln!(
                    "{:<16} simulated in {:.2} s (twice: with and without the global stream); \
                     largest start skew of a co-allocated job: {} s",
                    r.broker,
                    elapsed.as_secs_f64(),
                    r.max_start_skew
                );
                if let Some(idle) = r.idle_while_waiting {
                    outln!(
                        "{:<16} idle while global jobs waited: {:.0} processor-hours; \
                         reserved jobs moved earlier: {}",
                        r.broker,
                        idle / 3600.0,
                        r.moved_earlier
                    );
                }
                if r.predict != "none" {
                    outln!(
                        "{:<16} planned with predict = {}: {} running jobs outlived their \
                         prediction and were corrected",
                        r.broker,
                        r.predict,
                        r.corrected
                    );
                }
                if r.with_licences.jobs > 0 {
                    outln!(
                        "{:<16} mean wait of the {} jobs asking for licences: {:.0} s; of the \
                         {} others: {:.0} s",
                        r.broker,
                        r.with_licences.jobs,
                        r.with_licences.mean_wait,
                        r.without_licences.jobs,
                        r.without_licences.mean_wait
                    );
                }
            }
            outln!();
            outln!(
                "{:<16} {:>6} {:>9} {:>8} {:>9} {:>9} {:>9} {:>14} {:>14} {:>14}",
                "broker",
                "user",
                "submitted",
                "refused",
                "finished",
                "glob wt",
                "glob bsd",
                "charged",
                "budget",
                "remaining"
            );
            let money =
                |x: Option<f64>| x.map_or_else(|| "unlimited".to_string(), |x| format!("{x:.0}"));
            for (r, _) in &reports {
                for u in &r.users {
                    outln!(
                        "{:<16} {:>6} {:>9} {:>8} {:>9} {:>8.0}s {:>9.2} {:>14.0} {:>14} {:>14}",
                        r.broker,
                        u.user,
                        u.submitted,
                        u.refused,
                        u.finished,
                        u.mean_wait,
                        u.mean_bsld,
                        u.charged,
                        money(u.budget),
                        money(u.remaining)
                    );
                }
            }
            print_levels(reports.iter().map(|(r, _)| r));
        }
    }
    Ok(())
}

/// The figures per priority level of the runs that had several, and what preemption did.
fn print_levels<'a>(reports: impl Iterator<Item = &'a foresight_sim::grid::GridReport>) {
    let mut header = true;
    for r in reports {
        let Some(l) = &r.levels else { continue };
        if header {
            outln!();
            outln!(
                "{:<16} {:>6} {:>9} {:>9} {:>9} {:>10} {:>9} {:>10}",
                "broker",
                "level",
                "submitted",
                "finished",
                "glob wt",
                "response",
                "glob bsd",
                "preempted"
            );
            header = false;
        }
        for p in &l.per_level {
            outln!(
                "{:<16} {:>6} {:>9} {:>9} {:>8.0}s {:>9.0}s {:>9.2} {:>10}",
                r.broker,
                p.level,
                p.submitted,
                p.finished,
                p.mean_wait,
                p.mean_response,
                p.mean_bsld,
                p.preempted
            );
        }
        outln!(
            "{:<16} preemptions: {} ({} requeued, {} resumed); work lost to requeues: {:.1} \
             processor-hours",
            r.broker,
            l.preemptions,
            l.requeues,
            l.resumptions,
            l.lost_proc_seconds / 3600.0
        );
    }
}

/// `sim grid --seeds N`: every broker over N seeds, summarized.
/// A broker's share of `sim grid`'s progress bar: its two runs, each a thousandth at a time.
const GRID_BAR_PER_BROKER: u64 = 2_000;

/// Where `sim grid`'s bar stands and what it says while broker `i` of `count` runs.
fn grid_progress(i: usize, count: usize, broker: BrokerKind, p: GridProgress) -> (u64, String) {
    let last = p.last_arrival.secs().max(1);
    let share = p.now.secs().clamp(0, last) as f64 / last as f64;
    let (pass, which) = match p.pass {
        GridPass::WithGlobal => (0, "with the global stream"),
        GridPass::LocalOnly => (1, "local streams only, the baseline"),
    };
    let half = GRID_BAR_PER_BROKER / 2;
    let pos = i as u64 * GRID_BAR_PER_BROKER + pass * half + (share * half as f64) as u64;
    let days = |t: i64| t as f64 / 86_400.0;
    let clock = if last >= 2 * 86_400 {
        format!("day {:.1} of {:.1}", days(p.now.secs()), days(last))
    } else {
        format!(
            "hour {:.1} of {:.1}",
            p.now.secs() as f64 / 3600.0,
            last as f64 / 3600.0
        )
    };
    let msg = format!(
        "broker {} ({}/{count}), {which}: {clock}",
        broker.name(),
        i + 1
    );
    (pos, msg)
}

fn sim_grid_seeds(opts: &SimGridOpts, cfg: &GridConfig, brokers: &[BrokerKind]) -> Result<()> {
    let started = Instant::now();
    // Runs go in parallel: the bar counts the finished ones.
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(brokers.len() as u64 * opts.seeds);
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} {elapsed_precise} [{bar:20}] {pos}/{len} runs (brokers × seeds)",
            )
            .expect("invariant: the template is valid"),
        );
        bar.enable_steady_tick(std::time::Duration::from_millis(100));
        bar
    });
    let finished = || {
        if let Some(bar) = &bar {
            bar.inc(1);
        }
    };
    let runs = simulate_seeds_watched(cfg, brokers, opts.seeds, &finished);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let runs = runs.with_context(|| {
        format!(
            "simulating {} over {} seeds",
            opts.config.display(),
            opts.seeds
        )
    })?;
    let summary = summarize(&runs);
    if opts.output == OutputOpt::Json {
        let doc = json!({
            "first_seed": cfg.global.seed,
            "seeds": opts.seeds,
            "summary": summary,
            "runs": runs,
        });
        outln!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    outln!(
        "{} seeds of the random streams (global seed {}..={}), means ± 95 % confidence intervals",
        opts.seeds,
        cfg.global.seed,
        cfg.global.seed.wrapping_add(opts.seeds - 1)
    );
    outln!(
        "{:<16} {:>15} {:>13} {:>15} {:>15} {:>13} {:>13} {:>15}",
        "broker",
        "local wt",
        "local bsd",
        "delay",
        "glob wt",
        "glob bsd",
        "util %",
        "idle proc-h"
    );
    for s in &summary {
        outln!(
            "{:<16} {:>15} {:>13} {:>15} {:>15} {:>13} {:>13} {:>15}",
            s.broker,
            format!("{:.0}", s.local_wait),
            format!("{:.2}", s.local_bsld),
            format!("{:.0}", s.local_delay),
            format!("{:.0}", s.global_wait),
            format!("{:.2}", s.global_bsld),
            format!("{:.1}", scaled(s.utilization, 100.0)),
            s.idle_hours
                .map_or_else(|| "-".into(), |e| format!("{e:.0}")),
        );
    }
    if summary.len() > 1 {
        outln!();
        outln!(
            "paired on the same seeds, against {} (negative: shorter waits; * the seeds agree on the sign)",
            summary[0].broker
        );
        outln!("{:<16} {:>17} {:>17}", "broker", "Δ local wt", "Δ glob wt");
        let cell = |e: Option<foresight_sim::stats::Estimate>| {
            e.map_or_else(String::new, |e| {
                format!("{e:.0}{}", if e.excludes_zero() { "*" } else { " " })
            })
        };
        for s in &summary[1..] {
            outln!(
                "{:<16} {:>17} {:>17}",
                s.broker,
                cell(s.local_wait_vs_first),
                cell(s.global_wait_vs_first)
            );
        }
    }
    if summary.iter().any(|s| !s.level_response.is_empty()) {
        outln!();
        outln!("per priority level (0 the lowest), over the seeds where it finished jobs");
        outln!(
            "{:<16} {:>6} {:>17} {:>13}",
            "broker",
            "level",
            "response s",
            "bsld"
        );
        for s in &summary {
            for (level, (resp, bsld)) in s.level_response.iter().zip(&s.level_bsld).enumerate() {
                outln!(
                    "{:<16} {:>6} {:>17} {:>13}",
                    s.broker,
                    level,
                    format!("{resp:.0}"),
                    format!("{bsld:.2}"),
                );
            }
            if let Some(e) = s.preemptions {
                outln!("{:<16} preemptions per run: {e:.1}", s.broker);
            }
        }
    }
    outln!(
        "simulated {} runs in {:.1} s",
        opts.seeds as usize * brokers.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// An estimate in other units (a share as a percentage).
fn scaled(e: foresight_sim::stats::Estimate, k: f64) -> foresight_sim::stats::Estimate {
    foresight_sim::stats::Estimate {
        mean: e.mean * k,
        half_width: e.half_width * k,
        ..e
    }
}

/// Under the table: which brokers rejected local jobs (a dedicated partition leaves the
/// owners fewer processors than their largest jobs need), so that the local figures are
/// read as over different job sets.
fn print_rejected_note<'a>(reports: impl Iterator<Item = &'a foresight_sim::grid::GridReport>) {
    let reports: Vec<_> = reports.collect();
    let rejected = |r: &foresight_sim::grid::GridReport| -> u64 {
        r.clusters.iter().map(|c| c.local_rejected).sum()
    };
    let differ = reports.windows(2).any(|w| rejected(w[0]) != rejected(w[1]));
    for r in reports.iter().filter(|r| rejected(r) > 0) {
        let per: Vec<String> = r
            .clusters
            .iter()
            .filter(|c| c.local_rejected > 0)
            .map(|c| format!("{} on {}", c.local_rejected, c.name))
            .collect();
        outln!(
            "{}: {} local jobs rejected ({}): larger than the processors the owners keep; \
             its local figures are over the {} local jobs that ran",
            r.broker,
            rejected(r),
            per.join(", "),
            r.local.jobs
        );
    }
    if differ {
        outln!(
            "the compared local job sets differ: local wt and local bsd leave out each \
             broker's rejected jobs"
        );
    }
}

/// `sim grid --plot DIR`: a panel per cluster, a series per broker.
fn write_grid_figures(
    dir: &Path,
    cfg: &GridConfig,
    reports: &[(foresight_sim::grid::GridReport, std::time::Duration)],
) -> Result<()> {
    let panels: Vec<Panel> = cfg
        .cluster
        .iter()
        .enumerate()
        .map(|(k, c)| Panel {
            title: c.name.clone(),
            series: reports
                .iter()
                .map(|(r, _)| Series {
                    name: r.broker.clone(),
                    procs: c.procs,
                    jobs: r.clusters[k].jobs.clone(),
                })
                .collect(),
        })
        .collect();
    let files = write_run_figures(dir, "sim grid", &panels)?;
    eprintln!("wrote {} figures into {}", files.len(), dir.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use foresight_core::Time;

    fn at(pass: GridPass, now: i64) -> GridProgress {
        GridProgress {
            pass,
            now: Time(now),
            last_arrival: Time(7 * 86_400),
        }
    }

    /// The bar moves forward through each broker's two runs and ends full; it says which
    /// broker, which run and the simulated day.
    #[test]
    fn the_grid_bar_moves_through_every_broker_and_pass() {
        let kinds = [BrokerKind::Lookahead, BrokerKind::Queue];
        let mut last = 0;
        for (i, b) in kinds.into_iter().enumerate() {
            for pass in [GridPass::WithGlobal, GridPass::LocalOnly] {
                for now in [0, 86_400, 3 * 86_400, 7 * 86_400, 8 * 86_400] {
                    let (pos, _) = grid_progress(i, kinds.len(), b, at(pass, now));
                    assert!(pos >= last, "{pos} < {last} at {b:?} {pass:?} {now}");
                    last = pos;
                }
            }
        }
        assert_eq!(last, kinds.len() as u64 * GRID_BAR_PER_BROKER);
        let (pos, msg) = grid_progress(
            1,
            2,
            BrokerKind::Queue,
            at(GridPass::LocalOnly, 3 * 86_400 + 8640),
        );
        assert_eq!(pos, GRID_BAR_PER_BROKER + 1000 + 442);
        assert_eq!(
            msg,
            "broker queue (2/2), local streams only, the baseline: day 3.1 of 7.0"
        );
    }
}
