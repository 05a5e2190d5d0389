//! The embedded SQLite store: one file, write-ahead log, every commit synced, held by one
//! service at a time ([`crate::sqlite_lock`]).

use crate::sqlite_lock::{self, FileLock};
use crate::tables::{records, Tables};
use crate::{
    Holder, JobRecord, ReservationRecord, Result, RunRecord, Store, StoreError, UserChange,
    UserRecord, WorkflowRecord,
};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqlitePool};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// SQLite behind the [`Store`] trait. One connection: SQLite serializes writers anyway, and
/// one connection never meets `SQLITE_BUSY`.
#[derive(Clone, Debug)]
pub struct SqliteStore {
    pool: SqlitePool,
    /// The statements it shares with PostgreSQL, on this file.
    tables: Tables<Sqlite>,
    /// This service's hold on the file, let go by [`Store::close`] once the pool is closed
    /// (or with the last clone).
    lock: Arc<Mutex<Option<FileLock>>>,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` for this process, without a data
    /// directory to name; see [`SqliteStore::open_by`].
    pub async fn open(path: &Path) -> Result<SqliteStore> {
        SqliteStore::open_by(path, &Holder::this_process(None)).await
    }

    /// Takes the database at `path` (creating it if needed) for `holder`, refusing it while
    /// another service holds it, and brings its schema up to date.
    pub async fn open_by(path: &Path, holder: &Holder) -> Result<SqliteStore> {
        let name = path.display().to_string();
        // Before the first connection: a refused service opens none.
        let lock = FileLock::acquire(path, sqlite_lock::BUSY_FOR).await?;
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .map_err(|source| StoreError::Database {
                path: name.clone(),
                source,
            })?;
        sqlx::migrate!("./migrations/sqlite")
            .run(&pool)
            .await
            .map_err(|source| StoreError::Migrate {
                path: name.clone(),
                source,
            })?;
        sqlite_lock::record_holder(&pool, holder)
            .await
            .map_err(|source| StoreError::Database {
                path: name.clone(),
                source,
            })?;
        Ok(SqliteStore {
            pool,
            tables: Tables::new(name),
            lock: Arc::new(Mutex::new(Some(lock))),
        })
    }

    fn db(&self) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
        self.tables.db()
    }
}

#[async_trait::async_trait]
impl Store for SqliteStore {
    async fn insert_jobs(&self, jobs: &[JobRecord]) -> Result<Vec<u64>> {
        let mut tx = self.pool.begin().await.map_err(self.db())?;
        let mut ids = Vec::with_capacity(jobs.len());
        for j in jobs {
            ids.push(self.tables.insert_job(&mut *tx, j).await?);
        }
        tx.commit().await.map_err(self.db())?;
        Ok(ids)
    }

    async fn update_jobs(&self, jobs: &[JobRecord]) -> Result<()> {
        if jobs.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await.map_err(self.db())?;
        for j in jobs {
            sqlx::query("UPDATE jobs SET state = $1, data = $2 WHERE id = $3")
                .bind(j.state_column())
                .bind(crate::encode(j))
                .bind(j.id as i64)
                .execute(&mut *tx)
                .await
                .map_err(self.db())?;
        }
        tx.commit().await.map_err(self.db())
    }

    async fn load_jobs(&self, unfinished_only: bool) -> Result<Vec<JobRecord>> {
        let sql = if unfinished_only {
            "SELECT id, data FROM jobs WHERE state NOT IN \
             ('completed', 'failed', 'cancelled', 'timeout') ORDER BY id"
        } else {
            "SELECT id, data FROM jobs ORDER BY id"
        };
        let rows = sqlx::query_as(sql)
            .fetch_all(&self.pool)
            .await
            .map_err(self.db())?;
        records("jobs", rows, |j: &mut JobRecord, id| j.id = id)
    }

    async fn put_reservations(&self, rs: &[ReservationRecord]) -> Result<()> {
        if rs.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await.map_err(self.db())?;
        for r in rs {
            sqlx::query(
                "INSERT OR REPLACE INTO reservations (id, state, data) VALUES ($1, $2, $3)",
            )
            .bind(r.id as i64)
            .bind(r.state_column())
            .bind(crate::encode(r))
            .execute(&mut *tx)
            .await
            .map_err(self.db())?;
        }
        tx.commit().await.map_err(self.db())
    }

    async fn load_reservations(&self) -> Result<Vec<ReservationRecord>> {
        let rows = sqlx::query_as("SELECT id, data FROM reservations ORDER BY id")
            .fetch_all(&self.pool)
            .await
            .map_err(self.db())?;
        records("reservations", rows, |r: &mut ReservationRecord, id| {
            r.id = id
        })
    }

    async fn insert_user(&self, u: &UserRecord) -> Result<()> {
        self.tables.insert_user(&self.pool, u).await
    }

    async fn update_users(&self, changes: &[UserChange]) -> Result<()> {
        if changes.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await.map_err(self.db())?;
        for c in changes {
            if let Some((theirs, u)) = self.tables.user_to_write(&mut *tx, c).await? {
                let token = u.token_hash != theirs.token_hash;
                self.tables.write_user(&mut *tx, &u, token).await?;
            }
        }
        tx.commit().await.map_err(self.db())
    }

    async fn insert_workflow(
        &self,
        wf: &WorkflowRecord,
        jobs: &[JobRecord],
    ) -> Result<(u64, Vec<u64>)> {
        let mut tx = self.pool.begin().await.map_err(self.db())?;
        let mut ids = Vec::with_capacity(jobs.len());
        for j in jobs {
            ids.push(self.tables.insert_job(&mut *tx, j).await?);
        }
        let id = Tables::insert_workflow(&mut *tx, wf, &ids)
            .await
            .map_err(self.db())?;
        tx.commit().await.map_err(self.db())?;
        Ok((id, ids))
    }

    async fn update_workflows(&self, wfs: &[WorkflowRecord]) -> Result<()> {
        if wfs.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await.map_err(self.db())?;
        self.tables.update_workflows(&mut tx, wfs).await?;
        tx.commit().await.map_err(self.db())
    }

    async fn load_workflows(&self) -> Result<Vec<WorkflowRecord>> {
        let rows = sqlx::query_as("SELECT id, data FROM workflows ORDER BY id")
            .fetch_all(&self.pool)
            .await
            .map_err(self.db())?;
        records("workflows", rows, |w: &mut WorkflowRecord, id| w.id = id)
    }

    async fn insert_runs(&self, runs: &[RunRecord]) -> Result<()> {
        if runs.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await.map_err(self.db())?;
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
        let mut tx = self.pool.begin().await.map_err(self.db())?;
        let new = self
            .tables
            .first_use_of_nonce(&mut tx, signer, nonce, now, window)
            .await?;
        tx.commit().await.map_err(self.db())?;
        Ok(new)
    }

    async fn close(&self) {
        self.pool.close().await;
        // After the pool: closing the lock's descriptor would drop SQLite's own locks.
        self.lock.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    async fn load_users(&self) -> Result<Vec<UserRecord>> {
        self.tables.load_users(&self.pool).await
    }
}
