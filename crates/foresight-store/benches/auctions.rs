//! Throughput of the shared global queue: 4 dispatchers (each its own connection pool, as
//! 4 processes would have) on one throwaway PostgreSQL sell `N` one-processor jobs by
//! auction, each running the dispatcher's round (one glance at the queue, reclaim if a site
//! is dead, close what is due, start its awards, open and bid in everything on offer in one
//! statement) as fast as it can. Every site bids in every
//! auction, so each auction has up to 4 bidders.
//!
//! Each job is run as a dispatcher runs it: started with a hold on its user's budget (half
//! the jobs are `alice`'s, whose budget is limited), its record written back ended with its
//! charge, the charge of `bob` (unlimited budget) written to his user as the daemon writes
//! it, and its end reported to the queue.
//!
//! Reports auctions opened and closed per second (until the last award is started and
//! ended), the PostgreSQL round trips per auction and the mean number of bidders per sold
//! auction, and per job: how often a user's row was taken `FOR UPDATE`, a user's row
//! rewritten, and a user's budget lock taken. Round trips are counted by the server itself:
//! the bench turns on `log_statement = 'all'` for the run and counts the statements its
//! database logged (`BEGIN` and `COMMIT` included; each is one round trip).
//!
//! Run with `cargo bench -p foresight-store --bench auctions` (`AUCTIONS=N`, default 400;
//! `AUCTION_MS=D`, the auction length, default 20).
#![allow(clippy::unwrap_used, clippy::print_stdout)]

use foresight_core::auction::{close, AuctionConfig};
use foresight_store::JobState;
use foresight_store::{
    Closed, JobRecord, NewBid, PgStore, SharedQueue, Start, Store, UserChange, UserRecord,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

fn job(user: &str) -> JobRecord {
    JobRecord {
        user: user.into(),
        procs: 1,
        walltime: 60,
        command: vec!["true".into()],
        ..Default::default()
    }
}

fn user(name: &str, budget: Option<f64>) -> UserRecord {
    UserRecord {
        name: name.into(),
        token_hash: format!("hash-{name}"),
        budget,
        ..Default::default()
    }
}

/// Runs a won job as a dispatcher does: starts it (with a hold for a limited budget),
/// writes its record back ended with its charge (and an unlimited user's charge to the
/// user, as the daemon's flush writes it), reports its end. Whether it started.
async fn run(store: &PgStore, q: &SharedQueue, claim: foresight_store::Claim) -> bool {
    let mut r = q.record(claim.job).await.unwrap().unwrap();
    r.cluster = Some(format!("{}-c", q.site()));
    let limited = r.user == "alice";
    let hold = if limited {
        f64::from(r.procs) * r.walltime as f64
    } else {
        0.0
    };
    r.prepaid = hold;
    r.state = JobState::Running;
    if q.start_holding(claim, &r, hold).await.unwrap() != Start::Started {
        return false;
    }
    r.state = JobState::Completed;
    r.charged = 1.0;
    store.update_jobs(std::slice::from_ref(&r)).await.unwrap();
    if !limited {
        let base = user("bob", None);
        let mut charged = base.clone();
        charged.spent += 1.0;
        store
            .update_users(&[UserChange {
                base: Some(base),
                user: charged,
            }])
            .await
            .unwrap();
    }
    q.finished(claim.job, Some(1.0)).await.unwrap();
    true
}

/// One dispatcher's rounds until every job is started somewhere, as the dispatcher runs
/// them: one glance at the queue, the due auctions closed, its claims started, and its bids
/// (those whose price changed, and the openings) placed in one statement.
async fn dispatcher(
    store: PgStore,
    q: SharedQueue,
    k: usize,
    started: Arc<AtomicU64>,
    n: u64,
    ms: i64,
) {
    let cfg = AuctionConfig {
        opening_bid: Some(0.0),
        ..AuctionConfig::default()
    };
    let price = 1.0 + k as f64 * 0.1;
    while started.load(Ordering::Relaxed) < n {
        q.heartbeat().await.unwrap();
        let g = q.glance(50, 64).await.unwrap();
        if g.dead_sites {
            q.reclaim().await.unwrap();
        }
        // As the dispatcher closes: the queue locks, the core picks the winner, the queue
        // records it.
        let mut won = false;
        if g.due {
            while let Some(due) = q.due_auction().await.unwrap() {
                let outcome = close(&cfg, 100.0, &due.bids);
                let closed = due.settle(&outcome, ms).await.unwrap();
                won |= matches!(&closed, Closed::Awarded { site, .. } if site == q.site());
            }
        }
        let claims = if won {
            q.claims().await.unwrap()
        } else {
            g.claims
        };
        for claim in claims {
            if run(&store, &q, claim).await {
                started.fetch_add(1, Ordering::Relaxed);
            }
        }
        let bids: Vec<NewBid> = g
            .on_offer
            .iter()
            .filter(|j| !(j.in_auction && g.standing.iter().any(|b| b.job == j.job)))
            .map(|j| NewBid {
                job: j.job,
                price,
                procs: 1,
                open: !j.in_auction,
            })
            .collect();
        q.bid_all(&bids, &[], ms).await.unwrap();
    }
}

/// What the database `db` logged since `from` (a byte offset of the server's log): the
/// statements, the takings of a user's row `FOR UPDATE`, the rewrites of a user's row and
/// the budget locks.
fn logged(db: &str, from: u64) -> (u64, u64, u64, u64) {
    let log = std::fs::read(foresight_testkit::postgres::server().log_path()).unwrap();
    let text = String::from_utf8_lossy(&log[from as usize..]);
    let prefix = format!("{db}|LOG:  ");
    let (mut statements, mut row_locks, mut rewrites, mut budget_locks) = (0, 0, 0, 0);
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(&prefix) else {
            continue;
        };
        if !(rest.starts_with("statement:") || rest.starts_with("execute")) {
            continue;
        }
        statements += 1;
        if rest.contains("FROM users WHERE name = $1") && rest.contains("FOR UPDATE") {
            row_locks += 1;
        }
        if rest.contains("UPDATE users SET") {
            rewrites += 1;
        }
        if rest.contains("pg_advisory_xact_lock") {
            budget_locks += 1;
        }
    }
    (statements, row_locks, rewrites, budget_locks)
}

fn main() {
    let n: u64 = std::env::var("AUCTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    let ms: i64 = std::env::var("AUCTION_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let url = foresight_testkit::postgres::database();
    let db = url.rsplit('/').next().unwrap().to_string();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut queues = Vec::new();
        for k in 0..4 {
            let site = format!("s{k}");
            let store = PgStore::open_site(&url, &site).await.unwrap();
            let q = SharedQueue::new(&store, &site, 60_000);
            q.register(std::process::id(), "", 4, 1.0).await.unwrap();
            queues.push((store, q));
        }
        let store = &queues[0].0;
        store.insert_user(&user("alice", Some(1e12))).await.unwrap();
        store.insert_user(&user("bob", None)).await.unwrap();
        let jobs: Vec<JobRecord> = (0..n)
            .map(|i| job(if i % 2 == 0 { "alice" } else { "bob" }))
            .collect();
        store.insert_jobs(&jobs).await.unwrap();
        // The server logs every statement from here on; the bench counts its database's.
        for sql in [
            "ALTER SYSTEM SET log_statement = 'all'",
            "ALTER SYSTEM SET log_line_prefix = '%d|'",
            "SELECT pg_reload_conf()",
        ] {
            sqlx::query(sql).execute(store.pool()).await.unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
        let from = std::fs::metadata(foresight_testkit::postgres::server().log_path())
            .unwrap()
            .len();
        let started = Arc::new(AtomicU64::new(0));
        let t0 = Instant::now();
        let tasks: Vec<_> = queues
            .iter()
            .enumerate()
            .map(|(k, (s, q))| {
                tokio::spawn(dispatcher(s.clone(), q.clone(), k, started.clone(), n, ms))
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let elapsed = t0.elapsed().as_secs_f64();
        let (statements, row_locks, rewrites, budget_locks) = logged(&db, from);
        for sql in ["ALTER SYSTEM RESET ALL", "SELECT pg_reload_conf()"] {
            sqlx::query(sql).execute(store.pool()).await.unwrap();
        }
        let (auctions, bidders): (i64, f64) = sqlx::query_as(
            "SELECT sum(auctions)::bigint, avg(bidders)::float8 FROM global_jobs \
             WHERE state = 'done'",
        )
        .fetch_one(store.pool())
        .await
        .unwrap();
        let per_job = |x: u64| x as f64 / n as f64;
        println!(
            "{n} jobs, 4 dispatchers, auctions of {ms} ms: {auctions} auctions in {elapsed:.2} s = \
             {:.0} auctions/s; {:.1} round trips per auction; {bidders:.2} bidders per \
             sold auction; per job: {:.2} user rows taken FOR UPDATE, {:.2} user rows \
             rewritten, {:.2} budget locks",
            auctions as f64 / elapsed,
            statements as f64 / auctions as f64,
            per_job(row_locks),
            per_job(rewrites),
            per_job(budget_locks),
        );
    });
}
