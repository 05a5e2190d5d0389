//! Accounting, as Slurm users know it: `job history` (sacct) lists finished jobs with their
//! times, exit codes and charges; `report usage` (sreport) adds up processor-hours and
//! charges by user, account or cluster over a period ([`foresight_api::usage`]).

use super::client::{bad, when, Client, Connection};
use crate::format::Format;
use crate::table::{printable, squeue_time, table};
use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};
use foresight_api::usage::{usage, UsageKey, UsageRow};
use foresight_api::JobView;
use serde::Serialize;

/// The period of a report: `--since` to `--until`.
#[derive(Args, Clone, Debug)]
pub struct Period {
    /// From this moment (as sacct's --starttime: `now-1days`, `2026-11-01`, `midnight`, …)
    /// [default: 00:00 today].
    #[arg(long, short = 'S', value_name = "TIME")]
    since: Option<String>,
    /// Until this moment [default: now].
    #[arg(long, short = 'E', value_name = "TIME")]
    until: Option<String>,
}

impl Period {
    /// `[since, until)` in seconds since the epoch.
    fn resolve(&self, now: i64) -> Result<(i64, i64)> {
        let tz = crate::moment::local_zone();
        let read = |text: &str, flag: &str| {
            crate::moment::parse_moment(text, now, &tz).map_err(|e| bad(format!("--{flag}: {e}")))
        };
        let since = match &self.since {
            Some(t) => read(t, "since")?,
            None => read("today", "since")?,
        };
        let until = match &self.until {
            Some(t) => read(t, "until")?,
            None => now,
        };
        if until <= since {
            return Err(bad(format!(
                "--until ({}) is not after --since ({})",
                when(Some(until)),
                when(Some(since))
            )));
        }
        Ok((since, until))
    }
}

/// Options of `job history`.
#[derive(Args)]
pub struct HistoryOpts {
    #[command(flatten)]
    period: Period,
    /// Only this user's jobs (administrators; others see their own).
    #[arg(long, short = 'u')]
    user: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, default_value = "table",
          value_parser = Format::parser(&Format::TABLE_JSON_CSV))]
    output: Format,
}

/// Every job the caller may see (the server lists at most this many, the newest).
const ALL_JOBS: usize = 10_000_000;

fn all_jobs(c: &Client, user: Option<&str>) -> Result<Vec<JobView>> {
    let mut q = vec![("limit", ALL_JOBS.to_string())];
    if let Some(u) = user {
        q.push(("user", u.to_string()));
    }
    c.get("/jobs", &q)
}

/// One finished job as `job history -o json|csv` gives it.
#[derive(Serialize)]
struct HistoryRow {
    id: u64,
    /// The id people use, as `job list` shows it: `ID`, or `ARRAY_TASK` for a task of an
    /// array job (whose `id` is the service's own number for the task).
    job: String,
    name: String,
    user: String,
    account: String,
    state: String,
    start: Option<i64>,
    end: Option<i64>,
    elapsed: i64,
    procs: u32,
    clusters: String,
    exit_code: Option<i32>,
    signal: Option<i32>,
    charged: f64,
    parts: Vec<PartRow>,
}

/// One part of a finished job, timed on its own: the parts of a co-allocated job end apart.
#[derive(Serialize)]
struct PartRow {
    part: usize,
    cluster: String,
    procs: u32,
    start: Option<i64>,
    end: Option<i64>,
    elapsed: i64,
}

/// Seconds from `start` to `end`, 0 unless both are known.
fn elapsed(start: Option<i64>, end: Option<i64>) -> i64 {
    match (start, end) {
        (Some(s), Some(e)) => (e - s).max(0),
        _ => 0,
    }
}

/// Runs `job history`: the finished jobs that ran in the period (ended at or after its
/// start, started at or before its end; a job that never started counts at its submission).
pub fn history(c: &Client, o: HistoryOpts) -> Result<()> {
    let now = crate::moment::now();
    let (since, until) = o.period.resolve(now)?;
    let rows: Vec<HistoryRow> = all_jobs(c, o.user.as_deref())?
        .into_iter()
        .filter(|j| j.state.is_final())
        .filter(|j| {
            let end = j.ended_at.unwrap_or(j.submitted_at);
            end >= since && j.started_at.unwrap_or(j.submitted_at) <= until
        })
        .map(|j| HistoryRow {
            id: j.id,
            job: j.display_id(),
            name: j.name.clone().unwrap_or_default(),
            user: j.user.clone(),
            account: j.account.clone().unwrap_or_default(),
            state: j.state.as_str().to_string(),
            start: j.started_at,
            end: j.ended_at,
            elapsed: elapsed(j.started_at, j.ended_at),
            procs: j.procs,
            clusters: j
                .parts
                .iter()
                .map(|p| format!("{}:{}", p.cluster, p.procs))
                .collect::<Vec<_>>()
                .join("+"),
            exit_code: j.exit_code,
            signal: j.signal,
            charged: j.charged,
            parts: j
                .parts
                .iter()
                .enumerate()
                .map(|(part, p)| {
                    // A server that does not time parts: the job's times.
                    let start = p.started_at.or(j.started_at);
                    let end = p.ended_at.or(j.ended_at);
                    PartRow {
                        part,
                        cluster: p.cluster.clone(),
                        procs: p.procs,
                        start,
                        end,
                        elapsed: elapsed(start, end),
                    }
                })
                .collect(),
        })
        .collect();
    o.output.print_records(
        &rows,
        || history_table(&rows, since, until),
        &[
            "id",
            "name",
            "user",
            "account",
            "state",
            "start",
            "end",
            "elapsed",
            "procs",
            "clusters",
            "exit_code",
            "signal",
            "charged",
            "job",
        ],
        || rows.iter().map(history_record).collect(),
    )
}

/// One finished job as a CSV record of `job history`.
fn history_record(r: &HistoryRow) -> Vec<String> {
    let opt = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_default();
    vec![
        r.id.to_string(),
        printable(&r.name),
        printable(&r.user),
        printable(&r.account),
        printable(&r.state),
        opt(r.start),
        opt(r.end),
        r.elapsed.to_string(),
        r.procs.to_string(),
        printable(&r.clusters),
        opt(r.exit_code.map(i64::from)),
        opt(r.signal.map(i64::from)),
        format!("{:.2}", r.charged),
        printable(&r.job),
    ]
}

/// The `job history` table, as sacct: a co-allocated job's parts under it.
fn history_table(rows: &[HistoryRow], since: i64, until: i64) -> String {
    let mut cells = Vec::new();
    for r in rows {
        cells.push(vec![
            printable(&r.job),
            printable(&r.name),
            printable(&r.user),
            printable(&r.account),
            printable(&r.state),
            when(r.start),
            when(r.end),
            squeue_time(r.elapsed),
            r.procs.to_string(),
            if r.parts.len() == 1 {
                r.parts[0].cluster.clone()
            } else {
                r.clusters.clone()
            },
            // sacct's ExitCode: code:signal.
            format!("{}:{}", r.exit_code.unwrap_or(0), r.signal.unwrap_or(0)),
            format!("{:.2}", r.charged),
        ]);
        if r.parts.len() > 1 {
            // The parts of a co-allocated job, as sacct lists a job's steps.
            for p in &r.parts {
                cells.push(vec![
                    format!("{}.{}", printable(&r.job), p.part),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    when(p.start),
                    when(p.end),
                    squeue_time(p.elapsed),
                    p.procs.to_string(),
                    p.cluster.clone(),
                    String::new(),
                    String::new(),
                ]);
            }
        }
    }
    let mut s = table(
        &[
            "JOBID", "NAME", "USER", "ACCOUNT", "STATE", "START", "END", "ELAPSED", "PROCS",
            "CLUSTER", "EXITCODE", "CHARGE",
        ],
        &cells,
    );
    if rows.is_empty() {
        s.push_str(&format!(
            "(no job ended between {} and {})\n",
            when(Some(since)),
            when(Some(until))
        ));
    }
    s
}

// ------------------------------------------------------------------------ report

/// Reports.
#[derive(Subcommand)]
pub enum ReportCommand {
    /// Processor-hours and charges by user, account or cluster over a period, as sreport.
    Usage(UsageOpts),
}

/// Options of `report usage`.
#[derive(Args)]
pub struct UsageOpts {
    /// Group by.
    #[arg(long, value_enum, default_value = "user")]
    by: By,
    #[command(flatten)]
    period: Period,
    /// Only this user's jobs (administrators; others see their own).
    #[arg(long, short = 'u')]
    user: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, default_value = "table",
          value_parser = Format::parser(&Format::TABLE_JSON_CSV))]
    output: Format,
}

/// What `report usage` groups by.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum By {
    /// The job's owner.
    User,
    /// The job's account.
    Account,
    /// The cluster each part ran on.
    Cluster,
}

/// Runs a report.
pub fn report(conn: &Connection, cmd: ReportCommand) -> Result<()> {
    let ReportCommand::Usage(o) = cmd;
    let now = crate::moment::now();
    let (since, until) = o.period.resolve(now)?;
    let c = Client::new(conn)?;
    let jobs = all_jobs(&c, o.user.as_deref())?;
    let key = match o.by {
        By::User => UsageKey::User,
        By::Account => UsageKey::Account,
        By::Cluster => UsageKey::Cluster,
    };
    let rows = usage(&jobs, since, until, now, key);
    let name = match o.by {
        By::User => "USER",
        By::Account => "ACCOUNT",
        By::Cluster => "CLUSTER",
    };
    let column = name.to_lowercase();
    o.output.print_records(
        &rows,
        || usage_table(&rows, name, since, until),
        &[&column, "jobs", "proc_hours", "charged"],
        || {
            rows.iter()
                .map(|r| {
                    vec![
                        printable(&r.key),
                        r.jobs.to_string(),
                        format!("{:.4}", r.proc_hours),
                        format!("{:.2}", r.charged),
                    ]
                })
                .collect()
        },
    )
}

/// The `report usage` table: a row per `name` (user, account or cluster), then the total.
fn usage_table(rows: &[UsageRow], name: &str, since: i64, until: i64) -> String {
    let mut s = format!(
        "Usage from {} to {}\n",
        when(Some(since)),
        when(Some(until))
    );
    let total = UsageRow {
        key: "TOTAL".into(),
        jobs: 0,
        proc_hours: rows.iter().map(|r| r.proc_hours).sum(),
        charged: rows.iter().map(|r| r.charged).sum(),
    };
    let mut cells: Vec<Vec<String>> = rows
        .iter()
        .chain(std::iter::once(&total))
        .map(|r| {
            vec![
                r.key.clone(),
                if r.key == "TOTAL" && r.jobs == 0 {
                    String::new()
                } else {
                    r.jobs.to_string()
                },
                format!("{:.2}", r.proc_hours),
                format!("{:.2}", r.charged),
            ]
        })
        .collect();
    if rows.is_empty() {
        cells.clear();
    }
    s.push_str(&table(&[name, "JOBS", "PROC-HOURS", "CHARGED"], &cells));
    s
}
