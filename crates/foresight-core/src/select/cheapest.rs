//! The minimum-cost search: suitable slots grouped into runs, and candidate windows in
//! order of start with the runs covering each.

use super::request::SlotRequest;
use super::selection::Selection;
use super::{SlotPlan, NONE};
use crate::time::{Dur, Time};
use itertools::Itertools;
use std::sync::Arc;

/// A run of adjacent suitable slots of one processor.
#[derive(Clone, Copy, Debug)]
pub(super) struct Run {
    processor: u32,
    /// First piece (slot index).
    first: u32,
    /// Usable start: the first piece's start, no earlier than the cluster's availability.
    start: Time,
    end: Time,
}

/// Per-call scratch, reused across levels.
pub(super) struct Walk {
    pub(super) runs: Vec<Run>,
    /// Run index of each slot, or NONE if the slot is unsuitable or unusable.
    pub(super) run_of: Vec<u32>,
    /// Processors usable at this level.
    pub(super) proc_ok: Arc<[bool]>,
}

impl SlotPlan {
    /// Groups suitable slots into runs for one level (processors at least `min_speed` fast,
    /// of cluster `only` if given).
    pub(super) fn build_runs(
        &self,
        req: &SlotRequest,
        suitable_proc: Option<&[bool]>,
        avail: &[Option<Time>],
        only: Option<usize>,
        min_speed: f64,
        walk: &mut Walk,
    ) {
        walk.runs.clear();
        walk.run_of.iter_mut().for_each(|r| *r = NONE);
        walk.proc_ok = self.usable_processors(suitable_proc, avail, only, min_speed);
        let proc_ok = &walk.proc_ok;
        let usable = |i: usize| {
            let s = &self.slots[i];
            proc_ok[s.processor as usize] && s.cost <= req.max_price
        };
        // In order of start a processor's earlier slot is always seen first.
        for i in self.in_start_order() {
            let i = i as usize;
            if !usable(i) {
                continue;
            }
            let p = self.prev[i];
            let continues = p != NONE
                && usable(p as usize)
                && self.slots[p as usize].end == self.slots[i].start;
            if continues {
                let r = walk.run_of[p as usize];
                walk.run_of[i] = r;
                walk.runs[r as usize].end = self.slots[i].end;
            } else {
                let s = &self.slots[i];
                let c = self.cluster_of[s.processor as usize] as usize;
                let from = avail[c].expect("invariant: usable slots are reachable");
                walk.run_of[i] = walk.runs.len() as u32;
                walk.runs.push(Run {
                    processor: s.processor,
                    first: i as u32,
                    start: s.start.max(from),
                    end: s.end,
                });
            }
        }
    }

    /// Runs in order of usable start: one pass in start order, with
    /// the runs that begin before their cluster is usable held back in one bucket per
    /// cluster and released when the pass reaches that cluster's usable time.
    fn runs_by_start<'a>(
        &'a self,
        walk: &'a Walk,
        avail: &'a [Option<Time>],
    ) -> impl Iterator<Item = u32> + 'a {
        let mut buckets: Vec<Vec<u32>> = vec![Vec::new(); self.clusters.len()];
        // Clusters by usable time, for releasing buckets in order.
        let mut release: Vec<(Time, usize)> = avail
            .iter()
            .enumerate()
            .filter_map(|(c, a)| a.map(|t| (t, c)))
            .collect();
        release.sort();
        let mut next_release = 0usize;
        let mut order = self.in_start_order();
        let mut out: std::collections::VecDeque<u32> = std::collections::VecDeque::new();
        std::iter::from_fn(move || loop {
            if let Some(r) = out.pop_front() {
                return Some(r);
            }
            // The next run head in start order, if any.
            let found = order.by_ref().find_map(|k| {
                let r = walk.run_of[k as usize];
                (r != NONE && walk.runs[r as usize].first == k).then_some(r)
            });
            let Some(r) = found else {
                // Flush what is held back, in order of release.
                while next_release < release.len() {
                    let c = release[next_release].1;
                    next_release += 1;
                    out.extend(buckets[c].drain(..));
                }
                return out.pop_front();
            };
            let run = walk.runs[r as usize];
            if self.slots[run.first as usize].start < run.start {
                // Usable only from its cluster's time: held back. (Once a bucket is released,
                // the pass is past that time, so no run joins it later.)
                buckets[self.cluster_of[run.processor as usize] as usize].push(r);
                continue;
            }
            while next_release < release.len() && release[next_release].0 <= run.start {
                let b = release[next_release].1;
                next_release += 1;
                out.extend(buckets[b].drain(..));
            }
            out.push_back(r);
        })
    }

    /// Runs in order of end: the global end-sorted list, keeping each run's last piece.
    fn runs_by_end<'a>(&'a self, walk: &'a Walk) -> impl Iterator<Item = u32> + 'a {
        let key = |i: u32| {
            let t = &self.slots[i as usize];
            (t.end, t.start, i)
        };
        let pieces = self.extra_end.iter().map(|&(_, _, i)| i);
        let merged = self
            .by_end
            .iter()
            .copied()
            .merge_by(pieces, move |&a, &b| key(a) <= key(b));
        merged.filter_map(move |i| {
            let r = walk.run_of[i as usize];
            if r == NONE {
                return None;
            }
            let n = self.next[i as usize];
            let last = n == NONE || walk.run_of[n as usize] != r;
            last.then_some(r)
        })
    }

    /// The cheapest window starting by the deadline, for this level.
    pub(super) fn cheapest(
        &self,
        req: &SlotRequest,
        dur: Dur,
        walk: &Walk,
        avail: &[Option<Time>],
    ) -> Option<Selection> {
        // The charge changes only where a window edge crosses a slot boundary, so besides
        // run starts the candidates are every slot start and every slot end minus the length.
        // Between two candidates the cheapest sum is concave in the start, so a deadline that
        // falls between them is a candidate too.
        let mut extra: Vec<Time> = req.deadline.into_iter().collect();
        for (i, &r) in walk.run_of.iter().enumerate() {
            if r == NONE {
                continue;
            }
            let from = walk.runs[r as usize].start;
            let s = &self.slots[i];
            extra.push(s.start.max(from));
            let back = s.end - dur;
            if back >= from {
                extra.push(back);
            }
        }
        extra.sort_unstable();
        extra.dedup();
        let mut windows = Windows::new(self, walk, avail, dur, extra);
        let mut best: Option<Selection> = None;
        while let Some(t0) = windows.next_feasible(req.procs as usize, req.deadline) {
            let covering: Vec<(u32, u32)> = windows
                .counted_runs()
                .iter()
                .map(|&r| (walk.runs[r as usize].processor, walk.runs[r as usize].first))
                .collect();
            if let Some(sel) = self.choose(req, dur, t0, &covering) {
                if best.as_ref().is_none_or(|b| sel.cost < b.cost) {
                    best = Some(sel);
                }
            }
        }
        best
    }
}

/// Candidate windows of one length, in order of start, with the runs covering each.
struct Windows<'a> {
    walk: &'a Walk,
    dur: Dur,
    by_start: std::iter::Peekable<Box<dyn Iterator<Item = u32> + 'a>>,
    by_end: std::iter::Peekable<Box<dyn Iterator<Item = u32> + 'a>>,
    /// Position in `counted_list` of each counted run, or NONE.
    slot_in_list: Vec<u32>,
    counted_list: Vec<u32>,
    /// Further candidate starts, sorted, besides run starts.
    extra: Vec<Time>,
    next_extra: usize,
}

impl<'a> Windows<'a> {
    fn new(
        plan: &'a SlotPlan,
        walk: &'a Walk,
        avail: &'a [Option<Time>],
        dur: Dur,
        extra: Vec<Time>,
    ) -> Windows<'a> {
        let a: Box<dyn Iterator<Item = u32> + 'a> = Box::new(plan.runs_by_start(walk, avail));
        let b: Box<dyn Iterator<Item = u32> + 'a> = Box::new(plan.runs_by_end(walk));
        Windows {
            walk,
            dur,
            by_start: a.peekable(),
            by_end: b.peekable(),
            slot_in_list: vec![NONE; walk.runs.len()],
            counted_list: Vec::new(),
            extra,
            next_extra: 0,
        }
    }

    fn uncount(&mut self, r: u32) {
        let k = self.slot_in_list[r as usize];
        if k == NONE {
            return;
        }
        self.counted_list.swap_remove(k as usize);
        if let Some(&moved) = self.counted_list.get(k as usize) {
            self.slot_in_list[moved as usize] = k;
        }
        self.slot_in_list[r as usize] = NONE;
    }

    /// Advances to the next candidate start with at least `need` covering runs (no later
    /// than `deadline`), or `None`.
    fn next_feasible(&mut self, need: usize, deadline: Option<Time>) -> Option<Time> {
        let runs = &self.walk.runs;
        loop {
            let run_start = self.by_start.peek().map(|&r| runs[r as usize].start);
            let extra = self.extra.get(self.next_extra).copied();
            let t0 = match (run_start, extra) {
                (None, None) => return None,
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) => a,
                (None, Some(b)) => b,
            };
            while self.extra.get(self.next_extra).is_some_and(|t| *t <= t0) {
                self.next_extra += 1;
            }
            if deadline.is_some_and(|d| t0 > d) {
                return None;
            }
            let t1 = t0 + self.dur;
            // Every run starting by t0 joins before the count is read.
            while let Some(&r) = self.by_start.peek() {
                let run = runs[r as usize];
                if run.start > t0 {
                    break;
                }
                self.by_start.next();
                if run.end >= t1 {
                    self.slot_in_list[r as usize] = self.counted_list.len() as u32;
                    self.counted_list.push(r);
                }
            }
            // Runs ending before t1 no longer cover the window.
            while let Some(&r) = self.by_end.peek() {
                if runs[r as usize].end >= t1 {
                    break;
                }
                self.by_end.next();
                self.uncount(r);
            }
            if self.counted_list.len() >= need {
                return Some(t0);
            }
        }
    }

    fn counted_runs(&self) -> &[u32] {
        &self.counted_list
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::fixture::{procs, req, slot};
    use crate::select::Criterion;

    #[test]
    fn min_cost_trades_time_for_money_within_the_deadline() {
        // Dear now, cheap later.
        let plan = SlotPlan::new(
            procs(&[("a", "x", 1.0)]),
            [slot("a", 0, 100, 5.0), slot("a", 100, 300, 1.0)],
        )
        .unwrap();
        let mut r = req(1, 100, Criterion::MinCost);
        let sel = plan.select(&r, &[]).unwrap();
        assert_eq!((sel.start, sel.cost), (Time(100), 100.0));
        // By 50 the cheapest start is the deadline itself: 50 s × 5 + 50 s × 1.
        r.deadline = Some(Time(50));
        let sel = plan.select(&r, &[]).unwrap();
        assert_eq!((sel.start, sel.cost), (Time(50), 300.0));
        r.max_price = 2.0;
        r.deadline = None;
        assert_eq!(plan.select(&r, &[]).unwrap().start, Time(100));
        r.max_price = 0.5;
        let err = plan.select(&r, &[]).unwrap_err();
        assert!(err.reason.contains("costs at most 0.5"), "{}", err.reason);
    }
}
