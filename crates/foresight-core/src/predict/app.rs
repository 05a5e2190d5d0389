//! Seed 003's idea: a run of an application with given parameters on a given processor type
//! takes about as long as the last runs of exactly that. The median of the last runs resists
//! the odd crashed or killed run better than a mean.

use super::stats::{RunKey, RuntimeStats};
use crate::time::Dur;

/// How many of the key's last runs the median is taken over.
pub const WINDOW: usize = 5;

/// The median of the last [`WINDOW`] runs with the same application, parameters and processor
/// type (the lower median for an even count), capped at the estimate; the estimate when there
/// are none or the application is unknown.
pub fn app_prediction(stats: &RuntimeStats, key: &RunKey, estimate: Dur) -> Dur {
    let runs: Vec<Dur> = stats.app_runs(key).collect();
    let mut last: Vec<Dur> = runs[runs.len().saturating_sub(WINDOW)..].to_vec();
    if last.is_empty() {
        return estimate;
    }
    last.sort_unstable();
    super::capped(last[(last.len() - 1) / 2], estimate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::UserId;

    #[test]
    fn the_median_of_the_last_runs_of_the_same_application_and_parameters() {
        let key = |user, params| RunKey {
            user: UserId(user),
            app: Some(3),
            params,
            arch: 0,
        };
        let mut s = RuntimeStats::new();
        let est = Dur(1000);
        assert_eq!(app_prediction(&s, &key(1, 8), est), est);
        // Runs of any user count; other parameters do not.
        for (user, r) in [(1, 100), (2, 900), (1, 300), (3, 200)] {
            s.record(&key(user, 8), Dur(r));
        }
        s.record(&key(1, 16), Dur(5));
        // Lower median of 100, 200, 300, 900.
        assert_eq!(app_prediction(&s, &key(9, 8), est), Dur(200));
        for r in [50, 60] {
            s.record(&key(1, 8), Dur(r));
        }
        // The last five: 900, 300, 200, 50, 60 → 200; the first (100) has left the window.
        assert_eq!(app_prediction(&s, &key(9, 8), est), Dur(200));
        assert_eq!(app_prediction(&s, &key(9, 8), Dur(150)), Dur(150));
        let unknown = RunKey {
            app: None,
            ..key(1, 8)
        };
        assert_eq!(app_prediction(&s, &unknown, est), est);
    }
}
