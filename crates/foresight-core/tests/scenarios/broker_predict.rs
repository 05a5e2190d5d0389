//! The broker's side of runtime prediction, as the service drives it: a local job planned
//! by its prediction is named when it outlives it, corrected to its estimate, and its
//! cluster plans again at once (the reservation beside it moves to the new end).

use foresight_core::broker::{processors_of, Broker, BrokerAction, GridCluster, SpeedGroup};
use foresight_core::grid::PlannerConfig;
use foresight_core::{ClusterId, Dur, Job, JobId, LocalScheduler, Policy, Time};

fn broker() -> Broker {
    let groups = [SpeedGroup {
        procs: 4,
        speed: 1.0,
    }];
    let cluster = GridCluster::new(
        "a",
        processors_of("a", &groups),
        LocalScheduler::new(4, Policy::easy()),
    );
    let planner = PlannerConfig {
        horizon: Dur(3600),
        lead_time: Dur(60),
        plan_depth: 8,
    };
    Broker::new(vec![cluster], planner, 1)
}

fn starts(out: &[BrokerAction]) -> Vec<u64> {
    out.iter()
        .filter_map(|a| match a {
            BrokerAction::Start { job, .. } => Some(job.0),
            _ => None,
        })
        .collect()
}

/// 4 processors. Job 1 (2 procs, estimate 100, predicted 40) starts at 0; job 2 (4 procs)
/// is reserved at 40, its predicted end. At 40 job 1 is still running: its plan becomes
/// 100, job 2's reservation moves to 100, and job 3 (2 procs, 50 s), which would not have
/// fitted before 40, now starts beside job 1.
#[test]
fn an_outlived_prediction_is_corrected_to_the_estimate_and_the_cluster_plans_again() {
    let mut b = broker();
    let mut out = Vec::new();
    let job1 = Job::new(JobId(1), Time(0), 2, Dur(100)).with_prediction(Some(Dur(40)));
    b.submit_local(Time(0), ClusterId(0), job1, &mut out)
        .unwrap();
    b.submit_local(
        Time(0),
        ClusterId(0),
        Job::new(JobId(2), Time(0), 4, Dur(50)),
        &mut out,
    )
    .unwrap();
    b.submit_local(
        Time(0),
        ClusterId(0),
        Job::new(JobId(3), Time(0), 2, Dur(50)),
        &mut out,
    )
    .unwrap();
    assert_eq!(starts(&out), vec![1]);
    let sched = &b.clusters[0].sched;
    assert_eq!(
        sched.reservation_of(JobId(2)).map(|p| p.start),
        Some(Time(40))
    );
    assert_eq!(sched.next_plan_end(Time(0)), Some(Time(40)));
    assert!(sched.outlived(Time(39)).is_empty());

    // Nothing is due before the plan ends.
    out.clear();
    assert!(b.correct_outlived(Time(39), &mut out).is_empty());
    assert!(out.is_empty());

    let done = b.correct_outlived(Time(40), &mut out);
    assert_eq!(done, vec![(ClusterId(0), JobId(1), Dur(100))]);
    assert_eq!(starts(&out), vec![3]);
    let sched = &b.clusters[0].sched;
    assert_eq!(
        sched.reservation_of(JobId(2)).map(|p| p.start),
        Some(Time(100))
    );
    // Planned to its estimate now: never named again (the kill comes at the estimate).
    assert_eq!(sched.next_plan_end(Time(40)), None);
    assert!(sched.outlived(Time(100)).is_empty());
    out.clear();
    assert!(b.correct_outlived(Time(100), &mut out).is_empty());
}

/// A job without a prediction, or one whose prediction is its estimate, is never corrected.
#[test]
fn jobs_planned_by_their_estimate_are_never_corrected() {
    let mut b = broker();
    let mut out = Vec::new();
    let plain = Job::new(JobId(1), Time(0), 1, Dur(30));
    let same = Job::new(JobId(2), Time(0), 1, Dur(30)).with_prediction(Some(Dur(30)));
    b.submit_local(Time(0), ClusterId(0), plain, &mut out)
        .unwrap();
    b.submit_local(Time(0), ClusterId(0), same, &mut out)
        .unwrap();
    assert_eq!(starts(&out), vec![1, 2]);
    assert_eq!(b.clusters[0].sched.next_plan_end(Time(0)), None);
    assert!(b.correct_outlived(Time(30), &mut out).is_empty());
}
