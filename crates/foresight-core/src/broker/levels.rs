//! Absolute priorities in the broker's cycle (seed 001). Waiting jobs are served by level,
//! in [`preempt::service_order`], twice a cycle ([`Stage`]): before the planner runs, and
//! again after its decisions are carried out, against where it really put the jobs:
//! - a suspended job resumes as soon as the clusters it ran on have room for the rest of its
//!   run, before any queued job of its level or below is planned;
//! - a job that cannot start now (queued, or suspended on one cluster) takes the processors
//!   of running global jobs of **strictly lower** levels ([`preempt::victims`]) on the
//!   cluster where that stops the fewest processors, and starts there at once, on that
//!   cluster alone; the jobs taken from are suspended, or killed and queued again when they
//!   say they may be requeued ([`BrokerAction::Preempted`]);
//! - a queued job that can start now without preemption is left to the planner, and claims
//!   the processors it fits into: they are not idle for the jobs served after it (a later
//!   job that no longer fits preempts in this cycle; a suspended job of a lower level
//!   resumes only beside the claims);
//! - the claims are a guess of where the planner puts those jobs, and the planner may put
//!   them elsewhere (a co-allocated job over several clusters, a job on another cluster
//!   than the first that fits): so before the planner, once a job has claimed processors,
//!   the suspended jobs served after it wait for the second pass, which serves every job
//!   still waiting again on the clusters as the planner left them. A job the planner did
//!   not start after all then preempts in this very cycle, and a suspended job resumes
//!   only into processors nobody was given;
//! - before the planner, once a job has claimed processors, queued jobs served after it
//!   that need preemption wait for the second pass too; after the planner, a queued job
//!   that fits claims nothing (the planner kept it for later), but a job of a lower level
//!   neither resumes into nor preempts with the idle processors it fits into (a higher
//!   level comes first on idle processors); and the second pass is repeated while it
//!   starts something, since a job served before may have lost its idle processors to a
//!   job of its level served after it;
//! - the planner does not start a job of a lower level where a waiting job of a higher
//!   level (queued, or suspended and waiting for the second pass) would take its processors
//!   back at once, nor where, once the second pass has served every waiting job (played on
//!   copies of the broker, with and without the start), a queued job of a higher level
//!   would wait on processors of lower levels it would not wait on otherwise: jobs started
//!   in a cycle are not stopped again in it.
//!
//! Local jobs are never preempted: they are not the broker's to stop. Only clusters the
//! broker schedules itself take part: on a cluster that schedules itself (Slurm) a running
//! job's processors are its resource manager's, and a preemption would have to be asked of
//! it and answered like a reservation. When every job has the same level nothing here
//! happens, and the broker decides exactly as it did without levels.

use super::preempt::{self, Holder, Preemption};
use super::{bound_part, Broker, BrokerAction, GridCluster, Phase, ReservationEnd, ReservedPart};
use crate::ids::{ClusterId, JobId, ReservationId};
use crate::reservation::{Acl, AdminReservation};
use crate::scheduler::{Action, Event, LocalScheduler};
use crate::time::{Dur, Interval, Time};
use std::collections::{BTreeMap, BTreeSet};

/// When in a cycle waiting jobs are served by level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stage {
    /// Before the planner: suspended jobs served after a claim wait for the second pass.
    BeforePlanning,
    /// After the planner's decisions are carried out: every waiting job, on the clusters
    /// as they are.
    AfterPlanning,
}

impl Broker {
    /// The queued jobs that may start at `now` (not held back, past their begin time), in
    /// queue order, as deep as the planner looks: the jobs levels are served for.
    pub(super) fn queued_now(&self, now: Time) -> impl Iterator<Item = &super::Entry> + '_ {
        self.queue
            .iter()
            .filter_map(|id| self.jobs.get(id))
            .filter(|e| matches!(e.phase, Phase::Queued | Phase::Planned { .. }))
            .filter(move |e| e.not_before <= now && e.job.eligible(now) <= now)
            .take(self.planner.plan_depth)
    }

    /// Job `id` runs again on `parts` (new reservations from now): its phase says so, and
    /// [`BrokerAction::Resumed`] tells the caller. `suspended` is all its time stopped.
    pub(super) fn mark_resumed(
        &mut self,
        id: JobId,
        start: Time,
        cost: f64,
        parts: &[ReservedPart],
        suspended: Dur,
        out: &mut Vec<BrokerAction>,
    ) {
        let end = parts.iter().map(|p| p.window.end).max().unwrap_or(start);
        if let Some(mut e) = self.jobs.get_mut(&id) {
            e.phase = Phase::Running {
                start,
                end,
                cost,
                parts: parts.to_vec(),
                ended: BTreeSet::new(),
                suspended,
            };
            e.reason = None;
        }
        out.push(BrokerAction::Resumed {
            job: id,
            end,
            parts: parts.to_vec(),
        });
    }

    /// Serves waiting jobs by level: resumes, preempts (see the module documentation).
    /// After the planner, from the start again each time a job starts or resumes: a job
    /// that fit on idle processors when it was served may have lost them to a job of its
    /// level served after it, and then takes processors of a lower level in its turn,
    /// before any lower level is served.
    pub(super) fn serve_levels(&mut self, now: Time, stage: Stage, out: &mut Vec<BrokerAction>) {
        // Each pass that acts starts a job that cannot be stopped again in this cycle.
        let bound = 2 * self.jobs.len() + 2;
        for _ in 0..bound {
            let before = out.len();
            self.serve_levels_once(now, stage, out);
            if stage == Stage::BeforePlanning || out.len() == before {
                return;
            }
        }
    }

    /// One pass over the waiting jobs in their service order.
    fn serve_levels_once(&mut self, now: Time, stage: Stage, out: &mut Vec<BrokerAction>) {
        let any_suspended = self
            .jobs
            .active()
            .any(|e| matches!(e.phase, Phase::Suspended { .. }));
        if !any_suspended && self.lowest_running_level().is_none() {
            return;
        }
        let mut waiting: Vec<_> = self
            .queued_now(now)
            .map(|e| {
                (
                    preempt::service_order(e.job.priority, None, e.job.id),
                    e.job.id,
                )
            })
            .collect();
        for e in self.jobs.active() {
            if let Phase::Suspended { since, .. } = e.phase {
                let key = preempt::service_order(e.job.priority, Some(since), e.job.id);
                waiting.push((key, e.job.id));
            }
        }
        waiting.sort();
        // Processors queued jobs served before (that fit without preemption) are about to
        // get from the planner: not idle for the jobs served after them.
        let mut claims = Claims::new(self.clusters.len());
        // Queued jobs served before that fit on the processors idle as they are: a job of a
        // lower level served after them does not take those from under them.
        let mut fitting: Vec<Fitting> = Vec::new();
        let acted = out.len();
        for (_, id) in waiting {
            if stage == Stage::AfterPlanning && out.len() > acted {
                return; // served again from the first
            }
            let Some(e) = self.jobs.get(&id) else {
                continue;
            };
            let level = e.job.priority;
            if matches!(e.phase, Phase::Suspended { .. }) {
                if stage == Stage::BeforePlanning && claims.any() {
                    continue; // the second pass serves it, against the real placement
                }
                if self.try_resume(now, id, &claims, &fitting, out) {
                    continue;
                }
                self.preempt_for(now, id, &claims, &fitting, stage, out);
            } else {
                let can_preempt = self.lowest_running_level().is_some_and(|l| l < level);
                if !can_preempt && !any_suspended {
                    continue;
                }
                if self.fits_idle(now, e.job.procs, e.job.co_allocate, &[]) {
                    fitting.push(Fitting {
                        level,
                        procs: e.job.procs,
                        co_allocate: e.job.co_allocate,
                    });
                }
                // After the planner, a job that fits and was not started is kept for later
                // by the planner: its processors are nobody's this cycle (a job of a lower
                // level still does not take them, `fitting`).
                let mut unclaimed = Claims::new(self.clusters.len());
                let claiming = match stage {
                    Stage::BeforePlanning => &mut claims,
                    Stage::AfterPlanning => &mut unclaimed,
                };
                if self.fits_now(now, id, claiming) {
                    continue;
                }
                // Once a job has claimed processors the placement is a guess: the second
                // pass preempts, against the real one.
                let guessing = stage == Stage::BeforePlanning && claims.any();
                if can_preempt && !guessing {
                    self.preempt_for(now, id, &claims, &fitting, stage, out);
                }
            }
        }
    }

    /// True when starting job `id` now with `parts` (cluster, processors) would only hand a
    /// waiting job of a higher level processors it takes back at the next cycle: that job
    /// cannot start on idle processors once `id` runs, but idle processors plus those of
    /// running global jobs below its level (`id` among them) on one of `id`'s clusters would
    /// be enough for it. The same for a suspended job of a higher level on its cluster
    /// (one the first pass left to the second). The planner then leaves `id` waiting rather
    /// than start it to be preempted. Never for equal levels.
    pub(super) fn start_would_be_preempted(
        &self,
        now: Time,
        id: JobId,
        parts: &[(ClusterId, u32)],
        len: Dur,
    ) -> bool {
        let Some(level) = self.jobs.get(&id).map(|e| e.job.priority) else {
            return false;
        };
        let higher: Vec<&super::Entry> = self
            .queue
            .iter()
            .filter_map(|w| self.jobs.get(w))
            .filter(|e| e.job.id != id && e.job.priority > level)
            .filter(|e| matches!(e.phase, Phase::Queued | Phase::Planned { .. }))
            .filter(|e| e.not_before <= now && e.job.eligible(now) <= now)
            .take(self.planner.plan_depth)
            .collect();
        // Suspended jobs of a higher level, on one cluster: (cluster, processors, level,
        // run time left).
        let stopped: Vec<(ClusterId, u32, u32, Dur)> = self
            .jobs
            .active()
            .filter(|e| e.job.priority > level)
            .filter_map(|e| match &e.phase {
                Phase::Suspended { parts, left, .. } => match parts.as_slice() {
                    [p] => Some((p.cluster, p.procs, e.job.priority, *left)),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        if higher.is_empty() && stopped.is_empty() {
            return false;
        }
        // Idle processors per cluster once `id` runs.
        let idle: Vec<i64> = ClusterId::all(self.clusters.len())
            .map(|k| {
                let c = &self.clusters[k];
                if !c.available || c.self_scheduled {
                    return 0;
                }
                let mine: i64 = parts
                    .iter()
                    .filter(|(pk, _)| *pk == k)
                    .map(|(_, n)| i64::from(*n))
                    .sum();
                (c.sched.idle_at(now) - mine).max(0)
            })
            .collect();
        let lower_than = |k: ClusterId, level: u32| -> i64 {
            self.holders(k)
                .iter()
                .filter(|h| h.priority < level)
                .map(|h| i64::from(h.procs))
                .sum()
        };
        let taken_back = stopped.iter().any(|&(k, procs, w_level, left)| {
            let need = i64::from(procs);
            let Some(&(_, n)) = parts.iter().find(|(pk, _)| *pk == k) else {
                return false;
            };
            if self.clusters[k].self_scheduled
                || !self.clusters[k].available
                || self.fits_beside(now, k, parts, len, procs, self.clusters[k].granular(left))
            {
                return false;
            }
            idle[k] + lower_than(k, w_level) + i64::from(n) >= need
        });
        if taken_back || self.strands_higher(now, id, parts, len, &higher) {
            return true;
        }
        higher.iter().any(|w| {
            let need = i64::from(w.job.procs);
            // As the planner would start it: for its run, past the clusters' forecasts.
            let fits = ClusterId::all(self.clusters.len()).any(|k| {
                self.single_cluster_run(w.job.id, k)
                    .is_some_and(|(wlen, _)| {
                        self.fits_beside(now, k, parts, len, w.job.procs, wlen)
                    })
            }) || (w.job.co_allocate && idle.iter().sum::<i64>() >= need);
            if fits {
                return false;
            }
            let on_its_clusters = parts.iter().any(|&(k, n)| {
                if self.clusters[k].self_scheduled || !self.clusters[k].available {
                    return false;
                }
                idle[k] + lower_than(k, w.job.priority) + i64::from(n) >= need
            });
            // It fit on the idle processors before `id` took some: the second pass
            // would keep them from any lower level, so does the planner.
            on_its_clusters || self.fits_idle(now, w.job.procs, w.job.co_allocate, &[])
        })
    }

    /// True when starting job `id` now with `parts` (cluster, processors) for `len` would
    /// leave a queued job of a higher level in `higher` waiting on processors of lower
    /// levels, where it would not wait otherwise, once the second pass has served every
    /// waiting job (both played on copies of the broker: the pass resumes and preempts
    /// jobs together, not one waiting job at a time). Jobs started in this cycle are not
    /// stopped again in it, so such a start would hold that job for a cycle.
    fn strands_higher(
        &self,
        now: Time,
        id: JobId,
        parts: &[(ClusterId, u32)],
        len: Dur,
        higher: &[&super::Entry],
    ) -> bool {
        let mut scratch = Vec::new();
        let mut with = self.clone();
        let reserved = parts
            .iter()
            .map(|&(k, procs)| ReservedPart {
                cluster: k,
                reservation: ReservationId(0),
                procs,
                processors: Vec::new(),
                window: Interval::new(now, now + self.clusters[k].granular(len)),
            })
            .collect();
        with.reserve(now, id, now, now + len, 0.0, reserved, &mut scratch);
        if !matches!(
            with.jobs.get(&id).map(|e| &e.phase),
            Some(Phase::Running { .. })
        ) {
            return false;
        }
        with.serve_levels(now, Stage::AfterPlanning, &mut scratch);
        let mut without = self.clone();
        without.serve_levels(now, Stage::AfterPlanning, &mut scratch);
        let (with, without) = (with.level_counts(now), without.level_counts(now));
        higher.iter().any(|w| {
            let strands = |c: &LevelCounts| {
                c.strands(
                    &self.clusters,
                    w.job.procs,
                    w.job.priority,
                    w.job.co_allocate,
                )
            };
            strands(&with) && !strands(&without)
        })
    }

    /// Idle processors and running global jobs' levels per cluster.
    fn level_counts(&self, now: Time) -> LevelCounts {
        let idle: Vec<i64> = self
            .clusters
            .iter()
            .map(|c| {
                if c.available && !c.self_scheduled {
                    c.sched.idle_at(now)
                } else {
                    0
                }
            })
            .collect();
        let mut running: Vec<Vec<(u32, i64)>> = vec![Vec::new(); self.clusters.len()];
        for e in self.jobs.active() {
            if let Phase::Running { parts, ended, .. } = &e.phase {
                for p in parts.iter().filter(|p| !ended.contains(&p.cluster)) {
                    running[p.cluster].push((e.job.priority, i64::from(p.procs)));
                }
            }
        }
        LevelCounts { idle, running }
    }

    /// True when `procs` processors of cluster `k` can be held now for `len` once a job
    /// runs there with `parts` (cluster, processors) for `parts_len`.
    fn fits_beside(
        &self,
        now: Time,
        k: ClusterId,
        parts: &[(ClusterId, u32)],
        parts_len: Dur,
        procs: u32,
        len: Dur,
    ) -> bool {
        let c = &self.clusters[k];
        if !c.available || c.self_scheduled {
            return false;
        }
        let mine: u32 = parts
            .iter()
            .filter(|(pk, _)| *pk == k)
            .map(|(_, n)| *n)
            .sum();
        if c.sched.idle_at(now) - i64::from(mine) < i64::from(procs) {
            return false;
        }
        let mut sched = c.sched.clone();
        if mine > 0
            && sched
                .add_reservation_displacing(probe(
                    1,
                    mine,
                    now,
                    self.clusters[k].granular(parts_len),
                ))
                .is_err()
        {
            return false;
        }
        sched
            .add_reservation_displacing(probe(2, procs, now, len))
            .is_ok()
    }

    /// True when `procs` processors are idle now on one cluster the broker schedules itself
    /// (or over several, `co_allocate`), counted as they are once `taken` (cluster,
    /// processors; negative gives back) is taken from them.
    fn fits_idle(
        &self,
        now: Time,
        procs: u32,
        co_allocate: bool,
        taken: &[(ClusterId, i64)],
    ) -> bool {
        let need = i64::from(procs);
        let mut sum = 0;
        for (k, c) in ClusterId::enumerate(&self.clusters) {
            if !c.available || c.self_scheduled {
                continue;
            }
            let mine: i64 = taken
                .iter()
                .filter(|(tk, _)| *tk == k)
                .map(|(_, n)| n)
                .sum();
            let idle = (c.sched.idle_at(now) - mine).max(0);
            if procs <= c.sched.capacity() && idle >= need {
                return true;
            }
            sum += idle;
        }
        co_allocate && sum >= need
    }

    /// True when taking `taken` (cluster, processors) of the idle processors for a job of
    /// `level` leaves every queued job of a higher level in `fitting` that fits now
    /// fitting still: that job would otherwise wait on processors a lower level holds.
    fn keeps_fitting(
        &self,
        now: Time,
        level: u32,
        fitting: &[Fitting],
        taken: &[(ClusterId, i64)],
    ) -> bool {
        fitting.iter().filter(|f| f.level > level).all(|f| {
            !self.fits_idle(now, f.procs, f.co_allocate, &[])
                || self.fits_idle(now, f.procs, f.co_allocate, taken)
        })
    }

    /// The lowest level among running global jobs that could be preempted.
    fn lowest_running_level(&self) -> Option<u32> {
        self.jobs
            .active()
            .filter(|e| self.preemptible(e.job.id, &e.phase))
            .map(|e| e.job.priority)
            .min()
    }

    /// Running, no part ended, not already being requeued, every part on a cluster the
    /// broker schedules itself.
    fn preemptible(&self, id: JobId, phase: &Phase) -> bool {
        match phase {
            Phase::Running { parts, ended, .. } => {
                ended.is_empty()
                    && !self.requeueing.contains(&id)
                    && parts
                        .iter()
                        .all(|p| !self.clusters[p.cluster].self_scheduled)
            }
            _ => false,
        }
    }

    /// How long job `id` runs on cluster `k` (at its slowest processor, in its
    /// granularity), and what that costs at the free tariff; `None` when `k` cannot take it
    /// by itself now (down, scheduling itself, too small, too dear).
    fn single_cluster_run(&self, id: JobId, k: ClusterId) -> Option<(Dur, f64)> {
        let e = self.jobs.get(&id)?;
        let c = &self.clusters[k];
        if !c.available || c.self_scheduled || e.job.procs > c.sched.capacity() {
            return None;
        }
        if c.tariff.base > e.job.max_price {
            return None;
        }
        let secs = (e.job.walltime.as_secs() as f64 / c.slowest_speed()).ceil() as i64;
        let len = c.granular(Dur(secs));
        let cost = c.tariff.base * f64::from(e.job.procs) * len.as_secs() as f64;
        Some((len, cost))
    }

    /// True when queued job `id` could start now without preempting anyone: on one cluster,
    /// or co-allocated over the idle processors of several.
    fn fits_now(&self, now: Time, id: JobId, claims: &mut Claims) -> bool {
        let Some(e) = self.jobs.get(&id) else {
            return false;
        };
        let need = i64::from(e.job.procs);
        let mut idle: Vec<(ClusterId, i64)> = Vec::new();
        for k in ClusterId::all(self.clusters.len()) {
            let c = &self.clusters[k];
            if !c.available || c.self_scheduled {
                continue;
            }
            let free = claims.idle(&c.sched, now, k);
            if let Some((len, _)) = self.single_cluster_run(id, k) {
                let mut sched = claims.applied(&c.sched, k);
                let p = probe(claims.next_id(), e.job.procs, now, len);
                if free >= need && sched.add_reservation_displacing(p.clone()).is_ok() {
                    claims.claim(k, p);
                    return true;
                }
            }
            idle.push((k, free));
        }
        if !e.job.co_allocate || idle.iter().map(|(_, i)| i).sum::<i64>() < need {
            return false;
        }
        // Co-allocated over idle processors of several clusters: claimed as counts.
        let mut left = need;
        for (k, free) in idle {
            let take = free.min(left);
            claims.procs[k] += take;
            left -= take;
        }
        true
    }

    /// The running global jobs holding processors of cluster `k` that could be preempted.
    fn holders(&self, k: ClusterId) -> Vec<Holder> {
        self.jobs
            .active()
            .filter(|e| self.preemptible(e.job.id, &e.phase))
            .filter_map(|e| match &e.phase {
                Phase::Running { start, parts, .. } => {
                    let p = parts.iter().find(|p| p.cluster == k)?;
                    Some(Holder {
                        job: e.job.id,
                        priority: e.job.priority,
                        procs: p.procs,
                        started: *start,
                    })
                }
                _ => None,
            })
            .collect()
    }

    /// Preempts what job `id` needs on the best cluster and starts it there at once; false
    /// (nothing done) when no cluster can make room for it that way.
    fn preempt_for(
        &mut self,
        now: Time,
        id: JobId,
        claims: &Claims,
        fitting: &[Fitting],
        stage: Stage,
        out: &mut Vec<BrokerAction>,
    ) -> bool {
        let Some(e) = self.jobs.get(&id) else {
            return false;
        };
        let level = e.job.priority;
        let user = e.job.user;
        // Where it may go, how many processors, for how long, at what cost.
        let places: Vec<(ClusterId, u32, Dur, f64)> = match &e.phase {
            Phase::Suspended { parts, left, .. } => match parts.as_slice() {
                [p] if self.clusters[p.cluster].available
                    && !self.clusters[p.cluster].self_scheduled =>
                {
                    vec![(
                        p.cluster,
                        p.procs,
                        self.clusters[p.cluster].granular(*left),
                        0.0,
                    )]
                }
                _ => return self.preempt_across(now, id, claims, fitting, stage, out),
            },
            _ => ClusterId::all(self.clusters.len())
                .filter_map(|k| {
                    let (len, cost) = self.single_cluster_run(id, k)?;
                    Some((k, e.job.procs, len, cost))
                })
                .collect(),
        };
        let mut best: Option<(u32, ClusterId, Vec<JobId>, u32, Dur, f64)> = None;
        for (k, need, len, cost) in places {
            if self.short_of(id, user, cost).is_some() {
                continue;
            }
            let mut holders = self.holders(k);
            if stage == Stage::AfterPlanning {
                // Started by the planner in this very cycle: not stopped before it ran.
                holders.retain(|h| h.started < now);
            }
            let idle = claims
                .idle(&self.clusters[k].sched, now, k)
                .clamp(0, i64::from(u32::MAX)) as u32;
            let Some(victims) = preempt::victims(need, idle, level, &holders) else {
                continue;
            };
            if victims.is_empty() {
                continue;
            }
            // Would it really start at once once they are gone?
            let mut sched = claims.applied(&self.clusters[k].sched, k);
            for v in &victims {
                release(&mut sched, now, *v, &self.reservations_on(*v, k));
            }
            if sched
                .add_reservation_displacing(probe(0, need, now, len))
                .is_err()
            {
                continue;
            }
            let stopped: u32 = holders
                .iter()
                .filter(|h| victims.contains(&h.job))
                .map(|h| h.procs)
                .sum();
            let taken = [(k, i64::from(need) - i64::from(stopped))];
            if !self.keeps_fitting(now, level, fitting, &taken) {
                continue;
            }
            if best.as_ref().is_none_or(|b| stopped < b.0) {
                best = Some((stopped, k, victims, need, len, cost));
            }
        }
        let Some((_, k, victims, need, len, cost)) = best else {
            return self.preempt_across(now, id, claims, fitting, stage, out);
        };
        for v in victims {
            self.preempt_job(now, v, id, out);
        }
        if matches!(self.jobs[&id].phase, Phase::Suspended { .. }) {
            return self.try_resume(now, id, claims, fitting, out);
        }
        let part = ReservedPart {
            cluster: k,
            reservation: ReservationId(0),
            procs: need,
            processors: Vec::new(),
            window: Interval::new(now, now + len),
        };
        self.reserve(now, id, now, now + len, cost, vec![part], out);
        true
    }

    /// The running global jobs below `level` holding processors of cluster `k` that a job
    /// may take at this stage.
    fn lower_holders(&self, now: Time, k: ClusterId, level: u32, stage: Stage) -> Vec<Holder> {
        let mut holders = self.holders(k);
        holders.retain(|h| h.priority < level);
        if stage == Stage::AfterPlanning {
            // Started by the planner in this very cycle: not stopped before it ran.
            holders.retain(|h| h.started < now);
        }
        holders
    }

    /// Preempts what job `id` needs over several clusters and starts it there at once: a
    /// suspended job with parts on several takes lower levels' processors on each of them;
    /// a queued co-allocated job that no cluster can make room for alone takes them over
    /// every cluster, the idle ones counted. False (nothing done) when they do not make
    /// room for it that way.
    fn preempt_across(
        &mut self,
        now: Time,
        id: JobId,
        claims: &Claims,
        fitting: &[Fitting],
        stage: Stage,
        out: &mut Vec<BrokerAction>,
    ) -> bool {
        let Some(e) = self.jobs.get(&id) else {
            return false;
        };
        let level = e.job.priority;
        let usable = |k: ClusterId| self.clusters[k].available && !self.clusters[k].self_scheduled;
        let idle = |k: ClusterId| claims.idle(&self.clusters[k].sched, now, k).max(0);
        // (cluster, processors, window length) of every part, the victims, the cost.
        let (parts, victims, cost): (Vec<(ClusterId, u32, Dur)>, BTreeSet<JobId>, f64) =
            match &e.phase {
                Phase::Suspended { parts, left, .. } if parts.len() > 1 => {
                    if !parts.iter().all(|p| usable(p.cluster)) {
                        return false;
                    }
                    let mut victims = BTreeSet::new();
                    for p in parts {
                        let holders = self.lower_holders(now, p.cluster, level, stage);
                        let Some(v) = preempt::victims(
                            p.procs,
                            idle(p.cluster).clamp(0, i64::from(u32::MAX)) as u32,
                            level,
                            &holders,
                        ) else {
                            return false;
                        };
                        victims.extend(v);
                    }
                    let parts = parts
                        .iter()
                        .map(|p| (p.cluster, p.procs, self.clusters[p.cluster].granular(*left)))
                        .collect();
                    (parts, victims, 0.0)
                }
                Phase::Queued | Phase::Planned { .. } if e.job.co_allocate => {
                    let job = &e.job;
                    let ks: Vec<ClusterId> = ClusterId::all(self.clusters.len())
                        .filter(|&k| usable(k) && self.clusters[k].tariff.base <= job.max_price)
                        .collect();
                    // Every lower job, counted by what it frees on those clusters together.
                    let mut spread: BTreeMap<JobId, Holder> = BTreeMap::new();
                    for &k in &ks {
                        for h in self.lower_holders(now, k, level, stage) {
                            spread
                                .entry(h.job)
                                .and_modify(|x| x.procs += h.procs)
                                .or_insert(h);
                        }
                    }
                    let all: Vec<Holder> = spread.into_values().collect();
                    let idle_all: i64 = ks.iter().map(|&k| idle(k)).sum();
                    let Some(v) = preempt::victims(
                        job.procs,
                        idle_all.clamp(0, i64::from(u32::MAX)) as u32,
                        level,
                        &all,
                    ) else {
                        return false;
                    };
                    let victims: BTreeSet<JobId> = v.into_iter().collect();
                    // Room per cluster once they are gone, the largest first.
                    let mut room: Vec<(i64, ClusterId)> = ks
                        .iter()
                        .map(|&k| {
                            let freed: i64 = self
                                .holders(k)
                                .iter()
                                .filter(|h| victims.contains(&h.job))
                                .map(|h| i64::from(h.procs))
                                .sum();
                            (idle(k) + freed, k)
                        })
                        .collect();
                    room.sort_by_key(|&(r, k)| (std::cmp::Reverse(r), k));
                    let slowest = room
                        .iter()
                        .filter(|(r, _)| *r > 0)
                        .map(|&(_, k)| self.clusters[k].slowest_speed())
                        .fold(f64::INFINITY, f64::min);
                    let secs = (job.walltime.as_secs() as f64 / slowest).ceil() as i64;
                    let mut need = i64::from(job.procs);
                    let mut parts = Vec::new();
                    let mut cost = 0.0;
                    for (r, k) in room {
                        let take = r.min(need);
                        if take <= 0 {
                            continue;
                        }
                        let len = self.clusters[k].granular(Dur(secs.max(1)));
                        cost += self.clusters[k].tariff.base * take as f64 * len.as_secs() as f64;
                        parts.push((k, take as u32, len));
                        need -= take;
                    }
                    if need > 0 {
                        return false;
                    }
                    if self.short_of(job.id, job.user, cost).is_some() {
                        return false;
                    }
                    (parts, victims, cost)
                }
                _ => return false,
            };
        if victims.is_empty() {
            return false; // it fits without preemption: not this function's to start
        }
        // Would every part really start at once once they are gone?
        let mut taken = Vec::new();
        for &(k, procs, len) in &parts {
            let mut sched = claims.applied(&self.clusters[k].sched, k);
            let mut freed = 0i64;
            for v in &victims {
                let held = self.reservations_on(*v, k);
                if !held.is_empty() {
                    freed += self
                        .holders(k)
                        .iter()
                        .filter(|h| h.job == *v)
                        .map(|h| i64::from(h.procs))
                        .sum::<i64>();
                    release(&mut sched, now, *v, &held);
                }
            }
            if sched
                .add_reservation_displacing(probe(0, procs, now, len))
                .is_err()
            {
                return false;
            }
            taken.push((k, i64::from(procs) - freed));
        }
        if !self.keeps_fitting(now, level, fitting, &taken) {
            return false;
        }
        for v in victims {
            self.preempt_job(now, v, id, out);
        }
        if matches!(self.jobs[&id].phase, Phase::Suspended { .. }) {
            return self.try_resume(now, id, claims, fitting, out);
        }
        let end = parts
            .iter()
            .map(|&(_, _, len)| now + len)
            .max()
            .unwrap_or(now);
        let reserved = parts
            .into_iter()
            .map(|(k, procs, len)| ReservedPart {
                cluster: k,
                reservation: ReservationId(0),
                procs,
                processors: Vec::new(),
                window: Interval::new(now, now + len),
            })
            .collect();
        self.reserve(now, id, now, end, cost, reserved, out);
        true
    }

    /// The reservations running job `v` holds on cluster `k`.
    fn reservations_on(&self, v: JobId, k: ClusterId) -> Vec<ReservationId> {
        match self.jobs.get(&v).map(|e| &e.phase) {
            Some(Phase::Running { parts, .. }) => parts
                .iter()
                .filter(|p| p.cluster == k)
                .map(|p| p.reservation)
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Takes running job `v`'s processors for job `by`: suspended, or to be requeued.
    pub(super) fn preempt_job(
        &mut self,
        now: Time,
        v: JobId,
        by: JobId,
        out: &mut Vec<BrokerAction>,
    ) {
        let Some(e) = self.jobs.get(&v) else { return };
        let Phase::Running {
            start,
            end,
            cost,
            parts,
            suspended,
            ..
        } = e.phase.clone()
        else {
            return;
        };
        let how = Preemption::of(e.job.requeue);
        let clusters: BTreeSet<ClusterId> = parts.iter().map(|p| p.cluster).collect();
        for k in clusters {
            let held = self.reservations_on(v, k);
            release(&mut self.clusters[k].sched, now, v, &held);
        }
        for p in &parts {
            out.push(BrokerAction::ReservationEnded {
                cluster: p.cluster,
                reservation: p.reservation,
                job: v,
                how: ReservationEnd::Released,
            });
        }
        match how {
            Preemption::Suspend => {
                let mut e = self.jobs.get_mut(&v).expect("invariant: read above");
                e.phase = Phase::Suspended {
                    start,
                    cost,
                    parts: parts.clone(),
                    since: now,
                    left: Dur((end - now).as_secs().max(1)),
                    suspended,
                };
            }
            Preemption::Requeue => {
                self.requeueing.insert(v);
            }
        }
        out.push(BrokerAction::Preempted {
            job: v,
            by,
            how,
            parts,
        });
    }

    /// Resumes suspended job `id` at once if every cluster it ran on has room for the rest
    /// of its run; false (nothing done) otherwise.
    fn try_resume(
        &mut self,
        now: Time,
        id: JobId,
        claims: &Claims,
        fitting: &[Fitting],
        out: &mut Vec<BrokerAction>,
    ) -> bool {
        let Some(e) = self.jobs.get(&id) else {
            return false;
        };
        let level = e.job.priority;
        let Phase::Suspended {
            start,
            cost,
            parts,
            since,
            left,
            suspended,
        } = e.phase.clone()
        else {
            return false;
        };
        if parts
            .iter()
            .any(|p| !self.clusters[p.cluster].available || self.clusters[p.cluster].self_scheduled)
        {
            return false;
        }
        let windows: Vec<Interval> = parts
            .iter()
            .map(|p| Interval::new(now, now + self.clusters[p.cluster].granular(left)))
            .collect();
        for (p, w) in parts.iter().zip(&windows) {
            let free = claims.idle(&self.clusters[p.cluster].sched, now, p.cluster);
            if free < i64::from(p.procs) {
                return false;
            }
            let mut sched = claims.applied(&self.clusters[p.cluster].sched, p.cluster);
            if sched
                .add_reservation_displacing(probe(0, p.procs, w.start, w.len()))
                .is_err()
            {
                return false;
            }
        }
        let taken: Vec<(ClusterId, i64)> = parts
            .iter()
            .map(|p| (p.cluster, i64::from(p.procs)))
            .collect();
        if !self.keeps_fitting(now, level, fitting, &taken) {
            return false;
        }
        let mut new_parts = Vec::with_capacity(parts.len());
        for (p, w) in parts.iter().zip(windows) {
            let rid = self.allocate_reservation();
            let res = AdminReservation {
                id: rid,
                procs: p.procs,
                window: w,
                acl: Acl {
                    job: Some(id),
                    ..Acl::nobody()
                },
            };
            self.clusters[p.cluster]
                .sched
                .add_reservation_displacing(res)
                .expect("invariant: checked on a copy just above");
            new_parts.push(ReservedPart {
                reservation: rid,
                window: w,
                ..p.clone()
            });
        }
        // Its licences were given back with its reservations: held again by the first
        // part's, as when it was first reserved; it stays suspended if they are taken.
        let licences = self.jobs[&id].job.licences.clone();
        if let (false, Some(first)) = (licences.is_empty(), new_parts.first()) {
            if self.clusters[first.cluster]
                .sched
                .hold_licences_in_reservation(first.reservation, &licences)
                .is_err()
            {
                for q in &new_parts {
                    let _ = self.clusters[q.cluster]
                        .sched
                        .remove_reservation(now, q.reservation);
                }
                return false;
            }
        }
        let job = self.jobs[&id].job.clone();
        self.mark_resumed(id, start, cost, &new_parts, suspended + (now - since), out);
        for p in &new_parts {
            let mut actions = Vec::new();
            let _ = self.clusters[p.cluster].sched.handle(
                now,
                Event::Submit(bound_part(&job, p)),
                &mut actions,
            );
            // Its own start is the resume above; others (local jobs) start as usual.
            actions.retain(|a| !matches!(a, Action::Start { job, .. } if *job == id));
            self.carry_out(now, p.cluster, actions, out);
        }
        true
    }
}

/// Gives back, in `sched` (a cluster's scheduler or a copy of it), the processors running
/// job `v` holds there in `reservations`.
fn release(sched: &mut LocalScheduler, now: Time, v: JobId, reservations: &[ReservationId]) {
    let _ = sched.cancel(now, v);
    for r in reservations {
        let _ = sched.remove_reservation(now, *r);
    }
}

/// Idle processors per cluster and the running global jobs there (level, processors).
struct LevelCounts {
    idle: Vec<i64>,
    running: Vec<Vec<(u32, i64)>>,
}

impl LevelCounts {
    /// True when a queued job of `level` needing `procs` does not fit on the idle
    /// processors while those plus the ones lower levels hold on one cluster would do.
    fn strands(&self, clusters: &[GridCluster], procs: u32, level: u32, co_allocate: bool) -> bool {
        let need = i64::from(procs);
        let usable = |k: ClusterId| {
            let c = &clusters[k];
            c.available && !c.self_scheduled && procs <= c.sched.capacity()
        };
        let fits = ClusterId::all(clusters.len()).any(|k| usable(k) && self.idle[k] >= need)
            || (co_allocate && self.idle.iter().map(|i| i.max(&0)).sum::<i64>() >= need);
        !fits
            && ClusterId::all(clusters.len()).any(|k| {
                let lower: i64 = self.running[k]
                    .iter()
                    .filter(|(l, _)| *l < level)
                    .map(|(_, n)| n)
                    .sum();
                usable(k) && self.idle[k].max(0) + lower >= need
            })
    }
}

/// A queued job served earlier in a pass that fit on the idle processors.
struct Fitting {
    level: u32,
    procs: u32,
    co_allocate: bool,
}

/// Processors of each cluster that queued jobs served earlier in a cycle fit into without
/// preemption: the planner is about to give them those, so they are not idle for the jobs
/// served after them.
struct Claims {
    probes: Vec<Vec<AdminReservation>>,
    procs: Vec<i64>,
    count: u64,
}

impl Claims {
    fn new(clusters: usize) -> Claims {
        Claims {
            probes: vec![Vec::new(); clusters],
            procs: vec![0; clusters],
            count: 0,
        }
    }

    /// True when some job has claimed processors.
    fn any(&self) -> bool {
        self.procs.iter().any(|&p| p > 0)
    }

    /// A probe id not yet used among the claims.
    fn next_id(&self) -> u64 {
        self.count + 1
    }

    fn claim(&mut self, k: ClusterId, p: AdminReservation) {
        self.procs[k] += i64::from(p.procs);
        self.probes[k].push(p);
        self.count += 1;
    }

    /// A copy of cluster `k`'s scheduler holding the claims on it.
    fn applied(&self, sched: &LocalScheduler, k: ClusterId) -> LocalScheduler {
        let mut copy = sched.clone();
        for p in &self.probes[k] {
            let _ = copy.add_reservation_displacing(p.clone());
        }
        copy
    }

    /// Cluster `k`'s idle processors at `now` less the claimed ones.
    fn idle(&self, sched: &LocalScheduler, now: Time, k: ClusterId) -> i64 {
        (sched.idle_at(now) - self.procs[k]).max(0)
    }
}

/// A reservation to try on a copy of a scheduler.
fn probe(id: u64, procs: u32, start: Time, len: Dur) -> AdminReservation {
    AdminReservation {
        id: ReservationId(u64::MAX - id),
        procs,
        window: Interval::new(start, start + len),
        acl: Acl::nobody(),
    }
}
