//! Peer dispatchers on real processes: several `foresight server start --mode dispatcher`
//! against one throwaway PostgreSQL, global jobs submitted through different dispatchers,
//! each sold by an auction and run exactly once (counted through a file every run appends
//! to), also when a dispatcher is killed with SIGKILL while it bids or holds claims.
#![allow(clippy::unwrap_used)]

use crate::peer;

use crate::common::*;
use peer::*;
use std::time::Duration;

#[test]
fn global_jobs_submitted_to_any_dispatcher_run_exactly_once() {
    let store = foresight_testkit::postgres::database();
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let peers: Vec<Peer> = ["a", "b", "c"]
        .iter()
        .map(|s| Peer::start(&root, s, &store, 2))
        .collect();
    let token = admin_token(&peers[0]);
    let log = root.join("runs.log");
    let n = 18;
    let mut ids = Vec::new();
    for i in 0..n {
        let http = Http::new(&peers[i % 3].url, &token);
        ids.push(http.submit(counted_job(&log, 0.3)));
    }
    let done = |url: &str| -> u64 {
        psql(url, "SELECT count(*) FROM global_jobs WHERE state = 'done'")
            .parse()
            .unwrap()
    };
    wait_for("every global job to end", Duration::from_secs(90), || {
        (done(&store) == n as u64).then_some(())
    });
    let runs = runs(&log);
    for id in &ids {
        assert_eq!(
            runs.get(id).map(Vec::len),
            Some(1),
            "job {id} must run exactly once: {runs:?}"
        );
    }
    assert_eq!(runs.len(), n, "{runs:?}");
    // Each job ran where its auction's winner is recorded, and the work was shared.
    let winners = psql(
        &store,
        "SELECT job_id || ' ' || site || '-c' FROM global_jobs ORDER BY job_id",
    );
    for line in winners.lines() {
        let (id, cluster) = line.split_once(' ').unwrap();
        assert_eq!(runs[&id.parse::<u64>().unwrap()], vec![cluster.to_string()]);
    }
    // Every dispatcher shows every job, wherever it ran.
    for p in &peers {
        let http = Http::new(&p.url, &token);
        for id in &ids {
            let (status, j) = http.get(&format!("/jobs/{id}"));
            assert_eq!(status, 200, "{} job {id}: {j}", p.site);
            assert_eq!(j["state"], "completed", "{} job {id}: {j}", p.site);
            assert_eq!(j["cluster"].as_str(), Some(runs[id][0].as_str()), "{j}");
        }
    }
    let sites: std::collections::BTreeSet<_> = runs.values().flatten().collect();
    assert!(sites.len() >= 2, "the jobs ran on {sites:?}");
    // Auctions had competition: several dispatchers bid in some.
    let contested: u64 = psql(
        &store,
        "SELECT count(*) FROM global_jobs WHERE bidders >= 2",
    )
    .parse()
    .unwrap();
    assert!(contested > 0, "no auction had two bidders");
}

#[test]
fn a_dispatcher_killed_mid_auction_loses_nothing_and_runs_nothing_twice() {
    let store = foresight_testkit::postgres::database();
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let mut peers: Vec<Peer> = ["a", "b", "c"]
        .iter()
        .map(|s| Peer::start(&root, s, &store, 2))
        .collect();
    let token = admin_token(&peers[0]);
    let log = root.join("runs.log");
    let n = 15;
    let mut ids = Vec::new();
    for i in 0..n {
        let http = Http::new(&peers[i % 3].url, &token);
        ids.push(http.submit(counted_job(&log, 1.0)));
    }
    // Kill b once it takes part: bidding in an open auction or holding an award.
    wait_for("b to bid or hold a claim", Duration::from_secs(30), || {
        let busy: u64 = psql(
            &store,
            "SELECT (SELECT count(*) FROM bids WHERE site = 'b') + \
             (SELECT count(*) FROM global_jobs WHERE site = 'b' AND state = 'claimed')",
        )
        .parse()
        .unwrap();
        (busy > 0).then_some(())
    });
    peers[1].sigkill();
    // The survivors sell and run everything b had not started; what b had started stays
    // b's (its processes run on under their supervisors).
    let b_started = || -> u64 {
        psql(
            &store,
            "SELECT count(*) FROM global_jobs WHERE site = 'b' AND state IN ('started', 'done')",
        )
        .parse()
        .unwrap()
    };
    wait_for(
        "the survivors to end every other job",
        Duration::from_secs(90),
        || {
            let done: u64 = psql(
                &store,
                "SELECT count(*) FROM global_jobs WHERE state = 'done' AND site <> 'b'",
            )
            .parse()
            .unwrap();
            (done + b_started() == n as u64).then_some(())
        },
    );
    // b comes back: it reports what it had started, and starts nothing it lost.
    peers[1].launch();
    wait_for("every global job to end", Duration::from_secs(60), || {
        let done: u64 = psql(
            &store,
            "SELECT count(*) FROM global_jobs WHERE state = 'done'",
        )
        .parse()
        .unwrap();
        (done == n as u64).then_some(())
    });
    // A whole round at each site since, b's first after its return among them (it would
    // start a claim it lost there), then every attempt launched has ended: a second run
    // would have written its line.
    let all: Vec<&Peer> = peers.iter().collect();
    more_rounds(&all, &token, 2);
    assert!(
        every_attempt_ended(&all) >= n,
        "each job launched at least once"
    );
    let runs = runs(&log);
    for id in &ids {
        assert_eq!(
            runs.get(id).map(Vec::len),
            Some(1),
            "job {id} must run exactly once: {runs:?}"
        );
    }
    // Nor is one taken in again to be launched: every site shows every job completed.
    for p in &peers {
        let http = Http::new(&p.url, &token);
        for id in &ids {
            let (_, j) = http.get(&format!("/jobs/{id}"));
            assert_eq!(j["state"], "completed", "{} job {id}: {j}", p.site);
        }
    }
}

#[test]
fn a_dispatcher_frozen_past_its_lease_loses_its_award_and_does_not_start_it_on_waking() {
    let store = foresight_testkit::postgres::database();
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    // Only b can hold a 4-processor job; auctions last 1 s, leases 3 s.
    let _a = Peer::start_with(&root, "a", &store, 2, 3000, 2, 0.5);
    let b = Peer::start_with(&root, "b", &store, 4, 3000, 2, 0.5);
    let token = admin_token(&_a);
    let log = root.join("runs.log");
    let mut body = counted_job(&log, 0.2);
    body["procs"] = 4.into();
    let id = Http::new(&_a.url, &token).submit(body);
    wait_for("b to bid", Duration::from_secs(20), || {
        let n: u64 = psql(
            &store,
            &format!("SELECT count(*) FROM bids WHERE job_id = {id} AND site = 'b'"),
        )
        .parse()
        .unwrap();
        (n > 0).then_some(())
    });
    // b freezes with its bid standing (its database connections stay open, it just stops
    // answering); a closes the auction: b, still inside its lease, is awarded the job.
    b.signal("-STOP");
    let state = |id: u64| {
        psql(&store, &format!("SELECT state || ' ' || COALESCE(site, '-') || ' ' || epoch FROM global_jobs WHERE job_id = {id}"))
    };
    wait_for("the award to frozen b", Duration::from_secs(10), || {
        (state(id) == "claimed b 1").then_some(())
    });
    // Past b's lease, a gives the award back to the queue under a new epoch.
    wait_for("a to reclaim b's award", Duration::from_secs(10), || {
        (state(id) == "queued - 2").then_some(())
    });
    assert!(!log.exists(), "nothing ran while b was frozen");
    // b wakes: its old claim is void; it bids again, wins under a new epoch and runs the job
    // once.
    b.signal("-CONT");
    wait_for("the job to end", Duration::from_secs(30), || {
        let s = state(id);
        s.starts_with("done b ").then_some(s)
    });
    let epoch: i64 = state(id).rsplit(' ').next().unwrap().parse().unwrap();
    assert!(epoch >= 3, "won again under a new epoch: {epoch}");
    assert_eq!(runs(&log)[&id], vec!["b-c".to_string()]);
}
