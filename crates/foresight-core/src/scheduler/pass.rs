//! The pass: compression, due reservations, and the walk of the queue in order, which
//! starts, reserves, and hands the rest to the backfill choice (FIRSTFIT inline, with its
//! SPF order and overtake cap in [`super::firstfit`]; BESTFIT and GREEDY through
//! [`super::metric`]).

use super::guard::Guard;
use super::{Action, Domain, Entry, LocalScheduler, Placement, State};
use crate::ids::JobId;
use crate::policy::{BackfillChoice, BackfillOrder, Compression, QueueOrder};
use crate::queue::{ReservedBlock, BLOCK, EMPTY};
use crate::time::{Dur, Time};

impl LocalScheduler {
    /// Runs one scheduling pass at `now`, appending decisions to `out`.
    pub fn schedule(&mut self, now: Time, out: &mut Vec<Action>) {
        self.pool.advance(now);
        if !self.licences.is_empty() {
            self.licences.advance(now);
        }
        for s in self.admin.values_mut() {
            s.profile.advance(now);
        }
        if !self.deferred.is_empty() {
            self.release_deferred(now);
        }
        if self.queue.is_empty() {
            self.released = false;
            return;
        }
        if self.policy.order == QueueOrder::Priority {
            self.refresh_priorities(now);
        } else {
            self.queue.compact();
        }
        let compress = match self.policy.compression {
            Compression::EveryPass => true,
            Compression::AfterRelease => self.released,
        };
        self.released = false;
        if !self.reserved.is_empty() {
            if compress {
                self.compress(now, out);
            }
            self.start_due_reservations(now, out);
        }
        self.walk(now, out);
    }

    pub(super) fn refresh_priorities(&mut self, now: Time) {
        let weights = &self.policy.priority;
        for slot in self.queue.iter_alive_mut() {
            let job = &self.jobs[&slot.id].job;
            slot.priority = weights.priority(job, now, &self.usage);
        }
        self.queue.sort_by_priority();
    }

    /// Moves every reserved job, in queue order, to its earliest start if that is earlier.
    pub(super) fn compress(&mut self, now: Time, out: &mut Vec<Action>) {
        let plain = self.admin.is_empty();
        if !plain {
            // Bounds kept by the block walk hold only for the pool alone.
            self.queue.forget_reserved_blocks();
        } else if self.licences.is_empty() && self.reserved.len() > 8 {
            self.compress_blocks(now, out);
            return;
        }
        let order: Vec<JobId> = if self.reserved.len() == 1 {
            self.reserved.clone()
        } else {
            self.queue
                .iter_alive()
                .filter(|s| s.reserved)
                .map(|s| s.id)
                .collect()
        };
        // The lookup table pays off only when many jobs are checked (conservative).
        let use_table = plain && order.len() > 8;
        let mut first_free = std::mem::take(&mut self.first_free);
        if use_table {
            self.pool.first_free(now, &mut first_free);
        }
        for id in order {
            let Some(old) = self.reservation_of(id) else {
                continue;
            };
            if old.start <= now {
                continue; // due: it starts in this pass, where it is
            }
            let job = &self.jobs[&id].job;
            let procs = job.procs;
            if plain {
                // Fast path: ask whether an earlier start exists before touching the profile.
                // Before `first_free[procs]` too few processors are free at every instant
                // (the job's own span lies later, so its credit does not help there).
                let from = if use_table {
                    first_free.get(procs)
                } else {
                    now
                };
                // Without licences, an earlier start can only lie in a window that meets a
                // span the pool gained since the job was last found at its earliest.
                let limit = if self.licences.is_empty() {
                    let checked = self.checked(id);
                    self.pool
                        .gained_since(checked)
                        .map_or(Time::MIN, |end| end.min(old.start))
                } else {
                    old.start
                };
                let version = self.pool.version();
                if from >= limit {
                    self.set_checked(id, version);
                    continue;
                }
                let credit = (old.start, old.end, i64::from(procs));
                if self
                    .pool
                    .earliest_before(from, procs, job.plan(), credit, limit)
                    .is_none()
                {
                    self.set_checked(id, version);
                    continue;
                }
            }
            self.profile_mut(old.domain).give(old.start, old.end, procs);
            self.hold_licences(id, old.start, old.end, false);
            let new = match self.earliest(id, now) {
                Some(p) if p.start < old.start => p,
                _ => old,
            };
            self.profile_mut(new.domain).take(new.start, new.end, procs);
            self.hold_licences(id, new.start, new.end, true);
            if plain {
                let version = self.pool.version();
                self.set_checked(id, version);
            }
            if new != old {
                self.set_reservation(id, new);
                out.push(Action::Reserve {
                    job: id,
                    start: new.start,
                });
                if use_table {
                    self.pool.first_free(now, &mut first_free);
                }
            }
        }
        self.first_free = first_free;
    }

    /// [`LocalScheduler::compress`] for many reservations in the pool alone, without
    /// licences: the same moves in the same order, but a block of the queue whose bounds
    /// ([`ReservedBlock`]) show that none of its jobs can move is passed over in one step,
    /// so a pass after which nothing was gained costs the number of blocks, not of jobs.
    fn compress_blocks(&mut self, now: Time, out: &mut Vec<Action>) {
        let mut first_free = std::mem::take(&mut self.first_free);
        // After moves the table is stale but still a bound: no job of `p` processors can
        // start before `first_free[p]` or the earliest start a moved job left (only there
        // did the pool gain), whichever comes first. It is rebuilt only for a block's check.
        let mut fresh = false;
        let mut stale = true;
        let mut left = Time::MAX;
        // The last answer of `gained_since`: the jobs of a block were mostly checked alike.
        let mut gained: Option<(u64, Option<Time>)> = None;
        let range = self.queue.range();
        let mut i = range.start;
        while i < range.end {
            let b = i / BLOCK;
            let block_end = ((b + 1) * BLOCK).min(range.end);
            let known = self.queue.reserved_block(b);
            if let Some(k) = known {
                // The test below, made once with the bounds: no job of the block passes it.
                let idle = match self.pool.gained_since(k.checked) {
                    None => true,
                    Some(end) => {
                        let limit = end.min(k.start);
                        !stale && first_free.get(k.procs).min(left) >= limit || {
                            if !fresh {
                                self.pool.first_free(now, &mut first_free);
                                (fresh, stale, left) = (true, false, Time::MAX);
                            }
                            first_free.get(k.procs) >= limit
                        }
                    }
                };
                if idle {
                    let checked = self.pool.version();
                    self.queue
                        .set_reserved_block(b, Some(ReservedBlock { checked, ..k }));
                    i = block_end;
                    continue;
                }
            }
            let floor = known.map_or(0, |k| k.checked);
            let mut bounds = ReservedBlock::NONE;
            for j in i..block_end {
                let slot = *self.queue.get(j);
                if !slot.alive || !slot.reserved {
                    continue;
                }
                let (id, procs) = (slot.id, slot.procs);
                let Some(Entry {
                    job,
                    state:
                        State::Waiting {
                            reservation: Some(old),
                            checked,
                            ..
                        },
                }) = self.jobs.get_mut(&id)
                else {
                    continue;
                };
                let (old, plan) = (*old, job.plan());
                let seen = (*checked).max(floor);
                if old.start <= now {
                    bounds = bounds.with(procs, old.start, seen);
                    continue; // due: it starts in this pass, where it is
                }
                // An earlier start can only lie in a window that meets a span the pool
                // gained since the job was last found at its earliest, and not before
                // `first_free[procs]`, where too few processors are free at every instant.
                let since = match gained {
                    Some((v, end)) if v == seen => end,
                    _ => {
                        let end = self.pool.gained_since(seen);
                        gained = Some((seen, end));
                        end
                    }
                };
                let limit = since.map_or(Time::MIN, |end| end.min(old.start));
                let version = self.pool.version();
                let mut found = None;
                if limit > now {
                    // A stale table still bounds the start from below, which is all the
                    // walk needs; it is rebuilt for the checks of whole blocks.
                    if stale {
                        self.pool.first_free(now, &mut first_free);
                        (fresh, stale, left) = (true, false, Time::MAX);
                    }
                    let from = first_free.get(procs).min(left);
                    if from < limit {
                        let credit = (old.start, old.end, i64::from(procs));
                        found = self.pool.earliest_before(from, procs, plan, credit, limit);
                    }
                }
                let Some(start) = found else {
                    *checked = version;
                    bounds = bounds.with(procs, old.start, version);
                    continue;
                };
                self.profile_mut(old.domain).give(old.start, old.end, procs);
                // In the pool, the answer above is the earliest start: before `from` the
                // job's own processors, which lie later, do not help.
                let new = match old.domain {
                    Domain::Pool => Placement {
                        domain: Domain::Pool,
                        start,
                        end: start + plan,
                    },
                    Domain::Reservation(_) => match self.earliest(id, now) {
                        Some(p) if p.start < old.start => p,
                        _ => old,
                    },
                };
                self.profile_mut(new.domain).take(new.start, new.end, procs);
                let version = self.pool.version();
                self.set_checked(id, version);
                bounds = bounds.with(procs, new.start, version);
                if new != old {
                    self.set_reservation(id, new);
                    out.push(Action::Reserve {
                        job: id,
                        start: new.start,
                    });
                    fresh = false;
                    left = left.min(old.start);
                    // The pool changed, and with it what `gained_since` says.
                    gained = None;
                }
            }
            self.queue.set_reserved_block(b, Some(bounds));
            i = block_end;
        }
        self.first_free = first_free;
    }

    pub(super) fn set_reservation(&mut self, id: JobId, p: Placement) {
        if let Some(Entry {
            state: State::Waiting { reservation, .. },
            ..
        }) = self.jobs.get_mut(&id)
        {
            *reservation = Some(p);
        }
        self.reserved_from = self.reserved_from.min(p.start);
    }

    /// The pool's version when the job's reservation was last found at its earliest (0,
    /// which admits every gain, if never).
    fn checked(&self, id: JobId) -> u64 {
        match self.jobs[&id].state {
            State::Waiting { checked, .. } => checked,
            State::Running(_) | State::Deferred => 0,
        }
    }

    /// Records that the job's reservation is at the earliest start the pool allows at its
    /// `version`.
    pub(super) fn set_checked(&mut self, id: JobId, version: u64) {
        if let Some(Entry {
            state: State::Waiting { checked, .. },
            ..
        }) = self.jobs.get_mut(&id)
        {
            *checked = version;
        }
    }

    pub(super) fn start_due_reservations(&mut self, now: Time, out: &mut Vec<Action>) {
        if now < self.reserved_from {
            return;
        }
        let mut due = 0;
        let mut next = Time::MAX;
        for id in &self.reserved {
            match self.reservation_of(*id) {
                Some(p) if p.start <= now => due += 1,
                Some(p) => next = next.min(p.start),
                None => {}
            }
        }
        // The due jobs start, or are placed again through `set_reservation`, or keep their
        // start (below).
        self.reserved_from = next;
        for i in self.queue.range() {
            if due == 0 {
                break;
            }
            let slot = *self.queue.get(i);
            if !slot.alive || !slot.reserved {
                continue;
            }
            let p = self
                .reservation_of(slot.id)
                .expect("invariant: reserved slot has a reservation");
            if p.start > now {
                continue;
            }
            due -= 1;
            let mut placement = p;
            if p.start < now {
                // Late (the caller ticked after the reserved start): the rest of the old span
                // may now overlap later promises, so place the job again from now.
                self.profile_mut(p.domain).give(p.start, p.end, slot.procs);
                self.hold_licences(slot.id, p.start, p.end, false);
                let Some(again) = self.earliest(slot.id, now) else {
                    self.profile_mut(p.domain).take(p.start, p.end, slot.procs);
                    self.hold_licences(slot.id, p.start, p.end, true);
                    self.reserved_from = self.reserved_from.min(p.start);
                    continue;
                };
                self.profile_mut(again.domain)
                    .take(again.start, again.end, slot.procs);
                self.hold_licences(slot.id, again.start, again.end, true);
                if again.start > now {
                    // Later than before: the block's bounds no longer hold.
                    self.queue.set_reserved_block(i / BLOCK, None);
                    self.set_reservation(slot.id, again);
                    out.push(Action::Reserve {
                        job: slot.id,
                        start: again.start,
                    });
                    continue;
                }
                placement = again;
            }
            self.unmark_reserved(slot.id);
            self.mark_started(i, placement, out);
        }
    }

    pub(super) fn mark_started(&mut self, i: usize, placement: Placement, out: &mut Vec<Action>) {
        let slot = *self.queue.get(i);
        self.queue.remove_at(i);
        if !slot.reserved {
            self.count_unreserved(slot.procs, -1);
        }
        if let Some(e) = self.jobs.get_mut(&slot.id) {
            e.state = State::Running(placement);
        }
        out.push(Action::Start {
            job: slot.id,
            procs: slot.procs,
            domain: placement.domain,
        });
    }

    pub(super) fn start_now(&mut self, i: usize, domain: Domain, now: Time, out: &mut Vec<Action>) {
        let slot = *self.queue.get(i);
        let end = now + slot.estimate;
        self.profile_mut(domain).take(now, end, slot.procs);
        self.hold_licences(slot.id, now, end, true);
        self.mark_started(
            i,
            Placement {
                domain,
                start: now,
                end,
            },
            out,
        );
    }

    pub(super) fn reserve(&mut self, i: usize, now: Time, out: &mut Vec<Action>) -> bool {
        let slot = *self.queue.get(i);
        // Without backfilling no job starts before one ahead of it: its reservation is no
        // earlier than the last one made (only a forecast's copy reserves under such a
        // policy, and it reserves every waiting job).
        let from = match self.policy.backfill {
            BackfillChoice::None => self
                .reserved
                .last()
                .and_then(|&ahead| self.reservation_of(ahead))
                .map_or(now, |p| p.start.max(now)),
            _ => now,
        };
        let Some(p) = self.earliest(slot.id, from) else {
            return false;
        };
        self.profile_mut(p.domain).take(p.start, p.end, slot.procs);
        self.hold_licences(slot.id, p.start, p.end, true);
        self.queue.set_reserved(i, true);
        self.count_unreserved(slot.procs, -1);
        self.reserved.push(slot.id);
        self.set_reservation(slot.id, p);
        let version = self.pool.version();
        self.set_checked(slot.id, version);
        out.push(Action::Reserve {
            job: slot.id,
            start: p.start,
        });
        true
    }

    pub(super) fn walk(&mut self, now: Time, out: &mut Vec<Action>) {
        let depth = self.policy.reservation_depth;
        let backfill = self.policy.backfill;
        let cap = self.policy.overtake_cap;
        let plain = self.admin.is_empty();
        let mut free_now = self.pool.free_at(now);
        // The most processors free now in any one domain: no waiting job larger than this
        // can start, wherever it may run.
        let free_anywhere = |s: &Self| {
            s.admin
                .values()
                .map(|a| a.profile.free_at(now))
                .fold(s.pool.free_at(now), i64::max)
        };
        let mut free_any = if plain { free_now } else { free_anywhere(self) };
        // Computed on first need and after every change of the pool: most passes never need
        // it because no waiting job is small enough.
        let mut horizon = std::mem::take(&mut self.horizon);
        let mut horizon_valid = false;
        self.skipped.clear();
        let mut collect_from = None;
        let mut shortest_from = None;
        // A job the walk passed over without starting or reserving it (it could not be
        // reserved): the backfill then cannot take every unreserved job as a candidate.
        let mut left_behind = false;
        let spf = backfill == BackfillChoice::FirstFit
            && self.policy.backfill_order == BackfillOrder::Spf;
        let mut smallest = self.smallest_unreserved();
        let mut guard = Guard::default();
        // Once no more reservations can be made, a plain first-fit pass looks only for jobs
        // that fit now, so it skips every block whose minima cannot fit.
        let can_skip = plain && backfill == BackfillChoice::FirstFit && cap.is_none();
        // Where the walk stopped before the end of the queue, blocked by a job it may not
        // pass: the jobs after it bound to a reservation may still start there.
        let mut blocked_at = None;
        let mut i = self.queue.range().start;
        while i < self.queue.range().end {
            let reservations_full = self.reserved.len() as u64 >= u64::from(depth);
            if smallest > free_any && reservations_full {
                break; // nothing can start and nothing more can be reserved
            }
            if smallest == i64::MAX {
                break; // every waiting job holds a reservation: nothing to start or reserve
            }
            if i % BLOCK == 0 && self.queue.block_minima(i) == EMPTY {
                i += BLOCK;
                continue; // no job of this block is waiting without a reservation
            }
            if spf && reservations_full {
                shortest_from = Some(i);
                break; // the rest is backfill, tried shortest plan first
            }
            if can_skip && reservations_full && i % BLOCK == 0 {
                let (procs, estimate) = self.queue.block_minima(i);
                let may_fit = i64::from(procs) <= free_now && {
                    if !horizon_valid {
                        self.pool.horizons(now, &mut horizon);
                        horizon_valid = true;
                    }
                    now + Dur(estimate) <= horizon.get(procs)
                };
                if !may_fit {
                    i += BLOCK;
                    continue;
                }
            }
            let pos = i;
            i += 1;
            let i = pos;
            let slot = *self.queue.get(i);
            if !slot.alive || slot.reserved {
                continue;
            }
            let domain = if plain {
                let fits = i64::from(slot.procs) <= free_now
                    && {
                        if !horizon_valid {
                            self.pool.horizons(now, &mut horizon);
                            horizon_valid = true;
                        }
                        now + slot.estimate <= horizon.get(slot.procs)
                    }
                    && (self.licences.is_empty() || self.licences_fit_now(slot.id, now));
                fits.then_some(Domain::Pool)
            } else {
                self.fits_now(slot.id, now)
            };
            // Without backfilling nothing passes a job that waits ahead (a reserved one: only
            // a forecast's copy reserves under such a policy).
            let in_order = backfill != BackfillChoice::None || self.reserved.is_empty();
            let domain = domain.filter(|_| in_order && self.guard_allows(&mut guard, slot.id, now));
            if let Some(domain) = domain {
                self.start_now(i, domain, now, out);
                self.guard_started(&mut guard, slot.id, now);
                free_now = self.pool.free_at(now);
                free_any = if plain { free_now } else { free_anywhere(self) };
                smallest = self.smallest_unreserved();
                horizon_valid = false;
                if let Some(cap) = cap {
                    if self.count_overtakes(cap) {
                        blocked_at = Some(i + 1);
                        break;
                    }
                }
                continue;
            }
            if (self.reserved.len() as u64) < u64::from(depth) && self.reserve(i, now, out) {
                guard = Guard::default();
                free_now = self.pool.free_at(now);
                free_any = if plain { free_now } else { free_anywhere(self) };
                smallest = self.smallest_unreserved();
                horizon_valid = false;
                continue;
            }
            match backfill {
                BackfillChoice::None => {
                    blocked_at = Some(i + 1);
                    break;
                }
                BackfillChoice::FirstFit => {
                    left_behind = true;
                    if let Some(cap) = cap {
                        if self.overtaken(slot.id) >= cap {
                            blocked_at = Some(i + 1);
                            break;
                        }
                        self.skipped.push(slot.id);
                    }
                }
                BackfillChoice::BestFit | BackfillChoice::Greedy => {
                    collect_from = Some(i);
                    break;
                }
            }
        }
        self.horizon = horizon;
        if let Some(from) = blocked_at {
            self.start_bound(from, now, out);
        }
        if let Some(from) = collect_from {
            self.backfill_by_metric(from, now, out);
        }
        if let Some(from) = shortest_from {
            if left_behind {
                self.backfill_shortest(from, now, guard, out);
            } else {
                self.backfill_shortest_indexed(from, now, guard, out);
            }
        }
    }

    /// Starts the waiting jobs from queue position `from` on that are bound to a reservation
    /// whose window has begun and has room for them now. The queue ahead of them waits for
    /// the pool, whose processors they do not use: the reservation set its own aside for
    /// them. Above all a global job's part, whose siblings on other clusters start at the
    /// same instant; under FCFS it waited behind the local queue's head for ever.
    fn start_bound(&mut self, from: usize, now: Time, out: &mut Vec<Action>) {
        if self.admin.is_empty() || self.queue.is_empty() {
            return;
        }
        for i in from.max(self.queue.range().start)..self.queue.range().end {
            let slot = *self.queue.get(i);
            if !slot.alive || slot.reserved {
                continue;
            }
            let job = &self.jobs[&slot.id].job;
            let Some(r) = job.reservation else {
                continue;
            };
            let open = self
                .admin
                .get(&r)
                .is_some_and(|a| a.res.window.start <= now && now < a.res.window.end);
            let domain = Domain::Reservation(r);
            let fits = open
                && self.profile(domain).fits(now, job.procs, job.plan())
                && self.licences_fit_now(slot.id, now);
            if fits {
                self.start_now(i, domain, now, out);
            }
        }
    }
}
