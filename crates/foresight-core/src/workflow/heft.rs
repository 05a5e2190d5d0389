//! HEFT (Topcuoglu, Hariri & Wu 2002, IEEE TPDS 13(3)): tasks in decreasing upward rank,
//! each on the cluster giving its earliest finish, with the insertion policy (a task may
//! take any hole long enough after its data is ready, not only the time after the
//! cluster's last task: the free profile's earliest fit does exactly that).
//!
//! `rank(n) = w̄(n) + max over successors s of (c̄(n, s) + rank(s))`, with `w̄` the mean
//! runtime over the clusters that can host the task and `c̄` the mean transfer time of the
//! edge over pairs of distinct clusters. Ties of rank go to the task listed first.

use super::board::Board;
use super::dag::Dag;
use super::error::WorkflowError;
use super::mapping::Mapping;
use super::site::GridState;

/// The upward rank of every task.
pub fn upward_ranks(dag: &Dag<'_>, grid: &GridState) -> Vec<f64> {
    let mut rank = vec![0.0f64; dag.len()];
    for &i in dag.topo.iter().rev() {
        let t = &dag.wf.tasks[i];
        let hosts = &dag.hosts[i];
        let w = hosts
            .iter()
            .map(|&s| grid.sites[s].runtime(t).as_secs() as f64)
            .sum::<f64>()
            / hosts.len() as f64;
        let tail = dag.succs[i]
            .iter()
            .map(|&(s, e)| grid.mean_transfer(&dag.wf.edges[e]) + rank[s])
            .fold(0.0, f64::max);
        rank[i] = w + tail;
    }
    rank
}

/// Maps `dag` onto `grid` by HEFT.
pub fn heft(dag: &Dag<'_>, grid: &GridState) -> Result<Mapping, WorkflowError> {
    let rank = upward_ranks(dag, grid);
    let mut order: Vec<usize> = (0..dag.len()).collect();
    // Ranks are compared in microseconds, so that sums of means that differ only by
    // rounding are ties. A producer always ranks at least 1 s above its consumers, so the
    // order stays topological.
    order.sort_by_key(|&i| (std::cmp::Reverse((rank[i] * 1e6).round() as i64), i));
    let mut b = Board::new(dag, grid);
    for i in order {
        let (site, w) = b.best_slot(i, |start, end| (end, start))?;
        b.place(i, site, w);
    }
    Ok(b.into_mapping(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::{Dur, Time};
    use crate::workflow::{check, Edge, Site, Task, TaskId, Workflow};

    /// The example of Topcuoglu, Hariri & Wu 2002 (Fig. 2): ten tasks, three processors,
    /// the computation cost table and the edge costs of the paper. Processors are clusters
    /// of one processor with 1 MB/s links and no latency, so an edge of `c` MB costs `c` s.
    pub(crate) fn topcuoglu() -> (Workflow, GridState) {
        let cost: [[i64; 3]; 10] = [
            [14, 16, 9],
            [13, 19, 18],
            [11, 13, 19],
            [13, 8, 17],
            [12, 13, 10],
            [13, 16, 9],
            [7, 15, 11],
            [5, 11, 14],
            [18, 12, 20],
            [21, 7, 16],
        ];
        let edges = [
            (1, 2, 18),
            (1, 3, 12),
            (1, 4, 9),
            (1, 5, 11),
            (1, 6, 14),
            (2, 8, 19),
            (2, 9, 16),
            (3, 7, 23),
            (4, 8, 27),
            (4, 9, 23),
            (5, 9, 13),
            (6, 8, 15),
            (7, 10, 17),
            (8, 10, 11),
            (9, 10, 13),
        ];
        let names = ["P1", "P2", "P3"];
        let tasks = (0..10)
            .map(|i| {
                let mut t = Task::new(i as u32 + 1, format!("n{}", i + 1), 1, Dur(100));
                for (p, name) in names.iter().enumerate() {
                    t.runtime_on.insert((*name).into(), Dur(cost[i][p]));
                }
                t
            })
            .collect();
        let wf = Workflow {
            name: "topcuoglu".into(),
            priority: 0,
            tasks,
            edges: edges
                .iter()
                .map(|&(a, b, c)| Edge {
                    from: TaskId(a),
                    to: TaskId(b),
                    data_mb: f64::from(c),
                })
                .collect(),
        };
        let sites = names
            .iter()
            .map(|n| Site {
                bandwidth_mb_s: 1.0,
                ..Site::new(*n, 1)
            })
            .collect();
        (
            wf,
            GridState {
                now: Time(0),
                horizon: Time::MAX,
                sites,
            },
        )
    }

    #[test]
    fn upward_ranks_match_the_paper() {
        let (wf, grid) = topcuoglu();
        let dag = Dag::new(&wf, &grid).unwrap();
        let r = upward_ranks(&dag, &grid);
        // Table of the paper (Fig. 3): 108.000, 77.000, 80.000, 80.000, 69.000, 63.333,
        // 42.667, 35.667, 44.333, 14.667.
        let want = [
            108.0, 77.0, 80.0, 80.0, 69.0, 63.333, 42.667, 35.667, 44.333, 14.667,
        ];
        for (i, (got, want)) in r.iter().zip(want).enumerate() {
            assert!((got - want).abs() < 1e-3, "n{}: {got} vs {want}", i + 1);
        }
    }

    #[test]
    fn classic_example_has_makespan_80() {
        let (wf, grid) = topcuoglu();
        let dag = Dag::new(&wf, &grid).unwrap();
        let m = heft(&dag, &grid).unwrap();
        check(&dag, &grid, &m).unwrap();
        assert_eq!(m.makespan(), Dur(80));
        // The paper's schedule (Fig. 4a): n1 on P3 at 0, n10 on P2 ending at 80.
        assert_eq!((m.placements[0].site, m.placements[0].start), (2, Time(0)));
        assert_eq!((m.placements[9].site, m.placements[9].end), (1, Time(80)));
    }
}
