//! The seed's mapper (seed 003 §5, as cleaned in `notes/seeds/003.md` §5.4): Dominant
//! Sequence Clustering (Yang & Gerasoulis 1994) with the clustering and the mapping onto
//! clusters done in one pass, merging only where the plan has free slots.
//!
//! A *group* is a set of tasks bound to run on one cluster (its *colour*); at first every
//! task is its own uncoloured group. A colouring is evaluated by list scheduling in
//! topological order onto the clusters' free profiles: a coloured task takes its earliest
//! slot on its cluster, an uncoloured one the earliest-starting slot of any cluster (the
//! seed's phase 2 for `V_nonsched`). Edges inside a cluster cost nothing, so a group's
//! internal edges are zeroed. The parallel time `PT` is the evaluated makespan and the
//! dominant sequence `DS` the chain of binding producers back from the last task.
//!
//! Each round takes the arcs of `DS` whose ends are in different groups, heaviest first
//! (mean transfer time of the edge's data), and for the first arc for which some cluster
//! can host both groups with every member's slot starting within the plan's horizon and
//! the new `PT` strictly lower, merges the two groups onto the cluster giving the lowest
//! `PT`. Rounds stop when there are no more groups than clusters, when no arc of `DS` can
//! be merged, or when the budget of evaluations is spent. The budget stands for the seed's
//! planning time limited by priority: [`DscConfig::budget`] grows with it, and counts
//! evaluations instead of seconds so that the result never depends on the machine.
//!
//! The first evaluation (nothing coloured) is the greedy earliest-start mapping and a merge
//! is taken only if it lowers `PT`, so DSC's makespan is never above greedy's. The result is
//! the schedule of the last accepted colouring: the slots tested are the slots kept (the
//! seed's marks, point 9 of the note).

use super::board::Board;
use super::dag::Dag;
use super::error::WorkflowError;
use super::mapping::Mapping;
use super::site::GridState;
use serde::{Deserialize, Serialize};

/// The DSC mapper's search budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DscConfig {
    /// Evaluations allowed to a workflow of priority 0.
    pub base_evaluations: usize,
    /// Evaluations added per priority level.
    pub evaluations_per_priority: usize,
}

impl Default for DscConfig {
    fn default() -> Self {
        DscConfig {
            base_evaluations: 200,
            evaluations_per_priority: 100,
        }
    }
}

impl DscConfig {
    /// The phase-1 budget of a workflow of this priority, in trial schedules.
    pub fn budget(&self, priority: u32) -> usize {
        self.base_evaluations.saturating_add(
            self.evaluations_per_priority
                .saturating_mul(priority as usize),
        )
    }
}

/// Schedules every task, coloured ones on their cluster, the others at their earliest
/// start; `None` when a coloured task never fits its cluster.
fn evaluate<'a, 'w>(
    dag: &'a Dag<'w>,
    grid: &'a GridState,
    colour: &[Option<usize>],
) -> Result<Option<Board<'a, 'w>>, WorkflowError> {
    let mut b = Board::new(dag, grid);
    for &i in &dag.topo {
        match colour[i] {
            Some(site) => match b.slot(i, site) {
                Some(w) => b.place(i, site, w),
                None => return Ok(None),
            },
            None => {
                let (site, w) = b.best_slot(i, |start, end| (start, end))?;
                b.place(i, site, w);
            }
        }
    }
    Ok(Some(b))
}

/// The makespan's end of a full board.
fn pt(b: &Board<'_, '_>) -> crate::time::Time {
    b.placed
        .iter()
        .map(|p| p.expect("invariant: evaluated boards place every task").end)
        .max()
        .expect("invariant: a workflow has tasks")
}

/// The dominant sequence's arcs (edge indices), from the last task back to an entry task:
/// at each task the producer whose data arrives last (the binding one when the task waited
/// for data; the path continues through it either way).
fn dominant_sequence(b: &Board<'_, '_>) -> Vec<usize> {
    let placed = |i: usize| b.placed[i].expect("invariant: full board");
    let mut cur = (0..b.dag.len())
        .max_by_key(|&i| (placed(i).end, std::cmp::Reverse(i)))
        .expect("invariant: a workflow has tasks");
    let mut arcs = Vec::new();
    loop {
        let here = placed(cur);
        let arrival = |&(p, e): &(usize, usize)| {
            let pp = placed(p);
            pp.end + b.grid.transfer(&b.dag.wf.edges[e], pp.site, here.site)
        };
        let Some(&(p, e)) = b.dag.preds[cur]
            .iter()
            .max_by_key(|x| (arrival(x), std::cmp::Reverse(x.0)))
        else {
            return arcs;
        };
        arcs.push(e);
        cur = p;
    }
}

/// Maps `dag` onto `grid` by the seed's DSC variant with `cfg`'s budget.
pub fn dsc(dag: &Dag<'_>, grid: &GridState, cfg: &DscConfig) -> Result<Mapping, WorkflowError> {
    let n = dag.len();
    let index_of = |id| {
        dag.wf
            .tasks
            .iter()
            .position(|t| t.id == id)
            .expect("invariant: edges name tasks")
    };
    let mut budget = cfg.budget(dag.wf.priority);
    let mut group: Vec<usize> = (0..n).collect();
    let mut groups = n;
    let mut colour: Vec<Option<usize>> = vec![None; n];
    let mut best = evaluate(dag, grid, &colour)?.expect("invariant: nothing coloured fits");
    let mut best_pt = pt(&best);
    let mut merges = 0;
    let weight: Vec<f64> = dag.wf.edges.iter().map(|e| grid.mean_transfer(e)).collect();
    'rounds: while groups > grid.sites.len() && budget > 0 {
        let mut arcs = dominant_sequence(&best);
        arcs.sort_by(|&a, &b| weight[b].total_cmp(&weight[a]).then(a.cmp(&b)));
        for e in arcs {
            let (u, v) = (index_of(dag.wf.edges[e].from), index_of(dag.wf.edges[e].to));
            let (gu, gv) = (group[u], group[v]);
            if gu == gv {
                continue;
            }
            let members: Vec<usize> = (0..n)
                .filter(|&i| group[i] == gu || group[i] == gv)
                .collect();
            let mut found: Option<(crate::time::Time, usize, Board<'_, '_>)> = None;
            for r in 0..grid.sites.len() {
                if !members.iter().all(|&i| dag.hosts[i].contains(&r)) {
                    continue;
                }
                if budget == 0 {
                    break 'rounds;
                }
                budget -= 1;
                let mut trial = colour.clone();
                for &i in &members {
                    trial[i] = Some(r);
                }
                let Some(b) = evaluate(dag, grid, &trial)? else {
                    continue;
                };
                let within = members
                    .iter()
                    .all(|&i| b.placed[i].is_some_and(|p| p.start < grid.horizon));
                let t = pt(&b);
                if within && t < best_pt && found.as_ref().is_none_or(|f| t < f.0) {
                    found = Some((t, r, b));
                }
            }
            if let Some((t, r, b)) = found {
                for &i in &members {
                    group[i] = gu;
                    colour[i] = Some(r);
                }
                groups -= 1;
                merges += 1;
                best = b;
                best_pt = t;
                continue 'rounds;
            }
        }
        break;
    }
    Ok(best.into_mapping(merges))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::{Dur, Time};
    use crate::workflow::{check, greedy, Edge, Site, Task, TaskId, Workflow};

    /// A chain t1 -> t2 -> t3 of 100 s each; cluster `fast` is reserved on [0, 10), cluster
    /// `slow` (speed 0.25) is free. Greedy starts t1 at once on `slow` (400 s), then t2 and
    /// t3 on `fast`: makespan 600. Merging the first arc of the dominant sequence onto
    /// `fast` gives 10 + 3 × 100 = 310, and leaves two groups for two clusters: done.
    fn case() -> (Workflow, GridState) {
        let wf = Workflow {
            name: "chain".into(),
            priority: 0,
            tasks: vec![
                Task::new(1, "t1", 1, Dur(100)),
                Task::new(2, "t2", 1, Dur(100)),
                Task::new(3, "t3", 1, Dur(100)),
            ],
            edges: vec![
                Edge {
                    from: TaskId(1),
                    to: TaskId(2),
                    data_mb: 0.0,
                },
                Edge {
                    from: TaskId(2),
                    to: TaskId(3),
                    data_mb: 0.0,
                },
            ],
        };
        let mut fast = Site::new("fast", 1);
        fast.free.take(Time(0), Time(10), 1);
        let slow = Site {
            speed: 0.25,
            ..Site::new("slow", 1)
        };
        let grid = GridState {
            now: Time(0),
            horizon: Time::MAX,
            sites: vec![fast, slow],
        };
        (wf, grid)
    }

    #[test]
    fn merging_the_dominant_arc_beats_greedy() {
        let (wf, grid) = case();
        let dag = Dag::new(&wf, &grid).unwrap();
        let g = greedy(&dag, &grid).unwrap();
        assert_eq!(g.makespan(), Dur(600));
        let m = dsc(&dag, &grid, &DscConfig::default()).unwrap();
        check(&dag, &grid, &m).unwrap();
        assert_eq!(m.makespan(), Dur(310));
        assert_eq!(m.merges, 1);
        assert!(m.placements.iter().all(|p| p.site == 0));
    }

    #[test]
    fn no_merge_beyond_the_horizon_or_the_budget() {
        let (wf, mut grid) = case();
        grid.horizon = Time(5); // `fast` has no slot starting before 5
        let dag = Dag::new(&wf, &grid).unwrap();
        let m = dsc(&dag, &grid, &DscConfig::default()).unwrap();
        assert_eq!((m.makespan(), m.merges), (Dur(600), 0));
        grid.horizon = Time::MAX;
        let none = DscConfig {
            base_evaluations: 0,
            evaluations_per_priority: 0,
        };
        let m = dsc(&dag, &grid, &none).unwrap();
        assert_eq!((m.makespan(), m.merges), (Dur(600), 0));
    }

    #[test]
    fn budget_grows_with_priority() {
        let c = DscConfig::default();
        assert_eq!(c.budget(0), 200);
        assert_eq!(c.budget(3), 500);
    }
}
