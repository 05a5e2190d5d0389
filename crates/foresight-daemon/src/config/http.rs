//! The `[http]` table: HTTPS, and the limits that keep slow or idle clients from holding the
//! API (slowloris).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// How the API is served. Every limit has a default; see the documentation's "HTTPS and
/// connection limits" page (docs/src/operator/tls.md).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// PEM certificate chain (server certificate first). With `tls_key`, the API is served
    /// over HTTPS only; without both, over plain HTTP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of `tls_cert` (PKCS#8, PKCS#1 or SEC1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_key: Option<PathBuf>,
    /// A request's head (request line and headers, and the TLS handshake before the first
    /// one) must arrive within this many milliseconds of the server starting to wait for it;
    /// a client that trickles it in is disconnected.
    #[serde(default = "default_header_timeout_ms")]
    pub header_timeout_ms: u64,
    /// A request's body must arrive within this many milliseconds of its head (else 408,
    /// naming `body`).
    #[serde(default = "default_body_timeout_ms")]
    pub body_timeout_ms: u64,
    /// A connection on which no byte moves either way for this many milliseconds while no
    /// request is being answered is closed: an idle keep-alive connection, a stalled upload,
    /// a client that stopped reading its answer.
    #[serde(default = "default_idle_timeout_ms")]
    pub idle_timeout_ms: u64,
    /// At most this many connections at once; more are closed as soon as accepted, with a
    /// log line (at most one a second). Keeps the daemon below its file-descriptor limit.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
}

fn default_header_timeout_ms() -> u64 {
    10_000
}
fn default_body_timeout_ms() -> u64 {
    30_000
}
fn default_idle_timeout_ms() -> u64 {
    60_000
}
fn default_max_connections() -> usize {
    512
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            tls_cert: None,
            tls_key: None,
            header_timeout_ms: default_header_timeout_ms(),
            body_timeout_ms: default_body_timeout_ms(),
            idle_timeout_ms: default_idle_timeout_ms(),
            max_connections: default_max_connections(),
        }
    }
}

impl HttpConfig {
    /// Refuses what cannot be served, naming the field.
    pub fn check(&self) -> anyhow::Result<()> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(_), None) => anyhow::bail!("http.tls_cert is given without http.tls_key"),
            (None, Some(_)) => anyhow::bail!("http.tls_key is given without http.tls_cert"),
            _ => {}
        }
        for (field, ms) in [
            ("header_timeout_ms", self.header_timeout_ms),
            ("body_timeout_ms", self.body_timeout_ms),
            ("idle_timeout_ms", self.idle_timeout_ms),
        ] {
            if !(1..=86_400_000).contains(&ms) {
                anyhow::bail!("http.{field}: {ms} is not between 1 and 86400000 (one day)");
            }
        }
        if !(1..=1_000_000).contains(&self.max_connections) {
            anyhow::bail!(
                "http.max_connections: {} is not between 1 and 1000000",
                self.max_connections
            );
        }
        Ok(())
    }

    /// True when the API is served over HTTPS.
    pub fn tls(&self) -> bool {
        self.tls_cert.is_some() && self.tls_key.is_some()
    }

    pub(crate) fn header_timeout(&self) -> Duration {
        Duration::from_millis(self.header_timeout_ms)
    }

    pub(crate) fn body_timeout(&self) -> Duration {
        Duration::from_millis(self.body_timeout_ms)
    }

    pub(crate) fn idle_timeout(&self) -> Duration {
        Duration::from_millis(self.idle_timeout_ms)
    }
}
