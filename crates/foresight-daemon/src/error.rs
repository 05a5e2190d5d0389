//! Errors as the API reports them: an HTTP status and a JSON body naming the field at fault.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// A refused or failed request.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// The body.
    pub body: foresight_api::ApiError,
}

impl ApiError {
    fn new(status: StatusCode, code: &str, field: Option<&str>, message: String) -> ApiError {
        ApiError {
            status,
            body: foresight_api::ApiError {
                code: code.into(),
                field: field.map(str::to_string),
                message,
            },
        }
    }

    /// 400: a field is invalid.
    pub fn bad(field: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            Some(field),
            message.into(),
        )
    }

    /// 401: no or unknown token.
    pub fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            None,
            message.into(),
        )
    }

    /// 403: known user, not allowed.
    pub fn forbidden(field: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            Some(field),
            message.into(),
        )
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", None, message.into())
    }

    /// 409: the state forbids it.
    pub fn conflict(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, "conflict", None, message.into())
    }

    /// 402: over budget.
    pub fn budget(message: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::PAYMENT_REQUIRED,
            "budget_exceeded",
            Some("price"),
            message.into(),
        )
    }

    /// 500.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            None,
            message.into(),
        )
    }

    /// The same error about an element of a batch.
    pub fn at(mut self, index: usize) -> ApiError {
        self.body.field = Some(match self.body.field {
            Some(f) => format!("jobs[{index}].{f}"),
            None => format!("jobs[{index}]"),
        });
        self
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body)).into_response()
    }
}
