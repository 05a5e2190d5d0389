//! `foresight plan …`: the grid planner's slot selection, for inspection and independent
//! checking.

use crate::format::Format;
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use foresight_core::select::{Processor, SlotPlan, SlotRequest};
use foresight_core::{Dur, Time};
use serde::Deserialize;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Plan commands.
#[derive(Subcommand)]
pub enum PlanCommand {
    /// Choose slots for one request in a plan given as JSON (exit 0 found, 3 no fit,
    /// 2 malformed input).
    Select(PlanSelectOpts),
    /// Show the service's plan as a text Gantt chart (or JSON).
    Show(super::client::PlanShowOpts),
}

/// Options of `foresight plan select`.
#[derive(Args)]
pub struct PlanSelectOpts {
    /// The plan: {"processors":[…], "slots":[…], "staging":{cluster: seconds}}.
    #[arg(long, value_name = "PLAN.json")]
    plan: PathBuf,
    /// The request: {"procs":…, "walltime":…, "max_price":…, "criterion":…, …}.
    #[arg(long, value_name = "REQ.json")]
    request: PathBuf,
    /// Output format.
    #[arg(short = 'o', long, default_value = "table",
          value_parser = Format::plain_parser(&Format::TABLE_JSON))]
    output: Format,
}

/// Input that is not what the command needs: exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanFile {
    processors: Vec<Processor>,
    slots: Vec<SlotFile>,
    #[serde(default)]
    staging: BTreeMap<String, i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SlotFile {
    processor: String,
    start: i64,
    end: i64,
    cost: f64,
}

/// Runs a `plan` subcommand.
pub fn run(cmd: PlanCommand) -> Result<ExitCode> {
    match cmd {
        PlanCommand::Select(opts) => select(opts),
        PlanCommand::Show(opts) => super::client::plan_show(opts).map(|()| ExitCode::SUCCESS),
    }
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let text = foresight_sim::input::read_text(path)
        .with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| BadInput(format!("{}: {e}", path.display())).into())
}

fn select(opts: PlanSelectOpts) -> Result<ExitCode> {
    let file: PlanFile = read_json(&opts.plan)?;
    let req: SlotRequest = read_json(&opts.request)?;
    let bad = |msg: String| BadInput(format!("{}: {msg}", opts.request.display()));
    if req.procs == 0 {
        return Err(bad("procs must be at least 1".into()).into());
    }
    if req.walltime.as_secs() <= 0 {
        return Err(bad(format!(
            "walltime must be positive, got {}",
            req.walltime.as_secs()
        ))
        .into());
    }
    if !(req.max_price >= 0.0 && req.max_price.is_finite()) {
        return Err(bad(format!(
            "max_price must be a non-negative number, got {}",
            req.max_price
        ))
        .into());
    }
    let plan = SlotPlan::new(
        file.processors,
        file.slots
            .into_iter()
            .map(|s| (s.processor, Time(s.start), Time(s.end), s.cost)),
    )
    .map_err(|e| BadInput(format!("{}: {e}", opts.plan.display())))?;
    let mut staging = vec![Some(Dur::ZERO); plan.clusters().len()];
    for (cluster, secs) in &file.staging {
        let Some(c) = plan.cluster_index(cluster) else {
            return Err(BadInput(format!(
                "{}: staging names cluster {cluster:?}, which has no processors",
                opts.plan.display()
            ))
            .into());
        };
        if *secs < 0 {
            return Err(BadInput(format!(
                "{}: staging for {cluster:?} must not be negative, got {secs}",
                opts.plan.display()
            ))
            .into());
        }
        staging[c] = Some(Dur(*secs));
    }
    match plan.select(&req, &staging) {
        Ok(sel) => {
            let name = |p: u32| plan.processors()[p as usize].id.clone();
            let mut slots = sel.slots.clone();
            slots.sort_by_key(|s| (name(s.processor), s.start));
            match opts.output {
                Format::Json => {
                    let doc = json!({
                        "start": sel.start,
                        "end": sel.end,
                        "cost": sel.cost,
                        "slots": slots.iter().map(|s| json!({
                            "processor": name(s.processor),
                            "start": s.start,
                            "end": s.end,
                            "cost": s.cost,
                        })).collect::<Vec<_>>(),
                    });
                    outln!("{}", serde_json::to_string_pretty(&doc)?);
                }
                Format::Table | Format::Csv => {
                    outln!("start {}  end {}  cost {}", sel.start, sel.end, sel.cost);
                    let width = slots
                        .iter()
                        .map(|s| name(s.processor).chars().count())
                        .max()
                        .unwrap_or(9)
                        .max(9);
                    // Padded by hand: `format!`'s width panics from 65536 on.
                    let pad = crate::table::pad;
                    outln!(
                        "{}  {:>10}  {:>10}  {:>8}",
                        pad("processor", width),
                        "start",
                        "end",
                        "cost"
                    );
                    for s in &slots {
                        outln!(
                            "{}  {:>10}  {:>10}  {:>8}",
                            pad(&name(s.processor), width),
                            s.start,
                            s.end,
                            s.cost
                        );
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(no) => {
            match opts.output {
                Format::Json => outln!("{}", json!({"error": "no_fit", "reason": no.reason})),
                Format::Table | Format::Csv => outln!("no fit: {}", no.reason),
            }
            Ok(ExitCode::from(3))
        }
    }
}
