//! A processor of the plan.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// A processor the plan can place work on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Processor {
    /// Unique name, e.g. `c1/p0`.
    pub id: String,
    /// The cluster it belongs to.
    pub cluster: String,
    /// Speed relative to the reference processor (1.0).
    #[serde(default = "one")]
    pub speed: f64,
    /// Memory, MB.
    #[serde(default)]
    pub memory_mb: u64,
    /// Features (architecture, OS, installed software, …).
    #[serde(default)]
    pub features: BTreeSet<String>,
}

fn one() -> f64 {
    1.0
}
