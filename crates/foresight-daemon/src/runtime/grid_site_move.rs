//! The site's side of work conservation: the centre moves a reserved grid part earlier
//! when processors free up (and back, when another of the job's clusters refused), and the
//! site moves its reservation and the part bound to it.

use super::{check_lent, ours, Lending};
use crate::state::refusal::Refusal;
use crate::state::world::{SavedWindow, World};
use foresight_core::time::Time;
use foresight_core::ReservationId;
use foresight_rm::ReserveRequest;

/// What a move did to the site's records.
#[derive(Debug)]
pub(crate) struct Moved {
    /// The site's reservation.
    pub id: ReservationId,
    /// What to put back should the cluster's Slurm refuse; `None` when the records were
    /// already where asked (a repeated command).
    pub back: Option<SavedWindow>,
}

/// Moves the reservation made here for the centre's `to.id` to `to`'s window, from `now`
/// when that has begun (as long as asked), in either direction: earlier as processors free
/// up, or back where it was when another cluster of a co-allocated job refused its move.
/// Carried out once however often asked: a reservation already there, or moved by an
/// earlier run of the same command to between `to`'s start and now, stays. Refused,
/// changing nothing, when it is gone, its part has started, or the processors or what the
/// site lends do not allow the new window.
pub(super) fn move_to(
    w: &mut World,
    now: Time,
    lending: &Lending,
    to: &ReserveRequest,
) -> Result<Moved, Refusal> {
    let id = ours(w, &lending.owner, to.id)
        .ok_or_else(|| Refusal::not_found(format!("no reservation {} of the grid here", to.id)))?;
    let r = &w.reservations[&id];
    if !r.state.is_live() {
        return Err(Refusal::conflict(format!(
            "reservation {} of the grid is {} here",
            to.id,
            r.state.as_str()
        )));
    }
    let len = to.end - to.start;
    let there = r.end - r.start == len
        && (r.start == to.start || (to.start..=now.secs()).contains(&r.start));
    if there {
        return Ok(Moved { id, back: None });
    }
    if let Some(j) = w
        .jobs
        .values()
        .find(|j| j.reservation == Some(id.0) && j.started_at.is_some())
    {
        return Err(Refusal::conflict(format!(
            "reservation {} of the grid cannot move: its part {} has started here",
            to.id,
            j.name.as_deref().unwrap_or("?")
        )));
    }
    let start = to.start.max(now.secs());
    let window = ReserveRequest {
        id: id.0,
        start,
        end: start + len,
        procs: r.procs,
    };
    check_lent(w, lending, &window, Some(id))?;
    let back = w.move_reservation(now, id, window.start, window.end)?;
    Ok(Moved {
        id,
        back: Some(back),
    })
}
