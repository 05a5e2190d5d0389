//! Same decisions: one seeded workload (local and global streams on two clusters,
//! co-allocation, jobs ending long before their walltimes, users cancelling jobs that have
//! not started) run by `sim grid` and by the
//! service's [`World`] driven by the simulator's virtual clock and event order starts every
//! job and every part at the same second on the same cluster.
//!
//! The driver below is the simulator's event loop (`foresight_sim::grid` `run.rs`) with the
//! service's entry points in place of the simulator's: `accept` for submissions,
//! `on_finished` for ends, `cycle` for planning cycles. Whatever either side does after a
//! broker decision is thereby compared.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::config::ClusterConfig;
use foresight_sim::grid::{lookahead_trace, GridConfig, LookaheadTrace, TracedJob};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

const GRID: &str = r#"
days = 0.5
cycle_seconds = 60
lead_time_seconds = 300
horizon_hours = 24
plan_depth = 64

[[cluster]]
name = "a"
procs = 16
policy = "easy"
tariff = 1.0
local_premium = 1.0
bandwidth_mb_s = 100
latency_seconds = 0
local = { load = 0.7, seed = 3 }

[[cluster]]
name = "b"
procs = 8
policy = "conservative"
tariff = 1.5
local_premium = 1.0
bandwidth_mb_s = 100
latency_seconds = 0
local = { load = 0.6, seed = 5 }

[global]
arrivals_per_hour = 10
procs = [1, 20]
runtime_seconds = [60, 3600]
estimate_factor = [1.0, 3.0]
price = [1.5, 3.0]
input_mb = 0
no_coallocation_share = 0.3
cancel_share = 0.2
cancel_after_seconds = [60, 1800]
seed = 11
"#;

/// World ids: a cluster's local jobs below every global job, in the simulator's order.
fn local_id(k: usize, index: u64) -> u64 {
    ((k as u64 + 1) << 32) + index
}

const GLOBAL: u64 = 1 << 40;

fn traced(id: u64) -> TracedJob {
    if id >= GLOBAL {
        TracedJob::Global(id - GLOBAL)
    } else {
        TracedJob::Local(id & 0xffff_ffff)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    End { cluster: usize, job: u64 },
    Local { cluster: usize, index: usize },
    Global { index: usize },
    Cycle,
    Tick { cluster: usize },
    Cancel { index: usize },
}

struct Driver<'a> {
    grid: &'a GridConfig,
    trace: &'a LookaheadTrace,
    world: World,
    heap: BinaryHeap<Reverse<(i64, u64, Ev)>>,
    seq: u64,
    ticks: Vec<BTreeSet<i64>>,
    runtimes: HashMap<u64, i64>,
    last_arrival: i64,
    /// Per cluster, when each job or part started there.
    starts: Vec<BTreeMap<TracedJob, Time>>,
}

impl Driver<'_> {
    fn push(&mut self, t: i64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq, ev)));
    }

    fn record(&self, id: u64, user: String, procs: u32, walltime: i64, now: i64) -> JobRecord {
        JobRecord {
            submitted_at: now,
            ..super::tests::job(id, &user, procs, walltime)
        }
    }

    /// What the broker decided in the last call, as the simulator acts on it: a start
    /// schedules the part's end, a wake the cluster's tick.
    fn follow(&mut self, now: i64) {
        for a in std::mem::take(&mut self.world.actions) {
            match a {
                BrokerAction::Start { cluster, job, .. } => {
                    let run = self.runtimes[&job.0];
                    self.starts[cluster].insert(traced(job.0), Time(now));
                    self.push(
                        now + run,
                        Ev::End {
                            cluster,
                            job: job.0,
                        },
                    );
                }
                BrokerAction::Wake { cluster, at } if self.ticks[cluster].insert(at.secs()) => {
                    self.push(at.secs(), Ev::Tick { cluster });
                }
                BrokerAction::Reserved {
                    job, start, end, ..
                } => {
                    // The part runs its runtime, or its window when shorter.
                    let run = self.runtimes.get_mut(&job.0).unwrap();
                    *run = (*run).min((end - start).as_secs());
                }
                _ => {}
            }
        }
    }

    fn on_event(&mut self, now: i64, ev: Ev) {
        match ev {
            Ev::Local { cluster, index } => {
                let (job, runtime) = &self.trace.local[cluster][index];
                let id = local_id(cluster, index as u64);
                self.runtimes.insert(id, runtime.as_secs());
                let mut r = self.record(id, "owner".into(), job.procs, job.estimate.as_secs(), now);
                r.cluster = Some(self.grid.cluster[cluster].name.clone());
                self.world.accept(Time(now), vec![r]);
            }
            Ev::Cancel { index } => {
                let id = GLOBAL + index as u64;
                let j = self.world.jobs.get(&JobId(id));
                if j.is_some_and(|j| j.started_at.is_none() && !j.state.is_final()) {
                    self.world.cancel(Time(now), JobId(id)).unwrap();
                }
            }
            Ev::Global { index } => {
                if let Some(after) = self.trace.cancel_after[index] {
                    self.push(now + after.as_secs(), Ev::Cancel { index });
                }
                let (job, runtime) = &self.trace.global[index];
                let id = GLOBAL + index as u64;
                self.runtimes.insert(id, runtime.as_secs());
                let mut r = self.record(
                    id,
                    format!("u{}", job.user.0),
                    job.procs,
                    job.walltime.as_secs(),
                    now,
                );
                r.price = Some(job.max_price);
                r.co_allocate = job.co_allocate;
                // The service refuses at submission what the simulator's broker refuses
                // when it first sees it (more processors than reachable): neither starts.
                if self.world.admit(&r).is_ok() {
                    self.world.accept(Time(now), vec![r]);
                }
            }
            Ev::End { cluster, job } => {
                let attempt = self.world.jobs[&JobId(job)].attempt;
                let outcome = Outcome {
                    exit_code: Some(0),
                    signal: None,
                    timed_out: false,
                    cancelled: false,
                    started_at: 0,
                    ended_at: now,
                    error: None,
                };
                self.world
                    .on_finished(Time(now), cluster, JobId(job), attempt, &outcome);
            }
            Ev::Tick { cluster } => {
                self.ticks[cluster].remove(&now);
                self.world.tick_cluster(Time(now), cluster);
            }
            Ev::Cycle => {
                self.world.cycle(Time(now));
                let b = &self.world.broker;
                let pending = b.has_queued()
                    || b.entries().any(|e| {
                        matches!(
                            e.phase,
                            Phase::Queued | Phase::Planned { .. } | Phase::Reserving { .. }
                        )
                    });
                if pending || now < self.last_arrival {
                    self.follow(now);
                    self.push(now + self.grid.cycle_seconds, Ev::Cycle);
                    return;
                }
            }
        }
        self.follow(now);
    }
}

#[test]
fn the_service_decides_what_the_simulator_decides() {
    let grid = GridConfig::parse(GRID, "same-decisions.toml").unwrap();
    let trace = lookahead_trace(&grid).unwrap();
    let globals = trace.global.len();
    let coallocated = trace.starts[0]
        .keys()
        .filter(|j| matches!(j, TracedJob::Global(_)) && trace.starts[1].contains_key(j))
        .count();
    assert!(globals >= 30, "{globals} global jobs");
    assert!(coallocated >= 2, "{coallocated} co-allocated");
    let cancelled = trace.cancel_after.iter().flatten().count();
    assert!(cancelled >= 3, "{cancelled} cancels");

    let cfg = Config {
        cluster: grid
            .cluster
            .iter()
            // The simulator's clusters as the service reads them: the same settings.
            .map(|c| ClusterConfig {
                spec: c.spec.clone(),
                ..ClusterConfig::local(&c.name, c.procs)
            })
            .collect(),
        data_dir: "/nonexistent".into(),
        horizon_seconds: grid.horizon_hours * 3600,
        lead_time_seconds: grid.lead_time_seconds,
        plan_depth: grid.plan_depth,
        ..Config::default()
    };
    let mut world = World::new(&cfg);
    world.add_user(UserRecord {
        name: "owner".into(),
        token_hash: "owner".into(),
        admin: false,
        budget: None,
        spent: 0.0,
        unix_user: None,
        ..Default::default()
    });
    for (job, _) in &trace.global {
        world.add_user(UserRecord {
            name: format!("u{}", job.user.0),
            token_hash: format!("u{}", job.user.0),
            admin: false,
            budget: None,
            spent: 0.0,
            unix_user: None,
            ..Default::default()
        });
    }
    let mut d = Driver {
        grid: &grid,
        trace: &trace,
        world,
        heap: BinaryHeap::new(),
        seq: 0,
        ticks: vec![BTreeSet::new(); grid.cluster.len()],
        runtimes: HashMap::new(),
        last_arrival: trace.global.last().map_or(0, |g| g.0.submit.secs()),
        starts: vec![BTreeMap::new(); grid.cluster.len()],
    };
    for (k, local) in trace.local.iter().enumerate() {
        for (i, (job, _)) in local.iter().enumerate() {
            d.push(
                job.submit.secs(),
                Ev::Local {
                    cluster: k,
                    index: i,
                },
            );
        }
    }
    for (i, (job, _)) in trace.global.iter().enumerate() {
        d.push(job.submit.secs(), Ev::Global { index: i });
    }
    if !trace.global.is_empty() {
        d.push(0, Ev::Cycle);
    }
    while let Some(Reverse((now, _, ev))) = d.heap.pop() {
        d.on_event(now, ev);
    }

    for (k, (sim, service)) in trace.starts.iter().zip(&d.starts).enumerate() {
        let name = &grid.cluster[k].name;
        for (job, at) in sim {
            assert_eq!(
                service.get(job),
                Some(at),
                "{job:?} on {name}: the simulator started it at {at}"
            );
        }
        assert_eq!(sim.len(), service.len(), "jobs started on {name}");
    }
    let withdrawn = d
        .world
        .jobs
        .values()
        .filter(|j| j.state == JobState::Cancelled)
        .count();
    assert!(withdrawn >= 1, "no job was cancelled before it started");
    // The records say the same as the broker's starts.
    for (&JobId(id), j) in &d.world.jobs {
        let first = d
            .starts
            .iter()
            .enumerate()
            .filter(|&(k, _)| id >= GLOBAL || k as u64 == (id >> 32) - 1)
            .filter_map(|(_, s)| s.get(&traced(id)))
            .min()
            .map(|t| t.secs());
        assert_eq!(j.started_at, first, "job {id}");
        if j.state == JobState::Failed {
            continue; // refused by the broker (the simulator refused it as well: no start)
        }
        let done = if j.started_at.is_some() {
            JobState::Completed
        } else {
            JobState::Cancelled
        };
        assert_eq!(j.state, done, "job {id}");
    }
}
