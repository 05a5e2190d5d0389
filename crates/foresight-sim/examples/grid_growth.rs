//! How the cost of `sim grid` grows with simulated time and with clusters: synthetic grids of
//! C clusters (1 000–10 000 processors each, a synthetic local stream each at 0.7 load) and
//! a global stream of C/2 jobs an hour, run for D simulated days by each broker. Every run is
//! a child process of this one, so that its peak memory (`VmHWM`) is its own; a run that
//! exceeds `--timeout` seconds is stopped and shown as such.
//!
//! Prints one tab-separated line per run: clusters, days, broker, wall seconds, CPU seconds
//! (all threads, reading the configuration included), peak MB, and a
//! digest of the report (two builds that decide alike print the same digest); then the
//! log-log slope of wall time in days (per clusters and broker) and in clusters (per days and
//! broker), and lookahead's wall time over queue's.
//!
//! `cargo run --release -p foresight-sim --example grid_growth -- \
//!     --clusters 10,20,50,100 --days 1,7,30 --brokers lookahead,queue --timeout 600`
//!
//! `--config FILE` runs that grid instead (its days and clusters as written), for example
//! `examples/grid.toml`; `--best N` keeps the fastest of N runs of each.

#![allow(clippy::print_stdout, clippy::print_stderr, clippy::unwrap_used)] // a report tool

use foresight_sim::grid::{simulate_grid, BrokerKind, GridConfig};
use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The synthetic grid of `clusters` clusters over `days` days.
fn grid_text(clusters: usize, days: f64) -> String {
    let mut t = format!(
        "days = {days}\ncycle_seconds = 300\nlead_time_seconds = 900\nhorizon_hours = 168\n"
    );
    for k in 0..clusters {
        // Spread evenly over 1 000–10 000 processors.
        let procs = 1_000 + (9_000 * k) / clusters.saturating_sub(1).max(1);
        t += &format!(
            "[[cluster]]\nname = \"c{k}\"\nprocs = {procs}\npolicy = \"easy\"\n\
             tariff = {}\nbandwidth_mb_s = 100\nlocal = {{ load = 0.7, seed = {k} }}\n",
            1.0 + (k % 5) as f64 * 0.1
        );
    }
    t += &format!(
        "[global]\narrivals_per_hour = {}\nprocs = [8, 2000]\nruntime_seconds = [600, 14400]\n\
         estimate_factor = [1.0, 2.0]\nprice = [1.0, 4.0]\ninput_mb = 2000\n\
         no_coallocation_share = 0.2\nseed = 7\n",
        clusters as f64 / 2.0
    );
    t
}

/// Peak resident memory of this process, MB (`VmHWM`).
fn peak_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// CPU seconds this process has used, all threads (`/proc/self/stat`, at 100 ticks a
/// second): on a shared machine a steadier measure than the wall.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces), from the third on.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| {
        f.get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    (tick(11) + tick(12)) / 100.0
}

/// The child: one run, printed as `wall_s peak_mb digest`.
fn one(cfg: &GridConfig, broker: &str) {
    let kind = BrokerKind::parse(broker).unwrap();
    let started = Instant::now();
    let report = simulate_grid(cfg, kind).unwrap();
    let wall = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds();
    let mut h = DefaultHasher::new();
    format!("{report:?}").hash(&mut h);
    let jobs = report.local.jobs + report.global.jobs;
    println!(
        "{wall:.3}\t{cpu:.2}\t{:.1}\t{:016x}\t{jobs}\t{:.1}\t{:.4}",
        peak_mb(),
        h.finish(),
        report.global.mean_wait,
        report.clusters.iter().map(|c| c.utilization).sum::<f64>() / report.clusters.len() as f64
    );
}

/// Runs one child, stopping it past `timeout`: its printed line, or `None`.
fn child(args: &[String], timeout: Duration) -> Option<String> {
    let mut c = Command::new(std::env::current_exe().unwrap())
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        if let Some(status) = c.try_wait().unwrap() {
            let mut out = String::new();
            std::io::Read::read_to_string(c.stdout.as_mut().unwrap(), &mut out).unwrap();
            return status.success().then(|| out.trim().to_string());
        }
        if started.elapsed() > timeout {
            let _ = c.kill();
            let _ = c.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn list<T: std::str::FromStr>(s: &str) -> Vec<T>
where
    T::Err: std::fmt::Debug,
{
    s.split(',').map(|x| x.parse().unwrap()).collect()
}

/// Least-squares slope of log(y) over log(x).
fn slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let l: Vec<(f64, f64)> = points.iter().map(|(x, y)| (x.ln(), y.ln())).collect();
    let n = l.len() as f64;
    let mx = l.iter().map(|p| p.0).sum::<f64>() / n;
    let my = l.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = l.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = l.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    Some(sxy / sxx)
}

/// Prints the log-log slopes of wall and CPU time over `points` (x, (wall, CPU)).
fn print_slope(points: &[(f64, (f64, f64))], what: &str) {
    let wall: Vec<(f64, f64)> = points.iter().map(|&(x, (w, _))| (x, w)).collect();
    let cpu: Vec<(f64, f64)> = points.iter().map(|&(x, (_, c))| (x, c)).collect();
    if let (Some(w), Some(c)) = (slope(&wall), slope(&cpu)) {
        println!("{what}\twall {w:.2}\tCPU {c:.2}");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--one") {
        let cfg = if args[1] == "config" {
            GridConfig::read(&PathBuf::from(&args[2])).unwrap()
        } else {
            let (c, d): (usize, f64) = (args[1].parse().unwrap(), args[2].parse().unwrap());
            GridConfig::parse(&grid_text(c, d), "growth.toml").unwrap()
        };
        one(&cfg, &args[3]);
        return;
    }
    let mut clusters = vec![10usize, 20];
    let mut days = vec![1.0f64, 7.0];
    let mut brokers = vec!["lookahead".to_string(), "queue".into()];
    let mut timeout = 600u64;
    let mut config: Option<String> = None;
    let mut best = 1usize;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut v = || it.next().expect("a value").as_str();
        match a.as_str() {
            "--clusters" => clusters = list(v()),
            "--days" => days = list(v()),
            "--brokers" => brokers = list(v()),
            "--timeout" => timeout = v().parse().unwrap(),
            "--config" => config = Some(v().to_string()),
            "--best" => best = v().parse().unwrap(),
            other => panic!("unknown argument {other:?}"),
        }
    }
    let runs: Vec<(String, String, f64)> = match &config {
        Some(path) => vec![("config".into(), path.clone(), 0.0)],
        None => clusters
            .iter()
            .flat_map(|c| days.iter().map(move |d| (c.to_string(), d.to_string(), *d)))
            .collect(),
    };
    println!("clusters\tdays\tbroker\twall_s\tcpu_s\tpeak_mb\tdigest\tjobs\tglobal_wait_s\tutil");
    // (wall, CPU) seconds of each run that finished.
    let mut walls: BTreeMap<(String, String, String), (f64, f64)> = BTreeMap::new();
    for (c, d, _) in &runs {
        for b in &brokers {
            let a = vec!["--one".to_string(), c.clone(), d.clone(), b.clone()];
            let mut got: Option<(f64, f64, String)> = None;
            for _ in 0..best {
                let Some(line) = child(&a, Duration::from_secs(timeout)) else {
                    break;
                };
                let mut f = line
                    .split('\t')
                    .map(|x| x.parse::<f64>().unwrap_or(f64::NAN));
                let (wall, cpu) = (f.next().unwrap(), f.next().unwrap());
                if got.as_ref().is_none_or(|(w, _, _)| wall < *w) {
                    got = Some((wall, cpu, line));
                }
            }
            match got {
                Some((wall, cpu, line)) => {
                    println!("{c}\t{d}\t{b}\t{line}");
                    walls.insert((c.clone(), d.clone(), b.clone()), (wall, cpu));
                }
                None => println!("{c}\t{d}\t{b}\t> {timeout} s (stopped)"),
            }
        }
    }
    if config.is_some() {
        if let (Some(l), Some(q)) = (
            walls.iter().find(|(k, _)| k.2 == "lookahead"),
            walls.iter().find(|(k, _)| k.2 == "queue"),
        ) {
            println!(
                "lookahead / queue: {:.1}× wall, {:.1}× CPU",
                l.1 .0 / q.1 .0,
                l.1 .1 / q.1 .1
            );
        }
        return;
    }
    for b in &brokers {
        for c in &clusters {
            let pts: Vec<(f64, (f64, f64))> = days
                .iter()
                .filter_map(|d| Some((*d, *walls.get(&(c.to_string(), d.to_string(), b.clone()))?)))
                .collect();
            print_slope(&pts, &format!("slope in days\t{b}\t{c} clusters"));
        }
        for d in &days {
            let pts: Vec<(f64, (f64, f64))> = clusters
                .iter()
                .filter_map(|c| {
                    let w = walls.get(&(c.to_string(), d.to_string(), b.clone()))?;
                    Some((*c as f64, *w))
                })
                .collect();
            print_slope(&pts, &format!("slope in clusters\t{b}\t{d} days"));
        }
    }
    for (k, w) in walls.iter().filter(|(k, _)| k.2 == "lookahead") {
        if let Some(q) = walls.get(&(k.0.clone(), k.1.clone(), "queue".into())) {
            println!(
                "lookahead / queue\t{} clusters\t{} days\t{:.1}× wall\t{:.1}× CPU",
                k.0,
                k.1,
                w.0 / q.0,
                w.1 / q.1
            );
        }
    }
}
