use super::*;
use crate::forecast::{forecast, OccupancyKind};
use crate::time::Interval;

fn starts(out: &[Action]) -> Vec<JobId> {
    out.iter()
        .filter_map(|a| match a {
            Action::Start { job, .. } => Some(*job),
            _ => None,
        })
        .collect()
}

/// FCFS without backfilling on 4 processors. Job 1 (4 processors, begin 100) is
/// submitted first, job 2 (4 processors, 50 s) after it: job 1 is not eligible, so it
/// blocks no one and job 2 starts at once. The forecast places job 1 at its begin, 100
/// (job 2 ends at 50); the scheduler names 100 as the moment to tick, and job 1 starts
/// then, not before.
#[test]
fn a_job_waits_for_its_begin_time_without_blocking_the_queue() {
    let mut s = LocalScheduler::new(4, Policy::fcfs());
    let mut out = Vec::new();
    let first = Job::new(JobId(1), Time(0), 4, Dur(30)).with_begin(Some(Time(100)));
    s.handle(Time(0), Event::Submit(first), &mut out).unwrap();
    s.handle(
        Time(0),
        Event::Submit(Job::new(JobId(2), Time(0), 4, Dur(50))),
        &mut out,
    )
    .unwrap();
    assert_eq!(starts(&out), vec![JobId(2)]);
    assert_eq!(s.waiting(), 1);
    assert_eq!(s.running(), 1);
    assert_eq!(s.next_boundary(Time(0)), Some(Time(100)));
    assert_eq!(
        s.explain(JobId(1), Time(0)),
        Some(JobStatus::Deferred {
            begin: Time(100),
            earliest: Some(Time(100)),
        })
    );
    let f = forecast(&s, Time(0), |_| 0.0);
    let planned: Vec<(Time, Time)> = f
        .iter()
        .filter(|o| matches!(o.kind, OccupancyKind::Planned { job, .. } if job == JobId(1)))
        .map(|o| (o.window.start, o.window.end))
        .collect();
    assert_eq!(planned, vec![(Time(100), Time(130))]);
    s.handle(Time(50), Event::Finish(JobId(2)), &mut out)
        .unwrap();
    out.clear();
    s.handle(Time(99), Event::Tick, &mut out).unwrap();
    assert!(starts(&out).is_empty(), "started before its begin: {out:?}");
    s.handle(Time(100), Event::Tick, &mut out).unwrap();
    assert_eq!(starts(&out), vec![JobId(1)]);
    assert_eq!(s.next_boundary(Time(100)), None);
}

/// On a busy cluster the forecast places a job waiting for its begin where the profile
/// has room from its begin: both processors are busy until 200 with job 1, so job 3
/// (2 processors, begin 150) is forecast at 200. Its id is taken while it waits; once
/// cancelled it is gone, and its begin is no longer a boundary.
#[test]
fn the_forecast_places_a_deferred_job_no_earlier_than_the_profile_allows() {
    let mut s = LocalScheduler::new(2, Policy::easy());
    let mut out = Vec::new();
    s.handle(
        Time(0),
        Event::Submit(Job::new(JobId(1), Time(0), 2, Dur(200))),
        &mut out,
    )
    .unwrap();
    let late = Job::new(JobId(3), Time(0), 2, Dur(10)).with_begin(Some(Time(150)));
    s.handle(Time(0), Event::Submit(late), &mut out).unwrap();
    let f = forecast(&s, Time(0), |_| 0.0);
    let planned = f
        .iter()
        .find(|o| matches!(o.kind, OccupancyKind::Planned { job, .. } if job == JobId(3)))
        .map(|o| o.window);
    assert_eq!(planned, Some(Interval::new(Time(200), Time(210))));
    assert!(matches!(
        s.handle(
            Time(1),
            Event::Submit(Job::new(JobId(3), Time(1), 1, Dur(5))),
            &mut out
        ),
        Err(CoreError::DuplicateJob(_))
    ));
    s.cancel(Time(10), JobId(3)).unwrap();
    assert_eq!(s.waiting(), 0);
    assert_eq!(s.next_boundary(Time(10)), None);
    assert_eq!(s.explain(JobId(3), Time(10)), None);
}

/// A job whose begin has passed at submission is queued at once, as without a begin.
#[test]
fn a_past_begin_changes_nothing() {
    let mut s = LocalScheduler::new(2, Policy::easy());
    let mut out = Vec::new();
    let job = Job::new(JobId(1), Time(50), 2, Dur(10)).with_begin(Some(Time(40)));
    s.handle(Time(50), Event::Submit(job), &mut out).unwrap();
    assert_eq!(starts(&out), vec![JobId(1)]);
}
