//! FIRSTFIT backfill: the walk itself starts every later job that fits now (see
//! [`super::pass`]); here are its shortest-plan-first order (SPF) and its cap on how often
//! one job may be overtaken.

use super::guard::Guard;
use super::{Action, Entry, LocalScheduler, State};
use crate::ids::JobId;
use crate::shortest::Candidate;
use crate::time::{Dur, Time};

impl LocalScheduler {
    /// The most processors free at `now` in any one domain.
    pub(super) fn free_anywhere(&self, now: Time) -> i64 {
        self.admin
            .values()
            .map(|a| a.profile.free_at(now))
            .fold(self.pool.free_at(now), i64::max)
    }

    /// First-fit backfill over the unreserved jobs from position `from` on, shortest plan
    /// first (ties in queue order): every one that fits without delaying a reservation, and
    /// that the starvation guard lets pass, starts.
    pub(super) fn backfill_shortest(
        &mut self,
        from: usize,
        now: Time,
        mut guard: Guard,
        out: &mut Vec<Action>,
    ) {
        let mut free_any = self.free_anywhere(now);
        // Starting a job only takes processors, so a job that cannot start at the beginning
        // of the backfill cannot start later in it: only the others are sorted. Without
        // administrative reservations the pool's horizons tell which those are.
        let mut horizon = std::mem::take(&mut self.horizon);
        let plain = self.admin.is_empty();
        if plain {
            self.pool.horizons(now, &mut horizon);
        }
        let mut cands: Vec<(Dur, u64, usize)> = (from..self.queue.range().end)
            .filter_map(|i| {
                let s = self.queue.get(i);
                let may_fit = i64::from(s.procs) <= free_any
                    && (!plain || now + s.estimate <= horizon.get(s.procs));
                (s.alive && !s.reserved && may_fit).then_some((s.estimate, s.seq, i))
            })
            .collect();
        self.horizon = horizon;
        cands.sort_unstable();
        for (_, _, i) in cands {
            if free_any <= 0 {
                break;
            }
            let slot = *self.queue.get(i);
            if i64::from(slot.procs) > free_any {
                continue;
            }
            let domain = self
                .fits_now(slot.id, now)
                .filter(|_| self.guard_allows(&mut guard, slot.id, now));
            if let Some(domain) = domain {
                self.start_now(i, domain, now, out);
                self.guard_started(&mut guard, slot.id, now);
                free_any = self.free_anywhere(now);
            }
        }
    }

    /// [`LocalScheduler::backfill_shortest`] with the candidates taken from the queue's
    /// ordered index, when every waiting job without a reservation lies at or after `from`:
    /// each start costs a lookup per step of the pool's horizon staircase instead of a sort
    /// of the queue. The same jobs start in the same order: a job that does not fit at some
    /// point of the pass never fits later in it (starts only take processors), so taking the
    /// shortest that fits, again and again, is the sorted walk.
    pub(super) fn backfill_shortest_indexed(
        &mut self,
        from: usize,
        now: Time,
        mut guard: Guard,
        out: &mut Vec<Action>,
    ) {
        let indexed = self.queue.shortest().is_some();
        if !indexed || !self.admin.is_empty() || !self.licences.is_empty() {
            return self.backfill_shortest(from, now, guard, out);
        }
        let mut horizon = std::mem::take(&mut self.horizon);
        // Candidates the pass refused (the guard, or a licence the job asks for): hidden
        // from the index until the pass ends.
        let mut refused: Vec<Candidate> = Vec::new();
        while self.pool.free_at(now) > 0 {
            self.pool.horizons(now, &mut horizon);
            let Some(c) = self
                .queue
                .shortest()
                .and_then(|index| index.shortest_fitting(now, &horizon))
            else {
                break;
            };
            let i = self
                .queue
                .position_of(c.key, c.seq)
                .expect("invariant: an indexed job is in the queue");
            let id = self.queue.get(i).id;
            let domain = self
                .fits_now(id, now)
                .filter(|_| self.guard_allows(&mut guard, id, now));
            if let Some(domain) = domain {
                self.start_now(i, domain, now, out);
                self.guard_started(&mut guard, id, now);
            } else {
                self.queue.set_hidden(c, true);
                refused.push(c);
            }
        }
        for c in refused {
            self.queue.set_hidden(c, false);
        }
        self.horizon = horizon;
    }

    pub(super) fn overtaken(&self, id: JobId) -> u32 {
        match self.jobs[&id].state {
            State::Waiting { overtaken, .. } => overtaken,
            State::Running(_) | State::Deferred => 0,
        }
    }

    /// Counts one overtake for every skipped job; true when one of them reached the cap.
    pub(super) fn count_overtakes(&mut self, cap: u32) -> bool {
        let mut blocked = false;
        for id in &self.skipped {
            if let Some(Entry {
                state: State::Waiting { overtaken, .. },
                ..
            }) = self.jobs.get_mut(id)
            {
                *overtaken += 1;
                blocked |= *overtaken >= cap;
            }
        }
        blocked
    }
}
