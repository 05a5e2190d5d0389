//! The site's side of work conservation: the centre moves a reserved grid part earlier
//! when processors free up (and back, when another of the job's clusters refused), and the
//! site moves its reservation and the part bound to it; a reservation whose part has ended
//! is given back at once rather than when the centre's release comes.

use super::{centre_id, check_lent, ours, GridAgent, Lending};
use crate::state::refusal::Refusal;
use crate::state::world::{SavedWindow, World};
use foresight_core::time::Time;
use foresight_core::ReservationId;
use foresight_rm::ReserveRequest;
use foresight_store::ReservationState;
use std::collections::{BTreeMap, BTreeSet};

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
    give_back_spent(w, now, &lending.owner);
    check_lent(w, lending, &window, Some(id))?;
    let back = w.move_reservation(now, id, window.start, window.end)?;
    Ok(Moved {
        id,
        back: Some(back),
    })
}

/// The live reservations of the grid (of `owner`) whose parts have all ended here, each
/// with whether one of them ran: a reservation is made for exactly one part, and the
/// centre releases it once it learns of the end. One with no part yet is not spent.
fn spent(w: &World, owner: &str) -> Vec<(ReservationId, bool)> {
    let live: BTreeSet<u64> = w
        .reservations
        .values()
        .filter(|r| r.state.is_live() && centre_id(r, owner).is_some())
        .map(|r| r.id)
        .collect();
    if live.is_empty() {
        return Vec::new();
    }
    // (every part ended, one of them ran)
    let mut bound: BTreeMap<u64, (bool, bool)> = BTreeMap::new();
    for j in w.jobs.values() {
        if let Some(r) = j.reservation.filter(|r| live.contains(r)) {
            let e = bound.entry(r).or_insert((true, false));
            e.0 &= j.state.is_final();
            e.1 |= j.started_at.is_some();
        }
    }
    bound
        .into_iter()
        .filter(|&(_, (ended, _))| ended)
        .map(|(r, (_, ran))| (ReservationId(r), ran))
        .collect()
}

/// Ends the [`spent`] reservations: finished when their part ran, released when it was
/// cancelled before it started.
pub(super) fn give_back_spent(w: &mut World, now: Time, owner: &str) {
    for (id, ran) in spent(w, owner) {
        let state = if ran {
            ReservationState::Finished
        } else {
            ReservationState::Released
        };
        w.end_reservation(now, id, state);
    }
}

impl GridAgent {
    /// Ends the grid's reservations of centre `instance` whose part has ended here, so
    /// that their processors serve the site's own jobs and the grid's next parts at once.
    pub(super) async fn give_back_spent(&self, instance: &str) {
        let owner = super::owner_of(instance);
        if spent(&self.service.world(), &owner).is_empty() {
            return;
        }
        let _ = self
            .service
            .mutate(move |w, now| {
                give_back_spent(w, now, &owner);
                Ok(())
            })
            .await;
    }
}
