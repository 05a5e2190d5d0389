//! The local Unix socket: where callers on the service's host reach the API without a
//! token, known by their Unix account (the acceptor attaches each connection's peer uid as `LocalPeer`).
//!
//! A service run as root opens it to everyone (mode 0666): who may do what is decided per
//! request from the peer's uid, so reaching it grants nothing by itself. A service run as
//! an ordinary account keeps it to that account (0600): every job of such a service runs as
//! its account, so nobody else may submit through it without a token.

use crate::config::identity::check_socket_path;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use tokio::net::UnixListener;

/// A bound local socket; dropping it removes the socket file (unless another server has
/// replaced it meanwhile).
#[derive(Debug)]
pub struct LocalSocket {
    path: PathBuf,
    inode: u64,
}

impl LocalSocket {
    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for LocalSocket {
    fn drop(&mut self) {
        let ours = std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.inode);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Why a socket was not bound.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// A live server answers there already.
    #[error("{0} is the socket of another running server")]
    Taken(PathBuf),
    /// Anything else, with its cause.
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

/// Binds the local socket at `path` with `mode`, creating its directory (with `dir_mode`)
/// if missing. A socket file left by a server that is gone is replaced; a live one, or a
/// file that is not a socket, is not.
pub fn bind(
    path: &Path,
    mode: u32,
    dir_mode: u32,
) -> Result<(UnixListener, LocalSocket), BindError> {
    check_socket_path(path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.exists() {
            std::fs::create_dir_all(dir)
                .map_err(|e| anyhow::anyhow!("creating {}: {e}", dir.display()))?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(dir_mode))
                .map_err(|e| anyhow::anyhow!("chmod {dir_mode:o} {}: {e}", dir.display()))?;
        }
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(BindError::Taken(path.to_path_buf()));
            }
            std::fs::remove_file(path).map_err(|e| {
                anyhow::anyhow!("removing the stale socket {}: {e}", path.display())
            })?;
        }
        Ok(_) => {
            return Err(anyhow::anyhow!(
                "{} exists and is not a socket: move it away or set [identity] socket",
                path.display()
            )
            .into())
        }
        Err(_) => {}
    }
    let std_listener = std::os::unix::net::UnixListener::bind(path)
        .map_err(|e| anyhow::anyhow!("listening on {}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| anyhow::anyhow!("chmod {mode:o} {}: {e}", path.display()))?;
    let inode = std::fs::symlink_metadata(path)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
        .ino();
    std_listener
        .set_nonblocking(true)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let listener = UnixListener::from_std(std_listener)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok((
        listener,
        LocalSocket {
            path: path.to_path_buf(),
            inode,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stale_socket_is_replaced_a_live_one_is_not_and_drop_removes_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("run").join("s.sock");
        let (live, sock) = bind(&path, 0o666, 0o755).expect("bind");
        let mode = std::fs::metadata(&path)
            .expect("socket")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o666);
        assert!(matches!(
            bind(&path, 0o666, 0o755),
            Err(BindError::Taken(_))
        ));
        drop(live);
        // The listener is gone but its file stays: stale, so replaced.
        let (_again, sock2) = bind(&path, 0o600, 0o755).expect("rebind");
        let mode = std::fs::metadata(&path)
            .expect("socket")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
        drop(sock2);
        assert!(!path.exists(), "dropping the handle removes the socket");
        drop(sock);
        std::fs::write(&path, "x").expect("file");
        let err = bind(&path, 0o600, 0o755).expect_err("not a socket");
        assert!(err.to_string().contains("is not a socket"), "{err}");
    }
}
