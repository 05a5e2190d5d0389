//! `foresight workflow submit|show|list|cancel`: DAGs of tasks read from a YAML or JSON file,
//! mapped onto the grid by the service and run as jobs in dependency order.

use super::client::{bad, Client, Connection};
use crate::format::OutputOpt;
use crate::moment::when;
use crate::table::{printable, table};
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use foresight_api::*;
use std::path::PathBuf;

/// Workflow commands.
#[derive(Subcommand)]
pub enum WorkflowCommand {
    /// Submit a workflow file (YAML, or JSON when it ends in `.json`): its tasks are placed
    /// on clusters by the mapper and run as jobs once their inputs are ready.
    Submit(SubmitOpts),
    /// Show a workflow: each task's cluster, planned and actual start, state and reason.
    Show(ShowOpts),
    /// List workflows (your own; every user's for administrators).
    List(ListOpts),
    /// Cancel every task of a workflow that has not ended.
    Cancel(ShowOpts),
}

/// Options of `workflow submit`.
#[derive(Args)]
pub struct SubmitOpts {
    /// The workflow file: `name`, `tasks` (name, command, procs, walltime, requires, env,
    /// cwd), `edges` (from, to, data_mb) and `on_failure` (`cancel` or `retry: N`).
    file: PathBuf,
    /// The mapping algorithm [default: the file's `mapper`, else dsc].
    #[arg(long, value_parser = ["dsc", "heft", "greedy"])]
    mapper: Option<String>,
    /// Reserve every task's slot as mapped (two-phase: all or none); each task starts at
    /// its reserved start once its inputs are ready [default: the file's `reserve`].
    #[arg(long)]
    reserve: bool,
    #[command(flatten)]
    out: OutputOpt,
}

/// A workflow id.
#[derive(Args)]
pub struct ShowOpts {
    /// The workflow's id.
    id: u64,
    #[command(flatten)]
    out: OutputOpt,
}

/// Options of `workflow list`.
#[derive(Args)]
pub struct ListOpts {
    #[command(flatten)]
    out: OutputOpt,
}

/// Reads and checks a workflow file: a malformed file is an error naming it, the line and
/// the field; relative working directories are taken from the file's directory, and a
/// task without one runs in the current directory (as `job submit`).
pub fn read_file(path: &std::path::Path) -> Result<WorkflowSpec> {
    let text = foresight_sim::input::read_text(path)
        .with_context(|| format!("reading {}", path.display()))?;
    let json = path.extension().is_some_and(|e| e == "json");
    let mut spec =
        parse_workflow(&text, json).map_err(|e| bad(format!("{}: {e}", path.display())))?;
    spec.check()
        .map_err(|(field, e)| bad(format!("{}: {field}: {e}", path.display())))?;
    let here = std::env::current_dir()?;
    let base = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or(here.clone(), PathBuf::from);
    for t in &mut spec.tasks {
        let dir = match &t.cwd {
            Some(d) => std::path::absolute(base.join(d))?,
            None => std::path::absolute(&here)?,
        };
        t.cwd = Some(dir.display().to_string());
    }
    Ok(spec)
}

/// Runs a workflow command.
pub fn run(conn: &Connection, cmd: WorkflowCommand) -> Result<()> {
    // The file is read and checked before looking for a server.
    let spec = match &cmd {
        WorkflowCommand::Submit(o) => {
            let mut spec = read_file(&o.file)?;
            if let Some(m) = &o.mapper {
                spec.mapper = Some(
                    m.parse()
                        .map_err(|e: String| bad(format!("--mapper: {e}")))?,
                );
            }
            spec.reserve |= o.reserve;
            Some(spec)
        }
        _ => None,
    };
    let c = Client::new(conn)?;
    match cmd {
        WorkflowCommand::Submit(o) => {
            let s: SubmittedWorkflow = c.post("/workflows", &spec)?;
            o.out.output.print_compact(&s, || format!("{}\n", s.id))?;
        }
        WorkflowCommand::Show(o) => {
            let w: WorkflowView = c.get(&format!("/workflows/{}", o.id), &[])?;
            o.out.output.print(&w, || details(&w))?;
        }
        WorkflowCommand::List(o) => {
            let ws: Vec<WorkflowView> = c.get("/workflows", &[])?;
            o.out.output.print(&ws, || list_table(&ws))?;
        }
        WorkflowCommand::Cancel(o) => {
            let w: WorkflowView = c.post(
                &format!("/workflows/{}/cancel", o.id),
                &serde_json::json!({}),
            )?;
            o.out.output.print(&w, || details(&w))?;
        }
    }
    Ok(())
}

/// The `workflow list` table.
pub fn list_table(ws: &[WorkflowView]) -> String {
    let rows: Vec<Vec<String>> = ws
        .iter()
        .map(|w| {
            let done = w
                .tasks
                .iter()
                .filter(|t| t.state == JobState::Completed)
                .count();
            vec![
                w.id.to_string(),
                w.user.clone(),
                w.name.clone(),
                w.state.to_string(),
                format!("{done}/{}", w.tasks.len()),
                w.mapper.as_str().into(),
                when(Some(w.submitted_at)),
            ]
        })
        .collect();
    table(
        &["ID", "USER", "NAME", "STATE", "DONE", "MAPPER", "SUBMITTED"],
        &rows,
    )
}

/// The `workflow show` text: the workflow, then one row per task with the start the
/// mapping planned beside the actual one.
pub fn details(w: &WorkflowView) -> String {
    let mut s = String::new();
    let mut kv = |k: &str, v: String| s.push_str(&format!("{k:<14}{}\n", printable(&v)));
    kv("id", w.id.to_string());
    kv("name", w.name.clone());
    kv("user", w.user.clone());
    kv("state", w.state.to_string());
    kv("mapper", w.mapper.as_str().into());
    kv("on failure", w.on_failure.to_string());
    kv("submitted", when(Some(w.submitted_at)));
    kv("planned end", when(Some(w.planned_end)));
    s.push('\n');
    let rows: Vec<Vec<String>> = w
        .tasks
        .iter()
        .map(|t| {
            vec![
                t.name.clone(),
                t.job.to_string(),
                t.state.to_string(),
                t.cluster.clone(),
                if t.after.is_empty() {
                    "-".into()
                } else {
                    t.after.join(",")
                },
                when(Some(t.planned_start)),
                when(t.started_at),
                when(t.ended_at),
                t.retries.to_string(),
                t.reason.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    s.push_str(&table(
        &[
            "TASK",
            "JOB",
            "STATE",
            "CLUSTER",
            "AFTER",
            "PLANNED START",
            "START",
            "END",
            "RETRIES",
            "REASON",
        ],
        &rows,
    ));
    s
}
