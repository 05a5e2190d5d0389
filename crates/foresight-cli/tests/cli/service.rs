#![allow(clippy::unwrap_used)] // tests fail loudly by design
//! End-to-end tests of the service: the real `foresight server start` on a free loopback port
//! with a temporary data directory, driven through the CLI as people use it and through the
//! REST API directly. Jobs are real processes.

use crate::common;

use crate::common::{
    align_to_second, int, is_final, job_body, lines, now, wait_for, Server, TWO_CLUSTERS,
};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Every (cluster, processor) a job held over `[started_at, ended_at)`.
struct Run {
    id: u64,
    start: i64,
    end: i64,
    held: Vec<(String, u64)>,
}

/// Checks that the recorded placements never double-book a processor and never use more than
/// a cluster has: every part holds exactly its processor count of distinct processors of its
/// cluster, and no two jobs overlapping in time share a processor.
fn assert_no_double_booking(jobs: &[Value], capacity: &BTreeMap<&str, u64>) {
    let mut runs = Vec::new();
    for j in jobs {
        let id = j["id"].as_u64().unwrap();
        let (start, end) = (int(j, "started_at"), int(j, "ended_at"));
        assert!(start <= end, "job {id} ends before it starts: {j}");
        let parts = j["parts"].as_array().unwrap();
        assert!(!parts.is_empty(), "job {id} ran without a placement: {j}");
        let mut total = 0;
        let mut held = Vec::new();
        for p in parts {
            let cluster = p["cluster"].as_str().unwrap();
            let procs = p["procs"].as_u64().unwrap();
            let ids: Vec<u64> = p["processors"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
                .collect();
            let distinct: BTreeSet<u64> = ids.iter().copied().collect();
            assert_eq!(
                (ids.len() as u64, distinct.len() as u64),
                (procs, procs),
                "job {id}: a part of {procs} processors on {cluster} ran on {ids:?}: {j}"
            );
            let cap = capacity[cluster];
            assert!(
                ids.iter().all(|&p| p < cap),
                "job {id}: processors {ids:?} outside {cluster}'s {cap}"
            );
            total += procs;
            held.extend(ids.into_iter().map(|p| (cluster.to_string(), p)));
        }
        assert_eq!(total, j["procs"].as_u64().unwrap(), "job {id}'s parts: {j}");
        runs.push(Run {
            id,
            start,
            end,
            held,
        });
    }
    // No processor held by two jobs at once ([start, end) in whole seconds).
    for (i, a) in runs.iter().enumerate() {
        for b in &runs[i + 1..] {
            if a.start < b.end && b.start < a.end {
                let shared: Vec<_> = a.held.iter().filter(|p| b.held.contains(p)).collect();
                assert!(
                    shared.is_empty(),
                    "jobs {} [{}, {}) and {} [{}, {}) both held {shared:?}",
                    a.id,
                    a.start,
                    a.end,
                    b.id,
                    b.start,
                    b.end
                );
            }
        }
    }
    // At no moment more processors in use than a cluster has (ends before starts).
    for (&cluster, &cap) in capacity {
        let mut events: Vec<(i64, i64)> = Vec::new();
        for r in &runs {
            let n = r.held.iter().filter(|(c, _)| c == cluster).count() as i64;
            if n > 0 && r.start < r.end {
                events.push((r.start, n));
                events.push((r.end, -n));
            }
        }
        events.sort();
        let mut busy = 0;
        for (t, d) in events {
            busy += d;
            assert!(
                busy <= cap as i64,
                "{busy} processors of {cluster} in use at {t} (it has {cap})"
            );
        }
    }
}

/// 1. A hundred real jobs of every kind on 8 processors, local and global: each ends in the
///    state and with the exit code its command calls for, and no processor is ever
///    double-booked.
#[test]
fn hundred_real_jobs_end_right_and_never_share_a_processor() {
    let s = Server::start(8);
    let mut expected: Vec<(u64, &str, Option<i64>)> = Vec::new();
    // Every ninth job is a global one (planned over the grid, reserved, then started at the
    // reserved start). They come first: a global job submitted behind a local queue is planned
    // after that queue's walltimes and would wait for them even when the jobs end early.
    let order = (0..100u32)
        .filter(|i| i % 9 == 0)
        .chain((0..100).filter(|i| i % 9 != 0));
    for i in order {
        let procs = (1 + (i * 7) % 3).to_string();
        // (command, walltime, final state, exit code)
        let (command, time, state, code): (&[&str], &str, &str, Option<i64>) = match i % 10 {
            0..=3 => (&["sleep", "0.2"], "3s", "completed", Some(0)),
            4 | 5 => (&["true"], "3s", "completed", Some(0)),
            6 => (&["false"], "3s", "failed", Some(1)),
            7 => (&["sh", "-c", "exit 3"], "3s", "failed", Some(3)),
            8 => (
                &["sh", "-c", "sleep 0.1; exit 0"],
                "3s",
                "completed",
                Some(0),
            ),
            _ => (&["sleep", "30"], "1s", "timeout", None),
        };
        let name = format!("j{i}");
        let mut args = vec!["-n", &procs, "-t", time, "--name", &name];
        if i % 9 != 0 {
            args.extend(["--cluster", "local"]);
        }
        args.push("--");
        args.extend(command);
        expected.push((s.submit(&args), state, code));
    }
    let http = s.http();
    wait_for("all 100 jobs final", MINUTE, || {
        let jobs = http.jobs();
        jobs.iter().all(is_final).then_some(())
    });
    let jobs = parse(&s.run(&["job", "list", "--all", "-o", "json"]));
    let jobs = jobs.as_array().unwrap();
    assert_eq!(jobs.len(), 100);
    let by_id: HashMap<u64, &Value> = jobs
        .iter()
        .map(|j| (j["id"].as_u64().unwrap(), j))
        .collect();
    for (id, state, code) in &expected {
        let j = by_id[id];
        assert_eq!(j["state"], *state, "job {id}: {j}");
        assert_eq!(j["exit_code"].as_i64(), *code, "job {id}: {j}");
        match *state {
            "timeout" => {
                // Killed at its walltime: SIGTERM (or SIGKILL after the grace period).
                assert!(
                    matches!(j["signal"].as_i64(), Some(15 | 9)),
                    "job {id}: {j}"
                );
                let ran = int(j, "ended_at") - int(j, "started_at");
                assert!(
                    (1..=3).contains(&ran),
                    "job {id} ran {ran} s with -t 1s: {j}"
                );
            }
            "failed" => {
                // A failing job is reported with its exit code and its stderr file.
                let reason = j["reason"].as_str().unwrap();
                assert!(
                    reason.contains(&format!("code {}", code.unwrap())),
                    "job {id}: {j}"
                );
                let stderr = j["stderr"].as_str().unwrap();
                assert!(std::path::Path::new(stderr).is_file(), "job {id}: {j}");
            }
            _ => assert!(j["signal"].is_null(), "job {id}: {j}"),
        }
    }
    // `job show` says the same as `job list`.
    for (id, _, _) in expected.iter().step_by(17) {
        assert_eq!(&s.show(*id), by_id[id]);
    }
    assert_no_double_booking(jobs, &BTreeMap::from([("local", 8)]));
}

/// 2. A job bound to an advance reservation starts at the reservation's start, to the second,
///    not earlier even though processors are free; with --allow-early-start it starts at once.
#[test]
fn a_reservation_is_honoured_to_the_second() {
    let s = Server::start(4);
    let alice = s.add_user("alice", None);
    let scratch = s.scratch();
    let r = parse(&s.run(&[
        "reservation",
        "create",
        "--cluster",
        "local",
        "-n",
        "2",
        "--start",
        "+3s",
        "-t",
        "30s",
        "--user",
        "alice",
        "-o",
        "json",
    ]));
    assert_eq!(r["state"], "committed");
    assert_eq!(r["acl"]["users"], json!(["alice"]));
    let (rid, start) = (r["id"].as_u64().unwrap(), int(&r, "start"));
    let stamp = scratch.join("bound.start");
    let bound: u64 = s
        .run_as(
            &alice,
            &[
                "job",
                "submit",
                "--reservation",
                &rid.to_string(),
                "-n",
                "2",
                "-t",
                "10s",
                "--",
                "sh",
                "-c",
                &format!("date +%s > {}; sleep 0.5", stamp.display()),
            ],
        )
        .trim()
        .parse()
        .unwrap();
    let submitted = int(&s.show(bound), "submitted_at");
    assert!(
        submitted < start,
        "the test was too slow to submit before the start"
    );
    // Waits, although all four processors are free.
    let j = s.show(bound);
    assert_eq!(j["started_at"], Value::Null, "{j}");
    assert_ne!(j["state"], "running", "{j}");

    let j = s.wait_final(bound, MINUTE);
    assert_eq!(j["state"], "completed", "{j}");
    assert_eq!(
        int(&j, "started_at"),
        start,
        "started at the reservation's start: {j}"
    );
    assert_eq!(j["reservation"].as_u64(), Some(rid));
    assert_eq!(j["parts"][0]["processors"].as_array().unwrap().len(), 2);
    // The process itself did not run before the window.
    let ran: i64 = std::fs::read_to_string(&stamp)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(ran >= start, "the process ran at {ran}, before {start}");

    // A far reservation; the job may start early, and does, at its submission.
    let r2 = parse(&s.run(&[
        "reservation",
        "create",
        "--cluster",
        "local",
        "-n",
        "2",
        "--start",
        "+10m",
        "-t",
        "10m",
        "--user",
        "alice",
        "-o",
        "json",
    ]));
    let early: u64 = s
        .run_as(
            &alice,
            &[
                "job",
                "submit",
                "--reservation",
                &r2["id"].to_string(),
                "--allow-early-start",
                "-n",
                "2",
                "-t",
                "10s",
                "--",
                "true",
            ],
        )
        .trim()
        .parse()
        .unwrap();
    let j = s.wait_final(early, MINUTE);
    assert_eq!(j["state"], "completed", "{j}");
    assert_eq!(int(&j, "started_at"), int(&j, "submitted_at"), "{j}");
    assert!(int(&j, "started_at") < int(&r2, "start"));
}

/// 3a. Two-phase: a tentative reservation that is not committed expires after its TTL and
///     its processors serve a waiting job; a committed one stays until released.
#[test]
fn an_uncommitted_tentative_reservation_expires_and_a_committed_one_stays() {
    let s = Server::start(4);
    let create = |ttl: &str| {
        parse(&s.run(&[
            "reservation",
            "create",
            "--cluster",
            "local",
            "-n",
            "2",
            "-t",
            "10m",
            "--ttl",
            ttl,
            "-o",
            "json",
        ]))
    };
    let r1 = create("2s");
    let r2 = create("2s");
    for r in [&r1, &r2] {
        assert_eq!(r["state"], "tentative", "{r}");
        assert_eq!(int(r, "expires_at"), int(r, "start") + 2, "{r}");
    }
    let r2id = r2["id"].to_string();
    let c = parse(&s.run(&["reservation", "commit", &r2id, "-o", "json"]));
    assert_eq!(c["state"], "committed", "{c}");
    assert_eq!(c["expires_at"], Value::Null);

    // Both reservations hold the whole cluster: these wait.
    let small = s.submit(&[
        "--cluster",
        "local",
        "-n",
        "2",
        "-t",
        "30s",
        "--",
        "sleep",
        "0.3",
    ]);
    let large = s.submit(&["--cluster", "local", "-n", "3", "-t", "30s", "--", "true"]);
    for id in [small, large] {
        assert_eq!(s.show(id)["started_at"], Value::Null);
    }
    // r1 lapses: its processors run the small job, not before the expiry.
    let j = s.wait_final(small, Duration::from_secs(20));
    assert_eq!(j["state"], "completed", "{j}");
    assert!(
        int(&j, "started_at") >= int(&r1, "expires_at"),
        "{j} vs {r1}"
    );
    let r1now = parse(&s.run(&["reservation", "show", &r1["id"].to_string(), "-o", "json"]));
    assert_eq!(r1now["state"], "expired", "{r1now}");

    // r2, committed, still holds its two processors well after its TTL: 3 never fit.
    let ttl_over = int(&r2, "expires_at") + 2;
    wait_for("two seconds past r2's TTL", Duration::from_secs(20), || {
        (now() >= ttl_over).then_some(())
    });
    let r2now = parse(&s.run(&["reservation", "show", &r2id, "-o", "json"]));
    assert!(
        matches!(r2now["state"].as_str(), Some("committed" | "active")),
        "{r2now}"
    );
    let j = s.show(large);
    assert_eq!(j["started_at"], Value::Null, "{j}");
    // Released, it gives them back.
    let released_at = now();
    let rel = parse(&s.run(&["reservation", "release", &r2id, "-o", "json"]));
    assert_eq!(rel["state"], "released");
    let j = s.wait_final(large, Duration::from_secs(20));
    assert_eq!(j["state"], "completed", "{j}");
    assert!(int(&j, "started_at") >= released_at);
}

/// 3b. A global job larger than any cluster is co-allocated over two: a committed job
///     reservation on each, and one synchronous start of both parts.
#[test]
fn a_co_allocated_job_is_reserved_on_both_clusters_and_starts_once() {
    let s = Server::with_config(TWO_CLUSTERS);
    let scratch = s.scratch();
    // Cluster a is busy for a while, so the job is reserved ahead of its start.
    let blocker = s.submit(&["--cluster", "a", "-n", "2", "-t", "4s", "--", "sleep", "2"]);
    assert_eq!(s.show(blocker)["state"], "running");
    let log = scratch.join("parts.log");
    let id = s.submit(&[
        "-n",
        "3",
        "-t",
        "5s",
        "--",
        "sh",
        "-c",
        &format!(
            "echo $FORESIGHT_CLUSTER $(date +%s) $FORESIGHT_PROCESSORS >> {}",
            log.display()
        ),
    ]);
    let j = s.wait_job(id, "reserved", Duration::from_secs(10), |j| {
        j["state"] == "reserved"
    });
    let planned = int(&j, "planned_start");
    let parts: BTreeMap<String, u64> = j["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["cluster"].as_str().unwrap().to_string(),
                p["procs"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(parts.keys().collect::<Vec<_>>(), ["a", "b"], "{j}");
    assert_eq!(parts.values().sum::<u64>(), 3, "{j}");
    let rs = parse(&s.run(&["reservation", "list", "-o", "json"]));
    let mine: Vec<&Value> = rs
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["acl"]["job"].as_u64() == Some(id))
        .collect();
    assert_eq!(mine.len(), 2, "one reservation per cluster: {rs}");
    for r in &mine {
        assert_eq!(r["kind"], "job");
        assert_eq!(r["state"], "committed", "{r}");
        assert_eq!(int(r, "start"), planned, "{r}");
        assert_eq!(int(r, "end"), planned + 5, "{r}");
        assert_eq!(
            r["procs"].as_u64(),
            Some(parts[r["cluster"].as_str().unwrap()])
        );
    }

    let j = s.wait_final(id, MINUTE);
    assert_eq!(j["state"], "completed", "{j}");
    // The blocker ends 2 s before its walltime: the reservation moves earlier, on both
    // clusters together (work conservation), never later.
    let started = int(&j, "started_at");
    assert!(started <= planned, "{j}");
    // Both parts ran, each once, in the same second: the (moved) reserved start.
    let ran = lines(&log);
    assert_eq!(ran.len(), 2, "{ran:?}");
    let mut clusters = BTreeSet::new();
    for line in &ran {
        let f: Vec<&str> = line.split(' ').collect();
        clusters.insert(f[0].to_string());
        // `date` runs a moment after the launch: in the same second, or the next on a
        // loaded machine.
        let at = f[1].parse::<i64>().unwrap();
        assert!(
            (started..=started + 1).contains(&at),
            "{ran:?} vs {started}"
        );
        assert_eq!(f[2].split(',').count() as u64, parts[f[0]], "{ran:?}");
    }
    assert_eq!(clusters.into_iter().collect::<Vec<_>>(), ["a", "b"]);
    let rs = parse(&s.run(&["reservation", "list", "-o", "json"]));
    for r in rs.as_array().unwrap() {
        if r["acl"]["job"].as_u64() == Some(id) {
            assert_eq!(r["state"], "finished", "{r}");
        }
    }
    let b = s.show(blocker);
    assert_no_double_booking(&[b, j], &BTreeMap::from([("a", 2), ("b", 2)]));
}

/// Runs the CLI expecting a refusal: exit code 2 and the stderr text.
fn refused(mut c: assert_cmd::Command, args: &[&str]) -> String {
    let out = c.args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(
        out.status.code(),
        Some(2),
        "foresight {}: {stderr}",
        args.join(" ")
    );
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    stderr
}

/// 4. Users see and touch only their own jobs; reservation ACLs admit only whom they name;
///    reservations and users are the administrators'; budgets cap the worst-case cost.
#[test]
fn acls_budgets_and_user_isolation() {
    let s = Server::start(4);
    let alice = s.add_user("alice", None);
    let bob = s.add_user("bob", None);
    let hers = s
        .run_as(&alice, &["job", "submit", "--hold", "--", "true"])
        .trim()
        .to_string();
    let his = s
        .run_as(&bob, &["job", "submit", "--hold", "--", "true"])
        .trim()
        .to_string();

    // Bob cannot see or cancel Alice's job: it does not exist for him.
    let e = refused(s.cli_as(&bob), &["job", "show", &hers]);
    assert!(
        e.contains("404") && e.contains(&format!("no job {hers}")),
        "{e}"
    );
    let e = refused(s.cli_as(&bob), &["job", "cancel", &hers]);
    assert!(
        e.contains("404") && e.contains(&format!("no job {hers}")),
        "{e}"
    );
    let (status, body) = s.http_as(&bob).get(&format!("/jobs/{hers}"));
    assert_eq!(status, 404, "{body}");
    let (status, body) = s
        .http_as(&bob)
        .post(&format!("/jobs/{hers}/cancel"), &json!({}));
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["code"], "not_found");
    assert_eq!(s.show(hers.parse().unwrap())["state"], "pending");
    let ids = |token: &str| -> Vec<String> {
        parse(&s.run_as(token, &["job", "list", "--all", "-o", "json"]))
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].to_string())
            .collect()
    };
    assert_eq!(ids(&bob), [his.as_str()]);
    assert_eq!(ids(&alice), [hers.as_str()]);
    assert_eq!(ids(&s.token), [hers.as_str(), his.as_str()]);
    // Her own job she can cancel.
    let c = parse(&s.run_as(&alice, &["job", "cancel", &hers, "-o", "json"]));
    assert_eq!(c["state"], "cancelled");

    // A reservation for Alice only.
    let r = s
        .run(&[
            "reservation",
            "create",
            "--cluster",
            "local",
            "-n",
            "2",
            "--start",
            "+1h",
            "-t",
            "10m",
            "--user",
            "alice",
        ])
        .trim()
        .to_string();
    let e = refused(
        s.cli_as(&bob),
        &["job", "submit", "--reservation", &r, "--", "true"],
    );
    assert!(
        e.contains("403") && e.contains(&format!("reservation {r}")) && e.contains("bob"),
        "{e}"
    );
    let (status, body) = s.http_as(&bob).post(
        "/jobs",
        &json!({"walltime": 60, "reservation": r.parse::<u64>().unwrap(), "command": ["true"]}),
    );
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["field"], "reservation");
    assert!(body["message"]
        .as_str()
        .unwrap()
        .contains(&format!("reservation {r}")));
    // Alice may use it.
    s.run_as(
        &alice,
        &[
            "job",
            "submit",
            "--reservation",
            &r,
            "-t",
            "1m",
            "--",
            "true",
        ],
    );
    // Bob does not even see it; Alice does.
    let visible = |token: &str| parse(&s.run_as(token, &["reservation", "list", "-o", "json"]));
    assert_eq!(visible(&bob), json!([]));
    assert_eq!(visible(&alice).as_array().unwrap().len(), 1);
    refused(s.cli_as(&bob), &["reservation", "show", &r]);

    // Administration is for administrators.
    for args in [
        &[
            "reservation",
            "create",
            "--cluster",
            "local",
            "-n",
            "1",
            "-t",
            "1m",
        ][..],
        &["reservation", "release", &r],
        &["user", "add", "mallory"],
        &["user", "list"],
        &["user", "budget", "bob", "--set", "1000"],
    ] {
        let e = refused(s.cli_as(&bob), args);
        assert!(
            e.contains("403") && e.contains("bob is not an administrator"),
            "{args:?}: {e}"
        );
    }
    let (status, body) = s.http_as(&bob).post(
        "/reservations",
        &json!({"cluster": "local", "procs": 1, "duration": 60}),
    );
    assert_eq!((status, &body["field"]), (403, &json!("user")), "{body}");
    let (status, body) = s.http_as(&alice).post("/users", &json!({"name": "eve"}));
    assert_eq!(status, 403, "{body}");
    let (status, _) = s.http_as("not-a-token").get("/jobs");
    assert_eq!(status, 401);

    // Budgets: the worst case (price × procs × walltime) must fit what is left.
    let carol = s.add_user("carol", Some(50.0));
    let e = refused(
        s.cli_as(&carol),
        &["job", "submit", "-n", "2", "-t", "1m", "--", "true"],
    );
    assert!(
        e.contains("402") && e.contains("120.00") && e.contains("50.00"),
        "{e}"
    );
    let (status, body) = s.http_as(&carol).post(
        "/jobs",
        &json!({"procs": 2, "walltime": 60, "price": 0.5, "command": ["true"]}),
    );
    assert_eq!(status, 402, "{body}");
    assert_eq!(body["code"], "budget_exceeded");
    assert_eq!(body["field"], "price");
    let m = body["message"].as_str().unwrap();
    assert!(m.contains("60.00") && m.contains("50.00"), "{m}");
    // Within the budget, accepted.
    let ok = s
        .run_as(
            &carol,
            &["job", "submit", "-n", "1", "-t", "40s", "--", "true"],
        )
        .trim()
        .parse::<u64>()
        .unwrap();
    assert_eq!(s.wait_final(ok, MINUTE)["state"], "completed");
}

/// A local job on cluster `local` of `procs` processors that runs (`sleep 1000`) until its
/// `walltime`: its id and record, running.
fn running_blocker(s: &Server, procs: &str, walltime: &str) -> (u64, Value) {
    let id = s.submit(&[
        "--cluster",
        "local",
        "-n",
        procs,
        "-t",
        walltime,
        "--",
        "sleep",
        "1000",
    ]);
    let b = s.show(id);
    assert_eq!(b["state"], "running", "{b}");
    (id, b)
}

/// 5. With a blocker running to its walltime on the whole cluster, `estimate` gives T; the
///    same request submitted is planned at T and starts at T.
#[test]
fn the_estimate_is_the_start() {
    let s = Server::start(2);
    let scratch = s.scratch();
    // The blocker is killed at its walltime: start + 5 s, in the same second as planned
    // when it starts early in a second (the service counts whole seconds).
    align_to_second(0.3);
    let (blocker, b) = running_blocker(&s, "2", "5s");
    let blocked_from = int(&b, "started_at");

    let est = parse(&s.run(&["estimate", "-n", "2", "-t", "10s", "-o", "json"]));
    let t = int(&est, "earliest");
    assert_eq!(t, blocked_from + 5, "{est}");
    assert_eq!(est["clusters"][0]["start"].as_i64(), Some(t), "{est}");
    assert_eq!(int(&est, "end"), t + 10, "{est}");

    let stamp = scratch.join("start");
    let id = s.submit(&[
        "-n",
        "2",
        "-t",
        "10s",
        "--",
        "sh",
        "-c",
        &format!("date +%s > {}", stamp.display()),
    ]);
    let j = s.wait_job(id, "planned", Duration::from_secs(5), |j| {
        !j["planned_start"].is_null()
    });
    assert_eq!(int(&j, "planned_start"), t, "{j}");
    assert!(j["started_at"].is_null(), "{j}");
    let j = s.wait_final(id, MINUTE);
    assert_eq!(j["state"], "completed", "{j}");
    assert_eq!(int(&j, "started_at"), t, "{j}");
    assert_eq!(int(&j, "first_planned_start"), t, "{j}");
    let b = s.show(blocker);
    assert_eq!(b["state"], "timeout", "{b}");
    assert!(int(&b, "ended_at") <= t, "{b}");
    let ran: i64 = std::fs::read_to_string(&stamp)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(ran >= t, "ran at {ran}, before {t}");
    assert_no_double_booking(&[b, j], &BTreeMap::from([("local", 2)]));
}

/// `GET /plan` draws each thing on the processors that hold it: the running job on the
/// processor it runs on, the planned global job on both processors from the blocker's end
/// for its walltime; free time is priced, busy time is not; another user sees no job ids.
#[test]
fn the_plan_shows_running_and_planned_jobs_on_their_processors() {
    let s = Server::start(2);
    let (blocker, b) = running_blocker(&s, "1", "2m");
    let on = b["parts"][0]["processors"][0].as_u64().unwrap();
    let t = int(&b, "started_at") + 120;
    let queued = s.submit(&["-n", "2", "-t", "10s", "--", "true"]);
    let q = s.wait_job(queued, "planned", Duration::from_secs(5), |j| {
        !j["planned_start"].is_null()
    });
    assert_eq!(int(&q, "planned_start"), t, "{q}");

    let (status, plans) = s.http().get(&format!("/plan?to={}", t + 60));
    assert_eq!(status, 200, "{plans}");
    let slots = plans[0]["slots"].as_array().unwrap();
    let of = |occupant: &str| -> Vec<(u64, i64, i64, Value)> {
        slots
            .iter()
            .filter(|x| x["occupant"] == occupant)
            .map(|x| {
                (
                    x["processor"].as_u64().unwrap(),
                    x["start"].as_i64().unwrap(),
                    x["end"].as_i64().unwrap(),
                    x["id"].clone(),
                )
            })
            .collect()
    };
    let running = of("running");
    assert_eq!(running.len(), 1, "{running:?}");
    assert_eq!((running[0].0, running[0].2), (on, t), "{running:?}");
    assert_eq!(running[0].3, json!(blocker));
    let planned = of("planned");
    assert_eq!(
        planned,
        vec![(0, t, t + 10, json!(queued)), (1, t, t + 10, json!(queued))],
        "{slots:?}"
    );
    for x in slots {
        let free = x["occupant"] == "free";
        assert_eq!(x["cost"].is_number(), free, "{x}");
        assert!(x["cost"].as_f64().is_none_or(|c| c >= 0.0), "{x}");
    }
    let chart = s.run(&["plan", "show", "--to", "+3m"]);
    assert!(chart.contains('#') && chart.contains('P'), "{chart}");

    let dave = s.add_user("dave", None);
    let (status, theirs) = s.http_as(&dave).get("/plan");
    assert_eq!(status, 200, "{theirs}");
    let ids: Vec<&Value> = theirs[0]["slots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| &x["id"])
        .filter(|id| !id.is_null())
        .collect();
    assert!(ids.is_empty(), "{theirs}");
    // The queued job first: once the blocker is gone it would start at once and might
    // already be over when cancelled.
    s.run(&["job", "cancel", &queued.to_string()]);
    s.run(&["job", "cancel", &blocker.to_string()]);
}

/// `estimate` answers per cluster and over the grid from one plan that holds the queued
/// global jobs: with a blocker until T (beyond the reservation lead time, so the queued
/// 2-processor job is only planned at T for 10 s, not yet reserved on the cluster), a
/// 1-processor request starts at T + 10 on the cluster and on the grid alike.
#[test]
fn the_estimate_counts_the_queued_global_jobs() {
    let s = Server::start(2);
    align_to_second(0.3);
    let (blocker, b) = running_blocker(&s, "2", "2m");
    let t = int(&b, "started_at") + 120;
    let queued = s.submit(&["-n", "2", "-t", "10s", "--", "true"]);
    let q = s.wait_job(queued, "planned", Duration::from_secs(5), |j| {
        !j["planned_start"].is_null()
    });
    assert_eq!(int(&q, "planned_start"), t, "{q}");

    let est = parse(&s.run(&["estimate", "-n", "1", "-t", "1h", "-o", "json"]));
    assert_eq!(int(&est, "earliest"), t + 10, "{est}");
    assert_eq!(est["clusters"][0]["start"].as_i64(), Some(t + 10), "{est}");
    // The queued job first: once the blocker is gone it would start at once and might
    // already be over when cancelled.
    s.run(&["job", "cancel", &queued.to_string()]);
    s.run(&["job", "cancel", &blocker.to_string()]);
}

/// Submission `i` of the storm: appends its id to `runs`, exits with `i % 4`; every tenth
/// sleeps a second first; every twentieth is global, at a price that outbids the local queue
/// (else it would be planned behind the walltimes of all the local jobs queued before it).
fn storm_job(i: usize, runs: &std::path::Path) -> Value {
    let sleep = if i % 10 == 0 { "sleep 1; " } else { "" };
    let command = json!([
        "sh",
        "-c",
        format!(
            "echo $FORESIGHT_JOB_ID >> {}; {sleep}exit {}",
            runs.display(),
            i % 4
        )
    ]);
    if i % 20 == 0 {
        // Global: planned, reserved, started at the reserved start.
        json!({"name": format!("k{i}"), "walltime": 3, "price": 10, "command": command})
    } else {
        json!({"name": format!("k{i}"), "walltime": 4, "cluster": "local", "command": command})
    }
}

/// 6. SIGKILL in the middle of 1000 concurrent submissions (single and batch, over HTTP):
///    after a restart every acknowledged job exists exactly once, and every job runs exactly
///    once to the right exit code; jobs running at the kill are re-adopted.
#[test]
fn sigkill_during_a_thousand_submissions_loses_nothing() {
    let mut s = Server::start(32);
    let runs = s.scratch().join("runs");
    let body = move |i: usize| storm_job(i, &runs);
    let runs = s.scratch().join("runs");
    // Jobs that are surely running when the daemon dies.
    let mut sleepers = Vec::new();
    for i in 0..4 {
        let mut b = body(1001 + i * 2);
        b["command"][2] = json!(format!(
            "echo $FORESIGHT_JOB_ID >> {}; sleep 2",
            runs.display()
        ));
        sleepers.push(s.http().submit(b));
    }
    let sleepers: Vec<(u64, i64)> = sleepers
        .into_iter()
        .map(|id| {
            let j = s.wait_job(id, "running", Duration::from_secs(10), |j| {
                j["state"] == "running"
            });
            (id, int(&j, "started_at"))
        })
        .collect();

    let acked: Arc<Mutex<Vec<(u64, usize)>>> = Arc::default();
    let count = Arc::new(AtomicUsize::new(0));
    let go = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..10)
        .map(|t| {
            let (url, token) = (s.url.clone(), s.token.clone());
            let (acked, count, go) = (acked.clone(), count.clone(), go.clone());
            let body = body.clone();
            std::thread::spawn(move || {
                let http = common::Http::new(&url, &token);
                while !go.load(Ordering::Acquire) {
                    std::thread::yield_now();
                }
                let mine: Vec<usize> = (t * 100..t * 100 + 100).collect();
                let mut at = 0;
                let mut request = 0;
                while at < mine.len() {
                    // Every third request is a batch of 10, the others single jobs.
                    let n = if request % 3 == 2 {
                        10.min(mine.len() - at)
                    } else {
                        1
                    };
                    let chunk = &mine[at..at + n];
                    let reply = if n == 1 {
                        http.try_post("/jobs", &body(chunk[0]))
                    } else {
                        let jobs: Vec<Value> = chunk.iter().map(|&i| body(i)).collect();
                        http.try_post("/jobs/batch", &json!({ "jobs": jobs }))
                    };
                    let Ok(reply) = reply else { return };
                    if reply.status().as_u16() != 201 {
                        return; // the daemon died mid-answer
                    }
                    let Ok(v) = reply.json::<Value>() else { return };
                    let ids: Vec<u64> = if n == 1 {
                        vec![v["id"].as_u64().unwrap()]
                    } else {
                        v["ids"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|x| x.as_u64().unwrap())
                            .collect()
                    };
                    assert_eq!(ids.len(), n);
                    acked
                        .lock()
                        .unwrap()
                        .extend(ids.into_iter().zip(chunk.iter().copied()));
                    count.fetch_add(n, Ordering::AcqRel);
                    at += n;
                    request += 1;
                }
            })
        })
        .collect();
    go.store(true, Ordering::Release);
    while count.load(Ordering::Acquire) < 400 {
        std::hint::spin_loop();
    }
    s.sigkill();
    let killed_at = now();
    for t in threads {
        t.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() >= 400 && acked.len() < 1000,
        "the kill came in the middle: {} acknowledged",
        acked.len()
    );

    let restarted_at = now();
    s.launch();
    let http = s.http();
    let jobs = wait_for(
        "every job final after the restart",
        Duration::from_secs(90),
        || {
            let jobs = http.jobs();
            jobs.iter().all(is_final).then_some(jobs)
        },
    );
    // The CLI's view, as the administrator.
    let listed = parse(&s.run(&["job", "list", "--all", "--limit", "100000", "-o", "json"]));
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), jobs.len());
    let mut by_id: HashMap<u64, &Value> = HashMap::new();
    let mut names = BTreeSet::new();
    for j in listed {
        let id = j["id"].as_u64().unwrap();
        assert!(by_id.insert(id, j).is_none(), "job {id} listed twice");
        let name = j["name"].as_str().unwrap().to_string();
        assert!(names.insert(name.clone()), "submission {name} stored twice");
    }
    for (id, i) in &acked {
        let j = by_id
            .get(id)
            .unwrap_or_else(|| panic!("acknowledged job {id} (k{i}) is gone"));
        assert_eq!(j["name"], format!("k{i}"), "{j}");
    }
    // Every job, acknowledged or not, ran exactly once and ended as its command says.
    let mut ran: HashMap<u64, usize> = HashMap::new();
    for line in lines(&runs) {
        *ran.entry(line.parse().unwrap()).or_default() += 1;
    }
    for j in listed {
        let id = j["id"].as_u64().unwrap();
        let i: usize = j["name"].as_str().unwrap()[1..].parse().unwrap();
        let code = if i >= 1000 { 0 } else { i % 4 } as i64;
        assert_eq!(
            ran.get(&id),
            Some(&1),
            "job {id} (k{i}) ran {:?} times: {j}",
            ran.get(&id)
        );
        assert_eq!(
            j["state"],
            if code == 0 { "completed" } else { "failed" },
            "{j}"
        );
        assert_eq!(j["exit_code"].as_i64(), Some(code), "{j}");
    }
    assert_eq!(ran.len(), listed.len(), "runs of jobs that do not exist");
    // The jobs running at the kill were re-adopted, not run again.
    for (id, started) in sleepers {
        let j = by_id[&id];
        assert_eq!(int(j, "started_at"), started, "{j}");
    }
    assert_no_double_booking(listed, &BTreeMap::from([("local", 32)]));
    let across = listed
        .iter()
        .filter(|j| int(j, "started_at") < killed_at && int(j, "ended_at") > restarted_at)
        .count();
    eprintln!(
        "{} acknowledged of 1000 submitted, {} stored, {across} running across the restart",
        acked.len(),
        listed.len(),
    );
}

/// 7. SIGTERM: the daemon exits 0 promptly, removes `server.url`, keeps its state; running
///    jobs keep running without it and are re-adopted by the next start.
#[test]
fn graceful_shutdown_keeps_state_and_jobs() {
    let mut s = Server::start(4);
    let scratch = s.scratch();
    let done = s.submit(&["--cluster", "local", "--", "sh", "-c", "exit 2"]);
    s.wait_final(done, MINUTE);
    let trace = |name: &str| scratch.join(name);
    let go = scratch.join("go");
    // Ends while the daemon is down.
    let short = s.submit(&[
        "--cluster",
        "local",
        "-t",
        "4s",
        "--",
        "sh",
        "-c",
        &format!(
            "echo start >> {0}; sleep 2; echo end >> {0}",
            trace("short").display()
        ),
    ]);
    // Runs until told to stop, after the restart.
    let long = s.submit(&[
        "--cluster",
        "local",
        "-t",
        "1m",
        "--",
        "sh",
        "-c",
        &format!(
            "echo start >> {0}; while [ ! -e {1} ]; do sleep 0.1; done; echo end >> {0}",
            trace("long").display(),
            go.display()
        ),
    ]);
    let held = s.submit(&["--hold", "-n", "2", "--", "true"]);
    // Planned behind the short job's walltime: reserved, not started, at the shutdown.
    let reserved = s.submit(&["-n", "3", "-t", "30s", "--", "true"]);
    for id in [short, long] {
        s.wait_job(id, "running", Duration::from_secs(10), |j| {
            j["state"] == "running"
        });
    }
    s.wait_job(reserved, "planned", Duration::from_secs(10), |j| {
        j["state"] == "reserved"
    });
    let before = parse(&s.run(&["job", "list", "--all", "-o", "json"]));

    let status = s
        .sigterm(Duration::from_secs(10))
        .expect("exits within 10 s of SIGTERM");
    assert!(status.success(), "{status}");
    assert!(!s.dir.join("server.url").exists());
    assert!(s.logs().contains("foresight stopped"), "{}", s.logs());
    // Without the daemon, the short job finishes and the long one runs on.
    wait_for("the short job to end", Duration::from_secs(20), || {
        (lines(&trace("short")) == ["start", "end"]).then_some(())
    });
    assert_eq!(lines(&trace("long")), ["start"]);

    let relaunched = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    s.launch();
    let after = parse(&s.run(&["job", "list", "--all", "-o", "json"]));
    let key = |v: &Value| -> Vec<(u64, Value, Value, Value)> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|j| {
                (
                    j["id"].as_u64().unwrap(),
                    j["submitted_at"].clone(),
                    j["command"].clone(),
                    j["held"].clone(),
                )
            })
            .collect()
    };
    assert_eq!(key(&after), key(&before));
    let old = |id: u64| {
        before
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["id"].as_u64() == Some(id))
            .unwrap()
            .clone()
    };
    assert_eq!(s.show(done), old(done));
    assert_eq!(s.show(held)["state"], "pending");
    assert_eq!(s.show(held)["held"], true);
    let j = s.wait_final(short, Duration::from_secs(10));
    assert_eq!(
        (j["state"].as_str(), j["exit_code"].as_i64()),
        (Some("completed"), Some(0))
    );
    assert_eq!(j["started_at"], old(short)["started_at"]);
    let j = s.show(long);
    assert_eq!(j["state"], "running", "re-adopted: {j}");
    assert_eq!(j["started_at"], old(long)["started_at"]);
    std::fs::write(&go, "").unwrap();
    let j = s.wait_final(long, Duration::from_secs(20));
    assert_eq!(
        (j["state"].as_str(), j["exit_code"].as_i64()),
        (Some("completed"), Some(0))
    );
    assert_eq!(lines(&trace("long")), ["start", "end"], "ran once");
    assert_eq!(lines(&trace("short")), ["start", "end"], "ran once");
    let j = s.wait_final(reserved, MINUTE);
    assert_eq!(j["state"], "completed", "{j}");
    // Its processors freed up while the daemon was down: it starts once the daemon is back,
    // no later than its reservation.
    let started = int(&j, "started_at");
    assert!(started >= relaunched, "{j}");
    assert!(started <= int(&old(reserved), "planned_start"), "{j}");
}

const BAD_INPUT_GRID: &str = r#"
[[cluster]]
name = "a"
procs = 4

[[cluster]]
name = "b"
procs = 4
"#;

/// Asserts an API refusal: status, code and field, and that the message says all of `says`.
fn assert_refusal(reply: (u16, Value), status: u16, field: &str, says: &[&str]) {
    let (got, body) = reply;
    assert_eq!(got, status, "{body}");
    assert_eq!(body["field"], field, "{body}");
    assert!(body["code"].is_string(), "{body}");
    let m = body["message"].as_str().unwrap();
    for s in says {
        assert!(m.contains(s), "{m:?} does not say {s:?}");
    }
}

/// 8. Every refusal names the field and the reason, over HTTP (JSON `{code, field, message}`)
///    and in the CLI (exit code 2, the message on stderr).
#[test]
fn bad_input_is_refused_naming_the_field() {
    let s = Server::with_config(BAD_INPUT_GRID);
    let http = s.http();
    let job = |extra: Value| {
        let mut b = job_body(1, 60, &["true"]);
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        http.post("/jobs", &b)
    };
    assert_refusal(
        job(json!({"cluster": "nope"})),
        400,
        "cluster",
        &["\"nope\"", "known: a, b"],
    );
    assert_refusal(
        job(json!({"procs": 9})),
        400,
        "procs",
        &["largest possible is 8"],
    );
    assert_refusal(
        job(json!({"procs": 5, "co_allocate": false})),
        400,
        "procs",
        &["largest possible is 4"],
    );
    assert_refusal(
        job(json!({"procs": 5, "cluster": "a"})),
        400,
        "procs",
        &["cluster a has 4"],
    );
    assert_refusal(job(json!({"procs": 0})), 400, "procs", &["at least 1"]);
    assert_refusal(job(json!({"walltime": 0})), 400, "walltime", &["positive"]);
    assert_refusal(job(json!({"walltime": -5})), 400, "walltime", &["positive"]);
    assert_refusal(job(json!({"walltime": "soon"})), 400, "walltime", &["soon"]);
    assert_refusal(
        job(json!({"walltime": "0s"})),
        400,
        "walltime",
        &["positive"],
    );
    assert_refusal(job(json!({"command": []})), 400, "command", &[]);
    assert_refusal(job(json!({"reservation": 77})), 400, "reservation", &["77"]);
    assert_refusal(
        http.post("/jobs", &json!({"walltime": 60})),
        400,
        "body",
        &["command"],
    );
    // A batch is all or nothing, and names the element.
    assert_refusal(
        http.post(
            "/jobs/batch",
            &json!({"jobs": [job_body(1, 60, &["true"]), job_body(1, 0, &["true"])]}),
        ),
        400,
        "jobs[1].walltime",
        &["positive"],
    );
    assert_eq!(
        http.jobs(),
        Vec::<Value>::new(),
        "nothing of a refused batch is kept"
    );
    // Budget: says the cost and what is left.
    let dave = s.add_user("dave", Some(10.0));
    assert_refusal(
        s.http_as(&dave).post("/jobs", &job_body(1, 60, &["true"])),
        402,
        "price",
        &["60.00", "10.00"],
    );
    // Unknown and foreign jobs look alike.
    let theirs = http.submit(json!({"walltime": 60, "hold": true, "command": ["true"]}));
    assert_refusal(http.get("/jobs/999"), 404, "id", &["no job 999"]);
    assert_refusal(
        s.http_as(&dave).get(&format!("/jobs/{theirs}")),
        404,
        "id",
        &[&format!("no job {theirs}")],
    );
    assert_refusal(
        s.http_as(&dave)
            .post(&format!("/jobs/{theirs}/hold"), &json!({})),
        404,
        "id",
        &[&format!("no job {theirs}")],
    );
    // Estimates.
    assert_refusal(
        http.post("/estimate", &json!({"procs": 9, "walltime": 60})),
        400,
        "procs",
        &["largest possible is 8"],
    );
    assert_refusal(
        http.post("/estimate", &json!({"procs": 1, "walltime": "1x"})),
        400,
        "walltime",
        &["1x"],
    );
    // Reservations: unknown cluster, and a conflict names what is in the way.
    let start = now() + 3600;
    assert_refusal(
        http.post(
            "/reservations",
            &json!({"cluster": "c", "procs": 1, "start": start, "duration": 60}),
        ),
        400,
        "cluster",
        &["\"c\"", "known: a, b"],
    );
    let (status, first) = http.post(
        "/reservations",
        &json!({"cluster": "a", "procs": 3, "start": start, "duration": 600}),
    );
    assert_eq!(status, 201, "{first}");
    let first = first["id"].as_u64().unwrap();
    assert_refusal(
        http.post(
            "/reservations",
            &json!({"cluster": "a", "procs": 2, "start": start + 300, "duration": 600}),
        ),
        409,
        "start",
        &[&format!("reservation {first}")],
    );
    assert_refusal(
        http.post(
            "/reservations",
            &json!({"cluster": "a", "procs": 5, "start": start, "duration": 60}),
        ),
        400,
        "procs",
        &["cluster a has 4"],
    );
    // A job ACL names an existing job: `{"job": 0}` used to admit every user (a new job's id
    // is 0 while it is checked).
    for job in [0, 999] {
        assert_refusal(
            http.post(
                "/reservations",
                &json!({"cluster": "a", "procs": 1, "start": start + 7200, "duration": 60,
                        "acl": {"job": job}}),
            ),
            400,
            "acl.job",
            &[&format!("no job {job}")],
        );
    }

    assert_refusal(
        http.get("/reservations/999"),
        404,
        "id",
        &["no reservation 999"],
    );
    assert_refusal(
        http.get("/plan?cluster=zz"),
        400,
        "cluster",
        &["\"zz\"", "known: a, b"],
    );

    // The same through the CLI: exit code 2, the field and the reason on stderr.
    let cli = |args: &[&str]| refused(s.cli(), args);
    let e = cli(&["job", "submit", "--cluster", "nope", "--", "true"]);
    assert!(e.contains("cluster") && e.contains("known: a, b"), "{e}");
    let e = cli(&["job", "submit", "-n", "9", "--", "true"]);
    assert!(
        e.contains("procs") && e.contains("largest possible is 8"),
        "{e}"
    );
    let e = cli(&[
        "job",
        "submit",
        "-n",
        "5",
        "--no-coallocation",
        "--",
        "true",
    ]);
    assert!(
        e.contains("procs") && e.contains("largest possible is 4"),
        "{e}"
    );
    let e = cli(&["job", "submit", "-t", "0", "--", "true"]);
    assert!(e.contains("time") && e.contains("positive"), "{e}");
    let e = cli(&["job", "submit", "-t", "soon", "--", "true"]);
    assert!(e.contains("time") && e.contains("soon"), "{e}");
    let e = refused(
        s.cli_as(&dave),
        &["job", "submit", "-t", "1m", "--", "true"],
    );
    assert!(
        e.contains("price") && e.contains("60.00") && e.contains("10.00"),
        "{e}"
    );
    let e = cli(&["job", "show", "999"]);
    assert!(e.contains("no job 999"), "{e}");
    let e = refused(s.cli_as(&dave), &["job", "cancel", &theirs.to_string()]);
    assert!(e.contains(&format!("no job {theirs}")), "{e}");
    let e = cli(&["estimate", "-n", "9", "-t", "1m"]);
    assert!(
        e.contains("procs") && e.contains("largest possible is 8"),
        "{e}"
    );
    let e = cli(&[
        "reservation",
        "create",
        "--cluster",
        "a",
        "-n",
        "2",
        "--start",
        &(start + 60).to_string(),
        "-t",
        "1m",
    ]);
    assert!(e.contains(&format!("reservation {first}")), "{e}");
    let e = cli(&[
        "reservation",
        "create",
        "--cluster",
        "zz",
        "-n",
        "1",
        "-t",
        "1m",
    ]);
    assert!(e.contains("cluster") && e.contains("known: a, b"), "{e}");
    let e = cli(&["plan", "show", "--cluster", "zz"]);
    assert!(e.contains("cluster") && e.contains("known: a, b"), "{e}");
    let e = cli(&[
        "reservation",
        "create",
        "--cluster",
        "a",
        "-n",
        "1",
        "--start",
        "soon",
        "-t",
        "1m",
    ]);
    assert!(e.contains("--start") && e.contains("soon"), "{e}");
    // Nothing refused was kept.
    assert_eq!(http.jobs().len(), 1);
}

/// Makes CLI output comparable across runs: times, the data directory.
fn redact(text: &str, data_dir: &std::path::Path) -> String {
    let text = text.replace(&data_dir.display().to_string(), "[DATA]");
    // `YYYY-MM-DD hh:mm:ss`, kept the same width so the table columns do not move.
    let pattern = "dddd-dd-dd dd:dd:dd";
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let fits = i + pattern.len() <= chars.len()
            && pattern.chars().zip(&chars[i..]).all(|(p, c)| match p {
                'd' => c.is_ascii_digit(),
                p => p == *c,
            });
        if fits {
            out.push_str("YYYY-MM-DD hh:mm:ss");
            i += pattern.len();
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

fn redact_json(v: &mut Value, data_dir: &std::path::Path) {
    match v {
        Value::Array(a) => a.iter_mut().for_each(|x| redact_json(x, data_dir)),
        Value::Object(o) => {
            for (k, x) in o.iter_mut() {
                if k.ends_with("_at") || k.ends_with("_start") {
                    if !x.is_null() {
                        *x = json!("[time]");
                    }
                } else {
                    redact_json(x, data_dir);
                }
            }
        }
        Value::String(s) => *s = s.replace(&data_dir.display().to_string(), "[DATA]"),
        _ => {}
    }
}

/// 9. What `job list` and `job show` print, as tables and as JSON.
#[test]
fn cli_output_snapshots() {
    let s = Server::start(2);
    let hello = s.run(&[
        "job",
        "submit",
        "--cluster",
        "local",
        "--name",
        "hello",
        "-t",
        "1m",
        "-o",
        "json",
        "--",
        "sh",
        "-c",
        "echo hello",
    ]);
    assert_eq!(parse(&hello), json!({"id": 1}));
    // One after the other, so that both run on processor 0.
    s.wait_final(1, MINUTE);
    assert_eq!(
        s.submit(&[
            "--cluster",
            "local",
            "--name",
            "oops",
            "-t",
            "90s",
            "--",
            "sh",
            "-c",
            "exit 3"
        ]),
        2
    );
    assert_eq!(
        s.submit(&["--name", "later", "--hold", "-n", "2", "-t", "1h30m", "--", "sleep", "1"]),
        3
    );
    assert_eq!(s.submit(&["--cluster", "local", "--hold", "--", "true"]), 4);
    s.run(&["job", "cancel", "4"]);
    s.wait_final(2, MINUTE);
    assert_eq!(
        std::fs::read_to_string(s.dir.join("output/1.out")).unwrap(),
        "hello\n"
    );

    // The service's clock has whole seconds: an instant job that happens to cross a second
    // boundary has run 0:01 and is charged 1.00 for that processor-second, so the elapsed
    // column and the charge of these instant jobs are read as zero.
    let text = |args: &[&str]| {
        redact(&s.run(args), &s.dir)
            .replace(" 0:01  ", " 0:00  ")
            .replace("charged       1.00", "charged       0.00")
    };
    let json = |args: &[&str]| {
        let mut v = parse(&s.run(args));
        redact_json(&mut v, &s.dir);
        let jobs = match &mut v {
            Value::Array(jobs) => jobs.iter_mut().collect(),
            job => vec![job],
        };
        for job in jobs {
            if job["charged"] == json!(1.0) {
                job["charged"] = json!(0.0);
            }
            if job["run_secs"] == json!(1) {
                job["run_secs"] = json!(0);
            }
        }
        v
    };
    insta::assert_snapshot!("job_list_table", text(&["job", "list", "--all"]));
    insta::assert_json_snapshot!(
        "job_list_json",
        json(&["job", "list", "--all", "-o", "json"])
    );
    // As squeue: active jobs by default; several states, any case.
    insta::assert_snapshot!("job_list_active_table", text(&["job", "list"]));
    insta::assert_snapshot!(
        "job_list_states_table",
        text(&["job", "list", "--state", "Completed,FAILED"])
    );
    insta::assert_snapshot!("job_show_table", text(&["job", "show", "2"]));
    insta::assert_json_snapshot!("job_show_json", json(&["job", "show", "2", "-o", "json"]));
    // sacct and sreport: what ran, for how long and at what charge (the seconds a job held
    // its processor vary by a second from run to run, and with them its charge).
    insta::with_settings!({filters => vec![
        (r"\b\d+:\d{2}\b", "[m:ss]"),
        (r"\b\d+\.\d+\b", "[n.nn]"),
    ]}, {
        insta::assert_snapshot!(
            "job_history_table",
            text(&["job", "history", "--since", "now-1hour"])
        );
        insta::assert_snapshot!(
            "report_usage_table",
            text(&["report", "usage", "--since", "now-1hour"])
        );
    });
}

const TWO_PROCESSORS: &str = r#"
[[cluster]]
name = "local"
procs = 2
"#;

/// Issue 12's first observation, end to end: 8 one-processor jobs asking 60 s that run 1 s,
/// on 2 processors. Jobs reserved behind a pair's walltime move earlier as soon as the pair
/// ends (a pair a second, which the service's paused-time test of the same name checks to
/// the second; here, on real processes, without a limit on the machine's speed: without
/// work conservation the last pair would wait for the third's walltime, over 3 min).
#[test]
fn short_jobs_with_long_walltimes_keep_the_processors_busy() {
    let s = Server::with_config(TWO_PROCESSORS);
    let ids: Vec<u64> = (0..8)
        .map(|_| s.submit(&["-n", "1", "-t", "60s", "--", "sleep", "1"]))
        .collect();
    let mut jobs = Vec::new();
    for id in ids {
        let j = s.wait_final(id, Duration::from_secs(120));
        assert_eq!(j["state"], "completed", "{j}");
        jobs.push(j);
    }
    // No job waited for a walltime: all started before the first pair's 60 s ran out.
    let first_submit = jobs.iter().map(|j| int(j, "submitted_at")).min().unwrap();
    for j in &jobs {
        let start = int(j, "started_at");
        assert!(
            start < first_submit + 60,
            "job {} waited for a walltime: {jobs:?}",
            j["id"]
        );
    }
    assert_no_double_booking(&jobs, &BTreeMap::from([("local", 2)]));
    // The moves and the idle time are counted for Prometheus.
    let text = reqwest::blocking::Client::new()
        .get(format!("{}/metrics", s.url))
        .bearer_auth(&s.token)
        .send()
        .unwrap()
        .text()
        .unwrap();
    let metric = |name: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing: {text}"))
    };
    assert!(metric("foresight_moved_earlier_total") >= 1.0, "{text}");
    assert!(metric("foresight_idle_while_waiting_processor_seconds_total") >= 0.0);
}

/// `/metrics` needs an administrator's token (it counts every user's jobs), and the plan
/// shows a user only their own jobs' ids.
#[test]
fn metrics_need_an_admin_and_the_plan_hides_other_users_jobs() {
    let s = Server::start(2);
    let ann = s.add_user("ann", None);
    let url = format!("{}/metrics", s.url);
    let client = reqwest::blocking::Client::new();
    let status = |token: Option<&str>| {
        let mut r = client.get(&url);
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        r.send().unwrap().status().as_u16()
    };
    assert_eq!(status(None), 401);
    assert_eq!(status(Some(&ann)), 403);
    assert_eq!(status(Some(&s.token)), 200);

    let body = json!({"walltime": 60, "cluster": "local", "command": ["sleep", "30"]});
    let (code, mine) = s.http().post("/jobs", &body);
    assert_eq!(code, 201, "{mine}");
    let (code, theirs) = s.http_as(&ann).post("/jobs", &body);
    assert_eq!(code, 201, "{theirs}");
    let (admin_job, ann_job) = (int(&mine, "id") as u64, int(&theirs, "id") as u64);
    for id in [admin_job, ann_job] {
        s.wait_job(id, "running", Duration::from_secs(20), |j| {
            j["state"] == "running"
        });
    }
    let running_ids = |token: &str| -> BTreeSet<Option<u64>> {
        let (code, plan) = s.http_as(token).get("/plan");
        assert_eq!(code, 200, "{plan}");
        plan.as_array()
            .unwrap()
            .iter()
            .flat_map(|c| c["slots"].as_array().unwrap().clone())
            .filter(|slot| slot["occupant"] == "running")
            .map(|slot| slot["id"].as_u64())
            .collect()
    };
    assert_eq!(running_ids(&ann), BTreeSet::from([None, Some(ann_job)]));
    assert_eq!(
        running_ids(&s.token),
        BTreeSet::from([Some(admin_job), Some(ann_job)])
    );
}
