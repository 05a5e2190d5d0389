//! The service's state and every change to it, under one lock: clusters with their local
//! schedulers, jobs, reservations, users. Nothing here does I/O: a changed record is marked
//! by its [`Table`] (the caller writes it to the store) and effects are queued (the caller
//! runs processes).

use crate::config::Config;
use crate::state::refusal::Refusal;
use crate::state::table::Table;
use foresight_core::broker::{Broker, GridCluster};
use foresight_core::grid::PlannerConfig;
use foresight_core::licence::LicencePool;
use foresight_core::reservation::Acl;
use foresight_core::time::{Dur, Time};
use foresight_core::{
    AccountId, ClassId, ClusterId, Credentials, GroupId, JobId, QosId, ReservationId, UserId,
};
use foresight_rm::LaunchSpec;
use foresight_store::CredentialNames;
use foresight_store::{AclSpec, JobState};
use foresight_store::{JobRecord, ReservationRecord, UserRecord};
use std::collections::{BTreeMap, HashMap};

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
    /// Every job, by id; changed rows are written at the next flush.
    pub jobs: Table<JobId, JobRecord>,
    /// Every reservation, by id.
    pub reservations: Table<ReservationId, ReservationRecord>,
    /// Users by name.
    pub users: Table<String, UserRecord>,
    /// The grid broker: the clusters' schedulers and the lifecycle of global jobs, the same
    /// state machine the grid simulator runs.
    pub broker: Broker,
    names: HashMap<(u8, String), u32>,
    /// What each user's admitted local jobs may still cost, kept as jobs change.
    pub(crate) uncharged: crate::state::world::accounts::Uncharged,
    /// Each user as the store last had them (loaded, taken in from the shared database, or
    /// written): what a write's change is made from, so that it writes only what changed
    /// here ([`foresight_store::UserChange`]).
    pub(crate) users_base: BTreeMap<String, UserRecord>,
    /// To do outside the lock.
    pub effects: Vec<Effect>,
    /// For `/metrics`.
    pub stats: Stats,
    /// Running jobs being stopped, requeued, or started late (`lifecycle.rs`).
    in_flight: lifecycle::InFlight,
    /// How local jobs are launched (from the configuration).
    launch: lifecycle::LaunchSettings,
    /// What was asked of clusters that schedule themselves and not yet seen answered
    /// (`remote.rs`).
    asked: remote::Asked,
    /// Jobs waiting at the gate (`gate.rs`).
    gate: gate::Gate,
    /// The configured licence pools (`[[licence]]`), for admission.
    pub(crate) licences: Vec<LicencePool>,
    /// Runtime prediction's statistics and predictors (`prediction.rs`).
    pub(crate) prediction: prediction::Predictions,
    /// Workflows by id (`workflow.rs`).
    pub workflows: Table<u64, foresight_store::WorkflowRecord>,
    /// Which workflow task each task's job is: (workflow, task index).
    task_of: HashMap<u64, (u64, usize)>,
    /// Every broker action carried out, in order (tests compare them with the simulator's).
    #[cfg(test)]
    actions: Vec<foresight_core::broker::BrokerAction>,
}

impl World {
    /// A world with the configured clusters and nothing else.
    pub fn new(cfg: &Config) -> World {
        let mut grid = Vec::new();
        let clusters = cfg
            .cluster
            .iter()
            .map(|c| {
                let kind = c.cluster_kind();
                grid.push(GridCluster {
                    // A cluster Maui schedules through WIKI takes no global job.
                    available: kind.placed_here(),
                    self_scheduled: kind.schedules_itself(),
                    granularity: kind.granularity(),
                    ..c.spec
                        .clone()
                        .with_defaults(cfg.predict, cfg.backfill_order, cfg.correction)
                        .grid_cluster(c.procs)
                });
                Cluster {
                    cfg: c.clone(),
                    free: (0..c.procs).collect(),
                    unavailable_reason: kind.unavailable_at_start(),
                    kind,
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
            let on: Vec<ClusterId> = ClusterId::all(broker.clusters.len())
                .filter(|&k| pool.clusters.contains(&broker.clusters[k].name))
                .collect();
            broker.add_licence_pool(&pool.name, pool.count, &on);
        }
        World {
            clusters,
            jobs: Table::default(),
            reservations: Table::default(),
            users: Table::default(),
            broker,
            names: HashMap::new(),
            in_flight: Default::default(),
            uncharged: Default::default(),
            users_base: BTreeMap::new(),
            effects: Vec::new(),
            stats: Stats::default(),
            launch: lifecycle::LaunchSettings {
                grace: cfg.grace_seconds,
                output_dir: cfg.data_dir.join("output"),
                uploads_dir: cfg.data_dir.join("grid-uploads"),
                unix_users: cfg.unix_user.clone(),
                max_output_bytes: cfg.max_output_bytes,
                root_jobs: cfg.identity.root_jobs,
            },
            asked: remote::Asked {
                // Checked with the configuration; the default names otherwise.
                naming: foresight_rm::slurm::Naming::instance(&cfg.instance).unwrap_or_default(),
                ..Default::default()
            },
            gate: Default::default(),
            prediction: prediction::Predictions {
                predictors: cfg
                    .cluster
                    .iter()
                    .map(|c| c.predict.unwrap_or(cfg.predict))
                    .collect(),
                global: cfg.predict,
                ..Default::default()
            },
            workflows: Table::default(),
            task_of: HashMap::new(),
            licences: cfg.licence.clone(),
            #[cfg(test)]
            actions: Vec::new(),
        }
    }

    // ---------------------------------------------------------------- users and names

    /// Adds a user (from the store or the API), as stored.
    pub fn add_user(&mut self, u: UserRecord) {
        self.users_base.insert(u.name.clone(), u.clone());
        self.users.load(u.name.clone(), u);
    }

    pub(crate) fn intern(&mut self, kind: u8, name: &str) -> u32 {
        let next = self.names.len() as u32 + 1;
        *self.names.entry((kind, name.to_string())).or_insert(next)
    }

    fn cred(&mut self, user: &str, cred: &CredentialNames) -> Credentials {
        let mut ids = [0u32; 4];
        for (k, c) in cred.by_kind().into_iter().enumerate() {
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
                (&spec.groups, &j.cred.group),
                (&spec.accounts, &j.cred.account),
                (&spec.classes, &j.cred.class),
                (&spec.qos, &j.cred.qos),
            ]
            .iter()
            .any(|(list, c)| c.as_ref().is_some_and(|c| list.contains(c)))
    }

    // ---------------------------------------------------------------- sizes

    /// Index of a cluster by name.
    pub fn cluster_index(&self, name: &str) -> Option<ClusterId> {
        self.clusters
            .iter()
            .position(|c| c.cfg.name == name)
            .map(ClusterId)
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
            stdout: self.launch.output_dir.join(out("out")),
            stderr: self.launch.output_dir.join(out("err")),
            walltime_secs: part
                .reservation
                .and_then(|r| self.reservations.get(&ReservationId(r)))
                .filter(|r| r.kind == "job")
                .map_or(j.walltime, |r| r.end - r.start)
                .max(1) as u64,
            grace_secs: self.launch.grace,
            unix_user: Some(self.unix_account(&j.user).0),
            max_output_bytes: self.launch.max_output_bytes,
            service_output: true,
        })
    }

    // ---------------------------------------------------------------- reservations

    // ---------------------------------------------------------------- the cycle

    // ---------------------------------------------------------------- restart
}

pub(crate) mod accounts;
mod admission;
mod cluster;
mod control;
mod credentials;
mod cycle;
mod effect;
mod gate;
mod lifecycle;
pub(crate) mod local_identity;
mod outputs;
mod prediction;
mod preempt_remote;
mod remote;
mod remote_mirror;
mod remote_sync;
mod reservations;
mod restore;
mod wiki;
mod workflow;

pub use cluster::{Cluster, Held};
pub use effect::{Effect, MoveStep};
pub use gate::display_id;
pub(crate) use outputs::UPLOADED;
pub use reservations::SavedWindow;
pub use wiki::WAITING_FOR_WIKI;
pub use workflow::link_tasks;

#[cfg(test)]
mod charge_tests;
#[cfg(test)]
mod credential_tests;
#[cfg(test)]
mod gate_tests;
#[cfg(test)]
mod preempt_remote_tests;
#[cfg(test)]
mod same_decisions;
#[cfg(test)]
mod start_retry_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod wiki_rm_tests;
#[cfg(test)]
mod workflow_tests;
