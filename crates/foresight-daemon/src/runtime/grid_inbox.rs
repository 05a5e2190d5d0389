//! The site's inbox of the grid's input files: one directory per part (named as the centre
//! names the part), which becomes the part's working directory. The files are fetched from
//! the centre (`foresight_rm::grid::receive`), and the directory is handed to the Unix
//! account grid jobs run as, when the service is root and that account is another.

use crate::runtime::grid_site::GridAgent;
use crate::state::refusal::Refusal;
use foresight_rm::grid::{receive, FileOffer, Reply};
use foresight_rm::PartHandle;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The longest a site spends fetching one part's inputs; the centre bounds it with its own
/// `copy_timeout_seconds` (the command is unanswered past it).
const MOST_FETCH: Duration = Duration::from_secs(24 * 3_600);

impl GridAgent {
    /// The directory of part `name`'s inputs.
    pub(crate) fn inbox_of(&self, name: &str) -> PathBuf {
        self.cfg
            .inbox_dir
            .clone()
            .unwrap_or_else(|| self.service.cfg.data_dir.join("grid-inbox"))
            .join(name)
    }

    /// [`foresight_rm::grid::Op::Fetch`]: brings the part's files into its directory.
    pub(crate) async fn fetch(
        &self,
        part: &PartHandle,
        files: &[FileOffer],
        name: &str,
    ) -> Result<Reply, Refusal> {
        let dir = self.inbox_of(name);
        tokio::fs::create_dir_all(&dir).await.map_err(|e| {
            Refusal::conflict(format!(
                "making the grid's inbox {}: {e} ([grid] inbox_dir)",
                dir.display()
            ))
        })?;
        let deadline = tokio::time::Instant::now() + MOST_FETCH;
        let got = receive(
            &self.client,
            (part.job, part.attempt),
            files,
            &dir,
            deadline,
        )
        .await
        .map_err(|e| Refusal::conflict(e.to_string()))?;
        let account = {
            let w = self.service.world();
            w.unix_account(&self.cfg.user).0
        };
        hand_over(&dir, &account).map_err(Refusal::conflict)?;
        Ok(Reply::Fetched {
            bytes: got.bytes,
            millis: got.millis,
        })
    }
}

/// Gives `dir` and its files to Unix account `account` when the service is root and the
/// account is another, so that the part, which runs as it, reads and writes there. The
/// service made every entry itself, so no link planted by someone else is followed.
fn hand_over(dir: &Path, account: &str) -> Result<(), String> {
    if !foresight_rm::account::running_as_root() {
        return Ok(());
    }
    let a = match foresight_rm::account::lookup(account)? {
        Some(a) if a.uid != 0 => a,
        _ => return Ok(()),
    };
    let give = |p: &Path| {
        std::os::unix::fs::lchown(p, Some(a.uid), Some(a.gid))
            .map_err(|e| format!("giving {} to {:?}: {e}", p.display(), a.name))
    };
    for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        give(&entry.path())?;
    }
    give(dir)
}
