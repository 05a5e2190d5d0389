//! The settings of a grid across hosts: `[cluster.site]` at the centre (a cluster lent by a
//! site on another host, kind `site`) and `[grid]` at a site (its centres and what it lends).
//! The design: `docs/src/sites-across-hosts.md`.

use super::ClusterConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// `[cluster.site]`: which site lends this cluster and how it proves who it is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteLinkConfig {
    /// The site's name (what it says in `[grid] site`).
    pub site: String,
    /// The cluster's name at the site. Default: this cluster's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// A file holding the site's token (the one in the site's `[grid] token_file`). Read at
    /// start, never logged.
    pub token_file: PathBuf,
    /// A site whose last snapshot is older than this is unreachable, seconds.
    #[serde(default = "default_lease")]
    pub lease_seconds: u64,
    /// Time allowed for the site to answer one command, milliseconds.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
}

fn default_lease() -> u64 {
    30
}
fn default_timeout_ms() -> u64 {
    10_000
}

impl SiteLinkConfig {
    /// The cluster's name at the site.
    pub fn remote_cluster<'a>(&'a self, c: &'a ClusterConfig) -> &'a str {
        self.cluster.as_deref().unwrap_or(&c.name)
    }

    /// How long a site may stay silent.
    pub fn lease(&self) -> Duration {
        Duration::from_secs(self.lease_seconds)
    }

    /// How long a command may wait for its answer.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }
}

/// `[grid]`: this service is a site of a grid, and lends some of its clusters to a centre.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GridConfig {
    /// The centre's addresses (`http(s)://host:port`), tried in order.
    pub centres: Vec<String>,
    /// This site's name at the centre.
    pub site: String,
    /// A file holding this site's token (the centre's `[cluster.site] token_file` holds the
    /// same). Read at start, never logged.
    pub token_file: PathBuf,
    /// The local user grid jobs run as here: its Unix account, budget and credentials are
    /// the site administrator's to set; disabling it stops the grid's submissions.
    #[serde(default = "default_grid_user")]
    pub user: String,
    /// The clusters lent, each with the most processors grid jobs may hold at once.
    pub lend: BTreeMap<String, u32>,
    /// How often the lent clusters' state is sent, milliseconds.
    #[serde(default = "default_snapshot_ms")]
    pub snapshot_ms: u64,
    /// A PEM file of the CA that signed the centre's certificate: the site trusts the
    /// centre it reaches over HTTPS only through this CA (besides the system's), so a
    /// centre on a private CA is pinned without trusting it system-wide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_cert: Option<PathBuf>,
    /// Where the grid's input files land here, one directory per part, which is the part's
    /// working directory: a directory of this service's own account that no one else may
    /// write in (refused otherwise), which grid jobs can enter and, for Slurm, the nodes
    /// see. Default: `grid-inbox` in the data directory (enough when grid jobs run as the
    /// service's own account or as root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inbox_dir: Option<PathBuf>,
}

fn default_grid_user() -> String {
    "grid".into()
}
fn default_snapshot_ms() -> u64 {
    1_000
}

/// Checks `[cluster.site]` of `site` cluster `c` (`at` names it in errors).
pub fn check_site_cluster(at: &str, c: &ClusterConfig) -> anyhow::Result<()> {
    let Some(s) = &c.site else {
        anyhow::bail!(
            "{at}: kind = \"site\" needs [cluster.site] with site (the site's name) and \
             token_file"
        );
    };
    if c.slurm_conf.is_some() || c.wiki.is_some() || c.wiki_rm.is_some() {
        anyhow::bail!(
            "{at}: slurm_conf, [cluster.wiki] and [cluster.wiki_rm] are not for kind = \"site\" \
             clusters"
        );
    }
    if !valid_name(&s.site) {
        anyhow::bail!(
            "{at}: site {:?}: use 1-64 letters, digits, '-', '_' or '.'",
            s.site
        );
    }
    if s.lease_seconds == 0 || s.timeout_ms == 0 {
        anyhow::bail!("{at}: lease_seconds and timeout_ms must be at least 1");
    }
    Ok(())
}

/// Checks `[grid]` against the clusters configured (`clusters`: their names).
pub fn check_grid(g: &GridConfig, clusters: &[ClusterConfig]) -> anyhow::Result<()> {
    if g.centres.is_empty() {
        anyhow::bail!("[grid] centres: give at least one address of the centre");
    }
    for c in &g.centres {
        if !(c.starts_with("http://") || c.starts_with("https://")) {
            anyhow::bail!("[grid] centres: {c:?} must start with https:// (or http://)");
        }
    }
    if !valid_name(&g.site) {
        anyhow::bail!(
            "[grid] site {:?}: use 1-64 letters, digits, '-', '_' or '.'",
            g.site
        );
    }
    if g.lend.is_empty() {
        anyhow::bail!("[grid] lend: name at least one cluster and how many processors it lends");
    }
    for (name, &n) in &g.lend {
        let Some(c) = clusters.iter().find(|c| &c.name == name) else {
            anyhow::bail!("[grid] lend: no cluster {name:?} here");
        };
        if !(c.kind == "local" && c.scheduler == "local" || c.kind == "slurm") {
            anyhow::bail!(
                "[grid] lend: cluster {name:?} is of kind {:?} with scheduler {:?}; a site \
                 lends clusters its own policy schedules (kind = \"local\", scheduler = \
                 \"local\") or Slurm's (kind = \"slurm\"), whose reservations it holds",
                c.kind,
                c.scheduler
            );
        }
        if n == 0 {
            anyhow::bail!("[grid] lend: cluster {name:?} lends 0 processors");
        }
    }
    if g.snapshot_ms == 0 {
        anyhow::bail!("[grid] snapshot_ms must be at least 1");
    }
    Ok(())
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}
