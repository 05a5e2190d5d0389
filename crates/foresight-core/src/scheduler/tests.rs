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

/// A job bound to a reservation whose window has begun starts in it at once, whatever the
/// queue ahead of it waits for: under FCFS (and under a first-fit overtaking cap) the
/// local queue's blocked head once kept a global job's part from starting while its
/// siblings on other clusters ran.
#[test]
fn a_bound_job_starts_in_its_reservation_behind_a_blocked_head() {
    for policy in [Policy::fcfs(), Policy::first_fit(Some(0))] {
        let mut s = LocalScheduler::new(8, policy.clone());
        let mut out = Vec::new();
        // One processor busy until 60; the head asks for all eight.
        for (id, procs) in [(1, 1), (2, 8)] {
            s.handle(
                Time(0),
                Event::Submit(Job::new(JobId(id), Time(0), procs, Dur(60))),
                &mut out,
            )
            .unwrap();
        }
        s.add_reservation_displacing(AdminReservation {
            id: ReservationId(9),
            procs: 6,
            window: Interval::new(Time(0), Time(1000)),
            acl: Acl {
                job: Some(JobId(3)),
                ..Acl::nobody()
            },
        })
        .unwrap();
        let part =
            Job::new(JobId(3), Time(0), 6, Dur(1000)).in_reservation(ReservationId(9), false);
        out.clear();
        s.handle(Time(0), Event::Submit(part), &mut out).unwrap();
        assert!(
            out.contains(&Action::Start {
                job: JobId(3),
                procs: 6,
                domain: Domain::Reservation(ReservationId(9)),
            }),
            "{policy:?}: {out:?}"
        );
        assert!(s.is_running(JobId(3)));
        assert!(!s.is_running(JobId(2)), "{policy:?}: the head still waits");
        assert!(s.pool().is_consistent());
    }
}

/// A reservation moved earlier takes its bound job with it (its begin time too), and the
/// job starts there; a move into time that is not free, or of a reservation a job runs in,
/// changes nothing.
#[test]
fn a_moved_reservation_takes_its_bound_job_earlier_or_changes_nothing() {
    let mut s = LocalScheduler::new(4, Policy::easy());
    let mut out = Vec::new();
    // Job 1 holds all four processors until 100 at most.
    s.handle(
        Time(0),
        Event::Submit(Job::new(JobId(1), Time(0), 4, Dur(100))),
        &mut out,
    )
    .unwrap();
    s.add_reservation_displacing(AdminReservation {
        id: ReservationId(9),
        procs: 4,
        window: Interval::new(Time(100), Time(160)),
        acl: Acl {
            job: Some(JobId(2)),
            ..Acl::nobody()
        },
    })
    .unwrap();
    let part = Job::new(JobId(2), Time(0), 4, Dur(60))
        .in_reservation(ReservationId(9), false)
        .with_begin(Some(Time(100)));
    s.handle(Time(0), Event::Submit(part), &mut out).unwrap();
    let window = |from, to| Interval::new(Time(from), Time(to));
    // Job 1 still runs: no room earlier, and nothing changed.
    let before = format!("{:?}", s.reservations().collect::<Vec<_>>());
    assert!(matches!(
        s.move_reservation(Time(10), ReservationId(9), window(10, 70)),
        Err(CoreError::ReservationConflict { .. })
    ));
    assert_eq!(
        before,
        format!("{:?}", s.reservations().collect::<Vec<_>>())
    );
    // It ends early: the reservation moves to now and the part starts in it.
    s.handle(Time(20), Event::Finish(JobId(1)), &mut out)
        .unwrap();
    assert!(!s.is_running(JobId(2)));
    s.move_reservation(Time(20), ReservationId(9), window(20, 80))
        .unwrap();
    out.clear();
    s.handle(Time(20), Event::Tick, &mut out).unwrap();
    assert!(
        out.contains(&Action::Start {
            job: JobId(2),
            procs: 4,
            domain: Domain::Reservation(ReservationId(9)),
        }),
        "{out:?}"
    );
    assert!(s.pool().is_consistent());
    // Running in it, it stays.
    assert_eq!(
        s.move_reservation(Time(30), ReservationId(9), window(30, 90)),
        Err(CoreError::ReservationInUse {
            reservation: ReservationId(9),
            job: JobId(2)
        })
    );
    assert_eq!(
        s.move_reservation(Time(30), ReservationId(7), window(30, 90)),
        Err(CoreError::UnknownReservation(ReservationId(7)))
    );
}

/// A job bound to a reservation but allowed to start early, running in the pool, keeps the
/// reservation where it is: moving it would cancel and queue the running job again.
#[test]
fn a_reservation_whose_job_started_early_does_not_move() {
    let mut s = LocalScheduler::new(4, Policy::easy());
    let mut out = Vec::new();
    s.add_reservation(AdminReservation {
        id: ReservationId(9),
        procs: 2,
        window: Interval::new(Time(100), Time(200)),
        acl: Acl {
            job: Some(JobId(2)),
            ..Acl::nobody()
        },
    })
    .unwrap();
    let early = Job::new(JobId(2), Time(0), 2, Dur(60)).in_reservation(ReservationId(9), true);
    s.handle(Time(0), Event::Submit(early), &mut out).unwrap();
    assert!(s.is_running(JobId(2)), "{out:?}");
    assert_eq!(
        s.move_reservation(
            Time(10),
            ReservationId(9),
            Interval::new(Time(10), Time(110))
        ),
        Err(CoreError::ReservationInUse {
            reservation: ReservationId(9),
            job: JobId(2)
        })
    );
    assert!(s.is_running(JobId(2)));
    assert!(s.pool().is_consistent());
}
