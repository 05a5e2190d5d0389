//! How a simulation predicts runtimes, and what a finished run tells the statistics store.

use crate::workload::SimJob;
use foresight_core::predict::{Predictor, RunKey};

/// The simulator's prediction settings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Prediction {
    /// Which predictor plans each job ([`Predictor::None`]: the estimate).
    pub predictor: Predictor,
    /// Whether trace jobs that ran past their estimate keep their whole runtime (see
    /// [`crate::workload::Converter::overrun`]); such a job outlives its plan and gets
    /// corrected, whatever the predictor.
    pub overrun: bool,
}

/// The statistics key of a simulated job: its user, its application (SWF executable) and, as
/// its parameters, the processors it asks for; one processor type per cluster.
pub fn run_key(sim: &SimJob) -> RunKey {
    RunKey {
        user: sim.job.cred.user,
        app: sim.app,
        params: u64::from(sim.job.procs),
        arch: 0,
    }
}
