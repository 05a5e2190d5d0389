//! Validation of a workflow into an indexed DAG: ids resolved, cycles refused (Kahn's
//! algorithm), and every task checked against the grid.

use super::error::WorkflowError;
use super::model::{TaskId, Workflow};
use super::site::GridState;
use crate::time::Dur;
use std::collections::BTreeMap;

/// A validated workflow: tasks by dense index (their order in `Workflow::tasks`), edges by
/// index into `Workflow::edges`, and one topological order.
#[derive(Clone, Debug)]
pub struct Dag<'w> {
    /// The workflow validated.
    pub wf: &'w Workflow,
    /// Per task: `(predecessor, edge)`.
    pub preds: Vec<Vec<(usize, usize)>>,
    /// Per task: `(successor, edge)`.
    pub succs: Vec<Vec<(usize, usize)>>,
    /// Tasks in a topological order, ties by position in the workflow.
    pub topo: Vec<usize>,
    /// Per task: the clusters able to host it (never empty).
    pub hosts: Vec<Vec<usize>>,
}

impl<'w> Dag<'w> {
    /// Checks `wf` against `grid` and indexes it.
    pub fn new(wf: &'w Workflow, grid: &GridState) -> Result<Dag<'w>, WorkflowError> {
        if wf.tasks.is_empty() {
            return Err(WorkflowError::Empty(wf.name.clone()));
        }
        let mut index: BTreeMap<TaskId, usize> = BTreeMap::new();
        for (i, t) in wf.tasks.iter().enumerate() {
            if let Some(&j) = index.get(&t.id) {
                return Err(WorkflowError::DuplicateTask {
                    id: t.id,
                    first: wf.tasks[j].name.clone(),
                    second: t.name.clone(),
                });
            }
            index.insert(t.id, i);
            let impossible = |reason: String| WorkflowError::ImpossibleTask {
                task: t.name.clone(),
                reason,
            };
            if t.procs == 0 {
                return Err(impossible("it asks for 0 processors".into()));
            }
            if t.walltime <= Dur::ZERO {
                return Err(impossible(format!(
                    "walltime {} is not positive",
                    t.walltime
                )));
            }
            if t.predicted.is_some_and(|p| p <= Dur::ZERO) {
                return Err(impossible("the predicted runtime is not positive".into()));
            }
            if let Some((site, d)) = t.runtime_on.iter().find(|(_, d)| **d <= Dur::ZERO) {
                return Err(impossible(format!("runtime {d} on {site} is not positive")));
            }
        }
        let n = wf.tasks.len();
        let mut preds = vec![Vec::new(); n];
        let mut succs = vec![Vec::new(); n];
        for (e, edge) in wf.edges.iter().enumerate() {
            let find = |id: TaskId| {
                index.get(&id).copied().ok_or(WorkflowError::UnknownTask {
                    from: edge.from,
                    to: edge.to,
                    missing: id,
                })
            };
            let (a, b) = (find(edge.from)?, find(edge.to)?);
            let invalid = |reason: &str| WorkflowError::InvalidEdge {
                from: edge.from,
                to: edge.to,
                reason: reason.into(),
            };
            if a == b {
                return Err(invalid("a task cannot depend on itself"));
            }
            if !edge.data_mb.is_finite() || edge.data_mb < 0.0 {
                return Err(invalid("data_mb must be a finite number ≥ 0"));
            }
            succs[a].push((b, e));
            preds[b].push((a, e));
        }
        let topo = topological(&preds, &succs).map_err(|on_cycle| {
            let path = cycle_path(&succs, on_cycle);
            WorkflowError::Cycle {
                task: wf.tasks[on_cycle].name.clone(),
                path: path
                    .iter()
                    .map(|&i| wf.tasks[i].name.as_str())
                    .collect::<Vec<_>>()
                    .join(" -> "),
            }
        })?;
        let mut hosts = Vec::with_capacity(n);
        for t in &wf.tasks {
            let h: Vec<usize> = (0..grid.sites.len())
                .filter(|&s| grid.sites[s].can_host(t))
                .collect();
            if h.is_empty() {
                let largest = grid.sites.iter().map(|s| s.free.capacity()).max();
                return Err(WorkflowError::ImpossibleTask {
                    task: t.name.clone(),
                    reason: format!(
                        "no cluster has {} processors and features {:?} (largest cluster: {})",
                        t.procs,
                        t.requires,
                        largest.unwrap_or(0)
                    ),
                });
            }
            hosts.push(h);
        }
        Ok(Dag {
            wf,
            preds,
            succs,
            topo,
            hosts,
        })
    }

    /// Number of tasks.
    pub fn len(&self) -> usize {
        self.wf.tasks.len()
    }

    /// Always false: a validated workflow has tasks.
    pub fn is_empty(&self) -> bool {
        self.wf.tasks.is_empty()
    }
}

/// Kahn's algorithm, smallest index first among ready tasks; `Err(task)` names a task left
/// on a cycle.
fn topological(
    preds: &[Vec<(usize, usize)>],
    succs: &[Vec<(usize, usize)>],
) -> Result<Vec<usize>, usize> {
    let n = preds.len();
    let mut indeg: Vec<usize> = preds.iter().map(Vec::len).collect();
    let mut ready: std::collections::BTreeSet<usize> = (0..n).filter(|&i| indeg[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &(s, _) in &succs[i] {
            indeg[s] -= 1;
            if indeg[s] == 0 {
                ready.insert(s);
            }
        }
    }
    if order.len() == n {
        Ok(order)
    } else {
        Err((0..n)
            .find(|&i| indeg[i] > 0)
            .expect("invariant: some task is left"))
    }
}

/// A cycle reachable from `start` (a task left by Kahn's algorithm), as task indices with
/// the first repeated at the end.
fn cycle_path(succs: &[Vec<(usize, usize)>], start: usize) -> Vec<usize> {
    // Every task left by Kahn's algorithm has a left predecessor, hence a left successor on
    // some cycle reachable from it; walking successors that can reach back finds it. A plain
    // walk with a visited map suffices: follow any successor that is itself on a cycle path.
    let mut on_path: BTreeMap<usize, usize> = BTreeMap::new();
    let mut path = vec![start];
    let mut cur = start;
    on_path.insert(start, 0);
    loop {
        // Prefer a successor that leads back into a cycle: one with a path to some node on
        // the current path. Any successor that was left by Kahn qualifies eventually; we
        // pick the first that has not been a dead end.
        let next = succs[cur]
            .iter()
            .map(|&(s, _)| s)
            .find(|&s| reaches_cycle(succs, s));
        let Some(next) = next else {
            return path;
        };
        if let Some(&k) = on_path.get(&next) {
            let mut cyc = path[k..].to_vec();
            cyc.push(next);
            return cyc;
        }
        on_path.insert(next, path.len());
        path.push(next);
        cur = next;
    }
}

/// True when a cycle is reachable from `s`.
fn reaches_cycle(succs: &[Vec<(usize, usize)>], s: usize) -> bool {
    // Colour DFS: 0 white, 1 on stack, 2 done.
    let mut colour = vec![0u8; succs.len()];
    let mut stack = vec![(s, 0usize)];
    colour[s] = 1;
    while let Some(&mut (v, ref mut k)) = stack.last_mut() {
        if *k < succs[v].len() {
            let w = succs[v][*k].0;
            *k += 1;
            match colour[w] {
                0 => {
                    colour[w] = 1;
                    stack.push((w, 0));
                }
                1 => return true,
                _ => {}
            }
        } else {
            colour[v] = 2;
            stack.pop();
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Time;
    use crate::workflow::{Edge, Site, Task};

    fn grid() -> GridState {
        GridState {
            now: Time(0),
            horizon: Time::MAX,
            sites: vec![Site::new("a", 4), Site::new("b", 8)],
        }
    }

    fn wf(edges: &[(u32, u32)]) -> Workflow {
        Workflow {
            name: "w".into(),
            priority: 0,
            tasks: (1..=4)
                .map(|i| Task::new(i, format!("t{i}"), 2, Dur(10)))
                .collect(),
            edges: edges
                .iter()
                .map(|&(a, b)| Edge {
                    from: TaskId(a),
                    to: TaskId(b),
                    data_mb: 1.0,
                })
                .collect(),
        }
    }

    #[test]
    fn errors_name_what_is_wrong() {
        struct Case {
            name: &'static str,
            wf: Workflow,
            want: &'static str,
        }
        let mut big = wf(&[]);
        big.tasks[2].procs = 9;
        let mut licensed = wf(&[]);
        licensed.tasks[1].requires = vec!["ansys".into()];
        let mut dup = wf(&[]);
        dup.tasks[3].id = TaskId(1);
        let cases = [
            Case {
                name: "cycle",
                wf: wf(&[(1, 2), (2, 3), (3, 2), (3, 4)]),
                want: "the edges form a cycle through task \"t2\" (t2 -> t3 -> t2)",
            },
            Case {
                name: "unknown",
                wf: wf(&[(1, 7)]),
                want: "edge 1 -> 7 names unknown task 7",
            },
            Case {
                name: "self-loop",
                wf: wf(&[(3, 3)]),
                want: "edge 3 -> 3: a task cannot depend on itself",
            },
            Case {
                name: "too large",
                wf: big,
                want: "task \"t3\" can never run: no cluster has 9 processors and features [] (largest cluster: 8)",
            },
            Case {
                name: "missing feature",
                wf: licensed,
                want: "task \"t2\" can never run: no cluster has 2 processors and features [\"ansys\"] (largest cluster: 8)",
            },
            Case {
                name: "duplicate",
                wf: dup,
                want: "task id 1 is used by both \"t1\" and \"t4\"",
            },
        ];
        for c in cases {
            let err = Dag::new(&c.wf, &grid()).err().map(|e| e.to_string());
            assert_eq!(err.as_deref(), Some(c.want), "{}", c.name);
        }
    }

    #[test]
    fn topological_order_puts_producers_first() {
        let w = wf(&[(4, 1), (1, 3), (2, 3)]);
        let d = Dag::new(&w, &grid()).unwrap();
        assert_eq!(d.topo, vec![1, 3, 0, 2]);
        assert_eq!(d.hosts[0], vec![0, 1]);
    }
}
