//! The workflow itself: tasks (rigid parallel jobs) joined by data edges, a DAG.

use crate::time::Dur;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

crate::define_id!(
    /// A task of one workflow; unique within it (not across workflows).
    TaskId,
    u32
);

/// One task: a rigid parallel job that may start only when the data of all its incoming
/// edges has arrived where it runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// Unique within the workflow; edges name tasks by it.
    pub id: TaskId,
    /// Human name, used in every error and report line about the task.
    pub name: String,
    /// Processors at once, all on one cluster.
    pub procs: u32,
    /// The user's walltime on a reference processor (speed 1.0): the kill time, and the plan
    /// length when there is no prediction.
    pub walltime: Dur,
    /// A predicted runtime on a reference processor (from execution statistics), planned
    /// with instead of the usually inflated walltime when known.
    #[serde(default)]
    pub predicted: Option<Dur>,
    /// Features (software, architecture) a cluster must offer to run the task.
    #[serde(default)]
    pub requires: Vec<String>,
    /// Measured runtimes on named clusters, overriding the speed rule there: lets a task be
    /// faster on one machine than the clusters' speeds say (the heterogeneous cost table of
    /// HEFT's model).
    #[serde(default)]
    pub runtime_on: BTreeMap<String, Dur>,
}

impl Task {
    /// A task of `procs` processors for `walltime` seconds with no other requirement.
    pub fn new(id: u32, name: impl Into<String>, procs: u32, walltime: Dur) -> Task {
        Task {
            id: TaskId(id),
            name: name.into(),
            procs,
            walltime,
            predicted: None,
            requires: Vec::new(),
            runtime_on: BTreeMap::new(),
        }
    }

    /// The runtime the plan uses on a reference processor: the prediction when there is one
    /// and it is shorter than the walltime, otherwise the walltime.
    pub fn planned(&self) -> Dur {
        match self.predicted {
            Some(p) if p < self.walltime => p,
            _ => self.walltime,
        }
    }
}

/// Data produced by `from` and read by `to`: `to` starts after `from` ends, plus the time to
/// move `data_mb` when they run on different clusters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Edge {
    /// The producer.
    pub from: TaskId,
    /// The consumer.
    pub to: TaskId,
    /// Megabytes moved along the edge (0 for a pure precedence).
    #[serde(default)]
    pub data_mb: f64,
}

/// A DAG of tasks, mapped as a whole.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Workflow {
    /// The name, for reports and errors.
    pub name: String,
    /// Scheduling priority (0 = lowest); the DSC mapper's search budget grows with it
    /// (seed 003: the planning time is limited by the workflow's priority).
    #[serde(default)]
    pub priority: u32,
    /// The tasks, in any order.
    pub tasks: Vec<Task>,
    /// The data edges.
    #[serde(default)]
    pub edges: Vec<Edge>,
}
