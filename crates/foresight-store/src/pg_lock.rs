//! One single-mode service per PostgreSQL database: the advisory lock [`SERVICE_LOCK`], held
//! on a connection of its own for the service's whole life (advisory locks belong to a
//! session, and are per database). Peer dispatchers hold it shared instead, beside one
//! another, plus one exclusive lock per site; they claim their jobs through leases, so a
//! single-mode service and dispatchers never run on one database together.
//!
//! The holder's session calls itself after its service ([`Holder::application_name`]); a
//! refused service is shown that name, the holder's client address and when its session
//! began, from `pg_locks` and `pg_stat_activity`.
//!
//! # When the lock's connection ends
//! A restart of the PostgreSQL server (or a terminated session) ends the lock with the
//! connection, while the service goes on. Then:
//! - every write of a single-mode service first checks, in its own transaction, that the
//!   very session that took the lock (its pid and start, which a restart cannot reuse
//!   together) still holds it ([`PgLock::fence`]); a write that finds it gone fails like a
//!   lost connection: the service keeps the records to write again and starts nothing,
//!   since it starts a job only once its record is written;
//! - a keeper task looks at the connection every second (at once after a failed check),
//!   and once the server answers again takes the lock again on a new connection, which
//!   lets the writes through;
//! - if another service took the lock first, this one has lost the database for good:
//!   [`PgLock::taken_over`] says so, the writes stay refused, and the service stops.
//!
//! What this leaves: a write whose check passed, made while the holding session ends and
//! another service takes the lock and reads, may land after that reading. The session
//! ending mid-transaction that way needs the lock's connection alone to end (a restart ends
//! every transaction as well).

use crate::{Holder, Result, StoreError};
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::{watch, Mutex, Notify};

/// The advisory lock (one 64-bit key) a service holds on its database: `"Foresigh"` in
/// ASCII, `0x466f726573696768`. Single mode holds it exclusively, dispatchers shared. A
/// dispatcher's site lock uses the two-key space (`hashtext('foresight site')`,
/// `hashtext(site)`), which never meets this one. Never change it: servers of two versions
/// would not see each other's lock.
const SERVICE_LOCK: i64 = 0x466f_7265_7369_6768;

/// How long taking the lock waits for the server before saying it cannot be reached.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the keeper looks at the lock's connection.
const KEEP_EVERY: Duration = Duration::from_secs(1);

/// A session of the database: its backend's pid and the instant it began, which together
/// name it even across a server restart that reuses pids.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
struct Session {
    pid: i32,
    started: String,
}

/// Where this service's hold on the database stands.
#[derive(Clone, Debug)]
enum Standing {
    /// Held by this session (which may have ended: the fence finds out).
    Held(Session),
    /// Another service took it while this one's session was gone; its name.
    TakenOver(String),
    /// Let go by this service ([`PgLock::release`]).
    Released,
}

/// The held lock. Clones share it.
#[derive(Clone, Debug)]
pub(crate) struct PgLock {
    shared: Arc<Shared>,
    /// Wakes the keeper early (a failed fence).
    poke: Arc<Notify>,
}

/// The lock's state, shared by the store's clones and the keeper.
#[derive(Debug)]
struct Shared {
    target: Target,
    /// The lock's connection; `None` once released.
    conn: Mutex<Option<PgConnection>>,
    standing: watch::Sender<Standing>,
}

/// What the lock is taken on, and how.
#[derive(Debug)]
struct Target {
    /// To connect (again), as the holder.
    options: PgConnectOptions,
    /// The database's URL without its password.
    name: String,
    /// A dispatcher's site: it holds the lock shared, and its site's lock.
    site: Option<String>,
}

impl PgLock {
    /// Takes the database named `name` for `holder` (as the dispatcher of `site`), or says
    /// who holds it.
    pub(crate) async fn take(
        options: &PgConnectOptions,
        name: &str,
        site: Option<&str>,
        holder: &Holder,
    ) -> Result<PgLock> {
        let target = Target {
            options: options.clone().application_name(&holder.application_name()),
            name: name.to_string(),
            site: site.map(str::to_string),
        };
        let (conn, session) = target
            .connect_and_lock()
            .await?
            .map_err(|held| target.in_use(held.name))?;
        let shared = Shared {
            target,
            conn: Mutex::new(Some(conn)),
            standing: watch::channel(Standing::Held(session)).0,
        };
        let lock = PgLock {
            shared: Arc::new(shared),
            poke: Arc::new(Notify::new()),
        };
        tokio::spawn(keep(Arc::downgrade(&lock.shared), lock.poke.clone()));
        Ok(lock)
    }

    /// Refuses the write of transaction `tx` unless this service holds the database now.
    pub(crate) async fn fence(&self, tx: &mut PgConnection) -> Result<()> {
        let target = &self.shared.target;
        let standing = self.shared.standing.borrow().clone();
        let session = match standing {
            Standing::Held(session) => session,
            Standing::TakenOver(holder) => return Err(target.in_use(holder)),
            Standing::Released => return Err(target.db(sqlx::Error::PoolClosed)),
        };
        let held: bool = sqlx::query_scalar(&format!(
            "SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
             WHERE l.pid = $2 AND a.backend_start::text = $3 AND {SERVICE_LOCK_ROW})"
        ))
        .bind(SERVICE_LOCK)
        .bind(session.pid)
        .bind(&session.started)
        .fetch_one(tx)
        .await
        .map_err(|source| target.db(source))?;
        if held {
            return Ok(());
        }
        self.poke.notify_one();
        Err(StoreError::LockLost {
            location: target.name.clone(),
        })
    }

    /// Waits until another service has taken the database from this one; never returns
    /// while this one holds it, or may take it again.
    pub(crate) async fn taken_over(&self) -> StoreError {
        let mut rx = self.shared.standing.subscribe();
        let seen = rx
            .wait_for(|s| matches!(s, Standing::TakenOver(_)))
            .await
            .map(|s| s.clone());
        match seen {
            Ok(Standing::TakenOver(holder)) => self.shared.target.in_use(holder),
            // The sender lives in `shared`, which outlives `self`.
            _ => std::future::pending().await,
        }
    }

    /// Lets the database go, before this returns: the server would release the lock when
    /// the connection ends, but only after the client has gone, so that a store opened
    /// again at once could still find it held. The keeper stops with it.
    pub(crate) async fn release(&self) {
        if let Some(mut conn) = self.shared.conn.lock().await.take() {
            let _ = sqlx::query("SELECT pg_advisory_unlock_all()")
                .execute(&mut conn)
                .await;
            let _ = conn.close().await;
        }
        self.shared.standing.send_replace(Standing::Released);
    }
}

/// A lock held by another session: who, as a refusal names it, and the session (unknown
/// when it let go in between, or cannot be seen).
#[derive(Debug)]
struct Held {
    name: String,
    session: Option<Session>,
}

impl Held {
    /// Held by `taker`, or by `unknown` when it cannot be seen.
    fn by(taker: Option<Taker>, unknown: String) -> Held {
        match taker {
            Some(t) => Held {
                name: t.name,
                session: Some(Session {
                    pid: t.pid,
                    started: t.started,
                }),
            },
            None => Held {
                name: unknown,
                session: None,
            },
        }
    }
}

/// The `pg_locks l` row of [`SERVICE_LOCK`] (`$1`), granted, in this database.
const SERVICE_LOCK_ROW: &str = "l.locktype = 'advisory' AND l.granted AND l.database = \
     (SELECT oid FROM pg_database WHERE datname = current_database()) \
     AND l.classid = ($1::bigint >> 32)::oid AND l.objid = ($1::bigint & 4294967295)::oid \
     AND l.objsubid = 1";

/// The `pg_locks l` row of the lock of site `$1`, granted, in this database.
const SITE_LOCK_ROW: &str = "l.locktype = 'advisory' AND l.granted AND l.database = \
     (SELECT oid FROM pg_database WHERE datname = current_database()) \
     AND l.classid = hashtext('foresight site')::oid AND l.objid = hashtext($1)::oid \
     AND l.objsubid = 2";

/// Looks at the lock's connection every [`KEEP_EVERY`] (or when poked) and takes the lock
/// again when it ended, until the lock is closed, dropped, or taken over.
async fn keep(shared: Weak<Shared>, poke: Arc<Notify>) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(KEEP_EVERY) => {}
            () = poke.notified() => {}
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        if !matches!(*shared.standing.borrow(), Standing::Held(_)) {
            return;
        }
        shared.keep_once().await;
    }
}

impl Shared {
    /// One look at the lock's connection: nothing to do while it answers; else takes the
    /// lock again on a new one, or learns that another service has it.
    async fn keep_once(&self) {
        let mut conn = self.conn.lock().await;
        let Some(c) = conn.as_mut() else {
            return; // closed
        };
        if c.ping().await.is_ok() {
            return;
        }
        let old = match &*self.standing.borrow() {
            Standing::Held(session) => session.clone(),
            Standing::TakenOver(_) | Standing::Released => return,
        };
        let name = &self.target.name;
        match self.target.connect_and_lock().await {
            Ok(Ok((new, session))) => {
                tracing::info!(database = %name, "took the database's lock again");
                *conn = Some(new);
                self.standing.send_replace(Standing::Held(session));
            }
            Ok(Err(held)) if held.session.as_ref() == Some(&old) => {
                // Our old session, not yet ended on the server's side: it still holds the
                // lock for us, and the fence still lets writes through; try again later.
            }
            Ok(Err(held)) => {
                tracing::error!(database = %name, holder = %held.name, "another service took the database");
                self.standing.send_replace(Standing::TakenOver(held.name));
            }
            Err(e) => tracing::warn!("the lock on the database is gone for now: {e}"),
        }
    }
}

impl Target {
    /// Connects and takes the lock (a dispatcher's: shared, then its site's): the
    /// connection and its session, or who holds the lock instead (the inner `Err`).
    async fn connect_and_lock(&self) -> Result<std::result::Result<(PgConnection, Session), Held>> {
        let mut conn = tokio::time::timeout(CONNECT_TIMEOUT, self.options.connect())
            .await
            .map_err(|_| self.unreachable(format!("no answer within {CONNECT_TIMEOUT:?}")))?
            .map_err(|e| self.unreachable(e.to_string()))?;
        match self.try_lock(&mut conn).await {
            Ok(None) => {
                let session = sqlx::query_as(
                    "SELECT pid, backend_start::text AS started FROM pg_stat_activity \
                     WHERE pid = pg_backend_pid()",
                )
                .fetch_one(&mut conn)
                .await
                .map_err(|e| self.db(e))?;
                Ok(Ok((conn, session)))
            }
            Ok(Some(holder)) => {
                let _ = conn.close().await;
                Ok(Err(holder))
            }
            Err(e) => Err(self.db(e)),
        }
    }

    /// Takes the lock on `conn`: `None`, or who holds it.
    async fn try_lock(&self, conn: &mut PgConnection) -> sqlx::Result<Option<Held>> {
        let sql = match self.site {
            Some(_) => "SELECT pg_try_advisory_lock_shared($1)",
            None => "SELECT pg_try_advisory_lock($1)",
        };
        let taken: bool = sqlx::query_scalar(sql)
            .bind(SERVICE_LOCK)
            .fetch_one(&mut *conn)
            .await?;
        if !taken {
            let holder = holder_of(conn, Key::Service).await?;
            return Ok(Some(Held::by(holder, "another service".into())));
        }
        let Some(site) = &self.site else {
            return Ok(None);
        };
        let mine: bool = sqlx::query_scalar(
            "SELECT pg_try_advisory_lock(hashtext('foresight site'), hashtext($1))",
        )
        .bind(site)
        .fetch_one(&mut *conn)
        .await?;
        if mine {
            return Ok(None);
        }
        let holder = holder_of(conn, Key::Site(site)).await?;
        let mut held = Held::by(holder, format!("another dispatcher of site {site:?}"));
        if held.session.is_some() {
            held.name = format!("another dispatcher of site {site:?}: {}", held.name);
        }
        Ok(Some(held))
    }

    fn in_use(&self, holder: String) -> StoreError {
        StoreError::InUse {
            location: self.name.clone(),
            holder,
        }
    }

    fn unreachable(&self, reason: String) -> StoreError {
        StoreError::Unreachable {
            location: self.name.clone(),
            reason,
        }
    }

    fn db(&self, source: sqlx::Error) -> StoreError {
        StoreError::Database {
            path: self.name.clone(),
            source,
        }
    }
}

/// The lock a refusal names the holder of.
#[derive(Clone, Copy)]
enum Key<'a> {
    /// [`SERVICE_LOCK`].
    Service,
    /// A dispatcher site's lock.
    Site(&'a str),
}

/// Who holds a lock: its session's name as a refusal shows it (`foresight (pid 12 on
/// node1, data /srv/f) from 10.0.0.5, connected since 2025-01-01T00:00:00Z`), and the
/// session.
#[derive(Debug, sqlx::FromRow)]
struct Taker {
    name: String,
    pid: i32,
    started: String,
}

/// The oldest session holding `key`, if any still does.
async fn holder_of(conn: &mut PgConnection, key: Key<'_>) -> sqlx::Result<Option<Taker>> {
    let row = match key {
        Key::Service => SERVICE_LOCK_ROW,
        Key::Site(_) => SITE_LOCK_ROW,
    };
    let sql = format!(
        "SELECT COALESCE(NULLIF(a.application_name, ''), 'a session') || ' from ' || \
         COALESCE(host(a.client_addr), 'a local socket') || ', connected since ' || \
         to_char(a.backend_start AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') AS name, \
         a.pid, a.backend_start::text AS started \
         FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE {row} \
         ORDER BY a.backend_start LIMIT 1"
    );
    let query = sqlx::query_as(&sql);
    let query = match key {
        Key::Service => query.bind(SERVICE_LOCK),
        Key::Site(site) => query.bind(site.to_string()),
    };
    query.fetch_optional(conn).await
}
