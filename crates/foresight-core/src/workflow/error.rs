//! What a workflow or a mapping can get wrong, each error naming the task at fault.

use super::model::TaskId;
use crate::time::Time;
use thiserror::Error;

/// Why a workflow cannot be mapped at all.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WorkflowError {
    /// The workflow has no task.
    #[error("workflow {0:?} has no task")]
    Empty(String),
    /// Two tasks share an id.
    #[error("task id {id} is used by both {first:?} and {second:?}")]
    DuplicateTask {
        /// The id.
        id: TaskId,
        /// The first task with it.
        first: String,
        /// The second.
        second: String,
    },
    /// An edge names a task that does not exist.
    #[error("edge {from} -> {to} names unknown task {missing}")]
    UnknownTask {
        /// The edge's producer.
        from: TaskId,
        /// The edge's consumer.
        to: TaskId,
        /// The id that names no task.
        missing: TaskId,
    },
    /// An edge is malformed (a self-loop, or a negative or non-finite size).
    #[error("edge {from} -> {to}: {reason}")]
    InvalidEdge {
        /// The producer.
        from: TaskId,
        /// The consumer.
        to: TaskId,
        /// What is wrong.
        reason: String,
    },
    /// The edges form a cycle: the workflow is not a DAG.
    #[error("the edges form a cycle through task {task:?} ({path})")]
    Cycle {
        /// A task on the cycle.
        task: String,
        /// The cycle, as task names joined by arrows.
        path: String,
    },
    /// A task can never run: a field is out of range, or no cluster can host it.
    #[error("task {task:?} can never run: {reason}")]
    ImpossibleTask {
        /// The task's name.
        task: String,
        /// Why.
        reason: String,
    },
}

/// A broken rule of a mapping, found by [`super::check`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Violation {
    /// A task has no placement, or more than one.
    #[error("task {task:?} is placed {count} times")]
    PlacedCount {
        /// The task.
        task: String,
        /// How many placements name it.
        count: usize,
    },
    /// A task runs on a cluster that cannot host it, or for the wrong length.
    #[error("task {task:?}: {reason}")]
    BadPlacement {
        /// The task.
        task: String,
        /// What is wrong.
        reason: String,
    },
    /// A task starts before the mapping's `now`.
    #[error("task {task:?} starts at {start}, before now ({now})")]
    InThePast {
        /// The task.
        task: String,
        /// Its start.
        start: Time,
        /// The mapping's now.
        now: Time,
    },
    /// A task starts before its input has arrived.
    #[error("task {to:?} starts at {start} but the data of {from:?} arrives at {ready}")]
    Precedence {
        /// The producer.
        from: String,
        /// The consumer.
        to: String,
        /// The consumer's start.
        start: Time,
        /// When the producer's data is there.
        ready: Time,
    },
    /// A cluster would run more processors than it has free (double booking, or a slot
    /// taken from an existing reservation or local job).
    #[error("cluster {cluster:?} is overbooked at {at} by task {task:?}")]
    Overbooked {
        /// The cluster.
        cluster: String,
        /// The first task that does not fit.
        task: String,
        /// Its start.
        at: Time,
    },
}
