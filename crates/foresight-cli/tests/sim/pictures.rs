//! End-to-end: `sim sweep`, and the figures of `sim run --plot` and `sim grid --plot`, on
//! the real binary with traces the tests make themselves.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use assert_cmd::Command;
use predicates::str::contains;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The hand-checked trace of the simulator tests: EASY backfills job 3 at 10, FCFS does not.
const TINY: &str = "; MaxProcs: 4
1   0 -1 100 2 -1 -1 2 100 -1 1 1 1 -1 1 -1 -1 -1
2   0 -1  50 4 -1 -1 4  50 -1 1 2 1 -1 1 -1 -1 -1
3  10 -1  20 2 -1 -1 2  20 -1 1 3 1 -1 1 -1 -1 -1
";

fn foresight() -> Command {
    Command::cargo_bin("foresight").unwrap()
}

fn stdout(cmd: &mut Command) -> String {
    let out = cmd.assert().success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

/// A small trace of `jobs` synthetic jobs on `procs` processors, as `sim run --jobs-out`
/// writes it (with its `; MaxProcs:` header).
fn synthetic_trace(dir: &Path, name: &str, jobs: u32, procs: u32, seed: u32) -> PathBuf {
    let path = dir.join(name);
    foresight()
        .args(["sim", "run", "--policy", "easy", "-o", "json"])
        .args(["--jobs", &jobs.to_string(), "--procs", &procs.to_string()])
        .args(["--seed", &seed.to_string(), "--load", "0.9"])
        .arg("--jobs-out")
        .arg(&path)
        .assert()
        .success();
    path
}

/// The trace with every submission time divided by `load`, rounded down.
fn scaled(path: &Path, load: f64) -> PathBuf {
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            if l.trim_start().starts_with(';') || l.trim().is_empty() {
                return l.to_string();
            }
            let mut f: Vec<String> = l.split_whitespace().map(str::to_string).collect();
            let submit: i64 = f[1].parse().unwrap();
            f[1] = ((submit as f64 / load).floor() as i64).to_string();
            f.join(" ")
        })
        .collect();
    let out = path.with_extension(format!("x{load}.swf"));
    std::fs::write(&out, lines.join("\n") + "\n").unwrap();
    out
}

#[test]
fn sweep_rows_equal_the_sim_runs_they_combine() {
    let dir = tempfile::tempdir().unwrap();
    let a = synthetic_trace(dir.path(), "a.swf", 300, 32, 1);
    let b = synthetic_trace(dir.path(), "b.swf", 200, 64, 2);
    let cfg = dir.path().join("sweep.toml");
    std::fs::write(
        &cfg,
        r#"
traces = ["a.swf", "b.swf"]
policies = ["fcfs", "easy", "conservative"]
depth = [3]
backfill = ["firstfit", "bestfit"]
order = ["fcfs", "sjf"]
semantics = ["default", "pyss"]
load = [1.0, 1.5]
"#,
    )
    .unwrap();
    let rows: Value = serde_json::from_str(&stdout(
        foresight()
            .args(["sim", "sweep", "-o", "json", "--config"])
            .arg(&cfg),
    ))
    .unwrap();
    let rows = rows.as_array().unwrap();
    // Per trace: fcfs once per order, semantics and load (8), three backfilling policies
    // × 2 backfills × 8.
    assert_eq!(rows.len(), 2 * (8 + 3 * 2 * 8));
    let mut seen = std::collections::BTreeSet::new();
    for row in rows {
        let trace = dir.path().join(row["trace"].as_str().unwrap());
        assert!(trace == a || trace == b, "{row}");
        let load = row["load"].as_f64().unwrap();
        let trace = if load == 1.0 {
            trace
        } else {
            scaled(&trace, load)
        };
        let policy = row["policy"].as_str().unwrap();
        let mut run = foresight();
        run.args(["sim", "run", "-o", "json", "--policy", policy])
            .arg("--trace")
            .arg(&trace)
            .args(["--order", row["order"].as_str().unwrap()])
            .args(["--semantics", row["semantics"].as_str().unwrap()]);
        if policy != "fcfs" {
            run.args(["--backfill", row["backfill"].as_str().unwrap()]);
        }
        let single: Value = serde_json::from_str(&stdout(&mut run)).unwrap();
        for key in [
            "procs",
            "policy",
            "backfill",
            "order",
            "semantics",
            "jobs",
            "mean_wait",
            "mean_response",
            "mean_slowdown",
            "mean_bsld",
            "max_wait",
            "utilization",
            "makespan",
        ] {
            assert_eq!(
                row[key], single[key],
                "{key}: sweep {row} vs sim run {single}"
            );
        }
        assert!(row["jobs"].as_u64().unwrap() > 100, "{row}");
        seen.insert(row.to_string());
    }
    assert_eq!(seen.len(), rows.len(), "a row is repeated");
    // Backfilling and load change the figures: the rows are not one run repeated.
    let waits: std::collections::BTreeSet<String> =
        rows.iter().map(|r| r["mean_wait"].to_string()).collect();
    assert!(waits.len() > rows.len() / 3, "{waits:?}");
}

fn tiny_sweep(dir: &Path) -> PathBuf {
    std::fs::write(dir.join("tiny.swf"), TINY).unwrap();
    let cfg = dir.join("sweep.toml");
    std::fs::write(
        &cfg,
        "traces = [\"tiny.swf\"]\npolicies = [\"fcfs\", \"easy\", \"conservative\"]\nload = [1.0, 2.0]\n",
    )
    .unwrap();
    cfg
}

#[test]
fn sweep_table_and_csv() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_sweep(dir.path());
    let table = stdout(foresight().args(["sim", "sweep", "--config"]).arg(&cfg));
    insta::assert_snapshot!("sweep_table", table);
    let csv = stdout(
        foresight()
            .args(["sim", "sweep", "-o", "csv", "--config"])
            .arg(&cfg),
    );
    insta::assert_snapshot!("sweep_csv", csv);
    // The comparison figure: a panel per figure of merit, a row per run, a bar per trace.
    let plots = dir.path().join("figures");
    foresight()
        .args(["sim", "sweep", "--config"])
        .arg(&cfg)
        .arg("--plot")
        .arg(&plots)
        .assert()
        .success();
    let s = svg(&plots.join("sweep.svg"));
    for panel in [
        "mean bounded slowdown (log)",
        "mean wait (s, log)",
        "utilization (%)",
    ] {
        assert!(s.texts.iter().any(|t| t == panel), "{panel}: {:?}", s.texts);
    }
    for run in ["fcfs none", "easy firstfit ×2", "conservative firstfit"] {
        let n = s.texts.iter().filter(|t| *t == run).count();
        assert_eq!(n, 3, "{run} once per panel: {:?}", s.texts);
    }
    assert_eq!(s.texts.iter().filter(|t| *t == "tiny.swf").count(), 3);
}

#[test]
fn bad_sweeps_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("sweep.toml");
    std::fs::write(&cfg, "traces = [\"missing.swf\"]\npolicies = [\"easy\"]\n").unwrap();
    foresight()
        .args(["sim", "sweep", "--config"])
        .arg(&cfg)
        .assert()
        .code(1)
        .stderr(contains("missing.swf: No such file"));
    std::fs::write(&cfg, "traces = [\"a.swf\"]\npolicies = [\"eazy\"]\n").unwrap();
    foresight()
        .args(["sim", "sweep", "--config"])
        .arg(&cfg)
        .assert()
        .code(1)
        .stderr(contains("sweep.toml: policies: \"eazy\" is not a policy"));
}

/// A parsed SVG: its text and its polylines' point counts.
struct Svg {
    texts: Vec<String>,
    /// Point counts of the polylines (series lines have many, legend marks two).
    polylines: Vec<usize>,
    rects: usize,
}

fn svg(path: &Path) -> Svg {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc = roxmltree::Document::parse(&text)
        .unwrap_or_else(|e| panic!("{} is not XML: {e}", path.display()));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let mut s = Svg {
        texts: Vec::new(),
        polylines: Vec::new(),
        rects: 0,
    };
    for n in doc.descendants() {
        match n.tag_name().name() {
            "text" => s.texts.push(n.text().unwrap_or("").trim().to_string()),
            "polyline" => s.polylines.push(
                n.attribute("points")
                    .unwrap_or("")
                    .split_whitespace()
                    .count(),
            ),
            "rect" => s.rects += 1,
            _ => {}
        }
    }
    s
}

const FIGURES: [&str; 5] = [
    "utilization.svg",
    "queue.svg",
    "wait_cdf.svg",
    "bsld_size.svg",
    "bsld_runtime.svg",
];

#[test]
fn sim_run_plot_writes_one_series_per_figure() {
    let dir = tempfile::tempdir().unwrap();
    let trace = synthetic_trace(dir.path(), "t.swf", 400, 32, 3);
    let plots = dir.path().join("figures");
    foresight()
        .args(["sim", "run", "--policy", "conservative", "--trace"])
        .arg(&trace)
        .arg("--plot")
        .arg(&plots)
        .assert()
        .success()
        .stderr(contains("wrote 5 figures"));
    for name in FIGURES {
        let s = svg(&plots.join(name));
        assert!(s.texts.iter().any(|t| t.starts_with("sim run: ")), "{name}");
        // The trace by its file name, not where it lies, and the machine's size.
        assert!(
            s.texts.iter().any(|t| t == "t.swf, 32 processors"),
            "{name}: panel title"
        );
        assert!(
            s.texts.iter().any(|t| t == "conservative"),
            "{name}: legend"
        );
        let lines = s.polylines.iter().filter(|&&n| n > 2).count();
        if name.starts_with("bsld") {
            assert_eq!(lines, 0, "{name}");
            // One bar per class, the legend's mark, the background and the legend box.
            assert!(s.rects >= 5, "{name}: {} rects", s.rects);
        } else {
            assert_eq!(lines, 1, "{name}: {:?}", s.polylines);
            assert!(
                s.polylines.iter().any(|&n| n >= 50),
                "{name}: {:?}",
                s.polylines
            );
        }
    }
    let size = svg(&plots.join("bsld_size.svg"));
    for class in ["1", "2–4", "5–16"] {
        assert!(size.texts.iter().any(|t| t == class), "size class {class}");
    }
    // An unusable DIR fails before simulating.
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    foresight()
        .args(["sim", "run", "--jobs", "10", "--plot"])
        .arg(&file)
        .assert()
        .code(1)
        .stderr(contains("--plot"));
}

const GRID: &str = r#"
days = 0.5
[[cluster]]
name = "alpha"
procs = 32
local = { load = 0.5, seed = 1 }
[[cluster]]
name = "beta"
procs = 32
local = { trace = "local.swf" }
[global]
arrivals_per_hour = 3
procs = [4, 60]
runtime_seconds = [300, 3600]
price = [2.0, 6.0]
"#;

/// Local jobs for cluster beta: two of 30 processors, more than a dedicated:0.25 partition
/// leaves the owners (24), and small ones.
const LOCAL: &str = "; MaxProcs: 32
1     0 -1  600 30 -1 -1 30  900 -1 1 1 1 -1 1 -1 -1 -1
2   100 -1  300  4 -1 -1  4  600 -1 1 2 1 -1 1 -1 -1 -1
3   200 -1  300  8 -1 -1  8  600 -1 1 2 1 -1 1 -1 -1 -1
4  3000 -1 1200 30 -1 -1 30 1800 -1 1 3 1 -1 1 -1 -1 -1
5  4000 -1  300  2 -1 -1  2  600 -1 1 2 1 -1 1 -1 -1 -1
";

fn grid(dir: &Path) -> PathBuf {
    std::fs::write(dir.join("local.swf"), LOCAL).unwrap();
    let cfg = dir.join("grid.toml");
    std::fs::write(&cfg, GRID).unwrap();
    cfg
}

#[test]
fn sim_grid_shows_the_local_jobs_the_dedicated_broker_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = grid(dir.path());
    let table = stdout(foresight().args(["sim", "grid", "--config"]).arg(&cfg));
    let header = table.lines().next().unwrap();
    assert!(header.contains("local rej"), "{table}");
    let row = |broker: &str| {
        table
            .lines()
            .find(|l| l.starts_with(broker))
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .to_string()
    };
    assert_eq!(row("lookahead"), "0", "{table}");
    assert_eq!(row("queue"), "0", "{table}");
    assert_eq!(row("dedicated:0.25"), "2", "{table}");
    assert!(
        table.contains("dedicated:0.25: 2 local jobs rejected (2 on beta)"),
        "{table}"
    );
    assert!(
        table.contains("the compared local job sets differ"),
        "{table}"
    );
    // Alone, a broker that rejects nothing says nothing about it.
    let table = stdout(
        foresight()
            .args(["sim", "grid", "--broker", "queue", "--config"])
            .arg(&cfg),
    );
    assert!(!table.contains("rejected"), "{table}");
}

#[test]
fn sim_grid_plot_puts_clusters_side_by_side_and_brokers_in_each() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = grid(dir.path());
    let plots = dir.path().join("grid-figures");
    foresight()
        .args(["sim", "grid", "--config"])
        .arg(&cfg)
        .arg("--plot")
        .arg(&plots)
        .assert()
        .success();
    for name in FIGURES {
        let s = svg(&plots.join(name));
        assert!(
            s.texts.iter().any(|t| t.starts_with("sim grid: ")),
            "{name}"
        );
        for panel in ["alpha", "beta"] {
            assert!(s.texts.iter().any(|t| t == panel), "{name}: panel {panel}");
        }
        for broker in ["lookahead", "queue", "dedicated:0.25"] {
            let legends = s.texts.iter().filter(|t| *t == broker).count();
            assert_eq!(legends, 2, "{name}: {broker} in each panel's legend");
        }
        if !name.starts_with("bsld") {
            let lines = s.polylines.iter().filter(|&&n| n > 2).count();
            assert_eq!(lines, 2 * 3, "{name}: {:?}", s.polylines);
        }
    }
}
