//! The resource-manager side: a TCP server that lets Maui (or Moab, or Foresight's own
//! [`WikiClient`](super::WikiClient)) drive a cluster through a [`WikiBackend`].
//!
//! One framed request per connection, as Maui speaks it: accept, check the peer, read one
//! frame within the read timeout, check its size, checksum and timestamp, parse the command,
//! ask the backend within the backend timeout, write one framed reply, close. Every refusal
//! is an `SC=-1` reply naming the reason, and is logged; nothing a peer sends can make the
//! server panic or wait without bound.

use super::error::{BackendError, WikiError};
use super::frame::{read_frame, Frame, Key};
use super::message::{CancelType, Reply, Request, Selection};
use super::record::{JobRecord, NodeRecord, NodeState};
use crate::clock::unix_seconds;
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::timeout;

/// What the server needs of a cluster: its nodes and jobs as WIKI records, and the four job
/// actions. The daemon implements it over a local-executor cluster.
///
/// Contracts: every method answers promptly (the server gives up after
/// [`WikiServerConfig::backend_timeout`] and answers `SC=-1`); an `Err` changes nothing;
/// `start_job` starts the job on exactly the processors of the task list or not at all.
#[async_trait]
pub trait WikiBackend: Send + Sync {
    /// Every node of the cluster (the server applies `ARG=`'s time and name selection).
    async fn get_nodes(&self) -> Result<Vec<NodeRecord>, BackendError>;

    /// Every job the scheduler should know of: queued, running, suspended, and recently
    /// ended ones (so that the scheduler sees them end).
    async fn get_jobs(&self) -> Result<Vec<JobRecord>, BackendError>;

    /// Starts `job` with one task on each entry of `tasklist` (a node named twice gets two
    /// tasks). Maui defers a job for an hour after one refusal, so refuse only what can
    /// never run as asked, or what is not free now ([`check_tasklist`] does both), and say why.
    async fn start_job(&self, job: &str, tasklist: &[String]) -> Result<(), BackendError>;

    /// Cancels `job`; `kind` says whether on request or at its wallclock limit.
    async fn cancel_job(&self, job: &str, kind: CancelType) -> Result<(), BackendError>;

    /// Suspends the running `job`, keeping its processors allocated.
    async fn suspend_job(&self, job: &str) -> Result<(), BackendError>;

    /// Resumes the suspended `job`.
    async fn resume_job(&self, job: &str) -> Result<(), BackendError>;
}

/// Checks that `tasklist` can start `job` on `nodes` now: every node exists, is up, has at
/// least as many processors as tasks placed on it ([`BackendError::CannotRun`] otherwise: that
/// will never change) and has them free ([`BackendError::ProcessorsBusy`] otherwise). For
/// backends, which own the decision.
pub fn check_tasklist(
    job: &str,
    nodes: &[NodeRecord],
    tasklist: &[String],
) -> Result<(), BackendError> {
    if tasklist.is_empty() {
        return Err(BackendError::CannotRun {
            job: job.to_owned(),
            reason: "the TASKLIST names no processor".to_owned(),
        });
    }
    let mut wanted: BTreeMap<&str, u32> = BTreeMap::new();
    for node in tasklist {
        *wanted.entry(node.as_str()).or_default() += 1;
    }
    for (name, count) in wanted {
        let node =
            nodes
                .iter()
                .find(|n| n.name == name)
                .ok_or_else(|| BackendError::NoSuchNode {
                    node: name.to_owned(),
                })?;
        if count > node.cproc {
            return Err(BackendError::CannotRun {
                job: job.to_owned(),
                reason: format!(
                    "the TASKLIST places {count} task(s) on node {name:?}, which has {} \
                     processor(s)",
                    node.cproc
                ),
            });
        }
        let available = if node.state == NodeState::Down {
            0
        } else {
            node.aproc
        };
        if count > available {
            return Err(BackendError::ProcessorsBusy {
                node: name.to_owned(),
                wanted: count,
                available,
            });
        }
    }
    Ok(())
}

/// How a WIKI server runs. `Debug` shows no key.
#[derive(Clone, Debug)]
pub struct WikiServerConfig {
    /// The shared key (the N of Maui's `configure --with-key=N`).
    pub key: Key,
    /// The only addresses requests are accepted from (IPv4-mapped IPv6 addresses match their
    /// IPv4 form). Empty: none, so a forgotten list fails closed and says so in the log.
    pub allowed_peers: Vec<IpAddr>,
    /// `AUTH=` of the replies: the user the server runs as.
    pub auth: String,
    /// Time allowed for a whole request to arrive, from accept to its last byte: a slow or
    /// truncated sender is answered `SC=-1` then, not waited for.
    pub read_timeout: Duration,
    /// Time allowed for the backend to answer one request; keep it under the scheduler's own
    /// RM timeout so that it hears the reason.
    pub backend_timeout: Duration,
    /// Time allowed to write the reply.
    pub write_timeout: Duration,
    /// Connections served at once; more wait in the listen queue.
    pub max_connections: usize,
}

impl WikiServerConfig {
    /// Default read timeout.
    pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
    /// Default backend timeout.
    pub const BACKEND_TIMEOUT: Duration = Duration::from_secs(8);
    /// Default write timeout.
    pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
    /// Default connection limit.
    pub const MAX_CONNECTIONS: usize = 16;

    /// A config with `key`, `allowed_peers` and `auth`, and the default timeouts and limit.
    pub fn new(key: Key, allowed_peers: Vec<IpAddr>, auth: impl Into<String>) -> Self {
        WikiServerConfig {
            key,
            allowed_peers,
            auth: auth.into(),
            read_timeout: Self::READ_TIMEOUT,
            backend_timeout: Self::BACKEND_TIMEOUT,
            write_timeout: Self::WRITE_TIMEOUT,
            max_connections: Self::MAX_CONNECTIONS,
        }
    }

    fn allows(&self, peer: IpAddr) -> bool {
        let peer = peer.to_canonical();
        self.allowed_peers.iter().any(|a| a.to_canonical() == peer)
    }
}

/// Serves WIKI requests on `listener` with `backend` until `shutdown` completes, then waits
/// for the connections in progress (each bounded by the timeouts). Fails only at the start,
/// when `config.auth` cannot be written in a frame.
pub async fn serve<B>(
    listener: TcpListener,
    config: WikiServerConfig,
    backend: Arc<B>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), WikiError>
where
    B: WikiBackend + ?Sized + 'static,
{
    Frame::new(0, config.auth.as_str(), "").encode(config.key)?;
    if config.allowed_peers.is_empty() {
        tracing::warn!("WIKI server has no allowed peer: every request will be refused");
    }
    let config = Arc::new(config);
    let limit = Arc::new(Semaphore::new(config.max_connections.max(1)));
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            () = &mut shutdown => break,
            permit = limit.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break, // closed: never happens, the semaphore lives here
            },
        };
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors and the like: pause, do not spin.
                    tracing::warn!(error = %e, "WIKI server cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let (config, backend) = (config.clone(), backend.clone());
        connections.spawn(async move {
            handle_connection(stream, peer, &config, &*backend).await;
            drop(permit);
        });
        while let Some(done) = connections.try_join_next() {
            log_join(done);
        }
    }
    while let Some(done) = connections.join_next().await {
        log_join(done);
    }
    Ok(())
}

fn log_join(done: Result<(), tokio::task::JoinError>) {
    if let Err(e) = done {
        tracing::error!(error = %e, "WIKI connection task failed");
    }
}

/// Serves the one request of a connection and closes it.
async fn handle_connection<B: WikiBackend + ?Sized>(
    mut stream: TcpStream,
    peer: SocketAddr,
    config: &WikiServerConfig,
    backend: &B,
) {
    let (command, reply) = answer(&mut stream, peer, config, backend).await;
    match &reply {
        Reply::Failed { reason, .. } => {
            tracing::warn!(peer = %peer, command, reason = %reason, "WIKI request refused");
        }
        _ => tracing::debug!(peer = %peer, command, "WIKI request served"),
    }
    let bytes = encode_reply(&reply, config);
    let write = async {
        stream.write_all(&bytes).await?;
        stream.shutdown().await
    };
    match timeout(config.write_timeout, write).await {
        Ok(Ok(())) => linger(&mut stream).await,
        Ok(Err(e)) => tracing::warn!(peer = %peer, error = %e, "WIKI reply not delivered"),
        Err(_) => tracing::warn!(peer = %peer, "WIKI reply not delivered: write timed out"),
    }
}

/// After the reply, reads and drops what the peer still sends (the rest of a refused
/// request), until it closes, for at most [`LINGER`] and [`LINGER_BYTES`]: closing a socket
/// with unread data resets the connection, and the peer could lose the reply with it.
async fn linger(stream: &mut TcpStream) {
    let drain = async {
        let mut scratch = [0u8; 4096];
        let mut total = 0;
        while total < LINGER_BYTES {
            match stream.read(&mut scratch).await {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
    };
    let _ = timeout(LINGER, drain).await;
}

/// Longest wait for the peer to close after the reply.
const LINGER: Duration = Duration::from_secs(1);
/// Most bytes read and dropped after the reply.
const LINGER_BYTES: usize = 64 * 1024;

/// The reply to the request on `stream`, and the command it named (`"-"` when none was read).
async fn answer<B: WikiBackend + ?Sized>(
    stream: &mut TcpStream,
    peer: SocketAddr,
    config: &WikiServerConfig,
    backend: &B,
) -> (&'static str, Reply) {
    const NONE: &str = "-";
    if !config.allows(peer.ip()) {
        return (
            NONE,
            Reply::failed(WikiError::PeerNotAllowed {
                peer: peer.ip().to_canonical(),
            }),
        );
    }
    let body = match timeout(config.read_timeout, read_frame(stream)).await {
        Ok(Ok(body)) => body,
        Ok(Err(e)) => return (NONE, Reply::failed(e)),
        Err(_) => {
            let e = WikiError::Timeout {
                during: "complete request",
                after: config.read_timeout,
            };
            return (NONE, Reply::failed(e));
        }
    };
    let frame = match Frame::decode_body(&body, config.key, unix_seconds()) {
        Ok(frame) => frame,
        Err(e) => return (NONE, Reply::failed(e)),
    };
    let request = match Request::parse(&frame.data) {
        Ok(request) => request,
        Err(e) => return (NONE, Reply::failed(e)),
    };
    let command = request.command();
    tracing::debug!(peer = %peer, auth = %frame.auth, command, "WIKI request");
    match timeout(config.backend_timeout, respond(backend, &request)).await {
        Ok(reply) => (command, reply),
        Err(_) => {
            let e = WikiError::Timeout {
                during: "answer from the cluster",
                after: config.backend_timeout,
            };
            (command, Reply::failed(e))
        }
    }
}

/// The framed bytes of `reply`; a reply that cannot be rendered or framed (a backend record
/// with a bad name, a list over 2 MiB) becomes an `SC=-1` saying so.
fn encode_reply(reply: &Reply, config: &WikiServerConfig) -> Vec<u8> {
    let frame =
        |data: String| Frame::new(unix_seconds(), config.auth.as_str(), data).encode(config.key);
    let result = reply.render().and_then(frame);
    result
        .or_else(|e| {
            tracing::error!(error = %e, "WIKI reply cannot be sent");
            let fallback = Reply::failed(format!("the reply cannot be sent: {e}"));
            fallback.render().and_then(frame)
        })
        .unwrap_or_else(|e| {
            // Only a bad `auth`, which `serve` checked at the start, can get here.
            tracing::error!(error = %e, "WIKI failure reply cannot be sent");
            Vec::new()
        })
}

/// The reply of `backend` to `request`: records filtered by `ARG=`, or a text saying what was
/// done, or `SC=-1` with the backend's reason.
pub async fn respond<B: WikiBackend + ?Sized>(backend: &B, request: &Request) -> Reply {
    let result = match request {
        Request::GetNodes { since, select } => backend.get_nodes().await.and_then(|nodes| {
            let nodes = select_records(nodes, *since, select, |n| (&n.name, n.update_time))
                .map_err(|node| BackendError::NoSuchNode { node })?;
            Ok(Reply::Nodes(nodes))
        }),
        Request::GetJobs { since, select } => backend.get_jobs().await.and_then(|jobs| {
            let jobs = select_records(jobs, *since, select, |j| (&j.id, j.update_time))
                .map_err(|job| BackendError::NoSuchJob { job })?;
            Ok(Reply::Jobs(jobs))
        }),
        Request::StartJob { job, tasklist } => backend.start_job(job, tasklist).await.map(|()| {
            Reply::Done(format!(
                "job {job} started on {} processor(s)",
                tasklist.len()
            ))
        }),
        Request::CancelJob { job, kind } => backend
            .cancel_job(job, *kind)
            .await
            .map(|()| Reply::Done(format!("job {job} cancelled ({kind})"))),
        Request::SuspendJob { job } => backend
            .suspend_job(job)
            .await
            .map(|()| Reply::Done(format!("job {job} suspended"))),
        Request::ResumeJob { job } => backend
            .resume_job(job)
            .await
            .map(|()| Reply::Done(format!("job {job} resumed"))),
    };
    result.unwrap_or_else(Reply::failed)
}

/// The records named by `select` and changed at or after `since`, in the backend's order;
/// `Err(name)` for a name no record has.
fn select_records<T>(
    records: Vec<T>,
    since: u64,
    select: &Selection,
    key: impl Fn(&T) -> (&String, u64),
) -> Result<Vec<T>, String> {
    if let Selection::Named(names) = select {
        if let Some(missing) = names
            .iter()
            .find(|name| !records.iter().any(|r| key(r).0 == *name))
        {
            return Err(missing.clone());
        }
    }
    Ok(records
        .into_iter()
        .filter(|r| {
            let (name, updated) = key(r);
            updated >= since
                && match select {
                    Selection::All => true,
                    Selection::Named(names) => names.contains(name),
                }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes() -> Vec<NodeRecord> {
        vec![
            NodeRecord {
                cproc: 4,
                aproc: 2,
                ..NodeRecord::new("a", NodeState::Running)
            },
            NodeRecord {
                cproc: 4,
                aproc: 4,
                ..NodeRecord::new("b", NodeState::Down)
            },
        ]
    }

    #[test]
    fn tasklist_check_separates_never_from_not_now() {
        let n = nodes();
        let list = |names: &[&str]| names.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(check_tasklist("j", &n, &list(&["a", "a"])), Ok(()));
        assert!(matches!(
            check_tasklist("j", &n, &list(&["a", "a", "a"])),
            Err(BackendError::ProcessorsBusy {
                wanted: 3,
                available: 2,
                ..
            })
        ));
        assert!(matches!(
            check_tasklist("j", &n, &list(&["a"; 5])),
            Err(BackendError::CannotRun { .. })
        ));
        assert!(matches!(
            check_tasklist("j", &n, &list(&["b"])),
            Err(BackendError::ProcessorsBusy { available: 0, .. })
        ));
        assert!(matches!(
            check_tasklist("j", &n, &list(&["c"])),
            Err(BackendError::NoSuchNode { .. })
        ));
        assert!(check_tasklist("j", &n, &[]).is_err());
    }

    #[test]
    fn selection_filters_by_name_and_time() {
        let mut n = nodes();
        n[0].update_time = 100;
        n[1].update_time = 200;
        fn key(r: &NodeRecord) -> (&String, u64) {
            (&r.name, r.update_time)
        }
        let names = |v: Vec<NodeRecord>| v.into_iter().map(|r| r.name).collect::<Vec<_>>();
        let all = select_records(n.clone(), 0, &Selection::All, key).unwrap();
        assert_eq!(names(all), ["a", "b"]);
        let recent = select_records(n.clone(), 150, &Selection::All, key).unwrap();
        assert_eq!(names(recent), ["b"]);
        let named = select_records(n.clone(), 0, &Selection::Named(vec!["b".into()]), key);
        assert_eq!(names(named.unwrap()), ["b"]);
        let missing = select_records(n, 0, &Selection::Named(vec!["z".into()]), key);
        assert_eq!(missing.unwrap_err(), "z");
    }

    #[test]
    fn peers_match_in_canonical_form() {
        let config = WikiServerConfig::new(Key::new(1), vec!["127.0.0.1".parse().unwrap()], "root");
        assert!(config.allows("127.0.0.1".parse().unwrap()));
        assert!(config.allows("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!config.allows("127.0.0.2".parse().unwrap()));
        assert!(!format!("{config:?}").contains("Key(1)"));
    }
}
