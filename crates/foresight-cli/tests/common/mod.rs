//! The real `foresight` daemon on a free loopback port with a temporary data directory, the
//! CLI pointed at it, and a small blocking HTTP client for what the CLI does not show.

#![allow(dead_code)] // each test file uses a different part

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tempfile::TempDir;

/// Two local clusters `a` and `b` of 2 processors each.
pub const TWO_CLUSTERS: &str = r#"
[[cluster]]
name = "a"
procs = 2

[[cluster]]
name = "b"
procs = 2
"#;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_foresight");

/// A loopback port free at the time of asking.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Seconds since the epoch, as the service counts.
pub fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Waits until a fraction of a second at most `max_subsec` past a whole second, so that a
/// process started now and killed after N whole seconds ends in the same second as its
/// start + N (the service's clock has whole seconds).
pub fn align_to_second(max_subsec: f64) {
    loop {
        let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let sub = d.subsec_nanos() as f64 / 1e9;
        if sub <= max_subsec {
            return;
        }
        std::thread::sleep(Duration::from_secs_f64(1.0 - sub + 0.005));
    }
}

/// Polls `f` every 50 ms until it gives a value; panics naming `what` after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A running daemon (or one that was stopped and can be started again on the same data).
pub struct Server {
    tmp: TempDir,
    /// The data directory.
    pub dir: PathBuf,
    config: Option<PathBuf>,
    procs: Option<u32>,
    /// `--store URL` of the next launch (None: the data directory's SQLite file).
    pub store: Option<String>,
    child: Option<Child>,
    /// `http://127.0.0.1:PORT` of the current run.
    pub url: String,
    /// The admin token.
    pub token: String,
    starts: u32,
    /// `FORESIGHT_LOG` of the daemon.
    log: String,
    /// `--listen` of the next launch (None: a free port); set it to the current address to
    /// restart on the same port.
    pub listen: Option<String>,
    /// Variables the daemon is started with, besides the test's own environment.
    pub env: Vec<(String, String)>,
    /// Started with `--standby`: a launch returns once it stands by.
    pub standby: bool,
    /// The command the daemon is started under (e.g. `ip netns exec NS`), empty for none.
    pub wrap: Vec<String>,
}

impl Server {
    /// The default single local cluster named `local` with `procs` virtual processors.
    pub fn start(procs: u32) -> Server {
        Server::new(None, Some(procs))
    }

    /// A server with this configuration file text.
    pub fn with_config(toml: &str) -> Server {
        Server::new(Some(toml), None)
    }

    /// A server with this configuration file text logging at `level` (`FORESIGHT_LOG`).
    pub fn with_config_logging(toml: &str, level: &str) -> Server {
        Server::build(Some(toml), None, level)
    }

    /// The default single local cluster of `procs` processors, on the store at `url`
    /// (`server start --store URL`).
    pub fn with_store(procs: u32, url: &str) -> Server {
        Server::build_on(None, Some(procs), "warn", Some(url.to_string()))
    }

    fn new(toml: Option<&str>, procs: Option<u32>) -> Server {
        Server::build(toml, procs, "warn")
    }

    fn build(toml: Option<&str>, procs: Option<u32>, level: &str) -> Server {
        Server::build_on(toml, procs, level, None)
    }

    /// A server with this configuration, on the store at `url`.
    pub fn with_config_and_store(toml: &str, url: &str) -> Server {
        Server::build_on(Some(toml), None, "warn", Some(url.to_string()))
    }

    /// A server with this configuration logging at `level`, started under `wrap` (e.g. `ip
    /// netns exec NS`, so it runs in another network namespace) and listening on `listen`.
    pub fn wrapped(toml: &str, level: &str, wrap: &[String], listen: &str) -> Server {
        Server::wrapped_on(toml, level, wrap, listen, None)
    }

    /// [`Server::wrapped`] on the store `store` (None: the data directory's SQLite file).
    pub fn wrapped_on(
        toml: &str,
        level: &str,
        wrap: &[String],
        listen: &str,
        store: Option<&str>,
    ) -> Server {
        let mut s = Server::prepared(Some(toml), None, level, store.map(str::to_string));
        s.wrap = wrap.to_vec();
        s.listen = Some(listen.to_string());
        s.launch();
        s
    }

    /// A standby (`--standby`) with this configuration for the service holding the
    /// PostgreSQL store `url`, listening on `listen`; the administrator's token is the
    /// active one's, `admin_token` (the store keeps its hash). Returns once it stands by.
    pub fn standby(toml: &str, url: &str, listen: &str, admin_token: &str) -> Server {
        Server::standby_under(toml, url, listen, admin_token, &[])
    }

    /// [`Server::standby`] started under `wrap` (e.g. `ip netns exec NS`).
    pub fn standby_under(
        toml: &str,
        url: &str,
        listen: &str,
        admin_token: &str,
        wrap: &[String],
    ) -> Server {
        let mut s = Server::prepared(Some(toml), None, "warn", Some(url.to_string()));
        s.wrap = wrap.to_vec();
        s.standby = true;
        s.listen = Some(listen.to_string());
        std::fs::create_dir_all(&s.dir).unwrap();
        std::fs::write(s.dir.join("admin.token"), format!("{admin_token}\n")).unwrap();
        s.launch();
        s
    }

    /// Waits until this standby has taken over (its `server.url` written); how long that
    /// took.
    pub fn wait_active(&mut self, timeout: Duration) -> Duration {
        let t0 = Instant::now();
        let url = wait_for("the standby active", timeout, || {
            std::fs::read_to_string(self.dir.join("server.url"))
                .ok()
                .filter(|s| s.ends_with('\n'))
        });
        assert_eq!(url.trim(), self.url);
        t0.elapsed()
    }

    fn build_on(
        toml: Option<&str>,
        procs: Option<u32>,
        level: &str,
        store: Option<String>,
    ) -> Server {
        let mut s = Server::prepared(toml, procs, level, store);
        s.launch();
        s
    }

    /// A server not started yet.
    fn prepared(
        toml: Option<&str>,
        procs: Option<u32>,
        level: &str,
        store: Option<String>,
    ) -> Server {
        let tmp = tempfile::tempdir().unwrap();
        let dir = std::fs::canonicalize(tmp.path()).unwrap().join("data");
        let config = toml.map(|t| {
            let path = tmp.path().join("foresight.toml");
            std::fs::write(&path, t).unwrap();
            path
        });
        Server {
            tmp,
            dir,
            config,
            procs,
            store,
            child: None,
            url: String::new(),
            token: String::new(),
            starts: 0,
            // FORESIGHT_TEST_LOG overrides every server's level: a flaky failure's logs.
            log: std::env::var("FORESIGHT_TEST_LOG").unwrap_or_else(|_| level.to_string()),
            listen: None,
            env: Vec::new(),
            standby: false,
            wrap: Vec::new(),
        }
    }

    /// The default single local cluster of `procs` processors, the daemon started with the
    /// variables `env` besides the test's own.
    pub fn with_env(procs: u32, env: &[(&str, &str)]) -> Server {
        let mut s = Server::start(procs);
        s.sigterm(Duration::from_secs(10));
        s.env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        s.launch();
        s
    }

    /// A scratch directory next to the data directory (for files jobs write).
    pub fn scratch(&self) -> PathBuf {
        let p = std::fs::canonicalize(self.tmp.path())
            .unwrap()
            .join("scratch");
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    /// The (canonical) temporary directory holding the data and scratch directories.
    pub fn root(&self) -> PathBuf {
        std::fs::canonicalize(self.tmp.path()).unwrap()
    }

    /// The daemon's stderr log of its current (or last) run.
    pub fn stderr_path(&self) -> PathBuf {
        self.tmp.path().join(format!("stderr.{}.log", self.starts))
    }

    /// Starts the daemon (again) on the same data directory and waits for its `server.url`.
    pub fn launch(&mut self) {
        assert!(self.child.is_none(), "the server is already running");
        let url_file = self.dir.join("server.url");
        // A SIGKILLed daemon leaves its old address behind.
        let _ = std::fs::remove_file(&url_file);
        std::fs::create_dir_all(&self.dir).unwrap();
        self.starts += 1;
        let log = |name: &str| {
            std::fs::File::create(self.tmp.path().join(format!("{name}.{}.log", self.starts)))
                .unwrap()
        };
        let mut cmd = match self.wrap.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(BIN);
                c
            }
            None => Command::new(BIN),
        };
        let listen = self.listen.as_deref().unwrap_or("127.0.0.1:0");
        cmd.args(["server", "start", "--listen", listen, "--data-dir"])
            .arg(&self.dir)
            .env("FORESIGHT_LOG", &self.log)
            // Tests run as root in CI: their users' jobs run as root on purpose (the
            // isolation test maps its own users to throwaway accounts).
            .env("FORESIGHT_UNIX_USER", "*=root")
            .env_remove("FORESIGHT_SERVER")
            .env_remove("FORESIGHT_TOKEN")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log("stdout"))
            .stderr(log("stderr"));
        if let Some(c) = &self.config {
            cmd.arg("--config").arg(c);
        }
        if let Some(n) = self.procs {
            cmd.arg("--procs").arg(n.to_string());
        }
        if let Some(url) = &self.store {
            cmd.arg("--store").arg(url);
        }
        if self.standby {
            cmd.arg("--standby");
            let mut child = cmd.spawn().unwrap();
            let stdout = self.tmp.path().join(format!("stdout.{}.log", self.starts));
            wait_for("standing by", Duration::from_secs(30), || {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("the standby exited at start with {status}: {}", self.logs());
                }
                let out = std::fs::read_to_string(&stdout).unwrap_or_default();
                out.contains("standing by").then_some(())
            });
            self.url = format!("http://{}", self.listen.as_deref().unwrap());
            self.token = std::fs::read_to_string(self.dir.join("admin.token"))
                .unwrap()
                .trim()
                .to_string();
            self.child = Some(child);
            return;
        }
        let mut child = cmd.spawn().unwrap();
        let url = wait_for("server.url", Duration::from_secs(30), || {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the server exited at start with {status}: {}", self.logs());
            }
            std::fs::read_to_string(&url_file)
                .ok()
                .filter(|s| s.ends_with('\n'))
        });
        self.url = url.trim().to_string();
        self.token = std::fs::read_to_string(self.dir.join("admin.token"))
            .unwrap()
            .trim()
            .to_string();
        self.child = Some(child);
    }

    /// The daemon's pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// SIGKILL, and reap it.
    pub fn sigkill(&mut self) {
        let mut child = self.child.take().expect("running");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// SIGTERM; the exit status once it has exited, or None if it is still running after
    /// `timeout` (then it is killed).
    pub fn sigterm(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let mut child = self.child.take().expect("running");
        let ok = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits at most `timeout` for the daemon to exit by itself: its exit status.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let child = self.child.as_mut().expect("running");
        let status = wait_for("the server to exit", timeout, || child.try_wait().unwrap());
        self.child = None;
        status
    }

    /// What the daemon printed, for failure messages.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for n in 1..=self.starts {
            for name in ["stdout", "stderr"] {
                let p = self.tmp.path().join(format!("{name}.{n}.log"));
                if let Ok(text) = std::fs::read_to_string(p) {
                    out.push_str(&format!("--- server {name} (run {n}) ---\n{text}"));
                }
            }
        }
        out
    }

    /// The CLI as the administrator, through the default data directory (its `server.url`
    /// and `admin.token`), as on the machine that runs the server.
    pub fn cli(&self) -> assert_cmd::Command {
        let mut c = assert_cmd::Command::new(BIN);
        c.env("FORESIGHT_DATA_DIR", &self.dir)
            .env("TZ", "UTC")
            .env_remove("FORESIGHT_SERVER")
            .env_remove("FORESIGHT_TOKEN")
            .env_remove("XDG_DATA_HOME")
            .current_dir(self.scratch())
            .timeout(Duration::from_secs(60));
        c
    }

    /// The CLI as the owner of `token`, with the server given by `FORESIGHT_SERVER`.
    pub fn cli_as(&self, token: &str) -> assert_cmd::Command {
        let mut c = assert_cmd::Command::new(BIN);
        c.env("FORESIGHT_SERVER", &self.url)
            .env("TZ", "UTC")
            .env("FORESIGHT_TOKEN", token)
            .env("FORESIGHT_DATA_DIR", self.tmp.path().join("nowhere"))
            .current_dir(self.scratch())
            .timeout(Duration::from_secs(60));
        c
    }

    /// Runs the admin CLI; its stdout, panicking with stderr on failure.
    pub fn run(&self, args: &[&str]) -> String {
        run_ok(self.cli(), args)
    }

    /// Runs the CLI as `token`; its stdout, panicking with stderr on failure.
    pub fn run_as(&self, token: &str, args: &[&str]) -> String {
        run_ok(self.cli_as(token), args)
    }

    /// Submits through the admin CLI; the job id.
    pub fn submit(&self, args: &[&str]) -> u64 {
        let mut a = vec!["job", "submit"];
        a.extend_from_slice(args);
        self.run(&a).trim().parse().unwrap()
    }

    /// `job show ID -o json` through the CLI.
    pub fn show(&self, id: u64) -> Value {
        serde_json::from_str(&self.run(&["job", "show", &id.to_string(), "-o", "json"])).unwrap()
    }

    /// A direct HTTP client as the administrator.
    pub fn http(&self) -> Http {
        Http::new(&self.url, &self.token)
    }

    /// A direct HTTP client as the owner of `token`.
    pub fn http_as(&self, token: &str) -> Http {
        Http::new(&self.url, token)
    }

    /// Creates a user through the CLI; their token.
    pub fn add_user(&self, name: &str, budget: Option<f64>) -> String {
        let mut args = vec!["user".to_string(), "add".into(), name.into()];
        if let Some(b) = budget {
            args.push("--budget".into());
            args.push(b.to_string());
        }
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let token = self.run(&a).trim().to_string();
        assert_eq!(token.len(), 48, "a token: {token:?}");
        token
    }

    /// Polls a job (HTTP) until `pred` holds; the job then.
    pub fn wait_job(
        &self,
        id: u64,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let http = self.http();
        let deadline = Instant::now() + timeout;
        loop {
            let (status, j) = http.get(&format!("/jobs/{id}"));
            assert_eq!(status, 200, "{j}");
            if pred(&j) {
                return j;
            }
            assert!(
                Instant::now() < deadline,
                "timed out after {timeout:?} waiting for job {id} {what}; it is {j}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Scheduling cycles the running service has run since it started (`/metrics`): a test
    /// waits for cycles rather than for time before reading what they decided.
    pub fn cycles(&self) -> u64 {
        let text = reqwest::blocking::Client::new()
            .get(format!("{}/metrics", self.url))
            .bearer_auth(&self.token)
            .send()
            .unwrap()
            .text()
            .unwrap();
        text.lines()
            .find(|l| l.starts_with("foresight_cycles_total"))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("foresight_cycles_total missing: {text}"))
    }

    /// Polls a job until it is in a final state.
    pub fn wait_final(&self, id: u64, timeout: Duration) -> Value {
        self.wait_job(id, "final", timeout, is_final)
    }

    /// Stops every job process still running under this data directory (sleepers left over
    /// by a test): SIGKILL to the process group each supervisor recorded, when the attempt
    /// has no outcome yet.
    fn kill_leftover_jobs(&self) {
        let Ok(clusters) = std::fs::read_dir(self.dir.join("clusters")) else {
            return;
        };
        for cluster in clusters.flatten() {
            let Ok(attempts) = std::fs::read_dir(cluster.path()) else {
                continue;
            };
            for attempt in attempts.flatten() {
                let p = attempt.path();
                if p.join("status.json").exists() {
                    continue;
                }
                let pgid = std::fs::read_to_string(p.join("job.json"))
                    .ok()
                    .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                    .and_then(|v| v["job"]["pgid"].as_i64());
                if let Some(pgid) = pgid.filter(|&g| g > 1) {
                    let _ = Command::new("kill")
                        .args(["-KILL", "--", &format!("-{pgid}")])
                        .stderr(Stdio::null())
                        .status();
                }
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.is_some() {
            let _ = self.sigterm(Duration::from_secs(10));
        }
        self.kill_leftover_jobs();
        if std::thread::panicking() {
            eprintln!("{}", self.logs());
        }
    }
}

/// Runs the CLI with `args`; its standard output, or a failure that shows its error.
pub fn run_ok(mut c: assert_cmd::Command, args: &[&str]) -> String {
    let out = c.args(args).output().unwrap();
    assert!(
        out.status.success(),
        "foresight {} failed ({}): {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Is this job (JSON) in a final state?
pub fn is_final(j: &Value) -> bool {
    matches!(
        j["state"].as_str(),
        Some("completed" | "failed" | "cancelled" | "timeout")
    )
}

/// A job field as i64 (panics when absent or null).
pub fn int(j: &Value, field: &str) -> i64 {
    j[field]
        .as_i64()
        .unwrap_or_else(|| panic!("job field {field} is not a number: {j}"))
}

/// A CA and a server certificate it signed for 127.0.0.1 and localhost, as PEM files in `dir`:
/// (ca.pem, cert.pem, key.pem).
pub fn private_ca(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "Foresight test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut leaf =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".into()]).unwrap();
    leaf.distinguished_name
        .push(DnType::CommonName, "localhost");
    let cert = leaf.signed_by(&key, &ca_cert, &ca_key).unwrap();
    let paths = (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&paths.0, ca_cert.pem()).unwrap();
    std::fs::write(&paths.1, cert.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    paths
}

/// A blocking client trusting the CA in PEM file `ca` (see [`private_ca`]).
pub fn https_client(ca: &Path) -> reqwest::blocking::Client {
    let pem = std::fs::read(ca).unwrap();
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
        .build()
        .unwrap()
}

/// A minimal blocking JSON client of the REST API.
pub struct Http {
    client: reqwest::blocking::Client,
    base: String,
    token: String,
}

impl Http {
    /// A client of `base` with this bearer token.
    pub fn new(base: &str, token: &str) -> Http {
        Http {
            client: reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
            base: base.to_string(),
            token: token.to_string(),
        }
    }

    /// A client of `base` over HTTPS with this bearer token, trusting the CA in PEM file
    /// `ca` (see [`private_ca`]).
    pub fn with_ca(base: &str, token: &str, ca: &Path) -> Http {
        Http {
            client: https_client(ca),
            base: base.to_string(),
            token: token.to_string(),
        }
    }

    fn url(&self, path: &str) -> String {
        if path.starts_with('/') && !path.starts_with("/api/") && !path.starts_with("/healthz") {
            format!("{}/api/v1{path}", self.base)
        } else {
            format!("{}{path}", self.base)
        }
    }

    fn answer(resp: reqwest::blocking::Response) -> (u16, Value) {
        let status = resp.status().as_u16();
        let text = resp.text().unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, body)
    }

    /// GET `/api/v1{path}`: status and JSON body.
    pub fn get(&self, path: &str) -> (u16, Value) {
        Http::answer(
            self.client
                .get(self.url(path))
                .bearer_auth(&self.token)
                .send()
                .unwrap(),
        )
    }

    /// POST `/api/v1{path}` with a JSON body: status and JSON body.
    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        Http::answer(self.try_post(path, body).unwrap())
    }

    /// POST that may fail to reach the server.
    pub fn try_post(
        &self,
        path: &str,
        body: &Value,
    ) -> Result<reqwest::blocking::Response, reqwest::Error> {
        self.client
            .post(self.url(path))
            .bearer_auth(&self.token)
            .json(body)
            .send()
    }

    /// Every job the caller can see.
    pub fn jobs(&self) -> Vec<Value> {
        let (status, v) = self.get("/jobs?limit=100000");
        assert_eq!(status, 200, "{v}");
        v.as_array().unwrap().clone()
    }

    /// The parts of a centre's job `id` that a site holds (this service is the site), of
    /// any attempt: its jobs named `foresight-<id>.<attempt>`.
    pub fn grid_parts(&self, id: u64) -> Vec<Value> {
        let prefix = format!("foresight-{id}.");
        self.jobs()
            .into_iter()
            .filter(|p| p["name"].as_str().is_some_and(|n| n.starts_with(&prefix)))
            .collect()
    }

    /// Submits one job; the id (panics unless 201).
    pub fn submit(&self, job: Value) -> u64 {
        let (status, v) = self.post("/jobs", &job);
        assert_eq!(status, 201, "{v}");
        v["id"].as_u64().unwrap()
    }
}

/// A job request body for the API.
pub fn job_body(procs: u32, walltime: i64, command: &[&str]) -> Value {
    json!({ "procs": procs, "walltime": walltime, "command": command })
}

/// `path`'s lines.
pub fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}
