//! Operations on jobs by id or by query (cancel, hold, release, signal, requeue): on this
//! service's world, or forwarded to the peer whose job it is.

use crate::runtime::views::{check_owner, shared_view, view_of};
use crate::runtime::Service;
use crate::state::refusal::Refusal;
use crate::state::world::World;
use foresight_api::{JobState, JobView};
use foresight_core::time::Time;
use foresight_core::JobId;
use foresight_store::UserRecord;
use std::sync::Arc;
use std::time::{Duration, Instant};

impl Service {
    /// Runs `op` on a job the user may touch, then persists and acts.
    pub async fn job_op(
        self: &Arc<Self>,
        user: &UserRecord,
        id: JobId,
        op: impl FnOnce(&mut World, Time) -> Result<(), Refusal>,
    ) -> Result<JobView, Refusal> {
        let view = {
            let mut w = self.world();
            check_owner(&w, user, id)?;
            op(&mut w, self.now())?;
            view_of(&w, id, self.now())
        };
        self.wake.notify_one();
        self.flush().await;
        view.ok_or_else(|| Refusal::not_found_at("id", format!("no job {id}")))
    }

    /// The jobs `r` names that the user may see: one, or every task of an array job.
    pub fn job_ids(
        &self,
        user: &UserRecord,
        r: foresight_api::JobRef,
    ) -> Result<Vec<JobId>, Refusal> {
        let ids = self.world().resolve(&user.name, user.admin, r);
        if ids.is_empty() {
            return Err(Refusal::not_found_at("id", format!("no job {r}")));
        }
        Ok(ids)
    }

    /// The one job `r` names: the job, the task, or an array job's first task.
    pub fn job_id(&self, user: &UserRecord, r: foresight_api::JobRef) -> Result<JobId, Refusal> {
        Ok(self.job_ids(user, r)?[0])
    }

    /// Runs `op` on every job `r` names (each task of an array job), then persists and acts.
    /// Tasks it does not apply to (already ended) are skipped; it fails only if it applies
    /// to none. Answers with the first job's view.
    pub async fn job_op_each(
        self: &Arc<Self>,
        user: &UserRecord,
        r: foresight_api::JobRef,
        op: impl Fn(&mut World, Time, JobId) -> Result<(), Refusal>,
    ) -> Result<JobView, Refusal> {
        let ids = self.job_ids(user, r)?;
        let view = {
            let mut w = self.world();
            let now = self.now();
            let mut first_error = None;
            let mut done = 0;
            for &id in &ids {
                check_owner(&w, user, id)?;
                match op(&mut w, now, id) {
                    Ok(()) => done += 1,
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
            if done == 0 {
                if let Some(e) = first_error {
                    return Err(e);
                }
            }
            view_of(&w, ids[0], self.now())
        };
        self.wake.notify_one();
        self.flush().await;
        view.ok_or_else(|| Refusal::not_found_at("id", format!("no job {r}")))
    }

    /// A job this service does not hold: one the global queue knows (in dispatcher mode,
    /// still in the shared queue or run by another site); else what `not_here` says.
    pub async fn job_elsewhere(
        &self,
        user: &UserRecord,
        r: foresight_api::JobRef,
        not_here: Refusal,
    ) -> Result<JobView, Refusal> {
        if r.task.is_some() {
            return Err(not_here);
        }
        let shared = self.global_queue.shared_job(r.job).await?;
        match shared {
            Some(j) if user.admin || j.record.user == user.name => {
                Ok(shared_view(&self.world(), &j, self.now()))
            }
            _ => Err(not_here),
        }
    }

    /// Cancels, holds or releases a job this service does not hold, in the global queue: in
    /// dispatcher mode, a global job no site has started (in the queue, in auction, or
    /// awarded), done in the shared queue whichever dispatcher is asked; a cancelled job
    /// some other site started is stopped by that site, which this waits a few seconds for.
    /// Else (a job the queue does not know) what `not_here` says.
    pub async fn job_op_elsewhere(
        &self,
        user: &UserRecord,
        r: foresight_api::JobRef,
        op: foresight_store::QueueOp,
        not_here: Refusal,
    ) -> Result<JobView, Refusal> {
        if r.task.is_some() {
            return Err(not_here);
        }
        let d = &self.global_queue;
        let site = match d.shared_job(r.job).await? {
            Some(j) if user.admin || j.record.user == user.name => j.site,
            _ => return Err(not_here),
        };
        match d.apply(r.job, op, self.now().secs()).await? {
            foresight_store::OpOutcome::Done => {}
            foresight_store::OpOutcome::Refused(why) => return Err(Refusal::conflict(why)),
            foresight_store::OpOutcome::NotGlobal => {
                return Err(Refusal::conflict(format!(
                    "job {} is a local job of site {}: ask that site's dispatcher",
                    r.job,
                    site.unwrap_or_default()
                )))
            }
            foresight_store::OpOutcome::Requested { site } => {
                let deadline = Instant::now() + CANCEL_WAIT;
                while Instant::now() < deadline {
                    if let Some(j) = d.shared_job(r.job).await? {
                        if j.record.state.is_final() {
                            return Ok(shared_view(&self.world(), &j, self.now()));
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                let mut view = self.job_elsewhere(user, r, not_here).await?;
                view.reason = Some(format!("cancel asked of site {site}, which runs it"));
                return Ok(view);
            }
        }
        self.job_elsewhere(user, r, not_here).await
    }

    /// Jobs the user may see, filtered, at every site: those this site holds and the newest
    /// of those the global queue holds elsewhere (in dispatcher mode: queued, or run by
    /// other sites, which their reason names).
    pub async fn jobs_everywhere(
        &self,
        user: &UserRecord,
        state: Option<JobState>,
        owner: Option<&str>,
        limit: usize,
    ) -> Result<Vec<JobView>, Refusal> {
        let mut views = self.jobs(user, state, owner, limit);
        let who = match owner {
            _ if user.admin => owner,
            Some(o) if o != user.name => return Ok(views),
            _ => Some(user.name.as_str()),
        };
        let cap = u32::try_from(limit).unwrap_or(u32::MAX);
        let elsewhere = self
            .global_queue
            .jobs_elsewhere(who, state.map(JobState::as_str), cap)
            .await?;
        {
            let w = self.world();
            let here: std::collections::BTreeSet<u64> = views.iter().map(|v| v.id).collect();
            views.extend(
                elsewhere
                    .iter()
                    .filter(|j| !here.contains(&j.record.id))
                    .map(|j| shared_view(&w, j, self.now())),
            );
        }
        views.sort_by_key(|v| v.id);
        let extra = views.len().saturating_sub(limit);
        views.drain(..extra);
        Ok(views)
    }

    /// Part `part` of job `id`'s output (`stderr`: error) from `offset` on, when its
    /// cluster's resource manager holds it (a WIKI peer); `None` when it is in this server's
    /// output directory.
    pub async fn output_elsewhere(
        &self,
        id: JobId,
        part: usize,
        stderr: bool,
        offset: u64,
    ) -> Result<Option<Vec<u8>>, Refusal> {
        let found = {
            let w = self.world();
            w.jobs.get(&id).and_then(|j| {
                let p = j.parts.get(part)?;
                let k = w.cluster_index(&p.cluster)?;
                let external = p.external.clone()?;
                Some((
                    k,
                    p.cluster.clone(),
                    foresight_rm::PartHandle {
                        job: id.0,
                        attempt: j.attempt,
                        external: Some(external),
                    },
                ))
            })
        };
        let Some((k, cluster, handle)) = found else {
            return Ok(None);
        };
        self.managers[k]
            .output(&handle, stderr, offset)
            .await
            .map_err(|e| {
                let why = format!("job {id}: its output on cluster {cluster}: {e}");
                if e.is_unreachable() {
                    Refusal::internal(why)
                } else {
                    Refusal::not_found(why)
                }
            })
    }
}

/// How long cancelling a job another site started waits for that site to stop it.
pub(crate) const CANCEL_WAIT: Duration = Duration::from_secs(5);
