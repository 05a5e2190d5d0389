//! What a global job asks of the plan.

use crate::time::{Dur, Time};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The job's view of a selection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Criterion {
    /// Start as early as possible.
    EarliestStart,
    /// Finish as early as possible (faster processors may start later yet end sooner).
    EarliestFinish,
    /// Pay as little as possible, starting no later than the deadline.
    MinCost,
}

/// What a global job asks of the plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlotRequest {
    /// Processors at once.
    pub procs: u32,
    /// Runtime on reference processors (speed 1.0), seconds.
    pub walltime: Dur,
    /// The most the job pays per processor-second; dearer slots are unsuitable.
    pub max_price: f64,
    /// Memory each processor must have, MB.
    #[serde(default)]
    pub min_memory_mb: u64,
    /// Features each processor must have.
    #[serde(default)]
    pub features: BTreeSet<String>,
    /// What "best" means.
    pub criterion: Criterion,
    /// No start before this.
    #[serde(default)]
    pub not_before: Time,
    /// For [`Criterion::MinCost`]: the latest acceptable start (none: any).
    #[serde(default)]
    pub deadline: Option<Time>,
    /// May the job span several clusters (one synchronous start)?
    #[serde(default = "yes")]
    pub co_allocate: bool,
}

fn yes() -> bool {
    true
}

/// Staging delay per cluster (by cluster index); `None` means unreachable.
pub type Staging = Vec<Option<Dur>>;
