//! Owners' requests on global jobs across peer dispatchers (real processes, one throwaway
//! PostgreSQL): cancel, hold and release from any dispatcher of a job queued, in auction or
//! awarded; a cancel racing the winner's start ends with exactly one outcome (cancelled and
//! never run, or run and killed); `--hold` at submission; and `job list` on any dispatcher
//! showing a user's jobs at every site.
#![allow(clippy::unwrap_used)]

use crate::peer;

use crate::common::*;
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

/// Sites a and b of 2 processors each, and user ann made on a: (a, b, the administrator's
/// token, ann's).
fn ann_on_two_sites(root: &Path, store: &str) -> (Peer, Peer, String, String) {
    let a = Peer::start(root, "a", store, 2);
    let admin = admin_token(&a);
    let (status, created) = Http::new(&a.url, &admin).post("/users", &json!({ "name": "ann" }));
    assert_eq!(status, 201, "{created}");
    let ann = created["token"].as_str().unwrap().to_string();
    let b = Peer::start(root, "b", store, 2);
    (a, b, admin, ann)
}

#[test]
fn queued_jobs_are_cancelled_held_and_released_from_any_dispatcher_and_listed_everywhere() {
    let store = foresight_testkit::postgres::database();
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let (a, b, admin, ann) = ann_on_two_sites(&root, &store);
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
        wait_for("a blocker's end", Duration::from_secs(20), || {
            let (_, j) = http.get(&format!("/jobs/{id}"));
            (j["state"] == "cancelled").then_some(())
        });
    }
    // Both sites' processors are free now. Were a held or cancelled job on sale, a whole
    // sale (a round opening its auction, its length of α × 1 s = 0.3 s, rounds closing it
    // and starting it) would have started it.
    a_whole_sale(&[&a, &b], &admin, Duration::from_secs(1));
    assert_eq!(queue_state(&store, g1), "cancelled -");
    assert_eq!(queue_state(&store, g2), "held -");
    assert_eq!(queue_state(&store, g3), "held -");
    let ran = runs(&log);
    assert!(
        !ran.contains_key(&g1) && !ran.contains_key(&g2) && !ran.contains_key(&g3),
        "{ran:?}"
    );
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
        // The queue says done before every dispatcher has read it: wait for this one to.
        let listed = wait_for(
            "both released jobs listed ended",
            Duration::from_secs(30),
            || {
                let listed = http.jobs();
                let ended = |id: u64| {
                    listed
                        .iter()
                        .any(|j| j["id"] == id && j["state"] != "running")
                };
                (ended(g2) && ended(g3)).then_some(listed)
            },
        );
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
    // Auctions of 1 s (α 1 × the prior mean runtime of 1 s): the cancels, one about every
    // 0.1 s, land in auctions, awards and starts alike however fast the rounds are (with
    // auctions of 0.3 s every job is started before its cancel comes).
    let peers: Vec<Peer> = ["a", "b", "c"]
        .iter()
        .map(|s| Peer::start_with(&root, s, &store, 2, 1500, 1, 1.0))
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
    // its auction (1 s), its award and its start; the last once it has surely started.
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
    // Every attempt launched has ended (its supervisor recorded how): a job left running
    // would have written its end by then.
    let launched = every_attempt_ended(&peers.iter().collect::<Vec<_>>());
    assert!(launched > 0, "the last job at least was launched");
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
    // One job through each dispatcher, submitted held while the budget is larger (the two
    // would not be admitted together otherwise); then the budget fits one job only, and
    // both are released at once: each alone fits it.
    let (status, v) = admin.post("/users/cat/budget", &json!({ "set": 10.0 * worst }));
    assert_eq!(status, 200, "{v}");
    let mut held = timed();
    held["hold"] = true.into();
    let j1 = Http::new(&a.url, &cat).submit(held.clone());
    let j2 = Http::new(&b.url, &cat).submit(held);
    let (status, v) = admin.post("/users/cat/budget", &json!({ "set": budget }));
    assert_eq!(status, 200, "{v}");
    for (url, id) in [(&a.url, j1), (&b.url, j2)] {
        let (status, v) = Http::new(url, &cat).post(&format!("/jobs/{id}/release"), &json!({}));
        assert_eq!(status, 200, "{v}");
    }
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

#[test]
fn a_user_created_or_changed_through_one_dispatcher_is_known_at_once_to_the_others() {
    let store = foresight_testkit::postgres::database();
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let a = Peer::start(&root, "a", &store, 2);
    let b = Peer::start(&root, "b", &store, 2);
    let admin = Http::new(&a.url, &admin_token(&a));
    let log = root.join("runs.log");
    // Created through a, used through b at once: b has never read dan.
    let (status, created) = admin.post("/users", &json!({ "name": "dan" }));
    assert_eq!(status, 201, "{created}");
    let dan = created["token"].as_str().unwrap().to_string();
    let (status, v) = Http::new(&b.url, &dan).post("/jobs", &counted_job(&log, 0.1));
    assert_eq!(status, 201, "b refused a user a created: {v}");
    let (status, me) = Http::new(&b.url, &dan).get("/whoami");
    assert_eq!(status, 200, "{me}");
    assert_eq!(me["name"], "dan", "{me}");
    // Credentials given through a: b admits a job naming them.
    let (status, v) = admin.post("/users/dan/credentials", &json!({ "accounts": ["phys"] }));
    assert_eq!(status, 200, "{v}");
    let mut with_account = counted_job(&log, 0.1);
    with_account["account"] = "phys".into();
    wait_for(
        "b to admit dan's new account",
        Duration::from_secs(5),
        || {
            let (status, v) = Http::new(&b.url, &dan).post("/jobs", &with_account);
            assert!(status == 201 || status == 403, "{status} {v}");
            (status == 201).then_some(())
        },
    );
    // A new token through a: b takes the new one at once and soon refuses the old one.
    let (status, rotated) = admin.post("/users/dan/token", &json!({}));
    assert_eq!(status, 200, "{rotated}");
    let new_token = rotated["token"].as_str().unwrap().to_string();
    let (status, me) = Http::new(&b.url, &new_token).get("/whoami");
    assert_eq!(status, 200, "b refused dan's new token: {me}");
    let (status, _) = Http::new(&b.url, &dan).get("/whoami");
    assert_eq!(
        status, 401,
        "the old token is gone once the new one was seen"
    );
    // A global job of dan's, queued held at b: it is in the shared queue, at no site.
    let mut held = counted_job(&log, 0.1);
    held["hold"] = true.into();
    let queued = Http::new(&b.url, &new_token).submit(held);
    assert_eq!(queue_state(&store, queued), "held -");
    // Disabled through a: b refuses dan soon after, and the job in the shared queue is
    // cancelled with the reason (before, it stayed held there for ever).
    let (status, v) = admin.post("/users/dan/state", &json!({ "disabled": true }));
    assert_eq!(status, 200, "{v}");
    wait_for("b to refuse disabled dan", Duration::from_secs(5), || {
        let (status, _) = Http::new(&b.url, &new_token).get("/whoami");
        (status == 401).then_some(())
    });
    wait_for(
        "dan's queued global job to be cancelled",
        Duration::from_secs(10),
        || (queue_state(&store, queued) == "cancelled -").then_some(()),
    );
    let (status, j) = admin.get(&format!("/jobs/{queued}"));
    assert_eq!(status, 200, "{j}");
    assert_eq!(j["state"], "cancelled", "{j}");
    assert_eq!(j["reason"], "cancelled: user \"dan\" was disabled", "{j}");
    // A token nobody holds is still refused everywhere.
    let (status, _) = Http::new(&b.url, "no-such-token").get("/whoami");
    assert_eq!(status, 401);
}

/// A blocker that keeps site `site`'s only cluster (2 processors) busy until cancelled.
fn blocker(http: &Http, site: &str, log: &Path) -> u64 {
    let mut job = counted_job(log, 60.0);
    job["procs"] = 2.into();
    job["cluster"] = format!("{site}-c").into();
    http.submit(job)
}

#[test]
fn queued_global_jobs_count_against_the_budget_at_submission_across_dispatchers() {
    let store = foresight_testkit::postgres::database();
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let a = Peer::start(&root, "a", &store, 2);
    let b = Peer::start(&root, "b", &store, 2);
    let admin = Http::new(&a.url, &admin_token(&a));
    let log = root.join("runs.log");
    // Both sites busy: global jobs stay queued, unstarted.
    let admin_b = Http::new(&b.url, &admin_token(&a));
    let blockers = [
        (&admin, blocker(&admin, "a", &log)),
        (&admin_b, blocker(&admin_b, "b", &log)),
    ];
    wait_for("both blockers to run", Duration::from_secs(20), || {
        (runs(&log).len() == 2).then_some(())
    });
    let (_, clusters) = admin.get("/clusters");
    let tariff = clusters[0]["tariff"].as_f64().unwrap();
    // A 1-processor hour may cost `worst`; fay can pay for one, not two.
    let worst = tariff * 3600.0;
    let budget = 1.5 * worst;
    let (status, created) = admin.post("/users", &json!({ "name": "fay", "budget": budget }));
    assert_eq!(status, 201, "{created}");
    let fay = created["token"].as_str().unwrap().to_string();
    let job = || job_body(1, 3600, &["true"]);
    // Through both dispatchers at the same moment: exactly one is admitted.
    let answers: Vec<(u16, Value)> = std::thread::scope(|s| {
        let handles: Vec<_> = [&a.url, &b.url]
            .into_iter()
            .map(|url| {
                let http = Http::new(url, &fay);
                s.spawn(move || http.post("/jobs", &job()))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let codes: Vec<u16> = answers.iter().map(|(c, _)| *c).collect();
    assert!(
        codes.contains(&201) && codes.contains(&402),
        "one admitted, one refused: {answers:?}"
    );
    let first = answers.iter().find(|(c, _)| *c == 201).unwrap().1["id"]
        .as_u64()
        .unwrap();
    // Any further one is refused, through either dispatcher, with the figures.
    for url in [&a.url, &b.url] {
        let (status, v) = Http::new(url, &fay).post("/jobs", &job());
        assert_eq!(status, 402, "{v}");
        let msg = v["message"].as_str().unwrap_or_default().to_string();
        for part in [
            format!("may cost {worst:.2} at worst"),
            format!("{worst:.2} for the 1 global job of fay not yet started"),
            format!("remaining budget {budget:.2}"),
        ] {
            assert!(msg.contains(&part), "{part:?} not in {v}");
        }
    }
    let queued: u64 = psql(
        &store,
        "SELECT count(*) FROM global_jobs g JOIN jobs j ON j.id = g.job_id \
         WHERE j.user_name = 'fay'",
    )
    .parse()
    .unwrap();
    assert_eq!(queued, 1, "nothing refused was stored");
    // A local job counts them too: an hour on a's cluster does not fit beside it.
    let mut local = job();
    local["cluster"] = "a-c".into();
    let (status, v) = Http::new(&a.url, &fay).post("/jobs", &local);
    assert_eq!(status, 402, "{v}");
    let msg = v["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains(&format!(
            "{worst:.2} for the 1 global job of fay not yet started"
        )) && msg.contains(&format!(
            "the 1 local job submitted may cost {worst:.2} at worst"
        )),
        "{v}"
    );
    // Cancelled, the queued job no longer counts: another is admitted.
    let (status, v) = Http::new(&b.url, &fay).post(&format!("/jobs/{first}/cancel"), &json!({}));
    assert_eq!(status, 200, "{v}");
    let (status, v) = Http::new(&b.url, &fay).post("/jobs", &job());
    assert_eq!(status, 201, "{v}");
    for (http, id) in blockers {
        let (status, v) = http.post(&format!("/jobs/{id}/cancel"), &json!({}));
        assert_eq!(status, 200, "{v}");
    }
}

#[test]
fn an_award_over_its_users_budget_waits_off_sale_until_the_budget_changes() {
    let store = foresight_testkit::postgres::database();
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let a = Peer::start(&root, "a", &store, 2);
    let b = Peer::start(&root, "b", &store, 2);
    let admin = Http::new(&a.url, &admin_token(&a));
    let (_, clusters) = admin.get("/clusters");
    let tariff = clusters[0]["tariff"].as_f64().unwrap();
    let worst = tariff * 60.0;
    let (status, created) = admin.post("/users", &json!({ "name": "gus", "budget": 10.0 * worst }));
    assert_eq!(status, 201, "{created}");
    let gus = Http::new(&b.url, created["token"].as_str().unwrap());
    let log = root.join("runs.log");
    // Admitted while the budget was larger, then the budget shrinks below its worst case.
    let mut job = counted_job(&log, 0.2);
    job["hold"] = true.into();
    let id = gus.submit(job);
    let (status, v) = admin.post("/users/gus/budget", &json!({ "set": 0.5 * worst }));
    assert_eq!(status, 200, "{v}");
    let (status, v) = gus.post(&format!("/jobs/{id}/release"), &json!({}));
    assert_eq!(status, 200, "{v}");
    // Sold once, then set aside: not auctioned again while nothing changes.
    wait_for(
        "the job to wait for budget",
        Duration::from_secs(20),
        || (queue_state(&store, id) == "over_budget -").then_some(()),
    );
    let auctions = || -> u64 {
        psql(
            &store,
            &format!("SELECT auctions FROM global_jobs WHERE job_id = {id}"),
        )
        .parse()
        .unwrap()
    };
    let sold = auctions();
    // Put back on sale, it would be auctioned again in the bid step of the next whole round
    // of either site (both have free processors for it).
    more_rounds(&[&a, &b], &admin_token(&a), 2);
    assert_eq!(queue_state(&store, id), "over_budget -");
    assert_eq!(auctions(), sold, "auctioned again while over budget");
    assert!(runs(&log).is_empty());
    // Every dispatcher says why, with the figures.
    for url in [&a.url, &b.url] {
        let (status, j) = Http::new(url, &admin_token(&a)).get(&format!("/jobs/{id}"));
        assert_eq!(status, 200, "{j}");
        let reason = j["reason"].as_str().unwrap_or_default();
        assert!(
            reason.starts_with(&format!("over budget: needs {worst:.2}"))
                && reason.contains(&format!("has {:.2}", 0.5 * worst)),
            "{j}"
        );
    }
    // A top-up puts it back on sale: it runs once.
    let (status, v) = admin.post("/users/gus/budget", &json!({ "add": 10.0 * worst }));
    assert_eq!(status, 200, "{v}");
    wait_for("the job to run", Duration::from_secs(20), || {
        queue_state(&store, id).starts_with("done ").then_some(())
    });
    assert_eq!(runs(&log)[&id].len(), 1);
    let (_, j) = gus.get(&format!("/jobs/{id}"));
    assert_eq!(j["state"], "completed", "{j}");
}

#[test]
fn holding_a_job_another_site_started_is_refused_naming_that_site() {
    let store = foresight_testkit::postgres::database();
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let a = Peer::start(&root, "a", &store, 2);
    let b = Peer::start(&root, "b", &store, 2);
    let token = admin_token(&a);
    let log = root.join("runs.log");
    let id = Http::new(&a.url, &token).submit(counted_job(&log, 30.0));
    wait_for("the job to run", Duration::from_secs(20), || {
        runs(&log).contains_key(&id).then_some(())
    });
    let site = queue_state(&store, id)
        .strip_prefix("started ")
        .unwrap()
        .to_string();
    let other = if site == "a" { &b } else { &a };
    for op in ["hold", "release"] {
        let (status, v) =
            Http::new(&other.url, &token).post(&format!("/jobs/{id}/{op}"), &json!({}));
        assert_eq!(status, 409, "{op}: {v}");
        let msg = v["message"].as_str().unwrap_or_default();
        assert!(
            msg.contains(&format!("job {id} has started at site {site}"))
                && msg.contains("ask that site's dispatcher"),
            "{op}: {v}"
        );
    }
    // Nothing changed: it runs on at its site, not held.
    assert_eq!(queue_state(&store, id), format!("started {site}"));
    let (_, j) = Http::new(&other.url, &token).get(&format!("/jobs/{id}"));
    assert_eq!(j["held"], false, "{j}");
    let (status, v) = Http::new(&other.url, &token).post(&format!("/jobs/{id}/cancel"), &json!({}));
    assert_eq!(status, 200, "{v}");
}

/// A job that appends `ID start T` to `times`, sleeps `secs`, appends `ID end T`, then
/// exits with `code`.
fn timed_job(times: &Path, secs: f64, code: i32) -> Value {
    job_body(
        1,
        60,
        &[
            "sh",
            "-c",
            &format!(
                "echo \"$FORESIGHT_JOB_ID start $(date +%s.%N) $FORESIGHT_ARRAY_JOB_ID \
                 $FORESIGHT_ARRAY_TASK_ID\" >> {t}; sleep {secs}; \
                 echo \"$FORESIGHT_JOB_ID end $(date +%s.%N)\" >> {t}; exit {code}",
                t = times.display()
            ),
        ],
    )
}

/// Per job: (start, end) times and the array job and task ids it saw, from `times`.
fn spans(times: &Path) -> std::collections::BTreeMap<u64, (f64, f64, String)> {
    let mut out = std::collections::BTreeMap::new();
    for line in lines(times) {
        let f: Vec<&str> = line.split(' ').collect();
        let e = out
            .entry(f[0].parse::<u64>().unwrap())
            .or_insert((0.0, 0.0, String::new()));
        let t: f64 = f[2].parse().unwrap();
        if f[1] == "start" {
            assert_eq!(e.0, 0.0, "job {} started twice", f[0]);
            e.0 = t;
            e.2 = f[3..].join(" ");
        } else {
            e.1 = t;
        }
    }
    out
}

#[test]
fn global_dependencies_and_arrays_are_sold_once_their_dependencies_hold_at_any_site() {
    let store = foresight_testkit::postgres::database();
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let a = Peer::start(&root, "a", &store, 2);
    let b = Peer::start(&root, "b", &store, 2);
    let token = admin_token(&a);
    let (on_a, on_b) = (Http::new(&a.url, &token), Http::new(&b.url, &token));
    let times = root.join("times.log");
    // j2 waits for j1, submitted through the other dispatcher; a failing job's dependant is
    // cancelled; an array's tasks are sold one by one, and a job waits for the whole array.
    let j1 = on_a.submit(timed_job(&times, 1.5, 0));
    let mut after = timed_job(&times, 0.1, 0);
    after["dependency"] = format!("afterok:{j1}").into();
    let j2 = on_b.submit(after);
    assert_eq!(queue_state(&store, j2), "waiting -");
    let (_, v) = on_a.get(&format!("/jobs/{j2}"));
    assert_eq!(
        v["reason"],
        format!("waiting in the global queue for its dependencies (afterok:{j1})"),
        "{v}"
    );
    let failing = on_b.submit(timed_job(&times, 0.1, 3));
    let mut doomed = timed_job(&times, 0.1, 0);
    doomed["dependency"] = format!("afterok:{failing}").into();
    let j3 = on_a.submit(doomed);
    let mut array = timed_job(&times, 0.3, 0);
    array["array"] = "0-2".into();
    let arr = on_a.submit(array);
    let mut after_array = timed_job(&times, 0.1, 0);
    after_array["dependency"] = format!("afterok:{arr}").into();
    let j4 = on_b.submit(after_array);
    wait_for("every job to end", Duration::from_secs(60), || {
        let open: u64 = psql(
            &store,
            "SELECT count(*) FROM global_jobs WHERE state NOT IN ('done', 'cancelled')",
        )
        .parse()
        .unwrap();
        (open == 0).then_some(())
    });
    let s = spans(&times);
    // j2 ran once, after j1 had ended (wherever each ran).
    assert!(s[&j2].0 >= s[&j1].1, "{s:?}");
    // j3 never ran, cancelled with the reason.
    assert!(!s.contains_key(&j3), "{s:?}");
    assert_eq!(queue_state(&store, j3), "cancelled -");
    for http in [&on_a, &on_b] {
        let (_, v) = http.get(&format!("/jobs/{j3}"));
        assert_eq!(v["state"], "cancelled", "{v}");
        let reason = v["reason"].as_str().unwrap_or_default();
        assert!(
            reason.starts_with(&format!(
                "DependencyNeverSatisfied: afterok:{failing} can never hold (afterok:{failing} \
                 (job {failing} is failed"
            )),
            "{v}"
        );
    }
    // Three tasks, each its own global job, run once with their array and task ids.
    let tasks: Vec<u64> = (arr..arr + 3).collect();
    let mut seen: Vec<String> = tasks.iter().map(|t| s[t].2.clone()).collect();
    seen.sort();
    assert_eq!(
        seen,
        vec![format!("{arr} 0"), format!("{arr} 1"), format!("{arr} 2")],
        "{s:?}"
    );
    let sold: u64 = psql(
        &store,
        &format!(
            "SELECT count(*) FROM global_jobs WHERE job_id BETWEEN {arr} AND {} \
             AND state = 'done'",
            arr + 2
        ),
    )
    .parse()
    .unwrap();
    assert_eq!(sold, 3);
    // j4 waited for every task.
    let last_task = tasks.iter().map(|t| s[t].1).fold(0.0, f64::max);
    assert!(s[&j4].0 >= last_task, "{s:?}");
    // What cannot be sold across sites is refused, naming why.
    let mut limited = timed_job(&times, 0.1, 0);
    limited["array"] = "0-3%2".into();
    let (status, v) = on_a.post("/jobs", &limited);
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["field"], "array", "{v}");
    let mut single = timed_job(&times, 0.1, 0);
    single["dependency"] = "singleton".into();
    let (status, v) = on_a.post("/jobs", &single);
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["field"], "dependency", "{v}");
    let mut unknown = timed_job(&times, 0.1, 0);
    unknown["dependency"] = "afterok:99999".into();
    let (status, v) = on_b.post("/jobs", &unknown);
    assert_eq!(status, 400, "{v}");
    assert!(
        v["message"].as_str().unwrap().contains("no job 99999"),
        "{v}"
    );
}

#[test]
fn a_dependant_at_any_site_waits_for_the_output_copy_and_a_failed_copy_is_not_ok() {
    let store = foresight_testkit::postgres::database();
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let scratch = root.join("a-scratch");
    // Only a can run a 2-processor job; its cluster runs it in its own work_dir, so the
    // outputs come back to the job's directory (`home`) when it completes.
    let work_dir = format!("work_dir = \"{}\"\n", scratch.display());
    let a = Peer::start_full(&root, "a", &store, 2, 1500, 1, "alpha = 0.3", &work_dir);
    let b = Peer::start(&root, "b", &store, 1);
    let token = admin_token(&a);
    let (on_a, on_b) = (Http::new(&a.url, &token), Http::new(&b.url, &token));
    let home = root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let times = root.join("times.log");
    let made = |outputs: &[&str], script: &str| {
        let mut j = job_body(2, 60, &["sh", "-c", script]);
        j["cwd"] = home.display().to_string().into();
        j["outputs"] = outputs.iter().map(|p| json!({ "path": p })).collect();
        j
    };
    let dependant = |kind: &str, on: u64| {
        let mut j = timed_job(&times, 0.1, 0);
        j["dependency"] = format!("{kind}:{on}").into();
        j
    };
    // n's output is a named pipe: its copy lasts until the test writes into it. A job that
    // never writes its output fails its copy at once.
    let n = on_a.submit(made(&["result.txt"], "mkfifo result.txt"));
    let lost = on_a.submit(made(&["missing.txt"], "true"));
    let next = on_b.submit(dependant("afterok", n));
    let doomed = on_b.submit(dependant("afterok", lost));
    let not_ok = on_b.submit(dependant("afternotok", lost));
    wait_for("n's outputs being copied", Duration::from_secs(60), || {
        let (_, j) = on_a.get(&format!("/jobs/{n}"));
        (j["state"] == "completed" && j["output_staging"]["began_at"].is_i64()).then_some(())
    });
    // Long after n completed, its dependant still waits in the queue: every round decides
    // the waiting jobs first, and a whole round at each site has judged it since n's copy
    // began.
    more_rounds(&[&a, &b], &token, 2);
    assert_eq!(queue_state(&store, next), "waiting -", "{}", b.logs());
    assert!(
        !spans(&times).contains_key(&next),
        "it ran before the copy ended"
    );
    // The copy ends: the dependant is sold and runs, after the copy's end.
    std::fs::write(scratch.join(format!("job-{n}/result.txt")), "complete\n").unwrap();
    let ended = wait_for("n's copy to end", Duration::from_secs(60), || {
        let (_, j) = on_a.get(&format!("/jobs/{n}"));
        j["output_staging"]["ended_at"].as_i64()
    });
    assert_eq!(
        std::fs::read_to_string(home.join("result.txt")).unwrap(),
        "complete\n"
    );
    wait_for("every job to end", Duration::from_secs(60), || {
        let open: u64 = psql(
            &store,
            "SELECT count(*) FROM global_jobs WHERE state NOT IN ('done', 'cancelled')",
        )
        .parse()
        .unwrap();
        (open == 0).then_some(())
    });
    let s = spans(&times);
    assert!(s[&next].0 >= ended as f64, "{s:?} {ended}");
    // A failed copy is not ok: afterok never holds, naming the copy's error; afternotok
    // holds.
    assert_eq!(queue_state(&store, doomed), "cancelled -");
    assert!(!s.contains_key(&doomed), "{s:?}");
    let (_, v) = on_b.get(&format!("/jobs/{doomed}"));
    let reason = v["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&format!(
            "job {lost} completed but copying its outputs failed"
        )) && reason.contains("missing.txt"),
        "{v}"
    );
    assert!(s.contains_key(&not_ok), "{s:?}");
}

/// A job of a site whose dispatcher died is listed by the other sites as run by a site
/// that is down, whose last record may no longer be true, not as simply running there.
#[test]
fn a_dead_sites_jobs_are_listed_as_last_recorded_by_a_site_that_is_down() {
    let store = foresight_testkit::postgres::database();
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let (a, mut b, _, ann) = ann_on_two_sites(&root, &store);
    let (on_a, on_b) = (Http::new(&a.url, &ann), Http::new(&b.url, &ann));
    let log = root.join("runs.log");
    let ends = root.join("ends.log");
    let mut local = ended_job(&log, &ends, 2, 20.0);
    local["cluster"] = "b-c".into();
    let id = on_b.submit(local);
    wait_for("b's job to run", Duration::from_secs(20), || {
        (runs(&log).len() == 1).then_some(())
    });
    let listed = |http: &Http| -> Value {
        http.jobs()
            .into_iter()
            .find(|j| j["id"] == id)
            .unwrap_or_else(|| panic!("job {id} not listed"))
    };
    assert_eq!(listed(&on_a)["reason"], "run by site b");
    b.sigkill();
    // Past b's lease (1.5 s), a says that b is down and its record may be stale.
    let j = wait_for("a to see b down", Duration::from_secs(20), || {
        let j = listed(&on_a);
        j["reason"]
            .as_str()
            .unwrap()
            .contains("which is down")
            .then_some(j)
    });
    assert_eq!(j["state"], "running", "the last state b recorded: {j}");
    assert!(
        j["reason"]
            .as_str()
            .unwrap()
            .starts_with("run by site b, which is down"),
        "{j}"
    );
    let (status, shown) = on_a.get(&format!("/jobs/{id}"));
    assert_eq!(status, 200, "{shown}");
    assert_eq!(
        shown["reason"], j["reason"],
        "one job, one reason everywhere"
    );
}
