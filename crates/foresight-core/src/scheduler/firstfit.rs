//! FIRSTFIT backfill: the walk itself starts every later job that fits now (see
//! [`super::pass`]); here are its shortest-plan-first order (SPF) and its cap on how often
//! one job may be overtaken.

use super::guard::Guard;
use super::{Action, Entry, LocalScheduler, State};
use crate::ids::JobId;
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
