//! Live auctions, measured: 4 real dispatchers on one throwaway PostgreSQL sell `AUCTIONS`
//! (default 400) one-processor `true` jobs submitted through them in turn, and the
//! benchmark prints auctions per second (from the first submission to the last job's end),
//! the round trips the server received per auction (its database's statements, counted with
//! `log_statement = 'all'`), and per job how often a user's row was taken `FOR UPDATE` and
//! rewritten. A benchmark, not a check: it is ignored unless asked for.
//!
//! `cargo test -p foresight-cli --test peer live_auctions -- --ignored --nocapture`
//! (`AUCTIONS=N`; `CLIENTS=4`: four clients submit at once, one per dispatcher; `ALPHA=A`, the auctions' length in mean runtimes, default 0.3; the mean
//! runtime of `true` jobs counts as 1 s, the least the auctions take; `BATCH=N`: the jobs
//! submitted N to a request through `POST /jobs/batch`, which measures the auctions rather
//! than the submissions, from the first submission's answer to the last job's end;
//! `OVERCOMMIT=lapse_on_award`: the sites' `[dispatcher.auction] overcommit`, default `reserve`).
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
    // The auctions' length is α × the mean runtime, which is at least 1 s: `ALPHA` (default
    // 0.3, as the other peer tests) sets how much of the time auctions take.
    let alpha: f64 = std::env::var("ALPHA")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.3);
    // `OVERCOMMIT=lapse_on_award`: a site offers the same processors in every auction
    // (default `reserve`: a standing bid holds them).
    let overcommit = std::env::var("OVERCOMMIT").unwrap_or_else(|_| "reserve".to_string());
    let auction = format!("alpha = {alpha}\novercommit = \"{overcommit}\"");
    let peers: Vec<Peer> = ["a", "b", "c", "d"]
        .iter()
        .map(|s| Peer::start_auction(&root, s, &store, 16, 1500, 1, &auction))
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
    // One client per dispatcher, made before the clock starts: a client made per job costs
    // the benchmark more than the submission costs the service.
    let clients: Vec<Http> = peers.iter().map(|p| Http::new(&p.url, &token)).collect();
    // `CLIENTS=4`: each dispatcher's quarter submitted by a client of its own, all at once
    // (default 1: one client submits through the dispatchers in turn).
    let parallel = std::env::var("CLIENTS").is_ok_and(|v| v == "4");
    // `BATCH=N`: jobs submitted N at a time through the batch route (`POST /jobs/batch`),
    // so that the submissions do not bound the auctions (default: one job per request).
    let batch: usize = std::env::var("BATCH")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&b| b > 0)
        .unwrap_or(0);
    // When the first submission was answered: the auctions' clock starts there.
    let first = std::sync::OnceLock::new();
    let submit = |c: &Http, count: usize| {
        if batch == 0 {
            for _ in 0..count {
                c.submit(job_body(1, 60, &["true"]));
                first.get_or_init(Instant::now);
            }
            return;
        }
        let mut left = count;
        while left > 0 {
            let k = left.min(batch);
            let jobs: Vec<_> = (0..k).map(|_| job_body(1, 60, &["true"])).collect();
            let (status, v) = c.post("/jobs/batch", &serde_json::json!({ "jobs": jobs }));
            assert_eq!(status, 201, "{v}");
            assert_eq!(v["ids"].as_array().map(Vec::len), Some(k), "{v}");
            first.get_or_init(Instant::now);
            left -= k;
        }
    };
    let t0 = Instant::now();
    if parallel {
        std::thread::scope(|s| {
            for (k, c) in clients.iter().enumerate() {
                let count = (n as usize + 3 - k) / 4;
                let submit = &submit;
                s.spawn(move || submit(c, count));
            }
        });
    } else if batch > 0 {
        // Batches through the dispatchers in turn.
        let mut left = n as usize;
        for i in 0.. {
            if left == 0 {
                break;
            }
            let k = left.min(batch);
            submit(&clients[i % 4], k);
            left -= k;
        }
    } else {
        for i in 0..n as usize {
            submit(&clients[i % 4], 1);
        }
    }
    let submitted = t0.elapsed().as_secs_f64();
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
    let answered = first
        .get()
        .map_or(0.0, |f| f.duration_since(t0).as_secs_f64());
    let text = std::fs::read(log).unwrap();
    for sql in ["ALTER SYSTEM RESET ALL", "SELECT pg_reload_conf()"] {
        psql(&store, sql);
    }
    let text = String::from_utf8_lossy(&text[from..]);
    let prefix = format!("{db}|LOG:  ");
    let (mut statements, mut row_locks, mut rewrites) = (0u64, 0u64, 0u64);
    // Which statements they were: by their first words, the most frequent first.
    let mut kinds: std::collections::BTreeMap<String, u64> = Default::default();
    for rest in text.lines().filter_map(|l| l.strip_prefix(&prefix)) {
        if !(rest.starts_with("statement:") || rest.starts_with("execute")) {
            continue;
        }
        statements += 1;
        let sql = rest.split_once(": ").map_or(rest, |(_, s)| s);
        *kinds.entry(sql.chars().take(90).collect()).or_default() += 1;
        row_locks +=
            u64::from(rest.contains("FROM users WHERE name") && rest.contains("FOR UPDATE"));
        rewrites += u64::from(rest.contains("UPDATE users SET"));
    }
    let auctions: u64 = psql(&store, "SELECT sum(auctions) FROM global_jobs")
        .parse()
        .unwrap();
    println!(
        "{n} jobs, 4 dispatchers, alpha {alpha}, overcommit {overcommit}: {auctions} auctions in {elapsed:.2} s = {:.0} auctions/s; \
         {:.1} round trips per auction; per job: {:.2} user rows taken FOR UPDATE, {:.2} \
         user rows rewritten",
        auctions as f64 / elapsed,
        statements as f64 / auctions as f64,
        row_locks as f64 / n as f64,
        rewrites as f64 / n as f64,
    );
    let how = match (parallel, batch) {
        (true, 0) => "4 clients at once".to_string(),
        (false, 0) => "one at a time".to_string(),
        (true, b) => format!("4 clients at once, batches of {b}"),
        (false, b) => format!("batches of {b}, one at a time"),
    };
    println!(
        "submissions: {submitted:.2} s ({:.1} ms a job, {how}); from the first submission's \
         answer to the last job's end: {:.2} s = {:.0} auctions/s",
        submitted * 1000.0 / n as f64,
        elapsed - answered,
        auctions as f64 / (elapsed - answered),
    );
    // Where a job's life goes, mean seconds per job: its auction (opened to closed), the
    // close to the award, the award to the start, the start to the end reported; and the
    // sites that bid in it.
    let phases = psql(
        &store,
        "SELECT round(avg(extract(epoch FROM closes_at - opened_at))::numeric, 3) || ' ' || \
         round(avg(extract(epoch FROM claimed_at - closes_at))::numeric, 3) || ' ' || \
         round(avg(extract(epoch FROM started_at - claimed_at))::numeric, 3) || ' ' || \
         round(avg(extract(epoch FROM ended_at - started_at))::numeric, 3) || ' ' || \
         round(avg(runtime_s)::numeric, 3) || '; bidders ' || \
         round(avg(bidders)::numeric, 2) FROM global_jobs WHERE state = 'done'",
    );
    println!(
        "per job, mean s: auction, close to award, award to start, start to end reported, \
         runtime: {phases} per auction"
    );
    let mut kinds: Vec<(String, u64)> = kinds.into_iter().collect();
    kinds.sort_by_key(|k| std::cmp::Reverse(k.1));
    for (sql, count) in kinds.iter().take(25) {
        println!("{:7.2} per auction  {sql}", *count as f64 / auctions as f64);
    }
}
