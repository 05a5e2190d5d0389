//! The grid broker on random event sequences: local and global arrivals, early endings,
//! withdrawals and cycles, driven as the simulator drives it. Invariants checked after every
//! event: no cluster runs more processors than it has; budgets never go negative and every
//! charge is returned in full or in the unused share only; a move only ever makes a start
//! earlier; after a cycle no reserved job waits on idle processors nobody else wants; and
//! once arrivals stop, every global job that fits the grid ends — also those longer than the
//! planning horizon. Some jobs, local and global, carry a begin time (up to beyond the
//! horizon): none starts, is reserved or is moved before it. Some global jobs carry a
//! prediction, right or wrong, and are corrected when they outlive it: their reservation is
//! still their walltime long.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

use foresight_core::broker::{processors_of, Broker, BrokerAction, GridCluster, Phase, SpeedGroup};
use foresight_core::grid::{GlobalJob, PlannerConfig};
use foresight_core::select::Criterion;
use foresight_core::{ClusterId, Dur, Job, JobId, LocalScheduler, Policy, Time, UserId};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug)]
enum Op {
    Global {
        procs: u32,
        walltime: i64,
        used: f64,
        begin: Option<i64>,
        /// Share of the walltime predicted.
        predicted: Option<f64>,
    },
    Local {
        cluster: usize,
        procs: u32,
        walltime: i64,
        used: f64,
        begin: Option<i64>,
    },
    Withdraw(usize),
    Wait(i64),
}

fn op(sizes: &[u32]) -> impl Strategy<Value = Op> {
    let total: u32 = sizes.iter().sum();
    let n = sizes.len();
    let largest = *sizes.iter().max().unwrap();
    // A begin time, seconds after submission: often none, sometimes beyond the horizon.
    let begin = || prop::option::weighted(0.3, 0i64..5_000);
    let predicted = || prop::option::weighted(0.5, 0.01f64..1.2);
    prop_oneof![
        3 => (1..=total, 10i64..300, 0.05f64..1.0, begin(), predicted())
            .prop_map(|(procs, walltime, used, begin, predicted)| Op::Global { procs, walltime, used, begin, predicted }),
        // Longer than the planning horizon (3600 s): the horizon grows for it.
        1 => (1..=total, 3_000i64..9_000, 0.05f64..1.0, begin(), predicted())
            .prop_map(|(procs, walltime, used, begin, predicted)| Op::Global { procs, walltime, used, begin, predicted }),
        2 => (0..n, 1..=largest, 10i64..300, 0.05f64..1.0, begin()).prop_map(
            move |(cluster, procs, walltime, used, begin)| Op::Local {
                cluster,
                procs,
                walltime,
                used,
                begin,
            }
        ),
        1 => (0usize..64).prop_map(Op::Withdraw),
        3 => (1i64..120).prop_map(Op::Wait),
    ]
}

const GLOBAL: u64 = 1 << 40;

struct Driver {
    broker: Broker,
    sizes: Vec<u32>,
    now: Time,
    /// (end, cluster, job) of everything running.
    running: BTreeSet<(Time, usize, JobId)>,
    busy: Vec<u32>,
    procs_of: BTreeMap<(usize, JobId), u32>,
    runtime: BTreeMap<JobId, f64>,
    wakes: BTreeSet<(Time, usize)>,
    reserved_start: BTreeMap<JobId, Time>,
    submitted: Vec<JobId>,
    ended: BTreeSet<JobId>,
    refused: BTreeSet<JobId>,
    charged: BTreeMap<JobId, f64>,
    budget0: f64,
    /// Begin times of the jobs that have one.
    begin: BTreeMap<JobId, Time>,
    /// Global jobs' walltimes.
    walltime: BTreeMap<JobId, Dur>,
}

impl Driver {
    fn carry_out(&mut self, out: Vec<BrokerAction>) -> Result<(), TestCaseError> {
        for a in out {
            match a {
                BrokerAction::Start {
                    cluster,
                    job,
                    procs,
                    ..
                } => {
                    self.busy[cluster] += procs;
                    prop_assert!(
                        self.busy[cluster] <= self.sizes[cluster],
                        "cluster {cluster} runs {} of {} processors",
                        self.busy[cluster],
                        self.sizes[cluster]
                    );
                    let begin = self.begin.get(&job);
                    prop_assert!(
                        begin.is_none_or(|&b| self.now >= b),
                        "{job} started at {} before its begin {begin:?}",
                        self.now
                    );
                    self.procs_of.insert((cluster.as_num(), job), procs);
                    let run = self.runtime[&job].max(1.0) as i64;
                    self.running
                        .insert((self.now + Dur(run), cluster.as_num(), job));
                }
                BrokerAction::Wake { cluster, at } => {
                    self.wakes.insert((at, cluster.as_num()));
                }
                BrokerAction::Reserved {
                    job, start, end, ..
                } => {
                    // Planned by a prediction or not, it is reserved for its walltime.
                    prop_assert_eq!(end - start, self.walltime[&job]);
                    let begin = self.begin.get(&job);
                    prop_assert!(
                        begin.is_none_or(|&b| start >= b),
                        "{job} reserved from {start}, before its begin {begin:?}"
                    );
                    self.reserved_start.insert(job, start);
                }
                BrokerAction::Moved { job, start, .. } => {
                    let was = self.reserved_start.insert(job, start);
                    prop_assert!(
                        was.is_some_and(|w| start < w),
                        "{job} moved from {was:?} to {start}"
                    );
                    prop_assert!(start >= self.now);
                    let begin = self.begin.get(&job);
                    prop_assert!(
                        begin.is_none_or(|&b| start >= b),
                        "{job} moved to {start}, before its begin {begin:?}"
                    );
                }
                BrokerAction::Charge { job, amount, .. } => {
                    let c = self.charged.entry(job).or_default();
                    *c += amount;
                    prop_assert!(*c >= -1e-6, "{job} refunded more than it paid");
                }
                BrokerAction::Ended { job, .. } => {
                    self.ended.insert(job);
                }
                BrokerAction::Refused { job, .. } => {
                    self.refused.insert(job);
                }
                _ => {}
            }
        }
        let left = self.broker.budget(UserId(1)).unwrap();
        prop_assert!(left >= -1e-6, "budget went negative: {left}");
        let spent: f64 = self.charged.values().sum();
        prop_assert!((self.budget0 - spent - left).abs() < 1e-6 * self.budget0.max(1.0));
        Ok(())
    }

    /// After a cycle: a reserved job whose processors are free now on every cluster of its,
    /// where nothing else waits (no queued local job, no other global job's reservation,
    /// and enough left over for the global jobs planned there to start before it would end
    /// if started now), delays no one by starting, so it has started. The planned jobs
    /// count because the planner gives each job named processors (seed 002's slots): a job
    /// planned first on the processor that is free now keeps a later one off it for this
    /// cycle, even when another processor frees up in time for the first (the next cycle's
    /// compression moves it).
    fn nothing_left_idle(&self, now: Time) -> Result<(), TestCaseError> {
        // (job, (cluster, processors) of each part, when it would end if started now)
        type Waiting = (JobId, Vec<(usize, u32)>, Time);
        let reserved: Vec<Waiting> = self
            .broker
            .entries()
            .filter_map(|e| match &e.phase {
                // A job waiting for its begin time waits on idle processors by right.
                Phase::Reserved {
                    start, end, parts, ..
                } if *start > now && e.job.eligible(now) <= now => Some((
                    e.job.id,
                    parts
                        .iter()
                        .map(|p| (p.cluster.as_num(), p.procs))
                        .collect(),
                    now + (*end - *start),
                )),
                _ => None,
            })
            .collect();
        // Where each global job is planned to start, per cluster, and on how many
        // processors.
        let planned: Vec<(usize, Time, u32)> = self
            .broker
            .entries()
            .filter_map(|e| match &e.phase {
                Phase::Planned { start, parts, .. } => Some(
                    parts
                        .iter()
                        .map(|p| (p.cluster.as_num(), *start, p.processors.len() as u32))
                        .collect::<Vec<_>>(),
                ),
                _ => None,
            })
            .flatten()
            .collect();
        let mut held = vec![0usize; self.sizes.len()];
        for e in self.broker.entries() {
            match &e.phase {
                Phase::Reserved { parts, .. } | Phase::Reserving { parts, .. } => {
                    for p in parts {
                        held[p.cluster] += 1;
                    }
                }
                _ => {}
            }
        }
        for (job, parts, done) in reserved {
            let idle = parts.iter().all(|&(k, procs)| {
                // Its own part waits in the local queue for its reservation.
                let promised: u32 = planned
                    .iter()
                    .filter(|&&(c, start, _)| c == k && start < done)
                    .map(|&(_, _, n)| n)
                    .sum();
                held[k] == 1
                    && self.broker.clusters[k].sched.waiting() == 1
                    && (self.sizes[k] - self.busy[k]).saturating_sub(promised) >= procs
            });
            prop_assert!(
                !idle,
                "{job} waits for its reservation at {now} on idle processors: {parts:?}"
            );
        }
        Ok(())
    }

    /// Advances to `until`, ending jobs and ticking clusters on the way; cycles every 30 s.
    fn advance(&mut self, until: Time) -> Result<(), TestCaseError> {
        loop {
            let next_end = self.running.first().map(|r| r.0);
            let next_wake = self.wakes.first().map(|w| w.0);
            let next_cycle = Time((self.now.secs() / 30 + 1) * 30);
            let next_plan_end = self
                .broker
                .clusters
                .iter()
                .filter_map(|c| c.sched.next_plan_end(self.now))
                .min();
            let t = [next_end, next_wake, Some(next_cycle), next_plan_end]
                .into_iter()
                .flatten()
                .min()
                .unwrap();
            if t > until {
                self.now = until;
                return Ok(());
            }
            self.now = t;
            let mut out = Vec::new();
            while let Some(&(end, k, job)) = self.running.first() {
                if end > t {
                    break;
                }
                self.running.pop_first();
                self.busy[k] -= self.procs_of[&(k, job)];
                self.broker.on_part_ended(t, ClusterId(k), job, &mut out);
            }
            while let Some(&(at, k)) = self.wakes.first() {
                if at > t {
                    break;
                }
                self.wakes.pop_first();
                self.broker.tick(t, ClusterId(k), &mut out);
            }
            // As the simulator and the service do: corrections first, then the cycle.
            self.broker.correct_outlived(t, &mut out);
            let cycle = t == next_cycle;
            if cycle {
                self.broker.on_cycle(t, &mut out);
            }
            self.carry_out(out)?;
            prop_assert!(
                self.broker.index_holds(),
                "the broker's index of active jobs is off"
            );
            if cycle {
                self.nothing_left_idle(t)?;
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn the_broker_keeps_its_invariants(
        (sizes, ops) in prop::collection::vec(1u32..6, 1..4)
            .prop_flat_map(|sizes| (Just(sizes.clone()), prop::collection::vec(op(&sizes), 1..40)))
    ) {
        let clusters = sizes
            .iter()
            .enumerate()
            .map(|(k, &n)| {
                let name = format!("c{k}");
                GridCluster::new(
                    &name,
                    processors_of(&name, &[SpeedGroup { procs: n, speed: 1.0 }]),
                    LocalScheduler::new(n, Policy::easy()),
                )
            })
            .collect();
        let planner = PlannerConfig { horizon: Dur(3600), lead_time: Dur(60), plan_depth: 64 };
        let mut broker = Broker::new(clusters, planner, 1);
        let budget0 = 1e7;
        broker.set_budget(UserId(1), Some(budget0));
        let mut d = Driver {
            broker,
            busy: vec![0; sizes.len()],
            sizes: sizes.clone(),
            now: Time(0),
            running: BTreeSet::new(),
            procs_of: BTreeMap::new(),
            runtime: BTreeMap::new(),
            wakes: BTreeSet::new(),
            reserved_start: BTreeMap::new(),
            submitted: Vec::new(),
            ended: BTreeSet::new(),
            refused: BTreeSet::new(),
            charged: BTreeMap::new(),
            budget0,
            begin: BTreeMap::new(),
            walltime: BTreeMap::new(),
        };
        let mut withdrawn = BTreeSet::new();
        let mut next = 0u64;
        for op in ops {
            next += 1;
            let now = d.now;
            let mut out = Vec::new();
            match op {
                Op::Global { procs, walltime, used, begin, predicted } => {
                    let id = JobId(GLOBAL + next);
                    let begin = begin.map(|b| now + Dur(b));
                    if let Some(b) = begin {
                        d.begin.insert(id, b);
                    }
                    d.runtime.insert(id, walltime as f64 * used);
                    d.walltime.insert(id, Dur(walltime));
                    d.submitted.push(id);
                    d.broker.submit(now, GlobalJob {
                        id,
                        user: UserId(1),
                        submit: now,
                        procs,
                        walltime: Dur(walltime),
                        max_price: 1.0,
                        input_mb: 0.0,
                        home: None,
                        co_allocate: true,
                        criterion: Criterion::EarliestFinish,
                        priority: 0,
                        requeue: false,
                        begin,
                        requires: Default::default(),
                        licences: Default::default(),
                        prediction: predicted.map(|p| Dur((walltime as f64 * p) as i64)),
                    });
                }
                Op::Local { cluster, procs, walltime, used, begin } => {
                    let id = JobId(next);
                    d.runtime.insert(id, walltime as f64 * used);
                    let procs = procs.min(sizes[cluster]);
                    let begin = begin.map(|b| now + Dur(b));
                    if let Some(b) = begin {
                        d.begin.insert(id, b);
                    }
                    let job = Job::new(id, now, procs, Dur(walltime)).with_begin(begin);
                    d.broker.submit_local(now, ClusterId(cluster), job, &mut out).unwrap();
                }
                Op::Withdraw(i) => {
                    if let Some(&id) = d.submitted.get(i) {
                        if d.broker.withdraw(now, id, &mut out) {
                            withdrawn.insert(id);
                        }
                    }
                }
                Op::Wait(dt) => d.advance(now + Dur(dt))?,
            }
            d.carry_out(out)?;
        }
        // Arrivals stop: everything that fits the grid ends.
        let limit = d.now + Dur(200_000);
        while d.ended.len() + d.refused.len() + withdrawn.len() < d.submitted.len() && d.now < limit {
            let to = d.now + Dur(600);
            d.advance(to)?;
        }
        for id in &d.submitted {
            prop_assert!(
                d.ended.contains(id) || withdrawn.contains(id),
                "global job {id} never ended (refused: {})", d.refused.contains(id)
            );
        }
        prop_assert!(d.refused.is_empty());
    }
}
