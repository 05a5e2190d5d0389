//! PostgreSQL behind the same trait: the same tables and the same transactions as SQLite,
//! on a server that several processes can reach.

use crate::location::redact;
use crate::pg_lock::{PgLock, CONNECT_TIMEOUT};
use crate::tables::{records, Tables};
use crate::{
    decode, encode, Holder, JobRecord, ReservationRecord, Result, RunRecord, Store, StoreError,
    UserChange, UserRecord, WorkflowRecord,
};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgConnection, PgPool, Postgres};
use std::str::FromStr;
use std::time::Duration;

/// PostgreSQL behind the [`Store`] trait. Every call is one transaction, committed (and so
/// durable under the server's `synchronous_commit`) when it returns.
#[derive(Clone, Debug)]
pub struct PgStore {
    pool: PgPool,
    /// The statements it shares with SQLite, on this database (named by its URL without
    /// the password, for errors).
    tables: Tables<Postgres>,
    /// This service's hold on the database, on a connection of its own.
    lock: PgLock,
    /// The site of a peer dispatcher: it sees and writes only its site's jobs and
    /// reservations, and its new global jobs go to the shared queue. `None`: single mode.
    site: Option<String>,
}

impl PgStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/db`), takes
    /// the database for this service (refusing one that another service holds) and brings
    /// its schema up to date. The database must exist; its tables are created.
    pub async fn open(url: &str) -> Result<PgStore> {
        PgStore::open_by(url, None, &Holder::this_process(None)).await
    }

    /// Connects as the dispatcher of `site`, beside other sites' dispatchers on the same
    /// database: refused while a single-mode service or another dispatcher of `site` holds
    /// it.
    pub async fn open_site(url: &str, site: &str) -> Result<PgStore> {
        PgStore::open_by(url, Some(site), &Holder::this_process(None)).await
    }

    /// The connection pool, for the global queue's queries.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The URL without its password.
    pub fn name(&self) -> &str {
        self.tables.name()
    }

    /// Takes the database at `url` for `holder`, as the dispatcher of `site` or (`None`)
    /// in single mode; see [`PgStore::open`] and [`PgStore::open_site`].
    pub async fn open_by(url: &str, site: Option<&str>, holder: &Holder) -> Result<PgStore> {
        let name = redact(url);
        let db = |source| StoreError::Database {
            path: name.clone(),
            source,
        };
        let options = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::BadLocation {
                location: name.clone(),
                reason: e.to_string(),
            })?
            .application_name("foresight");
        // The lock first, on a direct connection: the pool retries a refused connection
        // until its timeout and then reports only that it timed out; this says why.
        let lock =
            tokio::time::timeout(CONNECT_TIMEOUT, PgLock::take(&options, &name, site, holder))
                .await
                .map_err(|_| StoreError::Unreachable {
                    location: name.clone(),
                    reason: format!("no answer within {CONNECT_TIMEOUT:?}"),
                })??;
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options)
            .await
            .map_err(db)?;
        sqlx::migrate!("./migrations/postgres")
            .run(&pool)
            .await
            .map_err(|source| StoreError::Migrate {
                path: name.clone(),
                source,
            })?;
        Ok(PgStore {
            pool,
            tables: Tables::new(name),
            lock,
            site: site.map(str::to_string),
        })
    }

    fn db(&self) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
        self.tables.db()
    }

    /// A write's transaction. In single mode it is begun only while this service holds the
    /// database ([`PgLock::fence`]); a dispatcher writes only its own site's rows, and
    /// claims global jobs through leases.
    async fn begin(&self) -> Result<sqlx::Transaction<'static, sqlx::Postgres>> {
        let mut tx = self.pool.begin().await.map_err(self.db())?;
        if self.site.is_none() {
            self.lock.fence(&mut tx).await?;
        }
        Ok(tx)
    }
}

#[async_trait::async_trait]
impl Store for PgStore {
    async fn insert_jobs(&self, jobs: &[JobRecord]) -> Result<Vec<u64>> {
        let mut tx = self.begin().await?;
        let ids = insert_jobs_in(&mut tx, self.site.as_deref(), jobs)
            .await
            .map_err(self.db())?;
        if self.site.is_some() {
            crate::shared_budget::take_holds(&mut tx, jobs)
                .await
                .map_err(|e| e.at(self.name()))?;
        }
        tx.commit().await.map_err(self.db())?;
        Ok(ids)
    }

    async fn update_jobs(&self, jobs: &[JobRecord]) -> Result<()> {
        if jobs.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin().await?;
        for j in jobs {
            let mut j = std::borrow::Cow::Borrowed(j);
            if self.site.is_some() {
                // What the job was charged since its record was last written is taken from
                // its user's budget in the database, in this transaction.
                // The record's row first, locked; then its queue row, read after the lock is
                // granted (one statement would see the queue row as it was before a
                // `SharedQueue::finished` that held the lock ended the job).
                let old: Option<String> = sqlx::query_scalar(
                    "SELECT data FROM jobs WHERE id = $1 AND site IS NOT DISTINCT FROM $2 \
                     FOR UPDATE",
                )
                .bind(j.id as i64)
                .bind(self.site.as_deref())
                .fetch_optional(&mut *tx)
                .await
                .map_err(self.db())?;
                if let Some(old) = old {
                    let old: JobRecord = decode("jobs", j.id.to_string(), &old)?;
                    // An awarded job's charges are paid from the hold its start took, and
                    // settled against it when it ends (`SharedQueue::finished`).
                    let hold: Option<(f64, String)> = sqlx::query_as(
                        "SELECT budget_hold, state FROM global_jobs WHERE job_id = $1",
                    )
                    .bind(j.id as i64)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(self.db())?;
                    let delta = match hold {
                        Some((hold, state)) => {
                            let ended = state == "done";
                            crate::budget_taken(j.charged, hold, ended)
                                - crate::budget_taken(old.charged, hold, ended)
                        }
                        None => {
                            // A local job's hold is the database's: taken as it was
                            // accepted, given back by a peer if its site died.
                            let hold = old.budget_hold;
                            if j.budget_hold != hold {
                                j.to_mut().budget_hold = hold;
                            }
                            crate::local_taken(j.charged, hold, j.state.is_final())
                                - crate::local_taken(old.charged, hold, old.state.is_final())
                        }
                    };
                    if delta != 0.0 && delta.is_finite() {
                        crate::shared_budget::take(&mut tx, &j.user, delta, false)
                            .await
                            .map_err(|e| e.at(self.name()))?
                            .ok();
                    }
                }
            }
            // A dispatcher writes only its own site's jobs.
            sqlx::query(
                "UPDATE jobs SET state = $1, data = $2 WHERE id = $3 \
                 AND site IS NOT DISTINCT FROM $4",
            )
            .bind(j.state_column())
            .bind(encode(&*j))
            .bind(j.id as i64)
            .bind(self.site.as_deref())
            .execute(&mut *tx)
            .await
            .map_err(self.db())?;
        }
        tx.commit().await.map_err(self.db())
    }

    async fn load_jobs(&self, unfinished_only: bool) -> Result<Vec<JobRecord>> {
        let sql = if unfinished_only {
            "SELECT id, data FROM jobs WHERE state NOT IN \
             ('completed', 'failed', 'cancelled', 'timeout') \
             AND site IS NOT DISTINCT FROM $1 ORDER BY id"
        } else {
            "SELECT id, data FROM jobs WHERE site IS NOT DISTINCT FROM $1 ORDER BY id"
        };
        let rows = sqlx::query_as(sql)
            .bind(self.site.as_deref())
            .fetch_all(&self.pool)
            .await
            .map_err(self.db())?;
        records("jobs", rows, |j: &mut JobRecord, id| j.id = id)
    }

    async fn put_reservations(&self, rs: &[ReservationRecord]) -> Result<()> {
        if rs.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin().await?;
        for r in rs {
            sqlx::query(
                "INSERT INTO reservations (id, state, data, site) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (site, id) DO UPDATE SET state = EXCLUDED.state, \
                 data = EXCLUDED.data",
            )
            .bind(r.id as i64)
            .bind(r.state_column())
            .bind(encode(r))
            .bind(self.site.as_deref().unwrap_or(""))
            .execute(&mut *tx)
            .await
            .map_err(self.db())?;
        }
        tx.commit().await.map_err(self.db())
    }

    async fn load_reservations(&self) -> Result<Vec<ReservationRecord>> {
        let rows = sqlx::query_as("SELECT id, data FROM reservations WHERE site = $1 ORDER BY id")
            .bind(self.site.as_deref().unwrap_or(""))
            .fetch_all(&self.pool)
            .await
            .map_err(self.db())?;
        records("reservations", rows, |r: &mut ReservationRecord, id| {
            r.id = id
        })
    }

    async fn insert_user(&self, u: &UserRecord) -> Result<()> {
        let mut tx = self.begin().await?;
        self.tables.insert_user(&mut *tx, u).await?;
        // Peer dispatchers take in the new user at once.
        if self.site.is_some() {
            crate::shared_queue::notify_users(&mut tx)
                .await
                .map_err(self.db())?;
        }
        tx.commit().await.map_err(self.db())
    }

    async fn update_users(&self, changes: &[UserChange]) -> Result<()> {
        // A dispatcher's copy of a budget may be stale: the database's stands (it changes
        // only with the jobs' charges and the budget operations). So a change of nothing but
        // the budget or spending (a charge seen here) writes nothing, and takes no lock.
        let changes: Vec<&UserChange> = changes
            .iter()
            .filter(|c| self.site.is_none() || !only_budget_changed(c))
            .collect();
        if changes.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin().await?;
        let mut wrote = false;
        for c in changes {
            // The row as it is now, locked until commit: a peer's write waits, then merges
            // onto this one's.
            let Some((theirs, mut u)) = self.tables.user_to_write(&mut *tx, c).await? else {
                continue;
            };
            if self.site.is_some() {
                u.budget = theirs.budget;
                u.spent = theirs.spent;
            }
            if u == theirs {
                continue;
            }
            let token = u.token_hash != theirs.token_hash;
            self.tables.write_user(&mut *tx, &u, token).await?;
            wrote = true;
        }
        if self.site.is_some() && wrote {
            // Peer dispatchers take in the change (a token, a credential, a user disabled).
            crate::shared_queue::notify_users(&mut tx)
                .await
                .map_err(self.db())?;
        }
        tx.commit().await.map_err(self.db())
    }

    async fn load_users(&self) -> Result<Vec<UserRecord>> {
        let mut users = self.tables.load_users(&self.pool).await?;
        if self.site.is_some() {
            // A dispatcher's users' budgets are their rows less their ledgers.
            let moved = crate::shared_budget::ledger_sums(&self.pool)
                .await
                .map_err(self.db())?;
            for u in &mut users {
                crate::shared_budget::apply(u, moved.get(&u.name).copied().unwrap_or(0.0));
            }
        }
        Ok(users)
    }

    async fn insert_workflow(
        &self,
        wf: &WorkflowRecord,
        jobs: &[JobRecord],
    ) -> Result<(u64, Vec<u64>)> {
        let mut tx = self.begin().await?;
        let stored = insert_workflow_in(&mut tx, self.site.as_deref(), wf, jobs)
            .await
            .map_err(self.db())?;
        if self.site.is_some() {
            crate::shared_budget::take_holds(&mut tx, jobs)
                .await
                .map_err(|e| e.at(self.name()))?;
        }
        tx.commit().await.map_err(self.db())?;
        Ok(stored)
    }

    async fn update_workflows(&self, wfs: &[WorkflowRecord]) -> Result<()> {
        if wfs.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin().await?;
        self.tables.update_workflows(&mut tx, wfs).await?;
        tx.commit().await.map_err(self.db())
    }

    async fn load_workflows(&self) -> Result<Vec<WorkflowRecord>> {
        // A dispatcher's workflows are those whose tasks are its site's jobs.
        let rows = sqlx::query_as(
            "SELECT w.id, w.data FROM workflows w WHERE $1::text IS NULL OR EXISTS \
             (SELECT 1 FROM jobs j WHERE j.site = $1 \
             AND j.id = (w.data::jsonb #>> '{tasks,0,job}')::bigint) ORDER BY w.id",
        )
        .bind(self.site.as_deref())
        .fetch_all(&self.pool)
        .await
        .map_err(self.db())?;
        records("workflows", rows, |w: &mut WorkflowRecord, id| w.id = id)
    }

    async fn insert_runs(&self, runs: &[RunRecord]) -> Result<()> {
        if runs.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin().await?;
        self.tables.insert_runs(&mut tx, runs).await?;
        tx.commit().await.map_err(self.db())
    }

    async fn load_runs(&self, per_key: usize) -> Result<Vec<RunRecord>> {
        self.tables.load_runs(&self.pool, per_key).await
    }

    async fn first_use_of_nonce(
        &self,
        signer: &str,
        nonce: &str,
        now: i64,
        window: i64,
    ) -> Result<bool> {
        let mut tx = self.begin().await?;
        let new = self
            .tables
            .first_use_of_nonce(&mut tx, signer, nonce, now, window)
            .await?;
        tx.commit().await.map_err(self.db())?;
        Ok(new)
    }

    async fn close(&self) {
        self.pool.close().await;
        self.lock.release().await;
    }

    async fn taken_over(&self) -> StoreError {
        self.lock.taken_over().await
    }
}

/// Stores a workflow and its task jobs inside the caller's transaction, the jobs as
/// `site`'s (`None`: single mode) so that the site writes them as they run. Returns the
/// workflow's id and its jobs' ids, in task order.
pub(crate) async fn insert_workflow_in(
    tx: &mut PgConnection,
    site: Option<&str>,
    wf: &WorkflowRecord,
    jobs: &[JobRecord],
) -> std::result::Result<(u64, Vec<u64>), sqlx::Error> {
    let ids = insert_jobs_in(&mut *tx, site, jobs).await?;
    let id = Tables::<Postgres>::insert_workflow(&mut *tx, wf, &ids).await?;
    Ok((id, ids))
}

/// Stores new jobs inside the caller's transaction, as `site`'s (`None`: single mode). A
/// dispatcher's new global job belongs to no site yet: it joins the shared queue in the same
/// transaction, so that it is never stored without its place, with what it may cost at worst
/// (its processors × walltime × the highest tariff of any site); every dispatcher is told at
/// commit.
pub(crate) async fn insert_jobs_in(
    tx: &mut PgConnection,
    site: Option<&str>,
    jobs: &[JobRecord],
) -> std::result::Result<Vec<u64>, sqlx::Error> {
    let mut ids = Vec::with_capacity(jobs.len());
    let mut queued = false;
    // The id of the first task of the array being stored: its array job's id.
    let mut array_job = 0;
    for j in jobs {
        let global = site.is_some() && crate::is_global(j);
        let owner = if global { None } else { site };
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO jobs (user_name, state, submitted_at, data, site) \
             VALUES ($1, $2, $3, $4, $5) RETURNING id",
        )
        .bind(&j.user)
        .bind(j.state_column())
        .bind(j.submitted_at)
        .bind(encode(j))
        .bind(owner)
        .fetch_one(&mut *tx)
        .await?;
        if global {
            if let Some(a) = j.links.as_ref().and_then(|l| l.array.as_ref()) {
                // A global task is never written again by a site before it starts: it
                // takes its array job's id now.
                if a.position == 0 {
                    array_job = id as u64;
                }
                let mut numbered = j.clone();
                if let Some(a) = numbered.links.as_mut().and_then(|l| l.array.as_mut()) {
                    a.job = array_job;
                }
                sqlx::query("UPDATE jobs SET data = $2 WHERE id = $1")
                    .bind(id)
                    .bind(encode(&numbered))
                    .execute(&mut *tx)
                    .await?;
            }
            let waits = j.links.as_ref().is_some_and(|l| l.dependency.is_some());
            sqlx::query(
                "INSERT INTO global_jobs (job_id, procs, priority, state, worst_case) \
                 SELECT $1, $2, $3, $4, $5 * COALESCE(max(max_tariff), 0) FROM dispatchers",
            )
            .bind(id)
            .bind(j.procs as i32)
            .bind(j.priority as i32)
            // Submitted held: off sale until released; with dependencies: until they hold.
            .bind(if j.held {
                "held"
            } else if waits {
                "waiting"
            } else {
                "queued"
            })
            .bind(f64::from(j.procs) * j.walltime.max(0) as f64)
            .execute(&mut *tx)
            .await?;
            queued = true;
        }
        ids.push(id as u64);
    }
    if queued {
        // Delivered at commit: every dispatcher wakes to bid.
        sqlx::query("SELECT pg_notify($1, 'queued')")
            .bind(crate::GLOBAL_CHANNEL)
            .execute(&mut *tx)
            .await?;
    }
    Ok(ids)
}

/// Whether `c` changes nothing but the budget and spending of the record it was made from
/// (a dispatcher's copy charged a job): such a change is the database's to make.
fn only_budget_changed(c: &UserChange) -> bool {
    let Some(base) = &c.base else {
        return false;
    };
    let mut same = c.user.clone();
    same.budget = base.budget;
    same.spent = base.spent;
    same == *base
}
