use super::*;
use crate::ids::ClusterId;
use crate::policy::Policy;
use crate::scheduler::LocalScheduler;
use crate::select::Criterion;

fn cluster(name: &str, procs: u32) -> GridCluster {
    GridCluster::new(
        name,
        processors_of(name, &[SpeedGroup { procs, speed: 1.0 }]),
        LocalScheduler::new(procs, Policy::easy()),
    )
}

fn planner(lead: i64) -> PlannerConfig {
    PlannerConfig {
        horizon: Dur(7 * 86_400),
        lead_time: Dur(lead),
        plan_depth: 64,
    }
}

fn global(id: u64, procs: u32, walltime: i64) -> GlobalJob {
    GlobalJob {
        id: JobId(id),
        user: UserId(1),
        submit: Time(0),
        procs,
        walltime: Dur(walltime),
        max_price: 1.0,
        input_mb: 0.0,
        home: None,
        co_allocate: true,
        criterion: Criterion::EarliestFinish,
        priority: 0,
        requeue: false,
        begin: None,
        requires: Default::default(),
        licences: Default::default(),
        prediction: None,
    }
}

/// The parts asked of clusters that schedule themselves, from a run's actions.
fn asks(out: &[BrokerAction]) -> Vec<ReservedPart> {
    out.iter()
        .filter_map(|a| match a {
            BrokerAction::Ask { part, .. } => Some(part.clone()),
            _ => None,
        })
        .collect()
}

/// Starts of each job, from a run's actions.
fn starts(actions: &[BrokerAction]) -> Vec<(JobId, usize)> {
    actions
        .iter()
        .filter_map(|a| match a {
            BrokerAction::Start { job, cluster, .. } => Some((*job, cluster.as_num())),
            _ => None,
        })
        .collect()
}

/// The issue's first observation: 8 one-processor jobs of walltime 60 s that run 1 s on two
/// processors. Without work conservation jobs 3–4 wait for their reservation at +60 s.
/// With it, each pair starts the second the previous pair ends.
#[test]
fn reserved_jobs_start_as_soon_as_processors_free_up() {
    let mut b = Broker::new(vec![cluster("c", 2)], planner(60), 1);
    let mut out = Vec::new();
    for id in 1..=8 {
        b.submit(Time(0), global(id, 1, 60));
    }
    b.on_cycle(Time(0), &mut out);
    let mut running: Vec<JobId> = starts(&out).into_iter().map(|(j, _)| j).collect();
    assert_eq!(running, vec![JobId(1), JobId(2)]);
    let mut now = Time(0);
    let mut started_at = BTreeMap::new();
    for j in &running {
        started_at.insert(*j, now);
    }
    let mut ended = 0;
    while ended < 8 {
        now += Dur(1);
        let mut out = Vec::new();
        for j in std::mem::take(&mut running) {
            b.on_part_ended(now, ClusterId(0), j, &mut out);
            ended += 1;
        }
        b.on_cycle(now, &mut out);
        for (j, _) in starts(&out) {
            started_at.insert(j, now);
            running.push(j);
        }
        assert!(now < Time(10), "still running at {now}: {started_at:?}");
    }
    assert_eq!(started_at[&JobId(3)], Time(1));
    assert_eq!(started_at[&JobId(8)], Time(3));
    assert!(b.stats().moves >= 2);
}

/// A job longer than the configured horizon is planned on a horizon grown for it, and
/// starts at once on an idle grid.
#[test]
fn a_job_longer_than_the_horizon_starts_on_an_idle_grid() {
    let mut b = Broker::new(vec![cluster("c", 4)], planner(60), 1);
    b.submit(Time(0), global(1, 2, 8 * 86_400));
    let mut out = Vec::new();
    b.on_cycle(Time(0), &mut out);
    assert_eq!(starts(&out), vec![(JobId(1), 0)]);
}

/// A reserved co-allocated job moves earlier on both clusters together, and only when
/// both have the processors.
#[test]
fn co_allocated_parts_move_together() {
    let mut b = Broker::new(vec![cluster("a", 2), cluster("b", 2)], planner(600), 1);
    let mut out = Vec::new();
    // Local jobs hold a (until 100) and b (until 50).
    b.submit_local(
        Time(0),
        ClusterId(0),
        Job::new(JobId(100), Time(0), 2, Dur(100)),
        &mut out,
    )
    .unwrap();
    b.submit_local(
        Time(0),
        ClusterId(1),
        Job::new(JobId(101), Time(0), 2, Dur(50)),
        &mut out,
    )
    .unwrap();
    b.submit(Time(0), global(1, 4, 30));
    b.on_cycle(Time(0), &mut out);
    assert!(matches!(
        b.entry(JobId(1)).unwrap().phase,
        Phase::Reserved {
            start: Time(100),
            ..
        }
    ));
    // b frees early: a is still busy, so nothing moves.
    let mut out = Vec::new();
    b.on_part_ended(Time(10), ClusterId(1), JobId(101), &mut out);
    assert!(starts(&out).is_empty(), "{out:?}");
    assert!(matches!(
        b.entry(JobId(1)).unwrap().phase,
        Phase::Reserved {
            start: Time(100),
            ..
        }
    ));
    // a frees early too: both parts start now.
    let mut out = Vec::new();
    b.on_part_ended(Time(20), ClusterId(0), JobId(100), &mut out);
    let mut s = starts(&out);
    s.sort();
    assert_eq!(s, vec![(JobId(1), 0), (JobId(1), 1)]);
    assert!(out.iter().any(|a| matches!(
        a,
        BrokerAction::Moved {
            start: Time(20),
            end: Time(50),
            ..
        }
    )));
}

/// A move that would make a queued local job's forecast start later is not made.
#[test]
fn a_move_never_delays_a_local_job() {
    let mut b = Broker::new(vec![cluster("c", 4)], planner(600), 1);
    let mut out = Vec::new();
    // 4 processors busy until 100 (two jobs of 2).
    b.submit_local(
        Time(0),
        ClusterId(0),
        Job::new(JobId(100), Time(0), 2, Dur(100)),
        &mut out,
    )
    .unwrap();
    b.submit_local(
        Time(0),
        ClusterId(0),
        Job::new(JobId(101), Time(0), 2, Dur(100)),
        &mut out,
    )
    .unwrap();
    // The global job is reserved at 100 on 2 processors for 100 s.
    b.submit(Time(0), global(1, 2, 100));
    b.on_cycle(Time(0), &mut out);
    assert!(matches!(
        b.entry(JobId(1)).unwrap().phase,
        Phase::Reserved {
            start: Time(100),
            ..
        }
    ));
    // A local job of 4 processors queues: its forecast start is 200 (after the global job).
    b.submit_local(
        Time(1),
        ClusterId(0),
        Job::new(JobId(102), Time(1), 4, Dur(50)),
        &mut out,
    )
    .unwrap();
    let before =
        super::compress::tests_support::local_start(&b.clusters[0].sched, Time(1), JobId(102));
    // Job 100 ends early: moving the global job to 10 would end it at 110, before 200 —
    // allowed; its local neighbour is not delayed.
    let mut out = Vec::new();
    b.on_part_ended(Time(10), ClusterId(0), JobId(100), &mut out);
    let after =
        super::compress::tests_support::local_start(&b.clusters[0].sched, Time(10), JobId(102));
    assert!(
        after <= before,
        "local job moved from {before:?} to {after:?}"
    );
}

/// A planned cost above the budget keeps the job queued, with the reason, until the budget
/// grows.
#[test]
fn over_budget_waits_and_resumes_when_the_budget_grows() {
    let mut b = Broker::new(vec![cluster("c", 2)], planner(60), 1);
    b.set_budget(UserId(1), Some(10.0));
    b.submit(Time(0), global(1, 1, 60));
    let mut out = Vec::new();
    b.on_cycle(Time(0), &mut out);
    assert!(out.iter().any(|a| matches!(
        a,
        BrokerAction::Waiting {
            reason: WaitReason::OverBudget { .. },
            ..
        }
    )));
    b.set_budget(UserId(1), Some(100.0));
    let mut out = Vec::new();
    b.on_cycle(Time(1), &mut out);
    assert_eq!(starts(&out), vec![(JobId(1), 0)]);
    assert_eq!(b.budget(UserId(1)), Some(40.0));
    // It ends after 30 of its 60 s: half the charge comes back.
    let mut out = Vec::new();
    b.on_part_ended(Time(31), ClusterId(0), JobId(1), &mut out);
    assert_eq!(b.budget(UserId(1)), Some(70.0));
    assert!(b.entry(JobId(1)).is_none());
}

/// A prepaid job (its hold taken from its user's budget before it came here) starts however
/// little the user has left; its charges are still reported, at their full amounts, but
/// leave the budget here alone; it is forgotten as it ends.
#[test]
fn a_prepaid_job_never_waits_for_budget_and_its_charges_leave_the_budget_alone() {
    let mut b = Broker::new(vec![cluster("c", 2)], planner(60), 1);
    b.set_budget(UserId(1), Some(10.0));
    b.submit(Time(0), global(1, 1, 60));
    b.set_prepaid(JobId(1));
    assert!(b.is_prepaid(JobId(1)));
    let mut out = Vec::new();
    b.on_cycle(Time(0), &mut out);
    assert_eq!(starts(&out), vec![(JobId(1), 0)]);
    let charges = |out: &[BrokerAction]| -> Vec<f64> {
        out.iter()
            .filter_map(|a| match a {
                BrokerAction::Charge { amount, .. } => Some(*amount),
                _ => None,
            })
            .collect()
    };
    // 1 processor × 60 s × 1.0, reported; the budget stays 10.
    assert_eq!(charges(&out), vec![60.0]);
    assert_eq!(b.budget(UserId(1)), Some(10.0));
    let mut out = Vec::new();
    b.on_part_ended(Time(30), ClusterId(0), JobId(1), &mut out);
    assert_eq!(charges(&out), vec![-30.0]);
    assert_eq!(b.budget(UserId(1)), Some(10.0));
    assert!(b.entry(JobId(1)).is_none());
    assert!(!b.is_prepaid(JobId(1)));
    // The same job not prepaid waits: 60 > 10.
    b.submit(Time(30), global(2, 1, 60));
    let mut out = Vec::new();
    b.on_cycle(Time(30), &mut out);
    assert!(starts(&out).is_empty(), "{out:?}");
    assert!(out.iter().any(|a| matches!(
        a,
        BrokerAction::Waiting {
            reason: WaitReason::OverBudget { .. },
            ..
        }
    )));
}

/// Phase one on a cluster that schedules itself: the job is reserved only when it answers;
/// a refusal releases every part and pauses the job, doubling per refusal.
#[test]
fn two_phase_waits_for_every_answer_and_backs_off_on_refusal() {
    let mut remote = cluster("r", 2);
    remote.self_scheduled = true;
    remote.granularity = Dur(60);
    let mut b = Broker::new(vec![cluster("c", 2), remote], planner(600), 1);
    b.submit(Time(0), global(1, 4, 30));
    let mut out = Vec::new();
    b.on_cycle(Time(0), &mut out);
    let asked: Vec<ReservedPart> = asks(&out);
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].window.len(), Dur(60));
    assert!(starts(&out).is_empty());
    let mut out = Vec::new();
    b.on_reservation_answered(Time(1), asked[0].reservation, Err("busy".into()), &mut out);
    assert_eq!(
        out.iter()
            .filter(|a| matches!(a, BrokerAction::ReservationEnded { .. }))
            .count(),
        2
    );
    let until = match &b.entry(JobId(1)).unwrap().reason {
        Some(WaitReason::ReservationRefused { until, .. }) => *until,
        r => panic!("{r:?}"),
    };
    assert_eq!(until, Time(2));
    // Not planned before the pause is over.
    let mut out = Vec::new();
    b.on_cycle(Time(1), &mut out);
    assert!(!out.iter().any(|a| matches!(a, BrokerAction::Ask { .. })));
    b.on_cycle(Time(2), &mut out);
    let part = out
        .iter()
        .find_map(|a| match a {
            BrokerAction::Ask { part, .. } => Some(part.clone()),
            _ => None,
        })
        .expect("asked again");
    let mut out = Vec::new();
    b.on_reservation_answered(Time(3), part.reservation, Ok(()), &mut out);
    assert!(out
        .iter()
        .any(|a| matches!(a, BrokerAction::Reserved { .. })));
}

/// A part that a cluster scheduling itself started a second late (its site took the command
/// after the window opened) is charged on the window reserved: 30 s used of 60 reserved is
/// half the cost, not 30 of the 59 left after the delay.
#[test]
fn a_part_started_late_is_charged_on_the_window_it_reserved() {
    let mut remote = cluster("r", 2);
    remote.self_scheduled = true;
    remote.granularity = Dur(60);
    let mut b = Broker::new(vec![remote], planner(600), 1);
    b.submit(Time(0), global(1, 2, 60));
    let mut out = Vec::new();
    b.on_cycle(Time(0), &mut out);
    let asked = asks(&out);
    assert_eq!(asked.len(), 1, "{out:?}");
    let window = asked[0].window;
    assert_eq!(window.len(), Dur(60));
    b.on_reservation_answered(Time(0), asked[0].reservation, Ok(()), &mut out);
    let charged = |out: &[BrokerAction]| -> f64 {
        out.iter()
            .filter_map(|a| match a {
                BrokerAction::Charge { amount, .. } => Some(*amount),
                _ => None,
            })
            .sum()
    };
    let cost = charged(&out);
    assert!(cost > 0.0, "{out:?}");
    b.on_part_started(window.start + Dur(1), JobId(1));
    let mut ended = Vec::new();
    b.on_part_ended(window.start + Dur(31), ClusterId(0), JobId(1), &mut ended);
    assert_eq!(cost + charged(&ended), cost / 2.0, "{ended:?}");
}

/// The broker as the same submissions leave it: two clusters, jobs that fit at once, jobs
/// that are reserved later and one planned beyond the lead time.
fn busy_broker() -> Broker {
    let mut b = Broker::new(vec![cluster("a", 4), cluster("b", 2)], planner(60), 1);
    for (id, procs, walltime) in [(1, 4, 100), (2, 2, 30), (3, 3, 50), (4, 5, 20), (5, 1, 500)] {
        b.submit(Time(0), global(id, procs, walltime));
    }
    b
}

/// A cycle split in two — begin, plan on the copy, finish — decides exactly what one
/// `on_cycle` decides, cycle after cycle.
#[test]
fn a_split_cycle_decides_as_one_cycle() {
    let (mut whole, mut split) = (busy_broker(), busy_broker());
    for now in [0, 30, 100, 150] {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        whole.on_cycle(Time(now), &mut a);
        let plan = split.begin_cycle(Time(now), &mut b);
        let decisions = plan.decide();
        split.finish_cycle(plan, decisions, &mut b);
        assert_eq!(a, b, "at {now}");
        let phases = |x: &Broker| x.entries().map(|e| e.phase.clone()).collect::<Vec<_>>();
        assert_eq!(phases(&whole), phases(&split), "at {now}");
    }
}

/// Decisions applied a slice at a time, with nothing in between, decide as the whole list
/// at once; a job withdrawn between two slices gets nothing from the later ones.
#[test]
fn decisions_applied_in_slices_decide_as_at_once() {
    let (mut whole, mut sliced) = (busy_broker(), busy_broker());
    for now in [0, 30, 100, 150] {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        whole.on_cycle(Time(now), &mut a);
        let plan = sliced.begin_cycle(Time(now), &mut b);
        let decisions = plan.decide();
        for slice in decisions.chunks(1) {
            sliced.apply_decisions(&plan, slice.to_vec(), &mut b);
        }
        sliced.close_cycle(plan, &mut b);
        assert_eq!(a, b, "at {now}");
        let phases = |x: &Broker| x.entries().map(|e| e.phase.clone()).collect::<Vec<_>>();
        assert_eq!(phases(&whole), phases(&sliced), "at {now}");
    }

    let mut b = busy_broker();
    let mut out = Vec::new();
    let plan = b.begin_cycle(Time(0), &mut out);
    let decisions = plan.decide();
    let last = decisions.last().expect("a busy grid plans something").job();
    let (first, rest) = decisions.split_at(decisions.len() - 1);
    b.apply_decisions(&plan, first.to_vec(), &mut out);
    let mut meanwhile = Vec::new();
    assert!(b.withdraw(Time(0), last, &mut meanwhile));
    let mut after = Vec::new();
    b.apply_decisions(&plan, rest.to_vec(), &mut after);
    b.close_cycle(plan, &mut after);
    assert!(
        after.iter().all(|a| !matches!(a,
        BrokerAction::Start { job, .. } | BrokerAction::Planned { job, .. } if *job == last)),
        "{after:?}"
    );
    assert!(b.entry(last).is_none());
}

/// What happens while a cycle plans off the lock wins over the plan: a job withdrawn
/// meanwhile gets nothing, and nothing is placed on a cluster that went down meanwhile.
#[test]
fn events_during_planning_win_over_the_plan() {
    let mut b = busy_broker();
    let mut out = Vec::new();
    let plan = b.begin_cycle(Time(0), &mut out);
    let decisions = plan.decide();
    assert!(!decisions.is_empty());
    let mut meanwhile = Vec::new();
    assert!(b.withdraw(Time(0), JobId(1), &mut meanwhile));
    b.on_cluster_down(Time(0), ClusterId(1), &mut meanwhile);
    let mut out = Vec::new();
    b.finish_cycle(plan, decisions, &mut out);
    for a in &out {
        match a {
            BrokerAction::Start { job, cluster, .. } => {
                assert_ne!(*job, JobId(1), "{out:?}");
                assert_ne!(*cluster, ClusterId(1), "{out:?}");
            }
            BrokerAction::Planned { job, .. } => assert_ne!(*job, JobId(1), "{out:?}"),
            _ => {}
        }
    }
    assert!(b.entry(JobId(1)).is_none());
    for e in b.entries() {
        if let Phase::Reserving { parts, .. } | Phase::Reserved { parts, .. } = &e.phase {
            assert!(parts.iter().all(|p| p.cluster != ClusterId(1)), "{e:?}");
        }
    }
    // The next cycle plans the rest on cluster a alone.
    let mut out = Vec::new();
    b.on_cycle(Time(1), &mut out);
    assert!(starts(&out).iter().all(|&(_, k)| k == 0), "{out:?}");
}

/// A mirror of a cluster that schedules itself: `procs` processors, a foreign job running
/// until `busy_until` (if any) and the given reservations of ours.
fn mirror(procs: u32, busy_until: Option<i64>, ours: &[ReservedPart]) -> LocalScheduler {
    let mut s = LocalScheduler::new(procs, Policy::easy());
    if let Some(end) = busy_until {
        let job = Job::new(JobId(1 << 62), Time(0), procs, Dur(end));
        s.restore_running(Time(0), job, Time(0), crate::scheduler::Domain::Pool)
            .unwrap();
    }
    for p in ours {
        s.add_reservation(AdminReservation {
            id: p.reservation,
            procs: p.procs,
            window: p.window,
            acl: Acl::nobody(),
        })
        .unwrap();
    }
    s
}

fn moves_asked(out: &[BrokerAction]) -> Vec<(JobId, Time, Vec<ReservedPart>)> {
    out.iter()
        .filter_map(|a| match a {
            BrokerAction::MoveAsked {
                job, start, parts, ..
            } => Some((*job, *start, parts.clone())),
            _ => None,
        })
        .collect()
}

/// On clusters that schedule themselves the move is asked, all parts at once, and made only
/// when they answer yes; a refusal keeps the old reservation and is not asked again for
/// `MOVE_RETRY_SECS`.
#[test]
fn remote_moves_are_asked_and_applied_only_when_answered() {
    let mut clusters = Vec::new();
    for name in ["r1", "r2"] {
        let mut c = cluster(name, 2);
        c.self_scheduled = true;
        c.sched = mirror(2, Some(100), &[]);
        clusters.push(c);
    }
    let mut b = Broker::new(clusters, planner(600), 1);
    b.submit(Time(0), global(1, 4, 30));
    let mut out = Vec::new();
    b.on_cycle(Time(0), &mut out);
    let asked: Vec<ReservedPart> = asks(&out);
    assert_eq!(asked.len(), 2, "{out:?}");
    assert!(asked.iter().all(|p| p.window.start == Time(100)));
    for p in &asked {
        b.on_reservation_answered(Time(1), p.reservation, Ok(()), &mut out);
    }
    // The foreign jobs end early: the snapshots rebuild the mirrors without them.
    for (k, p) in asked.iter().enumerate() {
        b.clusters[k].sched = mirror(2, None, std::slice::from_ref(p));
    }
    let mut out = Vec::new();
    b.on_cycle(Time(10), &mut out);
    let m = moves_asked(&out);
    assert_eq!(m.len(), 1, "{out:?}");
    assert_eq!((m[0].0, m[0].1), (JobId(1), Time(10)));
    assert_eq!(m[0].2.len(), 2);
    assert!(m[0]
        .2
        .iter()
        .all(|p| p.window == Interval::new(Time(10), Time(40))));
    // Nothing moved before the answer, and the move is not asked twice meanwhile.
    assert!(!out.iter().any(|a| matches!(a, BrokerAction::Moved { .. })));
    let mut out = Vec::new();
    b.on_cycle(Time(11), &mut out);
    assert!(moves_asked(&out).is_empty());
    // Refused: the job keeps its reservation at 100.
    b.on_move_answered(Time(12), JobId(1), Err("busy".into()), &mut out);
    assert!(matches!(
        b.entry(JobId(1)).unwrap().phase,
        Phase::Reserved {
            start: Time(100),
            ..
        }
    ));
    // The next snapshots restore the mirrors; no new ask within the pause.
    for (k, p) in asked.iter().enumerate() {
        b.clusters[k].sched = mirror(2, None, std::slice::from_ref(p));
    }
    let mut out = Vec::new();
    b.on_cycle(Time(12 + MOVE_RETRY_SECS - 1), &mut out);
    assert!(moves_asked(&out).is_empty());
    let t = Time(12 + MOVE_RETRY_SECS);
    b.on_cycle(t, &mut out);
    let m = moves_asked(&out);
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].1, t);
    let mut out = Vec::new();
    b.on_move_answered(t, JobId(1), Ok(()), &mut out);
    assert!(out.iter().any(|a| matches!(
        a,
        BrokerAction::Moved { job: JobId(1), start, .. } if *start == t
    )));
    assert!(matches!(
        b.entry(JobId(1)).unwrap().phase,
        Phase::Reserved { start, .. } if start == t
    ));
    assert_eq!(b.stats().moves, 1);
    // A late answer for a job that is not moving changes nothing.
    let mut out = Vec::new();
    b.on_move_answered(t, JobId(1), Ok(()), &mut out);
    assert!(out.is_empty());
}

/// A job with parts on both kinds of cluster moves as one: the part here holds its new
/// window beside the old one and does not start while the other cluster is asked; a refusal
/// gives the held window back, an acceptance moves the part here too and starts it.
#[test]
fn a_job_across_both_kinds_of_cluster_moves_as_one() {
    let mut remote = cluster("r", 2);
    remote.self_scheduled = true;
    remote.sched = mirror(2, Some(100), &[]);
    let mut b = Broker::new(vec![cluster("c", 2), remote], planner(600), 1);
    let mut out = Vec::new();
    b.submit_local(
        Time(0),
        ClusterId(0),
        Job::new(JobId(100), Time(0), 2, Dur(100)),
        &mut out,
    )
    .unwrap();
    b.submit(Time(0), global(1, 4, 30));
    b.on_cycle(Time(0), &mut out);
    let asked: Vec<ReservedPart> = asks(&out);
    assert_eq!(asked.len(), 1, "{out:?}");
    b.on_reservation_answered(Time(1), asked[0].reservation, Ok(()), &mut out);
    let Some(Phase::Reserved { parts: old, .. }) = b.entry(JobId(1)).map(|e| e.phase.clone())
    else {
        panic!("job 1 is not reserved: {:?}", b.entry(JobId(1)));
    };
    let here = old
        .iter()
        .find(|p| p.cluster == ClusterId(0))
        .unwrap()
        .clone();
    assert_eq!(here.window.start, Time(100));
    let windows = |b: &Broker| {
        let mut w: Vec<(ReservationId, Interval)> = b.clusters[0]
            .sched
            .reservations()
            .map(|r| (r.id, r.window))
            .collect();
        w.sort_by_key(|x| x.0);
        w
    };
    let before = windows(&b);

    // The local job ends early and the remote mirror frees up: the move is asked.
    let refresh = |b: &mut Broker| b.clusters[1].sched = mirror(2, None, &asked);
    refresh(&mut b);
    let mut out = Vec::new();
    b.on_part_ended(Time(10), ClusterId(0), JobId(100), &mut out);
    b.on_cycle(Time(10), &mut out);
    let m = moves_asked(&out);
    assert_eq!(m.len(), 1, "{out:?}");
    assert_eq!((m[0].0, m[0].1, m[0].2.len()), (JobId(1), Time(10), 2));
    assert!(!starts(&out).iter().any(|&(j, _)| j == JobId(1)), "{out:?}");
    // Held meanwhile: the old window and [10, 40) beside it.
    let held = windows(&b);
    assert_eq!(held.len(), before.len() + 1, "{held:?}");
    assert!(held.contains(&(
        compress::held_for_move_id(here.reservation),
        Interval::new(Time(10), Time(40))
    )));
    let mut out = Vec::new();
    b.on_cycle(Time(11), &mut out);
    assert!(!starts(&out).iter().any(|&(j, _)| j == JobId(1)), "{out:?}");

    // Refused: everything as it was.
    b.on_move_answered(Time(12), JobId(1), Err("busy".into()), &mut out);
    assert_eq!(windows(&b), before);
    assert!(matches!(
        b.entry(JobId(1)).unwrap().phase,
        Phase::Reserved {
            start: Time(100),
            ..
        }
    ));

    // Asked again after the pause, and accepted: the part here moves and starts.
    refresh(&mut b);
    let t = Time(12 + MOVE_RETRY_SECS);
    let mut out = Vec::new();
    b.on_cycle(t, &mut out);
    assert_eq!(moves_asked(&out).len(), 1, "{out:?}");
    let mut out = Vec::new();
    b.on_move_answered(t, JobId(1), Ok(()), &mut out);
    assert!(out.iter().any(|a| matches!(
        a,
        BrokerAction::Moved { job: JobId(1), start, .. } if *start == t
    )));
    assert!(starts(&out).contains(&(JobId(1), 0)), "{out:?}");
    let after = windows(&b);
    assert_eq!(after.len(), before.len(), "{after:?}");
    assert!(after.contains(&(here.reservation, Interval::new(t, t + Dur(30)))));
}

fn wakes(out: &[BrokerAction]) -> Vec<Time> {
    out.iter()
        .filter_map(|a| match a {
            BrokerAction::Wake { at, .. } => Some(*at),
            _ => None,
        })
        .collect()
}

/// A job with a begin time on an idle grid (4 processors, lead time 60 s): planned at its
/// begin (500) while that is beyond the lead time, reserved from 500 once within it (the
/// cycle at 450), started by the wake at 500 and not before.
#[test]
fn a_job_is_planned_and_started_at_its_begin_time() {
    let mut b = Broker::new(vec![cluster("c", 4)], planner(60), 1);
    b.submit(
        Time(0),
        GlobalJob {
            begin: Some(Time(500)),
            ..global(1, 2, 100)
        },
    );
    let mut out = Vec::new();
    b.on_cycle(Time(0), &mut out);
    assert!(starts(&out).is_empty());
    assert!(matches!(
        b.entry(JobId(1)).unwrap().phase,
        Phase::Planned {
            start: Time(500),
            end: Time(600),
            ..
        }
    ));
    out.clear();
    b.on_cycle(Time(450), &mut out);
    assert!(starts(&out).is_empty());
    assert!(matches!(
        b.entry(JobId(1)).unwrap().phase,
        Phase::Reserved {
            start: Time(500),
            ..
        }
    ));
    assert!(wakes(&out).contains(&Time(500)), "{out:?}");
    // Cycles and ticks before 500 move nothing earlier: the processors are idle, but the
    // job may not start yet.
    for t in [460, 480, 499] {
        out.clear();
        b.on_cycle(Time(t), &mut out);
        b.tick(Time(t), ClusterId(0), &mut out);
        assert!(starts(&out).is_empty(), "started at {t}: {out:?}");
    }
    out.clear();
    b.tick(Time(500), ClusterId(0), &mut out);
    assert_eq!(starts(&out), vec![(JobId(1), 0)]);
}

/// Compression moves a reserved job earlier only down to its begin. A local job holds both
/// processors until 300, so job 1 (begin 100, 50 s) is reserved at 300; the local job ends
/// at 50 and job 1 moves to 100, its begin, not to 50.
#[test]
fn compression_never_moves_a_job_before_its_begin() {
    let mut b = Broker::new(vec![cluster("c", 2)], planner(600), 1);
    let mut out = Vec::new();
    b.submit_local(
        Time(0),
        ClusterId(0),
        Job::new(JobId(100), Time(0), 2, Dur(300)),
        &mut out,
    )
    .unwrap();
    b.submit(
        Time(0),
        GlobalJob {
            begin: Some(Time(100)),
            ..global(1, 2, 50)
        },
    );
    b.on_cycle(Time(0), &mut out);
    assert!(matches!(
        b.entry(JobId(1)).unwrap().phase,
        Phase::Reserved {
            start: Time(300),
            ..
        }
    ));
    out.clear();
    b.on_part_ended(Time(50), ClusterId(0), JobId(100), &mut out);
    b.on_cycle(Time(50), &mut out);
    assert!(starts(&out).is_empty(), "{out:?}");
    assert!(matches!(
        b.entry(JobId(1)).unwrap().phase,
        Phase::Reserved {
            start: Time(100),
            end: Time(150),
            ..
        }
    ));
    out.clear();
    b.tick(Time(100), ClusterId(0), &mut out);
    assert_eq!(starts(&out), vec![(JobId(1), 0)]);
}

/// A begin beyond the planning horizon (7 days) grows the horizon for the job, as a long
/// walltime does: it is planned at its begin, ten days ahead, not left without a window.
#[test]
fn a_begin_beyond_the_horizon_is_planned_at_it() {
    let mut b = Broker::new(vec![cluster("c", 2)], planner(60), 1);
    let begin = Time(10 * 86_400);
    b.submit(
        Time(0),
        GlobalJob {
            begin: Some(begin),
            ..global(1, 2, 3_600)
        },
    );
    let mut out = Vec::new();
    b.on_cycle(Time(0), &mut out);
    let e = b.entry(JobId(1)).unwrap();
    assert!(
        matches!(e.phase, Phase::Planned { start, .. } if start == begin),
        "{:?} {:?}",
        e.phase,
        e.reason
    );
}
