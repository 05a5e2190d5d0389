//! `job submit --begin` on the real binary, as `sbatch --begin`: a job is not eligible to
//! start before its begin time, on the grid and on one cluster alike; it says so while it
//! waits; its begin survives a restart; a bad `--begin` or an instant out of range is
//! refused naming the option or field.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

use crate::common::{int, job_body, now, wait_for, Server, TWO_CLUSTERS};
use serde_json::Value;
use std::time::Duration;

/// Submits `args` with `--begin now+3s` on an idle cluster and checks that the job starts
/// no earlier than its begin and within two seconds after; while it waits, `job list` marks
/// it `BeginTime`, `job show` prints the begin and `explain` says what it waits for.
fn starts_at_its_begin(s: &Server, args: &[&str]) {
    let before = now();
    let mut a = vec!["--begin", "now+3s", "-t", "1m"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["--", "true"]);
    let id = s.submit(&a);
    let j = s.show(id);
    let begin = int(&j, "begin");
    assert!(
        (before + 3..=now() + 3).contains(&begin),
        "begin {begin} is not 3 s after the submission ({before}): {j}"
    );
    let list = s.run(&["job", "list"]);
    assert!(list.contains("(BeginTime)"), "{list}");
    let shown = s.run(&["job", "show", &id.to_string()]);
    assert!(
        shown
            .lines()
            .any(|l| l.starts_with("begin") && l.contains("UTC")),
        "{shown}"
    );
    let explain = s.run(&["job", "explain", &id.to_string()]);
    assert!(
        explain.contains("waits for its begin time") && explain.contains("UTC"),
        "{explain}"
    );
    let planned = s.show(id)["planned_start"].as_i64();
    assert!(
        planned.is_some_and(|p| p >= begin),
        "planned {planned:?} before its begin {begin}"
    );
    let done = s.wait_final(id, Duration::from_secs(20));
    assert_eq!(done["state"], "completed", "{done}");
    let started = int(&done, "started_at");
    assert!(
        (begin..=begin + 2).contains(&started),
        "started at {started}, begin {begin}: {done}"
    );
}

#[test]
fn a_global_job_starts_at_its_begin_time_not_before() {
    let s = Server::start(2);
    starts_at_its_begin(&s, &[]);
}

#[test]
fn a_local_job_starts_at_its_begin_time_not_before() {
    let s = Server::with_config(TWO_CLUSTERS);
    starts_at_its_begin(&s, &["--cluster", "a"]);
}

/// A job waiting for its begin does not hold back the cluster: a job submitted after it
/// starts at once on the processors it will want.
#[test]
fn a_local_job_waiting_for_its_begin_blocks_no_one() {
    let s = Server::with_config(TWO_CLUSTERS);
    let late = s.submit(&[
        "--cluster",
        "a",
        "-n",
        "2",
        "--begin",
        "now+1hour",
        "--",
        "true",
    ]);
    let now_job = s.submit(&["--cluster", "a", "-n", "2", "-t", "1m", "--", "true"]);
    let done = s.wait_final(now_job, Duration::from_secs(20));
    assert_eq!(done["state"], "completed", "{done}");
    let j = s.show(late);
    assert_eq!(j["state"], "pending", "{j}");
    assert!(j["started_at"].is_null(), "{j}");
}

/// The begin is part of the job's record: after a restart the job still waits for it, and
/// is planned no earlier. `estimate --begin` answers no earlier than the begin either.
#[test]
fn the_begin_survives_a_restart_and_bounds_estimates() {
    let mut s = Server::start(2);
    let id = s.submit(&["--begin", "now+1hour", "-t", "10m", "--", "true"]);
    let begin = int(&s.show(id), "begin");
    s.sigterm(Duration::from_secs(10));
    s.launch();
    let j = s.show(id);
    assert_eq!(int(&j, "begin"), begin, "{j}");
    assert!(j["started_at"].is_null(), "{j}");
    let planned = wait_for("a plan after the restart", Duration::from_secs(10), || {
        s.show(id)["planned_start"].as_i64()
    });
    assert!(planned >= begin, "planned {planned}, begin {begin}");
    let e: Value = serde_json::from_str(&s.run(&[
        "estimate",
        "-n",
        "1",
        "-t",
        "10m",
        "--begin",
        "now+2hours",
        "-o",
        "json",
    ]))
    .unwrap();
    let earliest = int(&e, "earliest");
    assert!(earliest >= now() + 7_000, "{e}");
    for c in e["clusters"].as_array().unwrap() {
        assert!(c["start"].as_i64().unwrap() >= earliest - 1, "{e}");
    }
}

/// A `--begin` the CLI cannot read is refused before any server is looked for, naming the
/// option and the text; an instant out of range through the API is refused naming `begin`.
#[test]
fn bad_begin_times_are_refused_naming_the_option() {
    let s = Server::start(1);
    let out = s
        .cli()
        .args(["job", "submit", "--begin", "soon", "--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--begin") && err.contains("\"soon\""), "{err}");
    let mut body = job_body(1, 60, &["true"]);
    body["begin"] = Value::from(-5);
    let (status, v) = s.http().post("/jobs", &body);
    assert_eq!(status, 400, "{v}");
    assert!(v.to_string().contains("begin"), "{v}");
    body["begin"] = Value::from(253_402_300_800_i64);
    let (status, v) = s.http().post("/jobs", &body);
    assert_eq!(status, 400, "{v}");
    assert!(v.to_string().contains("year 9999"), "{v}");
    assert!(s.http().jobs().is_empty());
}

/// What people see of a job waiting for its begin time (fixed far ahead, so that only the
/// submission time varies): `job list` marks it `BeginTime` and shows the planned start at
/// its begin, `job show` prints the begin, `explain` says what it waits for, in the local
/// zone with the zone marked.
#[test]
fn begin_output_snapshots() {
    let s = Server::start(2);
    let id = s.submit(&[
        "--begin",
        "2099-01-01T12:00:00Z",
        "-t",
        "10m",
        "--name",
        "later",
        "--",
        "true",
    ]);
    wait_for("a plan", Duration::from_secs(10), || {
        s.show(id)["planned_start"].as_i64()
    });
    let text = |args: &[&str]| {
        let mut c = s.cli();
        c.env("TZ", "Europe/Berlin");
        let out = c.args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    // The API carries the begin as a number beside the words, and the service's time to
    // count it from; no reason's words hold a time.
    let (status, e) = s.http().get(&format!("/jobs/{id}/explain"));
    assert_eq!(status, 200, "{e}");
    assert_eq!(
        e["reasons"][0],
        serde_json::json!({"text": "waits for its begin time at", "at": 4_070_952_000_i64}),
        "{e}"
    );
    let served = e["now"].as_i64().unwrap();
    assert!((now() - 5..=now()).contains(&served), "{e}");
    for r in e["reasons"].as_array().unwrap() {
        let words = r["text"].as_str().unwrap();
        assert!(!words.contains("2099") && !words.contains(" s "), "{e}");
    }
    insta::with_settings!({filters => vec![
        (r"submitted     \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} \S+", "submitted     [time]"),
        (r"\(in [0-9dhms]+\)", "(in [duration])"),
    ]}, {
        insta::assert_snapshot!("begin_job_list", text(&["job", "list"]));
        insta::assert_snapshot!("begin_job_show", text(&["job", "show", &id.to_string()]));
        insta::assert_snapshot!("begin_job_explain", text(&["job", "explain", &id.to_string()]));
    });
}
