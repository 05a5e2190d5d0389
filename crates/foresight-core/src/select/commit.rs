//! Commits: a selection's time taken out of the plan, the pieces of commits folded into
//! lists A and B (re-indexing), and renumbering from scratch (rebuild).

use super::hot::{seconds_between, Hot, Scan, NEVER};
use super::mark::mark_range;
use super::selection::Selection;
use super::tier::block_reach;
use super::{Slot, SlotPlan, NONE};
use crate::time::Time;
use itertools::Itertools;

impl SlotPlan {
    /// Takes the parts a selection used out of the plan: each slot they were cut from is
    /// replaced by what is left before and after. Amortized cost: the pieces go to small
    /// side lists, merged in by walks, and the plan is re-indexed once they grow large.
    pub fn commit(&mut self, sel: &Selection) {
        for (k, u) in sel.slots.iter().enumerate() {
            let holds = |i: u32| {
                let s = self.slots.get(i as usize);
                self.alive.get(i as usize) == Some(&true)
                    && s.is_some_and(|s| {
                        s.processor == u.processor && s.start <= u.start && u.end <= s.end
                    })
            };
            let mut i = match sel.cut_from.get(k) {
                Some(&i) if holds(i) => i,
                _ => self.head[u.processor as usize],
            };
            while i != NONE {
                let s = self.slots[i as usize];
                if s.start <= u.start && u.end <= s.end {
                    break;
                }
                i = self.next[i as usize];
            }
            if i == NONE {
                debug_assert!(false, "a used part lies inside a live slot");
                continue;
            }
            self.split(i, u.start, u.end);
            self.reach
                .touch(self.cluster_of[u.processor as usize], u.processor);
        }
        if self.dead + self.extra_end.len() > 64.max(self.order.len() / 4) {
            if self.slots.len() > 2 * self.live {
                self.rebuild();
            } else {
                self.reindex();
            }
        }
    }

    /// Replaces slot `i` by its parts outside `[from, to)`. The part after keeps the slot's
    /// number (its end, and so its place in list B and the marks after the used part, do
    /// not change; it moves in list A); the part before gets a new one.
    fn split(&mut self, i: u32, from: Time, to: Time) {
        let s = self.slots[i as usize];
        let h = self.hot[i as usize];
        let p = s.processor as usize;
        let kept = to < s.end;
        let tier = self.tier_of[h.rank as usize];
        // The slot leaves list A where it stands: its start changes, or it is gone.
        match self.position[i as usize] {
            NONE => {
                let listed = self.extra_start.remove(&(tier, s.start, s.end, i));
                debug_assert!(listed, "invariant: a live slot out of list A is a piece");
            }
            at => {
                self.scan[at as usize].rank = NEVER;
                self.position[i as usize] = NONE;
            }
        }
        self.dead += 1;
        if !kept {
            self.alive[i as usize] = false;
            self.hot[i as usize].rank = NEVER;
            self.live -= 1;
        }
        let (before, after) = (self.prev[i as usize], self.next[i as usize]);
        // The neighbours that touched the slot now touch a piece of the same cost, or the
        // used part (nothing free).
        if before != NONE && self.slots[before as usize].end == s.start && from <= s.start {
            self.set_hot(before, |h| h.next_rank = NEVER);
        }
        if after != NONE && self.slots[after as usize].start == s.end && to >= s.end {
            self.set_hot(after, |h| h.prev_rank = NEVER);
        }
        // The chain through the slot now ends at the used part.
        let (end, mut max) = if from > s.start {
            (from, Some(h.rank))
        } else {
            (s.start, None)
        };
        let mut j = before;
        let mut touching = s.start;
        while j != NONE && self.slots[j as usize].end == touching {
            let r = self.hot[j as usize].rank;
            let m = max.map_or(r, |m| m.max(r));
            max = Some(m);
            let low = self.low_end[j as usize].min(end);
            self.low_end[j as usize] = low;
            let h = &mut self.hot[j as usize];
            h.chain_end = end;
            h.chain_max = m;
            let start = h.start;
            if let Some(scan) = self.scan.get_mut(self.position[j as usize] as usize) {
                scan.reach = seconds_between(start, end);
                scan.reach_low = seconds_between(start, low);
            }
            touching = self.slots[j as usize].start;
            j = self.prev[j as usize];
        }
        let mut last = before;
        let mut piece_before = NONE;
        if from > s.start {
            let k = self.slots.len() as u32;
            piece_before = k;
            self.slots.push(Slot { end: from, ..s });
            self.hot.push(Hot {
                start: s.start,
                end: from,
                processor: s.processor,
                rank: h.rank,
                prev_rank: h.prev_rank,
                next_rank: NEVER,
                chain_end: from,
                chain_max: h.rank,
            });
            // Its no-dearer slots end where it does.
            self.low_end.push(from);
            self.alive.push(true);
            self.live += 1;
            self.position.push(NONE);
            self.prev.push(last);
            self.next.push(NONE);
            self.link_after(last, k, p);
            last = k;
            self.extra_start.insert((tier, s.start, from, k));
            self.extra_end.insert((from, s.start, k));
        }
        if kept {
            // The part after continues as the slot did.
            self.slots[i as usize].start = to;
            let h = &mut self.hot[i as usize];
            h.start = to;
            h.prev_rank = NEVER;
            self.prev[i as usize] = last;
            self.link_after(last, i, p);
            self.extra_start.insert((tier, to, s.end, i));
        } else {
            if last == NONE {
                self.head[p] = after;
            } else {
                self.next[last as usize] = after;
            }
            if after != NONE {
                self.prev[after as usize] = last;
            }
        }
        // Marks from the chain's start to the used part's end: the chain through them now
        // ends at the used part, they fall inside it, or the piece before now holds them.
        let np = self.processors.len();
        let (lo, hi) = mark_range(self.mark_base, self.mark_step, self.n_marks, touching, to);
        for c in lo..hi {
            let x = self.mark_time(c);
            if x >= s.start {
                self.marks[c * np + p] = if x < from { piece_before } else { NONE };
            }
            let old = self.mark_reach[c * np + p];
            let new = if x < from {
                old.min(seconds_between(x, from))
            } else {
                0
            };
            if new != old {
                self.mark_reach[c * np + p] = new;
                let row =
                    (c * self.speeds.len() + self.speed_class[p] as usize) * (self.n_marks + 1);
                let band = |r: u32| (r as usize / self.mark_step as usize).min(self.n_marks);
                if old > 0 {
                    self.mark_bands[row + band(old)] -= 1;
                }
                if new > 0 {
                    self.mark_bands[row + band(new)] += 1;
                }
            }
        }
    }

    /// Makes `k` follow `last` in processor `p`'s list (or head it).
    fn link_after(&mut self, last: u32, k: u32, p: usize) {
        if last == NONE {
            self.head[p] = k;
        } else {
            self.next[last as usize] = k;
        }
    }

    /// Changes slot `i`'s walk data.
    fn set_hot(&mut self, i: u32, f: impl Fn(&mut Hot)) {
        let h = &mut self.hot[i as usize];
        f(h);
        if let Some(s) = self.scan.get_mut(self.position[i as usize] as usize) {
            s.rank = h.rank;
            s.prev_rank = h.prev_rank;
        }
    }

    /// Folds the pieces of commits into lists A and B, leaving slot numbers (and so the
    /// marks) as they are: two merges of sorted lists.
    fn reindex(&mut self) {
        let alive = &self.alive;
        let slots = &self.slots;
        let hot = &self.hot;
        let low_end = &self.low_end;
        let tiers = self.tier_at.len() - 1;
        let (old_order, old_starts, old_scan) = (&self.order, &self.order_start, &self.scan);
        // List A (with what the walks read of it) and list B are independent: both are
        // built side by side. The slots that keep their place are read in sequence from
        // the lists as they stand (their start, end and walk data are current there).
        let list_a = || {
            // (tier, start, number, old position or NONE), in order of tier, start and
            // end, for list A and for the pieces: merge them, list A first on ties.
            let kept = self.tier_at.windows(2).enumerate().flat_map(|(t, w)| {
                self.placed(w[0]..w[1])
                    .map(move |at| (t as u32, old_starts[at], old_order[at], at as u32))
            });
            let pieces = self
                .extra_start
                .iter()
                .map(|&(t, start, _, i)| (t, start, i, NONE));
            let end = |i: u32| slots[i as usize].end;
            let merged = kept.merge_by(pieces, |a, b| {
                (a.0, a.1)
                    .cmp(&(b.0, b.1))
                    .then_with(|| end(a.2).cmp(&end(b.2)))
                    .is_le()
            });
            let len = self.order.len() + self.extra_start.len();
            let (mut order, mut starts, mut scan) = (
                Vec::with_capacity(len),
                Vec::with_capacity(len),
                Vec::with_capacity(len),
            );
            let mut at = vec![0; tiers + 1];
            for (t, start, i, was) in merged {
                order.push(i);
                starts.push(start);
                scan.push(match was {
                    NONE => Scan::of(&hot[i as usize], low_end[i as usize]),
                    was => old_scan[was as usize],
                });
                at[t as usize + 1] = order.len();
            }
            // Tiers left empty begin where the one before ends.
            for t in 1..=tiers {
                at[t] = at[t].max(at[t - 1]);
            }
            let reach = block_reach(&scan);
            (order, starts, scan, reach, at)
        };
        let list_b = || {
            // Both are in order of end (a commit may change the start of a slot of list B,
            // never its end): merge them, list B first on ties.
            let kept = self
                .by_end
                .iter()
                .zip(&self.by_end_time)
                .zip(&self.by_end_proc)
                .map(|((&i, &end), &p)| (end, i, p));
            let pieces = self
                .extra_end
                .iter()
                .map(|&(end, _, i)| (end, i, slots[i as usize].processor));
            let len = self.by_end.len() + self.extra_end.len();
            let (mut ids, mut ends, mut procs) = (
                Vec::with_capacity(len),
                Vec::with_capacity(len),
                Vec::with_capacity(len),
            );
            for (end, i, p) in kept.merge_by(pieces, |a, b| a.0 <= b.0) {
                if alive[i as usize] {
                    ids.push(i);
                    ends.push(end);
                    procs.push(p);
                }
            }
            (ids, ends, procs)
        };
        let ((order, starts, scan, reach, at), (by_end, ends, procs)) = rayon::join(list_a, list_b);
        // Every slot placed in the old list A is placed in the new one: only the new places
        // are written.
        for (at, &i) in order.iter().enumerate() {
            self.position[i as usize] = at as u32;
        }
        self.order = order;
        self.tier_at = at;
        self.order_start = starts;
        self.scan = scan;
        self.block_reach = reach;
        self.by_end = by_end;
        self.by_end_time = ends;
        self.by_end_proc = procs;
        self.extra_start.clear();
        self.extra_end.clear();
        self.dead = 0;
    }

    /// Re-indexes and renumbers the live slots from scratch, dropping the replaced ones.
    fn rebuild(&mut self) {
        // The live slots in order of start, and by end (list B and its pieces).
        let mut position = vec![NONE; self.slots.len()];
        let mut live: Vec<Slot> = Vec::with_capacity(self.live);
        for i in self.in_start_order() {
            position[i as usize] = live.len() as u32;
            live.push(self.slots[i as usize]);
        }
        let end_order: Vec<u32> = self
            .by_end
            .iter()
            .copied()
            .chain(self.extra_end.iter().map(|&(_, _, k)| k))
            .map(|i| position[i as usize])
            .filter(|&q| q != NONE)
            .collect();
        let processors = std::mem::take(&mut self.processors);
        let clusters = std::mem::take(&mut self.clusters);
        let cluster_of = std::mem::take(&mut self.cluster_of);
        let bounds = std::mem::take(&mut self.bounds);
        let usable = std::mem::take(&mut self.usable);
        let walk_states = std::mem::take(&mut self.walk_states);
        // Renumbering keeps every processor's slots: its reach stays as it was.
        let reach = std::mem::take(&mut self.reach);
        *self = Self::from_slots(processors, clusters, cluster_of, live, Some(end_order))
            .expect("invariant: splitting never makes slots overlap");
        self.bounds = bounds;
        self.usable = usable;
        self.walk_states = walk_states;
        self.reach = reach;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::fixture::{random_plan, req, Lcg};
    use crate::select::Criterion;
    use crate::time::Dur;

    /// Many commits in a row go through both kinds of re-indexing (folding the pieces into
    /// lists A and B, and renumbering from scratch); after every commit the plan answers
    /// every criterion exactly as a plan built afresh from its live slots.
    #[test]
    fn commits_and_re_indexing_keep_answers_those_of_a_fresh_plan() {
        let mut rng = Lcg(7);
        // Seven prices: the tiers of list A group several.
        let mut plan = random_plan(&mut rng, 8, 2, 40, 5, 7);
        let mut next = |n: u64| rng.next(n);
        let (mut folded, mut renumbered) = (false, false);
        for k in 0..1000 {
            let criterion = [
                Criterion::EarliestStart,
                Criterion::EarliestFinish,
                Criterion::MinCost,
            ][k % 3]
                .clone();
            let mut r = req(1 + next(3) as u32, 1 + next(30) as i64, criterion);
            r.max_price = 1.0 + next(7) as f64;
            let staging = [Some(Dur(0)), Some(Dur(next(4) as i64))];
            let fresh = SlotPlan::new(
                plan.processors().to_vec(),
                plan.live_slots().map(|s| {
                    (
                        plan.processors()[s.processor as usize].id.clone(),
                        s.start,
                        s.end,
                        s.cost,
                    )
                }),
            )
            .unwrap();
            let (a, b) = (plan.select(&r, &staging), fresh.select(&r, &staging));
            match (&a, &b) {
                (Ok(x), Ok(y)) => assert_eq!(
                    (x.start, x.end, x.cost, &x.slots),
                    (y.start, y.end, y.cost, &y.slots),
                    "request {k}"
                ),
                (Err(_), Err(_)) => {}
                _ => panic!("request {k}: committed {a:?}, fresh {b:?}"),
            }
            let Ok(sel) = a else { continue };
            let (pieces, numbered) = (plan.extra_start.len(), plan.slots.len());
            plan.commit(&sel);
            folded |= pieces > 0 && plan.extra_start.is_empty() && plan.slots.len() >= numbered;
            renumbered |= plan.slots.len() < numbered;
        }
        assert!(folded, "no commit folded the pieces into the lists");
        assert!(
            renumbered,
            "no commit renumbered the slots: {} numbered, {} live",
            plan.slots.len(),
            plan.live
        );
    }
}
