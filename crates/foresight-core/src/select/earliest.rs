//! The earliest-window walk: heads of runs in order of start (list A, by tiers, with the
//! pieces of commits), counted runs un-counted as list B passes their ends.

use super::hot::Hot;
use super::memo::WalkState;
use super::request::SlotRequest;
use super::selection::Selection;
use super::tier::{mask, TierHeads};
use super::{SlotPlan, NONE};
use crate::time::{Dur, Time};

impl SlotPlan {
    /// The earliest window for this level that starts no later than `limit`, and its
    /// cheapest choice.
    ///
    /// This is the linear walk of the module docs, fused into one pass. List A gives the
    /// slots in order of start (the tiers the job can afford, and their pieces, merged as
    /// the walk goes): a suitable slot whose adjacent predecessor is not suitable heads a
    /// run, whose end is found by following its adjacent suitable successors (each slot is
    /// followed at most once, as part of one run); the run is counted when it lasts until
    /// `t1 = t0 + T`. List B is the slots in order of end: a counted run is un-counted when B
    /// passes its end. Only counted runs matter to B, and a processor has at most one
    /// counted run at a time, so B compares each slot's end with its processor's counted run
    /// and moves only when a count is about to be read. The walk stops at the first `t0` with
    /// `M ≥ P`: it reads the plan only up to `t0` (A) and `t1` (B).
    ///
    /// No window starts before `lower` (a bound from past selections) nor is one wanted
    /// after `limit`.
    pub(super) fn earliest(
        &self,
        req: &SlotRequest,
        dur: Dur,
        proc_ok: &[bool],
        avail: &[Option<Time>],
        (lower, limit): (Time, Time),
        scratch: &mut WalkState,
    ) -> Option<Selection> {
        let lim = self.costs.partition_point(|&c| c <= req.max_price) as u32;
        let need = req.procs as usize;
        let (counted_end, counted_at) = scratch;
        if counted_at.len() != self.processors.len() {
            *counted_end = vec![Time::MIN; self.processors.len()];
            *counted_at = vec![NONE; self.processors.len()];
        }
        let mut walk = EarliestWalk {
            plan: self,
            dur,
            need,
            counted_end,
            counted_at,
            counted: Vec::new(),
            pending: Vec::new(),
            lim,
            bi: 0,
            extras_end: self.extra_end.range(..).peekable(),
            cur: Time::MIN,
            grew: false,
            limit,
        };
        // List A: heads in order of usable start. Runs starting before their cluster is
        // usable wait in one bucket per cluster until the pass reaches that time.
        let mut release: Vec<(Time, usize)> = avail
            .iter()
            .enumerate()
            .filter_map(|(c, a)| a.map(|t| (t, c)))
            .collect();
        release.sort_unstable();
        let mut buckets: Vec<Vec<u32>> = vec![Vec::new(); self.clusters.len()];
        let mut next_release = 0usize;
        // Heads of runs that could last `dur`: no other run is ever counted, and a start
        // at which none is counted is never the first window.
        let may_fit = |h: &Hot| {
            (h.rank < lim)
                & (h.prev_rank >= lim)
                & proc_ok[h.processor as usize]
                & (h.chain_end.secs().saturating_sub(h.start.secs()) >= dur.as_secs())
        };
        // No window starts before `lower`: begin at the last mark before it, once every
        // cluster is usable there, with the runs that contain the mark counted.
        let np = self.processors.len();
        let usable_from = avail.iter().flatten().max().copied().unwrap_or(Time::MIN);
        let mark = (self.n_marks > 0 && lower.secs() > self.mark_base.secs())
            .then(|| {
                (((lower.secs() - 1 - self.mark_base.secs()) / self.mark_step) as usize)
                    .min(self.n_marks - 1)
            })
            .filter(|&c| c > 0)
            .map(|c| (c, self.mark_time(c)))
            .filter(|&(_, x)| x >= usable_from);
        if let Some((c, x)) = mark {
            walk.cur = x;
            let t1 = x + Dur(1) + dur;
            // Processors whose chain through the mark may last until t1, found without
            // branching.
            let least = u32::try_from(dur.as_secs() + 1).unwrap_or(u32::MAX);
            let row = &self.mark_reach[c * np..(c + 1) * np];
            let lasting = row.chunks(64).enumerate().flat_map(|(k, chunk)| {
                // One bit per processor, 64 at a time (8 bytes of 8, which compiles to
                // vector compares), then the set bits.
                let lasts = |&reach: &u32| reach >= least;
                let mut bits = match <&[u32; 64]>::try_from(chunk) {
                    Ok(chunk) => chunk
                        .chunks_exact(8)
                        .enumerate()
                        .fold(0u64, |m, (b, byte)| m | (mask(byte, lasts) << (8 * b))),
                    Err(_) => mask(chunk, lasts),
                };
                std::iter::from_fn(move || {
                    (bits != 0).then(|| {
                        let i = bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        k * 64 + i
                    })
                })
            });
            for p in lasting {
                if !proc_ok[p] {
                    continue;
                }
                let j = self.marks[c * np + p];
                if j == NONE {
                    continue;
                }
                let h = &self.hot[j as usize];
                if h.rank >= lim {
                    continue;
                }
                let end = if h.chain_max < lim {
                    h.chain_end
                } else {
                    let mut last = j;
                    while self.hot[last as usize].next_rank < lim {
                        last = self.next[last as usize];
                    }
                    self.hot[last as usize].end
                };
                if end >= t1 {
                    walk.count(p as u32, j, end);
                }
            }
        }
        // Heads in order of start, from the second after the mark: one source per tier of
        // list A that holds a slot the job can afford.
        let from = mark.map(|(_, x)| x + Dur(1));
        let tiers = match lim {
            0 => 0,
            l => self.tier_of[l as usize - 1] as usize + 1,
        };
        let mut sources: Vec<TierHeads<'_>> =
            (0..tiers).map(|t| TierHeads::new(self, t, from)).collect();
        for s in &mut sources {
            s.next_listed(self, lim, dur.as_secs(), proc_ok);
            s.next_piece(self, &may_fit);
        }
        let outcome = loop {
            // The next head: the earliest of the sources' next ones.
            let next = sources
                .iter()
                .enumerate()
                .flat_map(|(t, s)| [(s.listed, 0, t), (s.piece, 1, t)])
                .filter_map(|(head, piece, t)| head.map(|(st, k)| (st, piece, t, k)))
                .min();
            let (k, st) = next.map_or((None, Time::MAX), |(st, _, _, k)| (Some(k), st));
            let mut stop = None;
            while stop.is_none()
                && next_release < release.len()
                && (k.is_none() || release[next_release].0 <= st)
            {
                let (t, c) = release[next_release];
                next_release += 1;
                for j in std::mem::take(&mut buckets[c]) {
                    if let Some(out) = walk.join(t, j, lim) {
                        stop = Some(out);
                        break;
                    }
                }
            }
            if let Some(out) = stop {
                break out;
            }
            let Some((_, piece, t, k)) = next else {
                break walk.finish();
            };
            if piece == 0 {
                sources[t].next_listed(self, lim, dur.as_secs(), proc_ok);
            } else {
                sources[t].next_piece(self, &may_fit);
            }
            let c = self.cluster_of[self.hot[k as usize].processor as usize] as usize;
            let from = avail[c].expect("invariant: usable slots are reachable");
            if st < from {
                buckets[c].push(k);
                continue;
            }
            if let Some(out) = walk.join(st, k, lim) {
                break out;
            }
        };
        let covering = std::mem::take(&mut walk.counted);
        // Leave the shared state as found: no processor counted.
        for &(p, _) in &covering {
            walk.counted_at[p as usize] = NONE;
        }
        self.choose(req, dur, outcome?, &covering)
    }
}

/// State of [`SlotPlan::earliest`]'s walk.
struct EarliestWalk<'a> {
    plan: &'a SlotPlan,
    dur: Dur,
    need: usize,
    /// Per processor: end of its counted run (meaningful while `counted_at` is set).
    counted_end: &'a mut Vec<Time>,
    /// Per processor: position of its counted run in `counted`, or NONE (all NONE between
    /// walks).
    counted_at: &'a mut Vec<u32>,
    /// Counted runs: (processor, first slot).
    counted: Vec<(u32, u32)>,
    /// Runs of several slots that joined since the last count was read, (processor, first
    /// slot): their end is found only when a count is read, as following a run's slots
    /// reads memory far ahead of the pass.
    pending: Vec<(u32, u32)>,
    /// The request's rank limit.
    lim: u32,
    /// Positions in list B: slots of list B, pieces of later commits.
    bi: usize,
    extras_end: std::iter::Peekable<std::collections::btree_set::Range<'a, (Time, Time, u32)>>,
    /// The candidate start being filled, and whether a run was counted at it.
    cur: Time,
    grew: bool,
    /// No window starts later.
    limit: Time,
}

impl EarliestWalk<'_> {
    fn uncount(&mut self, p: u32) {
        let at = self.counted_at[p as usize];
        self.counted_at[p as usize] = NONE;
        self.counted.swap_remove(at as usize);
        if let Some(&(moved, _)) = self.counted.get(at as usize) {
            self.counted_at[moved as usize] = at;
        }
    }

    /// Moves list B to `t1`: every counted run ending before it no longer covers.
    fn advance_b(&mut self, t1: Time) {
        let plan = self.plan;
        // What B would pass is found by bisection; when fewer runs are counted than B would
        // pass, looking at the counted runs themselves un-counts the same ones.
        let main_to = self.bi + plan.by_end_time[self.bi..].partition_point(|&e| e < t1);
        // The pieces of commits are assumed spread over time like those of list B.
        let main_passed = main_to - self.bi;
        let passed = main_passed + main_passed * plan.extra_end.len() / plan.order.len().max(1);
        if self.counted.len() < passed {
            let mut i = 0;
            while i < self.counted.len() {
                let p = self.counted[i].0;
                if self.counted_end[p as usize] < t1 {
                    // The last counted run moves into place `i`.
                    self.uncount(p);
                } else {
                    i += 1;
                }
            }
            self.bi = main_to;
            self.extras_end = plan.extra_end.range((t1, Time::MIN, 0)..).peekable();
            return;
        }
        loop {
            let main = plan.by_end_time.get(self.bi).copied().unwrap_or(Time::MAX);
            let extra = self
                .extras_end
                .peek()
                .map_or(Time::MAX, |&&(end, _, _)| end);
            let (p, end) = if main <= extra {
                if main >= t1 {
                    return;
                }
                self.bi += 1;
                (plan.by_end_proc[self.bi - 1], main)
            } else {
                if extra >= t1 {
                    return;
                }
                let Some(&(_, _, k)) = self.extras_end.next() else {
                    return;
                };
                (plan.hot[k as usize].processor, extra)
            };
            if self.counted_end[p as usize] == end && self.counted_at[p as usize] != NONE {
                self.uncount(p);
            }
        }
    }

    /// Counts run `(p, k)`, which lasts until `end`, past the current window's end.
    fn count(&mut self, p: u32, k: u32, end: Time) {
        if self.counted_at[p as usize] != NONE {
            // An earlier run of the processor, which ended by the current start: B has not
            // been moved past it yet.
            self.uncount(p);
        }
        self.counted_at[p as usize] = self.counted.len() as u32;
        self.counted_end[p as usize] = end;
        self.counted.push((p, k));
    }

    /// Is the candidate being filled a window? Reads the count after moving B and placing
    /// the pending runs.
    fn check(&mut self) -> bool {
        if !self.grew || self.counted.len() + self.pending.len() < self.need {
            return false;
        }
        let t1 = self.cur + self.dur;
        self.advance_b(t1);
        let hot = &self.plan.hot;
        for (p, k) in std::mem::take(&mut self.pending) {
            let mut last = k;
            while hot[last as usize].next_rank < self.lim {
                last = self.plan.next[last as usize];
            }
            // It joined no later than `cur`; it covers the window iff it lasts until t1.
            let end = hot[last as usize].end;
            if end >= t1 {
                self.count(p, k, end);
            }
        }
        self.counted.len() >= self.need
    }

    /// The run headed by slot `k` joins at its usable start `t` (nondecreasing from call to
    /// call). `Some(outcome)` ends the walk.
    fn join(&mut self, t: Time, k: u32, lim: u32) -> Option<Option<Time>> {
        if t != self.cur {
            if self.check() {
                return Some(Some(self.cur));
            }
            if t > self.limit {
                return Some(None);
            }
            self.grew = false;
            self.cur = t;
        }
        let h = self.plan.hot[k as usize];
        let t1 = t + self.dur;
        if h.next_rank >= lim {
            // A run of one slot.
            if h.end >= t1 {
                self.count(h.processor, k, h.end);
                self.grew = true;
            }
        } else {
            let (end, max) = (h.chain_end, h.chain_max);
            if end < t1 {
                // Not even its chain lasts long enough.
            } else if max < lim {
                // The whole chain is the run.
                self.count(h.processor, k, end);
                self.grew = true;
            } else {
                self.pending.push((h.processor, k));
                self.grew = true;
            }
        }
        None
    }

    /// The end of list A.
    fn finish(&mut self) -> Option<Time> {
        self.check().then_some(self.cur)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::fixture::{procs, req, slot};
    use crate::select::Criterion;

    /// ```text
    /// a: [0 ---- 50)[50 ------ 200)     (two adjacent slots: one run)
    /// b:      [30 ------------ 200)
    /// c: [0 - 40)      [100 -- 200)
    /// ```
    /// Two processors for 100 s: at 0 only a; at 30 a and b cover [30, 130).
    #[test]
    fn earliest_start_merges_adjacent_slots() {
        let plan = SlotPlan::new(
            procs(&[("a", "x", 1.0), ("b", "x", 1.0), ("c", "x", 1.0)]),
            [
                slot("a", 0, 50, 1.0),
                slot("a", 50, 200, 2.0),
                slot("b", 30, 200, 1.0),
                slot("c", 0, 40, 1.0),
                slot("c", 100, 200, 1.0),
            ],
        )
        .unwrap();
        let sel = plan
            .select(&req(2, 100, Criterion::EarliestStart), &[])
            .unwrap();
        assert_eq!((sel.start, sel.end), (Time(30), Time(130)));
        // a costs 20×1 + 80×2 = 180, b costs 100.
        assert_eq!(sel.cost, 280.0);
        assert_eq!(sel.processors, vec![1, 0]);
        assert_eq!(sel.slots.len(), 3);
    }
}
