//! Handlers of users: listing, creating, budgets, the Unix account their local jobs run as,
//! and the caller. The rest of the administrators' changes are in `user_admin.rs`.

use crate::api::{AppState, Body, Caller, UserName};
use crate::runtime::users::{new_token, token_hash};
use crate::runtime::views::user_view;
use crate::state::refusal::Refusal;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use foresight_api::*;
use foresight_store::UserRecord;

/// Users and budgets (administrators).
#[utoipa::path(get, path = "/api/v1/users", responses((status = 200, body = [UserView])))]
pub(super) async fn list_users(
    State(s): State<AppState>,
    caller: Caller,
) -> Result<Json<Vec<UserView>>, Refusal> {
    caller.admin()?;
    Ok(Json(s.users()))
}

/// Creates a user and returns their token, once (administrators).
#[utoipa::path(post, path = "/api/v1/users", request_body = CreateUser,
    responses((status = 201, body = CreatedUser), (status = 409, body = foresight_api::ApiError)))]
pub(super) async fn create_user(
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
pub(super) async fn change_budget(
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
pub(super) async fn change_unix_user(
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
pub(super) async fn whoami(State(s): State<AppState>, caller: Caller) -> Json<UserView> {
    Json(user_view(&s.world(), &caller.0))
}
