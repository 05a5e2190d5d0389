//! What one dispatcher round asks of the shared global queue, in as few round trips as the
//! decisions allow: everything a round reads before it acts, in one statement
//! ([`SharedQueue::glance`]), and every bid, opening and withdrawal it makes, in one
//! statement ([`SharedQueue::bid_all`]).
//!
//! Every dispatcher runs a round on each notification of the queue, so a round's reads are
//! most of what an auction costs the database. They are the same reads the round made one
//! by one ([`SharedQueue::claims`], [`SharedQueue::on_offer`], …), taken in one snapshot;
//! the decisions that two dispatchers could race on stay where they were (closing a due
//! auction, starting a claim, reclaiming a dead site's jobs), each with its own `WHERE`.

use crate::shared_budget::{user_of, FOLD_AFTER, LEDGER_SUM};
use crate::shared_queue::{job_row, ALIVE, GLOBAL_CHANNEL};
use crate::{Claim, JobRecord, QueuedJob, Result, SharedQueue, StoreError, UserRecord};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

/// What a round reads of the queue before it acts, in one snapshot.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Glance {
    /// Every user, as [`SharedQueue::users`] reads them (their budgets less their ledgers).
    pub users: Vec<UserRecord>,
    /// Some dispatcher's lease has run out: [`SharedQueue::reclaim`] has work.
    pub dead_sites: bool,
    /// Some auction is due: [`SharedQueue::due_auction`] has work.
    pub due: bool,
    /// Some global job waits for its dependencies.
    pub waiting: bool,
    /// Jobs awarded to this site and not started, as [`SharedQueue::claims`] orders them.
    pub claims: Vec<Claim>,
    /// Global jobs this site started that have not ended ([`SharedQueue::started_here`]).
    pub started_here: Vec<u64>,
    /// Jobs this site started whose owners asked to cancel ([`SharedQueue::cancel_requests`]).
    pub cancel_requests: Vec<u64>,
    /// Runtimes of the global jobs that ended last, latest first, seconds
    /// ([`SharedQueue::recent_runtimes`]).
    pub runtimes: Vec<f64>,
    /// Jobs on offer, as [`SharedQueue::on_offer`] gives them.
    pub on_offer: Vec<QueuedJob>,
    /// This site's standing bids in auctions: job, processors and price.
    pub standing: Vec<StandingOwn>,
    /// Milliseconds until the earliest open auction that is not due yet closes.
    pub next_close_ms: Option<i64>,
}

/// One of this site's own standing bids, as [`Glance::standing`] reads it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StandingOwn {
    /// The job.
    pub job: u64,
    /// The processors it needs (what the bid holds under `overcommit = "reserve"`).
    pub procs: u32,
    /// The bid's price.
    pub price: f64,
    /// The processors the bid offers.
    pub offered: u32,
}

/// A bid a round places ([`SharedQueue::bid_all`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NewBid {
    /// The job.
    pub job: u64,
    /// Its price.
    pub price: f64,
    /// The processors offered.
    pub procs: u32,
    /// The job is queued: open its auction first (unless someone else just did).
    pub open: bool,
}

/// The glance as the statement answers it (one JSON object).
#[derive(Deserialize)]
struct Row {
    users: Vec<(String, String, String, f64, i64)>,
    dead: bool,
    due: bool,
    waiting: bool,
    claims: Vec<(i64, i64)>,
    started: Vec<i64>,
    cancels: Vec<i64>,
    runtimes: Vec<f64>,
    offer: Vec<(i64, i32, i32, bool)>,
    standing: Vec<(i64, i32, f64, i32)>,
    next_close: Option<f64>,
}

impl SharedQueue {
    /// Everything a round reads before it acts, in one statement (one snapshot): the
    /// `window` latest runtimes and the `limit` first jobs on offer among the rest.
    pub async fn glance(&self, window: u32, limit: u32) -> Result<Glance> {
        let sql = format!(
            "SELECT json_build_object(\
             'users', ARRAY(SELECT json_build_array(u.name, u.token_hash, u.data, \
             {LEDGER_SUM}, (SELECT count(*) FROM budget_ledger l \
             WHERE l.user_name = u.name)) FROM users u ORDER BY u.name), \
             'dead', EXISTS (SELECT 1 FROM dispatchers d WHERE NOT ({ALIVE})), \
             'due', EXISTS (SELECT 1 FROM global_jobs WHERE state = 'auction' \
             AND closes_at <= now()), \
             'waiting', EXISTS (SELECT 1 FROM global_jobs WHERE state = 'waiting'), \
             'claims', ARRAY(SELECT json_build_array(job_id, epoch) FROM global_jobs \
             WHERE state = 'claimed' AND site = $1 ORDER BY priority DESC, job_id), \
             'started', ARRAY(SELECT job_id FROM global_jobs WHERE state = 'started' \
             AND site = $1), \
             'cancels', ARRAY(SELECT job_id FROM global_jobs WHERE site = $1 \
             AND cancel_requested ORDER BY job_id), \
             'runtimes', ARRAY(SELECT runtime_s FROM global_jobs WHERE state = 'done' \
             AND runtime_s IS NOT NULL ORDER BY ended_at DESC LIMIT $2), \
             'offer', ARRAY(SELECT json_build_array(job_id, procs, priority, \
             state = 'auction') FROM global_jobs WHERE state = 'queued' \
             OR (state = 'auction' AND opened_at <= now() AND closes_at > now()) \
             ORDER BY priority DESC, job_id LIMIT $3), \
             'standing', ARRAY(SELECT json_build_array(g.job_id, g.procs, b.price, b.procs) \
             FROM bids b JOIN global_jobs g ON g.job_id = b.job_id \
             WHERE b.site = $1 AND g.state = 'auction' ORDER BY g.job_id), \
             'next_close', (SELECT EXTRACT(EPOCH FROM (min(closes_at) - now()))::float8 \
             * 1000 FROM global_jobs WHERE state = 'auction' AND closes_at > now())\
             )::text"
        );
        let text: String = sqlx::query_scalar(&sql)
            .bind(self.site())
            .bind(i64::from(window))
            .bind(i64::from(limit))
            .fetch_one(&self.pool)
            .await
            .map_err(self.db())?;
        let r: Row = serde_json::from_str(&text).map_err(|source| StoreError::Decode {
            table: "global_jobs",
            id: format!("a round's glance for site {}", self.site()),
            source,
        })?;
        // A ledger grown long is folded into its user's row first, as `users` does.
        let users = if r.users.iter().any(|u| u.4 > FOLD_AFTER) {
            self.users().await?
        } else {
            r.users
                .into_iter()
                .map(|(name, token, data, moved, _)| user_of((name, token, data, moved)))
                .collect::<Result<_>>()?
        };
        Ok(Glance {
            users,
            dead_sites: r.dead,
            due: r.due,
            waiting: r.waiting,
            claims: r
                .claims
                .into_iter()
                .map(|(job, epoch)| Claim {
                    job: job as u64,
                    epoch,
                })
                .collect(),
            started_here: r.started.into_iter().map(|j| j as u64).collect(),
            cancel_requests: r.cancels.into_iter().map(|j| j as u64).collect(),
            runtimes: r.runtimes,
            on_offer: r
                .offer
                .into_iter()
                .map(|(job, procs, priority, in_auction)| QueuedJob {
                    job: job as u64,
                    procs: procs.max(0) as u32,
                    priority: priority.max(0) as u32,
                    in_auction,
                })
                .collect(),
            standing: r
                .standing
                .into_iter()
                .map(|(job, procs, price, offered)| StandingOwn {
                    job: job as u64,
                    procs: procs.max(0) as u32,
                    price,
                    offered: offered.max(0) as u32,
                })
                .collect(),
            next_close_ms: r.next_close.map(|m| m.max(0.0).ceil() as i64),
        })
    }

    /// A round's bids in one statement: opens the auctions of the queued jobs among `bids`
    /// (to close `duration_ms` from now), places or replaces each bid in an auction still
    /// open (as [`SharedQueue::bid`] does, one at a time), and withdraws this site's bids on
    /// `withdraw`. A job someone else opened while the statement ran is not opened again;
    /// its bid is placed in their auction by a second statement, as [`SharedQueue::open`]
    /// then [`SharedQueue::bid`] would. Returns the jobs whose bids stand. A job appears
    /// once.
    pub async fn bid_all(
        &self,
        bids: &[NewBid],
        withdraw: &[u64],
        duration_ms: i64,
    ) -> Result<BTreeSet<u64>> {
        let mut placed = self.bid_once(bids, withdraw, duration_ms).await?;
        let lost: Vec<NewBid> = bids
            .iter()
            .filter(|b| b.open && !placed.contains(&b.job))
            .map(|b| NewBid { open: false, ..*b })
            .collect();
        if !lost.is_empty() {
            placed.extend(self.bid_once(&lost, &[], duration_ms).await?);
        }
        Ok(placed)
    }

    /// [`SharedQueue::bid_all`]'s one statement.
    async fn bid_once(
        &self,
        bids: &[NewBid],
        withdraw: &[u64],
        duration_ms: i64,
    ) -> Result<BTreeSet<u64>> {
        if bids.is_empty() && withdraw.is_empty() {
            return Ok(BTreeSet::new());
        }
        let mut seen = BTreeSet::new();
        if let Some(b) = bids.iter().find(|b| !seen.insert(b.job)) {
            return Err(StoreError::BidTwice(b.job));
        }
        let jobs: Vec<i64> = bids.iter().map(|b| b.job as i64).collect();
        let prices: Vec<f64> = bids.iter().map(|b| b.price).collect();
        let procs: Vec<i32> = bids.iter().map(|b| b.procs as i32).collect();
        let open: Vec<bool> = bids.iter().map(|b| b.open).collect();
        let withdraw: Vec<i64> = withdraw.iter().map(|&j| j as i64).collect();
        // The opening and the bids are one statement: the bids see the table as it was
        // when the statement began, so a job it opens counts as open through `opened`.
        let sql = format!(
            "WITH b AS (SELECT * FROM unnest($2::bigint[], $3::float8[], $4::int[], \
             $5::bool[]) AS b(job_id, price, procs, open)), \
             opened AS (UPDATE global_jobs g SET state = 'auction', opened_by = $1, \
             opened_at = now(), closes_at = now() + $6 * interval '1 millisecond', \
             auctions = g.auctions + 1 FROM b WHERE g.job_id = b.job_id AND b.open \
             AND g.state = 'queued' RETURNING g.job_id), \
             live AS (SELECT g.job_id FROM global_jobs g JOIN b ON b.job_id = g.job_id \
             WHERE g.state = 'auction' AND g.opened_at <= now() AND g.closes_at > now() \
             UNION SELECT job_id FROM opened), \
             placed AS (INSERT INTO bids (job_id, site, price, procs, bid_at) \
             SELECT b.job_id, $1, b.price, b.procs, now() FROM b JOIN live USING (job_id) \
             ON CONFLICT (job_id, site) DO UPDATE SET price = EXCLUDED.price, \
             procs = EXCLUDED.procs, bid_at = CASE WHEN bids.price = EXCLUDED.price \
             THEN bids.bid_at ELSE EXCLUDED.bid_at END RETURNING job_id), \
             withdrawn AS (DELETE FROM bids WHERE site = $1 AND job_id = ANY($7::bigint[])), \
             announced AS (SELECT pg_notify('{GLOBAL_CHANNEL}', 'opened') \
             WHERE EXISTS (SELECT 1 FROM opened)) \
             SELECT ARRAY(SELECT job_id FROM placed), (SELECT count(*) FROM announced)"
        );
        let (placed, _): (Vec<i64>, i64) = sqlx::query_as(&sql)
            .bind(self.site())
            .bind(&jobs)
            .bind(&prices)
            .bind(&procs)
            .bind(&open)
            .bind(duration_ms.max(0))
            .bind(&withdraw)
            .fetch_one(&self.pool)
            .await
            .map_err(self.db())?;
        Ok(placed.into_iter().map(|j| j as u64).collect())
    }

    /// The records of `jobs` as submitted, in one statement: those found, by id.
    pub async fn records(&self, jobs: &[u64]) -> Result<BTreeMap<u64, JobRecord>> {
        if jobs.is_empty() {
            return Ok(BTreeMap::new());
        }
        let ids: Vec<i64> = jobs.iter().map(|&j| j as i64).collect();
        let rows: Vec<(i64, String)> =
            sqlx::query_as("SELECT id, data FROM jobs WHERE id = ANY($1)")
                .bind(&ids)
                .fetch_all(&self.pool)
                .await
                .map_err(self.db())?;
        rows.into_iter()
            .map(|(id, data)| Ok((id as u64, job_row(id, &data)?)))
            .collect()
    }
}
