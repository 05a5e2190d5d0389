//! How Foresight's jobs reach a WIKI resource manager's queue. WIKI has no submit command: a
//! scheduler only starts jobs already queued there. For a Foresight peer serving WIKI, the
//! route is its REST API: a part is submitted, with the peer's token, as a job of the peer's
//! WIKI-scheduled cluster, where it waits (`Idle` in GETJOBS) for our `STARTJOB`. Its name,
//! `<instance>-<job>.<attempt>` ([`Naming::part`]), is how it is recognised again, after a
//! restart too; the peer's record gives its exit status once it ends, and the peer serves
//! its output.

use super::mirror::OurPart;
use crate::manager::{RmError, Submission};
use crate::slurm::Naming;
use crate::spec::Outcome;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// A Foresight peer's REST API as the submission route to its WIKI-scheduled cluster.
#[derive(Clone, Debug)]
pub struct SubmitRoute {
    /// `http://host:port` of the peer.
    base: String,
    /// The peer's cluster the parts are queued on.
    cluster: String,
    /// The peer's bearer token.
    token: String,
    naming: Naming,
    http: reqwest::Client,
}

/// The fields of the peer's job record read here.
#[derive(Debug, Deserialize)]
struct PeerJob {
    id: u64,
    #[serde(default)]
    name: Option<String>,
    state: String,
    #[serde(default)]
    exit_code: Option<i32>,
    #[serde(default)]
    signal: Option<i32>,
    #[serde(default)]
    started_at: Option<i64>,
    #[serde(default)]
    ended_at: Option<i64>,
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Submitted {
    id: u64,
}

impl SubmitRoute {
    /// Time allowed for one REST call.
    pub const TIMEOUT: Duration = Duration::from_secs(10);

    /// The route through the peer at `base` (`http://host:port`) to its cluster `cluster`,
    /// with `token`; parts are named by `naming`.
    pub fn new(
        base: &str,
        cluster: &str,
        token: &str,
        naming: Naming,
    ) -> Result<SubmitRoute, RmError> {
        let http = reqwest::Client::builder()
            .timeout(Self::TIMEOUT)
            .build()
            .map_err(|e| RmError::Invalid(format!("submit_url {base}: {e}")))?;
        Ok(SubmitRoute {
            base: base.trim_end_matches('/').to_owned(),
            cluster: cluster.to_owned(),
            token: token.trim().to_owned(),
            naming,
            http,
        })
    }

    /// Queues one part on the peer's cluster; returns the peer's job id (the WIKI job id).
    pub async fn submit(&self, sub: &Submission) -> Result<String, RmError> {
        let spec = &sub.spec;
        let env: BTreeMap<&str, &str> = spec
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let body = serde_json::json!({
            "name": self.naming.part(spec.job, spec.attempt),
            "procs": spec.processors.len(),
            "walltime": spec.walltime_secs,
            "cluster": self.cluster,
            "co_allocate": false,
            "command": spec.command,
            "env": env,
            "cwd": spec.cwd.is_absolute().then(|| spec.cwd.display().to_string()),
        });
        let url = format!("{}/api/v1/jobs", self.base);
        let resp = self
            .http
            .post(&url)
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .map_err(|e| unreachable(&url, e))?;
        let status = resp.status();
        if !status.is_success() {
            let text = resp.text().await.unwrap_or_default();
            return Err(RmError::Invalid(format!(
                "submit_url {url}: the peer refused job {} ({status}): {}",
                spec.job,
                text.chars().take(300).collect::<String>()
            )));
        }
        let s: Submitted = resp
            .json()
            .await
            .map_err(|e| RmError::Invalid(format!("submit_url {url}: unreadable answer: {e}")))?;
        Ok(s.id.to_string())
    }

    /// Our parts among the peer's jobs, by their id there (the WIKI job id), with the
    /// outcome of those that ended.
    pub async fn ours(&self) -> Result<HashMap<String, OurPart>, RmError> {
        let url = format!("{}/api/v1/jobs", self.base);
        let resp = self
            .http
            .get(&url)
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| unreachable(&url, e))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(RmError::Invalid(format!(
                "submit_url {url}: listing jobs answered {status} (check token_file)"
            )));
        }
        let jobs: Vec<PeerJob> = resp
            .json()
            .await
            .map_err(|e| RmError::Invalid(format!("submit_url {url}: unreadable answer: {e}")))?;
        Ok(jobs
            .into_iter()
            .filter_map(|j| {
                let (job, attempt) = self.naming.parse_part(j.name.as_deref()?)?;
                Some((
                    j.id.to_string(),
                    OurPart {
                        job,
                        attempt,
                        reservation: None,
                        begin: None,
                        outcome: peer_outcome(&j),
                    },
                ))
            })
            .collect())
    }
}

impl SubmitRoute {
    /// The output of the peer's job `id` (`stderr`: its standard error) from byte `offset`
    /// on: `GET /api/v1/jobs/{id}/output`.
    pub async fn output(&self, id: &str, stderr: bool, offset: u64) -> Result<Vec<u8>, RmError> {
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(RmError::Invalid(format!(
                "{id:?} is not a job id of the peer at {}",
                self.base
            )));
        }
        let url = format!("{}/api/v1/jobs/{id}/output", self.base);
        let resp = self
            .http
            .get(&url)
            .bearer_auth(&self.token)
            .query(&[
                ("stderr", stderr.to_string()),
                ("offset", offset.to_string()),
            ])
            .send()
            .await
            .map_err(|e| unreachable(&url, e))?;
        let status = resp.status();
        if !status.is_success() {
            let text = resp.text().await.unwrap_or_default();
            return Err(RmError::Invalid(format!(
                "submit_url {url}: the peer answered {status}: {}",
                text.chars().take(300).collect::<String>()
            )));
        }
        let bytes = resp.bytes().await.map_err(|e| unreachable(&url, e))?;
        Ok(bytes.to_vec())
    }
}

/// The outcome of a peer's ended job, from its record.
fn peer_outcome(j: &PeerJob) -> Option<Outcome> {
    let started = j.started_at.unwrap_or(0);
    let ended = j.ended_at.unwrap_or(0);
    let base = Outcome {
        exit_code: j.exit_code,
        signal: j.signal,
        timed_out: false,
        cancelled: false,
        started_at: started,
        ended_at: ended,
        error: None,
    };
    match j.state.as_str() {
        "completed" => Some(base),
        "timeout" => Some(Outcome {
            timed_out: true,
            ..base
        }),
        "cancelled" => Some(Outcome {
            cancelled: true,
            ..base
        }),
        "failed" => Some(Outcome {
            error: (j.exit_code.is_none() && j.signal.is_none()).then(|| {
                j.reason
                    .clone()
                    .unwrap_or_else(|| "failed on the peer".to_owned())
            }),
            ..base
        }),
        _ => None,
    }
}

/// A transport failure: the peer could not be asked.
fn unreachable(url: &str, e: reqwest::Error) -> RmError {
    RmError::Unreachable(format!("submit_url {url}: {e}"))
}
