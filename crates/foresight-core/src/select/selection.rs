//! The slots chosen for a job, or why none fit.

use crate::time::Time;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// One used part of a slot.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct UsedSlot {
    /// Processor index in the plan.
    pub processor: u32,
    /// Start of the used part.
    pub start: Time,
    /// End of the used part.
    pub end: Time,
    /// Price per processor-second of the slot it was cut from.
    pub cost: f64,
}

/// The slots chosen for a job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    /// The synchronous start.
    pub start: Time,
    /// When the job ends (estimate over the slowest chosen speed).
    pub end: Time,
    /// Total charge: Σ cost × seconds used.
    pub cost: f64,
    /// Processors chosen, in the order chosen.
    pub processors: Vec<u32>,
    /// The used parts of slots, per processor in time order.
    pub slots: Vec<UsedSlot>,
    /// For each used part, the number of the plan's slot it was cut from, so that
    /// [`SlotPlan::commit`](super::SlotPlan::commit) finds it at once (checked, and searched
    /// for if it does not hold).
    #[serde(skip)]
    pub(super) cut_from: Vec<u32>,
}

/// Why nothing fits.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{reason}")]
pub struct NoFit {
    /// For people.
    pub reason: String,
}
