//! The Foresight service: a REST API over the grid planner, a scheduling cycle that reserves
//! and dispatches, a durable store, and local executors that run jobs as real processes.
//!
//! # Layout
//! - [`config`]: the TOML configuration and its embedded defaults.
//! - `accounts`: the Unix account each user's jobs run as, and the data directory's modes.
//! - `data_lock`: one server per data directory (`server.lock`); one server per store is
//!   the store's own lock ([`foresight_store::Holder`]), since two directories can name
//!   one store.
//! - `world`: the state and every change to it, under one lock, without I/O.
//! - [`service`]: the running service: store writes, effects, the cycle task.
//! - [`dispatcher_config`] and `dispatcher`: peer dispatcher mode, where each site's
//!   service bids in English auctions for the global jobs of a shared PostgreSQL queue.
//! - [`http_config`]: the `[http]` table; `acceptor`: the accept loop that serves it
//!   (HTTPS, timeouts, the connection limit).
//! - [`http`]: the REST API, `/healthz`, `/metrics`, OpenAPI; `user_admin`: its routes
//!   that change users (credentials, tokens, disabling, removal).
//! - `dashboard`: the web dashboard at `/`, its assets embedded.
//! - [`wiki_server`]: the WIKI servers through which Maui schedules local clusters.
#![forbid(unsafe_code)]

mod acceptor;
mod accounts;
pub mod config;
mod dashboard;
mod data_lock;
mod dependency;
mod dispatcher;
pub mod dispatcher_config;
mod error;
mod head_errors;
pub mod http;
pub mod http_config;
mod limits;
mod metrics;
mod moment;
mod output;
mod plan_view;
mod refusal;
pub mod service;
mod staging;
mod user_admin;
pub mod wiki_rm;
pub mod wiki_server;
mod workflows;
#[doc(hidden)]
pub mod world;

pub use config::Config;
pub use error::ApiError;
pub use refusal::Refusal;

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
    let tls = acceptor::tls_acceptor(&cfg.http)?;
    let http_cfg = cfg.http.clone();
    acceptor::raise_fd_limit(http_cfg.max_connections);
    accounts::prepare_data_dir(&cfg.data_dir)?;
    // Absolute from here on: a job's output and attempt paths are made from it, and a job
    // runs in its own working directory, where a relative path would name another place.
    cfg.data_dir = std::fs::canonicalize(&cfg.data_dir)
        .map_err(|e| anyhow::anyhow!("data dir {}: {e}", cfg.data_dir.display()))?;
    let data_dir = cfg.data_dir.clone();
    // Held until the server exits; a second server on this directory refuses here, and one
    // on this store (from another directory) as the store opens.
    let _lock = data_lock::DataDirLock::acquire(&data_dir)?;
    let (service, token) = service::Service::open(cfg).await?;
    let wiki = wiki_server::WikiServers::start(&service, &data_dir).await?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{addr}");
    if tls.is_none() && !addr.ip().is_loopback() {
        tracing::warn!(
            "serving plain HTTP on {addr}: tokens cross the network in the clear; give \
             --tls-cert and --tls-key (or [http] tls_cert and tls_key)"
        );
    }
    service.start_dispatcher(&url).await?;
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
    let app = http::router(service.clone());
    let taken = Arc::new(std::sync::Mutex::new(None));
    let stop = {
        let (taken, store) = (taken.clone(), service.store.clone());
        async move {
            let lost = stop_signal(store).await;
            *taken.lock().unwrap_or_else(|p| p.into_inner()) = lost;
        }
    };
    acceptor::serve(listener, app, tls, &http_cfg, stop).await;
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
pub type Handle = Arc<service::Service>;
