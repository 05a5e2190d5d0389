//! Preemption on a cluster that schedules itself (Slurm), as effects and records:
//! hand-checked cases, no processes.
#![allow(clippy::unwrap_used)]

use super::tests::{job, world};
use super::*;
use crate::config::ClusterConfig;
use foresight_core::broker::Preemption;
use foresight_core::ClusterId;
use foresight_rm::ClusterState;
use foresight_rm::PartHandle;
use foresight_rm::{RmJob, RmJobState, RmReservation};

fn slurm(name: &str) -> ClusterConfig {
    ClusterConfig {
        kind: "slurm".into(),
        slurm_conf: Some(format!("/etc/{name}/slurm.conf").into()),
        ..ClusterConfig::local(name, 0)
    }
}

/// Our part of job `job` (attempt `attempt`) as Slurm shows it, bound to reservation `rid`.
fn ours(external: &str, job: u64, attempt: u32, procs: u32, rid: u64, state: RmJobState) -> RmJob {
    RmJob {
        external: external.into(),
        foresight: Some((job, attempt)),
        user: "root".into(),
        state,
        procs,
        time_limit: Some(300),
        submitted_at: 1_000,
        start: Some(1_001),
        priority: 0,
        reservation: Some(format!("foresight-{rid}")),
    }
}

fn reservation(rid: u64, start: i64, end: i64, procs: u32) -> RmReservation {
    RmReservation {
        name: format!("foresight-{rid}"),
        foresight: Some(rid),
        start,
        end,
        procs,
    }
}

fn snapshot(at: i64, jobs: Vec<RmJob>, reservations: Vec<RmReservation>) -> ClusterState {
    ClusterState {
        taken_at: at,
        processors: 8,
        jobs,
        reservations,
    }
}

/// The one reservation asked of the cluster, and whether over suspended jobs.
fn asked(effects: &[Effect]) -> Option<(u64, bool)> {
    effects.iter().find_map(|e| match e {
        Effect::Reserve { request, .. } => Some((request.id, false)),
        Effect::ReserveOverSuspended { request, .. } => Some((request.id, true)),
        _ => None,
    })
}

/// A level-0 job runs on 6 of the 8 processors of a Slurm cluster, bound to its
/// reservation; it returns that reservation's id.
fn low_running(w: &mut World, requeue: bool) -> u64 {
    w.sync_remote(
        Time(1_000),
        ClusterId(0),
        Ok(snapshot(1_000, vec![], vec![])),
    );
    let mut low = job(1, "ann", 6, 300);
    low.requeue = requeue;
    w.accept(Time(1_000), vec![low]);
    w.cycle(Time(1_000));
    let (rid, over) = asked(&std::mem::take(&mut w.effects)).unwrap();
    assert!(!over);
    w.reservation_answered(Time(1_000), ReservationId(rid), Ok(()));
    w.part_submitted(
        Time(1_000),
        ClusterId(0),
        JobId(1),
        0,
        Ok(PartHandle {
            job: 1,
            attempt: 0,
            external: Some("5".into()),
        }),
    );
    w.sync_remote(
        Time(1_002),
        ClusterId(0),
        Ok(snapshot(
            1_002,
            vec![ours("5", 1, 0, 6, rid, RmJobState::Running)],
            vec![reservation(rid, 1_000, 1_300, 6)],
        )),
    );
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Running);
    w.effects.clear();
    rid
}

/// A level-3 job of 6 arrives; the broker asks to preempt job 1; the cluster says yes.
/// Returns the effects of the answer.
fn high_preempts(w: &mut World, how: Preemption) -> Vec<Effect> {
    let mut high = job(2, "ann", 6, 120);
    high.priority = 3;
    high.submitted_at = 1_003;
    w.accept(Time(1_003), vec![high]);
    w.cycle(Time(1_003));
    let effects = std::mem::take(&mut w.effects);
    let victims = effects
        .iter()
        .find_map(|e| match e {
            Effect::Preempt { by, victims, .. } if *by == JobId(2) => Some(victims.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no preemption asked: {effects:?}"));
    assert_eq!(victims.len(), 1);
    assert_eq!(victims[0].0, ClusterId(0));
    assert_eq!(victims[0].1.external.as_deref(), Some("5"));
    assert_eq!(victims[0].2, how);
    w.preemption_answered(Time(1_004), JobId(2), Ok(()));
    std::mem::take(&mut w.effects)
}

/// The suspended job's reservation stays in Slurm while the job is suspended in it: Slurm
/// refuses to delete a reservation a job is in, and releasing it cancels the parts bound
/// to it, which would kill the suspended job. The high job's reservation is asked over
/// the suspended processors; a snapshot showing the suspended job releases nothing.
#[test]
fn a_suspended_victims_reservation_is_not_released_in_slurm() {
    let mut w = world(vec![slurm("c1")]);
    let low_rid = low_running(&mut w, false);
    let effects = high_preempts(&mut w, Preemption::Suspend);
    let released: Vec<&Effect> = effects
        .iter()
        .filter(|e| matches!(e, Effect::Release { .. } | Effect::Cancel { .. }))
        .collect();
    assert!(released.is_empty(), "{released:?}");
    let (high_rid, over) = asked(&effects).unwrap();
    assert!(over, "{effects:?}");
    assert_ne!(high_rid, low_rid);
    assert!(w.jobs[&JobId(1)].suspended);
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Running);

    // Slurm shows job 1 suspended in its reservation, the high one's reservation beside it.
    w.reservation_answered(Time(1_004), ReservationId(high_rid), Ok(()));
    w.effects.clear();
    w.sync_remote(
        Time(1_005),
        ClusterId(0),
        Ok(snapshot(
            1_005,
            vec![ours("5", 1, 0, 6, low_rid, RmJobState::Suspended)],
            vec![
                reservation(low_rid, 1_000, 1_300, 6),
                reservation(high_rid, 1_004, 1_124, 6),
            ],
        )),
    );
    let effects = std::mem::take(&mut w.effects);
    assert!(
        !effects
            .iter()
            .any(|e| matches!(e, Effect::Release { .. } | Effect::Cancel { .. })),
        "{effects:?}"
    );
    assert!(w.jobs[&JobId(1)].suspended);
}

/// Two requeueable level-0 jobs of 3 run; a level-3 job of 6 needs both. Slurm requeues
/// the first, then fails on the second: the preemption is refused, but the first job's
/// record follows what Slurm did (its Slurm job is cancelled, and it is pending again as
/// its next attempt once that has ended); the second runs on, the high job waits.
#[test]
fn a_requeue_before_a_failed_preemption_is_recorded() {
    let mut w = world(vec![slurm("c1")]);
    w.sync_remote(
        Time(1_000),
        ClusterId(0),
        Ok(snapshot(1_000, vec![], vec![])),
    );
    let mut lows = vec![job(1, "ann", 3, 300), job(3, "ann", 3, 300)];
    for j in &mut lows {
        j.requeue = true;
    }
    w.accept(Time(1_000), lows);
    w.cycle(Time(1_000));
    let rids: Vec<(u64, u64)> = std::mem::take(&mut w.effects)
        .into_iter()
        .filter_map(|e| match e {
            Effect::Reserve { request, .. } => Some(request.id),
            _ => None,
        })
        .zip([1, 3])
        .collect();
    assert_eq!(rids.len(), 2);
    let mut running = Vec::new();
    let mut reservations = Vec::new();
    for (rid, _) in &rids {
        w.reservation_answered(Time(1_000), ReservationId(*rid), Ok(()));
    }
    for (rid, id) in &rids {
        let ext = format!("{}", 10 + id);
        w.part_submitted(
            Time(1_000),
            ClusterId(0),
            JobId(*id),
            0,
            Ok(PartHandle {
                job: *id,
                attempt: 0,
                external: Some(ext.clone()),
            }),
        );
        running.push(ours(&ext, *id, 0, 3, *rid, RmJobState::Running));
        reservations.push(reservation(*rid, 1_000, 1_300, 3));
    }
    w.sync_remote(
        Time(1_002),
        ClusterId(0),
        Ok(snapshot(1_002, running.clone(), reservations.clone())),
    );
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Running);
    assert_eq!(w.jobs[&JobId(3)].state, JobState::Running);
    w.effects.clear();

    let mut high = job(2, "ann", 6, 120);
    high.priority = 3;
    high.submitted_at = 1_003;
    w.accept(Time(1_003), vec![high]);
    w.cycle(Time(1_003));
    let effects = std::mem::take(&mut w.effects);
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::Preempt { victims, .. } if victims.len() == 2)),
        "{effects:?}"
    );
    w.preemption_answered(
        Time(1_004),
        JobId(2),
        Err("stopping job 3: Invalid job id specified".into()),
    );
    w.requeued_anyway(Time(1_004), JobId(2), ClusterId(0), JobId(1));
    let effects = std::mem::take(&mut w.effects);
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::Cancel { part, .. }
            if part.job == 1 && part.external.as_deref() == Some("11"))),
        "{effects:?}"
    );
    assert!(!effects
        .iter()
        .any(|e| matches!(e, Effect::Cancel { part, .. } if part.job == 3)));
    let reason = w.jobs[&JobId(1)].reason.clone().unwrap_or_default();
    assert!(reason.contains("to run again"), "{reason}");
    assert!(!w.jobs[&JobId(2)].state.is_final());
    assert_ne!(w.jobs[&JobId(2)].state, JobState::Running);

    // Slurm shows the first one's Slurm job ended (cancelled), the second running.
    let mut gone = running[0].clone();
    gone.state = RmJobState::Ended(foresight_rm::Outcome {
        exit_code: None,
        signal: Some(15),
        timed_out: false,
        cancelled: true,
        started_at: 1_001,
        ended_at: 1_005,
        error: None,
    });
    w.sync_remote(
        Time(1_006),
        ClusterId(0),
        Ok(snapshot(
            1_006,
            vec![gone, running[1].clone()],
            reservations,
        )),
    );
    let j = &w.jobs[&JobId(1)];
    assert_eq!(j.attempt, 1, "{j:?}");
    assert!(
        matches!(
            j.state,
            JobState::Pending | JobState::Planned | JobState::Reserved
        ),
        "{j:?}"
    );
    assert_eq!(w.jobs[&JobId(3)].state, JobState::Running);
}

/// Our parts of the co-allocated low job 1 (cluster index, Slurm id, processors, reservation).
type LowParts = Vec<(ClusterId, String, u32, u64)>;

/// Slurm clusters c1 and c2 of 8 processors each; a level-0 job of 12 co-allocated over
/// both runs from 1 000 (its parts Slurm jobs 51 on c1 and 52 on c2, bound to their
/// reservations). Returns its parts.
fn co_allocated_low_running(w: &mut World) -> LowParts {
    for k in 0..2 {
        w.sync_remote(
            Time(1_000),
            ClusterId(k),
            Ok(snapshot(1_000, vec![], vec![])),
        );
    }
    w.accept(Time(1_000), vec![job(1, "ann", 12, 300)]);
    w.cycle(Time(1_000));
    let asks: Vec<(ClusterId, u64, u32)> = std::mem::take(&mut w.effects)
        .into_iter()
        .filter_map(|e| match e {
            Effect::Reserve { cluster, request } => Some((cluster, request.id, request.procs)),
            _ => None,
        })
        .collect();
    assert_eq!(asks.len(), 2, "co-allocated over both: {asks:?}");
    for (_, rid, _) in &asks {
        w.reservation_answered(Time(1_000), ReservationId(*rid), Ok(()));
    }
    let mut parts = Vec::new();
    for (k, rid, procs) in asks {
        let ext = format!("5{}", k.as_num() + 1);
        w.part_submitted(
            Time(1_000),
            k,
            JobId(1),
            0,
            Ok(PartHandle {
                job: 1,
                attempt: 0,
                external: Some(ext.clone()),
            }),
        );
        parts.push((k, ext, procs, rid));
    }
    for (k, ext, procs, rid) in &parts {
        w.sync_remote(
            Time(1_002),
            *k,
            Ok(snapshot(
                1_002,
                vec![ours(ext, 1, 0, *procs, *rid, RmJobState::Running)],
                vec![reservation(*rid, 1_000, 1_300, *procs)],
            )),
        );
    }
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Running);
    w.effects.clear();
    parts
}

/// A level-3 job of 8 arrives at 1 003 and fits nowhere now: the preemption asked stops
/// both parts of the co-allocated job 1, each on its cluster. Returns the cluster asked and
/// the parts to stop (cluster, Slurm id, how).
fn high_asks_co_allocated(w: &mut World) -> (ClusterId, Vec<(ClusterId, String, Preemption)>) {
    let mut high = job(2, "ann", 8, 120);
    high.priority = 3;
    high.co_allocate = false;
    high.submitted_at = 1_003;
    w.accept(Time(1_003), vec![high]);
    w.cycle(Time(1_003));
    let effects = std::mem::take(&mut w.effects);
    effects
        .iter()
        .find_map(|e| match e {
            Effect::Preempt {
                cluster,
                by,
                victims,
            } if *by == JobId(2) => Some((
                *cluster,
                victims
                    .iter()
                    .map(|(k, p, how)| (*k, p.external.clone().unwrap_or_default(), *how))
                    .collect(),
            )),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no preemption asked: {effects:?}"))
}

/// The co-allocated job 1 a victim: both of its parts are asked to be suspended, each on its
/// cluster; on yes it is suspended (both parts), the high job is reserved over the suspended
/// processors and has ended by 1 060, as every cluster's snapshot shows. Returns job 1's parts.
fn co_allocated_victim_suspended(w: &mut World) -> LowParts {
    let parts = co_allocated_low_running(w);
    let (k, stop) = high_asks_co_allocated(w);
    let mut want: Vec<(ClusterId, String, Preemption)> = parts
        .iter()
        .map(|(c, ext, _, _)| (*c, ext.clone(), Preemption::Suspend))
        .collect();
    want.sort_by_key(|(c, e, _)| (*c, e.clone()));
    let mut got = stop.clone();
    got.sort_by_key(|(c, e, _)| (*c, e.clone()));
    assert_eq!(got, want);
    let reason = w.jobs[&JobId(2)].reason.clone().unwrap_or_default();
    assert!(reason.contains("preempt job(s) 1"), "{reason}");

    w.preemption_answered(Time(1_004), JobId(2), Ok(()));
    let effects = std::mem::take(&mut w.effects);
    assert!(w.jobs[&JobId(1)].suspended);
    // Nothing of its is cancelled or released in Slurm: it is suspended in its reservations.
    assert!(
        !effects
            .iter()
            .any(|e| matches!(e, Effect::Release { .. } | Effect::Cancel { .. })),
        "{effects:?}"
    );
    let (high_rid, over) = asked(&effects).unwrap();
    assert!(over, "{effects:?}");
    w.reservation_answered(Time(1_004), ReservationId(high_rid), Ok(()));
    w.part_submitted(
        Time(1_004),
        k,
        JobId(2),
        0,
        Ok(PartHandle {
            job: 2,
            attempt: 0,
            external: Some("60".into()),
        }),
    );
    // Slurm shows both parts suspended, the high job running on cluster k, then ended.
    let done = foresight_rm::Outcome {
        exit_code: Some(0),
        signal: None,
        timed_out: false,
        cancelled: false,
        started_at: 1_005,
        ended_at: 1_050,
        error: None,
    };
    for (c, ext, procs, rid) in &parts {
        let mut jobs = vec![ours(ext, 1, 0, *procs, *rid, RmJobState::Suspended)];
        if *c == k {
            let mut h = ours("60", 2, 0, 8, high_rid, RmJobState::Ended(done.clone()));
            h.start = Some(1_005);
            jobs.push(h);
        }
        w.sync_remote(
            Time(1_060),
            *c,
            Ok(snapshot(
                1_060,
                jobs,
                vec![reservation(*rid, 1_000, 1_300, *procs)],
            )),
        );
    }
    assert_eq!(w.jobs[&JobId(2)].state, JobState::Completed);
    w.effects.clear();
    parts
}

/// The parts of job 1 (cluster, Slurm id) whose resumption, together, a cycle at `now` asks.
fn resume_asked(w: &mut World, now: i64) -> Vec<(ClusterId, String)> {
    w.cycle(Time(now));
    let effects = std::mem::take(&mut w.effects);
    // No part is resumed by itself meanwhile (the stray rule is for lost answers only).
    assert!(
        !effects.iter().any(|e| matches!(e, Effect::Control { .. })),
        "{effects:?}"
    );
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::ResumePart { job, parts } if *job == JobId(1) => Some(
                parts
                    .iter()
                    .map(|(c, p)| (*c, p.external.clone().unwrap_or_default()))
                    .collect::<Vec<_>>(),
            ),
            _ => None,
        })
        .flatten()
        .collect()
}

/// Slurm clusters c1 and c2, the co-allocated job 1 suspended on both for the high job,
/// which has ended: a cycle at 1 061 asks every part of job 1 to resume, together. Returns
/// the world and job 1's parts.
fn victim_resume_asked() -> (World, LowParts) {
    let mut w = world(vec![slurm("c1"), slurm("c2")]);
    let parts = co_allocated_victim_suspended(&mut w);
    let mut want: Vec<(ClusterId, String)> =
        parts.iter().map(|(c, e, _, _)| (*c, e.clone())).collect();
    want.sort();
    assert_eq!(resume_asked(&mut w, 1_061), want);
    (w, parts)
}

/// A job co-allocated over two Slurm clusters is a victim, stopped on both; once the high
/// job has ended, both parts are asked to resume together, and it runs again on the answer.
#[test]
fn a_co_allocated_victim_is_stopped_and_resumed_on_every_cluster() {
    let (mut w, _) = victim_resume_asked();
    w.resume_answered(Time(1_062), JobId(1), Ok(()));
    assert!(!w.jobs[&JobId(1)].suspended);
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Running);
}

/// The preemption of a co-allocated victim refused (c1 suspended its part, c2 refused; the
/// service resumed c1's): job 1 runs on with both parts, nothing of it is stopped or
/// cancelled, and the high job waits with the resource manager's words in its reason.
#[test]
fn a_refused_co_allocated_preemption_leaves_every_part_running() {
    let mut w = world(vec![slurm("c1"), slurm("c2")]);
    co_allocated_low_running(&mut w);
    let (_, stop) = high_asks_co_allocated(&mut w);
    assert_eq!(stop.len(), 2);
    w.preemption_answered(
        Time(1_004),
        JobId(2),
        Err("stopping job 1 on c2: Access/permission denied".into()),
    );
    let effects = std::mem::take(&mut w.effects);
    assert!(
        !effects.iter().any(|e| matches!(
            e,
            Effect::Cancel { .. } | Effect::Release { .. } | Effect::Control { .. }
        )),
        "{effects:?}"
    );
    assert!(!w.jobs[&JobId(1)].suspended);
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Running);
    let j = &w.jobs[&JobId(2)];
    assert_ne!(j.state, JobState::Running);
    let reason = j.reason.clone().unwrap_or_default();
    assert!(reason.contains("Access/permission denied"), "{reason}");
    assert!(reason.contains("on c2"), "{reason}");
}

/// The service over Slurm clusters c1 and c2 restarted at `at` from what `w` had stored.
fn restarted(w: &World, at: i64) -> World {
    super::tests::restarted(w, vec![slurm("c1"), slurm("c2")], at).0
}

/// A restart between ask and answer: Slurm had suspended both parts of the co-allocated
/// victim, the answer was never recorded (its record says running). The restarted service
/// resumes each part at its cluster's first snapshot.
#[test]
fn a_restart_between_ask_and_answer_resumes_every_part() {
    let mut w = world(vec![slurm("c1"), slurm("c2")]);
    let parts = co_allocated_low_running(&mut w);
    high_asks_co_allocated(&mut w);
    let mut w2 = restarted(&w, 1_010);
    for (k, ext, procs, rid) in &parts {
        w2.sync_remote(
            Time(1_011),
            *k,
            Ok(snapshot(
                1_011,
                vec![ours(ext, 1, 0, *procs, *rid, RmJobState::Suspended)],
                vec![reservation(*rid, 1_000, 1_300, *procs)],
            )),
        );
    }
    let mut resumed: Vec<(ClusterId, String)> = std::mem::take(&mut w2.effects)
        .into_iter()
        .filter_map(|e| match e {
            Effect::Control {
                cluster,
                part,
                stop: false,
            } if part.job == 1 => Some((cluster, part.external.unwrap_or_default())),
            _ => None,
        })
        .collect();
    resumed.sort();
    let want: Vec<(ClusterId, String)> = parts.iter().map(|(c, e, _, _)| (*c, e.clone())).collect();
    assert_eq!(resumed, want);
}

/// A restart between the ask to resume a co-allocated victim and the answer: Slurm resumed
/// part 51 on c1 but not yet part 52 on c2, and the record still says suspended. Reconciliation
/// suspends part 51 again at c1's first snapshot (the records count its processors free), asks
/// nothing of part 52, and the job is then resumed whole once there is room; it runs again.
#[test]
fn a_restart_between_resume_ask_and_answer_suspends_the_resumed_parts_again() {
    let (w, parts) = victim_resume_asked();
    let mut want: Vec<(ClusterId, String)> =
        parts.iter().map(|(c, e, _, _)| (*c, e.clone())).collect();
    want.sort();
    let mut w2 = restarted(&w, 1_062);
    assert!(w2.jobs[&JobId(1)].suspended);
    let sync = |w2: &mut World, at: i64, running: usize| {
        for (k, ext, procs, rid) in &parts {
            let state = if *k == ClusterId(running) {
                RmJobState::Running
            } else {
                RmJobState::Suspended
            };
            w2.sync_remote(
                Time(at),
                *k,
                Ok(snapshot(
                    at,
                    vec![ours(ext, 1, 0, *procs, *rid, state)],
                    vec![reservation(*rid, 1_000, 1_300, *procs)],
                )),
            );
        }
    };
    sync(&mut w2, 1_063, 0);
    let controls: Vec<(ClusterId, String, bool)> = std::mem::take(&mut w2.effects)
        .into_iter()
        .filter_map(|e| match e {
            Effect::Control {
                cluster,
                part,
                stop,
            } if part.job == 1 => Some((cluster, part.external.unwrap_or_default(), stop)),
            _ => None,
        })
        .collect();
    assert_eq!(controls, vec![(ClusterId(0), "51".to_string(), true)]);
    assert!(w2.jobs[&JobId(1)].suspended);

    // Slurm shows both suspended: there is room, so both are asked to resume together.
    sync(&mut w2, 1_064, usize::MAX);
    w2.effects.clear();
    assert_eq!(resume_asked(&mut w2, 1_065), want);
    w2.resume_answered(Time(1_066), JobId(1), Ok(()));
    assert!(!w2.jobs[&JobId(1)].suspended);
    assert_eq!(w2.jobs[&JobId(1)].state, JobState::Running);
}
