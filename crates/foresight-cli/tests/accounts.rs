//! Users' accounts on the real binary: credentials come from the user's record, never
//! from the job; tokens are rotated and users disabled or removed at once; budgets stay
//! finite and can be made unlimited.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

mod common;

use common::*;
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
