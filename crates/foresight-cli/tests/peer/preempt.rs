//! Absolute priorities across peer dispatchers, on real processes: site a runs a long global
//! job of level 0 beside a local job; site b is full of local work. A global job of level 3
//! arrives: a bids with the processors the low job holds (less than it bid on free
//! processors, by the preemption term), wins, and its broker suspends the low job (its
//! process really stopped), runs the high one, then resumes the low one. Both complete, each
//! run once; the local jobs of both sites are never stopped; every dispatcher shows the low
//! job suspended while it is.
#![allow(clippy::unwrap_used)]

use crate::peer;

use crate::common::*;
use peer::*;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// The state letter of `/proc/PID/stat` (`T` stopped, `S` sleeping...).
pub(crate) fn proc_state(pid: &str) -> Option<char> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_whitespace().next()?.chars().next()
}

pub(crate) fn read_pid(path: &Path) -> String {
    wait_for("a job's pid", Duration::from_secs(30), || {
        std::fs::read_to_string(path)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    })
}

/// A job that writes its shell's pid to `pid`, appends `ID CLUSTER` to `log`, then works
/// `steps` half-second steps (a stop delays every step after it).
pub(crate) fn job(procs: u32, walltime: i64, pid: &Path, log: &Path, steps: u32) -> Value {
    job_body(
        procs,
        walltime,
        &[
            "sh",
            "-c",
            &format!(
                "echo $$ > {}; echo \"$FORESIGHT_JOB_ID $FORESIGHT_CLUSTER\" >> {}; \
                 i=0; while [ $i -lt {steps} ]; do sleep 0.5; i=$((i+1)); done",
                pid.display(),
                log.display()
            ),
        ],
    )
}

/// The standing bid of `site` for `job`, if any: (price, processors).
fn bid_of(store: &str, job: u64, site: &str) -> Option<(f64, u32)> {
    let row = psql(
        store,
        &format!("SELECT price || ' ' || procs FROM bids WHERE job_id = {job} AND site = '{site}'"),
    );
    let (p, n) = row.trim().split_once(' ')?;
    Some((p.parse().ok()?, n.parse().ok()?))
}

pub(crate) fn state_at(http: &Http, id: u64) -> Value {
    let (status, j) = http.get(&format!("/jobs/{id}"));
    assert_eq!(status, 200, "job {id}: {j}");
    j
}

#[test]
fn a_higher_level_wins_with_a_lower_jobs_processors_which_resumes_after_it() {
    let store = foresight_testkit::postgres::database();
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    // Auctions last 0.25 × the prior mean runtime of 20 s = 5 s: long enough to read the
    // bids while they stand.
    let a = Peer::start_with(&root, "a", &store, 6, 10_000, 20, 0.25);
    let b = Peer::start_with(&root, "b", &store, 4, 10_000, 20, 0.25);
    let token = admin_token(&a);
    let (ha, hb) = (Http::new(&a.url, &token), Http::new(&b.url, &token));
    let log = root.join("runs.log");
    let pid = |name: &str| root.join(format!("{name}.pid"));

    // Local work: 2 of a's 6 processors, all 4 of b's.
    let mut local_a = job(2, 120, &pid("local-a"), &root.join("local.log"), 240);
    local_a["cluster"] = "a-c".into();
    let local_a = ha.submit(local_a);
    let mut local_b = job(4, 120, &pid("local-b"), &root.join("local.log"), 240);
    local_b["cluster"] = "b-c".into();
    let local_b = hb.submit(local_b);
    let local_pids = [read_pid(&pid("local-a")), read_pid(&pid("local-b"))];

    // The low job (level 0, 4 processors, 20 s of work in a walltime of 40 s): only a can
    // run it, on free processors: 4 offered for a need of 4, nothing preempted, no input:
    // a bid of exactly 1.
    let low = ha.submit(job(4, 40, &pid("low"), &log, 40));
    let low_bid = wait_for("a's bid for the low job", Duration::from_secs(20), || {
        bid_of(&store, low, "a")
    });
    assert_eq!(low_bid, (1.0, 4), "a bids its free processors");
    assert_eq!(bid_of(&store, low, "b"), None, "b has nothing free");
    let low_pid = read_pid(&pid("low"));
    wait_for("the low job to run at a", Duration::from_secs(20), || {
        (state_at(&ha, low)["state"] == "running").then_some(())
    });

    // The high job (level 3, 4 processors): a offers the low job's processors.
    let mut high = job(4, 30, &pid("high"), &log, 4);
    high["priority"] = json!(3);
    let high = hb.submit(high);
    let (price, procs) = wait_for("a's bid for the high job", Duration::from_secs(20), || {
        bid_of(&store, high, "a")
    });
    assert_eq!(procs, 4, "the low job's 4 processors");
    // 1 × 4/4 − 0.25 × (1 + 0) × 4 × remaining / (4 × 20 s), remaining ≤ 40 s of walltime.
    assert!(
        (1.0 - 0.25 * 40.0 / 20.0..1.0).contains(&price),
        "a bid below its free-processor bid by the preemption term: {price}"
    );
    assert_eq!(
        bid_of(&store, high, "b"),
        None,
        "b's local work is never offered"
    );

    // a wins; the low job is suspended, its process stopped, while the high one runs.
    let l = wait_for("the low job suspended", Duration::from_secs(30), || {
        let l = state_at(&ha, low);
        (l["suspended"] == true).then_some(l)
    });
    assert_eq!(l["state"], "running", "{l}");
    let reason = l["reason"].as_str().unwrap_or_default();
    assert!(reason.contains(&format!("preempted by job {high}")), "{l}");
    wait_for(
        "the low job's process stopped",
        Duration::from_secs(10),
        || (proc_state(&low_pid) == Some('T')).then_some(()),
    );
    let h = wait_for("the high job running", Duration::from_secs(10), || {
        let h = state_at(&ha, high);
        (h["state"] == "running").then_some(h)
    });
    assert_eq!(h["cluster"], "a-c", "{h}");
    // b sees the low job suspended too, and where it is.
    let seen = state_at(&hb, low);
    assert_eq!(seen["suspended"], true, "{seen}");
    let reason = seen["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("site a") && reason.contains(&format!("preempted by job {high}")),
        "{seen}"
    );

    // The high job completes, then the low one resumes and completes.
    let h = wait_for("the high job to end", Duration::from_secs(30), || {
        let h = state_at(&hb, high);
        is_final(&h).then_some(h)
    });
    assert_eq!(h["state"], "completed", "{h}");
    let l = wait_for("the low job to end", Duration::from_secs(60), || {
        let l = state_at(&hb, low);
        is_final(&l).then_some(l)
    });
    assert_eq!(l["state"], "completed", "{l}");
    assert_eq!(l["exit_code"], 0, "{l}");
    assert!(
        int(&l, "ended_at") >= int(&h, "ended_at"),
        "the low job ended after the high one: {l} {h}"
    );
    // Each ran once, both at a; the low job was never auctioned again.
    let runs = runs(&log);
    assert_eq!(runs[&low], vec!["a-c".to_string()], "{runs:?}");
    assert_eq!(runs[&high], vec!["a-c".to_string()], "{runs:?}");
    let rows = psql(
        &store,
        &format!(
            "SELECT job_id || ' ' || state || ' ' || site || ' ' || auctions FROM global_jobs \
             WHERE job_id IN ({low}, {high}) ORDER BY job_id"
        ),
    );
    assert_eq!(rows, format!("{low} done a 1\n{high} done a 1"), "{rows}");

    // The local jobs were never stopped, and run on.
    for (p, id, http) in [
        (&local_pids[0], local_a, &ha),
        (&local_pids[1], local_b, &hb),
    ] {
        assert!(
            matches!(proc_state(p), Some('S' | 'R')),
            "local job {id}: {:?}",
            proc_state(p)
        );
        let j = state_at(http, id);
        assert_eq!(j["state"], "running", "{j}");
        assert_eq!(j["suspended"], false, "{j}");
        let (status, v) = http.post(&format!("/jobs/{id}/cancel"), &json!({}));
        assert!(status < 300, "cancel {id}: {status} {v}");
    }
}

/// Seconds a job spent suspended, from its record in the shared store.
fn suspended_secs(store: &str, id: u64) -> i64 {
    let data = psql(store, &format!("SELECT data FROM jobs WHERE id = {id}"));
    let j: Value = serde_json::from_str(&data).unwrap();
    j["preemption"]["suspended"].as_i64().unwrap_or(0)
}

/// A user with a limited budget takes part in priorities like anyone: dee's award of level
/// 3 preempts the administrator's running job of level 0, and dee's job of level 1 is
/// itself suspended for the administrator's job of level 5, then resumes. Each award is
/// paid once: its hold (4 processors × walltime × tariff) leaves dee's shared budget as it
/// starts, and when it ends what it really used is settled against the hold, the rest
/// coming back: afterwards the budget is its start less the two real charges, exactly.
#[test]
fn a_budget_limited_users_awards_preempt_and_are_preempted_and_pay_once() {
    let store = foresight_testkit::postgres::database();
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    // Short auctions (0.3 × a prior of 1 s), default opening bid: a mean runtime of a few
    // seconds prices preempting a minute of work far below 0, and the bid is made all the same.
    let a = Peer::start_auction(&root, "a", &store, 4, 1500, 1, "alpha = 0.3");
    let admin = Http::new(&a.url, &admin_token(&a));
    let (_, clusters) = admin.get("/clusters");
    let tariff = clusters[0]["tariff"].as_f64().unwrap();
    assert!(tariff > 0.0, "{clusters}");
    let start: f64 = 1000.0;
    let (status, created) = admin.post("/users", &json!({ "name": "dee", "budget": start }));
    assert_eq!(status, 201, "{created}");
    let dee = Http::new(&a.url, created["token"].as_str().unwrap());
    let log = root.join("runs.log");
    let pid = |name: &str| root.join(format!("{name}.pid"));
    let close = |x: f64, y: f64| (x - y).abs() < 1e-9;

    // The administrator's global job of level 0 takes all 4 processors.
    let low = admin.submit(job(4, 60, &pid("low"), &log, 120));
    let low_pid = read_pid(&pid("low"));
    wait_for("the low job to run", Duration::from_secs(30), || {
        (state_at(&admin, low)["state"] == "running").then_some(())
    });

    // dee's job of level 3 (4 processors, 30 s walltime, about 2 s of work) preempts it.
    let mut high = job(4, 30, &pid("dee-high"), &log, 4);
    high["priority"] = json!(3);
    let high = dee.submit(high);
    let hold = tariff * 4.0 * 30.0;
    let mut lowest = start;
    wait_for("the low job suspended", Duration::from_secs(30), || {
        lowest = lowest.min(shared_budget(&store, "dee").0);
        (state_at(&admin, low)["suspended"] == true).then_some(())
    });
    wait_for(
        "the low job's process stopped",
        Duration::from_secs(10),
        || (proc_state(&low_pid) == Some('T')).then_some(()),
    );
    let h = wait_for("dee's high job to end", Duration::from_secs(30), || {
        lowest = lowest.min(shared_budget(&store, "dee").0);
        let h = state_at(&dee, high);
        is_final(&h).then_some(h)
    });
    assert_eq!(h["state"], "completed", "{h}");
    let hold_row = psql(
        &store,
        &format!("SELECT budget_hold FROM global_jobs WHERE job_id = {high}"),
    );
    assert_eq!(
        hold_row.parse::<f64>().unwrap(),
        hold,
        "the hold: 4 × 30 s × {tariff}"
    );
    // While it ran its hold was all it took, never the hold and its charge.
    assert!(lowest >= start - hold - 1e-9, "the budget fell to {lowest}");
    // Never suspended: it used ended − started seconds on 4 processors.
    let used = int(&h, "ended_at") - int(&h, "started_at");
    let high_charge = h["charged"].as_f64().unwrap();
    assert!(close(high_charge, tariff * 4.0 * used as f64), "{h}");
    assert!(high_charge < hold, "{h}");
    wait_for("dee's budget settled", Duration::from_secs(10), || {
        close(shared_budget(&store, "dee").0, start - high_charge).then_some(())
    });
    let l = wait_for("the low job resumed", Duration::from_secs(10), || {
        let l = state_at(&admin, low);
        (l["suspended"] == false && l["state"] == "running").then_some(l)
    });
    assert_eq!(l["state"], "running", "{l}");
    let (status, v) = admin.post(&format!("/jobs/{low}/cancel"), &json!({}));
    assert!(status < 300, "cancel {low}: {status} {v}");

    // dee's job of level 1 (60 s walltime, about 6 s of work) runs, and is suspended for the
    // administrator's job of level 5, then resumes.
    let mut mid = job(4, 60, &pid("dee-mid"), &log, 12);
    mid["priority"] = json!(1);
    let mid = dee.submit(mid);
    let mid_pid = read_pid(&pid("dee-mid"));
    let mut top = job(4, 30, &pid("top"), &log, 4);
    top["priority"] = json!(5);
    let top = admin.submit(top);
    wait_for("dee's job suspended", Duration::from_secs(30), || {
        (state_at(&dee, mid)["suspended"] == true).then_some(())
    });
    wait_for(
        "dee's job's process stopped",
        Duration::from_secs(10),
        || (proc_state(&mid_pid) == Some('T')).then_some(()),
    );
    let t = wait_for("the top job to end", Duration::from_secs(30), || {
        let t = state_at(&admin, top);
        is_final(&t).then_some(t)
    });
    assert_eq!(t["state"], "completed", "{t}");
    let m = wait_for("dee's job to end", Duration::from_secs(60), || {
        let m = state_at(&dee, mid);
        is_final(&m).then_some(m)
    });
    assert_eq!(m["state"], "completed", "{m}");
    assert!(int(&m, "ended_at") >= int(&t, "ended_at"), "{m} {t}");
    let stopped = suspended_secs(&store, mid);
    assert!(stopped > 0, "dee's job was suspended for a while");
    let used = int(&m, "ended_at") - int(&m, "started_at") - stopped;
    let mid_charge = m["charged"].as_f64().unwrap();
    assert!(close(mid_charge, tariff * 4.0 * used as f64), "{m}");
    assert!(mid_charge < tariff * 4.0 * 60.0, "{m}");
    // Each ran once, at a.
    let runs = runs(&log);
    for id in [high, mid, top] {
        assert_eq!(runs[&id], vec!["a-c".to_string()], "{runs:?}");
    }
    // dee's budget: the start less what the two jobs really cost, and spent just that.
    let want = start - high_charge - mid_charge;
    let settled = wait_for("dee's budget settled", Duration::from_secs(10), || {
        let (left, spent) = shared_budget(&store, "dee");
        close(left, want).then_some((left, spent))
    });
    assert!(close(settled.1, high_charge + mid_charge), "{settled:?}");
}
