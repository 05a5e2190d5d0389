//! The partial schedule every mapper builds on: the clusters' free profiles with the tasks
//! placed so far taken out, and the earliest slot of a task on a cluster once its producers
//! are placed (insertion: any hole long enough after the data is ready).

use super::dag::Dag;
use super::error::WorkflowError;
use super::mapping::{Mapping, Placement};
use super::site::GridState;
use crate::profile::Profile;
use crate::time::Time;

/// A partial schedule.
#[derive(Clone, Debug)]
pub(crate) struct Board<'a, 'w> {
    pub dag: &'a Dag<'w>,
    pub grid: &'a GridState,
    free: Vec<Profile>,
    pub placed: Vec<Option<Placement>>,
}

impl<'a, 'w> Board<'a, 'w> {
    /// Nothing placed yet.
    pub fn new(dag: &'a Dag<'w>, grid: &'a GridState) -> Self {
        Board {
            dag,
            grid,
            free: grid.sites.iter().map(|s| s.free.clone()).collect(),
            placed: vec![None; dag.len()],
        }
    }

    /// When all of the task's input can be on `site`: `now`, or the latest producer's end
    /// plus its transfer. Every producer must be placed.
    pub fn ready(&self, task: usize, site: usize) -> Time {
        let mut t = self.grid.now;
        for &(p, e) in &self.dag.preds[task] {
            let pp = self.placed[p].expect("invariant: producers are placed first");
            t = t.max(pp.end + self.grid.transfer(&self.dag.wf.edges[e], pp.site, site));
        }
        t
    }

    /// The earliest `(start, end)` of the task on `site` (which must be able to host it), or
    /// `None` when the site never again has enough processors free for long enough.
    pub fn slot(&self, task: usize, site: usize) -> Option<(Time, Time)> {
        let t = &self.dag.wf.tasks[task];
        let d = self.grid.sites[site].runtime(t);
        let start = self.free[site].earliest(self.ready(task, site), t.procs, d)?;
        Some((start, start + d))
    }

    /// Holds the task's processors on `site` for `[start, end)`.
    pub fn place(&mut self, task: usize, site: usize, (start, end): (Time, Time)) {
        let t = &self.dag.wf.tasks[task];
        self.free[site].take(start, end, t.procs);
        self.placed[task] = Some(Placement {
            task: t.id,
            site,
            start,
            end,
        });
    }

    /// The earliest slot over all hosts, by `key` of `(start, end)` (ties to the lower
    /// cluster index); an error naming the task when no host ever has room.
    pub fn best_slot<K: Ord>(
        &self,
        task: usize,
        key: impl Fn(Time, Time) -> K,
    ) -> Result<(usize, (Time, Time)), WorkflowError> {
        self.dag.hosts[task]
            .iter()
            .filter_map(|&s| self.slot(task, s).map(|w| (s, w)))
            .min_by_key(|&(s, (a, b))| (key(a, b), s))
            .ok_or_else(|| self.no_room(task))
    }

    /// The error for a task that fits no cluster's remaining free time.
    pub fn no_room(&self, task: usize) -> WorkflowError {
        WorkflowError::ImpossibleTask {
            task: self.dag.wf.tasks[task].name.clone(),
            reason: "no cluster that can host it ever has enough processors free".into(),
        }
    }

    /// The finished mapping; every task must be placed.
    pub fn into_mapping(self, merges: usize) -> Mapping {
        Mapping {
            placements: self
                .placed
                .into_iter()
                .map(|p| p.expect("invariant: every task is placed"))
                .collect(),
            now: self.grid.now,
            merges,
        }
    }
}
