//! Licence pools on the grid, driven through the broker as the simulator and the service
//! drive it: a pool drawn on by several clusters (a floating licence server) is one pool,
//! whichever cluster's jobs hold it.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

use foresight_core::broker::{processors_of, Broker, BrokerAction, GridCluster, SpeedGroup};
use foresight_core::grid::PlannerConfig;
use foresight_core::{Dur, Job, JobId, LocalScheduler, Policy, Time};
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
            broker.add_licence_pool(name, *count, on);
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
        }
    }

    fn local(&mut self, k: usize, job: Job, runtime: i64) {
        self.runtime.insert(job.id, runtime);
        self.demand.insert(job.id, job.licences.clone());
        let mut out = Vec::new();
        self.broker
            .submit_local(self.now, k, job, &mut out)
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
                    self.running.insert((self.now + Dur(run), cluster, job));
                }
                BrokerAction::Wake { cluster, at } => {
                    self.wakes.insert((at, cluster));
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
                    for (pool, k) in self.demand.get(&job).cloned().unwrap_or_default() {
                        *self.held.get_mut(&pool).unwrap() -= k;
                    }
                }
                self.broker.on_part_ended(t, k, job, &mut out);
            }
            while let Some(&(at, k)) = self.wakes.first() {
                if at > t {
                    break;
                }
                self.wakes.pop_first();
                self.broker.tick(t, k, &mut out);
            }
            if t == next_cycle {
                self.broker.on_cycle(t, &mut out);
            }
            self.carry_out(out);
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
