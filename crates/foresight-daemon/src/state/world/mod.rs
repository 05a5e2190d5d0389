//! The service's state and every change to it, under one lock: clusters with their local
//! schedulers, jobs, reservations, users. Nothing here does I/O: changes mark records dirty
//! (the caller writes them to the store) and queue effects (the caller runs processes).

use crate::config::{ClusterConfig, Config};
use crate::state::refusal::Refusal;
use foresight_api::{AclSpec, JobState, ReservationState};
use foresight_core::broker::ClusterSpec;
use foresight_core::broker::{
    Broker, BrokerAction, CyclePlan, GridCluster, Phase, Preemption, ReservationEnd, ReservedPart,
    WaitReason,
};
use foresight_core::grid::{ClusterView, Decision, GlobalJob, PlannerConfig};
use foresight_core::licence::LicencePool;
use foresight_core::reservation::{Acl, AdminReservation};
use foresight_core::scheduler::Domain;
use foresight_core::select::Criterion;
use foresight_core::time::{Dur, Interval, Time};
use foresight_core::{
    AccountId, ClassId, Credentials, GroupId, Job, JobId, QosId, ReservationId, UserId,
};
use foresight_rm::{ClusterState, LaunchSpec, Outcome, PartHandle, ReserveRequest, Submission};
use foresight_store::{JobRecord, PartRecord, PreemptionRecord, ReservationRecord, UserRecord};
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
        /// Input files to copy into its working directory first (none when its inputs live
        /// on that cluster); the outcome goes to [`World::staged`].
        stage: Vec<crate::state::staging::Copy>,
    },
    /// Copy a reserved job's input to the cluster it will start on, ahead of its start
    /// (during the transfer the planner set aside); the outcome goes to
    /// [`World::staged_ahead`], and a launch meanwhile waits for it.
    StageAhead {
        /// Cluster index.
        cluster: usize,
        /// The job.
        job: u64,
        /// Its attempt.
        attempt: u32,
        /// The files.
        stage: Vec<crate::state::staging::Copy>,
        /// The Unix account the copy is made as (when the service is root).
        unix_user: Option<String>,
    },
    /// Copy a completed job's outputs back from its working directory on the cluster it
    /// ran on; the outcome goes to [`World::outputs_copied`].
    StageOutputs {
        /// The job.
        job: u64,
        /// The files: the job's own outputs first, then each workflow edge's (labelled).
        stage: Vec<crate::state::staging::OutputFetch>,
        /// The Unix account the copy is made as (when the service is root).
        unix_user: Option<String>,
    },
    /// Stop a running part (cancel, requeue, or a sibling part failed).
    Kill {
        /// Cluster index.
        cluster: usize,
        /// Job.
        job: JobId,
        /// Attempt.
        attempt: u32,
    },
    /// SIGSTOP or SIGCONT a running part.
    Pause {
        /// Cluster index.
        cluster: usize,
        /// Job.
        job: JobId,
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
        reservation: ReservationId,
    },
    /// Submit a part to a cluster that schedules itself; the answer goes to
    /// [`World::part_submitted`].
    Submit {
        /// Cluster index.
        cluster: usize,
        /// What to submit.
        submission: Submission,
        /// Input files to copy into its working directory first; a failed copy goes to
        /// [`World::remote_staged`] instead of submitting.
        stage: Vec<crate::state::staging::Copy>,
    },
    /// Move a reserved job's reservations (and its submitted parts' begin times) on
    /// clusters that schedule themselves, in order, all or none: when a step fails, the
    /// steps done are moved back; the answer goes to [`World::move_answered`].
    Move {
        /// The job.
        job: JobId,
        /// One per part.
        steps: Vec<MoveStep>,
    },
    /// Cancel a part on a cluster that schedules itself.
    Cancel {
        /// Cluster index.
        cluster: usize,
        /// The part.
        part: PartHandle,
    },
    /// Stop the parts of `victims` on clusters that schedule themselves so that job `by`
    /// can start on cluster `cluster` (suspend, or requeue), all or none: when one fails,
    /// those suspended are resumed; the answer goes to [`World::preemption_answered`].
    /// A co-allocated victim has a part here for each such cluster it spans.
    Preempt {
        /// Cluster index where `by` starts.
        cluster: usize,
        /// The job to make room for.
        by: JobId,
        /// The parts to stop (cluster index, part), and how.
        victims: Vec<(usize, PartHandle, Preemption)>,
    },
    /// Resume the parts a preemption suspended on clusters that schedule themselves, all
    /// or none: when one fails, those resumed are suspended again; the answer goes to
    /// [`World::resume_answered`].
    ResumePart {
        /// The job.
        job: JobId,
        /// Its parts (cluster index, part).
        parts: Vec<(usize, PartHandle)>,
    },
    /// [`Effect::Reserve`] for a job that preempted others there: over the processors of
    /// the jobs suspended for it.
    ReserveOverSuspended {
        /// Cluster index.
        cluster: usize,
        /// What to hold.
        request: ReserveRequest,
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

/// One part's share of an [`Effect::Move`].
#[derive(Clone, Debug, PartialEq)]
pub struct MoveStep {
    /// Cluster index.
    pub cluster: usize,
    /// The reservation at its new window.
    pub to: ReserveRequest,
    /// The reservation at its old window (to undo the step).
    pub back: ReserveRequest,
    /// The part bound to it, once submitted there.
    pub part: Option<PartHandle>,
}

/// One cluster of the grid as the service runs it.
#[derive(Clone, Debug)]
pub struct Cluster {
    /// Its configuration. Its scheduler, processors and prices are the broker's
    /// ([`World::broker`], same index).
    pub cfg: ClusterConfig,
    /// Processor indices not running anything now.
    pub free: BTreeSet<u32>,
    /// Scheduled by its own resource manager (Slurm): its scheduler in the broker is then a
    /// mirror rebuilt from every snapshot, whose decisions are never carried out.
    pub remote: bool,
    /// Why it is unavailable (the broker's cluster says whether it is).
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

    /// The most processors a global job may ask of it: none where no global job can go
    /// (a WIKI cluster without a submission route).
    fn global_admission_limit(&self) -> u32 {
        if crate::config::wiki_rm::takes_foresight_jobs(&self.cfg) {
            self.admission_limit()
        } else {
            0
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
    /// When the last cycle began (seconds since the epoch), for the dashboard.
    pub last_cycle_at: Option<Time>,
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
    pub jobs: BTreeMap<JobId, JobRecord>,
    /// Every reservation, by id.
    pub reservations: BTreeMap<ReservationId, ReservationRecord>,
    /// Users by name.
    pub users: BTreeMap<String, UserRecord>,
    /// The grid broker: the clusters' schedulers and the lifecycle of global jobs, the same
    /// state machine the grid simulator runs.
    pub broker: Broker,
    names: HashMap<(u8, String), u32>,
    /// Running jobs to put back in the queue once their processes are gone.
    requeue: BTreeSet<JobId>,
    /// Running jobs whose parts are being stopped because one part failed or on cancel.
    stopping: BTreeSet<JobId>,
    /// Parts a local policy started while too few of the cluster's processors were really
    /// free: (cluster, job, procs), launched in this order as processors come free. A policy
    /// counts a job's processors free at the end of its walltime, or once it is preempted to
    /// be requeued, but the supervisor counts the walltime from the process's own start and
    /// gives a killed process a grace period to die. Not stored: a restart defers again the
    /// parts that have a start but no processors ([`World::restore`]).
    deferred: Vec<(usize, JobId, u32)>,
    /// Changed since last written.
    pub dirty_jobs: BTreeSet<JobId>,
    /// What each user's admitted local jobs may still cost, kept as jobs change.
    pub(crate) uncharged: crate::state::world::accounts::Uncharged,
    /// Changed since last written.
    pub dirty_reservations: BTreeSet<ReservationId>,
    /// Changed since last written.
    pub dirty_users: BTreeSet<String>,
    /// Each user as the store last had them (loaded, taken in from the shared database, or
    /// written): what a write's change is made from, so that it writes only what changed
    /// here ([`foresight_store::UserChange`]).
    pub(crate) users_base: BTreeMap<String, UserRecord>,
    /// To do outside the lock.
    pub effects: Vec<Effect>,
    grace: u64,
    output_dir: PathBuf,
    /// The `[unix_user]` table (see `accounts`).
    pub(crate) unix_users: BTreeMap<String, String>,
    /// Cap of each output file of a local job.
    max_output_bytes: Option<u64>,
    /// For `/metrics`.
    pub stats: Stats,
    /// Parts whose submission to a remote cluster is on its way: (job, attempt, cluster).
    submitting: BTreeSet<(JobId, u32, usize)>,
    /// When parts were submitted to a remote cluster (this run of the service only): a
    /// snapshot older than that may not show them yet.
    submitted_at: HashMap<(JobId, u32, usize), Time>,
    /// When remote reservations were confirmed (this run only), for the same reason.
    confirmed_at: HashMap<ReservationId, Time>,
    /// Cancels and releases already sent to remote clusters and not yet seen through.
    sent: BTreeSet<(usize, String)>,
    /// How this instance names what it makes on remote clusters (`instance`): the
    /// reservations of ours it reads back in their snapshots.
    naming: foresight_rm::slurm::Naming,
    /// Jobs waiting at the gate for their dependencies, array limit or singleton turn
    /// (`gate.rs`); their records say so too (`links.waiting`), for restarts.
    waiting: BTreeSet<JobId>,
    /// Set while the gate decides (`Some(again)`): a job ending meanwhile asks for one more
    /// pass instead of deciding inside the pass.
    waking: Option<bool>,
    /// Workflows by id (`workflow.rs`).
    pub workflows: BTreeMap<u64, foresight_store::WorkflowRecord>,
    /// Which workflow task each task's job is: (workflow, task index).
    task_of: HashMap<u64, (u64, usize)>,
    /// Changed since last written.
    pub dirty_workflows: BTreeSet<u64>,
    /// Every broker action carried out, in order (tests compare them with the simulator's).
    /// The configured licence pools (`[[licence]]`), for admission.
    pub(crate) licences: Vec<LicencePool>,
    /// The statistics store of runtime prediction, one per processor type (a cluster's, or
    /// 0 for the reference processor of global jobs), as the simulator keeps them apart:
    /// the last finished runs per user and per application (`prediction.rs`).
    pub(crate) runtimes: BTreeMap<u32, foresight_core::predict::RuntimeStats>,
    /// Finished runs not yet written to the store.
    pub dirty_runs: Vec<foresight_store::RunRecord>,
    /// Each cluster's predictor, for its local policy.
    predictors: Vec<foresight_core::predict::Predictor>,
    /// Victims of preemptions asked of clusters that schedule themselves and not answered
    /// yet, by the job asking (`preempt_remote.rs`).
    preempt_victims: BTreeMap<JobId, Vec<JobId>>,
    /// Jobs whose preemption was just answered yes: their reservation is made over the
    /// victims' processors.
    preempting: BTreeSet<JobId>,
    /// The grid's predictor (the configuration's `predict`), for global jobs.
    global_predictor: foresight_core::predict::Predictor,
    #[cfg(test)]
    actions: Vec<BrokerAction>,
}

impl World {
    /// A world with the configured clusters and nothing else.
    pub fn new(cfg: &Config) -> World {
        let mut grid = Vec::new();
        let clusters = cfg
            .cluster
            .iter()
            .map(|c| {
                grid.push(GridCluster {
                    // A cluster Maui schedules through WIKI takes no global job.
                    available: !c.is_remote() && !c.is_wiki_scheduled(),
                    self_scheduled: c.is_remote(),
                    // Slurm reserves and limits jobs in whole minutes.
                    granularity: Dur(if c.is_slurm() { 60 } else { 1 }),
                    ..c.spec
                        .clone()
                        .with_defaults(cfg.predict, cfg.backfill_order)
                        .grid_cluster(c.procs)
                });
                Cluster {
                    cfg: c.clone(),
                    free: (0..c.procs).collect(),
                    remote: c.is_remote(),
                    unavailable_reason: if c.is_remote() {
                        Some(format!("not read from {} yet", c.kind))
                    } else {
                        c.is_wiki_scheduled().then(wiki::unavailable_reason)
                    },
                    snapshot: None,
                }
            })
            .collect();
        let planner = PlannerConfig {
            horizon: Dur(cfg.horizon_seconds),
            lead_time: Dur(cfg.lead_time_seconds),
            plan_depth: cfg.plan_depth,
        };
        let mut broker = Broker::new(grid, planner, 1);
        for pool in &cfg.licence {
            let on: Vec<usize> = (0..broker.clusters.len())
                .filter(|&k| pool.clusters.contains(&broker.clusters[k].name))
                .collect();
            broker.add_licence_pool(&pool.name, pool.count, &on);
        }
        World {
            clusters,
            jobs: BTreeMap::new(),
            reservations: BTreeMap::new(),
            users: BTreeMap::new(),
            broker,
            names: HashMap::new(),
            requeue: BTreeSet::new(),
            stopping: BTreeSet::new(),
            deferred: Vec::new(),
            dirty_jobs: BTreeSet::new(),
            uncharged: Default::default(),
            dirty_reservations: BTreeSet::new(),
            dirty_users: BTreeSet::new(),
            users_base: BTreeMap::new(),
            effects: Vec::new(),
            grace: cfg.grace_seconds,
            output_dir: cfg.data_dir.join("output"),
            unix_users: cfg.unix_user.clone(),
            max_output_bytes: cfg.max_output_bytes,
            stats: Stats::default(),
            submitting: BTreeSet::new(),
            preempt_victims: BTreeMap::new(),
            preempting: BTreeSet::new(),
            submitted_at: HashMap::new(),
            confirmed_at: HashMap::new(),
            // Checked with the configuration; the default names otherwise.
            naming: foresight_rm::slurm::Naming::instance(&cfg.instance).unwrap_or_default(),
            sent: BTreeSet::new(),
            waiting: BTreeSet::new(),
            waking: None,
            workflows: BTreeMap::new(),
            task_of: HashMap::new(),
            dirty_workflows: BTreeSet::new(),
            licences: cfg.licence.clone(),
            runtimes: Default::default(),
            dirty_runs: Vec::new(),
            predictors: cfg
                .cluster
                .iter()
                .map(|c| c.predict.unwrap_or(cfg.predict))
                .collect(),
            global_predictor: cfg.predict,
            #[cfg(test)]
            actions: Vec::new(),
        }
    }

    // ---------------------------------------------------------------- users and names

    /// Adds a user (from the store or the API), as stored.
    pub fn add_user(&mut self, u: UserRecord) {
        self.users_base.insert(u.name.clone(), u.clone());
        self.users.insert(u.name.clone(), u);
    }

    pub(crate) fn intern(&mut self, kind: u8, name: &str) -> u32 {
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
    pub fn unknown_cluster(&self, name: &str) -> Refusal {
        Refusal::invalid(
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

    /// All processors a global job may span: those of the clusters that take global jobs.
    pub fn total_procs(&self) -> u32 {
        self.clusters
            .iter()
            .map(|c| c.global_admission_limit())
            .fold(0u32, u32::saturating_add)
    }

    /// The most processors a global job may ask: those of every cluster that takes global
    /// jobs when it may span clusters, else the largest such cluster's.
    pub fn global_limit(&self, co_allocate: bool) -> u32 {
        if co_allocate {
            self.total_procs()
        } else {
            self.clusters
                .iter()
                .map(|c| c.global_admission_limit())
                .max()
                .unwrap_or(0)
        }
    }

    /// The price a global job without a price pays at most: the dearest base tariff, so it
    /// takes free time anywhere but never displaces a queued local job (the planner prices
    /// such time above it: [`foresight_core::grid::displacement_floor`]).
    pub fn default_price(&self) -> f64 {
        foresight_core::grid::default_price(&self.views())
    }

    // ---------------------------------------------------------------- jobs

    /// Refuses what `exec` would refuse later (NUL bytes, bad environment names) and names
    /// that would drive a terminal, at submission rather than at launch.
    fn check_texts(j: &JobRecord) -> Result<(), Refusal> {
        use crate::state::limits;
        if let Some(n) = &j.name {
            limits::name("name", n)?;
        }
        if let Some(a) = &j.app {
            limits::name("app", a)?;
        }
        for (field, c) in ["group", "account", "class", "qos"].iter().zip(&j.cred) {
            if let Some(c) = c {
                limits::name(field, c)?;
            }
        }
        for a in &j.command {
            limits::exec_text("command", a)?;
        }
        for (k, v) in &j.env {
            limits::env_key("env", k)?;
            limits::exec_text("env", v)?;
        }
        if let Some(cwd) = &j.cwd {
            limits::exec_text("cwd", cwd)?;
        }
        Ok(())
    }

    /// Checks a new job against the grid, the reservations and the user's budget.
    pub fn admit(&self, j: &JobRecord) -> Result<(), Refusal> {
        if j.procs == 0 {
            return Err(Refusal::invalid("procs", "must be at least 1"));
        }
        if j.walltime <= 0 {
            return Err(Refusal::invalid(
                "walltime",
                format!("must be positive, got {} s", j.walltime),
            ));
        }
        crate::state::limits::seconds("walltime", j.walltime)?;
        if let Some(b) = j.begin {
            crate::state::limits::instant("begin", b)?;
        }
        if j.command.is_empty() || j.command[0].is_empty() {
            return Err(Refusal::invalid("command", "must name a program to run"));
        }
        if j.priority > 0 && (j.cluster.is_some() || j.reservation.is_some()) {
            return Err(Refusal::invalid(
                "priority",
                "is a level of global jobs: a job for one cluster or one reservation is that \
                 cluster's own work, never preempted and never preempting",
            ));
        }
        if let Some(p) = j.price {
            crate::state::limits::price("price", p)?;
        }
        Self::check_texts(j)?;
        if let Some(cwd) = &j.cwd {
            if !cwd.starts_with('/') {
                return Err(Refusal::invalid(
                    "cwd",
                    format!("must be absolute, got {cwd:?}"),
                ));
            }
        }
        if let Some(r) = j.reservation {
            let res = self
                .reservations
                .get(&ReservationId(r))
                .filter(|r| r.state.is_live())
                .ok_or_else(|| {
                    Refusal::invalid("reservation", format!("no live reservation {r}"))
                })?;
            if !World::acl_admits(&res.acl, &j.user, Some(j)) {
                return Err(Refusal::forbidden(
                    "reservation",
                    format!("reservation {r}'s ACL does not admit user {:?}", j.user),
                ));
            }
            if j.procs > res.procs {
                return Err(Refusal::invalid(
                    "procs",
                    format!(
                        "{} processors asked; reservation {r} holds {}",
                        j.procs, res.procs
                    ),
                ));
            }
            if let Some(c) = &j.cluster {
                if *c != res.cluster {
                    return Err(Refusal::invalid(
                        "cluster",
                        format!("reservation {r} is on cluster {:?}, not {c:?}", res.cluster),
                    ));
                }
            }
            self.admit_needs(j, Some(&res.cluster))?;
            return self.check_budget(j, self.local_tariff(j).unwrap_or(0.0));
        }
        self.admit_needs(j, j.cluster.as_deref())?;
        match &j.cluster {
            Some(c) => {
                let k = self
                    .cluster_index(c)
                    .ok_or_else(|| self.unknown_cluster(c))?;
                if !crate::config::wiki_rm::takes_foresight_jobs(&self.clusters[k].cfg) {
                    return Err(Refusal::invalid(
                        "cluster",
                        format!("cluster {c}: {}", crate::config::wiki_rm::no_route_reason()),
                    ));
                }
                let max = self.clusters[k].admission_limit();
                if j.procs > max {
                    return Err(Refusal::invalid(
                        "procs",
                        format!(
                            "{} processors asked; cluster {c} has {max}, the most possible",
                            j.procs
                        ),
                    ));
                }
                self.check_budget(j, self.broker.clusters[k].tariff.base)?;
            }
            None => {
                let max = self.global_limit(j.co_allocate);
                if j.procs > max {
                    return Err(Refusal::invalid(
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
                self.check_budget(j, j.price.unwrap_or_else(|| self.default_price()))?;
            }
        }
        Ok(())
    }

    /// Refuses features no cluster offers (or `cluster`, for a job of one cluster) and
    /// licences no pool can give, naming the feature or the pool and its size.
    fn admit_needs(&self, j: &JobRecord, cluster: Option<&str>) -> Result<(), Refusal> {
        for f in &j.requires {
            foresight_core::broker::check_feature(f)
                .map_err(|e| Refusal::invalid("requires", e))?;
        }
        let specs: Vec<&ClusterSpec> = self
            .clusters
            .iter()
            .filter(|c| cluster.is_none_or(|n| c.cfg.name == n))
            .map(|c| &c.cfg.spec)
            .collect();
        if let Some(why) =
            foresight_core::broker::features_refusal(specs.iter().copied(), &j.requires)
        {
            let why = match cluster {
                Some(c) => why.replace(
                    "no cluster offers",
                    &format!("cluster {c:?} does not offer"),
                ),
                None => why,
            };
            return Err(Refusal::invalid("requires", why));
        }
        if j.licences.is_empty() {
            return Ok(());
        }
        let Some(cluster) = cluster else {
            // A global job: the planner places it on clusters drawing on its pools.
            if let Some(why) = foresight_core::licence::demand_refusal(&j.licences, &self.licences)
            {
                return Err(Refusal::invalid("licences", why));
            }
            return Ok(());
        };
        let pools: Vec<LicencePool> = self
            .licences
            .iter()
            .filter(|p| p.clusters.iter().any(|c| c == cluster))
            .cloned()
            .collect();
        if let Some(name) = j
            .licences
            .keys()
            .find(|n| !pools.iter().any(|p| &p.name == *n))
        {
            return Err(Refusal::invalid(
                "licences",
                format!("no licence pool {name:?} serves cluster {cluster:?}"),
            ));
        }
        if let Some(why) = foresight_core::licence::demand_refusal(&j.licences, &pools) {
            return Err(Refusal::invalid("licences", why));
        }
        Ok(())
    }

    /// Takes in jobs the store has made durable.
    pub fn accept(&mut self, now: Time, jobs: Vec<JobRecord>) {
        // A pass for these must not take the processors of a job past its prediction.
        self.correct_outlived(now);
        for j in jobs {
            let id = JobId(j.id);
            let held = j.held;
            let global = j.cluster.is_none() && j.reservation.is_none();
            let user = j.user.clone();
            self.jobs.insert(id, j);
            self.recount(id);
            if !global {
                // Counted at once, also by a cycle planning off the lock right now.
                self.sync_broker_budget(&user);
            }
            if held || self.stop_at_gate(id) {
                continue;
            }
            if global {
                self.enqueue_global(now, id);
            } else {
                self.submit_local(now, id);
            }
        }
        self.wake_waiting(now);
    }

    /// Hands a global job to the broker: planned from the next cycle on.
    fn enqueue_global(&mut self, now: Time, id: JobId) {
        self.predict_global(id);
        if let Some(job) = self.global_job(id) {
            self.broker.submit(now, job);
            self.mark_prepaid(id);
        }
    }

    /// Tells the broker that job `id` was paid for before it came here (a peer dispatcher's
    /// award, see [`JobRecord::prepaid`]): it never waits for budget here.
    fn mark_prepaid(&mut self, id: JobId) {
        if self.jobs.get(&id).is_some_and(|j| j.prepaid > 0.0) {
            self.broker.set_prepaid(id);
        }
    }

    /// Puts back into the broker a global job that was reserved or running when the service
    /// stopped (its reservations and parts are already back in the clusters' schedulers).
    /// `due`: a reserved job whose reservations have begun is put back as started at their
    /// start, as the broker had it (its launch waits in `deferred`).
    fn adopt_global(&mut self, id: JobId, due: bool) {
        let Some(job) = self.global_job(id) else {
            return;
        };
        let j = &self.jobs[&id];
        let mut parts = Vec::new();
        let mut ended = BTreeSet::new();
        for p in &j.parts {
            let (Some(k), Some(r)) = (self.cluster_index(&p.cluster), p.reservation) else {
                continue;
            };
            let Some(res) = self.reservations.get(&ReservationId(r)) else {
                continue;
            };
            if p.ended {
                ended.insert(k);
            }
            parts.push(ReservedPart {
                cluster: k,
                reservation: ReservationId(r),
                procs: p.procs,
                processors: p.processors.clone(),
                window: Interval::new(Time(res.start), Time(res.end)),
            });
        }
        let start = parts
            .iter()
            .map(|p| p.window.start)
            .min()
            .unwrap_or(Time(0));
        let end = parts.iter().map(|p| p.window.end).max().unwrap_or(start);
        // What the current attempt's reservation was charged: earlier attempts' use is
        // settled and never refunded.
        let cost = j.charged - j.settled;
        let stopped = j.preemption.clone().unwrap_or_default();
        let phase = match (j.state, j.started_at, stopped.since) {
            // Stopped for a job of a higher level: it holds nothing, and resumes by itself.
            (JobState::Running, Some(s), Some(since)) => Phase::Suspended {
                start: Time(s),
                cost,
                parts,
                since: Time(since),
                left: Dur(stopped.left.max(1)),
                suspended: Dur(stopped.suspended),
            },
            (JobState::Running, Some(s), None) => Phase::Running {
                start: Time(s),
                end,
                cost,
                parts,
                ended,
                suspended: Dur(stopped.suspended),
            },
            (JobState::Reserved, _, _) if due => Phase::Running {
                start,
                end,
                cost,
                parts,
                ended,
                suspended: Dur(stopped.suspended),
            },
            _ => Phase::Reserved {
                start,
                end,
                cost,
                parts,
            },
        };
        self.broker.adopt(job, phase);
        self.mark_prepaid(id);
    }

    /// A global job's record as the broker plans it.
    fn global_job(&mut self, id: JobId) -> Option<GlobalJob> {
        let j = self.jobs.get(&id)?;
        let (user, submitted, procs, walltime, price, co_allocate, priority, requeue, begin) = (
            j.user.clone(),
            j.submitted_at,
            j.procs,
            j.walltime,
            j.price,
            j.co_allocate,
            j.priority,
            j.requeue,
            j.begin,
        );
        let job = GlobalJob {
            id,
            user: UserId(self.intern(0, &user)),
            submit: Time(submitted),
            procs,
            walltime: Dur(walltime),
            max_price: price.unwrap_or_else(|| self.default_price()),
            input_mb: crate::state::staging::input_mb(&self.jobs[&id]),
            home: crate::state::staging::data_cluster(&self.jobs[&id])
                .and_then(|c| self.cluster_index(&c)),
            co_allocate,
            criterion: Criterion::EarliestFinish,
            priority,
            requeue,
            begin: begin.map(Time),
            requires: self.jobs[&id].requires.iter().cloned().collect(),
            licences: self.jobs[&id].licences.clone(),
            prediction: prediction::restored_plan(&self.jobs[&id]),
        };
        Some(job)
    }

    /// Queues a local (or reservation-bound) job at its cluster's local policy.
    fn submit_local(&mut self, now: Time, id: JobId) {
        let Some(j) = self.jobs.get(&id) else { return };
        let cluster = match j.reservation {
            Some(r) => self
                .reservations
                .get(&ReservationId(r))
                .map(|r| r.cluster.clone()),
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
        let (user, credn, procs, walltime, reservation, early, submitted, begin) = (
            j.user.clone(),
            j.cred.clone(),
            j.procs,
            j.walltime,
            j.reservation,
            j.allow_early_start,
            j.submitted_at,
            j.begin,
        );
        if self.clusters[k].remote {
            // The cluster's own scheduler queues it; Foresight follows it from snapshots.
            let name = self.clusters[k].cfg.name.clone();
            if let Some(j) = self.jobs.get_mut(&id) {
                // Bound to its reservation there (a reserved workflow task's slot).
                j.parts = vec![PartRecord {
                    cluster: name.clone(),
                    procs,
                    reservation,
                    ..PartRecord::default()
                }];
                j.reason = Some(format!("submitted to {name}"));
                self.dirty_jobs.insert(id);
            }
            self.submit_remote_parts(id);
            return;
        }
        if self.clusters[k].cfg.is_wiki_scheduled() {
            self.queue_for_wiki(k, id);
            return;
        }
        if let Some(why) = self.unadmitted(id) {
            // Its user lost the credential that admitted it (see `credentials`).
            if let Some(j) = self.jobs.get_mut(&id) {
                j.held = true;
                j.state = JobState::Pending;
                j.planned_start = None;
                j.parts.clear();
                j.reason = Some(format!("held: {why}"));
                self.dirty_jobs.insert(id);
            }
            return;
        }
        let cred = self.cred(&user, &credn);
        let licences = self.jobs[&id].licences.clone();
        let mut job = Job::new(id, Time(submitted), procs, Dur(walltime))
            .with_cred(cred)
            .with_begin(begin.map(Time))
            .with_licences(licences);
        if let Some(r) = reservation {
            job = job.in_reservation(ReservationId(r), early);
        }
        let job = job.with_prediction(self.predict_local(k, id));
        // The part is recorded before the scheduler may start it.
        if let Some(j) = self.jobs.get_mut(&id) {
            j.parts = vec![PartRecord {
                cluster: self.clusters[k].cfg.name.clone(),
                procs,
                reservation,
                ..PartRecord::default()
            }];
        }
        let mut out = Vec::new();
        match self.broker.submit_local(now, k, job, &mut out) {
            Ok(()) => self.carry_out(now, out),
            Err(e) => {
                if let Some(j) = self.jobs.get_mut(&id) {
                    j.parts.clear();
                }
                self.fail(now, id, format!("refused by cluster: {e}"));
            }
        }
    }

    fn fail(&mut self, now: Time, id: JobId, reason: String) {
        let mut out = Vec::new();
        self.broker.withdraw(now, id, &mut out);
        self.carry_out(now, out);
        if let Some(j) = self.jobs.get_mut(&id) {
            j.state = JobState::Failed;
            j.reason = Some(reason);
            j.ended_at = Some(now.secs());
            self.dirty_jobs.insert(id);
        }
        self.wake_waiting(now);
    }

    /// Starts a part on processors that are really free, or defers it (in order) until
    /// jobs that overran their walltime have let go of enough of them.
    fn start_part(&mut self, now: Time, k: usize, id: JobId, procs: u32) {
        let behind = self.deferred.iter().any(|d| d.0 == k);
        if behind || (self.clusters[k].free.len() as u32) < procs {
            self.deferred.push((k, id, procs));
            if let Some(j) = self.jobs.get_mut(&id) {
                j.reason = Some(
                    "starting: waiting for processors still held by a job being stopped".into(),
                );
                self.dirty_jobs.insert(id);
            }
            return;
        }
        self.launch_part(now, k, id, procs);
    }

    /// Launches the deferred parts of cluster `k` that now fit, in order.
    fn start_deferred(&mut self, now: Time, k: usize) {
        while let Some(i) = self.deferred.iter().position(|d| d.0 == k) {
            let (_, id, procs) = self.deferred[i];
            if (self.clusters[k].free.len() as u32) < procs {
                break;
            }
            self.deferred.remove(i);
            self.launch_part(now, k, id, procs);
        }
    }

    fn launch_part(&mut self, now: Time, k: usize, id: JobId, procs: u32) {
        let taken = self.choose_processors(now, k, id, procs);
        self.launch_on(now, k, id, taken);
    }

    /// Launches job `id`'s part on cluster `k` on the free processors `taken`.
    fn launch_on(&mut self, now: Time, k: usize, id: JobId, taken: Vec<u32>) {
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
        j.state = JobState::Running;
        j.reason = None;
        let Some(spec) = self.part_spec(id, index, taken) else {
            return;
        };
        let mut stage = crate::state::staging::copies(&self.jobs[&id], &name, &spec.cwd);
        let ahead = self.jobs[&id]
            .staging
            .iter()
            .rev()
            .find(|s| s.cluster == name && s.attempt == self.jobs[&id].attempt)
            .map(|s| (s.ended_at.is_some(), s.error.is_none()));
        if ahead == Some((true, true)) {
            // Copied ahead, while it was reserved.
            stage.clear();
        }
        if let Some(j) = self.jobs.get_mut(&id) {
            if index == 0 {
                j.stdout = Some(spec.stdout.display().to_string());
                j.stderr = Some(spec.stderr.display().to_string());
            }
            if !stage.is_empty() && ahead == Some((false, true)) {
                // The copy ahead is still running: the launch waits for it (or, after a
                // restart lost it, copies again), and its record is that copy's.
                j.reason = Some(format!("staging its input to {name}"));
            } else if !stage.is_empty() {
                // It starts once its input is there: staging is time before the start.
                j.reason = Some(format!("staging its input to {name}"));
                let attempt = j.attempt;
                self.staging_began(now, k, id, attempt);
            }
        }
        if stage.is_empty() {
            self.mark_started(now, id);
        }
        self.dirty_jobs.insert(id);
        self.effects.push(Effect::Launch {
            cluster: k,
            spec,
            stage,
        });
    }

    /// Records a job's start (its first part's), and how far it was from the plan.
    fn mark_started(&mut self, now: Time, id: JobId) {
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        if j.started_at.is_none() {
            j.started_at = Some(now.secs());
            if let Some(p) = j.first_planned_start {
                self.stats.estimate_error_sum += (now.secs() - p).abs() as f64;
                self.stats.estimate_error_count += 1;
            }
        }
        self.dirty_jobs.insert(id);
    }

    /// The copy of a part's input to cluster `k` ended: done, the part starts now (true:
    /// launch it); failed or no longer wanted (the job was cancelled or requeued
    /// meanwhile), the part ends without having run and releases what it held (false).
    pub fn staged(
        &mut self,
        now: Time,
        k: usize,
        id: JobId,
        attempt: u32,
        result: Result<(), String>,
    ) -> bool {
        let name = self.clusters[k].cfg.name.clone();
        if !self.staging_ended(now, &name, id, attempt, &result) {
            return false;
        }
        let j = self
            .jobs
            .get_mut(&id)
            .expect("invariant: staging_ended found it");
        let current = j.attempt == attempt && j.state == JobState::Running;
        let cancelled = j.state_after == Some(JobState::Cancelled) || self.stopping.contains(&id);
        match result {
            Ok(()) if current && !cancelled => {
                if j.reason.as_deref() == Some(&format!("staging its input to {name}")) {
                    j.reason = None;
                }
                self.mark_started(now, id);
                true
            }
            Ok(()) => {
                let mut outcome =
                    Outcome::failed(now.secs(), now.secs(), "stopped while staging".into());
                outcome.error = None;
                outcome.cancelled = true;
                self.on_finished(now, k, id, attempt, &outcome);
                false
            }
            Err(e) => {
                let outcome = Outcome::failed(
                    now.secs(),
                    now.secs(),
                    format!("staging its input to {name} failed: {e}"),
                );
                self.on_finished(now, k, id, attempt, &outcome);
                false
            }
        }
    }

    /// Records the start of a copy of job `id`'s input to cluster `k` for `attempt`.
    pub fn staging_began(&mut self, now: Time, k: usize, id: JobId, attempt: u32) {
        let name = self.clusters[k].cfg.name.clone();
        if let Some(j) = self.jobs.get_mut(&id) {
            j.staging.push(foresight_store::StagingRecord {
                cluster: name,
                attempt,
                began_at: now.secs(),
                ended_at: None,
                error: None,
                edges: Vec::new(),
            });
            self.dirty_jobs.insert(id);
        }
    }

    /// Records the end of the copy of job `id`'s input to cluster `name` for `attempt`
    /// (with the error, if it failed); false when the job is gone.
    pub(super) fn staging_ended(
        &mut self,
        now: Time,
        name: &str,
        id: JobId,
        attempt: u32,
        result: &Result<(), String>,
    ) -> bool {
        let Some(j) = self.jobs.get_mut(&id) else {
            return false;
        };
        if let Some(s) = j
            .staging
            .iter_mut()
            .rev()
            .find(|s| s.cluster == name && s.attempt == attempt)
        {
            s.ended_at = Some(now.secs());
            s.error = result.as_ref().err().cloned();
        }
        self.dirty_jobs.insert(id);
        true
    }

    /// What part `index` of job `id` runs, on `processors`: its command, environment and
    /// working directory, output files `ID.out|err` (`ID.INDEX.out|err` for a job of several
    /// parts), and its limit — for a global job its reservation (its walltime at the speed
    /// of the processors the planner chose), else its walltime.
    pub(super) fn part_spec(
        &self,
        id: JobId,
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
            job: id.0,
            attempt: j.attempt,
            cluster: part.cluster.clone(),
            processors,
            command: j.command.clone(),
            env: self.job_env(j, &part.cluster),
            cwd: self.work_dir_on(j, Some(&part.cluster)),
            stdout: self.output_dir.join(out("out")),
            stderr: self.output_dir.join(out("err")),
            walltime_secs: part
                .reservation
                .and_then(|r| self.reservations.get(&ReservationId(r)))
                .filter(|r| r.kind == "job")
                .map_or(j.walltime, |r| r.end - r.start)
                .max(1) as u64,
            grace_secs: self.grace,
            unix_user: Some(self.unix_account(&j.user).0),
            max_output_bytes: self.max_output_bytes,
            service_output: true,
        })
    }

    /// A job's environment: its own variables, then, for a task of an array job,
    /// `FORESIGHT_ARRAY_JOB_ID` and `FORESIGHT_ARRAY_TASK_ID` (and Slurm's names for them on
    /// a Slurm cluster, which sets them only for its own arrays), last so that they win.
    fn job_env(&self, j: &JobRecord, cluster: &str) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> =
            j.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        if let Some(a) = j.links.as_ref().and_then(|l| l.array.as_ref()) {
            let mut prefixes = vec!["FORESIGHT"];
            if self
                .cluster_index(cluster)
                .is_some_and(|k| self.clusters[k].cfg.is_slurm())
            {
                prefixes.push("SLURM");
            }
            for p in prefixes {
                env.retain(|(k, _)| {
                    k != &format!("{p}_ARRAY_JOB_ID") && k != &format!("{p}_ARRAY_TASK_ID")
                });
                env.push((format!("{p}_ARRAY_JOB_ID"), a.job.to_string()));
                env.push((format!("{p}_ARRAY_TASK_ID"), a.task.to_string()));
            }
        }
        env
    }

    /// Which free processors a part gets: those its reservation names first; then those no
    /// other reservation names during its run; then the lowest ids. The scheduler's counts
    /// guarantee enough free processors; this keeps named ones for their reservations.
    fn choose_processors(&self, now: Time, k: usize, id: JobId, procs: u32) -> Vec<u32> {
        let c = &self.clusters[k];
        let Some(j) = self.jobs.get(&id) else {
            return c.free.iter().take(procs as usize).copied().collect();
        };
        let own = j
            .parts
            .iter()
            .find(|p| p.cluster == c.cfg.name)
            .and_then(|p| p.reservation);
        let until = now + Dur(j.walltime) + Dur(self.grace as i64);
        let mut mine = BTreeSet::new();
        let mut others = BTreeSet::new();
        for r in self.reservations.values() {
            if !r.state.is_live() || r.cluster != c.cfg.name || r.processors.is_empty() {
                continue;
            }
            if Some(r.id) == own {
                mine.extend(r.processors.iter().copied());
            } else if Time(r.start) < until && now < Time(r.end) {
                others.extend(r.processors.iter().copied());
            }
        }
        let mut free: Vec<u32> = c.free.iter().copied().collect();
        free.sort_by_key(|p| (!mine.contains(p), others.contains(p), *p));
        free.truncate(procs as usize);
        free
    }

    /// A part's process ended (or could not start).
    pub fn on_finished(&mut self, now: Time, k: usize, id: JobId, attempt: u32, outcome: &Outcome) {
        // The pass this end brings must not take the processors of a job past its prediction.
        self.correct_outlived(now);
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
        // When the part really ended, as its supervisor (or resource manager) recorded it:
        // a part that ended while the service was down is not charged for the downtime.
        let ended_at = if (1..now.secs()).contains(&outcome.ended_at) {
            outcome.ended_at.max(j.started_at.unwrap_or(0))
        } else {
            now.secs()
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
        let _ = part;
        let mut out = Vec::new();
        self.broker
            .on_part_ended_at(now, Time(ended_at), k, id, &mut out);
        self.carry_out(now, out);
        if failed && !siblings.is_empty() && self.stopping.insert(id) {
            self.kill_unended_parts(id);
        }
        if all_ended {
            self.stopping.remove(&id);
            self.job_ended(Time(ended_at), id, outcome);
        }
        self.dirty_jobs.insert(id);
    }

    /// A part that was running when the service stopped and is gone without a trace: the
    /// job runs again as a new attempt.
    pub fn mark_lost(&mut self, now: Time, k: usize, id: JobId, attempt: u32) {
        self.mark_requeue(id);
        let outcome = Outcome::failed(
            now.secs(),
            now.secs(),
            "lost while the service was down".into(),
        );
        self.on_finished(now, k, id, attempt, &outcome);
    }

    /// Job `id`'s running attempt is to run again as its next attempt once it has ended;
    /// kept in its record too, for a restart before then.
    fn mark_requeue(&mut self, id: JobId) {
        self.requeue.insert(id);
        if let Some(j) = self.jobs.get_mut(&id) {
            j.requeue_pending = true;
            self.dirty_jobs.insert(id);
        }
    }

    /// Forgets that job `id` is to run again; whether it was to.
    fn unmark_requeue(&mut self, id: JobId) -> bool {
        if let Some(j) = self.jobs.get_mut(&id) {
            if std::mem::take(&mut j.requeue_pending) {
                self.dirty_jobs.insert(id);
            }
        }
        self.requeue.remove(&id)
    }

    fn is_job_reservation(&self, r: Option<u64>) -> bool {
        r.and_then(|r| self.reservations.get(&ReservationId(r)))
            .is_some_and(|r| r.kind == "job")
    }

    /// The last part of a job's attempt ended at `now` (when it really ended).
    fn job_ended(&mut self, now: Time, id: JobId, last: &Outcome) {
        let retry = if self.requeue.contains(&id) {
            None
        } else {
            self.retry_task(id)
        };
        let requeue = self.unmark_requeue(id) || retry.is_some();
        // A global job: the broker has charged what was used of what was reserved. A local
        // job (or one in an administrative reservation) pays here for what it held.
        if let Some(amount) = self.local_charge(now, id) {
            self.charge(id, amount);
        }
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        j.settled = j.charged;
        if requeue {
            j.attempt += 1;
            j.state = JobState::Pending;
            j.started_at = None;
            j.exit_code = None;
            j.signal = None;
            j.state_after = None;
            j.reason = Some(retry.unwrap_or_else(|| format!("requeued (attempt {})", j.attempt)));
            j.parts.clear();
            let global = j.cluster.is_none() && j.reservation.is_none();
            if global {
                self.enqueue_global(now, id);
            } else {
                self.submit_local(now, id);
            }
            return;
        }
        j.ended_at = Some(now.secs());
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
        self.record_run(id);
        if self.jobs[&id].state == JobState::Completed {
            self.copy_outputs(now, id);
        }
        // A workflow task's reserved slot: the rest of it goes back at the task's end, so
        // that a task ending early leaves no processors idle under its reservation.
        let slot = self.task_of.get(&id.0).and_then(|&(w, i)| {
            self.workflows
                .get(&w)
                .and_then(|wf| wf.tasks.get(i))
                .and_then(|t| t.reservation)
        });
        if let Some(r) = slot.map(ReservationId) {
            if self.reservations.get(&r).is_some_and(|x| x.state.is_live()) {
                self.end_reservation(now, r, ReservationState::Finished);
            }
        }
        self.wake_waiting(now);
    }

    /// Cancels a job in any state but a final one.
    pub fn cancel(&mut self, now: Time, id: JobId) -> Result<(), Refusal> {
        let j = self
            .jobs
            .get(&id)
            .ok_or_else(|| Refusal::not_found_at("id", format!("no job {id}")))?;
        if j.state.is_final() {
            return Err(Refusal::conflict(format!(
                "job {id} is already {}",
                j.state
            )));
        }
        if j.state == JobState::Running {
            self.unmark_requeue(id);
            if let Some(j) = self.jobs.get_mut(&id) {
                j.state_after = Some(JobState::Cancelled);
            }
            self.kill_unended_parts(id);
            return Ok(());
        }
        // The pass this brings must not take the processors of a job past its prediction.
        self.correct_outlived(now);
        self.unqueue(now, id);
        if let Some(j) = self.jobs.get_mut(&id) {
            j.state = JobState::Cancelled;
            j.held = false;
            j.ended_at = Some(now.secs());
            j.reason = Some("cancelled".into());
        }
        self.dirty_jobs.insert(id);
        self.wake_waiting(now);
        Ok(())
    }

    /// Takes a not-yet-running job out of every queue and gives back its reservations and
    /// its charge.
    fn unqueue(&mut self, now: Time, id: JobId) {
        // Its reservations end and its charge comes back through the broker's actions.
        let mut out = Vec::new();
        self.broker.withdraw(now, id, &mut out);
        self.carry_out(now, out);
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
                let _ = self.broker.clusters[k].sched.cancel(now, id);
            }
            if self.is_job_reservation(p.reservation) {
                if let Some(r) = p.reservation {
                    self.end_reservation(now, ReservationId(r), ReservationState::Released);
                }
            }
        }
        if let Some(j) = self.jobs.get_mut(&id) {
            j.parts.clear();
        }
    }

    /// Stops every part of a running job whose process has not ended yet.
    fn kill_unended_parts(&mut self, id: JobId) {
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
                        job: id.0,
                        attempt,
                        external,
                    },
                });
            }
            // A remote part still being submitted is cancelled when its id comes back.
        }
    }

    /// Holds a job that has not started: it is not planned until released.
    pub fn hold(&mut self, now: Time, id: JobId) -> Result<(), Refusal> {
        let j = self
            .jobs
            .get(&id)
            .ok_or_else(|| Refusal::not_found_at("id", format!("no job {id}")))?;
        if !matches!(
            j.state,
            JobState::Pending | JobState::Planned | JobState::Reserved
        ) {
            return Err(Refusal::conflict(format!(
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
    pub fn release(&mut self, now: Time, id: JobId) -> Result<(), Refusal> {
        let j = self
            .jobs
            .get_mut(&id)
            .ok_or_else(|| Refusal::not_found_at("id", format!("no job {id}")))?;
        if !j.held {
            return Err(Refusal::conflict(format!("job {id} is not held")));
        }
        if let Some(why) = self.unadmitted(id) {
            return Err(Refusal::forbidden("reservation", why));
        }
        let Some(j) = self.jobs.get_mut(&id) else {
            return Err(Refusal::not_found_at("id", format!("no job {id}")));
        };
        j.held = false;
        j.reason = None;
        let global = j.cluster.is_none() && j.reservation.is_none();
        self.dirty_jobs.insert(id);
        if self.stop_at_gate(id) {
            self.wake_waiting(now);
        } else if global {
            self.enqueue_global(now, id);
        } else {
            self.submit_local(now, id);
        }
        Ok(())
    }

    /// Stops (SIGSTOP) or continues (SIGCONT) a running job.
    pub fn pause(&mut self, id: JobId, stop: bool) -> Result<(), Refusal> {
        let j = self
            .jobs
            .get_mut(&id)
            .ok_or_else(|| Refusal::not_found_at("id", format!("no job {id}")))?;
        if j.state != JobState::Running {
            return Err(Refusal::conflict(format!(
                "job {id} is {}: only running jobs can be {}",
                j.state,
                if stop { "suspended" } else { "resumed" }
            )));
        }
        let preempted = self
            .broker
            .entry(id)
            .is_some_and(|e| matches!(e.phase, Phase::Suspended { .. }));
        if preempted {
            return Err(Refusal::conflict(format!(
                "job {id} is suspended by a job of a higher priority level: its processors \
                 are that job's now, and it resumes by itself when processors free up"
            )));
        }
        let Some(j) = self.jobs.get_mut(&id) else {
            return Err(Refusal::not_found_at("id", format!("no job {id}")));
        };
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
                        job: id.0,
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
    pub fn requeue(&mut self, now: Time, id: JobId) -> Result<(), Refusal> {
        let j = self
            .jobs
            .get(&id)
            .ok_or_else(|| Refusal::not_found_at("id", format!("no job {id}")))?;
        match j.state {
            JobState::Running => {
                self.check_rerun_budget(now, id)?;
                self.mark_requeue(id);
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
                self.enqueue_global(now, id);
                Ok(())
            }
            s => Err(Refusal::conflict(format!(
                "job {id} is {s}: only running, planned or reserved jobs can be requeued"
            ))),
        }
    }

    // ---------------------------------------------------------------- reservations

    /// Makes an administrative reservation; refuses overlaps, naming what is in the way.
    #[allow(clippy::too_many_arguments)]
    pub fn create_reservation(
        &mut self,
        now: Time,
        owner: &str,
        cluster: &str,
        held: Held,
        start: i64,
        end: i64,
        acl: AclSpec,
        ttl: Option<i64>,
    ) -> Result<ReservationId, Refusal> {
        let k = self
            .cluster_index(cluster)
            .ok_or_else(|| self.unknown_cluster(cluster))?;
        if self.clusters[k].remote {
            return Err(Refusal::invalid(
                "cluster",
                format!(
                    "cluster {cluster} is run by Slurm: make administrative reservations there \
                     (scontrol create reservation); Foresight reads them and plans around them"
                ),
            ));
        }
        self.make_reservation(now, owner, k, held, start, end, acl, ttl)
    }

    /// [`World::create_reservation`] on cluster `k`, of any kind: on a cluster that
    /// schedules itself (Slurm) only the record and the mirror's hold are made here (by
    /// count, never named processors); the caller asks the cluster for it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn make_reservation(
        &mut self,
        now: Time,
        owner: &str,
        k: usize,
        held: Held,
        start: i64,
        end: i64,
        acl: AclSpec,
        ttl: Option<i64>,
    ) -> Result<ReservationId, Refusal> {
        let (procs, processors) = match held {
            Held::Count(n) => (n, Vec::new()),
            Held::These(mut list) => {
                list.sort_unstable();
                list.dedup();
                (list.len() as u32, list)
            }
        };
        let cluster = self.clusters[k].cfg.name.clone();
        let cluster = cluster.as_str();
        let remote = self.clusters[k].remote;
        if remote && !processors.is_empty() {
            return Err(Refusal::invalid(
                "processors",
                format!("cluster {cluster} is run by Slurm, which picks the processors"),
            ));
        }
        let max = self.clusters[k].procs();
        if procs == 0 || procs > max {
            return Err(Refusal::invalid(
                "procs",
                format!("must be 1..={max} (cluster {cluster} has {max})"),
            ));
        }
        crate::state::limits::instant("start", start)?;
        crate::state::limits::instant("end", end)?;
        if end <= start {
            return Err(Refusal::invalid("end", "must be after start"));
        }
        if end <= now.secs() {
            return Err(Refusal::invalid("end", "is in the past"));
        }
        if let Some(t) = ttl {
            if t <= 0 {
                return Err(Refusal::invalid("ttl", "must be positive"));
            }
            crate::state::limits::seconds("ttl", t)?;
        }
        if let Some(&p) = processors.iter().find(|&&p| p >= max) {
            return Err(Refusal::invalid(
                "processors",
                format!("processor {p} does not exist (cluster {cluster} has 0..{max})"),
            ));
        }
        self.check_processors_free(k, &processors, start, end, &acl)?;
        let id = self.broker.next_reservation().0;
        let res = AdminReservation {
            id: ReservationId(id),
            procs,
            window: Interval::new(Time(start), Time(end)),
            acl: self.acl(&acl),
        };
        if let Err(e) = self.broker.clusters[k]
            .sched
            .add_reservation_displacing(res)
        {
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
            let running = self.broker.clusters[k].sched.running();
            // The window is what to move.
            return Err(Refusal::conflict_at(
                "start",
                format!(
                    "{procs} processors of {cluster} are not free during [{start}, {end}): {e}; \
                 in the way: {}",
                    if others.is_empty() {
                        format!("{running} running jobs")
                    } else {
                        others.join(", ")
                    }
                ),
            ));
        }
        self.broker.reserve_ids_below(id + 1);
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
            expires_at: ttl.map(|t| now.secs() + t),
            owner: owner.into(),
        };
        let id = ReservationId(id);
        self.reservations.insert(id, rec);
        self.dirty_reservations.insert(id);
        if !remote {
            // A remote cluster's mirror decides nothing: it only holds the window.
            self.tick_cluster(now, k);
        }
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
    ) -> Result<(), Refusal> {
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
                    return Err(Refusal::conflict_at(
                        "processors",
                        format!(
                            "processor {p} of {name} is held by reservation {} from {} to {}",
                            r.id,
                            crate::state::moment::utc(r.start),
                            crate::state::moment::utc(r.end)
                        ),
                    ));
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
                    return Err(Refusal::conflict_at(
                        "processors",
                        format!(
                            "processor {p} of {name} runs job {} until up to {}, past the start {}",
                            j.id,
                            crate::state::moment::utc(until),
                            crate::state::moment::utc(start)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Commits a tentative reservation.
    pub fn commit_reservation(&mut self, id: ReservationId) -> Result<(), Refusal> {
        let r = self
            .reservations
            .get_mut(&id)
            .ok_or_else(|| Refusal::not_found_at("id", format!("no reservation {id}")))?;
        if r.state != ReservationState::Tentative {
            return Err(Refusal::conflict(format!(
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
    pub fn release_reservation(&mut self, now: Time, id: ReservationId) -> Result<(), Refusal> {
        let r = self
            .reservations
            .get(&id)
            .ok_or_else(|| Refusal::not_found_at("id", format!("no reservation {id}")))?;
        if !r.state.is_live() {
            return Err(Refusal::conflict(format!(
                "reservation {id} is already {}",
                r.state.as_str()
            )));
        }
        self.end_reservation(now, id, ReservationState::Released);
        Ok(())
    }

    fn end_reservation(&mut self, now: Time, id: ReservationId, state: ReservationState) {
        if let Some(k) = self.close_reservation(now, id, state) {
            let _ = self.broker.clusters[k].sched.remove_reservation(now, id);
            self.tick_cluster(now, k);
        }
    }

    /// Records a reservation's end (and releases it on a cluster that schedules itself);
    /// its cluster's index, for the caller to take it out of the local scheduler.
    fn close_reservation(
        &mut self,
        now: Time,
        id: ReservationId,
        state: ReservationState,
    ) -> Option<usize> {
        let k = self.close_reservation_record(id, state)?;
        let r = &self.reservations[&id];
        // At its end a remote cluster ends it itself; releasing it there would cancel a part
        // still finishing inside it (one that started a second or two late).
        let ends_by_itself = state == ReservationState::Finished && Time(r.end) <= now;
        if self.clusters[k].remote && !ends_by_itself {
            self.effects.push(Effect::Release {
                cluster: k,
                reservation: id,
            });
        }
        Some(k)
    }

    /// Records a reservation's end, and nothing more: its cluster's index (`None` when it
    /// had ended already).
    fn close_reservation_record(
        &mut self,
        id: ReservationId,
        state: ReservationState,
    ) -> Option<usize> {
        let r = self.reservations.get_mut(&id)?;
        if !r.state.is_live() {
            return None;
        }
        r.state = state;
        r.expires_at = None;
        let cluster = r.cluster.clone();
        self.dirty_reservations.insert(id);
        self.confirmed_at.remove(&id);
        self.cluster_index(&cluster)
    }

    /// A pass of cluster `k`'s local policy at `now`, after the jobs that outlived their
    /// prediction are corrected: the pass must not take their processors (nor would the
    /// service launch on them, which the simulator cannot see).
    fn tick_cluster(&mut self, now: Time, k: usize) {
        self.correct_outlived(now);
        let mut out = Vec::new();
        self.broker.tick(now, k, &mut out);
        self.carry_out(now, out);
    }

    // ---------------------------------------------------------------- the cycle

    /// The next moment something is due without outside events: a reservation boundary or
    /// expiry.
    pub fn next_due(&self, now: Time) -> Option<Time> {
        let bounds = self
            .broker
            .clusters
            .iter()
            .filter_map(|c| c.sched.next_boundary(now));
        let expiries = self.reservations.values().filter_map(|r| match r.state {
            ReservationState::Tentative => r.expires_at.map(Time),
            ReservationState::Committed => Some(Time(r.start)),
            ReservationState::Active => Some(Time(r.end)),
            _ => None,
        });
        bounds
            .chain(expiries)
            .chain(self.next_plan_end(now))
            .filter(|&x| x > now)
            .min()
    }

    /// How many queued global jobs one cycle plans.
    pub fn plan_depth(&self) -> usize {
        self.broker.planner().plan_depth
    }

    /// Global jobs queued or arrived.
    pub fn has_global_work(&self) -> bool {
        self.broker.has_queued()
    }

    /// One scheduling cycle at `now` (seed 000 §5.4): reservation life cycle, arrivals into
    /// the queue, local ticks, then the planner over every queued global job.
    pub fn cycle(&mut self, now: Time) {
        let plan = self.begin_cycle(now);
        let decisions = plan.decide();
        self.finish_cycle(plan, decisions);
    }

    /// The first half of [`World::cycle`]: reservations expire or activate, budgets reach
    /// the broker, and the broker prepares its planning, which the caller runs off the lock
    /// ([`CyclePlan::decide`]) before [`World::finish_cycle`].
    pub fn begin_cycle(&mut self, now: Time) -> CyclePlan {
        self.correct_outlived(now);
        self.wake_waiting(now);
        self.stats.cycles += 1;
        self.stats.last_cycle_at = Some(now);
        let live: Vec<(ReservationId, ReservationState, Option<Time>, Time, Time)> = self
            .reservations
            .values()
            .filter(|r| r.state.is_live())
            .map(|r| {
                let expires = r.expires_at.map(Time);
                (
                    ReservationId(r.id),
                    r.state,
                    expires,
                    Time(r.start),
                    Time(r.end),
                )
            })
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
        // Budgets may have changed (an administrator, a restart): the broker plans with
        // what each user has left.
        // What their local jobs may still cost is set aside: a global job's reservation
        // never takes the money an admitted local job was admitted with.
        self.recount_dirty();
        self.sync_broker_budgets();
        let mut out = Vec::new();
        let plan = self.broker.begin_cycle(now, &mut out);
        self.carry_out(now, out);
        plan
    }

    /// The second half of [`World::cycle`]: the decisions made on `plan` carried out.
    pub fn finish_cycle(&mut self, plan: CyclePlan, decisions: Vec<Decision>) {
        self.apply_decisions(&plan, decisions);
        self.close_cycle(plan);
    }

    /// Carries out the next slice of the decisions made on `plan`
    /// ([`Broker::apply_decisions`]): the service applies a long list a slice per lock hold,
    /// so that requests are answered between slices.
    pub fn apply_decisions(&mut self, plan: &CyclePlan, decisions: Vec<Decision>) {
        let mut out = Vec::new();
        self.broker.apply_decisions(plan, decisions, &mut out);
        self.carry_out(plan.now(), out);
    }

    /// Ends a cycle whose decisions are all carried out.
    pub fn close_cycle(&mut self, plan: CyclePlan) {
        let now = plan.now();
        let mut out = Vec::new();
        self.broker.close_cycle(plan, &mut out);
        self.carry_out(now, out);
    }

    /// The planner's views of the clusters.
    pub fn views(&self) -> Vec<ClusterView<'_>> {
        self.broker.clusters.iter().map(GridCluster::view).collect()
    }

    /// Carries out the broker's decisions: starts launch, reservations and plans become
    /// records, charges move budgets, and clusters that schedule themselves are asked.
    fn carry_out(&mut self, now: Time, out: Vec<BrokerAction>) {
        #[cfg(test)]
        self.actions.extend(out.iter().cloned());
        for a in out {
            match a {
                BrokerAction::Start {
                    cluster,
                    job,
                    procs,
                    ..
                } => self.start_part(now, cluster, job, procs),
                // Reservation boundaries are due through `next_due`.
                BrokerAction::Wake { .. } | BrokerAction::Ended { .. } => {}
                BrokerAction::Planned { job, start } => {
                    if let Some(j) = self.jobs.get_mut(&job) {
                        j.planned_start = Some(start.secs());
                        j.first_planned_start.get_or_insert(start.secs());
                        j.reason = Some(format!(
                            "planned to start at {}, beyond the lead time",
                            crate::state::moment::utc(start.secs())
                        ));
                        j.state = JobState::Planned;
                        self.dirty_jobs.insert(job);
                    }
                }
                BrokerAction::Waiting { job, reason } => {
                    let text = self.wait_reason(now, &reason);
                    if let Some(j) = self.jobs.get_mut(&job) {
                        j.reason = Some(text);
                        j.planned_start = None;
                        j.state = JobState::Pending;
                        self.dirty_jobs.insert(job);
                    }
                }
                BrokerAction::Ask { job, part } => self.ask(now, job, &part),
                BrokerAction::MoveAsked { job, parts, .. } => self.ask_move(now, job, &parts),
                BrokerAction::Reserved {
                    job, start, parts, ..
                } => self.reserved(now, job, start, &parts),
                BrokerAction::Moved {
                    job, start, parts, ..
                } => {
                    for p in &parts {
                        if let Some(r) = self.reservations.get_mut(&p.reservation) {
                            r.start = p.window.start.secs();
                            r.end = p.window.end.secs();
                            self.dirty_reservations.insert(p.reservation);
                        }
                    }
                    if let Some(j) = self.jobs.get_mut(&job) {
                        j.planned_start = Some(start.secs());
                        self.dirty_jobs.insert(job);
                    }
                }
                // The broker has taken it out of the local scheduler and run a pass.
                BrokerAction::ReservationEnded {
                    cluster,
                    reservation,
                    job,
                    how,
                } => {
                    let state = match how {
                        ReservationEnd::Released => ReservationState::Released,
                        ReservationEnd::Finished => ReservationState::Finished,
                    };
                    if self.suspended_in_rm(cluster, job) {
                        self.close_reservation_record(reservation, state);
                    } else {
                        self.close_reservation(now, reservation, state);
                    }
                }
                BrokerAction::Refused { job, reason } => {
                    self.fail(now, job, reason.to_string());
                }
                BrokerAction::Charge { job, amount, .. } => self.charge(job, amount),
                BrokerAction::Preempted { job, by, how, .. } => self.preempted(job, by, how),
                BrokerAction::Resumed { job, end, parts } => self.resumed(now, job, end, &parts),
                BrokerAction::PreemptAsked {
                    by,
                    cluster,
                    victims,
                } => self.ask_preemption(now, by, cluster, &victims),
                BrokerAction::ResumeAsked { job, cluster } => self.ask_resume(now, job, cluster),
            }
        }
    }

    /// A running global job gives its processors to job `by`, of a higher priority level:
    /// its processes are stopped (their processors are free for `by` at once), or killed
    /// to run again as its next attempt.
    fn preempted(&mut self, id: JobId, by: JobId, how: Preemption) {
        if !self.jobs.contains_key(&id) {
            return;
        }
        let level = self.jobs.get(&by).map_or(0, |b| b.priority);
        let j = self.jobs.get_mut(&id).expect("invariant: found above");
        self.dirty_jobs.insert(id);
        match how {
            Preemption::Requeue => {
                j.reason = Some(format!(
                    "preempted by job {by} (priority {level}): stopped, to run again"
                ));
                self.mark_requeue(id);
                self.kill_unended_parts(id);
            }
            Preemption::Suspend => {
                j.suspended = true;
                j.reason = Some(format!(
                    "preempted by job {by} (priority {level}): suspended until processors \
                     free up"
                ));
                let attempt = j.attempt;
                let parts: Vec<(String, Vec<u32>)> = j
                    .parts
                    .iter_mut()
                    .filter(|p| !p.ended)
                    .map(|p| (p.cluster.clone(), std::mem::take(&mut p.processors)))
                    .collect();
                self.record_preemption(id);
                for (c, processors) in parts {
                    let Some(k) = self.cluster_index(&c) else {
                        continue;
                    };
                    if self.clusters[k].remote {
                        continue; // stopped there already, when the broker asked
                    }
                    // A stopped process uses no processor: they go to the job preempting it.
                    self.clusters[k].free.extend(processors);
                    self.effects.push(Effect::Pause {
                        cluster: k,
                        job: id,
                        attempt,
                        stop: true,
                    });
                }
            }
        }
    }

    /// A suspended job continues, in new reservations on the clusters it ran on, on free
    /// processors there.
    fn resumed(&mut self, now: Time, id: JobId, end: Time, parts: &[ReservedPart]) {
        let Some(user) = self.jobs.get(&id).map(|j| j.user.clone()) else {
            return;
        };
        for p in parts {
            let rid = p.reservation;
            let rec = self.job_reservation(id, &user, p, ReservationState::Active);
            self.reservations.insert(rid, rec);
            self.dirty_reservations.insert(rid);
            if self.clusters[p.cluster].remote {
                // Resumed there already, when the broker asked; it runs on in the
                // reservation it was submitted to, the new one is the mirror's.
                let name = self.clusters[p.cluster].cfg.name.clone();
                if let Some(part) = self
                    .jobs
                    .get_mut(&id)
                    .and_then(|j| j.parts.iter_mut().find(|q| q.cluster == name && !q.ended))
                {
                    part.reservation = Some(rid.0);
                }
                continue;
            }
            let taken: Vec<u32> = self.clusters[p.cluster]
                .free
                .iter()
                .take(p.procs as usize)
                .copied()
                .collect();
            for q in &taken {
                self.clusters[p.cluster].free.remove(q);
            }
            let name = self.clusters[p.cluster].cfg.name.clone();
            let Some(j) = self.jobs.get_mut(&id) else {
                return;
            };
            let attempt = j.attempt;
            if let Some(part) = j.parts.iter_mut().find(|q| q.cluster == name && !q.ended) {
                part.processors = taken;
                part.reservation = Some(rid.0);
            }
            self.effects.push(Effect::Pause {
                cluster: p.cluster,
                job: id,
                attempt,
                stop: false,
            });
        }
        if let Some(j) = self.jobs.get_mut(&id) {
            j.suspended = false;
            j.reason = None;
            j.planned_start = j.planned_start.or(Some(now.secs()));
            let _ = end;
            self.dirty_jobs.insert(id);
        }
        self.record_preemption(id);
    }

    /// Writes down, in job `id`'s record, what preemption did to it as the broker has it
    /// now (stopped since when, with how much left; time stopped before), so that a restart
    /// puts it back as it was ([`World::adopt_global`]).
    fn record_preemption(&mut self, id: JobId) {
        let rec = match self.broker.entry(id).map(|e| &e.phase) {
            Some(Phase::Suspended {
                since,
                left,
                suspended,
                ..
            }) => PreemptionRecord {
                since: Some(since.secs()),
                left: left.as_secs(),
                suspended: suspended.as_secs(),
            },
            Some(Phase::Running { suspended, .. }) => PreemptionRecord {
                since: None,
                left: 0,
                suspended: suspended.as_secs(),
            },
            _ => return,
        };
        if let Some(j) = self.jobs.get_mut(&id) {
            j.preemption = Some(rec);
            self.dirty_jobs.insert(id);
        }
    }

    /// A wait reason in the service's words.
    fn wait_reason(&self, now: Time, reason: &WaitReason) -> String {
        match reason {
            WaitReason::ReservationRefused { detail, until, .. } => format!(
                "{detail}; all parts released, planned again in {} s",
                (*until - now).as_secs().max(0)
            ),
            WaitReason::ClustersDown { procs, down } => format!(
                "{procs} processors asked, more than the clusters up have while {} unavailable; \
                 waiting for it",
                down.iter()
                    .map(|&k| self.clusters[k].cfg.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            WaitReason::LostCluster(k) => format!(
                "cluster {} became unavailable ({}); planned again",
                self.clusters[*k].cfg.name,
                self.clusters[*k]
                    .unavailable_reason
                    .as_deref()
                    .unwrap_or("unreachable")
            ),
            other => other.to_string(),
        }
    }

    /// Phase one on a cluster that schedules itself: a tentative reservation record, and
    /// the request to the cluster (its answer goes to [`World::reservation_answered`]).
    fn ask(&mut self, now: Time, id: JobId, part: &ReservedPart) {
        let Some(j) = self.jobs.get(&id) else { return };
        let user = j.user.clone();
        let k = part.cluster;
        let (start, end) = (part.window.start.secs(), part.window.end.secs());
        let rid = part.reservation;
        let cluster = self.clusters[k].cfg.name.clone();
        let mut rec = self.job_reservation(id, &user, part, ReservationState::Tentative);
        rec.expires_at = Some((now + Dur(60)).secs());
        self.reservations.insert(rid, rec);
        self.dirty_reservations.insert(rid);
        let request = ReserveRequest {
            id: rid.0,
            start,
            end,
            procs: part.procs,
        };
        // Over suspended parts of ours too when it starts now: a co-allocated victim's part
        // on another cluster than the one preempted for frees its cores there.
        let over = self.preempting.contains(&id) || (start <= now.secs() && self.suspended_on(k));
        self.effects.push(if over {
            Effect::ReserveOverSuspended {
                cluster: k,
                request,
            }
        } else {
            Effect::Reserve {
                cluster: k,
                request,
            }
        });
        if let Some(j) = self.jobs.get_mut(&id) {
            j.state = JobState::Planned;
            j.planned_start = Some(start);
            j.first_planned_start.get_or_insert(start);
            j.reason = Some(format!(
                "reserving {cluster} from {} (phase one: tentative)",
                crate::state::moment::utc(start)
            ));
            self.dirty_jobs.insert(id);
        }
    }

    /// The record of a global job's reservation for one of its parts.
    fn job_reservation(
        &self,
        id: JobId,
        user: &str,
        p: &ReservedPart,
        state: ReservationState,
    ) -> ReservationRecord {
        ReservationRecord {
            id: p.reservation.0,
            kind: "job".into(),
            cluster: self.clusters[p.cluster].cfg.name.clone(),
            procs: p.procs,
            processors: vec![],
            start: p.window.start.secs(),
            end: p.window.end.secs(),
            acl: AclSpec {
                job: Some(id.0),
                ..AclSpec::default()
            },
            state,
            expires_at: None,
            owner: user.to_string(),
        }
    }

    /// Phase two done: every part of a global job is held. Its reservations are committed,
    /// its parts bound to them, and parts on clusters that schedule themselves submitted.
    fn reserved(&mut self, now: Time, id: JobId, start: Time, parts: &[ReservedPart]) {
        let Some(user) = self.jobs.get(&id).map(|j| j.user.clone()) else {
            return;
        };
        for p in parts {
            let rid = p.reservation;
            let fresh = self.job_reservation(id, &user, p, ReservationState::Committed);
            let rec = self.reservations.entry(rid).or_insert(fresh);
            rec.state = ReservationState::Committed;
            rec.expires_at = None;
            self.dirty_reservations.insert(rid);
        }
        let _ = now;
        let records: Vec<PartRecord> = parts
            .iter()
            .map(|p| PartRecord {
                cluster: self.clusters[p.cluster].cfg.name.clone(),
                procs: p.procs,
                reservation: Some(p.reservation.0),
                speed: self.chosen_speed(p),
                ..PartRecord::default()
            })
            .collect();
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        j.state = JobState::Reserved;
        j.planned_start = Some(start.secs());
        j.first_planned_start.get_or_insert(start.secs());
        j.reason = None;
        j.parts = records;
        self.dirty_jobs.insert(id);
        self.submit_remote_parts(id);
        self.stage_ahead(now, id);
    }

    /// Starts copying a reserved job's input to each cluster it will run on that the
    /// broker schedules itself, now rather than at its start: the planner placed its
    /// slots there after the transfer, so the copy runs in that time instead of after it.
    /// (Slurm parts are copied before they are submitted, which is also at reservation.)
    fn stage_ahead(&mut self, now: Time, id: JobId) {
        let Some(j) = self.jobs.get(&id) else { return };
        let attempt = j.attempt;
        let mut copies = Vec::new();
        for (index, p) in j.parts.iter().enumerate() {
            let Some(k) = self.cluster_index(&p.cluster) else {
                continue;
            };
            let begun = j
                .staging
                .iter()
                .any(|s| s.cluster == p.cluster && s.attempt == attempt);
            if self.clusters[k].remote || p.ended || begun {
                continue;
            }
            let Some(spec) = self.part_spec(id, index, Vec::new()) else {
                continue;
            };
            let stage = crate::state::staging::copies(j, &p.cluster, &spec.cwd);
            if !stage.is_empty() {
                copies.push((k, stage, spec.unix_user));
            }
        }
        for (k, stage, unix_user) in copies {
            self.staging_began(now, k, id, attempt);
            self.effects.push(Effect::StageAhead {
                cluster: k,
                job: id.0,
                attempt,
                stage,
                unix_user,
            });
        }
    }

    /// A copy made ahead of a reserved job's start ended: recorded. A part launched
    /// meanwhile is waiting for it and goes on (or fails) through [`World::staged`]; a
    /// copy that failed ahead is made again at the start, and only that failure fails it.
    pub fn staged_ahead(
        &mut self,
        now: Time,
        k: usize,
        id: JobId,
        attempt: u32,
        result: &Result<(), String>,
    ) {
        let name = self.clusters[k].cfg.name.clone();
        let launched = self.jobs.get(&id).is_some_and(|j| {
            j.attempt == attempt
                && j.state == JobState::Running
                && j.parts
                    .iter()
                    .any(|p| p.cluster == name && !p.processors.is_empty())
        });
        // A launched part's wait ends through `staged`, which records the end itself.
        if !launched {
            self.staging_ended(now, &name, id, attempt, result);
        }
    }

    // ---------------------------------------------------------------- restart

    /// Parts whose start was deferred when the service stopped, (cluster, job, procs) in id
    /// order: launched now if their processors are free, else deferred again until the jobs
    /// holding them end.
    fn start_again(&mut self, now: Time, parts: Vec<(usize, JobId, u32)>) {
        for (k, id, procs) in parts {
            self.start_part(now, k, id, procs);
        }
    }

    /// Rebuilds the derived state (local schedulers, queue) from stored records after a
    /// start. Running jobs are put back as running; the caller then asks the executors
    /// about them. Returns the running jobs' parts to re-adopt: (cluster, job, attempt).
    pub fn restore(
        &mut self,
        now: Time,
        jobs: Vec<JobRecord>,
        reservations: Vec<ReservationRecord>,
        users: Vec<UserRecord>,
    ) -> Vec<(usize, JobId, u32)> {
        for u in users {
            self.add_user(u);
        }
        for mut r in reservations {
            self.broker.reserve_ids_below(r.id + 1);
            if r.state.is_live() {
                let k = self.cluster_index(&r.cluster);
                let expired = Time(r.end) <= now
                    || r.state == ReservationState::Tentative
                        && r.expires_at.is_some_and(|e| Time(e) <= now);
                let remote = k.is_some_and(|k| self.clusters[k].remote);
                // A remote reservation is mirrored at the cluster's first snapshot; one still
                // tentative lost its phase one with the service, and is released there.
                let added = !expired
                    && k.is_some_and(|k| {
                        if remote {
                            return r.state != ReservationState::Tentative;
                        }
                        let acl = self.acl(&r.acl);
                        self.broker.clusters[k]
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
                    r.state = if Time(r.end) <= now {
                        ReservationState::Finished
                    } else {
                        ReservationState::Expired
                    };
                    self.dirty_reservations.insert(ReservationId(r.id));
                }
            }
            self.reservations.insert(ReservationId(r.id), r);
        }
        let mut adopt = Vec::new();
        // Parts whose start was deferred when the service stopped: (cluster, job, procs).
        let mut again = Vec::new();
        for mut j in jobs {
            prediction::migrate_prediction(&mut j);
            if j.requeue_pending && j.state == JobState::Running {
                self.requeue.insert(JobId(j.id));
            }
            self.jobs.insert(JobId(j.id), j);
        }
        self.refresh_credentials();
        // Running jobs first, so that their processors are taken before any queued job is
        // placed (a backfilled running job may have a later id than a waiting one); then
        // reserved jobs, then the queues in id order.
        let mut ids: Vec<(u8, JobId)> = self
            .jobs
            .values()
            .map(|j| {
                let phase = match j.state {
                    JobState::Running => 0,
                    JobState::Reserved => 1,
                    _ => 2,
                };
                (phase, JobId(j.id))
            })
            .collect();
        ids.sort_unstable();
        for (phase, id) in ids {
            if phase == 2 {
                // Every running and reserved job holds its processors again: the deferred
                // parts before any queued job.
                self.start_again(now, std::mem::take(&mut again));
            }
            let j = self.jobs[&id].clone();
            if j.state.is_final() {
                // Its outputs were being copied back when the service stopped: again.
                if j.output_staging
                    .as_ref()
                    .is_some_and(|s| s.ended_at.is_none())
                {
                    self.copy_outputs_again(id);
                }
                continue;
            }
            let global = j.cluster.is_none() && j.reservation.is_none();
            match j.state {
                JobState::Running => {
                    let cred = self.cred(&j.user, &j.cred);
                    // Stopped for a job of a higher level: its processes are kept (and
                    // followed), its processors are not its own until it resumes.
                    let stopped =
                        global && j.preemption.as_ref().is_some_and(|p| p.since.is_some());
                    for p in j.parts.iter().filter(|p| !p.ended) {
                        let Some(k) = self.cluster_index(&p.cluster) else {
                            continue;
                        };
                        if self.clusters[k].remote {
                            continue; // followed from the cluster's snapshots
                        }
                        if stopped {
                            adopt.push((k, id, j.attempt));
                            continue;
                        }
                        // Being killed to run again: it is not planned as running (its
                        // processors are its successor's), but they stay out of the free
                        // ones until it is really gone, so nothing starts beside it.
                        if j.requeue_pending {
                            for q in &p.processors {
                                self.clusters[k].free.remove(q);
                            }
                            adopt.push((k, id, j.attempt));
                            continue;
                        }
                        // A part without processors was never launched: its start was
                        // deferred while its processors were still held (a sibling part
                        // launched). It is planned as running and deferred again below.
                        let deferred = p.processors.is_empty();
                        let domain = match p.reservation {
                            Some(r)
                                if self
                                    .reservations
                                    .get(&ReservationId(r))
                                    .is_some_and(|r| r.state.is_live()) =>
                            {
                                Domain::Reservation(ReservationId(r))
                            }
                            _ => Domain::Pool,
                        };
                        let walltime = match (p.reservation, global) {
                            (Some(r), true) => self
                                .reservations
                                .get(&ReservationId(r))
                                .map_or(j.walltime, |r| r.end - r.start),
                            _ => j.walltime,
                        };
                        let job = Job::new(id, Time(j.submitted_at), p.procs, Dur(walltime))
                            .with_cred(cred)
                            .with_prediction(if global {
                                prediction::part_plan(&j, walltime)
                            } else {
                                prediction::restored_plan(&j)
                            });
                        let start = Time(j.started_at.unwrap_or(now.secs()));
                        let _ = self.broker.clusters[k]
                            .sched
                            .restore_running(now, job, start, domain);
                        if deferred {
                            again.push((k, id, p.procs));
                            continue;
                        }
                        for q in &p.processors {
                            self.clusters[k].free.remove(q);
                        }
                        adopt.push((k, id, j.attempt));
                    }
                    if global {
                        self.adopt_global(id, false);
                    }
                }
                JobState::Reserved => {
                    let ok = j.parts.iter().all(|p| {
                        p.reservation
                            .and_then(|r| self.reservations.get(&ReservationId(r)))
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
                        self.enqueue_global(now, id);
                        continue;
                    }
                    let cred = self.cred(&j.user, &j.cred);
                    // Its reservations have begun and it is not running: the broker had
                    // started it and its launch was deferred until its processors were let go
                    // of (or the start fell in the downtime). Deferred again, not planned
                    // again: it keeps its reservations, its charge and its place, and starts
                    // as soon as its processors are free. Submitted into its reservation
                    // instead, it would never fit the rest of the window, and stay reserved.
                    let due = global
                        && j.parts.iter().all(|p| {
                            self.cluster_index(&p.cluster)
                                .is_some_and(|k| !self.clusters[k].remote)
                                && p.reservation
                                    .and_then(|r| self.reservations.get(&ReservationId(r)))
                                    .is_some_and(|r| Time(r.start) <= now)
                        });
                    for p in &j.parts {
                        let (Some(k), Some(r)) = (self.cluster_index(&p.cluster), p.reservation)
                        else {
                            continue;
                        };
                        if self.clusters[k].remote {
                            continue;
                        }
                        let res = &self.reservations[&ReservationId(r)];
                        let (start, length) = (Time(res.start), Dur(res.end - res.start));
                        let job =
                            Job::new(id, Time(j.submitted_at), p.procs, length).with_cred(cred);
                        if due {
                            let job =
                                job.with_prediction(prediction::part_plan(&j, length.as_secs()));
                            let _ = self.broker.clusters[k].sched.restore_running(
                                now,
                                job,
                                start,
                                Domain::Reservation(ReservationId(r)),
                            );
                            again.push((k, id, p.procs));
                        } else {
                            let job = job.in_reservation(ReservationId(r), false);
                            let _ = self.broker.clusters[k].sched.submit(job);
                        }
                    }
                    if global {
                        self.adopt_global(id, due);
                    }
                }
                _ if j.held => {}
                _ if j.links.as_ref().is_some_and(|l| l.waiting) => {
                    self.waiting.insert(id);
                }
                _ if global => self.enqueue_global(now, id),
                // Queued in a cluster that schedules itself: reconciled at its snapshot.
                _ if j.parts.iter().any(|p| {
                    self.cluster_index(&p.cluster)
                        .is_some_and(|k| self.clusters[k].remote)
                }) => {}
                _ => self.submit_local(now, id),
            }
        }
        self.start_again(now, again);
        self.wake_waiting(now);
        let ids: Vec<JobId> = self.jobs.keys().copied().collect();
        for id in ids {
            self.recount(id);
        }
        adopt
    }
}

pub(crate) mod accounts;
mod credentials;
mod gate;
mod outputs;
mod prediction;
mod preempt_remote;
mod remote;
mod wiki;
mod workflow;

pub use gate::display_id;
pub use wiki::WAITING_FOR_WIKI;
pub use workflow::link_tasks;

#[cfg(test)]
mod charge_tests;
#[cfg(test)]
mod credential_tests;
#[cfg(test)]
mod preempt_remote_tests;
#[cfg(test)]
mod same_decisions;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod wiki_rm_tests;
