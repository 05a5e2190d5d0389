//! The running service: the world under its lock, the store, the executors, and the tasks
//! that drive them (scheduling cycle, process reports).

pub(crate) mod data_dir;
pub(crate) mod dispatcher;
pub(crate) mod effects;
pub(crate) mod estimate;
pub(crate) mod global_queue;
pub(crate) mod grid_centre;
pub(crate) mod grid_hold;
pub(crate) mod grid_inbox;
pub(crate) mod grid_outbox;
mod grid_send;
pub(crate) mod grid_site;
mod grid_site_slurm;
pub(crate) mod grid_uploads;
pub(crate) mod jobs;
pub(crate) mod loops;
pub(crate) mod managers;
pub(crate) mod peer_inputs;
pub(crate) mod plan_input;
pub(crate) mod record_views;
pub(crate) mod staging;
pub(crate) mod standby;
pub(crate) mod starts;
pub(crate) mod submit;
pub(crate) mod users;
pub(crate) mod views;
pub(crate) mod wiki_rm;
mod workflows;

#[cfg(test)]
mod clock_tests;
#[cfg(test)]
pub(crate) mod fake_rm;
#[cfg(test)]
pub(crate) mod paused;
#[cfg(test)]
mod paused_tests;
#[cfg(test)]
mod plan_tests;

use crate::config::Config;
use crate::runtime::effects::AheadCopy;
use crate::runtime::global_queue::GlobalQueue;
use crate::runtime::loops::{insert_writer, InsertRequest};
use crate::runtime::managers::Managers;
use crate::runtime::users::{new_token, token_hash, write_secret};
use crate::state::world::World;
use foresight_core::time::Time;
use foresight_core::ClusterId;
use foresight_core::JobId;
use foresight_rm::clock::{Clock, SystemClock};
use foresight_rm::{Adoption, Finished, ResourceManager};
use foresight_store::{JobRecord, Store, UserRecord};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

/// Latency samples for `/metrics`.
#[derive(Debug, Default)]
pub struct Timings {
    /// Submit handling, seconds (last 4096).
    pub submit: Vec<f64>,
    /// Submissions accepted.
    pub submitted: u64,
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
    /// The sites on other hosts that lend clusters here, by name.
    pub(crate) sites: std::collections::BTreeMap<String, crate::runtime::grid_centre::SiteLink>,
    pub(crate) wake: Notify,
    flush_lock: tokio::sync::Mutex<()>,
    /// Its configuration.
    pub cfg: Config,
    /// For `/metrics`.
    pub timings: Mutex<Timings>,
    closing: AtomicBool,
    inserts: tokio::sync::mpsc::UnboundedSender<InsertRequest>,
    /// Where its global jobs wait: with it alone, or in the queue every site shares.
    pub(crate) global_queue: Arc<dyn GlobalQueue>,
    /// Copies of reserved jobs' inputs running ahead of their start, by (job, attempt,
    /// cluster): a launch meanwhile waits for its copy's outcome.
    ahead: Mutex<HashMap<(u64, u32, ClusterId), AheadCopy>>,
    /// Where `now` comes from: the system's clock, or a test's.
    clock: Arc<dyn Clock>,
    /// The tasks it started (loops, effects): shutdown stops them and waits for them.
    tasks: Mutex<tokio::task::JoinSet<()>>,
}

impl Service {
    /// Opens the store, restores the state, re-adopts running jobs. Returns the service and
    /// the admin token when one was just created.
    pub async fn open(cfg: Config) -> anyhow::Result<(Arc<Service>, Option<String>)> {
        Service::open_with(cfg, Arc::new(SystemClock)).await
    }

    /// [`Service::open`] on clock `clock`.
    pub async fn open_with(
        cfg: Config,
        clock: Arc<dyn Clock>,
    ) -> anyhow::Result<(Arc<Service>, Option<String>)> {
        let (service, token) = Service::open_without_cycles(cfg, clock).await?;
        let s = service.clone();
        service.spawn_task(async move { s.cycle_loop().await });
        Ok((service, token))
    }

    /// [`Service::open_with`] without the scheduling cycle's loop, whose cycles carry out
    /// their effects (start processes): a test drives the cycles through the world itself
    /// and reads their effects as data, while the service answers its routes.
    pub(crate) async fn open_without_cycles(
        cfg: Config,
        clock: Arc<dyn Clock>,
    ) -> anyhow::Result<(Arc<Service>, Option<String>)> {
        Service::open_on(cfg, clock, None).await
    }

    /// [`Service::open_without_cycles`] on the resource managers `given` (one per cluster)
    /// when there are some, as a test that plays the clusters itself opens it; otherwise on
    /// those the configuration describes.
    pub(crate) async fn open_on(
        cfg: Config,
        clock: Arc<dyn Clock>,
        given: Option<Managers>,
    ) -> anyhow::Result<(Arc<Service>, Option<String>)> {
        let dir = &cfg.data_dir;
        std::fs::create_dir_all(dir.join("output"))
            .map_err(|e| anyhow::anyhow!("creating data dir {}: {e}", dir.display()))?;
        let (store, global_queue) = crate::runtime::global_queue::open_store(&cfg).await?;
        let managers = match given {
            Some(m) if m.managers.len() != cfg.cluster.len() => anyhow::bail!(
                "{} resource managers given for {} clusters",
                m.managers.len(),
                cfg.cluster.len()
            ),
            Some(m) => m,
            None => Managers::build(&cfg)?,
        };
        let Managers {
            managers,
            executors,
            receivers,
            slurm_commands,
            sites,
        } = managers;
        let now = clock.now();
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
            // The token goes to a file only the service's own account can read, so whoever
            // holds it is that account already: a service started as root (a container, a
            // CI runner, a test machine) runs its administrator's local jobs as root rather
            // than refusing the first one for want of an account named "admin".
            let unix_user = foresight_rm::account::running_as_root().then(|| "root".to_string());
            if unix_user.is_some() {
                tracing::info!("the administrator's local jobs run as root, the service's account");
            }
            let rec = UserRecord {
                name: "admin".into(),
                token_hash: token_hash(&token),
                admin: true,
                budget: None,
                spent: 0.0,
                unix_user,
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
        let mut jobs: Vec<JobRecord> = jobs.into_values().collect();
        if let Some(g) = &cfg.grid {
            // Away for an unknown time: the centre may have planned them elsewhere.
            crate::runtime::grid_hold::hold_records(&mut jobs, &g.user);
        }
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
        for (k, c) in ClusterId::enumerate(&cfg.cluster) {
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
            clock,
            world: Mutex::new(world),
            tokens: std::sync::RwLock::new(tokens),
            inserts,
            store,
            managers,
            slurm_commands,
            sites,
            wake: Notify::new(),
            flush_lock: tokio::sync::Mutex::new(()),
            cfg,
            timings: Mutex::new(Timings::default()),
            closing: AtomicBool::new(false),
            global_queue,
            ahead: Mutex::default(),
            tasks: Mutex::default(),
        });
        service.flush().await;
        for k in ClusterId::all(service.cfg.cluster.len()) {
            if let Some(every) = service.cfg.cluster[k].cluster_kind().snapshot_every() {
                let s = service.clone();
                service.spawn_task(async move { s.sync_loop(k, every).await });
            }
        }
        for (k, mut rx) in receivers {
            let s = service.clone();
            service.spawn_task(async move {
                while let Some(f) = rx.recv().await {
                    s.part_finished(k, &f).await;
                }
            });
        }
        Ok((service, created))
    }

    /// A part on cluster `k` ended as `f` says: recorded, then the cycle woken and the
    /// change written.
    pub(crate) async fn part_finished(self: &Arc<Self>, k: ClusterId, f: &Finished) {
        self.world()
            .on_finished(self.now(), k, JobId(f.job), f.attempt, &f.outcome);
        self.wake.notify_one();
        self.global_queue.poke();
        self.flush().await;
    }

    /// Starts what keeps the global queue moving once the service answers at `url` (in
    /// dispatcher mode, the dispatcher's rounds, which announce `url` to the other sites).
    pub async fn start_global_queue(self: &Arc<Self>, url: &str) -> anyhow::Result<()> {
        self.global_queue.clone().start(self.clone(), url).await
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

    /// Now, by the service's clock.
    pub fn now(&self) -> Time {
        self.clock.now()
    }

    /// Records the nonce of a signed request by `signer` (`site NAME`, `peer NAME`), its
    /// signature already checked: refused as a replay when the store has seen it within
    /// twice the allowed clock skew. The memory of a signature's verifier is lost with a
    /// restart and not shared with a standby; the store is both. A store error refuses the
    /// request, naming the signer.
    pub(crate) async fn first_use_of_nonce(
        &self,
        signer: &str,
        nonce: &str,
    ) -> Result<(), crate::state::refusal::Refusal> {
        use crate::state::refusal::Refusal;
        let window = 2 * foresight_rm::grid::sign::MAX_SKEW_SECS;
        let new = self
            .store
            .first_use_of_nonce(signer, nonce, self.now().secs(), window)
            .await
            .map_err(|e| {
                // The store's error may name another holder's host: logged, not sent.
                tracing::error!(signer, "recording a signed request's nonce: {e}");
                Refusal::internal(format!(
                    "a request of {signer} could not be recorded; see the service's log"
                ))
            })?;
        if new {
            return Ok(());
        }
        tracing::warn!(
            signer,
            "a signed request refused: its nonce was used before"
        );
        Err(Refusal::unauthenticated(
            "unknown site, or a request not signed by it",
        ))
    }

    // ------------------------------------------------------------------ operations

    /// Writes everything and stops the store (graceful shutdown). Running jobs keep running
    /// under their supervisors and are re-adopted at the next start.
    pub async fn shutdown(self: &Arc<Self>) {
        self.flush().await;
        let _order = self.flush_lock.lock().await;
        self.closing.store(true, Ordering::Relaxed);
        self.store.close().await;
        // Nothing they would do now is written: what they were waiting for is re-read at
        // the next start, as after a crash.
        let mut tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }

    /// Waits until every task it started has ended, those they started meanwhile too: a
    /// test that drives the cycles itself reads their effects' answers after this. Never
    /// returns while a loop runs (opened with cycles, or on a cluster it follows).
    #[cfg(test)]
    pub(crate) async fn settle(&self) {
        loop {
            let mut set =
                std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()));
            if set.is_empty() {
                return;
            }
            while set.join_next().await.is_some() {}
        }
    }

    /// Runs `task` in the background, in the set that shutdown stops and waits for.
    /// Finished tasks are reaped here, so that the set holds only running ones. Once
    /// shutdown has begun a task is not started: decided under the set's lock, after which
    /// shutdown takes the set, so no task escapes it.
    pub(crate) fn spawn_task(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        if self.closing.load(Ordering::Relaxed) {
            return;
        }
        while tasks.try_join_next().is_some() {}
        tasks.spawn(task);
    }
}
