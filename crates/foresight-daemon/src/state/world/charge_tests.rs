//! Charges and budgets on hand-checked cases: every job that runs pays its cluster's tariff
//! for the processors and the time it held, once, and no way of stopping, requeueing,
//! holding or restarting a job gives back time it used.
#![allow(clippy::unwrap_used)]

use super::tests::{cluster, exit, job, launches, world};
use super::*;
use crate::config::ClusterConfig;
use foresight_core::ClusterId;

fn restarted(w: &World, clusters: Vec<ClusterConfig>, now: i64) -> World {
    super::tests::restarted(w, clusters, now).0
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// A global job runs 10 s of its 100, is requeued, and is reserved again behind a local
/// job; the service restarts; holding it then refunds the new reservation only, not the
/// 10 s the first attempt used.
#[test]
fn hold_after_requeue_and_restart_keeps_the_used_share() {
    let mut w = world(vec![cluster("a", 2)]);
    w.accept(Time(1_000), vec![job(1, "bob", 2, 100)]);
    w.cycle(Time(1_000));
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Running);
    launches(&mut w);
    w.requeue(Time(1_010), JobId(1)).unwrap();
    let mut killed = exit(0);
    killed.exit_code = None;
    killed.signal = Some(15);
    w.on_finished(Time(1_010), ClusterId(0), JobId(1), 0, &killed);
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Pending);
    // 2 processors × 10 s used.
    assert!(
        close(w.jobs[&JobId(1)].charged, 20.0),
        "{}",
        w.jobs[&JobId(1)].charged
    );
    // A local job takes the cluster first; the requeued job is reserved behind it.
    let mut local = job(2, "ann", 2, 100);
    local.cluster = Some("a".into());
    w.accept(Time(1_010), vec![local]);
    w.cycle(Time(1_010));
    w.cycle(Time(1_060));
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Reserved);
    assert!(
        close(w.jobs[&JobId(1)].charged, 220.0),
        "{}",
        w.jobs[&JobId(1)].charged
    );
    assert_eq!(w.users["bob"].budget, Some(780.0));
    let mut w2 = restarted(&w, vec![cluster("a", 2)], 1_061);
    w2.hold(Time(1_062), JobId(1)).unwrap();
    assert!(
        close(w2.jobs[&JobId(1)].charged, 20.0),
        "{}",
        w2.jobs[&JobId(1)].charged
    );
    assert_eq!(w2.users["bob"].budget, Some(980.0));
    assert!(
        close(w2.users["bob"].spent, 20.0),
        "{}",
        w2.users["bob"].spent
    );
}

/// Two awards of a peer dispatcher for bob, whose shared budget had 310: the site took
/// their holds (low: 2 processors × 100 s × 1.0 = 200; high: 2 × 50 × 1.0 = 100), leaving
/// 10. Neither waits for the budget the holds already paid: the high one (level 3)
/// preempts the low one (level 0), which resumes after it. Their records show what they
/// really used; the budget here is not moved again; the shared database settles each
/// charge against its hold ([`foresight_store::budget_taken`]). A job of bob's that is not
/// prepaid still waits for budget.
#[test]
fn prepaid_awards_run_preempt_and_are_settled_against_their_holds() {
    let mut w = world(vec![cluster("a", 2)]);
    w.users.get_mut("bob").unwrap().budget = Some(10.0);
    let mut low = job(1, "bob", 2, 100);
    low.prepaid = 200.0;
    w.accept(Time(1_000), vec![low]);
    w.cycle(Time(1_000));
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Running);
    launches(&mut w);
    // The reservation's planned cost, paid from the hold: 2 × 100 × 1.0.
    assert!(close(w.jobs[&JobId(1)].charged, 200.0));
    assert_eq!(w.users["bob"].budget, Some(10.0));
    assert_eq!(w.users["bob"].spent, 0.0);

    let mut high = job(2, "bob", 2, 50);
    high.priority = 3;
    high.prepaid = 100.0;
    w.accept(Time(1_010), vec![high]);
    w.cycle(Time(1_010));
    assert_eq!(w.jobs[&JobId(2)].state, JobState::Running);
    assert!(w.jobs[&JobId(1)].suspended, "the low award is preempted");
    launches(&mut w);
    // The high job uses 20 of its 50 s: 2 × 20 = 40.
    w.on_finished(Time(1_030), ClusterId(0), JobId(2), 0, &exit(0));
    assert_eq!(w.jobs[&JobId(2)].state, JobState::Completed);
    assert!(
        close(w.jobs[&JobId(2)].charged, 40.0),
        "{}",
        w.jobs[&JobId(2)].charged
    );
    w.cycle(Time(1_030));
    assert!(!w.jobs[&JobId(1)].suspended, "resumed after the high job");
    // The low job ran 10 s, stopped 20 s, ran 30 s more: 40 s × 2 = 80.
    w.on_finished(Time(1_060), ClusterId(0), JobId(1), 0, &exit(0));
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Completed);
    assert!(
        close(w.jobs[&JobId(1)].charged, 80.0),
        "{}",
        w.jobs[&JobId(1)].charged
    );
    assert_eq!(w.users["bob"].budget, Some(10.0));
    assert_eq!(w.users["bob"].spent, 0.0);
    // Shared: 310 − 200 − 100 while they ran; after, 310 − 80 − 40 = 190, never 310 −
    // (200 + 100) − (80 + 40) as hold plus charge would be.
    let taken = |id: u64| {
        let j = &w.jobs[&JobId(id)];
        foresight_store::budget_taken(j.charged, j.prepaid, j.state.is_final())
    };
    assert!(close(310.0 - taken(1) - taken(2), 190.0));

    // Not prepaid: 200 at worst is more than the 10 left, so it waits.
    w.accept(Time(1_060), vec![job(3, "bob", 2, 100)]);
    w.cycle(Time(1_060));
    let j = &w.jobs[&JobId(3)];
    assert_eq!(j.state, JobState::Pending);
    assert!(
        j.reason.as_deref().unwrap_or("").contains("budget"),
        "{:?}",
        j.reason
    );
}

/// A job that ended while the service was down ends when its supervisor recorded, and is
/// charged up to then, not up to the restart.
#[test]
fn a_job_that_ended_during_downtime_ends_at_its_recorded_time() {
    let mut w = world(vec![cluster("a", 2)]);
    w.accept(Time(1_000), vec![job(1, "bob", 2, 100)]);
    w.cycle(Time(1_000));
    launches(&mut w);
    assert!(close(w.jobs[&JobId(1)].charged, 200.0));
    let mut w2 = restarted(&w, vec![cluster("a", 2)], 1_090);
    let mut done = exit(0);
    done.started_at = 1_000;
    done.ended_at = 1_030;
    w2.on_finished(Time(1_090), ClusterId(0), JobId(1), 0, &done);
    let j = &w2.jobs[&JobId(1)];
    assert_eq!(j.state, JobState::Completed);
    assert_eq!(j.ended_at, Some(1_030));
    // 2 processors × 30 s.
    assert!(close(j.charged, 60.0), "{}", j.charged);
    assert_eq!(w2.users["bob"].budget, Some(940.0));
}

/// A local job and a job in an administrative reservation pay their cluster's tariff for
/// the processors and seconds they held; both pass the budget check at submission, which
/// counts what the user's other unfinished local jobs may still cost.
#[test]
fn local_and_reservation_jobs_pay_their_clusters_tariff() {
    let mut a = cluster("a", 4);
    a.spec.tariff = 2.0;
    let mut w = world(vec![a.clone()]);
    let mut local = job(1, "bob", 2, 100);
    local.cluster = Some("a".into());
    assert!(w.admit(&local).is_ok());
    w.accept(Time(1_000), vec![local]);
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Running);
    launches(&mut w);
    w.on_finished(Time(1_030), ClusterId(0), JobId(1), 0, &exit(0));
    // 2 processors × 30 s × 2.0.
    assert!(
        close(w.jobs[&JobId(1)].charged, 120.0),
        "{}",
        w.jobs[&JobId(1)].charged
    );
    assert_eq!(w.users["bob"].budget, Some(880.0));
    let acl = AclSpec {
        users: vec!["bob".into()],
        ..AclSpec::default()
    };
    let r = w
        .create_reservation(
            Time(1_030),
            "admin",
            "a",
            Held::Count(2),
            1_030,
            1_200,
            acl,
            None,
        )
        .unwrap();
    let mut inside = job(2, "bob", 1, 50);
    inside.reservation = Some(r.0);
    assert!(w.admit(&inside).is_ok());
    w.accept(Time(1_030), vec![inside]);
    assert_eq!(w.jobs[&JobId(2)].state, JobState::Running);
    w.on_finished(Time(1_040), ClusterId(0), JobId(2), 0, &exit(0));
    // 1 processor × 10 s × 2.0.
    assert!(
        close(w.jobs[&JobId(2)].charged, 20.0),
        "{}",
        w.jobs[&JobId(2)].charged
    );
    assert_eq!(w.users["bob"].budget, Some(860.0));
    // Worst cases: 4 × 200 s × 2.0 = 1600 and 2 × 500 s × 2.0 = 2000, above 860.
    let mut big = job(3, "bob", 4, 200);
    big.cluster = Some("a".into());
    let e = w.admit(&big).unwrap_err();
    assert!(matches!(e, Refusal::OverBudget { .. }), "{e:?}");
    let mut big_inside = job(4, "bob", 2, 500);
    big_inside.reservation = Some(r.0);
    let e = w.admit(&big_inside).unwrap_err();
    assert!(matches!(e, Refusal::OverBudget { .. }), "{e:?}");
    // 2 × 150 s × 2.0 = 600 fits once; a second one would exceed 860 with the first's
    // worst case still owed.
    let mut half = job(5, "bob", 2, 150);
    half.cluster = Some("a".into());
    assert!(w.admit(&half).is_ok());
    w.accept(Time(1_040), vec![half.clone()]);
    half.id = 6;
    let e = w.admit(&half).unwrap_err();
    assert!(matches!(e, Refusal::OverBudget { .. }), "{e:?}");
    assert!(e.reason().contains("600.00"), "{}", e.reason());
}

/// A local job admitted while a cycle plans off the lock counts in that cycle's budgets:
/// the global job planned before it came must not take the money the local job was admitted
/// with (600 + 500 > 1 000).
#[test]
fn a_local_job_admitted_during_a_cycle_counts_in_its_budgets() {
    let mut w = world(vec![cluster("a", 2), cluster("b", 2)]);
    let global = job(1, "bob", 2, 300);
    w.admit(&global).unwrap();
    w.accept(Time(1_000), vec![global]);
    let plan = w.begin_cycle(Time(1_000));
    // Off the lock, the local job comes in: alone it fits (1 000 left).
    let mut local = job(2, "bob", 2, 250);
    local.cluster = Some("b".into());
    local.held = true;
    w.admit(&local).unwrap();
    w.accept(Time(1_000), vec![local]);
    let decisions = plan.decide();
    w.finish_cycle(plan, decisions);
    let left = w.users["bob"].budget.unwrap();
    assert!(
        matches!(
            w.jobs[&JobId(1)].state,
            JobState::Pending | JobState::Planned
        ),
        "the global job was {:?}, leaving {left} for a local job that may cost 500",
        w.jobs[&JobId(1)].state
    );
    assert_eq!(left, 1_000.0);
    assert!(
        w.jobs[&JobId(1)]
            .reason
            .as_deref()
            .unwrap_or("")
            .contains("budget"),
        "{:?}",
        w.jobs[&JobId(1)].reason
    );
    // Once the local job is cancelled, the global one is planned with the whole budget.
    w.cancel(Time(1_001), JobId(2)).unwrap();
    w.cycle(Time(1_001));
    assert!(
        matches!(
            w.jobs[&JobId(1)].state,
            JobState::Reserved | JobState::Running
        ),
        "{:?}",
        w.jobs[&JobId(1)].state
    );
}

/// The jobs of one request count together: two local jobs of 600 each pass alone but not
/// together, and the refusal names the amount and the budget.
#[test]
fn the_jobs_of_one_request_count_together() {
    let w = world(vec![cluster("a", 2)]);
    let mut a = job(1, "bob", 2, 300);
    a.cluster = Some("a".into());
    let b = a.clone();
    w.admit(&a).unwrap();
    w.admit(&b).unwrap();
    let e = w
        .check_budget_together("bob", &[(&a, 1), (&b, 1)], "jobs")
        .unwrap_err();
    let Refusal::OverBudget { field, reason } = e else {
        panic!("{e:?}")
    };
    assert_eq!(field, "jobs");
    assert!(
        reason.contains("1200.00") && reason.contains("1000.00"),
        "{reason}"
    );
    // An array's tasks alike; one task fits.
    assert!(w.check_budget_together("bob", &[(&a, 2)], "array").is_err());
    assert!(w.check_budget_together("bob", &[(&a, 1)], "array").is_ok());
    // No budget, no limit.
    assert!(w.check_budget_together("ann", &[(&a, 9)], "jobs").is_ok());
}

/// The running total of uncharged local jobs equals a scan of the records after a restart,
/// and the restarted service refuses what the first one would.
#[test]
fn the_uncharged_total_survives_a_restart() {
    let mut w = world(vec![cluster("a", 2)]);
    let mut ids = Vec::new();
    for id in 1..=3 {
        let mut j = job(id, "bob", 1, 100);
        j.cluster = Some("a".into());
        w.admit(&j).unwrap();
        w.accept(Time(1_000), vec![j]);
        ids.push(id);
    }
    w.cycle(Time(1_000));
    launches(&mut w);
    assert!(
        close(w.uncharged_of("bob"), 300.0),
        "{}",
        w.uncharged_of("bob")
    );
    let w2 = restarted(&w, vec![cluster("a", 2)], 1_010);
    assert!(close(w2.uncharged_of("bob"), 300.0));
    assert!(close(w2.uncharged_by_scan()["bob"], 300.0));
    let mut big = job(9, "bob", 2, 400);
    big.cluster = Some("a".into());
    assert!(w2.admit(&big).is_err(), "800 + 300 > 1 000");
}

mod property {
    //! Random local and global jobs, cancels, requeues, holds and early ends on random
    //! tariffs: after every step the user's budget is not negative and budget + spent is
    //! what it was at the start; every charge equals the processors × seconds each attempt
    //! held × its cluster's base tariff.
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Local {
            cluster: ClusterId,
            procs: u32,
            walltime: i64,
            used: f64,
        },
        Global {
            procs: u32,
            walltime: i64,
            used: f64,
        },
        Cancel(u64),
        Requeue(u64),
        Hold(u64),
        Release(u64),
        Wait(i64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0usize..3, 1u32..4, 10i64..200, 0.05f64..1.0)
                .prop_map(|(cluster, procs, walltime, used)| Op::Local { cluster: ClusterId(cluster), procs, walltime, used }),
            3 => (1u32..6, 10i64..200, 0.05f64..1.0)
                .prop_map(|(procs, walltime, used)| Op::Global { procs, walltime, used }),
            1 => (1u64..20).prop_map(Op::Cancel),
            1 => (1u64..20).prop_map(Op::Requeue),
            1 => (1u64..20).prop_map(Op::Hold),
            1 => (1u64..20).prop_map(Op::Release),
            3 => (1i64..120).prop_map(Op::Wait),
        ]
    }

    struct Driver {
        w: World,
        now: i64,
        base: Vec<f64>,
        used: BTreeMap<u64, f64>,
        /// Running parts: (job, attempt, cluster) → (start, end, processors).
        running: BTreeMap<(u64, u32, ClusterId), (i64, i64, u32)>,
        /// What each job should have been charged so far, by the rule.
        owed: BTreeMap<u64, f64>,
        budget0: f64,
    }

    impl Driver {
        /// Carries out launches and kills until none are left.
        fn effects(&mut self) {
            loop {
                let effects = std::mem::take(&mut self.w.effects);
                if effects.is_empty() {
                    return;
                }
                for e in effects {
                    match e {
                        Effect::Launch { cluster, spec, .. } => {
                            let walltime = spec.walltime_secs as i64;
                            let run = ((self.w.jobs[&JobId(spec.job)].walltime as f64
                                * self.used[&spec.job])
                                as i64)
                                .clamp(1, walltime);
                            self.running.insert(
                                (spec.job, spec.attempt, cluster),
                                (self.now, self.now + run, spec.processors.len() as u32),
                            );
                        }
                        Effect::Kill {
                            cluster,
                            job,
                            attempt,
                        } => {
                            if let Some(r) = self.running.get_mut(&(job.0, attempt, cluster)) {
                                r.1 = self.now;
                            }
                        }
                        _ => {}
                    }
                }
                self.end_due();
            }
        }

        /// Ends every part due by now, charging what the rule says each attempt owes.
        fn end_due(&mut self) {
            while let Some((&key, &(start, end, procs))) =
                self.running.iter().find(|(_, r)| r.1 <= self.now)
            {
                let (job, attempt, k) = key;
                self.running.remove(&key);
                let j = &self.w.jobs[&JobId(job)];
                let global = j.cluster.is_none() && j.reservation.is_none();
                let held = if global {
                    end - start
                } else {
                    (end - start).min(j.walltime)
                };
                *self.owed.entry(job).or_default() += self.base[k] * f64::from(procs) * held as f64;
                let mut o = exit(0);
                o.started_at = start;
                o.ended_at = end;
                self.w
                    .on_finished(Time(self.now), k, JobId(job), attempt, &o);
            }
        }

        fn advance(&mut self, until: i64) {
            while self.now < until {
                let next_end = self.running.values().map(|r| r.1).min().unwrap_or(i64::MAX);
                self.now = (self.now + 5).min(next_end.max(self.now + 1)).min(until);
                self.end_due();
                self.effects();
                self.w.cycle(Time(self.now));
                self.effects();
            }
        }

        fn check(&self) -> Result<(), TestCaseError> {
            // The running total of uncharged local jobs is always what a scan finds.
            let scan = self.w.uncharged_by_scan();
            for name in self.w.users.keys() {
                let want = scan.get(name).copied().unwrap_or(0.0);
                let got = self.w.uncharged_of(name);
                prop_assert!(
                    (got - want).abs() < 1e-6,
                    "{name}'s uncharged total {got} != {want} by a scan"
                );
            }
            let u = &self.w.users["bob"];
            let left = u.budget.unwrap();
            prop_assert!(left >= -1e-6, "budget went negative: {left}");
            prop_assert!(
                (left + u.spent - self.budget0).abs() < 1e-6,
                "budget {left} + spent {} != {}",
                u.spent,
                self.budget0
            );
            let charged: f64 = self
                .w
                .jobs
                .values()
                .filter(|j| j.user == "bob")
                .map(|j| j.charged)
                .sum();
            prop_assert!(
                (charged - u.spent).abs() < 1e-6,
                "jobs {charged} != spent {}",
                u.spent
            );
            for j in self.w.jobs.values() {
                // A job with nothing running owes exactly what its attempts held.
                let live = self.running.keys().any(|k| k.0 == j.id);
                let reserved = matches!(j.state, JobState::Reserved | JobState::Running);
                if !live && !reserved {
                    let owed = self.owed.get(&j.id).copied().unwrap_or(0.0);
                    prop_assert!(
                        (j.charged - owed).abs() < 1e-6,
                        "job {} ({:?}) charged {} but held {owed} worth",
                        j.id,
                        j.state,
                        j.charged
                    );
                }
            }
            Ok(())
        }
    }

    fn run(bases: Vec<f64>, budget0: f64, ops: Vec<Op>) -> Result<(), TestCaseError> {
        let clusters = bases
            .iter()
            .enumerate()
            .map(|(k, &b)| {
                let mut c = cluster(&format!("c{k}"), 3);
                c.spec.tariff = b;
                c
            })
            .collect();
        let mut w = world(clusters);
        w.users.get_mut("bob").unwrap().budget = Some(budget0);
        let mut d = Driver {
            w,
            now: 1_000,
            base: bases,
            used: BTreeMap::new(),
            running: BTreeMap::new(),
            owed: BTreeMap::new(),
            budget0,
        };
        let mut next = 0u64;
        for (step, op) in ops.into_iter().enumerate() {
            let now = d.now;
            match op {
                Op::Local {
                    cluster,
                    procs,
                    walltime,
                    used,
                } => {
                    let mut j = job(next + 1, "bob", procs, walltime);
                    j.cluster = Some(format!("c{cluster}"));
                    j.submitted_at = now;
                    if d.w.admit(&j).is_ok() {
                        next += 1;
                        d.used.insert(next, used);
                        d.w.accept(Time(now), vec![j]);
                    }
                }
                Op::Global {
                    procs,
                    walltime,
                    used,
                } => {
                    let mut j = job(next + 1, "bob", procs, walltime);
                    j.submitted_at = now;
                    if d.w.admit(&j).is_ok() {
                        next += 1;
                        d.used.insert(next, used);
                        d.w.accept(Time(now), vec![j]);
                    }
                }
                Op::Cancel(id) => {
                    let _ = d.w.cancel(Time(now), JobId(id));
                }
                Op::Requeue(id) => {
                    let _ = d.w.requeue(Time(now), JobId(id));
                }
                Op::Hold(id) => {
                    let _ = d.w.hold(Time(now), JobId(id));
                }
                Op::Release(id) => {
                    let _ = d.w.release(Time(now), JobId(id));
                }
                Op::Wait(dt) => d.advance(now + dt),
            }
            d.effects();
            d.check()?;
            // Every other step, a write as the service's flush does it: the running totals
            // take in the changed jobs, then nothing is marked changed.
            if step % 2 == 1 {
                d.w.recount_changed();
                d.w.jobs.take_changed();
                d.check()?;
            }
        }
        let end = d.now + 2_000;
        d.advance(end);
        d.check()?;
        Ok(())
    }

    /// Shrunk from the property: a local job requeued while another of the user's local
    /// jobs and a refused global job are about.
    #[test]
    fn requeued_local_job_regression() {
        let ops = vec![
            Op::Local {
                cluster: ClusterId(0),
                procs: 1,
                walltime: 10,
                used: 0.05,
            },
            Op::Global {
                procs: 2,
                walltime: 102,
                used: 0.05,
            },
            Op::Local {
                cluster: ClusterId(2),
                procs: 2,
                walltime: 71,
                used: 0.9748630219496132,
            },
            Op::Wait(36),
            Op::Requeue(2),
        ];
        run(
            vec![2.256410427525699, 2.2820227743251986, 3.380663999357172],
            707.9552977442618,
            ops,
        )
        .unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn charges_follow_the_tariff_and_budgets_never_go_negative(
            bases in prop::collection::vec(0.5f64..4.0, 3),
            budget0 in 500.0f64..5_000.0,
            ops in prop::collection::vec(op(), 1..40),
        ) {
            run(bases, budget0, ops)?;
        }
    }
}
