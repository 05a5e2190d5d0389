//! The gate in front of the schedulers: a job with dependencies (`--dependency`), in an array
//! with a limit (`--array ...%N`) or a `singleton` waits here, pending with Slurm's reason
//! (`Dependency`, `JobArrayTaskLimit`), and is handed to its scheduler only once they hold. A
//! dependency that can never hold cancels the job, with the reason.

use super::World;
use crate::state::dependency::{dependency_verdict, Named, OutputCopy};
use crate::state::refusal::Refusal;
use crate::state::stored::ToStored;
use foresight_api::{Dependency, DependencyVerdict};
use foresight_core::time::Time;
use foresight_core::JobId;
use foresight_store::JobState;
use foresight_store::{ConditionRecord, DependencyRecord, JobRecord, UserRecord};
use std::collections::{BTreeSet, HashMap};

/// Jobs that count against limits: not ended, not waiting here, not held.
#[derive(Default)]
struct Tally {
    /// Active tasks per array job.
    array: HashMap<u64, u32>,
    /// An active job per (user, name), for `singleton`.
    named: HashMap<(String, String), u64>,
}

impl Tally {
    fn add(&mut self, j: &JobRecord) {
        if let Some(a) = j.links.as_ref().and_then(|l| l.array.as_ref()) {
            *self.array.entry(a.job).or_default() += 1;
        }
        self.named
            .entry((j.user.clone(), singleton_name(j)))
            .or_insert(j.id);
    }
}

/// The name `singleton` compares: the job's name, else its program (as Slurm's default job
/// name is its script's).
fn singleton_name(j: &JobRecord) -> String {
    j.name
        .clone()
        .or_else(|| j.command.first().cloned())
        .unwrap_or_default()
}

fn is_active(j: &JobRecord) -> bool {
    !j.state.is_final() && !j.held && !j.links.as_ref().is_some_and(|l| l.waiting)
}

/// Jobs waiting at the gate for their dependencies, array limit or singleton turn.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    /// The jobs waiting; their records say so too (`links.waiting`), for restarts.
    pub(super) waiting: BTreeSet<JobId>,
    /// Set while the gate decides (`Some(again)`): a job ending meanwhile asks for one more
    /// pass instead of deciding inside the pass.
    pub(super) waking: Option<bool>,
}

impl World {
    /// Whether job `id` is stopped at the gate: a job with links (dependencies, an array, a
    /// singleton) is marked waiting and decided by [`World::wake_waiting`] rather than queued.
    pub(super) fn stop_at_gate(&mut self, id: JobId) -> bool {
        let Some(j) = self.jobs.get_mut_if(&id, |j| j.links.is_some()) else {
            return false;
        };
        if let Some(l) = j.links.as_mut() {
            l.waiting = true;
        }
        self.gate.waiting.insert(id);
        true
    }

    /// Decides every waiting job, in id order: those whose dependencies hold (and whose
    /// array and singleton limits allow) go to their schedulers; those whose dependencies
    /// can never hold are cancelled; the others keep waiting, with the reason.
    pub(super) fn wake_waiting(&mut self, now: Time) {
        if self.gate.waiting.is_empty() {
            return;
        }
        if let Some(again) = self.gate.waking.as_mut() {
            *again = true;
            return;
        }
        self.gate.waking = Some(false);
        loop {
            let mut tally = Tally::default();
            // Any job of the same name counts for a singleton, with links or without.
            for j in self.jobs.values() {
                if is_active(j) {
                    tally.add(j);
                }
            }
            let mut changed = false;
            let ids: Vec<JobId> = self.gate.waiting.iter().copied().collect();
            for id in ids {
                let Some(j) = self.jobs.get(&id) else {
                    self.gate.waiting.remove(&id);
                    continue;
                };
                if j.state.is_final() {
                    self.gate.waiting.remove(&id);
                    if let Some(l) = self.jobs.get_mut(&id).and_then(|j| j.links.as_mut()) {
                        l.waiting = false;
                    }
                    continue;
                }
                if j.held {
                    continue;
                }
                let (verdict, reason) = self.gate_verdict(j, &tally);
                match verdict {
                    DependencyVerdict::Wait => {
                        let changed = |j: &JobRecord| j.reason.as_deref() != Some(reason.as_str());
                        if let Some(j) = self.jobs.get_mut_if(&id, changed) {
                            j.reason = Some(reason);
                        }
                    }
                    DependencyVerdict::Never => {
                        self.gate.waiting.remove(&id);
                        if let Some(j) = self.jobs.get_mut(&id) {
                            if let Some(l) = j.links.as_mut() {
                                l.waiting = false;
                            }
                            j.state = JobState::Cancelled;
                            j.ended_at = Some(now.secs());
                            j.reason = Some(reason);
                        }
                        changed = true;
                    }
                    DependencyVerdict::Met => {
                        self.gate.waiting.remove(&id);
                        let Some(j) = self.jobs.get_mut(&id) else {
                            continue;
                        };
                        if let Some(l) = j.links.as_mut() {
                            l.waiting = false;
                        }
                        j.reason = None;
                        tally.add(j);
                        let global = j.cluster.is_none() && j.reservation.is_none();
                        if global {
                            self.enqueue_global(now, id);
                        } else {
                            self.submit_local(now, id);
                        }
                        changed = true;
                    }
                }
            }
            // A cancelled job may decide others (afternotok, afterany); a local job started
            // at once may have ended.
            let again = self.gate.waking.replace(false).unwrap_or(false);
            if !changed && !again {
                break;
            }
        }
        self.gate.waking = None;
    }

    /// Whether a waiting job may go: its dependencies, then its singleton turn and its
    /// array's limit; with the reason it waits or is cancelled.
    fn gate_verdict(&self, j: &JobRecord, tally: &Tally) -> (DependencyVerdict, String) {
        let Some(l) = &j.links else {
            return (DependencyVerdict::Met, String::new());
        };
        if let Some(d) = &l.dependency {
            let named = |id| {
                self.jobs.get(&JobId(id)).map(|t| Named {
                    state: t.state,
                    started: t.started_at.is_some() || t.attempt > 0,
                    label: display_id(t),
                    outputs: OutputCopy::of(t, j.id),
                })
            };
            let singleton = d.singleton.then(|| self.singleton_verdict(j, tally));
            let verdict = dependency_verdict(d, named, singleton);
            if verdict.0 != DependencyVerdict::Met {
                return verdict;
            }
        }
        if let Some(a) = &l.array {
            if let Some(limit) = a.limit {
                let running = tally.array.get(&a.job).copied().unwrap_or(0);
                if running >= limit {
                    return (
                        DependencyVerdict::Wait,
                        format!(
                            "JobArrayTaskLimit: {running} of array {}'s tasks are planned or \
                             running, its limit (%{limit})",
                            a.job
                        ),
                    );
                }
            }
        }
        (DependencyVerdict::Met, String::new())
    }

    /// `singleton`: met unless another job of the same name and user is planned or running.
    fn singleton_verdict(
        &self,
        j: &JobRecord,
        tally: &Tally,
    ) -> (DependencyVerdict, Option<String>) {
        let name = singleton_name(j);
        match tally.named.get(&(j.user.clone(), name.clone())) {
            Some(other) if *other != j.id => (
                DependencyVerdict::Wait,
                Some(format!(
                    "singleton (job {} of the same name {name:?} has not ended)",
                    self.jobs
                        .get(&JobId(*other))
                        .map_or(other.to_string(), display_id)
                )),
            ),
            _ => (DependencyVerdict::Met, None),
        }
    }

    /// A submission's `dependency`, parsed and resolved to job ids; an id the user cannot
    /// see is refused as one that does not exist, naming it.
    pub fn resolve_dependency(
        &self,
        user: &UserRecord,
        text: &str,
    ) -> Result<DependencyRecord, Refusal> {
        let d: Dependency = text
            .parse()
            .map_err(|e: String| Refusal::invalid("dependency", e))?;
        let mut on = Vec::new();
        for (kind, r) in &d.on {
            let jobs = self.resolve(&user.name, user.admin, *r);
            if jobs.is_empty() {
                return Err(Refusal::invalid(
                    "dependency",
                    format!("no job {r} (in {:?})", text.trim()),
                ));
            }
            on.push(ConditionRecord {
                kind: kind.to_stored(),
                target: r.to_string(),
                jobs: jobs.into_iter().map(u64::from).collect(),
            });
        }
        Ok(DependencyRecord {
            text: d.to_string(),
            any: d.any,
            singleton: d.singleton,
            on,
        })
    }

    /// The jobs a dependency or a job id names: an array job's id names all its tasks
    /// (`ID`), `ID_TASK` one of them; any other id, that job. Only jobs `user` may see
    /// (`admin`: all): anyone else's job is as unknown as a job that does not exist.
    pub fn resolve(&self, user: &str, admin: bool, r: foresight_api::JobRef) -> Vec<JobId> {
        let visible = |j: &&JobRecord| admin || j.user == user;
        let tasks = || {
            self.jobs
                .range(JobId(r.job)..)
                .map(|(_, j)| j)
                .filter(|j| {
                    j.links
                        .as_ref()
                        .and_then(|l| l.array.as_ref())
                        .is_some_and(|a| a.job == r.job)
                })
                .filter(visible)
        };
        match r.task {
            Some(t) => tasks()
                .filter(|j| {
                    j.links
                        .as_ref()
                        .and_then(|l| l.array.as_ref())
                        .is_some_and(|a| a.task == t)
                })
                .map(|j| JobId(j.id))
                .take(1)
                .collect(),
            None => {
                let all: Vec<JobId> = tasks().map(|j| JobId(j.id)).collect();
                if all.is_empty() {
                    self.jobs
                        .get(&JobId(r.job))
                        .filter(visible)
                        .map(|j| JobId(j.id))
                        .into_iter()
                        .collect()
                } else {
                    all
                }
            }
        }
    }
}

/// A job's id as people use it: `ID`, or `ARRAY_TASK`.
pub fn display_id(j: &JobRecord) -> String {
    match j.links.as_ref().and_then(|l| l.array.as_ref()) {
        Some(a) => format!("{}_{}", a.job, a.task),
        None => j.id.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::super::tests::{cluster, exit, job, launches, world};
    use super::*;
    use foresight_core::ClusterId;
    use foresight_store::{ArrayTask, Links};

    fn local(id: u64) -> JobRecord {
        JobRecord {
            cluster: Some("a".into()),
            co_allocate: false,
            ..job(id, "ann", 1, 60)
        }
    }

    fn task(id: u64, first: u64, index: u32, limit: Option<u32>) -> JobRecord {
        JobRecord {
            links: Some(Links {
                array: Some(ArrayTask {
                    job: first,
                    task: index,
                    position: (id - first) as u32,
                    limit,
                }),
                ..Links::default()
            }),
            ..local(id)
        }
    }

    fn after(id: u64, w: &World, text: &str) -> JobRecord {
        let user = w.users["ann"].clone();
        JobRecord {
            links: Some(Links {
                dependency: Some(w.resolve_dependency(&user, text).unwrap()),
                ..Links::default()
            }),
            ..local(id)
        }
    }

    /// Four tasks with `%2` on a cluster of four processors: two run, each end lets one more.
    #[test]
    fn an_array_limit_caps_the_tasks_running_at_once() {
        let mut w = world(vec![cluster("a", 4)]);
        w.accept(
            Time(1_000),
            (10..14)
                .map(|i| task(i, 10, (i - 10) as u32 * 2, Some(2)))
                .collect(),
        );
        let l = launches(&mut w);
        assert_eq!(l.iter().map(|l| l.1).collect::<Vec<_>>(), vec![10, 11]);
        assert!(w.jobs[&JobId(12)].reason.as_deref().unwrap().starts_with(
            "JobArrayTaskLimit: 2 of array 10's tasks are planned or running, its limit (%2)"
        ));
        w.on_finished(Time(1_005), ClusterId(0), JobId(10), 0, &exit(0));
        assert_eq!(
            launches(&mut w).iter().map(|l| l.1).collect::<Vec<_>>(),
            vec![12]
        );
        assert!(w.jobs[&JobId(13)].links.as_ref().unwrap().waiting);
        w.on_finished(Time(1_006), ClusterId(0), JobId(11), 0, &exit(1));
        assert_eq!(
            launches(&mut w).iter().map(|l| l.1).collect::<Vec<_>>(),
            vec![13]
        );
        // Each task's environment names its index and the array.
        let spec = w.part_spec(JobId(13), 0, vec![0]).unwrap();
        assert!(spec
            .env
            .contains(&("FORESIGHT_ARRAY_TASK_ID".into(), "6".into())));
        assert!(spec
            .env
            .contains(&("FORESIGHT_ARRAY_JOB_ID".into(), "10".into())));
        assert!(!spec.env.iter().any(|(k, _)| k.starts_with("SLURM_")));
    }

    /// afterok on a job that fails cancels; afternotok on it then holds; `?` needs one.
    #[test]
    fn dependencies_wait_hold_or_never_hold() {
        let mut w = world(vec![cluster("a", 4)]);
        w.accept(Time(1_000), vec![local(1)]);
        let deps = vec![
            after(2, &w, "afterok:1"),
            after(3, &w, "afternotok:1"),
            after(4, &w, "afterok:1?afterany:1"),
        ];
        w.accept(Time(1_000), deps);
        assert_eq!(
            launches(&mut w).iter().map(|l| l.1).collect::<Vec<_>>(),
            vec![1]
        );
        assert_eq!(
            w.jobs[&JobId(2)].reason.as_deref(),
            Some("Dependency: waiting for afterok:1 (job 1 is running)")
        );
        w.on_finished(Time(1_010), ClusterId(0), JobId(1), 0, &exit(3));
        assert_eq!(w.jobs[&JobId(2)].state, JobState::Cancelled);
        assert_eq!(
            w.jobs[&JobId(2)].reason.as_deref(),
            Some(
                "DependencyNeverSatisfied: afterok:1 can never hold (afterok:1 (job 1 is failed))"
            )
        );
        assert_eq!(w.jobs[&JobId(2)].ended_at, Some(1_010));
        assert_eq!(
            launches(&mut w).iter().map(|l| l.1).collect::<Vec<_>>(),
            vec![3, 4]
        );
        // Another user's job is as unknown as a missing one.
        let bob = w.users["bob"].clone();
        assert_eq!(
            w.resolve_dependency(&bob, "afterok:1").unwrap_err(),
            Refusal::invalid("dependency", "no job 1 (in \"afterok:1\")")
        );
        assert_eq!(
            w.resolve_dependency(&bob, "afterok:77").unwrap_err(),
            Refusal::invalid("dependency", "no job 77 (in \"afterok:77\")")
        );
    }

    /// A restart restores who waits, and the gate goes on from there.
    #[test]
    fn waiting_jobs_still_wait_after_a_restart() {
        let mut w = world(vec![cluster("a", 4)]);
        w.accept(Time(1_000), vec![local(1)]);
        w.accept(Time(1_000), vec![after(2, &w, "afterany:1")]);
        launches(&mut w);
        let jobs: Vec<JobRecord> = w.jobs.values().cloned().collect();
        let mut again = world(vec![cluster("a", 4)]);
        let adopt = again.restore(Time(1_100), jobs, vec![], vec![]);
        assert_eq!(adopt.len(), 1, "job 1 is re-adopted");
        assert!(again.gate.waiting.contains(&JobId(2)));
        assert_eq!(again.jobs[&JobId(2)].state, JobState::Pending);
        again.on_finished(Time(1_200), ClusterId(0), JobId(1), 0, &exit(0));
        assert_eq!(
            launches(&mut again).iter().map(|l| l.1).collect::<Vec<_>>(),
            vec![2]
        );
    }
}
