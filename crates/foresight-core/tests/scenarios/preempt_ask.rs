//! Absolute priorities on a cluster that schedules itself (Slurm), as stories on one such
//! cluster of 4 processors: the preemption is asked of it and answered; the waiting job is
//! reserved there only when the answer is yes; a refusal leaves the victims running; the
//! cluster lost between ask and answer loses nobody; resumption is asked and answered too;
//! local jobs are never candidates.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

use super::preempt_fixture::{broker_of, cluster, cycle, global, phase, preempted};
use foresight_core::broker::{Broker, BrokerAction, Phase, Preemption, WaitReason};
use foresight_core::scheduler::Domain;
use foresight_core::{ClusterId, Dur, Job, JobId, Time};

fn slurm_broker() -> Broker {
    broker_of(vec![slurm_cluster("s", true)])
}

/// Cluster `name` of 4 processors that schedules itself (`slurm`; else the broker schedules
/// it), reserving by the minute.
fn slurm_cluster(name: &str, slurm: bool) -> foresight_core::broker::GridCluster {
    let mut c = cluster(name, 4);
    c.self_scheduled = slurm;
    c.granularity = Dur(60);
    c
}

/// Answers yes to every reservation asked in `out`, then reports the job started at `t`.
fn reserve_and_start(b: &mut Broker, t: i64, out: &[BrokerAction]) -> Vec<BrokerAction> {
    let mut all = Vec::new();
    for a in out {
        if let BrokerAction::Ask { job, part } = a {
            let mut o = Vec::new();
            b.on_reservation_answered(Time(t), part.reservation, Ok(()), &mut o);
            assert!(
                o.iter()
                    .any(|x| matches!(x, BrokerAction::Reserved { job: j, .. } if j == job)),
                "{o:?}"
            );
            b.on_part_started(Time(t), *job);
            // The mirror shows it running, as the service's next snapshot does.
            let run = Job::new(*job, Time(t), part.procs, part.window.len());
            b.clusters[0]
                .sched
                .restore_running(Time(t), run, Time(t), Domain::Reservation(part.reservation))
                .unwrap();
            all.extend(o);
        }
    }
    all
}

/// Job `id`'s part ends at `t`: gone from the mirror too, as at the next snapshot.
fn end(b: &mut Broker, t: i64, id: u64) {
    let _ = b.clusters[0].sched.cancel(Time(t), JobId(id));
    let mut out = Vec::new();
    b.on_part_ended(Time(t), ClusterId(0), JobId(id), &mut out);
}

/// (job asking, cluster, victims and how) of each preemption asked.
type Asked = (u64, usize, Vec<(u64, Preemption)>);

fn asked(out: &[BrokerAction]) -> Vec<Asked> {
    out.iter()
        .filter_map(|a| match a {
            BrokerAction::PreemptAsked {
                by,
                cluster,
                victims,
            } => Some((
                by.0,
                cluster.as_num(),
                victims.iter().map(|(v, h)| (v.0, *h)).collect(),
            )),
            _ => None,
        })
        .collect()
}

fn resume_asked(out: &[BrokerAction]) -> Vec<u64> {
    out.iter()
        .filter_map(|a| match a {
            BrokerAction::ResumeAsked { job, .. } => Some(job.0),
            _ => None,
        })
        .collect()
}

fn reservation_asks(out: &[BrokerAction]) -> Vec<(u64, i64, i64)> {
    out.iter()
        .filter_map(|a| match a {
            BrokerAction::Ask { job, part } => {
                Some((job.0, part.window.start.secs(), part.window.end.secs()))
            }
            _ => None,
        })
        .collect()
}

fn running(b: &Broker, id: u64) -> bool {
    matches!(phase(b, id), Some(Phase::Running { .. }))
}

fn suspended(b: &Broker, id: u64) -> bool {
    matches!(phase(b, id), Some(Phase::Suspended { .. }))
}

/// A level-0 job fills the cluster from t=0 (reserved to 600); a level-3 job of 120 s
/// arrives at t=10. Returns the broker and the actions of the cycle at t=10.
fn low_running_high_arrives(requeue: bool) -> (Broker, Vec<BrokerAction>) {
    let mut b = slurm_broker();
    b.submit(Time(0), global(1, 0, 4, 600, requeue));
    let out = cycle(&mut b, 0);
    assert_eq!(reservation_asks(&out), vec![(1, 0, 600)]);
    reserve_and_start(&mut b, 0, &out);
    assert!(running(&b, 1));
    b.submit(Time(10), global(2, 3, 4, 120, false));
    let out = cycle(&mut b, 10);
    (b, out)
}

/// Asked, then answered yes: only then is the low job preempted and the high one reserved
/// at once; when the high one has ended, the low one's resumption is asked, and it holds
/// its processors again on the answer, for the rest of its run.
#[test]
fn an_accepted_preemption_reserves_the_high_job_then_the_low_one_resumes() {
    let (mut b, out) = low_running_high_arrives(false);
    assert_eq!(
        asked(&out),
        vec![(2, 0, vec![(1, Preemption::Suspend)])],
        "{out:?}"
    );
    // Nothing is preempted before the answer, and the high job is not planned meanwhile.
    assert!(preempted(&out).is_empty());
    assert!(reservation_asks(&out).is_empty());
    assert!(running(&b, 1));
    let out = cycle(&mut b, 11);
    assert!(asked(&out).is_empty(), "asked once: {out:?}");
    assert!(reservation_asks(&out).is_empty());

    let mut out = Vec::new();
    b.on_preemption_answered(Time(12), JobId(2), Ok(()), &mut out);
    assert_eq!(preempted(&out), vec![(1, 2, Preemption::Suspend)]);
    assert!(suspended(&b, 1));
    // Reserved at once, for its walltime in whole minutes.
    assert_eq!(reservation_asks(&out), vec![(2, 12, 132)]);
    reserve_and_start(&mut b, 12, &out);
    assert!(running(&b, 2));
    // While it runs, the low job is not asked to resume.
    assert!(resume_asked(&cycle(&mut b, 60)).is_empty());

    end(&mut b, 100, 2);
    let out = cycle(&mut b, 140);
    assert_eq!(resume_asked(&out), vec![1]);
    assert!(suspended(&b, 1), "suspended until the answer");
    assert!(resume_asked(&cycle(&mut b, 141)).is_empty(), "asked once");
    let mut out = Vec::new();
    b.on_resume_answered(Time(142), JobId(1), Ok(()), &mut out);
    // Stopped at 12 with 588 s left (to 600): in whole minutes, 600 s from 142.
    let resumed: Vec<(u64, i64)> = out
        .iter()
        .filter_map(|a| match a {
            BrokerAction::Resumed { job, end, .. } => Some((job.0, end.secs())),
            _ => None,
        })
        .collect();
    assert_eq!(resumed, vec![(1, 742)]);
    match &b.entry(JobId(1)).unwrap().phase {
        Phase::Running { suspended, .. } => assert_eq!(*suspended, Dur(130)),
        p => panic!("{p:?}"),
    }
}

/// A refusal (a Slurm error) leaves the victim running and the high job queued, with the
/// cluster's words in its reason, asked again only after the pause.
#[test]
fn a_refused_preemption_leaves_the_victims_running() {
    let (mut b, out) = low_running_high_arrives(false);
    assert_eq!(asked(&out).len(), 1);
    let mut out = Vec::new();
    b.on_preemption_answered(
        Time(12),
        JobId(2),
        Err("scontrol suspend 7: Access/permission denied".into()),
        &mut out,
    );
    assert!(preempted(&out).is_empty());
    assert!(reservation_asks(&out).is_empty());
    assert!(running(&b, 1));
    let e = b.entry(JobId(2)).unwrap();
    assert_eq!(e.phase, Phase::Queued);
    match &e.reason {
        Some(r @ WaitReason::PreemptionRefused { until, detail, .. }) => {
            assert_eq!(*until, Time(13));
            assert!(detail.contains("Access/permission denied"), "{detail}");
            assert!(detail.contains("job(s) 1"), "{detail}");
            assert!(r.to_string().contains("victims left running"), "{r}");
        }
        r => panic!("{r:?}"),
    }
    // Queued again: not asked before the pause is over, asked again after it.
    let out = cycle(&mut b, 12);
    assert!(asked(&out).is_empty(), "{out:?}");
    let out = cycle(&mut b, 13);
    assert_eq!(asked(&out).len(), 1, "{out:?}");
    // A second answer for the same ask changes nothing.
    let mut out = Vec::new();
    b.on_preemption_answered(Time(14), JobId(2), Ok(()), &mut out);
    let mut again = Vec::new();
    b.on_preemption_answered(Time(14), JobId(2), Ok(()), &mut again);
    assert!(again.is_empty(), "{again:?}");
}

/// The cluster goes down between ask and answer: the answer still counts for the victims
/// (suspended there), and the high job is queued again rather than reserved on a cluster
/// the planner cannot use. Back up, the high job goes first, then the low one resumes.
#[test]
fn a_cluster_lost_between_ask_and_answer_loses_nobody() {
    let (mut b, out) = low_running_high_arrives(false);
    assert_eq!(asked(&out).len(), 1);
    let mut out = Vec::new();
    b.on_cluster_down(Time(11), ClusterId(0), &mut out);
    b.on_preemption_answered(Time(12), JobId(2), Ok(()), &mut out);
    assert_eq!(preempted(&out), vec![(1, 2, Preemption::Suspend)]);
    assert!(reservation_asks(&out).is_empty());
    assert!(suspended(&b, 1));
    let e = b.entry(JobId(2)).unwrap();
    assert_eq!(e.phase, Phase::Queued);
    assert_eq!(e.reason, Some(WaitReason::LostCluster(ClusterId(0))));
    assert!(b.queued().any(|e| e.job.id == JobId(2)));
    // Nothing is asked of a cluster that is down.
    let out = cycle(&mut b, 20);
    assert!(resume_asked(&out).is_empty() && reservation_asks(&out).is_empty());
    b.on_cluster_up(Time(30), ClusterId(0));
    let out = cycle(&mut b, 30);
    assert!(
        resume_asked(&out).is_empty(),
        "the higher level first: {out:?}"
    );
    assert_eq!(reservation_asks(&out), vec![(2, 30, 150)]);
    reserve_and_start(&mut b, 30, &out);
    end(&mut b, 150, 2);
    assert_eq!(resume_asked(&cycle(&mut b, 151)), vec![1]);
}

/// A victim that says it may be requeued is asked to be requeued; once its part has ended
/// it is queued again as a new run.
#[test]
fn a_requeueable_victim_is_requeued() {
    let (mut b, out) = low_running_high_arrives(true);
    assert_eq!(asked(&out), vec![(2, 0, vec![(1, Preemption::Requeue)])]);
    let mut out = Vec::new();
    b.on_preemption_answered(Time(12), JobId(2), Ok(()), &mut out);
    assert_eq!(preempted(&out), vec![(1, 2, Preemption::Requeue)]);
    assert_eq!(reservation_asks(&out), vec![(2, 12, 132)]);
    end(&mut b, 13, 1);
    let e = b.entry(JobId(1)).unwrap();
    assert_eq!(e.phase, Phase::Queued);
}

/// A refused resumption leaves the job suspended, asked again after the pause.
#[test]
fn a_refused_resumption_is_asked_again_later() {
    let (mut b, _) = low_running_high_arrives(false);
    let mut out = Vec::new();
    b.on_preemption_answered(Time(12), JobId(2), Ok(()), &mut out);
    reserve_and_start(&mut b, 12, &out);
    end(&mut b, 100, 2);
    assert_eq!(resume_asked(&cycle(&mut b, 140)), vec![1]);
    let mut out = Vec::new();
    b.on_resume_answered(Time(141), JobId(1), Err("Slurm down".into()), &mut out);
    assert!(out.is_empty());
    assert!(suspended(&b, 1));
    assert!(resume_asked(&cycle(&mut b, 141)).is_empty(), "paused");
    assert_eq!(resume_asked(&cycle(&mut b, 142)), vec![1]);
}

/// Local work of the cluster (its own users' jobs) is never a candidate, nor a global job
/// of the same level.
#[test]
fn local_jobs_and_equal_levels_are_never_asked_for() {
    let mut b = slurm_broker();
    let mut out = Vec::new();
    b.submit_local(
        Time(0),
        ClusterId(0),
        Job::new(JobId(100), Time(0), 4, Dur(600)),
        &mut out,
    )
    .unwrap();
    b.submit(Time(10), global(2, 3, 4, 120, false));
    let out = cycle(&mut b, 10);
    assert!(asked(&out).is_empty(), "{out:?}");

    let mut b = slurm_broker();
    b.submit(Time(0), global(1, 3, 4, 600, false));
    let out = cycle(&mut b, 0);
    reserve_and_start(&mut b, 0, &out);
    b.submit(Time(10), global(2, 3, 4, 120, false));
    let out = cycle(&mut b, 10);
    assert!(asked(&out).is_empty(), "{out:?}");
}

/// Two requeueable victims (the one started last first); the cluster requeues job 3, then
/// fails on job 1: the preemption is refused (the high job waits, job 1 runs on), but job 3,
/// whose run Slurm has killed, is preempted alone and queued again as a new run once its
/// part has ended: nothing is lost.
#[test]
fn a_requeue_done_before_a_refusal_is_recorded() {
    let mut b = slurm_broker();
    b.submit(Time(0), global(1, 0, 2, 600, true));
    b.submit(Time(0), global(3, 0, 2, 600, true));
    let out = cycle(&mut b, 0);
    reserve_and_start(&mut b, 0, &out);
    assert!(running(&b, 1) && running(&b, 3));
    b.submit(Time(10), global(2, 3, 4, 120, false));
    let out = cycle(&mut b, 10);
    assert_eq!(
        asked(&out),
        vec![(
            2,
            0,
            vec![(3, Preemption::Requeue), (1, Preemption::Requeue)]
        )],
        "{out:?}"
    );
    let mut out = Vec::new();
    b.on_preemption_answered(
        Time(12),
        JobId(2),
        Err("stopping job 1: scontrol requeue 7: Invalid job id".into()),
        &mut out,
    );
    b.on_requeued_anyway(Time(12), JobId(2), ClusterId(0), JobId(3), &mut out);
    assert_eq!(preempted(&out), vec![(3, 2, Preemption::Requeue)]);
    assert!(reservation_asks(&out).is_empty(), "{out:?}");
    assert!(running(&b, 1));
    assert_eq!(b.entry(JobId(2)).unwrap().phase, Phase::Queued);
    // Told twice, it changes nothing more.
    let mut again = Vec::new();
    b.on_requeued_anyway(Time(12), JobId(2), ClusterId(0), JobId(3), &mut again);
    assert!(preempted(&again).is_empty(), "{again:?}");
    end(&mut b, 13, 3);
    assert_eq!(b.entry(JobId(3)).unwrap().phase, Phase::Queued);
    assert!(b.queued().any(|e| e.job.id == JobId(3)));
}

/// Two clusters of 4 processors, the first scheduling itself (Slurm); the second too, or
/// one the broker schedules itself (`second_slurm` false: a local executor's).
fn two_cluster_broker(second_slurm: bool) -> Broker {
    broker_of(vec![
        slurm_cluster("s1", true),
        slurm_cluster("s2", second_slurm),
    ])
}

/// Answers yes to every reservation asked in `out` (on whichever cluster), reports the jobs
/// reserved started at `t`, and shows their parts running in the mirrors of clusters that
/// schedule themselves, as the service's next snapshots do. The parts of each job started.
fn reserve_and_start_anywhere(
    b: &mut Broker,
    t: i64,
    out: &[BrokerAction],
) -> Vec<(u64, usize, u32)> {
    let mut started = Vec::new();
    let mut reserved = Vec::new();
    for a in out {
        if let BrokerAction::Ask { part, .. } = a {
            b.on_reservation_answered(Time(t), part.reservation, Ok(()), &mut reserved);
        }
    }
    for a in out.iter().chain(&reserved) {
        if let BrokerAction::Reserved { job, parts, .. } = a {
            b.on_part_started(Time(t), *job);
            for p in parts {
                if b.clusters[p.cluster].self_scheduled {
                    let run = Job::new(*job, Time(t), p.procs, p.window.len());
                    b.clusters[p.cluster]
                        .sched
                        .restore_running(Time(t), run, Time(t), Domain::Reservation(p.reservation))
                        .unwrap();
                }
                started.push((job.0, p.cluster.as_num(), p.procs));
            }
        }
    }
    started
}

/// A level-0 job co-allocated over both clusters (6 processors: 4 + 2, or 2 + 4) runs from
/// t=0; a level-3 job of 4 arrives at t=10 and fits nowhere now. Returns the broker, the
/// low job's parts (cluster, processors) and the actions of the cycle at t=10.
fn co_allocated_low_high_arrives(
    second_slurm: bool,
) -> (Broker, Vec<(usize, u32)>, Vec<BrokerAction>) {
    let mut b = two_cluster_broker(second_slurm);
    let mut low = global(1, 0, 6, 600, false);
    low.co_allocate = true;
    b.submit(Time(0), low);
    let out = cycle(&mut b, 0);
    let started = reserve_and_start_anywhere(&mut b, 0, &out);
    let parts: Vec<(usize, u32)> = started.iter().map(|&(_, k, n)| (k, n)).collect();
    assert_eq!(parts.len(), 2, "co-allocated over both: {out:?}");
    assert!(running(&b, 1));
    b.submit(Time(10), global(2, 3, 4, 120, false));
    let out = cycle(&mut b, 10);
    (b, parts, out)
}

/// A co-allocated job over two Slurm clusters is a victim like any other: asked to stop
/// (every part of it, the service stops each on its cluster), and on yes suspended with
/// both parts; the high job is reserved at once. When the high job has ended and both
/// clusters have room, it resumes with both parts together.
#[test]
fn a_job_co_allocated_over_two_slurm_clusters_is_preempted_whole_and_resumes_whole() {
    let (mut b, parts, out) = co_allocated_low_high_arrives(true);
    let asks = asked(&out);
    assert_eq!(asks.len(), 1, "{out:?}");
    assert_eq!(asks[0].0, 2);
    assert_eq!(asks[0].2, vec![(1, Preemption::Suspend)]);
    let k = asks[0].1;
    let mut out = Vec::new();
    b.on_preemption_answered(Time(12), JobId(2), Ok(()), &mut out);
    assert_eq!(preempted(&out), vec![(1, 2, Preemption::Suspend)]);
    match &b.entry(JobId(1)).unwrap().phase {
        Phase::Suspended { parts: p, .. } => {
            let held: Vec<(usize, u32)> = p.iter().map(|p| (p.cluster.as_num(), p.procs)).collect();
            assert_eq!(held, parts, "every part suspended");
        }
        p => panic!("{p:?}"),
    }
    let reserved: Vec<(u64, usize)> = out
        .iter()
        .filter_map(|a| match a {
            BrokerAction::Ask { job, part } => Some((job.0, part.cluster.as_num())),
            _ => None,
        })
        .collect();
    assert_eq!(reserved, vec![(2, k)]);
    // The mirrors lose the suspended parts, as the service's snapshots show them.
    for &(c, _) in &parts {
        let _ = b.clusters[c].sched.cancel(Time(12), JobId(1));
    }
    let started = reserve_and_start_anywhere(&mut b, 12, &out);
    assert_eq!(started, vec![(2, k, 4)]);
    assert!(
        resume_asked(&cycle(&mut b, 60)).is_empty(),
        "no room on {k}"
    );

    let _ = b.clusters[k].sched.cancel(Time(100), JobId(2));
    let mut out = Vec::new();
    b.on_part_ended(Time(100), ClusterId(k), JobId(2), &mut out);
    let out = cycle(&mut b, 140);
    assert_eq!(resume_asked(&out), vec![1], "{out:?}");
    let mut out = Vec::new();
    b.on_resume_answered(Time(141), JobId(1), Ok(()), &mut out);
    let resumed: Vec<Vec<(usize, u32)>> = out
        .iter()
        .filter_map(|a| match a {
            BrokerAction::Resumed { parts, .. } => Some(
                parts
                    .iter()
                    .map(|p| (p.cluster.as_num(), p.procs))
                    .collect(),
            ),
            _ => None,
        })
        .collect();
    assert_eq!(resumed, vec![parts]);
    assert!(running(&b, 1));
}

/// Co-allocated over a Slurm cluster and one the broker schedules itself: asked of the
/// Slurm cluster; on yes every part is preempted (the service pauses the local one through
/// its executor), and the processors of the local part are free meanwhile.
#[test]
fn a_job_co_allocated_over_slurm_and_a_local_cluster_is_preempted_whole() {
    let (mut b, parts, out) = co_allocated_low_high_arrives(false);
    let asks = asked(&out);
    assert_eq!(asks.len(), 1, "{out:?}");
    assert_eq!(asks[0].1, 0, "asked of the Slurm cluster");
    assert_eq!(asks[0].2, vec![(1, Preemption::Suspend)]);
    let mut out = Vec::new();
    b.on_preemption_answered(Time(12), JobId(2), Ok(()), &mut out);
    let stopped: Vec<Vec<usize>> = out
        .iter()
        .filter_map(|a| match a {
            BrokerAction::Preempted { parts, .. } => {
                Some(parts.iter().map(|p| p.cluster.as_num()).collect())
            }
            _ => None,
        })
        .collect();
    assert_eq!(stopped, vec![vec![parts[0].0, parts[1].0]]);
    assert!(suspended(&b, 1));
    assert_eq!(b.clusters[1].sched.idle_at(Time(12)), 4);
}

/// The refusal of a preemption whose victim is co-allocated leaves it running with every
/// part, and the high job waits with the cluster's words.
#[test]
fn a_refused_co_allocated_preemption_leaves_every_part_running() {
    let (mut b, _, out) = co_allocated_low_high_arrives(true);
    assert_eq!(asked(&out).len(), 1, "{out:?}");
    let mut out = Vec::new();
    b.on_preemption_answered(
        Time(12),
        JobId(2),
        Err("stopping job 1 on s2: Access/permission denied".into()),
        &mut out,
    );
    assert!(preempted(&out).is_empty());
    assert!(running(&b, 1));
    assert_eq!(b.entry(JobId(2)).unwrap().phase, Phase::Queued);
}
