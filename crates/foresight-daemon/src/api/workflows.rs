//! Handlers of workflows: submission, listing, showing and cancelling.

use crate::api::{AppState, Body, Caller, Id};
use crate::state::refusal::Refusal;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use foresight_api::*;

/// Submits a workflow: its tasks are mapped onto the grid's current plan and become jobs
/// that run in dependency order; all are accepted or none (400 naming the task, the edge or
/// the field at fault: a cycle, an unknown task, a duplicate name, a task no cluster can
/// host).
#[utoipa::path(post, path = "/api/v1/workflows", request_body = WorkflowSpec,
    responses((status = 201, body = SubmittedWorkflow), (status = 400, body = foresight_api::ApiError)))]
pub(super) async fn submit_workflow(
    State(s): State<AppState>,
    caller: Caller,
    Body(spec): Body<WorkflowSpec>,
) -> Result<(StatusCode, Json<SubmittedWorkflow>), Refusal> {
    crate::state::world::accounts::check_runs_as(&s.world(), &caller.0.name)?;
    let done = s.submit_workflow(&caller.0, spec, None).await?;
    Ok((StatusCode::CREATED, Json(done)))
}

/// Lists workflows: the caller's own, or everyone's for administrators.
#[utoipa::path(get, path = "/api/v1/workflows", responses((status = 200, body = [WorkflowView])))]
pub(super) async fn list_workflows(
    State(s): State<AppState>,
    caller: Caller,
) -> Json<Vec<WorkflowView>> {
    Json(s.workflows(&caller.0))
}

/// One workflow, with each task's planned and actual start.
#[utoipa::path(get, path = "/api/v1/workflows/{id}", params(("id" = u64, Path, description = "Workflow id")),
    responses((status = 200, body = WorkflowView), (status = 404, body = foresight_api::ApiError)))]
pub(super) async fn show_workflow(
    State(s): State<AppState>,
    caller: Caller,
    Id(id): Id,
) -> Result<Json<WorkflowView>, Refusal> {
    s.workflow(&caller.0, id).map(Json)
}

/// Cancels every task of a workflow that has not ended.
#[utoipa::path(post, path = "/api/v1/workflows/{id}/cancel", params(("id" = u64, Path, description = "Workflow id")),
    responses((status = 200, body = WorkflowView), (status = 404, body = foresight_api::ApiError),
              (status = 409, body = foresight_api::ApiError)))]
pub(super) async fn cancel_workflow(
    State(s): State<AppState>,
    caller: Caller,
    Id(id): Id,
) -> Result<Json<WorkflowView>, Refusal> {
    s.cancel_workflow(&caller.0, id).await.map(Json)
}
