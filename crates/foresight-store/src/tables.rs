//! The statements both backends run alike, written once over [`sqlx::Database`]. Both
//! schemas have the same tables and columns for what these touch, and both drivers take `$N`
//! placeholders, so one text serves SQLite and PostgreSQL; what differs between them (the
//! dispatcher's `site` columns, its budgets and notifications, the row locks) stays in
//! `sqlite.rs` and `postgres.rs`, and the one difference in syntax is [`Dialect`].

use crate::{
    decode, encode, JobRecord, Result, RunRecord, StoreError, UserChange, UserRecord,
    WorkflowRecord,
};
use serde::de::DeserializeOwned;
use sqlx::{
    ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Postgres, Row, Sqlite, Type,
};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// The runs [`crate::Store::load_runs`] returns: the last `$1` of every user on every
/// processor type, and of every (application, parameters, cluster).
const LOAD_RUNS: &str = "SELECT job_id, user_name, app, params, cluster, runtime, ended_at, \
     on_reference FROM \
     (SELECT *, ROW_NUMBER() OVER (PARTITION BY user_name, cluster ORDER BY id DESC) AS by_user, \
     ROW_NUMBER() OVER (PARTITION BY app, params, cluster ORDER BY id DESC) AS by_app \
     FROM runs) AS last WHERE by_user <= $1 OR by_app <= $1 ORDER BY id";

/// What the shared statements need to know of a backend's SQL beyond the standard.
pub(crate) trait Dialect: Database {
    /// Appended to a `SELECT` of a row the transaction is about to write: PostgreSQL's
    /// writers run side by side and must wait for each other's row; SQLite's one connection
    /// runs one transaction at a time, so it needs nothing (and has no such clause).
    const FOR_UPDATE: &'static str;
}

impl Dialect for Sqlite {
    const FOR_UPDATE: &'static str = "";
}

impl Dialect for Postgres {
    const FOR_UPDATE: &'static str = " FOR UPDATE";
}

/// The shared statements on one database, whose errors name it.
#[derive(Debug)]
pub(crate) struct Tables<DB> {
    /// The database file, or the URL without its password.
    name: String,
    /// When the nonces older than their window were last forgotten, Unix seconds.
    nonces_purged_at: Arc<AtomicI64>,
    _db: PhantomData<fn() -> DB>,
}

impl<DB> Clone for Tables<DB> {
    fn clone(&self) -> Self {
        Tables {
            name: self.name.clone(),
            nonces_purged_at: Arc::clone(&self.nonces_purged_at),
            _db: PhantomData,
        }
    }
}

/// How often the nonces older than their window are forgotten, seconds: a request whose
/// nonce is that old is refused for its timestamp anyway, so they may stay a little longer.
const NONCE_PURGE_SECS: i64 = 60;

impl<DB> Tables<DB> {
    /// The statements on the database `name` (a path, or a URL without its password).
    pub(crate) fn new(name: String) -> Tables<DB> {
        Tables {
            name,
            nonces_purged_at: Arc::new(AtomicI64::new(i64::MIN)),
            _db: PhantomData,
        }
    }

    /// The database's name, as errors give it.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Turns the driver's error into the store's, naming the database.
    pub(crate) fn db(&self) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
        move |source| StoreError::Database {
            path: self.name.clone(),
            source,
        }
    }
}

/// Decodes `(id, data)` rows of `table` into records, each given its id by `set_id`.
pub(crate) fn records<T: DeserializeOwned>(
    table: &'static str,
    rows: Vec<(i64, String)>,
    set_id: impl Fn(&mut T, u64),
) -> Result<Vec<T>> {
    rows.into_iter()
        .map(|(id, data)| {
            let mut record: T = decode(table, id.to_string(), &data)?;
            set_id(&mut record, id as u64);
            Ok(record)
        })
        .collect()
}

// The bounds say what both drivers provide: an executor on a connection, and the column
// types these statements bind and read.
impl<DB> Tables<DB>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> i64: Encode<'q, DB> + Decode<'q, DB> + Type<DB>,
    for<'q> bool: Encode<'q, DB> + Decode<'q, DB> + Type<DB>,
    for<'q> String: Encode<'q, DB> + Decode<'q, DB> + Type<DB>,
    for<'q> Option<String>: Encode<'q, DB> + Decode<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    /// Stores a new job (a single service's: no site) and returns its id.
    pub(crate) async fn insert_job<'e>(
        &self,
        conn: impl Executor<'e, Database = DB>,
        j: &JobRecord,
    ) -> Result<u64> {
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO jobs (user_name, state, submitted_at, data) VALUES ($1, $2, $3, $4) \
             RETURNING id",
        )
        .bind(&j.user)
        .bind(j.state_column())
        .bind(j.submitted_at)
        .bind(encode(j))
        .fetch_one(conn)
        .await
        .map_err(self.db())?;
        Ok(id as u64)
    }

    /// Stores a workflow whose tasks' jobs were stored as `ids` (in task order), with each
    /// task naming its job; returns the workflow's id. The driver's error is returned as it
    /// is: the shared queue's transactions call this too, and name the database themselves.
    pub(crate) async fn insert_workflow<'e>(
        conn: impl Executor<'e, Database = DB>,
        wf: &WorkflowRecord,
        ids: &[u64],
    ) -> std::result::Result<u64, sqlx::Error> {
        let mut stored = wf.clone();
        for (t, id) in stored.tasks.iter_mut().zip(ids) {
            t.job = *id;
        }
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO workflows (user_name, data) VALUES ($1, $2) RETURNING id",
        )
        .bind(&stored.user)
        .bind(encode(&stored))
        .fetch_one(conn)
        .await?;
        Ok(id as u64)
    }

    /// Writes the current state of workflows.
    pub(crate) async fn update_workflows(
        &self,
        conn: &mut DB::Connection,
        wfs: &[WorkflowRecord],
    ) -> Result<()> {
        for w in wfs {
            sqlx::query("UPDATE workflows SET data = $1 WHERE id = $2")
                .bind(encode(w))
                .bind(w.id as i64)
                .execute(&mut *conn)
                .await
                .map_err(self.db())?;
        }
        Ok(())
    }

    /// Stores a new user; refuses a taken name or token.
    pub(crate) async fn insert_user<'e>(
        &self,
        conn: impl Executor<'e, Database = DB>,
        u: &UserRecord,
    ) -> Result<()> {
        let result = sqlx::query("INSERT INTO users (name, token_hash, data) VALUES ($1, $2, $3)")
            .bind(&u.name)
            .bind(&u.token_hash)
            .bind(encode(u))
            .execute(conn)
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                Err(StoreError::UserExists(u.name.clone()))
            }
            Err(source) => Err(self.db()(source)),
        }
    }

    /// The row `c` writes over, taken for this transaction ([`Dialect::FOR_UPDATE`]), and
    /// what `c` makes of it ([`crate::user_to_write`]): `None` for a user the store does not
    /// have.
    pub(crate) async fn user_to_write<'e>(
        &self,
        conn: impl Executor<'e, Database = DB>,
        c: &UserChange,
    ) -> Result<Option<(UserRecord, UserRecord)>> {
        let sql = format!(
            "SELECT token_hash, data FROM users WHERE name = $1{}",
            DB::FOR_UPDATE
        );
        let row: Option<(String, String)> = sqlx::query_as(&sql)
            .bind(&c.user.name)
            .fetch_optional(conn)
            .await
            .map_err(self.db())?;
        row.map(|row| crate::user_to_write(c, row)).transpose()
    }

    /// Writes a user's record, and their token hash when `token` says it changed (a token
    /// is written only when it is another).
    pub(crate) async fn write_user<'e>(
        &self,
        conn: impl Executor<'e, Database = DB>,
        u: &UserRecord,
        token: bool,
    ) -> Result<()> {
        let sql = if token {
            "UPDATE users SET data = $2, token_hash = $3 WHERE name = $1"
        } else {
            "UPDATE users SET data = $2 WHERE name = $1"
        };
        let mut q = sqlx::query(sql).bind(&u.name).bind(encode(u));
        if token {
            q = q.bind(&u.token_hash);
        }
        q.execute(conn).await.map_err(self.db())?;
        Ok(())
    }

    /// Every user, by name.
    pub(crate) async fn load_users<'e>(
        &self,
        conn: impl Executor<'e, Database = DB>,
    ) -> Result<Vec<UserRecord>> {
        let rows: Vec<(String, String, String)> =
            sqlx::query_as("SELECT name, token_hash, data FROM users ORDER BY name")
                .fetch_all(conn)
                .await
                .map_err(self.db())?;
        rows.into_iter()
            .map(|(name, hash, data)| {
                let mut u: UserRecord = decode("users", name.clone(), &data)?;
                u.name = name;
                u.token_hash = hash;
                Ok(u)
            })
            .collect()
    }

    /// Adds finished runs, in order.
    pub(crate) async fn insert_runs(
        &self,
        conn: &mut DB::Connection,
        runs: &[RunRecord],
    ) -> Result<()> {
        for r in runs {
            sqlx::query(
                "INSERT INTO runs (job_id, user_name, app, params, cluster, runtime, ended_at, \
                 on_reference) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            )
            .bind(r.job as i64)
            .bind(&r.user)
            .bind(&r.app)
            .bind(&r.params)
            .bind(&r.cluster)
            .bind(r.runtime)
            .bind(r.ended_at)
            .bind(r.on_reference)
            .execute(&mut *conn)
            .await
            .map_err(self.db())?;
        }
        Ok(())
    }

    /// See [`crate::Store::first_use_of_nonce`].
    pub(crate) async fn first_use_of_nonce(
        &self,
        conn: &mut DB::Connection,
        signer: &str,
        nonce: &str,
        now: i64,
        window: i64,
    ) -> Result<bool> {
        let purged = self.nonces_purged_at.load(Ordering::Relaxed);
        if now.saturating_sub(purged) >= NONCE_PURGE_SECS || now < purged {
            sqlx::query("DELETE FROM signed_nonces WHERE seen_at < $1")
                .bind(now.saturating_sub(window))
                .execute(&mut *conn)
                .await
                .map_err(self.db())?;
            self.nonces_purged_at.store(now, Ordering::Relaxed);
        }
        let new = sqlx::query(
            "INSERT INTO signed_nonces (signer, nonce, seen_at) VALUES ($1, $2, $3) \
             ON CONFLICT DO NOTHING RETURNING seen_at",
        )
        .bind(signer)
        .bind(nonce)
        .bind(now)
        .fetch_optional(&mut *conn)
        .await
        .map_err(self.db())?;
        Ok(new.is_some())
    }

    /// The runs [`crate::Store::load_runs`] returns.
    pub(crate) async fn load_runs<'e>(
        &self,
        conn: impl Executor<'e, Database = DB>,
        per_key: usize,
    ) -> Result<Vec<RunRecord>> {
        let rows = sqlx::query(LOAD_RUNS)
            .bind(per_key as i64)
            .fetch_all(conn)
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
}
