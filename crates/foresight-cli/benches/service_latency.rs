//! The real service, measured from outside as its users see it:
//!
//! 1. `submit→running`: one-processor global jobs submitted one at a time to an idle local
//!    cluster; the time from the POST until `GET /jobs/ID` says `running` (polled every 2 ms).
//! 2. `100 × true`: 100 jobs of walltime 10 s running `true` on 4 processors, submitted at
//!    once; the time until the last one completed.
//! 3. `under a 10 000-job cycle`: ten clusters held by local blockers, 10 000 global jobs
//!    queued and planned every cycle (`plan_depth = 10000`); meanwhile the latency of
//!    `GET /api/v1/jobs?limit=50` and of a submission, with the cycles' own time from
//!    `/metrics`.
//!
//! Run with `cargo bench -p foresight-cli --bench service_latency`. `FORESIGHT_BIN=PATH`
//! measures another build of the binary (an older one, to compare).
#![allow(clippy::unwrap_used, clippy::print_stdout)]

use reqwest::blocking::Client;
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Server {
    child: Child,
    url: String,
    token: String,
    client: Client,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(config: &str) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let cfg = dir.path().join("foresight.toml");
        std::fs::write(&cfg, config).unwrap();
        let bin = std::env::var("FORESIGHT_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_foresight").to_string());
        let child = Command::new(bin)
            .args(["server", "start", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&data)
            .arg("--config")
            .arg(&cfg)
            .env("FORESIGHT_LOG", "warn")
            // Run as root, jobs run as root on purpose (no throwaway accounts here).
            .env("FORESIGHT_UNIX_USER", "*=root")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let url = wait("server.url", || {
            std::fs::read_to_string(data.join("server.url"))
                .ok()
                .filter(|s| s.ends_with('\n'))
        });
        let token = std::fs::read_to_string(data.join("admin.token")).unwrap();
        Server {
            child,
            url: format!("{}/api/v1", url.trim()),
            token: token.trim().to_string(),
            client: Client::builder()
                .timeout(Duration::from_secs(120))
                .build()
                .unwrap(),
            _dir: dir,
        }
    }

    fn get(&self, path: &str) -> Value {
        let r = self
            .client
            .get(format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .send()
            .unwrap();
        r.json().unwrap()
    }

    fn post(&self, path: &str, body: &Value) -> Value {
        let r = self
            .client
            .post(format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .unwrap();
        assert!(r.status().is_success(), "{path}: {}", r.status());
        r.json().unwrap()
    }

    fn metric(&self, name: &str) -> Option<f64> {
        let base = self.url.trim_end_matches("/api/v1");
        let text = self
            .client
            .get(format!("{base}/metrics"))
            .bearer_auth(&self.token)
            .send()
            .ok()?
            .text()
            .ok()?;
        text.lines()
            .find(|l| l.starts_with(name) && !l.starts_with('#'))
            .and_then(|l| l.split_whitespace().last()?.parse().ok())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// `p`-quantile (0..=1) of sorted milliseconds.
fn q(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn summary(name: &str, mut ms: Vec<f64>) {
    ms.sort_by(f64::total_cmp);
    println!(
        "{name:<40} n={:<5} p50 {:>8.1} ms  p90 {:>8.1} ms  p99 {:>8.1} ms  max {:>8.1} ms",
        ms.len(),
        q(&ms, 0.5),
        q(&ms, 0.9),
        q(&ms, 0.99),
        ms[ms.len() - 1]
    );
}

fn job(procs: u32, walltime: i64, command: &[&str]) -> Value {
    json!({"procs": procs, "walltime": walltime, "command": command})
}

fn submit_to_running() {
    let s = Server::start("[[cluster]]\nname = \"local\"\nprocs = 4\n");
    let mut ms = Vec::new();
    for _ in 0..30 {
        let t = Instant::now();
        let id = s.post("/jobs", &job(1, 10, &["true"]))["id"]
            .as_u64()
            .unwrap();
        wait("running", || {
            let j = s.get(&format!("/jobs/{id}"));
            (j["state"] != "pending" && j["state"] != "planned" && j["state"] != "reserved")
                .then_some(())
        });
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        wait("completed", || {
            (s.get(&format!("/jobs/{id}"))["state"] == "completed").then_some(())
        });
    }
    summary("submit -> running (idle cluster)", ms);
}

fn hundred_true() {
    let s = Server::start("[[cluster]]\nname = \"local\"\nprocs = 4\n");
    let jobs: Vec<Value> = (0..100).map(|_| job(1, 10, &["true"])).collect();
    let t = Instant::now();
    s.post("/jobs/batch", &json!({ "jobs": jobs }));
    wait("100 completed", || {
        let all = s.get("/jobs?limit=1000&state=completed");
        (all.as_array().map_or(0, Vec::len) >= 100).then_some(())
    });
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{:<40} {secs:.2} s ({:.1} jobs/s)",
        "100 x true, -t 10s, 4 processors",
        100.0 / secs
    );
}

fn under_a_big_cycle() {
    let mut config = String::from("plan_depth = 10000\n");
    for k in 0..10 {
        config.push_str(&format!("[[cluster]]\nname = \"c{k}\"\nprocs = 100\n"));
    }
    let s = Server::start(&config);
    for k in 0..10 {
        let mut blocker = job(100, 7200, &["sleep", "7200"]);
        blocker["cluster"] = json!(format!("c{k}"));
        s.post("/jobs", &blocker);
    }
    let mut seed = 7u64;
    let mut next = |n: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((seed >> 33) % n) as i64
    };
    for _ in 0..10 {
        let jobs: Vec<Value> = (0..1000)
            .map(|_| job(1 + next(100) as u32, 600 + next(7200), &["true"]))
            .collect();
        s.post("/jobs/batch", &json!({ "jobs": jobs }));
    }
    // Let the cycles over the whole queue begin.
    wait("a cycle over the queue", || {
        (s.metric("foresight_cycle_duration_seconds").unwrap_or(0.0) > 0.05).then_some(())
    });
    let t = Instant::now();
    let mut reads = Vec::new();
    let mut writes = Vec::new();
    let mut cycle = Vec::new();
    while t.elapsed() < Duration::from_secs(20) {
        for _ in 0..10 {
            let a = Instant::now();
            let list = s.get("/jobs?limit=50");
            assert!(list.is_array());
            reads.push(a.elapsed().as_secs_f64() * 1e3);
        }
        let a = Instant::now();
        s.post("/jobs", &job(1, 600, &["true"]));
        writes.push(a.elapsed().as_secs_f64() * 1e3);
        if let Some(c) = s.metric("foresight_cycle_duration_seconds") {
            cycle.push(c * 1e3);
        }
    }
    summary("GET /jobs?limit=50 during cycles", reads);
    summary("POST /jobs during cycles", writes);
    summary("cycle over 10 000 queued jobs", cycle);
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument runs only the matching part.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let on = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str()));
    if !Path::new(env!("CARGO_BIN_EXE_foresight")).exists()
        && std::env::var("FORESIGHT_BIN").is_err()
    {
        eprintln!("the foresight binary is not built");
        return;
    }
    if on("latency") {
        submit_to_running();
    }
    if on("throughput") {
        hundred_true();
    }
    if on("cycle") {
        under_a_big_cycle();
    }
}
