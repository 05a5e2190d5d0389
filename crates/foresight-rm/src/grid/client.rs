//! The site's side of the exchange: HTTPS requests to the centre (the site opens every
//! connection), each signed with the site's token, which itself never crosses the network.

use super::{sign, Answer, Command, Hello, SiteSnapshot, Welcome, SITE_HEADER};
use crate::manager::RmError;
use std::time::Duration;

/// A site's connection to its centre (the first of its addresses that answers).
#[derive(Clone, Debug)]
pub struct CentreClient {
    centres: Vec<String>,
    /// The centre that answered last, tried first: a vanished one listed before the active
    /// one would otherwise cost every request its connect timeout.
    current: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    site: String,
    token: String,
    http: reqwest::Client,
}

impl CentreClient {
    /// Time allowed for one request besides a long poll's wait.
    pub const TIMEOUT: Duration = Duration::from_secs(10);

    /// Time allowed to connect to one centre: a vanished host (packets dropped, not
    /// refused) must not hold a request past the next centre's turn.
    pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

    /// Site `site` with `token`, to the centres at `centres` (`https://host:port`), tried in
    /// order; their certificates signed by the CA in `ca_pem` when given (or one the system
    /// trusts).
    pub fn new(
        centres: &[String],
        site: &str,
        token: &str,
        ca_pem: Option<&[u8]>,
    ) -> Result<CentreClient, RmError> {
        if centres.is_empty() {
            return Err(RmError::Invalid("[grid] centres is empty".into()));
        }
        let mut builder = reqwest::Client::builder().connect_timeout(Self::CONNECT_TIMEOUT);
        if let Some(pem) = ca_pem {
            // A file with no certificate in it would otherwise add none, silently.
            let cas = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| RmError::Invalid(format!("ca_cert: {e}")))?;
            if cas.is_empty() {
                return Err(RmError::Invalid("ca_cert: no PEM certificate in it".into()));
            }
            for ca in cas {
                builder = builder.add_root_certificate(ca);
            }
        }
        let http = builder
            .build()
            .map_err(|e| RmError::Invalid(format!("[grid]: {e}")))?;
        Ok(CentreClient {
            centres: centres
                .iter()
                .map(|c| c.trim_end_matches('/').to_owned())
                .collect(),
            current: Default::default(),
            site: site.to_owned(),
            token: token.trim().to_owned(),
            http,
        })
    }

    /// Sends `body` to `path` at the first centre that answers, signed (see [`super::sign`]);
    /// `wait` more than the usual time for a long poll.
    async fn request<T: serde::de::DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&(impl serde::Serialize + ?Sized)>,
        wait: Duration,
    ) -> Result<T, RmError> {
        let bytes = match body {
            Some(b) => serde_json::to_vec(b)
                .map_err(|e| RmError::Invalid(format!("encoding a request to the centre: {e}")))?,
            None => Vec::new(),
        };
        let mut last = None;
        for (i, base) in self.in_turn() {
            let url = format!("{base}{path}");
            let mut req = self
                .signed(method.clone(), base, path, &bytes)
                .timeout(Self::TIMEOUT + wait);
            if body.is_some() {
                req = req
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(bytes.clone());
            }
            let resp = match reach(req, &url).await? {
                Ok(r) => r,
                Err(e) => {
                    last = Some(e);
                    continue;
                }
            };
            self.answered(i);
            return resp.json().await.map_err(|e| {
                RmError::Unreachable(format!("centre {url}: unreadable answer: {e}"))
            });
        }
        Err(last.unwrap_or_else(|| RmError::Unreachable("no centre".into())))
    }

    /// The centres by index, the one that answered last first.
    fn in_turn(&self) -> impl Iterator<Item = (usize, &String)> {
        let first = self.current.load(std::sync::atomic::Ordering::Relaxed);
        let n = self.centres.len();
        (0..n).map(move |k| {
            let i = (first + k) % n;
            (i, &self.centres[i])
        })
    }

    /// Centre `i` answered: it is tried first from now on.
    fn answered(&self, i: usize) {
        self.current.store(i, std::sync::atomic::Ordering::Relaxed);
    }

    /// A request to `path` at centre `base`, signed over `body` (see [`super::sign`]).
    fn signed(
        &self,
        method: reqwest::Method,
        base: &str,
        path: &str,
        body: &[u8],
    ) -> reqwest::RequestBuilder {
        let timestamp = crate::clock::unix_seconds();
        let nonce = sign::nonce();
        let signature = sign::signature(
            &self.token,
            &self.site,
            timestamp,
            &nonce,
            method.as_str(),
            path,
            body,
        );
        self.http
            .request(method, format!("{base}{path}"))
            .header(SITE_HEADER, &self.site)
            .header(sign::TIMESTAMP_HEADER, timestamp.to_string())
            .header(sign::NONCE_HEADER, &nonce)
            .header(sign::SIGNATURE_HEADER, signature)
    }

    /// Sends `method` to `path` with an empty body, signed, allowing the server `wait`
    /// besides the usual time to answer; its JSON answer (a peer site offering an input it
    /// reads first, or dropping one fetched).
    pub async fn call_empty<T: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        wait: Duration,
    ) -> Result<T, RmError> {
        let method = reqwest::Method::from_bytes(method.as_bytes())
            .map_err(|e| RmError::Invalid(format!("method {method:?}: {e}")))?;
        self.request(method, path, None::<&()>, wait).await
    }

    /// Appends the bytes of the file at `path` from byte `from` on (of `total`) to `out`, from
    /// the first centre that serves it; how many came.
    pub async fn fetch(
        &self,
        path: &str,
        from: u64,
        total: u64,
        out: &mut tokio::fs::File,
    ) -> Result<u64, RmError> {
        use tokio::io::AsyncWriteExt;
        if from >= total {
            return Ok(0);
        }
        let mut last = None;
        for (i, base) in self.in_turn() {
            let url = format!("{base}{path}");
            let req = self
                .signed(reqwest::Method::GET, base, path, &[])
                .header(reqwest::header::RANGE, format!("bytes={from}-"));
            let resp = match reach(req, &url).await? {
                Ok(r) => r,
                Err(e) => {
                    last = Some(e);
                    continue;
                }
            };
            self.answered(i);
            let status = resp.status();
            // A whole file (a proxy that ignores ranges): it replaces what was there.
            let from = if status == reqwest::StatusCode::PARTIAL_CONTENT {
                let starts = resp
                    .headers()
                    .get(reqwest::header::CONTENT_RANGE)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("bytes "))
                    .and_then(|v| v.split('-').next())
                    .and_then(|v| v.parse::<u64>().ok());
                if starts != Some(from) {
                    return Err(RmError::Invalid(format!(
                        "centre {url}: a range that does not start at byte {from}"
                    )));
                }
                from
            } else {
                out.set_len(0)
                    .await
                    .map_err(|e| RmError::Invalid(format!("writing {path}: {e}")))?;
                0
            };
            let mut resp = resp;
            let mut got = 0;
            loop {
                let chunk = resp.chunk().await.map_err(|e| {
                    RmError::Unreachable(format!("centre {url}: cut off after {got} bytes: {e}"))
                })?;
                let Some(chunk) = chunk else { break };
                got += chunk.len() as u64;
                if from + got > total {
                    return Err(RmError::Invalid(format!(
                        "centre {url}: more than the {total} bytes it offered"
                    )));
                }
                out.write_all(&chunk)
                    .await
                    .map_err(|e| RmError::Invalid(format!("writing {path}: {e}")))?;
            }
            return Ok(got);
        }
        Err(last.unwrap_or_else(|| RmError::Unreachable("no centre".into())))
    }

    /// Puts `body` at `path` (an upload's chunk) at the first centre that answers: the
    /// bytes the centre then holds of that file.
    pub async fn put(&self, path: &str, body: Vec<u8>) -> Result<u64, RmError> {
        #[derive(serde::Deserialize)]
        struct Held {
            have: u64,
        }
        let mut last = None;
        for (i, base) in self.in_turn() {
            let url = format!("{base}{path}");
            let req = self
                .signed(reqwest::Method::PUT, base, path, &body)
                .timeout(Self::TIMEOUT + Duration::from_secs(body.len() as u64 >> 20))
                .body(body.clone());
            match reach(req, &url).await? {
                Ok(resp) => {
                    self.answered(i);
                    let held: Held = resp.json().await.map_err(|e| {
                        RmError::Unreachable(format!("centre {url}: reading its answer: {e}"))
                    })?;
                    return Ok(held.have);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| RmError::Unreachable("no centre".into())))
    }

    /// Says who the site is and what it lends.
    pub async fn hello(&self, hello: &Hello) -> Result<Welcome, RmError> {
        self.request(
            reqwest::Method::POST,
            "/grid/v1/hello",
            Some(hello),
            Duration::ZERO,
        )
        .await
    }

    /// The commands queued in mailbox `mailbox` after `after`, waiting up to `wait` for
    /// one.
    pub async fn commands(
        &self,
        mailbox: u64,
        after: u64,
        wait: Duration,
    ) -> Result<Vec<Command>, RmError> {
        let path = format!(
            "/grid/v1/commands?mailbox={mailbox}&after={after}&wait={}",
            wait.as_secs()
        );
        self.request(reqwest::Method::GET, &path, None::<&()>, wait)
            .await
    }

    /// Answers commands of mailbox `mailbox`.
    pub async fn answer(&self, mailbox: u64, answers: &[Answer]) -> Result<(), RmError> {
        let _: serde_json::Value = self
            .request(
                reqwest::Method::POST,
                &format!("/grid/v1/answers?mailbox={mailbox}"),
                Some(answers),
                Duration::ZERO,
            )
            .await?;
        Ok(())
    }

    /// Pushes the lent clusters' states.
    pub async fn snapshots(&self, snapshots: &[SiteSnapshot]) -> Result<(), RmError> {
        let _: serde_json::Value = self
            .request(
                reqwest::Method::POST,
                "/grid/v1/snapshots",
                Some(snapshots),
                Duration::ZERO,
            )
            .await?;
        Ok(())
    }
}

/// Sends `req` to the centre at `url`: its answer; `Ok(Err(_))` when the next centre is to
/// be tried (this one cannot be reached or is not the active one), `Err` when it refused.
async fn reach(
    req: reqwest::RequestBuilder,
    url: &str,
) -> Result<Result<reqwest::Response, RmError>, RmError> {
    let resp = match req.send().await {
        Ok(r) => r,
        Err(e) => return Ok(Err(RmError::Unreachable(format!("centre {url}: {e}")))),
    };
    let status = resp.status();
    if status == reqwest::StatusCode::SERVICE_UNAVAILABLE {
        return Ok(Err(RmError::Unreachable(format!(
            "centre {url}: not active"
        ))));
    }
    if !status.is_success() {
        let text = resp.text().await.unwrap_or_default();
        return Err(RmError::Invalid(format!(
            "centre {url} answered {status}: {}",
            text.chars().take(300).collect::<String>()
        )));
    }
    Ok(Ok(resp))
}
