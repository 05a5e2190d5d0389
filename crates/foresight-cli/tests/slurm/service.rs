#![allow(clippy::unwrap_used)] // tests fail loudly by design
//! End-to-end tests of the service over real Slurm clusters: the real `foresight server
//! start` following two clusters started by `scripts/local-slurm.sh`, driven through the CLI,
//! with Slurm's own view (`squeue --json`, `scontrol show res -o`) checked where it matters.
//!
//! They run only when `FORESIGHT_SLURM_CONFS` is set (`c1=/path/slurm.conf,c2=/path/...`;
//! `source /tmp/foresight-slurm/env` gives it, `scripts/test.sh` sets it); otherwise each test says it
//! skips and passes. The scenarios run one at a time (they share the clusters), each with its
//! own daemon and data directory, and each first waits until no job of Foresight's or of the
//! local user is left running on the clusters. They cancel only what they made: the local
//! user's jobs they submitted, and the Slurm jobs whose working directory lies under their own
//! temporary directory.
//!
//! Scenario 5 kills a cluster's slurmctld and brings it back with the project's script, so
//! these tests must not share their clusters with anything that minds.

use crate::common;

use crate::common::{int, wait_for, Server};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::SERIAL;

/// The unprivileged user standing for a site's own users (the script's `OTHER_USER`).
const OTHER_USER: &str = "fsowner";

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Seconds since the epoch.
fn now() -> i64 {
    common::now()
}

// ------------------------------------------------------------------------------- clusters

/// One Slurm cluster started by `scripts/local-slurm.sh`.
#[derive(Clone, Debug)]
struct Cluster {
    name: String,
    conf: PathBuf,
}

impl Cluster {
    /// BASE/NAME of the script's layout (the conf is BASE/NAME/etc/slurm.conf).
    fn home(&self) -> PathBuf {
        self.conf.parent().unwrap().parent().unwrap().to_path_buf()
    }

    /// A Slurm command against this cluster.
    fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", &self.conf)
            .env_remove("SLURM_TIME_FORMAT")
            .stdin(Stdio::null());
        c
    }

    /// Every job Slurm shows (ended ones too, for MinJobAge), or None when it does not answer.
    fn try_jobs(&self) -> Option<Vec<Value>> {
        let out = self.cmd("squeue").arg("--json").output().ok()?;
        if !out.status.success() {
            return None;
        }
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        v["jobs"].as_array().cloned()
    }

    fn jobs(&self) -> Vec<Value> {
        for _ in 0..20 {
            if let Some(j) = self.try_jobs() {
                return j;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        panic!("squeue --json on {} keeps failing", self.name)
    }

    /// One job by its Slurm id.
    fn job(&self, id: &str) -> Option<Value> {
        self.jobs().into_iter().find(|j| slurm_id(j) == id)
    }

    /// `scontrol show res -o`: every reservation as its `Key=Value` fields.
    fn reservations(&self) -> Vec<BTreeMap<String, String>> {
        let out = self
            .cmd("scontrol")
            .args(["show", "res", "-o"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "scontrol show res on {}: {}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("ReservationName="))
            .map(|l| {
                l.split_whitespace()
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            })
            .collect()
    }

    fn reservation_names(&self) -> Vec<String> {
        self.reservations()
            .into_iter()
            .filter_map(|r| r.get("ReservationName").cloned())
            .collect()
    }

    /// Submits a job as the local user, straight to Slurm; its Slurm id.
    fn sbatch_local(&self, procs: u32, minutes: u32, script: &str) -> String {
        let out = Command::new("runuser")
            .args(["-u", OTHER_USER, "--", "env"])
            .arg(format!("SLURM_CONF={}", self.conf.display()))
            .args(["sbatch", "--parsable", "--job-name=local"])
            .arg(format!("--chdir={}", self.home().join("jobs").display()))
            .arg("--output=/dev/null")
            .arg(format!("--ntasks={procs}"))
            .arg(format!("--time={minutes}"))
            .arg(format!("--wrap={script}"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "sbatch as {OTHER_USER} on {}: {}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
        let id = String::from_utf8_lossy(&out.stdout)
            .trim()
            .split(';')
            .next()
            .unwrap()
            .to_string();
        assert!(id.parse::<u64>().is_ok(), "sbatch said {id:?}");
        id
    }

    fn scancel(&self, id: &str) {
        let _ = self.cmd("scancel").arg(id).stderr(Stdio::null()).status();
    }

    fn delete_reservation(&self, name: &str) {
        let _ = self
            .cmd("scontrol")
            .args(["delete", &format!("reservationname={name}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    /// slurmctld's pid, from the script's pid file.
    fn slurmctld_pid(&self) -> Option<u32> {
        let text = std::fs::read_to_string(self.home().join("run/slurmctld.pid")).ok()?;
        let pid: u32 = text.trim().parse().ok()?;
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        comm.starts_with("slurmctld").then_some(pid)
    }
}

/// A job's Slurm id (`job_id`) as text.
fn slurm_id(j: &Value) -> String {
    j["job_id"].to_string()
}

/// A job's state: a string in Slurm 22.05, a list of flags in later versions.
fn slurm_state(j: &Value) -> String {
    match &j["job_state"] {
        Value::Array(a) => a
            .first()
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        v => v.as_str().unwrap_or_default().to_string(),
    }
}

/// A time field: a number in Slurm 22.05, `{set, number}` in later versions.
fn slurm_time(j: &Value, field: &str) -> i64 {
    match &j[field] {
        Value::Object(o) => o.get("number").and_then(Value::as_i64).unwrap_or(0),
        v => v.as_i64().unwrap_or(0),
    }
}

fn slurm_str<'a>(j: &'a Value, field: &str) -> &'a str {
    j[field].as_str().unwrap_or_default()
}

fn is_live(j: &Value) -> bool {
    matches!(
        slurm_state(j).as_str(),
        "PENDING" | "RUNNING" | "SUSPENDED" | "CONFIGURING" | "COMPLETING" | "REQUEUED"
    )
}

/// Whether a Slurm job's working directory lies under one of `roots`.
fn is_under(j: &Value, roots: &[String]) -> bool {
    let cwd = slurm_str(j, "current_working_directory");
    roots.iter().any(|r| Path::new(cwd).starts_with(r))
}

/// A short view of a Slurm job for messages.
fn brief(j: &Value) -> String {
    format!(
        "{}:{}:{}:{}:start={}:end={}:reason={}:resv={}",
        slurm_id(j),
        slurm_str(j, "name"),
        slurm_str(j, "user_name"),
        slurm_state(j),
        slurm_time(j, "start_time"),
        slurm_time(j, "end_time"),
        slurm_str(j, "state_reason"),
        slurm_str(j, "resv_name"),
    )
}

/// The Slurm script's base directory and settings for cluster `c`, to run it again exactly as
/// it was started (the same generated slurm.conf, so it keeps the clusters' state).
fn script_env(c: &Cluster) -> Vec<(String, String)> {
    let conf = std::fs::read_to_string(&c.conf).unwrap();
    let field = |line: &str, key: &str| -> Option<String> {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{key}=")).map(str::to_string))
    };
    let mut env = vec![
        (
            "FORESIGHT_SLURM_DIR".to_string(),
            c.home().parent().unwrap().display().to_string(),
        ),
        ("FORESIGHT_SLURM_NO_INSTALL".into(), "1".into()),
    ];
    let index: i64 = c.name.trim_start_matches('c').parse().unwrap_or(1);
    for line in conf.lines() {
        if let Some(p) = line.strip_prefix("SlurmctldPort=") {
            let port: i64 = p.trim().parse().unwrap();
            env.push((
                "FORESIGHT_SLURM_PORT_BASE".into(),
                (port - 100 * (index - 1)).to_string(),
            ));
        } else if let Some(p) = line.strip_prefix("SchedulerParameters=") {
            env.push(("FORESIGHT_SLURM_SCHED_PARAMS".into(), p.trim().to_string()));
        } else if line.starts_with("NodeName=") {
            if let Some(cpus) = field(line, "CPUs") {
                env.push(("FORESIGHT_SLURM_CPUS".into(), cpus));
            }
            if let Some(mem) = field(line, "RealMemory") {
                env.push(("FORESIGHT_SLURM_MEM_MB".into(), mem));
            }
            if let Some(nodes) = field(line, "NodeName") {
                // NAME-n[1-K]
                let k = nodes
                    .rsplit(['-', '['])
                    .next()
                    .unwrap()
                    .trim_end_matches(']');
                env.push(("FORESIGHT_SLURM_NODES".into(), k.to_string()));
            }
        }
    }
    env
}

/// The clusters to use, or None (after saying so) when `FORESIGHT_SLURM_CONFS` is unset.
fn grid(test: &str) -> Option<Vec<Cluster>> {
    let Ok(confs) = std::env::var("FORESIGHT_SLURM_CONFS") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: FORESIGHT_SLURM_CONFS is not set under CI (scripts/test.sh starts the clusters)"
        );
        eprintln!(
            "SKIP {test}: FORESIGHT_SLURM_CONFS is not set (start clusters with \
             `scripts/local-slurm.sh start 2`, then `source /tmp/foresight-slurm/env`)"
        );
        return None;
    };
    let clusters: Vec<Cluster> = confs
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            let (name, conf) = s
                .split_once('=')
                .unwrap_or_else(|| panic!("FORESIGHT_SLURM_CONFS: {s:?} is not NAME=PATH"));
            Cluster {
                name: name.trim().to_string(),
                conf: PathBuf::from(conf.trim()),
            }
        })
        .collect();
    assert!(
        clusters.len() >= 2,
        "FORESIGHT_SLURM_CONFS names {} cluster(s); these tests need two",
        clusters.len()
    );
    Some(clusters.into_iter().take(2).collect())
}

// ---------------------------------------------------------------------------- a scenario

/// One scenario's world: the clusters, its daemon, and what it made there (cancelled at the
/// end, whatever happens).
struct Scenario {
    clusters: Vec<Cluster>,
    server: Option<Server>,
    /// (cluster index, Slurm id) of the local user's jobs this scenario submitted.
    local_jobs: Vec<(usize, String)>,
    name: &'static str,
    /// The clusters' own `work_dir`s (`WORK/NAME`), when the scenario gives them one: its
    /// Slurm jobs run there as well as under the daemon's directory.
    work: Option<tempfile::TempDir>,
}

impl Scenario {
    /// Waits for the clusters to be free of leftovers, then starts a daemon following them.
    fn start(name: &'static str, clusters: Vec<Cluster>, lead_time: i64) -> Scenario {
        Scenario::start_with(name, clusters, lead_time, "")
    }

    /// [`Scenario::start`] with top-level settings `extra` (TOML lines) besides.
    fn start_with(
        name: &'static str,
        clusters: Vec<Cluster>,
        lead_time: i64,
        extra: &str,
    ) -> Scenario {
        Scenario::start_on(name, clusters, lead_time, extra, None)
    }

    /// [`Scenario::start_with`], each cluster with its own `work_dir` (`WORK/NAME`, see
    /// [`Scenario::work_dir`]) and the feature of its name (`requires: [c1]` pins a job or
    /// a task to c1): the clusters share no working directory.
    fn start_apart(name: &'static str, clusters: Vec<Cluster>, lead_time: i64) -> Scenario {
        let work = tempfile::tempdir().unwrap();
        Scenario::start_on(name, clusters, lead_time, "", Some(work))
    }

    fn start_on(
        name: &'static str,
        clusters: Vec<Cluster>,
        lead_time: i64,
        extra: &str,
        work: Option<tempfile::TempDir>,
    ) -> Scenario {
        eprintln!("--- {name}");
        ensure_up(&clusters);
        settle(&clusters);
        let mut toml = format!(
            "listen = \"127.0.0.1:0\"\nlead_time_seconds = {lead_time}\ncycle_ms = 200\n{extra}"
        );
        for c in &clusters {
            toml.push_str(&format!(
                "\n[[cluster]]\nname = \"{}\"\nkind = \"slurm\"\nslurm_conf = \"{}\"\nsync_ms = 1000\n",
                c.name,
                c.conf.display()
            ));
            if let Some(w) = &work {
                let dir = std::fs::canonicalize(w.path()).unwrap().join(&c.name);
                toml.push_str(&format!(
                    "features = [\"{}\"]\nwork_dir = \"{}\"\n",
                    c.name,
                    dir.display()
                ));
            }
        }
        let server = Server::with_config_logging(&toml, "info");
        let s = Scenario {
            clusters,
            server: Some(server),
            local_jobs: Vec::new(),
            name,
            work,
        };
        // Both clusters read and up before anything is submitted.
        wait_for("both clusters up", secs(30), || {
            let list = s.cluster_list();
            list.iter()
                .all(|c| c["state"] == "up" && c["procs"].as_u64().unwrap_or(0) > 0)
                .then_some(())
        });
        s
    }

    fn server(&self) -> &Server {
        self.server.as_ref().unwrap()
    }

    /// Cluster `name`'s own `work_dir` (a scenario of [`Scenario::start_apart`]).
    fn work_dir(&self, name: &str) -> PathBuf {
        let w = self.work.as_ref().expect("a scenario started apart");
        std::fs::canonicalize(w.path()).unwrap().join(name)
    }

    /// Whether a Slurm job's working directory is one of this scenario's: under the
    /// daemon's directory or a cluster's own `work_dir`.
    fn ours(&self, j: &Value) -> bool {
        is_under(j, &self.roots())
    }

    /// The directories under which this scenario's Slurm jobs run.
    fn roots(&self) -> Vec<String> {
        let server = self.server.as_ref().map(Server::root);
        let work = self
            .work
            .as_ref()
            .and_then(|w| std::fs::canonicalize(w.path()).ok());
        server
            .into_iter()
            .chain(work)
            .map(|p| p.display().to_string())
            .collect()
    }

    fn server_mut(&mut self) -> &mut Server {
        self.server.as_mut().unwrap()
    }

    fn cluster_list(&self) -> Vec<Value> {
        let text = self.server().run(&["cluster", "list", "-o", "json"]);
        serde_json::from_str::<Value>(&text)
            .unwrap_or_else(|e| panic!("cluster list -o json ({e}): {text}"))
            .as_array()
            .unwrap()
            .clone()
    }

    fn cluster_index(&self, name: &str) -> usize {
        self.clusters.iter().position(|c| c.name == name).unwrap()
    }

    /// Submits a global job through the CLI: `job submit -n PROCS -t TIME -- sh -c SCRIPT`.
    fn submit(&self, procs: u32, time: &str, script: &str) -> u64 {
        self.server().submit(&[
            "-n",
            &procs.to_string(),
            "-t",
            time,
            "--",
            "sh",
            "-c",
            script,
        ])
    }

    fn local(&mut self, k: usize, procs: u32, minutes: u32, script: &str) -> String {
        let id = self.clusters[k].sbatch_local(procs, minutes, script);
        self.local_jobs.push((k, id.clone()));
        id
    }

    fn job(&self, id: u64) -> Value {
        let (status, j) = self.server().http().get(&format!("/jobs/{id}"));
        assert_eq!(status, 200, "{j}");
        j
    }

    fn wait_job(&self, id: u64, what: &str, timeout: Duration, pred: impl Fn(&Value) -> bool) {
        self.server().wait_job(id, what, timeout, pred);
    }

    /// The Slurm jobs this daemon made for Foresight job `id` on cluster `k` (any attempt,
    /// ended ones too), oldest first.
    fn parts(&self, k: usize, id: u64) -> Vec<Value> {
        let prefix = format!("foresight-{id}.");
        let mut v: Vec<Value> = self.clusters[k]
            .jobs()
            .into_iter()
            .filter(|j| slurm_str(j, "name").starts_with(&prefix) && self.ours(j))
            .collect();
        v.sort_by_key(|j| j["job_id"].as_u64().unwrap_or(0));
        v
    }

    /// Waits for the one Slurm job of attempt `attempt` of job `id` on cluster `k` to satisfy
    /// `pred`; that job.
    fn wait_part(
        &self,
        k: usize,
        id: u64,
        attempt: u32,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let name = format!("foresight-{id}.{attempt}");
        wait_for(
            &format!("{name} on {} {what}", self.clusters[k].name),
            timeout,
            || {
                self.parts(k, id)
                    .into_iter()
                    .find(|j| slurm_str(j, "name") == name && pred(j))
            },
        )
    }

    /// A daemon reservation (`GET /reservations/ID`).
    fn reservation(&self, rid: u64) -> Value {
        let (status, r) = self.server().http().get(&format!("/reservations/{rid}"));
        assert_eq!(status, 200, "{r}");
        r
    }

    /// A metric from `/metrics` (the first sample whose line starts with `name`).
    fn metric(&self, name: &str) -> Option<f64> {
        let text = reqwest::blocking::Client::new()
            .get(format!("{}/metrics", self.server().url))
            .bearer_auth(&self.server().token)
            .send()
            .ok()?
            .text()
            .ok()?;
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    }

    fn log_lines(&self, needle: &str) -> Vec<String> {
        std::fs::read_to_string(self.server().stderr_path())
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Scenario {
    fn drop(&mut self) {
        // What this daemon reserved, before it goes.
        let rids: Vec<u64> = self
            .server
            .as_ref()
            .filter(|s| !s.url.is_empty())
            .map(|s| {
                let (status, v) = s.http().get("/reservations");
                if status != 200 {
                    return Vec::new();
                }
                v.as_array()
                    .map(|a| a.iter().filter_map(|r| r["id"].as_u64()).collect())
                    .unwrap_or_default()
            })
            .unwrap_or_default();
        let roots = self.roots();
        if std::thread::panicking() {
            for c in &self.clusters {
                let jobs: Vec<String> =
                    c.try_jobs().unwrap_or_default().iter().map(brief).collect();
                eprintln!("{} at the failure: {jobs:#?}", c.name);
            }
        }
        // Stop the daemon first (by its pid), so that it submits nothing more.
        let server = self.server.take();
        if let Some(mut s) = server {
            if std::thread::panicking() {
                eprintln!("{}: daemon log in {}", self.name, s.stderr_path().display());
            }
            let _ = s.sigterm(secs(10));
            // The data (and the logs, printed on panic) go with it.
            drop(s);
        }
        for (k, id) in &self.local_jobs {
            self.clusters[*k].scancel(id);
        }
        if !roots.is_empty() {
            for c in &self.clusters {
                for j in c.try_jobs().unwrap_or_default() {
                    if slurm_str(&j, "name").starts_with("foresight-")
                        && is_under(&j, &roots)
                        && is_live(&j)
                    {
                        c.scancel(&slurm_id(&j));
                    }
                }
                let names = c.reservations_quiet();
                for rid in &rids {
                    let n = format!("foresight-{rid}");
                    if names.contains(&n) {
                        c.delete_reservation(&n);
                    }
                }
            }
        }
    }
}

impl Cluster {
    fn reservations_quiet(&self) -> Vec<String> {
        let Ok(out) = self.cmd("scontrol").args(["show", "res", "-o"]).output() else {
            return Vec::new();
        };
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.strip_prefix("ReservationName="))
            .filter_map(|l| l.split_whitespace().next())
            .map(str::to_string)
            .collect()
    }
}

/// Brings the clusters up when a controller is down (a previous scenario failed midway).
fn ensure_up(clusters: &[Cluster]) {
    if clusters.iter().all(|c| c.slurmctld_pid().is_some()) {
        return;
    }
    restart_clusters(clusters);
}

/// `scripts/local-slurm.sh start N` with the settings the clusters were started with.
fn restart_clusters(clusters: &[Cluster]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/local-slurm.sh");
    let mut cmd = Command::new("bash");
    cmd.arg(&script)
        .args(["start", &clusters.len().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    for (k, v) in script_env(&clusters[0]) {
        cmd.env(k, v);
    }
    let status = cmd.status().unwrap();
    assert!(status.success(), "{} start failed", script.display());
}

/// Waits until no job of Foresight's or of the local user runs or waits on the clusters
/// (leftovers of an earlier scenario, being cancelled), and no reservation is active.
fn settle(clusters: &[Cluster]) {
    wait_for(
        "the clusters to be free of earlier scenarios' jobs",
        secs(120),
        || {
            clusters
                .iter()
                .all(|c| {
                    c.jobs().iter().all(|j| {
                        !(is_live(j)
                            && (slurm_str(j, "name").starts_with("foresight-")
                                || slurm_str(j, "user_name") == OTHER_USER))
                    })
                })
                .then_some(())
        },
    );
}

/// Runs `f` with the clusters, one scenario at a time; skips without Slurm.
fn scenario(test: &str, f: impl FnOnce(Vec<Cluster>)) {
    let Some(clusters) = grid(test) else { return };
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    f(clusters);
}

/// Slurm ids of the live Slurm jobs named `foresight-ID.*` of this scenario on cluster `k`.
fn live_parts(s: &Scenario, k: usize, id: u64) -> Vec<Value> {
    s.parts(k, id).into_iter().filter(is_live).collect()
}

/// A file's modification time, seconds since the epoch (0 when absent).
fn mtime(path: &Path) -> i64 {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs() as i64)
}

/// The Foresight reservation a Slurm job is bound to (`foresight-RID`).
fn rid_of(j: &Value) -> u64 {
    slurm_str(j, "resv_name")
        .strip_prefix("foresight-")
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("not in a Foresight reservation: {}", brief(j)))
}

// ----------------------------------------------------------------------------- scenarios

/// Local jobs submitted straight to Slurm by another user keep running untouched, and a global
/// job is planned around them.
#[test]
fn local_jobs_keep_running_and_global_jobs_plan_around_them() {
    scenario("local_jobs_keep_running", |clusters| {
        let mut s = Scenario::start("local jobs", clusters, 30);
        // The local user fills c1.
        let local = s.local(0, 8, 5, "sleep 120");
        let c1 = s.clusters[0].clone();
        let lj = wait_for("the local job running", secs(30), || {
            c1.job(&local).filter(|j| slurm_state(j) == "RUNNING")
        });
        let local_start = slurm_time(&lj, "start_time");
        // Foresight sees c1 full.
        wait_for("c1 busy in the daemon's view", secs(15), || {
            s.cluster_list()
                .iter()
                .find(|c| c["name"] == "c1")
                .filter(|c| c["busy"].as_u64() == Some(8))
                .map(|_| ())
        });
        let submitted = now();
        let id = s.submit(6, "1m", "echo global; sleep 10");
        s.wait_job(id, "started", secs(60), |j| j["started_at"].is_i64());
        let j = s.job(id);
        let started = int(&j, "started_at");
        let parts = j["parts"].as_array().unwrap().clone();
        eprintln!(
            "global job {id}: parts {parts:?}, planned {} (first {}), started {started}, \
             submit->running {} s",
            j["planned_start"],
            j["first_planned_start"],
            started - submitted
        );
        let on_c1 = parts.iter().any(|p| p["cluster"] == "c1");
        // The local job is untouched and still running when the global one starts.
        let lj = c1.job(&local).unwrap();
        assert_eq!(slurm_state(&lj), "RUNNING", "the local job: {}", brief(&lj));
        assert_eq!(slurm_time(&lj, "start_time"), local_start);
        assert!(local_start <= started);
        if on_c1 {
            // Only after the local job (it ends at the latest at its limit).
            let end = slurm_time(&lj, "end_time");
            assert!(
                started >= end,
                "global job {id} shares c1 with the local job: started {started}, the local \
                 job ends {end}: {j}"
            );
        } else {
            assert!(
                parts.iter().all(|p| p["cluster"] == "c2"),
                "parts {parts:?}"
            );
            let c2 = 1;
            let slurm = s.wait_part(c2, id, 0, "started", secs(10), |j| {
                slurm_time(j, "start_time") > 0 && slurm_state(j) != "PENDING"
            });
            assert!((slurm_time(&slurm, "start_time") - started).abs() <= 1);
        }
        let done = s.server().wait_final(id, secs(90));
        assert_eq!(done["state"], "completed", "{done}");
        assert_eq!(done["exit_code"], 0, "{done}");
        // Still running, still untouched.
        let lj = c1.job(&local).unwrap();
        assert_eq!(slurm_state(&lj), "RUNNING", "the local job: {}", brief(&lj));
        assert!(
            s.log_lines(&format!("cancelling job {local} ")).is_empty(),
            "the daemon touched the local job"
        );
        let err = s.metric("foresight_estimate_error_seconds");
        eprintln!("forecast: estimate_error_seconds {err:?}");
        let _ = &mut s;
    });
}

/// A global job larger than either cluster runs co-allocated on both, with a synchronous start.
#[test]
fn a_job_larger_than_either_cluster_runs_coallocated_with_a_synchronous_start() {
    scenario("coallocation", |clusters| {
        let s = Scenario::start("co-allocation", clusters, 30);
        let submitted = now();
        let id = s.submit(12, "2m", "echo part; sleep 10");
        let j = s.server().wait_job(id, "started", secs(60), |j| {
            j["started_at"].is_i64() && j["parts"].as_array().is_some_and(|p| p.len() == 2)
        });
        let parts = j["parts"].as_array().unwrap();
        let total: u64 = parts.iter().map(|p| p["procs"].as_u64().unwrap()).sum();
        assert_eq!(total, 12, "{j}");
        let a = s.wait_part(0, id, 0, "started", secs(30), |j| {
            slurm_time(j, "start_time") > 0 && slurm_state(j) != "PENDING"
        });
        let b = s.wait_part(1, id, 0, "started", secs(30), |j| {
            slurm_time(j, "start_time") > 0 && slurm_state(j) != "PENDING"
        });
        let (sa, sb) = (slurm_time(&a, "start_time"), slurm_time(&b, "start_time"));
        let ra = s.reservation(rid_of(&a));
        let rb = s.reservation(rid_of(&b));
        assert_eq!(ra["start"], rb["start"], "one planned second: {ra} {rb}");
        let planned = int(&ra, "start");
        let skew = (sa - sb).abs();
        eprintln!(
            "co-allocation: job {id} c1 start {sa}, c2 start {sb}, reservation start {planned}, \
             skew {skew} s, submit->running {} s",
            sa.min(sb) - submitted
        );
        assert!(
            skew <= 2,
            "start skew {skew} s: {} / {}",
            brief(&a),
            brief(&b)
        );
        assert!((sa - planned).abs() <= 2 && (sb - planned).abs() <= 2);
        assert!(
            sa >= planned && sb >= planned,
            "started before its reservation"
        );
        let done = s.server().wait_final(id, secs(90));
        assert_eq!(done["state"], "completed", "{done}");
        assert_eq!(done["exit_code"], 0, "{done}");
        for n in 0..2 {
            let out = s.server().dir.join(format!("output/{id}.{n}.out"));
            let text = std::fs::read_to_string(&out).unwrap_or_default();
            assert!(text.contains("part"), "{}: {text:?}", out.display());
        }
        let max = wait_for("the skew metric", secs(5), || {
            s.metric("foresight_coallocation_skew_seconds_max")
        });
        eprintln!("foresight_coallocation_skew_seconds_max {max}");
        assert!(
            max <= 2.0 && max >= skew as f64 - 1.0,
            "metric {max}, seen {skew}"
        );
    });
}

/// A reserved job waits for its reservation while its processors are busy, and when they
/// free up early its reservations on both clusters move earlier together (`scontrol update`
/// of each reservation and each part's begin time), so that it starts then, in step.
#[test]
fn a_reserved_job_waits_then_moves_earlier_on_both_clusters_together() {
    scenario("reservation_moves", |clusters| {
        let s = Scenario::start("reservation moves", clusters, 300);
        // The whole grid, for 20 s of a 2-minute walltime.
        let first = s.submit(16, "2m", "sleep 20");
        s.wait_job(first, "started", secs(60), |j| j["started_at"].is_i64());
        let first_started = int(&s.job(first), "started_at");
        // Larger than either cluster: co-allocated, reserved after the first job's walltime.
        let second = s.submit(12, "1m", "echo second; sleep 3");
        let j = s.server().wait_job(second, "reserved", secs(30), |j| {
            j["state"] == "reserved" && j["parts"].as_array().is_some_and(|p| p.len() == 2)
        });
        let a = s.wait_part(0, second, 0, "submitted", secs(30), |_| true);
        let b = s.wait_part(1, second, 0, "submitted", secs(30), |_| true);
        let (ra, rb) = (rid_of(&a), rid_of(&b));
        let start = int(&s.reservation(ra), "start");
        assert_eq!(int(&s.reservation(rb), "start"), start);
        eprintln!(
            "job {second} reserved on both clusters from {start} ({} s ahead), planned {}",
            start - now(),
            j["planned_start"]
        );
        assert!(
            start >= first_started + 100,
            "reserved before the first job's walltime ends: {start}"
        );
        // Pending in Slurm while the first job runs.
        let mut checks = 0;
        while now() < first_started + 15 {
            for k in 0..2 {
                let p = s.wait_part(k, second, 0, "seen", secs(10), |_| true);
                assert_eq!(
                    slurm_state(&p),
                    "PENDING",
                    "started while its processors are busy: {}",
                    brief(&p)
                );
            }
            checks += 1;
            std::thread::sleep(Duration::from_millis(500));
        }
        assert!(checks > 0);
        // The first job ends at about +20 s: the second moves and starts, on both clusters.
        let pa = s.wait_part(0, second, 0, "started", secs(60), |j| {
            slurm_time(j, "start_time") > 0 && slurm_state(j) != "PENDING"
        });
        let pb = s.wait_part(1, second, 0, "started", secs(60), |j| {
            slurm_time(j, "start_time") > 0 && slurm_state(j) != "PENDING"
        });
        let (sa, sb) = (slurm_time(&pa, "start_time"), slurm_time(&pb, "start_time"));
        let moved = int(&s.reservation(ra), "start");
        eprintln!(
            "job {second}: reserved from {start}, moved to {moved}; Slurm starts {sa} / {sb} \
             ({} s earlier)",
            start - sa.max(sb)
        );
        assert_eq!(int(&s.reservation(rb), "start"), moved, "moved apart");
        assert!(moved < start - 30, "not moved earlier: {moved} for {start}");
        assert!(
            sa.max(sb) < start - 30,
            "started late: {sa} / {sb} for {start}"
        );
        assert!((sa - sb).abs() <= 2, "start skew: {sa} / {sb}");
        assert!(
            sa >= moved - 1 && sb >= moved - 1,
            "started before its reservation"
        );
        // Slurm's reservations moved too.
        for (k, rid) in [(0, ra), (1, rb)] {
            let name = format!("foresight-{rid}");
            let res = s.clusters[k].reservations();
            let r = res.iter().find(|r| r["ReservationName"] == name);
            if let Some(r) = r {
                eprintln!(
                    "{name} on {}: StartTime={}",
                    s.clusters[k].name, r["StartTime"]
                );
            }
        }
        let done = s.server().wait_final(second, secs(60));
        assert_eq!(done["state"], "completed", "{done}");
        let f = s.server().wait_final(first, secs(60));
        assert_eq!(f["state"], "completed", "{f}");
        let moves = s.metric("foresight_moved_earlier").unwrap_or(0.0);
        assert!(moves >= 1.0, "moved_earlier {moves}");
    });
}

/// `foresight job cancel` and `job requeue` reach Slurm.
#[test]
fn cancel_and_requeue_reach_slurm() {
    scenario("cancel_requeue", |clusters| {
        let s = Scenario::start("cancel and requeue", clusters, 30);
        // Cancel.
        let submitted = now();
        let id = s.submit(4, "2m", "sleep 100");
        let j = s
            .server()
            .wait_job(id, "running", secs(60), |j| j["state"] == "running");
        eprintln!(
            "job {id} (4 procs, idle grid): submit->running {} s",
            int(&j, "started_at") - submitted
        );
        let k = s.cluster_index(j["parts"][0]["cluster"].as_str().unwrap());
        let part = s.wait_part(k, id, 0, "running", secs(30), |j| {
            slurm_state(j) == "RUNNING"
        });
        s.server().run(&["job", "cancel", &id.to_string()]);
        let ended = s.wait_part(k, id, 0, "cancelled", secs(30), |j| {
            slurm_state(j) == "CANCELLED"
        });
        assert_eq!(slurm_id(&ended), slurm_id(&part));
        let j = s.server().wait_final(id, secs(30));
        assert_eq!(j["state"], "cancelled", "{j}");

        // Requeue.
        let id = s.submit(2, "2m", "sleep 100");
        let j = s
            .server()
            .wait_job(id, "running", secs(60), |j| j["state"] == "running");
        let k = s.cluster_index(j["parts"][0]["cluster"].as_str().unwrap());
        let first = s.wait_part(k, id, 0, "running", secs(30), |j| {
            slurm_state(j) == "RUNNING"
        });
        s.server().run(&["job", "requeue", &id.to_string()]);
        let old = s.wait_part(k, id, 0, "cancelled", secs(30), |j| {
            slurm_state(j) == "CANCELLED"
        });
        assert_eq!(slurm_id(&old), slurm_id(&first));
        let j = s.server().wait_job(id, "running again", secs(60), |j| {
            j["state"] == "running"
                && j["started_at"].as_i64() > Some(slurm_time(&first, "start_time"))
        });
        let k2 = s.cluster_index(j["parts"][0]["cluster"].as_str().unwrap());
        let new = s.wait_part(k2, id, 1, "running", secs(30), |j| {
            slurm_state(j) == "RUNNING"
        });
        assert_ne!(slurm_id(&new), slurm_id(&first));
        // Exactly one live Slurm job for it, the new attempt's.
        let live: Vec<String> = (0..2)
            .flat_map(|k| live_parts(&s, k, id))
            .map(|j| brief(&j))
            .collect();
        assert_eq!(live.len(), 1, "{live:?}");
        s.server().run(&["job", "cancel", &id.to_string()]);
        let j = s.server().wait_final(id, secs(30));
        assert_eq!(j["state"], "cancelled", "{j}");
        s.wait_part(k2, id, 1, "cancelled", secs(30), |j| {
            slurm_state(j) == "CANCELLED"
        });
    });
}

/// slurmctld of one cluster dies: the cluster is down, the global job reserved there is planned
/// again on the other; when it is back, reconciliation leaves no duplicate and no stale
/// reservation there.
#[test]
fn a_dead_slurmctld_moves_reserved_jobs_and_is_reconciled_when_back() {
    scenario("slurmctld_restart", |clusters| {
        let mut s = Scenario::start("slurmctld restart", clusters, 300);
        // The local user fills both clusters for about a minute.
        for k in 0..2 {
            s.local(k, 8, 1, "sleep 50");
        }
        for k in 0..2 {
            let c = s.clusters[k].clone();
            wait_for("the local jobs running", secs(30), || {
                c.jobs()
                    .iter()
                    .any(|j| slurm_str(j, "user_name") == OTHER_USER && slurm_state(j) == "RUNNING")
                    .then_some(())
            });
        }
        wait_for("both clusters busy in the daemon's view", secs(15), || {
            s.cluster_list()
                .iter()
                .all(|c| c["busy"].as_u64() == Some(8))
                .then_some(())
        });
        let id = s.submit(4, "1m", "echo moved; sleep 3");
        let j = s.server().wait_job(id, "reserved", secs(30), |j| {
            j["state"] == "reserved" && j["parts"].as_array().is_some_and(|p| p.len() == 1)
        });
        let dead_name = j["parts"][0]["cluster"].as_str().unwrap().to_string();
        let dead = s.cluster_index(&dead_name);
        let other = 1 - dead;
        let part = s.wait_part(dead, id, 0, "submitted", secs(30), |_| true);
        let rid = rid_of(&part);
        let resv = format!("foresight-{rid}");
        assert!(s.clusters[dead].reservation_names().contains(&resv));
        // A controller killed with -9 comes back with the state it last saved: wait until
        // that holds the part and its reservation, so that the revived cluster still has
        // them for reconciliation to deal with.
        let seen = now();
        let state = s.clusters[dead].home().join("state");
        wait_for(
            "slurmctld to save the part and its reservation",
            secs(30),
            || {
                ["job_state", "resv_state"]
                    .iter()
                    .all(|f| mtime(&state.join(f)) > seen)
                    .then_some(())
            },
        );
        eprintln!(
            "job {id} reserved on {dead_name} ({resv}, Slurm job {}); killing its slurmctld",
            slurm_id(&part)
        );

        let pid = s.clusters[dead].slurmctld_pid().expect("slurmctld runs");
        let killed = Instant::now();
        assert!(Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap()
            .success());
        let down = wait_for(&format!("{dead_name} down"), secs(60), || {
            s.cluster_list()
                .into_iter()
                .find(|c| c["name"] == dead_name.as_str() && c["state"] == "down")
        });
        eprintln!("{dead_name} down after {:?}: {down}", killed.elapsed());
        let text = s.server().run(&["cluster", "list"]);
        assert!(
            text.lines()
                .any(|l| l.contains(&dead_name) && l.contains("down")),
            "{text}"
        );
        // Planned again on the other cluster.
        let j = s
            .server()
            .wait_job(id, "planned on the other cluster", secs(60), |j| {
                j["parts"].as_array().is_some_and(|p| {
                    !p.is_empty() && p.iter().all(|p| p["cluster"] != dead_name.as_str())
                })
            });
        eprintln!("job {id} after the failure: {} {}", j["state"], j["reason"]);

        // Back, with its state.
        restart_clusters(&s.clusters);
        eprintln!("{dead_name} restarted after {:?}", killed.elapsed());
        wait_for(&format!("{dead_name} up"), secs(60), || {
            s.cluster_list()
                .into_iter()
                .find(|c| c["name"] == dead_name.as_str() && c["state"] == "up")
        });
        // The revived cluster remembers the part (pending for its begin time) and the
        // reservation; reconciliation cancels the one and deletes the other.
        let back = s.clusters[dead].job(&slurm_id(&part));
        eprintln!(
            "on the revived {dead_name}: part {}, reservations {:?}",
            back.as_ref().map_or("forgotten".into(), brief),
            s.clusters[dead].reservation_names()
        );
        assert!(back.is_some(), "slurmctld lost the part it had saved");
        wait_for("reconciliation on the revived cluster", secs(30), || {
            let live = live_parts(&s, dead, id);
            let stale = s.clusters[dead].reservation_names().contains(&resv);
            (live.is_empty() && !stale).then_some(())
        });
        let old = s.clusters[dead].job(&slurm_id(&part)).unwrap();
        assert_eq!(slurm_state(&old), "CANCELLED", "{}", brief(&old));
        let done = s.server().wait_final(id, secs(120));
        assert_eq!(done["state"], "completed", "{done}");
        assert_eq!(done["exit_code"], 0, "{done}");
        assert!(
            done["parts"]
                .as_array()
                .unwrap()
                .iter()
                .all(|p| p["cluster"] != dead_name.as_str()),
            "{done}"
        );
        let ran_there: Vec<String> = s
            .parts(dead, id)
            .iter()
            .filter(|j| slurm_time(j, "start_time") > 0 && slurm_state(j) != "CANCELLED")
            .map(brief)
            .collect();
        assert!(
            ran_there.is_empty(),
            "ran on {dead_name} too: {ran_there:?}"
        );
        let ran_other: Vec<Value> = s
            .parts(other, id)
            .into_iter()
            .filter(|j| slurm_state(j) == "COMPLETED")
            .collect();
        assert_eq!(
            ran_other.len(),
            1,
            "{:?}",
            s.parts(other, id).iter().map(brief).collect::<Vec<_>>()
        );
        assert!(!s.clusters[dead].reservation_names().contains(&resv));
        let _ = &mut s;
    });
}

/// The daemon is killed and restarted on the same data: the job running on Slurm keeps
/// running, is re-adopted (no second submission) and its end is recorded.
#[test]
fn a_restarted_daemon_readopts_a_running_slurm_job() {
    scenario("daemon_restart", |clusters| {
        let mut s = Scenario::start("daemon restart", clusters, 30);
        let id = s.submit(2, "2m", "echo adopted; sleep 25");
        let j = s
            .server()
            .wait_job(id, "running", secs(60), |j| j["state"] == "running");
        let k = s.cluster_index(j["parts"][0]["cluster"].as_str().unwrap());
        let part = s.wait_part(k, id, 0, "running", secs(30), |j| {
            slurm_state(j) == "RUNNING"
        });
        // `sigkill` returns once the daemon is reaped: whatever Slurm reports now is what the
        // daemon's death left. That the job then ran on to its end, rather than being
        // cancelled later, is what the final state `COMPLETED` of its only part proves below
        // (no wait here that a slow machine could make pass).
        s.server_mut().sigkill();
        let still = s.clusters[k].job(&slurm_id(&part)).unwrap();
        assert_eq!(slurm_state(&still), "RUNNING", "{}", brief(&still));
        s.server_mut().launch();
        let j = s
            .server()
            .wait_job(id, "running after the restart", secs(30), |j| {
                j["state"] == "running"
            });
        assert_eq!(
            int(&j, "started_at"),
            slurm_time(&part, "start_time"),
            "{j}"
        );
        let done = s.server().wait_final(id, secs(90));
        assert_eq!(done["state"], "completed", "{done}");
        assert_eq!(done["exit_code"], 0, "{done}");
        let ours = s.parts(k, id);
        let all: Vec<Value> = (0..2).flat_map(|k| s.parts(k, id)).collect();
        assert_eq!(
            all.len(),
            1,
            "{:?}",
            all.iter().map(brief).collect::<Vec<_>>()
        );
        assert_eq!(slurm_id(&ours[0]), slurm_id(&part));
        assert_eq!(slurm_state(&ours[0]), "COMPLETED");
        assert_eq!(
            int(&done, "ended_at"),
            slurm_time(&ours[0], "end_time"),
            "{done}"
        );
        let out = std::fs::read_to_string(s.server().dir.join(format!("output/{id}.out")))
            .unwrap_or_default();
        assert!(out.contains("adopted"), "{out:?}");
    });
}

/// A global job whose input lives on c1, full of a local job, runs on c2: the service copies
/// the input into the working directory it submits with before submitting, and the job finds
/// it there.
#[test]
fn a_global_job_sent_to_slurm_away_from_its_input_finds_it_copied() {
    scenario("staging", |clusters| {
        let mut s = Scenario::start("staging", clusters, 30);
        let local = s.local(0, 8, 5, "sleep 120");
        let c1 = s.clusters[0].clone();
        wait_for("the local job running", secs(30), || {
            c1.job(&local).filter(|j| slurm_state(j) == "RUNNING")
        });
        wait_for("c1 busy in the daemon's view", secs(15), || {
            s.cluster_list()
                .iter()
                .find(|c| c["name"] == "c1")
                .filter(|c| c["busy"].as_u64() == Some(8))
                .map(|_| ())
        });
        let scratch = s.server().scratch();
        let data = scratch.join("on-c1");
        std::fs::create_dir_all(&data).unwrap();
        let f = data.join("in.dat");
        std::fs::write(&f, b"input staged to the other cluster\n").unwrap();
        let work = scratch.join("work");
        let arg = format!("{}@c1", f.display());
        let cmp = format!("cmp in.dat {}", f.display());
        let id = s.server().submit(&[
            "-n",
            "6",
            "-t",
            "1m",
            "--input",
            &arg,
            "--chdir",
            work.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &cmp,
        ]);
        let j = s.server().wait_final(id, secs(120));
        assert_eq!(j["state"], "completed", "{j}");
        assert!(
            j["parts"]
                .as_array()
                .unwrap()
                .iter()
                .all(|p| p["cluster"] == "c2"),
            "{j}"
        );
        let st = &j["staging"][0];
        assert_eq!(st["cluster"], "c2", "{j}");
        assert!(int(st, "ended_at") <= int(&j, "started_at"), "{j}");
        assert_eq!(
            std::fs::read(work.join("in.dat")).unwrap(),
            std::fs::read(&f).unwrap()
        );
        let _ = &mut s;
    });
}

/// A 3-task chain on Slurm of one processor each: A runs `first` in a slot of `walltime`,
/// B and C each a 10 s slot.
fn chain_workflow(first: &str, walltime: &str) -> String {
    format!(
        "name: chain\ntasks:\n  - {{name: A, command: [sh, -c, '{first}'], walltime: {walltime}}}\n  \
         - {{name: B, command: [sh, -c, 'sleep 3'], walltime: 10s}}\n  \
         - {{name: C, command: [sh, -c, 'sleep 3'], walltime: 10s}}\n\
         edges:\n  - {{from: A, to: B}}\n  - {{from: B, to: C}}\n"
    )
}

impl Scenario {
    /// `workflow submit FILE --reserve`; the workflow's view.
    fn submit_reserved_workflow(&self, yaml: &str) -> Value {
        let path = self.server().scratch().join("wf.yaml");
        std::fs::write(&path, yaml).unwrap();
        let id = self
            .server()
            .run(&["workflow", "submit", path.to_str().unwrap(), "--reserve"]);
        self.workflow(id.trim().parse().unwrap())
    }

    fn workflow(&self, id: u64) -> Value {
        let text = self
            .server()
            .run(&["workflow", "show", &id.to_string(), "-o", "json"]);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("workflow show ({e}): {text}"))
    }

    /// Each task's (cluster index, Slurm reservation name), checking that Slurm holds every
    /// one: one core from the task's planned start.
    fn workflow_slots(&self, w: &Value) -> Vec<(usize, String)> {
        w["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let k = self.cluster_index(t["cluster"].as_str().unwrap());
                let name = format!("foresight-{}", t["reservation"].as_u64().unwrap());
                let r = self.clusters[k]
                    .reservations()
                    .into_iter()
                    .find(|r| r.get("ReservationName") == Some(&name))
                    .unwrap_or_else(|| panic!("task {t}: no {name} in Slurm"));
                assert_eq!(r["CoreCnt"], "1", "{r:?}");
                let rec = self.reservation(t["reservation"].as_u64().unwrap());
                assert!(
                    rec["state"] == "committed" || rec["state"] == "active",
                    "{rec}"
                );
                assert_eq!(rec["start"], t["planned_start"], "{rec} {t}");
                (k, name)
            })
            .collect()
    }

    fn wait_slots_gone(&self, slots: &[(usize, String)], timeout: Duration) {
        wait_for(
            "the workflow's reservations gone from Slurm",
            timeout,
            || {
                slots
                    .iter()
                    .all(|(k, name)| !self.clusters[*k].reservation_names().contains(name))
                    .then_some(())
            },
        );
    }
}

/// `workflow submit --reserve` over Slurm: every task's slot is a Slurm reservation made
/// before the submission returns; each task runs inside its own, after its predecessor;
/// each reservation is gone once its task is over.
#[test]
fn a_reserved_workflow_runs_in_its_slurm_reservations() {
    scenario("reserved_workflow", |clusters| {
        let s = Scenario::start("reserved workflow", clusters, 30);
        let w = s.submit_reserved_workflow(&chain_workflow("sleep 3", "10s"));
        let id = w["id"].as_u64().unwrap();
        let slots = s.workflow_slots(&w);
        // The reservation each task's Slurm job runs in, read while it runs (Slurm forgets
        // it once the reservation is deleted).
        let mut ran_in: BTreeMap<u64, String> = BTreeMap::new();
        let w = wait_for(&format!("workflow {id} over"), secs(60), || {
            for t in w["tasks"].as_array().unwrap() {
                let job = t["job"].as_u64().unwrap();
                let k = s.cluster_index(t["cluster"].as_str().unwrap());
                for j in live_parts(&s, k, job) {
                    if slurm_state(&j) == "RUNNING" {
                        ran_in.insert(job, slurm_str(&j, "resv_name").to_string());
                    }
                }
            }
            let w = s.workflow(id);
            (w["state"] != "running" && w["state"] != "pending").then_some(w)
        });
        assert_eq!(w["state"], "completed", "{w}");
        let mut last_end = 0;
        for (t, (k, name)) in w["tasks"].as_array().unwrap().iter().zip(&slots) {
            let parts = s.parts(*k, t["job"].as_u64().unwrap());
            assert_eq!(parts.len(), 1, "task {t}: {:?}", parts.iter().map(brief));
            let j = &parts[0];
            let job = t["job"].as_u64().unwrap();
            assert_eq!(ran_in.get(&job), Some(name), "task {t}: {}", brief(j));
            assert_eq!(slurm_state(j), "COMPLETED", "task {t}: {}", brief(j));
            let start = slurm_time(j, "start_time");
            assert!(
                start >= last_end,
                "task {t} started before its predecessor ended"
            );
            last_end = slurm_time(j, "end_time");
        }
        s.wait_slots_gone(&slots, secs(15));
    });
}

/// Cancelling a reserved workflow whose first task runs on Slurm releases every slot there.
#[test]
fn cancelling_a_reserved_workflow_releases_its_slurm_reservations() {
    scenario("reserved_workflow_cancel", |clusters| {
        let s = Scenario::start("reserved workflow cancel", clusters, 30);
        let w = s.submit_reserved_workflow(&chain_workflow("sleep 100", "2m"));
        let id = w["id"].as_u64().unwrap();
        let slots = s.workflow_slots(&w);
        let a = w["tasks"][0]["job"].as_u64().unwrap();
        s.wait_job(a, "running", secs(20), |j| j["state"] == "running");
        s.server().run(&["workflow", "cancel", &id.to_string()]);
        s.wait_slots_gone(&slots, secs(20));
        let k = slots[0].0;
        wait_for("task A's Slurm job gone", secs(20), || {
            live_parts(&s, k, a).is_empty().then_some(())
        });
        wait_for("the workflow cancelled", secs(10), || {
            (s.workflow(id)["state"] == "cancelled").then_some(())
        });
    });
}

/// A global job of a user with history, on Slurm: planned by its prediction
/// (`tsafrir-last1`, which predicts from one run: her one global run of about a second)
/// while Slurm's time limit stays its walltime (2 minutes, `sbatch --time`); running past
/// its prediction, it is corrected once, to its walltime, and Slurm's limit is untouched
/// (the part is neither cancelled nor submitted again).
#[test]
fn a_predicted_global_part_on_slurm_keeps_its_limit_and_is_corrected() {
    scenario("predicted_part", |clusters| {
        let s = Scenario::start_with(
            "predicted part",
            clusters,
            5,
            "predict = \"tsafrir-last1\"\n",
        );
        let first = s.submit(1, "2m", "sleep 1");
        let done = s.server().wait_final(first, secs(60));
        assert_eq!(done["state"], "completed", "{done}");
        let ran = int(&done, "ended_at") - int(&done, "started_at");

        let id = s.submit(1, "2m", "sleep 30");
        let j = s
            .server()
            .wait_job(id, "running", secs(30), |j| j["state"] == "running");
        let p = &j["prediction"];
        assert_eq!(p["predictor"], "tsafrir-last1", "{j}");
        assert_eq!(p["runs"], 1, "{j}");
        // Planned by its first run's time, unless already corrected (a second or two in).
        let seconds = p["seconds"].as_i64().unwrap();
        if p["corrections"].as_u64().unwrap_or(0) == 0 {
            assert_eq!(seconds, ran.max(1), "{j}");
        } else {
            assert_eq!(seconds, 120, "{j}");
        }
        let k = s.cluster_index(j["parts"][0]["cluster"].as_str().unwrap());
        let part = s.wait_part(k, id, 0, "running", secs(30), |j| {
            slurm_state(j) == "RUNNING"
        });
        // Slurm kills it at its walltime, not at its prediction.
        assert_eq!(slurm_time(&part, "time_limit"), 2, "{}", brief(&part));

        let j = s.server().wait_job(id, "corrected", secs(20), |j| {
            j["prediction"]["corrections"] == 1
        });
        assert_eq!(j["state"], "running", "{j}");
        assert_eq!(j["prediction"]["seconds"], 120, "{j}");
        let text = s.server().run(&["job", "show", &id.to_string()]);
        assert!(text.contains("corrected 1x"), "{text}");
        let same = s.clusters[k].job(&slurm_id(&part)).unwrap();
        assert_eq!(slurm_state(&same), "RUNNING", "{}", brief(&same));
        assert_eq!(slurm_time(&same, "time_limit"), 2, "{}", brief(&same));
        assert_eq!(live_parts(&s, k, id).len(), 1);
        s.server().run(&["job", "cancel", &id.to_string()]);
        let j = s.server().wait_final(id, secs(30));
        assert_eq!(j["state"], "cancelled", "{j}");
        assert_eq!(j["prediction"]["corrections"], 1, "{j}");
    });
}

// ------------------------------------------------------- outputs across clusters' work_dirs

/// A global job pinned to c1 (`--requires c1`), c1 and c2 each with its own `work_dir`,
/// names an output for c2: its Slurm job runs in c1's `WORK/c1/job-ID`, and once it
/// completes the file is copied to `WORK/c2/job-ID` at the same relative path; `job show`
/// and the API say the copy is done.
#[test]
fn a_slurm_jobs_output_is_copied_to_another_clusters_work_dir() {
    scenario("outputs_apart", |clusters| {
        let s = Scenario::start_apart("outputs apart", clusters, 30);
        let id = s.server().submit(&[
            "-n",
            "1",
            "-t",
            "1m",
            "--requires",
            "c1",
            "--output-file",
            "out/result.txt@c2",
            "--",
            "sh",
            "-c",
            "mkdir -p out && echo \"made in $PWD\" > out/result.txt",
        ]);
        let j = s.server().wait_final(id, secs(40));
        assert_eq!(j["state"], "completed", "{j}");
        assert_eq!(j["parts"][0]["cluster"], "c1", "{j}");
        // It ran on c1, in c1's own directory for it.
        let part = s.parts(0, id);
        assert_eq!(part.len(), 1, "{:?}", part.iter().map(brief));
        let ran_in = s.work_dir("c1").join(format!("job-{id}"));
        assert_eq!(
            slurm_str(&part[0], "current_working_directory"),
            ran_in.display().to_string(),
            "{}",
            brief(&part[0])
        );
        let made = format!("made in {}\n", ran_in.display());
        assert_eq!(
            std::fs::read_to_string(ran_in.join("out/result.txt")).unwrap(),
            made
        );
        // Its output is in c2's directory for it once the copy is done.
        let j = wait_for("the output copy over", secs(20), || {
            let j = s.job(id);
            j["output_staging"]["ended_at"].is_i64().then_some(j)
        });
        let st = &j["output_staging"];
        assert_eq!(st["cluster"], "c2", "{j}");
        assert!(st["error"].is_null(), "{j}");
        assert!(j["reason"].is_null(), "{j}");
        assert!(int(st, "began_at") >= int(&j, "ended_at"), "{j}");
        let copied = s.work_dir("c2").join(format!("job-{id}/out/result.txt"));
        assert_eq!(std::fs::read_to_string(&copied).unwrap(), made);
        let shown = s.server().run(&["job", "show", &id.to_string()]);
        assert!(shown.contains("out/result.txt@c2"), "{shown}");
        assert!(shown.contains("back to c2: began"), "{shown}");
        assert!(shown.contains(", done "), "{shown}");
    });
}

/// A two-task workflow, A pinned to c1 and B to c2 (`requires`), the clusters with their
/// own `work_dir`s: the edge A -> B names the file A writes, which is copied from
/// `WORK/c1/workflow-ID` to `WORK/c2/workflow-ID` before B starts; B fails unless it reads
/// A's content there, and the workflow completes.
#[test]
fn a_workflow_edges_file_moves_from_one_slurm_cluster_to_the_other() {
    scenario("edge_files_apart", |clusters| {
        let s = Scenario::start_apart("edge files apart", clusters, 30);
        let c1 = s.work_dir("c1");
        let yaml = format!(
            r#"name: apart
tasks:
  - name: A
    command: [sh, -c, 'mkdir -p out && echo "mesh from $PWD" > out/mesh.dat']
    walltime: 1
    requires: [c1]
  - name: B
    command: [sh, -c, 'grep -qx "mesh from {c1}/workflow-[0-9]*" out/mesh.dat && cp out/mesh.dat seen.txt']
    walltime: 1
    requires: [c2]
edges:
  - {{from: A, to: B, data_mb: 1, files: [out/mesh.dat]}}
"#,
            c1 = c1.display()
        );
        let path = s.server().scratch().join("wf.yaml");
        std::fs::write(&path, yaml).unwrap();
        let id: u64 = s
            .server()
            .run(&["workflow", "submit", path.to_str().unwrap()])
            .trim()
            .parse()
            .unwrap();
        let w = wait_for(&format!("workflow {id} over"), secs(40), || {
            let w = s.workflow(id);
            (w["state"] != "running" && w["state"] != "pending").then_some(w)
        });
        let task = |name: &str| {
            w["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["name"] == name)
                .unwrap()
                .clone()
        };
        let (a, b) = (task("A"), task("B"));
        assert_eq!(a["cluster"], "c1", "{w}");
        assert_eq!(b["cluster"], "c2", "{w}");
        assert_eq!(w["state"], "completed", "{w}");
        // Each ran as a Slurm job of its cluster, in that cluster's directory for the
        // workflow.
        for (k, t) in [(0, &a), (1, &b)] {
            let parts = s.parts(k, t["job"].as_u64().unwrap());
            assert_eq!(parts.len(), 1, "task {t}: {:?}", parts.iter().map(brief));
            let name = &s.clusters[k].name;
            assert_eq!(
                slurm_str(&parts[0], "current_working_directory"),
                s.work_dir(name)
                    .join(format!("workflow-{id}"))
                    .display()
                    .to_string(),
                "task {t}: {}",
                brief(&parts[0])
            );
            assert_eq!(slurm_state(&parts[0]), "COMPLETED", "{}", brief(&parts[0]));
        }
        let seen = s.work_dir("c2").join(format!("workflow-{id}/seen.txt"));
        assert_eq!(
            std::fs::read_to_string(&seen).unwrap(),
            format!("mesh from {}/workflow-{id}\n", c1.display())
        );
        // A's job records the copy to c2, done before B started.
        let ja = s.job(a["job"].as_u64().unwrap());
        let st = &ja["output_staging"];
        assert_eq!(st["cluster"], "c2", "{ja}");
        assert!(st["error"].is_null(), "{ja}");
        assert!(int(&b, "started_at") >= int(st, "ended_at"), "{ja} {w}");
    });
}
