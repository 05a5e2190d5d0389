//! Hand-checked tiny workloads with the exact start time every policy must give.
//!
//! Each scenario has an ASCII Gantt chart per policy worked out by hand from the algorithm in
//! `scheduler/` and the driver's rules (`tests/common/mod.rs`): at one instant finishes come
//! first, then submissions one by one (each triggers a pass), then one tick; a reserved job is
//! woken by a tick at its reserved start. In the charts one column is one unit of the scale
//! given, `#` is a running job, `r` marks a job reservation and `.` a waiting job.

use crate::common::{run, spec, Outcome, Spec, World};
use foresight_core::{
    Acl, Action, AdminReservation, BackfillChoice, BackfillMetric, CoreError, Domain, Dur, Event,
    Interval, Job, JobId, LocalScheduler, Policy, QueueOrder, ReservationId, Time, UserId,
};

struct Case {
    name: &'static str,
    policy: Policy,
    want: &'static [(u64, i64)],
}

/// Runs every case on the same jobs and checks the exact starts, that nothing was refused
/// and that every job finished.
fn check_cases(capacity: u32, reservations: &[AdminReservation], jobs: &[Spec], cases: Vec<Case>) {
    for c in cases {
        let world = World {
            capacity,
            policy: c.policy.clone(),
            reservations: reservations.to_vec(),
            jobs: jobs.to_vec(),
        };
        let out = run(&world);
        assert!(out.errors.is_empty(), "{}: errors {:?}", c.name, out.errors);
        assert!(
            out.refused.is_empty(),
            "{}: refused {:?}",
            c.name,
            out.refused
        );
        assert_eq!(out.starts(), c.want, "{}: starts (job, time)", c.name);
        for (id, r) in &out.records {
            assert!(r.end.is_some(), "{}: job {id} never finished", c.name);
        }
    }
}

fn easy_with(backfill: BackfillChoice, metric: BackfillMetric) -> Policy {
    let mut p = Policy::easy();
    p.backfill = backfill;
    p.metric = metric;
    p
}

fn fcfs_ordered(order: QueueOrder) -> Policy {
    let mut p = Policy::fcfs();
    p.order = order;
    p
}

fn admin(id: u64, procs: u32, start: i64, end: i64, acl: Acl) -> AdminReservation {
    AdminReservation {
        id: ReservationId(id),
        procs,
        window: Interval::new(Time(start), Time(end)),
        acl,
    }
}

// ---------------------------------------------------------------------------------------
// FCFS, First-Fit and its overtake cap.
//
// capacity 4            submit procs est run
//   1 A                    0     3   10  10
//   2 B                    1     4   10  10
//   3 C                    2     1    4   4
//   4 D                    3     1    2   2
//
// scale: 1 column = 2 s        0    10   20   30
// FCFS (B blocks everything behind it):
//   A  #####
//   B  .....#####
//   C  ..........##
//   D  ..........#
// First-Fit, no cap: C overtakes B at 2, D overtakes B at 6 (C's end frees 1 processor).
//   A  #####
//   B  .....#####
//   C   ##
//   D  ...#
// First-Fit, cap 1: C's start is B's first overtake; at 6 B is capped, so D waits behind B.
//   D  ..........#            (otherwise as no cap)
// First-Fit, cap 0 is FCFS; cap 2 lets D pass as well.
// EASY, conservative, depth:2: B is reserved at 10; C [2,6) and D [6,8) end before it.
// ---------------------------------------------------------------------------------------

fn overtake_jobs() -> Vec<Spec> {
    vec![
        spec(1, 0, 3, 10, 10),
        spec(2, 1, 4, 10, 10),
        spec(3, 2, 1, 4, 4),
        spec(4, 3, 1, 2, 2),
    ]
}

#[test]
fn fcfs_and_first_fit_with_and_without_overtake_cap() {
    const FCFS: &[(u64, i64)] = &[(1, 0), (2, 10), (3, 20), (4, 20)];
    const OVERTAKE: &[(u64, i64)] = &[(1, 0), (2, 10), (3, 2), (4, 6)];
    let cases = vec![
        Case {
            name: "fcfs",
            policy: Policy::fcfs(),
            want: FCFS,
        },
        Case {
            name: "firstfit",
            policy: Policy::first_fit(None),
            want: OVERTAKE,
        },
        Case {
            name: "firstfit cap 0",
            policy: Policy::first_fit(Some(0)),
            want: FCFS,
        },
        Case {
            name: "firstfit cap 1",
            policy: Policy::first_fit(Some(1)),
            want: &[(1, 0), (2, 10), (3, 2), (4, 20)],
        },
        Case {
            name: "firstfit cap 2",
            policy: Policy::first_fit(Some(2)),
            want: OVERTAKE,
        },
        Case {
            name: "easy",
            policy: Policy::easy(),
            want: OVERTAKE,
        },
        Case {
            name: "conservative",
            policy: Policy::conservative(),
            want: OVERTAKE,
        },
        Case {
            name: "depth:2",
            policy: Policy::depth(2),
            want: OVERTAKE,
        },
    ];
    check_cases(4, &[], &overtake_jobs(), cases);
}

// ---------------------------------------------------------------------------------------
// Reservation depth: EASY (1), depth:2, conservative (all), FCFS.
//
// capacity 10           submit procs est run
//   1 A                    0     6   10  10
//   2 B                    1     5   10  10
//   3 C                    2     7   10  10
//   4 D                    3     8   10  10
//   5 E                    4     4   21  21
//   6 F                    5     3   30  30
//
// scale: 1 column = 5 s      0    25   50   75
// EASY: only B is protected (r@10). E [4,25) fits beside A and B and delays C. At 10 B starts,
// which frees the one reservation, so C is reserved @25 (E's end); at 20 F [20,50) fits beside
// C's reservation; D, reserved at 25, waits for F: @50.
//   A  ##
//   B  ..##
//   C  .....##
//   D  ..........##
//   E   ####
//   F  ....######
// depth:2: B r@10 and C r@20 are protected, so E (needs 4 on [20,25), only 3 beside C) waits;
// F [5,35) fits beside A, B and C. D is reserved at 10 (B started, a slot is free) @35 and E
// at 20 @45.
//   A  ##
//   B  ..##
//   C  ....##
//   D  .......##
//   E  .........####
//   F   ######
// conservative: D r@30, E r@40, F r@40 (F [5,35) would delay D): all in order, like FCFS.
//   A  ##
//   B  ..##
//   C  ....##
//   D  ......##
//   E  ........####
//   F  ........######
// ---------------------------------------------------------------------------------------

fn depth_jobs() -> Vec<Spec> {
    vec![
        spec(1, 0, 6, 10, 10),
        spec(2, 1, 5, 10, 10),
        spec(3, 2, 7, 10, 10),
        spec(4, 3, 8, 10, 10),
        spec(5, 4, 4, 21, 21),
        spec(6, 5, 3, 30, 30),
    ]
}

#[test]
fn reservation_depth_decides_who_may_be_delayed() {
    const IN_ORDER: &[(u64, i64)] = &[(1, 0), (2, 10), (3, 20), (4, 30), (5, 40), (6, 40)];
    let cases = vec![
        Case {
            name: "easy",
            policy: Policy::easy(),
            want: &[(1, 0), (2, 10), (3, 25), (4, 50), (5, 4), (6, 20)],
        },
        Case {
            name: "depth:2",
            policy: Policy::depth(2),
            want: &[(1, 0), (2, 10), (3, 20), (4, 35), (5, 45), (6, 5)],
        },
        Case {
            name: "conservative",
            policy: Policy::conservative(),
            want: IN_ORDER,
        },
        Case {
            name: "depth:1000 (conservative for this queue)",
            policy: Policy::depth(1000),
            want: IN_ORDER,
        },
        Case {
            name: "fcfs",
            policy: Policy::fcfs(),
            want: IN_ORDER,
        },
        Case {
            name: "firstfit",
            policy: Policy::first_fit(None),
            want: &[(1, 0), (2, 10), (3, 25), (4, 50), (5, 4), (6, 20)],
        },
    ];
    check_cases(10, &[], &depth_jobs(), cases);
}

#[test]
fn reservations_are_announced_and_never_move_later() {
    let world = |policy| World {
        capacity: 10,
        policy,
        reservations: vec![],
        jobs: depth_jobs(),
    };
    // (when, job, reserved start)
    let easy = run(&world(Policy::easy()));
    assert_eq!(
        easy.reserves(),
        vec![(1, 2, 10), (10, 3, 25), (25, 4, 50)],
        "easy"
    );
    let depth2 = run(&world(Policy::depth(2)));
    assert_eq!(
        depth2.reserves(),
        vec![(1, 2, 10), (2, 3, 20), (10, 4, 35), (20, 5, 45)],
        "depth:2"
    );
    let cons = run(&world(Policy::conservative()));
    assert_eq!(
        cons.reserves(),
        vec![(1, 2, 10), (2, 3, 20), (3, 4, 30), (4, 5, 40), (5, 6, 40)],
        "conservative"
    );
    assert!(
        run(&world(Policy::fcfs())).reserves().is_empty(),
        "fcfs reserves nothing"
    );
}

// ---------------------------------------------------------------------------------------
// Backfill choice (EASY base) and metric.
//
// capacity 10           submit procs est run
//   1 A                    0     4  100 100
//   2 B                    0     6  100  10   (ends early: a 6-processor hole [10,100))
//   3 H                    1    10   50  50   (reserved @100: the hole must end by then)
//   4 X                    2     7   10  10   (never fits the hole; reserved @150 at 100)
//   5 P                    3     2   45  45   metric: procs 2, walltime 45, proc-s  90
//   6 Q                    4     5   20  20                  5           20        100
//   7 R                    5     1   80  80                  1           80         80
//   8 S                    6     4   50  50                  4           50        200
//
// At 10, X does not fit, so the policy picks from P, Q, R, S for the 6 free processors:
//   FIRSTFIT            P (4 left), Q no, R (3 left), S no          -> {P, R}
//   BESTFIT procs       Q 5 (1 left), R 1                           -> {Q, R}
//   BESTFIT walltime    R 80 (5 left), S 50 (1 left)                -> {R, S}
//   BESTFIT proc-s      S 200 (2 left), Q no, P 90                  -> {S, P}
//   GREEDY procs        {P,S}=6 is the first set of 6 found         -> {P, S}
//   GREEDY walltime     {R,S}=130 > {P,R}=125 > {Q,R}=100           -> {R, S}
//   GREEDY proc-s       {P,S}=290 > {R,S}=280                       -> {P, S}
// The rest: a job that does not end by 100 waits for H; X starts at 150 (H's end), and a
// job left behind X starts beside it at 150 or, S under FIRSTFIT, at X's end 160.
//
// scale: 1 column = 10 s      0   50  100  150
// FIRSTFIT:   P #####, R ########, Q at 55 (P's end), S at 160
//   P  .#####
//   Q  .....##
//   R  .########
//   S  ................#####
// BESTFIT procs: Q, R at 10; S at 30 (Q's end, S 4 > P 2); P at 150.
// BESTFIT walltime (= GREEDY walltime): R, S at 10; Q at 60 (S's end); P at 150.
// BESTFIT proc-s (= GREEDY procs, GREEDY proc-s): S, P at 10; Q at 60; R at 150.
// ---------------------------------------------------------------------------------------

fn backfill_jobs() -> Vec<Spec> {
    vec![
        spec(1, 0, 4, 100, 100),
        spec(2, 0, 6, 100, 10),
        spec(3, 1, 10, 50, 50),
        spec(4, 2, 7, 10, 10),
        spec(5, 3, 2, 45, 45),
        spec(6, 4, 5, 20, 20),
        spec(7, 5, 1, 80, 80),
        spec(8, 6, 4, 50, 50),
    ]
}

#[test]
fn backfill_choice_and_metric_pick_different_jobs_for_the_hole() {
    use BackfillChoice::{BestFit, FirstFit, Greedy};
    use BackfillMetric::{ProcSeconds, Procs, Walltime};
    const FIXED: [(u64, i64); 4] = [(1, 0), (2, 0), (3, 100), (4, 150)];
    // P, Q, R, S
    let want = |p: i64, q: i64, r: i64, s: i64| -> Vec<(u64, i64)> {
        let mut v = FIXED.to_vec();
        v.extend([(5, p), (6, q), (7, r), (8, s)]);
        v
    };
    struct MetricCase {
        name: &'static str,
        choice: BackfillChoice,
        metric: BackfillMetric,
        want: Vec<(u64, i64)>,
    }
    let case = |name, choice, metric, want| MetricCase {
        name,
        choice,
        metric,
        want,
    };
    let cases = vec![
        case("firstfit", FirstFit, ProcSeconds, want(10, 55, 10, 160)),
        case("bestfit procs", BestFit, Procs, want(150, 10, 10, 30)),
        case("bestfit walltime", BestFit, Walltime, want(150, 60, 10, 10)),
        case(
            "bestfit procseconds",
            BestFit,
            ProcSeconds,
            want(10, 60, 150, 10),
        ),
        case("greedy procs", Greedy, Procs, want(10, 60, 150, 10)),
        case("greedy walltime", Greedy, Walltime, want(150, 60, 10, 10)),
        case(
            "greedy procseconds",
            Greedy,
            ProcSeconds,
            want(10, 60, 150, 10),
        ),
    ];
    for c in cases {
        let world = World {
            capacity: 10,
            policy: easy_with(c.choice, c.metric),
            reservations: vec![],
            jobs: backfill_jobs(),
        };
        let out = run(&world);
        assert!(out.errors.is_empty(), "{}: {:?}", c.name, out.errors);
        assert_eq!(out.starts(), c.want, "{}: starts (job, time)", c.name);
    }
    // FirstFit ignores the metric.
    for metric in [Procs, Walltime] {
        let world = World {
            capacity: 10,
            policy: easy_with(FirstFit, metric),
            reservations: vec![],
            jobs: backfill_jobs(),
        };
        assert_eq!(
            run(&world).starts(),
            want(10, 55, 10, 160),
            "firstfit {metric:?}"
        );
    }
}

#[test]
fn greedy_starts_its_set_in_queue_order_in_one_pass() {
    // The greedy set {P, S} is started at 10 in queue order, P before S.
    let world = World {
        capacity: 10,
        policy: easy_with(BackfillChoice::Greedy, BackfillMetric::Procs),
        reservations: vec![],
        jobs: backfill_jobs(),
    };
    let out = run(&world);
    let at_10: Vec<u64> = out
        .log
        .iter()
        .filter_map(|(t, a)| match a {
            Action::Start { job, .. } if t.0 == 10 => Some(job.0),
            _ => None,
        })
        .collect();
    assert_eq!(at_10, vec![5, 8]);
}

// ---------------------------------------------------------------------------------------
// Queue orders (FCFS policy, so the order alone decides).
//
// capacity 4            submit procs est run  user
//   1 A                    0     4   10  10     0
//   2 J2                   1     4   30  30     0
//   3 J3                   2     4   10  10     0
//   4 J4                   3     4   20  20     7   (user 7 has priority +1000)
//
// All three queue behind A and are ordered at 10:
//   fcfs      J2 [10,40) J3 [40,50) J4 [50,70)
//   sjf       J3 [10,20) J4 [20,40) J2 [40,70)
//   ljf       J2 [10,40) J4 [40,60) J3 [60,70)
//   priority  J4 [10,30) J2 [30,60) J3 [60,70)   (then queue time: J2 waited longer)
// ---------------------------------------------------------------------------------------

#[test]
fn queue_orders() {
    let jobs = vec![
        spec(1, 0, 4, 10, 10),
        spec(2, 1, 4, 30, 30),
        spec(3, 2, 4, 10, 10),
        spec(4, 3, 4, 20, 20).user(7),
    ];
    let mut priority = fcfs_ordered(QueueOrder::Priority);
    priority.priority.user.insert(UserId(7), 1000.0);
    let cases = vec![
        Case {
            name: "fcfs",
            policy: fcfs_ordered(QueueOrder::Fcfs),
            want: &[(1, 0), (2, 10), (3, 40), (4, 50)],
        },
        Case {
            name: "sjf",
            policy: fcfs_ordered(QueueOrder::Sjf),
            want: &[(1, 0), (2, 40), (3, 10), (4, 20)],
        },
        Case {
            name: "ljf",
            policy: fcfs_ordered(QueueOrder::Ljf),
            want: &[(1, 0), (2, 10), (3, 60), (4, 40)],
        },
        Case {
            name: "priority (user weight)",
            policy: priority,
            want: &[(1, 0), (2, 30), (3, 60), (4, 10)],
        },
        Case {
            name: "priority (default weights: queue time only, so FCFS)",
            policy: fcfs_ordered(QueueOrder::Priority),
            want: &[(1, 0), (2, 10), (3, 40), (4, 50)],
        },
    ];
    check_cases(4, &[], &jobs, cases);
}

#[test]
fn sjf_with_easy_keeps_a_reservation_once_given() {
    // capacity 4: A 4p [0,10); at 1 J2 (4p, 30 s) is reserved @10 (alone in the queue);
    // J3 (4p, 10 s) at 2 is shorter but the reservation already belongs to J2.
    // (1 column = 5 s)   A ##   J2 ..######   J3 ........##
    let mut p = Policy::easy();
    p.order = QueueOrder::Sjf;
    let jobs = vec![
        spec(1, 0, 4, 10, 10),
        spec(2, 1, 4, 30, 30),
        spec(3, 2, 4, 10, 10),
    ];
    check_cases(
        4,
        &[],
        &jobs,
        vec![Case {
            name: "easy sjf",
            policy: p,
            want: &[(1, 0), (2, 10), (3, 40)],
        }],
    );
}

// ---------------------------------------------------------------------------------------
// Administrative reservations.
//
// capacity 4; reservation 1 holds 2 processors on [10,30) for user 7.
//                       submit procs est run  user
//   1 J1                   0     4    5   5     0
//   2 J2                   1     4   10  10     0
//   3 J3                  12     2   15  15     7
//   4 J4                  13     2   15  15     0
//   5 J5                  14     2   10  10     7
//
// scale: 1 column = 5 s; R1 is the reservation's window [10,30).
// EASY: J2 cannot use the machine idle from 5 to 30 (the window takes 2 of 4): r@30.
// J3 (user 7) runs inside the reservation at 12; J4 (not admitted) in the other 2 pool
// processors [13,28), ending before J2's reservation; J5 finds both full, and at 27/28 its 10 s
// no longer fit the window nor before J2, so it runs after J2.
//   R1   ====
//   J1 #
//   J2 ......##
//   J3   ###          (in the reservation)
//   J4   ###
//   J5   ......##
// FCFS: J2 blocks the queue until 30; the window is over at 40 so J3 runs in the pool.
//   R1   ====
//   J2 ......##
//   J3   ......###
//   J4   ......###
//   J5   .........##
// ---------------------------------------------------------------------------------------

fn admin_jobs() -> Vec<Spec> {
    vec![
        spec(1, 0, 4, 5, 5),
        spec(2, 1, 4, 10, 10),
        spec(3, 12, 2, 15, 15).user(7),
        spec(4, 13, 2, 15, 15),
        spec(5, 14, 2, 10, 10).user(7),
    ]
}

#[test]
fn administrative_reservation_blocks_others_and_admits_its_acl() {
    let res = vec![admin(1, 2, 10, 30, Acl::users([UserId(7)]))];
    let cases = vec![
        Case {
            name: "easy",
            policy: Policy::easy(),
            want: &[(1, 0), (2, 30), (3, 12), (4, 13), (5, 40)],
        },
        Case {
            name: "fcfs",
            policy: Policy::fcfs(),
            want: &[(1, 0), (2, 30), (3, 40), (4, 40), (5, 55)],
        },
    ];
    check_cases(4, &res, &admin_jobs(), cases);

    let world = World {
        capacity: 4,
        policy: Policy::easy(),
        reservations: res,
        jobs: admin_jobs(),
    };
    let out = run(&world);
    let inside = Domain::Reservation(ReservationId(1));
    assert_eq!(
        out.record(3).domain,
        Some(inside),
        "J3 runs inside the reservation"
    );
    for id in [1, 2, 4, 5] {
        assert_eq!(
            out.record(id).domain,
            Some(Domain::Pool),
            "J{id} runs in the pool"
        );
    }
}

#[test]
fn maintenance_window_admits_nobody() {
    // capacity 4; reservation 9 takes all 4 processors on [10,20) for nobody.
    //   1: submit 0, 2p, est 15   2: submit 0, 2p, est 10
    // fcfs: 1 cannot end before 10, so both wait for 20.   easy: 1 r@20, 2 [0,10) fits.
    let res = vec![admin(9, 4, 10, 20, Acl::nobody())];
    let jobs = vec![spec(1, 0, 2, 15, 15), spec(2, 0, 2, 10, 10)];
    let cases = vec![
        Case {
            name: "fcfs",
            policy: Policy::fcfs(),
            want: &[(1, 20), (2, 20)],
        },
        Case {
            name: "easy",
            policy: Policy::easy(),
            want: &[(1, 20), (2, 0)],
        },
        Case {
            name: "firstfit",
            policy: Policy::first_fit(None),
            want: &[(1, 20), (2, 0)],
        },
    ];
    check_cases(4, &res, &jobs, cases);
}

#[test]
fn acl_admits_by_any_credential_or_by_job() {
    let job = Job::new(JobId(5), Time(0), 1, Dur(1)).with_cred(foresight_core::Credentials {
        user: UserId(1),
        group: foresight_core::GroupId(2),
        account: foresight_core::AccountId(3),
        class: foresight_core::ClassId(4),
        qos: foresight_core::QosId(5),
    });
    let mut cases: Vec<(&str, Acl, bool)> = vec![
        ("nobody", Acl::nobody(), false),
        ("user", Acl::users([UserId(1)]), true),
        ("other user", Acl::users([UserId(9)]), false),
    ];
    let mut a = Acl::nobody();
    a.groups.insert(foresight_core::GroupId(2));
    cases.push(("group", a, true));
    let mut a = Acl::nobody();
    a.accounts.insert(foresight_core::AccountId(3));
    cases.push(("account", a, true));
    let mut a = Acl::nobody();
    a.classes.insert(foresight_core::ClassId(4));
    cases.push(("class", a, true));
    let mut a = Acl::nobody();
    a.qos.insert(foresight_core::QosId(5));
    cases.push(("qos", a, true));
    let mut a = Acl::nobody();
    a.job = Some(JobId(5));
    cases.push(("job", a, true));
    let mut a = Acl::nobody();
    a.job = Some(JobId(6));
    cases.push(("other job", a, false));
    for (name, acl, want) in cases {
        assert_eq!(acl.admits(&job), want, "{name}");
    }
}

// ---------------------------------------------------------------------------------------
// A job bound to a reservation.
//
// capacity 4; reservation 1 holds 2 processors on [20,40) for job 2 only.
//   1 J1: submit 0, `j1` processors, est 10        2 J2: submit 1, 2p, est 10, bound to 1
//
// scale: 1 column = 5 s; R1 is the reservation's window [20,40).
//   R1 ....====
// not early, J1 2p or 4p: J2 starts exactly at 20 inside the reservation.
//   J2 ....##
// early, J1 2p: the other 2 pool processors are free at 1: J2 [1,11) in the pool.
//   J2 ##
// early, J1 4p: the pool is free at 10 (J1's end), before 20: J2 [10,20) in the pool.
//   J2 ..##
// ---------------------------------------------------------------------------------------

#[test]
fn job_bound_to_a_reservation_starts_at_its_start_unless_it_may_start_early() {
    struct BoundCase {
        name: &'static str,
        policy: Policy,
        j1_procs: u32,
        early: bool,
        want_start: i64,
        want_domain: Domain,
    }
    let inside = Domain::Reservation(ReservationId(1));
    let cases = vec![
        BoundCase {
            name: "easy, not early, machine half busy",
            policy: Policy::easy(),
            j1_procs: 2,
            early: false,
            want_start: 20,
            want_domain: inside,
        },
        BoundCase {
            name: "easy, not early, machine full",
            policy: Policy::easy(),
            j1_procs: 4,
            early: false,
            want_start: 20,
            want_domain: inside,
        },
        BoundCase {
            name: "easy, early, machine half busy",
            policy: Policy::easy(),
            j1_procs: 2,
            early: true,
            want_start: 1,
            want_domain: Domain::Pool,
        },
        BoundCase {
            name: "easy, early, machine full",
            policy: Policy::easy(),
            j1_procs: 4,
            early: true,
            want_start: 10,
            want_domain: Domain::Pool,
        },
        BoundCase {
            name: "fcfs, not early, machine full",
            policy: Policy::fcfs(),
            j1_procs: 4,
            early: false,
            want_start: 20,
            want_domain: inside,
        },
        BoundCase {
            name: "fcfs, early, machine full",
            policy: Policy::fcfs(),
            j1_procs: 4,
            early: true,
            want_start: 10,
            want_domain: Domain::Pool,
        },
        BoundCase {
            name: "conservative, not early, machine half busy",
            policy: Policy::conservative(),
            j1_procs: 2,
            early: false,
            want_start: 20,
            want_domain: inside,
        },
        BoundCase {
            name: "firstfit, early, machine half busy",
            policy: Policy::first_fit(None),
            j1_procs: 2,
            early: true,
            want_start: 1,
            want_domain: Domain::Pool,
        },
    ];
    let mut acl = Acl::nobody();
    acl.job = Some(JobId(2));
    let res = vec![admin(1, 2, 20, 40, acl)];
    for c in cases {
        let world = World {
            capacity: 4,
            policy: c.policy,
            reservations: res.clone(),
            jobs: vec![
                spec(1, 0, c.j1_procs, 10, 10),
                spec(2, 1, 2, 10, 10).bound(1, c.early),
            ],
        };
        let out = run(&world);
        assert!(out.errors.is_empty(), "{}: {:?}", c.name, out.errors);
        assert_eq!(out.record(1).start, Some(Time(0)), "{}: J1", c.name);
        let j2 = out.record(2);
        assert_eq!(j2.start, Some(Time(c.want_start)), "{}: J2 start", c.name);
        assert_eq!(j2.domain, Some(c.want_domain), "{}: J2 domain", c.name);
        assert!(j2.end.is_some(), "{}: J2 finished", c.name);
    }
}

// ---------------------------------------------------------------------------------------
// Compression and pyss timing.
//
// capacity 4; A: 0, 4p, est 100, run 10 (ends 90 s early); B: 1, 4p, est 10;
// C: 2, 2p, est 50; D: 3, 2p, est 5.
// conservative: B r@100, C r@110, D r@110 (beside C). At 10 A ends: compression in queue
// order moves B @10 (starts), C @20, D @20.
// EASY: B r@100 moved @10 at 10, where it starts and frees the one reservation: C r@20;
// D fits beside C at 20 (B's end).
// EASY with pyss timing: B's submission finds no free processor, so no pass and B is never
// reserved; at 10 B starts and C r@20 as above; the same starts.
// ---------------------------------------------------------------------------------------

#[test]
fn compression_moves_reservations_earlier_in_queue_order() {
    let jobs = vec![
        spec(1, 0, 4, 100, 10),
        spec(2, 1, 4, 10, 10),
        spec(3, 2, 2, 50, 50),
        spec(4, 3, 2, 5, 5),
    ];
    let want: &[(u64, i64)] = &[(1, 0), (2, 10), (3, 20), (4, 20)];
    let world = |policy| World {
        capacity: 4,
        policy,
        reservations: vec![],
        jobs: jobs.clone(),
    };
    let cons = run(&world(Policy::conservative()));
    assert_eq!(cons.starts(), want, "conservative");
    assert_eq!(
        cons.reserves(),
        vec![
            (1, 2, 100),
            (2, 3, 110),
            (3, 4, 110),
            (10, 2, 10),
            (10, 3, 20),
            (10, 4, 20)
        ],
        "conservative reserves"
    );
    let easy = run(&world(Policy::easy()));
    assert_eq!(easy.starts(), want, "easy");
    assert_eq!(
        easy.reserves(),
        vec![(1, 2, 100), (10, 2, 10), (10, 3, 20)],
        "easy reserves"
    );
    let pyss = run(&world(Policy::easy().pyss_timing()));
    assert_eq!(pyss.starts(), want, "easy pyss");
    assert_eq!(
        pyss.reserves(),
        vec![(10, 3, 20)],
        "easy pyss: no pass on a blocked submission, so B is never reserved"
    );
    let cons_pyss = run(&world(Policy::conservative().pyss_timing()));
    assert_eq!(cons_pyss.starts(), want, "conservative pyss");
    assert_eq!(
        cons_pyss.reserves(),
        cons.reserves(),
        "conservative pyss reserves"
    );
    let fcfs = run(&world(Policy::fcfs().pyss_timing()));
    assert_eq!(fcfs.starts(), want, "fcfs pyss");
}

// ---------------------------------------------------------------------------------------
// Errors.
// ---------------------------------------------------------------------------------------

fn submit(s: &mut LocalScheduler, now: i64, job: Job) -> Result<Vec<Action>, CoreError> {
    let mut out = Vec::new();
    s.handle(Time(now), Event::Submit(job), &mut out)
        .map(|()| out)
}

#[test]
fn invalid_jobs_are_refused_and_leave_the_scheduler_unchanged() {
    let mut s = LocalScheduler::new(4, Policy::easy());
    s.add_reservation(admin(1, 2, 100, 200, Acl::users([UserId(7)])))
        .unwrap();
    submit(&mut s, 0, Job::new(JobId(1), Time(0), 3, Dur(50))).unwrap();
    let pool = s.pool().clone();
    let job = |id: u64, procs: u32, est: i64| Job::new(JobId(id), Time(1), procs, Dur(est));
    let cases: Vec<(&str, Job, CoreError)> = vec![
        (
            "too large",
            job(2, 5, 10),
            CoreError::TooLarge {
                job: JobId(2),
                procs: 5,
                capacity: 4,
            },
        ),
        (
            "zero estimate",
            job(3, 1, 0),
            CoreError::InvalidJob {
                job: JobId(3),
                field: "estimate",
                reason: "must be positive, got 0".into(),
            },
        ),
        (
            "negative estimate",
            job(4, 1, -5),
            CoreError::InvalidJob {
                job: JobId(4),
                field: "estimate",
                reason: "must be positive, got -5".into(),
            },
        ),
        (
            "zero procs",
            job(5, 0, 10),
            CoreError::InvalidJob {
                job: JobId(5),
                field: "procs",
                reason: "must be at least 1".into(),
            },
        ),
        (
            "duplicate of a running job",
            job(1, 1, 10),
            CoreError::DuplicateJob(JobId(1)),
        ),
        (
            "unknown reservation",
            job(6, 1, 10).in_reservation(ReservationId(9), false),
            CoreError::UnknownReservation(ReservationId(9)),
        ),
        (
            "not admitted",
            job(7, 1, 10).in_reservation(ReservationId(1), false),
            CoreError::NotAdmitted {
                job: JobId(7),
                reservation: ReservationId(1),
            },
        ),
    ];
    for (name, job, want) in cases {
        let err = submit(&mut s, 1, job).expect_err(name);
        assert_eq!(err, want, "{name}");
        assert_eq!(
            (s.waiting(), s.running()),
            (0, 1),
            "{name}: queue unchanged"
        );
        assert_eq!(s.pool(), &pool, "{name}: pool unchanged");
    }
    // Too many processors for the reservation, or longer than its window.
    for (name, procs, est) in [("procs", 3, 10), ("window", 1, 101)] {
        let j = job(8, procs, est)
            .with_user(UserId(7))
            .in_reservation(ReservationId(1), false);
        let err = submit(&mut s, 1, j.clone()).expect_err(name);
        assert!(
            matches!(err, CoreError::DoesNotFit { job: JobId(8), .. }),
            "{name}: {err:?}"
        );
        // May start early: no fit check, since it may run in the pool.
        let mut early = j;
        early.may_start_early = true;
        early.id = JobId(if procs == 3 { 9 } else { 10 });
        assert!(
            submit(&mut s, 1, early).is_ok(),
            "{name}: early binding accepted"
        );
    }
}

#[test]
fn duplicate_waiting_job_is_refused() {
    let mut s = LocalScheduler::new(2, Policy::fcfs());
    submit(&mut s, 0, Job::new(JobId(1), Time(0), 2, Dur(10))).unwrap();
    submit(&mut s, 0, Job::new(JobId(2), Time(0), 2, Dur(10))).unwrap();
    assert_eq!(s.waiting(), 1);
    let err = submit(&mut s, 1, Job::new(JobId(2), Time(1), 1, Dur(5))).unwrap_err();
    assert_eq!(err, CoreError::DuplicateJob(JobId(2)));
    assert_eq!(s.waiting(), 1);
}

#[test]
fn finishing_an_unknown_or_waiting_job_is_an_error() {
    let mut s = LocalScheduler::new(2, Policy::fcfs());
    let mut out = Vec::new();
    assert_eq!(
        s.handle(Time(0), Event::Finish(JobId(42)), &mut out),
        Err(CoreError::UnknownJob(JobId(42)))
    );
    submit(&mut s, 0, Job::new(JobId(1), Time(0), 2, Dur(10))).unwrap();
    submit(&mut s, 0, Job::new(JobId(2), Time(0), 1, Dur(10))).unwrap();
    let pool = s.pool().clone();
    assert_eq!(
        s.handle(Time(1), Event::Finish(JobId(2)), &mut out),
        Err(CoreError::NotRunning(JobId(2)))
    );
    assert_eq!(s.pool(), &pool);
    // Finishing twice: the second time the job is gone.
    s.handle(Time(5), Event::Finish(JobId(1)), &mut out)
        .unwrap();
    assert_eq!(
        s.handle(Time(6), Event::Finish(JobId(1)), &mut out),
        Err(CoreError::UnknownJob(JobId(1)))
    );
    assert_eq!(
        out,
        vec![Action::Start {
            job: JobId(2),
            procs: 1,
            domain: Domain::Pool
        }],
        "only the successful finish started the next job"
    );
}

#[test]
fn conflicting_or_duplicate_administrative_reservations_are_refused() {
    let mut s = LocalScheduler::new(4, Policy::easy());
    submit(&mut s, 0, Job::new(JobId(1), Time(0), 3, Dur(50))).unwrap();
    // Only 1 processor is free until 50.
    let err = s
        .add_reservation(admin(1, 2, 40, 60, Acl::nobody()))
        .unwrap_err();
    assert_eq!(
        err,
        CoreError::ReservationConflict {
            reservation: ReservationId(1),
            procs: 2,
            start: Time(40),
            free: 1,
        }
    );
    s.add_reservation(admin(1, 2, 50, 60, Acl::nobody()))
        .unwrap();
    assert_eq!(
        s.add_reservation(admin(1, 1, 70, 80, Acl::nobody())),
        Err(CoreError::DuplicateReservation(ReservationId(1)))
    );
    // Two reservations may share the machine while the sum fits.
    s.add_reservation(admin(2, 2, 55, 65, Acl::nobody()))
        .unwrap();
    assert!(s
        .add_reservation(admin(3, 1, 55, 56, Acl::nobody()))
        .is_err());
    assert!(s.pool().is_consistent());
    assert_eq!(s.reservations().count(), 2);
}

/// The driver itself: a job killed at its estimate, and starts are reported once.
#[test]
fn driver_kills_a_job_at_its_estimate() {
    let world = World {
        capacity: 1,
        policy: Policy::fcfs(),
        reservations: vec![],
        jobs: vec![spec(1, 0, 1, 10, 25), spec(2, 3, 1, 5, 5)],
    };
    let out: Outcome = run(&world);
    assert_eq!(out.record(1).end, Some(Time(10)));
    assert_eq!(out.starts(), vec![(1, 0), (2, 10)]);
    assert_eq!(out.record(2).end, Some(Time(15)));
}
