//! The centre's side of a grid across hosts: one mailbox per site, shared by the site's
//! clusters (each a [`SiteCluster`]), and the site's credential.

use crate::config::Config;
use foresight_rm::grid::sign::Verifier;
use foresight_rm::grid::{Mailbox, SiteCluster};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// What the centre knows of one site.
#[derive(Debug)]
pub struct SiteLink {
    /// Its commands, answers and snapshots.
    pub mailbox: Arc<Mailbox>,
    /// Its token, the key of its requests' signatures.
    pub token: String,
    /// The signatures and nonces of its requests, checked.
    pub verifier: Verifier,
    /// Its clusters lent here, by their names at the site.
    pub clusters: BTreeSet<String>,
}

/// The sites of `cfg`'s `site` clusters, by name; two clusters of one site must name the
/// same token file's token.
pub(crate) fn sites(cfg: &Config) -> anyhow::Result<BTreeMap<String, SiteLink>> {
    let mut out: BTreeMap<String, SiteLink> = BTreeMap::new();
    let mut leases: BTreeMap<&str, std::time::Duration> = BTreeMap::new();
    for s in cfg.cluster.iter().filter_map(|c| c.site.as_ref()) {
        let l = leases.entry(&s.site).or_insert(s.lease());
        *l = (*l).min(s.lease());
    }
    for c in cfg.cluster.iter().filter(|c| c.kind == "site") {
        let Some(s) = &c.site else { continue };
        let token = crate::config::read_text(&s.token_file).map_err(|e| {
            anyhow::anyhow!(
                "cluster {}: site.token_file {}: {e}",
                c.name,
                s.token_file.display()
            )
        })?;
        let token = token.trim();
        if token.len() < 16 {
            anyhow::bail!(
                "cluster {}: site.token_file {} holds fewer than 16 characters: too easy to guess",
                c.name,
                s.token_file.display()
            );
        }
        let link = out.entry(s.site.clone()).or_insert_with(|| SiteLink {
            mailbox: Arc::new(Mailbox::new(&s.site, leases[s.site.as_str()])),
            token: token.to_owned(),
            verifier: Verifier::default(),
            clusters: BTreeSet::new(),
        });
        if link.token != token {
            anyhow::bail!(
                "cluster {}: site {} is given two different tokens by its clusters' token_file",
                c.name,
                s.site
            );
        }
        if !link.clusters.insert(s.remote_cluster(c).to_owned()) {
            anyhow::bail!(
                "cluster {}: cluster {} of site {} is lent here twice",
                c.name,
                s.remote_cluster(c),
                s.site
            );
        }
    }
    Ok(out)
}

/// The resource manager of `site` cluster `c`.
pub(crate) fn site_cluster(
    c: &crate::config::ClusterConfig,
    sites: &BTreeMap<String, SiteLink>,
) -> anyhow::Result<SiteCluster> {
    let Some(s) = &c.site else {
        anyhow::bail!("cluster {}: kind = \"site\" needs [cluster.site]", c.name);
    };
    let link = &sites[&s.site];
    Ok(SiteCluster::new(
        link.mailbox.clone(),
        s.remote_cluster(c),
        s.lease(),
        s.timeout(),
    ))
}

impl crate::runtime::Service {
    /// The parts the centre still wants from `site` (of jobs not ended, their current
    /// attempt, on the site's clusters), by their names there.
    pub(crate) fn wanted_from(&self, site: &str) -> Vec<String> {
        let ours: BTreeSet<&str> = self
            .cfg
            .cluster
            .iter()
            .filter(|c| c.site.as_ref().is_some_and(|s| s.site == site))
            .map(|c| c.name.as_str())
            .collect();
        let Ok(naming) = foresight_rm::slurm::Naming::instance(&self.cfg.instance) else {
            return Vec::new();
        };
        let w = self.world();
        let parts = w
            .jobs
            .values()
            .filter(|j| !j.state.is_final() && j.state_after.is_none())
            .filter(|j| {
                j.parts
                    .iter()
                    .any(|p| !p.ended && ours.contains(p.cluster.as_str()))
            })
            .map(|j| naming.part(j.id, j.attempt))
            .collect();
        parts
    }
}
