//! Handlers of jobs: submission (one or a batch), listing, showing, the actions on a job
//! (cancel, hold, release, suspend, resume, requeue), why one waits, and estimates.

use crate::api::{AppState, Body, Caller, JobPath, Params};
use crate::state::refusal::Refusal;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use foresight_api::*;
use serde::Deserialize;

/// Submits one job.
#[utoipa::path(post, path = "/api/v1/jobs", request_body = SubmitJob,
    responses((status = 201, body = Submitted), (status = 400, body = foresight_api::ApiError),
              (status = 402, body = foresight_api::ApiError),
              (status = 403, body = foresight_api::ApiError)))]
pub(super) async fn submit_job(
    State(s): State<AppState>,
    caller: Caller,
    Body(job): Body<SubmitJob>,
) -> Result<(StatusCode, Json<Submitted>), Refusal> {
    crate::state::world::accounts::check_runs_as(&s.world(), &caller.0.name)?;
    let ids = s.submit(&caller.0, vec![job], false).await?;
    Ok((StatusCode::CREATED, Json(Submitted { id: ids[0] })))
}

/// Submits many jobs at once: all are accepted or none.
#[utoipa::path(post, path = "/api/v1/jobs/batch", request_body = SubmitBatch,
    responses((status = 201, body = SubmittedBatch), (status = 400, body = foresight_api::ApiError)))]
pub(super) async fn submit_batch(
    State(s): State<AppState>,
    caller: Caller,
    Body(batch): Body<SubmitBatch>,
) -> Result<(StatusCode, Json<SubmittedBatch>), Refusal> {
    crate::state::world::accounts::check_runs_as(&s.world(), &caller.0.name)?;
    let ids = s.submit(&caller.0, batch.jobs, true).await?;
    Ok((StatusCode::CREATED, Json(SubmittedBatch { ids })))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct JobFilter {
    /// Only jobs in this state.
    state: Option<String>,
    /// Only this user's jobs (administrators).
    user: Option<String>,
    /// At most this many, the newest (default 1000).
    limit: Option<usize>,
    /// Only the tasks of this array job (every one: `job wait` waits for them all), or
    /// this job when it is no array; 404 when there is no such job.
    array: Option<u64>,
}

/// Lists jobs: the caller's own, or everyone's for administrators.
#[utoipa::path(get, path = "/api/v1/jobs", params(JobFilter),
    responses((status = 200, body = [JobView])))]
pub(super) async fn list_jobs(
    State(s): State<AppState>,
    caller: Caller,
    Params(f): Params<JobFilter>,
) -> Result<Json<Vec<JobView>>, Refusal> {
    let state = f
        .state
        .as_deref()
        .map(str::parse::<JobState>)
        .transpose()
        .map_err(|e| Refusal::invalid("state", e))?;
    let limit = f.limit.unwrap_or(1000);
    if let Some(a) = f.array {
        let mut views = Vec::new();
        for id in s.job_ids(&caller.0, JobRef::job(a))? {
            let j = s.job(&caller.0, id)?;
            let kept = state.is_none_or(|st| j.state == st)
                && f.user.as_deref().is_none_or(|u| j.user == u);
            if kept {
                views.push(j);
            }
        }
        let extra = views.len().saturating_sub(limit);
        views.drain(..extra);
        return Ok(Json(views));
    }
    // A peer dispatcher lists too the jobs it does not hold: queued or at other sites.
    s.jobs_everywhere(&caller.0, state, f.user.as_deref(), limit)
        .await
        .map(Json)
}

/// One job.
#[utoipa::path(get, path = "/api/v1/jobs/{id}", params(("id" = String, Path, description = "Job id, or ARRAY_TASK")),
    responses((status = 200, body = JobView), (status = 404, body = foresight_api::ApiError)))]
pub(super) async fn show_job(
    State(s): State<AppState>,
    caller: Caller,
    JobPath(r): JobPath,
) -> Result<Json<JobView>, Refusal> {
    match s.job_id(&caller.0, r) {
        Ok(id) => s.job(&caller.0, id).map(Json),
        // A peer dispatcher shows too the jobs it does not hold: queued or at another site.
        Err(not_here) => s.job_elsewhere(&caller.0, r, not_here).await.map(Json),
    }
}

macro_rules! job_action {
    ($name:ident, $path:literal, $doc:literal, |$w:ident, $now:ident, $id:ident| $body:expr) => {
        job_action!($name, $path, $doc, false, None, |$w, $now, $id| $body);
    };
    ($name:ident, $path:literal, $doc:literal, queue $op:expr, |$w:ident, $now:ident, $id:ident| $body:expr) => {
        job_action!($name, $path, $doc, false, Some($op), |$w, $now, $id| $body);
    };
    ($name:ident, $path:literal, $doc:literal, $admin:literal, |$w:ident, $now:ident, $id:ident| $body:expr) => {
        job_action!($name, $path, $doc, $admin, None, |$w, $now, $id| $body);
    };
    ($name:ident, $path:literal, $doc:literal, $admin:literal, $queue:expr, |$w:ident, $now:ident, $id:ident| $body:expr) => {
        #[doc = $doc]
        #[utoipa::path(post, path = $path, params(("id" = String, Path, description = "Job id, or ARRAY_TASK; an array job's id acts on every task")),
            responses((status = 200, body = JobView), (status = 404, body = foresight_api::ApiError),
                      (status = 409, body = foresight_api::ApiError)))]
        pub(super) async fn $name(
            State(s): State<AppState>,
            caller: Caller,
            JobPath(r): JobPath,
        ) -> Result<Json<JobView>, Refusal> {
            if $admin {
                caller.admin()?;
            }
            let queue: Option<foresight_store::QueueOp> = $queue;
            if let (Some(op), Err(not_here)) = (queue, s.job_ids(&caller.0, r)) {
                // A peer dispatcher acts too on global jobs it does not hold.
                return s.job_op_elsewhere(&caller.0, r, op, not_here).await.map(Json);
            }
            s.job_op_each(&caller.0, r, |$w, $now, $id| $body)
                .await
                .map(Json)
        }
    };
}

job_action!(
    cancel_job,
    "/api/v1/jobs/{id}/cancel",
    "Cancels a job.",
    queue foresight_store::QueueOp::Cancel,
    |w, now, id| w.cancel(now, id)
);
job_action!(
    hold_job,
    "/api/v1/jobs/{id}/hold",
    "Holds a job that has not started.",
    queue foresight_store::QueueOp::Hold,
    |w, now, id| w.hold(now, id)
);
job_action!(
    release_job,
    "/api/v1/jobs/{id}/release",
    "Releases a held job.",
    queue foresight_store::QueueOp::Release,
    |w, now, id| w.release(now, id)
);
job_action!(
    suspend_job,
    "/api/v1/jobs/{id}/suspend",
    "Stops a running job (SIGSTOP; administrators, as in Slurm: a suspended job keeps its \
     processors and its walltime clock stops).",
    true,
    |w, now, id| w.pause(now, id, true)
);
job_action!(
    resume_job,
    "/api/v1/jobs/{id}/resume",
    "Continues a suspended job (SIGCONT; administrators).",
    true,
    |w, now, id| w.pause(now, id, false)
);
job_action!(
    requeue_job,
    "/api/v1/jobs/{id}/requeue",
    "Puts a job back in the queue.",
    |w, now, id| w.requeue(now, id)
);

/// Why a job has not started yet.
#[utoipa::path(get, path = "/api/v1/jobs/{id}/explain", params(("id" = String, Path, description = "Job id, or ARRAY_TASK")),
    responses((status = 200, body = Explanation)))]
pub(super) async fn explain_job(
    State(s): State<AppState>,
    caller: Caller,
    JobPath(r): JobPath,
) -> Result<Json<Explanation>, Refusal> {
    let id = s.job_id(&caller.0, r)?;
    s.explain(&caller.0, id).map(Json)
}

/// When could such a job start? Nothing is submitted.
#[utoipa::path(post, path = "/api/v1/estimate", request_body = EstimateRequest,
    responses((status = 200, body = Estimate)))]
pub(super) async fn estimate(
    State(s): State<AppState>,
    _caller: Caller,
    Body(req): Body<EstimateRequest>,
) -> Result<Json<Estimate>, Refusal> {
    let mut est = s.estimate(&req).await?;
    s.add_resource_manager_estimates(&req, &mut est).await;
    Ok(Json(est))
}
