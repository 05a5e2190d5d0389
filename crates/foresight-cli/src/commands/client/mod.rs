//! The service's commands: `job`, `estimate`, `reservation`, `cluster`, `site`, `auction`,
//! `plan show`, `user`, one module per noun. They talk to the server's REST API through [`Client`]. Without
//! `--server` they find the server on this host ([`find_local`]): its local socket, where
//! the caller needs no token (the service knows them by their Unix account), else the
//! `server.url` and admin token of its data directory.

mod auction;
mod cluster;
mod estimate;
mod input;
mod job;
mod job_list;
mod job_show;
mod job_wait;
mod plan_show;
mod reservation;
mod site;
mod submit;
mod user;

pub use crate::moment::when;
pub use auction::{auction_list, AuctionCommand};
pub use cluster::{cluster_list, ClusterCommand};
pub use estimate::{estimate, EstimateOpts};
pub(crate) use input::bad;
pub use job::{job, JobCommand};
pub use plan_show::{plan_show, PlanShowOpts};
pub use reservation::{reservation, ReservationCommand};
pub use site::{site_list, SiteCommand};
pub use user::{user, UserCommand};

use crate::table::printable;
use anyhow::{Context, Result};
use clap::Args;
use foresight_api::*;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Where the server is and who we are: on the commands that talk to a server only.
#[derive(Args, Clone, Debug, Default)]
pub struct Connection {
    // Listed after every command's own options (display_order), whatever their number.
    /// Server URL, or several separated by commas (an active service and its standbys:
    /// each request goes to the first that is active) [default: the server on this machine:
    /// its local socket, else the `server.url` of the data directory].
    #[arg(
        long,
        global = true,
        env = "FORESIGHT_SERVER",
        value_name = "URL",
        display_order = 900
    )]
    pub server: Option<String>,
    /// Bearer token [default: none on a local socket, where the server knows you by your
    /// Unix account; else the admin token of the data directory].
    #[arg(
        long,
        global = true,
        env = "FORESIGHT_TOKEN",
        hide_env_values = true,
        display_order = 901
    )]
    pub token: Option<String>,
    /// The data directory of a server on this machine (as given to `server start
    /// --data-dir`): its local socket `foresight.sock`, else its `server.url` and
    /// `admin.token` [default: ~/.local/share/foresight].
    #[arg(
        long,
        global = true,
        env = "FORESIGHT_DATA_DIR",
        value_name = "DIR",
        display_order = 902
    )]
    pub data_dir: Option<PathBuf>,
    /// The local socket of a server on this machine [default: DATA_DIR/foresight.sock,
    /// else /run/foresight/foresight.sock]. No token is needed on it: the server knows the
    /// caller by their Unix account.
    #[arg(
        long,
        global = true,
        env = "FORESIGHT_SOCKET",
        value_name = "PATH",
        display_order = 903
    )]
    pub socket: Option<PathBuf>,
    /// Also trust the certificate authorities in this PEM file for an https:// server (a
    /// private CA) [default: the system's].
    #[arg(
        long,
        global = true,
        env = "FORESIGHT_CACERT",
        value_name = "FILE",
        display_order = 904
    )]
    pub cacert: Option<PathBuf>,
    /// Send the token over plain http:// to a server that is not on this machine (anyone on
    /// the network path can read it). Certificates of https:// servers are checked anyway.
    #[arg(long, global = true, env = "FORESIGHT_INSECURE", display_order = 905)]
    pub insecure: bool,
}

/// How long a request goes round the server addresses while none is active: long enough
/// for a standby to take over.
const FAILOVER_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// A refusal from the server, carried as the command's error.
#[derive(Debug, thiserror::Error)]
#[error("{status}: {body}")]
pub struct ServerRefused {
    /// HTTP status.
    pub status: u16,
    /// The error body.
    pub body: ApiError,
}

/// A connection to the server's REST API.
pub(crate) struct Client {
    pub(crate) http: reqwest::blocking::Client,
    base: String,
    /// Every server address given, `base` first: an active service and its standbys.
    bases: Vec<String>,
    /// The address that answered last, tried first.
    current: std::cell::Cell<usize>,
    /// Where the server is, for errors: its URL or its socket.
    at: String,
    /// None on the local socket without `--token`: the server knows us by our uid.
    token: Option<String>,
}

/// Where the server of this host is when no `--server` names one.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Local {
    /// A local socket.
    Socket(PathBuf),
    /// A data directory's `server.url` (its admin token then authenticates).
    DataDir(PathBuf),
}

/// Finds the server on this host: `socket` if given; else the socket in the data directory
/// (`data_dir` if given, else `default_dir`), else that directory's `server.url`; and when no
/// data directory was given, the host's system-wide socket `system` last. None when none is
/// there.
pub(crate) fn find_local(
    socket: Option<&Path>,
    data_dir: Option<&Path>,
    default_dir: &Path,
    system: &Path,
) -> Option<Local> {
    use std::os::unix::fs::FileTypeExt;
    let is_socket =
        |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_socket());
    if let Some(s) = socket {
        return Some(Local::Socket(s.to_path_buf()));
    }
    let dir = data_dir.unwrap_or(default_dir);
    let own = dir.join(foresight_daemon::config::identity::SOCKET_NAME);
    if is_socket(&own) {
        return Some(Local::Socket(own));
    }
    let url = foresight_sim::input::read_text(&dir.join("server.url"));
    if url.is_ok_and(|s| !s.trim().is_empty()) {
        return Some(Local::DataDir(dir.to_path_buf()));
    }
    (data_dir.is_none() && is_socket(system)).then(|| Local::Socket(system.to_path_buf()))
}

impl Client {
    pub(crate) fn new(conn: &Connection) -> Result<Client> {
        let default_dir = foresight_daemon::config::default_data_dir();
        let data_dir = conn.data_dir.clone().unwrap_or_else(|| default_dir.clone());
        let system = &foresight_daemon::config::identity::system_socket();
        let local = match &conn.server {
            Some(_) => None,
            None => Some(
                find_local(
                    conn.socket.as_deref(),
                    conn.data_dir.as_deref(),
                    &default_dir,
                    system,
                )
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "no server found: {} does not name one{}. Give --server URL (or set \
                         FORESIGHT_SERVER) for a server anywhere; give --data-dir DIR (or set \
                         FORESIGHT_DATA_DIR) for a server on this machine started with \
                         `foresight server start --data-dir DIR`; or start one here with \
                         `foresight server start`",
                        data_dir.join("server.url").display(),
                        if conn.data_dir.is_none() {
                            format!(" and there is no {}", system.display())
                        } else {
                            String::new()
                        }
                    )
                })?,
            ),
        };
        if let Some(Local::Socket(path)) = &local {
            let http = reqwest::blocking::Client::builder()
                .unix_socket(path.as_path())
                .timeout(std::time::Duration::from_secs(60))
                .build()?;
            return Ok(Client {
                http,
                // The host part is not used: every connection goes to the socket.
                base: "http://localhost".into(),
                bases: vec!["http://localhost".into()],
                current: Default::default(),
                at: format!("the local socket {}", path.display()),
                token: conn.token.clone(),
            });
        }
        let data_dir = match local {
            Some(Local::DataDir(dir)) => dir,
            _ => data_dir,
        };
        let bases = match &conn.server {
            Some(s) => s
                .split(',')
                .map(str::trim)
                .filter(|b| !b.is_empty())
                // As a request's URL spells it, so that its path is found after it.
                .map(|b| match reqwest::Url::parse(b) {
                    Ok(u) => u.as_str().trim_end_matches('/').to_string(),
                    Err(_) => b.trim_end_matches('/').to_string(),
                })
                .collect::<Vec<_>>(),
            None => {
                let path = data_dir.join("server.url");
                let text = foresight_sim::input::read_text(&path)
                    .with_context(|| format!("reading {}", path.display()))?;
                vec![text.trim().to_string()]
            }
        };
        let Some(base) = bases.first().cloned() else {
            anyhow::bail!("--server names no server address");
        };
        let token = match &conn.token {
            Some(t) => t.clone(),
            None => {
                let path = data_dir.join("admin.token");
                foresight_sim::input::read_text(&path)
                    .map(|s| s.trim().to_string())
                    .with_context(|| {
                        format!(
                            "no --token given and {} is not readable: give --token (or set \
                             FORESIGHT_TOKEN)",
                            path.display()
                        )
                    })?
            }
        };
        for b in &bases {
            check_transport(b, conn.insecure)?;
        }
        let mut builder = reqwest::blocking::Client::builder()
            .use_rustls_tls()
            .https_only(!base.starts_with("http://"))
            // A vanished server (packets dropped) must not hold the request past the next
            // address's turn.
            .connect_timeout(std::time::Duration::from_secs(3))
            .timeout(std::time::Duration::from_secs(60));
        if let Some(path) = &conn.cacert {
            let pem = foresight_sim::input::read_bytes(path, foresight_sim::input::MAX_TEXT_BYTES)
                .with_context(|| format!("--cacert {}: cannot read it", path.display()))?;
            let certs: Vec<rustls::pki_types::CertificateDer<'static>> = {
                use rustls::pki_types::pem::PemObject;
                rustls::pki_types::CertificateDer::pem_slice_iter(&pem)
                    .collect::<Result<_, _>>()
                    .with_context(|| format!("--cacert {}: not PEM certificates", path.display()))?
            };
            if certs.is_empty() {
                anyhow::bail!(
                    "--cacert {}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it",
                    path.display()
                );
            }
            // Trusted as roots and as the server's own certificate, pinned (a self-signed one).
            builder = builder.use_preconfigured_tls(super::cacert::client_config(certs)?);
        }
        let http = builder.build()?;
        Ok(Client {
            http,
            at: bases.join(", "),
            base,
            bases,
            current: Default::default(),
            token: Some(token),
        })
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{}{}", self.base, API_PREFIX, path)
    }

    /// The answer's body, or the server's refusal as the error.
    pub(crate) fn send_raw(&self, req: reqwest::blocking::RequestBuilder) -> Result<Vec<u8>> {
        let req = match &self.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        };
        let resp = self.execute(req.build()?)?;
        let status = resp.status();
        let bytes = resp.bytes()?.to_vec();
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let mut body: ApiError = serde_json::from_str(&text).unwrap_or(ApiError {
                code: "http".into(),
                field: None,
                message: text,
            });
            body.message = printable(&body.message);
            body.field = body.field.as_deref().map(printable);
            return Err(ServerRefused {
                status: status.as_u16(),
                body,
            }
            .into());
        }
        Ok(bytes)
    }

    /// Sends `req` to the first active server: with several addresses, one that cannot be
    /// reached or stands by (503 `not_active`) passes it to the next, round after round
    /// while a standby takes over (at most [`FAILOVER_WAIT`]). Only a request that never
    /// reached an active server is sent again, so none is carried out twice.
    fn execute(&self, req: reqwest::blocking::Request) -> Result<reqwest::blocking::Response> {
        let unreachable = |e: reqwest::Error| {
            anyhow::Error::new(e).context(format!("cannot reach the server at {}", self.at))
        };
        let suffix = req
            .url()
            .as_str()
            .strip_prefix(&self.base)
            .map(str::to_owned);
        let (Some(suffix), true) = (suffix, self.bases.len() > 1) else {
            return self.http.execute(req).map_err(unreachable);
        };
        let deadline = std::time::Instant::now() + FAILOVER_WAIT;
        let mut last = String::new();
        loop {
            for k in 0..self.bases.len() {
                let i = (self.current.get() + k) % self.bases.len();
                let mut attempt = req
                    .try_clone()
                    .ok_or_else(|| anyhow::anyhow!("a request that cannot be sent again"))?;
                *attempt.url_mut() = reqwest::Url::parse(&format!("{}{suffix}", self.bases[i]))?;
                match self.http.execute(attempt) {
                    Err(e) if e.is_connect() => last = format!("{}: {e}", self.bases[i]),
                    Err(e) => return Err(unreachable(e)),
                    Ok(r) if r.status() == reqwest::StatusCode::SERVICE_UNAVAILABLE => {
                        // Only a standby's answer says the request was not carried out: a
                        // proxy's 503 may come after it was.
                        let text = r.text().unwrap_or_default();
                        let standby = serde_json::from_str::<ApiError>(&text)
                            .is_ok_and(|e| e.code == "not_active");
                        if !standby {
                            anyhow::bail!("{}: 503 Service Unavailable: {text}", self.bases[i]);
                        }
                        last = format!("{}: {text}", self.bases[i]);
                    }
                    Ok(r) => {
                        self.current.set(i);
                        return Ok(r);
                    }
                }
            }
            if std::time::Instant::now() >= deadline {
                anyhow::bail!(
                    "no active server among {} (waited {} s; last: {last})",
                    self.at,
                    FAILOVER_WAIT.as_secs()
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
    }

    fn send<T: DeserializeOwned>(&self, req: reqwest::blocking::RequestBuilder) -> Result<T> {
        let bytes = self.send_raw(req)?;
        serde_json::from_slice(&bytes)
            .with_context(|| format!("unexpected answer: {}", String::from_utf8_lossy(&bytes)))
    }

    pub(crate) fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<T> {
        self.send(self.http.get(self.url(path)).query(query))
    }

    pub(crate) fn post<T: DeserializeOwned, B: Serialize>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T> {
        self.send(self.http.post(self.url(path)).json(body))
    }

    pub(crate) fn delete<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        self.send(self.http.delete(self.url(path)))
    }
}

/// Refuses a server URL the token must not be sent to: a scheme other than http(s), or plain
/// http to anything but this machine's loopback unless `insecure`.
fn check_transport(base: &str, insecure: bool) -> Result<()> {
    let url = reqwest::Url::parse(base)
        .with_context(|| format!("server URL {base:?} is not a URL (e.g. https://host:8642)"))?;
    match url.scheme() {
        "https" => Ok(()),
        "http" => {
            let host = url.host_str().unwrap_or_default();
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let loopback = host.eq_ignore_ascii_case("localhost")
                || host
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback());
            if loopback || insecure {
                Ok(())
            } else {
                anyhow::bail!(
                    "refusing to send the token over plain http:// to {base}: it is not this \
                     machine's loopback, so anyone on the network path could read the token and \
                     act as you. Use an https:// server (`server start --tls-cert FILE \
                     --tls-key FILE`), or give --insecure (FORESIGHT_INSECURE=true) if the \
                     network is trusted"
                )
            }
        }
        other => anyhow::bail!("server URL {base}: scheme {other:?} is not http or https"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_server_is_found_socket_first_then_server_url_then_the_system_socket() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let home = tmp.path().join("home");
        let given = tmp.path().join("given");
        std::fs::create_dir_all(&home).expect("home");
        std::fs::create_dir_all(&given).expect("given");
        let system = tmp.path().join("system.sock");
        let find =
            |socket: Option<&Path>, dir: Option<&Path>| find_local(socket, dir, &home, &system);
        assert_eq!(find(None, None), None);
        let _sys = std::os::unix::net::UnixListener::bind(&system).expect("system socket");
        assert_eq!(find(None, None), Some(Local::Socket(system.clone())));
        // A data directory given names the server: the system one is not a fallback.
        assert_eq!(find(None, Some(&given)), None);
        std::fs::write(home.join("server.url"), "http://127.0.0.1:1\n").expect("url");
        assert_eq!(find(None, None), Some(Local::DataDir(home.clone())));
        let own = home.join("foresight.sock");
        let _own = std::os::unix::net::UnixListener::bind(&own).expect("own socket");
        assert_eq!(find(None, None), Some(Local::Socket(own)));
        let explicit = tmp.path().join("x.sock");
        assert_eq!(
            find(Some(&explicit), Some(&given)),
            Some(Local::Socket(explicit.clone()))
        );
        // A plain file named like the socket is not one.
        std::fs::write(given.join("foresight.sock"), "").expect("file");
        assert_eq!(find(None, Some(&given)), None);
    }
}
