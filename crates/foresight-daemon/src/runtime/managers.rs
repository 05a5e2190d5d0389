//! Each cluster's resource manager, built from the configuration: Slurm through its
//! commands, a WIKI peer, a site on another host, or the local executor (whose process reports come back on a
//! channel). Tests give the service managers of their own instead ([`Managers::given`]).

use crate::config::Config;
use crate::runtime::grid_centre::SiteLink;
use foresight_core::ClusterId;
use foresight_rm::slurm::{CommandOutput, CommandRunner, Invocation, SystemRunner};
use foresight_rm::{
    Finished, LocalCluster, LocalExecutor, ResourceManager, SlurmClient, SlurmCluster, SlurmError,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Counts the commands run against Slurm, for `/metrics`: the cost of following a cluster
/// must stay bounded (a fixed number per snapshot, a few per reserved job).
#[derive(Debug)]
struct CountingRunner {
    inner: SystemRunner,
    count: Arc<AtomicU64>,
}

#[async_trait::async_trait]
impl CommandRunner for CountingRunner {
    async fn run(&self, inv: &Invocation) -> Result<CommandOutput, SlurmError> {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.inner.run(inv).await
    }
}

/// The clusters' resource managers, in configuration order, with what the service needs
/// besides to follow local processes.
pub(crate) struct Managers {
    /// One per cluster.
    pub(crate) managers: Vec<Arc<dyn ResourceManager>>,
    /// A local cluster's executor (to re-adopt its processes at start); `None` elsewhere.
    pub(crate) executors: Vec<Option<LocalExecutor>>,
    /// Where a local cluster's executor reports its ended processes, by cluster.
    pub(crate) receivers: Vec<(ClusterId, tokio::sync::mpsc::UnboundedReceiver<Finished>)>,
    /// Commands run against Slurm clusters so far.
    pub(crate) slurm_commands: Arc<AtomicU64>,
    /// The sites on other hosts that lend clusters here, by name.
    pub(crate) sites: BTreeMap<String, SiteLink>,
}

impl Managers {
    /// The managers `cfg` describes; local executors keep their attempts under `data_dir`.
    pub(crate) fn build(cfg: &Config) -> anyhow::Result<Managers> {
        let dir = &cfg.data_dir;
        let exe = std::env::current_exe()?;
        let mut out = Managers {
            managers: Vec::new(),
            executors: Vec::new(),
            receivers: Vec::new(),
            slurm_commands: Arc::new(AtomicU64::new(0)),
            sites: crate::runtime::grid_centre::sites(cfg)?,
        };
        for c in &cfg.cluster {
            if c.kind == "site" {
                let site = crate::runtime::grid_centre::site_cluster(c, &out.sites)?;
                out.managers.push(Arc::new(site));
                out.executors.push(None);
                continue;
            }
            if c.is_slurm() {
                let conf = c.slurm_conf.clone().unwrap_or_default();
                let runner = CountingRunner {
                    inner: SystemRunner::default(),
                    count: out.slurm_commands.clone(),
                };
                let mut client = SlurmClient::new(conf, Arc::new(runner));
                if let Some(u) = &c.slurm_user {
                    client = client.acting_as(u.clone());
                }
                let naming = foresight_rm::slurm::Naming::instance(&cfg.instance)
                    .map_err(|e| anyhow::anyhow!("instance: {e}"))?;
                let cluster = SlurmCluster::new(client, c.partition.clone(), c.account.clone())
                    .map_err(|e| anyhow::anyhow!("cluster {}: {e}", c.name))?
                    .with_naming(naming);
                out.managers.push(Arc::new(cluster));
                out.executors.push(None);
                continue;
            }
            if c.kind == "wiki" {
                out.managers
                    .push(Arc::new(crate::runtime::wiki_rm::build(c, &cfg.instance)?));
                out.executors.push(None);
                continue;
            }
            let (exec, rx) = LocalExecutor::confined(
                dir.join("clusters").join(&c.name),
                vec![exe.clone().into_os_string(), "supervise".into()],
                cfg.confinement,
            )?;
            tracing::info!(
                cluster = %c.name,
                "local jobs are confined by {}",
                exec.confinement()
            );
            out.managers.push(Arc::new(LocalCluster::new(
                c.name.clone(),
                c.procs,
                exec.clone(),
            )));
            out.executors.push(Some(exec));
            out.receivers.push((ClusterId(out.managers.len() - 1), rx));
        }
        Ok(out)
    }

    /// `managers` as they are, one per cluster, with no local executor to follow: what a
    /// test that plays the resource managers itself opens the service on.
    #[cfg(test)]
    pub(crate) fn given(managers: Vec<Arc<dyn ResourceManager>>) -> Managers {
        Managers {
            executors: managers.iter().map(|_| None).collect(),
            managers,
            receivers: Vec::new(),
            slurm_commands: Arc::new(AtomicU64::new(0)),
            sites: BTreeMap::new(),
        }
    }
}
