//! The Foresight service: a REST API over the grid planner, a scheduling cycle that reserves
//! and dispatches, a durable store, and local executors that run jobs as real processes.
//!
//! # Layers
//! Imports go one way, down this list (`tests/layers.rs` fails on any other edge, and on
//! any import cycle between the modules of one directory). `docs/src/architecture.md` follows
//! one job through them.
//! - [`config`]: the TOML configuration, its embedded defaults and checks. Depends on
//!   nothing else here.
//! - [`state`]: the jobs, clusters, reservations, users and workflows, and every change to
//!   them, under one lock and without I/O: each change takes `now` and returns effects.
//! - [`runtime`]: the running service. Carries out the effects (resource managers,
//!   staging copies, the store), runs the scheduling cycle and the peer dispatchers, holds
//!   the data directory.
//! - [`api`]: what the service answers on: the REST API, `/healthz`, `/metrics`, OpenAPI,
//!   the dashboard, and the WIKI servers through which Maui schedules local clusters.
#![forbid(unsafe_code)]

pub mod api;
pub mod config;
pub mod runtime;
pub mod state;

pub use api::ApiError;
pub use config::Config;
pub use state::refusal::Refusal;

use std::sync::Arc;

/// Starts the service and serves until SIGTERM or Ctrl-C; then finishes the requests in
/// flight and writes everything. Jobs keep running under their supervisors and are
/// re-adopted by the next start.
pub async fn serve(mut cfg: Config) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(&cfg.listen)
        .await
        .map_err(|e| anyhow::anyhow!("listening on {}: {e}", cfg.listen))?;
    let addr = listener.local_addr()?;
    // Read before anything is written, so that a bad certificate stops the start at once.
    let tls = api::acceptor::tls_acceptor(&cfg.http)?;
    let http_cfg = cfg.http.clone();
    api::acceptor::raise_fd_limit(http_cfg.max_connections);
    let root = foresight_rm::account::running_as_root();
    // A root service's socket in the data directory must be reachable by every account.
    runtime::data_dir::prepare(&cfg.data_dir, root && cfg.identity.socket.is_none())?;
    // Absolute from here on: a job's output and attempt paths are made from it, and a job
    // runs in its own working directory, where a relative path would name another place.
    cfg.data_dir = std::fs::canonicalize(&cfg.data_dir)
        .map_err(|e| anyhow::anyhow!("data dir {}: {e}", cfg.data_dir.display()))?;
    let data_dir = cfg.data_dir.clone();
    // Held until the server exits; a second server on this directory refuses here, and one
    // on this store (from another directory) as the store opens.
    let _lock = runtime::data_dir::DataDirLock::acquire(&data_dir)?;
    let listener = Arc::new(listener);
    // A standby answers 503 on its address until it holds the store.
    let (active_tx, active_rx) = tokio::sync::watch::channel(false);
    if cfg.standby {
        let (l, tls, http) = (listener.clone(), tls.clone(), http_cfg.clone());
        tokio::spawn(async move {
            let active = async move {
                let mut rx = active_rx;
                let _ = rx.wait_for(|active| *active).await;
            };
            api::acceptor::serve(l, api::standby::router(), tls, &http, active).await;
        });
    }
    let (service, token) = runtime::Service::open(cfg).await?;
    let _ = active_tx.send(true);
    let wiki = api::wiki_server::WikiServers::start(&service, &data_dir).await?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{addr}");
    if tls.is_none() && !addr.ip().is_loopback() {
        tracing::warn!(
            "serving plain HTTP on {addr}: tokens cross the network in the clear; give \
             --tls-cert and --tls-key (or [http] tls_cert and tls_key)"
        );
    }
    service.start_global_queue(&url).await?;
    service.start_grid_agent()?;
    // Bound before `server.url` is written: a client that sees the address finds the
    // socket too.
    let sockets = local_sockets(&service.cfg, &data_dir, root)?;
    std::fs::write(data_dir.join("server.url"), format!("{url}\n"))?;
    if let Some(t) = token {
        println!(
            "admin token (shown once; also in {}): {t}",
            data_dir.join("admin.token").display()
        );
    }
    println!(
        "foresight listening on {url} (data in {})",
        data_dir.display()
    );
    for (_, s) in &sockets {
        println!(
            "local socket {} (callers on this host need no token)",
            s.path().display()
        );
    }
    tracing::info!("listening on {url}");
    let app = api::router(service.clone());
    let taken = Arc::new(std::sync::Mutex::new(None));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stop = {
        let (taken, store) = (taken.clone(), service.store.clone());
        async move {
            let lost = stop_signal(store).await;
            *taken.lock().unwrap_or_else(|p| p.into_inner()) = lost;
            let _ = stop_tx.send(true);
        }
    };
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let (listeners, files): (Vec<_>, Vec<_>) = sockets.into_iter().unzip();
    let local =
        futures::future::join_all(listeners.into_iter().map(|l| {
            api::acceptor::serve(l, app.clone(), None, &http_cfg, stopped(stop_rx.clone()))
        }));
    let tcp = api::acceptor::serve(listener, app, tls, &http_cfg, stopped(stop_rx.clone()));
    tokio::join!(stop, tcp, local);
    drop(files);
    wiki.stop().await;
    service.shutdown().await;
    let _ = std::fs::remove_file(data_dir.join("server.url"));
    if let Some(e) = taken.lock().unwrap_or_else(|p| p.into_inner()).take() {
        anyhow::bail!("stopped, having lost the store to another server: {e}");
    }
    println!("foresight stopped");
    Ok(())
}

/// Binds the local sockets: the service's own (`[identity] socket`, by default in the data
/// directory) and, for the host's system-wide service, [`config::identity::system_socket`]
/// too (`[identity] system_socket`; by default when the service is root on its default data
/// directory). Open to every account (0666) when the service is root, which tells callers
/// apart by their uid; its own account's alone (0600) otherwise.
fn local_sockets(
    cfg: &Config,
    data_dir: &std::path::Path,
    root: bool,
) -> anyhow::Result<Vec<(tokio::net::UnixListener, api::local_socket::LocalSocket)>> {
    use api::local_socket::{bind, BindError};
    let mode = if root { 0o666 } else { 0o600 };
    let own = cfg.identity.socket_path(data_dir);
    let mut out = vec![bind(&own, mode, 0o755).map_err(|e| anyhow::anyhow!("local socket: {e}"))?];
    let default_dir = std::fs::canonicalize(config::default_data_dir()).ok();
    let explicit = cfg.identity.system_socket;
    let system = explicit.unwrap_or(root && default_dir.as_deref() == Some(data_dir));
    let path = config::identity::system_socket();
    if system && path != own {
        match bind(&path, mode, 0o755) {
            Ok(b) => out.push(b),
            Err(e @ BindError::Taken(_)) => {
                tracing::warn!("not the host's system-wide service: {e} ([identity] system_socket)")
            }
            Err(e) if explicit.is_some() => {
                anyhow::bail!("[identity] system_socket: {e}")
            }
            Err(e) => tracing::warn!("not the host's system-wide service: {e}"),
        }
    }
    Ok(out)
}

/// Waits for SIGTERM or Ctrl-C (`None`), or until another server has taken the store
/// (`Some`): a PostgreSQL database whose lock this one lost with its connection, and
/// another server took before this one could again. The store then refuses this one's
/// writes, so it starts nothing more; it stops rather than serve a state it cannot keep.
async fn stop_signal(
    store: Arc<dyn foresight_store::Store>,
) -> Option<foresight_store::StoreError> {
    tokio::select! {
        () = shutdown_signal() => None,
        e = store.taken_over() => Some(e),
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

/// The service handle for tests and embedding.
pub type Handle = Arc<runtime::Service>;
