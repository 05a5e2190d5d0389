//! The shared global queue of peer dispatchers: rows in PostgreSQL that every site's
//! dispatcher reads and writes (`migrations/postgres/0003_dispatchers.sql` describes them).
//!
//! Every decision two dispatchers could race on is one statement or one transaction whose
//! `WHERE` clause says what must still hold, so that the database, not a process, decides:
//! - an auction is opened once (`state = 'queued'` → `'auction'`);
//! - a bid counts only while its auction is open (`closes_at > now()`);
//! - an auction is closed by exactly one dispatcher: the one that takes its row with
//!   `FOR UPDATE SKIP LOCKED` once due, and sets its one winner in that transaction (the
//!   winner chosen by `foresight_core::auction::close`, as in `sim auction`);
//! - a winner starts the job only with the claim epoch it was awarded, inside its lease, in
//!   the transaction that hands the job to its site ([`SharedQueue::start`]);
//! - a dispatcher whose lease ran out loses its claims and bids ([`SharedQueue::reclaim`]).
//!
//! Times are the database's clock (`now()`), never a process's.

use crate::{decode, encode, JobRecord, PgStore, Result, StoreError};
use foresight_core::auction::{Outcome, SiteId, StandingBid};
use foresight_core::time::Dur;
use sqlx::{PgPool, Row};
use std::collections::BTreeMap;

/// The job record stored in row `id` of `jobs`, under its row's id.
pub(crate) fn job_row(id: i64, data: &str) -> Result<JobRecord> {
    let mut r: JobRecord = decode("jobs", id.to_string(), data)?;
    r.id = id as u64;
    Ok(r)
}

/// The `LISTEN/NOTIFY` channel on which the queue announces changes (a job queued, an
/// auction opened or closed, a claim given back): dispatchers wake on it to bid or close.
pub const GLOBAL_CHANNEL: &str = "foresight_global";

/// Whether a job goes to the shared queue (no cluster and no reservation asked for).
pub fn is_global(j: &JobRecord) -> bool {
    j.cluster.is_none() && j.reservation.is_none()
}

/// A global job on offer: queued, or in an auction still open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueuedJob {
    /// The job.
    pub job: u64,
    /// Processors it needs.
    pub procs: u32,
    /// Its absolute priority level.
    pub priority: u32,
    /// Its auction is open (else it waits for one).
    pub in_auction: bool,
}

/// A job awarded to this site: valid only with its epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The job.
    pub job: u64,
    /// The claim epoch of the award.
    pub epoch: i64,
}

/// How one due auction ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Closed {
    /// Sold to `site`, the best of `bidders` live bids.
    Awarded {
        /// The job.
        job: u64,
        /// The winner.
        site: String,
        /// How many live sites had bid.
        bidders: u32,
    },
    /// No live bid at the opening price or above: queued again.
    Unsold {
        /// The job.
        job: u64,
    },
}

/// A due auction this dispatcher has locked ([`SharedQueue::due_auction`]): its job and live
/// bids as plain data, for the caller to close with `foresight_core::auction::close` (the
/// choice `sim auction` makes), and the transaction holding the lock, in which
/// [`DueAuction::settle`] applies the outcome. Dropped unsettled, it is rolled back and the
/// auction stays due.
pub struct DueAuction {
    tx: sqlx::Transaction<'static, sqlx::Postgres>,
    /// The database's name, for errors.
    name: String,
    /// The closing site, recorded as the opener of a reopened auction.
    closer: String,
    /// The job on sale.
    pub job: u64,
    /// The standing bids of sites whose lease holds (a dead site's bid does not count), by
    /// site id; `placed` is the microsecond the bid was placed at (a re-bid at the same
    /// price keeps it).
    pub bids: Vec<StandingBid>,
    /// The bidders' names by id.
    sites: BTreeMap<SiteId, String>,
}

impl std::fmt::Debug for DueAuction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DueAuction")
            .field("job", &self.job)
            .field("bids", &self.bids)
            .field("sites", &self.sites)
            .finish_non_exhaustive()
    }
}

/// A core duration (whole seconds) as the milliseconds the queue's SQL intervals take: the
/// one place the reopen delay changes unit.
fn millis(d: Dur) -> i64 {
    d.0.max(0).saturating_mul(1000)
}

/// An owner's request on a global job, from any dispatcher.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueOp {
    /// Never run it; stop it if its site started it.
    Cancel,
    /// Take it off sale until released.
    Hold,
    /// Put a held job on sale again.
    Release,
}

/// How a [`QueueOp`] went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpOutcome {
    /// Done in the queue (the job had not started anywhere); its record says so already.
    Done,
    /// The job was cancelled after `site` started it: that site's dispatcher stops it.
    Requested {
        /// The site running it.
        site: String,
    },
    /// Refused: why (the job's place in the queue says the request does not apply).
    Refused(String),
    /// The job is not in the global queue (a site's local job, or no such job).
    NotGlobal,
}

/// How a [`SharedQueue::start_holding`] went.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Start {
    /// Started: the job is this site's.
    Started,
    /// The claim no longer holds: someone else's to start (nothing changed).
    Void,
    /// Its user's budget has less left than the job may cost (nothing changed).
    OverBudget {
        /// What the budget has left.
        left: f64,
    },
}

/// The states of a global job that has not started and may still run: its worst case
/// counts against its user's budget.
const UNSTARTED: &str = "'queued', 'auction', 'claimed', 'held', 'over_budget', 'waiting'";

/// How a [`SharedQueue::submit`] went.
#[derive(Clone, Debug, PartialEq)]
pub enum Submitted {
    /// Stored: the jobs' ids, in order.
    Stored(Vec<u64>),
    /// Refused, nothing stored: the figures.
    OverBudget(OverBudget),
}

/// Why a submission's global jobs do not fit their user's budget.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OverBudget {
    /// What the submitted global jobs may cost at worst.
    pub worst: f64,
    /// How many global jobs were submitted.
    pub jobs: u32,
    /// The price they may pay per processor-second: the highest tariff of any site.
    pub price: f64,
    /// What the user's global jobs that have not started may cost at worst.
    pub queued: f64,
    /// How many those are.
    pub queued_jobs: u32,
    /// What the user's unfinished local jobs at the submitting site may still cost, beyond
    /// their holds.
    pub committed_here: f64,
    /// What the submitted local jobs may cost at worst: the holds they would take.
    pub local: f64,
    /// How many local jobs were submitted.
    pub local_jobs: u32,
    /// The budget left.
    pub left: f64,
}

/// Where a job stands, wherever it runs, as a dependency on it reads it
/// ([`SharedQueue::job_states`]).
#[derive(Clone, Debug, PartialEq)]
pub struct JobStanding {
    /// The job's id.
    pub id: u64,
    /// Its state, as its site last wrote it.
    pub state: String,
    /// Whether it has ever started.
    pub started: bool,
    /// The copy of its outputs back, written by the site that copies them: running while
    /// `ended_at` is `None`, failed when `error` is set (`None`: nothing to copy).
    pub output_staging: Option<crate::StagingRecord>,
}

/// A job as any dispatcher may show it, wherever it runs.
#[derive(Clone, Debug, PartialEq)]
pub struct SharedJob {
    /// Its record as last written by the site that owns it (or as submitted, while queued).
    pub record: JobRecord,
    /// The site that runs it, once started there.
    pub site: Option<String>,
    /// Its place in the global queue (`queued`, `auction`, `claimed`, `started`, `done`),
    /// for a global job.
    pub queue_state: Option<String>,
    /// The site that runs it is down (its dispatcher's lease lapsed): the record is the
    /// last the site wrote, and may no longer be true.
    pub site_down: bool,
    /// A site that won it gave it back to the auction, unable to start it at once
    /// ([`SharedQueue::give_back`]; its record's reason says why, in words for people).
    pub given_back: bool,
}

/// One site's door to the global queue.
#[derive(Clone, Debug)]
pub struct SharedQueue {
    pub(crate) pool: PgPool,
    pub(crate) name: String,
    site: String,
    lease_ms: i64,
}

/// A site is alive while this holds for its `dispatchers` row.
pub(crate) const ALIVE: &str = "d.heartbeat_at + d.lease_ms * interval '1 millisecond' > now()";

/// A job's site is down: a dispatcher row `d` joined on the job's site, not alive.
const SITE_DOWN: &str = "(d.site IS NOT NULL AND NOT \
                         (d.heartbeat_at + d.lease_ms * interval '1 millisecond' > now()))";

impl SharedQueue {
    /// The queue as `site` sees it, on `store`'s database; `lease_ms` is how long its
    /// claims outlive its last heartbeat.
    pub fn new(store: &PgStore, site: &str, lease_ms: u64) -> SharedQueue {
        SharedQueue {
            pool: store.pool().clone(),
            name: store.name().to_string(),
            site: site.to_string(),
            lease_ms: lease_ms as i64,
        }
    }

    /// This site's name.
    pub fn site(&self) -> &str {
        &self.site
    }

    pub(crate) fn db(&self) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
        move |source| StoreError::Database {
            path: self.name.clone(),
            source,
        }
    }

    /// Enters (or re-enters) this site's dispatcher, alive from now; `max_procs` is its
    /// largest cluster, `max_tariff` the highest base tariff of its clusters (per
    /// processor-second). Returns the site's id: given at its first registration (the next
    /// number) and kept, it breaks ties between equal bids (`tie = "lowest_site"`).
    pub async fn register(
        &self,
        pid: u32,
        url: &str,
        max_procs: u32,
        max_tariff: f64,
    ) -> Result<SiteId> {
        let mut tx = self.pool.begin().await.map_err(self.db())?;
        // Two sites registering for the first time at once must not take the same number.
        sqlx::query("LOCK TABLE dispatchers IN SHARE ROW EXCLUSIVE MODE")
            .execute(&mut *tx)
            .await
            .map_err(self.db())?;
        let id: i32 = sqlx::query_scalar(
            "INSERT INTO dispatchers (site, id, pid, url, heartbeat_at, lease_ms, started_at, \
             max_procs, max_tariff) VALUES ($1, (SELECT COALESCE(max(id) + 1, 0) FROM \
             dispatchers), $2, $3, now(), $4, now(), $5, $6) \
             ON CONFLICT (site) DO UPDATE \
             SET pid = EXCLUDED.pid, url = EXCLUDED.url, heartbeat_at = now(), \
             lease_ms = EXCLUDED.lease_ms, started_at = now(), max_procs = EXCLUDED.max_procs, \
             max_tariff = EXCLUDED.max_tariff RETURNING id",
        )
        .bind(&self.site)
        .bind(pid as i32)
        .bind(url)
        .bind(self.lease_ms)
        .bind(max_procs as i32)
        .bind(if max_tariff.is_finite() {
            max_tariff.max(0.0)
        } else {
            0.0
        })
        .fetch_one(&mut *tx)
        .await
        .map_err(self.db())?;
        tx.commit().await.map_err(self.db())?;
        Ok(SiteId(id as u32))
    }

    /// A connection listening on [`GLOBAL_CHANNEL`]; it reconnects by itself when the
    /// database goes away (notifications sent meanwhile are lost: poll as well).
    pub async fn listen(&self) -> Result<sqlx::postgres::PgListener> {
        let mut l = sqlx::postgres::PgListener::connect_with(&self.pool)
            .await
            .map_err(self.db())?;
        l.listen(GLOBAL_CHANNEL).await.map_err(self.db())?;
        Ok(l)
    }

    /// Global jobs this site started that have not ended yet.
    pub async fn started_here(&self) -> Result<Vec<u64>> {
        let ids: Vec<i64> = sqlx::query_scalar(
            "SELECT job_id FROM global_jobs WHERE state = 'started' AND site = $1",
        )
        .bind(&self.site)
        .fetch_all(&self.pool)
        .await
        .map_err(self.db())?;
        Ok(ids.into_iter().map(|j| j as u64).collect())
    }

    /// The largest cluster of any site that has run a dispatcher, processors: the most a
    /// global job may ask for.
    pub async fn largest_cluster(&self) -> Result<u32> {
        let max: Option<i32> = sqlx::query_scalar("SELECT max(max_procs) FROM dispatchers")
            .fetch_one(&self.pool)
            .await
            .map_err(self.db())?;
        Ok(max.unwrap_or(0).max(0) as u32)
    }

    /// Renews this site's lease.
    pub async fn heartbeat(&self) -> Result<()> {
        sqlx::query("UPDATE dispatchers SET heartbeat_at = now() WHERE site = $1")
            .bind(&self.site)
            .execute(&self.pool)
            .await
            .map_err(self.db())?;
        Ok(())
    }

    /// Gives back to the queue what dead sites held: their awarded but unstarted jobs (under
    /// a new epoch, so that their old claims are void) and their standing bids; and to their
    /// users the budget holds of their unfinished local jobs. Returns the jobs queued again.
    pub async fn reclaim(&self) -> Result<Vec<u64>> {
        let dead = format!("SELECT d.site FROM dispatchers d WHERE NOT ({ALIVE})");
        // Most rounds find every site alive: one look, and nothing to do.
        let any: bool = sqlx::query_scalar(&format!("SELECT EXISTS ({dead})"))
            .fetch_one(&self.pool)
            .await
            .map_err(self.db())?;
        if !any {
            return Ok(Vec::new());
        }
        let mut tx = self.pool.begin().await.map_err(self.db())?;
        let jobs: Vec<i64> = sqlx::query_scalar(&format!(
            "UPDATE global_jobs SET state = 'queued', site = NULL, epoch = epoch + 1, \
             claimed_at = NULL WHERE state = 'claimed' AND site IN ({dead}) RETURNING job_id"
        ))
        .fetch_all(&mut *tx)
        .await
        .map_err(self.db())?;
        sqlx::query(&format!("DELETE FROM bids WHERE site IN ({dead})"))
            .execute(&mut *tx)
            .await
            .map_err(self.db())?;
        if !jobs.is_empty() {
            notify(&mut tx, "reclaimed").await.map_err(self.db())?;
        }
        // The holds of dead sites' unfinished local jobs go back to their users: a site
        // that never returns must not keep them forever. Its jobs' records, locked as its
        // own writes lock them, carry the hold no more: if it returns, they are charged as
        // they stop, without a hold.
        let held: Vec<(i64, String)> = sqlx::query_as(&format!(
            "SELECT id, data FROM jobs WHERE site IN ({dead}) AND state NOT IN \
             ('completed', 'failed', 'cancelled', 'timeout') \
             AND data LIKE '%\"budget_hold\":%' ORDER BY id FOR UPDATE"
        ))
        .fetch_all(&mut *tx)
        .await
        .map_err(self.db())?;
        for (id, data) in held {
            let mut j: JobRecord = decode("jobs", id.to_string(), &data)?;
            if j.budget_hold <= 0.0 || !j.budget_hold.is_finite() {
                continue;
            }
            crate::shared_budget::take(&mut tx, &j.user, -j.budget_hold, false)
                .await
                .map_err(|e| e.at(&self.name))?
                .ok();
            j.budget_hold = 0.0;
            sqlx::query("UPDATE jobs SET data = $2 WHERE id = $1")
                .bind(id)
                .bind(encode(&j))
                .execute(&mut *tx)
                .await
                .map_err(self.db())?;
        }
        tx.commit().await.map_err(self.db())?;
        Ok(jobs.into_iter().map(|j| j as u64).collect())
    }

    /// Stores a submission of `user` (global jobs into the queue, local ones as this site's),
    /// all or none, unless it does not fit the user's budget: what its global jobs may cost
    /// at worst (processors × walltime × the highest tariff of any site), with the worst
    /// cases of the user's global jobs that have not started (queued, in auction, awarded,
    /// held, waiting for dependencies or budget) and `committed_here` (what the user's
    /// unfinished local jobs at this site may still cost beyond their holds), plus the holds
    /// of its local jobs ([`JobRecord::budget_hold`], taken here as they are stored), must
    /// not exceed what the budget has left. The
    /// check and the insert are one transaction holding the user's budget lock, so two
    /// sites cannot both admit the last of one budget.
    pub async fn submit(
        &self,
        user: &str,
        jobs: &[JobRecord],
        committed_here: f64,
    ) -> Result<Submitted> {
        Ok(match self.admit(user, Jobs, jobs, committed_here).await? {
            Ok(ids) => Submitted::Stored(ids),
            Err(o) => Submitted::OverBudget(o),
        })
    }

    /// Stores a workflow of `user` submitted at this site with its task jobs (this site's
    /// local jobs), all or none, checked against the budget as [`SharedQueue::submit`]
    /// checks a submission: each task's hold ([`JobRecord::budget_hold`]) is taken in the
    /// same transaction. Returns the workflow's id and its jobs' ids, in task order.
    pub async fn submit_workflow(
        &self,
        user: &str,
        wf: &crate::WorkflowRecord,
        jobs: &[JobRecord],
        committed_here: f64,
    ) -> Result<std::result::Result<(u64, Vec<u64>), OverBudget>> {
        self.admit(user, wf, jobs, committed_here).await
    }

    /// The body of [`SharedQueue::submit`] and [`SharedQueue::submit_workflow`]: in one
    /// transaction, checks `jobs` against `user`'s budget, stores them as `what` says, and
    /// takes their holds; `Err` (nothing stored) when they do not fit.
    async fn admit<W: Insert>(
        &self,
        user: &str,
        what: W,
        jobs: &[JobRecord],
        committed_here: f64,
    ) -> Result<std::result::Result<W::Stored, OverBudget>> {
        let mut tx = self.pool.begin().await.map_err(self.db())?;
        if let Some(o) = self
            .over_budget_in(&mut tx, user, jobs, committed_here)
            .await?
        {
            return Ok(Err(o));
        }
        let stored = what
            .insert(&mut tx, &self.site, jobs)
            .await
            .map_err(self.db())?;
        crate::shared_budget::take_holds(&mut tx, jobs)
            .await
            .map_err(|e| e.at(&self.name))?;
        tx.commit().await.map_err(self.db())?;
        Ok(Ok(stored))
    }

    /// Inside `tx`, takes `user`'s budget lock and says how `jobs` would overspend
    /// their budget (`None`: they fit, or it is unlimited); see [`SharedQueue::submit`].
    async fn over_budget_in(
        &self,
        tx: &mut sqlx::PgConnection,
        user: &str,
        jobs: &[JobRecord],
        committed_here: f64,
    ) -> Result<Option<OverBudget>> {
        crate::shared_budget::lock(&mut *tx, user)
            .await
            .map_err(self.db())?;
        let budget = crate::shared_budget::current(&mut *tx, user)
            .await
            .map_err(|e| e.at(&self.name))?
            .and_then(|u| u.budget);
        let Some(left) = budget else {
            return Ok(None);
        };
        let global: Vec<&JobRecord> = jobs.iter().filter(|j| is_global(j)).collect();
        // Local jobs with holds: every site's accepted local jobs are in the budget as
        // their holds, so these must fit what the others left.
        let held: Vec<&JobRecord> = jobs
            .iter()
            .filter(|j| !is_global(j) && j.budget_hold > 0.0)
            .collect();
        let local: f64 = held.iter().map(|j| j.budget_hold).sum();
        let price: f64 =
            sqlx::query_scalar("SELECT COALESCE(max(max_tariff), 0)::float8 FROM dispatchers")
                .fetch_one(&mut *tx)
                .await
                .map_err(self.db())?;
        let worst: f64 = global
            .iter()
            .map(|j| f64::from(j.procs) * j.walltime.max(0) as f64 * price)
            .sum();
        let (queued, queued_jobs): (f64, i64) = sqlx::query_as(&format!(
            "SELECT COALESCE(sum(g.worst_case), 0)::float8, count(*) FROM global_jobs g \
             JOIN jobs j ON j.id = g.job_id WHERE j.user_name = $1 AND g.state IN ({UNSTARTED})"
        ))
        .bind(user)
        .fetch_one(&mut *tx)
        .await
        .map_err(self.db())?;
        let committed_here = if committed_here.is_finite() {
            committed_here.max(0.0)
        } else {
            0.0
        };
        if worst + local + queued + committed_here > left {
            return Ok(Some(OverBudget {
                worst,
                jobs: global.len() as u32,
                price,
                queued,
                queued_jobs: queued_jobs as u32,
                committed_here,
                local,
                local_jobs: held.len() as u32,
                left,
            }));
        }
        Ok(None)
    }

    /// The jobs a dependency on `job` names (`task`: task `task` of array job `job`),
    /// wherever they are, among those `user` may see (`None`: an administrator, anyone's):
    /// an array job's id names all its tasks, any other id that job.
    pub async fn resolve(
        &self,
        user: Option<&str>,
        job: u64,
        task: Option<u32>,
    ) -> Result<Vec<u64>> {
        let ids: Vec<i64> = sqlx::query_scalar(
            "SELECT id FROM jobs WHERE ($2::text IS NULL OR user_name = $2) AND CASE \
             WHEN $3::bigint IS NULL THEN id = $1 \
             OR (data::jsonb #>> '{links,array,job}')::bigint = $1 \
             ELSE (data::jsonb #>> '{links,array,job}')::bigint = $1 \
             AND (data::jsonb #>> '{links,array,task}')::bigint = $3 END ORDER BY id",
        )
        .bind(job as i64)
        .bind(user)
        .bind(task.map(i64::from))
        .fetch_all(&self.pool)
        .await
        .map_err(self.db())?;
        Ok(ids.into_iter().map(|j| j as u64).collect())
    }

    /// Global jobs waiting for their dependencies, oldest first, with their records.
    pub async fn waiting(&self) -> Result<Vec<JobRecord>> {
        let rows: Vec<(i64, String)> = sqlx::query_as(
            "SELECT g.job_id, j.data FROM global_jobs g JOIN jobs j ON j.id = g.job_id \
             WHERE g.state = 'waiting' ORDER BY g.job_id",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(self.db())?;
        rows.into_iter()
            .map(|(id, data)| job_row(id, &data))
            .collect()
    }

    /// Where jobs stand, wherever they run: each id found with its state as its site last
    /// wrote it, whether it has started (a dependency `after` holds then), and the copy of
    /// its outputs as the site that copies them last wrote it (a dependant waits for it).
    pub async fn job_states(&self, ids: &[u64]) -> Result<Vec<JobStanding>> {
        let ids: Vec<i64> = ids.iter().map(|&j| j as i64).collect();
        let rows: Vec<(i64, String, bool, Option<String>)> = sqlx::query_as(
            "SELECT j.id, j.state, (j.data::jsonb ->> 'started_at') IS NOT NULL \
             OR COALESCE((j.data::jsonb ->> 'attempt')::bigint, 0) > 0 \
             OR COALESCE(g.state IN ('started', 'done'), false), \
             j.data::jsonb ->> 'output_staging' \
             FROM jobs j LEFT JOIN global_jobs g ON g.job_id = j.id WHERE j.id = ANY($1)",
        )
        .bind(&ids)
        .fetch_all(&self.pool)
        .await
        .map_err(self.db())?;
        rows.into_iter()
            .map(|(id, state, started, copy)| {
                let output_staging = copy
                    .map(|c| decode("jobs", format!("{id} output_staging"), &c))
                    .transpose()?;
                Ok(JobStanding {
                    id: id as u64,
                    state,
                    started,
                    output_staging,
                })
            })
            .collect()
    }

    /// Puts a job whose dependencies hold on sale. Returns whether it was still waiting.
    pub async fn dependencies_met(&self, job: u64) -> Result<bool> {
        let mut tx = self.pool.begin().await.map_err(self.db())?;
        let done = sqlx::query(
            "UPDATE global_jobs SET state = 'queued' WHERE job_id = $1 AND state = 'waiting'",
        )
        .bind(job as i64)
        .execute(&mut *tx)
        .await
        .map_err(self.db())?
        .rows_affected()
            == 1;
        if done {
            notify(&mut tx, "dependencies met")
                .await
                .map_err(self.db())?;
        }
        tx.commit().await.map_err(self.db())?;
        Ok(done)
    }

    /// Cancels a waiting job whose dependencies can never hold, saying why (`now`: Unix
    /// seconds). Returns whether it was still waiting.
    pub async fn dependencies_never(&self, job: u64, reason: &str, now: i64) -> Result<bool> {
        let mut tx = self.pool.begin().await.map_err(self.db())?;
        let data: Option<String> = sqlx::query_scalar(
            "SELECT j.data FROM global_jobs g JOIN jobs j ON j.id = g.job_id \
             WHERE g.job_id = $1 AND g.state = 'waiting' FOR UPDATE",
        )
        .bind(job as i64)
        .fetch_optional(&mut *tx)
        .await
        .map_err(self.db())?;
        let Some(data) = data else {
            return Ok(false);
        };
        let mut record: JobRecord = decode("jobs", job.to_string(), &data)?;
        record.state = crate::JobState::Cancelled;
        record.ended_at = Some(now);
        record.reason = Some(reason.to_string());
        sqlx::query(
            "UPDATE global_jobs SET state = 'cancelled', ended_at = now() WHERE job_id = $1",
        )
        .bind(job as i64)
        .execute(&mut *tx)
        .await
        .map_err(self.db())?;
        write_job_row(&mut tx, job, &record)
            .await
            .map_err(self.db())?;
        notify(&mut tx, "cancelled").await.map_err(self.db())?;
        tx.commit().await.map_err(self.db())?;
        Ok(true)
    }

    /// Jobs on offer, highest priority first, then oldest: queued ones and those whose
    /// auction is still open.
    pub async fn on_offer(&self, limit: u32) -> Result<Vec<QueuedJob>> {
        let rows = sqlx::query(
            "SELECT job_id, procs, priority, state FROM global_jobs \
             WHERE state = 'queued' OR (state = 'auction' AND opened_at <= now() \
             AND closes_at > now()) \
             ORDER BY priority DESC, job_id LIMIT $1",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(self.db())?;
        Ok(rows
            .iter()
            .map(|r| QueuedJob {
                job: r.get::<i64, _>(0) as u64,
                procs: r.get::<i32, _>(1) as u32,
                priority: r.get::<i32, _>(2) as u32,
                in_auction: r.get::<String, _>(3) == "auction",
            })
            .collect())
    }

    /// Opens `job`'s auction, to close `duration_ms` from now, unless it is no longer queued
    /// (someone else opened it first: then bid in theirs). Returns whether this site opened it.
    pub async fn open(&self, job: u64, duration_ms: i64) -> Result<bool> {
        // One statement: the opening and its announcement (made only if it opened).
        let opened = sqlx::query(&format!(
            "WITH opened AS (UPDATE global_jobs SET state = 'auction', opened_by = $2, \
             opened_at = now(), closes_at = now() + $3 * interval '1 millisecond', \
             auctions = auctions + 1 WHERE job_id = $1 AND state = 'queued' RETURNING job_id) \
             SELECT pg_notify('{GLOBAL_CHANNEL}', 'opened') FROM opened"
        ))
        .bind(job as i64)
        .bind(&self.site)
        .bind(duration_ms.max(0))
        .fetch_optional(&self.pool)
        .await
        .map_err(self.db())?
        .is_some();
        Ok(opened)
    }

    /// Places or replaces this site's bid in `job`'s auction, if it is still open. Returns
    /// whether the bid stands.
    pub async fn bid(&self, job: u64, price: f64, procs: u32) -> Result<bool> {
        let placed = sqlx::query(
            "INSERT INTO bids (job_id, site, price, procs, bid_at) \
             SELECT $1, $2, $3, $4, now() FROM global_jobs \
             WHERE job_id = $1 AND state = 'auction' AND opened_at <= now() AND closes_at > now() \
             ON CONFLICT (job_id, site) DO UPDATE SET price = EXCLUDED.price, \
             procs = EXCLUDED.procs, bid_at = CASE WHEN bids.price = EXCLUDED.price \
             THEN bids.bid_at ELSE EXCLUDED.bid_at END",
        )
        .bind(job as i64)
        .bind(&self.site)
        .bind(price)
        .bind(procs as i32)
        .execute(&self.pool)
        .await
        .map_err(self.db())?
        .rows_affected();
        Ok(placed == 1)
    }

    /// Withdraws this site's bid from `job`'s auction (it can no longer run the job now).
    pub async fn withdraw(&self, job: u64) -> Result<()> {
        sqlx::query("DELETE FROM bids WHERE job_id = $1 AND site = $2")
            .bind(job as i64)
            .bind(&self.site)
            .execute(&self.pool)
            .await
            .map_err(self.db())?;
        Ok(())
    }

    /// This site's standing bids in open auctions: job and processors needed, so that the
    /// same processors are not offered twice.
    pub async fn standing_bids(&self) -> Result<Vec<(u64, u32)>> {
        let rows = sqlx::query(
            "SELECT g.job_id, g.procs FROM bids b JOIN global_jobs g ON g.job_id = b.job_id \
             WHERE b.site = $1 AND g.state = 'auction' ORDER BY g.job_id",
        )
        .bind(&self.site)
        .fetch_all(&self.pool)
        .await
        .map_err(self.db())?;
        Ok(rows
            .iter()
            .map(|r| (r.get::<i64, _>(0) as u64, r.get::<i32, _>(1) as u32))
            .collect())
    }

    /// The earliest close of an open auction, as milliseconds from now (0 if one is due).
    pub async fn next_close_ms(&self) -> Result<Option<i64>> {
        let ms: Option<f64> = sqlx::query_scalar(
            "SELECT EXTRACT(EPOCH FROM (min(closes_at) - now()))::float8 * 1000 \
             FROM global_jobs WHERE state = 'auction'",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(self.db())?;
        Ok(ms.map(|m| m.max(0.0).ceil() as i64))
    }

    /// Takes one due auction, if any is due and not being closed by another dispatcher: its
    /// row with `FOR UPDATE SKIP LOCKED`, read with its live bids in the same statement (no
    /// bid can be placed in an auction once it is due), in a transaction the returned
    /// [`DueAuction`] holds until it is settled. `None`: nothing left to close.
    pub async fn due_auction(&self) -> Result<Option<DueAuction>> {
        // Most looks find nothing due: one statement then, not a transaction of three.
        let any: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM global_jobs WHERE state = 'auction' \
             AND closes_at <= now())",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(self.db())?;
        if !any {
            return Ok(None);
        }
        let mut tx = self.pool.begin().await.map_err(self.db())?;
        let rows = sqlx::query(&format!(
            "WITH due AS (SELECT job_id FROM global_jobs WHERE state = 'auction' \
             AND closes_at <= now() ORDER BY closes_at, job_id LIMIT 1 FOR UPDATE SKIP LOCKED) \
             SELECT due.job_id, l.site, l.id, l.price, l.placed FROM due LEFT JOIN \
             (SELECT b.job_id, b.site, d.id, b.price, \
             (EXTRACT(EPOCH FROM b.bid_at) * 1000000)::bigint AS placed \
             FROM bids b JOIN dispatchers d ON d.site = b.site WHERE {ALIVE}) l \
             ON l.job_id = due.job_id ORDER BY l.id"
        ))
        .fetch_all(&mut *tx)
        .await
        .map_err(self.db())?;
        let Some(job) = rows.first().map(|r| r.get::<i64, _>(0)) else {
            return Ok(None);
        };
        let rows: Vec<_> = rows
            .into_iter()
            .filter(|r| r.get::<Option<i32>, _>(2).is_some())
            .collect();
        let mut bids = Vec::with_capacity(rows.len());
        let mut sites = BTreeMap::new();
        for r in &rows {
            let site = SiteId(r.get::<i32, _>(2) as u32);
            bids.push(StandingBid {
                site,
                amount: r.get(3),
                placed: r.get::<i64, _>(4).max(0) as u64,
            });
            sites.insert(site, r.get::<String, _>(1));
        }
        Ok(Some(DueAuction {
            tx,
            name: self.name.clone(),
            closer: self.site.clone(),
            job: job as u64,
            bids,
            sites,
        }))
    }

    /// Jobs awarded to this site and not yet started, with their epochs.
    pub async fn claims(&self) -> Result<Vec<Claim>> {
        let rows = sqlx::query(
            "SELECT job_id, epoch FROM global_jobs WHERE state = 'claimed' AND site = $1 \
             ORDER BY priority DESC, job_id",
        )
        .bind(&self.site)
        .fetch_all(&self.pool)
        .await
        .map_err(self.db())?;
        Ok(rows
            .iter()
            .map(|r| Claim {
                job: r.get::<i64, _>(0) as u64,
                epoch: r.get(1),
            })
            .collect())
    }

    /// The record of a claimed job, as submitted.
    pub async fn record(&self, job: u64) -> Result<Option<JobRecord>> {
        let data: Option<String> = sqlx::query_scalar("SELECT data FROM jobs WHERE id = $1")
            .bind(job as i64)
            .fetch_optional(&self.pool)
            .await
            .map_err(self.db())?;
        data.map(|d| {
            let mut r: JobRecord = decode("jobs", job.to_string(), &d)?;
            r.id = job;
            Ok(r)
        })
        .transpose()
    }

    /// Starts a claimed job at this site: in one transaction, checks that the claim still
    /// holds (this site, this epoch, not started, and this site's lease not run out), marks
    /// it started and makes `record` (placed on one of the site's clusters) the site's job.
    /// Returns `false`, changing nothing, when the claim is void: the job is someone
    /// else's to start.
    pub async fn start(&self, claim: Claim, record: &JobRecord) -> Result<bool> {
        Ok(self.start_holding(claim, record, 0.0).await? == Start::Started)
    }

    /// [`SharedQueue::start`], also taking `hold` (the most the job may cost here) from its
    /// user's budget in the same transaction, refused if less is left. The hold pays the
    /// job's charges as they are written with its record; when it ends, what it was charged
    /// is settled against the hold and the rest goes back ([`SharedQueue::finished`]).
    pub async fn start_holding(
        &self,
        claim: Claim,
        record: &JobRecord,
        hold: f64,
    ) -> Result<Start> {
        let claimed = format!(
            "UPDATE global_jobs SET state = 'started', started_at = now() \
             WHERE job_id = $1 AND site = $2 AND epoch = $3 AND state = 'claimed' \
             AND EXISTS (SELECT 1 FROM dispatchers d WHERE d.site = $2 AND {ALIVE}) \
             RETURNING job_id"
        );
        let hold = if hold.is_finite() { hold.max(0.0) } else { 0.0 };
        if hold <= 0.0 {
            // Nothing to check: the claim, the hand-over and the bids dropped in one
            // statement, one round trip.
            let started: i64 = sqlx::query_scalar(&format!(
                "WITH started AS ({claimed}), handed AS (UPDATE jobs SET site = $2, \
                 state = $4, data = $5 WHERE id IN (SELECT job_id FROM started)), \
                 dropped AS (DELETE FROM bids WHERE job_id IN (SELECT job_id FROM started)) \
                 SELECT count(*) FROM started"
            ))
            .bind(claim.job as i64)
            .bind(&self.site)
            .bind(claim.epoch)
            .bind(record.state_column())
            .bind(encode(record))
            .fetch_one(&self.pool)
            .await
            .map_err(self.db())?;
            return Ok(if started == 1 {
                Start::Started
            } else {
                Start::Void
            });
        }
        let mut tx = self.pool.begin().await.map_err(self.db())?;
        let valid = sqlx::query(&claimed)
            .bind(claim.job as i64)
            .bind(&self.site)
            .bind(claim.epoch)
            .fetch_optional(&mut *tx)
            .await
            .map_err(self.db())?
            .is_some();
        if !valid {
            return Ok(Start::Void);
        }
        let taken = crate::shared_budget::take(&mut tx, &record.user, hold, true)
            .await
            .map_err(|e| e.at(&self.name))?;
        if let Err(left) = taken {
            return Ok(Start::OverBudget { left });
        }
        sqlx::query(
            "WITH held AS (UPDATE global_jobs SET budget_hold = $2 WHERE job_id = $1), \
             handed AS (UPDATE jobs SET site = $3, state = $4, data = $5 WHERE id = $1) \
             DELETE FROM bids WHERE job_id = $1",
        )
        .bind(claim.job as i64)
        .bind(hold)
        .bind(&self.site)
        .bind(record.state_column())
        .bind(encode(record))
        .execute(&mut *tx)
        .await
        .map_err(self.db())?;
        tx.commit().await.map_err(self.db())?;
        Ok(Start::Started)
    }

    /// Takes an award this site cannot start off sale, its user's budget being short: it
    /// needs `needs` here, the budget has `left`. Its claim is void (new epoch) and its
    /// record's reason says so; it waits, not auctioned, until its user's budget changes or
    /// a hold comes back ([`SharedQueue::change_budget`], [`SharedQueue::finished`]), then
    /// goes back on sale. Returns whether the claim still held.
    pub async fn over_budget(&self, claim: Claim, needs: f64, left: f64) -> Result<bool> {
        let mut tx = self.pool.begin().await.map_err(self.db())?;
        let done = sqlx::query(
            "UPDATE global_jobs SET state = 'over_budget', site = NULL, epoch = epoch + 1, \
             claimed_at = NULL, closes_at = NULL, opened_at = NULL, needs = $4 \
             WHERE job_id = $1 AND site = $2 AND epoch = $3 AND state = 'claimed'",
        )
        .bind(claim.job as i64)
        .bind(&self.site)
        .bind(claim.epoch)
        .bind(needs)
        .execute(&mut *tx)
        .await
        .map_err(self.db())?
        .rows_affected()
            == 1;
        if done {
            let why = format!(
                "over budget: needs {needs:.2} (its worst case at site {}), has {left:.2}; \
                 waits off sale until its user's budget changes or a running job's hold comes \
                 back",
                self.site
            );
            set_reason(&mut tx, claim.job, Some(why))
                .await
                .map_err(|e| e.at(&self.name))?;
        }
        tx.commit().await.map_err(self.db())?;
        Ok(done)
    }

    /// Gives an award this site cannot start (its user's budget is short) back to the
    /// queue, under a new epoch; the job is auctioned again.
    pub async fn unclaim(&self, claim: Claim) -> Result<bool> {
        self.requeue_claim(claim, None).await
    }

    /// Gives back to the auction an award this site cannot start at once (a bid is a
    /// promise: the winner starts the job at once or gives it back at once): as
    /// [`unclaim`](Self::unclaim), and the job's record says why (`why`, naming this site).
    /// Returns whether the claim still held.
    pub async fn give_back(&self, claim: Claim, why: &str) -> Result<bool> {
        self.requeue_claim(claim, Some(why)).await
    }

    /// Queues a claimed job again under a new epoch, so that the claim is void and any site
    /// may win it; with a reason (a give-back) its record says why, its row that it was
    /// given back ([`SharedJob::given_back`]), and its last auction's opening is forgotten.
    /// Returns whether the claim still held.
    async fn requeue_claim(&self, claim: Claim, why: Option<&str>) -> Result<bool> {
        let mut tx = self.pool.begin().await.map_err(self.db())?;
        let done = sqlx::query(
            "UPDATE global_jobs SET state = 'queued', site = NULL, epoch = epoch + 1, \
             claimed_at = NULL, closes_at = NULL, \
             opened_at = CASE WHEN $4 THEN NULL ELSE opened_at END, \
             given_back = given_back OR $4 \
             WHERE job_id = $1 AND site = $2 AND epoch = $3 AND state = 'claimed'",
        )
        .bind(claim.job as i64)
        .bind(&self.site)
        .bind(claim.epoch)
        .bind(why.is_some())
        .execute(&mut *tx)
        .await
        .map_err(self.db())?
        .rows_affected()
            == 1;
        if done {
            if let Some(why) = why {
                set_reason(&mut tx, claim.job, Some(why.to_string()))
                    .await
                    .map_err(|e| e.at(&self.name))?;
            }
            let event = if why.is_some() {
                "given back"
            } else {
                "unclaimed"
            };
            notify(&mut tx, event).await.map_err(self.db())?;
        }
        tx.commit().await.map_err(self.db())?;
        Ok(done)
    }

    /// Records that a job this site started has ended after `runtime_s` seconds (the
    /// auctions' mean runtime is taken over these; `None`: it never ran).
    /// The job's charge is settled against the budget held when it started, in the same
    /// transaction: what the hold holds beyond what the job was charged goes back to its
    /// user ([`crate::budget_taken`]; a charge written later is settled as it comes).
    pub async fn finished(&self, job: u64, runtime_s: Option<f64>) -> Result<()> {
        let mut tx = self.pool.begin().await.map_err(self.db())?;
        // The record's row first, as `update_jobs` takes it: its charge is the last written
        // while the hold still covered it.
        let data: Option<String> =
            sqlx::query_scalar("SELECT data FROM jobs WHERE id = $1 FOR UPDATE")
                .bind(job as i64)
                .fetch_optional(&mut *tx)
                .await
                .map_err(self.db())?;
        let held: Option<(f64, String)> = sqlx::query_as(
            "UPDATE global_jobs g SET state = 'done', ended_at = now(), runtime_s = $3 \
             FROM jobs j WHERE g.job_id = $1 AND g.site = $2 AND g.state = 'started' \
             AND j.id = g.job_id RETURNING g.budget_hold, j.user_name",
        )
        .bind(job as i64)
        .bind(&self.site)
        .bind(runtime_s)
        .fetch_optional(&mut *tx)
        .await
        .map_err(self.db())?;
        if let Some((hold, user)) = held.filter(|(h, _)| *h > 0.0) {
            let charged = match data {
                Some(d) => decode::<JobRecord>("jobs", job.to_string(), &d)?.charged,
                None => 0.0,
            };
            let back = crate::budget_taken(charged, hold, false)
                - crate::budget_taken(charged, hold, true);
            crate::shared_budget::take(&mut tx, &user, -back, false)
                .await
                .map_err(|e| e.at(&self.name))?
                .ok();
            // What waited for budget may fit now.
            back_on_sale(&mut tx, &user)
                .await
                .map_err(|e| e.at(&self.name))?;
        }
        tx.commit().await.map_err(self.db())?;
        Ok(())
    }

    /// Runtimes of the `n` global jobs that ended last, latest first, seconds.
    pub async fn recent_runtimes(&self, n: u32) -> Result<Vec<f64>> {
        sqlx::query_scalar(
            "SELECT runtime_s FROM global_jobs WHERE state = 'done' AND runtime_s IS NOT NULL \
             ORDER BY ended_at DESC LIMIT $1",
        )
        .bind(i64::from(n))
        .fetch_all(&self.pool)
        .await
        .map_err(self.db())
    }

    /// Applies an owner's request to a global job, whichever site asks: in one transaction
    /// that takes the job's queue row with `FOR UPDATE`, so that it is ordered with the
    /// award and the start. A job not yet started (queued, in auction, awarded, held) is
    /// cancelled or held in the queue: its auction ends, its bids go, its claim is void
    /// (new epoch) and its record says so (`now`: Unix seconds, its end time if cancelled).
    /// A job its site already started can only be cancelled, by asking that site.
    pub async fn apply(&self, job: u64, op: QueueOp, now: i64) -> Result<OpOutcome> {
        self.apply_saying(job, op, now, "cancelled").await
    }

    /// Cancels the global jobs of these users (disabled, at any site) that have not
    /// started, as [`SharedQueue::apply`] cancels one, each record giving the reason;
    /// jobs already started run on. Any dispatcher may do it: a job is cancelled once.
    /// Returns the jobs cancelled.
    pub async fn cancel_unstarted_of(&self, users: &[String], now: i64) -> Result<Vec<u64>> {
        if users.is_empty() {
            return Ok(Vec::new());
        }
        let jobs: Vec<(i64, String)> = sqlx::query_as(&format!(
            "SELECT g.job_id, j.user_name FROM global_jobs g JOIN jobs j ON j.id = g.job_id \
             WHERE j.user_name = ANY($1) AND g.state IN ({UNSTARTED}) ORDER BY g.job_id"
        ))
        .bind(users)
        .fetch_all(&self.pool)
        .await
        .map_err(self.db())?;
        let mut cancelled = Vec::new();
        for (job, user) in jobs {
            let why = format!("cancelled: user {user:?} was disabled");
            if self
                .apply_saying(job as u64, QueueOp::Cancel, now, &why)
                .await?
                == OpOutcome::Done
            {
                cancelled.push(job as u64);
            }
        }
        Ok(cancelled)
    }

    /// [`SharedQueue::apply`], a cancelled record giving `why` as its reason.
    async fn apply_saying(&self, job: u64, op: QueueOp, now: i64, why: &str) -> Result<OpOutcome> {
        let mut tx = self.pool.begin().await.map_err(self.db())?;
        let row = sqlx::query(
            "SELECT g.state, g.site, j.data FROM global_jobs g JOIN jobs j ON j.id = g.job_id \
             WHERE g.job_id = $1 FOR UPDATE",
        )
        .bind(job as i64)
        .fetch_optional(&mut *tx)
        .await
        .map_err(self.db())?;
        let Some(row) = row else {
            return Ok(OpOutcome::NotGlobal);
        };
        let state: String = row.get(0);
        let site: Option<String> = row.get(1);
        let mut record: JobRecord = decode("jobs", job.to_string(), &row.get::<String, _>(2))?;
        record.id = job;
        let unstarted = matches!(
            state.as_str(),
            "queued" | "auction" | "claimed" | "over_budget" | "waiting"
        );
        // Released, a job with dependencies waits for them again.
        let released = if record
            .links
            .as_ref()
            .is_some_and(|l| l.dependency.is_some())
        {
            "waiting"
        } else {
            "queued"
        };
        let (new_state, refused) = match (op, state.as_str()) {
            (QueueOp::Cancel, "held") => ("cancelled", None),
            (QueueOp::Cancel, _) if unstarted => ("cancelled", None),
            (QueueOp::Hold, _) if unstarted => ("held", None),
            (QueueOp::Release, "held") => (released, None),
            (QueueOp::Cancel, "started") => {
                let site = site.unwrap_or_default();
                sqlx::query("UPDATE global_jobs SET cancel_requested = true WHERE job_id = $1")
                    .bind(job as i64)
                    .execute(&mut *tx)
                    .await
                    .map_err(self.db())?;
                notify(&mut tx, "cancel").await.map_err(self.db())?;
                tx.commit().await.map_err(self.db())?;
                return Ok(OpOutcome::Requested { site });
            }
            (QueueOp::Hold, "held") => ("", Some(format!("job {job} is already held"))),
            (QueueOp::Release, s) if s != "started" => ("", Some(format!("job {job} is not held"))),
            (_, "started") => (
                "",
                Some(format!(
                    "job {job} has started at site {}: only jobs that have not started can be \
                     held or released from another site (ask that site's dispatcher)",
                    site.unwrap_or_default()
                )),
            ),
            (_, s) => (
                "",
                Some(format!(
                    "job {job} has ended ({})",
                    if s == "done" { "ran" } else { s }
                )),
            ),
        };
        if let Some(why) = refused {
            return Ok(OpOutcome::Refused(why));
        }
        match new_state {
            "cancelled" => {
                record.state = crate::JobState::Cancelled;
                record.held = false;
                record.ended_at = Some(now);
                record.reason = Some(why.to_string());
            }
            "held" => {
                record.held = true;
                record.reason = Some("held".into());
            }
            _ => {
                record.held = false;
                record.reason = None;
            }
        }
        sqlx::query(
            "UPDATE global_jobs SET state = $2, site = NULL, epoch = epoch + 1, \
             claimed_at = NULL, closes_at = NULL, opened_at = NULL, \
             ended_at = CASE WHEN $2 = 'cancelled' THEN now() ELSE NULL END \
             WHERE job_id = $1",
        )
        .bind(job as i64)
        .bind(new_state)
        .execute(&mut *tx)
        .await
        .map_err(self.db())?;
        sqlx::query("DELETE FROM bids WHERE job_id = $1")
            .bind(job as i64)
            .execute(&mut *tx)
            .await
            .map_err(self.db())?;
        write_job_row(&mut tx, job, &record)
            .await
            .map_err(self.db())?;
        notify(&mut tx, new_state).await.map_err(self.db())?;
        tx.commit().await.map_err(self.db())?;
        Ok(OpOutcome::Done)
    }

    /// Jobs this site started that their owners have since cancelled: this site stops them
    /// and then calls [`SharedQueue::cancel_applied`].
    pub async fn cancel_requests(&self) -> Result<Vec<u64>> {
        let ids: Vec<i64> = sqlx::query_scalar(
            "SELECT job_id FROM global_jobs WHERE site = $1 AND cancel_requested \
             ORDER BY job_id",
        )
        .bind(&self.site)
        .fetch_all(&self.pool)
        .await
        .map_err(self.db())?;
        Ok(ids.into_iter().map(|j| j as u64).collect())
    }

    /// This site has stopped `job` as its owner asked.
    pub async fn cancel_applied(&self, job: u64) -> Result<()> {
        sqlx::query(
            "UPDATE global_jobs SET cancel_requested = false WHERE job_id = $1 AND site = $2",
        )
        .bind(job as i64)
        .bind(&self.site)
        .execute(&self.pool)
        .await
        .map_err(self.db())?;
        Ok(())
    }

    /// The newest `limit` jobs (of `user`, or everyone's; in `state`, or any) that this site
    /// does not hold: queued in the global queue or run by another site, newest first.
    pub async fn jobs_elsewhere(
        &self,
        user: Option<&str>,
        state: Option<&str>,
        limit: u32,
    ) -> Result<Vec<SharedJob>> {
        let rows = sqlx::query(&format!(
            "SELECT j.id, j.data, j.site, g.state, {SITE_DOWN}, COALESCE(g.given_back, false) \
             FROM jobs j \
             LEFT JOIN global_jobs g ON g.job_id = j.id \
             LEFT JOIN dispatchers d ON d.site = j.site \
             WHERE j.site IS DISTINCT FROM $1 AND ($2::text IS NULL OR j.user_name = $2) \
             AND ($3::text IS NULL OR j.state = $3) ORDER BY j.id DESC LIMIT $4",
        ))
        .bind(&self.site)
        .bind(user)
        .bind(state)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(self.db())?;
        rows.iter()
            .map(|r| {
                let id = r.get::<i64, _>(0) as u64;
                let mut record: JobRecord = decode("jobs", id.to_string(), &r.get::<String, _>(1))?;
                record.id = id;
                Ok(SharedJob {
                    record,
                    site: r.get(2),
                    queue_state: r.get(3),
                    site_down: r.get(4),
                    given_back: r.get(5),
                })
            })
            .collect()
    }

    /// A job as stored, wherever it runs: for a dispatcher asked about a job another site
    /// runs, or one still in the queue.
    pub async fn shared_job(&self, id: u64) -> Result<Option<SharedJob>> {
        let row = sqlx::query(&format!(
            "SELECT j.data, j.site, g.state, {SITE_DOWN}, COALESCE(g.given_back, false) \
             FROM jobs j \
             LEFT JOIN global_jobs g ON g.job_id = j.id \
             LEFT JOIN dispatchers d ON d.site = j.site WHERE j.id = $1",
        ))
        .bind(id as i64)
        .fetch_optional(&self.pool)
        .await
        .map_err(self.db())?;
        row.map(|r| {
            let mut record: JobRecord = decode("jobs", id.to_string(), &r.get::<String, _>(0))?;
            record.id = id;
            Ok(SharedJob {
                record,
                site: r.get(1),
                queue_state: r.get(2),
                site_down: r.get(3),
                given_back: r.get(4),
            })
        })
        .transpose()
    }
}

impl DueAuction {
    /// The name of the bidder with this id.
    pub fn site_name(&self, id: SiteId) -> Option<&str> {
        self.sites.get(&id).map(String::as_str)
    }

    /// Applies how the auction closed, in the transaction that locked it, and commits: an
    /// award sets its one winner (a bidder of this auction) under a new claim epoch; an
    /// unsold job is queued again, or reopens `reopen_after` the close for `length_ms` (as
    /// [`SharedQueue::open`] takes it, at least 1) during which bids count. Its bids go.
    pub async fn settle(mut self, outcome: &Outcome, length_ms: i64) -> Result<Closed> {
        let name = self.name.clone();
        let db = move |source: sqlx::Error| StoreError::Database { path: name, source };
        let job = self.job as i64;
        let closed = match *outcome {
            Outcome::Awarded {
                site, valid_bids, ..
            } => {
                let Some(winner) = self.sites.get(&site).cloned() else {
                    return Err(StoreError::NoSuchBidder {
                        job: self.job,
                        site: site.0,
                    });
                };
                sqlx::query(&closing(
                    "UPDATE global_jobs SET state = 'claimed', site = $2, epoch = epoch + 1, \
                     claimed_at = now(), bidders = $3 WHERE job_id = $1",
                ))
                .bind(job)
                .bind(&winner)
                .bind(valid_bids as i32)
                .execute(&mut *self.tx)
                .await
                .map_err(db.clone())?;
                Closed::Awarded {
                    job: self.job,
                    site: winner,
                    bidders: valid_bids as u32,
                }
            }
            Outcome::Unsold { reopen_after } => {
                let sql = closing(match reopen_after {
                    None => {
                        "UPDATE global_jobs SET state = 'queued', closes_at = NULL, \
                         unsold = unsold + 1 WHERE job_id = $1"
                    }
                    Some(_) => {
                        "UPDATE global_jobs SET opened_by = $2, \
                         opened_at = now() + $3 * interval '1 millisecond', \
                         closes_at = now() + ($3 + $4) * interval '1 millisecond', \
                         auctions = auctions + 1, unsold = unsold + 1 WHERE job_id = $1"
                    }
                });
                let q = sqlx::query(&sql).bind(job);
                match reopen_after {
                    None => q,
                    Some(delay) => q
                        .bind(&self.closer)
                        .bind(millis(delay))
                        .bind(length_ms.max(1)),
                }
                .execute(&mut *self.tx)
                .await
                .map_err(db.clone())?;
                Closed::Unsold { job: self.job }
            }
        };
        self.tx.commit().await.map_err(db)?;
        Ok(closed)
    }
}

/// `update` (of a due auction's row, `$1` its job) as the one statement that closes it: the
/// row updated, its bids dropped and the close announced on [`GLOBAL_CHANNEL`] together.
fn closing(update: &str) -> String {
    format!(
        "WITH closed AS ({update}), dropped AS (DELETE FROM bids WHERE job_id = $1) \
         SELECT pg_notify('{GLOBAL_CHANNEL}', 'closed')"
    )
}

/// Puts `user`'s jobs that wait for budget back on sale (their budget changed, or a hold
/// came back), clearing the reason their records give; announced at commit.
pub(crate) async fn back_on_sale(
    tx: &mut sqlx::PgConnection,
    user: &str,
) -> std::result::Result<(), crate::shared_budget::BudgetError> {
    let jobs: Vec<i64> = sqlx::query_scalar(
        "UPDATE global_jobs g SET state = 'queued', needs = 0 FROM jobs j \
         WHERE j.id = g.job_id AND j.user_name = $1 AND g.state = 'over_budget' \
         RETURNING g.job_id",
    )
    .bind(user)
    .fetch_all(&mut *tx)
    .await?;
    for &job in &jobs {
        set_reason(tx, job as u64, None).await?;
    }
    if !jobs.is_empty() {
        notify(tx, "back on sale").await?;
    }
    Ok(())
}

/// Sets the reason a queued job's record gives (`None`: clears it).
async fn set_reason(
    tx: &mut sqlx::PgConnection,
    job: u64,
    reason: Option<String>,
) -> std::result::Result<(), crate::shared_budget::BudgetError> {
    let data: Option<String> = sqlx::query_scalar("SELECT data FROM jobs WHERE id = $1 FOR UPDATE")
        .bind(job as i64)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(data) = data else {
        return Ok(());
    };
    let mut record: JobRecord = decode("jobs", job.to_string(), &data)?;
    record.reason = reason;
    write_job_row(tx, job, &record).await?;
    Ok(())
}

/// Writes job `job`'s record back to its row, the state column beside it kept in step:
/// every change to a job in the shared queue goes through here. (The id is the row's: a
/// record decoded from its data does not carry it.)
async fn write_job_row(
    tx: &mut sqlx::PgConnection,
    job: u64,
    record: &JobRecord,
) -> std::result::Result<(), sqlx::Error> {
    sqlx::query("UPDATE jobs SET state = $2, data = $3 WHERE id = $1")
        .bind(job as i64)
        .bind(record.state_column())
        .bind(encode(record))
        .execute(tx)
        .await
        .map(|_| ())
}

/// Announces on [`GLOBAL_CHANNEL`] that users changed (one created, a token, a credential, a
/// budget, a user disabled): every dispatcher reads them again at once ([`SharedQueue::users`]).
pub(crate) async fn notify_users(
    tx: &mut sqlx::PgConnection,
) -> std::result::Result<(), sqlx::Error> {
    notify(tx, USERS_CHANGED).await
}

/// The payload of a notification that users changed.
pub const USERS_CHANGED: &str = "users";

async fn notify(tx: &mut sqlx::PgConnection, what: &str) -> std::result::Result<(), sqlx::Error> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(GLOBAL_CHANNEL)
        .bind(what)
        .execute(tx)
        .await
        .map(|_| ())
}

/// What a submission stores besides its jobs' records, as one step of
/// [`SharedQueue::submit`]'s transaction: nothing more ([`Jobs`]), or the workflow they are
/// the tasks of.
trait Insert {
    /// The ids it answers with.
    type Stored;

    /// Stores `jobs` (and what else it is) as `site`'s, inside `tx`.
    async fn insert(
        self,
        tx: &mut sqlx::PgConnection,
        site: &str,
        jobs: &[JobRecord],
    ) -> std::result::Result<Self::Stored, sqlx::Error>;
}

/// Jobs alone: their ids, in order.
struct Jobs;

impl Insert for Jobs {
    type Stored = Vec<u64>;

    async fn insert(
        self,
        tx: &mut sqlx::PgConnection,
        site: &str,
        jobs: &[JobRecord],
    ) -> std::result::Result<Vec<u64>, sqlx::Error> {
        crate::postgres::insert_jobs_in(tx, Some(site), jobs).await
    }
}

/// A workflow with its task jobs: its id and theirs, in task order.
impl Insert for &crate::WorkflowRecord {
    type Stored = (u64, Vec<u64>);

    async fn insert(
        self,
        tx: &mut sqlx::PgConnection,
        site: &str,
        jobs: &[JobRecord],
    ) -> std::result::Result<(u64, Vec<u64>), sqlx::Error> {
        crate::postgres::insert_workflow_in(tx, Some(site), self, jobs).await
    }
}
