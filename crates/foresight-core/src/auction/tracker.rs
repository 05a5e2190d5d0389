//! The online mean runtime of recently finished jobs: the unit (the seed's у.е.) in which the
//! auction's length, reopen delay and bid terms are measured.

use crate::time::Dur;
use std::collections::VecDeque;

/// Mean of the last `window` runtimes reported, or a prior until the first is reported.
///
/// The sum is kept in integer seconds, so that scaling every runtime by `k` scales the mean
/// by exactly `k` (up to one rounding of the division) and results stay a function of α.
#[derive(Clone, Debug)]
pub struct RuntimeTracker {
    window: usize,
    prior: Dur,
    recent: VecDeque<i64>,
    sum: i64,
}

impl RuntimeTracker {
    /// A tracker over the last `window` (at least 1) finished jobs, answering `prior` (at
    /// least one second) until the first job finishes.
    pub fn new(window: usize, prior: Dur) -> RuntimeTracker {
        RuntimeTracker {
            window: window.max(1),
            prior: Dur(prior.0.max(1)),
            recent: VecDeque::new(),
            sum: 0,
        }
    }

    /// Records a finished job's runtime (time spent running, not waiting or suspended).
    pub fn record(&mut self, runtime: Dur) {
        let r = runtime.0.max(0);
        self.recent.push_back(r);
        self.sum += r;
        if self.recent.len() > self.window {
            let old = self
                .recent
                .pop_front()
                .expect("invariant: longer than window");
            self.sum -= old;
        }
    }

    /// The mean runtime in seconds (never below one second).
    pub fn mean(&self) -> f64 {
        if self.recent.is_empty() || self.sum == 0 {
            return self.prior.0 as f64;
        }
        (self.sum as f64 / self.recent.len() as f64).max(1.0)
    }

    /// `fraction` of the mean runtime, rounded to whole seconds (at least one).
    pub fn fraction(&self, fraction: f64) -> Dur {
        Dur(((fraction * self.mean()).round() as i64).max(1))
    }

    /// Jobs in the window.
    pub fn len(&self) -> usize {
        self.recent.len()
    }

    /// Whether no job has finished yet (the prior is answered).
    pub fn is_empty(&self) -> bool {
        self.recent.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prior_then_sliding_mean() {
        let mut t = RuntimeTracker::new(2, Dur(100));
        assert_eq!(t.mean(), 100.0);
        t.record(Dur(10));
        assert_eq!(t.mean(), 10.0);
        t.record(Dur(30));
        assert_eq!(t.mean(), 20.0);
        t.record(Dur(50));
        assert_eq!(t.mean(), 40.0, "the oldest runtime left the window");
        assert_eq!(t.fraction(0.35), Dur(14));
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn zero_runtimes_fall_back_to_prior_and_fraction_is_at_least_one_second() {
        let mut t = RuntimeTracker::new(3, Dur(0));
        t.record(Dur(0));
        assert_eq!(t.mean(), 1.0);
        assert_eq!(t.fraction(0.01), Dur(1));
    }
}
