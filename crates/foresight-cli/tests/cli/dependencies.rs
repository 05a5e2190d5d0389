//! Job dependencies and arrays through the real `foresight` binary and service: chains that
//! wait, dependencies that can never hold, arrays with a limit on tasks running at once,
//! array task ids, and all of it surviving a restart.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use crate::common::*;
use serde_json::{json, Value};
use std::time::Duration;

const T: Duration = Duration::from_secs(60);

fn show_ref(s: &Server, id: &str) -> Value {
    serde_json::from_str(&s.run(&["job", "show", id, "-o", "json"])).unwrap()
}

#[test]
fn afterok_chain_starts_b_only_after_a_completes() {
    let s = Server::start(4);
    let a = s.submit(&["-t", "1m", "--", "sleep", "2"]);
    let b = s.submit(&[
        "-t",
        "1m",
        "--dependency",
        &format!("afterok:{a}"),
        "--",
        "true",
    ]);
    let jb = s.show(b);
    assert_eq!(jb["state"], "pending", "{jb}");
    assert_eq!(jb["dependency"], format!("afterok:{a}"));
    let reason = jb["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("Dependency: waiting for afterok:"),
        "{reason}"
    );
    // Visible as Slurm shows it, in the list, in show and in explain.
    let list = s.run(&["job", "list"]);
    assert!(list.contains("pending (Dependency)"), "{list}");
    let explain = s.run(&["job", "explain", &b.to_string()]);
    assert!(
        explain.contains(&format!("Dependency: waiting for afterok:{a}")),
        "{explain}"
    );
    let ja = s.wait_final(a, T);
    let jb = s.wait_final(b, T);
    assert_eq!(ja["state"], "completed");
    assert_eq!(jb["state"], "completed", "{jb}");
    assert!(
        int(&jb, "started_at") >= int(&ja, "ended_at"),
        "B started at {} before A ended at {}",
        jb["started_at"],
        ja["ended_at"]
    );
}

#[test]
fn never_satisfiable_dependencies_cancel_and_unknown_ids_are_refused() {
    let s = Server::start(4);
    let a = s.submit(&["--cluster", "local", "-t", "1m", "--", "sleep", "1"]);
    let notok = s.submit(&[
        "--cluster",
        "local",
        "--dependency",
        &format!("afternotok:{a}"),
        "--",
        "true",
    ]);
    let any = s.submit(&[
        "--cluster",
        "local",
        "--dependency",
        &format!("afterany:{a}"),
        "--",
        "true",
    ]);
    let j = s.wait_final(notok, T);
    assert_eq!(s.show(a)["state"], "completed");
    assert_eq!(j["state"], "cancelled", "{j}");
    assert!(j["started_at"].is_null());
    assert_eq!(
        j["reason"],
        format!(
            "DependencyNeverSatisfied: afternotok:{a} can never hold (afternotok:{a} (job {a} \
             is completed))"
        )
    );
    assert_eq!(s.wait_final(any, T)["state"], "completed");
    // afterok on a job that failed: cancelled as soon as submitted.
    let f = s.submit(&["--cluster", "local", "--", "false"]);
    assert_eq!(s.wait_final(f, T)["state"], "failed");
    let ok = s.submit(&["--dependency", &format!("afterok:{f}"), "--", "true"]);
    let j = s.show(ok);
    assert_eq!(j["state"], "cancelled", "{j}");
    // An unknown id, or one of another user's jobs, is refused alike, naming it.
    let out = s
        .cli()
        .args(["job", "submit", "--dependency", "afterok:999", "--", "true"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no job 999"), "{err}");
    let bob = s.add_user("bob", None);
    let (status, v) = s.http_as(&bob).post(
        "/jobs",
        &json!({"walltime": 60, "command": ["true"], "dependency": format!("afterok:{a}")}),
    );
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["field"], "dependency");
    assert_eq!(v["message"], format!("no job {a} (in \"afterok:{a}\")"));
    let (_, v999) = s.http_as(&bob).post(
        "/jobs",
        &json!({"walltime": 60, "command": ["true"], "dependency": "afterok:999"}),
    );
    assert_eq!(v999["message"], "no job 999 (in \"afterok:999\")");
    // Malformed specs are refused by the CLI before it looks for a server.
    let out = s
        .cli()
        .args(["job", "submit", "--dependency", "afterok:", "--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--dependency: \"afterok:\" names no job: write afterok:ID[:ID...]"),
        "{err}"
    );
    let out = s
        .cli()
        .args(["job", "submit", "--array", "0-99%0", "--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "--array: \"0-99%0\": the %N limit on tasks running at once must be at least 1"
        ),
        "{err}"
    );
    let (status, v) = s.http().post(
        "/jobs",
        &json!({"walltime": 60, "command": ["true"], "array": "0-20000"}),
    );
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["field"], "array");
    assert_eq!(
        v["message"],
        "0-20000 has 20001 tasks; an array may have at most 10000"
    );
}

#[test]
fn array_with_limit_never_runs_more_than_two_and_each_task_sees_its_index() {
    let s = Server::start(8);
    let out = s.scratch().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let script = format!(
        "echo task=$FORESIGHT_ARRAY_TASK_ID array=$FORESIGHT_ARRAY_JOB_ID > {}/$FORESIGHT_ARRAY_TASK_ID; sleep 1",
        out.display()
    );
    let id = s.submit(&[
        "--cluster",
        "local",
        "-t",
        "1m",
        "--name",
        "sweep",
        "--array",
        "0-5%2",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    let http = s.http();
    let tasks = |http: &Http| -> Vec<Value> {
        http.jobs()
            .into_iter()
            .filter(|j| j["array_job_id"] == id)
            .collect()
    };
    assert_eq!(tasks(&http).len(), 6);
    // While they run, never more than two at once.
    let done = wait_for("the array to end", T, || {
        let ts = tasks(&http);
        let running = ts.iter().filter(|j| j["state"] == "running").count();
        assert!(running <= 2, "{running} tasks running at once");
        ts.iter().all(is_final).then_some(ts)
    });
    let mut spans: Vec<(i64, i64)> = done
        .iter()
        .map(|j| {
            assert_eq!(j["state"], "completed", "{j}");
            (int(j, "started_at"), int(j, "ended_at"))
        })
        .collect();
    spans.sort();
    // From the recorded times: at every start, at most two (it included) have started and
    // not yet ended.
    for &(start, _) in &spans {
        let overlapping = spans
            .iter()
            .filter(|&&(s2, e2)| s2 <= start && e2 > start)
            .count();
        assert!(
            overlapping <= 2,
            "{overlapping} tasks overlap at {start}: {spans:?}"
        );
    }
    let mut indices: Vec<u64> = done
        .iter()
        .map(|j| j["array_task_id"].as_u64().unwrap())
        .collect();
    indices.sort();
    assert_eq!(indices, vec![0, 1, 2, 3, 4, 5]);
    for i in 0..6 {
        let text = std::fs::read_to_string(out.join(i.to_string())).unwrap();
        assert_eq!(text.trim(), format!("task={i} array={id}"));
    }
    // The list and show name tasks as ARRAY_TASK.
    let list = s.run(&["job", "list", "--all"]);
    assert!(list.contains(&format!("{id}_5")), "{list}");
    let t3 = show_ref(&s, &format!("{id}_3"));
    assert_eq!(t3["array_task_id"], 3);
    assert_eq!(t3["array_job_id"], id);
}

#[test]
fn cancel_takes_one_task_or_the_whole_array_and_links_survive_a_restart() {
    let mut s = Server::start(2);
    let blocker = s.submit(&["--cluster", "local", "-t", "1m", "--", "sleep", "30"]);
    let id = s.submit(&[
        "--cluster",
        "local",
        "--array",
        "1,3,5-7%1",
        "--dependency",
        &format!("afterany:{blocker}"),
        "--",
        "true",
    ]);
    let after = s.submit(&[
        "--cluster",
        "local",
        "--dependency",
        &format!("afterok:{id}_6"),
        "--",
        "true",
    ]);
    let t1 = show_ref(&s, &format!("{id}_1"));
    assert_eq!(t1["id"], id);
    assert_eq!(t1["state"], "pending");
    // Restart: the waits are remembered.
    s.sigterm(Duration::from_secs(30));
    s.launch();
    let t5 = show_ref(&s, &format!("{id}_5"));
    assert_eq!(t5["state"], "pending", "{t5}");
    assert!(
        t5["reason"].as_str().unwrap().starts_with("Dependency:"),
        "{t5}"
    );
    assert_eq!(t5["dependency"], format!("afterany:{blocker}"));
    assert_eq!(show_ref(&s, &after.to_string())["state"], "pending");
    // One task cancelled; then the blocker; the others run one at a time.
    let out = s.run(&["job", "cancel", &format!("{id}_3")]);
    assert_eq!(out.trim(), format!("job {id}_3: cancelled"));
    s.run(&["job", "cancel", &blocker.to_string()]);
    let ja = s.wait_final(after, T);
    assert_eq!(ja["state"], "completed", "{ja}");
    let states: Vec<String> = s
        .http()
        .jobs()
        .iter()
        .filter(|j| j["array_job_id"] == id)
        .map(|j| format!("{}={}", j["array_task_id"], j["state"].as_str().unwrap()))
        .collect();
    assert!(states.contains(&"3=cancelled".to_string()), "{states:?}");
    assert!(states.contains(&"6=completed".to_string()), "{states:?}");
    // A whole array is cancelled by its id.
    let b = s.submit(&["--cluster", "local", "--", "sleep", "30"]);
    let arr = s.submit(&[
        "--cluster",
        "local",
        "--array",
        "0-3",
        "--dependency",
        &format!("afterok:{b}"),
        "--",
        "true",
    ]);
    s.run(&["job", "cancel", &arr.to_string()]);
    let cancelled = s
        .http()
        .jobs()
        .iter()
        .filter(|j| j["array_job_id"] == arr)
        .filter(|j| j["state"] == "cancelled")
        .count();
    assert_eq!(cancelled, 4);
    s.run(&["job", "cancel", &b.to_string()]);
}

#[test]
fn singleton_runs_one_job_of_a_name_at_a_time() {
    let s = Server::start(4);
    let ids: Vec<u64> = (0..3)
        .map(|_| {
            s.submit(&[
                "--cluster",
                "local",
                "--name",
                "nightly",
                "--dependency",
                "singleton",
                "--",
                "sleep",
                "1",
            ])
        })
        .collect();
    let mut spans: Vec<(i64, i64)> = ids
        .iter()
        .map(|&id| {
            let j = s.wait_final(id, T);
            assert_eq!(j["state"], "completed", "{j}");
            (int(&j, "started_at"), int(&j, "ended_at"))
        })
        .collect();
    spans.sort();
    for w in spans.windows(2) {
        assert!(w[1].0 >= w[0].1, "singletons overlap: {spans:?}");
    }
}
