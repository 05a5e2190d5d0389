//! Errors as the API reports them: an HTTP status and a JSON body naming the field at fault.
//! `api/mod.rs` makes them from the domain's [`crate::Refusal`].

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// A refused or failed request, as answered.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// The body.
    pub body: foresight_api::ApiError,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body)).into_response()
    }
}
