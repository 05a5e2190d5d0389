//! The site's inbox of the grid's input files: one directory per part (named as the centre
//! names the part), which becomes the part's working directory. The files are fetched from
//! the centre (`foresight_rm::grid::receive`) into a directory of the service's own,
//! `.incoming/<cluster>/<part>`, where a cut-off transfer resumes; once every file is checked they move
//! into a fresh directory of the part, which is handed to the Unix account grid jobs run as
//! when the service is root and that account is another. The service never writes in a
//! directory that account owns, so no link it plants there is followed.

use crate::runtime::grid_site::GridAgent;
use crate::state::refusal::Refusal;
use foresight_rm::grid::{receive, FileOffer, Reply};
use foresight_rm::PartHandle;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where transfers in progress are kept, in the inbox (no part's name starts with a dot).
const INCOMING: &str = ".incoming";

impl GridAgent {
    /// The inbox: `[grid] inbox_dir`, or `grid-inbox` in the data directory.
    pub(crate) fn inbox(&self) -> PathBuf {
        self.cfg
            .inbox_dir
            .clone()
            .unwrap_or_else(|| self.service.cfg.data_dir.join("grid-inbox"))
    }

    /// Where part `name` on lent cluster `cluster` runs (`<inbox>/<cluster>/<part>`): two
    /// parts of one job on two clusters of this site have one each.
    pub(crate) fn inbox_of(&self, cluster: &str, name: &str) -> PathBuf {
        self.inbox().join(cluster).join(name)
    }

    /// Makes the inbox and its directory for `cluster`, which grid jobs enter as they may
    /// enter the inbox (its mode, without write for others).
    fn cluster_inbox(&self, cluster: &str) -> Result<PathBuf, String> {
        use std::os::unix::fs::PermissionsExt;
        let inbox = self.inbox();
        private_dir(&inbox)?;
        let dir = inbox.join(cluster);
        private_dir(&dir)?;
        let mode = std::fs::metadata(&inbox)
            .map_err(|e| format!("{}: {e}", inbox.display()))?
            .permissions()
            .mode()
            & 0o755;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(dir)
    }

    /// The directory part `name` on `cluster` runs in, made (empty, the account's) when the
    /// centre sent it no files.
    pub(crate) fn workspace(
        &self,
        cluster: &str,
        name: &str,
        account: &str,
    ) -> Result<PathBuf, String> {
        let dir = self.cluster_inbox(cluster)?.join(name);
        if std::fs::symlink_metadata(&dir).is_err() {
            std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            hand_over(&dir, account)?;
        }
        Ok(dir)
    }

    /// [`foresight_rm::grid::Op::Fetch`]: brings the part's files into its directory.
    pub(crate) async fn fetch(
        &self,
        cluster: &str,
        part: &PartHandle,
        files: &[FileOffer],
        name: &str,
        deadline: tokio::time::Instant,
    ) -> Result<Reply, Refusal> {
        let inbox = self.inbox();
        let incoming = inbox.join(INCOMING);
        let cluster_dir = self.cluster_inbox(cluster).map_err(Refusal::conflict)?;
        for d in [&incoming, &incoming.join(cluster)] {
            private_dir(d).map_err(Refusal::conflict)?;
        }
        let partial = incoming.join(cluster).join(name);
        private_dir(&partial).map_err(Refusal::conflict)?;
        let got = receive(
            &self.client,
            cluster,
            (part.job, part.attempt),
            files,
            &partial,
            deadline,
        )
        .await
        .map_err(|e| Refusal::conflict(e.to_string()))?;
        let account = {
            let w = self.service.world();
            w.unix_account(&self.cfg.user).0
        };
        let dir = cluster_dir.join(name);
        move_in(&partial, &dir, files).map_err(Refusal::conflict)?;
        hand_over(&dir, &account).map_err(Refusal::conflict)?;
        Ok(Reply::Fetched {
            bytes: got.bytes,
            millis: got.millis,
        })
    }
}

/// Makes `dir` when missing, and refuses it unless it is a real directory of this service's
/// own account that no one else may write in: the service writes there as itself.
pub(crate) fn private_dir(dir: &Path) -> Result<(), String> {
    let said = |e: std::io::Error| format!("the grid's inbox {}: {e}", dir.display());
    if std::fs::symlink_metadata(dir).is_err() {
        std::fs::create_dir_all(dir).map_err(said)?;
    }
    let m = std::fs::symlink_metadata(dir).map_err(said)?;
    let ours = m.file_type().is_dir()
        && m.uid() == nix::unistd::geteuid().as_raw()
        && m.mode() & 0o022 == 0;
    if ours {
        Ok(())
    } else {
        Err(format!(
            "the grid's inbox {} must be a directory of the service's own account that no one \
             else may write in ([grid] inbox_dir)",
            dir.display()
        ))
    }
}

/// Moves the checked `files` from `partial` into a fresh directory `dir` (whatever was
/// there, a part of an earlier centre of the same name, is removed, never followed).
fn move_in(partial: &Path, dir: &Path, files: &[FileOffer]) -> Result<(), String> {
    let said = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    if let Ok(m) = std::fs::symlink_metadata(dir) {
        let gone = if m.file_type().is_dir() {
            std::fs::remove_dir_all(dir)
        } else {
            std::fs::remove_file(dir)
        };
        gone.map_err(|e| said(dir, e))?;
    }
    std::fs::create_dir(dir).map_err(|e| said(dir, e))?;
    for f in files {
        let to = dir.join(&f.name);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|e| said(parent, e))?;
        }
        std::fs::rename(partial.join(&f.name), &to).map_err(|e| said(&to, e))?;
    }
    let _ = std::fs::remove_dir_all(partial);
    Ok(())
}

/// Gives the tree at `dir` (the service's own, fresh) to Unix account `account` when the
/// service is root and the account is another, so that a part or a copy, which runs as it,
/// reads and writes there. What is inside first: until the directory is the account's,
/// nothing in it can be swapped; links are given, never followed.
pub(crate) fn hand_over(dir: &Path, account: &str) -> Result<(), String> {
    if !foresight_rm::account::running_as_root() {
        return Ok(());
    }
    let a = match foresight_rm::account::lookup(account)? {
        Some(a) if a.uid != 0 => a,
        _ => return Ok(()),
    };
    let said = |p: &Path, e: std::io::Error| format!("giving {} to {:?}: {e}", p.display(), a.name);
    // Depth first, each directory after what it holds.
    let mut todo = vec![(dir.to_path_buf(), false)];
    while let Some((d, seen)) = todo.pop() {
        let m = std::fs::symlink_metadata(&d).map_err(|e| said(&d, e))?;
        if m.is_dir() && !seen {
            todo.push((d.clone(), true));
            for e in std::fs::read_dir(&d).map_err(|e| said(&d, e))? {
                todo.push((e.map_err(|e| said(&d, e))?.path(), false));
            }
            continue;
        }
        std::os::unix::fs::lchown(&d, Some(a.uid), Some(a.gid)).map_err(|e| said(&d, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inbox_anyone_may_write_in_or_a_link_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let mine = t.path().join("mine");
        private_dir(&mine).unwrap();
        let open = t.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(private_dir(&open).unwrap_err().contains("no one else"));
        let link = t.path().join("link");
        std::os::unix::fs::symlink(&mine, &link).unwrap();
        assert!(private_dir(&link).is_err());
    }

    #[test]
    fn a_part_moves_into_a_fresh_directory_and_a_planted_link_is_removed_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let partial = t.path().join(".incoming/p");
        std::fs::create_dir_all(&partial).unwrap();
        std::fs::write(partial.join("in.dat"), "data").unwrap();
        let target = t.path().join("target");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("kept"), "kept").unwrap();
        let dir = t.path().join("p");
        std::os::unix::fs::symlink(&target, &dir).unwrap();
        let files = [FileOffer {
            name: "in.dat".into(),
            bytes: 4,
            sha256: String::new(),
        }];
        move_in(&partial, &dir, &files).unwrap();
        assert!(std::fs::symlink_metadata(&dir).unwrap().is_dir());
        assert_eq!(std::fs::read_to_string(dir.join("in.dat")).unwrap(), "data");
        assert_eq!(
            std::fs::read_to_string(target.join("kept")).unwrap(),
            "kept"
        );
        assert!(!partial.exists());
    }
}
