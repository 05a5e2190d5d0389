//! Peer dispatchers while their PostgreSQL server restarts under load: they reconnect (pool,
//! listener, heartbeats), and every global job, submitted before or after, runs exactly once.
//! A test binary of its own, since every test of a binary shares its throwaway server.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/peer.rs"]
mod peer;

use common::*;
use peer::*;
use std::time::Duration;

#[test]
fn dispatchers_ride_out_a_database_restart_and_lose_nothing() {
    let store = foresight_testkit::postgres::database();
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let peers: Vec<Peer> = ["a", "b"]
        .iter()
        .map(|s| Peer::start_with(&root, s, &store, 2, 5000, 1, 0.3))
        .collect();
    let token = admin_token(&peers[0]);
    let log = root.join("runs.log");
    let mut ids = Vec::new();
    for i in 0..12 {
        ids.push(Http::new(&peers[i % 2].url, &token).submit(counted_job(&log, 0.5)));
    }
    let done = || -> u64 {
        psql(
            &store,
            "SELECT count(*) FROM global_jobs WHERE state = 'done'",
        )
        .parse()
        .unwrap()
    };
    wait_for("some jobs to end", Duration::from_secs(30), || {
        (done() >= 2).then_some(())
    });
    // Down for a second and a half while jobs run, are auctioned and queued.
    foresight_testkit::postgres::server().restart(Duration::from_millis(1500));
    // Both dispatchers take submissions again (their pools reconnect on demand).
    for i in 0..6 {
        let http = Http::new(&peers[i % 2].url, &token);
        let id = wait_for(
            "a submission after the restart",
            Duration::from_secs(20),
            || {
                let (status, v) = http.post("/jobs", &counted_job(&log, 0.2));
                (status == 201).then(|| v["id"].as_u64().unwrap())
            },
        );
        ids.push(id);
    }
    // (A refused submission may have been stored all the same: count at least ours.)
    wait_for("every job to end", Duration::from_secs(90), || {
        let queued: u64 = psql(&store, "SELECT count(*) FROM global_jobs")
            .parse()
            .unwrap();
        (done() == queued && queued >= ids.len() as u64).then_some(())
    });
    let runs = runs(&log);
    assert!(
        runs.values().all(|r| r.len() == 1),
        "a job ran twice: {runs:?}"
    );
    for id in &ids {
        assert_eq!(
            runs.get(id).map(Vec::len),
            Some(1),
            "job {id} must run exactly once: {runs:?}"
        );
    }
}
