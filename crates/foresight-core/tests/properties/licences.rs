//! Licences held in time by the local policies: exact hand-checked schedules, and a property
//! test on random workloads with licence demands under every kind of policy:
//! - the licences held by running jobs never exceed the pool at any instant;
//! - a job needing 2 of a pool of 4 never runs while others hold 3;
//! - processors are never overbooked and every job starts;
//! - jobs without licences are scheduled exactly as on a cluster without pools.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

use foresight_core::{
    Action, BackfillChoice, Dur, Event, Job, JobId, LocalScheduler, Policy, Time,
};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// One job to run: the job and its real runtime.
#[derive(Clone, Debug)]
struct Run {
    job: Job,
    runtime: i64,
}

fn run(id: u64, submit: i64, procs: u32, estimate: i64, runtime: i64, ansys: u32) -> Run {
    let licences = if ansys == 0 {
        BTreeMap::new()
    } else {
        BTreeMap::from([("ansys".to_string(), ansys)])
    };
    Run {
        job: Job::new(JobId(id), Time(submit), procs, Dur(estimate)).with_licences(licences),
        runtime,
    }
}

/// Runs the jobs to completion on `capacity` processors under `policy` with the given
/// pools; returns every job's `(start, end)`.
fn simulate(
    capacity: u32,
    policy: Policy,
    pools: &[(&str, u32)],
    runs: &[Run],
) -> BTreeMap<JobId, (i64, i64)> {
    let mut sched = LocalScheduler::new(capacity, policy);
    for (name, count) in pools {
        sched.add_licence_pool(name, *count);
    }
    // At one instant: finishes, then submissions, then a tick.
    let mut events: BTreeMap<i64, (Vec<JobId>, Vec<Job>)> = BTreeMap::new();
    let runtime: BTreeMap<JobId, i64> = runs.iter().map(|r| (r.job.id, r.runtime)).collect();
    for r in runs {
        events
            .entry(r.job.submit.secs())
            .or_default()
            .1
            .push(r.job.clone());
    }
    let mut out = BTreeMap::new();
    let mut actions = Vec::new();
    while let Some((now, (finishes, submits))) = events.pop_first() {
        let t = Time(now);
        for id in finishes {
            sched.handle(t, Event::Finish(id), &mut actions).unwrap();
        }
        for job in submits {
            sched.handle(t, Event::Submit(job), &mut actions).unwrap();
        }
        sched.handle(t, Event::Tick, &mut actions).unwrap();
        for a in actions.drain(..) {
            match a {
                Action::Start { job, .. } => {
                    let estimate = sched.estimate_of(job).unwrap().as_secs();
                    let end = now + runtime[&job].min(estimate);
                    out.insert(job, (now, end));
                    events.entry(end).or_default().0.push(job);
                }
                Action::Reserve { start, .. } => {
                    events.entry(start.secs()).or_default();
                }
            }
        }
    }
    out
}

fn starts(s: &BTreeMap<JobId, (i64, i64)>) -> Vec<(u64, i64)> {
    s.iter().map(|(id, (start, _))| (id.0, *start)).collect()
}

/// Pool of 4, 8 processors. Job 1 holds 3 licences until 100; job 2 needs 2, so it waits
/// with processors free and starts at 100. Job 3 needs 1 (3 + 1 = 4) and starts at once.
#[test]
fn two_of_four_wait_while_three_are_held_and_start_when_they_end() {
    for policy in [Policy::fcfs(), Policy::easy(), Policy::conservative()] {
        let name = policy.name();
        let s = simulate(
            8,
            policy,
            &[("ansys", 4)],
            &[
                run(1, 0, 1, 100, 100, 3),
                run(2, 1, 1, 50, 50, 2),
                run(3, 2, 1, 20, 20, 1),
            ],
        );
        let want = if name == "fcfs" {
            // FCFS stops at the blocked head: job 3 waits behind job 2.
            vec![(1, 0), (2, 100), (3, 100)]
        } else {
            vec![(1, 0), (2, 100), (3, 2)]
        };
        assert_eq!(starts(&s), want, "{name}");
    }
}

/// EASY's reservation holds licences too. Job 2 needs all 4 licences: reserved at 100,
/// when job 1 lets go of its 3. Job 3 (1 licence, ends at 22) backfills; job 4 (1 licence
/// for 200 s, submitted at 30) would hold one across job 2's window, so it does not
/// backfill although processors are free: it starts when job 2 ends, at 150.
#[test]
fn easy_reservation_accounts_for_licences() {
    let s = simulate(
        8,
        Policy::easy(),
        &[("ansys", 4)],
        &[
            run(1, 0, 1, 100, 100, 3),
            run(2, 1, 1, 50, 50, 4),
            run(3, 2, 1, 20, 20, 1),
            run(4, 30, 1, 200, 200, 1),
            run(5, 31, 2, 300, 300, 0),
        ],
    );
    assert_eq!(
        starts(&s),
        vec![(1, 0), (2, 100), (3, 2), (4, 150), (5, 31)]
    );
}

/// A demand larger than the pool, or for a pool the cluster does not draw on, is refused
/// at submission, naming the pool and its size.
#[test]
fn impossible_demands_are_refused_naming_the_pool() {
    let mut sched = LocalScheduler::new(8, Policy::easy());
    sched.add_licence_pool("ansys", 4);
    let mut out = Vec::new();
    let e = sched
        .handle(
            Time(0),
            Event::Submit(run(1, 0, 1, 10, 10, 5).job),
            &mut out,
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("5 licences \"ansys\" asked, the pool \"ansys\" has 4"),
        "{e}"
    );
    let fluent = Job::new(JobId(2), Time(0), 1, Dur(10))
        .with_licences(BTreeMap::from([("fluent".to_string(), 1)]));
    let e = sched
        .handle(Time(0), Event::Submit(fluent), &mut out)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no licence pool \"fluent\""), "{e}");
}

fn policies() -> Vec<Policy> {
    let mut best = Policy::easy();
    best.backfill = BackfillChoice::BestFit;
    let mut greedy = Policy::easy();
    greedy.backfill = BackfillChoice::Greedy;
    vec![
        Policy::fcfs(),
        Policy::first_fit(None),
        Policy::easy(),
        Policy::depth(3),
        Policy::conservative(),
        best,
        greedy,
    ]
}

fn workload() -> impl Strategy<Value = Vec<Run>> {
    proptest::collection::vec((0i64..15, 1u32..=8, 1i64..=60, 1i64..=60, 0u32..=4), 1..40).prop_map(
        |gens| {
            let mut t = 0;
            gens.into_iter()
                .enumerate()
                .map(|(i, (gap, procs, estimate, runtime, ansys))| {
                    t += gap;
                    run(i as u64 + 1, t, procs, estimate, runtime, ansys)
                })
                .collect()
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn licences_held_never_exceed_the_pool(runs in workload(), k in 0usize..7) {
        let policy = policies()[k].clone();
        let name = policy.name();
        let s = simulate(8, policy, &[("ansys", 4)], &runs);
        prop_assert_eq!(s.len(), runs.len(), "{}: every job starts", name);
        let demand: BTreeMap<JobId, u32> = runs
            .iter()
            .map(|r| (r.job.id, r.job.licences.get("ansys").copied().unwrap_or(0)))
            .collect();
        let procs: BTreeMap<JobId, u32> = runs.iter().map(|r| (r.job.id, r.job.procs)).collect();
        // Usage only changes at starts: check every start instant.
        for &(t, _) in s.values() {
            let running: Vec<JobId> = s
                .iter()
                .filter(|(_, &(a, b))| a <= t && t < b)
                .map(|(id, _)| *id)
                .collect();
            let held: u32 = running.iter().map(|id| demand[id]).sum();
            prop_assert!(held <= 4, "{}: {} licences held at {}", name, held, t);
            let used: u32 = running.iter().map(|id| procs[id]).sum();
            prop_assert!(used <= 8, "{}: {} processors used at {}", name, used, t);
            for id in running.iter().filter(|id| demand[*id] == 2) {
                let others = held - demand[id];
                prop_assert!(others < 3, "{}: job {} runs at {} while others hold {}", name, id, t, others);
            }
        }
        for r in &runs {
            prop_assert!(s[&r.job.id].0 >= r.job.submit.secs());
        }
    }

    #[test]
    fn without_licence_demands_a_pool_changes_nothing(runs in workload(), k in 0usize..7) {
        let policy = policies()[k].clone();
        let plain: Vec<Run> = runs
            .into_iter()
            .map(|mut r| {
                r.job.licences.clear();
                r
            })
            .collect();
        let without = simulate(8, policy.clone(), &[], &plain);
        let with = simulate(8, policy, &[("ansys", 4)], &plain);
        prop_assert_eq!(without, with);
    }
}
