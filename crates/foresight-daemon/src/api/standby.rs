//! What a standby answers while another service is active: 503 `not_active` to every
//! request, so that a site or a client with a list of addresses goes on to the next one.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Router;

/// Answers every request 503, saying the service stands by.
pub(crate) fn router() -> Router {
    Router::new().fallback(not_active)
}

async fn not_active() -> Response {
    let body = foresight_api::ApiError {
        code: "not_active".into(),
        field: None,
        message: "this service stands by for the active one, and takes over when it stops: \
                  try the next server address"
            .into(),
    };
    (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response()
}
