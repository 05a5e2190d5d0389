//! Workflows in the service: a DAG of tasks, mapped as a whole onto the grid's current plan
//! by `foresight_core::workflow::map`, each task then a job of the owner that waits at the
//! gate (`gate.rs`) for its predecessors (`afterok`). The workflow's state is derived from
//! its tasks'; a failed task either runs again (`retry: N`) or, through the gate, cancels
//! its dependants with a reason naming it.
//!
//! # Where a task runs
//! Each task's job is a **local job of the cluster the mapping chose** (`cluster` set), not
//! a global job with a hint. The mapping has already weighed every cluster, data transfers
//! included, which the broker's per-job choice cannot see (it plans one job at a time, with
//! no edges), so a hint the broker may override would undo the mapping; pinning keeps the
//! mapping's placement and leaves the broker (and its cycle) untouched. The task is then
//! queued by that cluster's own policy once its inputs are ready, and the mapping's start
//! is kept as the task's planned start, shown beside the actual one.

use super::World;
use crate::state::refusal::Refusal;
use foresight_api::{
    derive_state, DependencyKind, FailurePolicy, JobState, WorkflowSpec, WorkflowTaskView,
    WorkflowView,
};
use foresight_core::forecast::forecast;
use foresight_core::profile::Profile;
use foresight_core::time::{Dur, Time};
use foresight_core::workflow::{self, Edge, GridState, Mapper, Site, Task, TaskId};
use foresight_core::{JobId, ReservationId};
use foresight_rm::ReserveRequest;
use foresight_store::{
    ConditionRecord, DependencyRecord, JobRecord, Links, WorkflowEdgeRecord, WorkflowRecord,
    WorkflowTaskRecord,
};
use std::collections::{BTreeMap, HashMap};

/// A workflow task's slot on a cluster that schedules itself (Slurm), recorded by phase
/// one and still to be asked of the cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteSlot {
    /// The task's index in the workflow.
    pub task: usize,
    /// Cluster index.
    pub cluster: usize,
    /// The reservation to make there.
    pub request: ReserveRequest,
}

/// The same refusal about task `index` of a workflow (`tasks[index].field`), naming it.
fn about_task(index: usize, name: &str, r: Refusal) -> Refusal {
    match r {
        Refusal::Invalid { field, reason } => Refusal::Invalid {
            field: format!("tasks[{index}].{field}"),
            reason: format!("task {name:?}: {reason}"),
        },
        Refusal::Forbidden { field, reason } => Refusal::Forbidden {
            field: format!("tasks[{index}].{field}"),
            reason: format!("task {name:?}: {reason}"),
        },
        Refusal::Conflict { field, reason } => Refusal::Conflict {
            field: Some(match field {
                Some(f) => format!("tasks[{index}].{f}"),
                None => format!("tasks[{index}]"),
            }),
            reason: format!("task {name:?}: {reason}"),
        },
        other => other,
    }
}

/// Sets each task's dependency on its predecessors' jobs (`afterok`, one condition per
/// predecessor, named by task), where not set yet: at submission once the store has
/// numbered the jobs, and at restart for a workflow stored just before a crash. The task's
/// job was stored waiting, so it never runs before this.
pub fn link_tasks(jobs: &mut BTreeMap<u64, JobRecord>, wf: &WorkflowRecord) {
    for (i, t) in wf.tasks.iter().enumerate() {
        let Some(j) = jobs.get_mut(&t.job) else {
            continue;
        };
        let links = j.links.get_or_insert_with(Links::default);
        if links.dependency.is_some() {
            continue;
        }
        let before: Vec<usize> =
            wf.edges
                .iter()
                .filter(|e| e.to == i)
                .map(|e| e.from)
                .fold(Vec::new(), |mut v, f| {
                    if !v.contains(&f) {
                        v.push(f);
                    }
                    v
                });
        if before.is_empty() {
            continue;
        }
        let ids: Vec<String> = before
            .iter()
            .map(|&p| wf.tasks[p].job.to_string())
            .collect();
        links.dependency = Some(DependencyRecord {
            text: format!("afterok:{}", ids.join(":")),
            any: false,
            singleton: false,
            on: before
                .iter()
                .map(|&p| ConditionRecord {
                    kind: DependencyKind::AfterOk,
                    target: format!("task {}", wf.tasks[p].name),
                    jobs: vec![wf.tasks[p].job],
                })
                .collect(),
        });
    }
}

impl World {
    /// The grid as the mapping sees it now: every cluster that takes work, with the free
    /// processors its local scheduler's forecast leaves (running jobs to their estimates,
    /// queued jobs and reservations where they are planned).
    pub fn workflow_grid(&self, now: Time) -> GridState {
        let sites = self
            .clusters
            .iter()
            .zip(&self.broker.clusters)
            .filter(|(c, _)| c.unavailable_reason.is_none())
            .map(|(c, g)| {
                let mut free = Profile::new(g.sched.capacity());
                for o in forecast(&g.sched, now, |_| 0.0) {
                    if o.window.end > now {
                        free.take(o.window.start.max(now), o.window.end, o.procs);
                    }
                }
                // A licence pool the cluster draws on is a feature to the mapper: a task
                // asking for its licences goes only where the pool is.
                let features = c
                    .cfg
                    .features
                    .iter()
                    .cloned()
                    .chain(
                        self.licences
                            .iter()
                            .filter(|p| p.clusters.contains(&c.cfg.name))
                            .map(|p| format!("licence:{}", p.name)),
                    )
                    .collect();
                Site {
                    name: c.cfg.name.clone(),
                    free,
                    speed: c.cfg.slowest_speed(),
                    features,
                    bandwidth_mb_s: c.cfg.bandwidth_mb_s,
                    latency: Dur(c.cfg.latency_seconds),
                }
            })
            .collect();
        GridState {
            now,
            horizon: Time::MAX,
            sites,
        }
    }

    /// Checks and maps a workflow; returns its record (jobs not numbered yet) and one job
    /// per task, each pinned to its cluster and waiting for its predecessors. Nothing is
    /// changed: the caller stores both in one transaction, then calls
    /// [`World::accept_workflow`].
    pub fn plan_workflow(
        &self,
        now: Time,
        user: &foresight_store::UserRecord,
        spec: &WorkflowSpec,
        mapper: foresight_api::MapperName,
    ) -> Result<(WorkflowRecord, Vec<JobRecord>), Refusal> {
        let walltimes = spec
            .check()
            .map_err(|(field, reason)| Refusal::invalid(&field, reason))?;
        crate::state::limits::name("name", &spec.name)?;
        let index: HashMap<&str, usize> = spec
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.as_str(), i))
            .collect();
        let edges: Vec<WorkflowEdgeRecord> = spec
            .edges
            .iter()
            .map(|e| WorkflowEdgeRecord {
                from: index[e.from.as_str()],
                to: index[e.to.as_str()],
                data_mb: e.data_mb,
                files: e.files.clone(),
            })
            .collect();
        let wf = workflow::Workflow {
            name: spec.name.clone(),
            priority: spec.priority,
            tasks: spec
                .tasks
                .iter()
                .zip(&walltimes)
                .enumerate()
                .map(|(i, (t, &w))| Task {
                    requires: t
                        .requires
                        .iter()
                        .cloned()
                        .chain(t.licences.keys().map(|l| format!("licence:{l}")))
                        .collect(),
                    ..Task::new(i as u32 + 1, t.name.clone(), t.procs, Dur(w))
                })
                .collect(),
            edges: edges
                .iter()
                .map(|e| Edge {
                    from: TaskId(e.from as u32 + 1),
                    to: TaskId(e.to as u32 + 1),
                    data_mb: e.data_mb,
                })
                .collect(),
        };
        let grid = self.workflow_grid(now);
        if grid.sites.is_empty() {
            return Err(Refusal::conflict("no cluster takes work now"));
        }
        let how = match mapper {
            foresight_api::MapperName::Dsc => Mapper::Dsc(Default::default()),
            foresight_api::MapperName::Heft => Mapper::Heft,
            foresight_api::MapperName::Greedy => Mapper::Greedy,
        };
        let mapping = workflow::map(&wf, &grid, &how).map_err(|e| {
            let field = match e {
                workflow::WorkflowError::Cycle { .. }
                | workflow::WorkflowError::InvalidEdge { .. }
                | workflow::WorkflowError::UnknownTask { .. } => "edges",
                _ => "tasks",
            };
            Refusal::invalid(field, e.to_string())
        })?;
        let cred = self.job_credentials(&user.name, Default::default())?;
        let mut tasks = Vec::with_capacity(spec.tasks.len());
        let mut jobs = Vec::with_capacity(spec.tasks.len());
        for (i, (t, &walltime)) in spec.tasks.iter().zip(&walltimes).enumerate() {
            let p = mapping
                .placements
                .iter()
                .find(|p| p.task == TaskId(i as u32 + 1))
                .ok_or_else(|| Refusal::internal(format!("task {:?} was not mapped", t.name)))?;
            let cluster = grid.sites[p.site].name.clone();
            let job = JobRecord {
                id: 0,
                user: user.name.clone(),
                name: Some(format!("{}.{}", spec.name, t.name)),
                procs: t.procs,
                walltime,
                price: None,
                cluster: Some(cluster.clone()),
                reservation: None,
                allow_early_start: false,
                co_allocate: false,
                command: t.command.clone(),
                env: t.env.clone(),
                cwd: t.cwd.clone(),
                cred: cred.clone(),
                state: JobState::Pending,
                state_after: None,
                held: false,
                suspended: false,
                priority: 0,
                requeue: false,
                requeue_pending: false,
                exit_code: None,
                signal: None,
                reason: None,
                submitted_at: now.secs(),
                begin: None,
                first_planned_start: Some(p.start.secs()),
                planned_start: None,
                started_at: None,
                ended_at: None,
                charged: 0.0,
                settled: 0.0,
                prepaid: 0.0,
                budget_hold: 0.0,
                parts: vec![],
                attempt: 0,
                stdout: None,
                stderr: None,
                // Waiting from the first write on: its dependencies are set once the store
                // has numbered the jobs (`link_tasks`), and until then it must not run.
                links: Some(Links {
                    waiting: true,
                    ..Links::default()
                }),
                requires: t.requires.clone(),
                licences: t.licences.clone(),
                ..JobRecord::default()
            };
            self.admit(&job).map_err(|r| about_task(i, &t.name, r))?;
            jobs.push(job);
            tasks.push(WorkflowTaskRecord {
                name: t.name.clone(),
                job: 0,
                cluster,
                planned_start: p.start.secs(),
                planned_end: p.end.secs(),
                retries: 0,
                reservation: None,
            });
        }
        // Each task passed alone; together they must fit the budget too, or none is taken.
        let together: Vec<(&JobRecord, usize)> = jobs.iter().map(|j| (j, 1)).collect();
        self.check_budget_together(&user.name, &together, "tasks")?;
        let record = WorkflowRecord {
            id: 0,
            user: user.name.clone(),
            name: spec.name.clone(),
            mapper,
            on_failure: spec.on_failure,
            submitted_at: now.secs(),
            tasks,
            edges,
        };
        Ok((record, jobs))
    }

    /// Phase one of a workflow's two-phase reservation: holds every task's mapped slot
    /// as a tentative reservation (for the owner, expiring after `ttl` seconds) and binds
    /// the task's job to it, so that once its inputs are ready it starts at its reserved
    /// start at the latest (earlier where processors are free; on Slurm, in its slot). All or
    /// none: if one slot cannot be held, those already held are released and the refusal
    /// names the task.
    ///
    /// A slot on a cluster that schedules itself (Slurm) is recorded and held in its mirror
    /// here, its window rounded up to the cluster's granularity (Slurm reserves whole
    /// minutes); the cluster itself is asked by the caller, outside the state's lock, for
    /// each slot returned, and the answers go to [`World::remote_slots_answered`]. Slurm has
    /// no tentative reservation: it holds them for real, and they are released if the
    /// workflow fails or its phase one lapses. Phase two is [`World::settle_workflow`].
    pub fn hold_workflow(
        &mut self,
        now: Time,
        wf: &mut WorkflowRecord,
        jobs: &mut [JobRecord],
        ttl: i64,
    ) -> Result<Vec<RemoteSlot>, Refusal> {
        let mut held = Vec::new();
        let mut remote = Vec::new();
        for (i, (t, j)) in wf.tasks.iter_mut().zip(jobs.iter_mut()).enumerate() {
            let acl = foresight_api::AclSpec {
                users: vec![wf.user.clone()],
                ..Default::default()
            };
            let k = self
                .cluster_index(&t.cluster)
                .ok_or_else(|| self.unknown_cluster(&t.cluster));
            let made = k.and_then(|k| {
                let end = if self.clusters[k].kind.schedules_itself() {
                    let g = self.broker.clusters[k].granularity.as_secs().max(1);
                    let len = (t.planned_end - t.planned_start).max(1);
                    t.planned_start + (len + g - 1) / g * g
                } else {
                    t.planned_end
                };
                let r = self.make_reservation(
                    now,
                    &wf.user,
                    k,
                    super::Held::Count(j.procs),
                    t.planned_start,
                    end,
                    acl,
                    Some(ttl),
                )?;
                Ok((k, r, end))
            });
            match made {
                Ok((k, r, end)) => {
                    held.push(r);
                    t.reservation = Some(r.0);
                    j.reservation = Some(r.0);
                    // The slot is the latest start: a task whose inputs are ready early
                    // starts early where processors are free, as the plan only got longer
                    // by waiting.
                    j.allow_early_start = true;
                    if self.clusters[k].kind.schedules_itself() {
                        remote.push(RemoteSlot {
                            task: i,
                            cluster: k,
                            request: ReserveRequest {
                                id: r.0,
                                start: t.planned_start,
                                end,
                                procs: j.procs,
                            },
                        });
                    }
                }
                Err(e) => {
                    for r in held {
                        let _ = self.release_reservation(now, r);
                    }
                    return Err(about_task(i, &t.name, e));
                }
            }
        }
        Ok(remote)
    }

    /// The clusters that schedule themselves answered phase one for the slots
    /// [`World::hold_workflow`] returned, as `(task, answer)`: all held, or the first refusal
    /// (409 naming the task and quoting the cluster), after which every slot of the
    /// workflow is released, on every cluster. A slot whose record lapsed meanwhile counts
    /// as refused.
    pub fn remote_slots_answered(
        &mut self,
        now: Time,
        wf: &WorkflowRecord,
        answers: &[(usize, Result<(), String>)],
    ) -> Result<(), Refusal> {
        let mut refused = None;
        for (i, answer) in answers {
            let Some(t) = wf.tasks.get(*i) else { continue };
            let rid = t.reservation.map(ReservationId);
            let live = rid
                .and_then(|r| self.reservations.get(&r))
                .is_some_and(|r| r.state.is_live());
            let why = match answer {
                Ok(()) if live => {
                    if let Some(r) = rid {
                        self.confirmed_at.insert(r, now);
                    }
                    continue;
                }
                Ok(()) => "its tentative reservation lapsed before the cluster held it".into(),
                Err(why) => format!("cluster {} refused to reserve its slot: {why}", t.cluster),
            };
            refused.get_or_insert((*i, why));
        }
        let Some((i, why)) = refused else {
            return Ok(());
        };
        self.settle_workflow(now, wf, false);
        Err(about_task(
            i,
            &wf.tasks[i].name,
            Refusal::conflict_at("start", why),
        ))
    }

    /// Phase two: commits every slot [`World::hold_workflow`] held (the workflow is
    /// stored), or releases them all (it is not).
    pub fn settle_workflow(&mut self, now: Time, wf: &WorkflowRecord, commit: bool) {
        for r in wf
            .tasks
            .iter()
            .filter_map(|t| t.reservation)
            .map(ReservationId)
        {
            let _ = if commit {
                self.commit_reservation(r)
            } else {
                self.release_reservation(now, r)
            };
        }
    }

    /// Takes in a workflow and its jobs, both durable: links the tasks and queues them.
    pub fn accept_workflow(&mut self, now: Time, wf: WorkflowRecord, jobs: Vec<JobRecord>) {
        let mut by_id: BTreeMap<u64, JobRecord> = jobs.into_iter().map(|j| (j.id, j)).collect();
        link_tasks(&mut by_id, &wf);
        for id in by_id.keys() {
            self.jobs.mark(JobId(*id));
        }
        self.add_workflow(wf);
        self.accept(now, by_id.into_values().collect());
    }

    /// Remembers a workflow (at acceptance, or restored).
    pub fn add_workflow(&mut self, wf: WorkflowRecord) {
        for (i, t) in wf.tasks.iter().enumerate() {
            self.task_of.insert(t.job, (wf.id, i));
        }
        self.workflows.load(wf.id, wf);
    }

    /// Whether the job that just failed is a workflow task with a retry left: if so, one
    /// retry is counted and the reason it runs again is returned.
    pub(super) fn retry_task(&mut self, id: JobId) -> Option<String> {
        let j = self.jobs.get(&id)?;
        let state = j.state_after.unwrap_or(if j.exit_code == Some(0) {
            JobState::Completed
        } else {
            JobState::Failed
        });
        if !matches!(state, JobState::Failed | JobState::Timeout) {
            return None;
        }
        let why = match (j.exit_code, j.signal, &j.reason) {
            (_, _, _) if state == JobState::Timeout => "timed out".to_string(),
            (Some(c), _, _) if c != 0 => format!("exited with code {c}"),
            (_, Some(s), _) => format!("killed by signal {s}"),
            (_, _, Some(r)) => r.clone(),
            _ => "failed".into(),
        };
        let &(w, i) = self.task_of.get(&id.0)?;
        let wf = self.workflows.get(&w)?;
        let FailurePolicy::Retry(n) = wf.on_failure else {
            return None;
        };
        if wf.tasks[i].retries >= n {
            return None;
        }
        let t = &mut self.workflows.get_mut(&w)?.tasks[i];
        t.retries += 1;
        Some(format!(
            "retry {} of {n} of task {}: the last run {why}",
            t.retries, t.name
        ))
    }

    /// Cancels every task of a workflow that has not ended.
    pub fn cancel_workflow(&mut self, now: Time, id: u64) -> Result<(), Refusal> {
        let wf = self
            .workflows
            .get(&id)
            .ok_or_else(|| Refusal::not_found_at("id", format!("no workflow {id}")))?;
        let open: Vec<JobId> = wf
            .tasks
            .iter()
            .map(|t| JobId(t.job))
            .filter(|j| self.jobs.get(j).is_some_and(|j| !j.state.is_final()))
            .collect();
        if open.is_empty() {
            let state = self.workflow_view(id).map(|v| v.state);
            return Err(Refusal::conflict(format!(
                "workflow {id} is already {}",
                state.map_or("over".into(), |s| s.to_string())
            )));
        }
        let held: Vec<ReservationId> = wf
            .tasks
            .iter()
            .filter_map(|t| t.reservation)
            .map(ReservationId)
            .collect();
        for j in open {
            // A task the gate cancelled meanwhile is already final: nothing to do.
            let _ = self.cancel(now, j);
        }
        // The slots reserved for the tasks are given back (ended ones stay as they are).
        for r in held {
            let _ = self.release_reservation(now, r);
        }
        Ok(())
    }

    /// A workflow as the API shows it.
    pub fn workflow_view(&self, id: u64) -> Option<WorkflowView> {
        let wf = self.workflows.get(&id)?;
        let tasks: Vec<WorkflowTaskView> = wf
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let j = self.jobs.get(&JobId(t.job));
                WorkflowTaskView {
                    name: t.name.clone(),
                    job: t.job,
                    state: j.map_or(JobState::Cancelled, |j| j.state),
                    cluster: t.cluster.clone(),
                    after: wf
                        .edges
                        .iter()
                        .filter(|e| e.to == i)
                        .map(|e| wf.tasks[e.from].name.clone())
                        .collect(),
                    planned_start: t.planned_start,
                    planned_end: t.planned_end,
                    started_at: j.and_then(|j| j.started_at),
                    ended_at: j.and_then(|j| j.ended_at),
                    retries: t.retries,
                    reservation: t.reservation,
                    reason: j.and_then(|j| j.reason.clone()),
                }
            })
            .collect();
        let state = derive_state(wf.tasks.iter().map(|t| match self.jobs.get(&JobId(t.job)) {
            Some(j) => (j.state, j.started_at.is_some() || j.attempt > 0),
            None => (JobState::Cancelled, false),
        }));
        Some(WorkflowView {
            id,
            name: wf.name.clone(),
            user: wf.user.clone(),
            state,
            mapper: wf.mapper,
            on_failure: wf.on_failure,
            submitted_at: wf.submitted_at,
            planned_end: wf.tasks.iter().map(|t| t.planned_end).max().unwrap_or(0),
            tasks,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::super::tests::{cluster, exit, launches, world};
    use super::super::Effect;
    use super::*;
    use crate::state::staging::FetchFailure;
    use foresight_api::{parse_workflow, MapperName, WorkflowState};
    use std::collections::BTreeSet;

    const DIAMOND: &str = "\
name: d
on_failure: {retry: 1}
tasks:
  - {name: A, command: [a], walltime: 1}
  - {name: B, command: [b], walltime: 1}
  - {name: C, command: [c], processors: 2, walltime: 1}
  - {name: D, command: [d], walltime: 1}
edges:
  - {from: A, to: B}
  - {from: A, to: C}
  - {from: B, to: D}
  - {from: C, to: D}
";

    /// Plans and accepts a workflow as the service does, numbering its jobs from `first`.
    fn submit(w: &mut World, yaml: &str, first: u64) -> u64 {
        let ann = w.users["ann"].clone();
        let spec = parse_workflow(yaml, false).unwrap();
        let (mut wf, mut jobs) = w
            .plan_workflow(Time(1_000), &ann, &spec, MapperName::Heft)
            .unwrap();
        wf.id = 7;
        for (i, (j, t)) in jobs.iter_mut().zip(wf.tasks.iter_mut()).enumerate() {
            j.id = first + i as u64;
            t.job = j.id;
        }
        w.accept_workflow(Time(1_000), wf, jobs);
        7
    }

    fn launched(w: &mut World) -> Vec<u64> {
        launches(w).iter().map(|l| l.1).collect()
    }

    #[test]
    fn tasks_run_in_order_retry_once_then_cancel_their_dependants() {
        let mut w = world(vec![cluster("a", 4)]);
        let id = submit(&mut w, DIAMOND, 1);
        assert_eq!(
            w.jobs[&JobId(4)]
                .links
                .as_ref()
                .unwrap()
                .dependency
                .as_ref()
                .unwrap()
                .text,
            "afterok:2:3"
        );
        assert_eq!(w.jobs[&JobId(1)].cluster.as_deref(), Some("a"));
        assert_eq!(launched(&mut w), vec![1]);
        assert_eq!(w.workflow_view(id).unwrap().state, WorkflowState::Running);
        w.on_finished(Time(1_010), 0, JobId(1), 0, &exit(0));
        assert_eq!(launched(&mut w), vec![2, 3]);
        // B fails: one retry, a new attempt of the same job; D still waits.
        w.on_finished(Time(1_020), 0, JobId(2), 0, &exit(3));
        assert_eq!(w.jobs[&JobId(2)].attempt, 1);
        // Started again at once on the free cluster (the retry's reason shows while it waits).
        assert_eq!(w.jobs[&JobId(2)].state, JobState::Running);
        assert_eq!(w.workflows[&id].tasks[1].retries, 1);
        assert!(w.workflows.changed().contains(&id));
        assert_eq!(launched(&mut w), vec![2]);
        assert_eq!(w.jobs[&JobId(4)].state, JobState::Pending);
        // It fails again: no retry left, D is cancelled naming B.
        w.on_finished(Time(1_030), 0, JobId(2), 1, &exit(4));
        assert_eq!(w.jobs[&JobId(2)].state, JobState::Failed);
        assert_eq!(w.jobs[&JobId(4)].state, JobState::Cancelled);
        let reason = w.jobs[&JobId(4)].reason.clone().unwrap();
        assert!(
            reason.contains("afterok:task B (job 2 is failed)"),
            "{reason}"
        );
        assert_eq!(w.workflow_view(id).unwrap().state, WorkflowState::Running);
        w.on_finished(Time(1_040), 0, JobId(3), 0, &exit(0));
        let v = w.workflow_view(id).unwrap();
        assert_eq!(v.state, WorkflowState::Failed);
        assert_eq!(v.tasks[3].after, vec!["B".to_string(), "C".to_string()]);
        assert_eq!(
            w.cancel_workflow(Time(1_050), id).unwrap_err(),
            Refusal::conflict("workflow 7 is already failed")
        );
    }

    #[test]
    fn a_restart_links_tasks_stored_before_their_links() {
        let mut w = world(vec![cluster("a", 4)]);
        let id = submit(&mut w, DIAMOND, 1);
        let wf = w.workflows[&id].clone();
        // As stored by the transaction, before the flush that writes the links.
        let mut jobs: BTreeMap<u64, JobRecord> = w
            .jobs
            .values()
            .cloned()
            .map(|mut j| {
                j.links = Some(Links {
                    waiting: true,
                    ..Links::default()
                });
                j.state = JobState::Pending;
                j.parts.clear();
                (j.id, j)
            })
            .collect();
        link_tasks(&mut jobs, &wf);
        let mut again = world(vec![cluster("a", 4)]);
        again.restore(Time(1_100), jobs.into_values().collect(), vec![], vec![]);
        again.add_workflow(wf);
        assert_eq!(launched(&mut again), vec![1]);
        assert!(again.jobs[&JobId(4)].links.as_ref().unwrap().waiting);
    }

    /// Phase one holds every slot or none: a slot another reservation took between the
    /// mapping and the hold fails the whole workflow, naming the task, and releases the
    /// slots already held; phase two commits them all.
    #[test]
    fn a_workflow_holds_every_slot_or_none() {
        use foresight_api::{AclSpec, ReservationState};
        let mut w = world(vec![cluster("a", 4)]);
        let ann = w.users["ann"].clone();
        let spec = parse_workflow(DIAMOND, false).unwrap();
        let (wf, jobs) = w
            .plan_workflow(Time(1_000), &ann, &spec, MapperName::Greedy)
            .unwrap();
        // Someone reserves C's slot meanwhile (C takes 2 of the 4 processors; 3 are taken).
        let c = &wf.tasks[2];
        w.create_reservation(
            Time(1_000),
            "root",
            "a",
            crate::state::world::Held::Count(3),
            c.planned_start,
            c.planned_end,
            AclSpec::default(),
            None,
        )
        .unwrap();
        let (mut wf1, mut jobs1) = (wf.clone(), jobs.clone());
        let e = w
            .hold_workflow(Time(1_000), &mut wf1, &mut jobs1, 60)
            .unwrap_err();
        assert_eq!(e.field(), Some("tasks[2].start"), "{e:?}");
        assert!(e.reason().starts_with("task \"C\": "), "{e:?}");
        let states: Vec<ReservationState> =
            w.reservations.values().skip(1).map(|r| r.state).collect();
        assert_eq!(
            states,
            vec![ReservationState::Released; 2],
            "A's and B's slots"
        );

        // On a free cluster every slot is held tentatively, then committed.
        let mut w = world(vec![cluster("a", 4)]);
        let (mut wf, mut jobs) = w
            .plan_workflow(Time(1_000), &ann, &spec, MapperName::Greedy)
            .unwrap();
        w.hold_workflow(Time(1_000), &mut wf, &mut jobs, 60)
            .unwrap();
        assert!(jobs
            .iter()
            .zip(&wf.tasks)
            .all(|(j, t)| j.reservation.is_some() && j.reservation == t.reservation));
        assert!(w
            .reservations
            .values()
            .all(|r| r.state == ReservationState::Tentative && r.expires_at == Some(1_060)));
        w.settle_workflow(Time(1_000), &wf, true);
        assert!(w
            .reservations
            .values()
            .all(|r| r.state == ReservationState::Committed));
    }

    /// A reserved task that ends before its slot does gives the rest of the slot back at
    /// its end: the reservation is over and the cluster's scheduler no longer holds it.
    #[test]
    fn a_reserved_task_gives_back_the_rest_of_its_slot_when_it_ends() {
        use foresight_api::ReservationState;
        let mut w = world(vec![cluster("a", 4)]);
        let ann = w.users["ann"].clone();
        let spec = parse_workflow(DIAMOND, false).unwrap();
        let (mut wf, mut jobs) = w
            .plan_workflow(Time(1_000), &ann, &spec, MapperName::Greedy)
            .unwrap();
        wf.id = 7;
        for (i, (j, t)) in jobs.iter_mut().zip(wf.tasks.iter_mut()).enumerate() {
            j.id = 1 + i as u64;
            t.job = j.id;
        }
        w.hold_workflow(Time(1_000), &mut wf, &mut jobs, 60)
            .unwrap();
        w.settle_workflow(Time(1_000), &wf, true);
        let a = ReservationId(wf.tasks[0].reservation.unwrap());
        let b = ReservationId(wf.tasks[1].reservation.unwrap());
        w.accept_workflow(Time(1_000), wf, jobs);
        assert_eq!(launched(&mut w), vec![1]);
        let held = |w: &World, r: ReservationId| {
            w.broker.clusters[0].sched.reservations().any(|x| x.id == r)
        };
        assert!(held(&w, a));
        // A ends 10 s in, long before its one-minute slot does.
        w.on_finished(Time(1_010), 0, JobId(1), 0, &exit(0));
        assert_eq!(w.reservations[&a].state, ReservationState::Finished);
        assert!(!held(&w, a), "A's slot is still held after A ended");
        // B's slot, not used yet, stands.
        assert!(held(&w, b));
        assert!(w.reservations[&b].state.is_live());
    }

    #[test]
    fn bad_workflows_name_the_task_and_change_nothing() {
        let w = world(vec![cluster("a", 4), cluster("b", 2)]);
        let ann = w.users["ann"].clone();
        let plan = |yaml: &str| {
            let spec = parse_workflow(yaml, false).unwrap();
            w.plan_workflow(Time(1_000), &ann, &spec, MapperName::Dsc)
        };
        let big = DIAMOND.replace("processors: 2", "processors: 5");
        let e = plan(&big).unwrap_err();
        assert_eq!(e.field(), Some("tasks"));
        assert!(e.reason().contains("task \"C\" can never run"), "{e:?}");
        let cyc = DIAMOND.replace("{from: C, to: D}", "{from: D, to: A}");
        let e = plan(&cyc).unwrap_err();
        assert_eq!(e.field(), Some("edges"));
        assert!(e.reason().contains("cycle"), "{e:?}");
        let cmd = DIAMOND.replace("command: [d]", "command: [d], cwd: relative");
        let e = plan(&cmd).unwrap_err();
        assert_eq!(e.field(), Some("tasks[3].cwd"));
        assert!(e.reason().starts_with("task \"D\": "), "{e:?}");
        assert!(w.jobs.is_empty() && w.workflows.is_empty());
        // A good one: every task on a cluster that can host it, D after B and C.
        let (wf, jobs) = plan(DIAMOND).unwrap();
        assert_eq!(jobs.len(), 4);
        assert!(wf.tasks[3].planned_start >= wf.tasks[1].planned_end.max(wf.tasks[2].planned_end));
        assert!(jobs.iter().all(|j| j.links.as_ref().unwrap().waiting));
    }

    /// A chain whose first task needs a local cluster and the others a Slurm one.
    const MIXED: &str = "\
name: m
tasks:
  - {name: A, command: [a], walltime: 10s, requires: [here]}
  - {name: B, command: [b], walltime: 10s, requires: [slurm]}
  - {name: C, command: [c], walltime: 10s, requires: [slurm]}
edges:
  - {from: A, to: B}
  - {from: B, to: C}
";

    /// A local cluster `a` (feature `here`) and a Slurm cluster `c1` (feature `slurm`, 8
    /// processors as last read).
    fn mixed() -> World {
        use super::super::tests::{empty_state, slurm};
        let mut a = cluster("a", 4);
        a.spec.features = vec!["here".into()];
        let mut c1 = slurm("c1");
        c1.spec.features = vec!["slurm".into()];
        let mut w = world(vec![a, c1]);
        w.sync_remote(Time(1_000), 1, Ok(empty_state(1_000, 8)));
        w
    }

    /// Phase one on a Slurm cluster: the task's slot is a tentative reservation there too,
    /// asked of Slurm (not refused as an administrative reservation would be).
    #[test]
    fn a_reserved_workflow_holds_its_slurm_slots_too() {
        use foresight_api::ReservationState;
        let mut w = mixed();
        let ann = w.users["ann"].clone();
        let spec = parse_workflow(MIXED, false).unwrap();
        let (mut wf, mut jobs) = w
            .plan_workflow(Time(1_000), &ann, &spec, MapperName::Heft)
            .unwrap();
        assert_eq!(
            wf.tasks
                .iter()
                .map(|t| t.cluster.as_str())
                .collect::<Vec<_>>(),
            ["a", "c1", "c1"]
        );
        w.hold_workflow(Time(1_000), &mut wf, &mut jobs, 60)
            .unwrap();
        assert!(wf.tasks.iter().all(|t| t.reservation.is_some()));
        assert!(w
            .reservations
            .values()
            .all(|r| r.state == ReservationState::Tentative && r.expires_at == Some(1_060)));
    }

    /// Plans and holds MIXED in `w` as the service does (workflow 7, jobs 1..=3): the Slurm
    /// slots still to ask.
    fn hold_mixed(w: &mut World) -> (WorkflowRecord, Vec<JobRecord>, Vec<RemoteSlot>) {
        let ann = w.users["ann"].clone();
        let spec = parse_workflow(MIXED, false).unwrap();
        let (mut wf, mut jobs) = w
            .plan_workflow(Time(1_000), &ann, &spec, MapperName::Heft)
            .unwrap();
        wf.id = 7;
        for (i, (j, t)) in jobs.iter_mut().zip(wf.tasks.iter_mut()).enumerate() {
            j.id = 1 + i as u64;
            t.job = j.id;
        }
        let remote = w
            .hold_workflow(Time(1_000), &mut wf, &mut jobs, 60)
            .unwrap();
        (wf, jobs, remote)
    }

    fn released(effects: &[Effect]) -> BTreeSet<u64> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Release { reservation, .. } => Some(reservation.0),
                _ => None,
            })
            .collect()
    }

    /// All or none across a local and a Slurm cluster: Slurm refuses C's slot after it held
    /// B's; the workflow is refused (409 naming C, quoting Slurm), B's and C's reservations
    /// are released in Slurm and A's leaves the local scheduler.
    #[test]
    fn one_slurm_refusal_releases_every_slot_of_the_workflow() {
        use foresight_api::ReservationState;
        let mut w = mixed();
        let (wf, _, remote) = hold_mixed(&mut w);
        assert_eq!(
            remote
                .iter()
                .map(|s| (s.task, s.cluster))
                .collect::<Vec<_>>(),
            [(1, 1), (2, 1)]
        );
        // Slurm reserves whole minutes: the 10 s slots are held for 60 s.
        for s in &remote {
            assert_eq!(s.request.start, wf.tasks[s.task].planned_start);
            assert_eq!(s.request.end - s.request.start, 60, "{s:?}");
            assert_eq!(s.request.procs, 1);
            assert_eq!(Some(s.request.id), wf.tasks[s.task].reservation);
        }
        w.effects.clear();
        let answers = [
            (1, Ok(())),
            (2, Err("Requested nodes are busy".to_string())),
        ];
        let e = w
            .remote_slots_answered(Time(1_001), &wf, &answers)
            .unwrap_err();
        assert!(matches!(e, Refusal::Conflict { .. }), "{e:?}");
        assert_eq!(e.field(), Some("tasks[2].start"), "{e:?}");
        assert!(
            e.reason()
                .starts_with("task \"C\": cluster c1 refused to reserve its slot: "),
            "{e:?}"
        );
        assert!(e.reason().contains("Requested nodes are busy"), "{e:?}");
        assert!(w
            .reservations
            .values()
            .all(|r| r.state == ReservationState::Released));
        assert_eq!(
            released(&w.effects),
            remote.iter().map(|s| s.request.id).collect()
        );
        let a = ReservationId(wf.tasks[0].reservation.unwrap());
        assert!(!w.broker.clusters[0].sched.reservations().any(|x| x.id == a));
    }

    /// Once held everywhere and committed, a Slurm task is submitted into its reservation when
    /// its input is ready, gives the rest of its slot back in Slurm when it ends early, and
    /// cancelling the workflow releases the slots left.
    #[test]
    fn a_slurm_task_runs_in_its_slot_and_gives_it_back() {
        use super::super::tests::{empty_state, ours};
        use foresight_api::ReservationState;
        use foresight_rm::{PartHandle, RmJobState, RmReservation};
        let mut w = mixed();
        let (wf, jobs, remote) = hold_mixed(&mut w);
        let answers: Vec<_> = remote.iter().map(|s| (s.task, Ok(()))).collect();
        w.remote_slots_answered(Time(1_001), &wf, &answers).unwrap();
        w.settle_workflow(Time(1_001), &wf, true);
        assert!(w
            .reservations
            .values()
            .all(|r| r.state == ReservationState::Committed));
        let rid = |i: usize| wf.tasks[i].reservation.unwrap();
        let (b, c) = (rid(1), rid(2));
        w.accept_workflow(Time(1_001), wf, jobs);
        assert_eq!(launched(&mut w), vec![1]);
        w.on_finished(Time(1_010), 0, JobId(1), 0, &exit(0));
        let submitted: Vec<_> = std::mem::take(&mut w.effects)
            .into_iter()
            .filter_map(|e| match e {
                Effect::Submit {
                    cluster,
                    submission,
                    ..
                } => Some((cluster, submission.spec.job, submission.reservation)),
                _ => None,
            })
            .collect();
        assert_eq!(submitted, vec![(1, 2, Some(b))]);
        w.part_submitted(
            Time(1_011),
            1,
            JobId(2),
            0,
            Ok(PartHandle {
                job: 2,
                attempt: 0,
                external: Some("51".into()),
            }),
        );
        // B ran 5 s of its one-minute slot.
        let mut s = empty_state(1_030, 8);
        let mut done = ours("51", 2, 0, 1, RmJobState::Ended(exit(0)));
        done.start = Some(1_020);
        done.reservation = Some(format!("foresight-{b}"));
        s.jobs.push(done);
        for r in [b, c] {
            s.reservations.push(RmReservation {
                name: format!("foresight-{r}"),
                foresight: Some(r),
                start: w.reservations[&ReservationId(r)].start,
                end: w.reservations[&ReservationId(r)].end,
                procs: 1,
            });
        }
        w.sync_remote(Time(1_030), 1, Ok(s));
        assert_eq!(w.jobs[&JobId(2)].state, JobState::Completed);
        assert_eq!(
            w.reservations[&ReservationId(b)].state,
            ReservationState::Finished
        );
        let effects = std::mem::take(&mut w.effects);
        assert_eq!(released(&effects), BTreeSet::from([b]));
        // C follows B, into its own slot.
        assert!(effects.iter().any(|e| matches!(
            e,
            Effect::Submit { cluster: 1, submission, .. }
                if submission.spec.job == 3 && submission.reservation == Some(c)
        )));
        w.cancel_workflow(Time(1_031), 7).unwrap();
        assert_eq!(released(&w.effects), BTreeSet::from([c]));
        assert_eq!(
            w.reservations[&ReservationId(c)].state,
            ReservationState::Released
        );
    }

    /// A restart between the phases: a committed workflow slot on Slurm is kept, a
    /// tentative one (its workflow never stored) is released there at the first snapshot.
    #[test]
    fn a_restart_keeps_committed_slurm_slots_and_drops_tentative_ones() {
        use super::super::tests::empty_state;
        use foresight_api::{AclSpec, ReservationState};
        use foresight_rm::RmReservation;
        use foresight_store::ReservationRecord;
        let mut w = world(vec![super::super::tests::slurm("c1")]);
        let slot = |id: u64, state: ReservationState| ReservationRecord {
            id,
            kind: "admin".into(),
            cluster: "c1".into(),
            procs: 1,
            processors: vec![],
            start: 1_000,
            end: 1_060,
            acl: AclSpec {
                users: vec!["ann".into()],
                ..AclSpec::default()
            },
            state,
            expires_at: (state == ReservationState::Tentative).then_some(1_060),
            owner: "ann".into(),
        };
        w.restore(
            Time(1_010),
            vec![],
            vec![
                slot(1, ReservationState::Committed),
                slot(2, ReservationState::Tentative),
            ],
            vec![],
        );
        let mut s = empty_state(1_011, 8);
        for id in [1, 2] {
            s.reservations.push(RmReservation {
                name: format!("foresight-{id}"),
                foresight: Some(id),
                start: 1_000,
                end: 1_060,
                procs: 1,
            });
        }
        w.sync_remote(Time(1_011), 0, Ok(s));
        assert_eq!(released(&w.effects), BTreeSet::from([2]));
        assert!(w.reservations[&ReservationId(1)].state.is_live());
        assert!(!w.reservations[&ReservationId(2)].state.is_live());
    }

    /// A on `a` leaves `out/m.dat` for B on `b`.
    const PAIR: &str = "\
name: p
tasks:
  - {name: A, command: [a], walltime: 1, requires: [one]}
  - {name: B, command: [b], walltime: 1, requires: [two]}
edges:
  - {from: A, to: B, data_mb: 1, files: [out/m.dat]}
";

    /// Clusters `a` (feature `one`) and `b` (feature `two`) with these `work_dir`s.
    fn pair_grid(a: Option<&str>, b: Option<&str>) -> World {
        let mut ca = cluster("a", 2);
        ca.spec.features = vec!["one".into()];
        ca.work_dir = a.map(Into::into);
        let mut cb = cluster("b", 2);
        cb.spec.features = vec!["two".into()];
        cb.work_dir = b.map(Into::into);
        world(vec![ca, cb])
    }

    /// The output copies asked for, as `(job, [(from, to)], labels)`; the launches' working
    /// directories, as `(job, cwd)`.
    type Copies = Vec<(u64, Vec<(Vec<String>, String)>, Vec<Option<String>>)>;
    fn copies_and_launches(w: &mut World) -> (Copies, Vec<(u64, String)>) {
        let (mut copies, mut launched) = (Vec::new(), Vec::new());
        for e in std::mem::take(&mut w.effects) {
            match e {
                Effect::StageOutputs { job, stage, .. } => copies.push((
                    job,
                    stage
                        .iter()
                        .map(|f| {
                            let from = f.from.iter().map(|p| p.display().to_string());
                            (from.collect(), f.to.display().to_string())
                        })
                        .collect(),
                    stage.iter().map(|f| f.label.clone()).collect(),
                )),
                Effect::Launch { spec, .. } => {
                    launched.push((spec.job, spec.cwd.display().to_string()))
                }
                _ => {}
            }
        }
        (copies, launched)
    }

    /// An edge's files go from the directory its first task ran in to the one its second
    /// runs in; the second waits for the copy, saying so, and starts once it is done.
    #[test]
    fn a_successor_on_another_cluster_waits_for_the_edges_files() {
        let mut w = pair_grid(Some("/wa"), Some("/wb"));
        let id = submit(&mut w, PAIR, 1);
        assert_eq!(w.workflows[&id].edges[0].files, vec!["out/m.dat"]);
        let (copies, launched) = copies_and_launches(&mut w);
        assert!(copies.is_empty());
        // A task runs in its cluster's own directory for the workflow.
        assert_eq!(launched, vec![(1, "/wa/workflow-7".to_string())]);
        w.on_finished(Time(1_010), 0, JobId(1), 0, &exit(0));
        let (copies, launched) = copies_and_launches(&mut w);
        assert_eq!(
            copies,
            vec![(
                1,
                vec![(
                    vec!["/wa/workflow-7/out/m.dat".to_string()],
                    "/wb/workflow-7/out/m.dat".to_string()
                )],
                vec![Some("edge A -> B".to_string())]
            )]
        );
        assert!(
            launched.is_empty(),
            "B started before the copy: {launched:?}"
        );
        let b = &w.jobs[&JobId(2)];
        assert_eq!(b.state, JobState::Pending);
        assert_eq!(
            b.reason.as_deref(),
            Some(
                "Dependency: waiting for afterok:task A (job 1 is copying the files of edge \
                 A -> B to b)"
            )
        );
        w.outputs_copied(Time(1_012), JobId(1), &Ok(()));
        let (_, launched) = copies_and_launches(&mut w);
        assert_eq!(launched, vec![(2, "/wb/workflow-7".to_string())]);
    }

    /// A failed copy (a missing file): the successor never starts; it is cancelled with a
    /// reason naming the edge, the file and the error, and the workflow ends `cancelled`.
    #[test]
    fn a_failed_edge_copy_cancels_the_successor_and_the_workflow() {
        let mut w = pair_grid(Some("/wa"), Some("/wb"));
        let id = submit(&mut w, PAIR, 1);
        copies_and_launches(&mut w);
        w.on_finished(Time(1_010), 0, JobId(1), 0, &exit(0));
        let err = "edge A -> B, file out/m.dat: copying /wa/workflow-7/out/m.dat to \
                   /wb/workflow-7/out/m.dat: cp: cannot stat: No such file or directory";
        let failed = FetchFailure {
            label: Some("edge A -> B".into()),
            error: err.into(),
        };
        w.outputs_copied(Time(1_012), JobId(1), &Err(vec![failed]));
        let (_, launched) = copies_and_launches(&mut w);
        assert!(launched.is_empty());
        let b = &w.jobs[&JobId(2)];
        assert_eq!(b.state, JobState::Cancelled);
        let reason = b.reason.clone().unwrap();
        assert!(
            reason.starts_with("DependencyNeverSatisfied: ") && reason.contains(err),
            "{reason}"
        );
        assert_eq!(w.jobs[&JobId(1)].state, JobState::Completed);
        assert_eq!(w.workflow_view(id).unwrap().state, WorkflowState::Cancelled);
    }

    /// A fork: A on `a` leaves one file for B and another for C, both on `b`.
    const FORK: &str = "\
name: f
tasks:
  - {name: A, command: [a], walltime: 1, requires: [one]}
  - {name: B, command: [b], walltime: 1, requires: [two]}
  - {name: C, command: [c], walltime: 1, requires: [two]}
edges:
  - {from: A, to: B, files: [out/b.dat]}
  - {from: A, to: C, files: [out/c.dat]}
";

    /// A failed edge file cancels the successor of that edge only: the other successor,
    /// whose files were copied, runs; the workflow ends `cancelled`.
    #[test]
    fn a_failed_edge_copy_cancels_only_that_edges_successor() {
        let mut w = pair_grid(Some("/wa"), Some("/wb"));
        let id = submit(&mut w, FORK, 1);
        copies_and_launches(&mut w);
        w.on_finished(Time(1_010), 0, JobId(1), 0, &exit(0));
        let (copies, _) = copies_and_launches(&mut w);
        assert_eq!(
            copies[0].2,
            vec![
                Some("edge A -> B".to_string()),
                Some("edge A -> C".to_string())
            ]
        );
        for (job, edge) in [(2, "B"), (3, "C")] {
            assert_eq!(
                w.jobs[&JobId(job)].reason.as_deref(),
                Some(
                    format!(
                        "Dependency: waiting for afterok:task A (job 1 is copying the files of \
                         edge A -> {edge} to b)"
                    )
                    .as_str()
                )
            );
        }
        let err = "edge A -> C, file out/c.dat: copying /wa/workflow-7/out/c.dat to \
                   /wb/workflow-7/out/c.dat: cp: cannot stat: No such file or directory";
        let failed = FetchFailure {
            label: Some("edge A -> C".into()),
            error: err.into(),
        };
        w.outputs_copied(Time(1_012), JobId(1), &Err(vec![failed]));
        let (_, launched) = copies_and_launches(&mut w);
        assert_eq!(launched, vec![(2, "/wb/workflow-7".to_string())]);
        let c = &w.jobs[&JobId(3)];
        assert_eq!(c.state, JobState::Cancelled);
        let reason = c.reason.clone().unwrap();
        assert!(
            reason.starts_with("DependencyNeverSatisfied: ") && reason.contains(err),
            "{reason}"
        );
        let a = &w.jobs[&JobId(1)];
        assert_eq!(a.output_staging.as_ref().unwrap().error, None);
        assert_eq!(
            a.reason.as_deref(),
            Some(format!("copying edge files failed: {err}").as_str())
        );
        w.on_finished(Time(1_020), 1, JobId(2), 0, &exit(0));
        assert_eq!(w.jobs[&JobId(2)].state, JobState::Completed);
        assert_eq!(w.workflow_view(id).unwrap().state, WorkflowState::Cancelled);
    }

    /// A failed copy of the task's own outputs still cancels every successor.
    #[test]
    fn a_failed_output_copy_cancels_every_successor() {
        let mut w = pair_grid(Some("/wa"), Some("/wb"));
        submit(&mut w, FORK, 1);
        copies_and_launches(&mut w);
        w.on_finished(Time(1_010), 0, JobId(1), 0, &exit(0));
        copies_and_launches(&mut w);
        let failed = FetchFailure {
            label: None,
            error: "copying /wa/r.txt to /home/r.txt: gone".into(),
        };
        w.outputs_copied(Time(1_012), JobId(1), &Err(vec![failed]));
        let (_, launched) = copies_and_launches(&mut w);
        assert!(launched.is_empty(), "{launched:?}");
        for job in [2, 3] {
            assert_eq!(w.jobs[&JobId(job)].state, JobState::Cancelled, "{job}");
        }
    }

    /// No copy where the successor's directory already holds the files: tasks on one cluster,
    /// or on clusters sharing their `work_dir`, or without one (the owner's directory), also
    /// when the slots are reserved.
    #[test]
    fn no_copy_where_the_successor_runs_in_the_same_directory() {
        let one_cluster = PAIR.replace("requires: [two]", "requires: [one]");
        for (name, a, b, yaml, reserve) in [
            ("shared work_dir", Some("/w"), Some("/w"), PAIR, false),
            ("no work_dir", None, None, PAIR, false),
            (
                "one cluster",
                Some("/wa"),
                Some("/wb"),
                one_cluster.as_str(),
                false,
            ),
            (
                "one cluster, reserved",
                Some("/wa"),
                Some("/wb"),
                one_cluster.as_str(),
                true,
            ),
        ] {
            let mut w = pair_grid(a, b);
            let ann = w.users["ann"].clone();
            let spec = parse_workflow(yaml, false).unwrap();
            let (mut wf, mut jobs) = w
                .plan_workflow(Time(1_000), &ann, &spec, MapperName::Heft)
                .unwrap();
            wf.id = 7;
            for (i, (j, t)) in jobs.iter_mut().zip(wf.tasks.iter_mut()).enumerate() {
                j.id = 1 + i as u64;
                t.job = j.id;
            }
            if reserve {
                w.hold_workflow(Time(1_000), &mut wf, &mut jobs, 60)
                    .unwrap();
                w.settle_workflow(Time(1_000), &wf, true);
            }
            w.accept_workflow(Time(1_000), wf, jobs);
            copies_and_launches(&mut w);
            w.on_finished(Time(1_010), 0, JobId(1), 0, &exit(0));
            let (copies, launched) = copies_and_launches(&mut w);
            assert!(copies.is_empty(), "{name}: {copies:?}");
            assert!(w.jobs[&JobId(1)].output_staging.is_none(), "{name}");
            // B no longer waits: it starts at once (reserved: by its slot at the latest).
            assert!(!w.jobs[&JobId(2)].links.as_ref().unwrap().waiting, "{name}");
            if !reserve {
                assert_eq!(launched.len(), 1, "{name}: B starts at once");
            }
        }
    }

    /// A restart that cut an edge's copy makes it again, once the workflow is known.
    #[test]
    fn a_restart_copies_an_edges_files_again() {
        let mut w = pair_grid(Some("/wa"), Some("/wb"));
        let id = submit(&mut w, PAIR, 1);
        w.on_finished(Time(1_010), 0, JobId(1), 0, &exit(0));
        let wf = w.workflows[&id].clone();
        let jobs: Vec<JobRecord> = w.jobs.values().cloned().collect();
        assert!(jobs[0].output_staging.as_ref().unwrap().ended_at.is_none());
        let mut again = pair_grid(Some("/wa"), Some("/wb"));
        again.add_workflow(wf);
        again.restore(Time(1_100), jobs, vec![], vec![]);
        let (copies, launched) = copies_and_launches(&mut again);
        assert_eq!(copies.len(), 1, "{copies:?}");
        assert_eq!(copies[0].1[0].1, "/wb/workflow-7/out/m.dat");
        assert!(launched.is_empty());
        again.outputs_copied(Time(1_102), JobId(1), &Ok(()));
        let (_, launched) = copies_and_launches(&mut again);
        assert_eq!(launched, vec![(2, "/wb/workflow-7".to_string())]);
    }
}
