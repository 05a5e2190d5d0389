//! The centre's side of a part's files coming up from a site on another host: once a job
//! that ran there ended, its outputs and its workflow edges' files are asked of the site
//! ([`foresight_rm::grid::Op::Send`]), which puts them in signed chunks
//! (`PUT /grid/v1/files/{job}/{attempt}/{cluster}/{path}`). They arrive in a directory of the
//! service's own, `.incoming` under [`World::uploads_of`](crate::state::world::World), where
//! a cut-off upload resumes and each file is checked against the SHA-256 the site sent; once
//! all are there they move into a fresh `files` directory, handed to the job's account, from
//! which the usual copier takes them where they belong, as it would from a working
//! directory on this host.

use crate::runtime::Service;
use crate::state::refusal::Refusal;
use crate::state::staging::Upload;
use foresight_core::ClusterId;
use foresight_rm::grid::{check_relative, hash_of, SentFile, Wanted, PARTIAL};
use foresight_rm::PartHandle;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Where a part's files arrive, under its uploads directory.
const INCOMING: &str = ".incoming";

/// The paths the centre asked of the site for a part, one per line, beside
/// [`INCOMING`]: a chunk of any other path is refused, so that a site writes only what was
/// asked of it.
const ASKED: &str = ".asked";

/// What an upload must leave free on the file system of the uploads (which also holds the
/// service's data): a file that would take more is refused before a byte of it is written.
const KEEP_FREE: u64 = 256 << 20;

/// Held while a chunk is written: chunks are written one at a time.
static WRITING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// One chunk of an upload, as a site put it.
pub(crate) struct Chunk<'a> {
    /// The file's path relative to the part's working directory.
    pub path: &'a str,
    /// The byte the chunk starts at.
    pub offset: u64,
    /// The file's whole size.
    pub total: u64,
    /// The file's SHA-256, hex, as the site read it.
    pub sha256: &'a str,
    /// The bytes.
    pub bytes: &'a [u8],
}

impl Service {
    /// The cluster here that is site `site`'s cluster `there`.
    pub(crate) fn site_cluster(&self, site: &str, there: &str) -> Option<ClusterId> {
        self.cfg
            .cluster
            .iter()
            .position(|c| {
                c.site
                    .as_ref()
                    .is_some_and(|s| s.site == site && s.remote_cluster(c) == there)
            })
            .map(ClusterId)
    }

    /// Brings the files of `upload` (of job `job`) up from its site into
    /// `upload.dir/files`, handed to `account`, within `copy_timeout_seconds`. A file the
    /// part did not write is simply not there: the copy that reads it names it.
    pub(crate) async fn bring_up(
        &self,
        job: u64,
        upload: &Upload,
        account: Option<&str>,
    ) -> Result<(), String> {
        let Some(cluster) = self
            .cfg
            .cluster
            .iter()
            .position(|c| c.name == upload.cluster)
        else {
            return Err(format!("no cluster {} here", upload.cluster));
        };
        let incoming = upload.dir.join(INCOMING);
        let root = self.world().uploads_dir().to_path_buf();
        open_dirs(&root, &upload.dir)?;
        private_dir(&incoming)?;
        let mut wanted = Vec::with_capacity(upload.files.len());
        for path in &upload.files {
            check_relative(path).map_err(|e| e.to_string())?;
            let from = own_len(&incoming.join(format!("{path}{PARTIAL}")));
            wanted.push(Wanted {
                path: path.clone(),
                from,
            });
        }
        ask(&upload.dir, &upload.files)?;
        let part = PartHandle {
            job,
            attempt: upload.attempt,
            external: None,
        };
        let (sent, got) = self.managers[ClusterId(cluster)]
            .send_files(&part, &wanted, self.copy_timeout())
            .await
            .map_err(|e| {
                format!(
                    "bringing the files of job {job} up from cluster {}: {e}",
                    upload.cluster
                )
            })?;
        check_arrived(&incoming, &sent).await?;
        let files = upload.dir.join(crate::state::world::UPLOADED);
        move_in(&incoming, &files)?;
        if let Some(a) = account {
            crate::runtime::grid_inbox::hand_over(&files, a)?;
        }
        tracing::info!(
            job,
            cluster = %upload.cluster,
            files = sent.len(),
            bytes = got.bytes,
            millis = got.millis,
            "a part's files came up from its site"
        );
        self.measured(ClusterId(cluster), got.bytes, got.millis);
        Ok(())
    }

    /// Makes the directories under the uploads where `stage` puts workflow edges' files for
    /// successors at sites ([`World::edge_dir`](crate::state::world::World)), each the
    /// account's, so that the copy, made as that account, writes there.
    pub(crate) fn prepare_edge_dirs(
        &self,
        stage: &[crate::state::staging::OutputFetch],
        account: Option<&str>,
    ) -> Result<(), String> {
        let root = self.world().uploads_dir().to_path_buf();
        for f in stage {
            let Ok(below) = f.to.strip_prefix(&root) else {
                continue;
            };
            let mut c = below.components();
            let (Some(cluster), Some(held)) = (c.next(), c.next()) else {
                continue;
            };
            if !held.as_os_str().to_string_lossy().ends_with(".edges") {
                continue;
            }
            let dir = root.join(cluster).join(held);
            open_dirs(&root, &root.join(cluster))?;
            if std::fs::symlink_metadata(&dir).is_err() {
                private_dir(&dir)?;
                if let Some(a) = account {
                    crate::runtime::grid_inbox::hand_over(&dir, a)?;
                }
            }
        }
        Ok(())
    }

    /// A chunk of an upload of part `(job, attempt)` on cluster `cluster`: written at its
    /// offset (when the file stands there or beyond it), and the file checked and moved
    /// into place once whole. The bytes the centre then holds of it; an upload nobody
    /// asked for (no `.incoming` of that part) is refused.
    pub(crate) async fn receive_chunk(
        &self,
        cluster: ClusterId,
        (job, attempt): (u64, u32),
        chunk: Chunk<'_>,
    ) -> Result<u64, Refusal> {
        check_relative(chunk.path).map_err(|e| Refusal::invalid("path", e.to_string()))?;
        let name = &self.cfg.cluster[cluster].name;
        let dir = self.world().uploads_of(name, job, attempt);
        if !std::fs::symlink_metadata(dir.join(INCOMING)).is_ok_and(|m| m.is_dir()) {
            return Err(Refusal::not_found(format!(
                "no files of job {job}.{attempt} were asked of this site"
            )));
        }
        // Off the async workers (a last chunk hashes the whole file), and one at a time:
        // two uploads of one file (a Send asked again) must not interleave their writes.
        let (path, bytes, sha256) = (
            chunk.path.to_owned(),
            chunk.bytes.to_vec(),
            chunk.sha256.to_owned(),
        );
        let (offset, total) = (chunk.offset, chunk.total);
        tokio::task::spawn_blocking(move || {
            let _one = WRITING.lock().unwrap_or_else(|p| p.into_inner());
            let chunk = Chunk {
                path: &path,
                offset,
                total,
                sha256: &sha256,
                bytes: &bytes,
            };
            write_asked(&dir, &chunk)
        })
        .await
        .map_err(|e| Refusal::internal(format!("writing an upload: {e}")))?
    }
}

/// Adds `files` to the paths asked of the site for the part whose uploads are `dir` (a
/// Send asked again, or another for the same part, asks at least as much).
fn ask(dir: &Path, files: &[String]) -> Result<(), String> {
    // Two copies of one part's files (its outputs, its edges') may ask at once; a chunk
    // reads the list whole (it is renamed into place), so only askers wait for each other.
    static ASKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ASKING.lock().unwrap_or_else(|p| p.into_inner());
    let mut all = asked(dir);
    all.extend(files.iter().cloned());
    let list: String = all.iter().map(|f| format!("{f}\n")).collect();
    let fresh = dir.join(format!("{ASKED}{PARTIAL}"));
    let said = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    let _ = std::fs::remove_file(&fresh);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&fresh)
        .and_then(|mut f| std::io::Write::write_all(&mut f, list.as_bytes()))
        .map_err(|e| said(&fresh, e))?;
    std::fs::rename(&fresh, dir.join(ASKED)).map_err(|e| said(dir, e))
}

/// The paths asked of the site for the part whose uploads are `dir`.
fn asked(dir: &Path) -> std::collections::BTreeSet<String> {
    std::fs::read_to_string(dir.join(ASKED))
        .map(|s| s.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Writes `chunk` into the part's `.incoming` under `dir` when its path was asked and its
/// file fits on the uploads' file system; the bytes then held of that file.
fn write_asked(dir: &Path, chunk: &Chunk<'_>) -> Result<u64, Refusal> {
    if !asked(dir).contains(chunk.path) {
        return Err(Refusal::forbidden(
            "path",
            format!("{} was not asked of this site", chunk.path),
        ));
    }
    let incoming = dir.join(INCOMING);
    let held = own_len(&incoming.join(format!("{}{PARTIAL}", chunk.path)));
    let to_come = chunk.total.saturating_sub(held.min(chunk.offset));
    let free = nix::sys::statvfs::statvfs(&incoming)
        .map(|v| v.blocks_available().saturating_mul(v.fragment_size()))
        .map_err(|e| Refusal::internal(format!("{}: {e}", incoming.display())))?;
    if to_come.saturating_add(KEEP_FREE) > free {
        return Err(Refusal::conflict_at(
            "total",
            format!(
                "{} of {} bytes would leave less than {} MiB free where uploads are kept \
                 ({} bytes free in {})",
                chunk.path,
                chunk.total,
                KEEP_FREE >> 20,
                free,
                incoming.display()
            ),
        ));
    }
    write_chunk(&incoming, chunk).map_err(Refusal::conflict)
}

/// Makes the uploads directories down to `dir`, each the service's own and open to pass
/// through (the job's account reads its files under them).
fn open_dirs(root: &Path, dir: &Path) -> Result<(), String> {
    let mut at = PathBuf::from(root);
    let below = dir
        .strip_prefix(root)
        .map_err(|_| format!("{} is not under {}", dir.display(), root.display()))?;
    let mut all = vec![at.clone()];
    for c in below.components() {
        at.push(c);
        all.push(at.clone());
    }
    for d in all {
        if std::fs::symlink_metadata(&d).is_err() {
            std::fs::create_dir(&d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        let m = std::fs::symlink_metadata(&d).map_err(|e| format!("{}: {e}", d.display()))?;
        if !m.is_dir() || m.uid() != nix::unistd::geteuid().as_raw() {
            return Err(format!(
                "{} is not a directory of the service's own",
                d.display()
            ));
        }
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o711))
            .map_err(|e| format!("{}: {e}", d.display()))?;
    }
    Ok(())
}

/// Makes `dir`, the service's own and closed to everyone else.
fn private_dir(dir: &Path) -> Result<(), String> {
    if std::fs::symlink_metadata(dir).is_err() {
        std::fs::create_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| format!("{}: {e}", dir.display()))
}

/// The length of the service's own plain file at `path`, 0 when there is none.
fn own_len(path: &Path) -> u64 {
    std::fs::symlink_metadata(path)
        .ok()
        .filter(|m| m.is_file() && m.uid() == nix::unistd::geteuid().as_raw())
        .map_or(0, |m| m.len())
}

/// Writes `chunk` into its partial file under `incoming`; the bytes held after it.
fn write_chunk(incoming: &Path, chunk: &Chunk<'_>) -> Result<u64, String> {
    use std::io::{Seek, Write};
    let done = incoming.join(chunk.path);
    let partial = incoming.join(format!("{}{PARTIAL}", chunk.path));
    let said = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    if let Some(parent) = partial.parent() {
        std::fs::create_dir_all(parent).map_err(|e| said(parent, e))?;
    }
    let have = own_len(&partial);
    if chunk.offset > have {
        return Ok(have);
    }
    let end = chunk.offset + chunk.bytes.len() as u64;
    if end > chunk.total {
        return Err(format!(
            "{}: a chunk past the {} bytes the site announced",
            chunk.path, chunk.total
        ));
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(&partial)
        .map_err(|e| said(&partial, e))?;
    f.set_len(chunk.offset).map_err(|e| said(&partial, e))?;
    f.seek(std::io::SeekFrom::Start(chunk.offset))
        .map_err(|e| said(&partial, e))?;
    f.write_all(chunk.bytes).map_err(|e| said(&partial, e))?;
    f.sync_data().map_err(|e| said(&partial, e))?;
    drop(f);
    if end == chunk.total {
        let got = sha256_of(&partial).map_err(|e| said(&partial, e))?;
        if got != chunk.sha256 {
            let _ = std::fs::remove_file(&partial);
            return Err(format!(
                "{} arrived with SHA-256 {got} but the site sent {}: deleted",
                chunk.path, chunk.sha256
            ));
        }
        std::fs::rename(&partial, &done).map_err(|e| said(&done, e))?;
    }
    Ok(end)
}

fn sha256_of(path: &Path) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h)?;
    Ok(hex::encode(h.finalize()))
}

/// Checks that every file the site says it sent is in `incoming`, whole, with its hash.
async fn check_arrived(incoming: &Path, sent: &[SentFile]) -> Result<(), String> {
    for f in sent {
        check_relative(&f.path).map_err(|e| e.to_string())?;
        let at = incoming.join(&f.path);
        match hash_of(&at).await {
            Some(h) if h == f.sha256 => {}
            other => {
                return Err(format!(
                    "{} did not arrive whole: SHA-256 {} here, {} at the site",
                    f.path,
                    other.as_deref().unwrap_or("(missing)"),
                    f.sha256
                ))
            }
        }
    }
    Ok(())
}

/// Moves the arrived `incoming` tree to a fresh `files` (whatever was there, from an
/// earlier copy, is removed, never followed).
fn move_in(incoming: &Path, files: &Path) -> Result<(), String> {
    let said = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    if let Ok(m) = std::fs::symlink_metadata(files) {
        let gone = if m.is_dir() {
            std::fs::remove_dir_all(files)
        } else {
            std::fs::remove_file(files)
        };
        gone.map_err(|e| said(files, e))?;
    }
    std::fs::rename(incoming, files).map_err(|e| said(files, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    fn chunk<'a>(
        path: &'a str,
        offset: u64,
        total: u64,
        sha: &'a str,
        bytes: &'a [u8],
    ) -> Chunk<'a> {
        Chunk {
            path,
            offset,
            total,
            sha256: sha,
            bytes,
        }
    }

    /// A file arrives in chunks, a repeated chunk is harmless, a chunk past what is held is
    /// not written (the answer says where to go on from), and the whole is checked.
    #[test]
    fn an_upload_resumes_where_the_centre_stands_and_is_checked_when_whole() {
        let t = tempfile::tempdir().unwrap();
        let data = b"0123456789";
        let sha = hex::encode(Sha256::digest(data));
        assert_eq!(
            write_chunk(t.path(), &chunk("d/out", 0, 10, &sha, &data[..4])).unwrap(),
            4
        );
        assert_eq!(
            write_chunk(t.path(), &chunk("d/out", 0, 10, &sha, &data[..4])).unwrap(),
            4
        );
        // Ahead of what is held: nothing written, the answer says 4.
        assert_eq!(
            write_chunk(t.path(), &chunk("d/out", 8, 10, &sha, &data[8..])).unwrap(),
            4
        );
        assert!(!t.path().join("d/out").exists());
        assert_eq!(
            write_chunk(t.path(), &chunk("d/out", 4, 10, &sha, &data[4..])).unwrap(),
            10
        );
        assert_eq!(std::fs::read(t.path().join("d/out")).unwrap(), data);
        // A whole file whose hash is not the one sent is deleted, naming both.
        let e = write_chunk(t.path(), &chunk("bad", 0, 3, &sha, b"abc")).unwrap_err();
        assert!(
            e.contains("arrived with SHA-256") && e.contains(&sha),
            "{e}"
        );
        assert!(!t.path().join("bad").exists());
        assert!(!t.path().join(format!("bad{PARTIAL}")).exists());
        // More than announced is refused.
        let e = write_chunk(t.path(), &chunk("big", 0, 2, &sha, b"abc")).unwrap_err();
        assert!(e.contains("past the 2 bytes"), "{e}");
    }

    /// A site writes only the paths asked of it, and never a file larger than the room
    /// left where uploads are kept.
    #[test]
    fn a_path_not_asked_or_a_file_too_large_for_the_disk_is_refused_before_a_byte_is_written() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join(INCOMING)).unwrap();
        let data = b"out";
        let sha = hex::encode(Sha256::digest(data));
        // Nothing asked yet: refused.
        let e = write_asked(t.path(), &chunk("out", 0, 3, &sha, data)).unwrap_err();
        assert!(e.reason().contains("was not asked"), "{}", e.reason());
        ask(t.path(), &["out".into()]).unwrap();
        ask(t.path(), &["d/edge".into()]).unwrap();
        assert_eq!(
            asked(t.path()),
            ["d/edge".to_string(), "out".to_string()].into()
        );
        for planted in ["other", "../out", "d", "out.part"] {
            let e = write_asked(t.path(), &chunk(planted, 0, 3, &sha, data)).unwrap_err();
            assert!(
                e.reason().contains("was not asked"),
                "{planted}: {}",
                e.reason()
            );
        }
        assert_eq!(
            write_asked(t.path(), &chunk("out", 0, 3, &sha, data)).unwrap(),
            3
        );
        // An exabyte announced: refused, nothing written.
        let e = write_asked(t.path(), &chunk("d/edge", 0, 1 << 60, &sha, data)).unwrap_err();
        assert_eq!(e.field(), Some("total"));
        assert!(e.reason().contains("MiB free"), "{}", e.reason());
        assert!(!t.path().join(INCOMING).join("d").exists());
    }

    /// A partial file that is a link (planted by anyone) is not written through.
    #[test]
    fn a_partial_that_is_a_link_is_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let target = t.path().join("target");
        std::fs::write(&target, "kept").unwrap();
        std::os::unix::fs::symlink(&target, t.path().join(format!("out{PARTIAL}"))).unwrap();
        let sha = hex::encode(Sha256::digest(b"x"));
        assert!(write_chunk(t.path(), &chunk("out", 0, 1, &sha, b"x")).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept");
    }
}
