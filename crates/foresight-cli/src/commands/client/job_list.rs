//! `job list`: which jobs (by state, by user, how many), and the table squeue would show.

use super::job_show::describe_state;
use super::Client;
use crate::format::OutputOpt;
use crate::moment::when;
use crate::table::{squeue_time, table};
use anyhow::Result;
use clap::Args;
use foresight_api::{JobState, JobView};
use std::collections::BTreeMap;

/// Options of `job list`.
#[derive(Args)]
pub struct ListOpts {
    /// Only jobs in these states, comma-separated, any case: pending, planned, reserved,
    /// running, suspended, completed, failed, cancelled, timeout [default: the active ones,
    /// pending to suspended].
    #[arg(long, short = 't', value_delimiter = ',', value_parser = parse_state_filter,
        conflicts_with = "all", value_name = "STATE")]
    state: Vec<StateFilter>,
    /// Every job, finished ones too (the history).
    #[arg(long, short = 'a')]
    all: bool,
    /// Only this user's jobs (administrators).
    #[arg(long)]
    user: Option<String>,
    /// At most this many, the newest.
    #[arg(long, default_value_t = 1000)]
    limit: usize,
    #[command(flatten)]
    pub(super) out: OutputOpt,
}

/// A `--state` of `job list`: a job state, or `suspended` (running, stopped by `suspend`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateFilter {
    /// Jobs in this state.
    State(JobState),
    /// Running jobs that are suspended.
    Suspended,
}

/// The states `job list` shows without `--state` or `--all`, as squeue does.
const ACTIVE: [StateFilter; 5] = [
    StateFilter::State(JobState::Pending),
    StateFilter::State(JobState::Planned),
    StateFilter::State(JobState::Reserved),
    StateFilter::State(JobState::Running),
    StateFilter::Suspended,
];

fn parse_state_filter(s: &str) -> std::result::Result<StateFilter, String> {
    let s = s.trim().to_ascii_lowercase();
    if s == "suspended" {
        return Ok(StateFilter::Suspended);
    }
    s.parse::<JobState>().map(StateFilter::State).map_err(|_| {
        format!(
            "{s:?} is not a job state: use pending, planned, reserved, running, suspended, \
             completed, failed, cancelled or timeout"
        )
    })
}

/// The jobs `job list` shows: one request per state asked (the API filters on one state),
/// merged, the newest `limit`, oldest first.
pub(super) fn list_jobs(c: &Client, o: &ListOpts) -> Result<Vec<JobView>> {
    let filters: Vec<StateFilter> = match (o.all, o.state.is_empty()) {
        (true, _) => Vec::new(),
        (false, true) => ACTIVE.to_vec(),
        (false, false) => o.state.clone(),
    };
    let mut asked: Vec<Option<JobState>> = filters
        .iter()
        .map(|f| match f {
            StateFilter::State(s) => Some(*s),
            StateFilter::Suspended => Some(JobState::Running),
        })
        .collect();
    if asked.is_empty() {
        asked.push(None);
    }
    asked.sort();
    asked.dedup();
    let mut jobs: BTreeMap<u64, JobView> = BTreeMap::new();
    for state in asked {
        let mut q = vec![("limit", o.limit.to_string())];
        if let Some(s) = state {
            q.push(("state", s.as_str().to_string()));
        }
        if let Some(u) = &o.user {
            q.push(("user", u.clone()));
        }
        let got: Vec<JobView> = c.get("/jobs", &q)?;
        jobs.extend(got.into_iter().map(|j| (j.id, j)));
    }
    let keep = |j: &JobView| {
        filters.is_empty()
            || filters.iter().any(|f| match f {
                StateFilter::State(JobState::Running) => j.state == JobState::Running,
                StateFilter::State(s) => j.state == *s,
                StateFilter::Suspended => j.state == JobState::Running && j.suspended,
            })
    };
    let mut jobs: Vec<JobView> = jobs.into_values().filter(keep).collect();
    let extra = jobs.len().saturating_sub(o.limit);
    jobs.drain(..extra);
    Ok(jobs)
}

/// True when a queued job waits for its cluster's WIKI scheduler (Maui) to start it.
fn waits_for_wiki(j: &JobView) -> bool {
    !j.state.is_final()
        && j.started_at.is_none()
        && j.reason
            .as_deref()
            .is_some_and(|r| r.starts_with(foresight_daemon::state::world::WAITING_FOR_WIKI))
}

/// Where a job runs: `a`, or every cluster of a co-allocated job with its processors
/// (`a:8+b:4`); the cluster asked for before it is placed.
fn placement(j: &JobView) -> String {
    match j.parts.as_slice() {
        [] => j.cluster.clone().unwrap_or_else(|| "-".into()),
        [p] => p.cluster.clone(),
        parts => parts
            .iter()
            .map(|p| format!("{}:{}", p.cluster, p.procs))
            .collect::<Vec<_>>()
            .join("+"),
    }
}

/// The `job list` table, as squeue: TIME is the time it has run (until `now`, or until it
/// ended, less any time suspended), LIMIT its walltime in the same `D-HH:MM:SS` form, START
/// when it started or is planned to (`~`: a forecast, not guaranteed); EXIT appears when
/// finished jobs are listed.
pub(super) fn jobs_table(jobs: &[JobView], now: i64) -> String {
    let history = jobs.iter().any(|j| j.state.is_final());
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .map(|j| {
            // The server's count leaves out time suspended; a server that predates it
            // gives only the start.
            let elapsed = j.run_secs.unwrap_or_else(|| {
                j.started_at
                    .map_or(0, |s| j.ended_at.unwrap_or(now).saturating_sub(s))
            });
            let start = match (j.started_at, j.state.is_final()) {
                (Some(s), _) => Some(s),
                (None, false) => j.planned_start,
                (None, true) => None,
            };
            let mut row = vec![
                j.display_id(),
                j.user.clone(),
                j.name.clone().unwrap_or_else(|| "-".into()),
                describe_state(j, now),
                squeue_time(elapsed),
                // As TIME, and as the dashboard shows it: the two compare at a glance.
                squeue_time(j.walltime),
                j.procs.to_string(),
                placement(j),
                match start {
                    None if waits_for_wiki(j) => "by WIKI scheduler".into(),
                    // A forecast, not a promise: `job explain` says what may move it.
                    Some(s) if j.started_at.is_none() && !j.start_guaranteed => {
                        format!("~{}", when(Some(s)))
                    }
                    _ => when(start),
                },
            ];
            if history {
                row.push(match (j.exit_code, j.signal) {
                    (_, Some(sig)) => format!("signal {sig}"),
                    (Some(c), None) => c.to_string(),
                    (None, None) => "-".into(),
                });
            }
            row
        })
        .collect();
    let mut header = vec![
        "ID", "USER", "NAME", "STATE", "TIME", "LIMIT", "PROCS", "CLUSTER", "START",
    ];
    if history {
        header.push("EXIT");
    }
    let mut out = table(&header, &rows);
    if jobs.iter().any(|j| {
        j.started_at.is_none()
            && !j.state.is_final()
            && j.planned_start.is_some()
            && !j.start_guaranteed
    }) {
        out.push_str("~ a forecast start, not guaranteed: `job explain ID` says why\n");
    }
    out
}
