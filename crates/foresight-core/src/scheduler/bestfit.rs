//! BESTFIT backfill: of the candidates, the one with the largest metric that still fits
//! starts, again and again, until none fits.

use super::{Action, LocalScheduler};
use crate::time::Time;

impl LocalScheduler {
    /// Starts, one at a time, the candidate (queue positions) with the largest metric that
    /// fits now; ties go to the earlier (higher-priority) job.
    pub(super) fn backfill_best_fit(
        &mut self,
        mut cands: Vec<usize>,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        loop {
            let best = cands
                .iter()
                .enumerate()
                .filter_map(|(k, &i)| {
                    let s = self.queue.get(i);
                    self.fits_now(s.id, now).map(|d| (k, i, d, self.metric(s)))
                })
                // Largest metric; ties go to the earlier (higher-priority) job.
                .min_by_key(|&(k, _, _, m)| (std::cmp::Reverse(m), k));
            let Some((k, i, domain, _)) = best else { break };
            self.start_now(i, domain, now, out);
            cands.remove(k);
        }
    }
}
