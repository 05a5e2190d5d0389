//! Runtime prediction: what a job will really run, from the runs that finished before it.
//!
//! Users over-estimate; a scheduler that plans with the estimate leaves holes that a better
//! guess could fill. A prediction only changes the *plan*: the estimate stays the kill time,
//! so a prediction is never longer than the estimate when it is made. A job that outlives its
//! prediction gets a [`correction`] and the scheduler plans again.
//!
//! - [`stats`]: the statistics store of finished runs, keyed by [`RunKey`].
//! - [`tsafrir`]: Tsafrir, Etsion and Feitelson (2007): the mean of the user's last two runs.
//! - [`app`]: the median of the last runs of the same application and parameters.
//! - [`correction`]: the ladder a prediction climbs when the job is still running.

pub mod app;
pub mod correction;
pub mod stats;
pub mod tsafrir;

pub use app::app_prediction;
pub use correction::corrected;
pub use stats::{RunKey, RuntimeStats};
pub use tsafrir::tsafrir_prediction;

use crate::time::Dur;
use serde::{Deserialize, Serialize};

/// Which predictor plans a job's run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Predictor {
    /// No prediction: plan with the user's estimate.
    #[default]
    None,
    /// [`tsafrir_prediction`].
    Tsafrir,
    /// [`app_prediction`].
    App,
}

impl Predictor {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Predictor::None => "none",
            Predictor::Tsafrir => "tsafrir",
            Predictor::App => "app",
        }
    }

    /// The prediction for a job with `key` and `estimate`, from the runs `stats` has seen
    /// finish; `None` when the job should be planned with its estimate.
    pub fn predict(self, stats: &RuntimeStats, key: &RunKey, estimate: Dur) -> Option<Dur> {
        match self {
            Predictor::None => None,
            Predictor::Tsafrir => Some(tsafrir_prediction(stats, key, estimate)),
            Predictor::App => Some(app_prediction(stats, key, estimate)),
        }
    }

    /// How many finished runs its prediction for `key` draws on (0: none, so the
    /// estimate): the user's last two for Tsafrir's, the key's last [`app::WINDOW`] for the
    /// application's. Says where a prediction came from.
    pub fn history(self, stats: &RuntimeStats, key: &RunKey) -> usize {
        match self {
            Predictor::None => 0,
            Predictor::Tsafrir => stats.user_runs(key.user).count().min(2),
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
            "app" => Ok(Predictor::App),
            _ => Err(format!(
                "{text:?} is not a predictor: use none, tsafrir or app"
            )),
        }
    }
}

/// A prediction as the scheduler may use it: at least one second and never longer than the
/// estimate (the kill time).
pub fn capped(prediction: Dur, estimate: Dur) -> Dur {
    Dur(prediction.as_secs().clamp(1, estimate.as_secs().max(1)))
}

/// How close a prediction came: min(p, r) / max(p, r), 1 for a perfect one. Both are
/// counted as at least one second.
pub fn accuracy(prediction: Dur, runtime: Dur) -> f64 {
    let p = prediction.as_secs().max(1) as f64;
    let r = runtime.as_secs().max(1) as f64;
    p.min(r) / p.max(r)
}
