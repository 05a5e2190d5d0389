//! Administrators' changes to users beyond creating them: credentials, token rotation,
//! disabling and removal. Each takes effect for authentication before the answer is sent.

use crate::api::{Body, Caller, UserName};
use crate::runtime::users::{new_token, token_hash};
use crate::runtime::Service;
use crate::state::refusal::Refusal;
use axum::extract::State;
use axum::Json;
use foresight_api::{CreatedUser, CredentialsChange, UserStateChange, UserView};
use std::sync::Arc;

type AppState = Arc<Service>;

/// Sets the groups, accounts, classes and QoS a user may name in a job (administrators):
/// each list given replaces theirs; the first of each is their default.
#[utoipa::path(post, path = "/api/v1/users/{name}/credentials", request_body = CredentialsChange,
    params(("name" = String, Path, description = "User name")),
    responses((status = 200, body = UserView), (status = 404, body = foresight_api::ApiError)))]
pub async fn change_credentials(
    State(s): State<AppState>,
    caller: Caller,
    UserName(name): UserName,
    Body(change): Body<CredentialsChange>,
) -> Result<Json<UserView>, Refusal> {
    caller.admin()?;
    let (_, view) = s
        .change_user(&name, |w, now| {
            w.change_credentials(now, &name, change).map(|_| ())
        })
        .await?;
    Ok(Json(view))
}

/// Gives a user a new token and returns it, once (administrators). The old token is
/// refused from the moment this answers.
#[utoipa::path(post, path = "/api/v1/users/{name}/token",
    params(("name" = String, Path, description = "User name")),
    responses((status = 200, body = CreatedUser), (status = 404, body = foresight_api::ApiError)))]
pub async fn rotate_token(
    State(s): State<AppState>,
    caller: Caller,
    UserName(name): UserName,
) -> Result<Json<CreatedUser>, Refusal> {
    caller.admin()?;
    let token = new_token();
    let hash = token_hash(&token);
    let (_, user) = s
        .change_user(&name, |w, _| w.set_token_hash(&name, hash).map(|_| ()))
        .await?;
    Ok(Json(CreatedUser { user, token }))
}

/// Disables a user (their token is refused at once, their jobs that have not started are
/// cancelled, running ones finish) or enables them again (administrators).
#[utoipa::path(post, path = "/api/v1/users/{name}/state", request_body = UserStateChange,
    params(("name" = String, Path, description = "User name")),
    responses((status = 200, body = UserView), (status = 404, body = foresight_api::ApiError),
              (status = 409, body = foresight_api::ApiError)))]
pub async fn change_state(
    State(s): State<AppState>,
    caller: Caller,
    UserName(name): UserName,
    Body(change): Body<UserStateChange>,
) -> Result<Json<UserView>, Refusal> {
    caller.admin()?;
    let (_, view) = s
        .change_user(&name, |w, now| {
            w.set_disabled(now, &name, change.disabled).map(|_| ())
        })
        .await?;
    Ok(Json(view))
}

/// Removes a user (administrators): disabled for good, their token gone, their jobs that
/// have not started cancelled; their jobs' history stays, and the name is never given to
/// anyone else.
#[utoipa::path(delete, path = "/api/v1/users/{name}",
    params(("name" = String, Path, description = "User name")),
    responses((status = 200, body = UserView), (status = 404, body = foresight_api::ApiError),
              (status = 409, body = foresight_api::ApiError)))]
pub async fn remove_user(
    State(s): State<AppState>,
    caller: Caller,
    UserName(name): UserName,
) -> Result<Json<UserView>, Refusal> {
    caller.admin()?;
    let (_, view) = s
        .change_user(&name, |w, now| w.remove_user(now, &name))
        .await?;
    Ok(Json(view))
}
