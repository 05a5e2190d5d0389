//! [`WikiCluster`]: a WIKI resource manager (a Foresight peer's WIKI server, or any other)
//! as a [`ResourceManager`] whose scheduler Foresight is.
//!
//! Every [`snapshot`](ResourceManager::snapshot) is one scheduling pass, as Maui's
//! `RMPOLLINTERVAL` iteration is: GETNODES and GETJOBS; `STARTJOB` for Foresight's parts
//! whose reservation has begun and for the local jobs the cluster's policy starts now (see
//! `dispatch`); then the cluster as the forecast reads it (see `mirror`). The service mirrors
//! it like a Slurm cluster: it reserves (here: in this adapter's own book, since WIKI has no
//! reservations, honoured by the pass), submits through the [`SubmitRoute`], and follows
//! the parts in the snapshots.

use super::client::WikiClient;
use super::dispatch::starts;
use super::error::WikiError;
use super::message::CancelType;
use super::mirror::{cluster_state, OurPart};
use super::route::SubmitRoute;
use crate::manager::{
    ClusterState, PartHandle, ReserveRequest, ResourceManager, RmError, Submission,
};
use async_trait::async_trait;
use foresight_core::policy::Policy;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// What this adapter keeps between passes: the reservations Foresight holds on the cluster,
/// and where and when each submitted part may start.
#[derive(Debug, Default)]
struct Book {
    reservations: BTreeMap<u64, ReserveRequest>,
    /// WIKI job id → (reservation, begin) of our parts submitted by this process.
    parts: HashMap<String, (Option<u64>, Option<i64>)>,
}

/// A WIKI resource manager driven by Foresight.
#[derive(Debug)]
pub struct WikiCluster {
    client: WikiClient,
    route: Option<SubmitRoute>,
    policy: Policy,
    book: Mutex<Book>,
}

impl WikiCluster {
    /// The resource manager behind `client`; Foresight's parts reach its queue through
    /// `route` (none: only the cluster's own jobs are scheduled, and submissions are refused);
    /// its own queued jobs are started as `policy` would.
    pub fn new(client: WikiClient, route: Option<SubmitRoute>, policy: Policy) -> WikiCluster {
        WikiCluster {
            client,
            route,
            policy,
            book: Mutex::new(Book::default()),
        }
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Our parts in the queue: the route's listing (it survives our restarts), with the
    /// reservation and begin of those this process submitted.
    async fn ours(&self) -> Result<HashMap<String, OurPart>, RmError> {
        let Some(route) = &self.route else {
            return Ok(HashMap::new());
        };
        let mut ours = route.ours().await?;
        let book = self.book();
        for (id, part) in ours.iter_mut() {
            match book.parts.get(id) {
                Some(&(reservation, begin)) => {
                    part.reservation = reservation;
                    part.begin = begin;
                }
                // Submitted before this process started: not started by this process (the
                // service reconciles it: follows it once running, else withdraws it).
                None => part.begin = Some(i64::MAX),
            }
        }
        Ok(ours)
    }

    fn external<'a>(&self, part: &'a PartHandle) -> Result<&'a str, RmError> {
        part.external.as_deref().ok_or_else(|| {
            RmError::Invalid(format!(
                "job {} attempt {}: no WIKI job id to act on",
                part.job, part.attempt
            ))
        })
    }
}

/// A transport failure (no answer) is the cluster being unreachable; a refusal is not.
fn wiki_error(e: WikiError) -> RmError {
    match e {
        WikiError::Refused { .. } => RmError::Invalid(e.to_string()),
        other => RmError::Unreachable(format!("WIKI resource manager: {other}")),
    }
}

#[async_trait]
impl ResourceManager for WikiCluster {
    fn kind(&self) -> &'static str {
        "wiki"
    }

    fn scheduled_by_foresight(&self) -> bool {
        false
    }

    async fn snapshot(&self) -> Result<ClusterState, RmError> {
        let now = super::frame::unix_now();
        let nodes = self.client.get_nodes().await.map_err(wiki_error)?;
        let mut jobs = self.client.get_jobs().await.map_err(wiki_error)?;
        let ours = self.ours().await?;
        let reservations = self.book().reservations.clone();
        let todo = starts(now, &nodes, &jobs, &ours, &reservations, &self.policy);
        let mut nodes = nodes;
        if !todo.is_empty() {
            for s in &todo {
                match self.client.start_job(&s.job, &s.tasklist).await {
                    Ok(_) => {
                        tracing::info!("WIKI: started job {} on {}", s.job, s.tasklist.join(":"))
                    }
                    Err(e) => tracing::warn!("WIKI: STARTJOB {} refused: {e}", s.job),
                }
            }
            nodes = self.client.get_nodes().await.map_err(wiki_error)?;
            jobs = self.client.get_jobs().await.map_err(wiki_error)?;
        }
        // Forget the book entries of parts the resource manager no longer lists.
        self.book()
            .parts
            .retain(|id, _| jobs.iter().any(|j| &j.id == id));
        Ok(cluster_state(now, &nodes, &jobs, &ours, &reservations))
    }

    async fn estimate_start(&self, _procs: u32, _walltime: i64) -> Result<Option<i64>, RmError> {
        Ok(None)
    }

    async fn reserve(&self, req: &ReserveRequest) -> Result<(), RmError> {
        if req.end <= req.start || req.procs == 0 {
            return Err(RmError::Invalid(format!(
                "reservation {}: empty ({} processors over [{}, {}))",
                req.id, req.procs, req.start, req.end
            )));
        }
        self.book().reservations.insert(req.id, req.clone());
        Ok(())
    }

    async fn release(&self, reservation: u64) -> Result<(), RmError> {
        self.book().reservations.remove(&reservation);
        Ok(())
    }

    async fn submit(&self, sub: &Submission) -> Result<PartHandle, RmError> {
        let Some(route) = &self.route else {
            return Err(RmError::Invalid(format!(
                "job {}: this WIKI cluster has no submit_url, so Foresight's jobs cannot \
                 reach its queue",
                sub.spec.job
            )));
        };
        let id = route.submit(sub).await?;
        self.book()
            .parts
            .insert(id.clone(), (sub.reservation, sub.begin));
        Ok(PartHandle {
            job: sub.spec.job,
            attempt: sub.spec.attempt,
            external: Some(id),
        })
    }

    async fn cancel(&self, part: &PartHandle) -> Result<(), RmError> {
        let id = self.external(part)?;
        match self.client.cancel_job(id, CancelType::Admin).await {
            Ok(_) => Ok(()),
            // Already gone there: nothing left to cancel.
            Err(WikiError::Refused { reason, .. })
                if reason.contains("no job") || reason.contains("unknown") =>
            {
                Ok(())
            }
            Err(e) => Err(wiki_error(e)),
        }
    }

    async fn suspend(&self, part: &PartHandle) -> Result<(), RmError> {
        let id = self.external(part)?;
        self.client
            .suspend_job(id)
            .await
            .map(|_| ())
            .map_err(wiki_error)
    }

    async fn resume(&self, part: &PartHandle) -> Result<(), RmError> {
        let id = self.external(part)?;
        self.client
            .resume_job(id)
            .await
            .map(|_| ())
            .map_err(wiki_error)
    }

    /// The reservation is this adapter's own: moving it moves the start the pass waits for.
    async fn move_reservation(
        &self,
        to: &ReserveRequest,
        part: Option<&PartHandle>,
    ) -> Result<(), RmError> {
        let mut book = self.book();
        if !book.reservations.contains_key(&to.id) {
            return Err(RmError::Invalid(format!(
                "reservation {} is not held on this WIKI cluster",
                to.id
            )));
        }
        book.reservations.insert(to.id, to.clone());
        if let Some(id) = part.and_then(|p| p.external.as_deref()) {
            if let Some(entry) = book.parts.get_mut(id) {
                entry.1 = Some(to.start);
            }
        }
        Ok(())
    }

    async fn requeue(&self, part: &PartHandle) -> Result<(), RmError> {
        Err(RmError::Invalid(format!(
            "job {}: WIKI has no requeue command",
            part.job
        )))
    }
}
