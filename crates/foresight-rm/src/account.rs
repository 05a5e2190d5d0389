//! The Unix accounts jobs run as. A Foresight user maps to one account; when the daemon (and
//! so every supervisor) runs as root, a job runs as its account and nothing else: std's
//! `Command::uid`/`gid` drop the supplementary groups (`setgroups(0)`), then set the gid,
//! then the uid, in the child just before `exec`. When the daemon is not root, jobs run as
//! the daemon's own user and the account is not used.

use std::path::PathBuf;

/// A Unix account as the password database has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    /// Login name.
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Primary group id: the only group a job keeps.
    pub gid: u32,
    /// Home directory, exported as `HOME`.
    pub home: PathBuf,
    /// Login shell, exported as `SHELL`.
    pub shell: PathBuf,
}

/// Looks `name` up in the password database; `Ok(None)` when there is no such account.
pub fn lookup(name: &str) -> Result<Option<Account>, String> {
    if name.is_empty() || name.contains('\0') {
        return Ok(None);
    }
    match nix::unistd::User::from_name(name) {
        Ok(Some(u)) => Ok(Some(Account {
            name: u.name,
            uid: u.uid.as_raw(),
            gid: u.gid.as_raw(),
            home: u.dir,
            shell: u.shell,
        })),
        Ok(None) => Ok(None),
        Err(e) => Err(format!("cannot look up Unix account {name:?}: {e}")),
    }
}

/// The account this process runs as, for the environment of jobs that run as the service's
/// own user (it is not root); `None` when the password database has no entry for it.
pub fn current() -> Option<Account> {
    let uid = nix::unistd::geteuid();
    let u = nix::unistd::User::from_uid(uid).ok()??;
    Some(Account {
        name: u.name,
        uid: uid.as_raw(),
        gid: u.gid.as_raw(),
        home: u.dir,
        shell: u.shell,
    })
}

/// True when this process may switch to other accounts (effective uid 0).
pub fn running_as_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Files this process creates from now on are private to its user (umask 077): the daemon's
/// database, WAL, tokens and attempt directories must not be readable by jobs.
pub fn private_umask() {
    use nix::sys::stat::{umask, Mode};
    umask(Mode::from_bits_truncate(0o077));
}

/// The usual umask 022, which a job inherits from its supervisor (the daemon's 077 is for the
/// daemon's own files, not the job's).
pub(crate) fn job_umask() {
    use nix::sys::stat::{umask, Mode};
    umask(Mode::from_bits_truncate(0o022));
}
