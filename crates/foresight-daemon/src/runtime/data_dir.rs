//! The data directory: its modes ([`prepare`]), and one server per directory.
//!
//! One server per data directory: `DATA_DIR/server.lock`, held with an exclusive `flock` for
//! the server's whole life and holding its PID. Two servers on one directory would both
//! launch the same jobs and delete each other's `server.url`; the second one, after trying
//! for a few seconds, refuses instead, naming the PID that holds the lock. The kernel drops
//! the lock when the holder and the children it was forking have let go of it, even on
//! SIGKILL, so a stale file never blocks a restart; the file is never deleted (deleting it
//! would let a third server lock a new file while the second holds the old one).

use nix::fcntl::{Flock, FlockArg};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The held lock; dropping it (at the server's exit) releases it.
#[derive(Debug)]
pub struct DataDirLock {
    _file: Flock<File>,
}

impl DataDirLock {
    /// Takes the lock on `dir` and writes our PID into it, or says who holds it.
    pub fn acquire(dir: &Path) -> anyhow::Result<DataDirLock> {
        let path = dir.join("server.lock");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| anyhow::anyhow!("opening {}: {e}", path.display()))?;
        let mut file = match lock_within(file, BUSY_FOR) {
            Ok(locked) => locked,
            Err((mut file, nix::errno::Errno::EWOULDBLOCK)) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                let holder = match text.trim() {
                    "" => "another process".to_string(),
                    pid => format!("the server with PID {pid}"),
                };
                anyhow::bail!(
                    "data directory {} is in use by {holder} (it holds {}); stop that server \
                     first or give another --data-dir",
                    dir.display(),
                    path.display()
                );
            }
            Err((_, e)) => anyhow::bail!("locking {}: {e}", path.display()),
        };
        let write = |f: &mut File| -> std::io::Result<()> {
            f.set_len(0)?;
            f.rewind()?;
            writeln!(f, "{}", std::process::id())?;
            f.sync_all()
        };
        write(&mut file).map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
        Ok(DataDirLock { _file: file })
    }
}

/// How long a busy lock is tried again before the server gives up. A server killed with
/// SIGKILL while it was starting a job leaves the lock with the child it had just forked
/// until that child's `exec` closes it (the descriptor is close-on-exec): a restart at once
/// must wait out that moment, not refuse.
const BUSY_FOR: std::time::Duration = std::time::Duration::from_secs(3);

/// Takes the lock, trying again every 50 ms while it is busy, for at most `patience`.
fn lock_within(
    file: File,
    patience: std::time::Duration,
) -> Result<Flock<File>, (File, nix::errno::Errno)> {
    let deadline = std::time::Instant::now() + patience;
    let mut file = file;
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Err((f, nix::errno::Errno::EWOULDBLOCK)) if std::time::Instant::now() < deadline => {
                file = f;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

/// Makes the data directory safe before anything is written: files the service creates are
/// private (umask 077: database, WAL, tokens, attempt directories with each job's spec and
/// environment), and the directory itself and `output/` are 0700, so no job (whatever its
/// account) can list or open anything in them. With `traversable` (a service run as root
/// whose local socket is in the directory) the directory is 0711 instead: every account
/// may reach the socket by its name, none may list the directory, and everything else in
/// it keeps its own private mode. Jobs still write their output there: the
/// supervisor, still root, opens a job's output files (0600, owned by the job's account) and
/// hands them to the job as its stdout and stderr; users read them through the API. Modes
/// left by earlier versions are tightened too.
pub(crate) fn prepare(dir: &Path, traversable: bool) -> anyhow::Result<()> {
    foresight_rm::account::private_umask();
    let output = dir.join("output");
    std::fs::create_dir_all(&output)
        .map_err(|e| anyhow::anyhow!("creating data dir {}: {e}", dir.display()))?;
    let chmod = |path: &Path, mode: u32| -> anyhow::Result<()> {
        match std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(anyhow::anyhow!("chmod {mode:o} {}: {e}", path.display())),
        }
    };
    chmod(dir, if traversable { 0o711 } else { 0o700 })?;
    chmod(&output, 0o700)?;
    chmod(&dir.join("clusters"), 0o700)?;
    for name in [
        "foresight.db",
        "foresight.db-wal",
        "foresight.db-shm",
        "admin.token",
    ] {
        chmod(&dir.join(name), 0o600)?;
    }
    if let Ok(entries) = std::fs::read_dir(&output) {
        for entry in entries.flatten() {
            let meta = entry.metadata();
            if meta.is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o077 != 0) {
                chmod(&entry.path(), 0o600)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_names_the_holders_pid_and_a_dropped_lock_frees_the_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = DataDirLock::acquire(dir.path()).expect("first");
        let err = DataDirLock::acquire(dir.path())
            .expect_err("second")
            .to_string();
        assert!(
            err.contains(&format!("the server with PID {}", std::process::id())),
            "{err}"
        );
        drop(first);
        DataDirLock::acquire(dir.path()).expect("free again");
    }
}
