//! `foresight sim auction`: the decentralized mode's English auctions swept over their length.

use anyhow::{anyhow, Context, Result};
use clap::Args;
use foresight_sim::auction::plot::write_alpha_figure;
use foresight_sim::auction::{
    lookahead_rows, parse_alphas, sweep, AuctionSimConfig, Estimate, SweepReport,
};
use serde_json::json;
use std::path::PathBuf;

/// Options of `foresight sim auction`.
#[derive(Args)]
pub struct SimAuctionOpts {
    /// The experiment: sites, local streams, the global stream, the auction's options (TOML).
    #[arg(long, value_name = "auction.toml")]
    config: PathBuf,
    /// Auction lengths to run, in mean runtimes: FROM:TO:STEP or one value (default: the
    /// config's auction.alpha).
    #[arg(long, value_name = "FROM:TO:STEP")]
    alpha_sweep: Option<String>,
    /// Runs per α, on seeds seed, seed+1, … (default: the config's seeds).
    #[arg(long, value_name = "N")]
    seeds: Option<u64>,
    /// Write an SVG of response per priority and participation against α to FILE.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Also run the same streams under the centralized lookahead broker (`sim grid`'s, serving
    /// the same priority levels and preempting lower ones' global jobs), and report its
    /// response per priority level.
    #[arg(long)]
    compare_lookahead: bool,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    output: Format,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Table,
    Json,
}

/// Runs the sweep and prints it.
pub fn sim_auction(opts: SimAuctionOpts) -> Result<()> {
    let cfg = AuctionSimConfig::read(&opts.config).map_err(|e| anyhow!(e))?;
    let alphas = match &opts.alpha_sweep {
        Some(s) => parse_alphas(s).map_err(|e| anyhow!("--alpha-sweep {e}"))?,
        None => vec![cfg.auction.alpha],
    };
    let seeds = opts.seeds.unwrap_or(cfg.seeds);
    if seeds == 0 {
        return Err(anyhow!("--seeds must be at least 1"));
    }
    let report = sweep(&cfg, &alphas, seeds);
    if let Some(b) = report.runs.iter().find(|r| r.unfinished > 0) {
        return Err(anyhow!(
            "α {} seed {}: {} global jobs never ended (the grid cannot run them)",
            b.alpha,
            b.seed,
            b.unfinished
        ));
    }
    if let Some(path) = &opts.plot {
        write_alpha_figure(path, &report).with_context(|| format!("--plot {}", path.display()))?;
    }
    let lookahead = if opts.compare_lookahead {
        let dir = std::env::temp_dir().join(format!("foresight-auction-{}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let rows = lookahead_rows(&cfg, seeds, &dir);
        let _ = std::fs::remove_dir_all(&dir);
        Some(rows.context("the lookahead comparison")?)
    } else {
        None
    };
    match opts.output {
        Format::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "seeds": report.seeds,
                "rows": report.rows,
                "lookahead": lookahead,
            }))?
        ),
        Format::Table => {
            print_table(&report, cfg.site.len());
            if let Some(l) = &lookahead {
                let mut line = "lookahead (centralized, same levels, preempting):".to_string();
                for p in (0..l.len()).rev() {
                    line += &format!("  prio {p} {}", cell(&l[p], 1.0));
                }
                outln!("{line}");
            }
        }
    }
    Ok(())
}

fn cell(e: &Estimate, scale: f64) -> String {
    format!("{:.3} ± {:.3}", e.mean * scale, e.half_width * scale)
}

fn pct(e: &Estimate) -> String {
    format!("{:.1} ± {:.1}", 100.0 * e.mean, 100.0 * e.half_width)
}

fn print_table(report: &SweepReport, sites: usize) {
    let levels = report.rows.first().map_or(0, |r| r.response.len());
    outln!(
        "mean response per priority level in mean runtimes (level {} highest), 95 % CI over {} seeds ({}..={}); {} dispatchers",
        levels.saturating_sub(1),
        report.seeds.len(),
        report.seeds.first().copied().unwrap_or(0),
        report.seeds.last().copied().unwrap_or(0),
        sites
    );
    let mut head = format!("{:>5}", "alpha");
    for p in (0..levels).rev() {
        head += &format!("  {:>15}", format!("prio {p}"));
    }
    head += &format!(
        "  {:>17}  {:>17}  {:>15}  {:>8}",
        "bidding (%)", "bidding, sold (%)", "local", "unsold%"
    );
    outln!("{head}");
    for r in &report.rows {
        let mut line = format!("{:>5.2}", r.alpha);
        for p in (0..levels).rev() {
            line += &format!("  {:>15}", cell(&r.response[p], 1.0));
        }
        line += &format!(
            "  {:>17}  {:>17}  {:>15}  {:>8.1}",
            pct(&r.participation),
            pct(&r.participation_sold),
            cell(&r.local_response, 1.0),
            100.0 * r.unsold_share.mean
        );
        outln!("{line}");
    }
    let top = levels.saturating_sub(1);
    if let Some(best) = report
        .rows
        .iter()
        .filter(|r| r.response[top].mean.is_finite())
        .min_by(|a, b| a.response[top].mean.total_cmp(&b.response[top].mean))
    {
        outln!(
            "top priority's minimum at alpha {:.2}: response {} mean runtimes; dispatchers bidding {} % per auction, {} % per auction that sold",
            best.alpha,
            cell(&best.response[top], 1.0),
            pct(&best.participation),
            pct(&best.participation_sold)
        );
    }
}
