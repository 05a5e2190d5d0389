//! The running service: the world under its lock, the store, the executors, and the tasks
//! that drive them (scheduling cycle, process reports).

pub(crate) mod data_dir;
pub(crate) mod dispatcher;
pub(crate) mod staging;
pub(crate) mod wiki_rm;
mod workflows;

use crate::config::Config;
use crate::state::plan_view::{self, Visible};
use crate::state::refusal::Refusal;
use crate::state::world::{Effect, World};
use foresight_api::{
    ClusterEstimate, ClusterInfo, ClusterPlan, Estimate, EstimateRequest, Explanation, JobState,
    JobView, PartView, ReservationView, SubmitJob, UserView,
};
use foresight_core::broker::{GridCluster, Phase, Preemption};
use foresight_core::grid::{Decision, GlobalJob, GridPlan, PlannerConfig};
use foresight_core::scheduler::JobStatus;
use foresight_core::select::Criterion;
use foresight_core::time::{Dur, Time};
use foresight_core::{JobId, ReservationId, UserId};
use foresight_rm::slurm::{CommandOutput, CommandRunner, Invocation, SystemRunner};
use foresight_rm::{
    Adoption, LocalCluster, LocalExecutor, Outcome, ResourceManager, SlurmClient, SlurmCluster,
    SlurmError, Submission,
};
use foresight_store::{ArrayTask, JobRecord, Links, Store, UserRecord};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::Notify;

/// Seconds since the Unix epoch: the service's `now`.
pub fn unix_now() -> Time {
    Time(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64),
    )
}

/// SHA-256 of a token, hex: what the store keeps instead of the token.
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// A fresh random token.
pub fn new_token() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 24];
    rand::thread_rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// Latency samples for `/metrics`.
#[derive(Debug, Default)]
pub struct Timings {
    /// Submit handling, seconds (last 4096).
    pub submit: Vec<f64>,
    /// Submissions accepted.
    pub submitted: u64,
}

/// Counts the commands run against Slurm, for `/metrics`: the cost of following a cluster
/// must stay bounded (a fixed number per snapshot, a few per reserved job).
#[derive(Debug)]
struct CountingRunner {
    inner: SystemRunner,
    count: Arc<AtomicU64>,
}

#[async_trait::async_trait]
impl CommandRunner for CountingRunner {
    async fn run(&self, inv: &Invocation) -> Result<CommandOutput, SlurmError> {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.inner.run(inv).await
    }
}

/// The service.
pub struct Service {
    world: Mutex<World>,
    /// Users by token hash, for authentication without the state's lock: refreshed from
    /// the users each write to the store carries, so it is as current as what is on disk.
    tokens: std::sync::RwLock<HashMap<String, UserRecord>>,
    pub(crate) store: Arc<dyn Store>,
    /// Each cluster's resource manager, in configuration order.
    managers: Vec<Arc<dyn ResourceManager>>,
    /// Commands run against Slurm clusters so far.
    pub slurm_commands: Arc<AtomicU64>,
    pub(crate) wake: Notify,
    flush_lock: tokio::sync::Mutex<()>,
    /// Its configuration.
    pub cfg: Config,
    /// For `/metrics`.
    pub timings: Mutex<Timings>,
    closing: AtomicBool,
    inserts: tokio::sync::mpsc::UnboundedSender<InsertRequest>,
    /// This site's dispatcher, in dispatcher mode.
    pub(crate) dispatcher: Option<Arc<crate::runtime::dispatcher::Dispatcher>>,
    /// Copies of reserved jobs' inputs running ahead of their start, by (job, attempt,
    /// cluster): a launch meanwhile waits for its copy's outcome.
    ahead: Mutex<HashMap<(u64, u32, usize), AheadCopy>>,
}

/// The outcome of a copy made ahead of a job's start, once it is known.
type AheadCopy = tokio::sync::watch::Receiver<Option<Result<(), String>>>;

type InsertRequest = (
    Vec<JobRecord>,
    tokio::sync::oneshot::Sender<Result<Vec<u64>, String>>,
);

/// Group commit: every submission waiting while a transaction is on its way to disk goes
/// into the next one, so one fsync acknowledges many jobs; each is still durable before its
/// caller hears of it.
async fn insert_writer(
    store: Arc<dyn Store>,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<InsertRequest>,
) {
    while let Some(first) = rx.recv().await {
        let mut pending = vec![first];
        let mut count = pending[0].0.len();
        while count < 20_000 {
            match rx.try_recv() {
                Ok(more) => {
                    count += more.0.len();
                    pending.push(more);
                }
                Err(_) => break,
            }
        }
        let all: Vec<JobRecord> = pending
            .iter()
            .flat_map(|(r, _)| r.iter().cloned())
            .collect();
        match store.insert_jobs(&all).await {
            Ok(ids) => {
                let mut ids = ids.into_iter();
                for (records, reply) in pending {
                    let mine: Vec<u64> = ids.by_ref().take(records.len()).collect();
                    let _ = reply.send(Ok(mine));
                }
            }
            Err(e) => {
                for (_, reply) in pending {
                    let _ = reply.send(Err(e.to_string()));
                }
            }
        }
    }
}

type ManagerCall =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), foresight_rm::RmError>> + Send>>;

/// The shortest time between two scheduling cycles.
const MIN_CYCLE_GAP: Duration = Duration::from_millis(20);

/// Decisions of a cycle carried out per hold of the state's lock. A 10 000-job cycle's
/// decisions took about 160 ms in one hold; 256 of them take a few milliseconds.
const DECISIONS_PER_LOCK: usize = 256;

impl Service {
    /// Opens the store, restores the state, re-adopts running jobs. Returns the service and
    /// the admin token when one was just created.
    pub async fn open(cfg: Config) -> anyhow::Result<(Arc<Service>, Option<String>)> {
        let dir = &cfg.data_dir;
        std::fs::create_dir_all(dir.join("output"))
            .map_err(|e| anyhow::anyhow!("creating data dir {}: {e}", dir.display()))?;
        let (store, dispatcher) = crate::runtime::dispatcher::open_store(&cfg).await?;
        let exe = std::env::current_exe()?;
        let mut executors = Vec::new();
        let mut receivers = Vec::new();
        let mut managers: Vec<Arc<dyn ResourceManager>> = Vec::new();
        let slurm_commands = Arc::new(AtomicU64::new(0));
        for c in &cfg.cluster {
            if c.is_slurm() {
                let conf = c.slurm_conf.clone().unwrap_or_default();
                let runner = CountingRunner {
                    inner: SystemRunner::default(),
                    count: slurm_commands.clone(),
                };
                let mut client = SlurmClient::new(conf, Arc::new(runner));
                if let Some(u) = &c.slurm_user {
                    client = client.acting_as(u.clone());
                }
                let naming = foresight_rm::slurm::Naming::instance(&cfg.instance)
                    .map_err(|e| anyhow::anyhow!("instance: {e}"))?;
                let cluster = SlurmCluster::new(client, c.partition.clone(), c.account.clone())
                    .map_err(|e| anyhow::anyhow!("cluster {}: {e}", c.name))?
                    .with_naming(naming);
                managers.push(Arc::new(cluster));
                executors.push(None);
                continue;
            }
            if c.kind == "wiki" {
                managers.push(Arc::new(crate::runtime::wiki_rm::build(c, &cfg.instance)?));
                executors.push(None);
                continue;
            }
            let (exec, rx) = LocalExecutor::confined(
                dir.join("clusters").join(&c.name),
                vec![exe.clone().into_os_string(), "supervise".into()],
                cfg.confinement,
            )?;
            tracing::info!(
                cluster = %c.name,
                "local jobs are confined by {}",
                exec.confinement()
            );
            managers.push(Arc::new(LocalCluster::new(
                c.name.clone(),
                c.procs,
                exec.clone(),
            )));
            executors.push(Some(exec));
            receivers.push((managers.len() - 1, rx));
        }
        let now = unix_now();
        let mut world = World::new(&cfg);
        let mut users = store.load_users().await?;
        let mut created = None;
        for u in &cfg.user {
            if !users.iter().any(|x| x.name == u.name) {
                let rec = UserRecord {
                    name: u.name.clone(),
                    token_hash: u.token_sha256.to_lowercase(),
                    admin: u.admin,
                    budget: u.budget,
                    spent: 0.0,
                    unix_user: u.unix_user.clone(),
                    ..Default::default()
                };
                store.insert_user(&rec).await?;
                users.push(rec);
            }
        }
        if !users.iter().any(|u| u.admin) {
            let token = new_token();
            let rec = UserRecord {
                name: "admin".into(),
                token_hash: token_hash(&token),
                admin: true,
                budget: None,
                spent: 0.0,
                unix_user: None,
                ..Default::default()
            };
            store.insert_user(&rec).await?;
            users.push(rec);
            write_secret(&dir.join("admin.token"), &token)?;
            created = Some(token);
        }
        let jobs = store.load_jobs(false).await?;
        let workflows = store.load_workflows().await?;
        // A workflow stored just before a crash may have tasks whose dependencies were not
        // written yet: set them before any task can be queued.
        let mut jobs: std::collections::BTreeMap<u64, JobRecord> =
            jobs.into_iter().map(|j| (j.id, j)).collect();
        for wf in &workflows {
            crate::state::world::link_tasks(&mut jobs, wf);
        }
        let jobs: Vec<JobRecord> = jobs.into_values().collect();
        let reservations = store.load_reservations().await?;
        // The statistics of runtime prediction first: jobs queued again at restore are
        // predicted from them.
        world.restore_runs(store.load_runs(World::runs_kept()).await?, &jobs);
        // The workflows first: a task's working directory, and the files a completed task
        // was copying along its edges when the service stopped, depend on them.
        for wf in workflows {
            world.add_workflow(wf);
        }
        let adopt = world.restore(now, jobs, reservations, users);
        // A WIKI cluster's adapter keeps its book in memory: give it back.
        for (k, c) in cfg.cluster.iter().enumerate() {
            if c.kind == "wiki" {
                let (held, parts) = world.wiki_book(k);
                managers[k].restore_book(&held, &parts);
            }
        }
        for (k, job, attempt) in adopt {
            let Some(exec) = &executors[k] else { continue };
            match exec.adopt(job.0, attempt) {
                Ok(Adoption::Running) => {}
                Ok(Adoption::Finished(outcome)) => {
                    world.on_finished(now, k, job, attempt, &outcome)
                }
                Ok(Adoption::Lost) | Err(_) => {
                    // Never started, or its supervisor died with the machine: run it again.
                    world.mark_lost(now, k, job, attempt);
                }
            }
        }
        let (inserts, insert_rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(insert_writer(store.clone(), insert_rx));
        let tokens = world
            .users
            .values()
            .map(|u| (u.token_hash.clone(), u.clone()))
            .collect();
        let service = Arc::new(Service {
            world: Mutex::new(world),
            tokens: std::sync::RwLock::new(tokens),
            inserts,
            store,
            managers,
            slurm_commands,
            wake: Notify::new(),
            flush_lock: tokio::sync::Mutex::new(()),
            cfg,
            timings: Mutex::new(Timings::default()),
            closing: AtomicBool::new(false),
            dispatcher,
            ahead: Mutex::default(),
        });
        service.flush().await;
        for k in 0..service.cfg.cluster.len() {
            if service.cfg.cluster[k].is_remote() {
                let s = service.clone();
                tokio::spawn(async move { s.sync_loop(k).await });
            }
        }
        for (k, mut rx) in receivers {
            let s = service.clone();
            tokio::spawn(async move {
                while let Some(f) = rx.recv().await {
                    s.world()
                        .on_finished(unix_now(), k, JobId(f.job), f.attempt, &f.outcome);
                    s.wake.notify_one();
                    if let Some(d) = &s.dispatcher {
                        d.poke();
                    }
                    s.flush().await;
                }
            });
        }
        let s = service.clone();
        tokio::spawn(async move { s.cycle_loop().await });
        Ok((service, created))
    }

    /// Starts this site's dispatcher (dispatcher mode), announcing `url` as its address.
    pub async fn start_dispatcher(self: &Arc<Self>, url: &str) -> anyhow::Result<()> {
        if let Some(d) = &self.dispatcher {
            d.run(self.clone(), url).await?;
        }
        Ok(())
    }

    /// Whether shutdown has begun.
    pub(crate) fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Relaxed)
    }

    /// Asks for a scheduling cycle soon.
    pub(crate) fn wake_cycle(&self) {
        self.wake.notify_one();
    }

    /// The clusters' names, in configuration order (as `managers` are).
    fn cluster_names(&self) -> Vec<String> {
        self.cfg.cluster.iter().map(|c| c.name.clone()).collect()
    }

    /// The state, locked. Never held across an await.
    pub fn world(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads remote cluster `k` every `sync_ms`: the snapshot feeds its mirror and the
    /// reconciliation of our parts and reservations there.
    async fn sync_loop(self: Arc<Self>, k: usize) {
        let c = &self.cfg.cluster[k];
        let every = if c.is_slurm() {
            Duration::from_millis(c.sync_ms.max(1))
        } else {
            crate::config::wiki_rm::poll_every(c)
        };
        let manager = self.managers[k].clone();
        loop {
            if self.closing.load(Ordering::Relaxed) {
                return;
            }
            let snapshot = manager.snapshot().await.map_err(|e| e.to_string());
            self.world().sync_remote(unix_now(), k, snapshot);
            self.wake.notify_one();
            self.flush().await;
            tokio::time::sleep(every).await;
        }
    }

    async fn cycle_loop(self: Arc<Self>) {
        let mut last_cycle: Option<Instant> = None;
        loop {
            let now = unix_now();
            let wait = {
                let w = self.world();
                let due = w
                    .next_due(now)
                    .map(|t| Duration::from_secs((t - now).as_secs().max(0) as u64));
                let periodic = w
                    .has_global_work()
                    .then(|| Duration::from_millis(self.cfg.cycle_ms.max(1000)));
                match (due, periodic) {
                    (Some(a), Some(b)) => a.min(b),
                    (Some(a), None) | (None, Some(a)) => a,
                    (None, None) => Duration::from_secs(60),
                }
            };
            // Wake at the second boundary so that reserved starts are on time.
            let wait = if wait.is_zero() {
                Duration::ZERO
            } else {
                wait.saturating_sub(subsecond())
            };
            tokio::select! {
                () = self.wake.notified() => {}
                () = tokio::time::sleep(wait) => {}
            }
            // Arrivals during a cycle are buffered for the next: under a stream of
            // submissions cycles run at most every MIN_CYCLE_GAP, not once per request.
            if let Some(last) = last_cycle {
                let since = Instant::now().duration_since(last);
                if since < MIN_CYCLE_GAP {
                    tokio::time::sleep(MIN_CYCLE_GAP - since).await;
                }
            }
            if self.closing.load(Ordering::Relaxed) {
                return;
            }
            let started = Instant::now();
            last_cycle = Some(started);
            let plan = self.world().begin_cycle(unix_now());
            // What the cycle decided before planning (starts, moves) is carried out at once;
            // the planning runs off the lock and off the async workers, so that requests
            // are answered meanwhile.
            self.flush().await;
            let decided = if plan.is_empty() {
                Ok((plan, Vec::new()))
            } else {
                tokio::task::spawn_blocking(move || {
                    let decisions = plan.decide();
                    (plan, decisions)
                })
                .await
            };
            match decided {
                Ok((plan, decisions)) => {
                    // A slice per lock hold: a request waits behind one slice at most, not
                    // behind a whole cycle's decisions.
                    let mut decisions = decisions.into_iter();
                    loop {
                        let slice: Vec<Decision> =
                            decisions.by_ref().take(DECISIONS_PER_LOCK).collect();
                        if slice.is_empty() {
                            break;
                        }
                        self.world().apply_decisions(&plan, slice);
                        tokio::task::yield_now().await;
                    }
                    let mut w = self.world();
                    w.close_cycle(plan);
                    w.stats.last_cycle_seconds = started.elapsed().as_secs_f64();
                }
                Err(e) => tracing::error!("the planning cycle failed: {e}"),
            }
            self.flush().await;
        }
    }

    /// Writes what changed and then carries out the effects, in that order: a job is
    /// recorded as running before its process starts.
    pub async fn flush(self: &Arc<Self>) {
        let _order = self.flush_lock.lock().await;
        if self.closing.load(Ordering::Relaxed) {
            // After shutdown's last write: what happens now is re-read from the jobs'
            // status files at the next start.
            return;
        }
        let (jobs, reservations, users, workflows, runs, effects) = {
            let mut w = self.world();
            // The running totals of uncharged local jobs take in what changed before it
            // is no longer marked.
            w.recount_dirty();
            let jobs: Vec<JobRecord> = std::mem::take(&mut w.dirty_jobs)
                .into_iter()
                .filter_map(|id| w.jobs.get(&id).cloned())
                .collect();
            let rs: Vec<_> = std::mem::take(&mut w.dirty_reservations)
                .into_iter()
                .filter_map(|id| w.reservations.get(&id).cloned())
                .collect();
            // Each user with the record it was changed from: only what changed here is
            // written, over what other sites wrote meanwhile.
            let us: Vec<_> = std::mem::take(&mut w.dirty_users)
                .into_iter()
                .filter_map(|n| {
                    let user = w.users.get(&n)?.clone();
                    let base = w.users_base.get(&n).cloned();
                    Some(foresight_store::UserChange { base, user })
                })
                .collect();
            let wfs: Vec<_> = std::mem::take(&mut w.dirty_workflows)
                .into_iter()
                .filter_map(|id| w.workflows.get(&id).cloned())
                .collect();
            let runs = std::mem::take(&mut w.dirty_runs);
            (jobs, rs, us, wfs, runs, std::mem::take(&mut w.effects))
        };
        let mut failed = None;
        if let Err(e) = self.store.insert_runs(&runs).await {
            failed = Some(e);
        } else if let Err(e) = self.store.put_reservations(&reservations).await {
            failed = Some(e);
        } else if let Err(e) = self.store.update_users(&users).await {
            failed = Some(e);
        } else if let Err(e) = self.store.update_jobs(&jobs).await {
            failed = Some(e);
        } else if let Err(e) = self.store.update_workflows(&workflows).await {
            failed = Some(e);
        }
        if let Some(e) = failed {
            // Keep the records dirty so the next flush retries; do not start processes whose
            // state is not on disk.
            tracing::error!("store write failed: {e}");
            let mut w = self.world();
            w.dirty_jobs.extend(jobs.iter().map(|j| JobId(j.id)));
            w.dirty_reservations
                .extend(reservations.iter().map(|r| ReservationId(r.id)));
            w.dirty_users
                .extend(users.iter().map(|u| u.user.name.clone()));
            w.dirty_workflows.extend(workflows.iter().map(|x| x.id));
            w.dirty_runs.splice(0..0, runs);
            w.effects.splice(0..0, effects);
            return;
        }
        if !users.is_empty() {
            // What was written is the base of the next change, unless the shared record was
            // taken in meanwhile (that is the newer base).
            let mut w = self.world();
            for c in &users {
                if w.users_base.get(&c.user.name) == c.base.as_ref() {
                    w.users_base.insert(c.user.name.clone(), c.user.clone());
                }
            }
        }
        let users: Vec<UserRecord> = users.into_iter().map(|c| c.user).collect();
        self.remember_users(&users);
        // A job started by its prediction is due a correction when that runs out: the
        // cycle's wake-up must know.
        if effects.iter().any(|e| matches!(e, Effect::Launch { .. })) && self.world().predicting() {
            self.wake.notify_one();
        }
        for e in effects {
            self.run_effect(e);
        }
    }

    fn lock_ahead(&self) -> std::sync::MutexGuard<'_, HashMap<(u64, u32, usize), AheadCopy>> {
        self.ahead.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The outcome of the copy made ahead for this part, once it ends; `None` when there is
    /// none running (never made, or lost to a restart).
    async fn ahead_outcome(
        &self,
        job: u64,
        attempt: u32,
        cluster: usize,
    ) -> Option<Result<(), String>> {
        let mut outcome = self.lock_ahead().get(&(job, attempt, cluster)).cloned()?;
        let seen = outcome.wait_for(Option::is_some).await.ok()?.clone();
        seen
    }

    /// Phase one on a cluster that schedules itself: asks it to hold `request`; a refusal
    /// comes back as its text. Global jobs ([`Effect::Reserve`]) and reserved workflows
    /// both reserve through here.
    pub(crate) async fn reserve_on(
        &self,
        cluster: usize,
        request: &foresight_rm::ReserveRequest,
    ) -> Result<(), String> {
        let answer = self.managers[cluster]
            .reserve(request)
            .await
            .map_err(|e| e.to_string());
        if let Err(e) = &answer {
            tracing::warn!("reservation {} refused: {e}", request.id);
        }
        answer
    }

    fn run_effect(self: &Arc<Self>, e: Effect) {
        let s = self.clone();
        match e {
            Effect::Launch {
                cluster,
                spec,
                stage,
            } => {
                let manager = self.managers[cluster].clone();
                let (job, attempt) = (spec.job, spec.attempt);
                tokio::spawn(async move {
                    s.make_work_dir(cluster, &spec.cwd, spec.unix_user.as_deref())
                        .await;
                    if !stage.is_empty() {
                        let result = match s.ahead_outcome(job, attempt, cluster).await {
                            Some(Ok(())) => Ok(()),
                            // Failed ahead, or lost to a restart: copied now.
                            _ => {
                                crate::runtime::staging::stage(
                                    &stage,
                                    spec.unix_user.as_deref(),
                                    s.copy_timeout(),
                                )
                                .await
                            }
                        };
                        if let Err(e) = &result {
                            tracing::warn!(job, cluster, "staging input failed: {e}");
                        }
                        let go = s
                            .world()
                            .staged(unix_now(), cluster, JobId(job), attempt, result);
                        if !go {
                            s.wake.notify_one();
                            s.flush().await;
                            return;
                        }
                        s.flush().await;
                    }
                    if let Some(dir) = spec.stdout.parent() {
                        let _ = std::fs::create_dir_all(dir);
                    }
                    let submission = Submission {
                        spec,
                        reservation: None,
                        begin: None,
                    };
                    match manager.submit(&submission).await {
                        Ok(handle) => {
                            // Cancelled while starting: stop it now.
                            let cancelled = s.world().jobs.get(&JobId(job)).is_some_and(|j| {
                                j.attempt != attempt || j.state_after == Some(JobState::Cancelled)
                            });
                            if cancelled {
                                let _ = manager.cancel(&handle).await;
                            }
                        }
                        Err(err) => {
                            let now = unix_now();
                            let outcome = Outcome::failed(
                                now.secs(),
                                now.secs(),
                                format!("could not start: {err}"),
                            );
                            s.world()
                                .on_finished(now, cluster, JobId(job), attempt, &outcome);
                            s.wake.notify_one();
                            s.flush().await;
                        }
                    }
                });
            }
            Effect::StageOutputs {
                job,
                stage,
                unix_user,
            } => {
                tokio::spawn(async move {
                    let result = crate::runtime::staging::stage_within(
                        &stage,
                        unix_user.as_deref(),
                        s.copy_timeout(),
                    )
                    .await;
                    for f in result.as_ref().err().into_iter().flatten() {
                        tracing::warn!(job, "copying outputs back failed: {}", f.error);
                    }
                    s.world().outputs_copied(unix_now(), JobId(job), &result);
                    // Jobs that waited for the copy may go now.
                    s.wake.notify_one();
                    s.flush().await;
                });
            }
            Effect::Kill {
                cluster,
                job,
                attempt,
            } => {
                let part = foresight_rm::PartHandle {
                    job: job.0,
                    attempt,
                    external: None,
                };
                self.spawn_call(cluster, "cancelling", part, |m, p| {
                    Box::pin(async move { m.cancel(&p).await })
                });
            }
            Effect::Pause {
                cluster,
                job,
                attempt,
                stop,
            } => {
                let part = foresight_rm::PartHandle {
                    job: job.0,
                    attempt,
                    external: None,
                };
                self.pause_part(cluster, part, stop);
            }
            Effect::Control {
                cluster,
                part,
                stop,
            } => self.pause_part(cluster, part, stop),
            Effect::Cancel { cluster, part } => {
                self.spawn_call(cluster, "cancelling", part, |m, p| {
                    Box::pin(async move { m.cancel(&p).await })
                });
            }
            Effect::Reserve { cluster, request } => {
                tokio::spawn(async move {
                    let answer = s.reserve_on(cluster, &request).await;
                    s.world()
                        .reservation_answered(unix_now(), ReservationId(request.id), answer);
                    s.wake.notify_one();
                    s.flush().await;
                });
            }
            Effect::ReserveOverSuspended { cluster, request } => {
                let manager = self.managers[cluster].clone();
                tokio::spawn(async move {
                    let answer = manager
                        .reserve_over_suspended(&request)
                        .await
                        .map_err(|e| e.to_string());
                    if let Err(e) = &answer {
                        tracing::warn!("reservation {} refused: {e}", request.id);
                    }
                    s.world()
                        .reservation_answered(unix_now(), ReservationId(request.id), answer);
                    s.wake.notify_one();
                    s.flush().await;
                });
            }
            Effect::Preempt { by, victims, .. } => {
                let managers = self.managers.clone();
                let names = self.cluster_names();
                tokio::spawn(async move {
                    let (answer, requeued) = preempt_all(&managers, &names, &victims).await;
                    {
                        let mut w = s.world();
                        let now = unix_now();
                        let refused = answer.is_err();
                        w.preemption_answered(now, by, answer);
                        if refused {
                            for (k, v) in requeued {
                                w.requeued_anyway(now, by, k, JobId(v));
                            }
                        }
                    }
                    s.wake.notify_one();
                    s.flush().await;
                });
            }
            Effect::ResumePart { job, parts } => {
                let managers = self.managers.clone();
                let names = self.cluster_names();
                tokio::spawn(async move {
                    let answer = resume_all(&managers, &names, &parts).await;
                    s.world().resume_answered(unix_now(), job, answer);
                    s.wake.notify_one();
                    s.flush().await;
                });
            }
            Effect::Move { job, steps } => {
                let managers = self.managers.clone();
                tokio::spawn(async move {
                    let answer = move_all(&managers, &steps).await;
                    s.world().move_answered(unix_now(), job, answer);
                    s.wake.notify_one();
                    s.flush().await;
                });
            }
            Effect::Release {
                cluster,
                reservation,
            } => {
                let manager = self.managers[cluster].clone();
                tokio::spawn(async move {
                    if let Err(e) = manager.release(reservation.0).await {
                        // Released again when the cluster is next reconciled.
                        tracing::warn!("releasing reservation {reservation}: {e}");
                    }
                });
            }
            Effect::StageAhead {
                cluster,
                job,
                attempt,
                stage,
                unix_user,
            } => {
                let (tell, outcome) = tokio::sync::watch::channel(None);
                self.lock_ahead().insert((job, attempt, cluster), outcome);
                tokio::spawn(async move {
                    let result = crate::runtime::staging::stage(
                        &stage,
                        unix_user.as_deref(),
                        s.copy_timeout(),
                    )
                    .await;
                    if let Err(e) = &result {
                        tracing::warn!(job, cluster, "staging input ahead failed: {e}");
                    }
                    s.world()
                        .staged_ahead(unix_now(), cluster, JobId(job), attempt, &result);
                    let _ = tell.send(Some(result));
                    s.lock_ahead().remove(&(job, attempt, cluster));
                    s.flush().await;
                });
            }
            Effect::Submit {
                cluster,
                submission,
                stage,
            } => {
                let manager = self.managers[cluster].clone();
                tokio::spawn(async move {
                    s.make_work_dir(
                        cluster,
                        &submission.spec.cwd,
                        submission.spec.unix_user.as_deref(),
                    )
                    .await;
                    if !stage.is_empty() {
                        let (job, attempt) = (submission.spec.job, submission.spec.attempt);
                        s.world()
                            .staging_began(unix_now(), cluster, JobId(job), attempt);
                        let result = crate::runtime::staging::stage(
                            &stage,
                            submission.spec.unix_user.as_deref(),
                            s.copy_timeout(),
                        )
                        .await;
                        let go = s.world().remote_staged(
                            unix_now(),
                            cluster,
                            JobId(job),
                            attempt,
                            result,
                        );
                        if !go {
                            s.wake.notify_one();
                            s.flush().await;
                            return;
                        }
                    }
                    if let Some(dir) = submission.spec.stdout.parent() {
                        let _ = std::fs::create_dir_all(dir);
                    }
                    let (job, attempt) = (submission.spec.job, submission.spec.attempt);
                    let answer = manager
                        .submit(&submission)
                        .await
                        .map_err(|e| (e.to_string(), e.is_unreachable()));
                    if let Err((e, _)) = &answer {
                        tracing::warn!("submitting job {job} to cluster {cluster}: {e}");
                    }
                    s.world()
                        .part_submitted(unix_now(), cluster, JobId(job), attempt, answer);
                    s.wake.notify_one();
                    s.flush().await;
                });
            }
        }
    }

    /// How long one copy of a job's files, inputs or outputs, may take.
    fn copy_timeout(&self) -> Duration {
        Duration::from_secs(self.cfg.copy_timeout_seconds)
    }

    /// Makes a part's working directory when it lies in its cluster's own `work_dir` (no
    /// one else makes it), as the job's account, within `copy_timeout_seconds`. A failure
    /// is only logged: the part then fails to start in it, with the resource manager's
    /// reason.
    async fn make_work_dir(&self, cluster: usize, cwd: &std::path::Path, account: Option<&str>) {
        let ours = self.cfg.cluster[cluster]
            .work_dir
            .as_ref()
            .is_some_and(|w| cwd.starts_with(w));
        if ours {
            if let Err(e) =
                crate::runtime::staging::make_dir(cwd, account, self.copy_timeout()).await
            {
                tracing::warn!(cluster, "making the working directory: {e}");
            }
        }
    }

    fn pause_part(self: &Arc<Self>, cluster: usize, part: foresight_rm::PartHandle, stop: bool) {
        if stop {
            self.spawn_call(cluster, "suspending", part, |m, p| {
                Box::pin(async move { m.suspend(&p).await })
            });
        } else {
            self.spawn_call(cluster, "resuming", part, |m, p| {
                Box::pin(async move { m.resume(&p).await })
            });
        }
    }

    /// Runs one call on a cluster's resource manager in the background, logging a failure.
    fn spawn_call(
        self: &Arc<Self>,
        cluster: usize,
        what: &'static str,
        part: foresight_rm::PartHandle,
        call: impl FnOnce(Arc<dyn ResourceManager>, foresight_rm::PartHandle) -> ManagerCall
            + Send
            + 'static,
    ) {
        let manager = self.managers[cluster].clone();
        tokio::spawn(async move {
            let job = part.job;
            if let Err(e) = call(manager, part).await {
                tracing::warn!("{what} job {job}: {e}");
            }
        });
    }

    // ------------------------------------------------------------------ operations

    /// Authenticates a bearer token.
    pub fn authenticate(&self, token: &str) -> Result<UserRecord, Refusal> {
        self.tokens
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&token_hash(token))
            .cloned()
            .filter(|u| !u.removed)
            .ok_or_else(|| Refusal::unauthenticated("unknown token"))
            .and_then(|u| {
                if u.disabled {
                    Err(Refusal::unauthenticated(format!(
                        "user {:?} is disabled (an administrator enables them again with \
                         `foresight user enable {}`)",
                        u.name, u.name
                    )))
                } else {
                    Ok(u)
                }
            })
    }

    /// Runs an administrator's change of user `name` and makes the authentication index
    /// follow it at once (a rotated token or a disabled user is refused from the next
    /// request on, before the change is even on disk), then persists. Returns what `op`
    /// returned and the user as changed.
    pub async fn change_user<T>(
        self: &Arc<Self>,
        name: &str,
        op: impl FnOnce(&mut World, Time) -> Result<T, Refusal>,
    ) -> Result<(T, UserView), Refusal> {
        let (out, rec) = {
            let mut w = self.world();
            let out = op(&mut w, unix_now())?;
            let rec = w
                .users
                .get(name)
                .cloned()
                .ok_or_else(|| Refusal::not_found_at("name", format!("no user {name:?}")))?;
            // Still under the state's lock: no request authenticates with what changed.
            self.remember_users(std::slice::from_ref(&rec));
            (out, rec)
        };
        self.wake.notify_one();
        self.flush().await;
        Ok((out, user_view(&rec)))
    }

    /// In dispatcher mode, sets and tops up `name`'s budget in the shared database (the
    /// copy in this service was changed already, with the same checks): the view after.
    /// `None` in single mode.
    pub async fn change_shared_budget(
        &self,
        name: &str,
        set: Option<Option<f64>>,
        add: Option<f64>,
    ) -> Result<Option<UserView>, Refusal> {
        let Some(d) = &self.dispatcher else {
            return Ok(None);
        };
        let Some((budget, spent)) = d.change_budget(name, set, add).await? else {
            return Err(Refusal::not_found_at("name", format!("no user {name:?}")));
        };
        let mut w = self.world();
        let u = w
            .users
            .get_mut(name)
            .ok_or_else(|| Refusal::not_found_at("name", format!("no user {name:?}")))?;
        u.budget = budget;
        u.spent = spent;
        Ok(Some(user_view(u)))
    }

    /// [`Service::authenticate`]; in dispatcher mode a token this service has not seen is
    /// also looked up in the shared database: its user may have been created, or given a
    /// new token, through another site's dispatcher a moment ago.
    pub async fn authenticate_shared(&self, token: &str) -> Result<UserRecord, Refusal> {
        let known = self.authenticate(token);
        let Some(d) = &self.dispatcher else {
            return known;
        };
        if known.is_ok() {
            return known;
        }
        let hash = token_hash(token);
        let seen = self
            .tokens
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(&hash);
        if seen {
            // Known now: refused for what the record says, or taken in by the dispatcher's
            // own reading of the users since the first look.
            return self.authenticate(token);
        }
        match d.user_by_token(&hash).await? {
            Some(u) => {
                self.adopt_users(vec![u]);
                self.authenticate(token)
            }
            None => known,
        }
    }

    /// Takes in users as the shared database has them (dispatcher mode): new ones, changed
    /// ones (see [`World::adopt_user`]) and everyone's budget and spending. The
    /// authentication index follows under the state's lock. Answers whether any record
    /// changed beyond its budget.
    pub(crate) fn adopt_users(&self, users: Vec<UserRecord>) -> bool {
        let now = unix_now();
        let mut w = self.world();
        let mut changed = Vec::new();
        for u in users {
            let name = u.name.clone();
            if w.adopt_user(now, u) {
                changed.push(w.users[&name].clone());
            }
        }
        self.remember_users(&changed);
        !changed.is_empty()
    }

    /// Brings the authentication index up to date with these user records.
    fn remember_users(&self, users: &[UserRecord]) {
        if users.is_empty() {
            return;
        }
        let mut tokens = self.tokens.write().unwrap_or_else(|p| p.into_inner());
        for u in users {
            tokens.retain(|_, known| known.name != u.name);
            tokens.insert(u.token_hash.clone(), u.clone());
        }
    }

    /// Part `part` of job `id`'s output (`stderr`: error) from `offset` on, when its
    /// cluster's resource manager holds it (a WIKI peer); `None` when it is in this server's
    /// output directory.
    pub async fn output_elsewhere(
        &self,
        id: JobId,
        part: usize,
        stderr: bool,
        offset: u64,
    ) -> Result<Option<Vec<u8>>, Refusal> {
        let found = {
            let w = self.world();
            w.jobs.get(&id).and_then(|j| {
                let p = j.parts.get(part)?;
                let k = w.cluster_index(&p.cluster)?;
                let external = p.external.clone()?;
                Some((
                    k,
                    p.cluster.clone(),
                    foresight_rm::PartHandle {
                        job: id.0,
                        attempt: j.attempt,
                        external: Some(external),
                    },
                ))
            })
        };
        let Some((k, cluster, handle)) = found else {
            return Ok(None);
        };
        self.managers[k]
            .output(&handle, stderr, offset)
            .await
            .map_err(|e| {
                let why = format!("job {id}: its output on cluster {cluster}: {e}");
                if e.is_unreachable() {
                    Refusal::internal(why)
                } else {
                    Refusal::not_found(why)
                }
            })
    }

    /// Adds each remote cluster's own answer (`sbatch --test-only`) to an estimate, asked
    /// concurrently, each given at most a few seconds.
    pub async fn add_resource_manager_estimates(&self, req: &EstimateRequest, est: &mut Estimate) {
        let Ok(walltime) = req.walltime.seconds() else {
            return;
        };
        let asks = self
            .managers
            .iter()
            .enumerate()
            .filter(|(_, m)| !m.scheduled_by_foresight())
            .map(|(k, m)| {
                let m = m.clone();
                async move {
                    let answer = tokio::time::timeout(
                        Duration::from_secs(5),
                        m.estimate_start(req.procs, walltime),
                    )
                    .await;
                    (k, answer)
                }
            });
        for (k, answer) in futures::future::join_all(asks).await {
            if let (Some(c), Ok(Ok(Some(t)))) = (est.clusters.get_mut(k), answer) {
                // Asked without the begin time: no earlier than it.
                c.resource_manager_start = Some(req.begin.map_or(t, |b| t.max(b)));
            }
        }
    }

    /// Accepts jobs: checked, made durable, then queued. All or none. Returns one id per
    /// request: an array's is its array job id (its first task's).
    pub async fn submit(
        self: &Arc<Self>,
        user: &UserRecord,
        requests: Vec<SubmitJob>,
        batch: bool,
    ) -> Result<Vec<u64>, Refusal> {
        let started = Instant::now();
        let now = unix_now();
        let largest_site = match &self.dispatcher {
            Some(d) => Some(d.largest_cluster().await?),
            None => None,
        };
        // A global job's dependencies may name jobs of any site: resolved in the shared store.
        let mut shared_deps = Vec::with_capacity(requests.len());
        if let Some(d) = &self.dispatcher {
            for (i, r) in requests.iter().enumerate() {
                let global = r.cluster.is_none() && r.reservation.is_none();
                shared_deps.push(match (&r.dependency, global) {
                    (Some(text), true) => {
                        Some(d.resolve_dependency(user, text).await.map_err(|e| {
                            if batch {
                                e.at(i)
                            } else {
                                e
                            }
                        })?)
                    }
                    _ => None,
                });
            }
        }
        // Inputs are measured and copied by the service: first, each must be readable by the
        // account the job runs as, asked of the system as that account.
        if requests.iter().any(|r| !r.inputs.is_empty()) {
            let account = self.world().unix_account(&user.name).0;
            for (i, r) in requests.iter().enumerate() {
                crate::runtime::staging::readable_by(&r.inputs, &account)
                    .await
                    .map_err(|e| if batch { e.at(i) } else { e })?;
            }
        }
        let mut records = Vec::with_capacity(requests.len());
        // Where each request's records start in `records`.
        let mut firsts = Vec::with_capacity(requests.len());
        {
            let w = self.world();
            for (i, r) in requests.into_iter().enumerate() {
                let at = |e: Refusal| if batch { e.at(i) } else { e };
                let walltime = r
                    .walltime
                    .seconds()
                    .map_err(|m| at(Refusal::invalid("walltime", m)))?;
                // A malformed credential is a bad request before it is a forbidden one.
                for (field, c) in ["group", "account", "class", "qos"]
                    .into_iter()
                    .zip([&r.group, &r.account, &r.class, &r.qos])
                {
                    if let Some(c) = c {
                        crate::state::limits::name(field, c).map_err(at)?;
                    }
                }
                let dependency = match shared_deps.get_mut(i).and_then(Option::take) {
                    Some(d) => Some(d),
                    None => r
                        .dependency
                        .as_deref()
                        .map(|d| w.resolve_dependency(user, d))
                        .transpose()
                        .map_err(at)?,
                };
                let array = r
                    .array
                    .as_deref()
                    .map(|a| {
                        let spec = a
                            .parse::<foresight_api::ArraySpec>()
                            .map_err(|e| Refusal::invalid("array", e))?;
                        crate::state::limits::array("array", &spec)?;
                        Ok::<_, Refusal>(spec)
                    })
                    .transpose()
                    .map_err(at)?;
                // In dispatcher mode an input may live on another site's cluster.
                let inputs = crate::runtime::staging::measure(r.inputs, |c| {
                    largest_site.is_some() || w.cluster_index(c).is_some()
                })
                .map_err(at)?;
                let outputs = crate::state::staging::check_outputs(r.outputs, |c| {
                    largest_site.is_some() || w.cluster_index(c).is_some()
                })
                .map_err(at)?;
                // A dispatcher's global job: unnamed inputs are on this site (its first
                // cluster), from which other sites stage them.
                let inputs = match (&largest_site, &r.cluster, w.clusters.first()) {
                    (Some(_), None, Some(here)) => inputs
                        .into_iter()
                        .map(|mut i| {
                            i.cluster.get_or_insert_with(|| here.cfg.name.clone());
                            i
                        })
                        .collect(),
                    _ => inputs,
                };
                let links = (dependency.is_some() || array.is_some()).then_some(Links {
                    dependency,
                    array: None,
                    waiting: false,
                });
                let rec = JobRecord {
                    id: 0,
                    user: user.name.clone(),
                    name: r.name,
                    procs: r.procs,
                    walltime,
                    price: r.price,
                    cluster: r.cluster,
                    reservation: r.reservation,
                    allow_early_start: r.allow_early_start,
                    co_allocate: r.co_allocate,
                    command: r.command,
                    env: r.env,
                    cwd: r.cwd,
                    cred: w
                        .job_credentials(&user.name, [r.group, r.account, r.class, r.qos])
                        .map_err(at)?,
                    state: JobState::Pending,
                    state_after: None,
                    held: r.hold,
                    suspended: false,
                    priority: r.priority,
                    requeue: r.requeue,
                    requeue_pending: false,
                    exit_code: None,
                    signal: None,
                    reason: r.hold.then(|| "held".to_string()),
                    submitted_at: now.secs(),
                    first_planned_start: None,
                    planned_start: None,
                    started_at: None,
                    ended_at: None,
                    charged: 0.0,
                    settled: 0.0,
                    prepaid: 0.0,
                    budget_hold: 0.0,
                    parts: vec![],
                    attempt: 0,
                    stdout: None,
                    stderr: None,
                    links,
                    begin: r.begin,
                    requires: r.requires,
                    licences: r.licences,
                    preemption: None,
                    app: r.app,
                    prediction: None,
                    inputs,
                    staging: Vec::new(),
                    outputs,
                    output_staging: None,
                };
                match largest_site {
                    Some(largest) if foresight_store::is_global(&rec) => {
                        crate::runtime::dispatcher::admit_global(
                            &rec,
                            array.as_ref().and_then(|a| a.limit),
                            largest,
                        )
                        .map_err(at)?;
                        // Its size is checked against every site's clusters, not this one's.
                        let mut here = rec.clone();
                        here.procs = here.procs.min(1);
                        w.admit(&here).map_err(at)?;
                    }
                    _ => w.admit(&rec).map_err(at)?,
                }
                firsts.push(records.len());
                match array {
                    None => records.push(rec),
                    Some(spec) => {
                        for (position, task) in spec.indices().into_iter().enumerate() {
                            let mut t = rec.clone();
                            if let Some(l) = t.links.as_mut() {
                                l.array = Some(ArrayTask {
                                    job: 0,
                                    task,
                                    position: position as u32,
                                    limit: spec.limit,
                                });
                            }
                            records.push(t);
                        }
                    }
                }
            }
            // The jobs of a batch and the tasks of an array each passed alone; together
            // they must fit the budget too, or none is taken.
            let together: Vec<(&JobRecord, usize)> = records.iter().map(|r| (r, 1)).collect();
            w.check_budget_together(&user.name, &together, if batch { "jobs" } else { "array" })?;
        }
        if records.is_empty() {
            return Err(Refusal::invalid("jobs", "no jobs given"));
        }
        // In dispatcher mode a limited budget holds each local job's worst case in the
        // shared budget as the job is stored, so that every site's admissions count it
        // (settled at its end, see `foresight_store::local_taken`).
        if self.dispatcher.is_some() {
            let w = self.world();
            if w.users.get(&user.name).is_some_and(|u| u.budget.is_some()) {
                for r in &mut records {
                    if let Some(price) = w.local_tariff(r) {
                        r.budget_hold = World::worst_case(r, price);
                    }
                }
            }
        }
        // Until they are taken in, what these local jobs may cost is set aside, so that a
        // submission checked while they are being stored counts them.
        let (ticket, committed) = {
            let mut w = self.world();
            let ticket = w.set_aside_admitted(&records);
            (ticket, w.uncharged_of(&user.name))
        };
        let limited = self
            .world()
            .users
            .get(&user.name)
            .is_some_and(|u| u.budget.is_some());
        let shared = self
            .dispatcher
            .as_ref()
            .filter(|_| limited || records.iter().any(foresight_store::is_global));
        let stored = if let Some(d) = shared {
            // Checked against the budget in the shared database, with the user's global jobs
            // not yet started (wherever submitted), and stored in the same transaction.
            d.submit(&user.name, &records, committed).await
        } else {
            let (reply, answer) = tokio::sync::oneshot::channel();
            match self.inserts.send((records.clone(), reply)) {
                Err(_) => Err(Refusal::internal("the store writer has stopped")),
                Ok(()) => answer
                    .await
                    .map_err(|_| Refusal::internal("the store writer has stopped"))
                    .and_then(|r| {
                        r.map_err(|e| Refusal::internal(format!("storing the jobs: {e}")))
                    }),
            }
        };
        let ids = match stored {
            Ok(ids) => ids,
            Err(e) => {
                self.world().uncharged.release(ticket);
                return Err(e);
            }
        };
        let mut array_job = 0;
        for (r, id) in records.iter_mut().zip(&ids) {
            r.id = *id;
            // An array's job id is its first task's: known now, written with the next flush.
            if let Some(a) = r.links.as_mut().and_then(|l| l.array.as_mut()) {
                if a.position == 0 {
                    array_job = *id;
                }
                a.job = array_job;
            }
        }
        let numbered: Vec<u64> = records
            .iter()
            .filter(|r| r.links.as_ref().is_some_and(|l| l.array.is_some()))
            .map(|r| r.id)
            .collect();
        if let Some(d) = &self.dispatcher {
            // Global jobs went to the shared queue with their records: sold by auction.
            records.retain(|r| !foresight_store::is_global(r));
            d.poke();
        }
        // A global job is planned at the next cycle; a begin time is a new moment for the
        // cycle to wake at.
        let plan_now = records.iter().any(|r| {
            !r.held && (r.begin.is_some() || (r.cluster.is_none() && r.reservation.is_none()))
        });
        {
            let mut w = self.world();
            w.uncharged.release(ticket);
            // The holds left the shared budget with the jobs: this copy follows at once.
            w.holds_taken(&user.name, &records);
            w.accept(now, records);
            w.dirty_jobs.extend(numbered.into_iter().map(JobId));
        }
        if plan_now {
            self.wake.notify_one();
        }
        self.flush().await;
        let mut t = self.timings.lock().unwrap_or_else(|p| p.into_inner());
        t.submitted += ids.len() as u64;
        let ids = firsts.into_iter().map(|i| ids[i]).collect();
        if t.submit.len() >= 4096 {
            t.submit.remove(0);
        }
        t.submit.push(started.elapsed().as_secs_f64());
        Ok(ids)
    }

    /// Runs `op` on a job the user may touch, then persists and acts.
    pub async fn job_op(
        self: &Arc<Self>,
        user: &UserRecord,
        id: JobId,
        op: impl FnOnce(&mut World, Time) -> Result<(), Refusal>,
    ) -> Result<JobView, Refusal> {
        let view = {
            let mut w = self.world();
            check_owner(&w, user, id)?;
            op(&mut w, unix_now())?;
            view_of(&w, id)
        };
        self.wake.notify_one();
        self.flush().await;
        view.ok_or_else(|| Refusal::not_found_at("id", format!("no job {id}")))
    }

    /// The jobs `r` names that the user may see: one, or every task of an array job.
    pub fn job_ids(
        &self,
        user: &UserRecord,
        r: foresight_api::JobRef,
    ) -> Result<Vec<JobId>, Refusal> {
        let ids = self.world().resolve(&user.name, user.admin, r);
        if ids.is_empty() {
            return Err(Refusal::not_found_at("id", format!("no job {r}")));
        }
        Ok(ids)
    }

    /// The one job `r` names: the job, the task, or an array job's first task.
    pub fn job_id(&self, user: &UserRecord, r: foresight_api::JobRef) -> Result<JobId, Refusal> {
        Ok(self.job_ids(user, r)?[0])
    }

    /// Runs `op` on every job `r` names (each task of an array job), then persists and acts.
    /// Tasks it does not apply to (already ended) are skipped; it fails only if it applies
    /// to none. Answers with the first job's view.
    pub async fn job_op_each(
        self: &Arc<Self>,
        user: &UserRecord,
        r: foresight_api::JobRef,
        op: impl Fn(&mut World, Time, JobId) -> Result<(), Refusal>,
    ) -> Result<JobView, Refusal> {
        let ids = self.job_ids(user, r)?;
        let view = {
            let mut w = self.world();
            let now = unix_now();
            let mut first_error = None;
            let mut done = 0;
            for &id in &ids {
                check_owner(&w, user, id)?;
                match op(&mut w, now, id) {
                    Ok(()) => done += 1,
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
            if done == 0 {
                if let Some(e) = first_error {
                    return Err(e);
                }
            }
            view_of(&w, ids[0])
        };
        self.wake.notify_one();
        self.flush().await;
        view.ok_or_else(|| Refusal::not_found_at("id", format!("no job {r}")))
    }

    /// A job this service does not hold: in dispatcher mode, one still in the global queue
    /// or run by another site, as the shared store has it; else what `not_here` says.
    pub async fn job_elsewhere(
        &self,
        user: &UserRecord,
        r: foresight_api::JobRef,
        not_here: Refusal,
    ) -> Result<JobView, Refusal> {
        let Some(d) = &self.dispatcher else {
            return Err(not_here);
        };
        if r.task.is_some() {
            return Err(not_here);
        }
        let shared = d.shared_job(r.job).await?;
        match shared {
            Some(j) if user.admin || j.record.user == user.name => {
                Ok(shared_view(&self.world(), &j))
            }
            _ => Err(not_here),
        }
    }

    /// Cancels, holds or releases a job this service does not hold: in dispatcher mode, a
    /// global job no site has started (in the queue, in auction, or awarded), done in the
    /// shared queue whichever dispatcher is asked; a cancelled job some other site started
    /// is stopped by that site, which this waits a few seconds for. Else what `not_here`
    /// says.
    pub async fn job_op_elsewhere(
        &self,
        user: &UserRecord,
        r: foresight_api::JobRef,
        op: foresight_store::QueueOp,
        not_here: Refusal,
    ) -> Result<JobView, Refusal> {
        let Some(d) = &self.dispatcher else {
            return Err(not_here);
        };
        if r.task.is_some() {
            return Err(not_here);
        }
        let site = match d.shared_job(r.job).await? {
            Some(j) if user.admin || j.record.user == user.name => j.site,
            _ => return Err(not_here),
        };
        match d.apply(r.job, op, unix_now().secs()).await? {
            foresight_store::OpOutcome::Done => {}
            foresight_store::OpOutcome::Refused(why) => return Err(Refusal::conflict(why)),
            foresight_store::OpOutcome::NotGlobal => {
                return Err(Refusal::conflict(format!(
                    "job {} is a local job of site {}: ask that site's dispatcher",
                    r.job,
                    site.unwrap_or_default()
                )))
            }
            foresight_store::OpOutcome::Requested { site } => {
                let deadline = Instant::now() + CANCEL_WAIT;
                while Instant::now() < deadline {
                    if let Some(j) = d.shared_job(r.job).await? {
                        if j.record.state.is_final() {
                            return Ok(shared_view(&self.world(), &j));
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                let mut view = self.job_elsewhere(user, r, not_here).await?;
                view.reason = Some(format!("cancel asked of site {site}, which runs it"));
                return Ok(view);
            }
        }
        self.job_elsewhere(user, r, not_here).await
    }

    /// Jobs the user may see, filtered, at every site: in dispatcher mode those this site
    /// holds and the newest of the others (queued, or run by other sites, which their
    /// reason names).
    pub async fn jobs_everywhere(
        &self,
        user: &UserRecord,
        state: Option<JobState>,
        owner: Option<&str>,
        limit: usize,
    ) -> Result<Vec<JobView>, Refusal> {
        let mut views = self.jobs(user, state, owner, limit);
        let Some(d) = &self.dispatcher else {
            return Ok(views);
        };
        let who = match owner {
            _ if user.admin => owner,
            Some(o) if o != user.name => return Ok(views),
            _ => Some(user.name.as_str()),
        };
        let cap = u32::try_from(limit).unwrap_or(u32::MAX);
        let elsewhere = d
            .jobs_elsewhere(who, state.map(JobState::as_str), cap)
            .await?;
        {
            let w = self.world();
            let here: std::collections::BTreeSet<u64> = views.iter().map(|v| v.id).collect();
            views.extend(
                elsewhere
                    .iter()
                    .filter(|j| !here.contains(&j.record.id))
                    .map(|j| shared_view(&w, j)),
            );
        }
        views.sort_by_key(|v| v.id);
        let extra = views.len().saturating_sub(limit);
        views.drain(..extra);
        Ok(views)
    }

    /// A job, if the user may see it.
    pub fn job(&self, user: &UserRecord, id: JobId) -> Result<JobView, Refusal> {
        let w = self.world();
        check_owner(&w, user, id)?;
        view_of(&w, id).ok_or_else(|| Refusal::not_found_at("id", format!("no job {id}")))
    }

    /// Jobs the user may see, filtered.
    pub fn jobs(
        &self,
        user: &UserRecord,
        state: Option<JobState>,
        owner: Option<&str>,
        limit: usize,
    ) -> Vec<JobView> {
        let w = self.world();
        w.jobs
            .values()
            .rev()
            .filter(|j| user.admin || j.user == user.name)
            .filter(|j| owner.is_none_or(|o| j.user == o))
            .filter(|j| state.is_none_or(|s| j.state == s))
            .take(limit)
            .filter_map(|j| view_of(&w, JobId(j.id)))
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect()
    }

    /// Why a job has not started (or what it is doing).
    pub fn explain(&self, user: &UserRecord, id: JobId) -> Result<Explanation, Refusal> {
        let w = self.world();
        check_owner(&w, user, id)?;
        let j = &w.jobs[&id];
        let now = unix_now();
        let mut reasons = Vec::new();
        if j.held {
            reasons.push("held: released with `foresight job release`".to_string());
        }
        match j.state {
            JobState::Pending | JobState::Planned | JobState::Reserved => {
                if let Some(b) = j.begin.filter(|&b| Time(b) > now) {
                    reasons.push(format!(
                        "waits for its begin time, {} ({} s from now)",
                        crate::state::moment::utc(b),
                        b - now.secs()
                    ));
                }
                // A held job's reason is its hold, said above.
                if let Some(r) = j.reason.as_ref().filter(|_| !j.held) {
                    reasons.push(r.clone());
                }
                for p in &j.parts {
                    if let Some(k) = w.cluster_index(&p.cluster) {
                        match w.broker.clusters[k].sched.explain(id, now) {
                            Some(JobStatus::Reserved { start, .. }) => reasons.push(format!(
                                "reserved on {} from {} ({} s from now)",
                                p.cluster,
                                crate::state::moment::utc(start.secs()),
                                (start - now).as_secs()
                            )),
                            Some(JobStatus::Waiting {
                                procs,
                                free_now,
                                earliest,
                                position,
                            }) => reasons.push(format!(
                                "waiting in {}'s local queue: {procs} processors asked, {free_now} \
                                 free now, {position} job{} ahead{}",
                                p.cluster,
                                if position == 1 { "" } else { "s" },
                                earliest.map_or(String::new(), |t| format!(
                                    ", earliest possible start {}",
                                    crate::state::moment::utc(t.secs())
                                ))
                            )),
                            Some(JobStatus::Deferred { earliest, .. }) => reasons.push(format!(
                                "joins {}'s local queue at its begin time{}",
                                p.cluster,
                                earliest.map_or(String::new(), |t| format!(
                                    ", earliest possible start {}",
                                    crate::state::moment::utc(t.secs())
                                ))
                            )),
                            _ => {}
                        }
                    }
                }
                let waiting = j.links.as_ref().is_some_and(|l| l.waiting);
                if j.cluster.is_none()
                    && j.reservation.is_none()
                    && !j.held
                    && !waiting
                    && j.parts.is_empty()
                {
                    let pos = w.broker.queued().position(|e| e.job.id == id);
                    if let Some(p) = pos {
                        let depth = w.plan_depth();
                        reasons.push(if p < depth {
                            format!(
                                "in the global queue, {p} job{} ahead; planned each cycle",
                                if p == 1 { "" } else { "s" }
                            )
                        } else {
                            format!(
                                "in the global queue, {p} job{} ahead: beyond the {depth} \
                                 planned per cycle, it is planned once it moves up",
                                if p == 1 { "" } else { "s" }
                            )
                        });
                    } else {
                        reasons.push("arrived; planned at the next cycle".into());
                    }
                }
            }
            JobState::Running => reasons.push(format!(
                "running since {} on {}",
                crate::state::moment::utc(j.started_at.unwrap_or(now.secs())),
                j.parts
                    .iter()
                    .map(|p| {
                        let s = if p.procs == 1 { "" } else { "s" };
                        format!("{} ({} processor{s})", p.cluster, p.procs)
                    })
                    .collect::<Vec<_>>()
                    .join(" + ")
            )),
            s => reasons.push(format!(
                "{s}{}",
                j.reason
                    .as_ref()
                    .map_or(String::new(), |r| format!(": {r}"))
            )),
        }
        Ok(Explanation {
            id: id.0,
            state: j.state,
            reasons,
            planned_start: j.planned_start.or_else(|| local_planned_start(&w, j, now)),
        })
    }

    /// Earliest starts without submitting, all from one plan: the queued global jobs placed
    /// as the next cycle would place them, then the job over the grid and on each cluster
    /// alone. Planned on a copy of the clusters, off the state's lock.
    pub async fn estimate(&self, req: &EstimateRequest) -> Result<Estimate, Refusal> {
        let walltime = req
            .walltime
            .seconds()
            .map_err(|m| Refusal::invalid("walltime", m))?;
        if walltime <= 0 {
            return Err(Refusal::invalid("walltime", "must be positive"));
        }
        crate::state::limits::seconds("walltime", walltime)?;
        if req.procs == 0 {
            return Err(Refusal::invalid("procs", "must be at least 1"));
        }
        if let Some(b) = req.begin {
            crate::state::limits::instant("begin", b)?;
        }
        // Checked as a submission's price is: an estimate answers for a job that could be
        // submitted.
        if let Some(p) = req.price {
            crate::state::limits::price("price", p)?;
        }
        let now = unix_now();
        let input = {
            let w = self.world();
            let total = w.global_limit(req.co_allocate);
            if req.procs > total {
                return Err(Refusal::invalid(
                    "procs",
                    format!(
                        "{} processors asked; the largest possible is {total}",
                        req.procs
                    ),
                ));
            }
            let probe = GlobalJob {
                id: JobId(u64::MAX),
                user: UserId(0),
                submit: now,
                procs: req.procs,
                walltime: Dur(walltime),
                max_price: req.price.unwrap_or_else(|| w.default_price()),
                input_mb: 0.0,
                home: None,
                co_allocate: req.co_allocate,
                criterion: Criterion::EarliestFinish,
                priority: 0,
                requeue: false,
                requires: Default::default(),
                begin: req.begin.map(Time),
                licences: Default::default(),
                prediction: None,
            };
            let queue: Vec<GlobalJob> = w
                .broker
                .queued()
                .take(self.cfg.plan_depth)
                .map(|e| e.job.clone())
                .collect();
            let mut jobs = queue.clone();
            jobs.push(probe.clone());
            EstimateInput {
                now,
                planner: w.broker.planner_for(now, &jobs),
                clusters: w.broker.clusters.clone(),
                queue,
                probe,
            }
        };
        tokio::task::spawn_blocking(move || input.answer())
            .await
            .map_err(|e| Refusal::internal(format!("the estimate failed: {e}")))
    }

    /// Runs `op` on the world, then persists and acts.
    pub async fn mutate<T>(
        self: &Arc<Self>,
        op: impl FnOnce(&mut World, Time) -> Result<T, Refusal>,
    ) -> Result<T, Refusal> {
        let out = {
            let mut w = self.world();
            op(&mut w, unix_now())?
        };
        self.wake.notify_one();
        self.flush().await;
        Ok(out)
    }

    /// Stores a new user (admin operation).
    pub async fn add_user(&self, rec: UserRecord) -> Result<(), Refusal> {
        if rec.name.is_empty() || rec.name.contains(char::is_whitespace) {
            return Err(Refusal::invalid(
                "name",
                "must be non-empty, without spaces",
            ));
        }
        crate::state::limits::name("name", &rec.name)?;
        if self.world().users.contains_key(&rec.name) {
            return Err(Refusal::conflict(format!(
                "user {:?} already exists",
                rec.name
            )));
        }
        self.store.insert_user(&rec).await.map_err(|e| match e {
            foresight_store::StoreError::UserExists(n) => {
                Refusal::conflict(format!("user {n:?} already exists"))
            }
            e => Refusal::internal(e.to_string()),
        })?;
        self.remember_users(std::slice::from_ref(&rec));
        self.world().add_user(rec);
        Ok(())
    }

    /// Clusters with their load.
    pub fn clusters(&self) -> Vec<ClusterInfo> {
        let w = self.world();
        w.clusters
            .iter()
            .zip(&w.broker.clusters)
            .enumerate()
            .map(|(k, (c, g))| ClusterInfo {
                name: c.cfg.name.clone(),
                kind: c.cfg.kind.clone(),
                // A cluster Maui schedules is up, though it takes no global job.
                state: if w.cluster_up(k) { "up" } else { "down" }.into(),
                reason: c.unavailable_reason.clone(),
                procs: c.procs(),
                busy: c.busy(),
                running: g.sched.running(),
                queued: g.sched.waiting() + w.wiki_waiting(k),
                tariff: g.tariff.base,
                policy: if c.cfg.is_wiki_scheduled() {
                    "wiki".into()
                } else {
                    c.cfg.policy.clone()
                },
            })
            .collect()
    }

    /// The plan of each cluster (or one) over `[from, to)` as `viewer` may see it (see the
    /// `plan_view` module): copied under the lock, drawn off it.
    pub async fn plan(
        &self,
        cluster: Option<&str>,
        from: Option<i64>,
        to: Option<i64>,
        viewer: &UserRecord,
    ) -> Result<Vec<ClusterPlan>, Refusal> {
        // The plan view speaks the API's seconds.
        let now = unix_now().secs();
        let from = from.unwrap_or(now).max(now);
        let to = to.unwrap_or(from + 3_600);
        if to <= from {
            return Err(Refusal::invalid("to", "must be after from"));
        }
        let (inputs, visible) = {
            let w = self.world();
            if let Some(c) = cluster {
                if w.cluster_index(c).is_none() {
                    return Err(w.unknown_cluster(c));
                }
            }
            let visible = if viewer.admin {
                Visible::All
            } else {
                Visible::Own(
                    w.jobs
                        .values()
                        .filter(|j| j.user == viewer.name)
                        .map(|j| j.id)
                        .collect(),
                )
            };
            let inputs: Vec<plan_view::ClusterInput> = (0..w.clusters.len())
                .filter(|&k| cluster.is_none_or(|n| n == w.clusters[k].cfg.name))
                .map(|k| plan_input(&w, k))
                .collect();
            (inputs, visible)
        };
        tokio::task::spawn_blocking(move || plan_view::draw(inputs, now, from, to, &visible))
            .await
            .map_err(|e| Refusal::internal(format!("drawing the plan failed: {e}")))
    }

    /// Users (admin).
    pub fn users(&self) -> Vec<UserView> {
        self.world()
            .users
            .values()
            .filter(|u| !u.removed)
            .map(user_view)
            .collect()
    }

    /// Reservations the user may see: all for admins, else those whose ACL names them.
    pub fn reservations(&self, user: &UserRecord) -> Vec<ReservationView> {
        let w = self.world();
        w.reservations
            .values()
            .filter(|r| {
                user.admin
                    || r.owner == user.name
                    || World::acl_admits(&r.acl, &user.name, None)
                    || r.acl
                        .job
                        .is_some_and(|j| w.jobs.get(&JobId(j)).is_some_and(|j| j.user == user.name))
            })
            .map(reservation_view)
            .collect()
    }

    /// Writes everything and stops the store (graceful shutdown). Running jobs keep running
    /// under their supervisors and are re-adopted at the next start.
    pub async fn shutdown(self: &Arc<Self>) {
        self.flush().await;
        let _order = self.flush_lock.lock().await;
        self.closing.store(true, Ordering::Relaxed);
        self.store.close().await;
    }
}

/// What an estimate plans, copied out of the state.
struct EstimateInput {
    now: Time,
    planner: PlannerConfig,
    clusters: Vec<GridCluster>,
    queue: Vec<GlobalJob>,
    probe: GlobalJob,
}

impl EstimateInput {
    fn answer(&self) -> Estimate {
        let views: Vec<_> = self.clusters.iter().map(GridCluster::view).collect();
        let mut out = Estimate {
            clusters: Vec::new(),
            earliest: None,
            end: None,
            parts: Vec::new(),
            cost: None,
        };
        let mut plan = match GridPlan::new(self.now, &views, &self.planner) {
            Ok(plan) => plan,
            Err(reason) => {
                out.clusters = self
                    .clusters
                    .iter()
                    .map(|c| ClusterEstimate {
                        cluster: c.name.clone(),
                        start: None,
                        reason: Some(reason.clone()),
                        resource_manager_start: None,
                    })
                    .collect();
                return out;
            }
        };
        for job in &self.queue {
            plan.place(job);
        }
        if let Ok(sel) = plan.probe(&self.probe, None) {
            out.earliest = Some(sel.start.secs());
            out.end = Some(sel.end.secs());
            out.cost = Some(sel.cost);
            let mut parts: Vec<PartView> = Vec::new();
            let mut processors = sel.processors.clone();
            processors.sort_unstable();
            for p in processors {
                let name = &self.clusters[plan.cluster_of(p)].name;
                let local = plan.local_index(p);
                match parts.iter_mut().find(|x| &x.cluster == name) {
                    Some(x) => {
                        x.procs += 1;
                        x.processors.push(local);
                    }
                    None => parts.push(PartView {
                        cluster: name.clone(),
                        procs: 1,
                        processors: vec![local],
                    }),
                }
            }
            out.parts = parts;
        }
        for (k, c) in self.clusters.iter().enumerate() {
            let (start, reason) = if !c.available {
                (None, Some("the cluster is down".to_string()))
            } else {
                match plan.probe(&self.probe, Some(k)) {
                    Ok(sel) => (Some(sel.start.secs()), None),
                    Err(reason) => (None, Some(reason)),
                }
            };
            out.clusters.push(ClusterEstimate {
                cluster: c.name.clone(),
                start,
                reason,
                resource_manager_start: None,
            });
        }
        out
    }
}

fn subsecond() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(Duration::ZERO, |d| {
            Duration::from_nanos(u64::from(d.subsec_nanos()))
        })
}

/// What cluster `k`'s plan is drawn from: its running parts on their processors, the
/// broker's reserved and planned global jobs, and its administrative reservations.
fn plan_input(w: &World, k: usize) -> plan_view::ClusterInput {
    let c = &w.clusters[k];
    let g = &w.broker.clusters[k];
    let name = &c.cfg.name;
    let mut placed = Vec::new();
    for (job, _, at) in g.sched.running_jobs() {
        let (start, end) = (at.start.secs(), at.end.secs());
        let procs = w
            .jobs
            .get(&job)
            .and_then(|j| j.parts.iter().find(|p| &p.cluster == name && !p.ended))
            .map(|p| p.processors.clone())
            .unwrap_or_default();
        if !procs.is_empty() {
            placed.push(plan_view::Placed {
                occupant: "running",
                job: job.0,
                start,
                end,
                processors: procs,
            });
        }
    }
    let mut job_reservations = std::collections::HashSet::new();
    for e in w.broker.entries() {
        match &e.phase {
            Phase::Reserving { parts, .. } | Phase::Reserved { parts, .. } => {
                for p in parts.iter().filter(|p| p.cluster == k) {
                    job_reservations.insert(p.reservation.0);
                    placed.push(plan_view::Placed {
                        occupant: "reserved",
                        job: e.job.id.0,
                        start: p.window.start.secs(),
                        end: p.window.end.secs(),
                        processors: p.processors.clone(),
                    });
                }
            }
            Phase::Running { parts, .. } => {
                job_reservations.extend(parts.iter().map(|p| p.reservation.0));
            }
            Phase::Planned { start, end, parts } => {
                for p in parts.iter().filter(|p| p.cluster == k) {
                    placed.push(plan_view::Placed {
                        occupant: "planned",
                        job: e.job.id.0,
                        start: start.secs(),
                        end: end.secs(),
                        processors: p.processors.clone(),
                    });
                }
            }
            Phase::Queued | Phase::Suspended { .. } => {}
        }
    }
    // A reserved job's part waits in the local queue for its reservation: drawn as reserved
    // (a running part whose processors are not known is drawn from the forecast).
    let placed_jobs = placed.iter().map(|p| p.job).collect();
    let admin_reservations = w
        .reservations
        .values()
        .filter(|r| &r.cluster == name && r.kind != "job")
        .map(|r| (r.id, r.processors.clone()))
        .collect();
    plan_view::ClusterInput {
        name: name.clone(),
        procs: c.procs(),
        tariff: g.tariff.base,
        sched: g.sched.clone(),
        placed,
        placed_jobs,
        job_reservations,
        admin_reservations,
    }
}

fn write_secret(path: &std::path::Path, token: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    writeln!(f, "{token}")?;
    f.sync_all()?;
    Ok(())
}

fn check_owner(w: &World, user: &UserRecord, id: JobId) -> Result<(), Refusal> {
    match w.jobs.get(&id) {
        Some(j) if user.admin || j.user == user.name => Ok(()),
        // Someone else's job looks like no job at all: ids leak nothing.
        _ => Err(Refusal::not_found_at("id", format!("no job {id}"))),
    }
}

/// How long cancelling a job another site started waits for that site to stop it.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// A job of the shared store as the API shows it, its reason naming where it is: the site
/// that runs it, or its place in the global queue.
fn shared_view(w: &World, j: &foresight_store::SharedJob) -> JobView {
    let mut view = record_view(w, &j.record);
    view.reason = Some(match (&j.site, j.queue_state.as_deref()) {
        // Stopped there for a job of a higher level: why, as that site says.
        (Some(site), _) => match j.record.reason.as_deref() {
            Some(why) if j.record.suspended => format!("run by site {site}; {why}"),
            _ => format!("run by site {site}"),
        },
        // Cancelled in the queue: by its owner, or because its dependencies can never hold
        // (which its record says).
        (None, Some("cancelled")) => match j.record.reason.as_deref() {
            Some(why) if why != "cancelled" => why.to_string(),
            _ => "cancelled in the global queue".into(),
        },
        (None, Some("held")) => {
            "held in the global queue: released with `foresight job release`".into()
        }
        (None, Some("waiting")) => format!(
            "waiting in the global queue for its dependencies ({})",
            j.record
                .links
                .as_ref()
                .and_then(|l| l.dependency.as_ref())
                .map_or("", |d| d.text.as_str())
        ),
        (None, Some("over_budget")) => j
            .record
            .reason
            .clone()
            .unwrap_or_else(|| "over budget: waits off sale".into()),
        (None, Some(q)) => format!("in the global queue ({q})"),
        (None, None) => "in the shared store".into(),
    });
    view
}

/// A job as the API shows it.
pub fn view_of(w: &World, id: JobId) -> Option<JobView> {
    w.jobs.get(&id).map(|j| record_view(w, j))
}

/// A job record as the API shows it (`w` gives its planned start on its cluster).
pub fn record_view(w: &World, j: &JobRecord) -> JobView {
    JobView {
        id: j.id,
        name: j.name.clone(),
        user: j.user.clone(),
        account: j.cred[1].clone(),
        state: j.state,
        held: j.held,
        suspended: j.suspended,
        priority: j.priority,
        exit_code: j.exit_code,
        signal: j.signal,
        procs: j.procs,
        walltime: j.walltime,
        price: j.price,
        cluster: j
            .parts
            .first()
            .map(|p| p.cluster.clone())
            .or_else(|| j.cluster.clone()),
        parts: j
            .parts
            .iter()
            .map(|p| PartView {
                cluster: p.cluster.clone(),
                procs: p.procs,
                processors: p.processors.clone(),
            })
            .collect(),
        reservation: j.reservation,
        submitted_at: j.submitted_at,
        planned_start: j
            .planned_start
            .or_else(|| local_planned_start(w, j, unix_now())),
        first_planned_start: j.first_planned_start,
        started_at: j.started_at,
        ended_at: j.ended_at,
        charged: j.charged,
        reason: j.reason.clone(),
        command: j.command.clone(),
        stdout: j.stdout.clone(),
        stderr: j.stderr.clone(),
        array_job_id: j
            .links
            .as_ref()
            .and_then(|l| l.array.as_ref())
            .map(|a| a.job),
        array_task_id: j
            .links
            .as_ref()
            .and_then(|l| l.array.as_ref())
            .map(|a| a.task),
        dependency: j
            .links
            .as_ref()
            .and_then(|l| l.dependency.as_ref())
            .map(|d| d.text.clone()),
        begin: j.begin,
        requires: j.requires.clone(),
        licences: j.licences.clone(),
        app: j.app.clone(),
        prediction: j
            .prediction
            .as_ref()
            .map(|p| foresight_api::PredictionView {
                seconds: p.seconds,
                predictor: p.predictor.clone(),
                runs: p.runs,
                corrections: p.corrections,
            }),
        inputs: j
            .inputs
            .iter()
            .map(|i| foresight_api::InputView {
                path: i.path.clone(),
                cluster: i.cluster.clone(),
                bytes: i.bytes,
            })
            .collect(),
        staging: j.staging.iter().map(staging_view).collect(),
        outputs: j
            .outputs
            .iter()
            .map(|o| foresight_api::OutputSpec {
                path: o.path.clone(),
                cluster: o.cluster.clone(),
            })
            .collect(),
        output_staging: j.output_staging.as_ref().map(staging_view),
    }
}

/// A copy's record as the API shows it (inputs in, outputs back).
fn staging_view(s: &foresight_store::StagingRecord) -> foresight_api::StagingView {
    foresight_api::StagingView {
        cluster: s.cluster.clone(),
        began_at: s.began_at,
        ended_at: s.ended_at,
        // The job's own outputs' error, else its edges' (each names its edge).
        error: s.error.clone().or_else(|| {
            let edges: Vec<&str> = s.edges.iter().filter_map(|e| e.error.as_deref()).collect();
            (!edges.is_empty()).then(|| edges.join("; "))
        }),
    }
}

/// A queued local job's planned start: where its cluster's policy holds it, or, while it
/// waits for its begin time, the earliest start from then.
fn local_planned_start(w: &World, j: &JobRecord, now: Time) -> Option<i64> {
    if j.state != JobState::Pending || j.held {
        return None;
    }
    let k = w.cluster_index(&j.parts.first()?.cluster)?;
    let sched = &w.broker.clusters[k].sched;
    match sched.reservation_of(JobId(j.id)) {
        Some(p) => Some(p.start.secs()),
        None => match sched.explain(JobId(j.id), now) {
            Some(JobStatus::Deferred { earliest, .. }) => earliest.map(|t| t.secs()),
            _ => None,
        },
    }
}

/// A user as the API shows it.
pub fn user_view(u: &UserRecord) -> UserView {
    UserView {
        name: u.name.clone(),
        admin: u.admin,
        budget: u.budget,
        spent: u.spent,
        unix_user: u.unix_user.clone(),
        credentials: u.credentials.clone(),
        disabled: u.disabled,
        warnings: Vec::new(),
    }
}

/// A reservation as the API shows it.
pub fn reservation_view(r: &foresight_store::ReservationRecord) -> ReservationView {
    ReservationView {
        id: r.id,
        kind: r.kind.clone(),
        cluster: r.cluster.clone(),
        procs: r.procs,
        processors: r.processors.clone(),
        start: r.start,
        end: r.end,
        acl: r.acl.clone(),
        state: r.state,
        expires_at: r.expires_at,
        owner: r.owner.clone(),
    }
}

/// Does `run` to each of `steps` in order, all or none: when one fails, the steps done before
/// it are taken back, last first, by `undo` (which logs an undo that fails in its turn), and
/// the answer names the failing step by its index and carries the resource manager's error. A
/// step whose `undo` is `None` cannot be taken back (a requeue) and stays done.
async fn all_or_none<'a, S, R, RF, U, UF>(
    steps: &'a [S],
    run: R,
    undo: U,
) -> Result<(), (usize, foresight_rm::RmError)>
where
    R: Fn(&'a S) -> RF,
    RF: std::future::Future<Output = Result<(), foresight_rm::RmError>>,
    U: Fn(&'a S) -> Option<UF>,
    UF: std::future::Future<Output = ()>,
{
    for (i, step) in steps.iter().enumerate() {
        if let Err(e) = run(step).await {
            for done in steps[..i].iter().rev() {
                if let Some(back) = undo(done) {
                    back.await;
                }
            }
            return Err((i, e));
        }
    }
    Ok(())
}

/// Stops every part of `victims` (each on its cluster: a co-allocated victim has one per
/// cluster), suspends first, then requeues (which cannot be undone), all or none: when one
/// fails, the parts suspended so far are resumed, on every cluster, and the error names the
/// part and its cluster and quotes the resource manager. Also the jobs requeued (with the
/// cluster), which on an error the caller records as requeued all the same
/// ([`World::requeued_anyway`](crate::state::world::World::requeued_anyway)).
async fn preempt_all(
    managers: &[Arc<dyn ResourceManager>],
    names: &[String],
    victims: &[(usize, foresight_rm::PartHandle, Preemption)],
) -> (Result<(), String>, Vec<(usize, u64)>) {
    let mut order: Vec<&(usize, foresight_rm::PartHandle, Preemption)> = victims.iter().collect();
    order.sort_by_key(|(_, _, how)| *how == Preemption::Requeue);
    let stopped = all_or_none(
        &order,
        |&&(k, ref part, how)| async move {
            match how {
                Preemption::Suspend => managers[k].suspend(part).await,
                Preemption::Requeue => managers[k].requeue(part).await,
            }
        },
        // A requeued part has been put back in its queue: nothing resumes it.
        |&&(k, ref part, how)| {
            (how == Preemption::Suspend).then_some(async move {
                if let Err(undo) = managers[k].resume(part).await {
                    tracing::warn!(
                        "resuming job {} on cluster {} after a refused preemption: {undo}",
                        part.job,
                        names[k]
                    );
                }
            })
        },
    )
    .await;
    let done = match &stopped {
        Ok(()) => &order[..],
        Err((i, _)) => &order[..*i],
    };
    let requeued = done
        .iter()
        .filter(|(_, _, how)| *how == Preemption::Requeue)
        .map(|(k, part, _)| (*k, part.job))
        .collect();
    let answer = stopped.map_err(|(i, e)| {
        let (k, part, _) = order[i];
        format!("stopping job {} on {}: {e}", part.job, names[*k])
    });
    (answer, requeued)
}

/// Resumes every part of a suspended job (each on its cluster), all or none: when one
/// fails, the parts resumed so far are suspended again and the error names the part and
/// its cluster and quotes the resource manager.
async fn resume_all(
    managers: &[Arc<dyn ResourceManager>],
    names: &[String],
    parts: &[(usize, foresight_rm::PartHandle)],
) -> Result<(), String> {
    all_or_none(
        parts,
        |(k, part)| managers[*k].resume(part),
        |(k, part)| {
            Some(async move {
                if let Err(undo) = managers[*k].suspend(part).await {
                    tracing::warn!(
                        "suspending job {} on cluster {} again after a refused resumption: {undo}",
                        part.job,
                        names[*k]
                    );
                }
            })
        },
    )
    .await
    .map_err(|(i, e)| {
        let (k, part) = &parts[i];
        format!("resuming job {} on {}: {e}", part.job, names[*k])
    })
}

/// Carries out an [`Effect::Move`]: each step in order; when one fails, the steps before it
/// are moved back (a cluster's own step undoes itself), so that the job's reservations move
/// together or stay where they were.
async fn move_all(
    managers: &[Arc<dyn ResourceManager>],
    steps: &[crate::state::world::MoveStep],
) -> Result<(), String> {
    all_or_none(
        steps,
        |step| managers[step.cluster].move_reservation(&step.to, step.part.as_ref()),
        |done| {
            Some(async move {
                let back = managers[done.cluster].move_reservation(&done.back, done.part.as_ref());
                if let Err(undo) = back.await {
                    tracing::warn!(
                        "putting back reservation {} on cluster {}: {undo}",
                        done.back.id,
                        done.cluster
                    );
                }
            })
        },
    )
    .await
    .map_err(|(i, e)| format!("reservation {}: {e}", steps[i].to.id))
}

#[cfg(test)]
mod move_tests {
    use super::*;
    use crate::state::world::MoveStep;
    use async_trait::async_trait;
    use foresight_rm::{ClusterState, PartHandle, ReserveRequest, RmError, Submission};

    /// A cluster that records the windows it moves reservations to, refusing one start.
    #[derive(Debug, Default)]
    struct Recorder {
        refuse_start: Option<i64>,
        moves: Mutex<Vec<(u64, i64)>>,
        /// Refuses to stop (suspend or requeue) any part.
        refuse_stop: bool,
        /// Refuses to resume any part.
        refuse_resume: bool,
        /// What was asked of its parts: ("suspend" | "resume" | "requeue", Slurm id).
        calls: Mutex<Vec<(&'static str, String)>>,
    }

    impl Recorder {
        fn call(&self, what: &'static str, part: &PartHandle) -> Result<(), RmError> {
            let refused = if what == "resume" {
                self.refuse_resume
            } else {
                self.refuse_stop
            };
            if refused {
                return Err(RmError::Invalid("Access/permission denied".into()));
            }
            let id = part.external.clone().unwrap_or_default();
            self.calls.lock().unwrap().push((what, id));
            Ok(())
        }
    }

    #[async_trait]
    impl ResourceManager for Recorder {
        fn kind(&self) -> &'static str {
            "recorder"
        }
        fn scheduled_by_foresight(&self) -> bool {
            false
        }
        async fn snapshot(&self) -> Result<ClusterState, RmError> {
            Err(RmError::Invalid("unused".into()))
        }
        async fn estimate_start(&self, _: u32, _: i64) -> Result<Option<i64>, RmError> {
            Ok(None)
        }
        async fn reserve(&self, _: &ReserveRequest) -> Result<(), RmError> {
            Ok(())
        }
        async fn release(&self, _: u64) -> Result<(), RmError> {
            Ok(())
        }
        async fn submit(&self, _: &Submission) -> Result<PartHandle, RmError> {
            Err(RmError::Invalid("unused".into()))
        }
        async fn cancel(&self, _: &PartHandle) -> Result<(), RmError> {
            Ok(())
        }
        async fn suspend(&self, part: &PartHandle) -> Result<(), RmError> {
            self.call("suspend", part)
        }
        async fn resume(&self, part: &PartHandle) -> Result<(), RmError> {
            self.call("resume", part)
        }
        async fn requeue(&self, part: &PartHandle) -> Result<(), RmError> {
            self.call("requeue", part)
        }
        async fn move_reservation(
            &self,
            to: &ReserveRequest,
            _: Option<&PartHandle>,
        ) -> Result<(), RmError> {
            if Some(to.start) == self.refuse_start {
                return Err(RmError::Invalid("busy".into()));
            }
            self.moves.lock().unwrap().push((to.id, to.start));
            Ok(())
        }
    }

    fn step(cluster: usize, id: u64, from: i64, to: i64) -> MoveStep {
        let req = |start: i64| ReserveRequest {
            id,
            start,
            end: start + 60,
            procs: 2,
        };
        MoveStep {
            cluster,
            to: req(to),
            back: req(from),
            part: None,
        }
    }

    /// All parts move, or those moved before a refusal are moved back.
    #[tokio::test]
    async fn a_move_is_all_or_nothing_across_clusters() {
        let ok = Arc::new(Recorder::default());
        let refusing = Arc::new(Recorder {
            refuse_start: Some(10),
            ..Recorder::default()
        });
        let managers: Vec<Arc<dyn ResourceManager>> = vec![ok.clone(), refusing.clone()];
        let steps = [step(0, 1, 100, 10), step(1, 2, 100, 10)];
        let e = move_all(&managers, &steps).await.unwrap_err();
        assert!(e.contains("reservation 2") && e.contains("busy"), "{e}");
        assert_eq!(*ok.moves.lock().unwrap(), vec![(1, 10), (1, 100)]);
        assert!(refusing.moves.lock().unwrap().is_empty());
        let steps = [step(0, 1, 100, 20), step(1, 2, 100, 20)];
        move_all(&managers, &steps).await.unwrap();
        assert_eq!(ok.moves.lock().unwrap().last(), Some(&(1, 20)));
        assert_eq!(*refusing.moves.lock().unwrap(), vec![(2, 20)]);
    }

    fn part(id: &str) -> PartHandle {
        PartHandle {
            job: 1,
            attempt: 0,
            external: Some(id.into()),
        }
    }

    /// A co-allocated victim's parts on two clusters: c1 suspends its part, c2 refuses, so
    /// c1's part is resumed and the refusal names the part, its cluster and the resource
    /// manager's words. On two clusters that agree, both are stopped, and a resumption
    /// refused on the second suspends the first again.
    #[tokio::test]
    async fn a_preemption_over_two_clusters_is_all_or_nothing() {
        let c1 = Arc::new(Recorder::default());
        let c2 = Arc::new(Recorder {
            refuse_stop: true,
            ..Recorder::default()
        });
        let managers: Vec<Arc<dyn ResourceManager>> = vec![c1.clone(), c2.clone()];
        let names = vec!["c1".to_string(), "c2".to_string()];
        let victims = [
            (0, part("51"), Preemption::Suspend),
            (1, part("52"), Preemption::Suspend),
        ];
        let (answer, requeued) = preempt_all(&managers, &names, &victims).await;
        let e = answer.unwrap_err();
        assert!(
            e.contains("job 1 on c2") && e.contains("Access/permission denied"),
            "{e}"
        );
        assert!(requeued.is_empty());
        assert_eq!(
            *c1.calls.lock().unwrap(),
            vec![("suspend", "51".to_string()), ("resume", "51".to_string())]
        );
        assert!(c2.calls.lock().unwrap().is_empty());

        let c2 = Arc::new(Recorder::default());
        let managers: Vec<Arc<dyn ResourceManager>> = vec![c1.clone(), c2.clone()];
        c1.calls.lock().unwrap().clear();
        let (answer, _) = preempt_all(&managers, &names, &victims).await;
        answer.unwrap();
        assert_eq!(
            *c1.calls.lock().unwrap(),
            vec![("suspend", "51".to_string())]
        );
        assert_eq!(
            *c2.calls.lock().unwrap(),
            vec![("suspend", "52".to_string())]
        );

        // Resumed together: a refusal on c2 suspends c1's part again.
        let refusing = Arc::new(Recorder {
            refuse_resume: true,
            ..Recorder::default()
        });
        let managers: Vec<Arc<dyn ResourceManager>> = vec![c1.clone(), refusing.clone()];
        c1.calls.lock().unwrap().clear();
        let parts = [(0, part("51")), (1, part("52"))];
        let e = resume_all(&managers, &names, &parts).await.unwrap_err();
        assert!(e.contains("job 1 on c2"), "{e}");
        assert_eq!(
            *c1.calls.lock().unwrap(),
            vec![("resume", "51".to_string()), ("suspend", "51".to_string())]
        );
    }
}
