//! Administrative reservations: holding processors (and licences) for a window, outranking
//! the local queue or not, and letting them go.

use super::{AdminSlot, Domain, Entry, LocalScheduler, Placement, State};
use crate::error::{CoreError, Result};
use crate::ids::{JobId, ReservationId};
use crate::licence::LicenceBook;
use crate::profile::Profile;
use crate::reservation::AdminReservation;
use crate::time::{Interval, Time};
use std::collections::BTreeMap;

impl LocalScheduler {
    /// Holds processors for an administrative reservation. Refused when the pool cannot
    /// give them during the whole window (running jobs and job reservations included).
    pub fn add_reservation(&mut self, res: AdminReservation) -> Result<()> {
        if self.admin.contains_key(&res.id) {
            return Err(CoreError::DuplicateReservation(res.id));
        }
        let Interval { start, end } = res.window;
        let free = self.pool.min_free(start, end);
        if free < i64::from(res.procs) {
            return Err(CoreError::ReservationConflict {
                reservation: res.id,
                procs: res.procs,
                start,
                free,
            });
        }
        self.pool.take(start, end, res.procs);
        let profile = Profile::window(res.procs, start, end);
        self.admin.insert(
            res.id,
            AdminSlot {
                res,
                profile,
                licences: BTreeMap::new(),
            },
        );
        Ok(())
    }

    /// Holds processors for a reservation that outranks the local queue (a global job that
    /// pays at least the price of the local time it takes): it conflicts only with running
    /// jobs and other administrative reservations. Only when it does not fit beside the
    /// waiting jobs' reservations do those it overlaps lose them (they are placed again,
    /// later, at the next pass): a reservation in time nobody planned displaces no one.
    pub fn add_reservation_displacing(&mut self, res: AdminReservation) -> Result<()> {
        if self.admin.contains_key(&res.id) {
            return Err(CoreError::DuplicateReservation(res.id));
        }
        let Interval { start, end } = res.window;
        if self.pool.min_free(start, end) >= i64::from(res.procs) {
            self.pool.take(start, end, res.procs);
            let profile = Profile::window(res.procs, start, end);
            self.admin.insert(
                res.id,
                AdminSlot {
                    res,
                    profile,
                    licences: BTreeMap::new(),
                },
            );
            return Ok(());
        }
        let mut without_queue = self.pool.clone();
        let held: Vec<(JobId, u32, Placement)> = self
            .job_reservations()
            .filter(|(_, _, p)| p.domain == Domain::Pool)
            .collect();
        for (_, procs, p) in &held {
            without_queue.give(p.start, p.end, *procs);
        }
        let free = without_queue.min_free(start, end);
        if free < i64::from(res.procs) {
            return Err(CoreError::ReservationConflict {
                reservation: res.id,
                procs: res.procs,
                start,
                free,
            });
        }
        // Only the overlapping ones need to go: the others do not touch [start, end).
        for (id, _, p) in held {
            if p.start < end && start < p.end {
                self.drop_job_reservation(id);
            }
        }
        self.pool.take(start, end, res.procs);
        let profile = Profile::window(res.procs, start, end);
        self.admin.insert(
            res.id,
            AdminSlot {
                res,
                profile,
                licences: BTreeMap::new(),
            },
        );
        self.released = true;
        Ok(())
    }

    /// Makes an administrative reservation hold licences over its whole window, so that no
    /// local job takes them from under it: a global job's reservation holds the licences
    /// its part (bound to the reservation, asking none itself) runs with. Refused, holding
    /// nothing, when the pools cannot give them for the whole window; given back when the
    /// reservation is released.
    pub fn hold_licences_in_reservation(
        &mut self,
        id: ReservationId,
        demand: &BTreeMap<String, u32>,
    ) -> Result<()> {
        let slot = self
            .admin
            .get(&id)
            .ok_or(CoreError::UnknownReservation(id))?;
        let Interval { start, end } = slot.res.window;
        if let Some(reason) = self.licences.refusal(demand) {
            return Err(CoreError::LicencesUnavailable {
                reservation: id,
                reason,
            });
        }
        for (name, &n) in demand {
            let free = self.licences.min_free(name, start, end).unwrap_or(0);
            if free < i64::from(n) {
                return Err(CoreError::LicencesUnavailable {
                    reservation: id,
                    reason: format!("{n} licences {name:?} asked from {start}, {free} free then"),
                });
            }
        }
        self.licences.take(demand, start, end);
        let slot = self.admin.get_mut(&id).expect("invariant: looked up above");
        for (name, &n) in demand {
            *slot.licences.entry(name.clone()).or_insert(0) += n;
        }
        Ok(())
    }

    /// The licences reservation `id` holds (`None`: no such reservation).
    pub fn reservation_licences(&self, id: ReservationId) -> Option<&BTreeMap<String, u32>> {
        self.admin.get(&id).map(|slot| &slot.licences)
    }

    /// The licence pools this cluster draws on, as it holds them now.
    pub fn licence_book(&self) -> &LicenceBook {
        &self.licences
    }

    /// Takes a waiting job's reservation away; the next pass places it again.
    pub(super) fn drop_job_reservation(&mut self, id: JobId) {
        let Some(p) = self.reservation_of(id) else {
            return;
        };
        let procs = self.jobs[&id].job.procs;
        self.profile_mut(p.domain).give(p.start, p.end, procs);
        self.hold_licences(id, p.start, p.end, false);
        self.unmark_reserved(id);
        if let Some(i) = self.queue.position(id) {
            self.queue.set_reserved(i, false);
        }
        self.count_unreserved(procs, 1);
        if let Some(Entry {
            state: State::Waiting { reservation, .. },
            ..
        }) = self.jobs.get_mut(&id)
        {
            *reservation = None;
        }
    }

    /// Moves administrative reservation `id` to `window`, the jobs bound to it still bound
    /// and placed again in it at the next pass: how a site follows the centre that moves a
    /// grid part earlier when processors free up. A bound job's begin time that was not
    /// after the old start is brought to the new one (it waited for the window, not for a
    /// time of its own). All or nothing: refused, changing nothing, when a job runs in it (or,
    /// bound to it, started early in the pool) or the processors (and the licences it holds) are not free for the whole new window
    /// beside every other reservation, the queue's included (a move takes no time planned
    /// for anyone).
    pub fn move_reservation(
        &mut self,
        now: Time,
        id: ReservationId,
        window: Interval,
    ) -> Result<()> {
        let slot = self
            .admin
            .get(&id)
            .ok_or(CoreError::UnknownReservation(id))?;
        // Running in it, or bound to it and started early in the pool.
        if let Some(e) = self.jobs.values().find(|e| {
            matches!(e.state, State::Running(p) if p.domain == Domain::Reservation(id))
                || (e.job.reservation == Some(id) && matches!(e.state, State::Running(_)))
        }) {
            return Err(CoreError::ReservationInUse {
                reservation: id,
                job: e.job.id,
            });
        }
        let old = slot.res.window.start;
        let res = AdminReservation {
            window,
            ..slot.res.clone()
        };
        let licences = slot.licences.clone();
        let mut bound: Vec<crate::job::Job> = self
            .jobs
            .values()
            .filter(|e| e.job.reservation == Some(id))
            .map(|e| e.job.clone())
            .collect();
        bound.sort_by_key(|j| j.id);
        let mut s = self.clone();
        for j in &bound {
            s.cancel(now, j.id)?;
        }
        s.remove_reservation(now, id)?;
        s.add_reservation(res)?;
        if !licences.is_empty() {
            s.hold_licences_in_reservation(id, &licences)?;
        }
        for mut j in bound {
            j.begin = j
                .begin
                .map(|b| if b <= old { b.min(window.start) } else { b });
            s.submit(j)?;
        }
        *self = s;
        Ok(())
    }

    /// Releases an administrative reservation. Jobs running inside it keep running (their
    /// processors move to the pool); jobs bound to it fall back to the pool.
    pub fn remove_reservation(&mut self, now: Time, id: ReservationId) -> Result<()> {
        let slot = self
            .admin
            .remove(&id)
            .ok_or(CoreError::UnknownReservation(id))?;
        let Interval { start, end } = slot.res.window;
        self.pool.give(start.max(now), end, slot.res.procs);
        self.licences.give(&slot.licences, start.max(now), end);
        let inside: Vec<(JobId, Placement, u32, bool)> = self
            .jobs
            .values()
            .filter_map(|e| match e.state {
                State::Running(p) if p.domain == Domain::Reservation(id) => {
                    Some((e.job.id, p, e.job.procs, true))
                }
                State::Waiting {
                    reservation: Some(p),
                    ..
                } if p.domain == Domain::Reservation(id) => Some((e.job.id, p, e.job.procs, false)),
                _ => None,
            })
            .collect();
        for (jid, p, procs, running) in inside {
            let entry = self
                .jobs
                .get_mut(&jid)
                .expect("invariant: collected from jobs");
            if running {
                self.pool.take(now, p.end, procs);
                entry.state = State::Running(Placement {
                    domain: Domain::Pool,
                    ..p
                });
            } else {
                entry.state = State::Waiting {
                    reservation: None,
                    overtaken: 0,
                    checked: 0,
                };
                self.unmark_reserved(jid);
                if let Some(i) = self.queue.position(jid) {
                    self.queue.set_reserved(i, false);
                }
                self.count_unreserved(procs, 1);
            }
        }
        for e in self.jobs.values_mut() {
            if e.job.reservation == Some(id) {
                e.job.reservation = None;
            }
        }
        self.released = true;
        Ok(())
    }
}
