//! A peer dispatcher (`--mode dispatcher`): this site's side of the shared global queue.
//!
//! Each round (woken by `LISTEN/NOTIFY`, by its poll timer, or by an auction falling due) it
//! 1. reports the global jobs it ran that have ended (their runtimes set the auctions'
//!    length);
//!    stops the jobs it started that their owners have since cancelled from any site;
//! 2. gives back to the queue what dead dispatchers held ([`SharedQueue::reclaim`]);
//! 3. closes the auctions that are due, exactly one winner each: the queue locks a due
//!    auction with its bids ([`SharedQueue::due_auction`]), [`close`] picks the winner as in
//!    `sim auction`, and the queue records it; one without a valid bid is queued again or
//!    reopened after a back-off (`unsold`);
//! 4. starts the jobs it was awarded, each only if its claim still holds
//!    ([`SharedQueue::start`]), as global jobs of their levels in this site's broker, which
//!    preempts lower levels' global jobs for them (and them for higher ones) as in single
//!    mode;
//! 5. bids in every auction for a job its site can run now — on free processors, or on
//!    those of running global jobs of strictly lower levels — opening the auction of a job
//!    still queued, and re-bids as its load changes; it withdraws a bid it can no longer
//!    honour.
//!
//! Offers and prices come from `foresight_core::auction` ([`make_offer`], [`price`],
//! [`RuntimeTracker`]), as in `sim auction`; the auction's state is rows in PostgreSQL
//! instead of an [`AuctionHouse`](foresight_core::auction::AuctionHouse) in memory.

use crate::config::dispatcher::DispatcherConfig;
use crate::runtime::Service;
use crate::state::dependency::{dependency_verdict, Named, OutputCopy};
use foresight_api::DependencyVerdict;
use foresight_core::auction::{
    close, make_offer, price, AuctionConfig, Lot, Offer, Outcome, Overcommit, RuntimeTracker,
    SiteId, Victim,
};
use foresight_core::broker::{ClusterSpec, Promise};
use foresight_core::grid::staging_time;
use foresight_core::time::{Dur, Time};
use foresight_core::JobId;
use foresight_store::{Claim, Closed, Glance, JobRecord, NewBid, SharedQueue, StandingOwn, Start};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// How many jobs on offer a round looks at (highest priority first).
const OFFER_WINDOW: u32 = 256;

/// This site's dispatcher.
pub struct Dispatcher {
    /// Its site's door to the shared queue, which the queries of `GlobalQueue` go through.
    pub(crate) queue: SharedQueue,
    cfg: DispatcherConfig,
    /// Woken by notifications, local job ends and the poll timer.
    wake: Notify,
    /// Global jobs this site started and has not yet reported ended.
    started: Mutex<BTreeSet<u64>>,
    /// Each job on offer's record as submitted, read once (what bids weigh of it never
    /// changes while it is on offer: its input for the staging term, what the broker plays
    /// to say whether it would start it at once), so that a round does not read it per bid.
    offered: Mutex<HashMap<u64, Option<Arc<JobRecord>>>>,
    /// Auctions this dispatcher closed with a winner, for `/metrics`.
    awarded: AtomicU64,
    /// Auctions this dispatcher closed without a valid bid, for `/metrics`.
    unsold: AtomicU64,
    /// Rounds this dispatcher completed without an error, for `/metrics`: a test (or an
    /// operator) waits for rounds, not for time, before judging what rounds decided.
    rounds: AtomicU64,
    /// Jobs on offer this site gave back because it could not start them at once: it bids
    /// for them again only when its broker would start them at once.
    given_back: Mutex<BTreeSet<u64>>,
    /// Its side of the transfers of inputs between sites (its key, the nonces it took).
    pub(crate) peer: crate::runtime::peer_inputs::PeerLink,
}

impl Dispatcher {
    /// The dispatcher of `queue`'s site, trusting the other sites' certificates signed by
    /// the CA in `ca` (PEM, read from `cfg.ca_cert`) besides the system's.
    pub fn new(queue: SharedQueue, cfg: DispatcherConfig, ca: Option<Vec<u8>>) -> Dispatcher {
        Dispatcher {
            offered: Mutex::new(HashMap::new()),
            peer: crate::runtime::peer_inputs::PeerLink::new(queue.clone(), ca),
            queue,
            cfg,
            wake: Notify::new(),
            started: Mutex::new(BTreeSet::new()),
            awarded: AtomicU64::new(0),
            unsold: AtomicU64::new(0),
            rounds: AtomicU64::new(0),
            given_back: Mutex::new(BTreeSet::new()),
        }
    }

    /// The auctions it closed since it started: (awarded, unsold).
    pub(crate) fn closes(&self) -> (u64, u64) {
        (
            self.awarded.load(Ordering::Relaxed),
            self.unsold.load(Ordering::Relaxed),
        )
    }

    /// The rounds it completed without an error since it started.
    pub(crate) fn rounds(&self) -> u64 {
        self.rounds.load(Ordering::Relaxed)
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
        self.peer.enter().await?;
        let started = self.queue.started_here().await?;
        self.started
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(started);
        let d = self.clone();
        let s = service.clone();
        service.spawn_task(async move { d.heartbeat_loop(&s).await });
        let d = self.clone();
        let s = service.clone();
        service.spawn_task(async move { d.listen_loop(&s).await });
        let d = self.clone();
        let s = service.clone();
        service.spawn_task(async move { d.round_loop(&s).await });
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
                Ok(next_close) => {
                    self.rounds.fetch_add(1, Ordering::Relaxed);
                    next_close.map_or(poll, |c| c.min(poll))
                }
                Err(e) => {
                    tracing::warn!(site = self.queue.site(), "dispatcher round: {e}");
                    poll
                }
            };
        }
    }

    /// One round; answers how long until the next auction falls due. What it reads of the
    /// queue before it acts is one statement ([`SharedQueue::glance`]); a step the glance
    /// shows nothing for (no dead site, no due auction, no job waiting for dependencies)
    /// asks the database nothing.
    async fn round(&self, service: &Arc<Service>) -> anyhow::Result<Option<Duration>> {
        let mut glance = self
            .queue
            .glance(self.cfg.runtime_window, OFFER_WINDOW)
            .await?;
        self.refresh_users(service, std::mem::take(&mut glance.users))
            .await?;
        let reported = self.report_finished(service, &glance.started_here).await?;
        self.apply_cancels(service, &glance.cancel_requests).await?;
        if glance.waiting {
            self.decide_waiting(service).await?;
        }
        if glance.dead_sites {
            for job in self.queue.reclaim().await? {
                tracing::info!(
                    site = self.queue.site(),
                    job,
                    "a dead dispatcher's claim is queued again"
                );
            }
        }
        // The runtimes this round reported count at once, as they did when each step read
        // them for itself.
        let mean = if reported {
            self.mean_runtime().await?
        } else {
            self.mean_of(&glance.runtimes)
        };
        let length_ms = (self.cfg.auction.alpha * mean * 1000.0).round() as i64;
        let won = if glance.due {
            self.close_due(mean, length_ms).await?
        } else {
            false
        };
        // An auction this round awarded to this site is started in this round too.
        let claims = if won {
            self.queue.claims().await?
        } else {
            glance.claims.clone()
        };
        for claim in claims {
            self.start(service, claim).await?;
        }
        let opened = self.bid(service, &glance, mean).await?;
        // The earliest close: of the auctions open when the round looked, or of those it
        // opened.
        let next = match (glance.next_close_ms, opened.then_some(length_ms.max(0))) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Ok(next.map(|ms| Duration::from_millis(ms as u64)))
    }

    /// Closes the due auctions no other dispatcher is closing, each as `sim auction` would:
    /// the store locks and loads, the core decides. Answers whether one went to this site.
    async fn close_due(&self, mean: f64, length_ms: i64) -> anyhow::Result<bool> {
        let mut won = false;
        while let Some(due) = self.queue.due_auction().await? {
            let outcome = close(&self.cfg.auction, mean, &due.bids);
            let closed = due.settle(&outcome, length_ms).await?;
            match &closed {
                Closed::Awarded { .. } => self.awarded.fetch_add(1, Ordering::Relaxed),
                Closed::Unsold { .. } => self.unsold.fetch_add(1, Ordering::Relaxed),
            };
            match (closed, outcome) {
                (Closed::Awarded { job, site, bidders }, _) => {
                    won |= site == self.queue.site();
                    tracing::info!(site = self.queue.site(), job, winner = %site, bidders, "auction closed")
                }
                (
                    Closed::Unsold { job },
                    Outcome::Unsold {
                        reopen_after: Some(d),
                    },
                ) => tracing::info!(
                    site = self.queue.site(),
                    job,
                    delay_s = d.0,
                    "auction closed unsold; reopens after its back-off"
                ),
                (Closed::Unsold { job }, _) => {
                    tracing::info!(site = self.queue.site(), job, "auction closed unsold")
                }
            }
        }
        Ok(won)
    }

    /// Takes every user as the database has them (`users`, read by the round's glance),
    /// where other sites create and change users and charge their jobs: this site's copy
    /// authenticates and admits its submissions (a notification wakes a round as soon as
    /// another site changes a user).
    async fn refresh_users(
        &self,
        service: &Arc<Service>,
        users: Vec<foresight_store::UserRecord>,
    ) -> anyhow::Result<()> {
        let disabled: Vec<String> = users
            .iter()
            .filter(|u| u.disabled)
            .map(|u| u.name.clone())
            .collect();
        for job in self
            .queue
            .cancel_unstarted_of(&disabled, service.now().secs())
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

    /// adopts it).
    async fn apply_cancels(&self, service: &Arc<Service>, asked: &[u64]) -> anyhow::Result<()> {
        if asked.is_empty() {
            return Ok(());
        }
        let mut applied = Vec::new();
        {
            let mut w = service.world();
            let now = service.now();
            for &id in asked {
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
    /// name may run at any site: their states and output copies are read from the shared
    /// store, as their sites wrote them), and cancels,
    /// with the reason, those whose dependencies can never hold. Any dispatcher may decide
    /// a job; the queue takes each decision once.
    async fn decide_waiting(&self, service: &Service) -> anyhow::Result<()> {
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
        for j in self.queue.job_states(&named).await? {
            if let Ok(s) = j.state.parse::<foresight_store::JobState>() {
                states.insert(j.id, (s, j.started, j.output_staging));
            }
        }
        for r in waiting {
            let Some(d) = r.links.as_ref().and_then(|l| l.dependency.as_ref()) else {
                // Nothing to wait for.
                self.queue.dependencies_met(r.id).await?;
                continue;
            };
            let named = |id| {
                states.get(&id).map(|(state, started, copy)| Named {
                    state: *state,
                    started: *started,
                    label: id.to_string(),
                    // As in single mode: the copy its site runs is waited for, and a
                    // failed one is not ok.
                    outputs: OutputCopy::from_record(copy.as_ref(), r.id),
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
                        .dependencies_never(r.id, &why, service.now().secs())
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

    /// The mean runtime of recently finished global jobs, seconds (the prior until one has).
    async fn mean_runtime(&self) -> anyhow::Result<f64> {
        let runtimes = self.queue.recent_runtimes(self.cfg.runtime_window).await?;
        Ok(self.mean_of(&runtimes))
    }

    /// The mean of `runtimes` (latest first, seconds) as the auctions take it: over the
    /// window, in whole seconds, the prior until one has finished.
    fn mean_of(&self, runtimes: &[f64]) -> f64 {
        let mut tracker = RuntimeTracker::new(
            self.cfg.runtime_window as usize,
            Dur(self.cfg.prior_runtime_seconds as i64),
        );
        for r in runtimes.iter().rev() {
            tracker.record(Dur(r.round() as i64));
        }
        tracker.mean()
    }

    /// Takes in the jobs the queue says this site started (`started_here`) but it does not
    /// hold (the answer to a start was lost with the database connection after the commit),
    /// and reports the ends of those it ran. Answers whether it reported any.
    async fn report_finished(
        &self,
        service: &Service,
        started_here: &[u64],
    ) -> anyhow::Result<bool> {
        for &id in started_here {
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
                service.world().accept(service.now(), vec![record]);
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
        let reported = !ended.is_empty();
        for (id, runtime) in ended {
            self.queue.finished(id, runtime).await?;
            self.started
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
        }
        Ok(reported)
    }

    /// Hands an awarded job to this site's broker as a global job of its level, if the
    /// claim still holds.
    async fn start(&self, service: &Arc<Service>, claim: Claim) -> anyhow::Result<()> {
        let Some(mut record) = self.queue.record(claim.job).await? else {
            return Ok(());
        };
        let data = crate::state::staging::data_cluster(&record);
        let cluster = {
            let w = service.world();
            let load = site_load(&w, service.now().secs());
            // The most processors it may have, free or preempted, as bid; among equals the
            // cluster holding the input.
            let lot = Lot {
                job: JobId(record.id),
                procs: record.procs,
                priority: record.priority.min(u32::from(u8::MAX)) as u8,
                home: SiteId(0),
            };
            load.iter()
                .filter(|c| c.procs >= record.procs)
                .max_by_key(|c| {
                    let capacity =
                        make_offer(&lot, c.free_for(record.priority), &c.victims, 0, Dur::ZERO)
                            .map_or(0, |(o, _)| o.capacity);
                    let here = data.as_deref() == Some(c.spec.name.as_str());
                    (capacity, here)
                })
                .map(|c| c.spec.name.clone())
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
        // Its dependencies held in the queue, on jobs this site may not know: its gate here
        // must not wait for them again.
        if let Some(l) = record.links.as_mut() {
            l.dependency = None;
            l.waiting = false;
        }
        if record.links.as_ref().is_some_and(|l| l.array.is_none()) {
            record.links = None;
        }
        // For a user with a limited budget, the most it may cost here (at the tariff of the
        // cluster it is likeliest to run on) is taken from the shared budget as it starts:
        // the hold pays its charges, and what it was really charged is settled against the
        // hold when it ends (`SharedQueue::finished`), the rest going back. Its record
        // carries the hold, so the broker never weighs its cost against the budget again.
        let hold = {
            let w = service.world();
            let limited = w
                .users
                .get(&record.user)
                .is_some_and(|u| u.budget.is_some());
            match w.cluster_index(&cluster) {
                Some(k) if limited => crate::state::world::World::worst_case(
                    &record,
                    w.broker.clusters[k].tariff.base,
                ),
                _ => 0.0,
            }
        };
        record.prepaid = hold;
        // A bid is a promise: the job starts here at once, preempting what the broker stops
        // for it, or goes back to the auction at once.
        let promise = service.world().promise(service.now(), &record);
        if let Promise::Waits { planned } = promise {
            let why = given_back_reason(self.queue.site(), planned, service.now());
            if self.queue.give_back(claim, &why).await? {
                tracing::info!(site = self.queue.site(), job = claim.job, "{why}");
                self.lock_given_back().insert(claim.job);
            }
            return Ok(());
        }
        // It runs here as a global job of its level, on whichever cluster of the site the
        // broker gives it: it preempts lower levels' global jobs here, and is preempted by
        // higher ones (suspended, or requeued here if it may be), as in single mode; it stays
        // this site's job throughout.
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
        service.world().accept(service.now(), vec![record]);
        service.wake_cycle();
        service.flush().await;
        Ok(())
    }

    /// Bids for every job on offer this site can run now (as `glance` saw the offer and this
    /// site's standing bids), opening the auctions of queued ones; withdraws bids it can no
    /// longer honour. All of it is one statement ([`SharedQueue::bid_all`]); a bid whose
    /// price and processors have not changed is not placed again (it stands as it was).
    /// Answers whether it opened an auction.
    async fn bid(&self, service: &Service, glance: &Glance, mean: f64) -> anyhow::Result<bool> {
        let on_offer = &glance.on_offer;
        if on_offer.is_empty() {
            return Ok(false);
        }
        let standing: BTreeMap<u64, StandingOwn> =
            glance.standing.iter().map(|b| (b.job, *b)).collect();
        self.learn_offered(on_offer).await?;
        {
            let offered: BTreeSet<u64> = on_offer.iter().map(|j| j.job).collect();
            self.lock_given_back().retain(|j| offered.contains(j));
        }
        let load = {
            let w = service.world();
            site_load(&w, service.now().secs())
        };
        // Processors promised by standing bids, which a new bid may not offer again
        // (`overcommit = "reserve"`); bids in auctions that are no longer open lapse. A bid
        // placed in this round holds its processors for the rest of the round (should its
        // auction close before the statement places it, the next round, woken by the
        // close, counts them free again).
        let reserve = self.cfg.auction.overcommit == Overcommit::Reserve;
        let mut held: u32 = if reserve {
            let offered: BTreeSet<u64> = on_offer.iter().map(|j| j.job).collect();
            standing
                .values()
                .filter(|b| offered.contains(&b.job))
                .map(|b| b.procs)
                .sum()
        } else {
            0
        };
        let (mut bids, mut withdraw) = (Vec::new(), Vec::new());
        for job in on_offer {
            let mine = standing.get(&job.job);
            let own = mine.map_or(0, |b| b.procs);
            let lot = Lot {
                job: JobId(job.job),
                procs: job.procs,
                priority: job.priority.min(u32::from(u8::MAX)) as u8,
                home: SiteId(0),
            };
            let (input_mb, data) = self.input_of(job.job).await?;
            let others = held.saturating_sub(if reserve { own } else { 0 });
            // The cluster whose offer prices highest (a bid is for one cluster): processors
            // free for the job's level, then those of lower levels' global jobs it would
            // preempt, less the time its input takes to get there.
            let priced = best_offer(
                &load,
                &lot,
                job.priority,
                others,
                |spec| stage_time(input_mb, data.as_deref(), spec),
                &self.cfg.auction,
                mean,
            )
            .filter(|(_, p)| self.cfg.auction.clears_opening(*p));
            // Processors of lower levels, or a job given back once: bid only if the broker
            // would really start it at once (a bid is a promise).
            let priced = match priced {
                Some((offer, _))
                    if offer.preempt_work > 0.0 || self.lock_given_back().contains(&job.job) =>
                {
                    if self.promised(service, job.job).await? {
                        priced
                    } else {
                        None
                    }
                }
                other => other,
            };
            match priced {
                Some((offer, p)) => {
                    let same = mine.is_some_and(|b| b.price == p && b.offered == offer.procs);
                    if !(same && job.in_auction) {
                        bids.push(NewBid {
                            job: job.job,
                            price: p,
                            procs: offer.procs,
                            open: !job.in_auction,
                        });
                    }
                    if reserve && own == 0 {
                        held += job.procs;
                    }
                }
                None if own > 0 => {
                    withdraw.push(job.job);
                    if reserve {
                        held = held.saturating_sub(own);
                    }
                }
                None => {}
            }
        }
        let duration_ms = (self.cfg.auction.alpha * mean * 1000.0).round() as i64;
        self.queue.bid_all(&bids, &withdraw, duration_ms).await?;
        Ok(bids.iter().any(|b| b.open))
    }
}

impl Dispatcher {
    /// Reads the records of the jobs on offer this site has not read yet, in one statement.
    async fn learn_offered(&self, on_offer: &[foresight_store::QueuedJob]) -> anyhow::Result<()> {
        let new: Vec<u64> = {
            let known = self.lock_offered();
            on_offer
                .iter()
                .map(|j| j.job)
                .filter(|j| !known.contains_key(j))
                .collect()
        };
        if new.is_empty() {
            return Ok(());
        }
        let mut found = self.queue.records(&new).await?;
        let mut offered = self.lock_offered();
        // Jobs long gone from the offer are forgotten now and then.
        if offered.len() + new.len() > 4 * OFFER_WINDOW as usize {
            offered.clear();
        }
        for job in new {
            offered.insert(job, found.remove(&job).map(Arc::new));
        }
        Ok(())
    }

    /// A job on offer's record, read from the queue the first time (`None`: no such job).
    async fn offered(&self, job: u64) -> anyhow::Result<Option<Arc<JobRecord>>> {
        if let Some(known) = self.lock_offered().get(&job) {
            return Ok(known.clone());
        }
        let record = self.queue.record(job).await?.map(Arc::new);
        let mut offered = self.lock_offered();
        // Jobs long gone from the offer are forgotten now and then.
        if offered.len() > 4 * OFFER_WINDOW as usize {
            offered.clear();
        }
        offered.insert(job, record.clone());
        Ok(record)
    }

    /// A job's input size (MB) and data cluster, from its record.
    async fn input_of(&self, job: u64) -> anyhow::Result<(f64, Option<String>)> {
        Ok(match self.offered(job).await? {
            Some(r) => (
                crate::state::staging::input_mb(&r),
                crate::state::staging::data_cluster(&r),
            ),
            None => (0.0, None),
        })
    }

    /// Whether this site's broker would start job `job` at once if it won it now.
    async fn promised(&self, service: &Service, job: u64) -> anyhow::Result<bool> {
        let Some(record) = self.offered(job).await? else {
            return Ok(false);
        };
        let promise = service.world().promise(service.now(), &record);
        Ok(matches!(promise, Promise::Starts { .. }))
    }

    fn lock_given_back(&self) -> std::sync::MutexGuard<'_, BTreeSet<u64>> {
        self.given_back.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_offered(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Option<Arc<JobRecord>>>> {
        self.offered.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Why site `site` gave an award back at `now`: its broker would start the job only at
/// `planned` (`None`: it could not place it at all), not at once.
fn given_back_reason(site: &str, planned: Option<Time>, now: Time) -> String {
    let when = match planned {
        Some(t) => format!("would start it only in {} s", (t - now).as_secs().max(0)),
        None => "could not place it".to_string(),
    };
    format!("given back to the auction by site {site}: it could not start the job at once (its broker {when})")
}

/// Time to bring `input_mb` MB of a job's input from cluster `data` to the cluster `spec`
/// describes over its link: none where the input lives, or for a job without input.
fn stage_time(input_mb: f64, data: Option<&str>, spec: &ClusterSpec) -> Dur {
    if input_mb <= 0.0 || data == Some(spec.name.as_str()) {
        return Dur::ZERO;
    }
    staging_time(input_mb, spec.bandwidth_mb_s, Dur(spec.latency_seconds))
}

/// What one cluster of this site could give a global job now.
#[derive(Clone, Debug)]
struct ClusterLoad {
    /// Its processors.
    procs: u32,
    /// Its link and name, for the staging term.
    spec: ClusterSpec,
    /// Idle processors, less those its queued local jobs wait for.
    idle: u32,
    /// Global jobs waiting for processors here, by level: suspended ones (to resume here)
    /// and awarded ones not started yet (counted on every cluster that could hold them).
    waiting: Vec<(u32, u32)>,
    /// Its running global jobs, which a job of a higher level may preempt (local jobs never
    /// are, so they are not here).
    victims: Vec<Victim>,
}

impl ClusterLoad {
    /// Idle processors a job of level `priority` may have: the broker serves waiting jobs
    /// of its level and above first (a suspended job before a queued one).
    fn free_for(&self, priority: u32) -> u32 {
        let before: u32 = self
            .waiting
            .iter()
            .filter(|(level, _)| *level >= priority)
            .map(|(_, procs)| procs)
            .sum();
        self.idle.saturating_sub(before)
    }
}

/// This site's best offer for `lot` (of level `priority`, on which `others` processors of
/// standing bids elsewhere are held) and its price, `None` if no cluster can run it now: the
/// offer of the cluster that prices highest (a bid is for one cluster; the first among
/// equals), on processors free for its level, then those of lower levels' global jobs it
/// would preempt, less the time its input takes to get there (`stage`).
fn best_offer(
    load: &[ClusterLoad],
    lot: &Lot,
    priority: u32,
    others: u32,
    stage: impl Fn(&ClusterSpec) -> Dur,
    cfg: &AuctionConfig,
    mean_runtime: f64,
) -> Option<(Offer, f64)> {
    load.iter()
        .filter(|c| c.procs >= lot.procs)
        .filter_map(|c| {
            let (offer, _) = make_offer(
                lot,
                c.free_for(priority),
                &c.victims,
                others,
                stage(&c.spec),
            )?;
            Some((offer, price(cfg, lot.procs, &offer, mean_runtime)))
        })
        .fold(None, |best: Option<(Offer, f64)>, o| match best {
            Some(b) if b.1 >= o.1 => Some(b),
            _ => Some(o),
        })
}

/// Each usable cluster of this site as a bid sees it at `now` (Unix seconds).
fn site_load(w: &crate::state::world::World, now: i64) -> Vec<ClusterLoad> {
    let mut load: Vec<ClusterLoad> = w
        .clusters
        .iter()
        .map(|c| ClusterLoad {
            procs: c.procs(),
            spec: c.cfg.spec.clone(),
            idle: c.procs().saturating_sub(c.busy()),
            waiting: Vec::new(),
            victims: Vec::new(),
        })
        .collect();
    for j in w.jobs.values() {
        if j.state.is_final() || j.held {
            continue;
        }
        if !foresight_store::is_global(j) {
            if j.state == foresight_store::JobState::Pending {
                if let Some(k) = j.cluster.as_deref().and_then(|c| w.cluster_index(c)) {
                    load[k].idle = load[k].idle.saturating_sub(j.procs);
                }
            }
            continue;
        }
        let live: Vec<&foresight_store::PartRecord> = j.parts.iter().filter(|p| !p.ended).collect();
        let running = j.state == foresight_store::JobState::Running;
        match live.first().and_then(|p| w.cluster_index(&p.cluster)) {
            // Stopped where it ran: it resumes there.
            Some(k) if running && j.suspended => load[k].waiting.push((j.priority, j.procs)),
            // A job over several clusters is not offered: preempting it stops them all.
            Some(k) if running && live.iter().all(|p| p.cluster == live[0].cluster) => {
                let end = j.started_at.unwrap_or(now) + j.walltime;
                load[k].victims.push(Victim {
                    job: JobId(j.id),
                    priority: j.priority.min(u32::from(u8::MAX)) as u8,
                    procs: live.iter().map(|p| p.procs).sum(),
                    remaining: Dur((end - now).max(0)),
                    started: Time(j.started_at.unwrap_or(now)),
                });
            }
            Some(_) => {}
            None if j.state == foresight_store::JobState::Pending => {
                for c in load.iter_mut().filter(|c| c.procs >= j.procs) {
                    c.waiting.push((j.priority, j.procs));
                }
            }
            None => {}
        }
    }
    w.clusters
        .iter()
        .zip(load)
        .filter(|(c, _)| c.unavailable_reason.is_none())
        .map(|(_, l)| l)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bid_pays_for_the_time_its_cluster_takes_to_fetch_the_input() {
        // A job of 4 processors with 500 MB of input on cluster "a"; this site's cluster
        // "b" has 8 free processors and a link of 50 MB/s with 5 s latency; mean runtime
        // 100 s, default weights (procs 1, stage 1, uncapped).
        let cfg = foresight_core::auction::AuctionConfig::default();
        let mut b = ClusterSpec::new("b", 8);
        b.bandwidth_mb_s = 50.0;
        b.latency_seconds = 5;
        let lot = Lot {
            job: JobId(1),
            procs: 4,
            priority: 0,
            home: SiteId(0),
        };
        let bid = |stage: Dur| {
            let (offer, _) = make_offer(&lot, 8, &[], 0, stage).expect("8 free procs fit 4");
            price(&cfg, 4, &offer, 100.0)
        };
        // From a: 500 / 50 = 10 s + 5 s latency = 15 s; bid = 8/4 − 15/100 = 1.85.
        let far = stage_time(500.0, Some("a"), &b);
        assert_eq!(far, Dur(15));
        assert!((bid(far) - 1.85).abs() < 1e-12, "{}", bid(far));
        // Held on b itself: nothing to fetch, the full 8/4 = 2.
        let near = stage_time(500.0, Some("b"), &b);
        assert_eq!(near, Dur::ZERO);
        assert!((bid(near) - 2.0).abs() < 1e-12);
        // No input: nothing to fetch either; 1 MB rounds up to one second (+ latency).
        assert_eq!(stage_time(0.0, Some("a"), &b), Dur::ZERO);
        assert_eq!(stage_time(1.0, None, &b), Dur(6));
    }

    fn victim(job: u64, priority: u8, procs: u32, remaining: i64) -> Victim {
        Victim {
            job: JobId(job),
            priority,
            procs,
            remaining: Dur(remaining),
            started: Time(0),
        }
    }

    #[test]
    fn a_bid_with_victims_prices_the_work_it_preempts() {
        // Cluster x: 8 processors, 2 idle; a job of level 2 suspended there (2 processors,
        // waiting to resume); running global jobs 10 (level 0, 4 processors, 100 s left),
        // 11 (level 1, 2, 50 s) and 12 (level 3, 2, 10 s). Cluster y: 4 processors, all
        // idle. Mean runtime 100 s, default weights (procs 1, preempt 0.25, stage 1,
        // uncapped), no input to stage.
        let cfg = AuctionConfig::default();
        let x = |left: i64| ClusterLoad {
            procs: 8,
            spec: ClusterSpec::new("x", 8),
            idle: 2,
            waiting: vec![(2, 2)],
            victims: vec![
                victim(10, 0, 4, left),
                victim(11, 1, 2, 50),
                victim(12, 3, 2, 10),
            ],
        };
        let y = ClusterLoad {
            procs: 4,
            spec: ClusterSpec::new("y", 4),
            idle: 4,
            waiting: vec![],
            victims: vec![],
        };
        let lot = |priority: u8| Lot {
            job: JobId(1),
            procs: 4,
            priority,
            home: SiteId(0),
        };
        let best = |load: &[ClusterLoad], priority: u8| {
            best_offer(
                load,
                &lot(priority),
                u32::from(priority),
                0,
                |_| Dur::ZERO,
                &cfg,
                100.0,
            )
        };
        // Level 3 on x: the 2 idle processors (the suspended job's level is lower), then job
        // 10 (the lowest level first): 6 processors, preempting (1 + 0) × 4 × 100 = 400
        // processor-seconds: 6/4 − 0.25 × 400/(4 × 100) = 1.25.
        let (offer, p) = best(&[x(100)], 3).unwrap();
        assert_eq!((offer.procs, offer.capacity), (6, 2 + 4 + 2));
        assert_eq!(offer.preempt_work, 400.0);
        assert!((p - 1.25).abs() < 1e-12, "{p}");
        // Beside y's 4 free processors (4/4 = 1): x's 1.25 is the better bid...
        let (offer, p) = best(&[y.clone(), x(100)], 3).unwrap();
        assert_eq!(offer.preempt_work, 400.0);
        assert!((p - 1.25).abs() < 1e-12, "{p}");
        // ...but not when job 10 has 300 s left: 6/4 − 0.25 × 1200/400 = 0.75 < 1.
        let (offer, p) = best(&[x(300), y.clone()], 3).unwrap();
        assert_eq!((offer.procs, offer.preempt_work), (4, 0.0));
        assert!((p - 1.0).abs() < 1e-12, "{p}");
        // Level 1 on x: the suspended level-2 job resumes into the idle processors first, so
        // only job 10 is offered: 4/4 − 0.25 × 400/400 = 0.75.
        let (offer, p) = best(&[x(100)], 1).unwrap();
        assert_eq!((offer.procs, offer.capacity), (4, 4));
        assert!((p - 0.75).abs() < 1e-12, "{p}");
        // Level 0: nothing idle for it, nobody lower to preempt: no bid.
        assert_eq!(best(&[x(100)], 0), None);
    }
}
