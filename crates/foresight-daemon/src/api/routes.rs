//! The route table, the router built from it, and the OpenAPI document that describes the
//! same routes (with `/healthz`, `/metrics` and the document itself).

use crate::api::extract::method_not_allowed;
// The handlers are named unqualified: utoipa tags an operation with the module path it is
// named by in `paths(...)`, and these operations have no tag.
use crate::api::clusters::*;
use crate::api::jobs::*;
use crate::api::reservations::*;
use crate::api::users::*;
use crate::api::workflows::*;
use crate::api::{metrics, sites, user_admin, AppState, Caller};
use crate::runtime::Service;
use crate::state::refusal::Refusal;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, post, MethodRouter};
use axum::{Json, Router};
use foresight_api::*;
use std::sync::Arc;
use utoipa::OpenApi;

/// The API's routes under [`API_PREFIX`], each path as the OpenAPI document spells it. The
/// router is built from this list, and [`route_paths`] gives it to the test that checks
/// every route against the document.
fn api_routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    vec![
        ("/jobs", post(submit_job).get(list_jobs)),
        ("/jobs/batch", post(submit_batch)),
        ("/jobs/{id}", get(show_job)),
        ("/jobs/{id}/cancel", post(cancel_job)),
        ("/jobs/{id}/hold", post(hold_job)),
        ("/jobs/{id}/release", post(release_job)),
        ("/jobs/{id}/suspend", post(suspend_job)),
        ("/jobs/{id}/resume", post(resume_job)),
        ("/jobs/{id}/requeue", post(requeue_job)),
        ("/jobs/{id}/explain", get(explain_job)),
        ("/jobs/{id}/output", get(crate::api::output::job_output)),
        ("/workflows", post(submit_workflow).get(list_workflows)),
        ("/workflows/{id}", get(show_workflow)),
        ("/workflows/{id}/cancel", post(cancel_workflow)),
        ("/estimate", post(estimate)),
        (
            "/reservations",
            post(create_reservation).get(list_reservations),
        ),
        ("/reservations/{id}", get(show_reservation)),
        ("/reservations/{id}/commit", post(commit_reservation)),
        ("/reservations/{id}/release", post(release_reservation)),
        ("/clusters", get(list_clusters)),
        ("/sites", get(sites::list_sites)),
        ("/auctions", get(sites::list_auctions)),
        ("/plan", get(show_plan)),
        ("/users", get(list_users).post(create_user)),
        ("/users/{name}/budget", post(change_budget)),
        ("/users/{name}/unix-user", post(change_unix_user)),
        (
            "/users/{name}/credentials",
            post(user_admin::change_credentials),
        ),
        ("/users/{name}/token", post(user_admin::rotate_token)),
        ("/users/{name}/state", post(user_admin::change_state)),
        (
            "/users/{name}",
            axum::routing::delete(user_admin::remove_user),
        ),
        ("/whoami", get(whoami)),
        ("/openapi.json", get(openapi)),
    ]
}

/// The routes outside [`API_PREFIX`], the dashboard's included.
fn top_routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    let mut r = vec![("/healthz", get(healthz)), ("/metrics", get(metrics))];
    r.extend(crate::api::dashboard::routes());
    r
}

/// Every path the router serves, in full (`/api/v1/jobs/{id}`), with `true` for those the
/// OpenAPI document describes (all but the dashboard's page, script and style).
pub fn route_paths() -> Vec<(String, bool)> {
    let pages = crate::api::dashboard::page_paths();
    api_routes()
        .into_iter()
        .map(|(p, _)| format!("{API_PREFIX}{p}"))
        .chain(top_routes().into_iter().map(|(p, _)| p.to_string()))
        .map(|p| {
            let documented = !pages.contains(&p.as_str());
            (p, documented)
        })
        // The sites' routes are a protocol between services, not the users' API.
        .chain(
            crate::api::grid::routes()
                .into_iter()
                .chain(crate::api::peer_files::routes())
                .map(|(p, _)| (p.to_string(), false)),
        )
        .collect()
}

/// The router.
pub fn router(service: Arc<Service>) -> Router {
    let mut api = Router::new();
    for (path, methods) in api_routes() {
        api = api.route(path, methods);
    }
    let mut top = Router::new().nest(
        API_PREFIX,
        api.method_not_allowed_fallback(method_not_allowed),
    );
    let between_services = crate::api::grid::routes()
        .into_iter()
        .chain(crate::api::peer_files::routes());
    for (path, methods) in top_routes().into_iter().chain(between_services) {
        top = top.route(path, methods);
    }
    top.method_not_allowed_fallback(method_not_allowed)
        .fallback(|| async { Refusal::not_found("no such endpoint") })
        .layer(axum::middleware::map_response(
            crate::api::head_errors::fill_empty_error,
        ))
        .with_state(service)
}

#[derive(OpenApi)]
#[openapi(
    info(title = "Foresight", description = "Lookahead metascheduler for grids of HPC clusters"),
    paths(
        submit_job, submit_batch, list_jobs, show_job, cancel_job, hold_job, release_job,
        suspend_job, resume_job, requeue_job, explain_job, estimate, create_reservation,
        list_reservations, show_reservation, commit_reservation, release_reservation,
        list_clusters, show_plan, list_users, create_user, change_budget, change_unix_user, whoami,
        healthz, metrics, openapi, crate::api::output::job_output, user_admin::change_credentials,
        user_admin::rotate_token, user_admin::change_state, user_admin::remove_user,
        submit_workflow, list_workflows, show_workflow, cancel_workflow,
        crate::api::dashboard::grid::show_grid, sites::list_sites, sites::list_auctions
    ),
    components(schemas(
        SubmitJob, SubmitBatch, Submitted, SubmittedBatch, JobView, JobState, PartView,
        Explanation, foresight_api::Reason, EstimateRequest, Estimate, ClusterEstimate,
        CreateReservation, ReservationView, ReservationState, AclSpec, ClusterInfo, ClusterPlan,
        SlotView,
        UserView, CreateUser, CreatedUser, BudgetChange, UnixUserChange, foresight_api::ApiError,
        UserCredentials, CredentialsChange, UserStateChange,
        Walltime, WorkflowSpec, WorkflowTaskSpec, EdgeSpec, FailurePolicy, MapperName,
        SubmittedWorkflow, WorkflowView, WorkflowTaskView, WorkflowState,
        foresight_api::PredictionView, foresight_api::InputSpec, foresight_api::InputView,
        foresight_api::StagingView, foresight_api::OutputSpec,
        crate::api::dashboard::grid::GridView, crate::api::dashboard::grid::QueueCounts,
        crate::api::dashboard::grid::ClusterLoad, SiteView, SiteState, AuctionView, AuctionStage
    )),
    modifiers(&BearerAuth, &CommonResponses),
    security(("bearer" = []))
)]
struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The refusals every route of a kind can answer, added to each operation that does not
/// list them itself, so that the document describes every status a route answers: 401 and
/// 403 on authenticated routes, 400 where there is a parameter or a body, 404 with a path
/// parameter, 408, 413 and 415 with a body, 409 on changes, 500 everywhere.
struct CommonResponses;

impl utoipa::Modify for CommonResponses {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
        let refusal = |what: &str| {
            ResponseBuilder::new()
                .description(what)
                .content(
                    "application/json",
                    ContentBuilder::new()
                        .schema(Some(Ref::from_schema_name("ApiError")))
                        .build(),
                )
                .build()
        };
        for (path, item) in openapi.paths.paths.iter_mut() {
            let api = path.starts_with(API_PREFIX);
            let in_path = path.contains('{');
            let ops = [
                (&mut item.get, false),
                (&mut item.post, true),
                (&mut item.put, true),
                (&mut item.patch, true),
                (&mut item.delete, true),
            ];
            for (op, changes) in ops {
                let Some(op) = op.as_mut() else { continue };
                // `security(())`: answered without a token, so never 401 or 403.
                let public = op
                    .security
                    .as_ref()
                    .is_some_and(|s| serde_json::to_value(s).ok() == Some(serde_json::json!([{}])));
                let body = op.request_body.is_some();
                let params = op.parameters.as_ref().is_some_and(|p| !p.is_empty());
                let mut add = |status: &str, what: &str, when: bool| {
                    if when {
                        op.responses
                            .responses
                            .entry(status.to_string())
                            .or_insert_with(|| refusal(what).into());
                    }
                };
                add(
                    "400",
                    "Invalid request: the field at fault is named",
                    api && (body || params),
                );
                add("401", "Missing, malformed or unknown token", api && !public);
                add("403", "The caller may not do this", api && !public);
                add("404", "No such object", api && in_path);
                add("408", "The body did not arrive in time", api && body);
                add("409", "Conflicts with the object's state", api && changes);
                add("413", "Body over the size limit", api && body);
                add("415", "Body not application/json", api && body);
                add("500", "Internal error", api);
            }
        }
    }
}

/// The OpenAPI document of this API.
pub fn openapi_document() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// This document (OpenAPI 3.1), without authentication.
#[utoipa::path(get, path = "/api/v1/openapi.json", security(()),
    responses((status = 200, description = "The OpenAPI document of this API",
               content_type = "application/json")))]
async fn openapi() -> impl IntoResponse {
    Json(openapi_document())
}

/// Liveness, without authentication.
#[utoipa::path(get, path = "/healthz", security(()), responses((status = 200, description = "ok")))]
async fn healthz() -> &'static str {
    "ok\n"
}

/// Prometheus metrics (administrators: a scrape config sends the admin token as its
/// `bearer_token`). They count every user's jobs, so they are not public.
#[utoipa::path(get, path = "/metrics", responses(
    (status = 200, description = "The metrics in the OpenMetrics text format",
     content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8", body = String),
    (status = 401, description = "Missing, malformed or unknown token", body = foresight_api::ApiError),
    (status = 403, description = "The caller is not an administrator", body = foresight_api::ApiError),
    (status = 500, description = "Internal error", body = foresight_api::ApiError)))]
async fn metrics(State(s): State<AppState>, caller: Caller) -> Result<impl IntoResponse, Refusal> {
    caller.admin()?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics::render(&s, metrics::grid(&s).await.as_ref()),
    ))
}
