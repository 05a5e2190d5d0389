//! Tsafrir, Etsion and Feitelson, "Backfilling using system-generated predictions rather
//! than user runtime estimates" (IEEE TPDS 18(6), 2007): a job will run about as long as the
//! same user's last two jobs did.
//!
//! The paper's predictor ([`tsafrir_prediction`]) is the mean runtime of the two most recent
//! jobs of the same user that have already terminated; with fewer than two such jobs there is
//! no prediction and the job is planned with its estimate, and a prediction is never longer
//! than the estimate (the job is killed there). The mean is rounded down to whole seconds, as
//! the pyss implementation of EASY++ does.
//!
//! [`tsafrir_last1_prediction`] is the variant this project shipped first (`tsafrir-last1`):
//! it differs in one point only, predicting from a single terminated job (its runtime) when
//! the user has only one, where the paper keeps the estimate.

use super::stats::{RunKey, RuntimeStats};
use crate::time::Dur;

/// The paper's prediction: the mean of the user's two most recently terminated jobs, at most
/// the estimate; the estimate when fewer than two have terminated.
///
/// "Submitted before it and already terminated" holds by construction when the store is
/// filled as jobs end and asked at submission.
pub fn tsafrir_prediction(stats: &RuntimeStats, key: &RunKey, estimate: Dur) -> Dur {
    last_two_mean(stats, key, estimate, 2)
}

/// The `tsafrir-last1` variant: as [`tsafrir_prediction`], but a user with one terminated
/// job is predicted to run as long as it did.
pub fn tsafrir_last1_prediction(stats: &RuntimeStats, key: &RunKey, estimate: Dur) -> Dur {
    last_two_mean(stats, key, estimate, 1)
}

/// The mean of the user's last (at most two) runs when at least `needed` have terminated,
/// rounded down and capped at the estimate; else the estimate.
fn last_two_mean(stats: &RuntimeStats, key: &RunKey, estimate: Dur, needed: usize) -> Dur {
    let runs: Vec<Dur> = stats.user_runs(key.user).collect();
    let last_two = &runs[runs.len().saturating_sub(2)..];
    if last_two.len() < needed.max(1) {
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
    fn the_mean_of_the_users_last_two_terminated_jobs_below_the_estimate() {
        let mut s = RuntimeStats::new();
        let est = Dur(1000);
        // No history: the estimate.
        assert_eq!(tsafrir_prediction(&s, &key(1), est), Dur(1000));
        s.record(&key(1), Dur(300));
        // One terminated job is not enough: still the estimate.
        assert_eq!(tsafrir_prediction(&s, &key(1), est), Dur(1000));
        s.record(&key(2), Dur(10)); // another user's run does not count
        s.record(&key(1), Dur(501));
        // Two: their mean, rounded down ((300 + 501) / 2 = 400.5).
        assert_eq!(tsafrir_prediction(&s, &key(1), est), Dur(400));
        s.record(&key(1), Dur(700));
        // Only the last two: (501 + 700) / 2 = 600.5.
        assert_eq!(tsafrir_prediction(&s, &key(1), est), Dur(600));
        // Never above the estimate.
        assert_eq!(tsafrir_prediction(&s, &key(1), Dur(450)), Dur(450));
        // User 2 has one terminated job: the estimate.
        assert_eq!(tsafrir_prediction(&s, &key(2), est), est);
        // A user whose last two runs took no time is planned at one second.
        s.record(&key(3), Dur(0));
        s.record(&key(3), Dur(0));
        assert_eq!(tsafrir_prediction(&s, &key(3), est), Dur(1));
    }

    #[test]
    fn the_last1_variant_predicts_from_a_single_terminated_job() {
        let mut s = RuntimeStats::new();
        let est = Dur(1000);
        assert_eq!(tsafrir_last1_prediction(&s, &key(1), est), est);
        s.record(&key(1), Dur(300));
        assert_eq!(tsafrir_last1_prediction(&s, &key(1), est), Dur(300));
        s.record(&key(1), Dur(501));
        assert_eq!(tsafrir_last1_prediction(&s, &key(1), est), Dur(400));
        assert_eq!(tsafrir_last1_prediction(&s, &key(1), Dur(350)), Dur(350));
        // With two or more runs both agree.
        s.record(&key(1), Dur(700));
        assert_eq!(
            tsafrir_last1_prediction(&s, &key(1), est),
            tsafrir_prediction(&s, &key(1), est)
        );
    }
}
