//! The REST API (`/api/v1`), `/healthz`, `/metrics` and the OpenAPI document.
//!
//! One concern a file: the extractors (`extract.rs`), the route table, router and OpenAPI
//! document (`routes.rs`), and the handlers by noun (`jobs.rs`, `workflows.rs`,
//! `reservations.rs`, `clusters.rs`, `users.rs` and `user_admin.rs`, `sites.rs`,
//! `output.rs`).

pub(crate) mod acceptor;
mod clusters;
mod dashboard;
pub(crate) mod error;
mod extract;
mod grid;
mod head_errors;
mod jobs;
pub mod local_socket;
mod metrics;
mod output;
mod peer_files;
#[cfg(test)]
mod plan_tests;
mod reservations;
mod routes;
mod sites;
#[cfg(test)]
mod sites_tests;
pub(crate) mod standby;
mod user_admin;
mod users;
pub mod wiki_server;
mod workflows;

pub use crate::api::head_errors::{MAX_HEADERS, MAX_HEAD_BYTES, MAX_URI_BYTES};
use crate::runtime::Service;
pub use error::ApiError;
pub use extract::{Body, Caller, Id, JobPath, Params, UserName};
pub use routes::{openapi_document, route_paths, router};
use std::sync::Arc;

/// The state every handler is given: the service.
type AppState = Arc<Service>;
