//! Runtime prediction in the service, on the real binary with real processes: finished runs
//! are kept in the store and restored at start; with `predict = "tsafrir"` a local policy
//! plans a job with the mean of its user's last two runs instead of its walltime, so a short
//! job backfills where its walltime would not let it; a job that outlives its prediction is
//! planned to its walltime (the correction) and killed there, not earlier.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

use crate::common::{int, Server};
use serde_json::{json, Value};
use std::time::Duration;

fn config(predict: &str) -> String {
    format!(
        r#"
predict = "{predict}"
grace_seconds = 1

[[cluster]]
name = "a"
procs = 4
policy = "easy"
"#
    )
}

/// A local job of cluster `a`.
fn local(procs: u32, walltime: i64, command: &[&str]) -> Value {
    json!({ "procs": procs, "walltime": walltime, "command": command, "cluster": "a" })
}

/// Runs two 2-second jobs with a walltime of 10 minutes as the user of `token`, one after
/// the other: that user's history.
fn history(s: &Server, token: &str) {
    let http = s.http_as(token);
    for _ in 0..2 {
        let id = http.submit(local(1, 600, &["sleep", "2"]));
        let j = s.wait_final(id, Duration::from_secs(30));
        assert_eq!(j["state"], "completed", "{j}");
    }
}

#[test]
fn finished_runs_are_kept_in_the_store_and_restored_at_start() {
    let mut s = Server::with_config(&config("tsafrir"));
    let http = s.http();
    let mut first = local(1, 600, &["sleep", "1"]);
    first["app"] = json!("solver");
    let a = http.submit(first);
    assert_eq!(
        s.wait_final(a, Duration::from_secs(30))["state"],
        "completed"
    );
    // No run before it: planned with its walltime, and it says so.
    let j = s.show(a);
    assert_eq!(j["app"], "solver", "{j}");
    assert_eq!(j["prediction"]["predictor"], "tsafrir", "{j}");
    assert_eq!(j["prediction"]["runs"], 0, "{j}");
    assert_eq!(j["prediction"]["seconds"], 600, "{j}");
    let b = http.submit(local(1, 600, &["true"]));
    assert_eq!(
        s.wait_final(b, Duration::from_secs(30))["state"],
        "completed"
    );
    // A cancelled job is no run.
    let c = http.submit(local(1, 600, &["sleep", "30"]));
    s.wait_job(c, "running", Duration::from_secs(30), |j| {
        j["state"] == "running"
    });
    s.run(&["job", "cancel", &c.to_string()]);
    s.wait_final(c, Duration::from_secs(30));

    // Asked of a job held until an hour from now, then cancelled: a job that ran could outlive
    // its prediction of a second on a loaded machine, and show the corrected one.
    let predicted = |s: &Server| {
        let mut held = local(1, 600, &["true"]);
        held["begin"] = json!(crate::common::now() + 3600);
        let id = s.http().submit(held);
        let p = s.show(id)["prediction"].clone();
        s.run(&["job", "cancel", &id.to_string()]);
        s.wait_final(id, Duration::from_secs(30));
        p
    };
    let p = predicted(&s);
    assert_eq!(p["runs"], 2, "{p}");
    // The mean of about 1 s and about 0 s.
    assert!(p["seconds"].as_i64().unwrap() <= 2, "{p}");

    s.sigterm(Duration::from_secs(20)).expect("stopped");
    s.launch();
    // The last two runs (`true` twice) came back from the store.
    let p = predicted(&s);
    assert_eq!(p["runs"], 2, "{p}");
    assert!(p["seconds"].as_i64().unwrap() <= 1, "{p}");
    let text = s.run(&["job", "show", &b.to_string()]);
    assert!(text.contains("predicted"), "{text}");
}

/// Cluster `a` (4 processors, EASY): a 3-processor job of another user runs for 12 s with
/// a walltime of 12 s; a 4-processor job then waits with EASY's reservation at its end. A
/// 1-processor job of the user with the 2-second history, walltime 10 minutes, fits the
/// free processor now: with Tsafrir's prediction (about 2 s) it ends before the
/// reservation and starts at once; with its walltime it would delay the wide job, so it
/// starts only after the wide job has started.
fn short_behind_wide(predict: &str) -> (Value, Value, Value) {
    let s = Server::with_config(&config(predict));
    let user = s.add_user("u", None);
    let other = s.add_user("o", None);
    history(&s, &user);
    let (http_u, http_o) = (s.http_as(&user), s.http_as(&other));
    let blocker = http_o.submit(local(3, 12, &["sleep", "12"]));
    s.wait_job(blocker, "running", Duration::from_secs(30), |j| {
        j["state"] == "running"
    });
    let wide = http_o.submit(local(4, 60, &["sleep", "1"]));
    let short = http_u.submit(local(1, 600, &["sleep", "1"]));
    let short = s.wait_final(short, Duration::from_secs(60));
    let wide = s.wait_final(wide, Duration::from_secs(60));
    let blocker = s.wait_final(blocker, Duration::from_secs(60));
    (blocker, wide, short)
}

#[test]
fn a_short_prediction_backfills_ahead_of_a_wide_job_the_walltime_would_not() {
    let (blocker, wide, short) = short_behind_wide("tsafrir");
    assert_eq!(short["state"], "completed", "{short}");
    let p = &short["prediction"];
    assert_eq!(
        (p["predictor"].as_str(), p["runs"].as_u64()),
        (Some("tsafrir"), Some(2))
    );
    // Predicted at about a second; a run a tick longer than that is corrected to its
    // walltime while it runs (whole seconds), which is no less a short prediction.
    let corrected = p["corrections"].as_u64().unwrap_or(0) > 0;
    let seconds = p["seconds"].as_i64().unwrap();
    assert!(
        if corrected {
            seconds == 600
        } else {
            seconds <= 3
        },
        "{short}"
    );
    // Backfilled: it started while the blocker ran and ended before the wide job began.
    assert!(
        int(&short, "started_at") < int(&blocker, "ended_at"),
        "{short} {blocker}"
    );
    assert!(
        int(&short, "ended_at") <= int(&wide, "started_at"),
        "{short} {wide}"
    );

    let (_, wide, short) = short_behind_wide("none");
    assert_eq!(short["state"], "completed", "{short}");
    assert!(short.get("prediction").is_none(), "{short}");
    // Planned with its 10 minutes, it could not pass the wide job's reservation.
    assert!(
        int(&short, "started_at") >= int(&wide, "started_at"),
        "{short} {wide}"
    );
}

#[test]
fn a_job_that_outlives_its_prediction_is_killed_only_at_its_walltime() {
    let s = Server::with_config(&config("tsafrir"));
    let user = s.add_user("u", None);
    history(&s, &user);
    let id = s.http_as(&user).submit(local(1, 8, &["sleep", "60"]));
    // Predicted about 2 s; corrected to its walltime once it outlives that, while running.
    let j = s.wait_job(id, "corrected", Duration::from_secs(30), |j| {
        j["prediction"]["corrections"] == 1
    });
    assert_eq!(j["state"], "running", "{j}");
    assert_eq!(j["prediction"]["seconds"], 8, "{j}");
    let text = s.run(&["job", "show", &id.to_string()]);
    assert!(text.contains("corrected 1x"), "{text}");
    let j = s.wait_final(id, Duration::from_secs(30));
    assert_eq!(j["state"], "timeout", "{j}");
    let ran = int(&j, "ended_at") - int(&j, "started_at");
    assert!((8..=11).contains(&ran), "ran {ran} s: {j}");
}
