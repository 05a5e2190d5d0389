//! The API's accept loop: HTTPS through rustls when `[http]` names a certificate, and the
//! limits that keep slow or idle clients from holding the service (slowloris): a total
//! time for each request head (hyper's header read timeout, which also bounds the wait for
//! the next request on a kept-alive connection), a total time for each body (the
//! [`BodyDeadline`] that [`crate::api::Body`] obeys), an idle timeout when no byte moves and
//! no request is being answered, and a cap on open connections.
//!
//! The same loop serves the local Unix socket ([`Accept`] for `UnixListener`): each of its
//! connections carries its peer's uid ([`LocalPeer`], from the kernel), which the API
//! takes as the caller's identity when a request brings no token.

use crate::config::http::HttpConfig;
use hyper::body::Incoming;
use hyper::service::Service as _;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{watch, Semaphore};
use tokio_rustls::TlsAcceptor;

/// When the body of the request it is attached to must have arrived; reading it later is
/// answered 408.
#[derive(Clone, Copy, Debug)]
pub struct BodyDeadline(pub tokio::time::Instant);

/// The Unix account at the other end of a local-socket connection, as the kernel reports it
/// (`SO_PEERCRED`). Set on each request of that connection by the accept loop, never from
/// anything the client sends, and never on a TCP connection: a caller cannot claim it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalPeer {
    /// The peer's user id.
    pub uid: u32,
}

/// A listening socket the accept loop serves: TCP, or the local Unix socket.
pub trait Accept {
    /// A connection.
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// The next connection, a name of its peer for the log, and its local identity (only
    /// a Unix socket has one).
    fn accept_one(
        &self,
    ) -> impl Future<Output = io::Result<(Self::Stream, String, Option<LocalPeer>)>>;
}

impl Accept for TcpListener {
    type Stream = tokio::net::TcpStream;
    async fn accept_one(&self) -> io::Result<(Self::Stream, String, Option<LocalPeer>)> {
        let (stream, peer) = self.accept().await?;
        let _ = stream.set_nodelay(true);
        Ok((stream, peer.to_string(), None))
    }
}

/// One listener served in turn by two loops: a standby's, then the active service's.
impl Accept for Arc<TcpListener> {
    type Stream = tokio::net::TcpStream;
    async fn accept_one(&self) -> io::Result<(Self::Stream, String, Option<LocalPeer>)> {
        self.as_ref().accept_one().await
    }
}

impl Accept for UnixListener {
    type Stream = tokio::net::UnixStream;
    async fn accept_one(&self) -> io::Result<(Self::Stream, String, Option<LocalPeer>)> {
        let (stream, _) = self.accept().await?;
        // Without credentials the connection is still served, with tokens only.
        let peer = stream.peer_cred().ok().map(|c| LocalPeer { uid: c.uid() });
        let name = match peer {
            Some(p) => format!("local uid {}", p.uid),
            None => "a local peer".to_string(),
        };
        Ok((stream, name, peer))
    }
}

/// The TLS acceptor of `[http]`'s certificate and key, or None for plain HTTP. The error
/// names the file at fault.
pub fn tls_acceptor(cfg: &HttpConfig) -> anyhow::Result<Option<TlsAcceptor>> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let (Some(cert), Some(key)) = (&cfg.tls_cert, &cfg.tls_key) else {
        return Ok(None);
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| anyhow::anyhow!("http.tls_cert {}: {e}", cert.display()))?;
    if chain.is_empty() {
        anyhow::bail!(
            "http.tls_cert {}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it",
            cert.display()
        );
    }
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        anyhow::anyhow!(
            "http.tls_key {}: no PEM private key read ({e}); PKCS#8, PKCS#1 and SEC1 keys are \
             accepted",
            key.display()
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| {
            anyhow::anyhow!(
                "http.tls_cert {} and http.tls_key {}: {e}",
                cert.display(),
                key.display()
            )
        })?;
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Some(TlsAcceptor::from(Arc::new(server))))
}

/// Serves `app` on `listener` until `shutdown` completes, then lets the connections finish
/// their requests (at most `DRAIN` more).
pub async fn serve<L: Accept>(
    listener: L,
    app: axum::Router,
    tls: Option<TlsAcceptor>,
    cfg: &HttpConfig,
    shutdown: impl Future<Output = ()>,
) {
    const DRAIN: Duration = Duration::from_secs(10);
    const EVICTION: Duration = Duration::from_millis(500);
    let limits = Limits {
        header: cfg.header_timeout(),
        body: cfg.body_timeout(),
        idle: cfg.idle_timeout(),
    };
    let max = cfg.max_connections;
    let open = Arc::new(Semaphore::new(max));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut refused = Refused::default();
    let registry = Arc::new(Registry::default());
    tokio::pin!(shutdown);
    loop {
        let (stream, peer, local) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept_one() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // EMFILE and the like: the socket stays in the backlog; try again soon
                    // rather than spin.
                    tracing::error!("accepting a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let permit = match open.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                // At the cap: make room by closing the connection that has waited longest
                // without a request being answered, preferring one that never sent a
                // complete request (a slow client holds those); a new client is then served
                // even while slow ones fill the cap.
                let evicted = registry.evict_one();
                refused.count(max, &peer, evicted);
                if !evicted {
                    drop(stream);
                    continue;
                }
                match tokio::time::timeout(EVICTION, open.clone().acquire_owned()).await {
                    Ok(Ok(p)) => p,
                    _ => {
                        drop(stream);
                        continue;
                    }
                }
            }
        };
        let app = app.clone();
        let tls = tls.clone();
        let stop = stop_rx.clone();
        let activity = registry.add();
        let registry = registry.clone();
        tokio::spawn(async move {
            let _registered = Registered(registry, activity.clone());
            let io = Tracked {
                inner: stream,
                activity: activity.clone(),
            };
            match tls {
                None => connection(io, app, limits, local, activity, stop).await,
                Some(tls) => {
                    let handshake = tokio::select! {
                        r = tokio::time::timeout(limits.header, tls.accept(io)) => r,
                        () = activity.evict.notified() => return,
                    };
                    match handshake {
                        Ok(Ok(io)) => connection(io, app, limits, None, activity, stop).await,
                        Ok(Err(e)) => tracing::debug!("TLS handshake with {peer}: {e}"),
                        Err(_) => tracing::debug!("TLS handshake with {peer}: timed out"),
                    }
                }
            }
            drop(permit);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let all = u32::try_from(max).unwrap_or(u32::MAX);
    if tokio::time::timeout(DRAIN, open.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!(
            "{} connections still open {DRAIN:?} after shutdown began; closing them",
            max - open.available_permits()
        );
    }
}

#[derive(Clone, Copy)]
struct Limits {
    header: Duration,
    body: Duration,
    idle: Duration,
}

/// Connections closed at the cap since the last log line, logged at most once a second.
#[derive(Default)]
struct Refused {
    evicted: u64,
    refused: u64,
    last_log: Option<Instant>,
}

impl Refused {
    fn count(&mut self, max: usize, peer: &str, evicted: bool) {
        if evicted {
            self.evicted += 1;
        } else {
            self.refused += 1;
        }
        if self
            .last_log
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
        {
            tracing::warn!(
                "connection limit reached ({max} open, [http] max_connections): in the last \
                 second {} waiting connection(s) closed to make room and {} new one(s) refused \
                 (every open one busy), the latest from {peer}",
                self.evicted,
                self.refused
            );
            self.evicted = 0;
            self.refused = 0;
            self.last_log = Some(Instant::now());
        }
    }
}

/// The open connections, for eviction at the cap.
#[derive(Default)]
struct Registry {
    next: AtomicU64,
    open: std::sync::Mutex<std::collections::HashMap<u64, Arc<Activity>>>,
}

impl Registry {
    fn add(&self) -> Arc<Activity> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let a = Arc::new(Activity::new(id));
        self.lock().insert(id, a.clone());
        a
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<u64, Arc<Activity>>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Tells the oldest connection not answering a request to close, preferring one that
    /// has never had a request; false when every one is answering.
    fn evict_one(&self) -> bool {
        let mut open = self.lock();
        let victim = open
            .values()
            .filter(|a| a.answering.load(Ordering::Relaxed) == 0)
            .min_by_key(|a| (a.requests.load(Ordering::Relaxed) > 0, a.start))
            .map(|a| a.id);
        match victim.and_then(|id| open.remove(&id)) {
            Some(a) => {
                a.evict.notify_one();
                true
            }
            None => false,
        }
    }
}

/// Removes a connection from the registry when its task ends.
struct Registered(Arc<Registry>, Arc<Activity>);

impl Drop for Registered {
    fn drop(&mut self) {
        self.0.lock().remove(&self.1.id);
    }
}

/// One connection, served until it ends, goes idle, or the server stops.
async fn connection<I>(
    io: I,
    app: axum::Router,
    limits: Limits,
    local: Option<LocalPeer>,
    activity: Arc<Activity>,
    mut stop: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let tower = TowerToHyperService::new(app);
    let busy = activity.clone();
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        req.extensions_mut()
            .insert(BodyDeadline(tokio::time::Instant::now() + limits.body));
        if let Some(p) = local {
            req.extensions_mut().insert(p);
        }
        let answering = Answering::new(busy.clone());
        let answer = tower.call(req);
        async move {
            let r = answer.await;
            drop(answering);
            r
        }
    });
    // A head hyper cannot read it answers itself (400, 414, 431): with the API's JSON error
    // body, through `JsonHeadErrors`.
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header)
        .max_headers(crate::api::head_errors::MAX_HEADERS)
        .max_buf_size(crate::api::head_errors::MAX_HEAD_BYTES)
        .keep_alive(true)
        .serve_connection(
            TokioIo::new(crate::api::head_errors::JsonHeadErrors::new(io)),
            service,
        );
    tokio::pin!(conn);
    let mut stopping = *stop.borrow();
    if stopping {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!("connection: {e}");
                }
                return;
            }
            () = activity.idle_for(limits.idle) => return,
            () = activity.evict.notified() => return,
            changed = stop.changed(), if !stopping => {
                stopping = true;
                if changed.is_ok() {
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// When a connection last moved a byte, and how many of its requests are being answered.
struct Activity {
    id: u64,
    start: Instant,
    last_ms: AtomicU64,
    answering: AtomicUsize,
    /// Requests whose head arrived.
    requests: AtomicU64,
    /// Told to close to make room at the cap (a permit, so a notice sent before the
    /// connection's task waits is not lost).
    evict: tokio::sync::Notify,
}

impl Activity {
    fn new(id: u64) -> Activity {
        Activity {
            id,
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
            answering: AtomicUsize::new(0),
            requests: AtomicU64::new(0),
            evict: tokio::sync::Notify::new(),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// Completes once no byte has moved for `idle` while no request was being answered.
    async fn idle_for(&self, idle: Duration) {
        loop {
            let last = self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            let deadline = last + idle;
            let now = Instant::now();
            if now >= deadline {
                if self.answering.load(Ordering::Relaxed) == 0 {
                    return;
                }
                tokio::time::sleep(idle).await;
            } else {
                tokio::time::sleep(deadline - now).await;
            }
        }
    }
}

/// A request being answered: the idle timeout does not run meanwhile.
struct Answering(Arc<Activity>);

impl Answering {
    fn new(a: Arc<Activity>) -> Answering {
        a.answering.fetch_add(1, Ordering::Relaxed);
        a.requests.fetch_add(1, Ordering::Relaxed);
        Answering(a)
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.touch();
        self.0.answering.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The stream, noting each byte that moves.
struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Raises the soft limit on open files towards the hard one so that `max_connections`
/// connections fit beside the database, job output files and supervisors' pipes (`SPARE`);
/// warns when they cannot, since accepting then fails with EMFILE instead of the clear
/// refusal at the cap.
pub fn raise_fd_limit(max_connections: usize) {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    const SPARE: u64 = 256;
    let want = max_connections as u64 + SPARE;
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return;
    };
    if soft >= want {
        return;
    }
    let new = want.min(hard);
    if setrlimit(Resource::RLIMIT_NOFILE, new, hard).is_err() || new < want {
        tracing::warn!(
            "[http] max_connections = {max_connections} needs {want} open files but the limit \
             is {}: lower max_connections or raise the limit (ulimit -n)",
            new.max(soft)
        );
    }
}
