//! The result of a mapper, its metrics, and the validator every mapping must pass.

use super::dag::Dag;
use super::error::Violation;
use super::model::TaskId;
use super::site::GridState;
use crate::time::{Dur, Time};
use serde::{Deserialize, Serialize};

/// Where and when one task runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// The task.
    pub task: TaskId,
    /// Index of the cluster in [`GridState::sites`].
    pub site: usize,
    /// Start of its slot (its processors are held from here).
    pub start: Time,
    /// End of its slot.
    pub end: Time,
}

/// A whole workflow mapped: one placement per task, in the workflow's task order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mapping {
    /// One per task, in the order of `Workflow::tasks`.
    pub placements: Vec<Placement>,
    /// When mapping began: the makespan counts from here.
    pub now: Time,
    /// Merges the DSC mapper accepted (0 for the others): how much of the mapping came from
    /// clustering rather than from earliest slots.
    pub merges: usize,
}

impl Mapping {
    /// The last end.
    pub fn end(&self) -> Time {
        self.placements
            .iter()
            .map(|p| p.end)
            .max()
            .unwrap_or(self.now)
    }

    /// From `now` to the last end.
    pub fn makespan(&self) -> Dur {
        self.end() - self.now
    }

    /// Seconds of data transfer between clusters over all edges of the workflow (edges
    /// within one cluster cost nothing).
    pub fn staging(&self, dag: &Dag<'_>, grid: &GridState) -> Dur {
        let mut sum = Dur::ZERO;
        for e in &dag.wf.edges {
            let (a, b) = (self.of(dag, e.from), self.of(dag, e.to));
            sum = sum + grid.transfer(e, a.site, b.site);
        }
        sum
    }

    /// The placement of the task with this id.
    fn of(&self, dag: &Dag<'_>, id: TaskId) -> &Placement {
        let i = dag
            .wf
            .tasks
            .iter()
            .position(|t| t.id == id)
            .expect("invariant: edges of a validated workflow name its tasks");
        &self.placements[i]
    }

    /// Takes the mapping's time out of the clusters' free profiles, as the reservations it
    /// stands for will (used to chain mappings, and by the simulator).
    pub fn apply(&self, dag: &Dag<'_>, grid: &mut GridState) {
        for (p, t) in self.placements.iter().zip(&dag.wf.tasks) {
            grid.sites[p.site].free.take(p.start, p.end, t.procs);
        }
    }
}

/// Checks every rule a mapping must keep: each task placed once, on a cluster that can host
/// it, for exactly its runtime there, not before `now`; each task starts after every
/// producer's end plus the transfer time between their clusters; and no cluster ever runs
/// more processors than were free in `grid` (so nothing double-books a processor, and the
/// reservations and local jobs already in the profiles are untouched).
pub fn check(dag: &Dag<'_>, grid: &GridState, m: &Mapping) -> Result<(), Violation> {
    let tasks = &dag.wf.tasks;
    for t in tasks {
        let count = m.placements.iter().filter(|p| p.task == t.id).count();
        if count != 1 {
            return Err(Violation::PlacedCount {
                task: t.name.clone(),
                count,
            });
        }
    }
    if m.placements.len() != tasks.len() {
        return Err(Violation::PlacedCount {
            task: "(unknown)".into(),
            count: m.placements.len(),
        });
    }
    for (i, t) in tasks.iter().enumerate() {
        let p = &m.placements[i];
        let bad = |reason: String| Violation::BadPlacement {
            task: t.name.clone(),
            reason,
        };
        if p.task != t.id {
            return Err(bad(format!("placement {i} names task {}", p.task)));
        }
        let Some(site) = grid.sites.get(p.site) else {
            return Err(bad(format!("cluster index {} does not exist", p.site)));
        };
        if !site.can_host(t) {
            return Err(bad(format!("cluster {:?} cannot host it", site.name)));
        }
        if p.end - p.start != site.runtime(t) {
            return Err(bad(format!(
                "it is given {} on {:?} but runs {} there",
                p.end - p.start,
                site.name,
                site.runtime(t)
            )));
        }
        if p.start < m.now {
            return Err(Violation::InThePast {
                task: t.name.clone(),
                start: p.start,
                now: m.now,
            });
        }
    }
    for (to, ps) in dag.preds.iter().enumerate() {
        for &(from, e) in ps {
            let (a, b) = (&m.placements[from], &m.placements[to]);
            let ready = a.end + grid.transfer(&dag.wf.edges[e], a.site, b.site);
            if b.start < ready {
                return Err(Violation::Precedence {
                    from: tasks[from].name.clone(),
                    to: tasks[to].name.clone(),
                    start: b.start,
                    ready,
                });
            }
        }
    }
    let mut free: Vec<_> = grid.sites.iter().map(|s| s.free.clone()).collect();
    let mut order: Vec<usize> = (0..tasks.len()).collect();
    order.sort_by_key(|&i| (m.placements[i].start, i));
    for i in order {
        let p = &m.placements[i];
        let prof = &mut free[p.site];
        if prof.min_free(p.start, p.end) < i64::from(tasks[i].procs) {
            return Err(Violation::Overbooked {
                cluster: grid.sites[p.site].name.clone(),
                task: tasks[i].name.clone(),
                at: p.start,
            });
        }
        prof.take(p.start, p.end, tasks[i].procs);
    }
    Ok(())
}
