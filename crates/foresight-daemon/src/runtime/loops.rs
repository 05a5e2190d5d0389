//! The service's long-running tasks: a remote cluster's sync loop, the scheduling cycle, and
//! the store writer that every change goes through.

use crate::runtime::Service;
use crate::state::world::Effect;
use foresight_core::grid::Decision;
use foresight_core::{ClusterId, JobId, ReservationId};
use foresight_store::{JobRecord, Store, UserRecord};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

impl Service {
    /// Reads remote cluster `k` every `sync_ms`: the snapshot feeds its mirror and the
    /// reconciliation of our parts and reservations there.
    pub(crate) async fn sync_loop(self: Arc<Self>, k: ClusterId, every: Duration) {
        let manager = self.managers[k].clone();
        loop {
            if self.closing.load(Ordering::Relaxed) {
                return;
            }
            if manager.first_report_pending() {
                tokio::time::sleep(every).await;
                continue;
            }
            let snapshot = manager.snapshot().await.map_err(|e| e.to_string());
            self.world().sync_remote(self.now(), k, snapshot);
            self.wake.notify_one();
            self.flush().await;
            tokio::time::sleep(every).await;
        }
    }

    pub(crate) async fn cycle_loop(self: Arc<Self>) {
        let mut last_cycle: Option<Instant> = None;
        loop {
            let now = self.now();
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
                wait.saturating_sub(self.clock.subsecond())
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
            last_cycle = Some(Instant::now());
            self.run_cycle().await;
        }
    }

    /// One scheduling cycle at the clock's now: what it decides before planning carried out
    /// at once, the planning run off the lock, its decisions applied and carried out.
    pub(crate) async fn run_cycle(self: &Arc<Self>) {
        let started = Instant::now();
        let plan = self.world().begin_cycle(self.now());
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
            w.recount_changed();
            let jobs: Vec<JobRecord> = w
                .jobs
                .take_changed()
                .into_iter()
                .filter_map(|id| w.jobs.get(&id).cloned())
                .collect();
            let rs: Vec<_> = w
                .reservations
                .take_changed()
                .into_iter()
                .filter_map(|id| w.reservations.get(&id).cloned())
                .collect();
            // Each user with the record it was changed from: only what changed here is
            // written, over what other sites wrote meanwhile.
            let us: Vec<_> = w
                .users
                .take_changed()
                .into_iter()
                .filter_map(|n| {
                    let user = w.users.get(&n)?.clone();
                    let base = w.users_base.get(&n).cloned();
                    Some(foresight_store::UserChange { base, user })
                })
                .collect();
            let wfs: Vec<_> = w
                .workflows
                .take_changed()
                .into_iter()
                .filter_map(|id| w.workflows.get(&id).cloned())
                .collect();
            let runs = std::mem::take(&mut w.prediction.runs_to_write);
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
            for j in &jobs {
                w.jobs.mark(JobId(j.id));
            }
            for r in &reservations {
                w.reservations.mark(ReservationId(r.id));
            }
            for u in &users {
                w.users.mark(u.user.name.clone());
            }
            for x in &workflows {
                w.workflows.mark(x.id);
            }
            w.prediction.runs_to_write.splice(0..0, runs);
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
}

pub(crate) type InsertRequest = (
    Vec<JobRecord>,
    tokio::sync::oneshot::Sender<Result<Vec<u64>, String>>,
);

/// Group commit: every submission waiting while a transaction is on its way to disk goes
/// into the next one, so one fsync acknowledges many jobs; each is still durable before its
/// caller hears of it.
pub(crate) async fn insert_writer(
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

/// The shortest time between two scheduling cycles.
pub(crate) const MIN_CYCLE_GAP: Duration = Duration::from_millis(20);

/// Decisions of a cycle carried out per hold of the state's lock. A 10 000-job cycle's
/// decisions took about 160 ms in one hold; 256 of them take a few milliseconds.
pub(crate) const DECISIONS_PER_LOCK: usize = 256;
