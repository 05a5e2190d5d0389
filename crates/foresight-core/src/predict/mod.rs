//! Runtime prediction: what a job will really run, from the runs that finished before it.
//!
//! Users over-estimate; a scheduler that plans with the estimate leaves holes that a better
//! guess could fill. A prediction only changes the *plan*: the estimate stays the kill time,
//! so a prediction is never longer than the estimate when it is made. A job that outlives its
//! prediction gets a [`correction`] and the scheduler plans again.
//!
//! - [`stats`]: the statistics store of finished runs, keyed by [`RunKey`].
//! - [`tsafrir`]: Tsafrir, Etsion and Feitelson (2007): the mean of the user's last two runs
//!   (and the `tsafrir-last1` variant, which also predicts from a single run).
//! - [`app`]: the median of the last runs of the same application and parameters.
//! - [`correction`]: how a plan grows when the job is still running (the paper's steps, or
//!   straight to the estimate).

pub mod app;
pub mod correction;
pub mod stats;
pub mod tsafrir;

pub use app::app_prediction;
pub use correction::{corrected, Correction};
pub use stats::{RunKey, RuntimeStats};
pub use tsafrir::{tsafrir_last1_prediction, tsafrir_prediction};

use crate::time::Dur;
use serde::{Deserialize, Serialize};

/// Which predictor plans a job's run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Predictor {
    /// No prediction: plan with the user's estimate.
    #[default]
    None,
    /// [`tsafrir_prediction`]: the paper's.
    Tsafrir,
    /// [`tsafrir_last1_prediction`]: also predicts from a user's single terminated job.
    #[serde(rename = "tsafrir-last1")]
    TsafrirLast1,
    /// [`app_prediction`].
    App,
}

impl Predictor {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Predictor::None => "none",
            Predictor::Tsafrir => "tsafrir",
            Predictor::TsafrirLast1 => "tsafrir-last1",
            Predictor::App => "app",
        }
    }

    /// The prediction for a job with `key` and `estimate`, from the runs `stats` has seen
    /// finish; `None` when the job should be planned with its estimate.
    pub fn predict(self, stats: &RuntimeStats, key: &RunKey, estimate: Dur) -> Option<Dur> {
        match self {
            Predictor::None => None,
            Predictor::Tsafrir => Some(tsafrir_prediction(stats, key, estimate)),
            Predictor::TsafrirLast1 => Some(tsafrir_last1_prediction(stats, key, estimate)),
            Predictor::App => Some(app_prediction(stats, key, estimate)),
        }
    }

    /// How many finished runs its prediction for `key` draws on (0: none, so the
    /// estimate): the user's last two for Tsafrir's (none until two have terminated; one or
    /// two for `tsafrir-last1`), the key's last [`app::WINDOW`] for the application's. Says
    /// where a prediction came from.
    pub fn history(self, stats: &RuntimeStats, key: &RunKey) -> usize {
        match self {
            Predictor::None => 0,
            Predictor::Tsafrir => match stats.user_runs(key.user).count() {
                0 | 1 => 0,
                _ => 2,
            },
            Predictor::TsafrirLast1 => stats.user_runs(key.user).count().min(2),
            Predictor::App => stats.app_runs(key).count().min(app::WINDOW),
        }
    }
}

impl std::str::FromStr for Predictor {
    type Err = String;

    fn from_str(text: &str) -> Result<Predictor, String> {
        match text {
            "none" => Ok(Predictor::None),
            "tsafrir" => Ok(Predictor::Tsafrir),
            "tsafrir-last1" => Ok(Predictor::TsafrirLast1),
            "app" => Ok(Predictor::App),
            _ => Err(format!(
                "{text:?} is not a predictor: use none, tsafrir, tsafrir-last1 or app"
            )),
        }
    }
}

/// A prediction as the scheduler may use it: at least one second and never longer than the
/// estimate (the kill time).
pub fn capped(prediction: Dur, estimate: Dur) -> Dur {
    Dur(prediction.as_secs().clamp(1, estimate.as_secs().max(1)))
}

/// A global job's runtime on the reference processor, as its statistics keep it, from what
/// can be observed: it ran `elapsed` seconds on processors whose slowest has `speed` (its
/// parts start together and run at that speed). `elapsed × speed`, never past the job's
/// `walltime` (also on the reference processor); the service and the simulator record
/// exactly this, so a global job's history reads the same in both, on clusters of any
/// speed. (A part runs `ceil(r / speed)` for a reference runtime `r`, so this can be up to
/// `speed` seconds above `r`.)
pub fn reference_runtime(elapsed: Dur, speed: f64, walltime: Dur) -> Dur {
    let speed = if speed.is_finite() && speed > 0.0 {
        speed
    } else {
        1.0
    };
    // A product that should be whole may come out a hair below it in floating point.
    let secs = (elapsed.as_secs().max(0) as f64 * speed + 1e-6).floor() as i64;
    Dur(secs.min(walltime.as_secs().max(0)))
}

/// How close a prediction came: min(p, r) / max(p, r), 1 for a perfect one. Both are
/// counted as at least one second.
pub fn accuracy(prediction: Dur, runtime: Dur) -> f64 {
    let p = prediction.as_secs().max(1) as f64;
    let r = runtime.as_secs().max(1) as f64;
    p.min(r) / p.max(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_global_runtime_counts_on_the_reference_processor() {
        let w = Dur(1_000);
        // Twice as fast: 50 s there are 100 s on the reference processor.
        assert_eq!(reference_runtime(Dur(50), 2.0, w), Dur(100));
        // Half as fast: 202 s there are 101 s.
        assert_eq!(reference_runtime(Dur(202), 0.5, w), Dur(101));
        // At speed 1 it is the elapsed time; never past the walltime.
        assert_eq!(reference_runtime(Dur(300), 1.0, w), Dur(300));
        assert_eq!(reference_runtime(Dur(600), 2.0, w), w);
        // A product a hair below a whole second in floating point is that second.
        assert_eq!(reference_runtime(Dur(100), 0.29, w), Dur(29));
        // A speed that is not positive (never configured) counts as the reference.
        assert_eq!(reference_runtime(Dur(70), 0.0, w), Dur(70));
    }
}
