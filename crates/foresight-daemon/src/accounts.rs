//! Isolation of jobs from each other and from the service.
//!
//! Each Foresight user maps to a Unix account: the one an administrator set on the user
//! record, else the `[unix_user]` table's entry for the name (or its `"*"` entry), else the
//! account of the same name. When the daemon runs as root, every local job runs as its
//! user's account (the supervisor drops to it before `exec`), and a submission by a user
//! whose account does not exist, or whose account would be root without an administrator
//! having chosen it, is refused with 403. The data directory keeps what jobs must not read
//! out of their reach: see [`prepare_data_dir`].

use crate::refusal::Refusal;
use crate::world::World;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

impl World {
    /// The Unix account `user`'s local jobs run as, and whether an administrator chose it
    /// (only a chosen account may be root).
    pub fn unix_account(&self, user: &str) -> (String, bool) {
        if let Some(a) = self.users.get(user).and_then(|u| u.unix_user.clone()) {
            return (a, true);
        }
        match self
            .unix_users
            .get(user)
            .or_else(|| self.unix_users.get("*"))
        {
            Some(a) => (a.clone(), true),
            None => (user.to_string(), false),
        }
    }
}

/// Refuses (403, naming the user and the account) a submission whose local parts could not
/// run as a proper account. Only checked when the daemon is root and has a local cluster:
/// otherwise every job runs as the daemon's own user and the account is not used.
pub(crate) fn check_runs_as(w: &World, user: &str) -> Result<(), Refusal> {
    if !foresight_rm::account::running_as_root() || w.clusters.iter().all(|c| c.cfg.is_slurm()) {
        return Ok(());
    }
    let (account, chosen) = w.unix_account(user);
    match foresight_rm::account::lookup(&account) {
        Ok(Some(a)) if a.uid == 0 && !chosen => Err(Refusal::forbidden(
            "user",
            format!(
                "user {user:?} would run as root (the account of the same name); jobs run as \
                 root only when an administrator maps the user to root on purpose \
                 (`foresight user modify {user} --unix-user root`)"
            ),
        )),
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(Refusal::forbidden(
            "user",
            format!(
                "user {user:?} has no Unix account to run local jobs as: account {account:?} \
                 does not exist on this host (an administrator can map the user with \
                 `foresight user modify {user} --unix-user ACCOUNT` or the [unix_user] table)"
            ),
        )),
        Err(e) => Err(Refusal::internal(e)),
    }
}

/// Makes the data directory safe before anything is written: files the service creates are
/// private (umask 077: database, WAL, tokens, attempt directories with each job's spec and
/// environment); the directory and `output/` are 0711, so a job's user can open its own
/// output files (0600, owned by that user) by name but nobody can list them; files left by
/// earlier versions are made private too.
pub(crate) fn prepare_data_dir(dir: &Path) -> anyhow::Result<()> {
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
    chmod(dir, 0o711)?;
    chmod(&output, 0o711)?;
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
