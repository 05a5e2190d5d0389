//! The grid broker: the whole lifecycle of global jobs as one pure state machine, driven
//! alike by the service (wall clock, real processes, Slurm) and by the grid simulator
//! (virtual clock), so that a decision measured in simulation is the decision the service
//! makes.
//!
//! Events come in (`submit`, `on_cycle`, `on_reservation_answered`, `on_move_answered`,
//! `on_part_started`, `on_part_ended`, `on_cluster_down`/`up`, `withdraw`, local submissions
//! and ticks) and
//! decisions go out as [`BrokerAction`]s: start a job, ask a cluster for a reservation,
//! record a plan, move money. The broker owns the clusters' local schedulers, so every
//! decision about processors, local or global, is taken here.
//!
//! A global job goes `queued → planned → (reserving →) reserved → running → ended`:
//! - every cycle plans the queued jobs in priority (id) order with
//!   [`crate::grid::plan_cycle`] over all available clusters' forecasts; the horizon grows
//!   by the longest walltime planned, so a job longer than the configured horizon is still
//!   planned (and an idle grid large enough for a job always starts it);
//! - a job planned within the lead time is reserved on every cluster it uses, two-phase:
//!   tentative everywhere (a cluster that schedules itself answers later), then committed
//!   and charged its planned cost, or all released and planned again (after a pause that
//!   doubles with each refusal in a row, 1–64 s, when a cluster refused);
//! - a planned cost above what the user has left keeps the job queued (a budget may grow);
//! - the job's parts start at the reservation's first second, or earlier: the broker is
//!   **work-conserving** (the `compress` module) — whenever processors free up, reserved jobs move
//!   earlier in priority order when no other reservation and no local job's forecast start
//!   gets later (on clusters that schedule themselves the move is asked of them, all parts or
//!   none, [`BrokerAction::MoveAsked`]);
//! - when its last part ends, the unused share of the reserved time is refunded.

mod action;
mod cluster;
mod compress;
mod entries;
mod levels;
pub mod preempt;
mod preempt_ask;
mod promise;
mod queue;
mod spec;

pub use action::{BrokerAction, ReservationEnd, ReservedPart, Unrunnable, WaitReason};
pub use cluster::{check_groups, processors_of, GridCluster, SpeedGroup};
pub use compress::MOVE_RETRY_SECS;
pub use preempt::Preemption;
pub use promise::Promise;
pub use spec::{check_feature, features_refusal, ClusterSpec};

use crate::error::CoreError;
use crate::grid::{plan_cycle, Decision, GlobalJob, PlannerConfig};
use crate::ids::{ClusterId, JobId, ReservationId, UserId};
use crate::job::Job;
use crate::reservation::{Acl, AdminReservation};
use crate::scheduler::{Action, Event};
use crate::time::{Dur, Interval, Time};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A cycle's planning, detached from the broker ([`Broker::begin_cycle`]): the jobs to plan,
/// the settings and a copy of the clusters, so that it runs without the broker (on another
/// thread, off the caller's lock) and the broker meanwhile goes on answering events.
#[derive(Clone, Debug)]
pub struct CyclePlan {
    now: Time,
    jobs: Vec<GlobalJob>,
    cfg: PlannerConfig,
    clusters: Vec<GridCluster>,
}

impl CyclePlan {
    /// The cycle's decisions: [`plan_cycle`] over the copy.
    pub fn decide(&self) -> Vec<Decision> {
        plan_on(self.now, &self.clusters, &self.jobs, &self.cfg)
    }

    /// The cycle's instant.
    pub fn now(&self) -> Time {
        self.now
    }

    /// How many jobs it plans.
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    /// True when there is nothing to plan.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }
}

/// [`plan_cycle`] of `jobs` over `clusters` (nothing to do for no jobs).
fn plan_on(
    now: Time,
    clusters: &[GridCluster],
    jobs: &[GlobalJob],
    cfg: &PlannerConfig,
) -> Vec<Decision> {
    if jobs.is_empty() {
        return Vec::new();
    }
    let views: Vec<_> = clusters.iter().map(GridCluster::view).collect();
    plan_cycle(now, &views, jobs, cfg)
}

/// Where a global job is in its lifecycle.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Phase {
    /// Waiting to be planned (or planned with no window yet).
    Queued,
    /// Planned beyond the lead time: where the last cycle placed it (nothing is held).
    Planned {
        /// The planned start.
        start: Time,
        /// The planned end.
        end: Time,
        /// Where, per cluster.
        parts: Vec<PlannedPart>,
    },
    /// Phase one of a two-phase reservation: some clusters have not answered yet.
    Reserving {
        /// The planned start.
        start: Time,
        /// The planned end.
        end: Time,
        /// The planned cost.
        cost: f64,
        /// Every part, held or asked for.
        parts: Vec<ReservedPart>,
        /// Reservations not answered yet.
        awaiting: BTreeSet<ReservationId>,
        /// The first refusal heard: (cluster, what it said).
        refusal: Option<(ClusterId, String)>,
    },
    /// Held on every cluster and charged; starts at `start` (or earlier, if it can move).
    Reserved {
        /// The reserved start.
        start: Time,
        /// The reserved end.
        end: Time,
        /// The charge.
        cost: f64,
        /// Its parts.
        parts: Vec<ReservedPart>,
    },
    /// At least one part started.
    Running {
        /// When the first part started.
        start: Time,
        /// The reserved end.
        end: Time,
        /// The charge.
        cost: f64,
        /// Its parts.
        parts: Vec<ReservedPart>,
        /// The clusters whose part has ended.
        ended: BTreeSet<ClusterId>,
        /// Time spent suspended by preemption so far: neither run nor charged.
        suspended: Dur,
    },
    /// Preempted by a job of a higher priority level and stopped: it holds no processors
    /// and resumes on the same clusters when they have room ([`preempt`]).
    Suspended {
        /// When the first part started.
        start: Time,
        /// The charge.
        cost: f64,
        /// Its parts, as they were when stopped (their reservations are gone).
        parts: Vec<ReservedPart>,
        /// When it was stopped.
        since: Time,
        /// Run time left: from when it was stopped to its reserved end.
        left: Dur,
        /// Time spent suspended before this suspension.
        suspended: Dur,
    },
}

/// One cluster's share of a planned job: the processors the plan puts it on (indices within
/// the cluster), for plan views; nothing is held there until it is reserved.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlannedPart {
    /// The cluster.
    pub cluster: ClusterId,
    /// Processors.
    pub processors: Vec<u32>,
}

/// A global job and where it is.
#[derive(Clone, Debug, Serialize)]
pub struct Entry {
    /// The job.
    pub job: GlobalJob,
    /// Its phase.
    pub phase: Phase,
    /// Not planned before this (after a refused reservation).
    pub not_before: Time,
    /// Refusals in a row.
    pub refusals: u32,
    /// Why it waits, if it does.
    pub reason: Option<WaitReason>,
    /// Paid for before it came here ([`Broker::set_prepaid`]).
    pub prepaid: bool,
}

/// Figures the broker keeps for `/metrics` and the simulator's report.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BrokerStats {
    /// Processor-seconds left idle while a global job that could have used them waited: at
    /// every moment, the idle processors of the clusters the broker schedules, up to the
    /// processors asked by the waiting global jobs that would fit in them.
    pub idle_while_waiting: f64,
    /// Reserved jobs moved earlier.
    pub moves: u64,
    /// Cycles run.
    pub cycles: u64,
}

/// The grid broker (see the module documentation).
#[derive(Clone, Debug)]
pub struct Broker {
    /// The clusters, in the caller's order (indices name them everywhere).
    pub clusters: Vec<GridCluster>,
    planner: PlannerConfig,
    jobs: entries::Entries,
    /// Jobs to plan, in priority order.
    queue: queue::BrokerQueue,
    /// Running jobs preempted to be requeued: queued again once their parts have ended.
    requeueing: BTreeSet<JobId>,
    /// Jobs submitted since the last cycle.
    arrivals: Vec<JobId>,
    /// What each user has left; a user without an entry has no limit.
    budgets: HashMap<UserId, f64>,
    next_reservation: u64,
    stats: BrokerStats,
    /// The last moment observed, and the idle processors waiting jobs could use since.
    idle_since: Option<(Time, f64)>,
    /// Moves asked of clusters that schedule themselves, not answered yet.
    moving: BTreeMap<JobId, compress::PendingMove>,
    /// Jobs whose move a cluster refused: not moved again before then.
    move_not_before: HashMap<JobId, Time>,
    /// The clusters drawing on each licence pool shared by several (a floating licence
    /// server): a change one cluster's scheduler makes to it is passed on to the others.
    shared_pools: BTreeMap<String, Vec<ClusterId>>,
    /// Preemptions asked of clusters that schedule themselves, by the job they are for.
    preempt_asks: BTreeMap<JobId, preempt_ask::PendingPreemption>,
    /// Suspended jobs whose resumption was asked of a cluster that schedules itself, with
    /// the reservations holding the processors of their parts on clusters the broker
    /// schedules itself meanwhile (co-allocated jobs), so that nobody starts there first.
    resume_asks: BTreeMap<JobId, Vec<ReservedPart>>,
}

/// Most refusals in a row before the pause stops doubling (2⁶ = 64 s).
const MAX_BACKOFF_DOUBLINGS: u32 = 6;

impl Broker {
    /// A broker over `clusters`; job reservations are numbered from `first_reservation`.
    pub fn new(
        clusters: Vec<GridCluster>,
        planner: PlannerConfig,
        first_reservation: u64,
    ) -> Broker {
        Broker {
            clusters,
            planner,
            jobs: entries::Entries::default(),
            queue: queue::BrokerQueue::default(),
            requeueing: BTreeSet::new(),
            arrivals: Vec::new(),
            budgets: HashMap::new(),
            next_reservation: first_reservation.max(1),
            stats: BrokerStats::default(),
            idle_since: None,
            moving: BTreeMap::new(),
            move_not_before: HashMap::new(),
            shared_pools: BTreeMap::new(),
            preempt_asks: BTreeMap::new(),
            resume_asks: BTreeMap::new(),
        }
    }

    /// Makes clusters `on` draw on a licence pool of `count` licences (before any job asks
    /// for it). Drawn on by several clusters, it is one pool (a floating licence server):
    /// whatever one cluster holds, the others cannot.
    pub fn add_licence_pool(&mut self, name: &str, count: u32, on: &[ClusterId]) {
        let mut on: Vec<ClusterId> = on.to_vec();
        on.sort_unstable();
        on.dedup();
        for &k in &on {
            self.clusters[k].sched.add_licence_pool(name, count);
            if on.len() > 1 {
                self.clusters[k].sched.share_licence_pool(name);
            }
        }
        if on.len() > 1 {
            self.shared_pools.insert(name.to_string(), on);
        }
    }

    /// The planner's settings.
    pub fn planner(&self) -> &PlannerConfig {
        &self.planner
    }

    /// A fresh reservation id, for the caller's own reservations too (one id space).
    pub fn allocate_reservation(&mut self) -> ReservationId {
        let id = ReservationId(self.next_reservation);
        self.next_reservation += 1;
        id
    }

    /// The id [`Broker::allocate_reservation`] would give next, without taking it.
    pub fn next_reservation(&self) -> ReservationId {
        ReservationId(self.next_reservation)
    }

    /// Ids below this are taken (after a restart the caller raises it past its records).
    pub fn reserve_ids_below(&mut self, next: u64) {
        self.next_reservation = self.next_reservation.max(next);
    }

    /// Sets what a user has left (`None`: no limit).
    pub fn set_budget(&mut self, user: UserId, left: Option<f64>) {
        match left {
            Some(b) => {
                self.budgets.insert(user, b);
            }
            None => {
                self.budgets.remove(&user);
            }
        }
    }

    /// What a user has left (`None`: no limit).
    pub fn budget(&self, user: UserId) -> Option<f64> {
        self.budgets.get(&user).copied()
    }

    /// Marks a job the broker knows as paid for before it came here: a peer dispatcher
    /// took the most it may cost (its hold) from its user's shared budget as it started
    /// it, and settles its charges against that hold when it ends. Such a job never waits
    /// for budget, and its charges (still reported as [`BrokerAction::Charge`], so that its
    /// record shows what it used) leave its user's budget here alone: `set_budget` gives
    /// the broker what is left after the hold. Forgotten when the job leaves the broker.
    pub fn set_prepaid(&mut self, job: JobId) {
        if let Some(mut e) = self.jobs.get_mut(&job) {
            e.prepaid = true;
        }
    }

    /// Whether job `id` was paid for before it came here ([`Broker::set_prepaid`]).
    pub fn is_prepaid(&self, id: JobId) -> bool {
        self.jobs.get(&id).is_some_and(|e| e.prepaid)
    }

    /// What `user` has left when job `id` would cost `cost` and that is more (`None`: it
    /// fits, the user has no limit, or the job is prepaid).
    fn short_of(&self, id: JobId, user: UserId, cost: f64) -> Option<f64> {
        if self.is_prepaid(id) {
            return None;
        }
        self.budgets.get(&user).copied().filter(|&left| cost > left)
    }

    /// A global job the broker knows.
    pub fn entry(&self, id: JobId) -> Option<&Entry> {
        self.jobs.get(&id)
    }

    /// Whether the broker's index of the jobs reserving, reserved, running or suspended
    /// holds exactly those: a full walk, for tests that drive it through every change.
    pub fn index_holds(&self) -> bool {
        self.jobs.index_holds()
    }

    /// Every global job the broker knows, by id.
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.jobs.values()
    }

    /// Global jobs queued or just submitted, in priority order.
    pub fn queued(&self) -> impl Iterator<Item = &Entry> {
        self.queue
            .iter()
            .chain(self.arrivals.iter().filter(|a| !self.queue.contains(a)))
            .filter_map(|id| self.jobs.get(id))
    }

    /// True while global jobs wait to be planned.
    pub fn has_queued(&self) -> bool {
        !self.queue.is_empty() || !self.arrivals.is_empty()
    }

    /// Its figures so far.
    pub fn stats(&self) -> &BrokerStats {
        &self.stats
    }

    /// The speed of the slowest processor of the grid (1.0 for an empty grid).
    fn slowest_speed(&self) -> f64 {
        let s = self
            .clusters
            .iter()
            .map(GridCluster::slowest_speed)
            .fold(f64::INFINITY, f64::min);
        if s.is_finite() {
            s
        } else {
            1.0
        }
    }

    /// The planner's settings for planning `jobs` at `now`: the horizon grows by the
    /// longest wait for a begin time plus walltime among them (on the slowest processor), so
    /// that every job has room to be planned beyond anything the configured horizon can
    /// hold, however far its begin.
    pub fn planner_for(&self, now: Time, jobs: &[GlobalJob]) -> PlannerConfig {
        let slowest = self.slowest_speed();
        let longest = jobs
            .iter()
            .map(|j| {
                (j.eligible(now) - now) + Dur((j.walltime.as_secs() as f64 / slowest).ceil() as i64)
            })
            .max()
            .unwrap_or(Dur::ZERO);
        PlannerConfig {
            horizon: self.planner.horizon + longest,
            ..self.planner.clone()
        }
    }

    // ------------------------------------------------------------------ events

    /// A global job enters the grid; it is planned from the next cycle on. A job the broker
    /// already knows and that has not ended is left as it is.
    pub fn submit(&mut self, now: Time, job: GlobalJob) {
        self.observe(now);
        let id = job.id;
        if self.jobs.contains_key(&id) {
            return;
        }
        self.jobs.insert(
            id,
            Entry {
                job,
                phase: Phase::Queued,
                not_before: Time::MIN,
                refusals: 0,
                reason: None,
                prepaid: false,
            },
        );
        self.arrivals.push(id);
        self.settle(now);
    }

    /// Takes a global job that has not started out of the broker: its reservations are
    /// released and its charge refunded. False (and nothing done) for a job with a running
    /// part — the caller stops its parts, which then end — or one the broker does not know.
    pub fn withdraw(&mut self, now: Time, id: JobId, out: &mut Vec<BrokerAction>) -> bool {
        self.observe(now);
        let Some(entry) = self.jobs.get(&id) else {
            return false;
        };
        if matches!(entry.phase, Phase::Running { .. } | Phase::Suspended { .. }) {
            return false;
        }
        self.unreserve(now, id, out);
        self.jobs.remove(&id);
        self.queue.remove(&id);
        self.arrivals.retain(|&a| a != id);
        self.compress(now, out);
        self.settle(now);
        true
    }

    /// A local job (or a job bound to an administrative reservation) for cluster `k`.
    pub fn submit_local(
        &mut self,
        now: Time,
        k: ClusterId,
        job: Job,
        out: &mut Vec<BrokerAction>,
    ) -> Result<(), CoreError> {
        self.observe(now);
        let mut actions = Vec::new();
        self.clusters[k]
            .sched
            .handle(now, Event::Submit(job), &mut actions)?;
        self.carry_out(now, k, actions, out);
        self.settle(now);
        Ok(())
    }

    /// Time passed on cluster `k` (a reservation starts or ends): its scheduler runs a pass.
    pub fn tick(&mut self, now: Time, k: ClusterId, out: &mut Vec<BrokerAction>) {
        self.observe(now);
        let mut actions = Vec::new();
        let _ = self.clusters[k]
            .sched
            .handle(now, Event::Tick, &mut actions);
        self.carry_out(now, k, actions, out);
        self.settle(now);
    }

    /// Local jobs and global jobs' parts that have outlived their predicted plan at `now`
    /// are planned longer by their cluster's [`crate::predict::Correction`], and each cluster the
    /// broker schedules that corrected one runs a pass at once, as EASY++ does: the
    /// processors were not free at the plan's end after all. On a self-scheduled cluster
    /// (Slurm) only the mirror's plan of a global job's part is corrected: the cluster runs
    /// its own queue, and its mirror is rebuilt from its snapshots with the plan the caller
    /// keeps. When
    /// a global job was corrected, the grid is planned again at once (a cycle): the jobs
    /// planned into the rest of its reservation move behind it. The kill stays the caller's,
    /// at the estimate (a global job's reservation end). Returns (cluster, job, new plan from
    /// its start) for each correction.
    pub fn correct_outlived(
        &mut self,
        now: Time,
        out: &mut Vec<BrokerAction>,
    ) -> Vec<(ClusterId, JobId, Dur)> {
        let mut done = Vec::new();
        for k in ClusterId::all(self.clusters.len()) {
            let due = self.clusters[k].sched.outlived(now);
            if due.is_empty() {
                continue;
            }
            self.observe(now);
            for (id, plan) in due {
                let Some(longer) = self.clusters[k].sched.corrected_plan(id, plan) else {
                    continue;
                };
                if self.clusters[k].sched.correct(now, id, longer).is_ok() {
                    done.push((k, id, longer));
                }
            }
            if !self.clusters[k].self_scheduled {
                self.pass(now, k, out);
            }
            self.settle(now);
        }
        if done.iter().any(|(_, id, _)| self.jobs.contains_key(id)) {
            self.on_cycle(now, out);
        }
        done
    }

    /// A job on cluster `k` (local, or a global job's part) ended at `now`: its processors
    /// are free, a global job's reservation there ends, and when a global job's last part
    /// ends the unused share of its charge is refunded. Freed processors go to waiting
    /// work at once: the cluster's own queue first, then reserved global jobs that can move
    /// earlier.
    pub fn on_part_ended(
        &mut self,
        now: Time,
        k: ClusterId,
        id: JobId,
        out: &mut Vec<BrokerAction>,
    ) {
        self.on_part_ended_at(now, now, k, id, out);
    }

    /// [`Broker::on_part_ended`] for a part that really ended at `ended` (no later than
    /// `now`), learnt only at `now`: a caller that was down meanwhile charges the job up to
    /// `ended`, not for the time it was not looking.
    pub fn on_part_ended_at(
        &mut self,
        now: Time,
        ended: Time,
        k: ClusterId,
        id: JobId,
        out: &mut Vec<BrokerAction>,
    ) {
        let ended = ended.min(now);
        self.observe(now);
        let mut actions = Vec::new();
        if !self.clusters[k].self_scheduled {
            let _ = self.clusters[k]
                .sched
                .handle(now, Event::Finish(id), &mut actions);
        }
        let released = self.part_ended(now, ended, k, id, out);
        self.carry_out(now, k, actions, out);
        if released {
            // The rest of its reservation's window is free too.
            self.pass(now, k, out);
        }
        self.compress(now, out);
        self.settle(now);
    }

    /// The broker's side of a part's end; true when it released a reservation on `k`.
    fn part_ended(
        &mut self,
        now: Time,
        ended_at: Time,
        k: ClusterId,
        id: JobId,
        out: &mut Vec<BrokerAction>,
    ) -> bool {
        // A part of a job that never started here: a cluster that schedules itself reported
        // the end of a part the broker had not seen start.
        if let Some(Phase::Reserved { start, .. }) = self.jobs.get(&id).map(|e| &e.phase) {
            let at = now.min(*start);
            self.started(at, id);
        }
        let Some(mut entry) = self.jobs.get_mut(&id) else {
            return false;
        };
        let user = entry.job.user;
        if let Phase::Suspended {
            start: first,
            cost,
            since,
            left,
            suspended,
            ref parts,
        } = entry.phase
        {
            // Killed while suspended (cancelled): every part goes, and it ran until stopped.
            let reserved =
                (since + left - reserved_from(first, parts)).as_secs() - suspended.as_secs();
            let used = (since - first).as_secs() - suspended.as_secs();
            drop(entry);
            self.charge(id, user, -refund(cost, used, reserved), out);
            self.jobs.remove(&id);
            out.push(BrokerAction::Ended {
                job: id,
                start: first,
                end: ended_at.max(first),
            });
            return false;
        }
        let Phase::Running {
            start: first,
            end: reserved_end,
            cost,
            parts,
            ended,
            suspended,
        } = &mut entry.phase
        else {
            return false;
        };
        let (first, reserved_end, cost, parts, suspended) =
            (*first, *reserved_end, *cost, parts.clone(), *suspended);
        let reserved_start = reserved_from(first, &parts);
        if !ended.insert(k) {
            return false;
        }
        let all_ended = parts.iter().all(|p| ended.contains(&p.cluster));
        drop(entry);
        let requeueing = self.requeueing.contains(&id);
        // A job preempted to be requeued gave its reservations back when preempted.
        let released = !self.clusters[k].self_scheduled && !requeueing;
        for p in parts.iter().filter(|p| p.cluster == k && !requeueing) {
            if !self.clusters[k].self_scheduled {
                let _ = self.clusters[k]
                    .sched
                    .remove_reservation(now, p.reservation);
            }
            out.push(BrokerAction::ReservationEnded {
                cluster: k,
                reservation: p.reservation,
                job: id,
                how: ReservationEnd::Finished,
            });
        }
        if !all_ended {
            return released;
        }
        // Charge what was used of what was reserved; give back the rest. Suspended time is
        // neither.
        let end = ended_at.max(first);
        let reserved = (reserved_end - reserved_start).as_secs() - suspended.as_secs();
        let used = (end - first).as_secs() - suspended.as_secs();
        self.charge(id, user, -refund(cost, used, reserved), out);
        if requeueing {
            // Planned again as a new run, before the queued jobs of lower levels.
            self.requeueing.remove(&id);
            self.requeue_entry(id);
            return released;
        }
        self.jobs.remove(&id);
        out.push(BrokerAction::Ended {
            job: id,
            start: first,
            end,
        });
        released
    }

    /// A cluster that schedules itself reports that a global job's part started there.
    pub fn on_part_started(&mut self, now: Time, id: JobId) {
        self.observe(now);
        self.started(now, id);
        self.settle(now);
    }

    fn started(&mut self, now: Time, id: JobId) {
        let Some(mut entry) = self.jobs.get_mut(&id) else {
            return;
        };
        if let Phase::Reserved {
            end, cost, parts, ..
        } = &entry.phase
        {
            entry.phase = Phase::Running {
                start: now,
                end: *end,
                cost: *cost,
                parts: parts.clone(),
                ended: BTreeSet::new(),
                suspended: Dur::ZERO,
            };
            entry.reason = None;
        }
    }

    /// A cluster that schedules itself answered phase one for `reservation`.
    pub fn on_reservation_answered(
        &mut self,
        now: Time,
        reservation: ReservationId,
        answer: Result<(), String>,
        out: &mut Vec<BrokerAction>,
    ) {
        self.observe(now);
        let found = self.jobs.find_active_mut(|id, e| match &mut e.phase {
            Phase::Reserving {
                awaiting,
                refusal,
                parts,
                ..
            } if awaiting.contains(&reservation) => {
                awaiting.remove(&reservation);
                if let Err(why) = answer.as_ref() {
                    let cluster = parts
                        .iter()
                        .find(|p| p.reservation == reservation)
                        .map_or(ClusterId(0), |p| p.cluster);
                    refusal.get_or_insert((cluster, why.clone()));
                }
                Some((id, awaiting.is_empty()))
            }
            _ => None,
        });
        let Some((id, true)) = found else {
            self.settle(now);
            return;
        };
        let mut entry = self.jobs.get_mut(&id).expect("invariant: found above");
        let Phase::Reserving {
            start,
            end,
            cost,
            parts,
            refusal,
            ..
        } = std::mem::replace(&mut entry.phase, Phase::Queued)
        else {
            unreachable!("matched above")
        };
        drop(entry);
        match refusal {
            None => self.commit(now, id, start, end, cost, parts, out),
            Some((cluster, why)) => {
                self.release_parts(now, id, &parts, out);
                let name = self.clusters[cluster].name.clone();
                self.refused(
                    now,
                    id,
                    cluster,
                    format!("cluster {name} refused the reservation: {why}"),
                    true,
                    out,
                );
            }
        }
        self.settle(now);
    }

    /// The clusters that schedule themselves answered a move asked by
    /// [`BrokerAction::MoveAsked`]: all parts moved (the job now starts at the new time), or
    /// none did (the caller put back any that had; the job keeps its reservation and is not
    /// moved again for [`MOVE_RETRY_SECS`]). An answer for a job that has meanwhile started,
    /// ended, or lost its reservation changes nothing.
    pub fn on_move_answered(
        &mut self,
        now: Time,
        job: JobId,
        answer: Result<(), String>,
        out: &mut Vec<BrokerAction>,
    ) {
        self.observe(now);
        let Some(m) = self.moving.remove(&job) else {
            self.settle(now);
            return;
        };
        let current = self.jobs.get(&job).and_then(|e| match &e.phase {
            Phase::Reserved { start, cost, .. } if *start == m.from => Some(*cost),
            _ => None,
        });
        // The parts on clusters the broker schedules held their new window beside the old
        // one: moved there now, or the held window given back.
        let accepted = answer.is_ok() && current.is_some();
        let old_parts = match self.jobs.get(&job).map(|e| &e.phase) {
            Some(Phase::Reserved { parts, .. }) => parts.clone(),
            _ => Vec::new(),
        };
        for to in &m.parts {
            let k = to.cluster;
            if self.clusters[k].self_scheduled {
                continue;
            }
            let from = old_parts.iter().find(|p| p.reservation == to.reservation);
            let done = match (accepted, from) {
                (true, Some(from)) => {
                    let part = bound_part(&self.jobs[&job].job, from);
                    compress::complete_held_move(&self.clusters[k].sched, now, &part, from, to)
                }
                _ => None,
            };
            match done {
                Some(s) => self.clusters[k].sched = s,
                None => {
                    let held = compress::held_for_move_id(to.reservation);
                    let _ = self.clusters[k].sched.remove_reservation(now, held);
                }
            }
        }
        match (answer, current) {
            (Ok(()), Some(cost)) => {
                if let Some(mut e) = self.jobs.get_mut(&job) {
                    e.phase = Phase::Reserved {
                        start: m.start,
                        end: m.end,
                        cost,
                        parts: m.parts.clone(),
                    };
                }
                self.move_not_before.remove(&job);
                self.stats.moves += 1;
                let here: Vec<ClusterId> = m
                    .parts
                    .iter()
                    .map(|p| p.cluster)
                    .filter(|&k| !self.clusters[k].self_scheduled)
                    .collect();
                out.push(BrokerAction::Moved {
                    job,
                    start: m.start,
                    end: m.end,
                    parts: m.parts,
                });
                // A part here whose new window has begun starts now.
                for k in here {
                    let mut actions = Vec::new();
                    let _ = self.clusters[k]
                        .sched
                        .handle(now, Event::Tick, &mut actions);
                    self.carry_out(now, k, actions, out);
                }
            }
            (Err(_), Some(_)) => {
                self.move_not_before.insert(job, now + Dur(MOVE_RETRY_SECS));
            }
            (_, None) => {}
        }
        self.settle(now);
    }

    /// Cluster `k` cannot be reached: the planner gives it nothing, and global jobs reserved
    /// there that have not started are planned again (their charge refunded).
    pub fn on_cluster_down(&mut self, now: Time, k: ClusterId, out: &mut Vec<BrokerAction>) {
        self.observe(now);
        self.clusters[k].available = false;
        let hit: Vec<JobId> = self
            .jobs
            .active()
            .filter(|e| match &e.phase {
                Phase::Reserving { parts, .. } | Phase::Reserved { parts, .. } => {
                    parts.iter().any(|p| p.cluster == k)
                }
                _ => false,
            })
            .map(|e| e.job.id)
            .collect();
        for id in hit {
            self.unreserve(now, id, out);
            self.requeue_entry(id);
            let reason = WaitReason::LostCluster(k);
            if let Some(mut e) = self.jobs.get_mut(&id) {
                e.reason = Some(reason.clone());
            }
            out.push(BrokerAction::Waiting { job: id, reason });
        }
        self.settle(now);
    }

    /// Cluster `k` is reachable again.
    pub fn on_cluster_up(&mut self, now: Time, k: ClusterId) {
        self.observe(now);
        self.clusters[k].available = true;
        self.settle(now);
    }

    /// Puts back a global job that was reserved or running when the caller lost its state
    /// (a restart); the caller restores the clusters' schedulers itself.
    pub fn adopt(&mut self, job: GlobalJob, phase: Phase) {
        let id = job.id;
        for p in match &phase {
            Phase::Reserved { parts, .. } | Phase::Running { parts, .. } => parts.as_slice(),
            _ => &[],
        } {
            self.next_reservation = self.next_reservation.max(p.reservation.0 + 1);
        }
        // The licences its reservation held: the schedulers got the reservation back, not
        // what it held, and the first part's holds them (as `reserve_parts` had them).
        if let (false, Phase::Reserved { parts, .. } | Phase::Running { parts, .. }) =
            (job.licences.is_empty(), &phase)
        {
            if let Some(first) = parts.first() {
                let sched = &mut self.clusters[first.cluster].sched;
                if sched
                    .reservation_licences(first.reservation)
                    .is_some_and(|held| held.is_empty())
                {
                    // Refused only if the pools shrank meanwhile; the job runs as reserved.
                    let _ = sched.hold_licences_in_reservation(first.reservation, &job.licences);
                }
            }
        }
        let queued = matches!(phase, Phase::Queued | Phase::Planned { .. });
        self.jobs.insert(
            id,
            Entry {
                job,
                phase,
                not_before: Time::MIN,
                refusals: 0,
                reason: None,
                prepaid: false,
            },
        );
        if queued {
            self.arrivals.push(id);
        }
    }

    /// One planning cycle at `now` (seed 000 §5.4): arrivals join the queue, every cluster
    /// runs a pass, reserved jobs move earlier where they can, then the queue is planned.
    pub fn on_cycle(&mut self, now: Time, out: &mut Vec<BrokerAction>) {
        let (jobs, cfg) = self.prepare_cycle(now, out);
        let decisions = plan_on(now, &self.clusters, &jobs, &cfg);
        if !decisions.is_empty() {
            let available: Vec<bool> = self.clusters.iter().map(|c| c.available).collect();
            self.apply_planned(now, decisions, &available, out);
        }
        self.serve_levels(now, levels::Stage::AfterPlanning, out);
        self.serve_remote_levels(now, out);
        self.settle(now);
        debug_assert!(self.jobs.index_holds(), "the index of active jobs is off");
    }

    /// The first half of [`Broker::on_cycle`]: everything up to the planning itself, which
    /// the returned [`CyclePlan`] carries out on its own copy of the clusters, so that a
    /// caller can plan off its lock and hand the decisions to [`Broker::finish_cycle`].
    /// Both halves together decide exactly what [`Broker::on_cycle`] decides.
    pub fn begin_cycle(&mut self, now: Time, out: &mut Vec<BrokerAction>) -> CyclePlan {
        let (jobs, cfg) = self.prepare_cycle(now, out);
        let clusters = if jobs.is_empty() {
            Vec::new()
        } else {
            self.clusters.clone()
        };
        CyclePlan {
            now,
            jobs,
            cfg,
            clusters,
        }
    }

    /// Arrivals join the queue, every cluster runs a pass, reserved jobs move earlier: what
    /// a cycle does before it plans.
    fn prepare_cycle(
        &mut self,
        now: Time,
        out: &mut Vec<BrokerAction>,
    ) -> (Vec<GlobalJob>, PlannerConfig) {
        self.observe(now);
        self.stats.cycles += 1;
        for id in std::mem::take(&mut self.arrivals) {
            if self
                .jobs
                .get(&id)
                .is_some_and(|e| matches!(e.phase, Phase::Queued | Phase::Planned { .. }))
            {
                let level = self.jobs[&id].job.priority;
                self.queue.insert(id, level);
            }
        }
        for k in ClusterId::all(self.clusters.len()) {
            if self.clusters[k].self_scheduled {
                continue;
            }
            let mut actions = Vec::new();
            let _ = self.clusters[k]
                .sched
                .handle(now, Event::Tick, &mut actions);
            self.carry_out(now, k, actions, out);
        }
        self.compress(now, out);
        self.serve_levels(now, levels::Stage::BeforePlanning, out);
        self.serve_remote_levels(now, out);
        self.cycle_input(now)
    }

    /// The second half of [`Broker::on_cycle`]: carries out the decisions `plan` made.
    pub fn finish_cycle(
        &mut self,
        plan: CyclePlan,
        decisions: Vec<Decision>,
        out: &mut Vec<BrokerAction>,
    ) {
        self.apply_decisions(&plan, decisions, out);
        self.close_cycle(plan, out);
    }

    /// Carries out some of the decisions made on `plan`, the next ones in their order: a
    /// caller holding a lock around the broker may apply a long list a slice at a time and
    /// let other events in between, which are then as events during the planning (they win
    /// over the plan). [`Broker::close_cycle`] ends the cycle once every slice is applied.
    pub fn apply_decisions(
        &mut self,
        plan: &CyclePlan,
        decisions: Vec<Decision>,
        out: &mut Vec<BrokerAction>,
    ) {
        if !decisions.is_empty() {
            let available: Vec<bool> = plan.clusters.iter().map(|c| c.available).collect();
            self.apply_planned(plan.now, decisions, &available, out);
        }
    }

    /// Ends a cycle whose decisions are all applied ([`Broker::apply_decisions`]): waiting
    /// jobs are served by level again, on the clusters as the planner left them.
    pub fn close_cycle(&mut self, plan: CyclePlan, out: &mut Vec<BrokerAction>) {
        self.serve_levels(plan.now, levels::Stage::AfterPlanning, out);
        self.serve_remote_levels(plan.now, out);
        self.settle(plan.now);
    }

    /// The jobs a cycle at `now` plans, in order, and the planner's settings for them.
    fn cycle_input(&self, now: Time) -> (Vec<GlobalJob>, PlannerConfig) {
        let jobs: Vec<GlobalJob> = self
            .queue
            .iter()
            .filter_map(|id| self.jobs.get(id))
            .filter(|e| matches!(e.phase, Phase::Queued | Phase::Planned { .. }))
            .filter(|e| e.not_before <= now)
            // Jobs beyond the planning depth wait for a later cycle: the cycle costs
            // O(plan_depth), not O(queue).
            .take(self.planner.plan_depth)
            .map(|e| e.job.clone())
            .collect();
        let cfg = self.planner_for(now, &jobs);
        (jobs, cfg)
    }

    /// Carries out decisions made on clusters whose availability was `available` (possibly
    /// on a snapshot, off the caller's lock): jobs that changed meanwhile are skipped, a
    /// decision on a cluster that went down meanwhile is planned again, and a reservation
    /// that no longer fits is refused and planned again.
    fn apply_planned(
        &mut self,
        now: Time,
        decisions: Vec<Decision>,
        available: &[bool],
        out: &mut Vec<BrokerAction>,
    ) {
        // Where each cluster's processors began among the planner's (an unavailable
        // cluster offered none).
        let mut offsets = Vec::with_capacity(self.clusters.len());
        let mut first = 0u32;
        for (c, &up) in self.clusters.iter().zip(available) {
            offsets.push(first);
            if up {
                first += c.processors.len() as u32;
            }
        }
        for d in decisions {
            let id = d.job();
            let plannable = self
                .jobs
                .get(&id)
                .is_some_and(|e| matches!(e.phase, Phase::Queued | Phase::Planned { .. }))
                && self.queue.contains(&id);
            let gone_down = match &d {
                Decision::Reserve { parts, .. } => {
                    parts.iter().any(|p| !self.clusters[p.cluster].available)
                }
                _ => available
                    .iter()
                    .zip(&self.clusters)
                    .any(|(&a, c)| a != c.available),
            };
            if !plannable || gone_down {
                continue;
            }
            match d {
                Decision::Reserve {
                    job,
                    start,
                    end,
                    cost,
                    parts,
                    processors,
                    ..
                } => {
                    let here: Vec<(ClusterId, u32)> =
                        parts.iter().map(|p| (p.cluster, p.procs)).collect();
                    if start <= now && self.start_would_be_preempted(now, job, &here, end - start) {
                        // Planned again next cycle; started now it would only be preempted.
                        continue;
                    }
                    let mut chosen: Vec<ReservedPart> = Vec::new();
                    for p in parts {
                        let lo = offsets[p.cluster];
                        let hi = lo + self.clusters[p.cluster].processors.len() as u32;
                        let len = self.clusters[p.cluster].granular(end - start);
                        chosen.push(ReservedPart {
                            cluster: p.cluster,
                            reservation: ReservationId(0),
                            procs: p.procs,
                            processors: processors
                                .iter()
                                .filter(|&&q| lo <= q && q < hi)
                                .map(|q| q - lo)
                                .collect(),
                            window: Interval::new(start, start + len),
                        });
                    }
                    self.reserve(now, job, start, end, cost, chosen, out);
                }
                Decision::Wait {
                    job,
                    start,
                    end,
                    processors,
                } => {
                    let parts = ClusterId::enumerate(&self.clusters)
                        .filter_map(|(k, c)| {
                            let lo = offsets[k];
                            let hi = lo + c.processors.len() as u32;
                            let mine: Vec<u32> = processors
                                .iter()
                                .filter(|&&q| available[k] && lo <= q && q < hi)
                                .map(|q| q - lo)
                                .collect();
                            (!mine.is_empty()).then_some(PlannedPart {
                                cluster: k,
                                processors: mine,
                            })
                        })
                        .collect();
                    let mut e = self.jobs.get_mut(&job).expect("invariant: plannable");
                    e.reason = None;
                    let moved = !matches!(e.phase, Phase::Planned { start: s, .. } if s == start);
                    e.phase = Phase::Planned { start, end, parts };
                    if moved {
                        out.push(BrokerAction::Planned { job, start });
                    }
                }
                Decision::NoFit { job, reason } => {
                    let reason = WaitReason::NoWindow(reason);
                    self.wait(job, reason, out);
                }
                Decision::Refuse { job, reason } => {
                    let down: Vec<ClusterId> = ClusterId::all(self.clusters.len())
                        .filter(|&k| !self.clusters[k].available)
                        .collect();
                    if down.is_empty() {
                        self.jobs.remove(&job);
                        self.queue.remove(&job);
                        out.push(BrokerAction::Refused {
                            job,
                            reason: Unrunnable::TooLarge(reason),
                        });
                    } else {
                        let procs = self.jobs[&job].job.procs;
                        self.wait(job, WaitReason::ClustersDown { procs, down }, out);
                    }
                }
            }
        }
    }

    // ------------------------------------------------------------------ two-phase

    /// Phase one for a planned job: a tentative reservation on every cluster of its plan
    /// (held at once in the local schedulers, asked of the clusters that schedule
    /// themselves); all committed when every cluster holds its part.
    #[allow(clippy::too_many_arguments)]
    fn reserve(
        &mut self,
        now: Time,
        id: JobId,
        start: Time,
        end: Time,
        cost: f64,
        mut parts: Vec<ReservedPart>,
        out: &mut Vec<BrokerAction>,
    ) {
        let user = self.jobs[&id].job.user;
        if let Some(left) = self.short_of(id, user, cost) {
            self.wait(id, WaitReason::OverBudget { cost, left }, out);
            return;
        }
        let mut held: Vec<usize> = Vec::new();
        for i in 0..parts.len() {
            let rid = self.allocate_reservation();
            parts[i].reservation = rid;
            let p = &parts[i];
            let res = AdminReservation {
                id: rid,
                procs: p.procs,
                window: p.window,
                acl: Acl {
                    job: Some(id),
                    ..Acl::nobody()
                },
            };
            if let Err(e) = self.clusters[p.cluster]
                .sched
                .add_reservation_displacing(res)
            {
                let cluster = p.cluster;
                for &j in &held {
                    let q = &parts[j];
                    let _ = self.clusters[q.cluster]
                        .sched
                        .remove_reservation(now, q.reservation);
                }
                let name = self.clusters[cluster].name.clone();
                self.refused(
                    now,
                    id,
                    cluster,
                    format!("cluster {name} refused the reservation: {e}"),
                    false,
                    out,
                );
                return;
            }
            held.push(i);
        }
        // The licences are held once, by the first part's reservation (the planner put
        // every part on clusters drawing on the job's pools).
        let licences = &self.jobs[&id].job.licences;
        if let (false, Some(first)) = (licences.is_empty(), parts.first()) {
            if let Err(e) = self.clusters[first.cluster]
                .sched
                .hold_licences_in_reservation(first.reservation, licences)
            {
                for q in &parts {
                    let _ = self.clusters[q.cluster]
                        .sched
                        .remove_reservation(now, q.reservation);
                }
                let name = self.clusters[first.cluster].name.clone();
                self.refused(
                    now,
                    id,
                    first.cluster,
                    format!("cluster {name} refused the reservation: {e}"),
                    false,
                    out,
                );
                return;
            }
        }
        let awaiting: BTreeSet<ReservationId> = parts
            .iter()
            .filter(|p| self.clusters[p.cluster].self_scheduled)
            .map(|p| p.reservation)
            .collect();
        if awaiting.is_empty() {
            self.commit(now, id, start, end, cost, parts, out);
            return;
        }
        for p in parts
            .iter()
            .filter(|p| self.clusters[p.cluster].self_scheduled)
        {
            out.push(BrokerAction::Ask {
                job: id,
                part: p.clone(),
            });
        }
        self.queue.remove(&id);
        let mut e = self
            .jobs
            .get_mut(&id)
            .expect("invariant: planned jobs exist");
        e.reason = None;
        e.phase = Phase::Reserving {
            start,
            end,
            cost,
            parts,
            awaiting,
            refusal: None,
        };
    }

    /// Phase two: every part is held; charge the user, bind the parts to their
    /// reservations in the local schedulers.
    #[allow(clippy::too_many_arguments)]
    fn commit(
        &mut self,
        now: Time,
        id: JobId,
        start: Time,
        end: Time,
        cost: f64,
        parts: Vec<ReservedPart>,
        out: &mut Vec<BrokerAction>,
    ) {
        self.queue.remove(&id);
        let mut e = self
            .jobs
            .get_mut(&id)
            .expect("invariant: reserved jobs exist");
        e.refusals = 0;
        e.not_before = Time::MIN;
        e.reason = None;
        e.phase = Phase::Reserved {
            start,
            end,
            cost,
            parts: parts.clone(),
        };
        let user = e.job.user;
        drop(e);
        self.charge(id, user, cost, out);
        out.push(BrokerAction::Reserved {
            job: id,
            start,
            end,
            cost,
            parts: parts.clone(),
        });
        for p in &parts {
            if self.clusters[p.cluster].self_scheduled {
                continue;
            }
            let job = bound_part(&self.jobs[&id].job, p);
            let mut actions = Vec::new();
            let submitted =
                self.clusters[p.cluster]
                    .sched
                    .handle(now, Event::Submit(job), &mut actions);
            if submitted.is_err() {
                // Cannot happen for a reservation just held for this very job; planned
                // again rather than lost.
                self.unreserve(now, id, out);
                self.requeue_entry(id);
                return;
            }
            self.carry_out(now, p.cluster, actions, out);
        }
    }

    /// A reservation was refused: planned again, after a pause when a cluster that
    /// schedules itself refused (each refusal in a row doubles it, 1–64 s).
    fn refused(
        &mut self,
        now: Time,
        id: JobId,
        cluster: ClusterId,
        detail: String,
        pause: bool,
        out: &mut Vec<BrokerAction>,
    ) {
        let mut e = self
            .jobs
            .get_mut(&id)
            .expect("invariant: refused jobs exist");
        let until = if pause {
            e.refusals += 1;
            now + Dur(1 << (e.refusals - 1).min(MAX_BACKOFF_DOUBLINGS))
        } else {
            now
        };
        e.not_before = until;
        e.phase = Phase::Queued;
        let level = e.job.priority;
        drop(e);
        self.queue.insert(id, level);
        self.wait(
            id,
            WaitReason::ReservationRefused {
                cluster,
                detail,
                until,
            },
            out,
        );
    }

    /// Takes `amount` from the user's budget (a negative amount gives back); nothing for
    /// a zero amount.
    fn charge(&mut self, job: JobId, user: UserId, amount: f64, out: &mut Vec<BrokerAction>) {
        if amount == 0.0 {
            return;
        }
        if !self.is_prepaid(job) {
            if let Some(b) = self.budgets.get_mut(&user) {
                *b -= amount;
            }
        }
        out.push(BrokerAction::Charge { job, user, amount });
    }

    fn wait(&mut self, id: JobId, reason: WaitReason, out: &mut Vec<BrokerAction>) {
        let mut e = self
            .jobs
            .get_mut(&id)
            .expect("invariant: waiting jobs exist");
        e.phase = Phase::Queued;
        if e.reason.as_ref() != Some(&reason) {
            e.reason = Some(reason.clone());
            out.push(BrokerAction::Waiting { job: id, reason });
        }
    }

    /// Releases every reservation of a job that has not started and refunds its charge.
    fn unreserve(&mut self, now: Time, id: JobId, out: &mut Vec<BrokerAction>) {
        let Some(e) = self.jobs.get(&id) else { return };
        let user = e.job.user;
        let (parts, cost) = match &e.phase {
            Phase::Reserving { parts, .. } => (parts.clone(), 0.0),
            Phase::Reserved { parts, cost, .. } => (parts.clone(), *cost),
            _ => return,
        };
        for p in &parts {
            if !self.clusters[p.cluster].self_scheduled {
                let _ = self.clusters[p.cluster].sched.cancel(now, id);
            }
        }
        self.release_parts(now, id, &parts, out);
        self.charge(id, user, -cost, out);
        if let Some(mut e) = self.jobs.get_mut(&id) {
            e.phase = Phase::Queued;
        }
    }

    fn release_parts(
        &mut self,
        now: Time,
        id: JobId,
        parts: &[ReservedPart],
        out: &mut Vec<BrokerAction>,
    ) {
        for p in parts {
            let _ = self.clusters[p.cluster]
                .sched
                .remove_reservation(now, p.reservation);
            out.push(BrokerAction::ReservationEnded {
                cluster: p.cluster,
                reservation: p.reservation,
                job: id,
                how: ReservationEnd::Released,
            });
            self.pass(now, p.cluster, out);
        }
    }

    /// A pass of cluster `k`'s local scheduler, so that processors a reservation gave back
    /// go to waiting local work at once.
    fn pass(&mut self, now: Time, k: ClusterId, out: &mut Vec<BrokerAction>) {
        if self.clusters[k].self_scheduled {
            return;
        }
        let mut actions = Vec::new();
        let _ = self.clusters[k]
            .sched
            .handle(now, Event::Tick, &mut actions);
        self.carry_out(now, k, actions, out);
    }

    fn requeue_entry(&mut self, id: JobId) {
        if let Some(mut e) = self.jobs.get_mut(&id) {
            e.phase = Phase::Queued;
            self.queue.insert(id, e.job.priority);
        }
    }

    // ------------------------------------------------------------------ helpers

    /// Turns a local scheduler's actions on cluster `k` into the broker's: starts of a
    /// cluster that schedules itself are forecasts only and are dropped.
    fn carry_out(
        &mut self,
        now: Time,
        k: ClusterId,
        actions: Vec<Action>,
        out: &mut Vec<BrokerAction>,
    ) {
        if self.clusters[k].self_scheduled {
            return;
        }
        for a in actions {
            match a {
                Action::Start { job, procs, domain } => {
                    self.started(now, job);
                    out.push(BrokerAction::Start {
                        cluster: k,
                        job,
                        procs,
                        domain,
                    });
                }
                Action::Reserve { start, .. } => {
                    if start > now {
                        out.push(BrokerAction::Wake {
                            cluster: k,
                            at: start,
                        });
                    }
                }
            }
        }
        if let Some(at) = self.clusters[k].sched.next_boundary(now) {
            out.push(BrokerAction::Wake { cluster: k, at });
        }
        self.spread_licences(now, out);
    }

    /// Passes every change made to a shared licence pool on to the other clusters drawing
    /// on it; those that got licences back from `now` run a pass, so that their waiting
    /// jobs take them at once.
    fn spread_licences(&mut self, now: Time, out: &mut Vec<BrokerAction>) {
        if self.shared_pools.is_empty() {
            return;
        }
        let mut woken = BTreeSet::new();
        for k in ClusterId::all(self.clusters.len()) {
            for h in self.clusters[k].sched.drain_licence_journal() {
                let Some(on) = self.shared_pools.get(&h.pool) else {
                    continue;
                };
                // When the licences come back to the others: at the end of a hold, at
                // the start of a give.
                let back = if h.delta > 0 { h.start } else { h.end };
                for &o in on.iter().filter(|&&o| o != k) {
                    self.clusters[o].sched.apply_licence_hold(&h);
                    if back <= now {
                        if h.delta > 0 && now < h.end {
                            woken.insert(o);
                        }
                    } else if back < Time::MAX && self.clusters[o].sched.waiting() > 0 {
                        // Nothing else tells a cluster whose jobs wait for these licences
                        // that another cluster lets go of them then.
                        out.push(BrokerAction::Wake {
                            cluster: o,
                            at: back,
                        });
                    }
                }
            }
        }
        // A pass only takes licences (or gives back ones held from later), so this ends.
        for o in woken {
            self.pass(now, o, out);
        }
    }

    /// Adds the idle time since the last event to the figures.
    fn observe(&mut self, now: Time) {
        if let Some((since, rate)) = self.idle_since {
            if now > since {
                self.stats.idle_while_waiting += rate * (now - since).as_secs() as f64;
                self.idle_since = Some((now, rate));
            }
        }
    }

    /// After an event: how many idle processors waiting global jobs could use from now on.
    fn settle(&mut self, now: Time) {
        let idle: Vec<i64> = self
            .clusters
            .iter()
            .map(|c| {
                if c.available && !c.self_scheduled {
                    c.sched.idle_at(now).max(0)
                } else {
                    0
                }
            })
            .collect();
        let total: i64 = idle.iter().sum();
        let largest = idle.iter().copied().max().unwrap_or(0);
        let mut wanted = 0i64;
        if total > 0 {
            let waiting = self
                .queued()
                .chain(self.jobs.active().filter(|e| {
                    matches!(e.phase, Phase::Reserved { .. } | Phase::Reserving { .. })
                }))
                .take(self.planner.plan_depth.max(1) * 2);
            for e in waiting.filter(|e| e.job.eligible(now) <= now) {
                let p = i64::from(e.job.procs);
                if p <= largest || (e.job.co_allocate && p <= total) {
                    wanted += p;
                }
                if wanted >= total {
                    break;
                }
            }
        }
        self.idle_since = Some((now, wanted.min(total) as f64));
    }
}

/// The share of `cost` given back when `used` of `reserved` seconds were used.
/// Where the charged window of a started job begins: its parts' reserved start, or its
/// first part's start if that came earlier (a job resumed after preemption holds windows from
/// its resumption). A part that started late (its site took the command after the window
/// opened) is charged on the window it reserved, not on a window shortened by the delay.
fn reserved_from(first: Time, parts: &[ReservedPart]) -> Time {
    parts
        .iter()
        .map(|p| p.window.start)
        .min()
        .map_or(first, |start| start.min(first))
}

fn refund(cost: f64, used: i64, reserved: i64) -> f64 {
    let reserved = reserved.max(1) as f64;
    let used = used.max(0) as f64;
    cost * (1.0 - (used / reserved).min(1.0))
}

/// What a global job's part is to the local scheduler of its cluster: a job of the part's
/// processors for the reservation's length, bound to that reservation.
/// A predicted job plans its part by its prediction, stretched as its walltime is to the
/// window (the slowest processor chosen, the granularity), so that a part that outlives it is
/// corrected like a local job ([`Broker::correct_outlived`]).
fn bound_part(job: &GlobalJob, p: &ReservedPart) -> Job {
    let len = p.window.len();
    let prediction = job.predicted().map(|pred| {
        let wall = job.walltime.as_secs().max(1);
        Dur((pred.as_secs() * len.as_secs() + wall - 1) / wall)
    });
    Job::new(job.id, job.submit, p.procs, len)
        .with_user(job.user)
        .with_prediction(prediction.filter(|&d| d < len))
        .in_reservation(p.reservation, false)
}

#[cfg(test)]
mod tests;
