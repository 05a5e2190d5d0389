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
    runtime::data_dir::prepare(&cfg.data_dir)?;
    // Absolute from here on: a job's output and attempt paths are made from it, and a job
    // runs in its own working directory, where a relative path would name another place.
    cfg.data_dir = std::fs::canonicalize(&cfg.data_dir)
        .map_err(|e| anyhow::anyhow!("data dir {}: {e}", cfg.data_dir.display()))?;
    let data_dir = cfg.data_dir.clone();
    // Held until the server exits; a second server on this directory refuses here, and one
    // on this store (from another directory) as the store opens.
    let _lock = runtime::data_dir::DataDirLock::acquire(&data_dir)?;
    let (service, token) = runtime::Service::open(cfg).await?;
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
    tracing::info!("listening on {url}");
    let app = api::router(service.clone());
    let taken = Arc::new(std::sync::Mutex::new(None));
    let stop = {
        let (taken, store) = (taken.clone(), service.store.clone());
        async move {
            let lost = stop_signal(store).await;
            *taken.lock().unwrap_or_else(|p| p.into_inner()) = lost;
        }
    };
    api::acceptor::serve(listener, app, tls, &http_cfg, stop).await;
    wiki.stop().await;
    service.shutdown().await;
    let _ = std::fs::remove_file(data_dir.join("server.url"));
    if let Some(e) = taken.lock().unwrap_or_else(|p| p.into_inner()).take() {
        anyhow::bail!("stopped, having lost the store to another server: {e}");
    }
    println!("foresight stopped");
    Ok(())
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
