//! Where global jobs wait, behind one trait, so that submission and the operations on jobs
//! this service does not hold take one path in either mode:
//! - [`SingleSite`] (`mode = "single"`): this service's own broker plans them and its own
//!   store keeps them;
//! - [`Dispatcher`] (`mode = "dispatcher"`): they go to the queue the sites share in
//!   PostgreSQL ([`foresight_store::SharedQueue`]), to be sold by auction to one site.

use crate::config::dispatcher::Mode;
use crate::runtime::dispatcher::Dispatcher;
use crate::runtime::Service;
use crate::state::refusal::Refusal;
use crate::state::stored::ToStored;
use crate::state::world::World;
use foresight_store::{
    AuctionCounts, AuctionRecord, DependencyRecord, InputRecord, JobRecord, OpOutcome, QueueOp,
    SharedJob, SharedQueue, SiteRecord, Store, UserRecord, WorkflowRecord,
};
use std::sync::Arc;

/// Where this service's global jobs wait. Mode single and dispatcher mode differ here and
/// (for what a dispatcher does by itself) in `dispatcher.rs`, nowhere else in `runtime/`.
#[async_trait::async_trait]
pub(crate) trait GlobalQueue: Send + Sync {
    /// Starts what keeps the queue moving beside the service, once it answers at `url` (a
    /// dispatcher's heartbeat, notifications and auction rounds; nothing alone).
    async fn start(self: Arc<Self>, service: Arc<Service>, url: &str) -> anyhow::Result<()>;

    /// This site's load changed (a job ended, or jobs were taken in): a dispatcher bids
    /// again soon. Alone, the scheduling cycle, woken by the caller, is enough.
    fn poke(&self);

    /// What this submission's global jobs are checked against, read before the world is
    /// locked: other sites come and go between submissions.
    async fn admission(&self) -> Result<Admission, Refusal>;

    /// A global job's `--dependency` resolved where it may name jobs of any site; `None`
    /// when the world resolves it (alone: every job is here).
    async fn dependency(
        &self,
        user: &UserRecord,
        text: &str,
    ) -> Result<Option<DependencyRecord>, Refusal>;

    /// Sets each job's `budget_hold` where a budget is shared by several sites, so that
    /// every site's admissions count what a job here may cost (settled at its end, see
    /// `foresight_store::local_taken`).
    fn hold_budgets(&self, w: &World, user: &str, jobs: &mut [JobRecord]);

    /// Makes a submission's `jobs` durable and numbers them: the record is written before
    /// the job is accepted, so that an accepted job survives a crash. `committed` is what
    /// the user's jobs here may still cost, these included, for a shared budget's check.
    async fn store_jobs(
        &self,
        service: &Service,
        user: &str,
        jobs: &[JobRecord],
        committed: f64,
    ) -> Result<Vec<u64>, Refusal>;

    /// Makes a workflow and its task jobs durable in one transaction: the workflow's id and
    /// its jobs' ids.
    async fn store_workflow(
        &self,
        service: &Service,
        user: &str,
        wf: &WorkflowRecord,
        jobs: &[JobRecord],
    ) -> Result<(u64, Vec<u64>), Refusal>;

    /// Of the jobs just stored, keeps those this site's world takes in: the others wait in
    /// the shared queue, to be sold by auction.
    fn keep_here(&self, jobs: &mut Vec<JobRecord>);

    /// A job this service does not hold, as the queue has it; `None` when it knows none.
    async fn shared_job(&self, id: u64) -> Result<Option<SharedJob>, Refusal>;

    /// Cancels, holds or releases a job [`GlobalQueue::shared_job`] found (`now`: Unix
    /// seconds), or asks the site that started it to cancel it.
    async fn apply(&self, id: u64, op: QueueOp, now: i64) -> Result<OpOutcome, Refusal>;

    /// The newest `limit` jobs (of `user`, else everyone's; in `state`, else any) this site
    /// does not hold, for lists that show every site's.
    async fn jobs_elsewhere(
        &self,
        user: Option<&str>,
        state: Option<&str>,
        limit: u32,
    ) -> Result<Vec<SharedJob>, Refusal>;

    /// Sets and tops up `user`'s budget where several sites share it: the budget and what
    /// was spent, after; `None` when the budget is this service's alone.
    async fn change_budget(
        &self,
        user: &str,
        set: Option<Option<f64>>,
        add: Option<f64>,
    ) -> Result<Option<(Option<f64>, f64)>, Refusal>;

    /// The user whose token has this hash, where another site may have created them or
    /// changed their token a moment ago.
    async fn user_by_token(&self, hash: &str) -> Result<Option<UserRecord>, Refusal>;

    /// The sites sharing the global queue, with their leases; `None` alone (mode single has
    /// no sites), which the API answers as a conflict naming the mode.
    async fn sites(&self) -> Result<Option<Vec<SiteRecord>>, Refusal>;

    /// The first `limit` global jobs on offer, with their auctions; `None` alone.
    async fn auctions(&self, limit: u32) -> Result<Option<Vec<AuctionRecord>>, Refusal>;

    /// How many global jobs on offer are at each stage of their auctions; `None` alone.
    async fn auction_counts(&self) -> Result<Option<AuctionCounts>, Refusal>;

    /// The auctions this service closed since it started: awarded, unsold (zero alone).
    fn closes(&self) -> (u64, u64);

    /// The dispatcher rounds this service completed since it started (zero alone).
    fn rounds(&self) -> u64;

    /// This site's side of the transfers of inputs between sites; `None` alone.
    fn peer_link(&self) -> Option<&crate::runtime::peer_inputs::PeerLink> {
        None
    }
}

/// What a submission's global jobs are admitted against: this site's clusters, or every
/// site's (a job may then run, and find its inputs, on another site's cluster).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Admission {
    /// Alone: the grid is this site's clusters.
    Site,
    /// Several sites: the largest cluster of any of them has `largest` processors.
    Sites {
        /// Its processors.
        largest: u32,
    },
}

impl Admission {
    /// Whether `cluster` may hold a job's input or output files: with several sites, a
    /// name this site does not know may be another site's cluster.
    pub(crate) fn knows_cluster(self, w: &World, cluster: &str) -> bool {
        matches!(self, Admission::Sites { .. }) || w.cluster_index(cluster).is_some()
    }

    /// The inputs of a job submitted for `cluster`: with several sites, a global job's
    /// unnamed inputs are on this site (its first cluster), from which other sites stage
    /// them.
    pub(crate) fn place_inputs(
        self,
        w: &World,
        cluster: Option<&str>,
        inputs: Vec<InputRecord>,
    ) -> Vec<InputRecord> {
        match (self, cluster, w.clusters.first()) {
            (Admission::Sites { .. }, None, Some(here)) => inputs
                .into_iter()
                .map(|mut i| {
                    i.cluster.get_or_insert_with(|| here.cfg.name.clone());
                    i
                })
                .collect(),
            _ => inputs,
        }
    }

    /// Names `site` (this one) as the holder of each input of a global job `rec` on one of
    /// this site's clusters, with several sites: a winner elsewhere fetches it from here.
    pub(crate) fn mark_holder(self, w: &World, site: Option<&str>, rec: &mut JobRecord) {
        let (Admission::Sites { .. }, Some(site)) = (self, site) else {
            return;
        };
        if !foresight_store::is_global(rec) {
            return;
        }
        for i in &mut rec.inputs {
            if i.cluster
                .as_deref()
                .is_some_and(|c| w.cluster_index(c).is_some())
            {
                i.site = Some(site.to_owned());
            }
        }
    }

    /// Refuses a job no cluster could ever run (a global one with several sites: no site).
    pub(crate) fn admit(
        self,
        w: &World,
        rec: &JobRecord,
        array_limit: Option<u32>,
    ) -> Result<(), Refusal> {
        match self {
            Admission::Sites { largest } if foresight_store::is_global(rec) => {
                admit_global(rec, array_limit, largest)?;
                // Its size is checked against every site's clusters, not this one's.
                let mut here = rec.clone();
                here.procs = here.procs.min(1);
                w.admit(&here)
            }
            _ => w.admit(rec),
        }
    }
}

/// The store `cfg` names, and where its global jobs wait: alone, in it; in dispatcher mode,
/// in the shared queue beside it (the store then sees only this site's jobs).
pub(crate) async fn open_store(
    cfg: &crate::Config,
) -> anyhow::Result<(Arc<dyn Store>, Arc<dyn GlobalQueue>)> {
    let location = cfg.store_location()?;
    // What a second server refused this store is told of this one.
    let holder = foresight_store::Holder::this_process(Some(&cfg.data_dir));
    match (cfg.mode, &location) {
        (Mode::Single, _) => Ok((
            crate::runtime::standby::take_store(&location, &holder, cfg.standby).await?,
            Arc::new(SingleSite),
        )),
        (Mode::Dispatcher, foresight_store::StoreLocation::Postgres(url)) => {
            let site = cfg.dispatcher.site.clone().ok_or_else(|| {
                anyhow::anyhow!("mode = \"dispatcher\" needs a site (--site NAME)")
            })?;
            let ca = peer_ca(cfg.dispatcher.ca_cert.as_deref())?;
            let store = foresight_store::PgStore::open_by(url, Some(&site), &holder).await?;
            let queue = SharedQueue::new(&store, &site, cfg.dispatcher.lease_ms);
            let dispatcher = Arc::new(Dispatcher::new(queue, cfg.dispatcher.clone(), ca));
            Ok((Arc::new(store), dispatcher))
        }
        (Mode::Dispatcher, _) => anyhow::bail!(
            "mode = \"dispatcher\" needs a PostgreSQL store shared by the dispatchers \
             (--store postgres://…)"
        ),
    }
}

/// The CA of `dispatcher.ca_cert`, read and checked at start: a file that is missing or
/// not a certificate stops the start naming it, not the first transfer.
fn peer_ca(path: Option<&std::path::Path>) -> anyhow::Result<Option<Vec<u8>>> {
    let Some(p) = path else {
        return Ok(None);
    };
    let pem =
        std::fs::read(p).map_err(|e| anyhow::anyhow!("dispatcher.ca_cert {}: {e}", p.display()))?;
    foresight_rm::grid::CentreClient::new(&["https://localhost".into()], "-", "-", Some(&pem))
        .map_err(|e| anyhow::anyhow!("dispatcher.ca_cert {}: {e}", p.display()))?;
    Ok(Some(pem))
}

/// Writes `jobs` to this service's own store (through its writer, which batches
/// concurrent submissions into one transaction) and answers their ids.
async fn store_here(service: &Service, jobs: &[JobRecord]) -> Result<Vec<u64>, Refusal> {
    let (reply, answer) = tokio::sync::oneshot::channel();
    match service.inserts.send((jobs.to_vec(), reply)) {
        Err(_) => Err(Refusal::internal("the store writer has stopped")),
        Ok(()) => answer
            .await
            .map_err(|_| Refusal::internal("the store writer has stopped"))
            .and_then(|r| r.map_err(|e| Refusal::internal(format!("storing the jobs: {e}")))),
    }
}

/// Whether `user` has a limited budget here.
fn limited(w: &World, user: &str) -> bool {
    w.users.get(user).is_some_and(|u| u.budget.is_some())
}

/// A service alone: its broker plans global jobs at its own cycle, its store keeps every
/// job, and no other site holds any.
pub(crate) struct SingleSite;

#[async_trait::async_trait]
impl GlobalQueue for SingleSite {
    async fn start(self: Arc<Self>, _: Arc<Service>, _: &str) -> anyhow::Result<()> {
        Ok(())
    }

    fn poke(&self) {}

    async fn admission(&self) -> Result<Admission, Refusal> {
        Ok(Admission::Site)
    }

    async fn dependency(
        &self,
        _: &UserRecord,
        _: &str,
    ) -> Result<Option<DependencyRecord>, Refusal> {
        Ok(None)
    }

    fn hold_budgets(&self, _: &World, _: &str, _: &mut [JobRecord]) {}

    async fn store_jobs(
        &self,
        service: &Service,
        _: &str,
        jobs: &[JobRecord],
        _: f64,
    ) -> Result<Vec<u64>, Refusal> {
        store_here(service, jobs).await
    }

    async fn store_workflow(
        &self,
        service: &Service,
        _: &str,
        wf: &WorkflowRecord,
        jobs: &[JobRecord],
    ) -> Result<(u64, Vec<u64>), Refusal> {
        service
            .store
            .insert_workflow(wf, jobs)
            .await
            .map_err(|e| Refusal::internal(format!("storing the workflow: {e}")))
    }

    fn keep_here(&self, _: &mut Vec<JobRecord>) {}

    async fn shared_job(&self, _: u64) -> Result<Option<SharedJob>, Refusal> {
        Ok(None)
    }

    async fn apply(&self, id: u64, _: QueueOp, _: i64) -> Result<OpOutcome, Refusal> {
        // Never asked: no job is elsewhere (`shared_job` finds none).
        Err(Refusal::not_found_at("id", format!("no job {id}")))
    }

    async fn jobs_elsewhere(
        &self,
        _: Option<&str>,
        _: Option<&str>,
        _: u32,
    ) -> Result<Vec<SharedJob>, Refusal> {
        Ok(Vec::new())
    }

    async fn change_budget(
        &self,
        _: &str,
        _: Option<Option<f64>>,
        _: Option<f64>,
    ) -> Result<Option<(Option<f64>, f64)>, Refusal> {
        Ok(None)
    }

    async fn user_by_token(&self, _: &str) -> Result<Option<UserRecord>, Refusal> {
        Ok(None)
    }

    async fn sites(&self) -> Result<Option<Vec<SiteRecord>>, Refusal> {
        Ok(None)
    }

    async fn auctions(&self, _: u32) -> Result<Option<Vec<AuctionRecord>>, Refusal> {
        Ok(None)
    }

    async fn auction_counts(&self) -> Result<Option<AuctionCounts>, Refusal> {
        Ok(None)
    }

    fn closes(&self) -> (u64, u64) {
        (0, 0)
    }

    fn rounds(&self) -> u64 {
        0
    }
}

/// A peer dispatcher: global jobs, and the jobs of a user whose budget every site shares,
/// are stored in the shared database, checked there against the budget in the same
/// transaction; its auction rounds sell them (`dispatcher.rs`).
#[async_trait::async_trait]
impl GlobalQueue for Dispatcher {
    fn peer_link(&self) -> Option<&crate::runtime::peer_inputs::PeerLink> {
        Some(&self.peer)
    }

    async fn start(self: Arc<Self>, service: Arc<Service>, url: &str) -> anyhow::Result<()> {
        self.run(service, url).await
    }

    fn poke(&self) {
        Dispatcher::poke(self);
    }

    async fn admission(&self) -> Result<Admission, Refusal> {
        let largest = self
            .queue
            .largest_cluster()
            .await
            .map_err(|e| Refusal::internal(format!("reading the dispatchers: {e}")))?;
        Ok(Admission::Sites { largest })
    }

    async fn dependency(
        &self,
        user: &UserRecord,
        text: &str,
    ) -> Result<Option<DependencyRecord>, Refusal> {
        resolve_dependency(&self.queue, user, text).await.map(Some)
    }

    fn hold_budgets(&self, w: &World, user: &str, jobs: &mut [JobRecord]) {
        if limited(w, user) {
            for j in jobs.iter_mut() {
                if let Some(price) = w.local_tariff(j) {
                    j.budget_hold = World::worst_case(j, price);
                }
            }
        }
    }

    async fn store_jobs(
        &self,
        service: &Service,
        user: &str,
        jobs: &[JobRecord],
        committed: f64,
    ) -> Result<Vec<u64>, Refusal> {
        let limited = limited(&service.world(), user);
        if !limited && !jobs.iter().any(foresight_store::is_global) {
            // Nothing for the shared queue or budget: this site's own store.
            return store_here(service, jobs).await;
        }
        // Checked against the budget in the shared database, with the user's global jobs
        // not yet started (wherever submitted), and stored in the same transaction.
        match self.queue.submit(user, jobs, committed).await {
            Ok(foresight_store::Submitted::Stored(ids)) => Ok(ids),
            Ok(foresight_store::Submitted::OverBudget(o)) => Err(over_budget(user, &o)),
            Err(e) => Err(Refusal::internal(format!("storing the jobs: {e}"))),
        }
    }

    async fn store_workflow(
        &self,
        service: &Service,
        user: &str,
        wf: &WorkflowRecord,
        jobs: &[JobRecord],
    ) -> Result<(u64, Vec<u64>), Refusal> {
        // Its tasks are this site's local jobs, each with its hold, checked against the
        // budget as a submission is.
        let committed = {
            let mut w = service.world();
            w.recount_changed();
            w.uncharged_of(user)
        };
        match self.queue.submit_workflow(user, wf, jobs, committed).await {
            Ok(Ok(stored)) => Ok(stored),
            Ok(Err(o)) => Err(over_budget(user, &o)),
            Err(e) => Err(Refusal::internal(format!("storing the workflow: {e}"))),
        }
    }

    fn keep_here(&self, jobs: &mut Vec<JobRecord>) {
        // Global jobs went to the shared queue with their records: sold by auction.
        jobs.retain(|r| !foresight_store::is_global(r));
        Dispatcher::poke(self);
    }

    async fn shared_job(&self, id: u64) -> Result<Option<SharedJob>, Refusal> {
        self.queue
            .shared_job(id)
            .await
            .map_err(|e| Refusal::internal(format!("reading job {id}: {e}")))
    }

    async fn apply(&self, id: u64, op: QueueOp, now: i64) -> Result<OpOutcome, Refusal> {
        self.queue
            .apply(id, op, now)
            .await
            .map_err(|e| Refusal::internal(format!("job {id} in the global queue: {e}")))
    }

    async fn jobs_elsewhere(
        &self,
        user: Option<&str>,
        state: Option<&str>,
        limit: u32,
    ) -> Result<Vec<SharedJob>, Refusal> {
        self.queue
            .jobs_elsewhere(user, state, limit)
            .await
            .map_err(|e| Refusal::internal(format!("reading the shared jobs: {e}")))
    }

    async fn change_budget(
        &self,
        user: &str,
        set: Option<Option<f64>>,
        add: Option<f64>,
    ) -> Result<Option<(Option<f64>, f64)>, Refusal> {
        match self.queue.change_budget(user, set, add).await {
            Ok(Some(Err(why))) => Err(Refusal::invalid("add", why)),
            Ok(Some(Ok(r))) => Ok(Some(r)),
            Ok(None) => Err(Refusal::not_found_at("name", format!("no user {user:?}"))),
            Err(e) => Err(Refusal::internal(format!(
                "changing {user:?}'s budget: {e}"
            ))),
        }
    }

    async fn user_by_token(&self, hash: &str) -> Result<Option<UserRecord>, Refusal> {
        self.queue
            .user_by_token(hash)
            .await
            .map_err(|e| Refusal::internal(format!("reading the shared users: {e}")))
    }

    async fn sites(&self) -> Result<Option<Vec<SiteRecord>>, Refusal> {
        self.queue
            .sites()
            .await
            .map(Some)
            .map_err(|e| Refusal::internal(format!("reading the sites: {e}")))
    }

    async fn auctions(&self, limit: u32) -> Result<Option<Vec<AuctionRecord>>, Refusal> {
        self.queue
            .auctions(limit)
            .await
            .map(Some)
            .map_err(|e| Refusal::internal(format!("reading the auctions: {e}")))
    }

    async fn auction_counts(&self) -> Result<Option<AuctionCounts>, Refusal> {
        self.queue
            .auction_counts()
            .await
            .map(Some)
            .map_err(|e| Refusal::internal(format!("counting the auctions: {e}")))
    }

    fn closes(&self) -> (u64, u64) {
        Dispatcher::closes(self)
    }

    fn rounds(&self) -> u64 {
        Dispatcher::rounds(self)
    }
}

/// A global job's `dependency`, parsed and resolved to job ids wherever they are (only
/// jobs `user` may see; an administrator sees all): 400 naming what is unknown.
async fn resolve_dependency(
    queue: &SharedQueue,
    user: &foresight_store::UserRecord,
    text: &str,
) -> Result<foresight_store::DependencyRecord, Refusal> {
    let d: foresight_api::Dependency = text
        .parse()
        .map_err(|e: String| Refusal::invalid("dependency", e))?;
    let mut on = Vec::new();
    for (kind, r) in &d.on {
        let jobs = queue
            .resolve((!user.admin).then_some(user.name.as_str()), r.job, r.task)
            .await
            .map_err(|e| Refusal::internal(format!("resolving {r}: {e}")))?;
        if jobs.is_empty() {
            return Err(Refusal::invalid(
                "dependency",
                format!("no job {r} (in {:?})", text.trim()),
            ));
        }
        on.push(foresight_store::ConditionRecord {
            kind: kind.to_stored(),
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

/// Refuses a global job the shared queue cannot take: larger than every site's largest
/// cluster (`largest`), or what it cannot sell yet (a `singleton`, or an array limit
/// `%N`: those would have to count jobs at every site). Dependencies wait in the queue
/// (the dispatcher's `decide_waiting`); an array's tasks are sold one by one.
fn admit_global(
    rec: &foresight_store::JobRecord,
    array_limit: Option<u32>,
    largest: u32,
) -> Result<(), Refusal> {
    if !foresight_store::is_global(rec) {
        return Ok(());
    }
    if rec.procs > largest {
        return Err(Refusal::invalid(
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
    Err(Refusal::invalid(
        field,
        format!(
            "in dispatcher mode a global job cannot be {what} (its tasks and namesakes may \
             run at any site); name a cluster of this site (--cluster) or submit it without"
        ),
    ))
}

/// The 402 refusing a submission over `user`'s shared budget, with the figures of the
/// check ([`SharedQueue::submit`]): what it may cost and what the budget already holds.
fn over_budget(user: &str, o: &foresight_store::OverBudget) -> Refusal {
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
    if o.local_jobs > 0 {
        parts.push(format!(
            "the {} local job{} submitted may cost {:.2} at worst (processors × \
                 walltime × their cluster's tariff)",
            o.local_jobs,
            plural(o.local_jobs),
            o.local
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
    Refusal::over_budget(format!(
        "{}: more than the remaining budget {:.2} of {user} (shared by every \
             site, less what its other jobs hold); nothing was submitted",
        parts.join(", plus "),
        o.left
    ))
}

#[cfg(test)]
mod tests {
    use super::peer_ca;

    /// `dispatcher.ca_cert` that cannot be a CA stops the start naming the key and the file:
    /// missing, or holding no certificate (which would otherwise add none, silently).
    #[test]
    fn a_peer_ca_that_is_no_certificate_is_refused_naming_it() {
        assert_eq!(peer_ca(None).unwrap(), None);
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let e = peer_ca(Some(&missing)).unwrap_err().to_string();
        assert!(
            e.contains("dispatcher.ca_cert") && e.contains("missing.pem"),
            "{e}"
        );
        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, "not a certificate\n").unwrap();
        let e = peer_ca(Some(&garbage)).unwrap_err().to_string();
        assert!(
            e.contains("dispatcher.ca_cert") && e.contains("garbage.pem") && e.contains("no PEM"),
            "{e}"
        );
    }
}
