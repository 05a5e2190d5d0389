//! GREEDY backfill: of the first `greedy_candidates` candidates, the set with the largest
//! total metric that fits at once starts.

use super::{Action, LocalScheduler};
use crate::time::Time;

impl LocalScheduler {
    /// Starts the set of candidates (queue positions, the first `greedy_candidates` of them)
    /// with the largest total metric that fits at once.
    pub(super) fn backfill_greedy(
        &mut self,
        mut cands: Vec<usize>,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        cands.truncate(self.policy.greedy_candidates);
        let chosen = self.greedy_set(&cands, now);
        for i in chosen {
            let id = self.queue.get(i).id;
            let domain = self
                .fits_now(id, now)
                .expect("invariant: the greedy set fits together");
            self.start_now(i, domain, now, out);
        }
    }

    /// The subset of `cands` (queue positions) with the largest total metric that fits at
    /// once; ties go to the set found first, which prefers higher-priority jobs. Depth-first
    /// with a bound and a node budget.
    fn greedy_set(&mut self, cands: &[usize], now: Time) -> Vec<usize> {
        let metrics: Vec<i64> = cands
            .iter()
            .map(|&i| self.metric(self.queue.get(i)))
            .collect();
        let mut suffix = vec![0i64; cands.len() + 1];
        for k in (0..cands.len()).rev() {
            suffix[k] = suffix[k + 1] + metrics[k];
        }
        let mut search = GreedySearch {
            cands,
            metrics: &metrics,
            suffix: &suffix,
            now,
            best: Vec::new(),
            best_value: 0,
            current: Vec::new(),
            budget: 20_000,
        };
        search.dfs(self, 0, 0);
        search.best
    }
}

/// Depth-first search state of GREEDY backfill.
struct GreedySearch<'a> {
    cands: &'a [usize],
    metrics: &'a [i64],
    /// `suffix[k]` = total metric of candidates `k..`: the bound.
    suffix: &'a [i64],
    now: Time,
    best: Vec<usize>,
    best_value: i64,
    current: Vec<usize>,
    /// Nodes left to visit; the search returns the best set found when it runs out.
    budget: u32,
}

impl GreedySearch<'_> {
    fn dfs(&mut self, s: &mut LocalScheduler, k: usize, value: i64) {
        if value > self.best_value {
            self.best_value = value;
            self.best = self.current.clone();
        }
        if k == self.cands.len() || self.budget == 0 || value + self.suffix[k] <= self.best_value {
            return;
        }
        self.budget -= 1;
        let i = self.cands[k];
        let slot = *s.queue.get(i);
        if let Some(domain) = s.fits_now(slot.id, self.now) {
            let end = self.now + slot.estimate;
            s.profile_mut(domain).take(self.now, end, slot.procs);
            s.hold_licences(slot.id, self.now, end, true);
            self.current.push(i);
            self.dfs(s, k + 1, value + self.metrics[k]);
            self.current.pop();
            s.profile_mut(domain).give(self.now, end, slot.procs);
            s.hold_licences(slot.id, self.now, end, false);
        }
        self.dfs(s, k + 1, value);
    }
}
