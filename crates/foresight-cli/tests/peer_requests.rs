//! Owners' requests on global jobs across peer dispatchers (real processes, one throwaway
//! PostgreSQL): cancel, hold and release from any dispatcher of a job queued, in auction or
//! awarded; a cancel racing the winner's start ends with exactly one outcome (cancelled and
//! never run, or run and killed); `--hold` at submission; and `job list` on any dispatcher
//! showing a user's jobs at every site.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/peer.rs"]
mod peer;

use common::*;
use peer::*;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// A job that appends `ID CLUSTER` to `log`, sleeps `secs`, then appends `ID` to `ends`
/// (so a job killed while it sleeps never writes its end).
fn ended_job(log: &Path, ends: &Path, procs: u32, secs: f64) -> Value {
    job_body(
        procs,
        60,
        &[
            "sh",
            "-c",
            &format!(
                "echo \"$FORESIGHT_JOB_ID $FORESIGHT_CLUSTER\" >> {}; sleep {secs}; \
                 echo $FORESIGHT_JOB_ID >> {}",
                log.display(),
                ends.display()
            ),
        ],
    )
}

fn queue_state(store: &str, id: u64) -> String {
    psql(
        store,
        &format!("SELECT state || ' ' || COALESCE(site, '-') FROM global_jobs WHERE job_id = {id}"),
    )
}

#[test]
fn queued_jobs_are_cancelled_held_and_released_from_any_dispatcher_and_listed_everywhere() {
    let store = foresight_testkit::postgres::database();
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let a = Peer::start(&root, "a", &store, 2);
    let admin = admin_token(&a);
    // Users are read at start: ann exists before b starts.
    let (status, created) = Http::new(&a.url, &admin).post("/users", &json!({ "name": "ann" }));
    assert_eq!(status, 201, "{created}");
    let ann = created["token"].as_str().unwrap().to_string();
    let b = Peer::start(&root, "b", &store, 2);
    let (on_a, on_b) = (Http::new(&a.url, &ann), Http::new(&b.url, &ann));
    let log = root.join("runs.log");
    let ends = root.join("ends.log");
    // Both sites busy with a local job each: 2-processor global jobs stay queued.
    let mut blocker = ended_job(&log, &ends, 2, 30.0);
    blocker["cluster"] = "a-c".into();
    let block_a = on_a.submit(blocker.clone());
    blocker["cluster"] = "b-c".into();
    let block_b = on_b.submit(blocker);
    wait_for("both blockers to run", Duration::from_secs(20), || {
        (runs(&log).len() == 2).then_some(())
    });
    let g1 = on_a.submit(ended_job(&log, &ends, 2, 0.2));
    let mut held = ended_job(&log, &ends, 2, 0.2);
    held["hold"] = true.into();
    let g2 = on_a.submit(held);
    let g3 = on_b.submit(ended_job(&log, &ends, 2, 0.2));
    assert_eq!(queue_state(&store, g1), "queued -");
    assert_eq!(queue_state(&store, g2), "held -", "submitted held");
    // Cancel g1 through the other dispatcher; hold g3 through the one it was not sent to.
    let (status, j) = on_b.post(&format!("/jobs/{g1}/cancel"), &json!({}));
    assert_eq!(status, 200, "{j}");
    assert_eq!(j["state"], "cancelled", "{j}");
    assert_eq!(queue_state(&store, g1), "cancelled -");
    let (status, j) = on_a.post(&format!("/jobs/{g3}/hold"), &json!({}));
    assert_eq!(status, 200, "{j}");
    assert_eq!(j["held"], true, "{j}");
    assert_eq!(queue_state(&store, g3), "held -");
    // Refusals name why.
    let (status, j) = on_a.post(&format!("/jobs/{g1}/cancel"), &json!({}));
    assert_eq!(status, 409, "{j}");
    assert!(j.to_string().contains("ended"), "{j}");
    let (status, j) = on_b.post(&format!("/jobs/{g3}/hold"), &json!({}));
    assert_eq!(status, 409, "{j}");
    assert!(j.to_string().contains("already held"), "{j}");
    let other = Http::new(&a.url, &admin);
    let (status, _) = other.post(&format!("/jobs/{g3}/release"), &json!({}));
    assert_eq!(status, 200, "an administrator may release anyone's job");
    let (status, _) = on_b.post(&format!("/jobs/{g3}/hold"), &json!({}));
    assert_eq!(status, 200);
    // Sites free up: nothing held or cancelled runs.
    for (http, id) in [(&on_a, block_a), (&on_b, block_b)] {
        let (status, j) = http.post(&format!("/jobs/{id}/cancel"), &json!({}));
        assert_eq!(status, 200, "{j}");
    }
    std::thread::sleep(Duration::from_millis(2500));
    let ran = runs(&log);
    assert!(
        !ran.contains_key(&g1) && !ran.contains_key(&g2) && !ran.contains_key(&g3),
        "{ran:?}"
    );
    assert_eq!(queue_state(&store, g2), "held -");
    // Released (through either dispatcher), each runs once.
    for (http, id) in [(&on_b, g2), (&on_a, g3)] {
        let (status, j) = http.post(&format!("/jobs/{id}/release"), &json!({}));
        assert_eq!(status, 200, "{j}");
        assert_eq!(j["held"], false, "{j}");
    }
    wait_for("the released jobs to end", Duration::from_secs(30), || {
        (queue_state(&store, g2).starts_with("done ")
            && queue_state(&store, g3).starts_with("done "))
        .then_some(())
    });
    let ran = runs(&log);
    assert_eq!(ran[&g2].len(), 1);
    assert_eq!(ran[&g3].len(), 1);
    // Either dispatcher lists all of ann's jobs, wherever they ran, naming the site.
    for (http, other_job, other_site) in [(&on_a, block_b, "b"), (&on_b, block_a, "a")] {
        let listed = http.jobs();
        let ids: Vec<u64> = listed.iter().map(|j| j["id"].as_u64().unwrap()).collect();
        assert_eq!(ids, vec![block_a, block_b, g1, g2, g3], "{listed:?}");
        let by_id = |id: u64| listed.iter().find(|j| j["id"] == id).unwrap();
        assert_eq!(by_id(g1)["state"], "cancelled");
        for id in [g2, g3] {
            let site = queue_state(&store, id)
                .split(' ')
                .nth(1)
                .unwrap()
                .to_string();
            assert_eq!(by_id(id)["state"], "completed");
            assert_eq!(by_id(id)["cluster"], format!("{site}-c"));
        }
        // A job of the other site says which site runs it.
        assert_eq!(
            by_id(other_job)["reason"],
            format!("run by site {other_site}"),
            "{listed:?}"
        );
        // The state filter applies at every site.
        let (status, v) = http.get("/jobs?state=cancelled");
        assert_eq!(status, 200);
        let ids: Vec<u64> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_u64().unwrap())
            .collect();
        assert_eq!(ids, vec![block_a, block_b, g1]);
        let (_, v) = http.get("/jobs?limit=2");
        let ids: Vec<u64> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_u64().unwrap())
            .collect();
        assert_eq!(ids, vec![g2, g3], "the newest");
    }
    // Another user sees none of them; the CLI lists them too.
    let (status, bob) = Http::new(&a.url, &admin).post("/users", &json!({ "name": "bob" }));
    assert_eq!(status, 201, "{bob}");
    let bob = Http::new(&a.url, bob["token"].as_str().unwrap());
    assert!(bob.jobs().is_empty());
    let (status, _) = bob.post(&format!("/jobs/{g1}/cancel"), &json!({}));
    assert_eq!(status, 404, "not bob's job");
    let out = std::process::Command::new(BIN)
        .args(["job", "list", "--all"])
        .env("FORESIGHT_SERVER", &b.url)
        .env("FORESIGHT_TOKEN", &ann)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    for id in [block_a, block_b, g1, g2, g3] {
        assert!(text.contains(&id.to_string()), "{text}");
    }
}

#[test]
fn a_cancel_racing_the_award_and_start_ends_cancelled_and_never_run_or_run_and_killed() {
    let store = foresight_testkit::postgres::database();
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let peers: Vec<Peer> = ["a", "b", "c"]
        .iter()
        .map(|s| Peer::start(&root, s, &store, 2))
        .collect();
    let token = admin_token(&peers[0]);
    let log = root.join("runs.log");
    let ends = root.join("ends.log");
    let n = 12;
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(Http::new(&peers[i % 3].url, &token).submit(ended_job(&log, &ends, 1, 3.0)));
    }
    // Cancelled through another dispatcher than the one it was sent to, at times spread over
    // its auction (0.3 s), its award and its start; the last once it has surely started.
    for (i, id) in ids.iter().enumerate() {
        if i == n - 1 {
            // Running for sure: its command has written its line, not only been handed over.
            wait_for("the last job to run", Duration::from_secs(20), || {
                runs(&log).contains_key(id).then_some(())
            });
        } else {
            std::thread::sleep(Duration::from_millis(60));
        }
        let http = Http::new(&peers[(i + 1) % 3].url, &token);
        let (status, j) = http.post(&format!("/jobs/{id}/cancel"), &json!({}));
        assert_eq!(status, 200, "job {id}: {j}");
    }
    // Every job ends cancelled, seen from every dispatcher.
    for p in &peers {
        let http = Http::new(&p.url, &token);
        for id in &ids {
            wait_for(
                &format!("job {id} cancelled at {}", p.site),
                Duration::from_secs(20),
                || {
                    let (_, j) = http.get(&format!("/jobs/{id}"));
                    (j["state"] == "cancelled").then_some(())
                },
            );
        }
    }
    // Long enough for any job left running to write its end.
    std::thread::sleep(Duration::from_millis(3500));
    let ran = runs(&log);
    let ended = lines(&ends);
    let (mut never, mut killed) = (0, 0);
    for id in &ids {
        let q = queue_state(&store, *id);
        match (q.as_str(), ran.get(id).map(Vec::len)) {
            // Cancelled in the queue: no site ever started it.
            ("cancelled -", None) => never += 1,
            // Started by one site, then killed: its command ran once, or was killed before
            // it could write its line.
            (q, None | Some(1)) if q.starts_with("done ") => killed += 1,
            (q, k) => panic!("job {id}: queue state {q:?}, ran {k:?} times"),
        }
    }
    assert!(ended.is_empty(), "killed jobs never finish: {ended:?}");
    assert!(
        never > 0 && killed > 0,
        "never run {never}, killed {killed}"
    );
    let pending: u64 = psql(
        &store,
        "SELECT count(*) FROM global_jobs WHERE cancel_requested",
    )
    .parse()
    .unwrap();
    assert_eq!(pending, 0, "every request was carried out");
}

/// `cat`'s budget left and spending as the shared database has them.
fn shared_budget(store: &str, user: &str) -> (f64, f64) {
    let data = psql(
        store,
        &format!("SELECT data FROM users WHERE name = '{user}'"),
    );
    let u: Value = serde_json::from_str(&data).unwrap();
    (u["budget"].as_f64().unwrap(), u["spent"].as_f64().unwrap())
}

#[test]
fn two_sites_racing_for_the_last_of_one_budget_never_both_spend_it() {
    let store = foresight_testkit::postgres::database();
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let a = Peer::start(&root, "a", &store, 2);
    let admin = Http::new(&a.url, &admin_token(&a));
    let (_, clusters) = admin.get("/clusters");
    let tariff = clusters[0]["tariff"].as_f64().unwrap();
    assert!(tariff > 0.0, "{clusters}");
    // Enough for one job's worst case (1 processor × 60 s), not two.
    let worst = tariff * 60.0;
    let budget = 1.5 * worst;
    let (status, created) = admin.post("/users", &json!({ "name": "cat", "budget": budget }));
    assert_eq!(status, 201, "{created}");
    let cat = created["token"].as_str().unwrap().to_string();
    let b = Peer::start(&root, "b", &store, 2);
    let times = root.join("times.log");
    let timed = || {
        job_body(
            1,
            60,
            &[
                "sh",
                "-c",
                &format!(
                    "echo \"$FORESIGHT_JOB_ID start $(date +%s.%N)\" >> {t}; sleep 1.5; \
                     echo \"$FORESIGHT_JOB_ID end $(date +%s.%N)\" >> {t}",
                    t = times.display()
                ),
            ],
        )
    };
    // One job through each dispatcher at once: each alone fits the budget.
    let j1 = Http::new(&a.url, &cat).submit(timed());
    let j2 = Http::new(&b.url, &cat).submit(timed());
    let mut lowest = budget;
    wait_for("both jobs to end", Duration::from_secs(60), || {
        lowest = lowest.min(shared_budget(&store, "cat").0);
        let done: u64 = psql(
            &store,
            &format!(
                "SELECT count(*) FROM global_jobs WHERE state = 'done' AND job_id IN ({j1}, {j2})"
            ),
        )
        .parse()
        .unwrap();
        (done == 2).then_some(())
    });
    assert!(lowest >= 0.0, "the budget was overspent: {lowest}");
    // They ran one after the other: the second site could start its job only once the
    // first had ended and its hold came back.
    let mut spans = std::collections::BTreeMap::new();
    for line in lines(&times) {
        let f: Vec<&str> = line.split(' ').collect();
        let t: f64 = f[2].parse().unwrap();
        let e = spans.entry(f[0].to_string()).or_insert((0.0, 0.0));
        if f[1] == "start" {
            e.0 = t;
        } else {
            e.1 = t;
        }
    }
    assert_eq!(spans.len(), 2, "{spans:?}");
    let s: Vec<(f64, f64)> = spans.values().copied().collect();
    let (first, second) = if s[0].0 <= s[1].0 {
        (s[0], s[1])
    } else {
        (s[1], s[0])
    };
    assert!(first.1 > 0.0 && second.1 > 0.0, "{spans:?}");
    assert!(second.0 >= first.1, "the runs overlapped: {spans:?}");
    // What is left is the budget less what both really cost (charged by the sites that ran
    // them, through the database), and every dispatcher shows it.
    let (left, spent) = shared_budget(&store, "cat");
    assert!(spent > 0.0 && spent < 2.0 * worst, "spent {spent}");
    assert!(
        (left + spent - budget).abs() < 1e-6,
        "left {left} + spent {spent} != {budget}"
    );
    for p in [&a, &b] {
        let http = Http::new(&p.url, &admin_token(&a));
        wait_for(
            &format!("{} to show the shared budget", p.site),
            Duration::from_secs(10),
            || {
                let (_, users) = http.get("/users");
                let u = users
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|u| u["name"] == "cat")
                    .cloned()
                    .unwrap();
                ((u["budget"].as_f64().unwrap() - left).abs() < 1e-6).then_some(())
            },
        );
    }
    // A top-up through one dispatcher lands in the database, on top of what was charged.
    let (status, v) =
        Http::new(&b.url, &admin_token(&a)).post("/users/cat/budget", &json!({ "add": 10.0 }));
    assert_eq!(status, 200, "{v}");
    let (after, spent_after) = shared_budget(&store, "cat");
    assert!((after - (left + 10.0)).abs() < 1e-6, "{after}");
    assert_eq!(spent_after, spent);
}
