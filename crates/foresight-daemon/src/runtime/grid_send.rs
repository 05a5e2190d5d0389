//! The site's side of a part's files going up to the centre: once the part ended, the
//! centre asks for its outputs and workflow edges' files ([`Op::Send`]). Each must be a
//! regular file (not a link, a pipe or a device the part left there), and is read as the
//! grid's Unix account (the site never sends a file that account could not read) into a
//! spool of the service's own, `.outgoing/<part>.<n>` in the inbox (one per command), hashed
//! on the way, then put to the centre in signed chunks from the byte the centre already
//! holds ([`foresight_rm::grid::upload`]).
//!
//! [`Op::Send`]: foresight_rm::grid::Op::Send

use crate::runtime::grid_inbox::private_dir;
use crate::runtime::grid_site::GridAgent;
use crate::state::refusal::Refusal;
use foresight_rm::grid::{check_relative, upload, Reply, SentFile, Wanted};
use foresight_rm::PartHandle;

/// Where files on their way up are kept, in the inbox.
const OUTGOING: &str = ".outgoing";

/// Numbers each command's spool: a Send asked again while the first still runs has its own.
static SPOOLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl GridAgent {
    /// [`foresight_rm::grid::Op::Send`]: sends the part's files `files` that it wrote.
    pub(crate) async fn send(
        &self,
        cluster: &str,
        part: &PartHandle,
        files: &[Wanted],
        name: &str,
        deadline: tokio::time::Instant,
    ) -> Result<Reply, Refusal> {
        let dir = self.inbox_of(cluster, name);
        if !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
            return Err(Refusal::not_found(format!(
                "part {name} has no working directory here"
            )));
        }
        let account = {
            let w = self.service.world();
            w.unix_account(&self.cfg.user).0
        };
        let a = crate::runtime::staging::as_account(&account).map_err(Refusal::conflict)?;
        let outgoing = self.inbox().join(OUTGOING);
        private_dir(&outgoing).map_err(Refusal::conflict)?;
        let spool = outgoing.join(format!(
            "{name}.{}",
            SPOOLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&spool);
        private_dir(&spool).map_err(Refusal::conflict)?;
        let began = tokio::time::Instant::now();
        let sent = self
            .send_each(cluster, part, files, (&dir, &spool), a.as_ref(), deadline)
            .await;
        let _ = std::fs::remove_dir_all(&spool);
        let (files, bytes) = sent?;
        Ok(Reply::Sent {
            files,
            bytes,
            millis: began.elapsed().as_millis() as u64,
        })
    }

    /// Reads each of `files` the part wrote in `dir` into `spool` as account `a` and puts
    /// it to the centre; the files sent and the bytes that went over the network.
    async fn send_each(
        &self,
        cluster: &str,
        part: &PartHandle,
        files: &[Wanted],
        (dir, spool): (&std::path::Path, &std::path::Path),
        a: Option<&foresight_rm::account::Account>,
        deadline: tokio::time::Instant,
    ) -> Result<(Vec<SentFile>, u64), Refusal> {
        let mut sent = Vec::with_capacity(files.len());
        let mut bytes = 0;
        for (i, w) in files.iter().enumerate() {
            check_relative(&w.path).map_err(|e| Refusal::invalid("path", e.to_string()))?;
            let from = dir.join(&w.path);
            match std::fs::symlink_metadata(&from) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(Refusal::conflict(format!("{}: {e}", w.path))),
                // A link, a pipe or a device is not sent: `cat` would follow or read it
                // for ever.
                Ok(m) if !m.is_file() => {
                    return Err(Refusal::conflict(format!(
                        "{} is not a regular file: not sent",
                        w.path
                    )))
                }
                Ok(_) => {}
            }
            let copy = spool.join(i.to_string());
            let (len, sha256) = tokio::time::timeout_at(
                deadline,
                crate::runtime::grid_outbox::read_as(&from, &copy, a, None),
            )
            .await
            .map_err(|_| Refusal::conflict(format!("reading {}: not done in time", w.path)))?
            .map_err(Refusal::conflict)?;
            bytes += upload(
                &self.client,
                cluster,
                (part.job, part.attempt),
                &w.path,
                &copy,
                &sha256,
                w.from,
                deadline,
            )
            .await
            .map_err(|e| Refusal::conflict(e.to_string()))?;
            sent.push(SentFile {
                path: w.path.clone(),
                bytes: len,
                sha256,
            });
        }
        Ok((sent, bytes))
    }
}
