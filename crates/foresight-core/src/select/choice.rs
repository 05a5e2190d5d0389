//! The choice among the runs covering a window: the `P` cheapest (cost of the part used),
//! then the faster, then by processor id; and what a run's part costs.

use super::request::SlotRequest;
use super::selection::{Selection, UsedSlot};
use super::{SlotPlan, NONE};
use crate::time::{Dur, Time};

impl SlotPlan {
    /// Cost of using the run that begins with slot `first` on `[t0, t1)` (the run covers
    /// it), and the pieces used.
    fn run_cost(
        &self,
        first: u32,
        t0: Time,
        t1: Time,
        pieces: Option<(&mut Vec<UsedSlot>, &mut Vec<u32>)>,
    ) -> f64 {
        let mut cost = 0.0;
        let mut i = first;
        // The run is contiguous from its first slot past t1, so the slot at the last mark
        // before t0, if the run holds it, is a nearer place to start.
        if self.n_marks > 0 && t0 > self.mark_base {
            let c = (((t0.secs() - self.mark_base.secs()) / self.mark_step) as usize)
                .min(self.n_marks - 1);
            let p = self.slots[first as usize].processor as usize;
            let j = self.marks[c * self.processors.len() + p];
            if j != NONE && self.slots[j as usize].start >= self.slots[first as usize].start {
                i = j;
            }
        }
        let mut out = pieces;
        while i != NONE {
            let s = self.slots[i as usize];
            let (a, b) = (s.start.max(t0), s.end.min(t1));
            if a < b {
                cost += s.cost * (b - a).as_secs() as f64;
                if let Some((used, cut_from)) = out.as_mut() {
                    used.push(UsedSlot {
                        processor: s.processor,
                        start: a,
                        end: b,
                        cost: s.cost,
                    });
                    cut_from.push(i);
                }
            }
            if s.end >= t1 {
                break;
            }
            i = self.next[i as usize];
        }
        cost
    }

    /// Picks `procs` of the covering runs, given as `(processor, first slot)`: cheapest
    /// first, then faster, then by processor id.
    pub(super) fn choose(
        &self,
        req: &SlotRequest,
        dur: Dur,
        t0: Time,
        covering: &[(u32, u32)],
    ) -> Option<Selection> {
        let t1 = t0 + dur;
        let mut ranked: Vec<(f64, f64, u32, u32)> = covering
            .iter()
            .map(|&(p, first)| {
                (
                    self.run_cost(first, t0, t1, None),
                    -self.processors[p as usize].speed,
                    p,
                    first,
                )
            })
            .collect();
        if ranked.len() < req.procs as usize {
            return None;
        }
        let id = |p: u32| self.id_rank[p as usize];
        let rule = |a: &(f64, f64, u32, u32), b: &(f64, f64, u32, u32)| {
            a.0.total_cmp(&b.0)
                .then(a.1.total_cmp(&b.1))
                .then_with(|| id(a.2).cmp(&id(b.2)))
        };
        // Only the first P by the rule matter: partition, then order just those.
        let p = req.procs as usize;
        if ranked.len() > p {
            ranked.select_nth_unstable_by(p - 1, rule);
            ranked.truncate(p);
        }
        ranked.sort_by(rule);
        let slowest = ranked.iter().map(|x| -x.1).fold(f64::INFINITY, f64::min);
        let end = t0 + Dur((req.walltime.as_secs() as f64 / slowest).ceil() as i64);
        let mut slots = Vec::new();
        let mut cut_from = Vec::new();
        let mut cost = 0.0;
        let mut processors = Vec::with_capacity(ranked.len());
        for &(_, _, p, first) in &ranked {
            cost += self.run_cost(first, t0, end, Some((&mut slots, &mut cut_from)));
            processors.push(p);
        }
        Some(Selection {
            start: t0,
            end,
            cost,
            processors,
            slots,
            cut_from,
        })
    }
}
