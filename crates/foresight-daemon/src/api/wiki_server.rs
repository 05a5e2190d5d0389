//! The daemon's WIKI servers: one per local cluster with a `[cluster.wiki]` table, through
//! which Maui (or Moab, or another Foresight's `wiki` cluster) reads the cluster's nodes and
//! jobs and starts, cancels, suspends and resumes its jobs. The protocol is
//! `foresight_rm::wiki`'s; this is the [`WikiBackend`] over the service's state.

use crate::config::WikiConfig;
use crate::runtime::Service;
use foresight_core::ClusterId;
use foresight_rm::wiki::{
    serve, BackendError, CancelType, JobRecord, NodeRecord, WikiBackend, WikiServerConfig,
};
use std::path::Path;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// One cluster of the service as a WIKI backend.
pub struct ClusterBackend {
    service: Arc<Service>,
    cluster: ClusterId,
}

impl ClusterBackend {
    /// The backend of cluster `cluster` (its index in the configuration).
    pub fn new(service: Arc<Service>, cluster: ClusterId) -> ClusterBackend {
        ClusterBackend { service, cluster }
    }

    /// Runs `op` on the state; when it succeeds, persists and acts as any API change does.
    async fn change(
        &self,
        op: impl FnOnce(
            &mut crate::state::world::World,
            foresight_core::time::Time,
        ) -> Result<(), BackendError>,
    ) -> Result<(), BackendError> {
        self.service
            .mutate(|w, now| Ok(op(w, now)))
            .await
            .map_err(|e| BackendError::Unavailable {
                reason: e.to_string(),
            })?
    }
}

#[async_trait::async_trait]
impl WikiBackend for ClusterBackend {
    async fn get_nodes(&self) -> Result<Vec<NodeRecord>, BackendError> {
        let now = self.service.now();
        Ok(self.service.world().wiki_nodes(now, self.cluster))
    }

    async fn get_jobs(&self) -> Result<Vec<JobRecord>, BackendError> {
        let now = self.service.now();
        Ok(self.service.world().wiki_jobs(now, self.cluster))
    }

    async fn start_job(&self, job: &str, tasklist: &[String]) -> Result<(), BackendError> {
        let k = self.cluster;
        self.change(|w, now| w.wiki_start(now, k, job, tasklist))
            .await
    }

    async fn cancel_job(&self, job: &str, _kind: CancelType) -> Result<(), BackendError> {
        let k = self.cluster;
        self.change(|w, now| w.wiki_cancel(now, k, job)).await
    }

    async fn suspend_job(&self, job: &str) -> Result<(), BackendError> {
        let k = self.cluster;
        self.change(|w, now| w.wiki_pause(now, k, job, true)).await
    }

    async fn resume_job(&self, job: &str) -> Result<(), BackendError> {
        let k = self.cluster;
        self.change(|w, now| w.wiki_pause(now, k, job, false)).await
    }
}

/// The file a cluster's WIKI server writes its address to (useful with port 0).
pub fn addr_file(data_dir: &Path, cluster: &str) -> std::path::PathBuf {
    data_dir.join(format!("wiki-{cluster}.addr"))
}

/// The WIKI servers running, and how to stop them.
pub struct WikiServers {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl WikiServers {
    /// Binds and starts a server for every local cluster with a `[cluster.wiki]` table. Fails,
    /// naming the cluster, on an unreadable key file or an address that cannot be bound.
    pub async fn start(service: &Arc<Service>, data_dir: &Path) -> anyhow::Result<WikiServers> {
        let (stop, stopped) = watch::channel(false);
        let mut tasks = Vec::new();
        for (k, c) in ClusterId::enumerate(&service.cfg.cluster) {
            let Some(wiki) = c.wiki.as_ref().filter(|_| c.kind == "local") else {
                continue;
            };
            let (listener, config) = bind(wiki)
                .await
                .map_err(|e| anyhow::anyhow!("cluster {}: WIKI server: {e}", c.name))?;
            let addr = listener.local_addr()?;
            std::fs::write(addr_file(data_dir, &c.name), format!("{addr}\n"))?;
            tracing::info!(
                "cluster {}: WIKI server on {addr} (scheduler = {:?}, {} allowed peer(s))",
                c.name,
                c.scheduler,
                config.allowed_peers.len()
            );
            let backend = Arc::new(ClusterBackend::new(service.clone(), k));
            let mut stopped = stopped.clone();
            let name = c.name.clone();
            tasks.push(tokio::spawn(async move {
                let shutdown = async move {
                    let _ = stopped.wait_for(|s| *s).await;
                };
                if let Err(e) = serve(listener, config, backend, shutdown).await {
                    tracing::error!("cluster {name}: WIKI server stopped: {e}");
                }
            }));
        }
        Ok(WikiServers { stop, tasks })
    }

    /// Stops accepting, and waits for the requests in progress.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// The listener and server config of one `[cluster.wiki]` table.
async fn bind(wiki: &WikiConfig) -> anyhow::Result<(TcpListener, WikiServerConfig)> {
    let key = wiki.read_key()?;
    let listen = wiki.listen.as_str();
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|e| anyhow::anyhow!("listening on {listen}: {e}"))?;
    let auth = match &wiki.auth {
        Some(a) => a.clone(),
        None => crate::config::wiki_rm::daemon_user(),
    };
    Ok((
        listener,
        WikiServerConfig::new(key, wiki.allowed_peers.clone(), auth),
    ))
}
