//! One gate for every start: random sequences of submissions (with dependencies, an array
//! limit, singletons), cycles, WIKI `STARTJOB`s, ends, holds, releases, cancels, requeues,
//! starts the machine failed (requeued) and restarts of the service, on a cluster run by
//! its own policy and on one scheduled by Maui through WIKI. Whichever way a
//! job starts, it starts only once the gate lets it go: never held, never before the job it
//! depends on completed, never past its array's limit or beside another singleton of its name.

#![allow(clippy::unwrap_used)]

use super::tests::{exit, job, restarted, wiki_cluster, world};
use super::World;
use crate::config::ClusterConfig;
use foresight_core::time::Time;
use foresight_core::ClusterId;
use foresight_core::JobId;
use foresight_store::JobState;
use foresight_store::{ArrayTask, JobRecord, Links};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// Processors of each cluster.
const PROCS: u32 = 4;
/// The array every array task belongs to, and its limit.
const ARRAY: u64 = 1_000;
const ARRAY_LIMIT: u32 = 1;

#[derive(Clone, Debug)]
enum Link {
    None,
    /// `afterok` on the job submitted this many submissions earlier.
    AfterOk(usize),
    /// A task of [`ARRAY`].
    Task,
    /// `singleton`, named `s`.
    Singleton,
}

#[derive(Clone, Debug)]
enum Op {
    Submit {
        maui: bool,
        procs: u32,
        link: Link,
    },
    Cycle,
    /// `STARTJOB` for the job at this index (modulo the jobs) from this processor on.
    WikiStart(usize, u32),
    End(usize, bool),
    Hold(usize),
    Release(usize),
    Cancel(usize),
    /// `job requeue`: the running job runs again once it has ended.
    Requeue(usize),
    /// The local executor could not start the running job (its supervisor hung).
    StartFailed(usize),
    /// The service stops and starts again from what it stored.
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    let link = prop_oneof![
        2 => Just(Link::None),
        2 => (1usize..4).prop_map(Link::AfterOk),
        1 => Just(Link::Task),
        1 => Just(Link::Singleton),
    ];
    prop_oneof![
        4 => (any::<bool>(), 1u32..3, link).prop_map(|(maui, procs, link)| Op::Submit {
            maui,
            procs,
            link
        }),
        2 => Just(Op::Cycle),
        4 => (0usize..64, 0u32..PROCS).prop_map(|(i, p)| Op::WikiStart(i, p)),
        4 => (0usize..64, any::<bool>()).prop_map(|(i, ok)| Op::End(i, ok)),
        1 => (0usize..64).prop_map(Op::Hold),
        1 => (0usize..64).prop_map(Op::Release),
        1 => (0usize..64).prop_map(Op::Cancel),
        1 => (0usize..64).prop_map(Op::Requeue),
        1 => (0usize..64).prop_map(Op::StartFailed),
        1 => Just(Op::Restart),
    ]
}

/// Cluster `a`, run by its own policy, and `maui`, scheduled through WIKI.
fn clusters() -> Vec<ClusterConfig> {
    vec![
        ClusterConfig::local("a", PROCS),
        wiki_cluster("maui", PROCS),
    ]
}

/// A world of [`clusters`].
fn two_clusters() -> World {
    world(clusters())
}

/// What the test submitted: each job's predecessor (`afterok`), and which are array tasks
/// and singletons.
#[derive(Default)]
struct Model {
    ids: Vec<JobId>,
    after: BTreeMap<JobId, JobId>,
    tasks: BTreeSet<JobId>,
    singletons: BTreeSet<JobId>,
}

impl Model {
    fn pick(&self, i: usize) -> Option<JobId> {
        (!self.ids.is_empty()).then(|| self.ids[i % self.ids.len()])
    }
}

fn started(j: &JobRecord) -> bool {
    j.started_at.is_some() || j.state == JobState::Running
}

fn submit(w: &mut World, m: &mut Model, now: Time, maui: bool, procs: u32, link: &Link) {
    let id = JobId(m.ids.len() as u64 + 1);
    let ann = w.users["ann"].clone();
    let mut links = None;
    let mut name = None;
    match *link {
        Link::None => {}
        Link::AfterOk(back) if back <= m.ids.len() => {
            let pred = m.ids[m.ids.len() - back];
            if let Ok(d) = w.resolve_dependency(&ann, &format!("afterok:{pred}")) {
                links = Some(Links {
                    dependency: Some(d),
                    ..Links::default()
                });
                m.after.insert(id, pred);
            }
        }
        Link::AfterOk(_) => {}
        Link::Task => {
            let position = m.tasks.len() as u32;
            links = Some(Links {
                array: Some(ArrayTask {
                    job: ARRAY,
                    task: position,
                    position,
                    limit: Some(ARRAY_LIMIT),
                }),
                ..Links::default()
            });
            m.tasks.insert(id);
        }
        Link::Singleton => {
            links = Some(Links {
                dependency: Some(w.resolve_dependency(&ann, "singleton").unwrap()),
                ..Links::default()
            });
            name = Some("s".to_string());
            m.singletons.insert(id);
        }
    }
    let rec = JobRecord {
        cluster: Some(if maui { "maui" } else { "a" }.into()),
        co_allocate: false,
        links,
        name,
        ..job(id.0, "ann", procs, 600)
    };
    w.accept(now, vec![rec]);
    m.ids.push(id);
}

fn apply(w: &mut World, m: &mut Model, now: Time, op: &Op) {
    match op {
        Op::Submit { maui, procs, link } => submit(w, m, now, *maui, *procs, link),
        Op::Cycle => {
            w.cycle(now);
        }
        Op::WikiStart(i, first) => {
            let Some(id) = m.pick(*i) else { return };
            let procs = w.jobs[&id].procs;
            let tasks: Vec<String> = (0..procs)
                .map(|p| format!("p{}", (first + p) % PROCS))
                .collect();
            let _ = w.wiki_start(now, ClusterId(1), &id.to_string(), &tasks);
        }
        Op::End(i, ok) => {
            let Some(id) = m.pick(*i) else { return };
            let j = &w.jobs[&id];
            if j.state != JobState::Running {
                return;
            }
            let attempt = j.attempt;
            let Some(k) = j.parts.first().and_then(|p| w.cluster_index(&p.cluster)) else {
                return;
            };
            w.on_finished(now, k, id, attempt, &exit(if *ok { 0 } else { 1 }));
        }
        Op::Hold(i) => {
            if let Some(id) = m.pick(*i) {
                let _ = w.hold(now, id);
            }
        }
        Op::Release(i) => {
            if let Some(id) = m.pick(*i) {
                let _ = w.release(now, id);
            }
        }
        Op::Cancel(i) => {
            if let Some(id) = m.pick(*i) {
                let _ = w.cancel(now, id);
            }
        }
        Op::Requeue(i) => {
            if let Some(id) = m.pick(*i) {
                let _ = w.requeue(now, id);
            }
        }
        Op::StartFailed(i) => {
            let Some(id) = m.pick(*i) else { return };
            let j = &w.jobs[&id];
            if j.state != JobState::Running
                || j.parts.first().map(|p| p.cluster.as_str()) != Some("a")
            {
                return;
            }
            let attempt = j.attempt;
            w.start_failed(
                now,
                ClusterId(0),
                id,
                attempt,
                "no report within 10 s",
                true,
            );
        }
        Op::Restart => {
            let (again, _adopt) = restarted(w, clusters(), now.secs());
            *w = again;
        }
    }
    w.effects.clear();
}

/// The gate's rules, checked on the jobs that started during `op` and on all running ones.
fn check(
    w: &World,
    m: &Model,
    held_before: &BTreeSet<JobId>,
    started_before: &BTreeSet<(JobId, u32)>,
    op: &Op,
) -> Result<(), TestCaseError> {
    for (&id, j) in w.jobs.iter() {
        if !started(j) || started_before.contains(&(id, j.attempt)) {
            continue;
        }
        let released_now = matches!(op, Op::Release(_));
        prop_assert!(
            !held_before.contains(&id) || released_now,
            "job {id} started while held, by {op:?}"
        );
        if let Some(pred) = m.after.get(&id) {
            prop_assert_eq!(
                w.jobs[pred].state,
                JobState::Completed,
                "job {} (afterok:{}) started by {:?} before its predecessor completed",
                id,
                pred,
                op
            );
        }
    }
    let running = |set: &BTreeSet<JobId>| {
        set.iter()
            .filter(|id| w.jobs[id].state == JobState::Running)
            .count()
    };
    prop_assert!(
        running(&m.tasks) <= ARRAY_LIMIT as usize,
        "{} array tasks run at once after {op:?}, limit {ARRAY_LIMIT}",
        running(&m.tasks)
    );
    prop_assert!(
        running(&m.singletons) <= 1,
        "{} singletons run at once after {op:?}",
        running(&m.singletons)
    );
    for (&id, j) in w.jobs.iter() {
        let waiting = j.links.as_ref().is_some_and(|l| l.waiting);
        prop_assert!(
            !(waiting && j.state == JobState::Running),
            "job {id} runs while it waits at the gate"
        );
    }
    Ok(())
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut w = two_clusters();
    let mut m = Model::default();
    for (t, op) in ops.iter().enumerate() {
        let now = Time(1_000 + t as i64);
        let held_before: BTreeSet<JobId> = w
            .jobs
            .iter()
            .filter(|(_, j)| j.held)
            .map(|(id, _)| *id)
            .collect();
        // A job run again (requeued) is a new attempt, which must pass the gate again.
        let started_before: BTreeSet<(JobId, u32)> = w
            .jobs
            .iter()
            .filter(|(_, j)| started(j))
            .map(|(id, j)| (*id, j.attempt))
            .collect();
        apply(&mut w, &mut m, now, op);
        check(&w, &m, &held_before, &started_before, op)?;
    }
    Ok(())
}

/// The sequence that shows a STARTJOB passing the gate: job 2 waits for job 1 (running), and
/// Maui is told to start it.
#[test]
fn startjob_of_a_job_waiting_for_its_dependency_is_refused() {
    let ops = vec![
        Op::Submit {
            maui: true,
            procs: 1,
            link: Link::None,
        },
        Op::WikiStart(0, 0),
        Op::Submit {
            maui: true,
            procs: 1,
            link: Link::AfterOk(1),
        },
        Op::WikiStart(1, 1),
    ];
    run(ops).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn every_start_passes_the_gate(ops in prop::collection::vec(op(), 1..60)) {
        run(ops)?;
    }
}
