//! The request extractors every handler takes (the caller, a JSON body, query parameters, the
//! ids and names in paths), each refusing what it cannot read as JSON naming the field at
//! fault, and the answer a domain refusal is given.

use crate::api::ApiError;
use crate::api::AppState;
use crate::state::refusal::Refusal;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use foresight_api::JobRef;
use foresight_store::UserRecord;
use serde::de::DeserializeOwned;

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
            return match parts.extensions.get::<crate::api::acceptor::LocalPeer>() {
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
pub(super) async fn method_not_allowed(method: axum::http::Method) -> ApiError {
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
