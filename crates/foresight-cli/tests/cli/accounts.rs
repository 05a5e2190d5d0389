//! Users' accounts on the real binary: credentials come from the user's record, never
//! from the job; tokens are rotated and users disabled or removed at once; budgets stay
//! finite and can be made unlimited.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

use crate::common::*;
use serde_json::{json, Value};
use std::time::Duration;

fn user(s: &Server, name: &str) -> Value {
    let us: Vec<Value> =
        serde_json::from_str(&s.run(&["user", "list", "-o", "json"])).expect("json");
    us.into_iter()
        .find(|u| u["name"] == name)
        .unwrap_or(Value::Null)
}

/// A reservation for group `physics` admits a job only when an administrator put its user
/// in that group: naming the group in the job is not enough (403 naming `group`).
#[test]
fn reservation_acls_read_the_users_record_not_the_jobs_claim() {
    let s = Server::start(2);
    let bob = s.add_user("bob", None);
    let (status, r) = s.http().post(
        "/reservations",
        &json!({"cluster": "local", "procs": 1, "start": now() + 3600, "duration": 600,
                "acl": {"groups": ["physics"]}}),
    );
    assert_eq!(status, 201, "{r}");
    let rid = r["id"].as_u64().unwrap();
    let claim = json!({"procs": 1, "walltime": 60, "command": ["true"],
                       "reservation": rid, "group": "physics"});
    let (status, e) = s.http_as(&bob).post("/jobs", &claim);
    assert_eq!(status, 403, "{e}");
    assert_eq!(e["field"], "group", "{e}");
    assert!(e["message"].as_str().unwrap().contains("physics"), "{e}");
    // Without the claim, bob has no credential the ACL admits.
    let mut plain = claim.clone();
    plain.as_object_mut().unwrap().remove("group");
    let (status, e) = s.http_as(&bob).post("/jobs", &plain);
    assert_eq!(status, 403, "{e}");
    assert_eq!(e["field"], "reservation", "{e}");
    // An administrator puts bob in physics: both are admitted now (physics is his default).
    let out = s.run(&[
        "user",
        "modify",
        "bob",
        "--groups",
        "physics,chem",
        "-o",
        "json",
    ]);
    let u: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        u["credentials"]["groups"],
        json!(["physics", "chem"]),
        "{u}"
    );
    let (status, v) = s.http_as(&bob).post("/jobs", &claim);
    assert_eq!(status, 201, "{v}");
    let (status, v) = s.http_as(&bob).post("/jobs", &plain);
    assert_eq!(status, 201, "{v}");
    // An account he was not given is refused the same way.
    let (status, e) = s.http_as(&bob).post(
        "/jobs",
        &json!({"procs": 1, "walltime": 60, "command": ["true"], "account": "big-grant"}),
    );
    assert_eq!(status, 403, "{e}");
    assert_eq!(e["field"], "account", "{e}");
}

/// `user token rotate` prints a new token; the old one is refused by the very next request.
#[test]
fn a_rotated_token_replaces_the_old_one_at_once() {
    let s = Server::start(2);
    let old = s.add_user("bob", None);
    assert_eq!(s.http_as(&old).get("/whoami").0, 200);
    let new = s
        .run(&["user", "token", "rotate", "bob"])
        .trim()
        .to_string();
    assert_eq!(new.len(), 48, "{new:?}");
    assert_ne!(new, old);
    let (status, e) = s.http_as(&old).get("/whoami");
    assert_eq!(status, 401, "{e}");
    let (status, me) = s.http_as(&new).get("/whoami");
    assert_eq!(status, 200, "{me}");
    assert_eq!(me["name"], "bob");
    // Still so after a restart: the new token is what is stored.
    let mut s = s;
    s.sigterm(Duration::from_secs(20)).expect("stops");
    s.launch();
    assert_eq!(s.http_as(&old).get("/whoami").0, 401);
    assert_eq!(s.http_as(&new).get("/whoami").0, 200);
}

/// Disabling a user refuses their token and cancels their jobs that have not started; a
/// running one finishes. Enabling lets them back in. Removing keeps their history and
/// their name from being reused.
#[test]
fn disabled_and_removed_users_lose_their_queued_jobs_and_keep_their_history() {
    let s = Server::start(1);
    let bob = s.add_user("bob", None);
    let http = s.http_as(&bob);
    let running = http.submit(
        json!({"procs": 1, "walltime": 60, "command": ["sleep", "2"],
                                     "cluster": "local"}),
    );
    s.wait_job(running, "running", Duration::from_secs(20), |j| {
        j["state"] == "running"
    });
    let queued = http.submit(json!({"procs": 1, "walltime": 60, "command": ["true"],
                                    "cluster": "local"}));
    let held = http.submit(json!({"procs": 1, "walltime": 60, "command": ["true"],
                                  "hold": true}));
    s.run(&["user", "disable", "bob"]);
    let (status, e) = http.get("/whoami");
    assert_eq!(status, 401, "{e}");
    assert!(e["message"].as_str().unwrap().contains("disabled"), "{e}");
    assert_eq!(user(&s, "bob")["disabled"], true);
    for id in [queued, held] {
        let j = s.show(id);
        assert_eq!(j["state"], "cancelled", "{j}");
    }
    let j = s.wait_final(running, Duration::from_secs(30));
    assert_eq!(j["state"], "completed", "the running job finishes: {j}");
    s.run(&["user", "enable", "bob"]);
    assert_eq!(http.get("/whoami").0, 200);
    // Removed: gone from the list, token refused, history kept, name not reusable.
    s.run(&["user", "remove", "bob"]);
    assert_eq!(http.get("/whoami").0, 401);
    assert_eq!(user(&s, "bob"), Value::Null);
    assert_eq!(s.show(running)["user"], "bob");
    let out = s.cli().args(["user", "add", "bob"]).output().expect("runs");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already exists"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The last administrator cannot lock everyone out.
    let (status, e) = s
        .http()
        .post("/users/admin/state", &json!({"disabled": true}));
    assert_eq!(status, 409, "{e}");
}

/// Budgets are finite numbers: an overflowing top-up is refused naming `add`; `--set
/// unlimited` and `{"set": null}` make a budget unlimited.
#[test]
fn budgets_stay_finite_and_can_be_made_unlimited() {
    let s = Server::start(1);
    s.add_user("bob", Some(100.0));
    s.run(&["user", "budget", "bob", "--set", "unlimited"]);
    assert_eq!(user(&s, "bob")["budget"], Value::Null);
    s.run(&["user", "budget", "bob", "--set", "1e308"]);
    assert_eq!(user(&s, "bob")["budget"], json!(1e308));
    let (status, e) = s.http().post("/users/bob/budget", &json!({"add": 1e308}));
    assert_eq!(status, 400, "{e}");
    assert_eq!(e["field"], "add", "{e}");
    assert_eq!(user(&s, "bob")["budget"], json!(1e308));
    let (status, u) = s.http().post("/users/bob/budget", &json!({"set": null}));
    assert_eq!(status, 200, "{u}");
    assert_eq!(u["budget"], Value::Null, "{u}");
    assert_eq!(user(&s, "bob")["budget"], Value::Null);
}

/// The jobs of a batch and the tasks of an array count together toward the budget check:
/// each of two 60-unit jobs fits a budget of 100, both do not, and the request is refused as
/// a whole (402 naming `jobs` or `array`, the amount and the budget); nothing is submitted.
#[test]
fn batches_and_arrays_count_together_toward_the_budget() {
    let s = Server::start(2);
    let bob = s.add_user("bob", Some(100.0));
    let http = s.http_as(&bob);
    // 1 processor × 60 s × the default tariff 1.0.
    let one = json!({"procs": 1, "walltime": "60s", "command": ["true"], "cluster": "local",
                     "hold": true});
    let (status, e) = http.post("/jobs/batch", &json!({"jobs": [one, one]}));
    assert_eq!(status, 402, "{e}");
    assert_eq!(e["field"], "jobs", "{e}");
    let m = e["message"].as_str().unwrap();
    assert!(m.contains("120.00") && m.contains("100.00"), "{m}");
    let mut array = one.clone();
    array["array"] = json!("0-1");
    let (status, e) = http.post("/jobs", &array);
    assert_eq!(status, 402, "{e}");
    assert_eq!(e["field"], "array", "{e}");
    assert!(http.jobs().is_empty(), "{:?}", http.jobs());
    // One of them fits.
    let (status, e) = http.post("/jobs/batch", &json!({"jobs": [one]}));
    assert_eq!(status, 201, "{e}");
    // And then the next does not: the first counts until it is charged.
    let (status, e) = http.post("/jobs", &one);
    assert_eq!(status, 402, "{e}");
}

/// A suspended job keeps its processors and its walltime clock stops, so only
/// administrators suspend and resume (as in Slurm): a user cannot hold processors forever by
/// suspending their own job (403 naming `user`).
#[test]
fn only_administrators_suspend_and_resume() {
    let s = Server::start(1);
    let bob = s.add_user("bob", None);
    let http = s.http_as(&bob);
    let id = http.submit(
        json!({"procs": 1, "walltime": "1m", "command": ["sleep", "30"],
                                "cluster": "local"}),
    );
    s.wait_job(id, "running", Duration::from_secs(20), |j| {
        j["state"] == "running"
    });
    for action in ["suspend", "resume"] {
        let (status, e) = http.post(&format!("/jobs/{id}/{action}"), &json!({}));
        assert_eq!(status, 403, "{action}: {e}");
        assert_eq!(e["field"], "user", "{e}");
    }
    let (status, j) = s.http().post(&format!("/jobs/{id}/suspend"), &json!({}));
    assert_eq!(status, 200, "{j}");
    assert_eq!(j["suspended"], true, "{j}");
    let (status, j) = s.http().post(&format!("/jobs/{id}/cancel"), &json!({}));
    assert_eq!(status, 200, "{j}");
}

/// Submissions checked while others are still being stored count them: 20 concurrent
/// local jobs of 30 each against a budget of 100 admit at most 3.
#[test]
fn concurrent_submissions_never_overdraw_the_budget() {
    let s = Server::start(2);
    let bob = s.add_user("bob", Some(100.0));
    let url = s.url.clone();
    let threads: Vec<_> = (0..20)
        .map(|_| {
            let (url, bob) = (url.clone(), bob.clone());
            std::thread::spawn(move || {
                let http = Http::new(&url, &bob);
                let (status, _) = http.post(
                    "/jobs",
                    &json!({"procs": 1, "walltime": "30s", "command": ["true"],
                            "cluster": "local", "hold": true}),
                );
                status
            })
        })
        .collect();
    let statuses: Vec<u16> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let admitted = statuses.iter().filter(|&&s| s == 201).count();
    assert!(
        statuses.iter().all(|s| [201, 402].contains(s)),
        "{statuses:?}"
    );
    assert_eq!(admitted, 3, "{statuses:?}");
    assert_eq!(s.http_as(&bob).jobs().len(), 3);
}
