//! Live auctions, measured: 4 real dispatchers on one throwaway PostgreSQL sell `AUCTIONS`
//! (default 400) one-processor `true` jobs submitted through them in turn, and the
//! benchmark prints auctions per second (from the first submission to the last job's end),
//! the round trips the server received per auction (its database's statements, counted with
//! `log_statement = 'all'`), and per job how often a user's row was taken `FOR UPDATE` and
//! rewritten. A benchmark, not a check: it is ignored unless asked for.
//!
//! `cargo test -p foresight-cli --test peer live_auctions -- --ignored --nocapture`
#![allow(clippy::unwrap_used, clippy::print_stdout)]

use crate::peer;

use crate::common::*;
use peer::*;
use std::time::{Duration, Instant};

#[test]
#[ignore = "a benchmark: run it with --ignored --nocapture"]
fn four_dispatchers_sell_jobs_live() {
    let n: u64 = std::env::var("AUCTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    let store = foresight_testkit::postgres::database();
    let db = store.rsplit('/').next().unwrap().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let peers: Vec<Peer> = ["a", "b", "c", "d"]
        .iter()
        .map(|s| Peer::start(&root, s, &store, 16))
        .collect();
    let token = admin_token(&peers[0]);
    for sql in [
        "ALTER SYSTEM SET log_statement = 'all'",
        "ALTER SYSTEM SET log_line_prefix = '%d|'",
        "SELECT pg_reload_conf()",
    ] {
        psql(&store, sql);
    }
    let log = foresight_testkit::postgres::server().log_path();
    let from = std::fs::metadata(log).unwrap().len() as usize;
    let t0 = Instant::now();
    for i in 0..n as usize {
        let http = Http::new(&peers[i % 4].url, &token);
        http.submit(job_body(1, 60, &["true"]));
    }
    let done = || -> u64 {
        psql(
            &store,
            "SELECT count(*) FROM global_jobs WHERE state = 'done'",
        )
        .parse()
        .unwrap()
    };
    wait_for("every job to end", Duration::from_secs(600), || {
        (done() == n).then_some(())
    });
    let elapsed = t0.elapsed().as_secs_f64();
    let text = std::fs::read(log).unwrap();
    for sql in ["ALTER SYSTEM RESET ALL", "SELECT pg_reload_conf()"] {
        psql(&store, sql);
    }
    let text = String::from_utf8_lossy(&text[from..]);
    let prefix = format!("{db}|LOG:  ");
    let (mut statements, mut row_locks, mut rewrites) = (0u64, 0u64, 0u64);
    for rest in text.lines().filter_map(|l| l.strip_prefix(&prefix)) {
        if !(rest.starts_with("statement:") || rest.starts_with("execute")) {
            continue;
        }
        statements += 1;
        row_locks +=
            u64::from(rest.contains("FROM users WHERE name") && rest.contains("FOR UPDATE"));
        rewrites += u64::from(rest.contains("UPDATE users SET"));
    }
    let auctions: u64 = psql(&store, "SELECT sum(auctions) FROM global_jobs")
        .parse()
        .unwrap();
    println!(
        "{n} jobs, 4 dispatchers: {auctions} auctions in {elapsed:.2} s = {:.0} auctions/s; \
         {:.1} round trips per auction; per job: {:.2} user rows taken FOR UPDATE, {:.2} \
         user rows rewritten",
        auctions as f64 / elapsed,
        statements as f64 / auctions as f64,
        row_locks as f64 / n as f64,
        rewrites as f64 / n as f64,
    );
}
