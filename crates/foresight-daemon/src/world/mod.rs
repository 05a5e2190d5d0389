//! The service's state and every change to it, under one lock: clusters with their local
//! schedulers, jobs, reservations, users. Nothing here does I/O: changes mark records dirty
//! (the caller writes them to the store) and queue effects (the caller runs processes).

use crate::config::{ClusterConfig, Config};
use crate::error::ApiError;
use foresight_api::{AclSpec, JobState, ReservationState};
use foresight_core::forecast::Tariff;
use foresight_core::grid::{plan_cycle, ClusterView, Decision, GlobalJob, PlannerConfig};
use foresight_core::policy::Policy;
use foresight_core::reservation::{Acl, AdminReservation};
use foresight_core::scheduler::{Action, Domain, Event, LocalScheduler};
use foresight_core::select::{Criterion, Processor};
use foresight_core::time::{Dur, Interval, Time};
use foresight_core::{
    AccountId, ClassId, Credentials, GroupId, Job, JobId, QosId, ReservationId, UserId,
};
use foresight_rm::{ClusterState, LaunchSpec, Outcome, PartHandle, ReserveRequest, Submission};
use foresight_store::{JobRecord, PartRecord, ReservationRecord, UserRecord};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

/// Something for the caller to do outside the lock.
#[derive(Clone, Debug)]
pub enum Effect {
    /// Start a job's part on a cluster.
    Launch {
        /// Cluster index.
        cluster: usize,
        /// What to run.
        spec: LaunchSpec,
    },
    /// Stop a running part (cancel, requeue, or a sibling part failed).
    Kill {
        /// Cluster index.
        cluster: usize,
        /// Job.
        job: u64,
        /// Attempt.
        attempt: u32,
    },
    /// SIGSTOP or SIGCONT a running part.
    Pause {
        /// Cluster index.
        cluster: usize,
        /// Job.
        job: u64,
        /// Attempt.
        attempt: u32,
        /// Stop (true) or continue (false).
        stop: bool,
    },
    /// Phase one on a cluster that schedules itself (Slurm): hold a reservation there; the
    /// answer goes to [`World::reservation_answered`].
    Reserve {
        /// Cluster index.
        cluster: usize,
        /// What to hold.
        request: ReserveRequest,
    },
    /// Give a reservation back to a cluster that schedules itself.
    Release {
        /// Cluster index.
        cluster: usize,
        /// Foresight's reservation id.
        reservation: u64,
    },
    /// Submit a part to a cluster that schedules itself; the answer goes to
    /// [`World::part_submitted`].
    Submit {
        /// Cluster index.
        cluster: usize,
        /// What to submit.
        submission: Submission,
    },
    /// Cancel a part on a cluster that schedules itself.
    Cancel {
        /// Cluster index.
        cluster: usize,
        /// The part.
        part: PartHandle,
    },
    /// Suspend (true) or resume (false) a part on a cluster that schedules itself.
    Control {
        /// Cluster index.
        cluster: usize,
        /// The part.
        part: PartHandle,
        /// Suspend (true) or resume (false).
        stop: bool,
    },
}

/// One cluster of the grid as the service runs it.
#[derive(Clone, Debug)]
pub struct Cluster {
    /// Its configuration.
    pub cfg: ClusterConfig,
    /// Its local policy: the owner's queue and the reservations.
    pub sched: LocalScheduler,
    /// Its processors, for the planner.
    pub processors: Vec<Processor>,
    /// Its prices.
    pub tariff: Tariff,
    /// Processor indices not running anything now.
    pub free: BTreeSet<u32>,
    /// Scheduled by its own resource manager (Slurm): `sched` is then a mirror rebuilt from
    /// every snapshot, whose decisions are never carried out.
    pub remote: bool,
    /// False while its resource manager cannot be reached (and, for a remote cluster, until
    /// its first snapshot): the planner gives it nothing.
    pub available: bool,
    /// Why it is unavailable.
    pub unavailable_reason: Option<String>,
    /// The last snapshot of a remote cluster.
    pub snapshot: Option<ClusterState>,
}

impl Cluster {
    /// Its processors as best known: configured, or for a remote cluster as last read.
    pub fn procs(&self) -> u32 {
        match &self.snapshot {
            Some(s) if self.remote => s.processors,
            _ => self.cfg.procs,
        }
    }

    /// Processors busy now: as the remote cluster last reported, or not free here.
    pub fn busy(&self) -> u32 {
        match &self.snapshot {
            Some(s) if self.remote => s
                .jobs
                .iter()
                .filter(|j| {
                    matches!(
                        j.state,
                        foresight_rm::RmJobState::Running | foresight_rm::RmJobState::Suspended
                    )
                })
                .map(|j| j.procs)
                .sum::<u32>()
                .min(s.processors),
            _ => self.procs().saturating_sub(self.free.len() as u32),
        }
    }

    /// The most processors a job may ask of it: unbounded for a remote cluster whose size is
    /// not known yet (its resource manager judges when it answers).
    fn admission_limit(&self) -> u32 {
        if self.remote && self.snapshot.is_none() && self.cfg.procs == 0 {
            u32::MAX
        } else {
            self.procs()
        }
    }
}

/// What an administrative reservation holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Held {
    /// Any this many processors: the cluster's scheduler keeps that many free.
    Count(u32),
    /// These processors (indices within the cluster).
    These(Vec<u32>),
}

/// Counters for `/metrics`.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Cycles run.
    pub cycles: u64,
    /// Duration of the last cycle, seconds.
    pub last_cycle_seconds: f64,
    /// Sum of |planned − actual| start over started jobs that had a plan, seconds.
    pub estimate_error_sum: f64,
    /// How many started jobs had a planned start.
    pub estimate_error_count: u64,
    /// Co-allocated jobs on remote clusters whose every part has started.
    pub skew_count: u64,
    /// Sum of their start skews (latest part start − earliest), seconds.
    pub skew_sum: f64,
    /// The largest start skew seen, seconds.
    pub skew_max: f64,
    /// Snapshots of remote clusters taken.
    pub snapshots: u64,
}

/// The whole state.
#[derive(Debug)]
pub struct World {
    /// Clusters, in configuration order.
    pub clusters: Vec<Cluster>,
    /// Every job, by id.
    pub jobs: BTreeMap<u64, JobRecord>,
    /// Every reservation, by id.
    pub reservations: BTreeMap<u64, ReservationRecord>,
    /// Users by name.
    pub users: BTreeMap<String, UserRecord>,
    tokens: HashMap<String, String>,
    /// Global jobs waiting for the planner, in priority (id) order.
    pub queue: BTreeSet<u64>,
    /// Global jobs that arrived since the last cycle.
    arrivals: Vec<u64>,
    names: HashMap<(u8, String), u32>,
    next_reservation: u64,
    /// Running jobs to put back in the queue once their processes are gone.
    requeue: BTreeSet<u64>,
    /// Running jobs whose parts are being stopped because one part failed or on cancel.
    stopping: BTreeSet<u64>,
    /// Parts a local policy started while too few of the cluster's processors were really
    /// free: (cluster, job, procs), launched in this order as processors come free. A policy
    /// counts a job's processors free at the end of its walltime, but the supervisor counts
    /// the walltime from the process's own start and may give it a grace period to die.
    deferred: Vec<(usize, u64, u32)>,
    /// Changed since last written.
    pub dirty_jobs: BTreeSet<u64>,
    /// Changed since last written.
    pub dirty_reservations: BTreeSet<u64>,
    /// Changed since last written.
    pub dirty_users: BTreeSet<String>,
    /// To do outside the lock.
    pub effects: Vec<Effect>,
    planner: PlannerConfig,
    grace: u64,
    output_dir: PathBuf,
    /// For `/metrics`.
    pub stats: Stats,
    /// Global jobs in two-phase reservation, waiting for remote clusters' answers.
    reserving: BTreeMap<u64, remote::Reserving>,
    /// Parts whose submission to a remote cluster is on its way: (job, attempt, cluster).
    submitting: BTreeSet<(u64, u32, usize)>,
    /// When parts were submitted to a remote cluster (this run of the service only): a
    /// snapshot older than that may not show them yet.
    submitted_at: HashMap<(u64, u32, usize), i64>,
    /// When remote reservations were confirmed (this run only), for the same reason.
    confirmed_at: HashMap<u64, i64>,
    /// Cancels and releases already sent to remote clusters and not yet seen through.
    sent: BTreeSet<(usize, String)>,
    /// Jobs whose reservation a remote cluster refused: (not planned before, refusals in a
    /// row).
    backoff: HashMap<u64, (i64, u32)>,
}

/// A 404 naming the request field at fault (the path's `id` or `name`).
pub fn not_found_at(field: &str, message: String) -> ApiError {
    let mut e = ApiError::not_found(message);
    e.body.field = Some(field.into());
    e
}

fn now_time(now: i64) -> Time {
    Time(now)
}

impl World {
    /// A world with the configured clusters and nothing else.
    pub fn new(cfg: &Config) -> World {
        let clusters = cfg
            .cluster
            .iter()
            .map(|c| {
                let policy: Policy = c.policy.parse().unwrap_or_else(|_| Policy::easy());
                Cluster {
                    cfg: c.clone(),
                    sched: LocalScheduler::new(c.procs, policy),
                    processors: (0..c.procs)
                        .map(|i| Processor {
                            id: format!("{}/p{i}", c.name),
                            cluster: c.name.clone(),
                            speed: c.speed,
                            memory_mb: 0,
                            features: Default::default(),
                        })
                        .collect(),
                    tariff: Tariff {
                        base: c.tariff,
                        local_premium: c.local_premium,
                    },
                    free: (0..c.procs).collect(),
                    remote: c.is_slurm(),
                    available: !c.is_slurm(),
                    unavailable_reason: c.is_slurm().then(|| "not read from Slurm yet".to_string()),
                    snapshot: None,
                }
            })
            .collect();
        World {
            clusters,
            jobs: BTreeMap::new(),
            reservations: BTreeMap::new(),
            users: BTreeMap::new(),
            tokens: HashMap::new(),
            queue: BTreeSet::new(),
            arrivals: Vec::new(),
            names: HashMap::new(),
            next_reservation: 1,
            requeue: BTreeSet::new(),
            stopping: BTreeSet::new(),
            deferred: Vec::new(),
            dirty_jobs: BTreeSet::new(),
            dirty_reservations: BTreeSet::new(),
            dirty_users: BTreeSet::new(),
            effects: Vec::new(),
            planner: PlannerConfig {
                horizon: Dur(cfg.horizon_seconds),
                lead_time: Dur(cfg.lead_time_seconds),
                plan_depth: cfg.plan_depth,
            },
            grace: cfg.grace_seconds,
            output_dir: cfg.data_dir.join("output"),
            stats: Stats::default(),
            reserving: BTreeMap::new(),
            submitting: BTreeSet::new(),
            submitted_at: HashMap::new(),
            confirmed_at: HashMap::new(),
            sent: BTreeSet::new(),
            backoff: HashMap::new(),
        }
    }

    // ---------------------------------------------------------------- users and names

    /// Adds a user (from the store or the API).
    pub fn add_user(&mut self, u: UserRecord) {
        self.tokens.insert(u.token_hash.clone(), u.name.clone());
        self.users.insert(u.name.clone(), u);
    }

    /// The user a token hash belongs to.
    pub fn user_by_token(&self, hash: &str) -> Option<&UserRecord> {
        self.users.get(self.tokens.get(hash)?)
    }

    fn intern(&mut self, kind: u8, name: &str) -> u32 {
        let next = self.names.len() as u32 + 1;
        *self.names.entry((kind, name.to_string())).or_insert(next)
    }

    fn cred(&mut self, user: &str, cred: &[Option<String>; 4]) -> Credentials {
        let mut ids = [0u32; 4];
        for (k, c) in cred.iter().enumerate() {
            if let Some(name) = c {
                ids[k] = self.intern(k as u8 + 1, name);
            }
        }
        Credentials {
            user: UserId(self.intern(0, user)),
            group: GroupId(ids[0]),
            account: AccountId(ids[1]),
            class: ClassId(ids[2]),
            qos: QosId(ids[3]),
        }
    }

    fn acl(&mut self, spec: &AclSpec) -> Acl {
        let mut acl = Acl::nobody();
        for u in &spec.users {
            acl.users.insert(UserId(self.intern(0, u)));
        }
        for g in &spec.groups {
            acl.groups.insert(GroupId(self.intern(1, g)));
        }
        for a in &spec.accounts {
            acl.accounts.insert(AccountId(self.intern(2, a)));
        }
        for c in &spec.classes {
            acl.classes.insert(ClassId(self.intern(3, c)));
        }
        for q in &spec.qos {
            acl.qos.insert(QosId(self.intern(4, q)));
        }
        acl.job = spec.job.map(JobId);
        acl
    }

    /// Does the reservation's ACL admit this user (by name) or one of this job's credentials?
    pub fn acl_admits(spec: &AclSpec, user: &str, job: Option<&JobRecord>) -> bool {
        if spec.users.iter().any(|u| u == user) {
            return true;
        }
        let Some(j) = job else { return false };
        spec.job == Some(j.id)
            || [
                (&spec.groups, &j.cred[0]),
                (&spec.accounts, &j.cred[1]),
                (&spec.classes, &j.cred[2]),
                (&spec.qos, &j.cred[3]),
            ]
            .iter()
            .any(|(list, c)| c.as_ref().is_some_and(|c| list.contains(c)))
    }

    // ---------------------------------------------------------------- sizes

    /// Index of a cluster by name.
    pub fn cluster_index(&self, name: &str) -> Option<usize> {
        self.clusters.iter().position(|c| c.cfg.name == name)
    }

    /// 400 for a cluster name that is not one of ours, listing ours.
    pub fn unknown_cluster(&self, name: &str) -> ApiError {
        ApiError::bad(
            "cluster",
            format!(
                "unknown cluster {name:?} (known: {})",
                self.clusters
                    .iter()
                    .map(|c| c.cfg.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    }

    /// All processors of the grid.
    pub fn total_procs(&self) -> u32 {
        self.clusters
            .iter()
            .map(|c| c.admission_limit())
            .fold(0u32, u32::saturating_add)
    }

    /// The price a global job without a price pays at most: the dearest base tariff, so it
    /// takes free time anywhere but never displaces a queued local job.
    pub fn default_price(&self) -> f64 {
        self.clusters
            .iter()
            .map(|c| c.tariff.base)
            .fold(0.0, f64::max)
    }

    // ---------------------------------------------------------------- jobs

    /// Checks a new job against the grid, the reservations and the user's budget.
    pub fn admit(&self, j: &JobRecord) -> Result<(), ApiError> {
        if j.procs == 0 {
            return Err(ApiError::bad("procs", "must be at least 1"));
        }
        if j.walltime <= 0 {
            return Err(ApiError::bad(
                "walltime",
                format!("must be positive, got {} s", j.walltime),
            ));
        }
        if j.command.is_empty() || j.command[0].is_empty() {
            return Err(ApiError::bad("command", "must name a program to run"));
        }
        if let Some(p) = j.price {
            if p.is_nan() || p < 0.0 {
                return Err(ApiError::bad("price", "must be a number >= 0"));
            }
        }
        if let Some(cwd) = &j.cwd {
            if !cwd.starts_with('/') {
                return Err(ApiError::bad(
                    "cwd",
                    format!("must be absolute, got {cwd:?}"),
                ));
            }
        }
        if let Some(r) = j.reservation {
            let res = self
                .reservations
                .get(&r)
                .filter(|r| r.state.is_live())
                .ok_or_else(|| ApiError::bad("reservation", format!("no live reservation {r}")))?;
            if !World::acl_admits(&res.acl, &j.user, Some(j)) {
                return Err(ApiError::forbidden(
                    "reservation",
                    format!("reservation {r}'s ACL does not admit user {:?}", j.user),
                ));
            }
            if j.procs > res.procs {
                return Err(ApiError::bad(
                    "procs",
                    format!(
                        "{} processors asked; reservation {r} holds {}",
                        j.procs, res.procs
                    ),
                ));
            }
            if let Some(c) = &j.cluster {
                if *c != res.cluster {
                    return Err(ApiError::bad(
                        "cluster",
                        format!("reservation {r} is on cluster {:?}, not {c:?}", res.cluster),
                    ));
                }
            }
            return Ok(());
        }
        match &j.cluster {
            Some(c) => {
                let k = self
                    .cluster_index(c)
                    .ok_or_else(|| self.unknown_cluster(c))?;
                let max = self.clusters[k].admission_limit();
                if j.procs > max {
                    return Err(ApiError::bad(
                        "procs",
                        format!(
                            "{} processors asked; cluster {c} has {max}, the most possible",
                            j.procs
                        ),
                    ));
                }
            }
            None => {
                let max = if j.co_allocate {
                    self.total_procs()
                } else {
                    self.clusters
                        .iter()
                        .map(|c| c.admission_limit())
                        .max()
                        .unwrap_or(0)
                };
                if j.procs > max {
                    return Err(ApiError::bad(
                        "procs",
                        format!(
                            "{} processors asked; the largest possible is {max}{}",
                            j.procs,
                            if j.co_allocate {
                                " (the whole grid)"
                            } else {
                                " (the largest cluster; co-allocation is off)"
                            }
                        ),
                    ));
                }
                let price = j.price.unwrap_or_else(|| self.default_price());
                let worst = price * f64::from(j.procs) * j.walltime as f64;
                if let Some(b) = self.users.get(&j.user).and_then(|u| u.budget) {
                    if worst > b {
                        return Err(ApiError::budget(format!(
                            "worst-case cost {worst:.2} ({} procs × {} s × {price} per \
                             processor-second) exceeds the remaining budget {b:.2} of {}",
                            j.procs, j.walltime, j.user
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// Takes in jobs the store has made durable.
    pub fn accept(&mut self, now: i64, jobs: Vec<JobRecord>) {
        for j in jobs {
            let id = j.id;
            let held = j.held;
            let global = j.cluster.is_none() && j.reservation.is_none();
            self.jobs.insert(id, j);
            if held {
                continue;
            }
            if global {
                self.arrivals.push(id);
            } else {
                self.submit_local(now, id);
            }
        }
    }

    /// Queues a local (or reservation-bound) job at its cluster's local policy.
    fn submit_local(&mut self, now: i64, id: u64) {
        let Some(j) = self.jobs.get(&id) else { return };
        let cluster = match j.reservation {
            Some(r) => self.reservations.get(&r).map(|r| r.cluster.clone()),
            None => j.cluster.clone(),
        };
        let Some(k) = cluster.as_deref().and_then(|c| self.cluster_index(c)) else {
            self.fail(
                now,
                id,
                "its cluster or reservation no longer exists".into(),
            );
            return;
        };
        let (user, credn, procs, walltime, reservation, early, submitted) = (
            j.user.clone(),
            j.cred.clone(),
            j.procs,
            j.walltime,
            j.reservation,
            j.allow_early_start,
            j.submitted_at,
        );
        if self.clusters[k].remote {
            // The cluster's own scheduler queues it; Foresight follows it from snapshots.
            let name = self.clusters[k].cfg.name.clone();
            if let Some(j) = self.jobs.get_mut(&id) {
                j.parts = vec![PartRecord {
                    cluster: name.clone(),
                    procs,
                    ..PartRecord::default()
                }];
                j.reason = Some(format!("submitted to {name}"));
                self.dirty_jobs.insert(id);
            }
            self.submit_remote_parts(id);
            return;
        }
        let cred = self.cred(&user, &credn);
        let mut job = Job::new(JobId(id), Time(submitted), procs, Dur(walltime)).with_cred(cred);
        if let Some(r) = reservation {
            job = job.in_reservation(ReservationId(r), early);
        }
        let mut actions = Vec::new();
        match self.clusters[k]
            .sched
            .handle(now_time(now), Event::Submit(job), &mut actions)
        {
            Ok(()) => {
                if let Some(j) = self.jobs.get_mut(&id) {
                    j.parts = vec![PartRecord {
                        cluster: self.clusters[k].cfg.name.clone(),
                        procs,
                        reservation,
                        ..PartRecord::default()
                    }];
                }
                self.apply(now, k, actions);
            }
            Err(e) => self.fail(now, id, format!("refused by cluster: {e}")),
        }
    }

    fn fail(&mut self, now: i64, id: u64, reason: String) {
        if let Some(j) = self.jobs.get_mut(&id) {
            j.state = JobState::Failed;
            j.reason = Some(reason);
            j.ended_at = Some(now);
            self.dirty_jobs.insert(id);
        }
        self.queue.remove(&id);
    }

    /// Carries out a local scheduler's decisions on cluster `k`.
    fn apply(&mut self, now: i64, k: usize, actions: Vec<Action>) {
        if self.clusters[k].remote {
            // A mirror of a cluster that schedules itself: its starts are forecasts only.
            return;
        }
        for a in actions {
            if let Action::Start { job, procs, .. } = a {
                self.start_part(now, k, job.0, procs);
            }
        }
    }

    /// Starts a part on processors that are really free, or defers it (in order) until
    /// jobs that overran their walltime have let go of enough of them.
    fn start_part(&mut self, now: i64, k: usize, id: u64, procs: u32) {
        let behind = self.deferred.iter().any(|d| d.0 == k);
        if behind || (self.clusters[k].free.len() as u32) < procs {
            self.deferred.push((k, id, procs));
            if let Some(j) = self.jobs.get_mut(&id) {
                j.reason = Some(
                    "starting: waiting for processors held by a job stopped at its walltime".into(),
                );
                self.dirty_jobs.insert(id);
            }
            return;
        }
        self.launch_part(now, k, id, procs);
    }

    /// Launches the deferred parts of cluster `k` that now fit, in order.
    fn start_deferred(&mut self, now: i64, k: usize) {
        while let Some(i) = self.deferred.iter().position(|d| d.0 == k) {
            let (_, id, procs) = self.deferred[i];
            if (self.clusters[k].free.len() as u32) < procs {
                break;
            }
            self.deferred.remove(i);
            self.launch_part(now, k, id, procs);
        }
    }

    fn launch_part(&mut self, now: i64, k: usize, id: u64, procs: u32) {
        let taken = self.choose_processors(now, k, id, procs);
        let cluster = &mut self.clusters[k];
        for p in &taken {
            cluster.free.remove(p);
        }
        let name = cluster.cfg.name.clone();
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        let Some(index) = j.parts.iter().position(|p| p.cluster == name) else {
            return;
        };
        j.parts[index].processors = taken.clone();
        if j.started_at.is_none() {
            j.started_at = Some(now);
            if let Some(p) = j.first_planned_start {
                self.stats.estimate_error_sum += (now - p).abs() as f64;
                self.stats.estimate_error_count += 1;
            }
        }
        j.state = JobState::Running;
        j.reason = None;
        let Some(spec) = self.part_spec(id, index, taken) else {
            return;
        };
        if index == 0 {
            if let Some(j) = self.jobs.get_mut(&id) {
                j.stdout = Some(spec.stdout.display().to_string());
                j.stderr = Some(spec.stderr.display().to_string());
            }
        }
        self.dirty_jobs.insert(id);
        self.effects.push(Effect::Launch { cluster: k, spec });
    }

    /// What part `index` of job `id` runs, on `processors`: its command, environment and
    /// working directory, output files `ID.out|err` (`ID.INDEX.out|err` for a job of several
    /// parts), and its limit — for a global job its reservation (its walltime at the speed
    /// of the processors the planner chose), else its walltime.
    pub(super) fn part_spec(
        &self,
        id: u64,
        index: usize,
        processors: Vec<u32>,
    ) -> Option<LaunchSpec> {
        let j = self.jobs.get(&id)?;
        let part = j.parts.get(index)?;
        let out = |ext: &str| {
            if j.parts.len() == 1 {
                format!("{id}.{ext}")
            } else {
                format!("{id}.{index}.{ext}")
            }
        };
        Some(LaunchSpec {
            job: id,
            attempt: j.attempt,
            cluster: part.cluster.clone(),
            processors,
            command: j.command.clone(),
            env: j.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            cwd: j
                .cwd
                .clone()
                .map_or_else(|| self.output_dir.clone(), PathBuf::from),
            stdout: self.output_dir.join(out("out")),
            stderr: self.output_dir.join(out("err")),
            walltime_secs: part
                .reservation
                .and_then(|r| self.reservations.get(&r))
                .filter(|r| r.kind == "job")
                .map_or(j.walltime, |r| r.end - r.start)
                .max(1) as u64,
            grace_secs: self.grace,
        })
    }

    /// Which free processors a part gets: those its reservation names first; then those no
    /// other reservation names during its run; then the lowest ids. The scheduler's counts
    /// guarantee enough free processors; this keeps named ones for their reservations.
    fn choose_processors(&self, now: i64, k: usize, id: u64, procs: u32) -> Vec<u32> {
        let c = &self.clusters[k];
        let Some(j) = self.jobs.get(&id) else {
            return c.free.iter().take(procs as usize).copied().collect();
        };
        let own = j
            .parts
            .iter()
            .find(|p| p.cluster == c.cfg.name)
            .and_then(|p| p.reservation);
        let until = now + j.walltime + self.grace as i64;
        let mut mine = BTreeSet::new();
        let mut others = BTreeSet::new();
        for r in self.reservations.values() {
            if !r.state.is_live() || r.cluster != c.cfg.name || r.processors.is_empty() {
                continue;
            }
            if Some(r.id) == own {
                mine.extend(r.processors.iter().copied());
            } else if r.start < until && now < r.end {
                others.extend(r.processors.iter().copied());
            }
        }
        let mut free: Vec<u32> = c.free.iter().copied().collect();
        free.sort_by_key(|p| (!mine.contains(p), others.contains(p), *p));
        free.truncate(procs as usize);
        free
    }

    /// A part's process ended (or could not start).
    pub fn on_finished(&mut self, now: i64, k: usize, id: u64, attempt: u32, outcome: &Outcome) {
        let name = self.clusters[k].cfg.name.clone();
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        if j.attempt != attempt || j.state != JobState::Running {
            return; // a stale report of an earlier attempt
        }
        let Some(index) = j.parts.iter().position(|p| p.cluster == name && !p.ended) else {
            return;
        };
        j.parts[index].ended = true;
        let part = j.parts[index].clone();
        for p in &part.processors {
            self.clusters[k].free.insert(*p);
        }
        self.start_deferred(now, k);
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        let failed = outcome.error.is_some()
            || outcome.timed_out
            || outcome.cancelled
            || outcome.signal.is_some()
            || outcome.exit_code != Some(0);
        // The first bad outcome names the job's fate; good ones fill in until then.
        let first_bad = failed && j.exit_code.is_none_or(|c| c == 0) && j.signal.is_none();
        if first_bad || j.exit_code.is_none() && j.signal.is_none() {
            j.exit_code = outcome.exit_code;
            j.signal = outcome.signal;
            if outcome.timed_out {
                j.state_after = Some(JobState::Timeout);
            } else if outcome.cancelled {
                j.state_after = Some(JobState::Cancelled);
            } else if failed {
                j.state_after = Some(JobState::Failed);
            }
            if let Some(e) = &outcome.error {
                j.reason = Some(e.clone());
            }
        }
        let all_ended = j.parts.iter().all(|p| p.ended);
        let siblings: Vec<(String, u32)> = j
            .parts
            .iter()
            .filter(|p| !p.ended)
            .map(|p| (p.cluster.clone(), attempt))
            .collect();
        let mut actions = Vec::new();
        let _ =
            self.clusters[k]
                .sched
                .handle(now_time(now), Event::Finish(JobId(id)), &mut actions);
        if let Some(r) = part
            .reservation
            .filter(|_| self.is_job_reservation(part.reservation))
        {
            self.end_reservation(now, r, ReservationState::Finished);
        }
        self.apply(now, k, actions);
        if failed && !siblings.is_empty() && self.stopping.insert(id) {
            self.kill_unended_parts(id);
        }
        if all_ended {
            self.stopping.remove(&id);
            self.job_ended(now, id, outcome);
        }
        self.dirty_jobs.insert(id);
    }

    /// A part that was running when the service stopped and is gone without a trace: the
    /// job runs again as a new attempt.
    pub fn mark_lost(&mut self, now: i64, k: usize, id: u64, attempt: u32) {
        self.requeue.insert(id);
        let outcome = Outcome::failed(now, now, "lost while the service was down".into());
        self.on_finished(now, k, id, attempt, &outcome);
    }

    fn is_job_reservation(&self, r: Option<u64>) -> bool {
        r.and_then(|r| self.reservations.get(&r))
            .is_some_and(|r| r.kind == "job")
    }

    fn job_ended(&mut self, now: i64, id: u64, last: &Outcome) {
        let requeue = self.requeue.remove(&id);
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        let used = (now - j.started_at.unwrap_or(now)).max(0);
        // Charge what was used of what was reserved; give back the rest.
        if j.charged > 0.0 && j.walltime > 0 {
            let share = (used as f64 / j.walltime as f64).min(1.0);
            let refund = j.charged * (1.0 - share);
            j.charged -= refund;
            let user = j.user.clone();
            self.refund(&user, refund);
        }
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        if requeue {
            j.attempt += 1;
            j.state = JobState::Pending;
            j.started_at = None;
            j.exit_code = None;
            j.signal = None;
            j.state_after = None;
            j.reason = Some(format!("requeued (attempt {})", j.attempt));
            j.parts.clear();
            let global = j.cluster.is_none() && j.reservation.is_none();
            if global {
                self.arrivals.push(id);
            } else {
                self.submit_local(now, id);
            }
            return;
        }
        j.ended_at = Some(now);
        j.state = j
            .state_after
            .take()
            .unwrap_or(if last.exit_code == Some(0) {
                JobState::Completed
            } else {
                JobState::Failed
            });
        if j.state == JobState::Failed && j.reason.is_none() {
            j.reason = Some(match (j.exit_code, j.signal) {
                (Some(c), _) => format!("exited with code {c}"),
                (None, Some(s)) => format!("killed by signal {s}"),
                _ => "failed".into(),
            });
        }
    }

    /// Cancels a job in any state but a final one.
    pub fn cancel(&mut self, now: i64, id: u64) -> Result<(), ApiError> {
        let j = self
            .jobs
            .get(&id)
            .ok_or_else(|| not_found_at("id", format!("no job {id}")))?;
        if j.state.is_final() {
            return Err(ApiError::conflict(format!(
                "job {id} is already {}",
                j.state
            )));
        }
        if j.state == JobState::Running {
            self.requeue.remove(&id);
            if let Some(j) = self.jobs.get_mut(&id) {
                j.state_after = Some(JobState::Cancelled);
            }
            self.kill_unended_parts(id);
            return Ok(());
        }
        self.unqueue(now, id);
        if let Some(j) = self.jobs.get_mut(&id) {
            j.state = JobState::Cancelled;
            j.held = false;
            j.ended_at = Some(now);
            j.reason = Some("cancelled".into());
        }
        self.dirty_jobs.insert(id);
        Ok(())
    }

    /// Takes a not-yet-running job out of every queue and gives back its reservations and
    /// its charge.
    fn unqueue(&mut self, now: i64, id: u64) {
        self.abort_reserving(now, id);
        self.queue.remove(&id);
        self.arrivals.retain(|&a| a != id);
        self.deferred.retain(|d| d.1 != id);
        // Parts already handed to a cluster that schedules itself are cancelled there, and
        // the job's next run is a new attempt, so the old one can never be taken for it.
        let handed = self.jobs.get(&id).is_some_and(|j| {
            j.parts.iter().any(|p| p.external.is_some())
                || self
                    .submitting
                    .iter()
                    .any(|s| s.0 == id && s.1 == j.attempt)
        });
        if handed {
            self.kill_unended_parts(id);
            if let Some(j) = self.jobs.get_mut(&id) {
                j.attempt += 1;
            }
        }
        let Some(j) = self.jobs.get(&id) else { return };
        let parts = j.parts.clone();
        for p in &parts {
            if let Some(k) = self.cluster_index(&p.cluster) {
                let _ = self.clusters[k].sched.cancel(now_time(now), JobId(id));
            }
            if self.is_job_reservation(p.reservation) {
                if let Some(r) = p.reservation {
                    self.end_reservation(now, r, ReservationState::Released);
                }
            }
        }
        if let Some(j) = self.jobs.get_mut(&id) {
            let refund = std::mem::take(&mut j.charged);
            j.parts.clear();
            let user = j.user.clone();
            self.refund(&user, refund);
        }
    }

    /// Gives back part of a charge.
    fn refund(&mut self, user: &str, amount: f64) {
        if amount <= 0.0 {
            return;
        }
        if let Some(u) = self.users.get_mut(user) {
            u.spent -= amount;
            if let Some(b) = u.budget.as_mut() {
                *b += amount;
            }
            self.dirty_users.insert(u.name.clone());
        }
    }

    /// Stops every part of a running job whose process has not ended yet.
    fn kill_unended_parts(&mut self, id: u64) {
        let Some(j) = self.jobs.get(&id) else { return };
        let attempt = j.attempt;
        let parts: Vec<(usize, Option<String>)> = j
            .parts
            .iter()
            .filter(|p| !p.ended)
            .filter_map(|p| Some((self.cluster_index(&p.cluster)?, p.external.clone())))
            .collect();
        for (cluster, external) in parts {
            if !self.clusters[cluster].remote {
                self.effects.push(Effect::Kill {
                    cluster,
                    job: id,
                    attempt,
                });
            } else if external.is_some() {
                self.effects.push(Effect::Cancel {
                    cluster,
                    part: PartHandle {
                        job: id,
                        attempt,
                        external,
                    },
                });
            }
            // A remote part still being submitted is cancelled when its id comes back.
        }
    }

    /// Holds a job that has not started: it is not planned until released.
    pub fn hold(&mut self, now: i64, id: u64) -> Result<(), ApiError> {
        let j = self
            .jobs
            .get(&id)
            .ok_or_else(|| not_found_at("id", format!("no job {id}")))?;
        if !matches!(
            j.state,
            JobState::Pending | JobState::Planned | JobState::Reserved
        ) {
            return Err(ApiError::conflict(format!(
                "job {id} is {}: only jobs that have not started can be held",
                j.state
            )));
        }
        self.unqueue(now, id);
        if let Some(j) = self.jobs.get_mut(&id) {
            j.held = true;
            j.state = JobState::Pending;
            j.planned_start = None;
            j.reason = Some("held".into());
        }
        self.dirty_jobs.insert(id);
        Ok(())
    }

    /// Lets a held job be planned again.
    pub fn release(&mut self, now: i64, id: u64) -> Result<(), ApiError> {
        let j = self
            .jobs
            .get_mut(&id)
            .ok_or_else(|| not_found_at("id", format!("no job {id}")))?;
        if !j.held {
            return Err(ApiError::conflict(format!("job {id} is not held")));
        }
        j.held = false;
        j.reason = None;
        let global = j.cluster.is_none() && j.reservation.is_none();
        self.dirty_jobs.insert(id);
        if global {
            self.arrivals.push(id);
        } else {
            self.submit_local(now, id);
        }
        Ok(())
    }

    /// Stops (SIGSTOP) or continues (SIGCONT) a running job.
    pub fn pause(&mut self, id: u64, stop: bool) -> Result<(), ApiError> {
        let j = self
            .jobs
            .get_mut(&id)
            .ok_or_else(|| not_found_at("id", format!("no job {id}")))?;
        if j.state != JobState::Running {
            return Err(ApiError::conflict(format!(
                "job {id} is {}: only running jobs can be {}",
                j.state,
                if stop { "suspended" } else { "resumed" }
            )));
        }
        j.suspended = stop;
        let attempt = j.attempt;
        let parts: Vec<(String, Option<String>)> = j
            .parts
            .iter()
            .filter(|p| !p.ended)
            .map(|p| (p.cluster.clone(), p.external.clone()))
            .collect();
        self.dirty_jobs.insert(id);
        for (c, external) in parts {
            let Some(k) = self.cluster_index(&c) else {
                continue;
            };
            self.effects.push(if self.clusters[k].remote {
                Effect::Control {
                    cluster: k,
                    part: PartHandle {
                        job: id,
                        attempt,
                        external,
                    },
                    stop,
                }
            } else {
                Effect::Pause {
                    cluster: k,
                    job: id,
                    attempt,
                    stop,
                }
            });
        }
        Ok(())
    }

    /// Puts a job back in the queue: a running one is stopped first and runs again as a new
    /// attempt.
    pub fn requeue(&mut self, now: i64, id: u64) -> Result<(), ApiError> {
        let j = self
            .jobs
            .get(&id)
            .ok_or_else(|| not_found_at("id", format!("no job {id}")))?;
        match j.state {
            JobState::Running => {
                self.requeue.insert(id);
                self.kill_unended_parts(id);
                Ok(())
            }
            JobState::Reserved | JobState::Planned => {
                self.unqueue(now, id);
                if let Some(j) = self.jobs.get_mut(&id) {
                    j.state = JobState::Pending;
                    j.planned_start = None;
                }
                self.dirty_jobs.insert(id);
                self.arrivals.push(id);
                Ok(())
            }
            s => Err(ApiError::conflict(format!(
                "job {id} is {s}: only running, planned or reserved jobs can be requeued"
            ))),
        }
    }

    // ---------------------------------------------------------------- reservations

    /// Makes an administrative reservation; refuses overlaps, naming what is in the way.
    #[allow(clippy::too_many_arguments)]
    pub fn create_reservation(
        &mut self,
        now: i64,
        owner: &str,
        cluster: &str,
        held: Held,
        start: i64,
        end: i64,
        acl: AclSpec,
        ttl: Option<i64>,
    ) -> Result<u64, ApiError> {
        let (procs, processors) = match held {
            Held::Count(n) => (n, Vec::new()),
            Held::These(mut list) => {
                list.sort_unstable();
                list.dedup();
                (list.len() as u32, list)
            }
        };
        let k = self
            .cluster_index(cluster)
            .ok_or_else(|| self.unknown_cluster(cluster))?;
        if self.clusters[k].remote {
            return Err(ApiError::bad(
                "cluster",
                format!(
                    "cluster {cluster} is run by Slurm: make administrative reservations there \
                     (scontrol create reservation); Foresight reads them and plans around them"
                ),
            ));
        }
        let max = self.clusters[k].cfg.procs;
        if procs == 0 || procs > max {
            return Err(ApiError::bad(
                "procs",
                format!("must be 1..={max} (cluster {cluster} has {max})"),
            ));
        }
        if end <= start {
            return Err(ApiError::bad("end", "must be after start"));
        }
        if end <= now {
            return Err(ApiError::bad("end", "is in the past"));
        }
        if let Some(t) = ttl {
            if t <= 0 {
                return Err(ApiError::bad("ttl", "must be positive"));
            }
        }
        if let Some(&p) = processors.iter().find(|&&p| p >= max) {
            return Err(ApiError::bad(
                "processors",
                format!("processor {p} does not exist (cluster {cluster} has 0..{max})"),
            ));
        }
        self.check_processors_free(k, &processors, start, end, &acl)?;
        let id = self.next_reservation;
        let res = AdminReservation {
            id: ReservationId(id),
            procs,
            window: Interval::new(Time(start), Time(end)),
            acl: self.acl(&acl),
        };
        if let Err(e) = self.clusters[k].sched.add_reservation_displacing(res) {
            let others: Vec<String> = self
                .reservations
                .values()
                .filter(|r| {
                    r.state.is_live() && r.cluster == cluster && r.start < end && start < r.end
                })
                .map(|r| {
                    format!(
                        "reservation {} ({} processors, [{}, {}))",
                        r.id, r.procs, r.start, r.end
                    )
                })
                .collect();
            let running = self.clusters[k].sched.running();
            let mut conflict = ApiError::conflict(format!(
                "{procs} processors of {cluster} are not free during [{start}, {end}): {e}; \
                 in the way: {}",
                if others.is_empty() {
                    format!("{running} running jobs")
                } else {
                    others.join(", ")
                }
            ));
            // The window is what to move.
            conflict.body.field = Some("start".into());
            return Err(conflict);
        }
        self.next_reservation += 1;
        let rec = ReservationRecord {
            id,
            kind: "admin".into(),
            cluster: cluster.into(),
            procs,
            processors,
            start,
            end,
            acl,
            state: if ttl.is_some() {
                ReservationState::Tentative
            } else {
                ReservationState::Committed
            },
            expires_at: ttl.map(|t| now + t),
            owner: owner.into(),
        };
        self.reservations.insert(id, rec);
        self.dirty_reservations.insert(id);
        self.tick_cluster(now, k);
        Ok(id)
    }

    /// Refuses a reservation of these processors over `[start, end)` when another live
    /// reservation names one of them in an overlapping window (unless both admit only the
    /// same job), or a running job holds one past `start`.
    fn check_processors_free(
        &self,
        k: usize,
        processors: &[u32],
        start: i64,
        end: i64,
        acl: &AclSpec,
    ) -> Result<(), ApiError> {
        if processors.is_empty() {
            return Ok(());
        }
        let name = &self.clusters[k].cfg.name;
        let mine: BTreeSet<u32> = processors.iter().copied().collect();
        for r in self.reservations.values() {
            if !r.state.is_live() || r.cluster != *name || r.end <= start || end <= r.start {
                continue;
            }
            let same_job = acl.job.is_some() && acl.job == r.acl.job;
            if let Some(p) = r.processors.iter().find(|p| mine.contains(p)) {
                if !same_job {
                    let mut e = ApiError::conflict(format!(
                        "processor {p} of {name} is held by reservation {} from {} to {}",
                        r.id,
                        crate::moment::utc(r.start),
                        crate::moment::utc(r.end)
                    ));
                    e.body.field = Some("processors".into());
                    return Err(e);
                }
            }
        }
        for j in self.jobs.values().filter(|j| j.state == JobState::Running) {
            for part in j.parts.iter().filter(|p| p.cluster == *name && !p.ended) {
                let until = j.started_at.unwrap_or(start) + j.walltime + self.grace as i64;
                if until <= start {
                    continue;
                }
                if let Some(p) = part.processors.iter().find(|p| mine.contains(p)) {
                    let mut e = ApiError::conflict(format!(
                        "processor {p} of {name} runs job {} until up to {}, past the start {}",
                        j.id,
                        crate::moment::utc(until),
                        crate::moment::utc(start)
                    ));
                    e.body.field = Some("processors".into());
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Commits a tentative reservation.
    pub fn commit_reservation(&mut self, id: u64) -> Result<(), ApiError> {
        let r = self
            .reservations
            .get_mut(&id)
            .ok_or_else(|| not_found_at("id", format!("no reservation {id}")))?;
        if r.state != ReservationState::Tentative {
            return Err(ApiError::conflict(format!(
                "reservation {id} is {}, not tentative",
                r.state.as_str()
            )));
        }
        r.state = ReservationState::Committed;
        r.expires_at = None;
        self.dirty_reservations.insert(id);
        Ok(())
    }

    /// Releases a live reservation.
    pub fn release_reservation(&mut self, now: i64, id: u64) -> Result<(), ApiError> {
        let r = self
            .reservations
            .get(&id)
            .ok_or_else(|| not_found_at("id", format!("no reservation {id}")))?;
        if !r.state.is_live() {
            return Err(ApiError::conflict(format!(
                "reservation {id} is already {}",
                r.state.as_str()
            )));
        }
        self.end_reservation(now, id, ReservationState::Released);
        Ok(())
    }

    fn end_reservation(&mut self, now: i64, id: u64, state: ReservationState) {
        let Some(r) = self.reservations.get_mut(&id) else {
            return;
        };
        if !r.state.is_live() {
            return;
        }
        r.state = state;
        r.expires_at = None;
        let cluster = r.cluster.clone();
        // At its end a remote cluster ends it itself; releasing it there would cancel a part
        // still finishing inside it (one that started a second or two late).
        let ends_by_itself = state == ReservationState::Finished && r.end <= now;
        self.dirty_reservations.insert(id);
        self.confirmed_at.remove(&id);
        if let Some(k) = self.cluster_index(&cluster) {
            if self.clusters[k].remote && !ends_by_itself {
                self.effects.push(Effect::Release {
                    cluster: k,
                    reservation: id,
                });
            }
            let _ = self.clusters[k]
                .sched
                .remove_reservation(now_time(now), ReservationId(id));
            self.tick_cluster(now, k);
        }
    }

    fn tick_cluster(&mut self, now: i64, k: usize) {
        let mut actions = Vec::new();
        let _ = self.clusters[k]
            .sched
            .handle(now_time(now), Event::Tick, &mut actions);
        self.apply(now, k, actions);
    }

    // ---------------------------------------------------------------- the cycle

    /// The next moment something is due without outside events: a reservation boundary or
    /// expiry.
    pub fn next_due(&self, now: i64) -> Option<i64> {
        let t = Time(now);
        let bounds = self
            .clusters
            .iter()
            .filter_map(|c| c.sched.next_boundary(t))
            .map(|t| t.secs());
        let expiries = self.reservations.values().filter_map(|r| match r.state {
            ReservationState::Tentative => r.expires_at,
            ReservationState::Committed => Some(r.start),
            ReservationState::Active => Some(r.end),
            _ => None,
        });
        bounds.chain(expiries).filter(|&x| x > now).min()
    }

    /// How many queued global jobs one cycle plans.
    pub fn plan_depth(&self) -> usize {
        self.planner.plan_depth
    }

    /// Global jobs queued or arrived.
    pub fn has_global_work(&self) -> bool {
        !self.queue.is_empty() || !self.arrivals.is_empty()
    }

    /// One scheduling cycle at `now` (seed 000 §5.4): reservation life cycle, arrivals into
    /// the queue, local ticks, then the planner over every queued global job.
    pub fn cycle(&mut self, now: i64) {
        self.stats.cycles += 1;
        let live: Vec<(u64, ReservationState, Option<i64>, i64, i64)> = self
            .reservations
            .values()
            .filter(|r| r.state.is_live())
            .map(|r| (r.id, r.state, r.expires_at, r.start, r.end))
            .collect();
        for (id, state, expires, start, end) in live {
            if state == ReservationState::Tentative && expires.is_some_and(|e| e <= now) {
                self.end_reservation(now, id, ReservationState::Expired);
            } else if end <= now {
                self.end_reservation(now, id, ReservationState::Finished);
            } else if state == ReservationState::Committed && start <= now {
                if let Some(r) = self.reservations.get_mut(&id) {
                    r.state = ReservationState::Active;
                    self.dirty_reservations.insert(id);
                }
            }
        }
        for id in std::mem::take(&mut self.arrivals) {
            if self.jobs.get(&id).is_some_and(|j| !j.state.is_final()) {
                self.queue.insert(id);
            }
        }
        for k in 0..self.clusters.len() {
            self.tick_cluster(now, k);
        }
        self.plan(now);
    }

    fn global_job(&self, j: &JobRecord, user: u32) -> GlobalJob {
        GlobalJob {
            id: JobId(j.id),
            user: UserId(user),
            submit: Time(j.submitted_at),
            procs: j.procs,
            walltime: Dur(j.walltime),
            max_price: j.price.unwrap_or_else(|| self.default_price()),
            input_mb: 0.0,
            home: None,
            co_allocate: j.co_allocate,
            criterion: Criterion::EarliestStart,
        }
    }

    fn plan(&mut self, now: i64) {
        let ids: Vec<u64> = self
            .queue
            .iter()
            .copied()
            .filter(|id| self.jobs.get(id).is_some_and(|j| !j.held))
            .filter(|id| self.backoff.get(id).is_none_or(|b| b.0 <= now))
            // Jobs beyond the planning depth wait for a later cycle: the cycle costs
            // O(plan_depth), not O(queue).
            .take(self.planner.plan_depth)
            .collect();
        if ids.is_empty() {
            return;
        }
        let jobs: Vec<GlobalJob> = ids
            .iter()
            .map(|id| self.global_job(&self.jobs[id], 0))
            .collect();
        let decisions = {
            let views: Vec<ClusterView<'_>> = self.views();
            plan_cycle(Time(now), &views, &jobs, &self.planner)
        };
        for d in decisions {
            match d {
                Decision::Reserve {
                    job,
                    start,
                    end,
                    cost,
                    parts,
                    ..
                } => self.reserve_global(now, job.0, start.secs(), end.secs(), cost, &parts),
                Decision::Wait { job, start } => {
                    if let Some(j) = self.jobs.get_mut(&job.0) {
                        j.planned_start = Some(start.secs());
                        j.first_planned_start.get_or_insert(start.secs());
                        j.reason = Some(format!(
                            "planned to start at {}, beyond the lead time",
                            crate::moment::utc(start.secs())
                        ));
                        if j.state != JobState::Planned {
                            j.state = JobState::Planned;
                            self.dirty_jobs.insert(job.0);
                        }
                    }
                }
                Decision::NoFit { job, reason } => {
                    if let Some(j) = self.jobs.get_mut(&job.0) {
                        j.reason = Some(reason);
                        j.planned_start = None;
                        if j.state != JobState::Pending {
                            j.state = JobState::Pending;
                            self.dirty_jobs.insert(job.0);
                        }
                    }
                }
                Decision::Refuse { job, reason } => {
                    let away: Vec<&str> = self
                        .clusters
                        .iter()
                        .filter(|c| !c.available)
                        .map(|c| c.cfg.name.as_str())
                        .collect();
                    if away.is_empty() {
                        self.fail(now, job.0, reason);
                    } else if let Some(j) = self.jobs.get_mut(&job.0) {
                        // Too large for what is reachable now, not for the grid.
                        j.reason = Some(format!(
                            "{reason} while {} unavailable; waiting for it",
                            away.join(", ")
                        ));
                        j.planned_start = None;
                    }
                }
            }
        }
    }

    /// The planner's views of the clusters.
    pub fn views(&self) -> Vec<ClusterView<'_>> {
        self.clusters
            .iter()
            .map(|c| ClusterView {
                // An unavailable cluster offers nothing.
                processors: if c.available { &c.processors } else { &[] },
                sched: &c.sched,
                tariff: &c.tariff,
                bandwidth_mb_s: c.cfg.bandwidth_mb_s,
                latency: Dur(c.cfg.latency_seconds),
            })
            .collect()
    }

    /// Two-phase reservation of a planned global job: a tentative reservation on every
    /// cluster of the plan, then all committed, or all released when one cluster refuses.
    fn reserve_global(
        &mut self,
        now: i64,
        id: u64,
        start: i64,
        end: i64,
        cost: f64,
        parts: &[foresight_core::grid::Part],
    ) {
        let Some(j) = self.jobs.get(&id) else { return };
        let user = j.user.clone();
        if let Some(b) = self.users.get(&user).and_then(|u| u.budget) {
            if cost > b {
                if let Some(j) = self.jobs.get_mut(&id) {
                    j.reason = Some(format!(
                        "budget: the planned cost {cost:.2} exceeds the remaining {b:.2}"
                    ));
                }
                return;
            }
        }
        // Phase one: tentative everywhere. A local cluster answers at once; a remote one
        // (Slurm) answers later, through `reservation_answered`.
        let mut held: Vec<(usize, u64, u32)> = Vec::new();
        let mut asked: BTreeSet<u64> = BTreeSet::new();
        let mut refusal = None;
        for p in parts {
            let rid = self.next_reservation;
            self.next_reservation += 1;
            let remote = self.clusters[p.cluster].remote;
            // Slurm reserves and limits jobs in whole minutes.
            let part_end = if remote {
                start + 60 * (end - start + 59).div_euclid(60)
            } else {
                end
            };
            let res = AdminReservation {
                id: ReservationId(rid),
                procs: p.procs,
                window: Interval::new(Time(start), Time(part_end)),
                acl: Acl {
                    job: Some(JobId(id)),
                    ..Acl::nobody()
                },
            };
            let cluster_name = self.clusters[p.cluster].cfg.name.clone();
            let rec = ReservationRecord {
                id: rid,
                kind: "job".into(),
                cluster: cluster_name.clone(),
                procs: p.procs,
                processors: vec![],
                start,
                end: part_end,
                acl: AclSpec {
                    job: Some(id),
                    ..AclSpec::default()
                },
                state: ReservationState::Tentative,
                expires_at: Some(now + 60),
                owner: user.clone(),
            };
            match self.clusters[p.cluster]
                .sched
                .add_reservation_displacing(res)
            {
                Ok(()) => {
                    self.reservations.insert(rid, rec);
                    self.dirty_reservations.insert(rid);
                    held.push((p.cluster, rid, p.procs));
                    if remote {
                        asked.insert(rid);
                        self.effects.push(Effect::Reserve {
                            cluster: p.cluster,
                            request: ReserveRequest {
                                id: rid,
                                start,
                                end: part_end,
                                procs: p.procs,
                            },
                        });
                    }
                }
                Err(e) => {
                    refusal = Some(format!(
                        "cluster {cluster_name} refused the reservation: {e}"
                    ));
                    break;
                }
            }
        }
        if let Some(reason) = refusal {
            for &(_, rid, _) in &held {
                self.end_reservation(now, rid, ReservationState::Released);
            }
            if let Some(j) = self.jobs.get_mut(&id) {
                j.reason = Some(format!("{reason}; planned again next cycle"));
            }
            return;
        }
        if asked.is_empty() {
            self.commit_global(now, id, start, end, cost, held);
            return;
        }
        // Out of the queue until every cluster has answered.
        self.queue.remove(&id);
        let names: Vec<String> = asked
            .iter()
            .filter_map(|r| self.reservations.get(r))
            .map(|r| r.cluster.clone())
            .collect();
        if let Some(j) = self.jobs.get_mut(&id) {
            j.state = JobState::Planned;
            j.planned_start = Some(start);
            j.first_planned_start.get_or_insert(start);
            j.reason = Some(format!(
                "reserving {} from {} (phase one: tentative)",
                names.join(" and "),
                crate::moment::utc(start)
            ));
            self.dirty_jobs.insert(id);
        }
        self.reserving.insert(
            id,
            remote::Reserving {
                start,
                end,
                cost,
                held,
                awaiting: asked,
                refusal: None,
            },
        );
    }

    /// Phase two: every cluster holds its tentative reservation; commit them all, charge the
    /// user, bind the job's parts.
    fn commit_global(
        &mut self,
        now: i64,
        id: u64,
        start: i64,
        end: i64,
        cost: f64,
        held: Vec<(usize, u64, u32)>,
    ) {
        let Some(user) = self.jobs.get(&id).map(|j| j.user.clone()) else {
            return;
        };
        self.backoff.remove(&id);
        for &(_, rid, _) in &held {
            if let Some(r) = self.reservations.get_mut(&rid) {
                r.state = ReservationState::Committed;
                r.expires_at = None;
            }
            self.dirty_reservations.insert(rid);
        }
        self.queue.remove(&id);
        if let Some(u) = self.users.get_mut(&user) {
            u.spent += cost;
            if let Some(b) = u.budget.as_mut() {
                *b -= cost;
            }
            self.dirty_users.insert(user.clone());
        }
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        j.state = JobState::Reserved;
        j.planned_start = Some(start);
        j.first_planned_start.get_or_insert(start);
        j.charged = cost;
        j.reason = None;
        j.parts = held
            .iter()
            .map(|&(k, rid, procs)| PartRecord {
                cluster: self.clusters[k].cfg.name.clone(),
                procs,
                reservation: Some(rid),
                ..PartRecord::default()
            })
            .collect();
        self.dirty_jobs.insert(id);
        let submitted = j.submitted_at;
        let (user_name, credn) = (j.user.clone(), j.cred.clone());
        let cred = self.cred(&user_name, &credn);
        for (k, rid, procs) in held {
            if self.clusters[k].remote {
                continue;
            }
            let job = Job::new(JobId(id), Time(submitted), procs, Dur(end - start))
                .with_cred(cred)
                .in_reservation(ReservationId(rid), false);
            let mut actions = Vec::new();
            if let Err(e) =
                self.clusters[k]
                    .sched
                    .handle(Time(now), Event::Submit(job), &mut actions)
            {
                self.fail(now, id, format!("cluster refused the reserved job: {e}"));
                return;
            }
            self.apply(now, k, actions);
        }
        self.submit_remote_parts(id);
    }

    // ---------------------------------------------------------------- restart

    /// Rebuilds the derived state (local schedulers, queue) from stored records after a
    /// start. Running jobs are put back as running; the caller then asks the executors
    /// about them. Returns the running jobs' parts to re-adopt: (cluster, job, attempt).
    pub fn restore(
        &mut self,
        now: i64,
        jobs: Vec<JobRecord>,
        reservations: Vec<ReservationRecord>,
        users: Vec<UserRecord>,
    ) -> Vec<(usize, u64, u32)> {
        for u in users {
            self.add_user(u);
        }
        for mut r in reservations {
            self.next_reservation = self.next_reservation.max(r.id + 1);
            if r.state.is_live() {
                let k = self.cluster_index(&r.cluster);
                let expired = r.end <= now
                    || r.state == ReservationState::Tentative
                        && r.expires_at.is_some_and(|e| e <= now);
                let remote = k.is_some_and(|k| self.clusters[k].remote);
                // A remote reservation is mirrored at the cluster's first snapshot; one still
                // tentative lost its phase one with the service, and is released there.
                let added = !expired
                    && k.is_some_and(|k| {
                        if remote {
                            return r.state != ReservationState::Tentative;
                        }
                        let acl = self.acl(&r.acl);
                        self.clusters[k]
                            .sched
                            .add_reservation(AdminReservation {
                                id: ReservationId(r.id),
                                procs: r.procs,
                                window: Interval::new(Time(r.start), Time(r.end)),
                                acl,
                            })
                            .is_ok()
                    });
                if !added {
                    r.state = if r.end <= now {
                        ReservationState::Finished
                    } else {
                        ReservationState::Expired
                    };
                    self.dirty_reservations.insert(r.id);
                }
            }
            self.reservations.insert(r.id, r);
        }
        let mut adopt = Vec::new();
        for j in jobs {
            self.jobs.insert(j.id, j);
        }
        // Running jobs first, so that their processors are taken before any queued job is
        // placed (a backfilled running job may have a later id than a waiting one); then
        // reserved jobs, then the queues in id order.
        let mut ids: Vec<(u8, u64)> = self
            .jobs
            .values()
            .map(|j| {
                let phase = match j.state {
                    JobState::Running => 0,
                    JobState::Reserved => 1,
                    _ => 2,
                };
                (phase, j.id)
            })
            .collect();
        ids.sort_unstable();
        for (_, id) in ids {
            let j = self.jobs[&id].clone();
            if j.state.is_final() {
                continue;
            }
            let global = j.cluster.is_none() && j.reservation.is_none();
            match j.state {
                JobState::Running => {
                    let cred = self.cred(&j.user, &j.cred);
                    for p in j.parts.iter().filter(|p| !p.ended) {
                        let Some(k) = self.cluster_index(&p.cluster) else {
                            continue;
                        };
                        if self.clusters[k].remote {
                            continue; // followed from the cluster's snapshots
                        }
                        let domain = match p.reservation {
                            Some(r)
                                if self.reservations.get(&r).is_some_and(|r| r.state.is_live()) =>
                            {
                                Domain::Reservation(ReservationId(r))
                            }
                            _ => Domain::Pool,
                        };
                        let walltime = match (p.reservation, global) {
                            (Some(r), true) => self
                                .reservations
                                .get(&r)
                                .map_or(j.walltime, |r| r.end - r.start),
                            _ => j.walltime,
                        };
                        let job = Job::new(JobId(id), Time(j.submitted_at), p.procs, Dur(walltime))
                            .with_cred(cred);
                        let start = Time(j.started_at.unwrap_or(now));
                        let _ =
                            self.clusters[k]
                                .sched
                                .restore_running(Time(now), job, start, domain);
                        for q in &p.processors {
                            self.clusters[k].free.remove(q);
                        }
                        adopt.push((k, id, j.attempt));
                    }
                }
                JobState::Reserved => {
                    let ok = j.parts.iter().all(|p| {
                        p.reservation
                            .and_then(|r| self.reservations.get(&r))
                            .is_some_and(|r| r.state.is_live())
                    });
                    if !ok {
                        self.unqueue(now, id);
                        if let Some(j) = self.jobs.get_mut(&id) {
                            j.state = JobState::Pending;
                            j.reason = Some(
                                "its reservation lapsed while the service was down; planned again"
                                    .into(),
                            );
                        }
                        self.dirty_jobs.insert(id);
                        self.arrivals.push(id);
                        continue;
                    }
                    let cred = self.cred(&j.user, &j.cred);
                    for p in &j.parts {
                        let (Some(k), Some(r)) = (self.cluster_index(&p.cluster), p.reservation)
                        else {
                            continue;
                        };
                        if self.clusters[k].remote {
                            continue;
                        }
                        let res = &self.reservations[&r];
                        let job = Job::new(
                            JobId(id),
                            Time(j.submitted_at),
                            p.procs,
                            Dur(res.end - res.start),
                        )
                        .with_cred(cred)
                        .in_reservation(ReservationId(r), false);
                        let _ = self.clusters[k].sched.submit(job);
                    }
                }
                _ if j.held => {}
                _ if global => self.arrivals.push(id),
                // Queued in a cluster that schedules itself: reconciled at its snapshot.
                _ if j.parts.iter().any(|p| {
                    self.cluster_index(&p.cluster)
                        .is_some_and(|k| self.clusters[k].remote)
                }) => {}
                _ => self.submit_local(now, id),
            }
        }
        adopt
    }
}

mod remote;

#[cfg(test)]
mod tests;
