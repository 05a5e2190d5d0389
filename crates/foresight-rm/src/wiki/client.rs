//! The scheduler side: [`WikiClient`] sends one request per connection to a WIKI server (a
//! Foresight daemon's, or another resource manager's) and reads its reply, checked like a
//! request: size, checksum under the shared key, timestamp.

use super::error::WikiError;
use super::frame::{read_frame, Frame, Key};
use super::message::{CancelType, Reply, Request, Selection};
use super::record::{JobRecord, NodeRecord};
use crate::clock::unix_seconds;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::timeout;

/// A client of one WIKI server. Cheap to clone; holds no connection (each call opens its own,
/// as the protocol wants).
#[derive(Clone, Debug)]
pub struct WikiClient {
    /// `host:port` of the server.
    addr: String,
    /// The shared key.
    key: Key,
    /// `AUTH=` of the requests.
    auth: String,
    /// Time allowed for one whole call: connect, send, receive.
    timeout: Duration,
}

impl WikiClient {
    /// Default time allowed for one call.
    pub const TIMEOUT: Duration = Duration::from_secs(10);

    /// A client of the server at `addr` (`host:port`) sending as `auth`, with `key`.
    pub fn new(addr: impl Into<String>, key: Key, auth: impl Into<String>) -> WikiClient {
        WikiClient {
            addr: addr.into(),
            key,
            auth: auth.into(),
            timeout: Self::TIMEOUT,
        }
    }

    /// The same client allowing `timeout` per call.
    pub fn with_timeout(mut self, timeout: Duration) -> WikiClient {
        self.timeout = timeout;
        self
    }

    /// Sends `request` and returns the server's reply as it is, a refusal included
    /// ([`Reply::Failed`]); `Err` only when no valid reply came.
    pub async fn call(&self, request: &Request) -> Result<Reply, WikiError> {
        let frame = Frame::new(unix_seconds(), self.auth.as_str(), request.render()?);
        let bytes = frame.encode(self.key)?;
        let body = timeout(self.timeout, self.exchange(&bytes))
            .await
            .map_err(|_| WikiError::Timeout {
                during: "reply",
                after: self.timeout,
            })??;
        let reply = Frame::decode_body(&body, self.key, unix_seconds())?;
        Reply::parse(&reply.data, request.reply_kind())
    }

    /// Connects, sends `bytes`, reads one frame's body.
    async fn exchange(&self, bytes: &[u8]) -> Result<Vec<u8>, WikiError> {
        let mut stream = TcpStream::connect(&self.addr)
            .await
            .map_err(|e| WikiError::io(format!("connect to {}", self.addr), e))?;
        stream
            .write_all(bytes)
            .await
            .map_err(|e| WikiError::io(format!("send to {}", self.addr), e))?;
        read_frame(&mut stream).await
    }

    /// Every node (`CMD=GETNODES ARG=0:ALL`).
    pub async fn get_nodes(&self) -> Result<Vec<NodeRecord>, WikiError> {
        let request = Request::GetNodes {
            since: 0,
            select: Selection::All,
        };
        match self.call(&request).await? {
            Reply::Nodes(nodes) => Ok(nodes),
            other => Err(unexpected(other)),
        }
    }

    /// Every job (`CMD=GETJOBS ARG=0:ALL`).
    pub async fn get_jobs(&self) -> Result<Vec<JobRecord>, WikiError> {
        let request = Request::GetJobs {
            since: 0,
            select: Selection::All,
        };
        match self.call(&request).await? {
            Reply::Jobs(jobs) => Ok(jobs),
            other => Err(unexpected(other)),
        }
    }

    /// Starts `job` with one task per entry of `tasklist`; returns the server's text.
    pub async fn start_job(&self, job: &str, tasklist: &[String]) -> Result<String, WikiError> {
        self.done(&Request::StartJob {
            job: job.to_owned(),
            tasklist: tasklist.to_vec(),
        })
        .await
    }

    /// Cancels `job`; returns the server's text.
    pub async fn cancel_job(&self, job: &str, kind: CancelType) -> Result<String, WikiError> {
        self.done(&Request::CancelJob {
            job: job.to_owned(),
            kind,
        })
        .await
    }

    /// Suspends `job`; returns the server's text.
    pub async fn suspend_job(&self, job: &str) -> Result<String, WikiError> {
        self.done(&Request::SuspendJob {
            job: job.to_owned(),
        })
        .await
    }

    /// Resumes `job`; returns the server's text.
    pub async fn resume_job(&self, job: &str) -> Result<String, WikiError> {
        self.done(&Request::ResumeJob {
            job: job.to_owned(),
        })
        .await
    }

    async fn done(&self, request: &Request) -> Result<String, WikiError> {
        match self.call(request).await? {
            Reply::Done(text) => Ok(text),
            other => Err(unexpected(other)),
        }
    }
}

/// A refusal as [`WikiError::Refused`]; any other reply the request cannot have as malformed.
fn unexpected(reply: Reply) -> WikiError {
    match reply {
        Reply::Failed { code, reason } => WikiError::Refused { code, reason },
        other => WikiError::malformed("reply", "a reply of another kind", &format!("{other:?}")),
    }
}
