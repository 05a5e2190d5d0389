//! The greedy baseline: tasks in topological order, each on the cluster where it can start
//! earliest (ties to the earlier finish). No look at the rest of the graph.

use super::board::Board;
use super::dag::Dag;
use super::error::WorkflowError;
use super::mapping::Mapping;
use super::site::GridState;

/// Maps `dag` onto `grid` by earliest start.
pub fn greedy(dag: &Dag<'_>, grid: &GridState) -> Result<Mapping, WorkflowError> {
    let mut b = Board::new(dag, grid);
    for &i in &dag.topo {
        let (site, w) = b.best_slot(i, |start, end| (start, end))?;
        b.place(i, site, w);
    }
    Ok(b.into_mapping(0))
}
