//! Property tests: every policy, on random small workloads with administrative reservations
//! and jobs bound to them, keeps the scheduling invariants (STYLE.md §8):
//! - at no instant are more processors in use than the cluster has;
//! - no job starts before its submission, and every job starts and finishes;
//! - administrative reservations are never violated: during a window, the processors of the
//!   jobs its ACL does not admit plus the reservation's own never exceed the capacity; jobs
//!   run inside a reservation only within its window, within its processors and if admitted;
//! - a reservation never moves later, and a reserved job starts exactly at its (last)
//!   reserved start; under EASY (depth 1) the head job therefore never starts after the first
//!   start it was promised; no more than `reservation_depth` jobs hold a reservation at once;
//! - the same input gives the same schedule, and a world without administrative
//!   reservations gets the same schedule from the scheduler's fast paths as from the general
//!   ones;
//! - after every event the pool profile is consistent and equals the one rebuilt from the
//!   running jobs, the job reservations and the administrative reservations;
//! - all of the above that still applies holds when jobs are cancelled (waiting or running)
//!   and administrative reservations are removed during the run;
//! - with runtime predictions (jobs planned shorter than their estimate, corrected when they
//!   outlive the plan): kills stay at the estimate, capacity and the pool hold, and a
//!   reservation moves later, or its job starts after its first promise, only across a
//!   correction.

use crate::common::{run, run_checked, run_disrupted, Disruptions, Outcome, Spec, World};
use foresight_core::policy::ALL;
use foresight_core::{
    Acl, AdminReservation, BackfillChoice, BackfillMetric, BackfillOrder, CoreError, Domain, Dur,
    Interval, Job, JobId, LocalScheduler, Policy, QueueOrder, ReservationId, Time, UserId,
};
use proptest::prelude::*;
use std::collections::BTreeSet;

const CASES: u32 = 256;

#[derive(Clone, Debug)]
struct JobGen {
    gap: i64,
    procs: u32,
    estimate: i64,
    runtime: i64,
    user: u32,
    bind: Option<(usize, bool)>,
}

#[derive(Clone, Debug)]
struct ResGen {
    procs: u32,
    start: i64,
    len: i64,
    kind: u8,
    user: u32,
    job: usize,
}

fn job_gen() -> impl Strategy<Value = JobGen> {
    (
        0i64..12,
        1u32..=16,
        1i64..=60,
        1i64..=60,
        0u32..4,
        proptest::option::weighted(0.2, (0usize..4, any::<bool>())),
    )
        .prop_map(|(gap, procs, estimate, runtime, user, bind)| JobGen {
            gap,
            procs,
            estimate,
            runtime,
            user,
            bind,
        })
}

fn res_gen() -> impl Strategy<Value = ResGen> {
    (1u32..=16, 0i64..200, 1i64..100, 0u8..4, 0u32..4, 0usize..40).prop_map(
        |(procs, start, len, kind, user, job)| ResGen {
            procs,
            start,
            len,
            kind,
            user,
            job,
        },
    )
}

/// Capacity, jobs and administrative reservations; the policy is set by each test.
fn workload() -> impl Strategy<Value = World> {
    (
        1u32..=16,
        proptest::collection::vec(job_gen(), 1..40),
        // Half the worlds have no administrative reservation: the scheduler's fast paths
        // (horizon lookups, compression pre-check) only run then.
        prop_oneof![Just(Vec::new()), proptest::collection::vec(res_gen(), 1..4)],
    )
        .prop_map(|(capacity, jobs, res)| build(capacity, &jobs, &res))
}

fn build(capacity: u32, jobs: &[JobGen], res: &[ResGen]) -> World {
    let clamp = |p: u32| 1 + (p - 1) % capacity;
    // Keep only the reservations the cluster accepts (they never conflict with jobs at 0).
    let mut probe = LocalScheduler::new(capacity, Policy::fcfs());
    let mut reservations = Vec::new();
    for (k, r) in res.iter().enumerate() {
        let acl = match r.kind {
            0 => Acl::nobody(),
            1 => Acl::users([UserId(r.user)]),
            2 => Acl::users([UserId(r.user), UserId((r.user + 1) % 4)]),
            _ => Acl {
                job: Some(JobId(1 + (r.job % jobs.len()) as u64)),
                ..Acl::default()
            },
        };
        let a = AdminReservation {
            id: ReservationId(k as u64 + 1),
            procs: clamp(r.procs),
            window: Interval::new(Time(r.start), Time(r.start + r.len)),
            acl,
        };
        if probe.add_reservation(a.clone()).is_ok() {
            reservations.push(a);
        }
    }
    let mut t = 0;
    let mut specs = Vec::new();
    for (k, g) in jobs.iter().enumerate() {
        t += g.gap;
        let id = JobId(k as u64 + 1);
        let mut procs = clamp(g.procs);
        let mut estimate = g.estimate;
        let mut user = g.user;
        let mut binding = None;
        if let Some((ri, early)) = g.bind {
            if !reservations.is_empty() {
                let r = &reservations[ri % reservations.len()];
                let admitted = if let Some(&u) = r.acl.users.iter().next() {
                    user = u.0;
                    true
                } else {
                    r.acl.job == Some(id)
                };
                if admitted {
                    if !early {
                        procs = procs.min(r.procs);
                        estimate = estimate.min(r.window.len().as_secs());
                    }
                    binding = Some((r.id, early));
                }
            }
        }
        let mut job = Job::new(id, Time(t), procs, Dur(estimate)).with_user(UserId(user));
        if let Some((rid, early)) = binding {
            job = job.in_reservation(rid, early);
        }
        specs.push(Spec {
            job,
            runtime: 1 + (g.runtime - 1) % estimate,
        });
    }
    World {
        capacity,
        policy: Policy::fcfs(),
        reservations,
        jobs: specs,
    }
}

/// Checks run after every event.
fn check_state(s: &LocalScheduler, now: Time, admin: &[AdminReservation]) {
    let pool = s.pool();
    assert!(
        pool.is_consistent(),
        "pool inconsistent at {now}: {:?}",
        pool.steps()
    );
    let depth = s.policy().reservation_depth;
    let held = s.job_reservations().count();
    assert!(
        depth == ALL || held <= depth as usize,
        "{held} job reservations with depth {depth} at {now}"
    );
    // Rebuild the pool from what the scheduler says it holds, at every breakpoint from now.
    let running: Vec<_> = s.running_jobs().collect();
    let reserved: Vec<_> = s.job_reservations().collect();
    let mut points: BTreeSet<Time> = BTreeSet::new();
    points.insert(now);
    points.extend(pool.steps().iter().map(|st| st.at).filter(|&t| t >= now));
    for (_, _, p) in running.iter().chain(&reserved) {
        points.extend([p.start, p.end]);
    }
    for r in admin {
        points.extend([r.window.start, r.window.end]);
    }
    for &t in points.range(now..) {
        let mut want = i64::from(s.capacity());
        for (_, procs, p) in running.iter().chain(&reserved) {
            if p.domain == Domain::Pool && p.start <= t && t < p.end {
                want -= i64::from(*procs);
            }
        }
        for r in admin {
            if r.window.contains(t) {
                want -= i64::from(r.procs);
            }
        }
        assert_eq!(pool.free_at(t), want, "pool free at {t} (now {now})");
    }
    for (id, _, p) in &reserved {
        assert!(p.start >= now, "job {id} holds a reservation in the past");
    }
}

/// Processors in use at `t` by the jobs `pick` selects.
fn used_at(world: &World, out: &Outcome, t: Time, pick: impl Fn(&Job, Domain) -> bool) -> i64 {
    world
        .jobs
        .iter()
        .filter_map(|s| {
            let r = out.records.get(&s.job.id)?;
            let (start, end, domain) = (r.start?, r.end?, r.domain?);
            (start <= t && t < end && pick(&s.job, domain)).then_some(i64::from(s.job.procs))
        })
        .sum()
}

fn check_policy(mut world: World, policy: Policy) -> Result<(), TestCaseError> {
    world.policy = policy;
    let admin = world.reservations.clone();
    let mut last = (usize::MAX, usize::MAX);
    let out = run_checked(&world, |s, now| {
        check_state(s, now, &admin);
        last = (s.waiting(), s.running());
    });
    let name = world.policy.name();
    prop_assert!(out.errors.is_empty(), "{}: errors {:?}", name, out.errors);
    prop_assert!(
        out.refused.is_empty(),
        "{}: refused {:?}",
        name,
        out.refused
    );
    prop_assert_eq!(
        last,
        (0, 0),
        "{}: the scheduler is not empty at the end",
        name
    );

    // Every job starts after its submission and finishes within its estimate.
    let mut points: BTreeSet<Time> = BTreeSet::new();
    for s in &world.jobs {
        let r = out.record(s.job.id.0);
        let (Some(start), Some(end)) = (r.start, r.end) else {
            return Err(TestCaseError::fail(format!(
                "{name}: job {} never ran: {r:?}",
                s.job.id
            )));
        };
        prop_assert!(
            start >= s.job.submit,
            "{}: job {} starts before submission",
            name,
            s.job.id
        );
        prop_assert_eq!(end, start + Dur(s.runtime.min(s.job.estimate.as_secs())));
        points.insert(start);

        // Reservations never move later; a reserved job starts exactly at its last one.
        let starts: Vec<Time> = r.reserves.iter().map(|&(_, at)| at).collect();
        prop_assert!(
            starts.windows(2).all(|w| w[1] <= w[0]),
            "{}: job {} reservation moved later: {:?}",
            name,
            s.job.id,
            r.reserves
        );
        if let (Some(first), Some(last)) = (starts.first(), starts.last()) {
            prop_assert!(
                start <= *first,
                "{}: job {} after its first reservation",
                name,
                s.job.id
            );
            prop_assert_eq!(
                start,
                *last,
                "{}: job {} not at its reservation",
                name,
                s.job.id
            );
        }
        if world.policy.reservation_depth == 0 {
            prop_assert!(
                starts.is_empty(),
                "{}: depth 0 reserved job {}",
                name,
                s.job.id
            );
        }

        // Inside an administrative reservation: admitted, within its window and processors.
        if let Some(Domain::Reservation(rid)) = r.domain {
            let res = admin
                .iter()
                .find(|a| a.id == rid)
                .expect("known reservation");
            prop_assert!(
                res.acl.admits(&s.job) || s.job.reservation == Some(rid),
                "{}: job {} not admitted by {}",
                name,
                s.job.id,
                rid
            );
            prop_assert!(
                res.window.start <= start && start + s.job.estimate <= res.window.end,
                "{}: job {} outside the window of {}",
                name,
                s.job.id,
                rid
            );
        }
    }
    for r in &admin {
        points.insert(r.window.start);
    }

    for &t in &points {
        // Capacity.
        let used = used_at(&world, &out, t, |_, _| true);
        prop_assert!(
            used <= i64::from(world.capacity),
            "{}: {} used at {}",
            name,
            used,
            t
        );
        // Administrative reservations.
        let mut held = 0;
        for r in admin.iter().filter(|r| r.window.contains(t)) {
            held += i64::from(r.procs);
            let others = used_at(&world, &out, t, |j, _| !r.acl.admits(j));
            prop_assert!(
                others + i64::from(r.procs) <= i64::from(world.capacity),
                "{}: reservation {} violated at {}: {} used by others",
                name,
                r.id,
                t,
                others
            );
            let inside = used_at(&world, &out, t, |_, d| d == Domain::Reservation(r.id));
            prop_assert!(
                inside <= i64::from(r.procs),
                "{}: {} over-used at {}",
                name,
                r.id,
                t
            );
        }
        let in_pool = used_at(&world, &out, t, |_, d| d == Domain::Pool);
        prop_assert!(
            in_pool + held <= i64::from(world.capacity),
            "{}: pool jobs {} + held {} at {}",
            name,
            in_pool,
            held,
            t
        );
    }

    // Determinism.
    let again = run(&world);
    prop_assert!(
        again == out,
        "{}: the same input gave another schedule",
        name
    );

    // The fast paths taken without administrative reservations agree with the general
    // ones: a reservation of no processors that admits nobody, after the end of the run,
    // changes nothing but forces the general paths.
    if admin.is_empty() {
        let mut slow = world.clone();
        slow.reservations.push(AdminReservation {
            id: ReservationId(99),
            procs: 0,
            window: Interval::new(Time(1_000_000), Time(1_000_001)),
            acl: Acl::nobody(),
        });
        let general = run(&slow);
        prop_assert!(general.errors.is_empty() && general.refused.is_empty());
        prop_assert!(
            general.log == out.log,
            "{}: general and fast paths differ:\n{:?}\n{:?}",
            name,
            general.log,
            out.log
        );
    }
    Ok(())
}

fn with(mut p: Policy, f: impl FnOnce(&mut Policy)) -> Policy {
    f(&mut p);
    p
}

fn backfill(choice: BackfillChoice, metric: BackfillMetric) -> Policy {
    with(Policy::easy(), |p| {
        p.backfill = choice;
        p.metric = metric;
    })
}

fn ordered(base: Policy, order: QueueOrder) -> Policy {
    with(base, |p| p.order = order)
}

/// Multi-factor priority exercising every factor, fairshare included.
fn multi_factor(base: Policy) -> Policy {
    with(base, |p| {
        p.order = QueueOrder::Priority;
        p.priority.queue_time = 1.0;
        p.priority.expansion_factor = 2.0;
        p.priority.procs = 0.5;
        p.priority.fairshare = 10.0;
        p.priority.fairshare_half_life = Dur(100);
        p.priority.user.insert(UserId(2), 5.0);
    })
}

macro_rules! policy_props {
    ($($name:ident => $policy:expr;)*) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(CASES))]
            $(
                #[test]
                fn $name(world in workload()) {
                    check_policy(world, $policy)?;
                }
            )*
        }
    };
}

policy_props! {
    fcfs => Policy::fcfs();
    fcfs_pyss => Policy::fcfs().pyss_timing();
    firstfit => Policy::first_fit(None);
    firstfit_cap_2 => Policy::first_fit(Some(2));
    firstfit_bestfit_depth_0 => with(Policy::first_fit(None), |p| p.backfill = BackfillChoice::BestFit);
    easy => Policy::easy();
    easy_pyss => Policy::easy().pyss_timing();
    conservative => Policy::conservative();
    conservative_pyss => Policy::conservative().pyss_timing();
    depth_3 => Policy::depth(3);
    bestfit_procs => backfill(BackfillChoice::BestFit, BackfillMetric::Procs);
    bestfit_walltime => backfill(BackfillChoice::BestFit, BackfillMetric::Walltime);
    bestfit_procseconds => backfill(BackfillChoice::BestFit, BackfillMetric::ProcSeconds);
    greedy_procs => backfill(BackfillChoice::Greedy, BackfillMetric::Procs);
    greedy_walltime => backfill(BackfillChoice::Greedy, BackfillMetric::Walltime);
    greedy_procseconds => backfill(BackfillChoice::Greedy, BackfillMetric::ProcSeconds);
    easy_sjf => ordered(Policy::easy(), QueueOrder::Sjf);
    easy_ljf => ordered(Policy::easy(), QueueOrder::Ljf);
    easy_priority => multi_factor(Policy::easy());
    conservative_sjf => ordered(Policy::conservative(), QueueOrder::Sjf);
    conservative_priority => multi_factor(Policy::conservative());
    fcfs_ljf => ordered(Policy::fcfs(), QueueOrder::Ljf);
    firstfit_priority => multi_factor(Policy::first_fit(Some(2)));
}

/// Cancellations `(job index, delay after submission)` and removals `(reservation index,
/// time)`, applied to a world.
fn disruptions(world: &World, cancels: &[(usize, i64)], removals: &[(usize, i64)]) -> Disruptions {
    let mut d = Disruptions::default();
    for &(k, delay) in cancels {
        let job = &world.jobs[k % world.jobs.len()].job;
        d.cancels.push((job.submit.0 + delay, job.id));
    }
    if !world.reservations.is_empty() {
        let mut removed = BTreeSet::new();
        for &(k, at) in removals {
            let id = world.reservations[k % world.reservations.len()].id;
            if removed.insert(id) {
                d.removals.push((at, id));
            }
        }
    }
    d
}

fn check_disrupted(
    mut world: World,
    policy: Policy,
    cancels: &[(usize, i64)],
    removals: &[(usize, i64)],
) -> Result<(), TestCaseError> {
    world.policy = policy;
    let d = disruptions(&world, cancels, removals);
    let mut last = (usize::MAX, usize::MAX);
    let out = run_disrupted(&world, &d, |s, now| {
        let admin: Vec<AdminReservation> = s.reservations().cloned().collect();
        check_state(s, now, &admin);
        last = (s.waiting(), s.running());
    });
    let name = world.policy.name();
    // The only refusal expected: a job submitted bound to a reservation removed before.
    let mut refused = BTreeSet::new();
    for (at, id, e) in &out.errors {
        let job = &world.jobs[(id.0 - 1) as usize].job;
        let removed_before = |rid| d.removals.iter().any(|&(t, r)| r == rid && Time(t) <= *at);
        prop_assert!(
            matches!(e, CoreError::UnknownReservation(rid)
                if job.reservation == Some(*rid) && removed_before(*rid) && job.submit == *at),
            "{}: error {:?} at {} for job {}",
            name,
            e,
            at,
            id
        );
        refused.insert(*id);
    }
    prop_assert!(
        out.refused.is_empty(),
        "{}: refused {:?}",
        name,
        out.refused
    );
    prop_assert_eq!(
        last,
        (0, 0),
        "{}: the scheduler is not empty at the end",
        name
    );
    let mut points = BTreeSet::new();
    for s in world.jobs.iter().filter(|s| !refused.contains(&s.job.id)) {
        let r = out.record(s.job.id.0);
        match (r.start, r.end, r.cancelled) {
            (None, None, Some(_)) => {} // cancelled while waiting
            (Some(start), Some(end), cancelled) => {
                prop_assert!(start >= s.job.submit, "{}: job {} early", name, s.job.id);
                let natural = start + Dur(s.runtime.min(s.job.estimate.as_secs()));
                match cancelled {
                    Some(at) => prop_assert!(end == at && at <= natural),
                    None => prop_assert_eq!(end, natural),
                }
                points.insert(start);
            }
            other => {
                return Err(TestCaseError::fail(format!(
                    "{name}: job {} ended as {other:?}",
                    s.job.id
                )))
            }
        }
    }
    for &t in &points {
        let used = used_at(&world, &out, t, |_, _| true);
        prop_assert!(
            used <= i64::from(world.capacity),
            "{}: {} used at {}",
            name,
            used,
            t
        );
    }
    let again = run_disrupted(&world, &d, |_, _| {});
    prop_assert!(
        again == out,
        "{}: the same input gave another schedule",
        name
    );
    Ok(())
}

macro_rules! disrupted_props {
    ($($name:ident => $policy:expr;)*) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(CASES))]
            $(
                #[test]
                fn $name(
                    world in workload(),
                    cancels in proptest::collection::vec((0usize..40, 1i64..80), 0..6),
                    removals in proptest::collection::vec((0usize..4, 0i64..300), 0..3),
                ) {
                    check_disrupted(world, $policy, &cancels, &removals)?;
                }
            )*
        }
    };
}

disrupted_props! {
    disrupted_fcfs => Policy::fcfs();
    disrupted_firstfit_cap_2 => Policy::first_fit(Some(2));
    disrupted_easy => Policy::easy();
    disrupted_easy_pyss => Policy::easy().pyss_timing();
    disrupted_conservative => Policy::conservative();
    disrupted_conservative_pyss => Policy::conservative().pyss_timing();
    disrupted_depth_3 => Policy::depth(3);
    disrupted_bestfit => backfill(BackfillChoice::BestFit, BackfillMetric::ProcSeconds);
    disrupted_greedy => backfill(BackfillChoice::Greedy, BackfillMetric::Procs);
    disrupted_priority => multi_factor(Policy::easy());
}

/// Worlds without administrative reservations whose jobs carry predictions, some too short
/// (the job outlives them and is corrected), some exact, some missing.
fn predicted_workload() -> impl Strategy<Value = World> {
    (
        1u32..=16,
        proptest::collection::vec((job_gen(), 0u8..4, 1i64..=60), 1..40),
    )
        .prop_map(|(capacity, gens)| {
            let jobs: Vec<JobGen> = gens
                .iter()
                .map(|(g, _, _)| JobGen {
                    bind: None,
                    ..g.clone()
                })
                .collect();
            let mut world = build(capacity, &jobs, &[]);
            for (s, (_, kind, guess)) in world.jobs.iter_mut().zip(&gens) {
                let prediction = match kind {
                    0 => None,
                    1 => Some(s.runtime),
                    _ => Some(1 + (guess - 1) % s.job.estimate.as_secs()),
                };
                s.job = s.job.clone().with_prediction(prediction.map(Dur));
            }
            world
        })
}

/// The invariants with predictions: every job runs and is killed at its estimate at the
/// latest, no instant uses more processors than the cluster has, the pool is always the one
/// rebuilt from running jobs (planned to their current plans) and reservations, a reserved
/// job starts exactly at its last reservation, and a reservation moves later, or its job
/// starts after the first start it was promised, only when a correction came in between.
fn check_predicted(mut world: World, policy: Policy) -> Result<(), TestCaseError> {
    world.policy = policy;
    let mut last = (usize::MAX, usize::MAX);
    let out = run_checked(&world, |s, now| {
        check_state(s, now, &[]);
        last = (s.waiting(), s.running());
    });
    let name = format!("{} {:?}", world.policy.name(), world.policy.backfill_order);
    prop_assert!(out.errors.is_empty(), "{}: errors {:?}", name, out.errors);
    prop_assert_eq!(last, (0, 0), "{}: the scheduler is not empty", name);
    let corrected_between = |from: Time, to: Time| {
        out.corrections
            .iter()
            .any(|&(at, _, _)| from <= at && at <= to)
    };
    let mut points = BTreeSet::new();
    for s in &world.jobs {
        let r = out.record(s.job.id.0);
        let (Some(start), Some(end)) = (r.start, r.end) else {
            return Err(TestCaseError::fail(format!(
                "{name}: job {} never ran",
                s.job.id
            )));
        };
        prop_assert!(start >= s.job.submit);
        // Killed at the estimate, whatever the prediction.
        prop_assert_eq!(end, start + Dur(s.runtime.min(s.job.estimate.as_secs())));
        points.insert(start);
        for w in r.reserves.windows(2) {
            let ((t1, s1), (t2, s2)) = (w[0], w[1]);
            prop_assert!(
                s2 <= s1 || corrected_between(t1, t2),
                "{}: job {} reservation moved later without a correction: {:?}",
                name,
                s.job.id,
                r.reserves
            );
        }
        if let (Some(&(t0, first)), Some(&(t1, last))) = (r.reserves.first(), r.reserves.last()) {
            // A correction may take a reservation away; the job is then placed afresh.
            prop_assert!(
                start == last || corrected_between(t1, start),
                "{}: job {} not at its reservation {:?} (start {})",
                name,
                s.job.id,
                r.reserves,
                start
            );
            prop_assert!(
                start <= first || corrected_between(t0, start),
                "{}: job {} delayed past its first reservation {:?} with no correction",
                name,
                s.job.id,
                r.reserves
            );
        }
    }
    for &t in &points {
        let used = used_at(&world, &out, t, |_, _| true);
        prop_assert!(
            used <= i64::from(world.capacity),
            "{}: {} processors used at {}",
            name,
            used,
            t
        );
    }
    prop_assert!(run(&world) == out, "{}: not deterministic", name);
    Ok(())
}

fn spf(p: Policy) -> Policy {
    with(p, |p| p.backfill_order = BackfillOrder::Spf)
}

macro_rules! predicted_props {
    ($($name:ident => $policy:expr;)*) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(CASES))]
            $(
                #[test]
                fn $name(world in predicted_workload()) {
                    check_predicted(world, $policy)?;
                }
            )*
        }
    };
}

predicted_props! {
    predicted_easy => Policy::easy();
    predicted_easy_pyss => Policy::easy().pyss_timing();
    predicted_easy_spf => spf(Policy::easy());
    predicted_depth_3_spf => spf(Policy::depth(3));
    predicted_conservative => Policy::conservative();
    predicted_conservative_spf => spf(Policy::conservative());
    predicted_firstfit_spf => spf(Policy::first_fit(None));
    predicted_bestfit => backfill(BackfillChoice::BestFit, BackfillMetric::Walltime);
    predicted_greedy => backfill(BackfillChoice::Greedy, BackfillMetric::ProcSeconds);
}
