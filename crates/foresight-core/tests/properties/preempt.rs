//! Absolute priorities in the grid broker on random event sequences (global jobs of four
//! levels, some requeueable; local jobs; time passing), driven as a caller drives it: parts
//! run to their reserved end, requeued parts are killed at once. Invariants:
//! - no cluster runs more processors than it has;
//! - only global jobs are preempted, and only by jobs of a strictly higher level;
//! - after a cycle, no queued job that cannot start on idle processors waits while idle
//!   processors plus those held by running global jobs of lower levels on one cluster would
//!   be enough for it;
//! - after a cycle that started no global job, no suspended job waits while its cluster has
//!   that much for it either (it resumes, or takes them back from lower levels);
//! - once arrivals stop, every global job ends: none is lost while suspended or requeued.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

use foresight_core::broker::{
    processors_of, Broker, BrokerAction, GridCluster, Phase, Preemption, SpeedGroup,
};
use foresight_core::grid::{GlobalJob, PlannerConfig};
use foresight_core::select::Criterion;
use foresight_core::{ClusterId, Dur, Job, JobId, LocalScheduler, Policy, Time, UserId};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

use crate::levels_check::Sight;

const SIZES: [u32; 2] = [4, 6];
const LOCAL: u64 = 1 << 40;

#[derive(Clone, Debug)]
enum Op {
    Global {
        priority: u32,
        procs: u32,
        walltime: i64,
        requeue: bool,
    },
    Local {
        cluster: usize,
        procs: u32,
        walltime: i64,
    },
    Wait(i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u32..4, 1u32..=6, 10i64..200, any::<bool>()).prop_map(
            |(priority, procs, walltime, requeue)| Op::Global { priority, procs, walltime, requeue }
        ),
        1 => (0usize..2, 1u32..=4, 10i64..200)
            .prop_map(|(cluster, procs, walltime)| Op::Local { cluster, procs, walltime }),
        3 => (1i64..60).prop_map(Op::Wait),
    ]
}

struct Driver {
    broker: Broker,
    now: Time,
    /// Running parts: (job, cluster) → (end, procs).
    running: BTreeMap<(JobId, ClusterId), (Time, u32)>,
    level: BTreeMap<JobId, u32>,
    local_walltime: BTreeMap<JobId, i64>,
    submitted: BTreeSet<JobId>,
    ended: BTreeSet<JobId>,
    started_global: bool,
    /// Jobs preempted to be requeued during the current cycle's carry-out: killed, and so
    /// queued again, only after that cycle served the levels; the next cycle serves them.
    requeued: BTreeSet<JobId>,
    /// Check the waiting invariants too.
    strict: bool,
}

impl Driver {
    fn new() -> Driver {
        let clusters = SIZES
            .iter()
            .enumerate()
            .map(|(i, &procs)| {
                let name = format!("c{i}");
                GridCluster::new(
                    &name,
                    processors_of(&name, &[SpeedGroup { procs, speed: 1.0 }]),
                    LocalScheduler::new(procs, Policy::easy()),
                )
            })
            .collect();
        let planner = PlannerConfig {
            horizon: Dur(86_400),
            lead_time: Dur(0),
            plan_depth: 64,
        };
        Driver {
            broker: Broker::new(clusters, planner, 1),
            now: Time(0),
            running: BTreeMap::new(),
            level: BTreeMap::new(),
            local_walltime: BTreeMap::new(),
            submitted: BTreeSet::new(),
            ended: BTreeSet::new(),
            started_global: false,
            requeued: BTreeSet::new(),
            strict: false,
        }
    }

    fn carry_out(&mut self, out: Vec<BrokerAction>) -> Result<(), TestCaseError> {
        let mut todo = out;
        while !todo.is_empty() {
            let mut next = Vec::new();
            for a in todo {
                match a {
                    BrokerAction::Start {
                        cluster,
                        job,
                        procs,
                        ..
                    } => {
                        let end = if job.0 >= LOCAL {
                            self.now + Dur(self.local_walltime[&job])
                        } else {
                            self.started_global = true;
                            match &self.broker.entry(job).unwrap().phase {
                                Phase::Running { parts, .. } => {
                                    parts
                                        .iter()
                                        .find(|p| p.cluster == cluster)
                                        .unwrap()
                                        .window
                                        .end
                                }
                                p => panic!("started but {p:?}"),
                            }
                        };
                        self.running.insert((job, cluster), (end, procs));
                    }
                    BrokerAction::Preempted {
                        job,
                        by,
                        how,
                        parts,
                    } => {
                        prop_assert!(job.0 < LOCAL, "local job {job} preempted");
                        prop_assert!(
                            self.level[&job] < self.level[&by],
                            "{job} (level {}) preempted by {by} (level {})",
                            self.level[&job],
                            self.level[&by]
                        );
                        for p in &parts {
                            self.running.remove(&(job, p.cluster));
                        }
                        if how == Preemption::Requeue {
                            self.requeued.insert(job);
                            for p in &parts {
                                self.broker
                                    .on_part_ended(self.now, p.cluster, job, &mut next);
                            }
                        }
                    }
                    BrokerAction::Resumed { job, parts, .. } => {
                        for p in parts {
                            self.running
                                .insert((job, p.cluster), (p.window.end, p.procs));
                        }
                    }
                    BrokerAction::Ended { job, .. } => {
                        self.ended.insert(job);
                    }
                    _ => {}
                }
            }
            todo = next;
        }
        self.sight().capacity().map_err(TestCaseError::fail)
    }

    fn sight(&self) -> Sight<'_> {
        Sight {
            broker: &self.broker,
            now: self.now,
            running: &self.running,
        }
    }

    fn advance(&mut self, to: Time) -> Result<(), TestCaseError> {
        loop {
            let next = self
                .running
                .iter()
                .map(|(key, (end, _))| (*end, *key))
                .filter(|(end, _)| *end <= to)
                .min();
            let Some((end, (job, k))) = next else { break };
            self.now = end;
            self.running.remove(&(job, k));
            let mut out = Vec::new();
            self.broker.on_part_ended(end, k, job, &mut out);
            self.carry_out(out)?;
        }
        self.now = to;
        self.cycle()
    }

    fn cycle(&mut self) -> Result<(), TestCaseError> {
        self.started_global = false;
        self.requeued.clear();
        let mut out = Vec::new();
        self.broker.on_cycle(self.now, &mut out);
        self.carry_out(out)?;
        // Preemption and resumption move jobs between running and suspended.
        prop_assert!(
            self.broker.index_holds(),
            "the broker's index of active jobs is off"
        );
        if !self.strict {
            return Ok(());
        }
        self.sight()
            .no_job_waits_on_lower_levels(&self.requeued, self.started_global)
            .map_err(TestCaseError::fail)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Capacity, lower levels only, nothing lost. (Its old counterexample, a cluster of 4
    /// running 6, was this driver counting a part whose window had ended as running until
    /// its end was reported: `parts_ending_at_the_same_instant_hold_nothing_at_that_instant`
    /// in `scenarios/preempt.rs`.)
    #[test]
    fn levels_preempt_resume_and_lose_nothing(ops in proptest::collection::vec(op(), 1..60)) {
        run(ops, false)?;
    }

    /// The waiting invariants as well. Counterexamples fixed so far (each a scenario in
    /// `scenarios/preempt.rs`): a job requeued by preemption checked before any cycle could
    /// serve it (the driver's); a lower level started where a waiting higher one preempts it
    /// next cycle; processors claimed by jobs served earlier (co-allocated ones included)
    /// counted idle for later ones; a suspended job kept waiting for a queued job of a
    /// higher level that the planner then did not start.
    ///
    /// The seventh, levels served on a guess of where the planner puts the jobs that fit
    /// (it may put them elsewhere), is fixed by serving the levels again after the planner:
    /// `levels_are_served_again_where_the_planner_really_put_the_jobs` below.
    ///
    /// The eighth and later ones had one cause: the planner's test of whether a start is
    /// taken back at once looked at one waiting job of a higher level at a time, and the
    /// second pass serves them together (resumes, preemptions, claims), so a job of a lower
    /// level the planner started could hold what a higher one needed after the pass; jobs
    /// started in a cycle are not stopped again in it, so that job waited a cycle. The
    /// planner now plays the second pass on copies of the broker, with and without the
    /// start (`the_planner_and_the_second_pass_agree_on_what_a_waiting_job_can_take`).
    /// A higher level comes first on idle processors even while the planner keeps it for
    /// later: a job of a lower level neither resumes into them nor preempts with them.
    #[test]
    fn no_job_waits_on_lower_levels(ops in proptest::collection::vec(op(), 1..60)) {
        run(ops, true)?;
    }
}

/// The seventh counterexample (clusters of 4 and 6). At 62 a co-allocated level-3 job of 5
/// processors and a level-3 job of 3 fit the idle processors, so they claim some: the first
/// served claimed c1 alone, the second c0. Suspended job 3 (level 0, 1 processor) then
/// resumed into c1's last idle processor, before the planner ran; the planner put the job
/// of 5 as 4 on c0 + 1 on c1 and the job of 3 on c1, and a queued level-1 job of 2 found
/// c1's last idle processor taken by a level-0 job it could have had, and waited a cycle
/// before it preempted it. Now job 3 is served after the planner, on the clusters as the
/// planner left them.
#[test]
fn levels_are_served_again_where_the_planner_really_put_the_jobs() {
    let g = |priority, procs, walltime| Op::Global {
        priority,
        procs,
        walltime,
        requeue: false,
    };
    let mut ops = vec![
        g(0, 5, 10),
        Op::Wait(1),
        Op::Local {
            cluster: 0,
            procs: 4,
            walltime: 59,
        },
        g(0, 1, 45),
        g(0, 1, 10),
        Op::Wait(1),
    ];
    ops.extend(std::iter::repeat_n(g(0, 1, 10), 4));
    ops.extend([
        g(3, 6, 10),
        g(1, 4, 10),
        g(3, 5, 10),
        g(3, 3, 10),
        g(1, 2, 10),
    ]);
    run(ops, true).unwrap();
}

/// A shrunk case on which the levels as they were fail (clusters of 4 and 6): at 167
/// suspended job 12 waited while c0 had room for it, several jobs of lower levels having
/// been started in the cycle each on the planner's test of one waiting job at a time. The
/// planner now plays the second pass on copies of the broker before it starts a lower
/// level.
#[test]
fn the_planner_and_the_second_pass_agree_on_what_a_waiting_job_can_take() {
    let g = |priority, procs, walltime| Op::Global {
        priority,
        procs,
        walltime,
        requeue: false,
    };
    let ops = vec![
        g(3, 2, 10),
        g(0, 1, 10),
        g(1, 6, 10),
        g(1, 1, 81),
        g(2, 2, 45),
        Op::Local {
            cluster: 0,
            procs: 1,
            walltime: 10,
        },
        g(0, 1, 10),
        Op::Wait(1),
        Op::Wait(9),
        g(1, 1, 10),
        g(1, 2, 54),
        Op::Local {
            cluster: 1,
            procs: 2,
            walltime: 134,
        },
        g(0, 1, 10),
        g(0, 1, 78),
        Op::Wait(57),
        Op::Wait(10),
        g(0, 2, 10),
        Op::Local {
            cluster: 1,
            procs: 1,
            walltime: 31,
        },
        g(0, 1, 11),
        Op::Local {
            cluster: 0,
            procs: 1,
            walltime: 77,
        },
        g(0, 1, 10),
        g(0, 1, 10),
        g(2, 3, 31),
        g(3, 1, 10),
        g(0, 1, 10),
        Op::Local {
            cluster: 1,
            procs: 4,
            walltime: 36,
        },
        g(2, 6, 10),
        g(0, 1, 10),
        g(2, 1, 32),
        Op::Local {
            cluster: 1,
            procs: 4,
            walltime: 16,
        },
    ];
    run(ops, true).unwrap();
}

fn run(ops: Vec<Op>, strict: bool) -> Result<(), TestCaseError> {
    {
        let mut d = Driver::new();
        d.strict = strict;
        let mut next_id = 1u64;
        for o in ops {
            match o {
                Op::Global {
                    priority,
                    procs,
                    walltime,
                    requeue,
                } => {
                    let id = JobId(next_id);
                    next_id += 1;
                    d.level.insert(id, priority);
                    d.submitted.insert(id);
                    d.broker.submit(
                        d.now,
                        GlobalJob {
                            id,
                            user: UserId(1),
                            submit: d.now,
                            procs,
                            walltime: Dur(walltime),
                            max_price: 1000.0,
                            input_mb: 0.0,
                            home: None,
                            co_allocate: next_id % 3 == 0,
                            criterion: Criterion::EarliestFinish,
                            priority,
                            requeue,
                            begin: None,
                            requires: Default::default(),
                            licences: Default::default(),
                            prediction: None,
                        },
                    );
                }
                Op::Local {
                    cluster,
                    procs,
                    walltime,
                } => {
                    let id = JobId(LOCAL + next_id);
                    next_id += 1;
                    d.local_walltime.insert(id, walltime);
                    let mut out = Vec::new();
                    d.broker
                        .submit_local(
                            d.now,
                            ClusterId(cluster),
                            Job::new(id, d.now, procs, Dur(walltime)),
                            &mut out,
                        )
                        .unwrap();
                    d.carry_out(out)?;
                }
                Op::Wait(dt) => {
                    let to = d.now + Dur(dt);
                    d.advance(to)?;
                }
            }
        }
        // Drain: every global job ends.
        for _ in 0..2_000 {
            if d.submitted.iter().all(|j| d.ended.contains(j)) {
                break;
            }
            let to = d.now + Dur(30);
            d.advance(to)?;
        }
        let lost: Vec<&JobId> = d
            .submitted
            .iter()
            .filter(|j| !d.ended.contains(j))
            .collect();
        prop_assert!(lost.is_empty(), "never ended: {lost:?}");
    }
    Ok(())
}
