//! The grid simulation's event loop: one handler per event, over the same broker the
//! service runs ([`foresight_core::broker::Broker`]). The simulator keeps only its own
//! bookkeeping: the virtual clock, the streams, what ran where, and the baselines.

use super::{
    cancellations, global_stream, local_stream_apps, report_group, BrokerKind, ClusterReport,
    GridConfig, GridError, GridReport, LevelReport, LevelsReport, UserConfig, UserReport,
};
use crate::plot::Span;
use foresight_core::broker::{self, BrokerAction, Phase};
use foresight_core::grid::{GlobalJob, PlannerConfig};
use foresight_core::policy::ALL;
use foresight_core::predict::{reference_runtime, Predictor, RunKey, RuntimeStats};
use foresight_core::{
    Action, ClusterId, Dur, Event, Job, JobId, LocalScheduler, Policy, Time, UserId,
};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

/// Global jobs' ids start here, above every local job's id, since a global job's parts
/// share the clusters' schedulers with the local jobs.
pub(super) const GLOBAL_PART: u64 = 1 << 40;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// A job on a cluster (`0..n`) or a dedicated partition (`n..2n`) ended. `run` is a
    /// global job's run it ends (a preemption withdraws the ends of the run it stops); 0
    /// for local jobs.
    End {
        cluster: usize,
        job: JobId,
        run: u32,
    },
    /// A local job is submitted.
    Local { cluster: ClusterId, index: usize },
    /// A global job arrives.
    Global { index: usize },
    /// The planning cycle.
    Cycle,
    /// A cluster should run a pass (a reservation starts or ends).
    Tick { cluster: ClusterId },
    /// A global job's user cancels it (if it has not started).
    Cancel { index: usize },
    /// A running job's predicted plan may end: jobs that outlive theirs are corrected.
    Correct,
}

/// What the simulator keeps of a cluster besides what the broker holds.
struct SimCluster {
    name: String,
    procs: u32,
    local: Vec<(Job, Dur)>,
    /// Work per running or finished job: start, end, procs; for the report. A preempted
    /// global job's part: its latest run here.
    ran: BTreeMap<JobId, (Time, Time, u32)>,
    /// Earlier runs of preempted global jobs' parts: job, start, stop, procs.
    stopped: Vec<(JobId, Time, Time, u32)>,
    ticks: BTreeSet<Time>,
    rejected: u64,
    /// Each local job's application (SWF executable), for the `app` predictor.
    apps: Vec<Option<u64>>,
    /// Its local policy's predictor.
    predictor: Predictor,
    /// The runs of its local jobs that finished: a trace's users are its own, so every
    /// cluster keeps its statistics apart.
    stats: RuntimeStats,
}

struct GlobalState {
    job: GlobalJob,
    runtime: Dur,
    /// Its runtime on reference processors, from which each reservation sets `runtime`.
    reference_runtime: Dur,
    /// The speed of the slowest processor it runs on (its parts run at that speed): its
    /// statistics record `runtime` at this speed on the reference processor, as the
    /// service, which sees only the elapsed time, does.
    speed: f64,
    start: Option<Time>,
    end: Option<Time>,
    parts_left: u32,
    clusters: u32,
    refused: bool,
    /// What the user paid.
    charged: f64,
    /// Queued by a baseline broker (charged the base tariff for what it used, at its start).
    queued: bool,
    /// What a queued job holds of its user's budget until it starts (the most it can be
    /// charged where it was queued); the difference to the charge is returned at the start.
    held: f64,
    /// Its user cancels it this long after its submission, if it has not started.
    cancel_after: Option<Dur>,
    /// Cancelled before it started.
    cancelled: bool,
    /// Where a baseline broker queued it (clusters `0..n`, dedicated partitions `n..2n`).
    queued_at: Option<usize>,
    /// Its current run: raised by each preemption, which withdraws the ends of the run
    /// it stops.
    run: u32,
    /// First start of its current attempt (a requeued job starts anew).
    attempt_start: Option<Time>,
    /// Largest gap between its first and last part to start within one attempt.
    skew: Dur,
    /// Times it was preempted.
    preempted: u32,
    /// Suspended parts: cluster → run time left.
    left: BTreeMap<ClusterId, Dur>,
}

/// One run of the grid.
struct GridRun<'a> {
    cfg: &'a GridConfig,
    kind: BrokerKind,
    /// The clusters' schedulers and, for `lookahead`, the global jobs.
    broker: broker::Broker,
    clusters: Vec<SimCluster>,
    /// Dedicated partitions (`dedicated:F` only), numbered `n..2n` in events.
    partitions: Vec<LocalScheduler>,
    globals: Vec<GlobalState>,
    /// What users have left; a user without an entry has no limit.
    budgets: BTreeMap<UserId, f64>,
    heap: BinaryHeap<Reverse<(Time, u64, Ev)>>,
    seq: u64,
    last_arrival: Time,
    give_up: Time,
    /// The grid's predictor, for global jobs.
    predictor: Predictor,
    /// The runs of global jobs that finished, on reference processors.
    global_stats: RuntimeStats,
    /// Whether any job is planned by a prediction (else no correction is ever due).
    predicting: bool,
    /// Instants a [`Ev::Correct`] is queued for.
    corrections: BTreeSet<Time>,
    /// Corrections of running jobs that outlived their prediction (local jobs and global
    /// jobs; the parts of a co-allocated job corrected together count once).
    corrected: u64,
    /// What absolute priorities did (preemptions, requeues, resumptions, lost work).
    levels: LevelCounts,
    /// Global jobs requeued by preemption while the current event was carried out.
    requeued_now: BTreeSet<JobId>,
    /// Whether the current event's carry-out started a global job's part.
    started_global: bool,
    /// Every part running whose end has not been handled: (job, cluster) → (end, procs).
    live: BTreeMap<(JobId, ClusterId), (Time, u32)>,
}

/// What absolute priorities did in a run, for the report.
#[derive(Default)]
struct LevelCounts {
    preemptions: u64,
    requeues: u64,
    resumptions: u64,
    lost_proc_seconds: f64,
}

impl GridRun<'_> {
    fn push(&mut self, t: Time, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq, ev)));
    }

    fn n(&self) -> usize {
        self.clusters.len()
    }

    fn core(&self, k: usize) -> impl FnOnce(foresight_core::CoreError) -> GridError + '_ {
        move |source| GridError::Core {
            cluster: self.cfg.cluster[k % self.cfg.cluster.len()].name.clone(),
            source,
        }
    }

    fn on_local(&mut self, now: Time, cluster: ClusterId, index: usize) -> Result<(), GridError> {
        let c = &self.clusters[cluster];
        let job = c.local[index].0.clone();
        let guess = c
            .predictor
            .predict(&c.stats, &local_key(&job, c.apps[index]), job.estimate);
        let job = job.with_prediction(guess);
        let mut out = Vec::new();
        let r = self.broker.submit_local(now, cluster, job, &mut out);
        r.map_err(self.core(cluster.as_num()))?;
        self.carry_out(now, &out);
        Ok(())
    }

    fn on_end(&mut self, now: Time, cluster: usize, job: JobId, run: u32) -> Result<(), GridError> {
        let n = self.n();
        if job.0 >= GLOBAL_PART {
            let gs = &mut self.globals[(job.0 - GLOBAL_PART) as usize];
            if run != gs.run {
                return Ok(()); // withdrawn: its run was preempted
            }
            self.live.remove(&(job, ClusterId(cluster % n)));
            gs.parts_left = gs.parts_left.saturating_sub(1);
            if gs.parts_left == 0 {
                gs.end = Some(now);
                let run = reference_runtime(gs.runtime, gs.speed, gs.job.walltime);
                self.global_stats.record(&global_key(&gs.job), run);
            }
        } else {
            self.live.remove(&(job, ClusterId(cluster % n)));
            let c = &mut self.clusters[cluster];
            let i = job.0 as usize;
            let key = local_key(&c.local[i].0, c.apps[i]);
            c.stats.record(&key, c.local[i].1);
        }
        if cluster < n {
            let mut out = Vec::new();
            self.broker
                .on_part_ended(now, ClusterId(cluster), job, &mut out);
            self.carry_out(now, &out);
        } else {
            let mut actions = Vec::new();
            let r = self.partitions[cluster - n].handle(now, Event::Finish(job), &mut actions);
            r.map_err(self.core(cluster))?;
            self.carry_out_partition(now, cluster, actions);
        }
        Ok(())
    }

    fn on_tick(&mut self, now: Time, cluster: ClusterId) {
        self.clusters[cluster].ticks.remove(&now);
        let mut out = Vec::new();
        self.broker.tick(now, cluster, &mut out);
        self.carry_out(now, &out);
    }

    fn on_global(&mut self, now: Time, index: usize) -> Result<(), GridError> {
        if let Some(after) = self.globals[index].cancel_after {
            self.push(now + after, Ev::Cancel { index });
        }
        let n = self.n();
        let job = &self.globals[index].job;
        let guess = self
            .predictor
            .predict(&self.global_stats, &global_key(job), job.walltime);
        let g = &mut self.globals[index];
        let budget = self
            .budgets
            .get(&g.job.user)
            .copied()
            .unwrap_or(f64::INFINITY);
        if g.job.worst_case_charge() > budget {
            g.refused = true;
            return Ok(());
        }
        // The same statistics plan global jobs, whatever the broker.
        g.job.prediction = guess;
        if self.kind == BrokerKind::Lookahead {
            self.broker.submit(now, g.job.clone());
            return Ok(());
        }
        let targets = match self.kind {
            BrokerKind::Queue => 0..n,
            _ => n..2 * n,
        };
        let best = earliest_target(
            targets,
            &self.broker,
            &self.partitions,
            self.cfg,
            &g.job,
            now,
        );
        let Some((t, speed)) = best else {
            g.refused = true;
            return Ok(());
        };
        let est = Dur(((g.job.walltime.as_secs() as f64) / speed).ceil() as i64);
        let run = Dur(((g.runtime.as_secs() as f64) / speed).ceil() as i64).min(est);
        // Hold the most it can be charged there until it starts.
        let held =
            self.broker.clusters[t % n].tariff.base * f64::from(g.job.procs) * est.as_secs() as f64;
        if let Some(b) = self.budgets.get_mut(&g.job.user) {
            if held > *b {
                g.refused = true;
                return Ok(());
            }
            *b -= held;
        }
        g.queued = true;
        g.queued_at = Some(t);
        g.held = held;
        g.parts_left = 1;
        g.clusters = 1;
        g.runtime = run;
        g.speed = speed;
        let planned = g
            .job
            .predicted()
            .map(|p| Dur(((p.as_secs() as f64) / speed).ceil() as i64))
            .filter(|&p| p < est);
        let job = Job::new(g.job.id, now, g.job.procs, est)
            .with_user(g.job.user)
            .with_prediction(planned);
        if t < n {
            let mut out = Vec::new();
            let r = self.broker.submit_local(now, ClusterId(t), job, &mut out);
            r.map_err(self.core(t))?;
            self.carry_out(now, &out);
        } else {
            let mut actions = Vec::new();
            let r = self.partitions[t - n].handle(now, Event::Submit(job), &mut actions);
            r.map_err(self.core(t))?;
            self.carry_out_partition(now, t, actions);
        }
        Ok(())
    }

    /// The user cancels a global job that has not started: out of the broker (its
    /// reservations released, its charge refunded) or out of the queue a baseline put it in.
    fn on_cancel(&mut self, now: Time, index: usize) {
        let n = self.n();
        let g = &self.globals[index];
        if g.start.is_some() || g.refused {
            return;
        }
        let id = g.job.id;
        match g.queued_at {
            None => {
                let mut out = Vec::new();
                if !self.broker.withdraw(now, id, &mut out) {
                    return;
                }
                self.carry_out(now, &out);
            }
            Some(t) => {
                let (user, held) = (g.job.user, g.held);
                if t < n {
                    let _ = self.broker.clusters[t].sched.cancel(now, id);
                    let mut out = Vec::new();
                    self.broker.tick(now, ClusterId(t), &mut out);
                    self.carry_out(now, &out);
                } else {
                    let mut actions = Vec::new();
                    let p = &mut self.partitions[t - n];
                    let _ = p.cancel(now, id);
                    let _ = p.handle(now, Event::Tick, &mut actions);
                    self.carry_out_partition(now, t, actions);
                }
                if let Some(b) = self.budgets.get_mut(&user) {
                    *b += held;
                }
            }
        }
        self.globals[index].cancelled = true;
    }

    /// Jobs that outlived their prediction are corrected, on the broker's clusters (and the
    /// grid plans again when one is a global job's part) and on the dedicated partitions.
    fn on_correct(&mut self, now: Time) {
        while self.corrections.first().is_some_and(|&t| t <= now) {
            self.corrections.pop_first();
        }
        let mut out = Vec::new();
        // One correction of a job's plan is one, however many parts it has.
        let jobs: BTreeSet<JobId> = self
            .broker
            .correct_outlived(now, &mut out)
            .into_iter()
            .map(|(_, id, _)| id)
            .collect();
        self.corrected += jobs.len() as u64;
        self.carry_out(now, &out);
        let n = self.n();
        for i in 0..self.partitions.len() {
            let p = &mut self.partitions[i];
            let due = p.outlived(now);
            if due.is_empty() {
                continue;
            }
            for (id, plan) in due {
                if let Some(longer) = p.corrected_plan(id, plan) {
                    if p.correct(now, id, longer).is_ok() {
                        self.corrected += 1;
                    }
                }
            }
            let mut actions = Vec::new();
            let _ = p.handle(now, Event::Tick, &mut actions);
            self.carry_out_partition(now, n + i, actions);
        }
        for k in 0..2 * n {
            self.plan_correction(now, k);
        }
    }

    /// Queues a correction at the next end of a predicted plan on cluster (or partition) `k`.
    fn plan_correction(&mut self, now: Time, k: usize) {
        if !self.predicting {
            return;
        }
        let n = self.n();
        let next = if k < n {
            self.broker.clusters[k].sched.next_plan_end(now)
        } else {
            self.partitions
                .get(k - n)
                .and_then(|p| p.next_plan_end(now))
        };
        if let Some(at) = next {
            if self.corrections.insert(at) {
                self.push(at, Ev::Correct);
            }
        }
    }

    fn on_cycle(&mut self, now: Time) {
        let mut out = Vec::new();
        self.broker.on_cycle(now, &mut out);
        self.carry_out(now, &out);
        let pending = self.broker.has_queued()
            || self.broker.entries().any(|e| {
                matches!(
                    e.phase,
                    Phase::Queued
                        | Phase::Planned { .. }
                        | Phase::Reserving { .. }
                        | Phase::Suspended { .. }
                )
            });
        let next = now + Dur(self.cfg.cycle_seconds);
        // Keep cycling while jobs wait (suspended ones resume at a cycle) or more are still
        // to arrive.
        if (pending || now < self.last_arrival) && next <= self.give_up {
            self.push(next, Ev::Cycle);
        }
    }

    /// Carries out the broker's decisions: starts schedule ends, wakes schedule ticks, and
    /// the global jobs' records follow their reservations and charges.
    fn carry_out(&mut self, now: Time, out: &[BrokerAction]) {
        for a in out {
            match a {
                BrokerAction::Start {
                    cluster,
                    job,
                    procs,
                    ..
                } => self.started(now, cluster.as_num(), *job, *procs),
                BrokerAction::Wake { cluster, at } => self.wake(*cluster, *at),
                BrokerAction::Reserved {
                    job,
                    start,
                    end,
                    parts,
                    ..
                } => {
                    // The part runs its runtime at the slowest chosen processor's speed.
                    let slowest = parts
                        .iter()
                        .flat_map(|p| {
                            let procs = &self.broker.clusters[p.cluster].processors;
                            p.processors.iter().map(move |&i| procs[i as usize].speed)
                        })
                        .fold(f64::INFINITY, f64::min);
                    let gs = &mut self.globals[(job.0 - GLOBAL_PART) as usize];
                    let slowest = if slowest.is_finite() { slowest } else { 1.0 };
                    // From its runtime on reference processors: a requeued job is
                    // reserved again, and runs anew.
                    gs.runtime =
                        Dur(((gs.reference_runtime.as_secs() as f64) / slowest).ceil() as i64)
                            .min(*end - *start);
                    gs.speed = slowest;
                    gs.parts_left = parts.len() as u32;
                    gs.clusters = parts.len() as u32;
                    gs.attempt_start = None;
                }
                BrokerAction::Charge { job, user, amount } => {
                    self.globals[(job.0 - GLOBAL_PART) as usize].charged += amount;
                    if let Some(b) = self.budgets.get_mut(user) {
                        *b -= amount;
                    }
                }
                BrokerAction::Refused { job, .. } => {
                    self.globals[(job.0 - GLOBAL_PART) as usize].refused = true;
                }
                BrokerAction::Planned { .. }
                | BrokerAction::Waiting { .. }
                | BrokerAction::Ask { .. }
                | BrokerAction::MoveAsked { .. }
                | BrokerAction::Moved { .. }
                | BrokerAction::ReservationEnded { .. }
                | BrokerAction::Ended { .. } => {}
                BrokerAction::Preempted {
                    job, how, parts, ..
                } => self.preempted(now, *job, *how, parts),
                BrokerAction::Resumed { job, parts, .. } => self.resumed(now, *job, parts),
                // Asked only of clusters that schedule themselves (Slurm): the simulator's
                // are all the broker's.
                BrokerAction::PreemptAsked { .. } | BrokerAction::ResumeAsked { .. } => {
                    unreachable!("invariant: the broker schedules every simulated cluster")
                }
            }
        }
    }

    /// A running global job gives its processors to a job of a higher level: its parts
    /// stop now and the ends of their run are withdrawn. Suspended, each part keeps the
    /// run time it has left; requeued, its parts are killed (reported ended to the broker,
    /// which queues it again) and the work they did is lost.
    fn preempted(
        &mut self,
        now: Time,
        job: JobId,
        how: broker::Preemption,
        parts: &[broker::ReservedPart],
    ) {
        let i = (job.0 - GLOBAL_PART) as usize;
        self.levels.preemptions += 1;
        let gs = &mut self.globals[i];
        gs.run += 1;
        gs.preempted += 1;
        let runtime = gs.runtime;
        for p in parts {
            self.live.remove(&(job, p.cluster));
            let c = &mut self.clusters[p.cluster];
            let left = match c.ran.remove(&job) {
                Some((start, end, procs)) => {
                    let stop = now.clamp(start, end);
                    c.stopped.push((job, start, stop, procs));
                    end - stop
                }
                None => runtime, // not started there: nothing done
            };
            match how {
                broker::Preemption::Suspend => {
                    self.globals[i].left.insert(p.cluster, left);
                }
                broker::Preemption::Requeue => {
                    let done = (runtime.as_secs() - left.as_secs()).max(0) as f64;
                    self.levels.lost_proc_seconds += f64::from(p.procs) * done;
                }
            }
        }
        if how == broker::Preemption::Requeue {
            self.levels.requeues += 1;
            self.requeued_now.insert(job);
            let mut out = Vec::new();
            for p in parts {
                self.broker.on_part_ended(now, p.cluster, job, &mut out);
            }
            self.carry_out(now, &out);
        }
    }

    /// A suspended global job continues on its clusters: each part runs the time it had
    /// left from now.
    fn resumed(&mut self, now: Time, job: JobId, parts: &[broker::ReservedPart]) {
        let i = (job.0 - GLOBAL_PART) as usize;
        self.levels.resumptions += 1;
        for p in parts {
            let gs = &mut self.globals[i];
            let left = gs.left.remove(&p.cluster).unwrap_or(gs.runtime);
            let run = gs.run;
            self.clusters[p.cluster]
                .ran
                .insert(job, (now, now + left, p.procs));
            self.live.insert((job, p.cluster), (now + left, p.procs));
            self.push(
                now + left,
                Ev::End {
                    cluster: p.cluster.as_num(),
                    job,
                    run,
                },
            );
            self.plan_correction(now, p.cluster.as_num());
        }
    }

    /// A dedicated partition's decisions.
    fn carry_out_partition(&mut self, now: Time, k: usize, actions: Vec<Action>) {
        for a in actions {
            if let Action::Start { job, procs, .. } = a {
                self.started(now, k, job, procs);
            }
        }
    }

    fn wake(&mut self, k: ClusterId, at: Time) {
        if self.clusters[k].ticks.insert(at) {
            self.push(at, Ev::Tick { cluster: k });
        }
    }

    fn started(&mut self, now: Time, k: usize, job: JobId, procs: u32) {
        let owner = ClusterId(k % self.n());
        let (runtime, run) = if job.0 >= GLOBAL_PART {
            self.started_global = true;
            let gs = &mut self.globals[(job.0 - GLOBAL_PART) as usize];
            gs.start.get_or_insert(now);
            let first = *gs.attempt_start.get_or_insert(now);
            gs.skew = gs.skew.max(now - first);
            if gs.queued {
                // Queued brokers charge the base tariff for what was used and return the
                // rest of what they held.
                gs.charged = self.broker.clusters[owner].tariff.base
                    * f64::from(procs)
                    * gs.runtime.as_secs() as f64;
                if let Some(b) = self.budgets.get_mut(&gs.job.user) {
                    *b += (gs.held - gs.charged).max(0.0);
                }
            }
            (gs.runtime, gs.run)
        } else {
            (self.clusters[owner].local[job.0 as usize].1, 0)
        };
        self.clusters[owner]
            .ran
            .insert(job, (now, now + runtime, procs));
        self.live.insert((job, owner), (now + runtime, procs));
        self.push(
            now + runtime,
            Ev::End {
                cluster: k,
                job,
                run,
            },
        );
        self.plan_correction(now, k);
    }
}

/// The statistics key of a local job: its user, its application and, as its parameters,
/// the processors it asks for (as `sim run`'s).
fn local_key(job: &Job, app: Option<u64>) -> RunKey {
    RunKey {
        user: job.cred.user,
        app,
        params: u64::from(job.procs),
        arch: 0,
    }
}

/// The statistics key of a global job: its user and processors; the synthetic stream names
/// no application, so the `app` predictor plans global jobs with their walltime.
fn global_key(job: &GlobalJob) -> RunKey {
    RunKey {
        user: job.user,
        app: None,
        params: u64::from(job.procs),
        arch: 0,
    }
}

/// A `lookahead` run as the simulator sees it after one event, for checking the broker's
/// invariants against the simulator's own record of what runs where.
pub struct Moment<'a> {
    /// The event's instant.
    pub now: Time,
    /// The event was a planning cycle.
    pub cycle: bool,
    /// The broker, after the event.
    pub broker: &'a broker::Broker,
    /// Every part running whose end the simulator has not yet handled (local jobs and
    /// global jobs' parts, by the broker's ids): (job, cluster) → (end, processors).
    pub running: &'a BTreeMap<(JobId, ClusterId), (Time, u32)>,
    /// Global jobs preempted to be requeued during the event.
    pub requeued: &'a BTreeSet<JobId>,
    /// Whether the event started a global job's part.
    pub started_global: bool,
}

/// [`super::simulate_grid`]'s `lookahead` run, with the global stream, showing `watch` the
/// run after every event.
pub fn lookahead_watched(
    cfg: &GridConfig,
    watch: &mut dyn FnMut(&Moment<'_>),
) -> Result<GridReport, GridError> {
    let mut r = GridRun::new(cfg, BrokerKind::Lookahead, true)?;
    r.drive_watched(watch)?;
    Ok(report(&r, &cfg.user))
}

/// How often, in events, a run tells its watcher how far it has got: often enough for a
/// progress bar to move every fraction of a second, rarely enough to cost nothing.
const PROGRESS_EVERY: u64 = 64;

pub(super) fn run(
    cfg: &GridConfig,
    kind: BrokerKind,
    with_global: bool,
    progress: &mut dyn FnMut(Time, Time),
) -> Result<GridReport, GridError> {
    let mut r = GridRun::new(cfg, kind, with_global)?;
    let last = r.last_arrival();
    progress(Time(0), last);
    let mut events = 0u64;
    r.drive_watched(&mut |m| {
        events += 1;
        // Past the last arrival the run only drains what is queued: shown as done.
        if events % PROGRESS_EVERY == 0 {
            progress(m.now.min(last), last);
        }
    })?;
    progress(last, last);
    Ok(report(&r, &cfg.user))
}

/// A `lookahead` run with what it started: the streams it generated and, per cluster, the
/// start of every job or part that ran there. For comparing another driver of the same
/// broker (the service's) with the simulator, decision by decision.
pub fn lookahead_trace(cfg: &GridConfig) -> Result<super::LookaheadTrace, GridError> {
    let mut r = GridRun::new(cfg, BrokerKind::Lookahead, true)?;
    r.drive()?;
    Ok(super::LookaheadTrace {
        local: r.clusters.iter().map(|c| c.local.clone()).collect(),
        global: r
            .globals
            .iter()
            .map(|g| {
                let mut job = g.job.clone();
                job.id = JobId(job.id.0 - GLOBAL_PART);
                (job, g.reference_runtime)
            })
            .collect(),
        cancel_after: r.globals.iter().map(|g| g.cancel_after).collect(),
        starts: r
            .clusters
            .iter()
            .map(|c| {
                c.ran
                    .iter()
                    .map(|(&id, &(start, _, _))| {
                        let job = if id.0 >= GLOBAL_PART {
                            super::TracedJob::Global(id.0 - GLOBAL_PART)
                        } else {
                            super::TracedJob::Local(id.0)
                        };
                        (job, start)
                    })
                    .collect()
            })
            .collect(),
        ends: r.globals.iter().map(|g| g.end).collect(),
        apps: r.clusters.iter().map(|c| c.apps.clone()).collect(),
        corrected: r.corrected,
    })
}

impl<'a> GridRun<'a> {
    fn new(cfg: &'a GridConfig, kind: BrokerKind, with_global: bool) -> Result<Self, GridError> {
        let days = cfg.days;
        let mut clusters = Vec::new();
        let mut grid = Vec::new();
        let mut partitions: Vec<LocalScheduler> = Vec::new();
        for (k, c) in cfg.cluster.iter().enumerate() {
            let kept = match kind {
                BrokerKind::Dedicated(f) => {
                    let global = ((f64::from(c.procs) * f).round() as u32).min(c.procs - 1);
                    partitions.push(LocalScheduler::new(global.max(1), Policy::easy()));
                    c.procs - global
                }
                _ => c.procs,
            };
            let (local, apps, rejected) = local_stream_apps(c, kept, days, k)?;
            let spec =
                c.spec
                    .clone()
                    .with_defaults(cfg.predict, cfg.backfill_order, cfg.correction);
            grid.push(spec.grid_cluster(kept));
            clusters.push(SimCluster {
                name: c.name.clone(),
                procs: c.procs,
                local,
                ran: BTreeMap::new(),
                stopped: Vec::new(),
                ticks: BTreeSet::new(),
                rejected,
                apps,
                predictor: spec.predict.unwrap_or_default(),
                stats: RuntimeStats::new(),
            });
        }
        let budgets: BTreeMap<UserId, f64> =
            cfg.user.iter().map(|u| (UserId(u.id), u.budget)).collect();
        let stream = if with_global {
            global_stream(&cfg.global, days, &cfg.user, clusters.len())?
        } else {
            Vec::new()
        };
        let cancels = cancellations(&cfg.global, stream.len());
        let drawn = super::levels(&cfg.global, stream.len());
        let globals: Vec<GlobalState> = stream
            .into_iter()
            .zip(cancels)
            .zip(drawn)
            .map(|(((mut job, runtime), cancel_after), (level, requeue))| {
                job.id = JobId(GLOBAL_PART + job.id.0);
                if !cfg.global.levels_from_queue {
                    job.priority = level;
                }
                job.requeue = requeue;
                GlobalState {
                    job,
                    runtime,
                    reference_runtime: runtime,
                    speed: 1.0,
                    start: None,
                    end: None,
                    parts_left: 0,
                    clusters: 0,
                    refused: false,
                    charged: 0.0,
                    queued: false,
                    held: 0.0,
                    cancel_after,
                    cancelled: false,
                    queued_at: None,
                    run: 0,
                    attempt_start: None,
                    skew: Dur::ZERO,
                    preempted: 0,
                    left: BTreeMap::new(),
                }
            })
            .collect();
        let planner = PlannerConfig {
            horizon: Dur::hours(cfg.horizon_hours),
            lead_time: Dur(cfg.lead_time_seconds),
            plan_depth: cfg.plan_depth,
        };
        let mut core = broker::Broker::new(grid, planner, GLOBAL_PART);
        for (&user, &b) in &budgets {
            core.set_budget(user, Some(b));
        }
        // Licence pools and the jobs asking for them (drawn apart from the streams).
        for l in &cfg.licence {
            let on: Vec<ClusterId> = ClusterId::all(clusters.len())
                .filter(|&k| l.clusters.contains(&clusters[k].name))
                .collect();
            core.add_licence_pool(&l.name, l.count, &on);
        }
        for (k, c) in clusters.iter_mut().enumerate() {
            let name = c.name.clone();
            let drawn = super::licence::demands(&cfg.licence, k as u64, c.local.len(), |l| {
                l.clusters.contains(&name).then_some(l.local_share)
            });
            for ((job, _), d) in c.local.iter_mut().zip(drawn) {
                job.licences = d;
            }
        }
        let mut globals = globals;
        if kind == BrokerKind::Lookahead {
            let drawn = super::licence::demands(&cfg.licence, u64::MAX, globals.len(), |l| {
                Some(l.global_share)
            });
            for (g, d) in globals.iter_mut().zip(drawn) {
                g.job.licences = d;
            }
        }
        let last_arrival = globals.last().map_or(Time(0), |g| g.job.submit);
        let mut r = GridRun {
            cfg,
            kind,
            broker: core,
            clusters,
            partitions,
            globals,
            budgets,
            heap: BinaryHeap::new(),
            seq: 0,
            last_arrival,
            give_up: last_arrival + Dur(30 * 86_400),
            predictor: cfg.predict,
            global_stats: RuntimeStats::new(),
            predicting: cfg.predict != Predictor::None
                || cfg
                    .cluster
                    .iter()
                    .any(|c| c.spec.predict.is_some_and(|p| p != Predictor::None)),
            corrections: BTreeSet::new(),
            corrected: 0,
            levels: LevelCounts::default(),
            requeued_now: BTreeSet::new(),
            started_global: false,
            live: BTreeMap::new(),
        };
        for k in ClusterId::all(r.n()) {
            for i in 0..r.clusters[k].local.len() {
                let at = r.clusters[k].local[i].0.submit;
                r.push(
                    at,
                    Ev::Local {
                        cluster: k,
                        index: i,
                    },
                );
            }
        }
        for i in 0..r.globals.len() {
            let at = r.globals[i].job.submit;
            r.push(at, Ev::Global { index: i });
        }
        if kind == BrokerKind::Lookahead && !r.globals.is_empty() {
            r.push(Time(0), Ev::Cycle);
        }
        Ok(r)
    }

    /// When the last job of any stream arrives: past it, only the work already queued is
    /// left, so a run's progress is its clock against this instant.
    fn last_arrival(&self) -> Time {
        let local = self
            .clusters
            .iter()
            .flat_map(|c| c.local.iter().map(|(job, ..)| job.submit));
        let global = self.globals.iter().map(|g| g.job.submit);
        local.chain(global).max().unwrap_or(Time(0))
    }

    /// Runs every event to the end.
    fn drive(&mut self) -> Result<(), GridError> {
        self.drive_watched(&mut |_| {})
    }

    /// [`GridRun::drive`], showing `watch` the run after every event.
    fn drive_watched(&mut self, watch: &mut dyn FnMut(&Moment<'_>)) -> Result<(), GridError> {
        while let Some(Reverse((now, _, ev))) = self.heap.pop() {
            self.requeued_now.clear();
            self.started_global = false;
            // As the service does: every event (a submission, an end, a cycle, a tick, a
            // cancel) first corrects the jobs that have outlived their prediction, so that
            // its pass does not take their processors.
            if self.corrections.first().is_some_and(|&t| t <= now) {
                self.on_correct(now);
            }
            match ev {
                Ev::Local { cluster, index } => self.on_local(now, cluster, index)?,
                Ev::End { cluster, job, run } => self.on_end(now, cluster, job, run)?,
                Ev::Tick { cluster } => self.on_tick(now, cluster),
                Ev::Global { index } => self.on_global(now, index)?,
                Ev::Cycle => self.on_cycle(now),
                Ev::Cancel { index } => self.on_cancel(now, index),
                // Done above, if still due.
                Ev::Correct => {}
            }
            watch(&Moment {
                now,
                cycle: ev == Ev::Cycle,
                broker: &self.broker,
                running: &self.live,
                requeued: &self.requeued_now,
                started_global: self.started_global,
            });
        }
        Ok(())
    }
}

/// The figures of a finished run; `users` as configured.
fn report(r: &GridRun<'_>, users: &[UserConfig]) -> GridReport {
    let mut report = GridReport {
        broker: r.kind.name(),
        ..GridReport::default()
    };
    let mut first = i64::MAX;
    let mut last = i64::MIN;
    let mut all_local = Vec::new();
    for c in &r.clusters {
        let mut items = Vec::new();
        let mut area = 0.0;
        let mut global_area = 0.0;
        let mut spans = Vec::with_capacity(c.ran.len() + c.stopped.len());
        // Every run: a preempted global part's earlier ones too.
        let runs = c
            .ran
            .iter()
            .map(|(id, &(start, end, procs))| (id, start, end, procs))
            .chain(
                c.stopped
                    .iter()
                    .map(|(id, start, end, procs)| (id, *start, *end, *procs)),
            );
        for (id, start, end, procs) in runs {
            let submit = if id.0 >= GLOBAL_PART {
                r.globals[(id.0 - GLOBAL_PART) as usize].job.submit
            } else {
                c.local[id.0 as usize].0.submit
            };
            spans.push(Span {
                submit: submit.secs(),
                start: start.secs(),
                end: end.secs(),
                procs,
            });
            first = first.min(start.secs());
            last = last.max(end.secs());
            let a = f64::from(procs) * (end - start).as_secs() as f64;
            area += a;
            if id.0 >= GLOBAL_PART {
                global_area += a;
            } else {
                let submit = c.local[id.0 as usize].0.submit;
                first = first.min(submit.secs());
                items.push((submit, start, end));
            }
        }
        all_local.extend(items.iter().copied());
        report.clusters.push(ClusterReport {
            name: c.name.clone(),
            local: report_group(items.into_iter()),
            utilization: area,
            global_proc_seconds: global_area,
            local_rejected: c.rejected,
            jobs: spans,
        });
    }
    let span = last.saturating_sub(first).max(1);
    for (k, c) in report.clusters.iter_mut().enumerate() {
        c.utilization /= f64::from(r.clusters[k].procs) * span as f64;
    }
    let globals = &r.globals;
    report.span = span;
    report.local = report_group(all_local.into_iter());
    report.global_submitted = globals.len() as u64;
    report.global_refused = globals.iter().filter(|g| g.refused).count() as u64;
    report.global_unfinished = globals
        .iter()
        .filter(|g| !g.refused && !g.cancelled && g.end.is_none())
        .count() as u64;
    report.global_cancelled = globals.iter().filter(|g| g.cancelled).count() as u64;
    let done: Vec<&GlobalState> = globals.iter().filter(|g| g.end.is_some()).collect();
    report.global = report_group(done.iter().map(|g| {
        (
            g.job.submit,
            g.start.expect("invariant: ended jobs started"),
            g.end.expect("invariant: filtered"),
        )
    }));
    report.coallocated_share = if done.is_empty() {
        0.0
    } else {
        done.iter().filter(|g| g.clusters > 1).count() as f64 / done.len() as f64
    };
    report.charged = globals.iter().map(|g| g.charged).sum();
    report.max_start_skew = globals.iter().map(|g| g.skew.as_secs()).max().unwrap_or(0);
    report.idle_while_waiting =
        (r.kind == BrokerKind::Lookahead).then(|| r.broker.stats().idle_while_waiting);
    report.moved_earlier = r.broker.stats().moves;
    report.predict = r.predictor.name().to_string();
    report.corrected = r.corrected;
    report.users = report_users(globals, users, &r.budgets);
    // Every finished job, local and global, by whether it asked for licences.
    let mut by_licences: [Vec<(Time, Time, Time)>; 2] = [Vec::new(), Vec::new()];
    for c in &r.clusters {
        for (id, &(start, end, _)) in c.ran.iter().filter(|(id, _)| id.0 < GLOBAL_PART) {
            let job = &c.local[id.0 as usize].0;
            by_licences[usize::from(job.licences.is_empty())].push((job.submit, start, end));
        }
    }
    for g in &done {
        let item = (
            g.job.submit,
            g.start.expect("invariant: ended jobs started"),
            g.end.expect("invariant: filtered"),
        );
        by_licences[usize::from(g.job.licences.is_empty())].push(item);
    }
    let [with, without] = by_licences;
    report.with_licences = report_group(with.into_iter());
    report.without_licences = report_group(without.into_iter());
    if r.cfg.global.levels > 1 {
        report.levels = Some(report_levels(r));
    }
    report
}

/// Per priority level: the global jobs' figures, and what preemption did.
fn report_levels(r: &GridRun<'_>) -> LevelsReport {
    let mut per_level: Vec<LevelReport> = (0..r.cfg.global.levels)
        .map(|level| LevelReport {
            level,
            ..LevelReport::default()
        })
        .collect();
    for g in &r.globals {
        let l = &mut per_level[g.job.priority as usize];
        l.submitted += 1;
        l.preempted += u64::from(g.preempted);
        let (Some(start), Some(end)) = (g.start, g.end) else {
            continue;
        };
        let response = (end - g.job.submit).as_secs() as f64;
        l.finished += 1;
        l.mean_wait += (start - g.job.submit).as_secs() as f64;
        l.mean_response += response;
        l.mean_bsld += (response / g.runtime.as_secs().max(10) as f64).max(1.0);
    }
    for l in per_level.iter_mut().filter(|l| l.finished > 0) {
        let n = l.finished as f64;
        l.mean_wait /= n;
        l.mean_response /= n;
        l.mean_bsld /= n;
    }
    LevelsReport {
        per_level,
        preemptions: r.levels.preemptions,
        requeues: r.levels.requeues,
        resumptions: r.levels.resumptions,
        lost_proc_seconds: r.levels.lost_proc_seconds,
    }
}

/// Per-user figures: every configured user and every user who submitted, by id.
fn report_users(
    globals: &[GlobalState],
    users: &[UserConfig],
    budgets: &BTreeMap<UserId, f64>,
) -> Vec<UserReport> {
    let mut by_user: BTreeMap<u32, (UserReport, Vec<&GlobalState>)> = BTreeMap::new();
    for u in users {
        let r = UserReport {
            user: u.id,
            budget: Some(u.budget),
            remaining: budgets.get(&UserId(u.id)).copied(),
            ..UserReport::default()
        };
        by_user.insert(u.id, (r, Vec::new()));
    }
    for g in globals {
        let id = g.job.user.0;
        let (r, done) = by_user.entry(id).or_insert_with(|| {
            (
                UserReport {
                    user: id,
                    ..UserReport::default()
                },
                Vec::new(),
            )
        });
        r.submitted += 1;
        r.refused += u64::from(g.refused);
        r.charged += g.charged;
        if g.end.is_some() {
            done.push(g);
        }
    }
    by_user
        .into_values()
        .map(|(mut r, done)| {
            let group = report_group(
                done.iter()
                    .filter_map(|g| Some((g.job.submit, g.start?, g.end?))),
            );
            r.finished = group.jobs;
            r.mean_wait = group.mean_wait;
            r.mean_bsld = group.mean_bsld;
            r
        })
        .collect()
}

/// The scheduler among `targets` (clusters `0..n`, dedicated partitions `n..2n`) where `job`
/// would start earliest if queued now, by the placement each one's own policy would give it
/// (conservatively, on a copy); with that cluster's speed.
fn earliest_target(
    targets: std::ops::Range<usize>,
    grid: &broker::Broker,
    partitions: &[LocalScheduler],
    cfg: &GridConfig,
    job: &GlobalJob,
    now: Time,
) -> Option<(usize, f64)> {
    let n = grid.clusters.len();
    let mut best: Option<(Time, usize, f64)> = None;
    for t in targets {
        let sched = if t < n {
            &grid.clusters[t].sched
        } else {
            &partitions[t - n]
        };
        let speed = cfg.cluster[t % n].slowest_speed();
        if job.procs > sched.capacity() {
            continue;
        }
        let est = Dur(((job.walltime.as_secs() as f64) / speed).ceil() as i64);
        let mut copy = sched.clone();
        copy.set_reservation_depth(ALL);
        let probe = JobId(u64::MAX);
        if copy.submit(Job::new(probe, now, job.procs, est)).is_err() {
            continue;
        }
        let mut scratch = Vec::new();
        copy.schedule(now, &mut scratch);
        let start = if copy.is_running(probe) {
            now
        } else {
            copy.reservation_of(probe).map_or(Time::MAX, |p| p.start)
        };
        if best.is_none_or(|(b, _, _)| start < b) {
            best = Some((start, t, speed));
        }
    }
    best.map(|(_, t, speed)| (t, speed))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRID: &str = r#"
days = 1
cycle_seconds = 300
lead_time_seconds = 600
[[cluster]]
name = "a"
procs = 16
local = { load = 0.5, seed = 1 }
[[cluster]]
name = "b"
procs = 16
local = { load = 0.5, seed = 2 }
[global]
arrivals_per_hour = 2
procs = [2, 24]
runtime_seconds = [600, 3600]
price = [2.0, 8.0]
seed = 3
"#;

    /// `sim grid` drives the service's broker, so begin times hold there too: with every
    /// global job's begin two hours after its submission and every third local job's one
    /// hour after, nothing starts before its begin, and everything still runs.
    #[test]
    fn no_job_starts_before_its_begin_in_sim_grid() {
        let cfg = GridConfig::parse(GRID, "grid.toml").unwrap();
        let mut r = GridRun::new(&cfg, BrokerKind::Lookahead, true).unwrap();
        let mut begins: BTreeMap<(usize, JobId), Time> = BTreeMap::new();
        for g in &mut r.globals {
            g.job.begin = Some(g.job.submit + Dur(7_200));
        }
        for (k, c) in r.clusters.iter_mut().enumerate() {
            for (job, _) in c.local.iter_mut().step_by(3) {
                job.begin = Some(job.submit + Dur(3_600));
                begins.insert((k, job.id), job.begin.unwrap());
            }
        }
        r.drive().unwrap();
        assert!(!r.globals.is_empty());
        for g in &r.globals {
            let start = g.start.expect("every global job ran");
            assert!(
                start >= g.job.submit + Dur(7_200),
                "{} started at {start}, submitted {}",
                g.job.id,
                g.job.submit
            );
        }
        let mut checked = 0;
        for (k, c) in r.clusters.iter().enumerate() {
            for (id, &(start, _, _)) in &c.ran {
                if let Some(&b) = begins.get(&(k, *id)) {
                    assert!(
                        start >= b,
                        "local {id} on {k} started at {start}, begin {b}"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 10, "only {checked} local jobs with a begin ran");
    }

    /// One cluster of 4 processors, no local work, cycles every 10 s. A level-0 job of
    /// 4 × 100 s starts at 0; a level-3 job of 4 × 50 s arrives at 10 and takes its
    /// processors at once: it runs 10–60 while the low job is suspended with 90 s left,
    /// which resumes at the cycle of 60 and ends at 150. Suspended, the requeueable low job
    /// is killed instead and runs its 100 s anew from 60: it ends at 160, 40 processor-s ×
    /// 10 lost.
    #[test]
    fn a_higher_level_preempts_a_lower_one_on_the_simulated_clock() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.swf");
        std::fs::write(&empty, "; no local jobs\n").unwrap();
        let global = dir.path().join("global.swf");
        std::fs::write(
            &global,
            "1 0 -1 100 4 -1 -1 4 100 -1 1 1 1 -1 -1 -1 -1 -1\n\
             2 10 -1 50 4 -1 -1 4 50 -1 1 1 1 -1 -1 -1 -1 -1\n",
        )
        .unwrap();
        let text = format!(
            "days = 1\ncycle_seconds = 10\nlead_time_seconds = 0\n\
             [[cluster]]\nname = \"a\"\nprocs = 4\nlocal = {{ trace = {:?} }}\n\
             [global]\ntrace = {:?}\nprice = [1.0, 1.0]\nestimate_factor = [1.0, 1.0]\n\
             levels = 4\n",
            empty.display().to_string(),
            global.display().to_string()
        );
        let cfg = GridConfig::parse(&text, "grid.toml").unwrap();
        for requeue in [false, true] {
            let mut r = GridRun::new(&cfg, BrokerKind::Lookahead, true).unwrap();
            assert_eq!(r.globals.len(), 2);
            r.globals[0].job.priority = 0;
            r.globals[0].job.requeue = requeue;
            r.globals[1].job.priority = 3;
            r.drive().unwrap();
            let (low, high) = (&r.globals[0], &r.globals[1]);
            assert_eq!((high.start, high.end), (Some(Time(10)), Some(Time(60))));
            assert_eq!(low.start, Some(Time(0)));
            let levels = report(&r, &cfg.user).levels.unwrap();
            assert_eq!(levels.preemptions, 1);
            if requeue {
                assert_eq!(low.end, Some(Time(160)));
                assert_eq!((levels.requeues, levels.resumptions), (1, 0));
                assert_eq!(levels.lost_proc_seconds, 40.0);
            } else {
                assert_eq!(low.end, Some(Time(150)));
                assert_eq!((levels.requeues, levels.resumptions), (0, 1));
                assert_eq!(levels.lost_proc_seconds, 0.0);
            }
            let per: Vec<(u64, f64)> = levels
                .per_level
                .iter()
                .map(|l| (l.finished, l.mean_response))
                .collect();
            let low_end = if requeue { 160.0 } else { 150.0 };
            assert_eq!(per, vec![(1, low_end), (0, 0.0), (0, 0.0), (1, 50.0)]);
            assert_eq!(levels.per_level[0].preempted, 1);
            // The cluster never ran more than its 4 processors: the low job's runs are
            // 0–10 and from 60 on.
            let c = &r.clusters[0];
            let mut runs: Vec<(i64, i64, u32)> = c
                .ran
                .values()
                .chain(
                    c.stopped
                        .iter()
                        .map(|(_, s, e, p)| (*s, *e, *p))
                        .collect::<Vec<_>>()
                        .iter(),
                )
                .map(|&(s, e, p)| (s.secs(), e.secs(), p))
                .collect();
            runs.sort_unstable();
            let low_last = if requeue { (60, 160, 4) } else { (60, 150, 4) };
            assert_eq!(runs, vec![(0, 10, 4), (10, 60, 4), low_last]);
        }
    }
}
