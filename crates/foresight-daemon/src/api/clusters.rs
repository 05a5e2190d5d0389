//! Handlers of the clusters and of their plan.

use crate::api::{AppState, Caller, Params};
use crate::state::refusal::Refusal;
use axum::extract::State;
use axum::Json;
use foresight_api::*;
use serde::Deserialize;

/// The clusters.
#[utoipa::path(get, path = "/api/v1/clusters", responses((status = 200, body = [ClusterInfo])))]
pub(super) async fn list_clusters(
    State(s): State<AppState>,
    _caller: Caller,
) -> Json<Vec<ClusterInfo>> {
    Json(s.clusters())
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct PlanWindow {
    /// One cluster only.
    cluster: Option<String>,
    /// Window start (default now).
    from: Option<i64>,
    /// Window end (default an hour after `from`).
    to: Option<i64>,
}

/// The plan: slots per processor over a window.
#[utoipa::path(get, path = "/api/v1/plan", params(PlanWindow), responses((status = 200, body = [ClusterPlan])))]
pub(super) async fn show_plan(
    State(s): State<AppState>,
    caller: Caller,
    Params(q): Params<PlanWindow>,
) -> Result<Json<Vec<ClusterPlan>>, Refusal> {
    s.plan(q.cluster.as_deref(), q.from, q.to, &caller.0)
        .await
        .map(Json)
}
