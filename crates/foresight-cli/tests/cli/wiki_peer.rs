#![allow(clippy::unwrap_used)]
//! A WIKI link between real daemons: daemon A schedules its `wiki` cluster `w`, daemon B's
//! `scheduler = "wiki"` cluster `maui`. A restart of A keeps a part running on B running and
//! recorded once, and a part queued on B in its reservation keeps its place (same attempt,
//! started by A at its time); a restart of B keeps the running part running and plans the
//! waiting one again, and nothing runs twice. A's `job cat` fetches the output of a part
//! that ran on B from B; A's estimate asks the cluster's policy over what B reports.

use crate::common;
use crate::wiki;

use crate::common::{lines, wait_for, Server};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;
use wiki::{first_cluster as cluster, wiki_pair};

fn submit(a: &Server, procs: u32, walltime: i64, runs: &Path, sleep: u32) -> u64 {
    let script = format!(
        "echo $FORESIGHT_PROCESSORS >> {}; sleep {sleep}",
        runs.display()
    );
    a.http().submit(json!({
        "procs": procs, "walltime": walltime, "command": ["sh", "-c", script],
    }))
}

/// B's jobs that are parts of A's job `g` (any attempt).
fn parts_on_b(b: &Server, g: u64) -> Vec<Value> {
    let prefix = format!("foresight-{g}.");
    b.http()
        .jobs()
        .into_iter()
        .filter(|j| j["name"].as_str().is_some_and(|n| n.starts_with(&prefix)))
        .collect()
}

fn names(parts: &[Value]) -> Vec<String> {
    parts
        .iter()
        .map(|j| format!("{}:{}", j["name"].as_str().unwrap(), j["state"]))
        .collect()
}

/// `runs` once the job ended: exactly one line (it ran once), the processors named.
fn ran_once(runs: &Path, processors: &str) {
    let got = if runs.exists() { lines(runs) } else { vec![] };
    assert_eq!(got, [processors], "{}", runs.display());
}

#[test]
fn a_restart_of_the_scheduler_keeps_running_and_queued_parts_in_place() {
    let (mut a, b, _keys) = wiki_pair(1000);
    let dir = a.scratch();
    let (r1, r2) = (dir.join("g1.runs"), dir.join("g2.runs"));
    // g1 runs on p0, p1; g2 needs all four processors: reserved after g1's limit, queued on
    // B meanwhile.
    let g1 = submit(&a, 2, 20, &r1, 8);
    let j1 = a.wait_job(g1, "g1 running", Duration::from_secs(30), |j| {
        j["state"] == "running"
    });
    let g2 = submit(&a, 4, 20, &r2, 0);
    let j2 = a.wait_job(g2, "g2 reserved", Duration::from_secs(30), |j| {
        j["state"] == "reserved"
    });
    let planned = j2["planned_start"].as_i64().unwrap();
    wait_for("g2 queued on B", Duration::from_secs(15), || {
        let p = parts_on_b(&b, g2);
        (p.len() == 1 && p[0]["state"] == "pending").then_some(())
    });

    a.sigkill();
    a.launch();

    // g2 keeps its reservation and its place through the restarted service's cycles (each
    // after a look at B): still reserved at the same start, its part on B the same.
    wait_for(
        "three cycles after the restart",
        Duration::from_secs(30),
        || (a.cycles() >= 3).then_some(()),
    );
    let j = a.show(g2);
    assert_eq!(j["state"], "reserved", "{j}\n{}", a.logs());
    assert_eq!(j["planned_start"].as_i64(), Some(planned), "{j}");
    let j = a.show(g1);
    assert_eq!(j["state"], "running", "{j}");
    assert_eq!(j["started_at"], j1["started_at"], "{j}");

    let e1 = a.wait_final(g1, Duration::from_secs(40));
    assert_eq!(
        (&e1["state"], &e1["exit_code"]),
        (&json!("completed"), &json!(0)),
        "{e1}"
    );
    assert_eq!(e1["started_at"], j1["started_at"], "{e1}");
    let e2 = a.wait_final(g2, Duration::from_secs(60));
    assert_eq!(
        (&e2["state"], &e2["exit_code"]),
        (&json!("completed"), &json!(0)),
        "{e2}"
    );
    ran_once(&r1, "0,1");
    ran_once(&r2, "0,1,2,3");
    // One part each on B, of the first attempt: nothing was withdrawn and submitted again.
    let p1 = parts_on_b(&b, g1);
    let p2 = parts_on_b(&b, g2);
    assert_eq!(names(&p1), [format!("foresight-{g1}.0:\"completed\"")]);
    assert_eq!(names(&p2), [format!("foresight-{g2}.0:\"completed\"")]);
}

#[test]
fn a_restart_of_the_resource_manager_keeps_the_running_part_and_runs_nothing_twice() {
    let (a, mut b, _keys) = wiki_pair(1000);
    let dir = a.scratch();
    let (r1, r2) = (dir.join("g1.runs"), dir.join("g2.runs"));
    let g1 = submit(&a, 2, 30, &r1, 8);
    let j1 = a.wait_job(g1, "g1 running", Duration::from_secs(30), |j| {
        j["state"] == "running"
    });
    let g2 = submit(&a, 4, 20, &r2, 0);
    a.wait_job(g2, "g2 reserved", Duration::from_secs(30), |j| {
        j["state"] == "reserved"
    });
    wait_for("g2 queued on B", Duration::from_secs(15), || {
        (parts_on_b(&b, g2).len() == 1).then_some(())
    });

    // B goes away: A sees its cluster down; B comes back on the same addresses.
    let addr = b.url.trim_start_matches("http://").to_string();
    b.sigkill();
    wait_for("cluster w down", Duration::from_secs(15), || {
        (cluster(&a)["state"] == "down").then_some(())
    });
    assert_eq!(a.show(g1)["state"], "running");
    b.listen = Some(addr);
    b.launch();
    wait_for("cluster w up again", Duration::from_secs(15), || {
        (cluster(&a)["state"] == "up").then_some(())
    });

    let e1 = a.wait_final(g1, Duration::from_secs(40));
    assert_eq!(
        (&e1["state"], &e1["exit_code"]),
        (&json!("completed"), &json!(0)),
        "{e1}"
    );
    assert_eq!(e1["started_at"], j1["started_at"], "{e1}");
    let e2 = a.wait_final(g2, Duration::from_secs(60));
    assert_eq!(
        (&e2["state"], &e2["exit_code"]),
        (&json!("completed"), &json!(0)),
        "{e2}"
    );
    ran_once(&r1, "0,1");
    ran_once(&r2, "0,1,2,3");
    let p1 = parts_on_b(&b, g1);
    assert_eq!(names(&p1), [format!("foresight-{g1}.0:\"completed\"")]);
    // g2 may have been planned again (a new attempt) while B was away; then its first part
    // was cancelled on B before it ran. Exactly one part of it ran.
    let p2 = parts_on_b(&b, g2);
    let ran: Vec<&Value> = p2.iter().filter(|j| !j["started_at"].is_null()).collect();
    assert_eq!(ran.len(), 1, "{:?}", names(&p2));
    assert_eq!(ran[0]["state"], "completed", "{:?}", names(&p2));
    for j in &p2 {
        assert!(
            j["state"] == "completed" || j["state"] == "cancelled",
            "{:?}",
            names(&p2)
        );
    }
}

/// POST /estimate on A: the cluster's own answer for such a job.
fn rm_estimate(a: &Server, procs: u32, walltime: i64) -> Value {
    let (status, e) = a
        .http()
        .post("/estimate", &json!({"procs": procs, "walltime": walltime}));
    assert_eq!(status, 200, "{e}");
    e["clusters"][0]["resource_manager_start"].clone()
}

#[test]
fn the_output_of_a_part_that_ran_on_the_peer_comes_from_the_peer() {
    let (a, b, _keys) = wiki_pair(1000);
    let script = "echo out-on-$FORESIGHT_PROCESSORS; echo err-line >&2";
    let g = a.http().submit(json!({
        "procs": 3, "walltime": 30, "command": ["sh", "-c", script],
    }));
    let e = a.wait_final(g, Duration::from_secs(40));
    assert_eq!(e["state"], "completed", "{e}");
    let part = parts_on_b(&b, g);
    assert_eq!(part.len(), 1);
    // B's file, fetched through B's REST API.
    let gs = g.to_string();
    assert_eq!(a.run(&["job", "cat", &gs]), "out-on-0,1,2\n");
    assert_eq!(a.run(&["job", "cat", &gs, "--stderr"]), "err-line\n");
    assert_eq!(
        b.run(&["job", "cat", &part[0]["id"].to_string()]),
        "out-on-0,1,2\n"
    );
}

#[test]
fn an_estimate_asks_the_cluster_policy_over_what_the_peer_reports() {
    let (a, _b, _keys) = wiki_pair(1000);
    // Nothing runs on B: a job of 2 processors would start now.
    let t0 = common::now();
    let e = rm_estimate(&a, 2, 60);
    let at = e
        .as_i64()
        .unwrap_or_else(|| panic!("no estimate from w: {e}"));
    assert!((t0..=t0 + 2).contains(&at), "{at} vs {t0}");

    let g = a.http().submit(json!({
        "procs": 4, "walltime": 30, "command": ["sleep", "6"],
    }));
    let j = a.wait_job(g, "running", Duration::from_secs(30), |j| {
        j["state"] == "running"
    });
    let started = j["started_at"].as_i64().unwrap();
    // All four processors are taken until g's limit.
    let at = rm_estimate(&a, 1, 60).as_i64().unwrap();
    assert!(
        (started + 29..=started + 32).contains(&at),
        "{at} vs {started}"
    );
}
