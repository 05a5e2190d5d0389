//! Backfill by a metric, the part BESTFIT and GREEDY share: the candidates that fit now on
//! their own, and the metric (processors, walltime or both) each maximizes.

use super::{Action, LocalScheduler};
use crate::policy::{BackfillChoice, BackfillMetric};
use crate::queue::QueueSlot;
use crate::time::Time;

impl LocalScheduler {
    pub(super) fn metric(&self, slot: &QueueSlot) -> i64 {
        match self.policy.metric {
            BackfillMetric::Procs => i64::from(slot.procs),
            BackfillMetric::Walltime => slot.estimate.as_secs(),
            BackfillMetric::ProcSeconds => i64::from(slot.procs) * slot.estimate.as_secs(),
        }
    }

    /// BESTFIT and GREEDY over the unreserved jobs from position `from` on.
    pub(super) fn backfill_by_metric(&mut self, from: usize, now: Time, out: &mut Vec<Action>) {
        // Candidates that fit now on their own; fitting only gets harder as jobs start.
        let cands: Vec<usize> = (from..self.queue.range().end)
            .filter(|&i| {
                let s = self.queue.get(i);
                s.alive && !s.reserved && self.fits_now(s.id, now).is_some()
            })
            .collect();
        match self.policy.backfill {
            BackfillChoice::BestFit => self.backfill_best_fit(cands, now, out),
            BackfillChoice::Greedy => self.backfill_greedy(cands, now, out),
            BackfillChoice::None | BackfillChoice::FirstFit => {}
        }
    }
}
