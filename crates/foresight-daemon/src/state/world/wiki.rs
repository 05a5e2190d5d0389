//! A local cluster scheduled by Maui (or Moab) through WIKI (`scheduler = "wiki"`): its own
//! policy stands aside; its queued jobs wait for the scheduler's `STARTJOB`, which starts one
//! on exactly the processors its task list names. This is the cluster's side of the
//! daemon's WIKI server: the nodes and jobs it reports, and the four job actions.
//!
//! Nodes are the cluster's processors, one processor each, named `p<index>` as in the
//! broker's `<cluster>/p<index>`. Nothing here does I/O.

use super::World;
use foresight_core::scheduler::Domain;
use foresight_core::time::{Dur, Time};
use foresight_core::{ClusterId, Job, JobId};
use foresight_rm::wiki::{
    check_tasklist, BackendError, JobRecord as WikiJob, JobState as WikiState, NodeRecord,
    NodeState,
};
use foresight_store::JobState;
use foresight_store::{JobRecord, PartRecord};

/// How the reason of a job waiting for its cluster's WIKI scheduler begins (`job list` shows
/// such a job's start as the WIKI scheduler's).
pub const WAITING_FOR_WIKI: &str = "waiting for the WIKI scheduler";

/// How long an ended job is still reported, seconds: the scheduler must see it end, and
/// polls every `RMPOLLINTERVAL` (Maui's default: 30 s).
pub const ENDED_KEPT_SECS: i64 = 600;

/// The reason a job queued on cluster `name` shows while it waits.
pub fn waiting_reason(name: &str) -> String {
    format!(
        "{} (Maui) of cluster {name} to start it (STARTJOB): the cluster's own policy \
         stands aside",
        WAITING_FOR_WIKI
    )
}

/// The WIKI name of processor `p`.
pub fn node_name(p: u32) -> String {
    format!("p{p}")
}

/// The processor a WIKI node name stands for, if it names one of `procs`.
pub fn processor_of(name: &str, procs: u32) -> Option<u32> {
    let digits = name.strip_prefix('p')?;
    if digits.is_empty() || (digits.len() > 1 && digits.starts_with('0')) {
        return None;
    }
    digits.parse::<u32>().ok().filter(|p| *p < procs)
}

impl World {
    /// Records a job queued on cluster `k`, whose WIKI scheduler starts it: nothing is
    /// handed to the local policy.
    pub(super) fn queue_for_wiki(&mut self, k: ClusterId, id: JobId) {
        let name = self.clusters[k].cfg.name.clone();
        if let Some(j) = self.jobs.get_mut(&id) {
            j.parts = vec![PartRecord {
                cluster: name.clone(),
                procs: j.procs,
                reservation: j.reservation,
                ..PartRecord::default()
            }];
            j.state = JobState::Pending;
            j.reason = Some(waiting_reason(&name));
        }
    }

    /// How many jobs wait for cluster `k`'s WIKI scheduler (0 for any other cluster).
    pub fn wiki_waiting(&self, k: ClusterId) -> usize {
        let c = &self.clusters[k];
        if !c.kind.maui_schedules() {
            return 0;
        }
        self.jobs
            .values()
            .filter(|j| j.state == JobState::Pending && on_cluster(j, &c.cfg.name))
            .count()
    }

    /// Cluster `k`'s processors as WIKI nodes at `now`.
    pub fn wiki_nodes(&self, now: Time, k: ClusterId) -> Vec<NodeRecord> {
        let c = &self.clusters[k];
        (0..c.cfg.procs)
            .map(|p| {
                let free = c.free.contains(&p);
                let state = if free {
                    NodeState::Idle
                } else {
                    NodeState::Busy
                };
                NodeRecord {
                    update_time: now.secs().max(0) as u64,
                    cproc: 1,
                    aproc: u32::from(free),
                    speed: self.broker.clusters[k]
                        .processors
                        .get(p as usize)
                        .map(|x| x.speed),
                    ..NodeRecord::new(node_name(p), state)
                }
            })
            .collect()
    }

    /// The jobs of cluster `k` as WIKI records: queued, held, running and suspended ones,
    /// and those that ended in the last [`ENDED_KEPT_SECS`].
    pub fn wiki_jobs(&self, now: Time, k: ClusterId) -> Vec<WikiJob> {
        let name = &self.clusters[k].cfg.name;
        self.jobs
            .values()
            .filter(|j| on_cluster(j, name))
            .filter(|j| {
                !j.state.is_final() || j.ended_at.is_none_or(|e| now.secs() - e <= ENDED_KEPT_SECS)
            })
            .map(|j| wiki_job(j, name, now))
            .collect()
    }

    /// `STARTJOB`: starts the queued job `job` of cluster `k` on exactly the processors of
    /// `tasklist`. Refuses, changing nothing, an unknown job, one not queued, a task list
    /// that can never fit the job, and processors unknown or busy (naming them).
    pub fn wiki_start(
        &mut self,
        now: Time,
        k: ClusterId,
        job: &str,
        tasklist: &[String],
    ) -> Result<(), BackendError> {
        let id = self.wiki_job_id(k, job)?;
        let j = &self.jobs[&id];
        let name = self.clusters[k].cfg.name.clone();
        // The scheduler starts only what it is shown idle: a job held, not yet at its begin
        // time or waiting at the gate is refused as it was shown.
        let shown = wiki_job(j, &name, now).state;
        if shown != WikiState::Idle || j.state != JobState::Pending {
            return Err(BackendError::WrongState {
                job: job.to_owned(),
                state: shown,
                action: "start",
            });
        }
        if tasklist.len() != j.procs as usize {
            return Err(BackendError::CannotRun {
                job: job.to_owned(),
                reason: format!(
                    "the TASKLIST names {} processor(s); the job asks {}",
                    tasklist.len(),
                    j.procs
                ),
            });
        }
        check_tasklist(job, &self.wiki_nodes(now, k), tasklist)?;
        let procs = self.clusters[k].cfg.procs;
        let taken: Vec<u32> = tasklist
            .iter()
            .map(|n| {
                processor_of(n, procs).ok_or_else(|| BackendError::NoSuchNode { node: n.clone() })
            })
            .collect::<Result<_, _>>()?;
        if self.jobs[&id].parts.iter().all(|p| p.cluster != name) {
            self.queue_for_wiki(k, id);
        }
        // The cluster's scheduler holds the job as running, so that its forecast (estimates,
        // the plan view) counts these processors busy until the job ends.
        let (user, cred, walltime, submitted) = {
            let j = &self.jobs[&id];
            (j.user.clone(), j.cred.clone(), j.walltime, j.submitted_at)
        };
        let cred = self.cred(&user, &cred);
        let sched_job =
            Job::new(id, Time(submitted), taken.len() as u32, Dur(walltime)).with_cred(cred);
        if let Err(e) =
            self.broker.clusters[k]
                .sched
                .restore_running(now, sched_job, now, Domain::Pool)
        {
            return Err(BackendError::Unavailable {
                reason: format!("the cluster's scheduler refused the start: {e}"),
            });
        }
        tracing::info!(
            "cluster {name}: the WIKI scheduler starts job {id} on {}",
            tasklist.join(":")
        );
        self.launch_on(now, k, id, taken);
        Ok(())
    }

    /// `CANCELJOB`: cancels the job `job` of cluster `k`, queued or running.
    pub fn wiki_cancel(&mut self, now: Time, k: ClusterId, job: &str) -> Result<(), BackendError> {
        let id = self.wiki_job_id(k, job)?;
        let name = self.clusters[k].cfg.name.clone();
        let state = wiki_job(&self.jobs[&id], &name, now).state;
        self.cancel(now, id).map_err(|_| BackendError::WrongState {
            job: job.to_owned(),
            state,
            action: "cancel",
        })
    }

    /// `SUSPENDJOB` (`stop`) or `RESUMEJOB`: stops or continues the running job `job` of
    /// cluster `k`, which keeps its processors.
    pub fn wiki_pause(
        &mut self,
        now: Time,
        k: ClusterId,
        job: &str,
        stop: bool,
    ) -> Result<(), BackendError> {
        let id = self.wiki_job_id(k, job)?;
        let name = self.clusters[k].cfg.name.clone();
        let j = &self.jobs[&id];
        // Only a running job may be paused, and a begin time says nothing of one: the state
        // named in a refusal is read as if every begin had passed.
        let state = wiki_job(j, &name, Time::MAX).state;
        let fits = j.state == JobState::Running && j.suspended != stop;
        let action = if stop { "suspend" } else { "resume" };
        if !fits {
            return Err(BackendError::WrongState {
                job: job.to_owned(),
                state,
                action,
            });
        }
        self.pause(now, id, stop)
            .map_err(|_| BackendError::WrongState {
                job: job.to_owned(),
                state,
                action,
            })
    }

    /// The Foresight job a WIKI job id names on cluster `k`.
    fn wiki_job_id(&self, k: ClusterId, job: &str) -> Result<JobId, BackendError> {
        let name = &self.clusters[k].cfg.name;
        let unknown = || BackendError::NoSuchJob {
            job: job.to_owned(),
        };
        let id = JobId(job.parse().map_err(|_| unknown())?);
        if job != id.to_string() {
            return Err(unknown());
        }
        match self.jobs.get(&id) {
            Some(j) if on_cluster(j, name) => Ok(id),
            _ => Err(unknown()),
        }
    }
}

/// True when job `j` belongs to cluster `name`: asked for it, or has a part there.
fn on_cluster(j: &JobRecord, name: &str) -> bool {
    j.cluster.as_deref() == Some(name) || j.parts.iter().any(|p| p.cluster == name)
}

/// Job `j` of cluster `name` as a WIKI record: `UNAME` its Foresight user, `GNAME` its group
/// (the user's name when it gives none: a user private group), `ACCOUNT` and `RCLASS` from
/// its credentials, `TASKLIST` the processors of its part there.
///
/// A queued job that may not start yet is shown held, so that the WIKI scheduler does not
/// start it: held, its begin time still ahead at `now`, or waiting at the gate (its
/// dependencies, its array's limit, its singleton turn). Only a successful end is
/// `Completed`: Maui 3 reads `Removed` as an end without completing, and a `Removed` job
/// past its wallclock limit as a wallclock violation (`MWikiWorkloadQuery`).
fn wiki_job(j: &JobRecord, name: &str, now: Time) -> WikiJob {
    let early = j.begin.is_some_and(|b| Time(b) > now);
    let at_gate = j.links.as_ref().is_some_and(|l| l.waiting);
    let state = match j.state {
        _ if (j.held || early || at_gate)
            && !j.state.is_final()
            && j.state != JobState::Running =>
        {
            WikiState::Hold
        }
        JobState::Pending | JobState::Planned | JobState::Reserved => WikiState::Idle,
        JobState::Running if j.suspended => WikiState::Suspended,
        JobState::Running => WikiState::Running,
        JobState::Completed => WikiState::Completed,
        JobState::Failed | JobState::Timeout | JobState::Cancelled => WikiState::Removed,
    };
    let group = j.cred.group.clone().unwrap_or_else(|| j.user.clone());
    let part = j.parts.iter().find(|p| p.cluster == name);
    let secs = |t: Option<i64>| t.filter(|t| *t > 0).map(|t| t as u64);
    let update = [Some(j.submitted_at), j.started_at, j.ended_at]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(0)
        .max(0) as u64;
    WikiJob {
        update_time: update,
        queue_time: j.submitted_at.max(0) as u64,
        start_time: secs(j.started_at),
        complete_time: if j.state.is_final() {
            secs(j.ended_at)
        } else {
            None
        },
        account: j.cred.account.clone(),
        class: j.cred.class.clone(),
        tasklist: part
            .filter(|_| matches!(state, WikiState::Running | WikiState::Suspended))
            .map(|p| p.processors.iter().map(|p| node_name(*p)).collect())
            .unwrap_or_default(),
        ..WikiJob::new(
            j.id.to_string(),
            state,
            j.procs,
            j.walltime.max(0) as u64,
            j.user.clone(),
            group,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::state::world::Effect;
    use foresight_rm::Outcome;

    /// A world with cluster `maui` (4 processors, scheduled through WIKI) and user `ann`.
    fn maui_with_users() -> World {
        let cfg = Config {
            cluster: vec![crate::state::world::tests::wiki_cluster("maui", 4)],
            data_dir: "/nonexistent".into(),
            ..Config::default()
        };
        let mut w = World::new(&cfg);
        w.add_user(foresight_store::UserRecord {
            name: "ann".into(),
            token_hash: "hash-ann".into(),
            ..Default::default()
        });
        w
    }

    /// [`maui_with_users`] with job 1 of 2 processors queued on `maui`.
    fn maui() -> World {
        let mut w = maui_with_users();
        let j = JobRecord {
            cluster: Some("maui".into()),
            co_allocate: false,
            ..crate::state::world::tests::job(1, "ann", 2, 60)
        };
        w.accept(Time(1_000), vec![j]);
        w
    }

    fn list(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_string()).collect()
    }

    #[test]
    fn a_queued_job_waits_for_startjob_and_says_so() {
        let mut w = maui();
        w.cycle(Time(1_001));
        assert!(w
            .effects
            .iter()
            .all(|e| !matches!(e, Effect::Launch { .. })));
        let j = &w.jobs[&JobId(1)];
        assert_eq!(j.state, JobState::Pending);
        assert!(j.reason.as_deref().unwrap().contains("WIKI scheduler"));
        let jobs = w.wiki_jobs(Time(1_001), ClusterId(0));
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].state, WikiState::Idle);
        assert_eq!(
            (jobs[0].user.as_str(), jobs[0].group.as_str()),
            ("ann", "ann")
        );
        assert!(!w.broker.clusters[0].available);
    }

    #[test]
    fn startjob_takes_exactly_the_named_processors_or_refuses_changing_nothing() {
        let mut w = maui();
        for (tasks, wanted) in [
            (list(&["p0"]), "asks 2"),
            (list(&["p0", "p4"]), "p4"),
            (list(&["p0", "p0"]), "p0"),
        ] {
            let e = w
                .wiki_start(Time(1_001), ClusterId(0), "1", &tasks)
                .unwrap_err();
            assert!(e.to_string().contains(wanted), "{e}");
        }
        assert!(matches!(
            w.wiki_start(Time(1_001), ClusterId(0), "2", &list(&["p0", "p1"])),
            Err(BackendError::NoSuchJob { .. })
        ));
        assert!(matches!(
            w.wiki_start(Time(1_001), ClusterId(0), "01", &list(&["p0", "p1"])),
            Err(BackendError::NoSuchJob { .. })
        ));
        assert_eq!(w.jobs[&JobId(1)].state, JobState::Pending);
        assert_eq!(w.clusters[0].free.len(), 4);

        w.wiki_start(Time(1_001), ClusterId(0), "1", &list(&["p3", "p1"]))
            .unwrap();
        let launched: Vec<Vec<u32>> = w
            .effects
            .iter()
            .filter_map(|e| match e {
                Effect::Launch { spec, .. } => Some(spec.processors.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(launched, [vec![3, 1]]);
        assert_eq!(w.jobs[&JobId(1)].state, JobState::Running);
        let busy: Vec<String> = w
            .wiki_nodes(Time(1_002), ClusterId(0))
            .into_iter()
            .filter(|n| n.state == NodeState::Busy)
            .map(|n| n.name)
            .collect();
        assert_eq!(busy, ["p1", "p3"]);
        assert_eq!(
            w.wiki_jobs(Time(1_002), ClusterId(0))[0].tasklist,
            ["p3", "p1"]
        );
        // Started twice: refused as running.
        assert!(matches!(
            w.wiki_start(Time(1_002), ClusterId(0), "1", &list(&["p0", "p2"])),
            Err(BackendError::WrongState { .. })
        ));
        // Its processors come back when it ends; then it is reported completed.
        let ok = Outcome {
            exit_code: Some(0),
            signal: None,
            timed_out: false,
            cancelled: false,
            started_at: 1_001,
            ended_at: 1_010,
            error: None,
        };
        w.on_finished(Time(1_010), ClusterId(0), JobId(1), 0, &ok);
        assert_eq!(w.clusters[0].free.len(), 4);
        assert_eq!(
            w.wiki_jobs(Time(1_011), ClusterId(0))[0].state,
            WikiState::Completed
        );
        assert!(w
            .wiki_jobs(Time(1_010 + ENDED_KEPT_SECS + 1), ClusterId(0))
            .is_empty());
    }

    #[test]
    fn suspend_resume_and_cancel_follow_the_job_state() {
        let mut w = maui();
        assert!(matches!(
            w.wiki_pause(Time(0), ClusterId(0), "1", true),
            Err(BackendError::WrongState { .. })
        ));
        w.wiki_start(Time(1_001), ClusterId(0), "1", &list(&["p0", "p1"]))
            .unwrap();
        w.wiki_pause(Time(0), ClusterId(0), "1", true).unwrap();
        assert_eq!(
            w.wiki_jobs(Time(1_002), ClusterId(0))[0].state,
            WikiState::Suspended
        );
        assert!(w.wiki_pause(Time(0), ClusterId(0), "1", true).is_err());
        w.wiki_pause(Time(0), ClusterId(0), "1", false).unwrap();
        w.wiki_cancel(Time(1_003), ClusterId(0), "1").unwrap();
        assert!(w
            .effects
            .iter()
            .any(|e| matches!(e, Effect::Kill { job: JobId(1), .. })));
        assert!(matches!(
            w.wiki_cancel(Time(1_003), ClusterId(0), "7"),
            Err(BackendError::NoSuchJob { .. })
        ));
    }

    fn on_maui(id: u64, links: Option<foresight_store::Links>) -> JobRecord {
        JobRecord {
            cluster: Some("maui".into()),
            co_allocate: false,
            links,
            ..crate::state::world::tests::job(id, "ann", 1, 60)
        }
    }

    fn state_of(w: &World, now: Time, id: u64) -> WikiState {
        w.wiki_jobs(now, ClusterId(0))
            .into_iter()
            .find(|j| j.id == id.to_string())
            .unwrap()
            .state
    }

    /// A job waiting for a dependency, an array's limit or its singleton turn is held for
    /// Maui, and a STARTJOB for it is refused: Maui starts only what the gate lets go.
    #[test]
    fn the_gate_holds_jobs_for_maui_and_startjob_cannot_pass_it() {
        use foresight_store::{ArrayTask, Links};
        let mut w = maui_with_users();
        w.accept(Time(1_000), vec![on_maui(1, None)]);
        let ann = w.users["ann"].clone();
        let after = Links {
            dependency: Some(w.resolve_dependency(&ann, "afterok:1").unwrap()),
            ..Links::default()
        };
        let task = |id: u64| Links {
            array: Some(ArrayTask {
                job: 10,
                task: (id - 10) as u32,
                position: (id - 10) as u32,
                limit: Some(1),
            }),
            ..Links::default()
        };
        let single = || Links {
            dependency: Some(w.resolve_dependency(&ann, "singleton").unwrap()),
            ..Links::default()
        };
        let (s1, s2) = (single(), single());
        w.accept(
            Time(1_000),
            vec![
                on_maui(2, Some(after)),
                on_maui(10, Some(task(10))),
                on_maui(11, Some(task(11))),
                JobRecord {
                    name: Some("s".into()),
                    ..on_maui(20, Some(s1))
                },
                JobRecord {
                    name: Some("s".into()),
                    ..on_maui(21, Some(s2))
                },
            ],
        );
        let now = Time(1_001);
        // Each gate lets exactly one go: job 1, the array's first task, the first singleton.
        for (id, want) in [
            (1, WikiState::Idle),
            (2, WikiState::Hold),
            (10, WikiState::Idle),
            (11, WikiState::Hold),
            (20, WikiState::Idle),
            (21, WikiState::Hold),
        ] {
            assert_eq!(state_of(&w, now, id), want, "job {id}");
        }
        for id in [2, 11, 21] {
            let e = w
                .wiki_start(now, ClusterId(0), &id.to_string(), &list(&["p3"]))
                .unwrap_err();
            assert!(
                matches!(e, BackendError::WrongState { .. }),
                "job {id}: {e}"
            );
            assert_eq!(w.jobs[&JobId(id)].state, JobState::Pending, "job {id}");
            assert!(w.jobs[&JobId(id)].started_at.is_none(), "job {id}");
        }
        // Once the gate opens, Maui sees the job idle and may start it.
        w.wiki_start(now, ClusterId(0), "1", &list(&["p0"]))
            .unwrap();
        w.on_finished(
            Time(1_010),
            ClusterId(0),
            JobId(1),
            0,
            &crate::state::world::tests::exit(0),
        );
        assert_eq!(state_of(&w, Time(1_011), 2), WikiState::Idle);
        w.wiki_start(Time(1_011), ClusterId(0), "2", &list(&["p1"]))
            .unwrap();
        assert_eq!(w.jobs[&JobId(2)].state, JobState::Running);
    }

    /// Maui 3 reads `Completed` as a job that finished by itself and `Removed` as one that
    /// ended without completing: past its wallclock limit it logs a `JOBWCVIOLATION`
    /// (`MWikiWorkloadQuery`), and Moab counts it in the job's fail rate. So only a
    /// successful end is `Completed`.
    #[test]
    fn every_end_is_reported_as_maui_reads_it() {
        let mut w = maui_with_users();
        w.accept(Time(1_000), (1..=4).map(|id| on_maui(id, None)).collect());
        for id in 1..=4u64 {
            let p = format!("p{}", id - 1);
            w.wiki_start(
                Time(1_001),
                ClusterId(0),
                &id.to_string(),
                &list(&[p.as_str()]),
            )
            .unwrap();
        }
        let end = |code: Option<i32>, timed_out: bool, cancelled: bool| Outcome {
            exit_code: code,
            signal: None,
            timed_out,
            cancelled,
            started_at: 1_001,
            ended_at: 1_061,
            error: None,
        };
        w.on_finished(
            Time(1_030),
            ClusterId(0),
            JobId(1),
            0,
            &end(Some(0), false, false),
        );
        w.on_finished(
            Time(1_030),
            ClusterId(0),
            JobId(2),
            0,
            &end(Some(3), false, false),
        );
        w.on_finished(
            Time(1_061),
            ClusterId(0),
            JobId(3),
            0,
            &end(None, true, false),
        );
        w.wiki_cancel(Time(1_030), ClusterId(0), "4").unwrap();
        w.on_finished(
            Time(1_031),
            ClusterId(0),
            JobId(4),
            0,
            &end(None, false, true),
        );
        let now = Time(1_070);
        let states: Vec<(JobState, WikiState)> = (1..=4u64)
            .map(|id| (w.jobs[&JobId(id)].state, state_of(&w, now, id)))
            .collect();
        assert_eq!(
            states,
            [
                (JobState::Completed, WikiState::Completed),
                (JobState::Failed, WikiState::Removed),
                (JobState::Timeout, WikiState::Removed),
                (JobState::Cancelled, WikiState::Removed),
            ]
        );
        // Maui judges a wallclock violation by the start and the limit it was told.
        let timed_out = w
            .wiki_jobs(now, ClusterId(0))
            .into_iter()
            .find(|j| j.id == "3")
            .unwrap();
        assert!(timed_out.complete_time.unwrap() >= timed_out.start_time.unwrap() + 60);
    }

    #[test]
    fn processor_names_round_trip_and_refuse_others() {
        assert_eq!(processor_of(&node_name(0), 4), Some(0));
        assert_eq!(processor_of(&node_name(3), 4), Some(3));
        assert_eq!(processor_of("p4", 4), None);
        assert_eq!(processor_of("p01", 4), None);
        assert_eq!(processor_of("p", 4), None);
        assert_eq!(processor_of("q1", 4), None);
        assert_eq!(processor_of("p-1", 4), None);
    }
}
