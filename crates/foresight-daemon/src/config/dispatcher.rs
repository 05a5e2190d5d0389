//! The service's mode and the `[dispatcher]` table: how a peer dispatcher shares the global
//! queue with the other sites' dispatchers.

use foresight_core::auction::AuctionConfig;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// How the service runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// One service plans the whole grid (the lookahead broker); it holds its database alone.
    #[default]
    Single,
    /// One of several peer dispatchers, one per site, sharing a PostgreSQL database: each
    /// runs its own clusters' jobs, and global jobs are sold by English auctions among them.
    Dispatcher,
}

impl std::str::FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Mode, String> {
        match s {
            "single" => Ok(Mode::Single),
            "dispatcher" => Ok(Mode::Dispatcher),
            other => Err(format!("mode {other:?}: expected single or dispatcher")),
        }
    }
}

/// The `[dispatcher]` table (used with `mode = "dispatcher"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DispatcherConfig {
    /// This dispatcher's site: unique among the dispatchers of one database (a second
    /// dispatcher of the same site is refused). Also `--site`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
    /// How long after its last heartbeat a dispatcher counts as gone, milliseconds: then its
    /// bids are dropped and the jobs it was awarded but had not started are auctioned again.
    pub lease_ms: u64,
    /// How often the dispatcher renews its lease, milliseconds (well under `lease_ms`).
    pub heartbeat_ms: u64,
    /// How often it looks at the queue without being woken by a notification, milliseconds
    /// (the fallback should a `NOTIFY` be missed, e.g. while reconnecting).
    pub poll_ms: u64,
    /// The mean runtime assumed until global jobs have finished, seconds: an auction lasts
    /// `auction.alpha` times the mean runtime of recently finished global jobs.
    pub prior_runtime_seconds: f64,
    /// How many recently finished global jobs the mean runtime is taken over.
    pub runtime_window: u32,
    /// The auction: `alpha`, the bid's weights, the opening bid, the tie rule (see the
    /// documentation's page on peer dispatchers, docs/src/operator/dispatchers.md, for which
    /// options apply here).
    pub auction: AuctionConfig,
    /// A PEM file of the CA that signed the other sites' certificates: a winner fetching a
    /// job's input from the site that holds it over HTTPS trusts that site only through this
    /// CA (besides the system's), so sites on a private CA need not be trusted system-wide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_cert: Option<PathBuf>,
}

impl Default for DispatcherConfig {
    fn default() -> Self {
        DispatcherConfig {
            site: None,
            lease_ms: 10_000,
            heartbeat_ms: 2_000,
            poll_ms: 2_000,
            prior_runtime_seconds: 60.0,
            runtime_window: 50,
            auction: AuctionConfig::default(),
            ca_cert: None,
        }
    }
}

impl DispatcherConfig {
    /// Refuses what cannot run, naming the field.
    pub fn check(&self, mode: Mode, store: Option<&str>) -> anyhow::Result<()> {
        if mode == Mode::Single {
            return Ok(());
        }
        let Some(site) = &self.site else {
            anyhow::bail!("mode = \"dispatcher\" needs a site (--site NAME or dispatcher.site)");
        };
        if site.is_empty() || site.len() > 64 || site.contains(char::is_whitespace) {
            anyhow::bail!("dispatcher.site: {site:?} must be 1-64 characters without spaces");
        }
        if !store.is_some_and(|s| s.starts_with("postgres://") || s.starts_with("postgresql://")) {
            anyhow::bail!(
                "mode = \"dispatcher\" needs a PostgreSQL store shared by the dispatchers \
                 (--store postgres://…)"
            );
        }
        if self.lease_ms == 0 || self.heartbeat_ms == 0 || self.poll_ms == 0 {
            anyhow::bail!("dispatcher: lease_ms, heartbeat_ms and poll_ms must be at least 1");
        }
        if self.heartbeat_ms >= self.lease_ms {
            anyhow::bail!(
                "dispatcher.heartbeat_ms ({}) must be shorter than dispatcher.lease_ms ({})",
                self.heartbeat_ms,
                self.lease_ms
            );
        }
        if !(self.prior_runtime_seconds.is_finite() && self.prior_runtime_seconds > 0.0) {
            anyhow::bail!("dispatcher.prior_runtime_seconds must be positive");
        }
        if self.runtime_window == 0 {
            anyhow::bail!("dispatcher.runtime_window must be at least 1");
        }
        if let Some(p) = self.auction.problems().first() {
            anyhow::bail!("dispatcher.auction: {p}");
        }
        Ok(())
    }
}
