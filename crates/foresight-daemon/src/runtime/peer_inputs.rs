//! Inputs of global jobs moving between peer dispatchers' sites over the network, with the
//! transfer a site uses to fetch from its centre (`foresight_rm::grid::receive_at`): ranged
//! and resumable, SHA-256 checked end to end, bounded by `copy_timeout_seconds`.
//!
//! A global job's input on one of the submitting site's clusters names that site as its
//! holder (`InputRecord::site`). The winner of the job's auction, when it is another site,
//! asks the holder at the address the holder announced (`dispatchers.url`) to offer the
//! input (`POST /peer/v1/inputs/{job}/{index}`): the holder reads it as the job's Unix
//! account (never serving what that account could not read) into a directory of its own,
//! hashing it, and answers its size and hash; the winner then fetches it
//! (`GET /peer/v1/inputs/{job}/{index}/{name}`, ranged) into a directory of its own and
//! writes it into the job's working directory as the job's account.
//!
//! Each request is signed as a site signs its requests to its centre
//! (`foresight_rm::grid::sign`), with the requesting site's key: a random key each site
//! makes at its first registration and keeps in its `dispatchers` row. The shared database
//! is what dispatchers already trust (the queue, the awards, the budgets); the holder
//! verifies with the key it finds there, and refuses a forged or replayed request, and one
//! from any site but the one the job is awarded to.

use crate::runtime::Service;
use crate::state::refusal::Refusal;
use crate::state::staging::Copy;
use foresight_core::ClusterId;
use foresight_rm::grid::{sign, CentreClient, FileOffer};
use foresight_store::{Awarded, SharedQueue};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// The path prefix of the routes between peer sites.
pub(crate) const PEER_INPUTS: &str = "/peer/v1/inputs";

/// A peer dispatcher's side of the transfers between sites: its key, and the nonces of the
/// requests it took.
pub(crate) struct PeerLink {
    queue: SharedQueue,
    /// The CA the other sites' certificates are checked against (`dispatcher.ca_cert`),
    /// PEM, besides the system's.
    ca: Option<Vec<u8>>,
    key: OnceLock<String>,
    verifier: sign::Verifier,
}

/// A request of another site as received: its signing headers, method and path.
pub(crate) struct PeerRequest<'a> {
    /// The site it names.
    pub site: &'a str,
    /// Its timestamp header.
    pub timestamp: &'a str,
    /// Its nonce header.
    pub nonce: &'a str,
    /// Its signature header.
    pub signature: &'a str,
    /// Its method.
    pub method: &'a str,
    /// Its path with its query.
    pub path: &'a str,
}

impl PeerLink {
    /// The link of `queue`'s site, keyless until [`PeerLink::enter`], trusting the sites'
    /// certificates signed by the CA in `ca` (PEM) besides the system's.
    pub(crate) fn new(queue: SharedQueue, ca: Option<Vec<u8>>) -> PeerLink {
        PeerLink {
            queue,
            ca,
            key: OnceLock::new(),
            verifier: sign::Verifier::default(),
        }
    }

    /// Takes this site's key from its `dispatchers` row, making it at its first
    /// registration (the row must exist).
    pub(crate) async fn enter(&self) -> anyhow::Result<()> {
        let fresh = format!("{}{}", sign::nonce(), sign::nonce());
        let key = self.queue.peer_key(&fresh).await?;
        let _ = self.key.set(key);
        Ok(())
    }

    /// This site's name.
    pub(crate) fn site(&self) -> &str {
        self.queue.site()
    }

    /// Checks `req` (with an empty body) received at `now` (Unix seconds) against the key
    /// of the site it names, from the shared database. One answer for an unknown site and a
    /// bad signature: a caller learns no site's name.
    pub(crate) async fn verify(&self, req: &PeerRequest<'_>, now: i64) -> Result<(), Refusal> {
        let key = self
            .queue
            .peer(req.site)
            .await
            .map_err(|e| Refusal::internal(e.to_string()))?
            .and_then(|p| p.key);
        check(&self.verifier, key.as_deref(), req, now)
    }

    /// Global job `job` as the holder checks a request of site `site` for its input
    /// `index`: refused unless the job is awarded to that site and the input exists and is
    /// held here.
    pub(crate) async fn granted(
        &self,
        site: &str,
        job: u64,
        index: usize,
    ) -> Result<Awarded, Refusal> {
        let a = self
            .queue
            .awarded(job)
            .await
            .map_err(|e| Refusal::internal(e.to_string()))?
            .ok_or_else(|| Refusal::not_found(format!("no global job {job}")))?;
        grant(a, self.site(), site, job, index)
    }
}

/// [`PeerLink::verify`] with the requester's `key` (`None`: no such site, or one without a
/// key yet).
fn check(
    verifier: &sign::Verifier,
    key: Option<&str>,
    req: &PeerRequest<'_>,
    now: i64,
) -> Result<(), Refusal> {
    let refused = |why: String| {
        tracing::warn!(site = %req.site, "a request of a peer site refused: {why}");
        Refusal::unauthenticated("unknown site, or a request not signed by it")
    };
    let key = key.ok_or_else(|| refused("no such site, or it has no key".into()))?;
    verifier
        .verify(
            key,
            req.site,
            now,
            req.timestamp,
            req.nonce,
            req.signature,
            req.method,
            req.path,
            &[],
        )
        .map_err(|e| refused(e.to_string()))
}

/// Refuses a fetch of input `index` of job `job` (as `a` has it) by site `site` from this
/// site `here`, unless the job is awarded to `site` and the input is held here.
fn grant(a: Awarded, here: &str, site: &str, job: u64, index: usize) -> Result<Awarded, Refusal> {
    if !a.may_fetch(site) {
        tracing::warn!(
            site,
            job,
            "a peer site asked for the input of a job not its own"
        );
        return Err(Refusal::forbidden(
            "job",
            format!("global job {job} is not awarded to site {site}"),
        ));
    }
    match a.record.inputs.get(index) {
        Some(i) if i.site.as_deref() == Some(here) => Ok(a),
        _ => Err(Refusal::not_found(format!(
            "no input {index} of job {job} held by site {here}"
        ))),
    }
}

impl Service {
    /// The peer link, in dispatcher mode.
    pub(crate) fn peer_link(&self) -> Option<&PeerLink> {
        self.global_queue.peer_link()
    }

    /// Where input `index` of job `job` waits for site `site` to fetch it.
    pub(crate) fn peer_outbox(&self, site: &str, job: u64, index: usize) -> PathBuf {
        self.cfg
            .data_dir
            .join("peer-outbox")
            .join(site)
            .join(format!("{job}.{index}"))
    }

    /// Offers input `index` of `a`'s job to site `site`: read as the job's Unix account into
    /// the outbox, within `copy_timeout_seconds`; its name, size and SHA-256.
    pub(crate) async fn offer_input(
        &self,
        site: &str,
        a: &Awarded,
        index: usize,
    ) -> Result<FileOffer, Refusal> {
        let job = a.record.id;
        let input = &a.record.inputs[index];
        let from = Path::new(&input.path);
        let name = crate::state::staging::file_name(from)
            .ok_or_else(|| Refusal::invalid("input", format!("{} has no name", input.path)))?;
        let account = self.world().unix_account(&a.record.user).0;
        let acc = crate::runtime::staging::as_account(&account).map_err(Refusal::conflict)?;
        let dir = self.peer_outbox(site, job, index);
        let _ = tokio::fs::remove_dir_all(&dir).await;
        if let Some(outbox) = dir.parent().and_then(Path::parent) {
            // Copies whose winner never said it had them (it failed, or the job went):
            // each fetch reads its input again, so none is needed past a fetch's time.
            sweep(outbox, 2, self.stale_after());
        }
        tokio::fs::create_dir_all(&dir)
            .await
            .map_err(|e| Refusal::conflict(format!("{}: {e}", dir.display())))?;
        let to = dir.join(&name);
        // Bounded by its size at submission: what the planner set the transfer's time by.
        let read = crate::runtime::grid_outbox::read_as(from, &to, acc.as_ref(), Some(input.bytes));
        let (bytes, sha256) = tokio::time::timeout(self.copy_timeout(), read)
            .await
            .map_err(|_| {
                Refusal::conflict(format!(
                    "reading input {}: not done in time (copy_timeout_seconds)",
                    input.path
                ))
            })?
            .map_err(Refusal::conflict)?;
        tracing::info!(
            job,
            site,
            bytes,
            "input {} offered to site {site}",
            input.path
        );
        Ok(FileOffer {
            name,
            bytes,
            sha256,
        })
    }

    /// Stages `stage` for part `(job, attempt)` on `cluster` as `account`: each input
    /// another site holds is fetched from it over the network, the others copied here
    /// (`staging::stage`); all within `copy_timeout_seconds`. A fetch large enough to say
    /// moves the planner's estimate of `cluster`'s link, which the staging term of this
    /// site's bids weighs.
    pub(crate) async fn stage_inputs(
        &self,
        cluster: ClusterId,
        (job, attempt): (u64, u32),
        stage: &[Copy],
        account: Option<&str>,
    ) -> Result<(), String> {
        let timeout = self.copy_timeout();
        let remote = self.held_elsewhere(job, stage);
        if remote.is_empty() {
            return crate::runtime::staging::stage(stage, account, timeout).await;
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let local: Vec<Copy> = stage
            .iter()
            .filter(|c| !remote.iter().any(|r| r.copy == **c))
            .cloned()
            .collect();
        crate::runtime::staging::stage(&local, account, timeout).await?;
        let inboxes = self.cfg.data_dir.join("peer-inbox");
        // What an attempt fetched in part is kept for its next try, not for other attempts.
        sweep(&inboxes, 1, self.stale_after());
        let inbox = inboxes.join(format!("{job}.{attempt}"));
        let fetched = self
            .fetch_all(cluster, job, &remote, (&inbox, account), deadline)
            .await;
        if fetched.is_ok() {
            let _ = tokio::fs::remove_dir_all(&inbox).await;
        }
        fetched
    }

    /// The copies of `stage` whose inputs another site holds, with the input's index and
    /// holder.
    /// Refuses staging `stage` onto a cluster on another host (a site's) when another
    /// dispatcher holds one of its inputs: that host would be sent whatever file of the
    /// same path this one has, or none.
    pub(crate) fn refuse_remote_inputs(&self, job: u64, stage: &[Copy]) -> Result<(), String> {
        match self.held_elsewhere(job, stage).first() {
            None => Ok(()),
            Some(r) => Err(format!(
                "input {} is held by site {}: a cluster on another host does not receive \
                 inputs another dispatcher holds yet",
                r.copy.from.display(),
                r.site
            )),
        }
    }

    fn held_elsewhere(&self, job: u64, stage: &[Copy]) -> Vec<Remote> {
        let Some(link) = self.peer_link() else {
            return Vec::new();
        };
        let w = self.world();
        let Some(rec) = w.jobs.get(&foresight_core::JobId(job)) else {
            return Vec::new();
        };
        stage
            .iter()
            .filter_map(|c| {
                let (index, i) = rec.inputs.iter().enumerate().find(|(_, i)| {
                    Path::new(&i.path) == c.from
                        && i.site.as_deref().is_some_and(|s| s != link.site())
                })?;
                Some(Remote {
                    copy: c.clone(),
                    index,
                    site: i.site.clone()?,
                })
            })
            .collect()
    }

    /// Fetches each of `remote` from its holder into `inbox` (the service's own), then
    /// writes it to its place as `account`.
    async fn fetch_all(
        &self,
        cluster: ClusterId,
        job: u64,
        remote: &[Remote],
        (inbox, account): (&Path, Option<&str>),
        deadline: tokio::time::Instant,
    ) -> Result<(), String> {
        let link = self
            .peer_link()
            .expect("invariant: inputs held elsewhere need a link");
        let key = link
            .key
            .get()
            .ok_or("this site has no key yet: it has not registered")?;
        crate::runtime::grid_inbox::private_dir(inbox)?;
        for r in remote {
            let peer = link
                .queue
                .peer(&r.site)
                .await
                .map_err(|e| e.to_string())?
                .filter(|p| !p.url.is_empty())
                .ok_or_else(|| {
                    format!(
                        "site {} holds input {} but announced no address",
                        r.site,
                        r.copy.from.display()
                    )
                })?;
            let client = CentreClient::new(
                std::slice::from_ref(&peer.url),
                link.site(),
                key,
                link.ca.as_deref(),
            )
            .map_err(|e| e.to_string())?;
            let prefix = format!("{PEER_INPUTS}/{job}/{}", r.index);
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let offer: FileOffer =
                tokio::time::timeout_at(deadline, client.call_empty("POST", &prefix, left))
                    .await
                    .map_err(|_| {
                        format!(
                            "asking site {} for input {}: not done in time (copy_timeout_seconds)",
                            r.site,
                            r.copy.from.display()
                        )
                    })?
                    .map_err(|e| {
                        format!(
                            "asking site {} for input {}: {e}",
                            r.site,
                            r.copy.from.display()
                        )
                    })?;
            let got = foresight_rm::grid::receive_at(
                &client,
                &prefix,
                std::slice::from_ref(&offer),
                inbox,
                deadline,
            )
            .await
            .map_err(|e| {
                format!(
                    "fetching input {} from site {}: {e}",
                    r.copy.from.display(),
                    r.site
                )
            })?;
            tracing::info!(
                job,
                bytes = got.bytes,
                millis = got.millis,
                "input {} fetched from site {}",
                r.copy.from.display(),
                r.site
            );
            self.measured(cluster, got.bytes, got.millis);
            write_as(&inbox.join(&offer.name), &r.copy.to, account, deadline).await?;
            // The holder's copy is no longer needed; one left (the holder unreachable now)
            // is replaced at the next offer.
            let dropped = client
                .call_empty::<serde_json::Value>("DELETE", &prefix, Duration::ZERO)
                .await;
            if let Err(e) = dropped {
                tracing::warn!(
                    job,
                    "site {} keeps its copy of input {}: {e}",
                    r.site,
                    r.copy.from.display()
                );
            }
        }
        Ok(())
    }
}

impl Service {
    /// How long a copy of an input on its way between sites is kept: twice the time a
    /// fetch may take, and an hour at least.
    fn stale_after(&self) -> std::time::Duration {
        (self.copy_timeout() * 2).max(std::time::Duration::from_secs(3_600))
    }
}

/// Removes the entries `depth` levels below `dir` last changed more than `age` ago.
fn sweep(dir: &Path, depth: u32, age: std::time::Duration) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if depth > 1 && meta.is_dir() {
            sweep(&path, depth - 1, age);
            continue;
        }
        let old = meta
            .modified()
            .ok()
            .and_then(|m| m.elapsed().ok())
            .is_some_and(|a| a > age);
        if old {
            let _ = if meta.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
        }
    }
}

/// An input of a part that another site holds.
struct Remote {
    copy: Copy,
    index: usize,
    site: String,
}

/// Writes the service's own file `from` to `to` as `account` (the service's own when
/// `None`), by `deadline`: the service never writes in a directory the account owns, so no
/// link planted there is followed with the service's rights.
async fn write_as(
    from: &Path,
    to: &Path,
    account: Option<&str>,
    deadline: tokio::time::Instant,
) -> Result<(), String> {
    use tokio::io::AsyncWriteExt;
    let a = account
        .map(crate::runtime::staging::as_account)
        .transpose()?
        .flatten();
    let write = async {
        if let Some(dir) = to.parent() {
            let made =
                crate::runtime::staging::command_as(a.as_ref(), &["mkdir", "-p", "--"], &[dir])
                    .output()
                    .await
                    .map_err(|e| format!("creating {}: {e}", dir.display()))?;
            if !made.status.success() {
                return Err(format!(
                    "creating {}: {}",
                    dir.display(),
                    String::from_utf8_lossy(&made.stderr).trim()
                ));
            }
        }
        let mut child =
            crate::runtime::staging::command_as(a.as_ref(), &["dd", "status=none"], &[])
                .arg(format!("of={}", to.display()))
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .map_err(|e| format!("writing {}: {e}", to.display()))?;
        let mut stdin = child.stdin.take().expect("invariant: stdin is piped");
        let mut src = tokio::fs::File::open(from)
            .await
            .map_err(|e| format!("{}: {e}", from.display()))?;
        tokio::io::copy(&mut src, &mut stdin)
            .await
            .map_err(|e| format!("writing {}: {e}", to.display()))?;
        stdin
            .flush()
            .await
            .map_err(|e| format!("writing {}: {e}", to.display()))?;
        drop(stdin);
        let done = child
            .wait_with_output()
            .await
            .map_err(|e| format!("writing {}: {e}", to.display()))?;
        if done.status.success() {
            Ok(())
        } else {
            Err(format!(
                "writing {}: {}",
                to.display(),
                String::from_utf8_lossy(&done.stderr).trim()
            ))
        }
    };
    tokio::time::timeout_at(deadline, write)
        .await
        .map_err(|_| {
            format!(
                "writing {}: not done in time (copy_timeout_seconds)",
                to.display()
            )
        })?
}

#[cfg(test)]
mod tests {
    use super::*;
    use foresight_store::{InputRecord, JobRecord};

    fn request<'a>(site: &'a str, ts: &'a str, nonce: &'a str, sig: &'a str) -> PeerRequest<'a> {
        PeerRequest {
            site,
            timestamp: ts,
            nonce,
            signature: sig,
            method: "GET",
            path: "/peer/v1/inputs/7/0/in.dat",
        }
    }

    fn signed(key: &str, site: &str, nonce: &str) -> String {
        sign::signature(
            key,
            site,
            1000,
            nonce,
            "GET",
            "/peer/v1/inputs/7/0/in.dat",
            &[],
        )
    }

    #[test]
    fn a_forged_replayed_or_keyless_request_is_refused() {
        let v = sign::Verifier::default();
        let n = sign::nonce();
        let good = signed("key-of-b", "b", &n);
        assert!(check(&v, Some("key-of-b"), &request("b", "1000", &n, &good), 1000).is_ok());
        let again = check(&v, Some("key-of-b"), &request("b", "1000", &n, &good), 1001);
        assert!(again.is_err(), "replayed");
        let n2 = sign::nonce();
        let forged = signed("a-guess", "b", &n2);
        assert!(check(
            &v,
            Some("key-of-b"),
            &request("b", "1000", &n2, &forged),
            1000
        )
        .is_err());
        // Site c signs with its own key but claims to be b.
        let as_c = signed("key-of-c", "b", &n2);
        assert!(check(
            &v,
            Some("key-of-b"),
            &request("b", "1000", &n2, &as_c),
            1000
        )
        .is_err());
        let n3 = sign::nonce();
        let keyless = signed("", "z", &n3);
        assert!(check(&v, None, &request("z", "1000", &n3, &keyless), 1000).is_err());
    }

    #[test]
    fn only_the_winner_gets_an_input_held_here() {
        let awarded = |site: &str, state: &str| Awarded {
            site: Some(site.into()),
            state: state.into(),
            record: JobRecord {
                id: 7,
                inputs: vec![InputRecord {
                    path: "/scratch/in.dat".into(),
                    cluster: Some("a1".into()),
                    site: Some("a".into()),
                    bytes: 3,
                }],
                ..Default::default()
            },
        };
        assert!(grant(awarded("b", "started"), "a", "b", 7, 0).is_ok());
        let other = grant(awarded("b", "started"), "a", "c", 7, 0).unwrap_err();
        assert!(
            other.reason().contains("not awarded to site c"),
            "{other:?}"
        );
        assert!(
            grant(awarded("b", "done"), "a", "b", 7, 0).is_err(),
            "ended"
        );
        assert!(
            grant(awarded("b", "claimed"), "a", "b", 7, 1).is_err(),
            "no input 1"
        );
        assert!(
            grant(awarded("b", "claimed"), "c", "b", 7, 0).is_err(),
            "not held here"
        );
    }
}
