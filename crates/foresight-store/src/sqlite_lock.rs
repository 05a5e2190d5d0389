//! One service per SQLite file: an exclusive `flock` on the database file itself, taken
//! before the first connection opens and let go after the last one closes.
//!
//! The file itself, not a lock file beside it nor the data directory: every path that
//! reaches the database (another data directory's `--store`, a symbolic or hard link, a bind
//! mount) reaches the same inode and so the same lock. SQLite's own locks are POSIX `fcntl`
//! record locks, which on Linux's local file systems are independent of `flock`: the
//! store's connections neither see this lock nor are blocked by it (the tests below hold
//! that). Over NFS, Linux emulates `flock` with `fcntl` locks and the two would meet; SQLite
//! is not safe over NFS in any case.
//!
//! The descriptor is never closed while a connection is open: closing any descriptor of a
//! file drops every `fcntl` lock the process holds on it, SQLite's included.
//!
//! Who holds the file is written into it, in the one-row table `holder` (host, PID, data
//! directory, since when), once the lock is held and the schema is up to date; a refused
//! service reads it through a read-only connection. A table rather than a file beside the
//! database, for the reason above: whatever path reached the database reaches the record.
//! The row is read only while the lock is held, so a row left by a server that died never
//! names it; it can name the previous holder only in the moment between a new holder's lock
//! and its write, during its schema migration.

use crate::{Holder, Result, StoreError};
use nix::fcntl::{Flock, FlockArg};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection, SqlitePool};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Duration;

/// How long a busy lock is tried again before the open gives up. A server killed while it
/// was starting a job leaves the lock with the child it had just forked until that child's
/// `exec` closes the descriptor (it is close-on-exec): a restart at once must wait out that
/// moment, not refuse.
pub(crate) const BUSY_FOR: Duration = Duration::from_secs(3);

/// The held lock on a database file; dropping it lets the file go.
#[derive(Debug)]
pub(crate) struct FileLock {
    _file: Flock<File>,
}

impl FileLock {
    /// Takes the lock on the database at `path`, creating the file empty (an empty file is
    /// an empty SQLite database) and private when it is missing, trying for `patience`
    /// while it is busy; refuses naming its holder.
    pub(crate) async fn acquire(path: &Path, patience: Duration) -> Result<FileLock> {
        let name = path.display().to_string();
        let io = |e: std::io::Error| StoreError::Database {
            path: name.clone(),
            source: sqlx::Error::Io(e),
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(io)?;
        match lock_within(file, patience).await {
            Ok(file) => Ok(FileLock { _file: file }),
            Err(nix::errno::Errno::EWOULDBLOCK) => Err(StoreError::InUse {
                location: name,
                holder: read_holder(path).await,
            }),
            Err(e) => Err(io(e.into())),
        }
    }
}

/// Takes the lock, trying again every 50 ms while it is busy, for at most `patience`.
async fn lock_within(
    file: File,
    patience: Duration,
) -> std::result::Result<Flock<File>, nix::errno::Errno> {
    let deadline = tokio::time::Instant::now() + patience;
    let mut file = file;
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(locked) => return Ok(locked),
            Err((f, nix::errno::Errno::EWOULDBLOCK)) if tokio::time::Instant::now() < deadline => {
                file = f;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err((_, e)) => return Err(e),
        }
    }
}

/// Writes `holder` as the holder of the database behind `pool`, since now.
pub(crate) async fn record_holder(pool: &SqlitePool, holder: &Holder) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT OR REPLACE INTO holder (id, host, pid, data_dir, since) \
         VALUES (1, ?, ?, ?, strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))",
    )
    .bind(&holder.host)
    .bind(holder.pid as i64)
    .bind(&holder.data_dir)
    .execute(pool)
    .await
    .map(drop)
}

/// The `holder` row.
#[derive(sqlx::FromRow)]
struct HolderRow {
    host: String,
    pid: i64,
    data_dir: Option<String>,
    since: String,
}

/// The holder recorded in the database at `path`, as a refusal names it; what went wrong
/// instead when it cannot be read.
async fn read_holder(path: &Path) -> String {
    let read = async {
        let mut c = SqliteConnectOptions::new()
            .filename(path)
            .read_only(true)
            .connect()
            .await?;
        let row = sqlx::query_as::<_, HolderRow>(
            "SELECT host, pid, data_dir, since FROM holder WHERE id = 1",
        )
        .fetch_optional(&mut c)
        .await;
        let _ = c.close().await;
        row
    };
    match read.await {
        Ok(Some(row)) => {
            let holder = Holder {
                host: row.host,
                pid: row.pid as u32,
                data_dir: row.data_dir,
            };
            format!("{holder}, since {}", row.since)
        }
        Ok(None) => "another process (it has not said who it is)".into(),
        Err(e) => format!("another process (its record does not read: {e})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::SqliteConnection;

    async fn connect(path: &Path) -> SqliteConnection {
        SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
            .connect()
            .await
            .expect("connect")
    }

    #[tokio::test]
    async fn sqlite_reads_and_writes_a_file_this_lock_holds() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f.db");
        let _lock = FileLock::acquire(&path, Duration::ZERO)
            .await
            .expect("lock");
        let mut c = connect(&path).await;
        sqlx::query("CREATE TABLE t (x INTEGER)")
            .execute(&mut c)
            .await
            .expect("create");
        sqlx::query("INSERT INTO t VALUES (1)")
            .execute(&mut c)
            .await
            .expect("insert");
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM t")
            .fetch_one(&mut c)
            .await
            .expect("count");
        assert_eq!(n, 1);
    }

    #[tokio::test]
    async fn sqlites_own_exclusive_lock_does_not_block_this_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f.db");
        let mut c = connect(&path).await;
        sqlx::query("CREATE TABLE t (x INTEGER)")
            .execute(&mut c)
            .await
            .expect("create");
        // An exclusive transaction holds SQLite's fcntl write locks.
        sqlx::query("BEGIN EXCLUSIVE")
            .execute(&mut c)
            .await
            .expect("begin");
        sqlx::query("INSERT INTO t VALUES (1)")
            .execute(&mut c)
            .await
            .expect("insert");
        let lock = FileLock::acquire(&path, Duration::ZERO)
            .await
            .expect("lock");
        sqlx::query("COMMIT").execute(&mut c).await.expect("commit");
        drop(lock);
    }

    #[tokio::test]
    async fn a_second_lock_is_refused_naming_the_recorded_holder_and_a_dropped_one_frees_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f.db");
        let first = FileLock::acquire(&path, Duration::ZERO)
            .await
            .expect("first");
        let unnamed = FileLock::acquire(&path, Duration::ZERO)
            .await
            .expect_err("second")
            .to_string();
        assert!(
            unnamed.contains("another process (its record does not read"),
            "{unnamed}"
        );
        let pool = SqlitePool::connect_with(
            SqliteConnectOptions::new()
                .filename(&path)
                .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal),
        )
        .await
        .expect("pool");
        sqlx::migrate!("./migrations/sqlite")
            .run(&pool)
            .await
            .expect("migrate");
        let holder = Holder {
            host: "node1".into(),
            pid: 42,
            data_dir: Some("/srv/f".into()),
        };
        record_holder(&pool, &holder).await.expect("record");
        let named = FileLock::acquire(&path, Duration::from_millis(100))
            .await
            .expect_err("third");
        let StoreError::InUse { location, holder } = named else {
            panic!("{named}");
        };
        assert_eq!(location, path.display().to_string());
        assert!(
            holder.starts_with("the server with PID 42 on node1 (data directory /srv/f), since 2"),
            "{holder}"
        );
        pool.close().await;
        drop(first);
        FileLock::acquire(&path, Duration::ZERO)
            .await
            .expect("free again");
    }
}
