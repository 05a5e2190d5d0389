//! `[cluster.wiki_rm]`: the settings of a cluster of kind `wiki` (a WIKI resource manager,
//! a Foresight peer's WIKI server or any other, whose scheduler this service is), and their
//! checks. The adapter they build is made in `runtime::wiki_rm`.

use super::ClusterConfig;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// `[cluster.wiki_rm]`: where the WIKI resource manager is and how Foresight's jobs reach
/// its queue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WikiRmConfig {
    /// `host:port` of its WIKI server.
    pub address: String,
    /// A file holding the shared key, a decimal number (the resource manager's
    /// `--with-key=N`). Read at start, never logged.
    pub key_file: PathBuf,
    /// `AUTH=` of the requests. Default: the daemon's user name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<String>,
    /// How often it is polled (GETNODES, GETJOBS, then the starts due), milliseconds.
    #[serde(default = "default_poll_ms")]
    pub poll_ms: u64,
    /// Time allowed for one request, milliseconds; an unanswered one marks the cluster down.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// The submission route: the REST API (`http://host:port`) of the Foresight peer serving
    /// the resource manager. Without it only the resource manager's own jobs are scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submit_url: Option<String>,
    /// The peer's cluster Foresight's jobs are queued on. Default: this cluster's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submit_cluster: Option<String>,
    /// A file holding the peer's bearer token (needed with `submit_url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
}

fn default_poll_ms() -> u64 {
    1_000
}
fn default_timeout_ms() -> u64 {
    5_000
}

/// Checks the settings of `wiki` cluster `c` (`at` names it in errors).
pub fn check(at: &str, c: &ClusterConfig) -> anyhow::Result<()> {
    let Some(w) = &c.wiki_rm else {
        anyhow::bail!(
            "{at}: kind = \"wiki\" needs [cluster.wiki_rm] with address (the WIKI server's \
             host:port) and key_file"
        );
    };
    if c.slurm_conf.is_some() || c.wiki.is_some() || c.scheduler != "local" {
        anyhow::bail!(
            "{at}: slurm_conf, scheduler and [cluster.wiki] are not for kind = \"wiki\" clusters"
        );
    }
    if w.address
        .rsplit_once(':')
        .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
    {
        anyhow::bail!("{at}: wiki_rm.address {:?} is not host:port", w.address);
    }
    if w.poll_ms == 0 {
        anyhow::bail!("{at}: wiki_rm.poll_ms must be at least 1");
    }
    if w.timeout_ms == 0 {
        anyhow::bail!("{at}: wiki_rm.timeout_ms must be at least 1");
    }
    match (&w.submit_url, &w.token_file) {
        (Some(u), Some(_)) => {
            if !(u.starts_with("http://") || u.starts_with("https://")) {
                anyhow::bail!("{at}: wiki_rm.submit_url {u:?} must start with http:// or https://");
            }
        }
        (Some(_), None) => {
            anyhow::bail!("{at}: wiki_rm.submit_url needs wiki_rm.token_file (the peer's token)")
        }
        (None, Some(_)) | (None, None) => {
            if w.token_file.is_some() {
                anyhow::bail!("{at}: wiki_rm.token_file is only used with wiki_rm.submit_url");
            }
        }
    }
    Ok(())
}

/// Whether Foresight's jobs (global ones, or submitted with `--cluster`) may go to cluster
/// `c`: not to a WIKI cluster without `submit_url`, whose queue they cannot reach (its own
/// jobs are still scheduled).
pub fn takes_foresight_jobs(c: &ClusterConfig) -> bool {
    c.kind != "wiki" || c.wiki_rm.as_ref().is_some_and(|w| w.submit_url.is_some())
}

/// Why a WIKI cluster without `submit_url` takes no global job.
pub fn no_route_reason() -> String {
    "no wiki_rm.submit_url: Foresight's jobs cannot reach this WIKI resource manager's \
     queue, so none is planned or submitted here (its own jobs are scheduled)"
        .to_string()
}

/// How often cluster `c` is polled.
pub fn poll_every(c: &ClusterConfig) -> Duration {
    Duration::from_millis(c.wiki_rm.as_ref().map_or(1_000, |w| w.poll_ms.max(1)))
}

/// The name of the user the daemon runs as: `AUTH=` of its WIKI frames when none is set.
pub fn daemon_user() -> String {
    let uid = nix::unistd::geteuid();
    match nix::unistd::User::from_uid(uid) {
        Ok(Some(u)) => u.name,
        _ => format!("uid{uid}"),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn check(text: &str) -> Result<Config, String> {
        let cfg: Config = toml::from_str(text).map_err(|e| e.to_string())?;
        cfg.check().map_err(|e| e.to_string())?;
        Ok(cfg)
    }

    #[test]
    fn wiki_rm_settings_are_read_and_errors_name_the_setting() {
        let ok = check(
            "[[cluster]]\nname = \"w\"\nkind = \"wiki\"\n[cluster.wiki_rm]\n\
             address = \"127.0.0.1:15004\"\nkey_file = \"/k\"\n\
             submit_url = \"http://127.0.0.1:8642\"\ntoken_file = \"/t\"\n",
        )
        .unwrap();
        let w = ok.cluster[0].wiki_rm.as_ref().unwrap();
        assert_eq!((w.poll_ms, w.timeout_ms), (1_000, 5_000));
        assert!(ok.cluster[0].is_remote());
        for (text, wanted) in [
            (
                "[[cluster]]\nname = \"w\"\nkind = \"wiki\"\n",
                "[cluster.wiki_rm]",
            ),
            (
                "[[cluster]]\nname = \"w\"\nkind = \"wiki\"\n[cluster.wiki_rm]\n\
                 address = \"nohost\"\nkey_file = \"/k\"\n",
                "wiki_rm.address",
            ),
            (
                "[[cluster]]\nname = \"w\"\nkind = \"wiki\"\n[cluster.wiki_rm]\n\
                 address = \"h:1\"\nkey_file = \"/k\"\npoll_ms = 0\n",
                "wiki_rm.poll_ms",
            ),
            (
                "[[cluster]]\nname = \"w\"\nkind = \"wiki\"\n[cluster.wiki_rm]\n\
                 address = \"h:1\"\nkey_file = \"/k\"\nsubmit_url = \"http://h:2\"\n",
                "wiki_rm.token_file",
            ),
            (
                "[[cluster]]\nname = \"w\"\nprocs = 2\n[cluster.wiki_rm]\n\
                 address = \"h:1\"\nkey_file = \"/k\"\n",
                "[cluster.wiki_rm] is for kind = \"wiki\" clusters",
            ),
        ] {
            let e = check(text).unwrap_err();
            assert!(e.contains(wanted), "{wanted}: {e}");
        }
    }
}
