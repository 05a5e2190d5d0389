//! `foresight sim workflow`: DSC vs HEFT vs greedy on seeded workflows over a trace-loaded
//! grid (see `foresight_sim::workflow`).

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use foresight_sim::workflow::{simulate_workflows, Estimate, WorkflowSimConfig};
use std::path::PathBuf;

/// Options of `foresight sim workflow`.
#[derive(Args)]
pub struct SimWorkflowOpts {
    /// The experiment: clusters with their local streams, shapes, workflow size (TOML).
    #[arg(long, value_name = "workflow.toml")]
    config: PathBuf,
    /// Seeds per shape (default: the config's `seeds`, 20 unless set).
    #[arg(long, value_name = "N")]
    seeds: Option<usize>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    output: Format,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Table,
    Json,
}

/// Runs the experiment and prints one line per shape and mapper.
pub fn sim_workflow(opts: SimWorkflowOpts) -> Result<()> {
    if opts.seeds == Some(0) {
        anyhow::bail!("--seeds must be at least 1");
    }
    let cfg = WorkflowSimConfig::read(&opts.config)?;
    let report = simulate_workflows(&cfg, opts.seeds)
        .with_context(|| format!("simulating {}", opts.config.display()))?;
    match opts.output {
        Format::Json => outln!("{}", serde_json::to_string_pretty(&report)?),
        Format::Table => {
            let ci =
                |e: &Estimate, prec: usize| format!("{:.prec$} ± {:.prec$}", e.mean, e.half_width);
            outln!(
                "{} seeds per shape; means with 95 % confidence intervals",
                report.seeds
            );
            outln!(
                "{:<12} {:<7} {:>6} {:>18} {:>13} {:>14} {:>15} {:>16} {:>16} {:>7}",
                "shape",
                "mapper",
                "tasks",
                "makespan (s)",
                "vs greedy",
                "SLR",
                "staging (%)",
                "local wait (s)",
                "local delay (s)",
                "merges"
            );
            for r in &report.rows {
                let staging = Estimate {
                    mean: r.staging.mean * 100.0,
                    half_width: r.staging.half_width * 100.0,
                    ..r.staging
                };
                outln!(
                    "{:<12} {:<7} {:>6.0} {:>18} {:>13} {:>14} {:>15} {:>16} {:>16} {:>7.1}",
                    r.shape,
                    r.mapper,
                    r.tasks,
                    ci(&r.makespan, 0),
                    ci(&r.vs_greedy, 3),
                    ci(&r.slr, 2),
                    ci(&staging, 1),
                    ci(&r.local_wait, 0),
                    ci(&r.local_delay, 0),
                    r.merges
                );
            }
            let refused: usize = report.rows.iter().map(|r| r.refused_holds).sum();
            if refused > 0 {
                outln!("{refused} task reservations were refused by local schedulers");
            }
        }
    }
    Ok(())
}
