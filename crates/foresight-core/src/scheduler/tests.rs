use crate::reservation::Acl;
use crate::time::Interval;

/// A global reservation may take the time a queued local job was promised (the local job
/// moves later), but never a running job's.
#[test]
fn displacing_reservations_push_the_queue_not_the_running() {
    let mut s = LocalScheduler::new(4, Policy::easy());
    let mut out = Vec::new();
    s.handle(
        Time(0),
        Event::Submit(Job::new(JobId(0), Time(0), 3, Dur(100))),
        &mut out,
    )
    .unwrap();
    s.handle(
        Time(0),
        Event::Submit(Job::new(JobId(1), Time(0), 4, Dur(50))),
        &mut out,
    )
    .unwrap();
    assert_eq!(s.reservation_of(JobId(1)).map(|p| p.start), Some(Time(100)));
    let res = |id, procs, from, to| AdminReservation {
        id: ReservationId(id),
        procs,
        window: Interval::new(Time(from), Time(to)),
        acl: Acl::nobody(),
    };
    assert!(matches!(
        s.add_reservation(res(1, 4, 100, 200)),
        Err(CoreError::ReservationConflict { .. })
    ));
    assert!(matches!(
        s.add_reservation_displacing(res(2, 2, 50, 150)),
        Err(CoreError::ReservationConflict { free: 1, .. })
    ));
    s.add_reservation_displacing(res(3, 4, 100, 200)).unwrap();
    assert_eq!(s.reservation_of(JobId(1)), None);
    out.clear();
    s.schedule(Time(10), &mut out);
    assert_eq!(
        out,
        vec![Action::Reserve {
            job: JobId(1),
            start: Time(200)
        }]
    );
    assert!(s.pool().is_consistent());
}

use super::*;

/// A caller that ticks late must not make a reserved job overlap a later reservation:
/// the late job is placed again from `now`, after the promise that would be broken.
#[test]
fn a_late_tick_does_not_break_later_reservations() {
    let mut s = LocalScheduler::new(2, Policy::conservative());
    let mut out = Vec::new();
    for (id, est) in [(0, 100), (1, 50), (2, 50)] {
        s.handle(
            Time(0),
            Event::Submit(Job::new(JobId(id), Time(0), 2, Dur(est))),
            &mut out,
        )
        .unwrap();
    }
    assert_eq!(s.reservation_of(JobId(1)).map(|p| p.start), Some(Time(100)));
    assert_eq!(s.reservation_of(JobId(2)).map(|p| p.start), Some(Time(150)));
    // Job 0 ends on time, but nobody ticks until 120.
    s.finish(Time(100), JobId(0)).unwrap();
    out.clear();
    s.schedule(Time(120), &mut out);
    // Starting job 1 at 120 would run into job 2's [150, 200): it goes after it instead.
    assert_eq!(
        out,
        vec![Action::Reserve {
            job: JobId(1),
            start: Time(200)
        }]
    );
    assert!(s.pool().is_consistent());
}
