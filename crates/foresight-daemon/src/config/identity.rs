//! The `[identity]` table: how callers on the service's own host are known without a token
//! (the local socket and its peer credentials, as munge does for Slurm), and whether jobs
//! may run as root. See `docs/src/operator/identity.md`.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The socket of the host's system-wide service: where a CLI given no `--server` and no
/// data directory of its own looks last, so that every user of the host finds the service
/// root started without having to be told where its data lives.
pub const SYSTEM_SOCKET: &str = "/run/foresight/foresight.sock";

/// The system-wide socket: `FORESIGHT_SYSTEM_SOCKET` (for a host that keeps it elsewhere,
/// given alike to the service and its users), else [`SYSTEM_SOCKET`].
pub fn system_socket() -> PathBuf {
    match std::env::var_os("FORESIGHT_SYSTEM_SOCKET") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from(SYSTEM_SOCKET),
    }
}

/// The socket's name inside a data directory.
pub const SOCKET_NAME: &str = "foresight.sock";

/// The local socket and what a caller on it may be.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentityConfig {
    /// Where the local socket is [default: `DATA_DIR/foresight.sock`]. The CLI finds it there
    /// through `--data-dir`; a socket elsewhere is reached with `--socket`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<PathBuf>,
    /// Also answer at [`SYSTEM_SOCKET`], as the host's system-wide service [default: when
    /// the service runs as root on its default data directory, i.e. without `--data-dir`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_socket: Option<bool>,
    /// What a local account with no Foresight user gets on its first request over the
    /// socket: `create` (the default: an ordinary user of the account's name, its jobs run as
    /// that account, unlimited budget, no credentials) or `refuse` (401 naming `user add`).
    #[serde(default)]
    pub first_contact: FirstContact,
    /// Whether jobs may run as root (uid 0): `allow` (the default: root's own jobs, and
    /// those of users an administrator mapped to root, run as root, as with Slurm's
    /// `DisableRootJobs=NO`) or `refuse` (every job that would run as root is refused, 403).
    #[serde(default)]
    pub root_jobs: RootJobs,
}

/// [`IdentityConfig::first_contact`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FirstContact {
    /// An ordinary user is created for the account.
    #[default]
    Create,
    /// Refused until an administrator runs `user add`.
    Refuse,
}

/// [`IdentityConfig::root_jobs`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RootJobs {
    /// Jobs may run as root.
    #[default]
    Allow,
    /// No job runs as root.
    Refuse,
}

/// The longest path a Unix socket address holds (`sun_path`, less its final NUL).
const MAX_SOCKET_PATH: usize = 107;

impl IdentityConfig {
    /// The socket of a service whose data directory is `data_dir`.
    pub fn socket_path(&self, data_dir: &Path) -> PathBuf {
        self.socket
            .clone()
            .unwrap_or_else(|| data_dir.join(SOCKET_NAME))
    }

    /// Refuses a socket path the kernel cannot bind, naming the key.
    pub fn check(&self) -> anyhow::Result<()> {
        if let Some(p) = &self.socket {
            check_socket_path(p).map_err(|e| anyhow::anyhow!("identity.socket: {e}"))?;
        }
        Ok(())
    }
}

/// Refuses a socket path longer than a Unix socket address holds.
pub fn check_socket_path(p: &Path) -> anyhow::Result<()> {
    let len = p.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        anyhow::bail!(
            "{} is {len} bytes long, more than the {MAX_SOCKET_PATH} a Unix socket path may \
             have; set [identity] socket to a shorter path",
            p.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keys_read_and_default_as_documented() {
        let c: IdentityConfig = toml::from_str("").unwrap_or_default();
        assert_eq!(c.first_contact, FirstContact::Create);
        assert_eq!(c.root_jobs, RootJobs::Allow);
        assert_eq!(
            c.socket_path(Path::new("/d")),
            PathBuf::from("/d/foresight.sock")
        );
        let c: IdentityConfig = toml::from_str(
            "socket = \"/x/s.sock\"\nfirst_contact = \"refuse\"\nroot_jobs = \"refuse\"\n",
        )
        .unwrap_or_default();
        assert_eq!(c.first_contact, FirstContact::Refuse);
        assert_eq!(c.root_jobs, RootJobs::Refuse);
        assert_eq!(c.socket_path(Path::new("/d")), PathBuf::from("/x/s.sock"));
        assert!(toml::from_str::<IdentityConfig>("root_jobs = \"maybe\"").is_err());
        let long = IdentityConfig {
            socket: Some(PathBuf::from(format!("/{}", "a".repeat(200)))),
            ..Default::default()
        };
        assert!(long
            .check()
            .unwrap_err()
            .to_string()
            .contains("identity.socket"));
    }
}
