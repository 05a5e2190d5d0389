//! The adapter of a cluster of kind `wiki` ([`WikiCluster`]), built from its
//! `[cluster.wiki_rm]` settings. The service then mirrors the cluster as it does a Slurm one
//! (see `state::world::remote`).

use crate::config::ClusterConfig;
use foresight_rm::wiki::{Key, SubmitRoute, WikiClient};
use foresight_rm::WikiCluster;
use std::path::Path;
use std::time::Duration;

/// The adapter of `wiki` cluster `c`, for instance `instance` (its parts' names).
pub fn build(c: &ClusterConfig, instance: &str) -> anyhow::Result<WikiCluster> {
    let at = format!("cluster {}", c.name);
    let Some(w) = &c.wiki_rm else {
        anyhow::bail!("{at}: kind = \"wiki\" needs [cluster.wiki_rm]");
    };
    let key = read_key(&w.key_file).map_err(|e| anyhow::anyhow!("{at}: wiki_rm.key_file: {e}"))?;
    let auth = w
        .auth
        .clone()
        .unwrap_or_else(crate::config::wiki_rm::daemon_user);
    let client = WikiClient::new(w.address.clone(), key, auth)
        .with_timeout(Duration::from_millis(w.timeout_ms.max(1)));
    let naming = foresight_rm::slurm::Naming::instance(instance)
        .map_err(|e| anyhow::anyhow!("instance: {e}"))?;
    let route = match (&w.submit_url, &w.token_file) {
        (Some(url), Some(tf)) => {
            let token = crate::config::read_text(tf)
                .map_err(|e| anyhow::anyhow!("{at}: wiki_rm.token_file {}: {e}", tf.display()))?;
            let cluster = w.submit_cluster.as_deref().unwrap_or(&c.name);
            Some(
                SubmitRoute::new(url, cluster, &token, naming.clone())
                    .map_err(|e| anyhow::anyhow!("{at}: {e}"))?,
            )
        }
        _ => None,
    };
    let policy = c
        .policy
        .parse()
        .map_err(|e| anyhow::anyhow!("{at}: policy: {e}"))?;
    Ok(WikiCluster::new(client, route, policy, naming))
}

/// The key in `path`; the error never quotes the file's contents.
fn read_key(path: &Path) -> anyhow::Result<Key> {
    let text = crate::config::read_text(path)
        .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
    Key::parse(&text).map_err(|_| {
        anyhow::anyhow!(
            "{} must hold one decimal number below 2^32 (the key compiled into the resource \
             manager)",
            path.display()
        )
    })
}
