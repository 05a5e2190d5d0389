//! Same decisions: one seeded workload (local and global streams on two clusters,
//! co-allocation, jobs ending long before their walltimes, users cancelling jobs that have
//! not started) run by `sim grid` and by the
//! service's [`World`] driven by the simulator's virtual clock and event order starts every
//! job and every part at the same second on the same cluster, with each predictor: jobs are
//! planned by their predictions from the same statistics, and the same running jobs are
//! corrected at the same instants. A second grid has a cluster twice as fast as the
//! reference processor, where global parts run half their reference runtime: both sides
//! keep a global job's history in reference seconds.
//!
//! The driver below is the simulator's event loop (`foresight_sim::grid` `run.rs`) with the
//! service's entry points in place of the simulator's: `accept` for submissions,
//! `on_finished` for ends, `cycle` for planning cycles, `correct_outlived` when a running
//! job's prediction runs out. Whatever either side does after a broker decision is thereby
//! compared. After every event the records a store would hold (the rows the world's tables
//! marked changed) are checked against the world's own: no change escapes the store.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::config::ClusterConfig;
use foresight_core::broker::BrokerAction;
use foresight_core::broker::Phase;
use foresight_core::predict::Predictor;
use foresight_core::ClusterId;
use foresight_rm::Outcome;
use foresight_sim::grid::{lookahead_trace, GridConfig, LookaheadTrace, TracedJob};
use std::cmp::Reverse;
use std::collections::BTreeSet;
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
fn local_id(k: ClusterId, index: u64) -> u64 {
    ((k.as_num() as u64 + 1) << 32) + index
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
    End { cluster: ClusterId, job: u64 },
    Local { cluster: ClusterId, index: usize },
    Global { index: usize },
    Cycle,
    Tick { cluster: ClusterId },
    Cancel { index: usize },
    Correct,
}

struct Driver<'a> {
    grid: &'a GridConfig,
    trace: &'a LookaheadTrace,
    world: World,
    heap: BinaryHeap<Reverse<(i64, u64, Ev)>>,
    seq: u64,
    ticks: Vec<BTreeSet<i64>>,
    runtimes: HashMap<u64, i64>,
    /// Each global job's runtime on the reference processor, from which each of its
    /// reservations sets its run in `runtimes`.
    reference: HashMap<u64, i64>,
    last_arrival: i64,
    /// Per cluster, when each job or part started there.
    starts: Vec<BTreeMap<TracedJob, Time>>,
    /// Instants a correction is queued for (the simulator's `Ev::Correct`).
    corrections: BTreeSet<i64>,
    /// The records as a store written after every event would hold them: each job as
    /// accepted, then every row the world's tables marked changed.
    stored_jobs: BTreeMap<JobId, JobRecord>,
    stored_reservations: BTreeMap<ReservationId, ReservationRecord>,
}

impl Driver<'_> {
    /// Writes the changed rows as the service's flush does, then checks that the store
    /// holds every record as the world has it: no change escaped its table's marking.
    fn write_changed(&mut self, now: i64) {
        for id in self.world.jobs.take_changed() {
            if let Some(j) = self.world.jobs.get(&id) {
                self.stored_jobs.insert(id, j.clone());
            }
        }
        for id in self.world.reservations.take_changed() {
            if let Some(r) = self.world.reservations.get(&id) {
                self.stored_reservations.insert(id, r.clone());
            }
        }
        if let Some((id, j)) = self
            .world
            .jobs
            .iter()
            .find(|&(id, j)| self.stored_jobs.get(id) != Some(j))
        {
            panic!(
                "at {now} job {id} changed unmarked: stored {:?}, now {j:?}",
                self.stored_jobs.get(id)
            );
        }
        assert_eq!(
            &self.stored_reservations, &*self.world.reservations,
            "at {now} a reservation changed unmarked"
        );
    }

    fn push(&mut self, t: i64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq, ev)));
    }

    /// A job as the service takes it. `app` is the simulator's application: the service
    /// names one for every job (its program, else `--app`), so a job whose application the
    /// simulator does not know runs one of its own, which has no history.
    fn record(
        &self,
        id: u64,
        user: String,
        app: Option<u64>,
        procs: u32,
        walltime: i64,
        now: i64,
    ) -> JobRecord {
        JobRecord {
            submitted_at: now,
            app: Some(app.map_or_else(|| format!("unknown-{id}"), |a| format!("app-{a}"))),
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
                    job,
                    start,
                    end,
                    parts,
                    ..
                } => {
                    // The parts run its reference runtime at the speed of the slowest
                    // processor chosen, or its window when shorter (the simulator's rule).
                    let slowest = parts
                        .iter()
                        .flat_map(|p| {
                            let procs = &self.world.broker.clusters[p.cluster].processors;
                            p.processors.iter().map(move |&i| procs[i as usize].speed)
                        })
                        .fold(f64::INFINITY, f64::min);
                    let slowest = if slowest.is_finite() { slowest } else { 1.0 };
                    let reference = self.reference[&job.0] as f64;
                    let run = (reference / slowest).ceil() as i64;
                    self.runtimes
                        .insert(job.0, run.min((end - start).as_secs()));
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
                let app = self.trace.apps[cluster][index];
                let user = local_user(cluster, job.cred.user.0);
                let mut r = self.record(id, user, app, job.procs, job.estimate.as_secs(), now);
                r.cluster = Some(self.grid.cluster[cluster].name.clone());
                self.stored_jobs.insert(JobId(r.id), r.clone());
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
                self.reference.insert(id, runtime.as_secs());
                // The simulator's global jobs name no application.
                let mut r = self.record(
                    id,
                    format!("u{}", job.user.0),
                    None,
                    job.procs,
                    job.walltime.as_secs(),
                    now,
                );
                r.price = Some(job.max_price);
                r.co_allocate = job.co_allocate;
                // The service refuses at submission what the simulator's broker refuses
                // when it first sees it (more processors than reachable): neither starts.
                if self.world.admit(&r).is_ok() {
                    self.stored_jobs.insert(JobId(r.id), r.clone());
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
            Ev::Correct => {
                self.corrections.remove(&now);
                self.world.correct_outlived(Time(now));
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
                    self.plan_correction(now);
                    return;
                }
            }
        }
        self.follow(now);
        self.plan_correction(now);
    }

    /// Queues a correction at the next end of a running job's prediction, as the service's
    /// cycle wakes up then.
    fn plan_correction(&mut self, now: i64) {
        if let Some(at) = self.world.next_plan_end(Time(now)) {
            if self.corrections.insert(at.secs()) {
                self.push(at.secs(), Ev::Correct);
            }
        }
    }
}

/// The service's name of a local user: a trace's users are its cluster's own.
fn local_user(cluster: ClusterId, user: u32) -> String {
    format!("c{cluster}-u{user}")
}

/// What both sides did with one workload: the simulator's run, and the service's starts
/// and corrections.
struct Both {
    trace: LookaheadTrace,
    /// Per cluster, when the service started each job or part there.
    starts: Vec<BTreeMap<TracedJob, Time>>,
    /// Corrections the service made (counted on its jobs' predictions).
    corrected: u64,
}

/// Runs the grid `text` with `predict` by the simulator and by the service, and checks that
/// they started the same jobs at the same seconds and that the service's records agree.
fn same_decisions(text: &str, predict: Predictor) -> Both {
    let mut grid = GridConfig::parse(text, "same-decisions.toml").unwrap();
    grid.predict = predict;
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
        predict,
        backfill_order: grid.backfill_order,
        correction: grid.correction,
        ..Config::default()
    };
    let mut world = World::new(&cfg);
    let locals = trace.local.iter().enumerate().flat_map(|(k, jobs)| {
        jobs.iter()
            .map(move |(job, _)| local_user(ClusterId(k), job.cred.user.0))
    });
    let names: BTreeSet<String> = trace
        .global
        .iter()
        .map(|(job, _)| format!("u{}", job.user.0))
        .chain(locals)
        .collect();
    for name in names {
        world.add_user(UserRecord {
            token_hash: name.clone(),
            name,
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
        reference: HashMap::new(),
        last_arrival: trace.global.last().map_or(0, |g| g.0.submit.secs()),
        starts: vec![BTreeMap::new(); grid.cluster.len()],
        corrections: BTreeSet::new(),
        stored_jobs: BTreeMap::new(),
        stored_reservations: BTreeMap::new(),
    };
    for (k, local) in trace.local.iter().enumerate() {
        for (i, (job, _)) in local.iter().enumerate() {
            d.push(
                job.submit.secs(),
                Ev::Local {
                    cluster: ClusterId(k),
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
        d.write_changed(now);
    }

    // The first disagreement, in time: the later ones follow from it.
    let mut differ: Vec<(Time, String)> = Vec::new();
    for (k, (sim, service)) in trace.starts.iter().zip(&d.starts).enumerate() {
        let name = grid.cluster[k].name.as_str();
        let jobs: BTreeSet<&TracedJob> = sim.keys().chain(service.keys()).collect();
        for job in jobs {
            let (a, b) = (sim.get(job).copied(), service.get(job).copied());
            if a != b {
                let first = a.into_iter().chain(b).min().unwrap();
                differ.push((
                    first,
                    format!(
                        "{job:?} on {name}: the simulator started it at {a:?}, the service at {b:?}"
                    ),
                ));
            }
        }
    }
    differ.sort();
    if let Some((_, what)) = differ.first() {
        panic!("{what} ({} starts differ)", differ.len());
    }
    let withdrawn = d
        .world
        .jobs
        .values()
        .filter(|j| j.state == JobState::Cancelled)
        .count();
    assert!(withdrawn >= 1, "no job was cancelled before it started");
    // The records say the same as the broker's starts.
    for (&JobId(id), j) in d.world.jobs.iter() {
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
    let corrected = d
        .world
        .jobs
        .values()
        .filter_map(|j| j.prediction.as_ref())
        .map(|p| u64::from(p.corrections))
        .sum();
    assert_eq!(corrected, trace.corrected, "corrections");
    let starts = std::mem::take(&mut d.starts);
    drop(d);
    Both {
        trace,
        starts,
        corrected,
    }
}

/// With `predict`, the workload's decisions are not those without predictions (some job
/// starts elsewhere or at another second), and jobs that outlived their predictions were
/// corrected: a side that ignored predictions, or corrected at other instants, would
/// disagree with the other.
fn predictions_matter(text: &str, predict: Predictor) -> Both {
    let with = same_decisions(text, predict);
    assert!(with.corrected >= 3, "{} corrections", with.corrected);
    let mut grid = GridConfig::parse(text, "same-decisions.toml").unwrap();
    grid.predict = Predictor::None;
    let without = lookahead_trace(&grid).unwrap();
    let changed = (0..with.starts.len())
        .map(|k| {
            let (a, b) = (&with.trace.starts[k], &without.starts[k]);
            a.iter().filter(|(j, t)| b.get(j) != Some(t)).count()
        })
        .sum::<usize>();
    assert!(changed >= 5, "only {changed} starts moved by {predict:?}");
    with
}

#[test]
fn the_service_decides_what_the_simulator_decides() {
    let both = same_decisions(GRID, Predictor::None);
    assert_eq!(both.corrected, 0);
}

/// Tsafrir's predictor: local users have histories of their own on each cluster, global
/// jobs (all of one user here) the grid's; local jobs and global parts outlive their
/// predictions and are corrected (to their walltimes, the grid's default). A day, not half
/// of one: the paper's predictor waits for two of a user's jobs to end.
#[test]
fn the_service_decides_what_the_simulator_decides_with_tsafrir_predictions() {
    let _ = predictions_matter(&GRID.replace("days = 0.5", "days = 1"), Predictor::Tsafrir);
}

/// The same with the paper's incremental correction: plans grow by its steps, each step one
/// more correction at the same instant on both sides.
#[test]
fn the_service_decides_what_the_simulator_decides_with_incremental_corrections() {
    let text = GRID.replace("days = 0.5", "days = 1\ncorrection = \"incremental\"");
    let incremental = predictions_matter(&text, Predictor::Tsafrir);
    let straight = same_decisions(&GRID.replace("days = 0.5", "days = 1"), Predictor::Tsafrir);
    assert!(
        incremental.corrected > straight.corrected,
        "{} corrections by steps, {} straight to the walltime",
        incremental.corrected,
        straight.corrected
    );
}

/// The `app` predictor: local traces whose jobs run a few applications, each about as long
/// as its last runs (some longer, so corrections land), far below their estimates.
#[test]
fn the_service_decides_what_the_simulator_decides_with_app_predictions() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = GRID.to_string();
    for (k, (procs, gap)) in [(16, 300), (8, 600)].into_iter().enumerate() {
        let path = dir.path().join(format!("local-{k}.swf"));
        std::fs::write(&path, app_trace(k as u64 + 1, procs, gap, 43_200)).unwrap();
        let synthetic = [
            "local = { load = 0.7, seed = 3 }",
            "local = { load = 0.6, seed = 5 }",
        ][k];
        text = text.replace(synthetic, &format!("local = {{ trace = {:?} }}", path));
    }
    assert!(!text.contains("load ="), "{text}");
    let _ = predictions_matter(&text, Predictor::App);
}

/// [`GRID`] with cluster b twice as fast as the reference processor: global parts there
/// run half their reference runtime (rounded up) in windows half their walltime, and b's
/// local jobs half their trace's runtimes and estimates.
fn grid_at_speed_2() -> String {
    let fast = GRID.replacen(
        "name = \"b\"\nprocs = 8\n",
        "name = \"b\"\nprocs = 8\nspeed = 2.0\n",
        1,
    );
    assert_ne!(fast, GRID);
    fast
}

#[test]
fn the_service_decides_what_the_simulator_decides_on_a_faster_cluster() {
    let both = same_decisions(&grid_at_speed_2(), Predictor::None);
    assert_eq!(both.corrected, 0);
}

/// Tsafrir's predictor with global jobs running on the faster cluster: the service records
/// a global job's run in reference seconds (its elapsed time at the speed of its slowest
/// part), as the simulator does. Before, it recorded the elapsed time, so the user's
/// history, and the predictions and decisions drawn from it, differed from the
/// simulator's.
#[test]
fn the_service_decides_what_the_simulator_decides_on_a_faster_cluster_with_tsafrir() {
    let both = predictions_matter(&grid_at_speed_2(), Predictor::Tsafrir);
    // Global jobs did run on the faster cluster.
    let on_b = both.starts[1]
        .keys()
        .filter(|j| matches!(j, TracedJob::Global(_)))
        .count();
    assert!(on_b >= 5, "{on_b} global parts on b");
}

/// An SWF trace of a cluster of `procs` processors with a job every `gap` seconds for
/// `span` seconds: four applications (executables 1-4) of 300 to 2 400 s on 1 to 8
/// processors, each run 80 % to 130 % of its application's length, estimated at three
/// times that length, by six users.
fn app_trace(seed: u64, procs: u32, gap: i64, span: i64) -> String {
    let mut x = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    let mut next = move |n: u64| {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (x >> 33) % n
    };
    let mut out = String::new();
    for i in 0..span / gap {
        let app = next(4);
        let base = [300, 600, 1_200, 2_400][app as usize];
        let p = [1, 2, 4, 8][app as usize].min(procs);
        let run = base * (80 + next(51) as i64) / 100;
        let user = 1 + next(6);
        let submit = i * gap + next(gap as u64) as i64;
        out.push_str(&format!(
            "{} {submit} 0 {run} {p} -1 -1 {p} {} -1 1 {user} 1 {} 1 -1 -1 -1\n",
            i + 1,
            base * 3,
            app + 1
        ));
    }
    out
}
