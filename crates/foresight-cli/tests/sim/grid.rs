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

/// The example grid with a cluster of two speed groups and a user on a small budget: every
/// broker reports per user, the books balance, the small budget refuses jobs and stays above
/// zero, and the table lists the users after the clusters.
#[test]
fn the_mixed_example_reports_per_user() {
    let example =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/grid-mixed.toml");
    let out = Command::cargo_bin("foresight")
        .unwrap()
        .args([
            "sim",
            "grid",
            "--config",
            example.to_str().unwrap(),
            "-o",
            "json",
        ])
        .assert()
        .success();
    let reports: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(reports.as_array().unwrap().len(), 3);
    for r in reports.as_array().unwrap() {
        let users = r["users"].as_array().unwrap();
        let ids: Vec<u64> = users.iter().map(|u| u["user"].as_u64().unwrap()).collect();
        assert_eq!(ids, [1, 2], "{}", r["broker"]);
        for key in [
            "submitted",
            "refused",
            "finished",
            "mean_wait",
            "mean_bsld",
            "charged",
            "budget",
            "remaining",
        ] {
            assert!(users[0].get(key).is_some(), "missing users[].{key}");
        }
        let charged: f64 = users.iter().map(|u| u["charged"].as_f64().unwrap()).sum();
        let total = r["charged"].as_f64().unwrap();
        assert!((charged - total).abs() <= 1e-9 * total.max(1.0), "{r}");
        let submitted: u64 = users.iter().map(|u| u["submitted"].as_u64().unwrap()).sum();
        assert_eq!(submitted, r["global_submitted"].as_u64().unwrap());
        for u in users {
            assert!(u["remaining"].as_f64().unwrap() >= 0.0, "{u}");
        }
        let small = &users[1];
        assert_eq!(small["budget"].as_f64(), Some(5e5));
        assert!(small["refused"].as_u64().unwrap() > 0, "{small}");
        assert!(small["charged"].as_f64().unwrap() <= 5e5, "{small}");
    }
    // The planner gives the lookahead broker the fast group; it runs every job it takes.
    assert_eq!(reports[0]["global_unfinished"], 0);
    Command::cargo_bin("foresight")
        .unwrap()
        .args([
            "sim",
            "grid",
            "--config",
            example.to_str().unwrap(),
            "--broker",
            "queue",
        ])
        .assert()
        .success()
        .stdout(contains("remaining"))
        .stdout(contains("500000"));
}

#[test]
fn users_without_an_entry_have_no_budget_limit() {
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
            "--broker",
            "lookahead",
            "-o",
            "json",
        ])
        .assert()
        .success();
    let reports: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let users = reports[0]["users"].as_array().unwrap();
    assert_eq!(users.len(), 1);
    assert_eq!(users[0]["user"], 0);
    assert!(users[0]["budget"].is_null());
    assert!(users[0]["remaining"].is_null());
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
        .stdout(contains("unlimited"));
}

#[test]
fn seeds_give_intervals_and_paired_differences() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("grid.toml");
    std::fs::write(&cfg, GRID).unwrap();
    let run = |extra: &[&str]| -> Value {
        let mut args = vec![
            "sim",
            "grid",
            "--config",
            cfg.to_str().unwrap(),
            "-o",
            "json",
        ];
        args.extend_from_slice(extra);
        let out = Command::cargo_bin("foresight")
            .unwrap()
            .args(&args)
            .assert()
            .success();
        serde_json::from_slice(&out.get_output().stdout).unwrap()
    };
    let doc = run(&["--broker", "lookahead", "--seeds", "3"]);
    assert_eq!(doc["seeds"], 3);
    let runs = doc["runs"][0]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    // The first seed's run is the plain run of the configuration.
    let single = run(&["--broker", "lookahead"]);
    assert_eq!(runs[0], single[0]);
    let waits: Vec<f64> = runs
        .iter()
        .map(|r| r["local"]["mean_wait"].as_f64().unwrap())
        .collect();
    let mean = waits.iter().sum::<f64>() / 3.0;
    let summary = &doc["summary"][0];
    assert!((summary["local_wait"]["mean"].as_f64().unwrap() - mean).abs() < 1e-9);
    assert!(summary["local_wait"]["half_width"].as_f64().unwrap() > 0.0);

    let table = Command::cargo_bin("foresight")
        .unwrap()
        .args([
            "sim",
            "grid",
            "--config",
            cfg.to_str().unwrap(),
            "--seeds",
            "2",
        ])
        .args(["--broker", "all"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&table.get_output().stdout).to_string();
    assert!(
        text.contains("paired on the same seeds, against lookahead"),
        "{text}"
    );
    assert!(text.contains("dedicated:0.25"), "{text}");

    Command::cargo_bin("foresight")
        .unwrap()
        .args([
            "sim",
            "grid",
            "--config",
            cfg.to_str().unwrap(),
            "--seeds",
            "0",
        ])
        .assert()
        .failure()
        .stderr(contains("--seeds"));
    Command::cargo_bin("foresight")
        .unwrap()
        .args([
            "sim",
            "grid",
            "--config",
            cfg.to_str().unwrap(),
            "--seeds",
            "2",
        ])
        .args(["--plot", dir.path().to_str().unwrap()])
        .assert()
        .failure()
        .stderr(contains("--plot draws one run"));
}

/// `--levels 4` draws four priority levels over the global stream: the report gives each
/// level's figures and what preemption did, in the table and in JSON, for one seed and over
/// seeds; one level (the default) adds nothing to either. Bad level counts are named.
#[test]
fn levels_are_reported_per_level() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("grid.toml");
    std::fs::write(
        &cfg,
        GRID.replace("arrivals_per_hour = 3", "arrivals_per_hour = 8"),
    )
    .unwrap();
    let sim = |extra: &[&str]| {
        let mut args = vec!["sim", "grid", "--config", cfg.to_str().unwrap()];
        args.extend_from_slice(extra);
        let out = Command::cargo_bin("foresight")
            .unwrap()
            .args(&args)
            .assert()
            .success();
        String::from_utf8_lossy(&out.get_output().stdout).to_string()
    };
    let doc: Value = serde_json::from_str(&sim(&[
        "--broker",
        "lookahead",
        "--levels",
        "4",
        "-o",
        "json",
    ]))
    .unwrap();
    let levels = &doc[0]["levels"];
    let per = levels["per_level"].as_array().unwrap();
    assert_eq!(per.len(), 4, "{levels}");
    let finished: u64 = per.iter().map(|l| l["finished"].as_u64().unwrap()).sum();
    assert_eq!(finished, doc[0]["global"]["jobs"].as_u64().unwrap());
    assert!(levels["preemptions"].as_u64().unwrap() > 0, "{levels}");
    assert_eq!(doc[0]["global_unfinished"], 0);

    let one: Value = serde_json::from_str(&sim(&["--broker", "lookahead", "-o", "json"])).unwrap();
    assert!(one[0].get("levels").is_none(), "{}", one[0]);

    let text = sim(&["--broker", "lookahead", "--levels", "4"]);
    assert!(
        text.contains("response") && text.contains("preemptions:"),
        "{text}"
    );
    let text = sim(&["--broker", "lookahead", "--levels", "2", "--seeds", "2"]);
    assert!(text.contains("per priority level"), "{text}");
    assert!(text.contains("preemptions per run"), "{text}");

    Command::cargo_bin("foresight")
        .unwrap()
        .args([
            "sim",
            "grid",
            "--config",
            cfg.to_str().unwrap(),
            "--levels",
            "0",
        ])
        .assert()
        .failure()
        .stderr(contains("--levels"));
    std::fs::write(
        &cfg,
        GRID.replace("price = [2.0, 6.0]", "price = [2.0, 6.0]\nlevels = 0"),
    )
    .unwrap();
    Command::cargo_bin("foresight")
        .unwrap()
        .args(["sim", "grid", "--config", cfg.to_str().unwrap()])
        .assert()
        .failure()
        .stderr(contains("global.levels must be within [1, 1000], got 0"));
    std::fs::write(
        &cfg,
        GRID.replace(
            "price = [2.0, 6.0]",
            "price = [2.0, 6.0]\nrequeue_share = 1.5",
        ),
    )
    .unwrap();
    Command::cargo_bin("foresight")
        .unwrap()
        .args(["sim", "grid", "--config", cfg.to_str().unwrap()])
        .assert()
        .failure()
        .stderr(contains(
            "global.requeue_share must be within [0, 1], got 1.5",
        ));
}
