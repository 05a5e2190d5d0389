//! A site's cluster as the centre drives it: every call becomes a command in the site's
//! mailbox, and the cluster's state is the snapshot the site last pushed.

use super::{FileOffer, Mailbox, Op, Received, Reply, MAX_OUTPUT_CHUNK};
use crate::manager::{
    ClusterState, PartHandle, ReserveRequest, ResourceManager, RmError, Submission,
};
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;

/// A cluster lent by a site on another host. It schedules itself (the site's own service
/// does), so the centre mirrors it from snapshots as it does a Slurm cluster.
#[derive(Debug)]
pub struct SiteCluster {
    mailbox: Arc<Mailbox>,
    cluster: String,
    lease: Duration,
    timeout: Duration,
}

impl SiteCluster {
    /// Cluster `cluster` of the site behind `mailbox`: unreachable when its snapshot is older
    /// than `lease`; a command not answered within `timeout` fails as unreachable.
    pub fn new(
        mailbox: Arc<Mailbox>,
        cluster: &str,
        lease: Duration,
        timeout: Duration,
    ) -> SiteCluster {
        SiteCluster {
            mailbox,
            cluster: cluster.to_owned(),
            lease,
            timeout,
        }
    }

    async fn call(&self, op: Op) -> Result<Reply, RmError> {
        self.call_within(op, self.timeout).await
    }

    /// [`call`](Self::call), waiting `timeout` for the answer.
    async fn call_within(&self, op: Op, timeout: Duration) -> Result<Reply, RmError> {
        match self.mailbox.call(&self.cluster, op, timeout).await? {
            Reply::Refused {
                message,
                unreachable,
            } => Err(if unreachable {
                RmError::Unreachable(message)
            } else {
                RmError::Invalid(format!("site {} refused: {message}", self.mailbox.site()))
            }),
            reply => Ok(reply),
        }
    }

    async fn done(&self, op: Op) -> Result<(), RmError> {
        match self.call(op).await? {
            Reply::Done => Ok(()),
            other => Err(self.unexpected(&other)),
        }
    }

    fn unexpected(&self, reply: &Reply) -> RmError {
        RmError::Invalid(format!(
            "site {} answered out of turn: {reply:?}",
            self.mailbox.site()
        ))
    }
}

#[async_trait]
impl ResourceManager for SiteCluster {
    fn kind(&self) -> &'static str {
        "site"
    }

    fn scheduled_by_foresight(&self) -> bool {
        false
    }

    async fn snapshot(&self) -> Result<ClusterState, RmError> {
        let site = self.mailbox.site();
        match self.mailbox.latest(&self.cluster) {
            None => Err(RmError::Unreachable(format!(
                "site {site} has not sent cluster {} yet",
                self.cluster
            ))),
            Some((age, _)) if age > self.lease => Err(RmError::Unreachable(format!(
                "site {site} silent for {} s (its lease is {} s)",
                age.as_secs(),
                self.lease.as_secs()
            ))),
            Some((_, state)) => Ok(state),
        }
    }

    fn first_report_pending(&self) -> bool {
        self.mailbox.latest(&self.cluster).is_none() && self.mailbox.age() < self.lease
    }

    async fn estimate_start(&self, procs: u32, walltime: i64) -> Result<Option<i64>, RmError> {
        match self.call(Op::Estimate { procs, walltime }).await? {
            Reply::Estimate { start } => Ok(start),
            other => Err(self.unexpected(&other)),
        }
    }

    async fn reserve(&self, req: &ReserveRequest) -> Result<(), RmError> {
        self.done(Op::Reserve {
            request: req.clone(),
            over_suspended: false,
        })
        .await
    }

    async fn reserve_over_suspended(&self, req: &ReserveRequest) -> Result<(), RmError> {
        self.done(Op::Reserve {
            request: req.clone(),
            over_suspended: true,
        })
        .await
    }

    async fn release(&self, reservation: u64) -> Result<(), RmError> {
        self.done(Op::Release { reservation }).await
    }

    async fn submit(&self, sub: &Submission) -> Result<PartHandle, RmError> {
        match self
            .call(Op::Submit {
                submission: sub.clone(),
            })
            .await?
        {
            Reply::Submitted { part } => Ok(part),
            other => Err(self.unexpected(&other)),
        }
    }

    async fn cancel(&self, part: &PartHandle) -> Result<(), RmError> {
        self.done(Op::Cancel { part: part.clone() }).await
    }

    async fn suspend(&self, part: &PartHandle) -> Result<(), RmError> {
        self.done(Op::Suspend { part: part.clone() }).await
    }

    async fn resume(&self, part: &PartHandle) -> Result<(), RmError> {
        self.done(Op::Resume { part: part.clone() }).await
    }

    async fn requeue(&self, part: &PartHandle) -> Result<(), RmError> {
        self.done(Op::Requeue { part: part.clone() }).await
    }

    async fn output(
        &self,
        part: &PartHandle,
        stderr: bool,
        offset: u64,
    ) -> Result<Option<Vec<u8>>, RmError> {
        // A reader wants the whole rest: fetched in chunks the answers can carry.
        let mut all: Option<Vec<u8>> = None;
        loop {
            let at = offset + all.as_ref().map_or(0, |b| b.len() as u64);
            let reply = self
                .call(Op::Output {
                    part: part.clone(),
                    stderr,
                    offset: at,
                })
                .await?;
            let Reply::Output { bytes } = reply else {
                return Err(self.unexpected(&reply));
            };
            let Some(bytes) = bytes else {
                return Ok(all);
            };
            let full = bytes.len() >= MAX_OUTPUT_CHUNK;
            all.get_or_insert_with(Vec::new).extend(bytes);
            if !full {
                return Ok(all);
            }
        }
    }

    async fn fetch_inputs(
        &self,
        part: &PartHandle,
        files: &[FileOffer],
        timeout: Duration,
    ) -> Result<Received, RmError> {
        let op = Op::Fetch {
            part: part.clone(),
            files: files.to_vec(),
            within_ms: Some(timeout.as_millis() as u64),
        };
        match self.call_within(op, timeout).await? {
            Reply::Fetched { bytes, millis } => Ok(Received { bytes, millis }),
            other => Err(self.unexpected(&other)),
        }
    }

    async fn send_files(
        &self,
        part: &PartHandle,
        files: &[super::Wanted],
        timeout: Duration,
    ) -> Result<(Vec<super::SentFile>, Received), RmError> {
        let op = Op::Send {
            part: part.clone(),
            files: files.to_vec(),
            within_ms: Some(timeout.as_millis() as u64),
        };
        match self.call_within(op, timeout).await? {
            Reply::Sent {
                files,
                bytes,
                millis,
            } => Ok((files, Received { bytes, millis })),
            other => Err(self.unexpected(&other)),
        }
    }

    async fn move_reservation(
        &self,
        to: &ReserveRequest,
        part: Option<&PartHandle>,
    ) -> Result<(), RmError> {
        self.done(Op::Move {
            to: to.clone(),
            part: part.cloned(),
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::ResourceManager;

    /// A site not heard from since the centre started is left as recorded for its lease
    /// (it may be reconnecting to a standby that took over), then taken as unreachable.
    #[tokio::test]
    async fn a_site_not_heard_from_is_awaited_for_its_lease_then_unreachable() {
        let lease = Duration::from_millis(50);
        let mailbox = Arc::new(Mailbox::new("umea", lease));
        let cluster = SiteCluster::new(mailbox, "abisko", lease, Duration::from_secs(1));
        assert!(cluster.first_report_pending());
        tokio::time::sleep(Duration::from_millis(80)).await;
        assert!(!cluster.first_report_pending());
        let e = cluster.snapshot().await.unwrap_err();
        assert!(e.is_unreachable(), "{e}");
        assert!(
            e.to_string().contains("has not sent cluster abisko yet"),
            "{e}"
        );
    }
}
