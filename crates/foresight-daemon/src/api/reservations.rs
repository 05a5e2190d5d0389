//! Handlers of advance reservations: making, listing, showing, committing and releasing.

use crate::api::{AppState, Body, Caller, Id};
use crate::state::refusal::Refusal;
use crate::state::stored::{ToApi, ToStored};
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use foresight_api::*;
use foresight_core::{JobId, ReservationId};

/// Makes an advance reservation (administrators).
#[utoipa::path(post, path = "/api/v1/reservations", request_body = CreateReservation,
    responses((status = 201, body = ReservationView), (status = 409, body = foresight_api::ApiError)))]
pub(super) async fn create_reservation(
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
            let id = w.create_reservation(
                now,
                &owner,
                &r.cluster,
                held,
                start,
                end,
                r.acl.to_stored(),
                r.ttl,
            )?;
            Ok(w.reservations[&id].to_api())
        })
        .await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// Reservations the caller may see.
#[utoipa::path(get, path = "/api/v1/reservations", responses((status = 200, body = [ReservationView])))]
pub(super) async fn list_reservations(
    State(s): State<AppState>,
    caller: Caller,
) -> Json<Vec<ReservationView>> {
    Json(s.reservations(&caller.0))
}

/// One reservation.
#[utoipa::path(get, path = "/api/v1/reservations/{id}", params(("id" = u64, Path, description = "Reservation id")),
    responses((status = 200, body = ReservationView), (status = 404, body = foresight_api::ApiError)))]
pub(super) async fn show_reservation(
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
pub(super) async fn commit_reservation(
    State(s): State<AppState>,
    caller: Caller,
    Id(id): Id,
) -> Result<Json<ReservationView>, Refusal> {
    caller.admin()?;
    s.mutate(move |w, _| {
        let id = ReservationId(id);
        w.commit_reservation(id)?;
        Ok(w.reservations[&id].to_api())
    })
    .await
    .map(Json)
}

/// Releases a reservation (administrators).
#[utoipa::path(post, path = "/api/v1/reservations/{id}/release", params(("id" = u64, Path, description = "Reservation id")),
    responses((status = 200, body = ReservationView)))]
pub(super) async fn release_reservation(
    State(s): State<AppState>,
    caller: Caller,
    Id(id): Id,
) -> Result<Json<ReservationView>, Refusal> {
    caller.admin()?;
    s.mutate(move |w, now| {
        let id = ReservationId(id);
        w.release_reservation(now, id)?;
        Ok(w.reservations[&id].to_api())
    })
    .await
    .map(Json)
}
