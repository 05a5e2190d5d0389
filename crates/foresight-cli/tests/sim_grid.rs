//! End-to-end: `foresight sim grid` on a small synthetic grid.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use assert_cmd::Command;
use predicates::str::contains;
use serde_json::Value;

const GRID: &str = r#"
days = 0.5
[[cluster]]
name = "a"
procs = 32
local = { load = 0.5, seed = 1 }
[[cluster]]
name = "b"
procs = 32
local = { load = 0.5, seed = 2 }
[global]
arrivals_per_hour = 3
procs = [4, 60]
runtime_seconds = [300, 3600]
price = [2.0, 6.0]
"#;

#[test]
fn compares_the_three_brokers() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("grid.toml");
    std::fs::write(&cfg, GRID).unwrap();
    let out = Command::cargo_bin("foresight")
        .unwrap()
        .args([
            "sim",
            "grid",
            "--config",
            cfg.to_str().unwrap(),
            "-o",
            "json",
        ])
        .assert()
        .success();
    let reports: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let brokers: Vec<&str> = reports
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["broker"].as_str().unwrap())
        .collect();
    assert_eq!(brokers, ["lookahead", "queue", "dedicated:0.25"]);
    for r in reports.as_array().unwrap() {
        for key in [
            "local",
            "global",
            "local_delay",
            "coallocated_share",
            "charged",
            "clusters",
            "max_start_skew",
        ] {
            assert!(r.get(key).is_some(), "missing {key}");
        }
    }
    // Jobs of more than 32 processors run only co-allocated.
    assert!(reports[0]["coallocated_share"].as_f64().unwrap() > 0.0);
    assert_eq!(reports[0]["global_refused"], 0);
    assert!(reports[1]["global_refused"].as_u64().unwrap() > 0);
    Command::cargo_bin("foresight")
        .unwrap()
        .args([
            "sim",
            "grid",
            "--config",
            cfg.to_str().unwrap(),
            "--broker",
            "lookahead",
        ])
        .assert()
        .success()
        .stdout(contains("largest start skew of a co-allocated job: 0 s"));
}

#[test]
fn bad_grids_and_brokers_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("grid.toml");
    std::fs::write(
        &cfg,
        GRID.replace(
            "procs = 32\nlocal = { load = 0.5, seed = 2 }",
            "procs = 32\nlocal = { trace = \"missing.swf\" }",
        ),
    )
    .unwrap();
    Command::cargo_bin("foresight")
        .unwrap()
        .args([
            "sim",
            "grid",
            "--config",
            cfg.to_str().unwrap(),
            "--broker",
            "queue",
        ])
        .assert()
        .code(1)
        .stderr(contains("missing.swf: No such file"));
    Command::cargo_bin("foresight")
        .unwrap()
        .args([
            "sim",
            "grid",
            "--config",
            cfg.to_str().unwrap(),
            "--broker",
            "auction",
        ])
        .assert()
        .code(1)
        .stderr(contains("is not a broker"));
}
