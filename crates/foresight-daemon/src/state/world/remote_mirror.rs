//! The mirror of a cluster that schedules itself, rebuilt from each of its snapshots: what
//! the planner sees of it (its processors, running jobs, reservations and queue).

use super::World;
use foresight_core::broker::{Phase, SpeedGroup};
use foresight_core::reservation::{Acl, AdminReservation};
use foresight_core::scheduler::{Domain, LocalScheduler};
use foresight_core::time::{Dur, Interval, Time};
use foresight_core::{ClusterId, Job, JobId, ReservationId};
use foresight_rm::{ClusterState, RmJobState};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Ids of the mirror's stand-ins for the cluster's own jobs and reservations, apart from
/// Foresight's.
const FOREIGN: u64 = 1 << 62;

/// Slurm holds a running job's processors through the second its limit ends (a reservation
/// starting exactly at `start + limit` is refused: "Requested nodes are busy", checked on
/// Slurm 22.05), so in the half-open mirror running jobs, and our reservations they run in,
/// end this much later.
const SLURM_END_PAD_SECS: i64 = 1;

impl World {
    /// Rebuilds the mirror of remote cluster `k`: its processors, running jobs until their
    /// limits, its own reservations and ours, and its waiting jobs in its own order (by its
    /// expected start, then priority), which the mirror's policy forecasts forward.
    pub(super) fn rebuild_mirror(&mut self, now: Time, k: ClusterId, state: &ClusterState) {
        let name = self.clusters[k].cfg.name.clone();
        let procs = state.processors;
        let policy = self.broker.clusters[k].sched.policy().clone();
        let mut mirror = LocalScheduler::new(procs, policy);
        let t = now;
        // Ours first (they are the planner's commitments), then the cluster's own.
        let ours: Vec<(u64, u32, i64, i64)> = self
            .reservations
            .values()
            .filter(|r| r.cluster == name && r.state.is_live() && Time(r.end) > now)
            .map(|r| (r.id, r.procs, r.start, r.end))
            .collect();
        let mut in_mirror = BTreeSet::new();
        // Where a part of ours runs past its reservation (it started late), the reservation
        // holds its processors until the part's limit.
        let mut part_end: HashMap<u64, i64> = HashMap::new();
        // The job each of our reservations runs, so that its window past the part's
        // prediction is offered to the planner as on a cluster the broker schedules.
        let mut part_job: HashMap<u64, JobId> = HashMap::new();
        for j in &state.jobs {
            if j.foresight.is_none()
                || !matches!(j.state, RmJobState::Running | RmJobState::Suspended)
            {
                continue;
            }
            let rid = j
                .reservation
                .as_deref()
                .and_then(|r| self.asked.naming.reservation_id(r));
            if let (Some(rid), Some((job, _))) = (rid, j.foresight) {
                part_job.insert(rid, JobId(job));
            }
            if let (Some(rid), Some(limit)) = (rid, j.time_limit) {
                let end = j.start.unwrap_or(now.secs()) + limit;
                let e = part_end.entry(rid).or_insert(end);
                *e = (*e).max(end);
            }
        }
        for (id, p, start, end) in ours {
            let held = part_end.get(&id).map_or(end, |&e| e.max(end));
            // Padded for Slurm's closed end; without the pad when that collides with a
            // reservation of ours that follows it directly (made before this rule).
            for end in [held + SLURM_END_PAD_SECS, end] {
                let res = AdminReservation {
                    id: ReservationId(id),
                    procs: p.min(procs),
                    window: Interval::new(Time(start), Time(end)),
                    acl: Acl {
                        job: part_job.get(&id).copied(),
                        ..Acl::nobody()
                    },
                };
                if mirror.add_reservation(res).is_ok() {
                    in_mirror.insert(id);
                    break;
                }
            }
        }
        let mut foreign_res = BTreeMap::new();
        for (n, r) in state.reservations.iter().enumerate() {
            if r.foresight.is_some() || Time(r.end) <= now {
                continue;
            }
            let id = ReservationId(FOREIGN | n as u64);
            let res = AdminReservation {
                id,
                procs: r.procs.min(procs),
                window: Interval::new(Time(r.start), Time(r.end)),
                acl: Acl::nobody(),
            };
            if mirror.add_reservation(res).is_ok() {
                foreign_res.insert(r.name.clone(), id);
            }
        }
        let horizon = self.broker.planner().horizon.0;
        let mut waiting = Vec::new();
        for (n, j) in state.jobs.iter().enumerate() {
            let jid = JobId(FOREIGN | j.external.parse::<u64>().unwrap_or(n as u64));
            let limit = j.time_limit.unwrap_or(horizon).max(1);
            let procs_asked = j.procs.clamp(1, procs.max(1));
            match (&j.state, j.foresight) {
                (RmJobState::Running | RmJobState::Suspended, None) => {
                    if j.reservation
                        .as_ref()
                        .is_some_and(|r| foreign_res.contains_key(r))
                    {
                        continue; // inside a reservation, which already holds its processors
                    }
                    let start = j.start.map_or(now, Time);
                    let estimate = Dur(limit.max((now - start).as_secs()) + SLURM_END_PAD_SECS);
                    let job = Job::new(jid, Time(j.submitted_at).min(start), procs_asked, estimate);
                    let _ = mirror.restore_running(t, job, start, Domain::Pool);
                }
                (RmJobState::Running | RmJobState::Suspended, Some((id, _))) => {
                    let id = JobId(id);
                    let preempted = matches!(j.state, RmJobState::Suspended)
                        && self
                            .broker
                            .entry(id)
                            .is_some_and(|e| matches!(e.phase, Phase::Suspended { .. }));
                    if preempted {
                        // Slurm gives a suspended job's cores to other jobs: none held.
                        continue;
                    }
                    let r = self.jobs.get(&id).and_then(|x| {
                        x.parts
                            .iter()
                            .find(|p| p.cluster == name && !p.ended)
                            .and_then(|p| p.reservation)
                    });
                    let domain = match r {
                        Some(r) if in_mirror.contains(&r) => Domain::Reservation(ReservationId(r)),
                        _ => Domain::Pool,
                    };
                    let start = j.start.map_or(now, Time);
                    let estimate = Dur(limit.max((now - start).as_secs()) + SLURM_END_PAD_SECS);
                    // Planned to its prediction (or its correction) like a part on a
                    // cluster the broker schedules; Slurm still kills it at its limit.
                    let plan = match (domain, self.jobs.get(&id)) {
                        (Domain::Reservation(_), Some(rec)) => {
                            super::prediction::part_plan(rec, limit)
                        }
                        _ => None,
                    };
                    let job = Job::new(id, start, procs_asked, estimate).with_prediction(plan);
                    let _ = mirror.restore_running(t, job, start, domain);
                }
                (RmJobState::Pending, None) if j.reservation.is_none() => {
                    waiting.push((
                        j.start.unwrap_or(i64::MAX),
                        std::cmp::Reverse(j.priority),
                        jid,
                        procs_asked,
                        limit,
                    ));
                }
                _ => {}
            }
        }
        // The cluster's own order: its expected start, then its priority.
        waiting.sort_unstable();
        let n = waiting.len() as i64;
        for (rank, (_, _, jid, p, limit)) in waiting.into_iter().enumerate() {
            let job = Job::new(jid, now - Dur(n - rank as i64), p, Dur(limit));
            let _ = mirror.submit(job);
        }
        let spec = &self.clusters[k].cfg.spec;
        let c = &mut self.broker.clusters[k];
        c.sched = mirror;
        if c.processors.len() != procs as usize {
            // The size is the cluster's; speed and features are the configuration's.
            let speed = spec.slowest_speed();
            c.processors = spec.processors(&[SpeedGroup { procs, speed }]);
        }
    }
}
