//! `foresight estimate`: when a job would start, per cluster and over the grid.

use super::input::{begin_of, parse_price, walltime_ok};
use super::{Client, Connection};
use crate::format::OutputOpt;
use crate::moment::when;
use crate::table::{printable, table};
use anyhow::Result;
use clap::Args;
use foresight_api::{Estimate, EstimateRequest, Walltime};
/// Options of `estimate`.
#[derive(Args)]
pub struct EstimateOpts {
    /// Processors.
    #[arg(short = 'n', long, default_value_t = 1)]
    procs: u32,
    /// Walltime, as `sbatch --time`: M (a bare number is minutes), M:S, H:M:S, D-H, D-H:M,
    /// D-H:M:S; or with units: 90s, 15m, 1h30m, 2d.
    #[arg(short = 't', long, default_value = "1h", value_name = "TIME")]
    time: String,
    /// Not before this time, as `sbatch --begin`: 16:00, now+1hour, now+90 (= 90 s),
    /// 2026-11-23, 2026-11-23T16:00(:00) (local time; or with a zone, …T16:00:00Z), midnight,
    /// tomorrow, +DURATION as -t (+10m; +90 = 90 minutes), or seconds since the epoch.
    #[arg(long, value_name = "TIME")]
    begin: Option<String>,
    /// Max price per processor-second.
    #[arg(long, allow_negative_numbers = true, value_parser = parse_price)]
    price: Option<f64>,
    /// Never split over several clusters.
    #[arg(long)]
    no_coallocation: bool,
    #[command(flatten)]
    out: OutputOpt,
}

/// Runs `estimate`.
pub fn estimate(conn: &Connection, o: EstimateOpts) -> Result<()> {
    walltime_ok(&o.time)?;
    let begin = begin_of(o.begin.as_deref())?;
    let c = Client::new(conn)?;
    let e: Estimate = c.post(
        "/estimate",
        &EstimateRequest {
            procs: o.procs,
            walltime: Walltime::Text(o.time),
            price: o.price,
            co_allocate: !o.no_coallocation,
            begin,
        },
    )?;
    o.out.output.print(&e, || estimate_text(&e))
}

/// The `estimate` text: every cluster's earliest start, then the grid's.
fn estimate_text(e: &Estimate) -> String {
    let rows: Vec<Vec<String>> = e
        .clusters
        .iter()
        .map(|c| {
            let note = match (&c.reason, c.resource_manager_start) {
                (Some(r), _) => r.clone(),
                (None, Some(t)) => format!("its resource manager says {}", when(Some(t))),
                (None, None) => String::new(),
            };
            vec![c.cluster.clone(), when(c.start), note]
        })
        .collect();
    let mut s = table(&["CLUSTER", "EARLIEST START", "NOTE"], &rows);
    match e.earliest {
        Some(t) => s.push_str(&format!(
            "grid: {} on {} (cost {:.2})\n",
            when(Some(t)),
            printable(
                &e.parts
                    .iter()
                    .map(|p| format!("{}:{}", p.cluster, p.procs))
                    .collect::<Vec<_>>()
                    .join(" + ")
            ),
            e.cost.unwrap_or(0.0)
        )),
        None => s.push_str("grid: no start within the planning horizon\n"),
    }
    s
}
