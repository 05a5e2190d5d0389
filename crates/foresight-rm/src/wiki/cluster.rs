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
//!
//! The book (reservations, and where and when each part may start) lives in this process:
//! after a restart the service gives it back from its records
//! ([`restore_book`](ResourceManager::restore_book)), and the parts are found again in the
//! resource manager's queue by the names this instance gave them.

use super::client::WikiClient;
use super::dispatch::starts;
use super::error::WikiError;
use super::estimate::estimate_start;
use super::message::CancelType;
use super::mirror::{cluster_state, OurPart};
use super::route::SubmitRoute;
use crate::manager::{
    BookedPart, ClusterState, PartHandle, ReserveRequest, ResourceManager, RmError, Submission,
};
use crate::slurm::Naming;
use async_trait::async_trait;
use foresight_core::policy::Policy;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;

/// What this adapter keeps between passes: the reservations Foresight holds on the cluster,
/// and where and when each submitted part may start.
#[derive(Debug, Default)]
struct Book {
    reservations: BTreeMap<u64, ReserveRequest>,
    /// (job, attempt) → where and when the part may start.
    parts: HashMap<(u64, u32), Booked>,
    /// Scheduling passes begun.
    pass: u64,
}

/// One part in the book.
#[derive(Clone, Copy, Debug)]
struct Booked {
    reservation: Option<u64>,
    begin: Option<i64>,
    /// The pass during which it was entered: a pass forgets only the parts its listing no
    /// longer shows that were entered before it began (a submission answered during the pass
    /// may be missing from a listing taken earlier).
    pass: u64,
}

/// A WIKI resource manager driven by Foresight.
#[derive(Debug)]
pub struct WikiCluster {
    client: WikiClient,
    route: Option<SubmitRoute>,
    policy: Policy,
    naming: Naming,
    book: Mutex<Book>,
}

impl WikiCluster {
    /// The resource manager behind `client`; Foresight's parts reach its queue through
    /// `route` (none: only the cluster's own jobs are scheduled, and submissions are refused);
    /// its own queued jobs are started as `policy` would; reservations are named as `naming`
    /// (this instance, as the route names parts) names them.
    pub fn new(
        client: WikiClient,
        route: Option<SubmitRoute>,
        policy: Policy,
        naming: Naming,
    ) -> WikiCluster {
        WikiCluster {
            client,
            route,
            policy,
            naming,
            book: Mutex::new(Book::default()),
        }
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Our parts in the queue: the route's listing (it survives our restarts), with the
    /// reservation and begin the book holds for each.
    async fn ours(&self) -> Result<HashMap<String, OurPart>, RmError> {
        let Some(route) = &self.route else {
            return Ok(HashMap::new());
        };
        let mut ours = route.ours().await?;
        // Where one name is listed twice (a submission whose answer was lost, sent again),
        // only the newest is the part: the service cancels the other.
        let mut newest: HashMap<(u64, u32), &str> = HashMap::new();
        for (id, part) in &ours {
            let e = newest
                .entry((part.job, part.attempt))
                .or_insert(id.as_str());
            if peer_order(id) > peer_order(e) {
                *e = id.as_str();
            }
        }
        let newest: HashSet<String> = newest.into_values().map(str::to_owned).collect();
        let book = self.book();
        for (id, part) in ours.iter_mut() {
            match book.parts.get(&(part.job, part.attempt)) {
                Some(b) if newest.contains(id) => {
                    part.reservation = b.reservation;
                    part.begin = b.begin;
                }
                // Not in the book (an attempt the service gave up, or a duplicate): never
                // started by this adapter; the service cancels it.
                _ => part.begin = Some(i64::MAX),
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

/// The order of a peer's job ids: numeric ones by value.
fn peer_order(id: &str) -> (u64, &str) {
    (id.parse().unwrap_or(0), id)
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
        let now = crate::clock::unix_seconds();
        let pass = {
            let mut book = self.book();
            book.pass += 1;
            book.pass
        };
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
        // Forget the parts that ended or are no longer listed.
        let listed: HashSet<(u64, u32)> = ours
            .values()
            .filter(|o| o.outcome.is_none())
            .map(|o| (o.job, o.attempt))
            .collect();
        self.book()
            .parts
            .retain(|key, b| b.pass >= pass || listed.contains(key));
        Ok(cluster_state(
            now,
            &nodes,
            &jobs,
            &ours,
            &reservations,
            &self.naming,
        ))
    }

    /// When the cluster's policy would start such a job queued now, around what runs, the
    /// queue and Foresight's reservations (see `estimate`), from a fresh GETNODES and
    /// GETJOBS.
    async fn estimate_start(&self, procs: u32, walltime: i64) -> Result<Option<i64>, RmError> {
        if procs == 0 {
            return Err(RmError::Invalid(
                "an estimate needs at least one processor".to_owned(),
            ));
        }
        let now = crate::clock::unix_seconds();
        let nodes = self.client.get_nodes().await.map_err(wiki_error)?;
        let jobs = self.client.get_jobs().await.map_err(wiki_error)?;
        let ours = self.ours().await?;
        let reservations = self.book().reservations.clone();
        Ok(estimate_start(
            now,
            &nodes,
            &jobs,
            &ours,
            &reservations,
            &self.policy,
            procs,
            walltime,
        ))
    }

    fn restore_book(&self, reservations: &[ReserveRequest], parts: &[BookedPart]) {
        let mut book = self.book();
        let pass = book.pass;
        for r in reservations {
            book.reservations.insert(r.id, r.clone());
        }
        for p in parts {
            book.parts.insert(
                (p.job, p.attempt),
                Booked {
                    reservation: p.reservation,
                    begin: p.begin,
                    pass,
                },
            );
        }
    }

    /// From the peer's REST API (`GET /api/v1/jobs/{id}/output`), where the part ran.
    async fn output(
        &self,
        part: &PartHandle,
        stderr: bool,
        offset: u64,
    ) -> Result<Option<Vec<u8>>, RmError> {
        let Some(route) = &self.route else {
            return Ok(None);
        };
        let id = self.external(part)?;
        route.output(id, stderr, offset).await.map(Some)
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
        let mut book = self.book();
        let pass = book.pass;
        book.parts.insert(
            (sub.spec.job, sub.spec.attempt),
            Booked {
                reservation: sub.reservation,
                begin: sub.begin,
                pass,
            },
        );
        drop(book);
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
        if let Some(p) = part {
            if let Some(entry) = book.parts.get_mut(&(p.job, p.attempt)) {
                entry.begin = Some(to.start);
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
