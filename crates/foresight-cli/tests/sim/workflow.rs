//! End-to-end: `foresight sim workflow` on a small synthetic grid.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use assert_cmd::Command;
use predicates::str::contains;
use serde_json::Value;

const CFG: &str = r#"
seeds = 2
start_hours = 4
spacing_hours = 4
window_hours = 4
shapes = ["chain", "montage"]
[workflow]
tasks = 10
task_procs = [1, 8]
[[cluster]]
name = "a"
procs = 16
local = { load = 0.6, seed = 1 }
[[cluster]]
name = "b"
procs = 16
local = { load = 0.6, seed = 2 }
"#;

#[test]
fn reports_each_shape_and_mapper() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("workflow.toml");
    std::fs::write(&cfg, CFG).unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["sim", "workflow", "--config", cfg.to_str().unwrap()];
        args.extend_from_slice(extra);
        Command::cargo_bin("foresight")
            .unwrap()
            .args(args)
            .assert()
            .success()
    };
    let out = run(&["--seeds", "3", "-o", "json"]);
    let report: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(report["seeds"], 3);
    let rows: Vec<(String, String)> = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["shape"].as_str().unwrap().into(),
                r["mapper"].as_str().unwrap().into(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = ["chain", "montage"]
        .iter()
        .flat_map(|s| ["dsc", "heft", "greedy"].map(|m| (s.to_string(), m.to_string())))
        .collect();
    assert_eq!(rows, want);
    run(&[])
        .stdout(contains("2 seeds per shape"))
        .stdout(contains("makespan (s)"))
        .stdout(contains("montage      greedy"));
}

#[test]
fn a_bad_config_fails_naming_the_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("bad.toml");
    std::fs::write(&cfg, CFG.replace("tasks = 10", "tasks = 0")).unwrap();
    Command::cargo_bin("foresight")
        .unwrap()
        .args(["sim", "workflow", "--config", cfg.to_str().unwrap()])
        .assert()
        .code(1)
        .stderr(contains("bad.toml"))
        .stderr(contains("workflow.tasks must be in 1..=10000"));
}
