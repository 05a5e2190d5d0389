//! The service's state transitions on hand-checked cases: no processes, no store; effects
//! and records are inspected as data.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::config::{ClusterConfig, Config};
use foresight_core::ClusterId;
use foresight_rm::ClusterState;
use foresight_rm::Outcome;
use foresight_rm::PartHandle;
use foresight_rm::ReserveRequest;
use foresight_rm::Submission;
use foresight_rm::{RmJob, RmJobState};
use foresight_store::PartRecord;
use foresight_store::ReservationState;
use std::collections::BTreeSet;

pub(super) fn cluster(name: &str, procs: u32) -> ClusterConfig {
    ClusterConfig::local(name, procs)
}

/// A cluster of `procs` processors scheduled by Maui through WIKI (`scheduler = "wiki"`).
pub(super) fn wiki_cluster(name: &str, procs: u32) -> ClusterConfig {
    ClusterConfig {
        scheduler: "wiki".into(),
        wiki: Some(crate::config::WikiConfig {
            listen: "127.0.0.1:0".into(),
            key_file: "/nonexistent".into(),
            allowed_peers: vec![],
            auth: None,
        }),
        ..ClusterConfig::local(name, procs)
    }
}

pub(super) fn world(clusters: Vec<ClusterConfig>) -> World {
    let cfg = Config {
        cluster: clusters,
        data_dir: "/nonexistent".into(),
        ..Config::default()
    };
    let mut w = World::new(&cfg);
    for (name, budget) in [("ann", None), ("bob", Some(1_000.0))] {
        w.add_user(UserRecord {
            name: name.into(),
            token_hash: format!("hash-{name}"),
            admin: false,
            budget,
            spent: 0.0,
            unix_user: None,
            ..Default::default()
        });
    }
    w
}

/// A global job's record as submitted at 1 000.
pub(super) fn job(id: u64, user: &str, procs: u32, walltime: i64) -> JobRecord {
    JobRecord {
        id,
        user: user.into(),
        procs,
        walltime,
        co_allocate: true,
        command: vec!["true".into()],
        submitted_at: 1_000,
        ..Default::default()
    }
}

pub(super) fn launches(w: &mut World) -> Vec<(ClusterId, u64, Vec<u32>)> {
    std::mem::take(&mut w.effects)
        .into_iter()
        .filter_map(|e| match e {
            Effect::Launch { cluster, spec, .. } => Some((cluster, spec.job, spec.processors)),
            _ => None,
        })
        .collect()
}

pub(super) fn exit(code: i32) -> Outcome {
    Outcome {
        exit_code: Some(code),
        signal: None,
        timed_out: false,
        cancelled: false,
        started_at: 0,
        ended_at: 0,
        error: None,
    }
}

/// Two clusters of 2 processors; a 3-processor global job is co-allocated: one reservation
/// per cluster, both committed, both parts launched in the same cycle, on disjoint
/// processors, charged 3 × 60 s × 1.0.
#[test]
fn a_job_larger_than_any_cluster_is_co_allocated_with_one_start() {
    let mut w = world(vec![cluster("a", 2), cluster("b", 2)]);
    w.accept(Time(1_000), vec![job(1, "ann", 3, 60)]);
    w.cycle(Time(1_000));
    let j = &w.jobs[&JobId(1)];
    assert_eq!(j.state, JobState::Running);
    assert_eq!(j.started_at, Some(1_000));
    assert_eq!(j.charged, 180.0);
    assert_eq!(j.parts.iter().map(|p| p.procs).sum::<u32>(), 3);
    let l = launches(&mut w);
    assert_eq!(l.len(), 2, "{l:?}");
    assert_ne!(l[0].0, l[1].0);
    let res: Vec<_> = w.reservations.values().collect();
    assert_eq!(res.len(), 2);
    assert!(res
        .iter()
        .all(|r| r.state == ReservationState::Committed && r.kind == "job"));
    // Both parts end: the job is completed, its reservations finished, processors free.
    w.on_finished(Time(1_030), ClusterId(0), JobId(1), 0, &exit(0));
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Running);
    w.on_finished(Time(1_031), ClusterId(1), JobId(1), 0, &exit(0));
    let j = &w.jobs[&JobId(1)];
    assert_eq!(j.state, JobState::Completed);
    assert_eq!(j.ended_at, Some(1_031));
    // 31 of 60 s used: the rest of the charge goes back.
    assert!(
        (j.charged - 180.0 * 31.0 / 60.0).abs() < 1e-9,
        "{}",
        j.charged
    );
    assert!(w
        .reservations
        .values()
        .all(|r| r.state == ReservationState::Finished));
    assert_eq!(w.clusters[0].free.len() + w.clusters[1].free.len(), 4);
}

/// A failing part stops its siblings; the job's fate is the failure.
#[test]
fn a_failed_part_stops_the_others_and_names_the_fate() {
    let mut w = world(vec![cluster("a", 2), cluster("b", 2)]);
    w.accept(Time(1_000), vec![job(1, "ann", 4, 60)]);
    w.cycle(Time(1_000));
    launches(&mut w);
    w.on_finished(Time(1_005), ClusterId(0), JobId(1), 0, &exit(3));
    let kills: Vec<_> = w
        .effects
        .iter()
        .filter(|e| {
            matches!(
                e,
                Effect::Kill {
                    cluster: ClusterId(1),
                    job: JobId(1),
                    ..
                }
            )
        })
        .collect();
    assert_eq!(kills.len(), 1);
    let killed = Outcome {
        exit_code: None,
        signal: Some(15),
        cancelled: true,
        ..exit(0)
    };
    w.on_finished(Time(1_006), ClusterId(1), JobId(1), 0, &killed);
    let j = &w.jobs[&JobId(1)];
    assert_eq!(j.state, JobState::Failed);
    assert_eq!(j.exit_code, Some(3));
}

/// A blocker holds the only cluster for 100 s; the next job is reserved at 1100 exactly,
/// and cancelling it gives back its reservation and its whole charge.
#[test]
fn a_reserved_job_waits_for_its_start_and_cancelling_refunds_it() {
    let mut w = world(vec![cluster("a", 2)]);
    w.accept(Time(1_000), vec![job(1, "ann", 2, 100)]);
    w.cycle(Time(1_000));
    launches(&mut w);
    w.accept(Time(1_001), vec![job(2, "bob", 2, 50)]);
    w.cycle(Time(1_001));
    // Planned at 1100, beyond the 60 s lead time: planned, not yet reserved.
    assert_eq!(w.jobs[&JobId(2)].state, JobState::Planned);
    assert_eq!(w.jobs[&JobId(2)].planned_start, Some(1_100));
    w.cycle(Time(1_050));
    let j = &w.jobs[&JobId(2)];
    assert_eq!(j.state, JobState::Reserved);
    assert_eq!(j.charged, 100.0);
    assert_eq!(w.users["bob"].budget, Some(900.0));
    assert!(launches(&mut w).is_empty());
    w.cancel(Time(1_060), JobId(2)).unwrap();
    assert_eq!(w.jobs[&JobId(2)].state, JobState::Cancelled);
    assert_eq!(w.users["bob"].budget, Some(1_000.0));
    assert_eq!(w.users["bob"].spent, 0.0);
    assert!(w
        .reservations
        .values()
        .filter(|r| r.acl.job == Some(2))
        .all(|r| r.state == ReservationState::Released));
    assert!(
        w.cancel(Time(1_061), JobId(2)).is_err(),
        "a final job cannot be cancelled"
    );
}

/// The reserved job starts at its reserved second when nothing ends early, and at once
/// when the blocker ends early and the move delays no one (work conservation).
#[test]
fn a_reserved_job_starts_as_soon_as_its_processors_free_up() {
    let mut w = world(vec![cluster("a", 2)]);
    w.accept(Time(1_000), vec![job(1, "ann", 2, 100)]);
    w.cycle(Time(1_000));
    w.accept(Time(1_060), vec![job(2, "ann", 2, 50)]);
    w.cycle(Time(1_060));
    assert_eq!(w.jobs[&JobId(2)].state, JobState::Reserved);
    launches(&mut w);
    assert_eq!(w.jobs[&JobId(2)].planned_start, Some(1_100));
    w.cycle(Time(1_065));
    assert!(launches(&mut w).is_empty(), "the blocker still runs");
    // The blocker ends early, at 1070: the reservation moves to 1070 and the job starts.
    w.on_finished(Time(1_070), ClusterId(0), JobId(1), 0, &exit(0));
    assert_eq!(launches(&mut w).len(), 1);
    assert_eq!(w.jobs[&JobId(2)].started_at, Some(1_070));
    let r = w
        .reservations
        .values()
        .find(|r| r.acl.job == Some(2))
        .unwrap();
    assert_eq!((r.start, r.end), (1_070, 1_120));
}

#[test]
fn budgets_refuse_the_worst_case_with_both_numbers() {
    let w = world(vec![cluster("a", 4)]);
    let e = w.admit(&job(1, "bob", 4, 300)).unwrap_err();
    assert!(matches!(e, crate::Refusal::OverBudget { .. }), "{e:?}");
    assert!(e.reason().contains("1200.00"), "{}", e.reason());
    assert!(e.reason().contains("1000.00"), "{}", e.reason());
    assert!(w.admit(&job(2, "bob", 4, 250)).is_ok());
    let e = w.admit(&job(3, "ann", 5, 10)).unwrap_err();
    assert!(
        e.reason().contains("largest possible is 4"),
        "{}",
        e.reason()
    );
    let mut local = job(4, "ann", 1, 10);
    local.cluster = Some("zzz".into());
    let e = w.admit(&local).unwrap_err();
    assert_eq!(e.field(), Some("cluster"));
    assert!(e.reason().contains("known: a"), "{}", e.reason());
}

/// Hold takes a planned job out of planning; release puts it back.
#[test]
fn hold_and_release() {
    let mut w = world(vec![cluster("a", 1)]);
    w.accept(
        Time(1_000),
        vec![job(1, "ann", 1, 1_000), job(2, "ann", 1, 10)],
    );
    w.cycle(Time(1_000));
    assert_eq!(w.jobs[&JobId(2)].state, JobState::Planned);
    w.hold(Time(1_001), JobId(2)).unwrap();
    w.cycle(Time(1_002));
    assert!(w.jobs[&JobId(2)].held);
    assert_eq!(w.jobs[&JobId(2)].state, JobState::Pending);
    assert_eq!(w.jobs[&JobId(2)].planned_start, None);
    w.release(Time(1_003), JobId(2)).unwrap();
    w.cycle(Time(1_003));
    assert_eq!(w.jobs[&JobId(2)].state, JobState::Planned);
    assert!(w.release(Time(1_004), JobId(2)).is_err());
}

/// Administrative reservations: overlaps beyond capacity are refused naming the one in the
/// way; tentative ones expire; the ACL decides who may bind to them.
#[test]
fn reservations_conflict_expire_and_admit() {
    let mut w = world(vec![cluster("a", 4)]);
    let acl = AclSpec {
        users: vec!["ann".into()],
        ..AclSpec::default()
    };
    let r1 = w
        .create_reservation(
            Time(1_000),
            "admin",
            "a",
            Held::Count(3),
            2_000,
            3_000,
            acl.clone(),
            None,
        )
        .unwrap();
    let e = w
        .create_reservation(
            Time(1_000),
            "admin",
            "a",
            Held::Count(2),
            2_500,
            3_500,
            acl.clone(),
            None,
        )
        .unwrap_err();
    assert!(matches!(e, crate::Refusal::Conflict { .. }), "{e:?}");
    assert!(
        e.reason().contains(&format!("reservation {r1}")),
        "{}",
        e.reason()
    );
    let r2 = w
        .create_reservation(
            Time(1_000),
            "admin",
            "a",
            Held::Count(1),
            2_500,
            3_500,
            acl,
            Some(10),
        )
        .unwrap();
    assert_eq!(w.reservations[&r2].state, ReservationState::Tentative);
    w.cycle(Time(1_011));
    assert_eq!(w.reservations[&r2].state, ReservationState::Expired);
    let mut bound = job(1, "bob", 1, 60);
    bound.reservation = Some(r1.0);
    assert!(matches!(
        w.admit(&bound).unwrap_err(),
        crate::Refusal::Forbidden { .. }
    ));
    bound.user = "ann".into();
    assert!(w.admit(&bound).is_ok());
}

/// After a restart the running job is back in its cluster's scheduler on its processors,
/// and is returned for re-adoption; the reserved job keeps its reservation.
#[test]
fn restore_rebuilds_the_schedulers() {
    let mut w = world(vec![cluster("a", 2)]);
    w.accept(
        Time(1_000),
        vec![job(1, "ann", 1, 100), job(2, "ann", 2, 100)],
    );
    w.cycle(Time(1_000));
    w.cycle(Time(1_045));
    assert_eq!(w.jobs[&JobId(2)].state, JobState::Reserved);
    let jobs: Vec<JobRecord> = w.jobs.values().cloned().collect();
    let res: Vec<ReservationRecord> = w.reservations.values().cloned().collect();
    let users: Vec<UserRecord> = w.users.values().cloned().collect();
    let mut again = world(vec![cluster("a", 2)]);
    let adopt = again.restore(Time(1_050), jobs, res, users);
    assert_eq!(adopt, vec![(ClusterId(0), JobId(1), 0)]);
    assert!(again.broker.clusters[0].sched.is_running(JobId(1)));
    assert_eq!(again.clusters[0].free.len(), 1);
    again.cycle(Time(1_050));
    assert_eq!(again.jobs[&JobId(2)].state, JobState::Reserved);
    // The adopted reservation is the broker's: it moves earlier when job 1 ends early.
    again.on_finished(Time(1_060), ClusterId(0), JobId(1), 0, &exit(0));
    again.cycle(Time(1_100));
    assert_eq!(again.jobs[&JobId(2)].started_at, Some(1_060));
}

/// After a restart, the reservation of a reserved global job holds its licences again:
/// before, it came back without them, and local jobs could take them underneath it.
#[test]
fn restore_holds_a_reserved_global_jobs_licences_again() {
    let with_pool = || {
        let cfg = Config {
            cluster: vec![cluster("a", 2)],
            licence: vec![foresight_core::licence::LicencePool {
                name: "ansys".into(),
                count: 2,
                clusters: vec!["a".into()],
            }],
            data_dir: "/nonexistent".into(),
            ..Config::default()
        };
        let mut w = World::new(&cfg);
        w.add_user(UserRecord {
            name: "ann".into(),
            token_hash: "ann".into(),
            ..Default::default()
        });
        w
    };
    let mut w = with_pool();
    let mut licensed = job(2, "ann", 2, 100);
    licensed.licences = [("ansys".to_string(), 2)].into_iter().collect();
    w.accept(Time(1_000), vec![job(1, "ann", 1, 100), licensed]);
    w.cycle(Time(1_000));
    w.cycle(Time(1_045));
    assert_eq!(w.jobs[&JobId(2)].state, JobState::Reserved);
    let free = |w: &World| {
        w.broker.clusters[0]
            .sched
            .licence_book()
            .min_free("ansys", Time(1_100), Time(1_200))
    };
    assert_eq!(free(&w), Some(0), "held by job 2's reservation");
    let jobs: Vec<JobRecord> = w.jobs.values().cloned().collect();
    let res: Vec<ReservationRecord> = w.reservations.values().cloned().collect();
    let users: Vec<UserRecord> = w.users.values().cloned().collect();
    let mut again = with_pool();
    again.restore(Time(1_050), jobs, res, users);
    assert_eq!(free(&again), Some(0), "job 2's licences after the restart");
    again.cycle(Time(1_050));
    assert_eq!(free(&again), Some(0), "and after a cycle");
}

/// After a restart, a running job with a later id (it was backfilled) keeps its processors:
/// the waiting job with an earlier id must not be started on them.
#[test]
fn restore_puts_running_jobs_back_before_placing_the_queue() {
    let mut waiting = job(1, "ann", 2, 100);
    waiting.cluster = Some("a".into());
    waiting.parts = vec![PartRecord {
        cluster: "a".into(),
        procs: 2,
        ..PartRecord::default()
    }];
    let mut running = job(2, "ann", 2, 100);
    running.cluster = Some("a".into());
    running.state = JobState::Running;
    running.started_at = Some(1_000);
    running.parts = vec![PartRecord {
        cluster: "a".into(),
        procs: 2,
        processors: vec![0, 1],
        ..PartRecord::default()
    }];
    let mut w = world(vec![cluster("a", 2)]);
    let adopt = w.restore(Time(1_010), vec![waiting, running], vec![], vec![]);
    assert_eq!(adopt, vec![(ClusterId(0), JobId(2), 0)]);
    assert!(
        launches(&mut w).is_empty(),
        "job 1 started on job 2's processors"
    );
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Pending);
    assert!(w.broker.clusters[0].sched.is_running(JobId(2)));
    w.on_finished(Time(1_050), ClusterId(0), JobId(2), 0, &exit(0));
    let l = launches(&mut w);
    assert_eq!(l, vec![(ClusterId(0), 1, vec![0, 1])]);
}

/// Reservations of named processors: two that name one processor over overlapping windows
/// are refused (naming the processor and the reservation), disjoint ones coexist, and a job
/// bound to one runs on exactly its processors while a job started beside it keeps off them.
#[test]
fn reservations_of_named_processors_never_share_one() {
    let mut w = world(vec![cluster("a", 4)]);
    let ann = AclSpec {
        users: vec!["ann".into()],
        ..AclSpec::default()
    };
    let r1 = w
        .create_reservation(
            Time(1_000),
            "admin",
            "a",
            Held::These(vec![2, 3]),
            1_000,
            2_000,
            ann.clone(),
            None,
        )
        .unwrap();
    let e = w
        .create_reservation(
            Time(1_000),
            "admin",
            "a",
            Held::These(vec![1, 3]),
            1_500,
            2_500,
            ann.clone(),
            None,
        )
        .unwrap_err();
    assert!(matches!(e, crate::Refusal::Conflict { .. }), "{e:?}");
    assert_eq!(e.field(), Some("processors"));
    assert!(
        e.reason().contains("processor 3") && e.reason().contains(&format!("reservation {r1}")),
        "{}",
        e.reason()
    );
    let e = w
        .create_reservation(
            Time(1_000),
            "admin",
            "a",
            Held::These(vec![9]),
            1_500,
            2_500,
            ann.clone(),
            None,
        )
        .unwrap_err();
    assert_eq!(e.field(), Some("processors"));
    // After r1's window the same processor is free to name.
    w.create_reservation(
        Time(1_000),
        "admin",
        "a",
        Held::These(vec![3]),
        2_000,
        2_500,
        ann,
        None,
    )
    .unwrap();
    assert_eq!(w.reservations[&r1].processors, vec![2, 3]);

    // A local job started now, beside r1: it keeps off processors 2 and 3.
    let mut beside = job(1, "bob", 2, 600);
    beside.cluster = Some("a".into());
    w.accept(Time(1_000), vec![beside]);
    w.cycle(Time(1_000));
    let l = launches(&mut w);
    assert_eq!(l, vec![(ClusterId(0), 1, vec![0, 1])]);
    // Ann's job bound to r1 runs on exactly 2 and 3.
    let mut bound = job(2, "ann", 2, 600);
    bound.reservation = Some(r1.0);
    w.accept(Time(1_000), vec![bound]);
    w.cycle(Time(1_000));
    let l = launches(&mut w);
    assert_eq!(l, vec![(ClusterId(0), 2, vec![2, 3])]);
}

// ------------------------------------------------------------------ remote (Slurm) clusters

pub(super) fn slurm(name: &str) -> ClusterConfig {
    ClusterConfig {
        kind: "slurm".into(),
        slurm_conf: Some(format!("/etc/{name}/slurm.conf").into()),
        ..ClusterConfig::local(name, 0)
    }
}

pub(super) fn empty_state(at: i64, procs: u32) -> ClusterState {
    ClusterState {
        taken_at: at,
        processors: procs,
        jobs: vec![],
        reservations: vec![],
    }
}

pub(super) fn ours(external: &str, job: u64, attempt: u32, procs: u32, state: RmJobState) -> RmJob {
    RmJob {
        external: external.into(),
        foresight: Some((job, attempt)),
        user: "root".into(),
        state,
        procs,
        time_limit: Some(120),
        submitted_at: 1_000,
        start: None,
        priority: 0,
        reservation: None,
    }
}

fn theirs_running(external: &str, procs: u32, start: i64, limit: i64) -> RmJob {
    RmJob {
        external: external.into(),
        foresight: None,
        user: "owner".into(),
        state: RmJobState::Running,
        procs,
        time_limit: Some(limit),
        submitted_at: start,
        start: Some(start),
        priority: 100,
        reservation: None,
    }
}

fn take_effects(w: &mut World) -> Vec<Effect> {
    std::mem::take(&mut w.effects)
}

/// A job larger than either Slurm cluster: phase one asks both for a reservation; nothing is
/// submitted until both hold; then each part goes to its cluster bound to its reservation and
/// not before the common start; Slurm's start times give the skew; the ends complete it.
#[test]
fn slurm_co_allocation_is_two_phase_and_synchronous() {
    let mut w = world(vec![slurm("c1"), slurm("c2")]);
    w.sync_remote(Time(1_000), ClusterId(0), Ok(empty_state(1_000, 8)));
    w.sync_remote(Time(1_000), ClusterId(1), Ok(empty_state(1_000, 8)));
    w.accept(Time(1_000), vec![job(1, "ann", 12, 90)]);
    w.cycle(Time(1_000));
    let asked: Vec<(ClusterId, ReserveRequest)> = take_effects(&mut w)
        .into_iter()
        .filter_map(|e| match e {
            Effect::Reserve { cluster, request } => Some((cluster, request)),
            _ => None,
        })
        .collect();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_eq!(asked.iter().map(|a| a.1.procs).sum::<u32>(), 12);
    // Slurm reserves whole minutes: 90 s becomes 120 s on both.
    assert!(asked.iter().all(|a| a.1.start == 1_000 && a.1.end == 1_120));
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Planned);
    assert!(!w.broker.queued().any(|e| e.job.id == JobId(1)));

    w.reservation_answered(Time(1_001), ReservationId(asked[0].1.id), Ok(()));
    assert!(
        take_effects(&mut w).is_empty(),
        "nothing submitted before both hold"
    );
    w.reservation_answered(Time(1_001), ReservationId(asked[1].1.id), Ok(()));
    let subs: Vec<(ClusterId, Submission)> = take_effects(&mut w)
        .into_iter()
        .filter_map(|e| match e {
            Effect::Submit {
                cluster,
                submission,
                ..
            } => Some((cluster, submission)),
            _ => None,
        })
        .collect();
    assert_eq!(subs.len(), 2);
    for (k, s) in &subs {
        let rid = asked.iter().find(|a| a.0 == *k).unwrap().1.id;
        assert_eq!(s.reservation, Some(rid));
        assert_eq!(s.begin, Some(1_000));
        assert_eq!(s.spec.walltime_secs, 120);
    }
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Reserved);
    assert!(w
        .reservations
        .values()
        .all(|r| r.state == ReservationState::Committed));

    w.part_submitted(
        Time(1_001),
        subs[0].0,
        JobId(1),
        0,
        Ok(PartHandle {
            job: 1,
            attempt: 0,
            external: Some("11".into()),
        }),
    );
    w.part_submitted(
        Time(1_001),
        subs[1].0,
        JobId(1),
        0,
        Ok(PartHandle {
            job: 1,
            attempt: 0,
            external: Some("21".into()),
        }),
    );
    let procs_on = |k: ClusterId| {
        subs.iter()
            .find(|s| s.0 == k)
            .unwrap()
            .1
            .spec
            .processors
            .len() as u32
    };
    let running = |ext: &str, k: ClusterId, start: i64| {
        let mut j = ours(ext, 1, 0, procs_on(k), RmJobState::Running);
        j.start = Some(start);
        j
    };
    let mut s0 = empty_state(1_003, 8);
    s0.jobs.push(running("11", ClusterId(0), 1_000));
    let mut s1 = empty_state(1_003, 8);
    s1.jobs.push(running("21", ClusterId(1), 1_001));
    w.sync_remote(Time(1_003), ClusterId(0), Ok(s0));
    w.sync_remote(Time(1_003), ClusterId(1), Ok(s1));
    let j = &w.jobs[&JobId(1)];
    assert_eq!(j.state, JobState::Running);
    assert_eq!(j.started_at, Some(1_000));
    assert_eq!(w.stats.skew_count, 1);
    assert_eq!(w.stats.skew_max, 1.0);

    let ended = |ext: &str, k: ClusterId| {
        let mut j = ours(ext, 1, 0, procs_on(k), RmJobState::Ended(exit(0)));
        j.start = Some(1_000);
        j
    };
    let mut s0 = empty_state(1_050, 8);
    s0.jobs.push(ended("11", ClusterId(0)));
    let mut s1 = empty_state(1_050, 8);
    s1.jobs.push(ended("21", ClusterId(1)));
    w.sync_remote(Time(1_050), ClusterId(0), Ok(s0));
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Running);
    w.sync_remote(Time(1_050), ClusterId(1), Ok(s1));
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Completed);
    assert!(w
        .reservations
        .values()
        .all(|r| r.state == ReservationState::Finished));
}

/// One cluster refuses its reservation: the other's is released too, nothing is submitted,
/// and the job is planned again with the reason kept.
#[test]
fn a_slurm_refusal_releases_every_part() {
    let mut w = world(vec![slurm("c1"), slurm("c2")]);
    w.sync_remote(Time(1_000), ClusterId(0), Ok(empty_state(1_000, 8)));
    w.sync_remote(Time(1_000), ClusterId(1), Ok(empty_state(1_000, 8)));
    w.accept(Time(1_000), vec![job(1, "ann", 12, 60)]);
    w.cycle(Time(1_000));
    let ids: Vec<u64> = take_effects(&mut w)
        .into_iter()
        .filter_map(|e| match e {
            Effect::Reserve { request, .. } => Some(request.id),
            _ => None,
        })
        .collect();
    w.reservation_answered(Time(1_001), ReservationId(ids[0]), Ok(()));
    w.reservation_answered(
        Time(1_001),
        ReservationId(ids[1]),
        Err("Requested nodes are busy".into()),
    );
    let effects = take_effects(&mut w);
    assert!(!effects.iter().any(|e| matches!(e, Effect::Submit { .. })));
    let released: BTreeSet<u64> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Release { reservation, .. } => Some(reservation.0),
            _ => None,
        })
        .collect();
    assert_eq!(released, ids.iter().copied().collect());
    let j = &w.jobs[&JobId(1)];
    assert_eq!(j.state, JobState::Pending);
    assert!(
        j.reason
            .as_deref()
            .unwrap()
            .contains("Requested nodes are busy"),
        "{:?}",
        j.reason
    );
    // Planned again after a pause (1 s, then 2 s, ...), not at every cycle.
    w.cycle(Time(1_001));
    assert!(!reserving(&w, 1));
    assert!(take_effects(&mut w).is_empty());
    w.cycle(Time(1_002));
    assert!(reserving(&w, 1), "{:?}", w.jobs[&JobId(1)].reason);
}

/// A controller that stops answering: the cluster offers nothing, a reserved job there that
/// has not started is cancelled there and planned again as a new attempt (so the old Slurm
/// job can never be taken for it); once the cluster is back, the old job still queued there
/// is cancelled and the stale reservation released.
#[test]
fn a_dead_controller_sends_its_reserved_jobs_elsewhere() {
    let mut w = world(vec![slurm("c1"), cluster("local", 4)]);
    w.sync_remote(Time(1_000), ClusterId(0), Ok(empty_state(1_000, 8)));
    // Busy local cluster: the job goes to c1.
    let mut filler = job(9, "bob", 4, 10_000);
    filler.cluster = Some("local".into());
    w.accept(Time(1_000), vec![filler]);
    w.accept(Time(1_000), vec![job(1, "ann", 6, 60)]);
    w.cycle(Time(1_000));
    let rid = take_effects(&mut w)
        .into_iter()
        .find_map(|e| match e {
            Effect::Reserve { request, .. } => Some(request.id),
            _ => None,
        })
        .unwrap();
    w.reservation_answered(Time(1_001), ReservationId(rid), Ok(()));
    take_effects(&mut w);
    w.part_submitted(
        Time(1_001),
        ClusterId(0),
        JobId(1),
        0,
        Ok(PartHandle {
            job: 1,
            attempt: 0,
            external: Some("5".into()),
        }),
    );
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Reserved);

    w.sync_remote(
        Time(1_010),
        ClusterId(0),
        Err("slurm_load_jobs error: Unable to contact slurm controller".into()),
    );
    assert!(!w.broker.clusters[0].available);
    assert!(w.views()[0].processors.is_empty());
    let effects = take_effects(&mut w);
    assert!(effects.iter().any(|e| matches!(e, Effect::Cancel { cluster: ClusterId(0), part } if part.external.as_deref() == Some("5"))));
    assert!(effects
        .iter()
        .any(|e| matches!(e, Effect::Release { cluster: ClusterId(0), reservation } if reservation.0 == rid)));
    let j = &w.jobs[&JobId(1)];
    assert_eq!(j.state, JobState::Pending);
    assert_eq!(j.attempt, 1);
    assert!(
        j.reason.as_deref().unwrap().contains("unavailable"),
        "{:?}",
        j.reason
    );
    assert_eq!(
        w.reservations[&ReservationId(rid)].state,
        ReservationState::Released
    );
    // Not failed for being larger than what is reachable: it waits.
    w.cycle(Time(1_011));
    assert_ne!(w.jobs[&JobId(1)].state, JobState::Failed);

    // Back: the old part (attempt 0) and its reservation are still there; both go.
    let mut back = empty_state(1_020, 8);
    let mut old = ours("5", 1, 0, 6, RmJobState::Pending);
    old.reservation = Some(format!("foresight-{rid}"));
    back.jobs.push(old);
    back.reservations.push(foresight_rm::RmReservation {
        name: format!("foresight-{rid}"),
        foresight: Some(rid),
        start: 1_000,
        end: 1_060,
        procs: 6,
    });
    w.sync_remote(Time(1_020), ClusterId(0), Ok(back));
    assert!(w.broker.clusters[0].available);
    let effects = take_effects(&mut w);
    assert!(
        effects.iter().any(
            |e| matches!(e, Effect::Cancel { part, .. } if part.external.as_deref() == Some("5"))
        ),
        "{effects:?}"
    );
    assert!(effects
        .iter()
        .any(|e| matches!(e, Effect::Release { reservation, .. } if reservation.0 == rid)));
}

/// After a restart of the service, a reserved part Slurm already has (found by its name) is
/// adopted and not submitted again; one Slurm never got is submitted.
#[test]
fn restart_adopts_what_slurm_has_and_submits_what_it_lacks() {
    let mut w = world(vec![slurm("c1")]);
    let reservation = |id: u64| ReservationRecord {
        id,
        kind: "job".into(),
        cluster: "c1".into(),
        procs: 2,
        processors: vec![],
        start: 2_000,
        end: 2_060,
        acl: AclSpec {
            job: Some(id),
            ..AclSpec::default()
        },
        state: ReservationState::Committed,
        expires_at: None,
        owner: "ann".into(),
    };
    let reserved = |id: u64| {
        let mut j = job(id, "ann", 2, 60);
        j.state = JobState::Reserved;
        j.parts = vec![PartRecord {
            cluster: "c1".into(),
            procs: 2,
            reservation: Some(id),
            ..PartRecord::default()
        }];
        j
    };
    let adopt = w.restore(
        Time(1_500),
        vec![reserved(1), reserved(2)],
        vec![reservation(1), reservation(2)],
        vec![],
    );
    assert!(adopt.is_empty());
    let mut state = empty_state(1_501, 8);
    let mut has = ours("77", 1, 0, 2, RmJobState::Pending);
    has.reservation = Some("foresight-1".into());
    state.jobs.push(has);
    for id in [1, 2] {
        state.reservations.push(foresight_rm::RmReservation {
            name: format!("foresight-{id}"),
            foresight: Some(id),
            start: 2_000,
            end: 2_060,
            procs: 2,
        });
    }
    w.sync_remote(Time(1_501), ClusterId(0), Ok(state));
    assert_eq!(w.jobs[&JobId(1)].parts[0].external.as_deref(), Some("77"));
    let submitted: Vec<u64> = take_effects(&mut w)
        .into_iter()
        .filter_map(|e| match e {
            Effect::Submit { submission, .. } => Some(submission.spec.job),
            _ => None,
        })
        .collect();
    assert_eq!(submitted, vec![2]);
}

/// The mirror of a Slurm cluster holds the site's running jobs until their limits: a global
/// job is planned after them, not on top of them.
#[test]
fn the_mirror_plans_around_the_sites_own_jobs() {
    let mut w = world(vec![slurm("c1")]);
    let mut state = empty_state(1_000, 8);
    state.jobs.push(theirs_running("3", 6, 900, 600));
    w.sync_remote(Time(1_000), ClusterId(0), Ok(state));
    w.accept(Time(1_000), vec![job(1, "ann", 4, 60)]);
    w.cycle(Time(1_000));
    let j = &w.jobs[&JobId(1)];
    assert_eq!(j.state, JobState::Planned);
    // 900 + 600, and one second more: Slurm holds a job's processors through the second its
    // limit ends, and refuses a reservation starting then.
    assert_eq!(j.planned_start, Some(1_501), "{:?}", j.reason);
}

/// A part that started a second late is still running when its reservation ends: the
/// reservation is left for Slurm to end (releasing it would cancel the part), and a
/// snapshot still showing it does not release it either.
#[test]
fn a_reservation_ending_under_a_running_part_is_left_to_slurm() {
    let mut w = world(vec![slurm("c1")]);
    w.sync_remote(Time(1_000), ClusterId(0), Ok(empty_state(1_000, 8)));
    w.accept(Time(1_000), vec![job(1, "ann", 4, 60)]);
    w.cycle(Time(1_000));
    let rid = take_effects(&mut w)
        .into_iter()
        .find_map(|e| match e {
            Effect::Reserve { request, .. } => Some(request.id),
            _ => None,
        })
        .unwrap();
    w.reservation_answered(Time(1_000), ReservationId(rid), Ok(()));
    w.part_submitted(
        Time(1_000),
        ClusterId(0),
        JobId(1),
        0,
        Ok(PartHandle {
            job: 1,
            attempt: 0,
            external: Some("8".into()),
        }),
    );
    take_effects(&mut w);
    let mut running = ours("8", 1, 0, 4, RmJobState::Running);
    running.start = Some(1_002);
    running.reservation = Some(format!("foresight-{rid}"));
    let snapshot = |at: i64| {
        let mut s = empty_state(at, 8);
        s.jobs.push(running.clone());
        s.reservations.push(foresight_rm::RmReservation {
            name: format!("foresight-{rid}"),
            foresight: Some(rid),
            start: 1_000,
            end: 1_060,
            procs: 4,
        });
        s
    };
    w.sync_remote(Time(1_010), ClusterId(0), Ok(snapshot(1_010)));
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Running);
    w.cycle(Time(1_060));
    assert_eq!(
        w.reservations[&ReservationId(rid)].state,
        ReservationState::Finished
    );
    w.sync_remote(Time(1_061), ClusterId(0), Ok(snapshot(1_061)));
    let effects = take_effects(&mut w);
    assert!(
        !effects
            .iter()
            .any(|e| matches!(e, Effect::Release { .. } | Effect::Cancel { .. })),
        "{effects:?}"
    );
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Running);
}

/// A world on `clusters` restored at `at` from what `w` stored, as a restarted service
/// builds it, and the parts it asks the executors to adopt.
pub(super) fn restarted(
    w: &World,
    clusters: Vec<ClusterConfig>,
    at: i64,
) -> (World, Vec<(ClusterId, JobId, u32)>) {
    let mut again = world(clusters);
    let adopt = again.restore(
        Time(at),
        w.jobs.values().cloned().collect(),
        w.reservations.values().cloned().collect(),
        w.users.values().cloned().collect(),
    );
    (again, adopt)
}

/// Is global job `id` in phase one of its reservation?
fn reserving(w: &World, id: u64) -> bool {
    w.broker
        .entry(JobId(id))
        .is_some_and(|e| matches!(e.phase, foresight_core::broker::Phase::Reserving { .. }))
}

/// A Slurm cluster's configured `features` hold for the processors its snapshot reports: a
/// global job that requires one is reserved there, not refused for want of it.
#[test]
fn a_slurm_clusters_features_survive_its_reported_size() {
    let mut c1 = slurm("c1");
    c1.spec.features = vec!["one".into()];
    let mut w = world(vec![c1, slurm("c2")]);
    w.sync_remote(Time(1_000), ClusterId(0), Ok(empty_state(1_000, 8)));
    w.sync_remote(Time(1_000), ClusterId(1), Ok(empty_state(1_000, 8)));
    let mut j = job(1, "ann", 2, 60);
    j.requires = vec!["one".into()];
    w.accept(Time(1_000), vec![j]);
    w.cycle(Time(1_000));
    let j = &w.jobs[&JobId(1)];
    assert_ne!(j.state, JobState::Failed, "{:?}", j.reason);
    let asked: Vec<ClusterId> = take_effects(&mut w)
        .into_iter()
        .filter_map(|e| match e {
            Effect::Reserve { cluster, .. } => Some(cluster),
            _ => None,
        })
        .collect();
    assert_eq!(asked, vec![ClusterId(0)]);
}

/// What a requeued job's part reports once its kill took it: killed by signal 9.
fn killed() -> Outcome {
    Outcome {
        signal: Some(9),
        cancelled: true,
        ..exit(0)
    }
}

/// A requeueable level-0 job runs on both processors; a level-1 job preempts it, and its
/// start is deferred while the victim dies. Returns the world at that point.
fn preempted_by_a_deferred_start() -> World {
    let mut w = world(vec![cluster("a", 2)]);
    let mut low = job(1, "ann", 2, 100);
    low.requeue = true;
    w.accept(Time(1_000), vec![low]);
    w.cycle(Time(1_000));
    assert_eq!(launches(&mut w).len(), 1);
    let mut high = job(2, "ann", 2, 50);
    high.priority = 1;
    w.accept(Time(1_010), vec![high]);
    w.cycle(Time(1_010));
    assert!(launches(&mut w).is_empty(), "job 2 started beside job 1");
    let j = &w.jobs[&JobId(2)];
    assert_ne!(j.state, JobState::Running);
    assert!(
        j.reason
            .as_deref()
            .is_some_and(|r| r.contains("waiting for processors")),
        "{:?}",
        j.reason
    );
    assert!(w.jobs[&JobId(1)].requeue_pending);
    w
}

/// A start deferred because its processors were still held (here by a preempted
/// `--requeue` job being killed) is not lost at a restart: once the holder is gone the
/// deferred job starts on its processors, and the holder runs again as its next attempt
/// after it. Before, the deferred job stayed `reserved` for good.
#[test]
fn restore_starts_a_deferred_job_once_its_processors_free() {
    let w = preempted_by_a_deferred_start();
    let (mut again, adopt) = restarted(&w, vec![cluster("a", 2)], 1_012);
    assert_eq!(adopt, vec![(ClusterId(0), JobId(1), 0)]);
    again.cycle(Time(1_012));
    assert!(
        launches(&mut again).is_empty(),
        "job 2 started beside job 1"
    );
    again.on_finished(Time(1_015), ClusterId(0), JobId(1), 0, &killed());
    assert_eq!(launches(&mut again), vec![(ClusterId(0), 2, vec![0, 1])]);
    assert_eq!(again.jobs[&JobId(2)].state, JobState::Running);
    let low = &again.jobs[&JobId(1)];
    assert_eq!(low.attempt, 1);
    assert!(!low.requeue_pending);
    assert_ne!(low.state, JobState::Failed);
    again.cycle(Time(1_016));
    assert!(
        launches(&mut again).is_empty(),
        "job 1 started beside job 2"
    );
    again.on_finished(Time(1_040), ClusterId(0), JobId(2), 0, &exit(0));
    again.cycle(Time(1_040));
    assert_eq!(launches(&mut again), vec![(ClusterId(0), 1, vec![0, 1])]);
    assert_eq!(again.jobs[&JobId(1)].state, JobState::Running);
}

/// The same across a restart for one part of a co-allocated job: its other part runs, the
/// deferred one is not adopted as a process (it has none, and would be taken for lost,
/// failing the job into a new attempt) but launched once its processors free.
#[test]
fn restore_starts_a_deferred_part_of_a_running_job_once_its_processors_free() {
    let mut w = world(vec![cluster("a", 2), cluster("b", 2)]);
    let mut low = job(1, "ann", 2, 100);
    low.requeue = true;
    w.accept(Time(1_000), vec![low]);
    w.cycle(Time(1_000));
    assert_eq!(launches(&mut w), vec![(ClusterId(0), 1, vec![0, 1])]);
    let mut high = job(2, "ann", 4, 50);
    high.priority = 1;
    w.accept(Time(1_010), vec![high]);
    w.cycle(Time(1_010));
    assert_eq!(
        launches(&mut w),
        vec![(ClusterId(1), 2, vec![0, 1])],
        "only the part on b"
    );
    assert_eq!(w.jobs[&JobId(2)].state, JobState::Running);
    let (mut again, adopt) = restarted(&w, vec![cluster("a", 2), cluster("b", 2)], 1_012);
    assert_eq!(
        adopt,
        vec![(ClusterId(0), JobId(1), 0), (ClusterId(1), JobId(2), 0)]
    );
    again.cycle(Time(1_012));
    assert!(launches(&mut again).is_empty());
    again.on_finished(Time(1_015), ClusterId(0), JobId(1), 0, &killed());
    assert_eq!(launches(&mut again), vec![(ClusterId(0), 2, vec![0, 1])]);
    assert_eq!(again.jobs[&JobId(1)].attempt, 1);
    again.on_finished(Time(1_040), ClusterId(0), JobId(2), 0, &exit(0));
    again.on_finished(Time(1_040), ClusterId(1), JobId(2), 0, &exit(0));
    assert_eq!(again.jobs[&JobId(2)].state, JobState::Completed);
    again.cycle(Time(1_040));
    assert_eq!(launches(&mut again).len(), 1, "job 1 runs again");
    assert_eq!(again.jobs[&JobId(1)].state, JobState::Running);
}

/// A job suspended by a preemption whose preemptor ended just before a restart resumes
/// after it: its record says it is stopped, the broker takes it back as suspended, and the
/// first cycle gives it the processors the preemptor let go of.
#[test]
fn restore_resumes_a_suspended_job_whose_preemptor_ended_before_the_restart() {
    let mut w = world(vec![cluster("a", 2)]);
    w.accept(Time(1_000), vec![job(1, "ann", 2, 100)]);
    w.cycle(Time(1_000));
    assert_eq!(launches(&mut w).len(), 1);
    let mut high = job(2, "ann", 2, 50);
    high.priority = 1;
    w.accept(Time(1_010), vec![high]);
    w.cycle(Time(1_010));
    assert_eq!(launches(&mut w), vec![(ClusterId(0), 2, vec![0, 1])]);
    assert!(w.jobs[&JobId(1)].suspended);
    w.on_finished(Time(1_030), ClusterId(0), JobId(2), 0, &exit(0));
    assert_eq!(w.jobs[&JobId(2)].state, JobState::Completed);
    assert!(
        w.jobs[&JobId(1)].suspended,
        "resumed at the next cycle, not at the end"
    );
    let (mut again, adopt) = restarted(&w, vec![cluster("a", 2)], 1_031);
    assert_eq!(adopt, vec![(ClusterId(0), JobId(1), 0)]);
    again.cycle(Time(1_031));
    let low = &again.jobs[&JobId(1)];
    assert!(!low.suspended, "{:?}", low.reason);
    assert_eq!(low.parts[0].processors, vec![0, 1]);
    let resumed = again.effects.iter().any(|e| {
        matches!(
            e,
            Effect::Pause {
                job: JobId(1),
                stop: false,
                ..
            }
        )
    });
    assert!(resumed, "{:?}", again.effects);
}

/// A reserved job whose reservation began while the service was down starts after the
/// restart, as soon as the job before it is found to have ended: before, it was put back
/// in a reservation whose rest was shorter than its walltime, and never started.
#[test]
fn restore_starts_a_reserved_job_whose_start_fell_in_the_downtime() {
    let mut w = world(vec![cluster("a", 2)]);
    w.accept(
        Time(1_000),
        vec![job(1, "ann", 2, 100), job(2, "ann", 2, 100)],
    );
    w.cycle(Time(1_000));
    w.cycle(Time(1_060));
    assert_eq!(launches(&mut w), vec![(ClusterId(0), 1, vec![0, 1])]);
    assert_eq!(w.jobs[&JobId(2)].state, JobState::Reserved);
    assert_eq!(w.jobs[&JobId(2)].planned_start, Some(1_100));
    let (mut again, adopt) = restarted(&w, vec![cluster("a", 2)], 1_120);
    assert_eq!(adopt, vec![(ClusterId(0), JobId(1), 0)]);
    assert!(
        launches(&mut again).is_empty(),
        "job 2 started beside job 1"
    );
    // Job 1's supervisor recorded its end during the downtime.
    let done = Outcome {
        ended_at: 1_095,
        ..exit(0)
    };
    again.on_finished(Time(1_120), ClusterId(0), JobId(1), 0, &done);
    assert_eq!(launches(&mut again), vec![(ClusterId(0), 2, vec![0, 1])]);
    assert_eq!(again.jobs[&JobId(2)].state, JobState::Running);
    assert_eq!(again.jobs[&JobId(2)].started_at, Some(1_120));
}
