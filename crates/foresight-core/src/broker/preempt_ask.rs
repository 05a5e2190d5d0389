//! Absolute priorities on clusters that schedule themselves (Slurm): there a running job's
//! processors are its resource manager's, so a preemption is asked of it and answered, like
//! a reservation ([`Broker::on_reservation_answered`]):
//! - a waiting job of a higher level that fits nowhere now, and that running global jobs of
//!   **strictly lower** levels on such a cluster would make room for ([`preempt::victims`],
//!   every part of each on that cluster), is taken out of the queue and the broker asks
//!   ([`BrokerAction::PreemptAsked`]) to suspend them, or requeue those that say they may be
//!   requeued. Only when the answer is yes ([`Broker::on_preemption_answered`]) are they
//!   preempted as on any cluster ([`BrokerAction::Preempted`]) and the waiting job reserved
//!   there at once; a refusal leaves them running and the job queued again, planned as
//!   before after a pause (1–64 s, doubling), with the cluster's words in its wait reason;
//! - a suspended job there resumes when the mirror of the cluster shows room for the rest
//!   of its run: asked ([`BrokerAction::ResumeAsked`]), it holds its processors again only
//!   when the answer is yes ([`Broker::on_resume_answered`]); a refusal leaves it suspended
//!   and asked again after a pause;
//! - local jobs of the cluster (not the broker's) are never candidates; a cluster lost
//!   between ask and answer: the victims are recorded as the answer says (suspended jobs
//!   resume once it is back), and the waiting job is queued again.
//!
//! What Slurm 22.05 does with a suspended job's processors (`scontrol suspend`, checked by
//! hand on the local test clusters, `select/cons_tres`, `CR_Core`): its cores are free for
//! jobs outside any reservation, and for jobs of the reservation it runs in; a new
//! reservation over them is refused ("Requested nodes are busy") unless made with
//! `Flags=IGNORE_JOBS`, and with `OVERLAP` too where the suspended job's own reservation
//! still holds them (it cannot be deleted while the job is in it: "Requested reservation is
//! in use"), and with `IGNORE_JOBS` a bare `CoreCnt` may take cores of running jobs too,
//! so the service names the idle nodes and cores (the suspended job's among them).
//! `scontrol resume` never checks that the cores are free again (it runs both jobs
//! on them), which is why the broker asks it only where its mirror shows room.
//!
//! Clusters the broker schedules itself are not touched here, so with none that schedules
//! itself every decision is the one [`super::levels`] makes.

use super::preempt::{self, Holder, Preemption};
use super::{Broker, BrokerAction, Phase, ReservedPart, WaitReason, MAX_BACKOFF_DOUBLINGS};
use crate::ids::{ClusterId, JobId, ReservationId};
use crate::reservation::{Acl, AdminReservation};
use crate::scheduler::{Action, Event, LocalScheduler};
use crate::time::{Dur, Interval, Time};

/// A preemption asked of a cluster that schedules itself, not answered yet.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct PendingPreemption {
    /// The cluster.
    cluster: ClusterId,
    /// The jobs to stop there, and how.
    victims: Vec<(JobId, Preemption)>,
    /// Processors the waiting job needs there, for how long, at what cost.
    need: u32,
    len: Dur,
    cost: f64,
}

impl Broker {
    /// True when the resumption of suspended job `id` was asked and not yet answered: a
    /// cluster may show its parts running before the answer comes back, and that is no news.
    pub fn resumption_asked(&self, id: JobId) -> bool {
        self.resume_asks.contains_key(&id)
    }

    /// True when job `id` waits for the answer to a preemption asked for it, or is a victim
    /// of one, or waits for the answer to its resumption.
    pub(super) fn asked_about(&self, id: JobId) -> bool {
        self.resume_asks.contains_key(&id)
            || self.preempt_asks.contains_key(&id)
            || self
                .preempt_asks
                .values()
                .any(|a| a.victims.iter().any(|(v, _)| *v == id))
    }

    /// Serves waiting jobs by level on the clusters that schedule themselves: asks to
    /// resume suspended jobs where there is room, then to preempt for waiting jobs that fit
    /// nowhere now (see the module documentation). Nothing without such a cluster.
    pub(super) fn serve_remote_levels(&mut self, now: Time, out: &mut Vec<BrokerAction>) {
        if !self
            .clusters
            .iter()
            .any(|c| c.self_scheduled && c.available)
        {
            return;
        }
        self.ask_resumes(now, out);
        // The lowest level running on such a cluster: only jobs above it may preempt.
        let Some(lowest) = self
            .jobs
            .active()
            .filter(|e| self.stoppable_by_ask(&e.phase))
            .map(|e| e.job.priority)
            .min()
        else {
            return;
        };
        let mut waiting: Vec<_> = self
            .queued_now(now)
            .filter(|e| e.job.priority > lowest)
            .map(|e| {
                (
                    preempt::service_order(e.job.priority, None, e.job.id),
                    e.job.id,
                )
            })
            .collect();
        waiting.sort();
        for (_, id) in waiting {
            if self.fits_anywhere_now(now, id) {
                continue;
            }
            self.ask_preemption(now, id, out);
        }
    }

    /// True when job `id` fits on the idle processors of some available cluster now.
    fn fits_anywhere_now(&self, now: Time, id: JobId) -> bool {
        let Some(e) = self.jobs.get(&id) else {
            return true;
        };
        let need = i64::from(e.job.procs);
        let idle: Vec<i64> = self
            .clusters
            .iter()
            .filter(|c| c.available)
            .map(|c| c.sched.idle_at(now).max(0))
            .collect();
        idle.iter().any(|&i| i >= need) || (e.job.co_allocate && idle.iter().sum::<i64>() >= need)
    }

    /// How long job `id` runs on cluster `k` and what that costs; `None` when `k` cannot
    /// take it by itself.
    fn run_on(&self, id: JobId, k: ClusterId) -> Option<(Dur, f64)> {
        let e = self.jobs.get(&id)?;
        let c = &self.clusters[k];
        if !c.available || e.job.procs > c.sched.capacity() || c.tariff.base > e.job.max_price {
            return None;
        }
        let secs = (e.job.walltime.as_secs() as f64 / c.slowest_speed()).ceil() as i64;
        let len = c.granular(Dur(secs));
        let cost = c.tariff.base * f64::from(e.job.procs) * len.as_secs() as f64;
        Some((len, cost))
    }

    /// True for a running global job a preemption asked of a cluster that schedules itself
    /// can stop: every part still running, one at least on such a cluster, every one on a
    /// cluster that is up (a co-allocated job runs synchronously: it is stopped whole, each
    /// part on its cluster, by its resource manager or, on a cluster the broker schedules
    /// itself, by the caller's executor once the answer is yes).
    fn stoppable_by_ask(&self, phase: &Phase) -> bool {
        match phase {
            Phase::Running { parts, ended, .. } => {
                ended.is_empty()
                    && parts
                        .iter()
                        .any(|p| self.clusters[p.cluster].self_scheduled)
                    && parts.iter().all(|p| self.clusters[p.cluster].available)
            }
            _ => false,
        }
    }

    /// The running global jobs holding processors of cluster `k` that a preemption asked
    /// of it could stop: those wholly on it, and those co-allocated over it and others
    /// (counted by what they hold on `k`).
    fn remote_holders(&self, k: ClusterId) -> Vec<Holder> {
        self.jobs
            .active()
            .filter(|e| !self.requeueing.contains(&e.job.id) && !self.asked_about(e.job.id))
            .filter(|e| self.stoppable_by_ask(&e.phase))
            .filter_map(|e| match &e.phase {
                Phase::Running { start, parts, .. } => {
                    let procs: u32 = parts
                        .iter()
                        .filter(|p| p.cluster == k)
                        .map(|p| p.procs)
                        .sum();
                    (procs > 0).then_some(Holder {
                        job: e.job.id,
                        priority: e.job.priority,
                        procs,
                        started: *start,
                    })
                }
                _ => None,
            })
            .collect()
    }

    /// Processors running job `v` holds on every cluster: what preempting it stops.
    fn held_everywhere(&self, v: JobId) -> u32 {
        match self.jobs.get(&v).map(|e| &e.phase) {
            Some(Phase::Running { parts, .. }) => parts.iter().map(|p| p.procs).sum(),
            _ => 0,
        }
    }

    /// Asks to preempt what job `id` needs on the cluster that schedules itself where that
    /// stops the fewest processors; false (nothing asked) when none can make room for it.
    fn ask_preemption(&mut self, now: Time, id: JobId, out: &mut Vec<BrokerAction>) -> bool {
        let Some(e) = self.jobs.get(&id) else {
            return false;
        };
        let (level, user) = (e.job.priority, e.job.user);
        let mut best: Option<(u32, PendingPreemption)> = None;
        for k in ClusterId::all(self.clusters.len()) {
            let c = &self.clusters[k];
            if !c.self_scheduled
                || !c.available
                || self.preempt_asks.values().any(|a| a.cluster == k)
            {
                continue;
            }
            let Some((len, cost)) = self.run_on(id, k) else {
                continue;
            };
            if self.short_of(id, user, cost).is_some() {
                continue;
            }
            let holders = self.remote_holders(k);
            let need = self.jobs[&id].job.procs;
            let idle = c.sched.idle_at(now).clamp(0, i64::from(u32::MAX)) as u32;
            let Some(victims) = preempt::victims(need, idle, level, &holders) else {
                continue;
            };
            if victims.is_empty() {
                continue;
            }
            // Would it really start at once once they are gone?
            let mut sched = c.sched.clone();
            for v in &victims {
                self.release_in(&mut sched, now, *v, k);
            }
            if sched
                .add_reservation_displacing(probe(need, now, len))
                .is_err()
            {
                continue;
            }
            // Co-allocated victims stop on their other clusters too.
            let stopped: u32 = victims.iter().map(|v| self.held_everywhere(*v)).sum();
            if best.as_ref().is_none_or(|b| stopped < b.0) {
                let victims = victims
                    .into_iter()
                    .map(|v| (v, Preemption::of(self.jobs[&v].job.requeue)))
                    .collect();
                best = Some((
                    stopped,
                    PendingPreemption {
                        cluster: k,
                        victims,
                        need,
                        len,
                        cost,
                    },
                ));
            }
        }
        let Some((_, ask)) = best else {
            return false;
        };
        self.queue.remove(&id);
        out.push(BrokerAction::PreemptAsked {
            by: id,
            cluster: ask.cluster,
            victims: ask.victims.clone(),
        });
        self.preempt_asks.insert(id, ask);
        true
    }

    /// Gives back, in `sched` (a copy of cluster `k`'s mirror), what running job `v` holds.
    fn release_in(&self, sched: &mut LocalScheduler, now: Time, v: JobId, k: ClusterId) {
        let _ = sched.cancel(now, v);
        if let Some(Phase::Running { parts, .. }) = self.jobs.get(&v).map(|e| &e.phase) {
            for p in parts.iter().filter(|p| p.cluster == k) {
                let _ = sched.remove_reservation(now, p.reservation);
            }
        }
    }

    /// The cluster answered the preemption asked for job `by` ([`BrokerAction::PreemptAsked`]):
    /// every victim stopped as asked (`Ok`), or none (`Err`: what the cluster said; the caller
    /// has resumed any it had suspended). On yes the victims are preempted and `by` is
    /// reserved there at once (asked of the cluster like any reservation); on no they keep
    /// running and `by` is queued again, after a pause. An answer for nothing asked changes
    /// nothing.
    pub fn on_preemption_answered(
        &mut self,
        now: Time,
        by: JobId,
        answer: Result<(), String>,
        out: &mut Vec<BrokerAction>,
    ) {
        self.observe(now);
        let Some(ask) = self.preempt_asks.remove(&by) else {
            self.settle(now);
            return;
        };
        let k = ask.cluster;
        let name = self.clusters[k].name.clone();
        let waiting = self
            .jobs
            .get(&by)
            .is_some_and(|e| matches!(e.phase, Phase::Queued | Phase::Planned { .. }));
        match answer {
            Err(why) => {
                if waiting {
                    let victims: Vec<String> =
                        ask.victims.iter().map(|(v, _)| v.to_string()).collect();
                    self.preemption_refused(
                        now,
                        by,
                        k,
                        format!(
                            "cluster {name} refused to preempt job(s) {}: {why}",
                            victims.join(", ")
                        ),
                        out,
                    );
                }
            }
            Ok(()) => {
                for (v, _) in &ask.victims {
                    // Every part of it, on every cluster it spans: stopped as asked.
                    let running = matches!(
                        self.jobs.get(v).map(|e| &e.phase),
                        Some(Phase::Running { parts, ended, .. })
                            if ended.is_empty() && parts.iter().any(|p| p.cluster == k)
                    );
                    if running {
                        self.preempt_job(now, *v, by, out);
                    }
                }
                if !waiting {
                    // Withdrawn meanwhile: the victims resume when there is room.
                } else if !self.clusters[k].available {
                    self.requeue_entry(by);
                    let reason = WaitReason::LostCluster(k);
                    if let Some(mut e) = self.jobs.get_mut(&by) {
                        e.reason = Some(reason.clone());
                    }
                    out.push(BrokerAction::Waiting { job: by, reason });
                } else {
                    let part = ReservedPart {
                        cluster: k,
                        reservation: ReservationId(0),
                        procs: ask.need,
                        processors: Vec::new(),
                        window: Interval::new(now, now + ask.len),
                    };
                    self.reserve(now, by, now, now + ask.len, ask.cost, vec![part], out);
                }
            }
        }
        self.settle(now);
    }

    /// Cluster `k` requeued (a part of) victim `v` of the preemption asked for job `by`,
    /// though the preemption as a whole failed ([`Broker::on_preemption_answered`] with
    /// `Err`): a requeue cannot be undone (Slurm has already killed the run). `v` is
    /// preempted alone, every part of it (a co-allocated job's other parts are killed by the
    /// caller), to run again as its next attempt once its parts have ended; `by` waits as the
    /// refusal says. Nothing for a job not running on that cluster, or that may not be
    /// requeued.
    pub fn on_requeued_anyway(
        &mut self,
        now: Time,
        by: JobId,
        k: ClusterId,
        v: JobId,
        out: &mut Vec<BrokerAction>,
    ) {
        self.observe(now);
        let running_here = self.jobs.get(&v).is_some_and(|e| {
            e.job.requeue
                && matches!(&e.phase, Phase::Running { parts, ended, .. }
                    if ended.is_empty() && parts.iter().any(|p| p.cluster == k))
        });
        if running_here && !self.requeueing.contains(&v) {
            self.preempt_job(now, v, by, out);
        }
        self.settle(now);
    }

    /// Job `id` is queued again after a refused preemption, not planned before a pause that
    /// doubles with each refusal in a row (1–64 s).
    fn preemption_refused(
        &mut self,
        now: Time,
        id: JobId,
        cluster: ClusterId,
        detail: String,
        out: &mut Vec<BrokerAction>,
    ) {
        let Some(mut e) = self.jobs.get_mut(&id) else {
            return;
        };
        e.refusals += 1;
        let until = now + Dur(1 << (e.refusals - 1).min(MAX_BACKOFF_DOUBLINGS));
        e.not_before = until;
        e.phase = Phase::Queued;
        let level = e.job.priority;
        self.queue.insert(id, level);
        let reason = WaitReason::PreemptionRefused {
            cluster,
            detail,
            until,
        };
        e.reason = Some(reason.clone());
        out.push(BrokerAction::Waiting { job: id, reason });
    }

    /// Asks to resume the suspended jobs with a part on a cluster that schedules itself
    /// whose mirrors have room now for the rest of their run, on every cluster they span
    /// (a co-allocated job resumes whole or not at all), in the order waiting jobs are
    /// served. On clusters the broker schedules itself the room is held for the job until
    /// the answer.
    fn ask_resumes(&mut self, now: Time, out: &mut Vec<BrokerAction>) {
        let mut stopped: Vec<_> = self
            .jobs
            .active()
            .filter(|e| !self.resume_asks.contains_key(&e.job.id) && e.not_before <= now)
            .filter_map(|e| match &e.phase {
                Phase::Suspended {
                    since, parts, left, ..
                } if parts
                    .iter()
                    .any(|p| self.clusters[p.cluster].self_scheduled) =>
                {
                    Some((
                        preempt::service_order(e.job.priority, Some(*since), e.job.id),
                        e.job.id,
                        parts.clone(),
                        *left,
                    ))
                }
                _ => None,
            })
            .collect();
        stopped.sort_by_key(|a| a.0);
        // Waiting jobs of a higher level come first: (level, processors) of each.
        let higher: Vec<(u32, u32)> = self
            .queue
            .iter()
            .filter_map(|id| self.jobs.get(id))
            .filter(|e| matches!(e.phase, Phase::Queued | Phase::Planned { .. }))
            .filter(|e| e.not_before <= now && e.job.eligible(now) <= now)
            .take(self.planner.plan_depth)
            .map(|e| (e.job.priority, e.job.procs))
            .chain(
                self.preempt_asks
                    .keys()
                    .filter_map(|id| self.jobs.get(id))
                    .map(|e| (e.job.priority, e.job.procs)),
            )
            .collect();
        // Processors asked for in this pass, per cluster: not room for the next.
        let mut asked: Vec<Vec<AdminReservation>> = vec![Vec::new(); self.clusters.len()];
        for (_, id, parts, left) in stopped {
            let level = self.jobs[&id].job.priority;
            let blocked = parts.iter().any(|p| {
                let c = &self.clusters[p.cluster];
                let outranked = higher
                    .iter()
                    .any(|&(l, n)| l > level && n <= c.sched.capacity());
                !c.available
                    || outranked
                    || self.preempt_asks.values().any(|a| a.cluster == p.cluster)
            });
            if blocked {
                continue;
            }
            let mut probes = Vec::with_capacity(parts.len());
            let room = parts.iter().all(|p| {
                let c = &self.clusters[p.cluster];
                let len = c.granular(left);
                let mut sched = c.sched.clone();
                for r in &asked[p.cluster] {
                    let _ = sched.add_reservation_displacing(r.clone());
                }
                let held: i64 = asked[p.cluster].iter().map(|r| i64::from(r.procs)).sum();
                let mut r = probe(p.procs, now, len);
                r.id = ReservationId(u64::MAX - 1 - asked[p.cluster].len() as u64);
                let fits = c.sched.idle_at(now) - held >= i64::from(p.procs)
                    && sched.add_reservation_displacing(r.clone()).is_ok();
                probes.push(r);
                fits
            });
            if !room {
                continue;
            }
            let mut holds = Vec::new();
            for (p, r) in parts.iter().zip(probes) {
                if !self.clusters[p.cluster].self_scheduled {
                    // Held for it until the answer: nobody starts there first.
                    let rid = self.allocate_reservation();
                    let window = r.window;
                    let hold = AdminReservation {
                        id: rid,
                        procs: p.procs,
                        window,
                        acl: Acl {
                            job: Some(id),
                            ..Acl::nobody()
                        },
                    };
                    if self.clusters[p.cluster]
                        .sched
                        .add_reservation_displacing(hold)
                        .is_ok()
                    {
                        holds.push(ReservedPart {
                            reservation: rid,
                            window,
                            ..p.clone()
                        });
                    }
                }
                asked[p.cluster].push(r);
            }
            let cluster = parts
                .iter()
                .find(|p| self.clusters[p.cluster].self_scheduled)
                .map_or(ClusterId(0), |p| p.cluster);
            self.resume_asks.insert(id, holds);
            out.push(BrokerAction::ResumeAsked { job: id, cluster });
        }
    }

    /// The resumption of suspended job `id` ([`BrokerAction::ResumeAsked`]) was answered:
    /// every part of it runs again (`Ok`), in new reservations of the mirrors for the rest
    /// of its run, or it stays suspended with every part (`Err`: why; the caller has
    /// suspended again any part it had resumed), asked again after a pause (1–64 s,
    /// doubling). An answer for nothing asked changes nothing.
    pub fn on_resume_answered(
        &mut self,
        now: Time,
        id: JobId,
        answer: Result<(), String>,
        out: &mut Vec<BrokerAction>,
    ) {
        self.observe(now);
        let Some(holds) = self.resume_asks.remove(&id) else {
            self.settle(now);
            return;
        };
        let phase = self.jobs.get(&id).map(|e| e.phase.clone());
        let (
            Some(Phase::Suspended {
                start,
                cost,
                parts,
                since,
                left,
                suspended,
            }),
            Ok(()),
        ) = (phase, &answer)
        else {
            for h in &holds {
                let _ = self.clusters[h.cluster]
                    .sched
                    .remove_reservation(now, h.reservation);
            }
            if answer.is_err() {
                if let Some(mut e) = self.jobs.get_mut(&id) {
                    e.refusals += 1;
                    e.not_before = now + Dur(1 << (e.refusals - 1).min(MAX_BACKOFF_DOUBLINGS));
                }
            }
            self.settle(now);
            return;
        };
        let mut new_parts = Vec::with_capacity(parts.len());
        for p in &parts {
            if let Some(h) = holds.iter().find(|h| h.cluster == p.cluster) {
                new_parts.push(h.clone()); // held for it since the ask
                continue;
            }
            let window = Interval::new(now, now + self.clusters[p.cluster].granular(left));
            let rid = self.allocate_reservation();
            // It runs whatever the mirror says: the mirror catches up at its next rebuild.
            let _ = self.clusters[p.cluster]
                .sched
                .add_reservation_displacing(AdminReservation {
                    id: rid,
                    procs: p.procs,
                    window,
                    acl: Acl {
                        job: Some(id),
                        ..Acl::nobody()
                    },
                });
            new_parts.push(ReservedPart {
                reservation: rid,
                window,
                ..p.clone()
            });
        }
        self.mark_resumed(id, start, cost, &new_parts, suspended + (now - since), out);
        let job = self.jobs[&id].job.clone();
        for p in new_parts
            .iter()
            .filter(|p| !self.clusters[p.cluster].self_scheduled)
            .cloned()
            .collect::<Vec<_>>()
        {
            // Bound to its reservation on a cluster the broker schedules, as when it resumes
            // there by itself; its own start is the resume above.
            let mut actions = Vec::new();
            let _ = self.clusters[p.cluster].sched.handle(
                now,
                Event::Submit(super::bound_part(&job, &p)),
                &mut actions,
            );
            actions.retain(|a| !matches!(a, Action::Start { job, .. } if *job == id));
            self.carry_out(now, p.cluster, actions, out);
        }
        if let Some(mut e) = self.jobs.get_mut(&id) {
            e.refusals = 0;
            e.not_before = Time::MIN;
        }
        self.settle(now);
    }
}

/// A reservation to try on a copy of a scheduler.
fn probe(procs: u32, start: Time, len: Dur) -> AdminReservation {
    AdminReservation {
        id: ReservationId(u64::MAX),
        procs,
        window: Interval::new(start, start + len),
        acl: Acl::nobody(),
    }
}
