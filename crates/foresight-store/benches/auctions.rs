//! Throughput of the shared global queue: 4 dispatchers (each its own connection pool, as
//! 4 processes would have) on one throwaway PostgreSQL sell `N` one-processor jobs by
//! auction, each running the dispatcher's round (reclaim, close what is due, start its
//! awards, open and bid in everything on offer) as fast as it can. Every site bids in every
//! auction, so each auction has up to 4 bidders.
//!
//! Reports auctions opened and closed per second (until the last award is started), the
//! PostgreSQL round trips per auction (statements sent, `BEGIN` and `COMMIT` included, counted
//! from what each queue call sends: see [`trips`]) and the mean number of bidders per sold
//! auction.
//!
//! Run with `cargo bench -p foresight-store --bench auctions` (`AUCTIONS=N`, default 400;
//! `AUCTION_MS=D`, the auction length, default 20).
#![allow(clippy::unwrap_used, clippy::print_stdout)]

use foresight_core::auction::{close, AuctionConfig};
use foresight_store::{JobRecord, PgStore, SharedQueue, Store};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

fn job() -> JobRecord {
    JobRecord {
        user: "bench".into(),
        procs: 1,
        walltime: 60,
        command: vec!["true".into()],
        ..Default::default()
    }
}

/// Statements each queue call sends (one round trip each), as written in
/// `src/shared_queue.rs`: keep in step with it.
mod trips {
    /// `heartbeat`, `claims`, `on_offer`, `bid`, `record`: one statement.
    pub const ONE: u64 = 1;
    /// `reclaim`: BEGIN, UPDATE, DELETE, COMMIT (+ NOTIFY when it gave jobs back).
    pub const RECLAIM: u64 = 4;
    /// `open`: BEGIN, UPDATE, NOTIFY, COMMIT.
    pub const OPEN: u64 = 4;
    /// `due_auction` then `settle`: BEGIN, SELECT … SKIP LOCKED, SELECT bids FOR UPDATE,
    /// UPDATE, DELETE bids, NOTIFY, COMMIT.
    pub const CLOSE: u64 = 7;
    /// `due_auction` with nothing due: BEGIN, SELECT, ROLLBACK.
    pub const CLOSE_NONE: u64 = 3;
    /// `start`: BEGIN, UPDATE global_jobs, UPDATE jobs, DELETE bids, COMMIT.
    pub const START: u64 = 5;
}

/// One dispatcher's rounds until every job is started somewhere; its round trips.
async fn dispatcher(q: SharedQueue, k: usize, started: Arc<AtomicU64>, n: u64, ms: i64) -> u64 {
    let mut trips = 0;
    let cfg = AuctionConfig {
        opening_bid: Some(0.0),
        ..AuctionConfig::default()
    };
    while started.load(Ordering::Relaxed) < n {
        q.heartbeat().await.unwrap();
        q.reclaim().await.unwrap();
        trips += trips::ONE + trips::RECLAIM;
        // As the dispatcher closes: the queue locks, the core picks the winner, the queue
        // records it.
        while let Some(due) = q.due_auction().await.unwrap() {
            let outcome = close(&cfg, 100.0, &due.bids);
            due.settle(&outcome, ms).await.unwrap();
            trips += trips::CLOSE;
        }
        trips += trips::CLOSE_NONE + trips::ONE;
        for claim in q.claims().await.unwrap() {
            trips += trips::ONE + trips::START;
            let mut r = q.record(claim.job).await.unwrap().unwrap();
            r.cluster = Some(format!("{}-c", q.site()));
            if q.start(claim, &r).await.unwrap() {
                started.fetch_add(1, Ordering::Relaxed);
            }
        }
        trips += trips::ONE;
        for j in q.on_offer(64).await.unwrap() {
            if !j.in_auction {
                trips += trips::OPEN;
                q.open(j.job, ms).await.unwrap();
            }
            trips += trips::ONE;
            q.bid(j.job, 1.0 + k as f64 * 0.1, 1).await.unwrap();
        }
    }
    trips
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
            q.register(std::process::id(), "", 4, 0.0).await.unwrap();
            queues.push((store, q));
        }
        queues[0]
            .0
            .insert_jobs(&vec![job(); n as usize])
            .await
            .unwrap();
        let started = Arc::new(AtomicU64::new(0));
        let t0 = Instant::now();
        let tasks: Vec<_> = queues
            .iter()
            .enumerate()
            .map(|(k, (_, q))| tokio::spawn(dispatcher(q.clone(), k, started.clone(), n, ms)))
            .collect();
        let mut trips = 0;
        for t in tasks {
            trips += t.await.unwrap();
        }
        let elapsed = t0.elapsed().as_secs_f64();
        let (auctions, bidders): (i64, f64) = sqlx::query_as(
            "SELECT sum(auctions)::bigint, avg(bidders)::float8 FROM global_jobs \
             WHERE state = 'started'",
        )
        .fetch_one(queues[0].0.pool())
        .await
        .unwrap();
        println!(
            "{n} jobs, 4 dispatchers, auctions of {ms} ms: {auctions} auctions in {elapsed:.2} s = \
             {:.0} auctions/s; {:.1} round trips per auction; {bidders:.2} bidders per \
             sold auction",
            auctions as f64 / elapsed,
            trips as f64 / auctions as f64,
        );
    });
}
