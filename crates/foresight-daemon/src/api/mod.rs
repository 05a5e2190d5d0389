//! The REST API (`/api/v1`), `/healthz`, `/metrics` and the OpenAPI document.

pub(crate) mod acceptor;
mod dashboard;
pub(crate) mod error;
mod head_errors;
pub mod local_socket;
mod metrics;
mod output;
#[cfg(test)]
mod plan_tests;
mod sites;
#[cfg(test)]
mod sites_tests;
mod user_admin;
pub mod wiki_server;

pub use crate::api::head_errors::{MAX_HEADERS, MAX_HEAD_BYTES, MAX_URI_BYTES};
use crate::runtime::users::{new_token, token_hash};
use crate::runtime::views::{reservation_view, user_view};
use crate::runtime::Service;
use crate::state::refusal::Refusal;
use axum::extract::{FromRequest, FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post, MethodRouter};
use axum::{Json, Router};
pub use error::ApiError;
use foresight_api::*;
use foresight_core::{JobId, ReservationId};
use foresight_store::UserRecord;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::sync::Arc;
use utoipa::OpenApi;

type AppState = Arc<Service>;

/// The authenticated caller.
pub struct Caller(pub UserRecord);

impl FromRequestParts<AppState> for Caller {
    type Rejection = Refusal;

    /// A token, when one is given, is checked whatever the transport (on the local socket
    /// too: nobody becomes another user by presenting a token that is not theirs). Without
    /// one, a caller on the local socket is the user of their Unix account; anywhere else,
    /// refused.
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Refusal> {
        let Some(value) = parts.headers.get(header::AUTHORIZATION) else {
            return match parts.extensions.get::<acceptor::LocalPeer>() {
                Some(peer) => state.authenticate_local(peer.uid).await.map(Caller),
                None => Err(Refusal::unauthenticated(
                    "missing 'Authorization: Bearer <token>'",
                )),
            };
        };
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| Refusal::unauthenticated("Authorization must be 'Bearer <token>'"))?;
        state.authenticate_shared(token.trim()).await.map(Caller)
    }
}

impl Caller {
    pub(crate) fn admin(&self) -> Result<(), Refusal> {
        if self.0.admin {
            Ok(())
        } else {
            Err(Refusal::forbidden(
                "user",
                format!("{} is not an administrator", self.0.name),
            ))
        }
    }
}

/// An answer made here, before any domain code ran (a request that could not be read).
fn unreadable(status: StatusCode, code: &str, field: &str, message: String) -> ApiError {
    ApiError {
        status,
        body: foresight_api::ApiError {
            code: code.into(),
            field: Some(field.into()),
            message,
        },
    }
}

/// Where a deserialization error points: the path to the value at fault (an unknown field's
/// own name included), or `whole` when it has no path.
fn field_of<E: std::fmt::Display>(e: &serde_path_to_error::Error<E>, whole: &str) -> String {
    let path = e.path().to_string();
    let path = if path == "." { String::new() } else { path };
    let inner = e.inner().to_string();
    let unknown = inner
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split('`').next());
    match (unknown, path.is_empty()) {
        (Some(name), true) => name.to_string(),
        (Some(name), false) if !path.ends_with(name) => format!("{path}.{name}"),
        (None, true) => whole.to_string(),
        (_, false) => path,
    }
}

/// A JSON body whose errors are JSON too, naming the field at fault: 400 for a value of the
/// wrong type or an unknown field, 413 for a body over the limit, 415 for another media type,
/// 408 for a body that did not arrive in time.
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json") || v.contains("+json"));
        if !json {
            return Err(unreadable(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "body",
                "expected a request with 'Content-Type: application/json'".into(),
            ));
        }
        // A body trickled in byte by byte must not hold the connection (slowloris): it has
        // until the deadline the accept loop set when its head arrived.
        let deadline = req
            .extensions()
            .get::<crate::api::acceptor::BodyDeadline>()
            .copied();
        let read = axum::body::Bytes::from_request(req, state);
        let read = match deadline {
            Some(d) => tokio::time::timeout_at(d.0, read).await.map_err(|_| {
                unreadable(
                    StatusCode::REQUEST_TIMEOUT,
                    "request_timeout",
                    "body",
                    "the request body did not arrive in time ([http] body_timeout_ms)".into(),
                )
            })?,
            None => read.await,
        };
        let bytes = read.map_err(|e| {
            let status = e.status();
            let code = if status == StatusCode::PAYLOAD_TOO_LARGE {
                "payload_too_large"
            } else {
                "bad_request"
            };
            unreadable(status, code, "body", e.body_text())
        })?;
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let field = if e.inner().is_data() {
                field_of(&e, "body")
            } else {
                "body".to_string()
            };
            unreadable(
                StatusCode::BAD_REQUEST,
                "bad_request",
                &field,
                format!("{field}: {}", e.inner()),
            )
        })?;
        de.end().map_err(|e| {
            unreadable(
                StatusCode::BAD_REQUEST,
                "bad_request",
                "body",
                format!("body: {e}"),
            )
        })?;
        Ok(Body(value))
    }
}

/// Query parameters whose errors are JSON, naming the parameter at fault.
pub struct Params<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(de)
            .map(Params)
            .map_err(|e| {
                let field = field_of(&e, "query");
                unreadable(
                    StatusCode::BAD_REQUEST,
                    "bad_request",
                    &field,
                    format!("{field}: {}", e.inner()),
                )
            })
    }
}

/// A numeric id in the path (`/jobs/{id}`), refused as JSON naming `id` when it is not one.
pub struct Id(pub u64);

impl<S: Send + Sync> FromRequestParts<S> for Id {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| unreadable(e.status(), "bad_request", "id", e.body_text()))?;
        raw.parse().map(Id).map_err(|_| {
            unreadable(
                StatusCode::BAD_REQUEST,
                "bad_request",
                "id",
                format!("id: {raw:?} is not a number from 0 to {}", u64::MAX),
            )
        })
    }
}

/// A user's name in the path (`/users/{name}`), refused as JSON naming `name` when it cannot
/// be read (percent-encoded bytes that are not UTF-8).
pub struct UserName(pub String);

impl<S: Send + Sync> FromRequestParts<S> for UserName {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(name)| UserName(name))
            .map_err(|e| unreadable(e.status(), "bad_request", "name", e.body_text()))
    }
}

/// A job in the path (`/jobs/{id}`): `ID`, or `ARRAY_TASK` for a task of an array job;
/// refused as JSON naming `id` when it is neither.
pub struct JobPath(pub JobRef);

impl<S: Send + Sync> FromRequestParts<S> for JobPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| unreadable(e.status(), "bad_request", "id", e.body_text()))?;
        raw.parse().map(JobPath).map_err(|e: String| {
            unreadable(
                StatusCode::BAD_REQUEST,
                "bad_request",
                "id",
                format!("id: {e}"),
            )
        })
    }
}

/// 405 as JSON, naming the method.
async fn method_not_allowed(method: axum::http::Method) -> ApiError {
    unreadable(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "method",
        format!("{method} is not allowed on this path"),
    )
}

/// The status and JSON body a refusal is answered with.
impl From<Refusal> for ApiError {
    fn from(r: Refusal) -> ApiError {
        let (status, code) = match &r {
            Refusal::Invalid { .. } => (StatusCode::BAD_REQUEST, "bad_request"),
            Refusal::Unauthenticated(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            Refusal::Forbidden { .. } => (StatusCode::FORBIDDEN, "forbidden"),
            Refusal::NotFound { .. } => (StatusCode::NOT_FOUND, "not_found"),
            Refusal::Conflict { .. } => (StatusCode::CONFLICT, "conflict"),
            Refusal::OverBudget { .. } => (StatusCode::PAYMENT_REQUIRED, "budget_exceeded"),
            Refusal::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        ApiError {
            status,
            body: foresight_api::ApiError {
                code: code.into(),
                field: r.field().map(str::to_string),
                message: r.reason().to_string(),
            },
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> axum::response::Response {
        ApiError::from(self).into_response()
    }
}

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
    for (path, methods) in top_routes() {
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
        crate::api::dashboard::grid::ClusterLoad, SiteView, AuctionView
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

/// Submits one job.
#[utoipa::path(post, path = "/api/v1/jobs", request_body = SubmitJob,
    responses((status = 201, body = Submitted), (status = 400, body = foresight_api::ApiError),
              (status = 402, body = foresight_api::ApiError),
              (status = 403, body = foresight_api::ApiError)))]
async fn submit_job(
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
async fn submit_batch(
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
struct JobFilter {
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
async fn list_jobs(
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
async fn show_job(
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
        async fn $name(
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

/// Submits a workflow: its tasks are mapped onto the grid's current plan and become jobs
/// that run in dependency order; all are accepted or none (400 naming the task, the edge or
/// the field at fault: a cycle, an unknown task, a duplicate name, a task no cluster can
/// host).
#[utoipa::path(post, path = "/api/v1/workflows", request_body = WorkflowSpec,
    responses((status = 201, body = SubmittedWorkflow), (status = 400, body = foresight_api::ApiError)))]
async fn submit_workflow(
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
async fn list_workflows(State(s): State<AppState>, caller: Caller) -> Json<Vec<WorkflowView>> {
    Json(s.workflows(&caller.0))
}

/// One workflow, with each task's planned and actual start.
#[utoipa::path(get, path = "/api/v1/workflows/{id}", params(("id" = u64, Path, description = "Workflow id")),
    responses((status = 200, body = WorkflowView), (status = 404, body = foresight_api::ApiError)))]
async fn show_workflow(
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
async fn cancel_workflow(
    State(s): State<AppState>,
    caller: Caller,
    Id(id): Id,
) -> Result<Json<WorkflowView>, Refusal> {
    s.cancel_workflow(&caller.0, id).await.map(Json)
}

/// Why a job has not started yet.
#[utoipa::path(get, path = "/api/v1/jobs/{id}/explain", params(("id" = String, Path, description = "Job id, or ARRAY_TASK")),
    responses((status = 200, body = Explanation)))]
async fn explain_job(
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
async fn estimate(
    State(s): State<AppState>,
    _caller: Caller,
    Body(req): Body<EstimateRequest>,
) -> Result<Json<Estimate>, Refusal> {
    let mut est = s.estimate(&req).await?;
    s.add_resource_manager_estimates(&req, &mut est).await;
    Ok(Json(est))
}

/// Makes an advance reservation (administrators).
#[utoipa::path(post, path = "/api/v1/reservations", request_body = CreateReservation,
    responses((status = 201, body = ReservationView), (status = 409, body = foresight_api::ApiError)))]
async fn create_reservation(
    State(s): State<AppState>,
    caller: Caller,
    Body(r): Body<CreateReservation>,
) -> Result<(StatusCode, Json<ReservationView>), Refusal> {
    caller.admin()?;
    let owner = caller.0.name.clone();
    let view = s
        .mutate(move |w, now| {
            let start = r.start.unwrap_or(now.secs());
            let end = match (r.end, &r.duration) {
                (Some(e), _) => e,
                (None, Some(d)) => {
                    crate::state::limits::instant("start", start)?;
                    let d = d.seconds().map_err(|m| Refusal::invalid("duration", m))?;
                    crate::state::limits::seconds("duration", d)?;
                    start + d
                }
                (None, None) => return Err(Refusal::invalid("end", "give end or duration")),
            };
            // A job ACL names a job that exists: compared with a job not yet submitted (id 0)
            // or not yet numbered, it would admit whoever submits next.
            if let Some(job) = r.acl.job {
                if !w.jobs.contains_key(&JobId(job)) {
                    return Err(Refusal::invalid(
                        "acl.job",
                        format!("no job {job}: a job ACL must name an existing job"),
                    ));
                }
            }
            let held = if r.processors.is_empty() {
                crate::state::world::Held::Count(r.procs)
            } else if r.procs != 0 && r.procs as usize != r.processors.len() {
                return Err(Refusal::invalid(
                    "procs",
                    format!(
                        "{} processors asked but {} listed in processors; give one or the other",
                        r.procs,
                        r.processors.len()
                    ),
                ));
            } else {
                crate::state::world::Held::These(r.processors)
            };
            let id =
                w.create_reservation(now, &owner, &r.cluster, held, start, end, r.acl, r.ttl)?;
            Ok(reservation_view(&w.reservations[&id]))
        })
        .await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// Reservations the caller may see.
#[utoipa::path(get, path = "/api/v1/reservations", responses((status = 200, body = [ReservationView])))]
async fn list_reservations(
    State(s): State<AppState>,
    caller: Caller,
) -> Json<Vec<ReservationView>> {
    Json(s.reservations(&caller.0))
}

/// One reservation.
#[utoipa::path(get, path = "/api/v1/reservations/{id}", params(("id" = u64, Path, description = "Reservation id")),
    responses((status = 200, body = ReservationView), (status = 404, body = foresight_api::ApiError)))]
async fn show_reservation(
    State(s): State<AppState>,
    caller: Caller,
    Id(id): Id,
) -> Result<Json<ReservationView>, Refusal> {
    s.reservations(&caller.0)
        .into_iter()
        .find(|r| r.id == id)
        .map(Json)
        .ok_or_else(|| Refusal::not_found_at("id", format!("no reservation {id}")))
}

/// Commits a tentative reservation (administrators).
#[utoipa::path(post, path = "/api/v1/reservations/{id}/commit", params(("id" = u64, Path, description = "Reservation id")),
    responses((status = 200, body = ReservationView)))]
async fn commit_reservation(
    State(s): State<AppState>,
    caller: Caller,
    Id(id): Id,
) -> Result<Json<ReservationView>, Refusal> {
    caller.admin()?;
    s.mutate(move |w, _| {
        let id = ReservationId(id);
        w.commit_reservation(id)?;
        Ok(reservation_view(&w.reservations[&id]))
    })
    .await
    .map(Json)
}

/// Releases a reservation (administrators).
#[utoipa::path(post, path = "/api/v1/reservations/{id}/release", params(("id" = u64, Path, description = "Reservation id")),
    responses((status = 200, body = ReservationView)))]
async fn release_reservation(
    State(s): State<AppState>,
    caller: Caller,
    Id(id): Id,
) -> Result<Json<ReservationView>, Refusal> {
    caller.admin()?;
    s.mutate(move |w, now| {
        let id = ReservationId(id);
        w.release_reservation(now, id)?;
        Ok(reservation_view(&w.reservations[&id]))
    })
    .await
    .map(Json)
}

/// The clusters.
#[utoipa::path(get, path = "/api/v1/clusters", responses((status = 200, body = [ClusterInfo])))]
async fn list_clusters(State(s): State<AppState>, _caller: Caller) -> Json<Vec<ClusterInfo>> {
    Json(s.clusters())
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct PlanWindow {
    /// One cluster only.
    cluster: Option<String>,
    /// Window start (default now).
    from: Option<i64>,
    /// Window end (default an hour after `from`).
    to: Option<i64>,
}

/// The plan: slots per processor over a window.
#[utoipa::path(get, path = "/api/v1/plan", params(PlanWindow), responses((status = 200, body = [ClusterPlan])))]
async fn show_plan(
    State(s): State<AppState>,
    caller: Caller,
    Params(q): Params<PlanWindow>,
) -> Result<Json<Vec<ClusterPlan>>, Refusal> {
    s.plan(q.cluster.as_deref(), q.from, q.to, &caller.0)
        .await
        .map(Json)
}

/// Users and budgets (administrators).
#[utoipa::path(get, path = "/api/v1/users", responses((status = 200, body = [UserView])))]
async fn list_users(
    State(s): State<AppState>,
    caller: Caller,
) -> Result<Json<Vec<UserView>>, Refusal> {
    caller.admin()?;
    Ok(Json(s.users()))
}

/// Creates a user and returns their token, once (administrators).
#[utoipa::path(post, path = "/api/v1/users", request_body = CreateUser,
    responses((status = 201, body = CreatedUser), (status = 409, body = foresight_api::ApiError)))]
async fn create_user(
    State(s): State<AppState>,
    caller: Caller,
    Body(u): Body<CreateUser>,
) -> Result<(StatusCode, Json<CreatedUser>), Refusal> {
    caller.admin()?;
    if let Some(b) = u.budget {
        if !b.is_finite() || b < 0.0 {
            return Err(Refusal::invalid(
                "budget",
                "must be a finite number >= 0, or absent for unlimited",
            ));
        }
    }
    let mut warnings = Vec::new();
    if let Some(a) = &u.unix_user {
        check_account_name(a)?;
        let local = crate::state::world::accounts::has_local_cluster(&s.world());
        warnings.extend(crate::state::world::accounts::check_mapped_account(
            local, a,
        )?);
    }
    let token = new_token();
    let rec = UserRecord {
        name: u.name,
        token_hash: token_hash(&token),
        admin: u.admin,
        budget: u.budget,
        spent: 0.0,
        unix_user: u.unix_user,
        ..Default::default()
    };
    s.add_user(rec.clone()).await?;
    Ok((
        StatusCode::CREATED,
        Json(CreatedUser {
            user: UserView {
                warnings,
                ..user_view(&s.world(), &rec)
            },
            token,
        }),
    ))
}

/// Sets or tops up a budget (administrators).
#[utoipa::path(post, path = "/api/v1/users/{name}/budget", request_body = BudgetChange,
    params(("name" = String, Path, description = "User name")),
    responses((status = 200, body = UserView)))]
async fn change_budget(
    State(s): State<AppState>,
    caller: Caller,
    UserName(name): UserName,
    Body(change): Body<BudgetChange>,
) -> Result<Json<UserView>, Refusal> {
    caller.admin()?;
    // Checked as in single mode; a peer dispatcher then changes the shared row.
    let (_, view) = s
        .change_user(&name, |w, _| {
            w.change_budget(&name, change.set, change.add).map(|_| ())
        })
        .await?;
    match s
        .change_shared_budget(&name, change.set, change.add)
        .await?
    {
        Some(v) => Ok(Json(v)),
        None => Ok(Json(view)),
    }
}

/// An account name as `useradd` would accept it, so that a mapping cannot smuggle anything
/// into a lookup.
fn check_account_name(a: &str) -> Result<(), Refusal> {
    let ok = !a.is_empty()
        && a.len() <= 32
        && a.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(Refusal::invalid(
            "unix_user",
            "must be a Unix account name: 1 to 32 letters, digits, '_', '-' or '.'",
        ))
    }
}

/// Sets (or, with null, clears) the Unix account a user's local jobs run as
/// (administrators).
#[utoipa::path(post, path = "/api/v1/users/{name}/unix-user", request_body = UnixUserChange,
    params(("name" = String, Path, description = "User name")),
    responses((status = 200, body = UserView)))]
async fn change_unix_user(
    State(s): State<AppState>,
    caller: Caller,
    UserName(name): UserName,
    Body(change): Body<UnixUserChange>,
) -> Result<Json<UserView>, Refusal> {
    caller.admin()?;
    let mut warnings = Vec::new();
    if let Some(a) = &change.unix_user {
        check_account_name(a)?;
        let local = crate::state::world::accounts::has_local_cluster(&s.world());
        warnings.extend(crate::state::world::accounts::check_mapped_account(
            local, a,
        )?);
    }
    s.mutate(move |w, _| {
        let u = w
            .users
            .get_mut(&name)
            .ok_or_else(|| Refusal::not_found_at("name", format!("no user {name:?}")))?;
        u.unix_user = change.unix_user;
        let u = u.clone();
        let view = UserView {
            warnings,
            ..user_view(w, &u)
        };
        Ok(view)
    })
    .await
    .map(Json)
}

/// The caller.
#[utoipa::path(get, path = "/api/v1/whoami", responses((status = 200, body = UserView)))]
async fn whoami(State(s): State<AppState>, caller: Caller) -> Json<UserView> {
    Json(user_view(&s.world(), &caller.0))
}
