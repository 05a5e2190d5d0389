//! Tsafrir, Etsion and Feitelson (2007), "Backfilling using system-generated predictions
//! rather than user runtime estimates": a job will run about as long as the same user's last
//! two jobs did.

use super::stats::{RunKey, RuntimeStats};
use crate::time::Dur;

/// The mean runtime of the user's two most recently finished jobs (one: its runtime; none:
/// the estimate), used only when shorter than the estimate. Whole seconds, rounded down.
///
/// "Submitted before it and already finished" holds by construction when the store is filled
/// as jobs finish and asked at submission.
pub fn tsafrir_prediction(stats: &RuntimeStats, key: &RunKey, estimate: Dur) -> Dur {
    let runs: Vec<Dur> = stats.user_runs(key.user).collect();
    let last_two = &runs[runs.len().saturating_sub(2)..];
    if last_two.is_empty() {
        return estimate;
    }
    let mean = last_two.iter().map(|d| d.as_secs()).sum::<i64>() / last_two.len() as i64;
    super::capped(Dur(mean).min(estimate), estimate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::UserId;

    fn key(user: u32) -> RunKey {
        RunKey {
            user: UserId(user),
            ..RunKey::default()
        }
    }

    #[test]
    fn the_mean_of_the_users_last_two_runs_below_the_estimate() {
        let mut s = RuntimeStats::new();
        let est = Dur(1000);
        // No history: the estimate.
        assert_eq!(tsafrir_prediction(&s, &key(1), est), Dur(1000));
        s.record(&key(1), Dur(300));
        // One run: its runtime.
        assert_eq!(tsafrir_prediction(&s, &key(1), est), Dur(300));
        s.record(&key(2), Dur(10)); // another user's run does not count
        s.record(&key(1), Dur(501));
        // Two runs: their mean, rounded down.
        assert_eq!(tsafrir_prediction(&s, &key(1), est), Dur(400));
        s.record(&key(1), Dur(700));
        // Only the last two: (501 + 700) / 2.
        assert_eq!(tsafrir_prediction(&s, &key(1), est), Dur(600));
        // Never above the estimate.
        assert_eq!(tsafrir_prediction(&s, &key(1), Dur(450)), Dur(450));
        assert_eq!(tsafrir_prediction(&s, &key(2), est), Dur(10));
    }
}
