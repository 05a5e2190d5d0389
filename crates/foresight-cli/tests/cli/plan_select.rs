//! End-to-end: `foresight plan select` on hand-checked plans.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use assert_cmd::Command;
use predicates::str::contains;
use serde_json::{json, Value};
use std::path::PathBuf;

fn write(dir: &tempfile::TempDir, name: &str, doc: &Value) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, doc.to_string()).unwrap();
    path
}

fn select(plan: &Value, req: &Value) -> (i32, Value) {
    let dir = tempfile::tempdir().unwrap();
    let p = write(&dir, "plan.json", plan);
    let r = write(&dir, "req.json", req);
    let out = Command::cargo_bin("foresight")
        .unwrap()
        .args([
            "plan",
            "select",
            "--plan",
            p.to_str().unwrap(),
            "--request",
            r.to_str().unwrap(),
            "-o",
            "json",
        ])
        .output()
        .unwrap();
    let code = out.status.code().unwrap();
    let doc = if out.stdout.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&out.stdout).unwrap()
    };
    (code, doc)
}

fn processor(id: &str, cluster: &str, speed: f64) -> Value {
    json!({"id": id, "cluster": cluster, "speed": speed, "memory_mb": 4096, "features": ["x86_64"]})
}

/// Two clusters of two processors. c1's processors are busy until 100 and 300; c2's are free
/// from 0 but the job's input takes 50 s to reach c2.
///
/// ```text
///          0     50    100         300
/// c1/p0          ......[===========...   free from 100
/// c1/p1                            [==   free from 300
/// c2/p0    [.....======================  usable from 50 (staging)
/// c2/p1    [.....======================
/// ```
/// Three processors for 200 s: c2/p0 and c2/p1 from 50, c1/p0 from 100 → start 100.
fn two_clusters() -> Value {
    json!({
        "processors": [processor("c1/p0", "c1", 1.0), processor("c1/p1", "c1", 1.0),
                       processor("c2/p0", "c2", 1.0), processor("c2/p1", "c2", 1.0)],
        "slots": [
            {"processor": "c1/p0", "start": 100, "end": 10000, "cost": 1.0},
            {"processor": "c1/p1", "start": 300, "end": 10000, "cost": 1.0},
            {"processor": "c2/p0", "start": 0, "end": 10000, "cost": 2.0},
            {"processor": "c2/p1", "start": 0, "end": 10000, "cost": 2.0}
        ],
        "staging": {"c1": 0, "c2": 50}
    })
}

fn request(procs: u32, walltime: i64) -> Value {
    json!({"procs": procs, "walltime": walltime, "max_price": 2.0, "min_memory_mb": 0, "features": [],
           "criterion": "earliest_start", "not_before": 0, "deadline": null, "co_allocate": true})
}

#[test]
fn co_allocates_across_two_clusters_after_staging() {
    let (code, out) = select(&two_clusters(), &request(3, 200));
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["start"], 100);
    assert_eq!(out["end"], 300);
    assert_eq!(out["cost"], 200.0 * 1.0 + 2.0 * 200.0 * 2.0);
    let procs: Vec<&str> = out["slots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["processor"].as_str().unwrap())
        .collect();
    assert_eq!(procs, ["c1/p0", "c2/p0", "c2/p1"]);
    for s in out["slots"].as_array().unwrap() {
        assert_eq!(
            (s["start"].as_i64(), s["end"].as_i64()),
            (Some(100), Some(300))
        );
    }
}

#[test]
fn without_co_allocation_one_cluster_must_hold_the_job() {
    let mut req = request(2, 200);
    req["co_allocate"] = json!(false);
    let (code, out) = select(&two_clusters(), &req);
    assert_eq!(code, 0);
    // c2 from 50 (staging) beats c1 from 300.
    assert_eq!(out["start"], 50);
    let (code, out) = select(&two_clusters(), &{
        let mut r = request(3, 200);
        r["co_allocate"] = json!(false);
        r
    });
    assert_eq!(code, 3);
    assert_eq!(out["error"], "no_fit");
    assert!(
        out["reason"]
            .as_str()
            .unwrap()
            .contains("the job may not span clusters"),
        "{out}"
    );
}

#[test]
fn price_and_requirements_filter_slots() {
    let mut req = request(2, 100);
    req["max_price"] = json!(1.5);
    let (code, out) = select(&two_clusters(), &req);
    assert_eq!(code, 0);
    assert_eq!(out["start"], 300, "only c1's cheap processors qualify");
    req["features"] = json!(["gpu"]);
    let (code, out) = select(&two_clusters(), &req);
    assert_eq!(code, 3);
    assert_eq!(
        out["reason"], "only 0 processors have feature \"gpu\", 2 needed",
        "{out}"
    );
    // The price binds before the time: c1's cheap processors are 2, 3 are asked.
    let mut req = request(3, 100);
    req["max_price"] = json!(1.5);
    let (code, out) = select(&two_clusters(), &req);
    assert_eq!(code, 3);
    assert_eq!(
        out["reason"],
        "only 2 suitable processors have time at most 1.5 per processor-second, 3 needed",
        "{out}"
    );
    // A misspelt requirement is refused, not ignored.
    let mut req = request(1, 100);
    req["memory_mb"] = json!(8000);
    let dir = tempfile::tempdir().unwrap();
    let plan = write(&dir, "plan.json", &two_clusters());
    let r = write(&dir, "req.json", &req);
    Command::cargo_bin("foresight")
        .unwrap()
        .args(["plan", "select", "--plan", plan.to_str().unwrap()])
        .args(["--request", r.to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(contains("unknown field `memory_mb`"));
}

#[test]
fn malformed_input_names_the_field_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write(&dir, "plan.json", &two_clusters());
    let mut req = request(2, 100);
    req.as_object_mut().unwrap().remove("walltime");
    let r = write(&dir, "req.json", &req);
    Command::cargo_bin("foresight")
        .unwrap()
        .args([
            "plan",
            "select",
            "--plan",
            plan.to_str().unwrap(),
            "--request",
            r.to_str().unwrap(),
        ])
        .assert()
        .code(2)
        .stderr(contains("missing field `walltime`"));
    let mut bad = two_clusters();
    bad["slots"][0]["processor"] = json!("c9/p9");
    let p = write(&dir, "bad.json", &bad);
    let r = write(&dir, "req.json", &request(1, 10));
    Command::cargo_bin("foresight")
        .unwrap()
        .args([
            "plan",
            "select",
            "--plan",
            p.to_str().unwrap(),
            "--request",
            r.to_str().unwrap(),
        ])
        .assert()
        .code(2)
        .stderr(contains("slot 0: unknown processor \"c9/p9\""));
    let mut zero = request(0, 100);
    zero["procs"] = json!(0);
    let r = write(&dir, "zero.json", &zero);
    Command::cargo_bin("foresight")
        .unwrap()
        .args([
            "plan",
            "select",
            "--plan",
            plan.to_str().unwrap(),
            "--request",
            r.to_str().unwrap(),
        ])
        .assert()
        .code(2)
        .stderr(contains("procs must be at least 1"));
}
