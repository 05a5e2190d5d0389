//! `foresight sim sweep`: traces × policies × options in parallel, one table and one figure.

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use foresight_sim::plot::write_sweep_figure;
use foresight_sim::sweep::{run_sweep, SweepConfig, SweepRow};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Options of `foresight sim sweep`.
#[derive(Args)]
pub struct SimSweepOpts {
    /// The sweep: traces, policies and options, each a list (TOML; see examples/sweep.toml).
    #[arg(long, value_name = "sweep.toml")]
    config: PathBuf,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    output: SweepOutput,
    /// Write the comparison figure to DIR/sweep.svg.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum SweepOutput {
    Table,
    Json,
    Csv,
}

/// Runs the sweep and prints its rows.
pub fn sim_sweep(opts: SimSweepOpts) -> Result<()> {
    let cfg = SweepConfig::read(&opts.config)?;
    let plot = opts.plot.as_deref().map(plot_dir).transpose()?;
    let runs = cfg.runs().len();
    let started = Instant::now();
    // On a terminal: runs finished of how many, and the last one.
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(runs as u64);
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} {elapsed_precise} [{wide_bar}] {pos}/{len} runs {percent}% ETA {eta} {msg}",
            )
            .expect("invariant: the template is valid"),
        );
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        bar
    });
    let done = |row: &SweepRow| {
        if let Some(bar) = &bar {
            bar.set_message(format!("{} {}", short(&row.trace), row.label()));
            bar.inc(1);
        }
    };
    let result = run_sweep(&cfg, &done);
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let rows = result.with_context(|| format!("sweeping {}", opts.config.display()))?;
    eprintln!(
        "{} runs in {:.2} s on {} threads",
        rows.len(),
        started.elapsed().as_secs_f64(),
        rayon_threads()
    );
    match opts.output {
        SweepOutput::Json => outln!("{}", serde_json::to_string_pretty(&rows)?),
        SweepOutput::Csv => {
            let mut w = csv::Writer::from_writer(std::io::stdout().lock());
            for r in &rows {
                w.serialize(r)?;
            }
            w.flush()?;
        }
        SweepOutput::Table => print_table(&rows),
    }
    if let Some(dir) = plot {
        let path = dir.join("sweep.svg");
        write_sweep_figure(&path, &rows)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// Creates DIR before the work, so that an unusable place fails at once.
pub fn plot_dir(dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("--plot: creating {}", dir.display()))?;
    let probe = dir.join(".foresight-plot-check");
    std::fs::write(&probe, b"")
        .with_context(|| format!("--plot: {} is not writable", dir.display()))?;
    let _ = std::fs::remove_file(probe);
    Ok(dir.to_path_buf())
}

fn rayon_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn short(trace: &str) -> String {
    Path::new(trace)
        .file_name()
        .map_or(trace.to_string(), |n| n.to_string_lossy().into_owned())
}

fn print_table(rows: &[SweepRow]) {
    let traces: Vec<String> = rows.iter().map(|r| short(&r.trace)).collect();
    let tw = traces
        .iter()
        .map(|t| t.chars().count())
        .max()
        .unwrap_or(0)
        .max(5);
    let lw = rows
        .iter()
        .map(|r| run_label(r).chars().count())
        .max()
        .unwrap_or(0)
        .max(3);
    outln!(
        "{:<tw$}  {:>6}  {:<lw$}  {:>7}  {:>11}  {:>9}  {:>10}  {:>7}  {:>11}",
        "trace",
        "procs",
        "run",
        "jobs",
        "mean wait",
        "mean bsld",
        "max wait",
        "util",
        "makespan"
    );
    for (r, t) in rows.iter().zip(&traces) {
        outln!(
            "{t:<tw$}  {:>6}  {:<lw$}  {:>7}  {:>10.1}s  {:>9.2}  {:>9}s  {:>6.2}%  {:>10}s",
            r.procs,
            run_label(r),
            r.jobs,
            r.mean_wait,
            r.mean_bsld,
            r.max_wait,
            r.utilization * 100.0,
            r.makespan
        );
    }
}

/// Policy, backfill, order, semantics and load, always all five, so columns line up.
fn run_label(r: &SweepRow) -> String {
    format!(
        "{} backfill={} order={} {} load×{}",
        r.policy, r.backfill, r.order, r.semantics, r.load
    )
}
