//! Input files a site fetches from its centre over the same signed HTTPS as its commands:
//! ranged and resumable (a partial file continues where it stopped), checked end to end by
//! SHA-256, and bounded by one deadline for all of a part's files.

use super::CentreClient;
use crate::manager::RmError;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::Path;
use tokio::io::AsyncWriteExt;

/// One input file the centre holds for a part, as a site must receive it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileOffer {
    /// Its path relative to the part's working directory: an input's file name, or a
    /// workflow edge's file as the edge names it (`out/mesh.dat`).
    pub name: String,
    /// Its size, bytes.
    pub bytes: u64,
    /// Its SHA-256, hex.
    pub sha256: String,
}

impl FileOffer {
    /// Refuses a name that is not a path under the working directory (it is joined to a
    /// directory): see [`check_relative`].
    pub fn check_name(name: &str) -> Result<(), RmError> {
        check_relative(name)
    }
}

/// A file the centre wants from a part's working directory at the site.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wanted {
    /// Its path relative to the part's working directory.
    pub path: String,
    /// The bytes the centre holds already (from an upload that was cut): the site sends
    /// from there.
    pub from: u64,
}

/// A file a site sent up to its centre.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentFile {
    /// Its path relative to the part's working directory.
    pub path: String,
    /// Its size, bytes.
    pub bytes: u64,
    /// Its SHA-256, hex: the centre checked what arrived against it.
    pub sha256: String,
}

/// Refuses a path that is not relative to a working directory and under it: empty,
/// absolute, with `..`, `.` or empty components, a NUL, or a partial file's suffix.
pub fn check_relative(path: &str) -> Result<(), RmError> {
    let plain = !path.is_empty()
        && !path.starts_with('/')
        && !path.contains('\0')
        && !path.ends_with(PARTIAL)
        && path
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..");
    if plain {
        Ok(())
    } else {
        Err(RmError::Invalid(format!(
            "file {path:?} is not a path under the working directory"
        )))
    }
}

/// Most bytes one upload request carries (each is signed over its body).
pub const UPLOAD_CHUNK: usize = 8 << 20;

/// Sends `file` (the site's own copy of a part's file `path`, of SHA-256 `sha256`) to the
/// centre for part `(job, attempt)` on cluster `cluster`, from byte `from` on, in signed
/// chunks, by `deadline`; how many bytes went over the network. The centre answers each
/// chunk with the bytes it holds: when they are not where this upload stands (it lost a
/// partial file, or holds more), the upload goes on from there.
#[allow(clippy::too_many_arguments)]
pub async fn upload(
    client: &CentreClient,
    cluster: &str,
    (job, attempt): (u64, u32),
    path: &str,
    file: &Path,
    sha256: &str,
    from: u64,
    deadline: tokio::time::Instant,
) -> Result<u64, RmError> {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    check_relative(path)?;
    let mut f = tokio::fs::File::open(file)
        .await
        .map_err(|e| local(file, e))?;
    let total = f.metadata().await.map_err(|e| local(file, e))?.len();
    let mut at = if from > total { 0 } else { from };
    let mut sent = 0u64;
    // At least one request, so that an empty file arrives too.
    let mut first = true;
    while first || at < total {
        first = false;
        f.seek(std::io::SeekFrom::Start(at))
            .await
            .map_err(|e| local(file, e))?;
        let mut chunk = Vec::with_capacity(UPLOAD_CHUNK.min((total - at) as usize));
        (&mut f)
            .take(UPLOAD_CHUNK as u64)
            .read_to_end(&mut chunk)
            .await
            .map_err(|e| local(file, e))?;
        let url = format!(
            "/grid/v1/files/{job}/{attempt}/{}/{}?offset={at}&total={total}&sha256={sha256}",
            escaped(cluster),
            escaped(path)
        );
        let n = chunk.len() as u64;
        let have = tokio::time::timeout_at(deadline, client.put(&url, chunk))
            .await
            .map_err(|_| {
                RmError::Unreachable(format!(
                    "sending {path} to the centre: not done by the deadline"
                ))
            })??;
        sent += n;
        if have == at + n {
            at = have;
        } else if have < at {
            // The centre lost what it held (it restarted): from where it stands.
            at = have;
        } else {
            return Err(RmError::Invalid(format!(
                "sending {path}: the centre holds {have} of its {total} bytes after a chunk \
                 from byte {at}"
            )));
        }
    }
    Ok(sent)
}

/// What a part's fetch transferred.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Received {
    /// Bytes that came over the network.
    pub bytes: u64,
    /// Milliseconds the transfers took.
    pub millis: u64,
}

/// The suffix of a file still arriving (at a site, or at the centre).
pub const PARTIAL: &str = ".foresight-partial";

/// Brings every file of `offers` for part `(job, attempt)` on the site's cluster `cluster`
/// into `dir` by `deadline`: a file already there with its hash is kept, a partial one is
/// resumed, and one whose hash does not match is deleted and named in the error (a fetch
/// asked again starts it over). `dir` must be the service's own, open to no one else.
pub async fn receive(
    client: &CentreClient,
    cluster: &str,
    (job, attempt): (u64, u32),
    offers: &[FileOffer],
    dir: &Path,
    deadline: tokio::time::Instant,
) -> Result<Received, RmError> {
    let prefix = format!("/grid/v1/files/{job}/{attempt}/{}", escaped(cluster));
    receive_at(client, &prefix, offers, dir, deadline).await
}

/// [`receive`] from any server that serves each offered file at `prefix/{name}` (`name`
/// escaped as one segment) to a signed, ranged `GET`: a peer dispatcher fetching a job's
/// input from the site that holds it uses the same transfer as a site from its centre.
pub async fn receive_at(
    client: &CentreClient,
    prefix: &str,
    offers: &[FileOffer],
    dir: &Path,
    deadline: tokio::time::Instant,
) -> Result<Received, RmError> {
    let mut got = Received::default();
    let began = tokio::time::Instant::now();
    for offer in offers {
        FileOffer::check_name(&offer.name)?;
        let done = dir.join(&offer.name);
        if hash_of(&done).await.as_deref() == Some(offer.sha256.as_str()) {
            continue;
        }
        let partial = dir.join(format!("{}{PARTIAL}", offer.name));
        if let Some(parent) = partial.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| local(parent, e))?;
        }
        let have = resumable(&partial, offer.bytes).await;
        let mut out = tokio::fs::OpenOptions::new()
            .append(true)
            .create_new(have == 0)
            .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
            .open(&partial)
            .await
            .map_err(|e| local(&partial, e))?;
        let path = format!("{prefix}/{}", escaped(&offer.name));
        let fetched =
            tokio::time::timeout_at(deadline, client.fetch(&path, have, offer.bytes, &mut out))
                .await
                .map_err(|_| {
                    RmError::Unreachable(format!(
                        "fetching {}: not done by the deadline (copy_timeout_seconds)",
                        offer.name
                    ))
                })??;
        out.flush().await.map_err(|e| local(&partial, e))?;
        drop(out);
        got.bytes += fetched;
        match hash_of(&partial).await {
            Some(h) if h == offer.sha256 => tokio::fs::rename(&partial, &done)
                .await
                .map_err(|e| local(&done, e))?,
            other => {
                let _ = tokio::fs::remove_file(&partial).await;
                return Err(RmError::Invalid(format!(
                    "input {} arrived with SHA-256 {} but its holder sent {}: deleted",
                    offer.name,
                    other.as_deref().unwrap_or("(unreadable)"),
                    offer.sha256
                )));
            }
        }
    }
    got.millis = began.elapsed().as_millis() as u64;
    Ok(got)
}

/// `name` as one segment of a URL's path: every byte but letters, digits, `.`, `_` and `-`
/// percent-encoded, so that the path signed is the path sent.
pub fn escaped(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'_' | b'-' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// How many bytes of a partial file at `partial` may be kept: none when it is longer than
/// the file, or not a plain file of this process's own with one name (the directory may be
/// the job account's, which could have put a link there); such an entry is removed, which
/// never touches what it points to.
async fn resumable(partial: &Path, total: u64) -> u64 {
    let Ok(m) = tokio::fs::symlink_metadata(partial).await else {
        return 0;
    };
    if own_single(&m) && m.len() <= total {
        m.len()
    } else {
        let _ = tokio::fs::remove_file(partial).await;
        0
    }
}

/// A plain file of this process's own with one name.
fn own_single(m: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    m.file_type().is_file() && m.nlink() == 1 && m.uid() == nix::unistd::geteuid().as_raw()
}

fn local(path: &Path, e: std::io::Error) -> RmError {
    RmError::Invalid(format!("{}: {e}", path.display()))
}

/// The SHA-256 of the file at `path`, hex; `None` when it cannot be read.
pub async fn hash_of(path: &Path) -> Option<String> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let mut f = std::fs::File::open(path).ok()?;
        let mut h = Sha256::new();
        std::io::copy(&mut f, &mut h).ok()?;
        Some(hex::encode(h.finalize()))
    })
    .await
    .ok()
    .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// A centre that serves `body` once, from the byte its request's range names, and tells
    /// the range it was asked for.
    async fn serve_once(body: Vec<u8>) -> (String, tokio::task::JoinHandle<Option<String>>) {
        serve(body, true).await
    }

    /// [`serve_once`], or when `ranges` is false a proxy that ignores ranges and answers the
    /// whole body.
    async fn serve(
        body: Vec<u8>,
        ranges: bool,
    ) -> (String, tokio::task::JoinHandle<Option<String>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let served = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 1024];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = conn.read(&mut buf).await.unwrap();
                req.extend_from_slice(&buf[..n]);
            }
            let req = String::from_utf8_lossy(&req).to_lowercase();
            let range = req
                .lines()
                .find_map(|l| l.strip_prefix("range: bytes="))
                .map(|r| r.trim().to_owned());
            let from: usize = range
                .as_deref()
                .filter(|_| ranges)
                .and_then(|r| r.trim_end_matches('-').parse().ok())
                .unwrap_or(0);
            let rest = &body[from..];
            let head = if ranges {
                format!(
                    "HTTP/1.1 206 Partial Content\r\ncontent-range: bytes {from}-{}/{}\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n",
                    body.len().saturating_sub(1),
                    body.len(),
                    rest.len()
                )
            } else {
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    rest.len()
                )
            };
            conn.write_all(head.as_bytes()).await.unwrap();
            conn.write_all(rest).await.unwrap();
            range
        });
        (url, served)
    }

    fn offer(name: &str, data: &[u8]) -> FileOffer {
        FileOffer {
            name: name.into(),
            bytes: data.len() as u64,
            sha256: hex::encode(Sha256::digest(data)),
        }
    }

    fn client(url: &str) -> CentreClient {
        CentreClient::new(&[url.to_owned()], "umea", "a-token-of-the-site", None).unwrap()
    }

    /// Receives file `name` of content `data` from the centre at `url` into `dir`.
    async fn receive_from(
        url: &str,
        name: &str,
        data: &[u8],
        dir: &Path,
    ) -> Result<Received, RmError> {
        receive(
            &client(url),
            "abisko",
            (7, 0),
            &[offer(name, data)],
            dir,
            soon(),
        )
        .await
    }

    fn soon() -> tokio::time::Instant {
        tokio::time::Instant::now() + std::time::Duration::from_secs(20)
    }

    #[tokio::test]
    async fn a_partial_file_resumes_from_where_it_stopped() {
        let data: Vec<u8> = (0..50_000u32).flat_map(|i| i.to_le_bytes()).collect();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("in.dat.foresight-partial"), &data[..1_000]).unwrap();
        let (url, served) = serve_once(data.clone()).await;
        let got = receive_from(&url, "in.dat", &data, dir.path())
            .await
            .unwrap();
        assert_eq!(served.await.unwrap().as_deref(), Some("1000-"));
        assert_eq!(got.bytes, data.len() as u64 - 1_000);
        assert_eq!(std::fs::read(dir.path().join("in.dat")).unwrap(), data);
        assert!(!dir.path().join("in.dat.foresight-partial").exists());
    }

    #[tokio::test]
    async fn a_whole_file_answered_to_a_resumed_fetch_replaces_the_partial_one() {
        let data = b"the whole file, from its first byte".to_vec();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("in.dat.foresight-partial"), &data[..8]).unwrap();
        let (url, served) = serve(data.clone(), false).await;
        let got = receive_from(&url, "in.dat", &data, dir.path())
            .await
            .unwrap();
        assert_eq!(served.await.unwrap().as_deref(), Some("8-"));
        assert_eq!(got.bytes, data.len() as u64);
        assert_eq!(std::fs::read(dir.path().join("in.dat")).unwrap(), data);
    }

    #[tokio::test]
    async fn a_file_that_arrives_altered_is_deleted_and_named() {
        let data = b"the data the centre hashed".to_vec();
        let dir = tempfile::tempdir().unwrap();
        let (url, _served) = serve_once(b"the data a relay altered!!".to_vec()).await;
        let e = receive_from(&url, "in.dat", &data, dir.path())
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("in.dat") && e.contains("SHA-256"), "{e}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn a_file_already_there_is_not_fetched_again_and_a_planted_link_is_not_followed() {
        let data = b"kept".to_vec();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("in.dat"), &data).unwrap();
        // Nothing listens there: a fetch would fail.
        let got = receive(
            &client("http://127.0.0.1:9"),
            "abisko",
            (7, 0),
            &[offer("in.dat", &data)],
            dir.path(),
            soon(),
        )
        .await
        .unwrap();
        assert_eq!(got.bytes, 0);
        // A link planted as the partial file is removed, never written through.
        let target = dir.path().join("target");
        std::fs::write(&target, "not to be touched").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("new.dat.foresight-partial")).unwrap();
        let (url, _served) = serve_once(b"new".to_vec()).await;
        receive_from(&url, "new.dat", b"new", dir.path())
            .await
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(&target).unwrap(),
            "not to be touched"
        );
        assert_eq!(std::fs::read(dir.path().join("new.dat")).unwrap(), b"new");
    }

    #[test]
    fn only_paths_under_the_working_directory_are_received() {
        for ok in [
            "in.dat",
            "a b",
            ".hidden",
            "x.partial",
            "a/b",
            "out/mesh.dat",
        ] {
            assert!(FileOffer::check_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/../b",
            "a//b",
            "a/",
            "./a",
            "/etc/passwd",
            "x.foresight-partial",
            "a\0b",
        ] {
            assert!(FileOffer::check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_name_is_sent_as_one_escaped_segment() {
        assert_eq!(escaped("in.dat"), "in.dat");
        assert_eq!(escaped("a b%/?"), "a%20b%25%2F%3F");
    }

    #[tokio::test]
    async fn a_files_hash_is_its_sha256() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, "abc").unwrap();
        assert_eq!(
            hash_of(&p).await.unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(hash_of(&dir.path().join("missing")).await, None);
    }
}
