//! End-to-end, on the real binary and service: small defects users met (issue 35, item 8).
//! - `job wait` on an array waits for every task.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use crate::common::*;
use serde_json::Value;

/// The jobs (JSON) of array job `id`.
fn tasks(s: &Server, id: u64) -> Vec<Value> {
    s.http()
        .jobs()
        .into_iter()
        .filter(|j| j["array_job_id"] == id)
        .collect()
}

#[test]
fn job_wait_on_an_array_waits_for_every_task_with_the_first_failure_as_its_code() {
    let s = Server::start(4);
    // Task 0 ends at once, task 1 completes later, task 2 later still and fails.
    let script =
        "case $FORESIGHT_ARRAY_TASK_ID in 0) exit 0;; 1) sleep 2;; *) sleep 3; exit 4;; esac";
    let id = s.submit(&[
        "--cluster",
        "local",
        "-t",
        "1m",
        "--array",
        "0-2",
        "--",
        "sh",
        "-c",
        script,
    ]);
    let out = s
        .cli()
        .args(["job", "wait", &id.to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    // When it returns, every task has ended, not only task 0.
    let ts = tasks(&s, id);
    assert_eq!(ts.len(), 3, "{ts:?}");
    assert!(
        ts.iter().all(is_final),
        "job wait returned early: {text}\n{ts:#?}"
    );
    // Its code is that of the first task that did not complete, as for several jobs.
    assert_eq!(out.status.code(), Some(4), "{text}");
    for t in 0..3 {
        assert!(text.contains(&format!("job {id}_{t}: ")), "{text}");
    }
    assert!(
        text.contains(&format!("job {id}_2: failed, exit code 4")),
        "{text}"
    );
    // One task waits for it alone; JSON lists every task of an array.
    let one = s
        .cli()
        .args(["job", "wait", &format!("{id}_1")])
        .output()
        .unwrap();
    assert_eq!(one.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(one.stdout).unwrap(),
        format!("job {id}_1: completed, exit code 0\n")
    );
    let json = s
        .cli()
        .args(["job", "wait", &id.to_string(), "-o", "json"])
        .output()
        .unwrap();
    assert_eq!(json.status.code(), Some(4));
    let json: Vec<Value> = serde_json::from_slice(&json.stdout).unwrap();
    let indices: Vec<u64> = json
        .iter()
        .map(|j| j["array_task_id"].as_u64().unwrap())
        .collect();
    assert_eq!(indices, [0, 1, 2], "{json:#?}");
}
