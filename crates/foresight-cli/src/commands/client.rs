//! The service's commands: `job`, `estimate`, `reservation`, `cluster`, `plan show`, `user`.
//! They talk to the server's REST API; without `--server` they find the server of the
//! default data directory (its `server.url`) and its admin token.

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use foresight_api::*;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Where the server is and who we are.
#[derive(Args, Clone, Debug, Default)]
pub struct Connection {
    /// Server URL [default: the server of the default data directory].
    #[arg(long, global = true, env = "FORESIGHT_SERVER", value_name = "URL")]
    pub server: Option<String>,
    /// Bearer token [default: the admin token in the default data directory].
    #[arg(long, global = true, env = "FORESIGHT_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// Output format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// For people.
    #[default]
    Table,
    /// For programs.
    Json,
}

/// `-o table|json`.
#[derive(Args, Clone, Copy, Debug)]
pub struct OutputOpt {
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    pub output: Output,
}

/// A refusal from the server, carried as the command's error.
#[derive(Debug, thiserror::Error)]
#[error("{status}: {body}")]
pub struct ServerRefused {
    /// HTTP status.
    pub status: u16,
    /// The error body.
    pub body: ApiError,
}

struct Client {
    http: reqwest::blocking::Client,
    base: String,
    token: String,
}

fn data_dir() -> PathBuf {
    foresight_daemon::config::default_data_dir()
}

impl Client {
    fn new(conn: &Connection) -> Result<Client> {
        let base = match &conn.server {
            Some(s) => s.trim_end_matches('/').to_string(),
            None => {
                let path = data_dir().join("server.url");
                std::fs::read_to_string(&path)
                    .map(|s| s.trim().to_string())
                    .with_context(|| {
                        format!(
                            "no --server given and no running server found ({} is missing); \
                             start one with `foresight server start` or set FORESIGHT_SERVER",
                            path.display()
                        )
                    })?
            }
        };
        let token = match &conn.token {
            Some(t) => t.clone(),
            None => {
                let path = data_dir().join("admin.token");
                std::fs::read_to_string(&path)
                    .map(|s| s.trim().to_string())
                    .with_context(|| {
                        format!(
                            "no --token given and {} is not readable; set FORESIGHT_TOKEN",
                            path.display()
                        )
                    })?
            }
        };
        let http = reqwest::blocking::Client::builder()
            .timeout(std::time::Duration::from_secs(60))
            .build()?;
        Ok(Client { http, base, token })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}{}", self.base, API_PREFIX, path)
    }

    fn send<T: DeserializeOwned>(&self, req: reqwest::blocking::RequestBuilder) -> Result<T> {
        let resp = req
            .bearer_auth(&self.token)
            .send()
            .with_context(|| format!("cannot reach the server at {}", self.base))?;
        let status = resp.status();
        let text = resp.text()?;
        if !status.is_success() {
            let body: ApiError = serde_json::from_str(&text).unwrap_or(ApiError {
                code: "http".into(),
                field: None,
                message: text,
            });
            return Err(ServerRefused {
                status: status.as_u16(),
                body,
            }
            .into());
        }
        serde_json::from_str(&text).with_context(|| format!("unexpected answer: {text}"))
    }

    fn get<T: DeserializeOwned>(&self, path: &str, query: &[(&str, String)]) -> Result<T> {
        self.send(self.http.get(self.url(path)).query(query))
    }

    fn post<T: DeserializeOwned, B: Serialize>(&self, path: &str, body: &B) -> Result<T> {
        self.send(self.http.post(self.url(path)).json(body))
    }
}

// ------------------------------------------------------------------------ job

/// Job commands.
#[derive(Subcommand)]
pub enum JobCommand {
    /// Submit a job: `foresight job submit -n 4 -t 1h -- ./simulate --steps 10`. Prints its id.
    Submit(SubmitOpts),
    /// List jobs (your own; all for administrators).
    List(ListOpts),
    /// Show one job.
    Show(IdOpts),
    /// Cancel a job.
    Cancel(IdOpts),
    /// Hold a job that has not started.
    Hold(IdOpts),
    /// Release a held job.
    Release(IdOpts),
    /// Suspend a running job.
    Suspend(IdOpts),
    /// Resume a suspended job.
    Resume(IdOpts),
    /// Put a job back in the queue (a running one is stopped and runs again).
    Requeue(IdOpts),
    /// Why has a job not started yet?
    Explain(IdOpts),
}

/// Options of `job submit`.
#[derive(Args)]
pub struct SubmitOpts {
    /// Processors.
    #[arg(short = 'n', long, default_value_t = 1)]
    procs: u32,
    /// Walltime: 90, 15m, 1h30m, 2d, 01:30:00, 1-12:00:00.
    #[arg(short = 't', long, default_value = "1h")]
    time: String,
    /// Max price per processor-second.
    #[arg(long)]
    price: Option<f64>,
    /// Run as a local job of this cluster instead of planning it over the grid.
    #[arg(long)]
    cluster: Option<String>,
    /// Run inside this reservation.
    #[arg(long)]
    reservation: Option<u64>,
    /// With --reservation: may start before it if processors are free.
    #[arg(long)]
    allow_early_start: bool,
    /// Never split over several clusters.
    #[arg(long)]
    no_coallocation: bool,
    /// A name.
    #[arg(long)]
    name: Option<String>,
    /// Hold it at submission.
    #[arg(long)]
    hold: bool,
    /// Account (for reservation ACLs).
    #[arg(long)]
    account: Option<String>,
    /// Working directory [default: the current one].
    #[arg(long)]
    chdir: Option<PathBuf>,
    /// Extra environment, KEY=VALUE (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE")]
    env: Vec<String>,
    #[command(flatten)]
    out: OutputOpt,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// Options of `job list`.
#[derive(Args)]
pub struct ListOpts {
    /// Only jobs in this state.
    #[arg(long)]
    state: Option<String>,
    /// Only this user's jobs (administrators).
    #[arg(long)]
    user: Option<String>,
    /// At most this many, the newest.
    #[arg(long, default_value_t = 1000)]
    limit: usize,
    #[command(flatten)]
    out: OutputOpt,
}

/// A job id.
#[derive(Args)]
pub struct IdOpts {
    /// The id.
    id: u64,
    #[command(flatten)]
    out: OutputOpt,
}

/// Runs a job command.
pub fn job(conn: &Connection, cmd: JobCommand) -> Result<()> {
    let c = Client::new(conn)?;
    match cmd {
        JobCommand::Submit(o) => {
            walltime_ok(&o.time)?;
            let mut env = BTreeMap::new();
            for kv in &o.env {
                let (k, v) = kv
                    .split_once('=')
                    .ok_or_else(|| bad(format!("--env {kv:?}: expected KEY=VALUE")))?;
                env.insert(k.to_string(), v.to_string());
            }
            let cwd = match o.chdir {
                Some(d) => d,
                None => std::env::current_dir()?,
            };
            let cwd = std::path::absolute(&cwd)?;
            let req = SubmitJob {
                name: o.name,
                procs: o.procs,
                walltime: Walltime::Text(o.time),
                price: o.price,
                cluster: o.cluster,
                reservation: o.reservation,
                allow_early_start: o.allow_early_start,
                co_allocate: !o.no_coallocation,
                command: o.command,
                env,
                cwd: Some(cwd.display().to_string()),
                hold: o.hold,
                group: None,
                account: o.account,
                class: None,
                qos: None,
            };
            let s: Submitted = c.post("/jobs", &req)?;
            match o.out.output {
                Output::Json => println!("{}", serde_json::to_string(&s)?),
                Output::Table => println!("{}", s.id),
            }
        }
        JobCommand::List(o) => {
            let mut q = vec![("limit", o.limit.to_string())];
            if let Some(s) = o.state {
                q.push(("state", s));
            }
            if let Some(u) = o.user {
                q.push(("user", u));
            }
            let jobs: Vec<JobView> = c.get("/jobs", &q)?;
            match o.out.output {
                Output::Json => println!("{}", serde_json::to_string_pretty(&jobs)?),
                Output::Table => print!("{}", jobs_table(&jobs)),
            }
        }
        JobCommand::Show(o) => {
            let j: JobView = c.get(&format!("/jobs/{}", o.id), &[])?;
            show_job(&j, o.out.output)?;
        }
        JobCommand::Explain(o) => {
            let e: Explanation = c.get(&format!("/jobs/{}/explain", o.id), &[])?;
            match o.out.output {
                Output::Json => println!("{}", serde_json::to_string_pretty(&e)?),
                Output::Table => {
                    println!("job {}: {}", e.id, e.state);
                    for r in &e.reasons {
                        println!("  - {r}");
                    }
                    if let Some(p) = e.planned_start {
                        println!("  planned start: {}", when(Some(p)));
                    }
                }
            }
        }
        JobCommand::Cancel(o) => act(&c, o, "cancel")?,
        JobCommand::Hold(o) => act(&c, o, "hold")?,
        JobCommand::Release(o) => act(&c, o, "release")?,
        JobCommand::Suspend(o) => act(&c, o, "suspend")?,
        JobCommand::Resume(o) => act(&c, o, "resume")?,
        JobCommand::Requeue(o) => act(&c, o, "requeue")?,
    }
    Ok(())
}

/// Input refused before asking the server: exit code 2, like a refusal by the server.
fn bad(message: String) -> anyhow::Error {
    super::plan::BadInput(message).into()
}

fn walltime_ok(text: &str) -> Result<()> {
    let secs = parse_duration(text).map_err(|e| bad(format!("-t/--time: {e}")))?;
    if secs <= 0 {
        return Err(bad(format!("-t/--time: must be positive, got {text:?}")));
    }
    Ok(())
}

fn act(c: &Client, o: IdOpts, verb: &str) -> Result<()> {
    let j: JobView = c.post(&format!("/jobs/{}/{verb}", o.id), &serde_json::json!({}))?;
    match o.out.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&j)?),
        Output::Table => println!("job {}: {}", j.id, describe_state(&j)),
    }
    Ok(())
}

fn describe_state(j: &JobView) -> String {
    let mut s = j.state.to_string();
    if j.held {
        s.push_str(" (held)");
    }
    if j.suspended {
        s.push_str(" (suspended)");
    }
    s
}

/// A time for people: UTC, to the second; `-` when absent.
pub fn when(t: Option<i64>) -> String {
    match t {
        Some(t) if t >= 0 => humantime::format_rfc3339_seconds(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(t as u64),
        )
        .to_string()
        .replace('T', " ")
        .trim_end_matches('Z')
        .to_string(),
        _ => "-".into(),
    }
}

/// Rows under a header, columns padded to their widest cell.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut width: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, cell) in r.iter().enumerate() {
            width[i] = width[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  ", w = width[i]));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    for r in rows {
        out.push_str(&line(r.clone()));
    }
    out
}

/// The `job list` table.
pub fn jobs_table(jobs: &[JobView]) -> String {
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .map(|j| {
            vec![
                j.id.to_string(),
                j.user.clone(),
                j.name.clone().unwrap_or_else(|| "-".into()),
                describe_state(j),
                j.procs.to_string(),
                format_duration(j.walltime),
                j.cluster.clone().unwrap_or_else(|| "-".into()),
                when(j.planned_start),
                when(j.started_at),
                j.exit_code.map_or("-".into(), |c| c.to_string()),
            ]
        })
        .collect();
    table(
        &[
            "ID", "USER", "NAME", "STATE", "PROCS", "TIME", "CLUSTER", "PLANNED", "STARTED", "EXIT",
        ],
        &rows,
    )
}

fn show_job(j: &JobView, out: Output) -> Result<()> {
    match out {
        Output::Json => println!("{}", serde_json::to_string_pretty(j)?),
        Output::Table => print!("{}", job_details(j)),
    }
    Ok(())
}

/// The `job show` text.
pub fn job_details(j: &JobView) -> String {
    let mut s = String::new();
    let mut kv = |k: &str, v: String| s.push_str(&format!("{k:<14}{v}\n"));
    kv("id", j.id.to_string());
    kv("name", j.name.clone().unwrap_or_else(|| "-".into()));
    kv("user", j.user.clone());
    kv("state", describe_state(j));
    kv("procs", j.procs.to_string());
    kv("walltime", format_duration(j.walltime));
    kv("price", j.price.map_or("-".into(), |p| p.to_string()));
    kv(
        "placement",
        if j.parts.is_empty() {
            j.cluster.clone().unwrap_or_else(|| "-".into())
        } else {
            j.parts
                .iter()
                .map(|p| format!("{}:{}", p.cluster, p.procs))
                .collect::<Vec<_>>()
                .join(" + ")
        },
    );
    kv("submitted", when(Some(j.submitted_at)));
    kv("planned", when(j.planned_start));
    kv("started", when(j.started_at));
    kv("ended", when(j.ended_at));
    kv(
        "exit code",
        j.exit_code.map_or("-".into(), |c| c.to_string()),
    );
    if let Some(sig) = j.signal {
        kv("signal", sig.to_string());
    }
    kv("charged", format!("{:.2}", j.charged));
    if let Some(r) = &j.reason {
        kv("reason", r.clone());
    }
    kv("command", j.command.join(" "));
    if let Some(p) = &j.stdout {
        kv("stdout", p.clone());
    }
    if let Some(p) = &j.stderr {
        kv("stderr", p.clone());
    }
    s
}

// ------------------------------------------------------------------------ estimate

/// Options of `estimate`.
#[derive(Args)]
pub struct EstimateOpts {
    /// Processors.
    #[arg(short = 'n', long, default_value_t = 1)]
    procs: u32,
    /// Walltime.
    #[arg(short = 't', long, default_value = "1h")]
    time: String,
    /// Max price per processor-second.
    #[arg(long)]
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
    let c = Client::new(conn)?;
    let e: Estimate = c.post(
        "/estimate",
        &EstimateRequest {
            procs: o.procs,
            walltime: Walltime::Text(o.time),
            price: o.price,
            co_allocate: !o.no_coallocation,
        },
    )?;
    match o.out.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&e)?),
        Output::Table => {
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
            print!("{}", table(&["CLUSTER", "EARLIEST START", "NOTE"], &rows));
            match e.earliest {
                Some(t) => println!(
                    "grid: {} on {} (cost {:.2})",
                    when(Some(t)),
                    e.parts
                        .iter()
                        .map(|p| format!("{}:{}", p.cluster, p.procs))
                        .collect::<Vec<_>>()
                        .join(" + "),
                    e.cost.unwrap_or(0.0)
                ),
                None => println!("grid: no start within the planning horizon"),
            }
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------ reservations

/// Reservation commands.
#[derive(Subcommand)]
// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
pub enum ReservationCommand {
    /// Reserve processors of a cluster for a window (administrators).
    Create(CreateResOpts),
    /// List reservations.
    List(OutOnly),
    /// Show one.
    Show(IdOpts),
    /// Commit a tentative reservation.
    Commit(IdOpts),
    /// Release a reservation.
    Release(IdOpts),
}

/// Only `-o`.
#[derive(Args)]
pub struct OutOnly {
    #[command(flatten)]
    out: OutputOpt,
}

/// Options of `reservation create`.
#[derive(Args)]
pub struct CreateResOpts {
    /// Cluster.
    #[arg(long)]
    cluster: String,
    /// How many processors (any of them).
    #[arg(short = 'n', long, required_unless_present = "processors")]
    procs: Option<u32>,
    /// These processors instead (indices within the cluster, e.g. `0,1,6-7`).
    #[arg(long, value_parser = parse_processor_list, conflicts_with = "procs")]
    processors: Option<ProcessorList>,
    /// Start: seconds since the epoch, or `+DURATION` from now (e.g. +10m) [default: now].
    #[arg(long)]
    start: Option<String>,
    /// Length.
    #[arg(short = 't', long)]
    duration: String,
    /// Users admitted (repeatable).
    #[arg(long = "user")]
    users: Vec<String>,
    /// Accounts admitted (repeatable).
    #[arg(long = "account")]
    accounts: Vec<String>,
    /// Groups admitted (repeatable).
    #[arg(long = "group")]
    groups: Vec<String>,
    /// The one job admitted.
    #[arg(long)]
    job: Option<u64>,
    /// Make it tentative for this long (two-phase); commit it with `reservation commit`.
    #[arg(long)]
    ttl: Option<String>,
    #[command(flatten)]
    out: OutputOpt,
}

/// Processor indices given as `0,1,6-7`.
#[derive(Clone, Debug)]
pub struct ProcessorList(Vec<u32>);

/// `0,1,6-7` → [0, 1, 6, 7].
fn parse_processor_list(s: &str) -> std::result::Result<ProcessorList, String> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim) {
        let number = |x: &str| {
            x.parse::<u32>()
                .map_err(|_| format!("{x:?} is not a processor index (use e.g. 0,1,6-7)"))
        };
        match item.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if b < a {
                    return Err(format!("range {item:?} runs backwards"));
                }
                out.extend(a..=b);
            }
            None => out.push(number(item)?),
        }
    }
    Ok(ProcessorList(out))
}

/// Runs a reservation command.
pub fn reservation(conn: &Connection, cmd: ReservationCommand) -> Result<()> {
    let c = Client::new(conn)?;
    let print = |rs: &[ReservationView], out: Output| -> Result<()> {
        match out {
            Output::Json => println!("{}", serde_json::to_string_pretty(rs)?),
            Output::Table => print!("{}", reservations_table(rs)),
        }
        Ok(())
    };
    let print_one = |r: &ReservationView, out: Output| -> Result<()> {
        match out {
            Output::Json => println!("{}", serde_json::to_string_pretty(r)?),
            Output::Table => print!("{}", reservations_table(std::slice::from_ref(r))),
        }
        Ok(())
    };
    match cmd {
        ReservationCommand::Create(o) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_secs() as i64;
            let start = match o.start.as_deref() {
                None => None,
                Some(s) if s.starts_with('+') => {
                    Some(now + parse_duration(&s[1..]).map_err(|e| bad(format!("--start: {e}")))?)
                }
                Some(s) => Some(s.parse::<i64>().map_err(|_| {
                    bad(format!(
                        "--start: {s:?} is neither epoch seconds nor +DURATION"
                    ))
                })?),
            };
            let ttl = o
                .ttl
                .as_deref()
                .map(|t| parse_duration(t).map_err(|e| bad(format!("--ttl: {e}"))))
                .transpose()?;
            let r: ReservationView = c.post(
                "/reservations",
                &CreateReservation {
                    cluster: o.cluster,
                    procs: o.procs.unwrap_or(0),
                    processors: o.processors.map(|p| p.0).unwrap_or_default(),
                    start,
                    end: None,
                    duration: Some(Walltime::Text(o.duration)),
                    acl: AclSpec {
                        users: o.users,
                        groups: o.groups,
                        accounts: o.accounts,
                        classes: vec![],
                        qos: vec![],
                        job: o.job,
                    },
                    ttl,
                },
            )?;
            match o.out.output {
                Output::Json => println!("{}", serde_json::to_string_pretty(&r)?),
                Output::Table => println!("{}", r.id),
            }
        }
        ReservationCommand::List(o) => {
            let rs: Vec<ReservationView> = c.get("/reservations", &[])?;
            print(&rs, o.out.output)?;
        }
        ReservationCommand::Show(o) => {
            let r: ReservationView = c.get(&format!("/reservations/{}", o.id), &[])?;
            print_one(&r, o.out.output)?;
        }
        ReservationCommand::Commit(o) => {
            let r: ReservationView = c.post(
                &format!("/reservations/{}/commit", o.id),
                &serde_json::json!({}),
            )?;
            print_one(&r, o.out.output)?;
        }
        ReservationCommand::Release(o) => {
            let r: ReservationView = c.post(
                &format!("/reservations/{}/release", o.id),
                &serde_json::json!({}),
            )?;
            print_one(&r, o.out.output)?;
        }
    }
    Ok(())
}

fn reservations_table(rs: &[ReservationView]) -> String {
    let rows: Vec<Vec<String>> = rs
        .iter()
        .map(|r| {
            let mut acl = Vec::new();
            if !r.acl.users.is_empty() {
                acl.push(format!("users={}", r.acl.users.join(",")));
            }
            if !r.acl.accounts.is_empty() {
                acl.push(format!("accounts={}", r.acl.accounts.join(",")));
            }
            if !r.acl.groups.is_empty() {
                acl.push(format!("groups={}", r.acl.groups.join(",")));
            }
            if let Some(j) = r.acl.job {
                acl.push(format!("job={j}"));
            }
            vec![
                r.id.to_string(),
                r.kind.clone(),
                r.cluster.clone(),
                if r.processors.is_empty() {
                    r.procs.to_string()
                } else {
                    format!(
                        "{} ({})",
                        r.procs,
                        r.processors
                            .iter()
                            .map(u32::to_string)
                            .collect::<Vec<_>>()
                            .join(",")
                    )
                },
                when(Some(r.start)),
                when(Some(r.end)),
                r.state.as_str().to_string(),
                if acl.is_empty() {
                    "nobody".into()
                } else {
                    acl.join(" ")
                },
            ]
        })
        .collect();
    table(
        &[
            "ID", "KIND", "CLUSTER", "PROCS", "START", "END", "STATE", "ACL",
        ],
        &rows,
    )
}

// ------------------------------------------------------------------------ clusters, plan

/// Runs `cluster list`.
pub fn cluster_list(conn: &Connection, o: OutOnly) -> Result<()> {
    let c = Client::new(conn)?;
    let cs: Vec<ClusterInfo> = c.get("/clusters", &[])?;
    match o.out.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&cs)?),
        Output::Table => {
            let rows: Vec<Vec<String>> = cs
                .iter()
                .map(|c| {
                    vec![
                        c.name.clone(),
                        c.kind.clone(),
                        c.state.clone(),
                        c.procs.to_string(),
                        c.busy.to_string(),
                        c.running.to_string(),
                        c.queued.to_string(),
                        c.policy.clone(),
                        c.tariff.to_string(),
                    ]
                })
                .collect();
            print!(
                "{}",
                table(
                    &[
                        "NAME", "KIND", "STATE", "PROCS", "BUSY", "RUNNING", "QUEUED", "POLICY",
                        "TARIFF"
                    ],
                    &rows
                )
            );
            for c in cs.iter().filter(|c| c.reason.is_some()) {
                println!(
                    "{} is {}: {}",
                    c.name,
                    c.state,
                    c.reason.as_deref().unwrap_or("")
                );
            }
        }
    }
    Ok(())
}

/// Cluster commands.
#[derive(Subcommand)]
pub enum ClusterCommand {
    /// List clusters with their load.
    List(OutOnly),
}

/// Options of `plan show`.
#[derive(Args)]
pub struct PlanShowOpts {
    /// One cluster only.
    #[arg(long)]
    cluster: Option<String>,
    /// Window start: epoch seconds or +DURATION [default: now].
    #[arg(long)]
    from: Option<String>,
    /// Window end: epoch seconds or +DURATION from now [default: one hour after --from].
    #[arg(long)]
    to: Option<String>,
    /// Chart width in characters.
    #[arg(long, default_value_t = 72)]
    width: usize,
    #[command(flatten)]
    out: OutputOpt,
}

fn moment(s: &str, now: i64, what: &str) -> Result<i64> {
    match s.strip_prefix('+') {
        Some(d) => Ok(now + parse_duration(d).map_err(|e| bad(format!("--{what}: {e}")))?),
        None => s.parse().map_err(|_| {
            bad(format!(
                "--{what}: {s:?} is neither epoch seconds nor +DURATION"
            ))
        }),
    }
}

/// Runs `plan show`: a text Gantt chart per cluster.
pub fn plan_show(conn: &Connection, o: PlanShowOpts) -> Result<()> {
    let c = Client::new(conn)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs() as i64;
    let mut q = Vec::new();
    if let Some(cl) = &o.cluster {
        q.push(("cluster", cl.clone()));
    }
    if let Some(f) = &o.from {
        q.push(("from", moment(f, now, "from")?.to_string()));
    }
    if let Some(t) = &o.to {
        q.push(("to", moment(t, now, "to")?.to_string()));
    }
    let plans: Vec<ClusterPlan> = c.get("/plan", &q)?;
    match o.out.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&plans)?),
        Output::Table => {
            for p in &plans {
                print!("{}", gantt(p, o.width.clamp(10, 400)));
            }
        }
    }
    Ok(())
}

/// The chart of one cluster's plan: one row per processor, one column per time step;
/// `.` free, `#` running, `p` a queued local job's forecast, `R` reserved.
pub fn gantt(p: &ClusterPlan, width: usize) -> String {
    let span = (p.to - p.from).max(1);
    let step = (span as f64 / width as f64).max(1.0);
    let mut out = format!(
        "{}: {} processors, {} .. {} ({} per column)\n",
        p.cluster,
        p.procs,
        when(Some(p.from)),
        when(Some(p.to)),
        format_duration(step.ceil() as i64)
    );
    for proc in 0..p.procs {
        let mut row = vec!['.'; width];
        for s in p.slots.iter().filter(|s| s.processor == proc) {
            let mark = match s.occupant.as_str() {
                "running" => '#',
                "planned" => 'p',
                "held" => 'R',
                _ => continue,
            };
            let a = ((s.start - p.from) as f64 / step).floor() as usize;
            let b = (((s.end - p.from) as f64 / step).ceil() as usize).min(width);
            for cell in row.iter_mut().take(b).skip(a.min(width)) {
                *cell = mark;
            }
        }
        out.push_str(&format!(
            "p{proc:<4}|{}|\n",
            row.into_iter().collect::<String>()
        ));
    }
    out.push_str("      . free   # running   p queued local job (forecast)   R reserved\n");
    out
}

// ------------------------------------------------------------------------ users

/// User commands (administrators).
#[derive(Subcommand)]
pub enum UserCommand {
    /// Create a user; prints their token once.
    Add(AddUserOpts),
    /// List users and budgets.
    List(OutOnly),
    /// Set or top up a budget: `--set 1000`, `--set unlimited`, `--add 50`.
    Budget(BudgetOpts),
    /// Change a user: `--unix-user ACCOUNT` (the Unix account their local jobs run as when
    /// the server is root), `--default-unix-user` (back to the server's default).
    Modify(ModifyUserOpts),
    /// Who am I?
    Whoami(OutOnly),
}

/// Options of `user add`.
#[derive(Args)]
pub struct AddUserOpts {
    /// Name.
    name: String,
    /// Budget [default: unlimited].
    #[arg(long)]
    budget: Option<f64>,
    /// Make an administrator.
    #[arg(long)]
    admin: bool,
    /// The Unix account their local jobs run as when the server is root [default: the
    /// server's `[unix_user]` table, else the account of the same name]. Only an account
    /// chosen here or in the table may be root.
    #[arg(long, value_name = "ACCOUNT")]
    unix_user: Option<String>,
    #[command(flatten)]
    out: OutputOpt,
}

/// Options of `user modify`.
#[derive(Args)]
pub struct ModifyUserOpts {
    /// Name.
    name: String,
    /// The Unix account their local jobs run as when the server is root.
    #[arg(long, value_name = "ACCOUNT", conflicts_with = "default_unix_user")]
    unix_user: Option<String>,
    /// Forget the account set with `--unix-user`: the server's default applies again.
    #[arg(long)]
    default_unix_user: bool,
    #[command(flatten)]
    out: OutputOpt,
}

/// Options of `user budget`.
#[derive(Args)]
pub struct BudgetOpts {
    /// Name.
    name: String,
    /// New budget, or `unlimited`.
    #[arg(long)]
    set: Option<String>,
    /// Amount to add (negative to take away).
    #[arg(long, allow_hyphen_values = true)]
    add: Option<f64>,
    #[command(flatten)]
    out: OutputOpt,
}

/// Runs a user command.
pub fn user(conn: &Connection, cmd: UserCommand) -> Result<()> {
    let c = Client::new(conn)?;
    let users_table = |us: &[UserView]| {
        let rows: Vec<Vec<String>> = us
            .iter()
            .map(|u| {
                vec![
                    u.name.clone(),
                    if u.admin { "admin" } else { "user" }.into(),
                    u.budget.map_or("unlimited".into(), |b| format!("{b:.2}")),
                    format!("{:.2}", u.spent),
                ]
            })
            .collect();
        table(&["NAME", "ROLE", "BUDGET", "SPENT"], &rows)
    };
    match cmd {
        UserCommand::Add(o) => {
            let u: CreatedUser = c.post(
                "/users",
                &CreateUser {
                    name: o.name,
                    admin: o.admin,
                    budget: o.budget,
                    unix_user: o.unix_user,
                },
            )?;
            match o.out.output {
                Output::Json => println!("{}", serde_json::to_string_pretty(&u)?),
                Output::Table => println!("{}", u.token),
            }
        }
        UserCommand::List(o) => {
            let us: Vec<UserView> = c.get("/users", &[])?;
            match o.out.output {
                Output::Json => println!("{}", serde_json::to_string_pretty(&us)?),
                Output::Table => print!("{}", users_table(&us)),
            }
        }
        UserCommand::Budget(o) => {
            let set = match o.set.as_deref() {
                None => None,
                Some("unlimited") => Some(None),
                Some(s) => Some(Some(s.parse::<f64>().map_err(|_| {
                    bad(format!("--set {s:?}: expected a number or 'unlimited'"))
                })?)),
            };
            if set.is_none() && o.add.is_none() {
                return Err(bad("give --set or --add".into()));
            }
            let u: UserView = c.post(
                &format!("/users/{}/budget", o.name),
                &BudgetChange { set, add: o.add },
            )?;
            match o.out.output {
                Output::Json => println!("{}", serde_json::to_string_pretty(&u)?),
                Output::Table => print!("{}", users_table(&[u])),
            }
        }
        UserCommand::Modify(o) => {
            if o.unix_user.is_none() && !o.default_unix_user {
                return Err(bad("give --unix-user or --default-unix-user".into()));
            }
            let u: UserView = c.post(
                &format!("/users/{}/unix-user", o.name),
                &UnixUserChange {
                    unix_user: o.unix_user,
                },
            )?;
            match o.out.output {
                Output::Json => println!("{}", serde_json::to_string_pretty(&u)?),
                Output::Table => print!("{}", users_table(&[u])),
            }
        }
        UserCommand::Whoami(o) => {
            let u: UserView = c.get("/whoami", &[])?;
            match o.out.output {
                Output::Json => println!("{}", serde_json::to_string_pretty(&u)?),
                Output::Table => print!("{}", users_table(&[u])),
            }
        }
    }
    Ok(())
}
