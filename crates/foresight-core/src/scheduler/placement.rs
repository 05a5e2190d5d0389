//! Where a job may run and when: the domains, the profiles behind them, the licences, and
//! the earliest placement; plus the instants at which the caller must tick.

use super::{Domain, LocalScheduler, Placement};
use crate::ids::JobId;
use crate::job::Job;
use crate::licence::Hold;
use crate::profile::Profile;
use crate::reservation::AdminReservation;
use crate::time::Time;
use std::collections::BTreeMap;

impl LocalScheduler {
    /// The next start or end of an administrative reservation, begin time of a deferred
    /// job, or return of licences another cluster held from a shared pool, after `now`: a
    /// moment at which jobs may become able to start with no other
    /// event, so the caller must tick then.
    pub fn next_boundary(&self, now: Time) -> Option<Time> {
        let begin = self.deferred.iter().map(|&(b, _)| b).find(|&b| b > now);
        let comeback = if self.queue.is_empty() {
            None
        } else {
            self.licences.next_comeback(now)
        };
        self.admin
            .values()
            .flat_map(|s| [s.res.window.start, s.res.window.end])
            .filter(|t| *t > now)
            .chain(begin)
            .chain(comeback)
            .min()
    }

    /// The administrative reservations, by id.
    pub fn reservations(&self) -> impl Iterator<Item = &AdminReservation> {
        self.admin.values().map(|s| &s.res)
    }

    /// Processors no running job uses at `now`, whatever reservations hold them: what sits
    /// idle, for the grid broker's idle-time figure.
    pub fn idle_at(&self, now: Time) -> i64 {
        self.free_ignoring_reservations(now)
    }

    /// Processors not used by running jobs at `now`, ignoring every reservation: what pyss's
    /// snapshot shows.
    pub(super) fn free_ignoring_reservations(&self, now: Time) -> i64 {
        let mut free = self.pool.free_at(now);
        for s in self.admin.values() {
            if s.res.window.contains(now) {
                free += s.profile.free_at(now);
            }
        }
        for id in &self.reserved {
            if let Some(p) = self.reservation_of(*id) {
                if p.domain == Domain::Pool && p.start <= now && now < p.end {
                    free += i64::from(self.jobs[id].job.procs);
                }
            }
        }
        free
    }

    pub(super) fn profile_mut(&mut self, domain: Domain) -> &mut Profile {
        match domain {
            Domain::Pool => &mut self.pool,
            Domain::Reservation(r) => {
                &mut self
                    .admin
                    .get_mut(&r)
                    .expect("invariant: placements name existing reservations")
                    .profile
            }
        }
    }

    pub(super) fn profile(&self, domain: Domain) -> &Profile {
        match domain {
            Domain::Pool => &self.pool,
            Domain::Reservation(r) => &self.admin[&r].profile,
        }
    }

    /// The domains a job may use at `now`, in order of preference.
    pub(super) fn domains<'a>(
        &'a self,
        job: &'a Job,
        now: Time,
    ) -> impl Iterator<Item = Domain> + 'a {
        // A bound job: its reservation while it lasts (then the pool if it may start
        // early), or the pool once the reservation is over or gone. Any other job: every
        // live reservation admitting it, then the pool. No allocation: this runs for every
        // waiting job at every pass.
        let (bound, pool, scan) = match job.reservation {
            Some(r) => match self.admin.get(&r) {
                Some(s) if s.res.window.end > now => {
                    (Some(Domain::Reservation(r)), job.may_start_early, false)
                }
                _ => (None, true, false),
            },
            None => (None, true, true),
        };
        let admitting = self
            .admin
            .values()
            .filter(move |s| scan && s.res.window.end > now && s.res.acl.admits(job))
            .map(|s| Domain::Reservation(s.res.id));
        bound
            .into_iter()
            .chain(admitting)
            .chain(pool.then_some(Domain::Pool))
    }

    /// The domain in which the job can start now, if any.
    pub(super) fn fits_now(&self, id: JobId, now: Time) -> Option<Domain> {
        let job = &self.jobs[&id].job;
        if !job.licences.is_empty() && !self.licences.fits(&job.licences, now, job.plan()) {
            return None;
        }
        if self.admin.is_empty() {
            return self
                .pool
                .fits(now, job.procs, job.plan())
                .then_some(Domain::Pool);
        }
        self.domains(job, now)
            .find(|d| self.profile(*d).fits(now, job.procs, job.plan()))
    }

    /// The earliest placement over the job's domains, no earlier than its begin.
    pub(super) fn earliest(&self, id: JobId, now: Time) -> Option<Placement> {
        let job = &self.jobs[&id].job;
        let now = job.begin.map_or(now, |b| b.max(now));
        let plan = job.plan();
        let place = |domain: Domain| {
            let profile = self.profile(domain);
            let mut start = profile.earliest(now, job.procs, plan)?;
            if !job.licences.is_empty() {
                // Processors and licences both free for the whole run: each answer is a
                // lower bound of the other's, so alternate until they agree.
                loop {
                    let l = self.licences.earliest(&job.licences, start, plan)?;
                    if l == start {
                        break;
                    }
                    start = profile.earliest(l, job.procs, plan)?;
                }
            }
            Some(Placement {
                domain,
                start,
                end: start + plan,
            })
        };
        if self.admin.is_empty() {
            return place(Domain::Pool);
        }
        self.domains(job, now)
            .filter_map(place)
            .min_by_key(|p| p.start)
    }

    /// Holds (`take`) or lets go of the job's licences over `[start, end)`; nothing when the
    /// cluster has no pool, so jobs without licences pay one branch.
    pub(super) fn hold_licences(&mut self, id: JobId, start: Time, end: Time, take: bool) {
        if self.licences.is_empty() {
            return;
        }
        let Some(e) = self.jobs.get(&id) else { return };
        if take {
            self.licences.take(&e.job.licences, start, end);
        } else {
            self.licences.give(&e.job.licences, start, end);
        }
    }

    /// The job's licences stay free for its whole plan from `now`.
    pub(super) fn licences_fit_now(&self, id: JobId, now: Time) -> bool {
        let job = &self.jobs[&id].job;
        job.licences.is_empty() || self.licences.fits(&job.licences, now, job.plan())
    }

    /// Makes the cluster draw on a licence pool of `count` licences (before any job asks for
    /// it): jobs asking for it then start, and are reserved, only where their licences stay
    /// free for their whole run.
    pub fn add_licence_pool(&mut self, name: &str, count: u32) {
        self.licences.add_pool(name, count);
    }

    /// Makes the pool one this cluster shares with others (a floating licence server): every
    /// change this scheduler makes to it is journaled for them
    /// ([`LocalScheduler::drain_licence_journal`]); the broker passes it on.
    pub fn share_licence_pool(&mut self, name: &str) {
        self.licences.share(name);
    }

    /// The changes this scheduler made to shared pools since the last call.
    pub fn drain_licence_journal(&mut self) -> Vec<Hold> {
        self.licences.drain_journal()
    }

    /// Applies a change another cluster's scheduler made to a pool shared with this one.
    pub fn apply_licence_hold(&mut self, hold: &Hold) {
        self.licences.apply(hold);
        if hold.delta > 0 {
            // Licences came back: waiting jobs may start.
            self.released = true;
        }
    }

    /// Licences of the pool free at `t`, for invariant checks and explanations.
    pub fn licences_free_at(&self, name: &str, t: Time) -> Option<i64> {
        self.licences.free_at(name, t)
    }

    /// The licences a known job holds while it runs.
    pub fn licences_of(&self, id: JobId) -> Option<&BTreeMap<String, u32>> {
        self.jobs.get(&id).map(|e| &e.job.licences)
    }

    pub(super) fn count_unreserved(&mut self, procs: u32, delta: i32) {
        let n = self.unreserved_by_procs.entry(procs).or_insert(0);
        *n = n
            .checked_add_signed(delta)
            .expect("invariant: counts match the queue");
        if *n == 0 {
            self.unreserved_by_procs.remove(&procs);
        }
    }

    /// The fewest processors any unreserved waiting job asks for (`i64::MAX` if none).
    pub(super) fn smallest_unreserved(&self) -> i64 {
        self.unreserved_by_procs
            .first_key_value()
            .map_or(i64::MAX, |(&p, _)| i64::from(p))
    }

    pub(super) fn unmark_reserved(&mut self, id: JobId) {
        if let Some(i) = self.reserved.iter().position(|r| *r == id) {
            self.reserved.swap_remove(i);
        }
    }
}
