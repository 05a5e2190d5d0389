//! Workflow mapping (seed 003): a DAG of tasks with data edges is placed, as a whole, onto
//! the free time of several clusters, so that every task can be reserved (two-phase) at
//! the slot the mapping gives it.
//!
//! # Entry point
//! ```
//! use foresight_core::workflow::{map, Edge, GridState, Mapper, Site, Task, TaskId, Workflow};
//! use foresight_core::{Dur, Time};
//!
//! let wf = Workflow {
//!     name: "two".into(),
//!     priority: 0,
//!     tasks: vec![Task::new(1, "mesh", 4, Dur(600)), Task::new(2, "solve", 8, Dur(3600))],
//!     edges: vec![Edge { from: TaskId(1), to: TaskId(2), data_mb: 500.0 }],
//! };
//! let grid = GridState {
//!     now: Time(0),
//!     horizon: Time::MAX,
//!     sites: vec![Site::new("a", 16), Site::new("b", 32)],
//! };
//! let m = map(&wf, &grid, &Mapper::Heft).unwrap();
//! assert_eq!(m.makespan(), Dur(4200)); // both on one cluster: no transfer
//! ```
//! [`map`] validates the workflow against the grid ([`Dag::new`]: duplicate or unknown
//! task ids, self-loops, cycles, tasks no cluster can host → [`WorkflowError`] naming the
//! task), runs the chosen [`Mapper`], and returns a [`Mapping`]: one [`Placement`] (cluster,
//! start, end) per task. Every mapper only takes time that is free in the [`Site`]s'
//! profiles, so reservations and local jobs already planned stay untouched; [`check`]
//! verifies exactly that, plus precedence with transfer times, for any mapping.
//!
//! The caller builds the [`GridState`] from its plan: per cluster a [`crate::Profile`] of
//! free processors (the simulator from its local schedulers' forecasts, the service from
//! its clusters' plans), speed, features and link. To map several workflows in turn,
//! [`Mapping::apply`] takes a mapping's time out of the grid.
//!
//! # Model
//! - A task runs on `procs` processors of one cluster for its planned runtime (prediction,
//!   else walltime) divided by the cluster's speed, or for its measured runtime there.
//! - An edge's data moves between clusters in `data_mb` over the slower link plus the larger
//!   latency ([`GridState::transfer`]); on one cluster it costs nothing.
//!
//! # Layout
//! - `model`: [`Workflow`], [`Task`], [`Edge`]; `site`: [`Site`], [`GridState`];
//!   `error`: [`WorkflowError`], [`Violation`].
//! - `dag`: validation into an indexed [`Dag`] (topological order, hosts per task).
//! - `board`: the partial schedule the mappers share (earliest slot with insertion).
//! - `dsc`: the seed's DSC variant; `heft`: HEFT; `greedy`: earliest start.
//! - `mapping`: [`Mapping`], its metrics, and the validator [`check`].
//! - `bound`: the critical-path lower bound (SLR's denominator).

mod board;
mod bound;
mod dag;
mod dsc;
mod error;
mod greedy;
mod heft;
mod mapping;
mod model;
mod site;

pub use bound::critical_path;
pub use dag::Dag;
pub use dsc::{dsc, DscConfig};
pub use error::{Violation, WorkflowError};
pub use greedy::greedy;
pub use heft::{heft, upward_ranks};
pub use mapping::{check, Mapping, Placement};
pub use model::{Edge, Task, TaskId, Workflow};
pub use site::{GridState, Site};

use serde::{Deserialize, Serialize};

/// Which algorithm maps a workflow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mapper {
    /// The seed's Dominant Sequence Clustering variant, with its search budget.
    Dsc(DscConfig),
    /// HEFT: upward ranks, earliest finish with insertion.
    Heft,
    /// Each task, in topological order, at its earliest start.
    Greedy,
}

impl Mapper {
    /// The short name used in reports and on the command line.
    pub fn name(&self) -> &'static str {
        match self {
            Mapper::Dsc(_) => "dsc",
            Mapper::Heft => "heft",
            Mapper::Greedy => "greedy",
        }
    }
}

/// Validates `wf` against `grid` and maps it with `mapper`.
pub fn map(wf: &Workflow, grid: &GridState, mapper: &Mapper) -> Result<Mapping, WorkflowError> {
    let dag = Dag::new(wf, grid)?;
    map_dag(&dag, grid, mapper)
}

/// Maps an already validated workflow (saves validating again when one workflow is mapped
/// by several mappers).
pub fn map_dag(dag: &Dag<'_>, grid: &GridState, mapper: &Mapper) -> Result<Mapping, WorkflowError> {
    match mapper {
        Mapper::Dsc(cfg) => dsc(dag, grid, cfg),
        Mapper::Heft => heft(dag, grid),
        Mapper::Greedy => greedy(dag, grid),
    }
}
