//! The service's commands: `job`, `estimate`, `reservation`, `cluster`, `plan show`, `user`.
//! They talk to the server's REST API; without `--server` they find the server of a data
//! directory (`--data-dir`, `FORESIGHT_DATA_DIR`, else the default one) by its
//! `server.url`, and its admin token.

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use foresight_api::*;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Where the server is and who we are: on the commands that talk to a server only.
#[derive(Args, Clone, Debug, Default)]
pub struct Connection {
    // Listed after every command's own options (display_order), whatever their number.
    /// Server URL [default: the server of the data directory].
    #[arg(
        long,
        global = true,
        env = "FORESIGHT_SERVER",
        value_name = "URL",
        display_order = 900
    )]
    pub server: Option<String>,
    /// Bearer token [default: the admin token of the data directory].
    #[arg(
        long,
        global = true,
        env = "FORESIGHT_TOKEN",
        hide_env_values = true,
        display_order = 901
    )]
    pub token: Option<String>,
    /// The data directory of a server on this machine (as given to `server start
    /// --data-dir`): its `server.url` and `admin.token` [default: ~/.local/share/foresight].
    #[arg(
        long,
        global = true,
        env = "FORESIGHT_DATA_DIR",
        value_name = "DIR",
        display_order = 902
    )]
    pub data_dir: Option<PathBuf>,
    /// Also trust the certificate authorities in this PEM file for an https:// server (a
    /// private CA) [default: the system's].
    #[arg(
        long,
        global = true,
        env = "FORESIGHT_CACERT",
        value_name = "FILE",
        display_order = 903
    )]
    pub cacert: Option<PathBuf>,
    /// Send the token over plain http:// to a server that is not on this machine (anyone on
    /// the network path can read it). Certificates of https:// servers are checked anyway.
    #[arg(long, global = true, env = "FORESIGHT_INSECURE", display_order = 904)]
    pub insecure: bool,
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

/// A connection to the server's REST API.
pub(crate) struct Client {
    pub(crate) http: reqwest::blocking::Client,
    base: String,
    token: String,
}

impl Client {
    pub(crate) fn new(conn: &Connection) -> Result<Client> {
        let data_dir = conn
            .data_dir
            .clone()
            .unwrap_or_else(foresight_daemon::config::default_data_dir);
        let base = match &conn.server {
            Some(s) => s.trim_end_matches('/').to_string(),
            None => {
                let path = data_dir.join("server.url");
                match foresight_sim::input::read_text(&path) {
                    Ok(s) if !s.trim().is_empty() => s.trim().to_string(),
                    _ => anyhow::bail!(
                        "no server found: {} does not name one. Give --server URL (or set \
                         FORESIGHT_SERVER) for a server anywhere; give --data-dir DIR (or set \
                         FORESIGHT_DATA_DIR) for a server on this machine started with \
                         `foresight server start --data-dir DIR`; or start one here with \
                         `foresight server start`",
                        path.display()
                    ),
                }
            }
        };
        let token = match &conn.token {
            Some(t) => t.clone(),
            None => {
                let path = data_dir.join("admin.token");
                foresight_sim::input::read_text(&path)
                    .map(|s| s.trim().to_string())
                    .with_context(|| {
                        format!(
                            "no --token given and {} is not readable: give --token (or set \
                             FORESIGHT_TOKEN)",
                            path.display()
                        )
                    })?
            }
        };
        check_transport(&base, conn.insecure)?;
        let mut builder = reqwest::blocking::Client::builder()
            .use_rustls_tls()
            .https_only(!base.starts_with("http://"))
            .timeout(std::time::Duration::from_secs(60));
        if let Some(path) = &conn.cacert {
            let pem = foresight_sim::input::read_bytes(path, foresight_sim::input::MAX_TEXT_BYTES)
                .with_context(|| format!("--cacert {}: cannot read it", path.display()))?;
            let certs: Vec<rustls::pki_types::CertificateDer<'static>> = {
                use rustls::pki_types::pem::PemObject;
                rustls::pki_types::CertificateDer::pem_slice_iter(&pem)
                    .collect::<Result<_, _>>()
                    .with_context(|| format!("--cacert {}: not PEM certificates", path.display()))?
            };
            if certs.is_empty() {
                anyhow::bail!(
                    "--cacert {}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it",
                    path.display()
                );
            }
            // Trusted as roots and as the server's own certificate, pinned (a self-signed one).
            builder = builder.use_preconfigured_tls(super::cacert::client_config(certs)?);
        }
        let http = builder.build()?;
        Ok(Client { http, base, token })
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{}{}", self.base, API_PREFIX, path)
    }

    /// The answer's body, or the server's refusal as the error.
    pub(crate) fn send_raw(&self, req: reqwest::blocking::RequestBuilder) -> Result<Vec<u8>> {
        let resp = req
            .bearer_auth(&self.token)
            .send()
            .with_context(|| format!("cannot reach the server at {}", self.base))?;
        let status = resp.status();
        let bytes = resp.bytes()?.to_vec();
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let mut body: ApiError = serde_json::from_str(&text).unwrap_or(ApiError {
                code: "http".into(),
                field: None,
                message: text,
            });
            body.message = printable(&body.message);
            body.field = body.field.as_deref().map(printable);
            return Err(ServerRefused {
                status: status.as_u16(),
                body,
            }
            .into());
        }
        Ok(bytes)
    }

    fn send<T: DeserializeOwned>(&self, req: reqwest::blocking::RequestBuilder) -> Result<T> {
        let bytes = self.send_raw(req)?;
        serde_json::from_slice(&bytes)
            .with_context(|| format!("unexpected answer: {}", String::from_utf8_lossy(&bytes)))
    }

    pub(crate) fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<T> {
        self.send(self.http.get(self.url(path)).query(query))
    }

    pub(crate) fn post<T: DeserializeOwned, B: Serialize>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T> {
        self.send(self.http.post(self.url(path)).json(body))
    }

    fn delete<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        self.send(self.http.delete(self.url(path)))
    }
}

/// Refuses a server URL the token must not be sent to: a scheme other than http(s), or plain
/// http to anything but this machine's loopback unless `insecure`.
fn check_transport(base: &str, insecure: bool) -> Result<()> {
    let url = reqwest::Url::parse(base)
        .with_context(|| format!("server URL {base:?} is not a URL (e.g. https://host:8642)"))?;
    match url.scheme() {
        "https" => Ok(()),
        "http" => {
            let host = url.host_str().unwrap_or_default();
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let loopback = host.eq_ignore_ascii_case("localhost")
                || host
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback());
            if loopback || insecure {
                Ok(())
            } else {
                anyhow::bail!(
                    "refusing to send the token over plain http:// to {base}: it is not this \
                     machine's loopback, so anyone on the network path could read the token and \
                     act as you. Use an https:// server (`server start --tls-cert FILE \
                     --tls-key FILE`), or give --insecure (FORESIGHT_INSECURE=true) if the \
                     network is trusted"
                )
            }
        }
        other => anyhow::bail!("server URL {base}: scheme {other:?} is not http or https"),
    }
}

// ------------------------------------------------------------------------ job

/// Job commands.
#[derive(Subcommand)]
// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
pub enum JobCommand {
    /// Submit a job: `foresight job submit -n 4 -t 1h -- ./simulate --steps 10`. Prints its id.
    Submit(SubmitOpts),
    /// List jobs (your own; all for administrators).
    List(ListOpts),
    /// Show one job.
    Show(JobIdOpts),
    /// Cancel a job.
    Cancel(JobIdOpts),
    /// Hold a job that has not started.
    Hold(JobIdOpts),
    /// Release a held job.
    Release(JobIdOpts),
    /// Suspend a running job.
    Suspend(JobIdOpts),
    /// Resume a suspended job.
    Resume(JobIdOpts),
    /// Put a job back in the queue (a running one is stopped and runs again).
    Requeue(JobIdOpts),
    /// Why has a job not started yet?
    Explain(JobIdOpts),
    /// Print a job's output (standard output, or --stderr), from the server.
    Cat(CatOpts),
    /// Print the end of a job's output; with -f, follow it as the job writes, until it ends.
    Tail(crate::commands::tail::TailOpts),
    /// Finished jobs, as sacct: start, end, elapsed, exit code or signal, charge, per part.
    History(crate::commands::accounting::HistoryOpts),
    /// Wait until jobs end; the exit code is the job's (of the first that did not complete:
    /// its exit code, 128 + its signal, else 1), as `hq job wait`.
    Wait(WaitOpts),
}

/// Options of `job cat`.
#[derive(Args)]
pub struct CatOpts {
    /// The job (ID, or ARRAY_TASK for a task of an array job).
    id: JobRef,
    /// Standard error instead of standard output.
    #[arg(long)]
    stderr: bool,
    /// The part of a co-allocated job (0, 1, …).
    #[arg(long, default_value_t = 0)]
    part: usize,
}

/// Options of `job wait`.
#[derive(Args)]
pub struct WaitOpts {
    /// The jobs.
    #[arg(required = true, value_name = "ID")]
    ids: Vec<u64>,
    #[command(flatten)]
    out: OutputOpt,
}

/// Options of `job submit`.
#[derive(Args)]
pub struct SubmitOpts {
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
    /// Run as a local job of this cluster instead of planning it over the grid.
    #[arg(long)]
    cluster: Option<String>,
    /// Run inside this reservation.
    #[arg(long)]
    reservation: Option<u64>,
    /// A feature the cluster must offer (installed software, architecture; repeat or join
    /// with commas): only clusters whose `features` have them all are used.
    #[arg(long, value_delimiter = ',', value_name = "FEATURE")]
    requires: Vec<String>,
    /// Licences held for the whole run, NAME:COUNT (`ansys:2`; a bare NAME is one; repeat
    /// or join with commas): the job starts only when its pool has them free.
    #[arg(long, value_delimiter = ',', value_name = "NAME:COUNT")]
    licence: Vec<String>,
    /// The application it runs, for runtime prediction: runs of one application with the
    /// same processors and arguments predict each other (default: the program).
    #[arg(long, value_name = "NAME")]
    app: Option<String>,
    /// An input file, `PATH[@CLUSTER]` (repeat for more): measured at submission, and copied
    /// into the job's working directory before it starts on any cluster other than
    /// CLUSTER, the one holding it (default: where the job is submitted). A relative PATH
    /// is taken from the current directory.
    #[arg(long, value_name = "PATH[@CLUSTER]")]
    input: Vec<String>,
    /// An output file, `PATH[@CLUSTER]` (repeat for more), relative to the working
    /// directory: once the job completes (exit 0), copied from its working directory on the
    /// cluster it ran on to the same PATH under its working directory on CLUSTER (default:
    /// where the job is submitted, or its input's cluster).
    #[arg(long, value_name = "PATH[@CLUSTER]")]
    output_file: Vec<String>,
    /// With --reservation: may start before it if processors are free.
    #[arg(long)]
    allow_early_start: bool,
    /// Never split over several clusters.
    #[arg(long)]
    no_coallocation: bool,
    /// Absolute priority level of a global job: it takes the processors of running global
    /// jobs of lower levels when it cannot start otherwise.
    #[arg(long, default_value_t = 0)]
    priority: u32,
    /// When preempted, kill the job and queue it again instead of suspending it.
    #[arg(long)]
    requeue: bool,
    /// A name.
    #[arg(long)]
    name: Option<String>,
    /// Hold it at submission.
    #[arg(long)]
    hold: bool,
    /// Wait for other jobs, as sbatch: afterok:ID[:ID...], afterany:ID, afternotok:ID,
    /// after:ID, singleton; joined by ',' (all must hold) or '?' (any one). A dependency
    /// that can never hold cancels the job.
    #[arg(short = 'd', long, value_name = "LIST")]
    dependency: Option<String>,
    /// Submit an array of tasks, as sbatch: 0-99, 1,3,5-7, 0-15:4, and %N for at most N
    /// running at once; each task gets FORESIGHT_ARRAY_TASK_ID and runs as ARRAY_TASK.
    #[arg(short = 'a', long, value_name = "INDICES")]
    array: Option<String>,
    /// Account (for reservation ACLs).
    #[arg(long)]
    account: Option<String>,
    /// Working directory [default: the current one].
    #[arg(long)]
    chdir: Option<PathBuf>,
    /// Extra environment, KEY=VALUE (repeatable); applied after --export.
    #[arg(long = "env", value_name = "KEY=VALUE")]
    env: Vec<String>,
    /// Which of this shell's variables the job gets, as sbatch's --export: NONE (the
    /// default: a grid job may run at another site, as HTCondor's getenv = false), ALL, or
    /// NAME[=VALUE] items joined by ',' (after ALL, added to it). FORESIGHT_* variables are
    /// never taken from the shell: the service sets its own, and the token is a credential.
    #[arg(
        long,
        value_name = "ALL|NONE|[ALL,]NAME[=VALUE],...",
        default_value = "NONE"
    )]
    export: String,
    #[command(flatten)]
    out: OutputOpt,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<String>,
}

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
    out: OutputOpt,
}

/// A job id.
#[derive(Args)]
pub struct JobIdOpts {
    /// The job: ID, or ARRAY_TASK (`12_3`) for one task of an array job; an array job's ID
    /// names every task (`cancel 12` cancels the whole array).
    id: JobRef,
    #[command(flatten)]
    out: OutputOpt,
}

/// A reservation id.
#[derive(Args)]
pub struct IdOpts {
    /// The id.
    id: u64,
    #[command(flatten)]
    out: OutputOpt,
}

/// Runs a job command; the process exit code (the job's, for `job wait`).
pub fn job(conn: &Connection, cmd: JobCommand) -> Result<std::process::ExitCode> {
    // Input is checked before looking for a server.
    let mut begin = None;
    let mut licences = BTreeMap::new();
    if let JobCommand::Submit(o) = &cmd {
        walltime_ok(&o.time)?;
        begin = begin_of(o.begin.as_deref())?;
        if let Some(d) = &o.dependency {
            d.parse::<Dependency>()
                .map_err(|e| bad(format!("--dependency: {e}")))?;
        }
        if let Some(a) = &o.array {
            a.parse::<ArraySpec>()
                .map_err(|e| bad(format!("--array: {e}")))?;
        }
        for l in &o.licence {
            let (name, count) = foresight_core::licence::parse_demand(l)
                .map_err(|e| bad(format!("--licence: {e}")))?;
            *licences.entry(name).or_insert(0u32) += count;
        }
    }
    let c = Client::new(conn)?;
    match cmd {
        JobCommand::Submit(o) => {
            let mut env = exported(&o.export, std::env::vars_os())?;
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
            let inputs = o
                .input
                .iter()
                .map(|i| parse_input(i))
                .collect::<Result<Vec<_>, _>>()?;
            let outputs = o
                .output_file
                .iter()
                .map(|f| parse_output(f))
                .collect::<Result<Vec<_>, _>>()?;
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
                dependency: o.dependency,
                array: o.array,
                priority: o.priority,
                requeue: o.requeue,
                begin,
                requires: o.requires,
                licences,
                app: o.app,
                inputs,
                outputs,
            };
            let s: Submitted = c.post("/jobs", &req)?;
            match o.out.output {
                Output::Json => outln!("{}", super::client::json_text(&s, false)?),
                Output::Table => outln!("{}", s.id),
            }
        }
        JobCommand::List(o) => {
            let jobs = list_jobs(&c, &o)?;
            match o.out.output {
                Output::Json => outln!("{}", super::client::json_text(&jobs, true)?),
                Output::Table => out!("{}", jobs_table(&jobs, crate::moment::now())),
            }
        }
        JobCommand::Show(o) => {
            let j: JobView = c.get(&format!("/jobs/{}", o.id), &[])?;
            show_job(&j, o.out.output)?;
        }
        JobCommand::Explain(o) => {
            let e: Explanation = c.get(&format!("/jobs/{}/explain", o.id), &[])?;
            match o.out.output {
                Output::Json => outln!("{}", super::client::json_text(&e, true)?),
                Output::Table => {
                    outln!("job {}: {}", e.id, e.state);
                    let tz = crate::moment::local_zone();
                    for r in &e.reasons {
                        outln!("  - {}", printable(&crate::moment::localize(r, &tz)));
                    }
                    if let Some(p) = e.planned_start.filter(|_| !e.state.is_final()) {
                        outln!("  planned start: {}", when(Some(p)));
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
        JobCommand::Wait(o) => return wait(&c, o),
        JobCommand::Tail(o) => crate::commands::tail::tail(&c, o)?,
        JobCommand::History(o) => crate::commands::accounting::history(&c, o)?,
        JobCommand::Cat(o) => {
            let mut q = vec![("part", o.part.to_string())];
            if o.stderr {
                q.push(("stderr", "true".into()));
            }
            let bytes = c.send_raw(
                c.http
                    .get(c.url(&format!("/jobs/{}/output", o.id)))
                    .query(&q),
            )?;
            std::io::Write::write_all(&mut std::io::stdout().lock(), &bytes)?;
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// How often `job wait` looks.
const WAIT_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// The exit code a finished job gives `job wait`: 0 completed, its own exit code, 128 + the
/// signal that killed it, else 1 (cancelled, or failed without starting).
fn exit_code_of(j: &JobView) -> u8 {
    match (j.state, j.exit_code, j.signal) {
        (JobState::Completed, _, _) => 0,
        (_, _, Some(sig)) => u8::try_from(128 + sig.clamp(0, 127)).unwrap_or(1),
        (_, Some(c), None) if c != 0 => u8::try_from(c.rem_euclid(256)).unwrap_or(1).max(1),
        _ => 1,
    }
}

fn wait(c: &Client, o: WaitOpts) -> Result<std::process::ExitCode> {
    let mut done: BTreeMap<u64, JobView> = BTreeMap::new();
    loop {
        for &id in &o.ids {
            if done.contains_key(&id) {
                continue;
            }
            let j: JobView = c.get(&format!("/jobs/{id}"), &[])?;
            if j.state.is_final() {
                if o.out.output == Output::Table {
                    let how = match (j.exit_code, j.signal) {
                        (_, Some(sig)) => format!(", signal {sig}"),
                        (Some(code), None) => format!(", exit code {code}"),
                        (None, None) => String::new(),
                    };
                    outln!("job {id}: {}{how}", j.state);
                }
                done.insert(id, j);
            }
        }
        if done.len()
            == o.ids
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len()
        {
            break;
        }
        std::thread::sleep(WAIT_POLL);
    }
    let ended: Vec<&JobView> = o.ids.iter().map(|id| &done[id]).collect();
    if o.out.output == Output::Json {
        outln!("{}", super::client::json_text(&ended, true)?);
    }
    let code = ended
        .iter()
        .map(|j| exit_code_of(j))
        .find(|&c| c != 0)
        .unwrap_or(0);
    Ok(std::process::ExitCode::from(code))
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

/// The server's warnings about a change, on stderr.
fn warn_of(warnings: &[String]) {
    for w in warnings {
        eprintln!("warning: {}", printable(w));
    }
}

/// `--price P`: a number, finite (NaN would be sent as `null`, which means the default
/// price); its range is the server's to check.
fn parse_price(s: &str) -> std::result::Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(p) if p.is_finite() => Ok(p),
        _ => Err(format!("{s:?} is not a finite number")),
    }
}

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
fn list_jobs(c: &Client, o: &ListOpts) -> Result<Vec<JobView>> {
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

/// Input refused before asking the server: exit code 2, like a refusal by the server.
pub(crate) fn bad(message: String) -> anyhow::Error {
    super::plan::BadInput(message).into()
}

fn walltime_ok(text: &str) -> Result<()> {
    let secs = parse_duration(text).map_err(|e| bad(format!("-t/--time: {e}")))?;
    if secs <= 0 {
        return Err(bad(format!("-t/--time: must be positive, got {text:?}")));
    }
    Ok(())
}

/// How long `cancel` and `requeue` wait for a running job's processes to end, so that they
/// can print the state it ends in rather than `running`.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

fn act(c: &Client, o: JobIdOpts, verb: &str) -> Result<()> {
    // A running job is stopped by signals: its new state comes once its processes are gone
    // (a requeued one may be running again by then, as a new attempt with a new start).
    let path = format!("/jobs/{}", o.id);
    let stops = matches!(verb, "cancel" | "requeue");
    let before: Option<JobView> = if stops {
        Some(c.get(&path, &[])?)
    } else {
        None
    };
    let asked = crate::moment::now();
    let mut j: JobView = c.post(&format!("{path}/{verb}"), &serde_json::json!({}))?;
    // Starts are whole seconds: a run that started in the second of the request is taken
    // for the new attempt.
    let same_run = |j: &JobView| {
        before.as_ref().is_some_and(|b| {
            b.state == JobState::Running
                && j.state == JobState::Running
                && j.started_at == b.started_at
                && j.started_at.is_some_and(|s| s < asked)
        })
    };
    let deadline = std::time::Instant::now() + STOP_WAIT;
    while same_run(&j) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(25));
        j = c.get(&path, &[])?;
    }
    match o.out.output {
        Output::Json => outln!("{}", super::client::json_text(&j, true)?),
        Output::Table if same_run(&j) => outln!(
            "job {}: running, stopping (asked to {verb}; its processes have not ended yet)",
            o.id
        ),
        Output::Table => outln!("job {}: {}", o.id, describe_state(&j, crate::moment::now())),
    }
    Ok(())
}

fn describe_state(j: &JobView, now: i64) -> String {
    let mut s = j.state.to_string();
    if j.held {
        s.push_str(" (held)");
    }
    // Not eligible yet, by Slurm's reason name.
    if !j.state.is_final() && j.started_at.is_none() && j.begin.is_some_and(|b| b > now) {
        s.push_str(" (BeginTime)");
    }
    // What a job waiting at the gate waits for, by Slurm's reason name.
    if j.state == JobState::Pending && !j.held {
        if let Some(r) = &j.reason {
            for name in ["Dependency", "JobArrayTaskLimit"] {
                if r.starts_with(&format!("{name}:")) {
                    s.push_str(&format!(" ({name})"));
                }
            }
        }
    }
    if j.suspended {
        s.push_str(" (suspended)");
    }
    s
}

pub use crate::moment::when;

/// `text` safe to print on a terminal: control characters (escape sequences that could move
/// the cursor, retitle the window or clear the screen), bidirectional controls (which make a
/// name print as another) and invisible characters are shown escaped, as `\u{1b}` or
/// `\u{202e}`: a server may send anything.
pub fn printable(text: &str) -> String {
    foresight_api::text::escaped(text).into_owned()
}

/// `v` as JSON (`pretty`: indented), every hidden character of its strings written as a
/// `\uXXXX` escape: the same value, safe on a terminal.
pub fn json_text<T: serde::Serialize + ?Sized>(v: &T, pretty: bool) -> Result<String> {
    let text = if pretty {
        serde_json::to_string_pretty(v)?
    } else {
        serde_json::to_string(v)?
    };
    Ok(foresight_api::text::escaped_json(&text).into_owned())
}

/// True when a queued job waits for its cluster's WIKI scheduler (Maui) to start it.
fn waits_for_wiki(j: &JobView) -> bool {
    !j.state.is_final()
        && j.started_at.is_none()
        && j.reason
            .as_deref()
            .is_some_and(|r| r.starts_with(foresight_daemon::state::world::WAITING_FOR_WIKI))
}

/// `text` followed by spaces up to `width` characters (never truncated).
pub fn pad(text: &str, width: usize) -> String {
    let mut s = text.to_string();
    s.extend(std::iter::repeat_n(
        ' ',
        width.saturating_sub(text.chars().count()),
    ));
    s
}

/// Rows under a header, columns padded to their widest cell. Padding is done by hand:
/// `format!`'s width panics from 65536 on, and a name may be that long.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| printable(c)).collect())
        .collect();
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (i, cell) in r.iter().enumerate() {
            width[i] = width[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 < cells.len() {
                s.push_str(&pad(c, width[i] + 2));
            } else {
                s.push_str(c);
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    for r in &rows {
        out.push_str(&line(r.clone()));
    }
    out
}

/// Elapsed time as squeue shows it: `M:SS`, `H:MM:SS`, `D-HH:MM:SS`.
pub fn squeue_time(secs: i64) -> String {
    let s = secs.max(0);
    let (d, h, m, s) = (s / 86_400, s / 3_600 % 24, s / 60 % 60, s % 60);
    match (d, h) {
        (0, 0) => format!("{m}:{s:02}"),
        (0, _) => format!("{h}:{m:02}:{s:02}"),
        _ => format!("{d}-{h:02}:{m:02}:{s:02}"),
    }
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
/// ended), LIMIT its walltime, START when it started or is planned to; EXIT appears when
/// finished jobs are listed.
pub fn jobs_table(jobs: &[JobView], now: i64) -> String {
    let history = jobs.iter().any(|j| j.state.is_final());
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .map(|j| {
            let elapsed = j
                .started_at
                .map_or(0, |s| j.ended_at.unwrap_or(now).saturating_sub(s));
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
                format_duration(j.walltime),
                j.procs.to_string(),
                placement(j),
                match start {
                    None if waits_for_wiki(j) => "by WIKI scheduler".into(),
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
    table(&header, &rows)
}

fn show_job(j: &JobView, out: Output) -> Result<()> {
    match out {
        Output::Json => outln!("{}", super::client::json_text(j, true)?),
        Output::Table => out!("{}", job_details(j)),
    }
    Ok(())
}

/// A prediction and where it came from: `2s (tsafrir: the user's last 2 runs)`.
fn prediction_text(p: &foresight_api::PredictionView) -> String {
    let source = match (p.predictor.as_str(), p.runs) {
        (name, 0) => format!("{name}: no earlier runs, so the walltime"),
        ("tsafrir", n) => format!("tsafrir: mean of the user's last {n} runs"),
        ("app", n) => format!("app: median of the application's last {n} runs"),
        (name, n) => format!("{name}: {n} runs"),
    };
    let corrected = match p.corrections {
        0 => String::new(),
        n => format!(", corrected {n}x: outlived"),
    };
    format!("{} ({source}{corrected})", format_duration(p.seconds))
}

/// The `job show` text.
pub fn job_details(j: &JobView) -> String {
    let mut s = String::new();
    let mut kv = |k: &str, v: String| s.push_str(&format!("{k:<14}{}\n", printable(&v)));
    kv("id", j.display_id());
    if j.array_job_id.is_some() {
        kv("job id", j.id.to_string());
    }
    if let Some(d) = &j.dependency {
        kv("dependency", d.clone());
    }
    kv("name", j.name.clone().unwrap_or_else(|| "-".into()));
    kv("user", j.user.clone());
    kv("state", describe_state(j, crate::moment::now()));
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
    if let Some(b) = j.begin {
        kv("begin", when(Some(b)));
    }
    if !j.requires.is_empty() {
        kv("requires", j.requires.join(","));
    }
    if !j.licences.is_empty() {
        let held: Vec<String> = j.licences.iter().map(|(p, n)| format!("{p}:{n}")).collect();
        kv("licences", held.join(","));
    }
    if let Some(a) = &j.app {
        kv("app", a.clone());
    }
    if let Some(p) = &j.prediction {
        kv("predicted", prediction_text(p));
    }
    for i in &j.inputs {
        let at = i
            .cluster
            .as_deref()
            .map_or(String::new(), |c| format!("@{c}"));
        kv("input", format!("{}{at} ({} bytes)", i.path, i.bytes));
    }
    for st in &j.staging {
        let how = match (&st.ended_at, &st.error) {
            (_, Some(e)) => format!("failed {}: {e}", when(st.ended_at)),
            (Some(_), None) => format!("done {}", when(st.ended_at)),
            (None, None) => "copying".into(),
        };
        kv(
            "staging",
            format!(
                "to {}: began {}, {how}",
                st.cluster,
                when(Some(st.began_at))
            ),
        );
    }
    for o in &j.outputs {
        let at = o
            .cluster
            .as_deref()
            .map_or(String::new(), |c| format!("@{c}"));
        kv("output", format!("{}{at}", o.path));
    }
    if let Some(st) = &j.output_staging {
        let how = match (&st.ended_at, &st.error) {
            (_, Some(e)) => format!("failed {}: {e}", when(st.ended_at)),
            (Some(_), None) => format!("done {}", when(st.ended_at)),
            (None, None) => "copying".into(),
        };
        kv(
            "outputs",
            format!(
                "back to {}: began {}, {how}",
                st.cluster,
                when(Some(st.began_at))
            ),
        );
    }
    // A job that ended without starting has no plan left.
    let ended_unstarted = j.state.is_final() && j.started_at.is_none();
    kv(
        "planned",
        when(j.planned_start.filter(|_| !ended_unstarted)),
    );
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
        kv(
            "reason",
            crate::moment::localize(r, &crate::moment::local_zone()),
        );
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
    match o.out.output {
        Output::Json => outln!("{}", super::client::json_text(&e, true)?),
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
            out!("{}", table(&["CLUSTER", "EARLIEST START", "NOTE"], &rows));
            match e.earliest {
                Some(t) => outln!(
                    "grid: {} on {} (cost {:.2})",
                    when(Some(t)),
                    printable(
                        &e.parts
                            .iter()
                            .map(|p| format!("{}:{}", p.cluster, p.procs))
                            .collect::<Vec<_>>()
                            .join(" + ")
                    ),
                    e.cost.unwrap_or(0.0)
                ),
                None => outln!("grid: no start within the planning horizon"),
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
    /// Start [default: now]: what `sbatch --begin` reads (16:00, now+1hour, now+90 = 90 s,
    /// 2026-11-23, 2026-11-23T16:00, 2026-11-23T16:00:00, local time; or with a zone, 2026-11-23T16:00:00Z),
    /// +DURATION as -t (+10m; +90 = 90 minutes), or seconds since the epoch.
    #[arg(long, value_name = "TIME")]
    start: Option<String>,
    /// Length, as `sbatch --time`: M (a bare number is minutes), M:S, H:M:S, D-H, D-H:M,
    /// D-H:M:S; or with units: 90s, 15m, 1h30m, 2d.
    #[arg(short = 't', long, value_name = "TIME")]
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
    /// Make it tentative for this long (two-phase; same forms as -t, e.g. 5m); commit it with
    /// `reservation commit`.
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
            Output::Json => outln!("{}", super::client::json_text(rs, true)?),
            Output::Table => out!("{}", reservations_table(rs)),
        }
        Ok(())
    };
    let print_one = |r: &ReservationView, out: Output| -> Result<()> {
        match out {
            Output::Json => outln!("{}", super::client::json_text(r, true)?),
            Output::Table => out!("{}", reservations_table(std::slice::from_ref(r))),
        }
        Ok(())
    };
    match cmd {
        ReservationCommand::Create(o) => {
            let now = crate::moment::now();
            let start = o
                .start
                .as_deref()
                .map(|s| moment(s, now, "start"))
                .transpose()?;
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
                Output::Json => outln!("{}", super::client::json_text(&r, true)?),
                Output::Table => outln!("{}", r.id),
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
        Output::Json => outln!("{}", super::client::json_text(&cs, true)?),
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
            out!(
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
                outln!(
                    "{} is {}: {}",
                    printable(&c.name),
                    printable(&c.state),
                    printable(c.reason.as_deref().unwrap_or(""))
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
    /// Window start [default: now]: the forms of `reservation create --start` (16:00,
    /// now+1hour, 2026-11-23T16:00, +30m, …).
    #[arg(long, value_name = "TIME")]
    from: Option<String>,
    /// Window end [default: one hour after --from]: the same forms (+DURATION counts from
    /// now).
    #[arg(long, value_name = "TIME")]
    to: Option<String>,
    /// Chart width in characters.
    #[arg(long, default_value_t = 72)]
    width: usize,
    #[command(flatten)]
    out: OutputOpt,
    #[command(flatten)]
    conn: Connection,
}

/// A time given on the command line (`--start`, `--from`, `--to`, `--begin`), in the
/// local zone.
fn moment(s: &str, now: i64, what: &str) -> Result<i64> {
    crate::moment::parse_moment(s, now, &crate::moment::local_zone())
        .map_err(|e| bad(format!("--{what}: {e}")))
}

/// `--begin`, read now (so that `now+1hour` counts from the command).
fn begin_of(text: Option<&str>) -> Result<Option<i64>> {
    text.map(|b| moment(b, crate::moment::now(), "begin"))
        .transpose()
}

/// Runs `plan show`: a text Gantt chart per cluster.
pub fn plan_show(o: PlanShowOpts) -> Result<()> {
    let now = crate::moment::now();
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
    let c = Client::new(&o.conn)?;
    let plans: Vec<ClusterPlan> = c.get("/plan", &q)?;
    match o.out.output {
        Output::Json => outln!("{}", super::client::json_text(&plans, true)?),
        Output::Table => {
            for p in &plans {
                out!("{}", gantt(p, o.width.clamp(10, 400)));
            }
        }
    }
    Ok(())
}

/// The most processor rows a chart draws: a terminal shows no more, and a server that
/// claims 2³² processors must not make the CLI draw them all.
const GANTT_ROWS: u32 = 4096;

/// The chart of one cluster's plan: one row per processor, one column per time step;
/// `.` free, `#` running, `R` a global job's reservation, `P` a global job planned beyond the
/// lead time, `f` a queued local job's forecast, `H` an administrative reservation.
pub fn gantt(p: &ClusterPlan, width: usize) -> String {
    // What the server says is not trusted: instants anywhere in i64, any processor count.
    let span = p.to.saturating_sub(p.from).max(1);
    let step = (span as f64 / width as f64).max(1.0);
    let mut out = format!(
        "{}: {} processors, {} .. {} ({} per column)\n",
        printable(&p.cluster),
        p.procs,
        when(Some(p.from)),
        when(Some(p.to)),
        format_duration(step.ceil() as i64)
    );
    let rows = p.procs.min(GANTT_ROWS);
    for proc in 0..rows {
        let mut row = vec!['.'; width];
        for s in p.slots.iter().filter(|s| s.processor == proc) {
            let mark = match s.occupant.as_str() {
                "running" => '#',
                "reserved" => 'R',
                "planned" => 'P',
                "forecast" => 'f',
                "held" => 'H',
                _ => continue,
            };
            let a = (s.start.saturating_sub(p.from) as f64 / step).floor() as usize;
            let b = ((s.end.saturating_sub(p.from) as f64 / step).ceil() as usize).min(width);
            for cell in row.iter_mut().take(b).skip(a.min(width)) {
                *cell = mark;
            }
        }
        out.push_str(&format!(
            "p{proc:<4}|{}|\n",
            row.into_iter().collect::<String>()
        ));
    }
    if rows < p.procs {
        out.push_str(&format!(
            "      ({} more processors not shown; -o json has them all)\n",
            p.procs - rows
        ));
    }
    out.push_str(
        "      . free  # running  R reserved global job  P planned global job  \
         f queued local job (forecast)  H administrative reservation\n",
    );
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
    /// the server is root), `--default-unix-user` (back to the server's default), and the
    /// credentials they may name in a job: `--groups a,b --accounts x --classes q --qos
    /// normal` (each replaces theirs; the first is their default; `''` empties it).
    Modify(ModifyUserOpts),
    /// Token commands: `user token rotate NAME` prints a new token; the old one is refused
    /// at once.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Disable a user: their token is refused at once and their jobs that have not started
    /// are cancelled (running ones finish); their history stays.
    Disable(NameOpts),
    /// Enable a disabled user again.
    Enable(NameOpts),
    /// Remove a user: disabled for good, token gone, jobs that have not started cancelled;
    /// their history stays and the name is never reused.
    Remove(NameOpts),
    /// Who am I?
    Whoami(OutOnly),
}

/// Token commands (administrators).
#[derive(Subcommand)]
pub enum TokenCommand {
    /// Give a user a new token and print it (once); the old one stops working at once.
    Rotate(NameOpts),
}

/// A user's name (and the output format).
#[derive(Args)]
pub struct NameOpts {
    /// Name.
    name: String,
    #[command(flatten)]
    out: OutputOpt,
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
    /// The groups they belong to (comma-separated; the first is their default).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    groups: Option<Vec<String>>,
    /// The accounts they may charge (comma-separated; the first is their default).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    accounts: Option<Vec<String>>,
    /// The classes (queues) they may use (comma-separated; the first is their default).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    classes: Option<Vec<String>>,
    /// The qualities of service they may use (comma-separated; the first is their default).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    qos: Option<Vec<String>>,
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
    let disabled = matches!(cmd, UserCommand::Disable(_));
    let users_table = |us: &[UserView]| {
        let rows: Vec<Vec<String>> = us
            .iter()
            .map(|u| {
                vec![
                    u.name.clone(),
                    format!(
                        "{}{}",
                        if u.admin { "admin" } else { "user" },
                        if u.disabled { " (disabled)" } else { "" }
                    ),
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
            warn_of(&u.user.warnings);
            match o.out.output {
                Output::Json => outln!("{}", super::client::json_text(&u, true)?),
                Output::Table => outln!("{}", u.token),
            }
        }
        UserCommand::List(o) => {
            let us: Vec<UserView> = c.get("/users", &[])?;
            match o.out.output {
                Output::Json => outln!("{}", super::client::json_text(&us, true)?),
                Output::Table => out!("{}", users_table(&us)),
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
                Output::Json => outln!("{}", super::client::json_text(&u, true)?),
                Output::Table => out!("{}", users_table(&[u])),
            }
        }
        UserCommand::Modify(o) => {
            // `--groups ''` empties the list.
            let list = |v: Option<Vec<String>>| {
                v.map(|l| l.into_iter().filter(|x| !x.is_empty()).collect::<Vec<_>>())
            };
            let creds = CredentialsChange {
                groups: list(o.groups),
                accounts: list(o.accounts),
                classes: list(o.classes),
                qos: list(o.qos),
            };
            let unix = o.unix_user.is_some() || o.default_unix_user;
            if !unix && creds == CredentialsChange::default() {
                return Err(bad(
                    "give --unix-user, --default-unix-user, --groups, --accounts, --classes \
                     or --qos"
                        .into(),
                ));
            }
            let mut u: Option<UserView> = None;
            if unix {
                let changed: UserView = c.post(
                    &format!("/users/{}/unix-user", o.name),
                    &UnixUserChange {
                        unix_user: o.unix_user,
                    },
                )?;
                warn_of(&changed.warnings);
                u = Some(changed);
            }
            if creds != CredentialsChange::default() {
                u = Some(c.post(&format!("/users/{}/credentials", o.name), &creds)?);
            }
            let u = u.expect("invariant: one change was sent");
            match o.out.output {
                Output::Json => outln!("{}", super::client::json_text(&u, true)?),
                Output::Table => out!("{}", users_table(&[u])),
            }
        }
        UserCommand::Token(TokenCommand::Rotate(o)) => {
            let u: CreatedUser = c.post(&format!("/users/{}/token", o.name), &())?;
            match o.out.output {
                Output::Json => outln!("{}", super::client::json_text(&u, true)?),
                Output::Table => outln!("{}", u.token),
            }
        }
        UserCommand::Disable(o) | UserCommand::Enable(o) => {
            let u: UserView = c.post(
                &format!("/users/{}/state", o.name),
                &UserStateChange { disabled },
            )?;
            match o.out.output {
                Output::Json => outln!("{}", super::client::json_text(&u, true)?),
                Output::Table => out!("{}", users_table(&[u])),
            }
        }
        UserCommand::Remove(o) => {
            let u: UserView = c.delete(&format!("/users/{}", o.name))?;
            match o.out.output {
                Output::Json => outln!("{}", super::client::json_text(&u, true)?),
                Output::Table => outln!("user {} removed", printable(&u.name)),
            }
        }
        UserCommand::Whoami(o) => {
            let u: UserView = c.get("/whoami", &[])?;
            match o.out.output {
                Output::Json => outln!("{}", super::client::json_text(&u, true)?),
                Output::Table => out!("{}", users_table(&[u])),
            }
        }
    }
    Ok(())
}

/// The variables `--export SPEC` takes from `shell` (this process's environment), as sbatch
/// reads its `--export`: `NONE`, `ALL`, or `NAME[=VALUE]` items, after `ALL` added to it.
/// Names that are not shell identifiers (exported bash functions) and `FORESIGHT_*` are left
/// out of `ALL`, and refused when named.
fn exported(
    spec: &str,
    shell: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> anyhow::Result<BTreeMap<String, String>> {
    let shell: BTreeMap<String, String> = shell
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| is_env_name(k) && !k.starts_with("FORESIGHT_"))
        .collect();
    let mut env = BTreeMap::new();
    for (i, item) in spec.split(',').enumerate() {
        match item {
            "NONE" if i == 0 => {}
            "ALL" if i == 0 => env.clone_from(&shell),
            _ => {
                let (name, value) = match item.split_once('=') {
                    Some((name, value)) => (name, Some(value)),
                    None => (item, None),
                };
                if !is_env_name(name) || name.starts_with("FORESIGHT_") {
                    return Err(bad(format!(
                        "--export {spec:?}: {item:?} is not NAME or NAME=VALUE with NAME in \
                         [A-Za-z_][A-Za-z0-9_]* and not FORESIGHT_* (or give ALL or NONE alone)"
                    )));
                }
                // A name without a value that this shell does not have is left out, as sbatch does.
                if let Some(v) = value
                    .map(str::to_owned)
                    .or_else(|| shell.get(name).cloned())
                {
                    env.insert(name.to_owned(), v);
                }
            }
        }
    }
    Ok(env)
}

/// A name a shell can export: `[A-Za-z_][A-Za-z0-9_]*`.
fn is_env_name(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod export_tests {
    use super::exported;

    fn shell() -> impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)> {
        [
            ("PATH", "/opt/bin:/usr/bin"),
            ("HOME", "/home/a"),
            ("FORESIGHT_TOKEN", "secret"),
            ("BASH_FUNC_f%%", "() { :; }"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
    }

    fn names(spec: &str) -> Vec<(String, String)> {
        exported(spec, shell()).unwrap().into_iter().collect()
    }

    #[test]
    fn none_exports_nothing_and_all_exports_the_shell_but_tokens_and_functions() {
        assert!(names("NONE").is_empty());
        let all = names("ALL");
        let keys: Vec<&str> = all.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["HOME", "PATH"]);
    }

    #[test]
    fn named_items_take_the_shells_value_or_their_own_and_add_to_all() {
        assert_eq!(
            names("PATH,X=1,MISSING"),
            [
                ("PATH".into(), "/opt/bin:/usr/bin".into()),
                ("X".into(), "1".into())
            ]
        );
        assert_eq!(names("ALL,HOME=/w").len(), 2);
        assert_eq!(names("ALL,HOME=/w")[0], ("HOME".into(), "/w".into()));
    }

    #[test]
    fn a_token_or_a_bad_name_is_refused_by_name() {
        for spec in ["FORESIGHT_TOKEN", "A-B=1", "=1", "1X"] {
            let e = exported(spec, shell()).unwrap_err().to_string();
            assert!(e.contains("--export"), "{spec}: {e}");
        }
    }
}

/// `--input PATH[@CLUSTER]`: the text after the last `@` names the cluster unless it holds a
/// `/` (then the `@` belongs to the path); a relative path is made absolute here, where the
/// user stands.
fn parse_input(text: &str) -> Result<InputSpec> {
    let (path, cluster) = match text.rsplit_once('@') {
        Some((p, c)) if !c.contains('/') => (p, Some(c)),
        _ => (text, None),
    };
    if path.is_empty() || cluster.is_some_and(str::is_empty) {
        return Err(bad(format!("--input {text:?}: expected PATH[@CLUSTER]")));
    }
    let path = std::path::absolute(path).map_err(|e| bad(format!("--input {text:?}: {e}")))?;
    Ok(InputSpec {
        path: path.display().to_string(),
        cluster: cluster.map(Into::into),
    })
}

/// `--output-file PATH[@CLUSTER]`: split as `--input` is; the path stays relative (the
/// server refuses any other).
fn parse_output(text: &str) -> Result<OutputSpec> {
    let (path, cluster) = match text.rsplit_once('@') {
        Some((p, c)) if !c.contains('/') => (p, Some(c)),
        _ => (text, None),
    };
    if path.is_empty() || cluster.is_some_and(str::is_empty) {
        return Err(bad(format!(
            "--output-file {text:?}: expected PATH[@CLUSTER]"
        )));
    }
    Ok(OutputSpec {
        path: path.into(),
        cluster: cluster.map(Into::into),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_server_returns_cannot_drive_the_terminal() {
        assert_eq!(printable("Größe\tok"), "Größe\\u{9}ok");
        assert_eq!(printable("\u{1b}]0;owned\u{7}"), "\\u{1b}]0;owned\\u{7}");
        let t = table(&["NAME", "X"], &[vec!["a\u{1b}[2J".into(), "1".into()]]);
        assert!(!t.contains('\u{1b}'), "{t:?}");
        assert!(t.contains("a\\u{1b}[2J  1"), "{t:?}");
        let long = "n".repeat(70_000);
        assert!(table(&["NAME"], &[vec![long]]).len() > 70_000);
    }
}
