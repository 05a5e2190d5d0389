//! What operators see of the decentralized grid, read from the shared global queue: the
//! sites with their dispatchers' leases ([`SharedQueue::sites`]) and the jobs on offer with
//! their auctions ([`SharedQueue::auctions`], [`SharedQueue::auction_counts`]).
//!
//! Read only, and timed by the database's clock (`now()`), the one the leases and auctions
//! are decided by: a site is shown down exactly when the queue treats it as down.
//!
//! The service turns the records into the API's views; the store names the stages itself.

use crate::shared_queue::ALIVE;
use crate::{Result, SharedQueue, StoreError};
use serde::Deserialize;
use sqlx::Row;

/// A site that has run a dispatcher, with its lease.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteRecord {
    /// The site's name.
    pub site: String,
    /// Its number, fixed at its first registration (ties between equal bids).
    pub id: u32,
    /// Where its service answers, as it announced.
    pub url: String,
    /// Its dispatcher's process id, on its own host.
    pub pid: u32,
    /// When its dispatcher last entered the grid (Unix seconds).
    pub started_at: i64,
    /// Its last heartbeat (Unix seconds).
    pub heartbeat_at: i64,
    /// How long its lease outlives a heartbeat, milliseconds.
    pub lease_ms: u64,
    /// Milliseconds until its lease runs out; negative once it has.
    pub lease_left_ms: i64,
    /// Its lease holds: it is up (else down: its claims and bids are void).
    pub alive: bool,
    /// Processors of its largest cluster, as it advertised.
    pub max_procs: u32,
    /// The highest base tariff of its clusters, per processor-second.
    pub max_tariff: f64,
    /// Global jobs awarded to it and not yet started.
    pub claimed: u32,
    /// Its jobs running (local and global), as it last recorded them.
    pub running: u32,
    /// Its standing bids.
    pub bids: u32,
}

/// A global job on offer: queued, or in an auction (open, due, or reopening after a
/// back-off).
#[derive(Clone, Debug, PartialEq)]
pub struct AuctionRecord {
    /// The job.
    pub job: u64,
    /// Its owner.
    pub user: String,
    /// Processors it needs.
    pub procs: u32,
    /// Its absolute priority level.
    pub priority: u32,
    /// Where it stands in its auctions.
    pub stage: AuctionStage,
    /// The site that opened its current or last auction.
    pub opened_by: Option<String>,
    /// When its current or last auction opened (Unix seconds; for `reopening`, when it
    /// reopens).
    pub opened_at: Option<i64>,
    /// When its current auction closes (Unix seconds).
    pub closes_at: Option<i64>,
    /// Standing bids of sites whose lease holds.
    pub bids: u32,
    /// The highest of those bids.
    pub best_bid: Option<f64>,
    /// The site that placed it (equal highest: the lowest site id's).
    pub best_bidder: Option<String>,
    /// Auctions opened for it so far, the current one included.
    pub rounds: u32,
    /// How many of them closed without a valid bid.
    pub unsold: u32,
    /// Until when it waits before its auction reopens (Unix seconds), while `reopening`.
    pub back_off_until: Option<i64>,
}

/// Where a global job on offer stands in its auctions, as the `STAGE` expression names it from its row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuctionStage {
    /// Not auctioned yet: no site has been able to run it.
    Queued,
    /// In an auction whose bids count until `closes_at`.
    Open,
    /// In an auction that is due, being closed.
    Closing,
    /// Closed unsold; its auction reopens at `back_off_until`.
    Reopening,
    /// Closed unsold; queued until a site can bid.
    Unsold,
}

impl AuctionStage {
    /// Whether an auction is under way or pending its reopening (its times mean something).
    pub fn in_auction(self) -> bool {
        matches!(
            self,
            AuctionStage::Open | AuctionStage::Closing | AuctionStage::Reopening
        )
    }
}

/// How many global jobs on offer are at each stage, for `/metrics`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AuctionCounts {
    /// Queued, never auctioned.
    pub queued: u64,
    /// In an open auction.
    pub open: u64,
    /// In an auction due to close.
    pub closing: u64,
    /// Closed unsold, reopening after a back-off.
    pub reopening: u64,
    /// Closed unsold, queued until a site can bid.
    pub unsold: u64,
}

/// The stage of a `global_jobs` row `g` in state `queued` or `auction`, as
/// [`AuctionStage`] names it.
const STAGE: &str = "CASE WHEN g.state = 'queued' THEN \
                     (CASE WHEN g.unsold > 0 THEN 'unsold' ELSE 'queued' END) \
                     WHEN g.opened_at > now() THEN 'reopening' \
                     WHEN g.closes_at <= now() THEN 'closing' ELSE 'open' END";

/// The stage [`STAGE`] named for job `job`'s row, refused as a record that does not decode
/// when it is none of [`AuctionStage`]'s names.
fn stage_of(job: u64, name: String) -> Result<AuctionStage> {
    serde_json::from_value(serde_json::Value::String(name)).map_err(|source| StoreError::Decode {
        table: "global_jobs",
        id: job.to_string(),
        source,
    })
}

/// A timestamp column as Unix seconds.
fn secs(column: &str) -> String {
    format!("floor(EXTRACT(EPOCH FROM {column}))::bigint")
}

fn count(r: &sqlx::postgres::PgRow, i: usize) -> u32 {
    u32::try_from(r.get::<i64, _>(i).max(0)).unwrap_or(u32::MAX)
}

impl SharedQueue {
    /// Every site that has run a dispatcher, by site id, with its lease as the database's
    /// clock has it now.
    pub async fn sites(&self) -> Result<Vec<SiteRecord>> {
        let rows = sqlx::query(&format!(
            "SELECT d.site, d.id, d.url, d.pid, {started}, {heartbeat}, d.lease_ms, \
             (EXTRACT(EPOCH FROM (d.heartbeat_at + d.lease_ms * interval '1 millisecond' \
             - now())) * 1000)::float8, {ALIVE}, d.max_procs, d.max_tariff, \
             (SELECT count(*) FROM global_jobs g WHERE g.site = d.site AND g.state = 'claimed'), \
             (SELECT count(*) FROM jobs j WHERE j.site = d.site AND j.state = 'running'), \
             (SELECT count(*) FROM bids b WHERE b.site = d.site) \
             FROM dispatchers d ORDER BY d.id",
            started = secs("d.started_at"),
            heartbeat = secs("d.heartbeat_at"),
        ))
        .fetch_all(&self.pool)
        .await
        .map_err(self.db())?;
        Ok(rows
            .iter()
            .map(|r| SiteRecord {
                site: r.get(0),
                id: r.get::<i32, _>(1).max(0) as u32,
                url: r.get(2),
                pid: r.get::<i32, _>(3).max(0) as u32,
                started_at: r.get(4),
                heartbeat_at: r.get(5),
                lease_ms: r.get::<i64, _>(6).max(0) as u64,
                lease_left_ms: r.get::<f64, _>(7).floor() as i64,
                alive: r.get(8),
                max_procs: r.get::<i32, _>(9).max(0) as u32,
                max_tariff: r.get(10),
                claimed: count(r, 11),
                running: count(r, 12),
                bids: count(r, 13),
            })
            .collect())
    }

    /// The first `limit` global jobs on offer (queued, or in an auction), highest priority
    /// first, then oldest: each with its auction's times, live bids and rounds.
    pub async fn auctions(&self, limit: u32) -> Result<Vec<AuctionRecord>> {
        let rows = sqlx::query(&format!(
            "SELECT g.job_id, j.user_name, g.procs, g.priority, {STAGE}, g.opened_by, \
             {opened}, {closes}, bb.n, bb.best, bb.leader, g.auctions, g.unsold \
             FROM global_jobs g JOIN jobs j ON j.id = g.job_id \
             LEFT JOIN LATERAL (SELECT count(*) AS n, max(b.price) AS best, \
             (array_agg(b.site ORDER BY b.price DESC, d.id))[1] AS leader \
             FROM bids b JOIN dispatchers d ON d.site = b.site \
             WHERE b.job_id = g.job_id AND {ALIVE}) bb ON true \
             WHERE g.state IN ('queued', 'auction') \
             ORDER BY g.priority DESC, g.job_id LIMIT $1",
            opened = secs("g.opened_at"),
            closes = secs("g.closes_at"),
        ))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(self.db())?;
        rows.iter()
            .map(|r| {
                let job = r.get::<i64, _>(0) as u64;
                let stage = stage_of(job, r.get(4))?;
                let opened_at: Option<i64> = r.get(6);
                Ok(AuctionRecord {
                    job,
                    user: r.get(1),
                    procs: r.get::<i32, _>(2).max(0) as u32,
                    priority: r.get::<i32, _>(3).max(0) as u32,
                    back_off_until: (stage == AuctionStage::Reopening)
                        .then_some(opened_at)
                        .flatten(),
                    opened_by: r.get(5),
                    opened_at,
                    closes_at: if stage.in_auction() { r.get(7) } else { None },
                    bids: count(r, 8),
                    best_bid: r.get(9),
                    best_bidder: r.get(10),
                    rounds: r.get::<i32, _>(11).max(0) as u32,
                    unsold: r.get::<i32, _>(12).max(0) as u32,
                    stage,
                })
            })
            .collect()
    }

    /// How many global jobs on offer are at each stage, all of them counted.
    pub async fn auction_counts(&self) -> Result<AuctionCounts> {
        let rows = sqlx::query(&format!(
            "SELECT {STAGE}, count(*) FROM global_jobs g \
             WHERE g.state IN ('queued', 'auction') GROUP BY 1"
        ))
        .fetch_all(&self.pool)
        .await
        .map_err(self.db())?;
        let mut c = AuctionCounts::default();
        for r in &rows {
            let n = r.get::<i64, _>(1).max(0) as u64;
            match r.get::<String, _>(0).as_str() {
                "queued" => c.queued = n,
                "open" => c.open = n,
                "closing" => c.closing = n,
                "reopening" => c.reopening = n,
                _ => c.unsold = n,
            }
        }
        Ok(c)
    }
}
