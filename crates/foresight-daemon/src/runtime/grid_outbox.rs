//! The centre's outbox of input files for sites on other hosts: before a part is submitted
//! to a site's cluster, each of its inputs is read as the job's Unix account (the centre
//! never serves a file the job's account could not read) into a directory of the part,
//! hashed on the way, and offered to the site, which fetches it
//! (`GET /grid/v1/files/{job}/{attempt}/{cluster}/{name}`, ranged). The outbox of a part
//! is removed however its staging ended.

use crate::runtime::Service;
use crate::state::staging::Copy;
use foresight_core::ClusterId;
use foresight_rm::grid::FileOffer;
use foresight_rm::PartHandle;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

impl Service {
    /// Where the inputs of part `(job, attempt)` on `site`'s cluster `cluster` (its name
    /// there) wait for the site: a directory per part, so that two parts of one job at one
    /// site never share one.
    pub(crate) fn outbox_of(&self, site: &str, cluster: &str, job: u64, attempt: u32) -> PathBuf {
        self.cfg
            .data_dir
            .join("grid-outbox")
            .join(site)
            .join(cluster)
            .join(format!("{job}.{attempt}"))
    }

    /// Sends the inputs `stage` names to the site of `cluster` for part `(job, attempt)`,
    /// whose working directory is `cwd` here (each lands at its path under it there),
    /// within `copy_timeout_seconds` for the reading and the transfer together.
    pub(crate) async fn send_inputs(
        &self,
        cluster: ClusterId,
        (job, attempt): (u64, u32),
        (stage, cwd): (&[Copy], &Path),
        account: Option<&str>,
    ) -> Result<(), String> {
        let c = &self.cfg.cluster[cluster];
        let Some((site, there)) = c
            .site
            .as_ref()
            .map(|s| (s.site.clone(), s.remote_cluster(c).to_owned()))
        else {
            return Err(format!(
                "cluster {} is on another host, and input files reach only a site's \
                 clusters",
                c.name
            ));
        };
        let deadline = tokio::time::Instant::now() + self.copy_timeout();
        let dir = self.outbox_of(&site, &there, job, attempt);
        let sent = self
            .offer_and_send(
                cluster,
                (job, attempt),
                (stage, cwd),
                account,
                &dir,
                deadline,
            )
            .await;
        // Emptied however it went: a failed staging is planned again, and copies anew.
        let _ = tokio::fs::remove_dir_all(&dir).await;
        let got = sent?;
        tracing::info!(
            job,
            cluster = cluster.as_num(),
            bytes = got.bytes,
            millis = got.millis,
            "inputs fetched by site {site}"
        );
        self.measured(cluster, got.bytes, got.millis);
        Ok(())
    }

    /// A transfer to or from `cluster`'s site carried `bytes` in `millis`: the planner's
    /// estimate of that link follows it, when it is large enough to say.
    pub(crate) fn measured(&self, cluster: ClusterId, bytes: u64, millis: u64) {
        if let Some(mb_s) = measured_rate(bytes, millis) {
            let mut w = self.world();
            w.broker.measured_link(cluster, mb_s);
            tracing::info!(
                cluster = cluster.as_num(),
                estimate_mb_s = w.broker.link_estimate(cluster),
                "the link's estimate follows a transfer at {mb_s:.1} MB/s"
            );
        }
    }

    /// Reads the inputs into the outbox `dir` and has the site of `cluster` fetch them.
    async fn offer_and_send(
        &self,
        cluster: ClusterId,
        (job, attempt): (u64, u32),
        (stage, cwd): (&[Copy], &Path),
        account: Option<&str>,
        dir: &Path,
        deadline: tokio::time::Instant,
    ) -> Result<foresight_rm::grid::Received, String> {
        let name = &self.cfg.cluster[cluster].name;
        let offers = offer(stage, cwd, dir, account, deadline)
            .await
            .map_err(|e| format!("{e} (copy_timeout_seconds)"))?;
        let part = PartHandle {
            job,
            attempt,
            external: None,
        };
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        self.managers[cluster]
            .fetch_inputs(&part, &offers, left)
            .await
            .map_err(|e| format!("sending inputs to cluster {name}: {e}"))
    }
}

/// The fewest bytes a transfer must carry to measure its link: a smaller one measures the
/// round trips more than the bandwidth.
const MEASURES_FROM_BYTES: u64 = 1 << 20;

/// The rate of a transfer of `bytes` in `millis`, MB/s, when it is large enough to say.
fn measured_rate(bytes: u64, millis: u64) -> Option<f64> {
    (bytes >= MEASURES_FROM_BYTES).then(|| {
        bytes as f64 / crate::state::staging::BYTES_PER_MB / (millis.max(1) as f64 / 1000.0)
    })
}

/// Reads every input of `stage` into `dir` as `account` (the service's own when `None`),
/// hashing each, no more of it than its bound ([`Copy::most`]); the offers a site fetches,
/// each named by its path under `cwd`.
async fn offer(
    stage: &[Copy],
    cwd: &Path,
    dir: &Path,
    account: Option<&str>,
    deadline: tokio::time::Instant,
) -> Result<Vec<FileOffer>, String> {
    let a = account
        .map(crate::runtime::staging::as_account)
        .transpose()?
        .flatten();
    let _ = tokio::fs::remove_dir_all(dir).await;
    tokio::fs::create_dir_all(dir)
        .await
        .map_err(|e| format!("making {}: {e}", dir.display()))?;
    let mut offers = Vec::with_capacity(stage.len());
    for c in stage {
        let name =
            c.to.strip_prefix(cwd)
                .ok()
                .filter(|n| !n.as_os_str().is_empty())
                .or_else(|| c.to.file_name().map(Path::new))
                .map(|n| n.to_string_lossy().into_owned())
                .ok_or_else(|| format!("input {} has no file name", c.from.display()))?;
        let to = dir.join(&name);
        if let Some(parent) = to.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| format!("making {}: {e}", parent.display()))?;
        }
        let read = tokio::time::timeout_at(deadline, read_as(&c.from, &to, a.as_ref(), c.most))
            .await
            .map_err(|_| format!("reading input {}: not done in time", c.from.display()))??;
        offers.push(FileOffer {
            name,
            bytes: read.0,
            sha256: read.1,
        });
    }
    Ok(offers)
}

/// Copies `from`, read by `cat` as account `a`, to `to` (the service's own file); its size
/// and SHA-256. The site reads a part's files to send up the same way. With `most`, a file
/// longer than that many bytes is refused as soon as it is: a FIFO or a link to
/// `/dev/zero` put in an input's place would otherwise fill the service's disk.
pub(crate) async fn read_as(
    from: &Path,
    to: &Path,
    a: Option<&foresight_rm::account::Account>,
    most: Option<u64>,
) -> Result<(u64, String), String> {
    let mut child = crate::runtime::staging::command_as(a, &["cat", "--"], &[from])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("reading {}: {e}", from.display()))?;
    let mut stdout = child.stdout.take().expect("invariant: stdout is piped");
    let mut out = tokio::fs::File::create(to)
        .await
        .map_err(|e| format!("{}: {e}", to.display()))?;
    let mut hash = Sha256::new();
    let mut bytes = 0u64;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = stdout
            .read(&mut buf)
            .await
            .map_err(|e| format!("reading {}: {e}", from.display()))?;
        if n == 0 {
            break;
        }
        hash.update(&buf[..n]);
        bytes += n as u64;
        if let Some(most) = most.filter(|&m| bytes > m) {
            let _ = child.kill().await;
            let _ = tokio::fs::remove_file(to).await;
            return Err(format!(
                "reading {}: longer than its {most} bytes at submission",
                from.display()
            ));
        }
        out.write_all(&buf[..n])
            .await
            .map_err(|e| format!("{}: {e}", to.display()))?;
    }
    out.flush()
        .await
        .map_err(|e| format!("{}: {e}", to.display()))?;
    let done = child
        .wait_with_output()
        .await
        .map_err(|e| format!("reading {}: {e}", from.display()))?;
    if !done.status.success() {
        let who = a.map_or(String::new(), |a| format!(" as {:?}", a.name));
        return Err(format!(
            "reading {}{who}: {}",
            from.display(),
            String::from_utf8_lossy(&done.stderr).trim()
        ));
    }
    Ok((bytes, hex::encode(hash.finalize())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What was wrong: an input replaced after submission by an endless file was read
    /// into the service's data directory until the copy's time ran out.
    #[tokio::test]
    async fn a_file_longer_than_its_bound_is_refused_and_its_copy_removed() {
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (dir.path().join("in.dat"), dir.path().join("copy"));
        std::fs::write(&from, b"0123456789").unwrap();
        let (bytes, _) = read_as(&from, &to, None, Some(10)).await.unwrap();
        assert_eq!(bytes, 10);
        let e = read_as(&from, &to, None, Some(9)).await.unwrap_err();
        assert!(e.contains("longer than its 9 bytes at submission"), "{e}");
        assert!(!to.exists());
        let endless = dir.path().join("endless");
        std::os::unix::fs::symlink("/dev/zero", &endless).unwrap();
        let e = read_as(&endless, &to, None, Some(1 << 20))
            .await
            .unwrap_err();
        assert!(e.contains("longer than"), "{e}");
        assert!(!to.exists());
    }

    /// What was wrong: the centre read a site's inputs into its outbox without a bound, so
    /// an input replaced after submission by a link to `/dev/zero` filled the centre's
    /// disk until `copy_timeout_seconds`. Each is read no longer than its size at
    /// submission; the outbox keeps no partial copy.
    #[tokio::test]
    async fn the_centre_offers_no_input_longer_than_at_submission() {
        let dir = tempfile::tempdir().unwrap();
        let (cwd, outbox) = (dir.path().join("w"), dir.path().join("outbox"));
        let (small, endless) = (dir.path().join("in.dat"), dir.path().join("endless"));
        std::fs::write(&small, b"0123456789").unwrap();
        std::os::unix::fs::symlink("/dev/zero", &endless).unwrap();
        let input = |from: &Path, most| Copy {
            from: from.to_path_buf(),
            to: cwd.join(from.file_name().unwrap()),
            most,
        };
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
        let offers = offer(&[input(&small, Some(10))], &cwd, &outbox, None, deadline)
            .await
            .unwrap();
        assert_eq!((offers[0].name.as_str(), offers[0].bytes), ("in.dat", 10));
        let e = offer(
            &[input(&small, Some(10)), input(&endless, Some(1 << 20))],
            &cwd,
            &outbox,
            None,
            deadline,
        )
        .await
        .unwrap_err();
        assert!(e.contains("endless") && e.contains("longer than"), "{e}");
        assert!(!outbox.join("endless").exists());
    }

    #[test]
    fn only_a_transfer_of_a_mebibyte_or_more_measures_its_link() {
        assert_eq!(measured_rate(1_000, 1), None);
        assert_eq!(measured_rate(4_000_000, 2_000), Some(2.0));
        // A transfer reported as taking no time is taken as one millisecond.
        assert_eq!(measured_rate(2_000_000, 0), Some(2_000.0));
    }
}
