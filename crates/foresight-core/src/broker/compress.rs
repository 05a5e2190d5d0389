//! Work conservation: reserved global jobs move earlier when processors free up, as
//! conservative backfilling compresses its reservations.
//!
//! A reservation is made at the start the planner found, on forecasts that count every
//! running job until its walltime. Jobs end early (the archive traces overestimate 3–5×),
//! so processors free up before the reserved start. In priority order, each reserved job
//! that has not started tries the earliest start among `now` (its begin time, when that is
//! later: never earlier) and the moments running jobs of its clusters are due to end before
//! its start; it moves there only when on every one
//! of its clusters (all or nothing, co-allocated parts together)
//! - its processors are free for the whole new window without displacing anything (no
//!   other reservation, running job or local job's reservation is touched), and
//! - no queued local job's forecast start gets later.
//!
//! On clusters that schedule themselves (Slurm) the broker decides the same way on its
//! mirror of the cluster, but the move is theirs to make: it asks for it
//! ([`BrokerAction::MoveAsked`]: every part's reservation and begin time moved, all or
//! none) and applies it when the answer comes ([`Broker::on_move_answered`]). A refused move
//! is not asked again for [`MOVE_RETRY_SECS`]. A job with parts on both kinds of cluster
//! moves as one: its parts here hold their new window beside the old one while the other
//! clusters are asked (so that nothing else takes it, and the part does not start before its
//! siblings can), and move there only when every other cluster has moved; a refusal gives
//! the held window back.

use super::{bound_part, Broker, BrokerAction, Phase, ReservedPart};
use crate::forecast::{forecast, OccupancyKind};
use crate::ids::{JobId, ReservationId};
use crate::job::Job;
use crate::reservation::{Acl, AdminReservation};
use crate::scheduler::{Event, LocalScheduler};
use crate::time::{Dur, Interval, Time};
use std::collections::HashMap;

/// Candidate starts tried per job and event, earliest first.
const MAX_CANDIDATES: usize = 8;

/// After a cluster refused to move a job's reservations, the job is not moved again for
/// this long (its reservations stand meanwhile).
pub const MOVE_RETRY_SECS: i64 = 60;

/// Added to a reservation's id for the window its part holds, on a cluster the broker
/// schedules, while a move is asked of the job's other clusters.
const HELD_FOR_MOVE: u64 = 1 << 61;

/// The id of the window `reservation` holds during a move.
pub(super) fn held_for_move_id(reservation: ReservationId) -> ReservationId {
    ReservationId(reservation.0 | HELD_FOR_MOVE)
}

/// A move asked of clusters that schedule themselves and not answered yet.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct PendingMove {
    /// The reserved start when it was asked (an answer for another state is stale).
    pub from: Time,
    /// The new start.
    pub start: Time,
    /// The new end.
    pub end: Time,
    /// The parts with their new windows.
    pub parts: Vec<ReservedPart>,
}

impl Broker {
    /// Moves every reserved job that can start earlier, in priority order.
    pub(super) fn compress(&mut self, now: Time, out: &mut Vec<BrokerAction>) {
        self.move_not_before.retain(|_, t| *t > now);
        let movable: Vec<JobId> = self
            .jobs
            .active()
            .filter(|e| match &e.phase {
                // A job holding licences moves with them only among clusters the broker
                // schedules (a mirror's reservation holds none, nor does a held window).
                Phase::Reserved { start, parts, .. } => {
                    *start > now
                        && (e.job.licences.is_empty()
                            || parts
                                .iter()
                                .all(|p| !self.clusters[p.cluster].self_scheduled))
                        && parts.iter().all(|p| self.clusters[p.cluster].available)
                        && !self.moving.contains_key(&e.job.id)
                        && self
                            .move_not_before
                            .get(&e.job.id)
                            .is_none_or(|&t| t <= now)
                }
                _ => false,
            })
            .map(|e| e.job.id)
            .collect();
        for id in movable {
            self.move_earlier(now, id, out);
        }
    }

    /// Tries the candidate starts of one reserved job; true when it moved.
    fn move_earlier(&mut self, now: Time, id: JobId, out: &mut Vec<BrokerAction>) -> bool {
        let Some(Phase::Reserved {
            start,
            end,
            cost,
            parts,
        }) = self.jobs.get(&id).map(|e| e.phase.clone())
        else {
            return false;
        };
        let job = self.jobs[&id].job.clone();
        // Never before its begin time.
        let from = job.eligible(now);
        if from >= start {
            return false;
        }
        let mut candidates: Vec<Time> = vec![from];
        for p in &parts {
            candidates.extend(
                self.clusters[p.cluster]
                    .sched
                    .running_jobs()
                    .map(|(_, _, placement)| placement.end)
                    .filter(|&t| from < t && t < start),
            );
        }
        candidates.sort_unstable();
        candidates.dedup();
        candidates.truncate(MAX_CANDIDATES);
        // Any part on a cluster that schedules itself: the move is asked, and the parts here
        // only hold their new window until it is answered.
        let remote = parts
            .iter()
            .any(|p| self.clusters[p.cluster].self_scheduled);
        // The forecast starts of local jobs as they stand (no move may make one later),
        // made only once a candidate fits on that cluster: forecasts are the dear part.
        let mut before: Vec<Option<HashMap<JobId, Time>>> = vec![None; parts.len()];
        for t in candidates {
            let mut moved: Vec<LocalScheduler> = Vec::with_capacity(parts.len());
            for (p, before) in parts.iter().zip(&mut before) {
                let sched = &self.clusters[p.cluster].sched;
                let s = if self.clusters[p.cluster].self_scheduled {
                    moved_in_mirror(sched, now, p, t)
                } else if remote {
                    held_for_move(sched, p, t)
                } else {
                    moved_to(sched, now, &bound_part(&job, p), p, t)
                };
                let Some(s) = s else {
                    break;
                };
                let before = before.get_or_insert_with(|| local_starts(sched, now));
                if !no_local_job_later(&s, now, before) {
                    break;
                }
                moved.push(s);
            }
            if moved.len() < parts.len() {
                continue;
            }
            let from = start;
            let shift = start - t;
            let parts: Vec<ReservedPart> = parts
                .iter()
                .map(|p| ReservedPart {
                    window: Interval::new(p.window.start - shift, p.window.end - shift),
                    ..p.clone()
                })
                .collect();
            for (p, s) in parts.iter().zip(moved) {
                self.clusters[p.cluster].sched = s;
            }
            let (start, end) = (t, end - shift);
            if remote {
                // The mirrors hold the move already, so that the jobs after this one are not
                // moved onto the same processors; a refusal is undone by the next snapshot.
                self.moving.insert(
                    id,
                    PendingMove {
                        from,
                        start,
                        end,
                        parts: parts.clone(),
                    },
                );
                out.push(BrokerAction::MoveAsked {
                    job: id,
                    start,
                    end,
                    parts,
                });
                return true;
            }
            if let Some(mut e) = self.jobs.get_mut(&id) {
                e.phase = Phase::Reserved {
                    start,
                    end,
                    cost,
                    parts: parts.clone(),
                };
            }
            self.stats.moves += 1;
            out.push(BrokerAction::Moved {
                job: id,
                start,
                end,
                parts: parts.clone(),
            });
            for p in &parts {
                let mut actions = Vec::new();
                let _ = self.clusters[p.cluster]
                    .sched
                    .handle(now, Event::Tick, &mut actions);
                self.carry_out(now, p.cluster, actions, out);
            }
            return true;
        }
        false
    }
}

/// A copy of `sched` with part `p`'s reservation (and the part bound to it) moved to start
/// at `t`, with the licences it holds, or `None` when the processors or the licences are
/// not free for the whole new window without displacing anything.
fn moved_to(
    sched: &LocalScheduler,
    now: Time,
    part: &Job,
    p: &ReservedPart,
    t: Time,
) -> Option<LocalScheduler> {
    let licences = sched.reservation_licences(p.reservation).cloned();
    let mut s = sched.clone();
    s.cancel(now, part.id).ok()?;
    // Gives its licences back too: the new window takes them again below.
    s.remove_reservation(now, p.reservation).ok()?;
    s.add_reservation(AdminReservation {
        id: p.reservation,
        procs: p.procs,
        window: Interval::new(t, t + p.window.len()),
        acl: Acl {
            job: Some(part.id),
            ..Acl::nobody()
        },
    })
    .ok()?;
    if let Some(held) = licences.filter(|h| !h.is_empty()) {
        s.hold_licences_in_reservation(p.reservation, &held).ok()?;
    }
    s.submit(part.clone()).ok()?;
    Some(s)
}

/// A copy of `sched` where part `p`, still reserved at its window, also holds the share of
/// its window moved to start at `t` that the old one does not cover, or `None` when the
/// processors are not free for it. Held so while the job's other clusters are asked to move.
fn held_for_move(sched: &LocalScheduler, p: &ReservedPart, t: Time) -> Option<LocalScheduler> {
    let end = (t + p.window.len()).min(p.window.start);
    let mut s = sched.clone();
    s.add_reservation(AdminReservation {
        id: held_for_move_id(p.reservation),
        procs: p.procs,
        window: Interval::new(t, end),
        acl: Acl::nobody(),
    })
    .ok()?;
    Some(s)
}

/// Completes an accepted move on cluster `k`, which the broker schedules: the held window
/// is given back and part `p` (whose new window is `to`) moves there. `None` when it no
/// longer fits, which the held window rules out.
pub(super) fn complete_held_move(
    sched: &LocalScheduler,
    now: Time,
    part: &Job,
    p: &ReservedPart,
    to: &ReservedPart,
) -> Option<LocalScheduler> {
    let mut s = sched.clone();
    let _ = s.remove_reservation(now, held_for_move_id(p.reservation));
    moved_to(&s, now, part, p, to.window.start)
}

/// A copy of the mirror `sched` of a cluster that schedules itself with reservation `p`
/// moved to start at `t` (the part itself waits in the cluster's queue, not in the mirror),
/// or `None` when the processors are not free for the whole new window.
fn moved_in_mirror(
    sched: &LocalScheduler,
    now: Time,
    p: &ReservedPart,
    t: Time,
) -> Option<LocalScheduler> {
    let held = sched
        .reservations()
        .find(|r| r.id == p.reservation)?
        .clone();
    let mut s = sched.clone();
    s.remove_reservation(now, p.reservation).ok()?;
    // The mirror may hold the window a little longer than the part (a cluster's closed end).
    let len: Dur = held.window.len().max(p.window.len());
    s.add_reservation(AdminReservation {
        window: Interval::new(t, t + len),
        ..held
    })
    .ok()?;
    Some(s)
}

/// Where the cluster's policy would start each queued local job if nothing else arrived.
fn local_starts(sched: &LocalScheduler, now: Time) -> HashMap<JobId, Time> {
    forecast(sched, now, |_| 0.0)
        .into_iter()
        .filter_map(|o| match o.kind {
            OccupancyKind::Planned { job, .. } => Some((job, o.window.start)),
            _ => None,
        })
        .collect()
}

fn no_local_job_later(sched: &LocalScheduler, now: Time, before: &HashMap<JobId, Time>) -> bool {
    if before.is_empty() {
        return true;
    }
    let after = local_starts(sched, now);
    before
        .iter()
        .all(|(job, &was)| after.get(job).is_none_or(|&is| is <= was))
}

/// Helpers for the broker's unit tests.
#[cfg(test)]
pub(super) mod tests_support {
    use super::*;

    /// The forecast start of a queued local job.
    pub fn local_start(sched: &LocalScheduler, now: Time, job: JobId) -> Option<Time> {
        local_starts(sched, now).get(&job).copied()
    }
}
