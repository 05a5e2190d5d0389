//! The critical-path lower bound of a workflow's makespan: SLR's denominator.

use super::dag::Dag;
use super::site::GridState;
use crate::time::Dur;

/// The longest chain of tasks, each at its shortest runtime over the clusters able to host
/// it, with free transfers and empty clusters: no mapping can finish sooner, so
/// `makespan / bound` (the schedule length ratio, SLR) is at least 1.
pub fn critical_path(dag: &Dag<'_>, grid: &GridState) -> Dur {
    let mut finish = vec![Dur::ZERO; dag.len()];
    for &i in &dag.topo {
        let t = &dag.wf.tasks[i];
        let w = dag.hosts[i]
            .iter()
            .map(|&s| grid.sites[s].runtime(t))
            .min()
            .expect("invariant: validated tasks have a host");
        let start = dag.preds[i]
            .iter()
            .map(|&(p, _)| finish[p])
            .max()
            .unwrap_or(Dur::ZERO);
        finish[i] = start + w;
    }
    finish.into_iter().max().unwrap_or(Dur::ZERO)
}
