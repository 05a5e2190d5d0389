//! An ordered index of the waiting jobs without a reservation, for shortest-plan-first
//! (SPF) backfill: which job with the shortest plan fits now, found without sorting or
//! scanning the queue.
//!
//! A job fits now when it asks for at most the processors free now and its plan ends before
//! the first instant at which fewer than its processors are free ([`Horizons`]). That
//! horizon is a staircase over processor counts, so the candidates fall into a few bands of
//! processor counts, each with one deadline; the index answers "the shortest plan among jobs
//! of `lo..=hi` processors" with a segment tree over processor counts, so one backfill start
//! costs a lookup per band, not a walk of the queue.

use crate::profile::Horizons;
use crate::time::{Dur, Time};
use std::collections::BTreeSet;

/// One indexed job: ordered by plan, then submission order (SPF's order), the remaining
/// fields only locate it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Candidate {
    /// The planned duration in seconds.
    pub estimate: i64,
    /// Submission order: the tie-breaker, unique per job.
    pub seq: u64,
    /// The queue's static sort key, which locates the job in the queue.
    pub key: i64,
    /// Processors asked for.
    pub procs: u32,
}

/// Worse than every job: the value of an empty leaf.
const NONE: Candidate = Candidate {
    estimate: i64::MAX,
    seq: u64::MAX,
    key: i64::MAX,
    procs: u32::MAX,
};

/// Machines larger than this keep no index (its tree would cost more memory than it saves).
pub(crate) const MAX_INDEXED_PROCS: u32 = 1 << 18;

/// The index: every job by processor count, and a segment tree of the best job per count.
#[derive(Clone, Debug, Default)]
pub(crate) struct ShortestIndex {
    /// Every indexed job, by processor count first.
    jobs: BTreeSet<(u32, Candidate)>,
    /// Leaves at `size + procs`; every inner node holds the better of its two children.
    tree: Vec<Candidate>,
    /// Leaves in the tree: a power of two above the largest processor count indexed.
    size: usize,
}

impl ShortestIndex {
    /// An empty index for jobs of up to `capacity` processors (larger ones never fit and are
    /// not indexed).
    pub fn new(capacity: u32) -> ShortestIndex {
        let size = (capacity as usize + 1).next_power_of_two();
        ShortestIndex {
            jobs: BTreeSet::new(),
            tree: vec![NONE; 2 * size],
            size,
        }
    }

    /// Adds a job.
    pub fn insert(&mut self, c: Candidate) {
        if (c.procs as usize) < self.size && self.jobs.insert((c.procs, c)) {
            self.refresh(c.procs);
        }
    }

    /// Removes a job (nothing if it is not indexed).
    pub fn remove(&mut self, c: Candidate) {
        if (c.procs as usize) < self.size && self.jobs.remove(&(c.procs, c)) {
            self.refresh(c.procs);
        }
    }

    /// Recomputes the leaf of `procs` and its ancestors.
    fn refresh(&mut self, procs: u32) {
        let best = self
            .jobs
            .range((procs, NONE_MIN)..=(procs, NONE))
            .next()
            .map_or(NONE, |&(_, c)| c);
        let mut i = self.size + procs as usize;
        self.tree[i] = best;
        while i > 1 {
            i /= 2;
            self.tree[i] = self.tree[2 * i].min(self.tree[2 * i + 1]);
        }
    }

    /// The best job asking for `lo..=hi` processors, if any.
    pub fn best_in(&self, lo: i64, hi: i64) -> Option<Candidate> {
        let top = i64::try_from(self.size).unwrap_or(i64::MAX) - 1;
        let (lo, hi) = (lo.max(0), hi.min(top));
        if lo > hi {
            return None;
        }
        // Bottom-up over the half-open leaf range [l, r).
        let (mut l, mut r) = (self.size + lo as usize, self.size + hi as usize + 1);
        let mut best = NONE;
        while l < r {
            if l % 2 == 1 {
                best = best.min(self.tree[l]);
                l += 1;
            }
            if r % 2 == 1 {
                r -= 1;
                best = best.min(self.tree[r]);
            }
            l /= 2;
            r /= 2;
        }
        (best != NONE).then_some(best)
    }

    /// The job with the shortest plan (ties: the earliest submitted) that fits at `now` by
    /// `horizon` (computed at `now`): no more processors than are free now, and a plan that
    /// ends by the first instant at which fewer than its processors are free.
    pub fn shortest_fitting(&self, now: Time, horizon: &Horizons) -> Option<Candidate> {
        horizon
            .bands()
            .filter_map(|(lo, hi, until)| {
                self.best_in(lo + 1, hi)
                    .filter(|c| now + Dur(c.estimate) <= until)
            })
            .min()
    }
}

/// Smaller than every job: the lower end of a range over one processor count.
const NONE_MIN: Candidate = Candidate {
    estimate: i64::MIN,
    seq: 0,
    key: i64::MIN,
    procs: 0,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Profile;
    use proptest::prelude::*;

    /// What the index must answer, by a scan of every job.
    fn naive(jobs: &[Candidate], now: Time, h: &Horizons, free: i64) -> Option<Candidate> {
        jobs.iter()
            .copied()
            .filter(|c| i64::from(c.procs) <= free && now + Dur(c.estimate) <= h.get(c.procs))
            .min()
    }

    proptest! {
        /// After any sequence of insertions and removals, on any profile, the index names
        /// the same job as a scan of the jobs in SPF order.
        #[test]
        fn index_answers_like_a_scan(
            ops in prop::collection::vec((any::<bool>(), 0u32..20, 1i64..50, 0usize..40), 1..120),
            spans in prop::collection::vec((0i64..100, 1i64..100, 1u32..16), 0..12),
            now in 0i64..100,
        ) {
            let capacity = 16;
            let mut p = Profile::new(capacity);
            for (start, len, procs) in spans {
                if p.min_free(Time(start), Time(start + len)) >= i64::from(procs) {
                    p.take(Time(start), Time(start + len), procs);
                }
            }
            p.advance(Time(now));
            let mut h = Horizons::default();
            p.horizons(Time(now), &mut h);
            let free = p.free_at(Time(now));
            let mut index = ShortestIndex::new(capacity);
            let mut jobs: Vec<Candidate> = Vec::new();
            for (seq, (add, procs, estimate, pick)) in ops.into_iter().enumerate() {
                if add || jobs.is_empty() {
                    let c = Candidate { estimate, seq: seq as u64, key: seq as i64, procs };
                    index.insert(c);
                    // Jobs larger than the machine are not indexed: they never fit.
                    jobs.push(c);
                } else {
                    let c = jobs.remove(pick % jobs.len());
                    index.remove(c);
                }
                prop_assert_eq!(
                    index.shortest_fitting(Time(now), &h),
                    naive(&jobs, Time(now), &h, free)
                );
            }
        }

        /// The horizon's bands say what [`Horizons::get`] says for every processor count.
        #[test]
        fn bands_agree_with_get(
            spans in prop::collection::vec((0i64..100, 1i64..100, 1u32..16), 0..12),
            now in 0i64..100,
        ) {
            let mut p = Profile::new(16);
            for (start, len, procs) in spans {
                if p.min_free(Time(start), Time(start + len)) >= i64::from(procs) {
                    p.take(Time(start), Time(start + len), procs);
                }
            }
            let mut h = Horizons::default();
            p.horizons(Time(now), &mut h);
            let free = p.free_at(Time(now));
            for procs in 0..=free {
                let found: Vec<Time> = h
                    .bands()
                    .filter(|&(lo, hi, _)| lo < procs && procs <= hi)
                    .map(|(_, _, until)| until)
                    .collect();
                prop_assert_eq!(found, vec![h.get(procs as u32)]);
            }
        }
    }
}
