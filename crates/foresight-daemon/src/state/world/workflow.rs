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
use crate::state::stored::{ToApi, ToStored};
use foresight_api::{derive_state, WorkflowSpec, WorkflowTaskView, WorkflowView};
use foresight_core::forecast::forecast;
use foresight_core::profile::Profile;
use foresight_core::time::{Dur, Time};
use foresight_core::workflow::{self, Edge, GridState, Mapper, Site, Task, TaskId};
use foresight_core::{ClusterId, JobId, ReservationId};
use foresight_rm::ReserveRequest;
use foresight_store::{
    ConditionRecord, DependencyRecord, JobRecord, Links, WorkflowEdgeRecord, WorkflowRecord,
    WorkflowTaskRecord,
};
use foresight_store::{DependencyKind, FailurePolicy, JobState};
use std::collections::{BTreeMap, HashMap};

/// A workflow task's slot on a cluster that schedules itself (Slurm), recorded by phase
/// one and still to be asked of the cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteSlot {
    /// The task's index in the workflow.
    pub task: usize,
    /// The cluster.
    pub cluster: ClusterId,
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
        mapper: foresight_store::MapperName,
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
            foresight_store::MapperName::Dsc => Mapper::Dsc(Default::default()),
            foresight_store::MapperName::Heft => Mapper::Heft,
            foresight_store::MapperName::Greedy => Mapper::Greedy,
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
            on_failure: spec.on_failure.to_stored(),
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
            let acl = foresight_store::AclSpec {
                users: vec![wf.user.clone()],
                ..Default::default()
            };
            let k = self
                .cluster_index(&t.cluster)
                .ok_or_else(|| self.unknown_cluster(&t.cluster));
            let made = k.and_then(|k| {
                let end = if self.clusters[k].kind.schedules_itself() {
                    let len = Dur(t.planned_end - t.planned_start);
                    t.planned_start + self.broker.clusters[k].granular(len).as_secs()
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
                        self.asked.confirmed_at.insert(r, now);
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
                    state: j.map_or(JobState::Cancelled, |j| j.state).to_api(),
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
            Some(j) => (j.state.to_api(), j.started_at.is_some() || j.attempt > 0),
            None => (foresight_api::JobState::Cancelled, false),
        }));
        Some(WorkflowView {
            id,
            name: wf.name.clone(),
            user: wf.user.clone(),
            state,
            mapper: wf.mapper.to_api(),
            on_failure: wf.on_failure.to_api(),
            submitted_at: wf.submitted_at,
            planned_end: wf.tasks.iter().map(|t| t.planned_end).max().unwrap_or(0),
            tasks,
        })
    }
}
