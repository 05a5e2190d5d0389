//! End-to-end: `foresight sim run` with runtime predictions on a hand-checked trace (the
//! trace of `crates/foresight-sim/tests/simulation/prediction.rs`).

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use assert_cmd::Command;
use predicates::str::contains;
use serde_json::Value;

/// With `tsafrir-last1`, user 1's job 2 is predicted from job 1 (10 s) and corrected at 30;
/// job 4 backfills at 30 with a prediction; without predictions it waits until 60. The
/// paper's `tsafrir` needs two terminated jobs of the user, so here it plans as plain EASY.
const USERS: &str = "; MaxProcs: 4
1  0 -1 10 4 -1 -1 4 100 -1 1 1 1 -1 1 -1 -1 -1
2 20 -1 30 2 -1 -1 2 100 -1 1 1 1 -1 1 -1 -1 -1
3 25 -1 10 4 -1 -1 4 100 -1 1 2 1 -1 1 -1 -1 -1
4 26 -1  5 2 -1 -1 2 100 -1 1 1 1 -1 1 -1 -1 -1
";

fn json_run(trace: &str, extra: &[&str]) -> Value {
    let out = Command::cargo_bin("foresight")
        .unwrap()
        .args(["sim", "run", "--trace", trace, "-o", "json"])
        .args(extra)
        .assert()
        .success();
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

#[test]
fn predictions_change_the_schedule_and_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users.swf");
    std::fs::write(&path, USERS).unwrap();
    let t = path.to_str().unwrap();
    let plain = json_run(t, &[]);
    assert_eq!(plain["predict"], "none");
    assert_eq!(plain["backfill_order"], "fcfs");
    assert_eq!(plain["clip"], true);
    assert_eq!(plain["mean_wait"], (25.0 + 34.0) / 4.0);
    assert_eq!(plain["max_wait"], 34);
    assert_eq!(plain["p99_wait"], 34);
    assert_eq!(plain["over_1d"], 0);
    assert_eq!(plain["correction"], "incremental");
    assert_eq!(plain["starvation_guard"], true);
    assert_eq!(plain["guard_after"], 86_400);
    let paper = json_run(t, &["--predict", "tsafrir", "--backfill-order", "spf"]);
    assert_eq!(paper["predict"], "tsafrir");
    assert_eq!(paper["backfill_order"], "spf");
    assert_eq!(paper["mean_wait"], plain["mean_wait"]);
    let plus = json_run(
        t,
        &[
            "--predict",
            "tsafrir-last1",
            "--correction",
            "estimate",
            "--backfill-order",
            "spf",
        ],
    );
    assert_eq!(plus["predict"], "tsafrir-last1");
    assert_eq!(plus["correction"], "estimate");
    assert_eq!(plus["mean_wait"], (25.0 + 4.0) / 4.0);
    let kept = json_run(t, &["--predict", "app", "--no-clip"]);
    assert_eq!(kept["clip"], false);
}

#[test]
fn unknown_predictors_and_orders_are_refused_by_name() {
    Command::cargo_bin("foresight")
        .unwrap()
        .args(["sim", "run", "--predict", "oracle"])
        .assert()
        .failure()
        .stderr(contains("\"oracle\" is not a predictor"));
    Command::cargo_bin("foresight")
        .unwrap()
        .args(["sim", "run", "--backfill-order", "ljf"])
        .assert()
        .failure()
        .stderr(contains("\"ljf\" is not a backfill order"));
}
