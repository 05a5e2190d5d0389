//! Licence pools on the grid, driven through the broker as the simulator and the service
//! drive it: a pool drawn on by several clusters (a floating licence server) is one pool,
//! whichever cluster's jobs hold it; global jobs asking for licences are planned where and
//! when their pools have them, and their reservations hold them. On random workloads of
//! global and local jobs with demands: the licences held by running jobs never exceed a
//! pool (a job needing 2 of a pool of 4 never runs while 3 are held), every reserved
//! global job starts by its reserved start, and every job ends.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

use foresight_core::broker::{processors_of, Broker, BrokerAction, GridCluster, SpeedGroup};
use foresight_core::grid::{GlobalJob, PlannerConfig};
use foresight_core::select::Criterion;
use foresight_core::{ClusterId, Dur, Job, JobId, LocalScheduler, Policy, Time, UserId};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// The pools of a grid: name → (count, clusters drawing on it).
type Pools = BTreeMap<String, (u32, Vec<usize>)>;

/// Plays the part of the simulator: ends jobs at their runtime, ticks clusters when asked,
/// runs a cycle every 30 s, and checks after every event that no pool has more licences
/// held by running jobs than it has.
struct Driver {
    broker: Broker,
    pools: Pools,
    now: Time,
    /// (end, cluster, job) of every running part.
    running: BTreeSet<(Time, usize, JobId)>,
    wakes: BTreeSet<(Time, usize)>,
    runtime: BTreeMap<JobId, i64>,
    demand: BTreeMap<JobId, BTreeMap<String, u32>>,
    /// Licences held now, per pool, by running jobs.
    held: BTreeMap<String, u32>,
    /// The most held at once, per pool.
    peak: BTreeMap<String, u32>,
    /// Parts running, per job (a job holds its licences while any part runs).
    parts: BTreeMap<JobId, u32>,
    starts: BTreeMap<JobId, Time>,
    /// The reserved start of every global job reserved and not started yet.
    reserved: BTreeMap<JobId, Time>,
    ended: BTreeSet<JobId>,
    refused: BTreeSet<JobId>,
}

impl Driver {
    fn new(sizes: &[u32], policy: Policy, pools: Pools) -> Driver {
        let clusters = sizes
            .iter()
            .enumerate()
            .map(|(k, &n)| {
                let name = format!("c{k}");
                GridCluster::new(
                    &name,
                    processors_of(
                        &name,
                        &[SpeedGroup {
                            procs: n,
                            speed: 1.0,
                        }],
                    ),
                    LocalScheduler::new(n, policy.clone()),
                )
            })
            .collect();
        let planner = PlannerConfig {
            horizon: Dur(3600),
            lead_time: Dur(60),
            plan_depth: 64,
        };
        let mut broker = Broker::new(clusters, planner, 1);
        for (name, (count, on)) in &pools {
            let on: Vec<ClusterId> = on.iter().copied().map(ClusterId).collect();
            broker.add_licence_pool(name, *count, &on);
        }
        Driver {
            broker,
            pools,
            now: Time(0),
            running: BTreeSet::new(),
            wakes: BTreeSet::new(),
            runtime: BTreeMap::new(),
            demand: BTreeMap::new(),
            held: BTreeMap::new(),
            peak: BTreeMap::new(),
            parts: BTreeMap::new(),
            starts: BTreeMap::new(),
            reserved: BTreeMap::new(),
            ended: BTreeSet::new(),
            refused: BTreeSet::new(),
        }
    }

    fn global(&mut self, job: GlobalJob, runtime: i64) {
        self.runtime.insert(job.id, runtime);
        self.demand.insert(job.id, job.licences.clone());
        self.broker.submit(self.now, job);
    }

    fn local(&mut self, k: usize, job: Job, runtime: i64) {
        self.runtime.insert(job.id, runtime);
        self.demand.insert(job.id, job.licences.clone());
        let mut out = Vec::new();
        self.broker
            .submit_local(self.now, ClusterId(k), job, &mut out)
            .unwrap();
        self.carry_out(out);
    }

    fn carry_out(&mut self, out: Vec<BrokerAction>) {
        for a in out {
            match a {
                BrokerAction::Start { cluster, job, .. } => {
                    let n = self.parts.entry(job).or_insert(0);
                    *n += 1;
                    if *n == 1 {
                        self.starts.insert(job, self.now);
                        self.reserved.remove(&job);
                        for (pool, k) in self.demand.get(&job).cloned().unwrap_or_default() {
                            let h = self.held.entry(pool.clone()).or_insert(0);
                            *h += k;
                            let count = self.pools[&pool].0;
                            assert!(
                                *h <= count,
                                "at {}: {job} starts with {k} {pool:?}, {h} held of {count}",
                                self.now
                            );
                            let p = self.peak.entry(pool).or_insert(0);
                            *p = (*p).max(*h);
                        }
                    }
                    let run = self.runtime[&job];
                    self.running
                        .insert((self.now + Dur(run), cluster.as_num(), job));
                }
                BrokerAction::Wake { cluster, at } => {
                    self.wakes.insert((at, cluster.as_num()));
                }
                BrokerAction::Reserved { job, start, .. }
                | BrokerAction::Moved { job, start, .. }
                    if !self.starts.contains_key(&job) =>
                {
                    self.reserved.insert(job, start);
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
    }

    /// Runs until nothing is left to happen (or `until`).
    fn run(&mut self, until: Time) {
        loop {
            let next_end = self.running.first().map(|r| r.0);
            let next_wake = self.wakes.first().map(|w| w.0);
            let next_cycle = Time((self.now.secs() / 30 + 1) * 30);
            let t = [next_end, next_wake, Some(next_cycle)]
                .into_iter()
                .flatten()
                .min()
                .unwrap();
            if t > until {
                self.now = until;
                return;
            }
            self.now = t;
            let mut out = Vec::new();
            while let Some(&(end, k, job)) = self.running.first() {
                if end > t {
                    break;
                }
                self.running.pop_first();
                let n = self.parts.get_mut(&job).unwrap();
                *n -= 1;
                if *n == 0 {
                    if self.runtime.contains_key(&job) && job.0 < GLOBAL {
                        self.ended.insert(job);
                    }
                    for (pool, k) in self.demand.get(&job).cloned().unwrap_or_default() {
                        *self.held.get_mut(&pool).unwrap() -= k;
                    }
                }
                self.broker.on_part_ended(t, ClusterId(k), job, &mut out);
            }
            while let Some(&(at, k)) = self.wakes.first() {
                if at > t {
                    break;
                }
                self.wakes.pop_first();
                self.broker.tick(t, ClusterId(k), &mut out);
            }
            if t == next_cycle {
                self.broker.on_cycle(t, &mut out);
            }
            self.carry_out(out);
            if let Some((job, start)) = self.reserved.iter().find(|(_, &s)| s < t) {
                panic!("at {t}: {job} reserved from {start} has not started");
            }
        }
    }
}

fn asking(id: u64, submit: i64, procs: u32, estimate: i64, pool: &str, n: u32) -> Job {
    let licences = if n == 0 {
        BTreeMap::new()
    } else {
        BTreeMap::from([(pool.to_string(), n)])
    };
    Job::new(JobId(id), Time(submit), procs, Dur(estimate)).with_licences(licences)
}

/// A pool of 4 served by a floating licence server to clusters 0 and 1: a job on each asks
/// for 3. They cannot both hold theirs: the second starts when the first ends, although
/// its own cluster is idle; never more than 4 are held. A job asking 1 fits beside either.
#[test]
fn a_pool_shared_by_two_clusters_is_one_pool() {
    for policy in [Policy::fcfs(), Policy::easy(), Policy::conservative()] {
        let name = policy.name();
        let pools = Pools::from([("ansys".to_string(), (4, vec![0, 1]))]);
        let mut d = Driver::new(&[4, 4], policy, pools);
        d.local(0, asking(1, 0, 1, 100, "ansys", 3), 100);
        d.local(1, asking(2, 0, 1, 100, "ansys", 3), 100);
        d.local(1, asking(3, 0, 1, 50, "ansys", 1), 50);
        d.run(Time(1_000));
        assert_eq!(d.peak["ansys"], 4, "{name}");
        let starts: Vec<(u64, i64)> = d.starts.iter().map(|(j, t)| (j.0, t.secs())).collect();
        let want = if name == "fcfs" {
            // Job 3 waits behind job 2 at the head of cluster 1's queue.
            vec![(1, 0), (2, 100), (3, 100)]
        } else {
            vec![(1, 0), (2, 100), (3, 0)]
        };
        assert_eq!(starts, want, "{name}");
    }
}

/// A pool served to one cluster only is that cluster's: a pool of the same size on the
/// other cluster is another pool, and both clusters hold 3 at once.
#[test]
fn pools_of_one_cluster_each_are_separate() {
    let pools = Pools::from([
        ("ansys".to_string(), (4, vec![0])),
        ("fluent".to_string(), (4, vec![1])),
    ]);
    let mut d = Driver::new(&[4, 4], Policy::easy(), pools);
    d.local(0, asking(1, 0, 1, 100, "ansys", 3), 100);
    d.local(1, asking(2, 0, 1, 100, "fluent", 3), 100);
    d.run(Time(1_000));
    assert_eq!(d.starts[&JobId(1)], Time(0));
    assert_eq!(d.starts[&JobId(2)], Time(0));
}

const GLOBAL: u64 = 1 << 40;

fn demand(pool: &str, n: u32) -> BTreeMap<String, u32> {
    if n == 0 {
        BTreeMap::new()
    } else {
        BTreeMap::from([(pool.to_string(), n)])
    }
}

fn global(
    id: u64,
    submit: i64,
    procs: u32,
    walltime: i64,
    licences: BTreeMap<String, u32>,
) -> GlobalJob {
    GlobalJob {
        id: JobId(GLOBAL + id),
        user: UserId(1),
        submit: Time(submit),
        procs,
        walltime: Dur(walltime),
        max_price: 1.0,
        input_mb: 0.0,
        home: None,
        co_allocate: true,
        criterion: Criterion::EarliestFinish,
        priority: 0,
        requeue: false,
        begin: None,
        requires: Default::default(),
        licences,
        prediction: None,
    }
}

/// A global job asking for 3 of a pool of 4 while a local job holds 2 until 100 is planned
/// and reserved from 100 and starts then, not before, although cluster 1 is idle. A local
/// job asking 2 for 50 s that arrives at 75 would fit beside the local job, but not beside
/// the reservation: it does not take the licences from under it and starts at 150.
#[test]
fn a_global_job_waits_for_its_licences_and_its_reservation_holds_them() {
    let pools = Pools::from([("ansys".to_string(), (4, vec![0, 1]))]);
    let mut d = Driver::new(&[4, 4], Policy::easy(), pools);
    d.local(0, asking(1, 0, 1, 100, "ansys", 2), 100);
    d.global(global(2, 0, 2, 50, demand("ansys", 3)), 50);
    d.run(Time(75));
    // Reserved within the lead time (60 s) of 100.
    assert_eq!(d.reserved.get(&JobId(GLOBAL + 2)), Some(&Time(100)));
    d.local(1, asking(3, 75, 1, 50, "ansys", 2), 50);
    d.run(Time(1_000));
    assert_eq!(d.starts[&JobId(GLOBAL + 2)], Time(100));
    assert_eq!(d.starts[&JobId(3)], Time(150));
    assert_eq!(d.peak["ansys"], 3);
}

/// Work conservation with licences. Cluster 0 (4 processors) runs local jobs A (2
/// processors, 1 licence, to 190) and B (2 processors, estimated to 200): a global job of 4
/// processors asking 3 of the pool is reserved from 200. B ends at 160; at the cycle at 180
/// the reservation moves earlier, to A's end at 190 (before, a reservation holding
/// licences never moved), and its licences move with it: a local job on cluster 1 asking 2
/// for 20 s from 185 finds only 1 free from 190 until the global job ends at 240, and
/// starts then.
#[test]
fn a_reserved_global_job_moves_earlier_with_its_licences() {
    let pools = Pools::from([("ansys".to_string(), (4, vec![0, 1]))]);
    let mut d = Driver::new(&[4, 1], Policy::easy(), pools);
    d.local(0, asking(1, 0, 2, 190, "ansys", 1), 190);
    d.local(0, asking(2, 0, 2, 200, "ansys", 0), 160);
    let mut wide = global(3, 0, 4, 50, demand("ansys", 3));
    wide.co_allocate = false;
    d.global(wide, 50);
    d.run(Time(155));
    assert_eq!(d.reserved.get(&JobId(GLOBAL + 3)), Some(&Time(200)));
    d.run(Time(185));
    assert_eq!(
        d.reserved.get(&JobId(GLOBAL + 3)),
        Some(&Time(190)),
        "moved earlier"
    );
    d.local(1, asking(4, 185, 1, 20, "ansys", 2), 20);
    d.run(Time(1_000));
    assert_eq!(d.starts[&JobId(GLOBAL + 3)], Time(190));
    assert_eq!(
        d.starts[&JobId(4)],
        Time(240),
        "the moved window holds the licences"
    );
    assert_eq!(d.peak["ansys"], 3);
}

/// A global job asking for a pool no cluster draws on, or for more than it has, is
/// refused, naming the pool.
#[test]
fn impossible_global_demands_are_refused() {
    let pools = Pools::from([("ansys".to_string(), (4, vec![0]))]);
    let mut d = Driver::new(&[4, 4], Policy::easy(), pools);
    d.global(global(1, 0, 1, 50, demand("ansys", 5)), 50);
    d.global(global(2, 0, 1, 50, demand("fluent", 1)), 50);
    d.run(Time(100));
    assert_eq!(
        d.refused,
        BTreeSet::from([JobId(GLOBAL + 1), JobId(GLOBAL + 2)])
    );
}

#[derive(Clone, Debug)]
enum Op {
    Global {
        procs: u32,
        walltime: i64,
        used: f64,
        pool: usize,
        n: u32,
    },
    Local {
        cluster: usize,
        procs: u32,
        walltime: i64,
        used: f64,
        pool: usize,
        n: u32,
    },
    Wait(i64),
}

/// Pools: "shared" (4, clusters 0 and 1), "own" (2, cluster 2).
const POOLS: [(&str, u32); 2] = [("shared", 4), ("own", 2)];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (1u32..=6, 10i64..300, 0.1f64..1.0, 0usize..2, 0u32..=4).prop_map(
            |(procs, walltime, used, pool, n)| Op::Global { procs, walltime, used, pool, n }
        ),
        3 => (0usize..3, 1u32..=4, 10i64..300, 0.1f64..1.0, 0u32..=4).prop_map(
            |(cluster, procs, walltime, used, n)| Op::Local {
                cluster,
                procs,
                walltime,
                used,
                // The pool the cluster draws on.
                pool: usize::from(cluster == 2),
                n,
            }
        ),
        2 => (1i64..120).prop_map(Op::Wait),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn licences_are_never_oversubscribed_and_reservations_hold(
        ops in prop::collection::vec(op(), 1..30),
        conservative in any::<bool>(),
    ) {
        let pools = Pools::from([
            ("shared".to_string(), (4, vec![0, 1])),
            ("own".to_string(), (2, vec![2])),
        ]);
        let policy = if conservative { Policy::conservative() } else { Policy::easy() };
        let mut d = Driver::new(&[4, 4, 4], policy, pools);
        let mut submitted = Vec::new();
        for (i, op) in ops.into_iter().enumerate() {
            let now = d.now.secs();
            let id = i as u64 + 1;
            match op {
                Op::Global { procs, walltime, used, pool, n } => {
                    let (name, count) = POOLS[pool];
                    let job = global(id, now, procs, walltime, demand(name, n.min(count)));
                    submitted.push(job.id);
                    d.global(job, (walltime as f64 * used).max(1.0) as i64);
                }
                Op::Local { cluster, procs, walltime, used, pool, n } => {
                    let (name, count) = POOLS[pool];
                    let job = asking(id, now, procs, walltime, name, n.min(count));
                    submitted.push(job.id);
                    d.local(cluster, job, (walltime as f64 * used).max(1.0) as i64);
                }
                Op::Wait(dt) => {
                    let until = d.now + Dur(dt);
                    d.run(until);
                }
            }
        }
        d.run(Time(1_000_000));
        for id in submitted {
            prop_assert!(
                d.ended.contains(&id) || d.refused.contains(&id),
                "{id} never ended"
            );
        }
    }
}
