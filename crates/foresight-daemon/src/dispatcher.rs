//! A peer dispatcher (`--mode dispatcher`): this site's side of the shared global queue.
//!
//! Each round (woken by `LISTEN/NOTIFY`, by its poll timer, or by an auction falling due) it
//! 1. reports the global jobs it ran that have ended (their runtimes set the auctions'
//!    length);
//!    stops the jobs it started that their owners have since cancelled from any site;
//! 2. gives back to the queue what dead dispatchers held ([`GlobalQueue::reclaim`]);
//! 3. closes the auctions that are due, exactly one winner each ([`GlobalQueue::close_one`]);
//!    one without a valid bid is queued again or reopened after a back-off (`unsold`);
//! 4. starts the jobs it was awarded, each only if its claim still holds
//!    ([`GlobalQueue::start`]), on its least loaded cluster that can hold them;
//! 5. bids in every auction for a job its site can run now, opening the auction of a job
//!    still queued, and re-bids as its load changes; it withdraws a bid it can no longer
//!    honour.
//!
//! Offers and prices come from `foresight_core::auction` ([`make_offer`], [`price`],
//! [`RuntimeTracker`]), as in `sim auction`; the auction's state is rows in PostgreSQL
//! instead of an [`AuctionHouse`](foresight_core::auction::AuctionHouse) in memory.

use crate::dependency::{dependency_verdict, Named};
use crate::dispatcher_config::DispatcherConfig;
use crate::service::{unix_now, Service};
use foresight_api::DependencyVerdict;
use foresight_core::auction::{
    make_offer, price, Lot, Overcommit, RuntimeTracker, SiteId, Tie, Unsold,
};
use foresight_core::time::Dur;
use foresight_core::JobId;
use foresight_store::{
    Claim, Closed, GlobalQueue, OpOutcome, QueueOp, SharedJob, Start, TieRule, UnsoldRule,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// How many jobs on offer a round looks at (highest priority first).
const OFFER_WINDOW: u32 = 256;

/// This site's dispatcher.
pub struct Dispatcher {
    queue: GlobalQueue,
    cfg: DispatcherConfig,
    /// Woken by notifications, local job ends and the poll timer.
    wake: Notify,
    /// Global jobs this site started and has not yet reported ended.
    started: Mutex<BTreeSet<u64>>,
}

impl Dispatcher {
    /// The dispatcher of `queue`'s site.
    pub fn new(queue: GlobalQueue, cfg: DispatcherConfig) -> Dispatcher {
        Dispatcher {
            queue,
            cfg,
            wake: Notify::new(),
            started: Mutex::new(BTreeSet::new()),
        }
    }

    /// The most processors a global job may ask for: the largest cluster of any site.
    pub async fn largest_cluster(&self) -> Result<u32, crate::Refusal> {
        self.queue
            .largest_cluster()
            .await
            .map_err(|e| crate::Refusal::internal(format!("reading the dispatchers: {e}")))
    }

    /// A job as the shared store has it, wherever it runs.
    pub async fn shared_job(
        &self,
        id: u64,
    ) -> Result<Option<foresight_store::SharedJob>, crate::Refusal> {
        self.queue
            .shared_job(id)
            .await
            .map_err(|e| crate::Refusal::internal(format!("reading job {id}: {e}")))
    }

    /// Cancels, holds or releases a global job that no site has started, or asks the site
    /// that started it to cancel it (`now`: Unix seconds).
    pub async fn apply(&self, id: u64, op: QueueOp, now: i64) -> Result<OpOutcome, crate::Refusal> {
        self.queue
            .apply(id, op, now)
            .await
            .map_err(|e| crate::Refusal::internal(format!("job {id} in the global queue: {e}")))
    }

    /// The newest `limit` jobs (of `user`, else everyone's; in `state`, else any) this site
    /// does not hold: queued, or run by other sites.
    pub async fn jobs_elsewhere(
        &self,
        user: Option<&str>,
        state: Option<&str>,
        limit: u32,
    ) -> Result<Vec<SharedJob>, crate::Refusal> {
        self.queue
            .jobs_elsewhere(user, state, limit)
            .await
            .map_err(|e| crate::Refusal::internal(format!("reading the shared jobs: {e}")))
    }

    /// Sets and tops up a user's budget in the shared database (the dispatchers' copies
    /// follow at their next round); `None` for an unknown user.
    pub async fn change_budget(
        &self,
        user: &str,
        set: Option<Option<f64>>,
        add: Option<f64>,
    ) -> Result<Option<(Option<f64>, f64)>, crate::Refusal> {
        match self.queue.change_budget(user, set, add).await {
            Ok(Some(Err(why))) => Err(crate::Refusal::invalid("add", why)),
            Ok(r) => Ok(r.map(|r| r.unwrap_or((None, 0.0)))),
            Err(e) => Err(crate::Refusal::internal(format!(
                "changing {user:?}'s budget: {e}"
            ))),
        }
    }

    /// Stores a submission of `user`, its global jobs into the shared queue, if it fits the
    /// user's budget with their global jobs that have not started and `committed_here`
    /// (what their local jobs here may still cost, this submission's included); refused
    /// (402, with the figures) otherwise, nothing stored.
    pub async fn submit(
        &self,
        user: &str,
        jobs: &[foresight_store::JobRecord],
        committed_here: f64,
    ) -> Result<Vec<u64>, crate::Refusal> {
        match self.queue.submit(user, jobs, committed_here).await {
            Ok(foresight_store::Submitted::Stored(ids)) => Ok(ids),
            Ok(foresight_store::Submitted::OverBudget(o)) => {
                let plural = |n: u32| if n == 1 { "" } else { "s" };
                let mut parts = Vec::new();
                if o.jobs > 0 {
                    parts.push(format!(
                        "the {} global job{} submitted may cost {:.2} at worst (processors × \
                         walltime × {} per processor-second, the highest tariff of any site)",
                        o.jobs,
                        plural(o.jobs),
                        o.worst,
                        o.price
                    ));
                }
                if o.queued_jobs > 0 {
                    parts.push(format!(
                        "{:.2} for the {} global job{} of {user} not yet started",
                        o.queued,
                        o.queued_jobs,
                        plural(o.queued_jobs)
                    ));
                }
                if o.committed_here > 0.0 {
                    parts.push(format!(
                        "{:.2} that {user}'s unfinished local jobs here may still cost",
                        o.committed_here
                    ));
                }
                Err(crate::Refusal::over_budget(format!(
                    "{}: more than the remaining budget {:.2}; nothing was submitted",
                    parts.join(", plus "),
                    o.left
                )))
            }
            Err(e) => Err(crate::Refusal::internal(format!("storing the jobs: {e}"))),
        }
    }

    /// Asks for a round soon (this site's load changed).
    pub fn poke(&self) {
        self.wake.notify_one();
    }

    /// Enters the site (refreshing its lease) and starts the heartbeat, listener and round
    /// tasks; they stop when the service closes.
    pub async fn run(self: &Arc<Self>, service: Arc<Service>, url: &str) -> anyhow::Result<()> {
        let (largest, dearest) = {
            let w = service.world();
            let largest = w.clusters.iter().map(|c| c.procs()).max().unwrap_or(0);
            let dearest = w
                .broker
                .clusters
                .iter()
                .map(|c| c.tariff.base)
                .fold(0.0, f64::max);
            (largest, dearest)
        };
        self.queue
            .register(std::process::id(), url, largest, dearest)
            .await?;
        let started = self.queue.started_here().await?;
        self.started
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(started);
        let d = self.clone();
        let s = service.clone();
        tokio::spawn(async move { d.heartbeat_loop(&s).await });
        let d = self.clone();
        let s = service.clone();
        tokio::spawn(async move { d.listen_loop(&s).await });
        let d = self.clone();
        tokio::spawn(async move { d.round_loop(&service).await });
        Ok(())
    }

    async fn heartbeat_loop(&self, service: &Service) {
        let every = Duration::from_millis(self.cfg.heartbeat_ms);
        while !service.is_closing() {
            if let Err(e) = self.queue.heartbeat().await {
                tracing::warn!(site = self.queue.site(), "heartbeat: {e}");
            }
            tokio::time::sleep(every).await;
        }
    }

    async fn listen_loop(&self, service: &Service) {
        while !service.is_closing() {
            let mut listener = match self.queue.listen().await {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(site = self.queue.site(), "listening for the queue: {e}");
                    tokio::time::sleep(Duration::from_millis(self.cfg.poll_ms)).await;
                    continue;
                }
            };
            loop {
                // `try_recv` answers None after reconnecting: what was sent meanwhile is
                // lost, so a round looks at everything.
                match listener.try_recv().await {
                    Ok(_) => self.wake.notify_one(),
                    Err(e) => {
                        tracing::warn!(site = self.queue.site(), "queue notifications: {e}");
                        break;
                    }
                }
                if service.is_closing() {
                    return;
                }
            }
        }
    }

    async fn round_loop(&self, service: &Arc<Service>) {
        let poll = Duration::from_millis(self.cfg.poll_ms);
        let mut wait = Duration::ZERO;
        loop {
            tokio::select! {
                () = self.wake.notified() => {}
                () = tokio::time::sleep(wait) => {}
            }
            if service.is_closing() {
                return;
            }
            wait = match self.round(service).await {
                Ok(next_close) => next_close.map_or(poll, |c| c.min(poll)),
                Err(e) => {
                    tracing::warn!(site = self.queue.site(), "dispatcher round: {e}");
                    poll
                }
            };
        }
    }

    /// One round; answers how long until the next auction falls due.
    async fn round(&self, service: &Arc<Service>) -> anyhow::Result<Option<Duration>> {
        self.refresh_users(service).await?;
        self.report_finished(service).await?;
        self.apply_cancels(service).await?;
        self.decide_waiting().await?;
        for job in self.queue.reclaim().await? {
            tracing::info!(
                site = self.queue.site(),
                job,
                "a dead dispatcher's claim is queued again"
            );
        }
        let tie = match self.cfg.auction.tie {
            Tie::LowestSite => TieRule::LowestSite,
            Tie::EarliestBid => TieRule::EarliestBid,
        };
        let unsold = match self.cfg.auction.unsold {
            Unsold::Wait => UnsoldRule::Wait,
            Unsold::Reopen { delay } => {
                let mean = self.mean_runtime().await?;
                UnsoldRule::Reopen {
                    delay_ms: (delay * mean * 1000.0).round() as i64,
                    duration_ms: (self.cfg.auction.alpha * mean * 1000.0).round() as i64,
                }
            }
        };
        while let Some(closed) = self
            .queue
            .close_one(self.cfg.auction.opening_bid, tie, unsold)
            .await?
        {
            match closed {
                Closed::Awarded { job, site, bidders } => {
                    tracing::info!(site = self.queue.site(), job, winner = %site, bidders, "auction closed")
                }
                Closed::Unsold { job } => match unsold {
                    UnsoldRule::Wait => {
                        tracing::info!(site = self.queue.site(), job, "auction closed unsold")
                    }
                    UnsoldRule::Reopen { delay_ms, .. } => tracing::info!(
                        site = self.queue.site(),
                        job,
                        delay_ms,
                        "auction closed unsold; reopens after its back-off"
                    ),
                },
            }
        }
        for claim in self.queue.claims().await? {
            self.start(service, claim).await?;
        }
        self.bid(service).await?;
        Ok(self
            .queue
            .next_close_ms()
            .await?
            .map(|ms| Duration::from_millis(ms as u64)))
    }

    /// Takes every user from the database, where other sites create and change users and
    /// charge their jobs: this site's copy authenticates and admits its submissions (a
    /// notification wakes a round as soon as another site changes a user).
    async fn refresh_users(&self, service: &Arc<Service>) -> anyhow::Result<()> {
        let users = self.queue.users().await?;
        let disabled: Vec<String> = users
            .iter()
            .filter(|u| u.disabled)
            .map(|u| u.name.clone())
            .collect();
        for job in self
            .queue
            .cancel_unstarted_of(&disabled, unix_now().secs())
            .await?
        {
            tracing::info!(
                site = self.queue.site(),
                job,
                "cancelled: its user was disabled"
            );
        }
        if service.adopt_users(users) {
            // A user disabled elsewhere had jobs here cancelled.
            service.wake_cycle();
            service.flush().await;
        }
        Ok(())
    }

    /// The user whose token has this hash, as the shared database has them.
    pub async fn user_by_token(
        &self,
        hash: &str,
    ) -> Result<Option<foresight_store::UserRecord>, crate::Refusal> {
        self.queue
            .user_by_token(hash)
            .await
            .map_err(|e| crate::Refusal::internal(format!("reading the shared users: {e}")))
    }

    /// Stops the jobs this site started whose owners cancelled them from another site (a
    /// job not yet taken in waits for the next round, after [`Self::report_finished`]
    /// adopts it).
    async fn apply_cancels(&self, service: &Arc<Service>) -> anyhow::Result<()> {
        let asked = self.queue.cancel_requests().await?;
        if asked.is_empty() {
            return Ok(());
        }
        let mut applied = Vec::new();
        {
            let mut w = service.world();
            let now = unix_now();
            for id in asked {
                let Some(j) = w.jobs.get(&JobId(id)) else {
                    continue;
                };
                if !j.state.is_final() {
                    if let Err(e) = w.cancel(now, JobId(id)) {
                        tracing::warn!(
                            site = self.queue.site(),
                            job = id,
                            "cancel: {}",
                            e.reason()
                        );
                    }
                }
                applied.push(id);
            }
        }
        service.wake_cycle();
        service.flush().await;
        for id in applied {
            tracing::info!(
                site = self.queue.site(),
                job = id,
                "cancelled from another site"
            );
            self.queue.cancel_applied(id).await?;
        }
        Ok(())
    }

    /// Puts on sale the global jobs waiting for dependencies that now hold (the jobs they
    /// name may run at any site: their states are read from the shared store), and cancels,
    /// with the reason, those whose dependencies can never hold. Any dispatcher may decide
    /// a job; the queue takes each decision once.
    async fn decide_waiting(&self) -> anyhow::Result<()> {
        let waiting = self.queue.waiting().await?;
        if waiting.is_empty() {
            return Ok(());
        }
        let named: BTreeSet<u64> = waiting
            .iter()
            .filter_map(|r| r.links.as_ref()?.dependency.as_ref())
            .flat_map(|d| d.on.iter().flat_map(|c| c.jobs.iter().copied()))
            .collect();
        let named: Vec<u64> = named.into_iter().collect();
        let mut states = BTreeMap::new();
        for (id, state, started) in self.queue.job_states(&named).await? {
            if let Ok(s) = state.parse::<foresight_api::JobState>() {
                states.insert(id, (s, started));
            }
        }
        for r in waiting {
            let Some(d) = r.links.as_ref().and_then(|l| l.dependency.as_ref()) else {
                // Nothing to wait for.
                self.queue.dependencies_met(r.id).await?;
                continue;
            };
            let named = |id| {
                states.get(&id).map(|&(state, started)| Named {
                    state,
                    started,
                    label: id.to_string(),
                })
            };
            match dependency_verdict(d, named, None) {
                (DependencyVerdict::Met, _) => {
                    if self.queue.dependencies_met(r.id).await? {
                        tracing::info!(
                            site = self.queue.site(),
                            job = r.id,
                            "dependencies hold: on sale"
                        );
                    }
                }
                (DependencyVerdict::Never, why) => {
                    if self
                        .queue
                        .dependencies_never(r.id, &why, unix_now().secs())
                        .await?
                    {
                        tracing::info!(site = self.queue.site(), job = r.id, "{why}");
                    }
                }
                (DependencyVerdict::Wait, _) => {}
            }
        }
        Ok(())
    }

    /// A global job's `dependency`, parsed and resolved to job ids wherever they are (only
    /// jobs `user` may see; an administrator sees all): 400 naming what is unknown.
    pub async fn resolve_dependency(
        &self,
        user: &foresight_store::UserRecord,
        text: &str,
    ) -> Result<foresight_store::DependencyRecord, crate::Refusal> {
        let d: foresight_api::Dependency = text
            .parse()
            .map_err(|e: String| crate::Refusal::invalid("dependency", e))?;
        let mut on = Vec::new();
        for (kind, r) in &d.on {
            let jobs = self
                .queue
                .resolve((!user.admin).then_some(user.name.as_str()), r.job, r.task)
                .await
                .map_err(|e| crate::Refusal::internal(format!("resolving {r}: {e}")))?;
            if jobs.is_empty() {
                return Err(crate::Refusal::invalid(
                    "dependency",
                    format!("no job {r} (in {:?})", text.trim()),
                ));
            }
            on.push(foresight_store::ConditionRecord {
                kind: *kind,
                target: r.to_string(),
                jobs,
            });
        }
        Ok(foresight_store::DependencyRecord {
            text: d.to_string(),
            any: d.any,
            singleton: d.singleton,
            on,
        })
    }

    /// The mean runtime of recently finished global jobs, seconds (the prior until one has).
    async fn mean_runtime(&self) -> anyhow::Result<f64> {
        let mut tracker = RuntimeTracker::new(
            self.cfg.runtime_window as usize,
            Dur(self.cfg.prior_runtime_seconds as i64),
        );
        for r in self
            .queue
            .recent_runtimes(self.cfg.runtime_window)
            .await?
            .into_iter()
            .rev()
        {
            tracker.record(Dur(r.round() as i64));
        }
        Ok(tracker.mean())
    }

    /// Takes in the jobs the queue says this site started but it does not hold (the answer
    /// to a start was lost with the database connection after the commit), and reports the
    /// ends of those it ran.
    async fn report_finished(&self, service: &Service) -> anyhow::Result<()> {
        for id in self.queue.started_here().await? {
            if service.world().jobs.contains_key(&JobId(id)) {
                self.started
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(id);
                continue;
            }
            if let Some(record) = self.queue.record(id).await? {
                tracing::info!(
                    site = self.queue.site(),
                    job = id,
                    "adopting a job started here"
                );
                service.world().accept(unix_now(), vec![record]);
                service.wake_cycle();
                self.started
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(id);
            }
        }
        let ended: Vec<(u64, Option<f64>)> = {
            let started = self
                .started
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            let w = service.world();
            started
                .into_iter()
                .filter_map(|id| {
                    let j = w.jobs.get(&JobId(id)).filter(|j| j.state.is_final())?;
                    let runtime = match (j.started_at, j.ended_at) {
                        (Some(s), Some(e)) => Some((e - s).max(0) as f64),
                        _ => None,
                    };
                    Some((id, runtime))
                })
                .collect()
        };
        for (id, runtime) in ended {
            self.queue.finished(id, runtime).await?;
            self.started
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
        }
        Ok(())
    }

    /// Hands an awarded job to this site's least loaded cluster that can hold it, if the
    /// claim still holds.
    async fn start(&self, service: &Arc<Service>, claim: Claim) -> anyhow::Result<()> {
        let Some(mut record) = self.queue.record(claim.job).await? else {
            return Ok(());
        };
        let cluster = {
            let w = service.world();
            let free = free_by_cluster(&w);
            free.into_iter()
                .filter(|(k, _)| w.clusters[*k].procs() >= record.procs)
                .max_by_key(|(k, f)| (*f, std::cmp::Reverse(*k)))
                .map(|(k, _)| w.clusters[k].cfg.name.clone())
        };
        let Some(cluster) = cluster else {
            // Nothing here can ever hold it (the configuration changed since the bid).
            tracing::warn!(
                site = self.queue.site(),
                job = claim.job,
                "awarded a job no cluster here can hold"
            );
            return Ok(());
        };
        record.cluster = Some(cluster);
        // Its dependencies held in the queue, on jobs this site may not know: its gate here
        // must not wait for them again.
        if let Some(l) = record.links.as_mut() {
            l.dependency = None;
            l.waiting = false;
        }
        if record.links.as_ref().is_some_and(|l| l.array.is_none()) {
            record.links = None;
        }
        // The most it may cost here is taken from its user's budget as it starts.
        let hold = {
            let w = service.world();
            w.local_tariff(&record)
                .map_or(0.0, |p| crate::world::World::worst_case(&record, p))
        };
        match self.queue.start_holding(claim, &record, hold).await? {
            Start::Started => {}
            Start::Void => {
                tracing::info!(
                    site = self.queue.site(),
                    job = claim.job,
                    epoch = claim.epoch,
                    "claim no longer holds; not started"
                );
                return Ok(());
            }
            Start::OverBudget { left } => {
                tracing::info!(
                    site = self.queue.site(),
                    job = claim.job,
                    hold,
                    left,
                    "its user's budget is short here; off sale until it changes"
                );
                self.queue.over_budget(claim, hold, left).await?;
                return Ok(());
            }
        }
        tracing::info!(
            site = self.queue.site(),
            job = claim.job,
            "started an awarded job"
        );
        self.started
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(claim.job);
        service.world().accept(unix_now(), vec![record]);
        service.wake_cycle();
        service.flush().await;
        Ok(())
    }

    /// Bids for every job on offer this site can run now, opening the auctions of queued
    /// ones; withdraws bids it can no longer honour.
    async fn bid(&self, service: &Service) -> anyhow::Result<()> {
        let on_offer = self.queue.on_offer(OFFER_WINDOW).await?;
        if on_offer.is_empty() {
            return Ok(());
        }
        let standing: BTreeMap<u64, u32> = self.queue.standing_bids().await?.into_iter().collect();
        let mean = self.mean_runtime().await?;
        let free = {
            let w = service.world();
            free_by_cluster(&w)
                .into_iter()
                .map(|(k, f)| (w.clusters[k].procs(), f))
                .collect::<Vec<_>>()
        };
        // Processors promised by standing bids, which a new bid may not offer again
        // (`overcommit = "reserve"`); bids in auctions that are no longer open lapse.
        let reserve = self.cfg.auction.overcommit == Overcommit::Reserve;
        let mut held: u32 = if reserve {
            let offered: BTreeSet<u64> = on_offer.iter().map(|j| j.job).collect();
            standing
                .iter()
                .filter(|(j, _)| offered.contains(j))
                .map(|(_, p)| *p)
                .sum()
        } else {
            0
        };
        let duration_ms = (self.cfg.auction.alpha * mean * 1000.0).round() as i64;
        for job in on_offer {
            let own = standing.get(&job.job).copied().unwrap_or(0);
            let lot = Lot {
                job: JobId(job.job),
                procs: job.procs,
                priority: job.priority.min(u32::from(u8::MAX)) as u8,
                home: SiteId(0),
            };
            // The cluster that can give the job the most now: a bid is for one cluster.
            let best = free
                .iter()
                .filter(|(procs, _)| *procs >= job.procs)
                .map(|(_, f)| *f)
                .max();
            let others = held.saturating_sub(if reserve { own } else { 0 });
            let offer = best.and_then(|f| make_offer(&lot, f, &[], others, Dur(0)));
            let priced = offer
                .map(|(o, _)| (o, price(&self.cfg.auction, job.procs, &o, mean)))
                .filter(|(_, p)| *p >= self.cfg.auction.opening_bid);
            match priced {
                Some((offer, p)) => {
                    if !job.in_auction {
                        self.queue.open(job.job, duration_ms).await?;
                    }
                    if self.queue.bid(job.job, p, offer.procs).await? && reserve && own == 0 {
                        held += job.procs;
                    }
                }
                None if own > 0 => {
                    self.queue.withdraw(job.job).await?;
                    if reserve {
                        held = held.saturating_sub(own);
                    }
                }
                None => {}
            }
        }
        Ok(())
    }
}

/// Processors each cluster of this site could give a new job now: idle ones, less those
/// that jobs already queued there are waiting for.
fn free_by_cluster(w: &crate::world::World) -> Vec<(usize, u32)> {
    let mut waiting: BTreeMap<&str, u32> = BTreeMap::new();
    for j in w.jobs.values() {
        if j.state == foresight_api::JobState::Pending {
            if let Some(c) = &j.cluster {
                *waiting.entry(c.as_str()).or_default() += j.procs;
            }
        }
    }
    w.clusters
        .iter()
        .enumerate()
        .filter(|(_, c)| c.unavailable_reason.is_none())
        .map(|(k, c)| {
            let idle = c.procs().saturating_sub(c.busy());
            let queued = waiting.get(c.cfg.name.as_str()).copied().unwrap_or(0);
            (k, idle.saturating_sub(queued))
        })
        .collect()
}

/// The store `cfg` names, and in dispatcher mode this site's dispatcher on it (the store
/// then sees only the site's jobs; new global jobs go to the shared queue).
pub(crate) async fn open_store(
    cfg: &crate::Config,
) -> anyhow::Result<(Arc<dyn foresight_store::Store>, Option<Arc<Dispatcher>>)> {
    let location = cfg.store_location()?;
    match (cfg.mode, &location) {
        (crate::dispatcher_config::Mode::Single, _) => {
            Ok((foresight_store::open(&location).await?, None))
        }
        (crate::dispatcher_config::Mode::Dispatcher, foresight_store::StoreLocation::Postgres(url)) => {
            let site = cfg
                .dispatcher
                .site
                .clone()
                .ok_or_else(|| anyhow::anyhow!("mode = \"dispatcher\" needs a site (--site NAME)"))?;
            let store = foresight_store::PgStore::open_site(url, &site).await?;
            let queue = GlobalQueue::new(&store, &site, cfg.dispatcher.lease_ms);
            let dispatcher = Arc::new(Dispatcher::new(queue, cfg.dispatcher.clone()));
            Ok((Arc::new(store), Some(dispatcher)))
        }
        (crate::dispatcher_config::Mode::Dispatcher, _) => anyhow::bail!(
            "mode = \"dispatcher\" needs a PostgreSQL store shared by the dispatchers (--store postgres://…)"
        ),
    }
}

/// Refuses a global job the shared queue cannot take: larger than every site's largest
/// cluster (`largest`), or what it cannot sell yet (a `singleton`, or an array limit
/// `%N`: those would have to count jobs at every site). Dependencies wait in the queue
/// ([`Dispatcher::decide_waiting`]); an array's tasks are sold one by one.
pub(crate) fn admit_global(
    rec: &foresight_store::JobRecord,
    array_limit: Option<u32>,
    largest: u32,
) -> Result<(), crate::Refusal> {
    if !foresight_store::is_global(rec) {
        return Ok(());
    }
    if rec.procs > largest {
        return Err(crate::Refusal::invalid(
            "procs",
            format!(
                "{} processors asked; the largest cluster of any site has {largest}",
                rec.procs
            ),
        ));
    }
    let (field, what) = if rec
        .links
        .as_ref()
        .and_then(|l| l.dependency.as_ref())
        .is_some_and(|d| d.singleton)
    {
        ("dependency", "a singleton")
    } else if array_limit.is_some() {
        ("array", "an array with a limit (%N)")
    } else {
        return Ok(());
    };
    Err(crate::Refusal::invalid(
        field,
        format!(
            "in dispatcher mode a global job cannot be {what} (its tasks and namesakes may \
             run at any site); name a cluster of this site (--cluster) or submit it without"
        ),
    ))
}
