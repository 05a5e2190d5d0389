//! The embedded SQLite store: one file, write-ahead log, every commit synced, held by one
//! service at a time ([`crate::sqlite_lock`]).

use crate::sqlite_lock::{self, FileLock};
use crate::{
    decode, encode, Holder, JobRecord, ReservationRecord, Result, RunRecord, Store, StoreError,
    UserChange, UserRecord, WorkflowRecord, LOAD_RUNS,
};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, SqlitePool};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// SQLite behind the [`Store`] trait. One connection: SQLite serializes writers anyway, and
/// one connection never meets `SQLITE_BUSY`.
#[derive(Clone, Debug)]
pub struct SqliteStore {
    pool: SqlitePool,
    path: String,
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
            path: name,
            lock: Arc::new(Mutex::new(Some(lock))),
        })
    }

    fn db(&self) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
        move |source| StoreError::Database {
            path: self.path.clone(),
            source,
        }
    }
}

#[async_trait::async_trait]
impl Store for SqliteStore {
    async fn insert_jobs(&self, jobs: &[JobRecord]) -> Result<Vec<u64>> {
        let mut tx = self.pool.begin().await.map_err(self.db())?;
        let mut ids = Vec::with_capacity(jobs.len());
        for j in jobs {
            let id: i64 = sqlx::query_scalar(
                "INSERT INTO jobs (user_name, state, submitted_at, data) VALUES (?, ?, ?, ?) \
                 RETURNING id",
            )
            .bind(&j.user)
            .bind(j.state.as_str())
            .bind(j.submitted_at)
            .bind(encode(j))
            .fetch_one(&mut *tx)
            .await
            .map_err(self.db())?;
            ids.push(id as u64);
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
            sqlx::query("UPDATE jobs SET state = ?, data = ? WHERE id = ?")
                .bind(j.state.as_str())
                .bind(encode(j))
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
        let rows = sqlx::query(sql)
            .fetch_all(&self.pool)
            .await
            .map_err(self.db())?;
        rows.iter()
            .map(|row| {
                let id: i64 = row.get(0);
                let data: String = row.get(1);
                let mut j: JobRecord = decode("jobs", id.to_string(), &data)?;
                j.id = id as u64;
                Ok(j)
            })
            .collect()
    }

    async fn put_reservations(&self, rs: &[ReservationRecord]) -> Result<()> {
        if rs.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await.map_err(self.db())?;
        for r in rs {
            sqlx::query("INSERT OR REPLACE INTO reservations (id, state, data) VALUES (?, ?, ?)")
                .bind(r.id as i64)
                .bind(r.state.as_str())
                .bind(encode(r))
                .execute(&mut *tx)
                .await
                .map_err(self.db())?;
        }
        tx.commit().await.map_err(self.db())
    }

    async fn load_reservations(&self) -> Result<Vec<ReservationRecord>> {
        let rows = sqlx::query("SELECT id, data FROM reservations ORDER BY id")
            .fetch_all(&self.pool)
            .await
            .map_err(self.db())?;
        rows.iter()
            .map(|row| {
                let id: i64 = row.get(0);
                let data: String = row.get(1);
                let mut r: ReservationRecord = decode("reservations", id.to_string(), &data)?;
                r.id = id as u64;
                Ok(r)
            })
            .collect()
    }

    async fn insert_user(&self, u: &UserRecord) -> Result<()> {
        let result = sqlx::query("INSERT INTO users (name, token_hash, data) VALUES (?, ?, ?)")
            .bind(&u.name)
            .bind(&u.token_hash)
            .bind(encode(u))
            .execute(&self.pool)
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                Err(StoreError::UserExists(u.name.clone()))
            }
            Err(source) => Err(self.db()(source)),
        }
    }

    async fn update_users(&self, changes: &[UserChange]) -> Result<()> {
        if changes.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await.map_err(self.db())?;
        for c in changes {
            let row: Option<(String, String)> =
                sqlx::query_as("SELECT token_hash, data FROM users WHERE name = ?")
                    .bind(&c.user.name)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(self.db())?;
            let Some(row) = row else {
                continue;
            };
            let (_, u) = crate::user_to_write(c, row)?;
            sqlx::query("UPDATE users SET token_hash = ?, data = ? WHERE name = ?")
                .bind(&u.token_hash)
                .bind(encode(&u))
                .bind(&u.name)
                .execute(&mut *tx)
                .await
                .map_err(self.db())?;
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
            let id: i64 = sqlx::query_scalar(
                "INSERT INTO jobs (user_name, state, submitted_at, data) VALUES (?, ?, ?, ?) \
                 RETURNING id",
            )
            .bind(&j.user)
            .bind(j.state.as_str())
            .bind(j.submitted_at)
            .bind(encode(j))
            .fetch_one(&mut *tx)
            .await
            .map_err(self.db())?;
            ids.push(id as u64);
        }
        let mut stored = wf.clone();
        for (t, id) in stored.tasks.iter_mut().zip(&ids) {
            t.job = *id;
        }
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO workflows (user_name, data) VALUES (?, ?) RETURNING id",
        )
        .bind(&stored.user)
        .bind(encode(&stored))
        .fetch_one(&mut *tx)
        .await
        .map_err(self.db())?;
        tx.commit().await.map_err(self.db())?;
        Ok((id as u64, ids))
    }

    async fn update_workflows(&self, wfs: &[WorkflowRecord]) -> Result<()> {
        if wfs.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await.map_err(self.db())?;
        for w in wfs {
            sqlx::query("UPDATE workflows SET data = ? WHERE id = ?")
                .bind(encode(w))
                .bind(w.id as i64)
                .execute(&mut *tx)
                .await
                .map_err(self.db())?;
        }
        tx.commit().await.map_err(self.db())
    }

    async fn load_workflows(&self) -> Result<Vec<WorkflowRecord>> {
        let rows = sqlx::query("SELECT id, data FROM workflows ORDER BY id")
            .fetch_all(&self.pool)
            .await
            .map_err(self.db())?;
        rows.iter()
            .map(|row| {
                let id: i64 = row.get(0);
                let data: String = row.get(1);
                let mut w: WorkflowRecord = decode("workflows", id.to_string(), &data)?;
                w.id = id as u64;
                Ok(w)
            })
            .collect()
    }

    async fn insert_runs(&self, runs: &[RunRecord]) -> Result<()> {
        if runs.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await.map_err(self.db())?;
        for r in runs {
            sqlx::query(
                "INSERT INTO runs (job_id, user_name, app, params, cluster, runtime, ended_at, \
                 on_reference) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(r.job as i64)
            .bind(&r.user)
            .bind(&r.app)
            .bind(&r.params)
            .bind(&r.cluster)
            .bind(r.runtime)
            .bind(r.ended_at)
            .bind(r.on_reference)
            .execute(&mut *tx)
            .await
            .map_err(self.db())?;
        }
        tx.commit().await.map_err(self.db())
    }

    async fn load_runs(&self, per_key: usize) -> Result<Vec<RunRecord>> {
        let rows = sqlx::query(&LOAD_RUNS.replace("{n}", "?1"))
            .bind(per_key as i64)
            .fetch_all(&self.pool)
            .await
            .map_err(self.db())?;
        Ok(rows
            .iter()
            .map(|row| RunRecord {
                job: row.get::<i64, _>(0) as u64,
                user: row.get(1),
                app: row.get(2),
                params: row.get(3),
                cluster: row.get(4),
                runtime: row.get(5),
                ended_at: row.get(6),
                on_reference: row.get(7),
            })
            .collect())
    }

    async fn close(&self) {
        self.pool.close().await;
        // After the pool: closing the lock's descriptor would drop SQLite's own locks.
        self.lock.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    async fn load_users(&self) -> Result<Vec<UserRecord>> {
        let rows = sqlx::query("SELECT name, token_hash, data FROM users ORDER BY name")
            .fetch_all(&self.pool)
            .await
            .map_err(self.db())?;
        rows.iter()
            .map(|row| {
                let name: String = row.get(0);
                let hash: String = row.get(1);
                let data: String = row.get(2);
                let mut u: UserRecord = decode("users", name.clone(), &data)?;
                u.name = name;
                u.token_hash = hash;
                Ok(u)
            })
            .collect()
    }
}
