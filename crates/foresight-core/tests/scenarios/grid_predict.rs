//! The grid planner plans global jobs with their predictions (issue 16, runtime prediction
//! item 3): a job planned beyond the lead time is planned by its prediction, its reservation
//! at the lead time stays its walltime, a running job's reservation past its prediction is
//! offered only to jobs planned beyond the lead time, and a correction moves them back.

use foresight_core::broker::{processors_of, Broker, BrokerAction, GridCluster, Phase, SpeedGroup};
use foresight_core::grid::{GlobalJob, PlannerConfig};
use foresight_core::predict::Correction;
use foresight_core::select::Criterion;
use foresight_core::{
    Acl, AdminReservation, ClusterId, Dur, Interval, Job, JobId, LocalScheduler, Policy,
    ReservationId, Time, UserId,
};

fn broker(lead: i64) -> Broker {
    broker_with(lead, Policy::easy())
}

fn broker_with(lead: i64, policy: Policy) -> Broker {
    let groups = [SpeedGroup {
        procs: 4,
        speed: 1.0,
    }];
    let cluster = GridCluster::new(
        "a",
        processors_of("a", &groups),
        LocalScheduler::new(4, policy),
    );
    let planner = PlannerConfig {
        horizon: Dur(10_000),
        lead_time: Dur(lead),
        plan_depth: 8,
    };
    Broker::new(vec![cluster], planner, 1)
}

fn global(id: u64, walltime: i64, prediction: Option<i64>) -> GlobalJob {
    GlobalJob {
        id: JobId(id),
        user: UserId(1),
        submit: Time(0),
        procs: 4,
        walltime: Dur(walltime),
        max_price: 1.0,
        input_mb: 0.0,
        home: None,
        co_allocate: true,
        criterion: Criterion::EarliestStart,
        priority: 0,
        requeue: false,
        begin: None,
        requires: Default::default(),
        licences: Default::default(),
        prediction: prediction.map(Dur),
    }
}

/// (start, end) of a job planned beyond the lead time; `None` in any other phase.
fn planned(b: &Broker, id: u64) -> Option<(i64, i64)> {
    match &b.entry(JobId(id))?.phase {
        Phase::Planned { start, end, .. } => Some((start.secs(), end.secs())),
        _ => None,
    }
}

/// (start, end) of a reserved or running job.
fn held(b: &Broker, id: u64) -> Option<(i64, i64)> {
    match &b.entry(JobId(id))?.phase {
        Phase::Reserved { start, end, .. } | Phase::Running { start, end, .. } => {
            Some((start.secs(), end.secs()))
        }
        _ => None,
    }
}

/// 4 processors: a local job holds all of them until 200 and an administrative reservation
/// from 600 to 5000. Global job 1 (walltime 1000) fits the hole 200–600 only by its
/// prediction (300): planned 200–500; by its walltime it would go at 5000. Job 2 (walltime
/// 100, no prediction) is planned behind it, 500–600. Without the prediction job 1 goes at
/// 5000 and job 2 takes the hole at 200. At 150 job 1's start is within the lead time (60):
/// its reservation is its walltime, which fits only at 5000; job 2 gets the hole again.
#[test]
fn a_job_predicted_short_is_planned_into_a_window_its_walltime_would_not_fit() {
    let run = |prediction: Option<i64>| {
        let mut b = broker(60);
        let mut out = Vec::new();
        b.submit_local(
            Time(0),
            ClusterId(0),
            Job::new(JobId(100), Time(0), 4, Dur(200)),
            &mut out,
        )
        .unwrap();
        b.clusters[0]
            .sched
            .add_reservation(AdminReservation {
                id: ReservationId(1000),
                procs: 4,
                window: Interval::new(Time(600), Time(5000)),
                acl: Acl::nobody(),
            })
            .unwrap();
        b.reserve_ids_below(1001);
        b.submit(Time(0), global(1, 1000, prediction));
        b.submit(Time(0), global(2, 100, None));
        b.on_cycle(Time(0), &mut out);
        b
    };
    let b = run(Some(300));
    assert_eq!(planned(&b, 1), Some((200, 500)));
    assert_eq!(planned(&b, 2), Some((500, 600)));
    let plain = run(None);
    assert_eq!(planned(&plain, 1), Some((5000, 6000)));
    assert_eq!(planned(&plain, 2), Some((200, 300)));

    // Within the lead time the reservation would be the walltime: job 1 goes where that
    // fits, and nothing is held for it in the hole.
    let mut b = b;
    let mut out = Vec::new();
    b.on_cycle(Time(150), &mut out);
    assert_eq!(planned(&b, 1), Some((5000, 6000)));
    assert_eq!(held(&b, 2), Some((200, 300)));
}

/// Job 1 (walltime 1000, predicted 100) is reserved and starts at 0; its reservation and
/// kill stay at 1000, and its part is planned to 100. From the next cycle on, job 2
/// (walltime 500) is planned at the prediction's end, 100, inside job 1's reservation, where
/// nothing can be reserved for it (its start is beyond the lead time). Job 1 outlives its
/// prediction: at 100 it is corrected to its walltime (the cluster corrects to the
/// estimate) and the grid plans again at once, so job 2 moves behind the reservation, to
/// 1000.
#[test]
fn after_a_correction_the_jobs_planned_behind_move() {
    let to_estimate = Policy {
        correction: Correction::Estimate,
        ..Policy::easy()
    };
    let mut b = broker_with(60, to_estimate);
    let mut out = Vec::new();
    b.submit(Time(0), global(1, 1000, Some(100)));
    b.submit(Time(0), global(2, 500, None));
    b.on_cycle(Time(0), &mut out);
    assert_eq!(held(&b, 1), Some((0, 1000)));
    assert!(out
        .iter()
        .any(|a| matches!(a, BrokerAction::Start { job: JobId(1), .. })));
    // Planned in the same cycle as job 1's reservation: behind its walltime.
    assert_eq!(planned(&b, 2), Some((1000, 1500)));
    let sched = &b.clusters[0].sched;
    assert_eq!(sched.next_plan_end(Time(0)), Some(Time(100)));

    out.clear();
    b.on_cycle(Time(10), &mut out);
    assert_eq!(planned(&b, 2), Some((100, 600)));
    assert!(out.iter().any(|a| matches!(
        a,
        BrokerAction::Planned {
            job: JobId(2),
            start: Time(100)
        }
    )));
    // Within the lead time of the prediction's end the offer starts just past the lead
    // time: nothing is ever planned to start inside it there.
    out.clear();
    b.on_cycle(Time(50), &mut out);
    assert_eq!(planned(&b, 2), Some((111, 611)));

    out.clear();
    assert!(b.correct_outlived(Time(99), &mut out).is_empty());
    let done = b.correct_outlived(Time(100), &mut out);
    assert_eq!(done, vec![(ClusterId(0), JobId(1), Dur(1000))]);
    assert_eq!(planned(&b, 2), Some((1000, 1500)));
    assert!(out.iter().any(|a| matches!(
        a,
        BrokerAction::Planned {
            job: JobId(2),
            start: Time(1000)
        }
    )));
    assert_eq!(held(&b, 1), Some((0, 1000)));
    // Corrected to its walltime, it is never named again.
    assert_eq!(b.clusters[0].sched.next_plan_end(Time(100)), None);

    // Had job 1 ended as predicted, job 2 would have started at once.
    let mut b = broker(60);
    let mut out = Vec::new();
    b.submit(Time(0), global(1, 1000, Some(100)));
    b.submit(Time(0), global(2, 500, None));
    b.on_cycle(Time(0), &mut out);
    out.clear();
    b.on_part_ended(Time(90), ClusterId(0), JobId(1), &mut out);
    b.on_cycle(Time(90), &mut out);
    assert_eq!(held(&b, 2), Some((90, 590)));
}

/// A prediction no shorter than the walltime changes nothing, and a job without one is
/// never corrected.
#[test]
fn a_prediction_at_the_walltime_plans_as_none() {
    for prediction in [None, Some(1000), Some(5000)] {
        let mut b = broker(60);
        let mut out = Vec::new();
        b.submit(Time(0), global(1, 1000, prediction));
        b.submit(Time(0), global(2, 500, None));
        b.on_cycle(Time(0), &mut out);
        b.on_cycle(Time(10), &mut out);
        assert_eq!(planned(&b, 2), Some((1000, 1500)), "{prediction:?}");
        assert_eq!(b.clusters[0].sched.next_plan_end(Time(0)), None);
        assert!(b.correct_outlived(Time(1000), &mut out).is_empty());
    }
}

/// By default a cluster corrects by the paper's steps: job 1 (walltime 1000, predicted
/// 100) outlives its prediction at 100 and is planned to 100 + 1 min, then 100 + 5 min,
/// each time named by `next_plan_end`.
#[test]
fn a_global_part_is_corrected_by_the_papers_steps() {
    let mut b = broker(60);
    let mut out = Vec::new();
    b.submit(Time(0), global(1, 1000, Some(100)));
    b.on_cycle(Time(0), &mut out);
    let done = b.correct_outlived(Time(100), &mut out);
    assert_eq!(done, vec![(ClusterId(0), JobId(1), Dur(160))]);
    assert_eq!(
        b.clusters[0].sched.next_plan_end(Time(100)),
        Some(Time(160))
    );
    let done = b.correct_outlived(Time(160), &mut out);
    assert_eq!(done, vec![(ClusterId(0), JobId(1), Dur(400))]);
    assert_eq!(held(&b, 1), Some((0, 1000)));
}
