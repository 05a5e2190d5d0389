//! Requests that found no window at all, kept so that every later request they dominate is
//! answered "no window" in logarithmic time instead of by a walk over the whole plan.
//!
//! Within one plan commits only take time away, so a request of `procs` processors for
//! `dur` seconds at price `max_price` that found no window (with the same usable clusters
//! and times, cluster mask and speed level: the caller's key) proves that no request for at
//! least as many processors, at least as long, at no higher price finds one either. Per
//! price, the failures that no other failure of that price dominates form a staircase in
//! (processors, duration): ascending processors, strictly descending durations.

/// Distinct prices whose failures are kept per key: more only loses pruning, never
/// exactness.
const PRICES_KEPT: usize = 64;

/// The failures of one key, per price.
#[derive(Clone, Debug, Default)]
pub(super) struct Failed {
    /// `(price, staircase)`, in order of insertion of the price.
    by_price: Vec<(f64, Vec<(u32, i64)>)>,
}

impl Failed {
    /// Is a failure known for a request asking no less: no more processors, no longer, at
    /// no lower price?
    pub(super) fn covers(&self, procs: u32, dur: i64, max_price: f64) -> bool {
        self.by_price
            .iter()
            .any(|(price, stairs)| *price >= max_price && dominated(stairs, procs, dur))
    }

    /// Keeps a failure of `procs` processors for `dur` seconds at `max_price`.
    pub(super) fn record(&mut self, procs: u32, dur: i64, max_price: f64) {
        let at = match self.by_price.iter().position(|(p, _)| *p == max_price) {
            Some(at) => at,
            None => {
                if self.by_price.len() >= PRICES_KEPT {
                    self.by_price.remove(0);
                }
                self.by_price.push((max_price, Vec::new()));
                self.by_price.len() - 1
            }
        };
        let stairs = &mut self.by_price[at].1;
        if dominated(stairs, procs, dur) {
            return;
        }
        // The failures the new one dominates are no longer needed; they sit together, from
        // the first with at least `procs` processors.
        stairs.retain(|&(p, d)| p < procs || d < dur);
        let at = stairs.partition_point(|&(p, _)| p < procs);
        stairs.insert(at, (procs, dur));
    }
}

/// Does a failure of the staircase ask no more than `(procs, dur)`? The one with the most
/// processors not above `procs` is the shortest of those.
fn dominated(stairs: &[(u32, i64)], procs: u32, dur: i64) -> bool {
    let i = stairs.partition_point(|&(p, _)| p <= procs);
    i > 0 && stairs[i - 1].1 <= dur
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_covers_exactly_the_requests_asking_no_less() {
        let mut f = Failed::default();
        f.record(10, 100, 2.0);
        assert!(f.covers(10, 100, 2.0));
        assert!(f.covers(11, 100, 1.0));
        assert!(f.covers(10, 101, 2.0));
        assert!(!f.covers(9, 1000, 2.0), "fewer processors");
        assert!(!f.covers(100, 99, 2.0), "shorter");
        assert!(
            !f.covers(10, 100, 2.5),
            "a higher price reaches dearer time"
        );
        // A staircase: (4, 500) and (10, 100); (20, 50) between neither.
        f.record(4, 500, 2.0);
        assert!(f.covers(5, 500, 2.0));
        assert!(!f.covers(5, 400, 2.0));
        assert!(!f.covers(20, 50, 2.0));
        // One dominating both replaces them.
        f.record(2, 50, 2.0);
        assert_eq!(f.by_price[0].1, vec![(2, 50)]);
        assert!(f.covers(20, 50, 2.0));
        assert!(!f.covers(1, 1000, 2.0));
    }
}
