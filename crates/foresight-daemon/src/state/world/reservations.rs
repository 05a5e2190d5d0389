//! Advance reservations made by administrators and users: created on free processors,
//! committed, released, ended.

use crate::state::refusal::Refusal;
use crate::state::world::cluster::Held;
use crate::state::world::effect::Effect;
use crate::state::world::World;
use foresight_core::reservation::AdminReservation;
use foresight_core::time::{Interval, Time};
use foresight_core::ClusterId;
use foresight_core::JobId;
use foresight_core::ReservationId;
use foresight_store::ReservationRecord;
use foresight_store::{AclSpec, JobState, ReservationState};
use std::collections::BTreeSet;

impl World {
    /// Makes an administrative reservation; refuses overlaps, naming what is in the way.
    #[allow(clippy::too_many_arguments)]
    pub fn create_reservation(
        &mut self,
        now: Time,
        owner: &str,
        cluster: &str,
        held: Held,
        start: i64,
        end: i64,
        acl: AclSpec,
        ttl: Option<i64>,
    ) -> Result<ReservationId, Refusal> {
        let k = self
            .cluster_index(cluster)
            .ok_or_else(|| self.unknown_cluster(cluster))?;
        if self.clusters[k].kind.schedules_itself() {
            return Err(Refusal::invalid(
                "cluster",
                format!(
                    "cluster {cluster} is run by Slurm: make administrative reservations there \
                     (scontrol create reservation); Foresight reads them and plans around them"
                ),
            ));
        }
        self.make_reservation(now, owner, k, held, start, end, acl, ttl)
    }

    /// [`World::create_reservation`] on cluster `k`, of any kind: on a cluster that
    /// schedules itself (Slurm) only the record and the mirror's hold are made here (by
    /// count, never named processors); the caller asks the cluster for it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn make_reservation(
        &mut self,
        now: Time,
        owner: &str,
        k: ClusterId,
        held: Held,
        start: i64,
        end: i64,
        acl: AclSpec,
        ttl: Option<i64>,
    ) -> Result<ReservationId, Refusal> {
        let (procs, processors) = match held {
            Held::Count(n) => (n, Vec::new()),
            Held::These(mut list) => {
                list.sort_unstable();
                list.dedup();
                (list.len() as u32, list)
            }
        };
        let cluster = self.clusters[k].cfg.name.clone();
        let cluster = cluster.as_str();
        let remote = self.clusters[k].kind.schedules_itself();
        if remote && !processors.is_empty() {
            return Err(Refusal::invalid(
                "processors",
                format!("cluster {cluster} is run by Slurm, which picks the processors"),
            ));
        }
        let max = self.clusters[k].procs();
        if procs == 0 || procs > max {
            return Err(Refusal::invalid(
                "procs",
                format!("must be 1..={max} (cluster {cluster} has {max})"),
            ));
        }
        crate::state::limits::instant("start", start)?;
        crate::state::limits::instant("end", end)?;
        if end <= start {
            return Err(Refusal::invalid("end", "must be after start"));
        }
        if end <= now.secs() {
            return Err(Refusal::invalid("end", "is in the past"));
        }
        if let Some(t) = ttl {
            if t <= 0 {
                return Err(Refusal::invalid("ttl", "must be positive"));
            }
            crate::state::limits::seconds("ttl", t)?;
        }
        if let Some(&p) = processors.iter().find(|&&p| p >= max) {
            return Err(Refusal::invalid(
                "processors",
                format!("processor {p} does not exist (cluster {cluster} has 0..{max})"),
            ));
        }
        self.check_processors_free(k, &processors, start, end, &acl)?;
        let id = self.broker.next_reservation().0;
        let res = AdminReservation {
            id: ReservationId(id),
            procs,
            window: Interval::new(Time(start), Time(end)),
            acl: self.acl(&acl),
        };
        if let Err(e) = self.broker.clusters[k]
            .sched
            .add_reservation_displacing(res)
        {
            let others: Vec<String> = self
                .reservations
                .values()
                .filter(|r| {
                    r.state.is_live() && r.cluster == cluster && r.start < end && start < r.end
                })
                .map(|r| {
                    format!(
                        "reservation {} ({} processors, [{}, {}))",
                        r.id, r.procs, r.start, r.end
                    )
                })
                .collect();
            let running = self.broker.clusters[k].sched.running();
            // The window is what to move.
            return Err(Refusal::conflict_at(
                "start",
                format!(
                    "{procs} processors of {cluster} are not free during [{start}, {end}): {e}; \
                 in the way: {}",
                    if others.is_empty() {
                        format!("{running} running jobs")
                    } else {
                        others.join(", ")
                    }
                ),
            ));
        }
        self.broker.reserve_ids_below(id + 1);
        let rec = ReservationRecord {
            id,
            kind: "admin".into(),
            cluster: cluster.into(),
            procs,
            processors,
            start,
            end,
            acl,
            state: if ttl.is_some() {
                ReservationState::Tentative
            } else {
                ReservationState::Committed
            },
            expires_at: ttl.map(|t| now.secs() + t),
            owner: owner.into(),
        };
        let id = ReservationId(id);
        self.reservations.insert(id, rec);
        if !remote {
            // A remote cluster's mirror decides nothing: it only holds the window.
            self.tick_cluster(now, k);
        }
        Ok(id)
    }

    /// Refuses a reservation of these processors over `[start, end)` when another live
    /// reservation names one of them in an overlapping window (unless both admit only the
    /// same job), or a running job holds one past `start`.
    pub(crate) fn check_processors_free(
        &self,
        k: ClusterId,
        processors: &[u32],
        start: i64,
        end: i64,
        acl: &AclSpec,
    ) -> Result<(), Refusal> {
        if processors.is_empty() {
            return Ok(());
        }
        let name = &self.clusters[k].cfg.name;
        let mine: BTreeSet<u32> = processors.iter().copied().collect();
        for r in self.reservations.values() {
            if !r.state.is_live() || r.cluster != *name || r.end <= start || end <= r.start {
                continue;
            }
            let same_job = acl.job.is_some() && acl.job == r.acl.job;
            if let Some(p) = r.processors.iter().find(|p| mine.contains(p)) {
                if !same_job {
                    return Err(Refusal::conflict_at(
                        "processors",
                        format!(
                            "processor {p} of {name} is held by reservation {} from {} to {}",
                            r.id,
                            crate::state::moment::utc(r.start),
                            crate::state::moment::utc(r.end)
                        ),
                    ));
                }
            }
        }
        for j in self.jobs.values().filter(|j| j.state == JobState::Running) {
            for part in j.parts.iter().filter(|p| p.cluster == *name && !p.ended) {
                let until = j.started_at.unwrap_or(start) + j.walltime + self.launch.grace as i64;
                if until <= start {
                    continue;
                }
                if let Some(p) = part.processors.iter().find(|p| mine.contains(p)) {
                    return Err(Refusal::conflict_at(
                        "processors",
                        format!(
                            "processor {p} of {name} runs job {} until up to {}, past the start {}",
                            j.id,
                            crate::state::moment::utc(until),
                            crate::state::moment::utc(start)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Commits a tentative reservation.
    pub fn commit_reservation(&mut self, id: ReservationId) -> Result<(), Refusal> {
        let r = self
            .reservations
            .get_mut(&id)
            .ok_or_else(|| Refusal::not_found_at("id", format!("no reservation {id}")))?;
        if r.state != ReservationState::Tentative {
            return Err(Refusal::conflict(format!(
                "reservation {id} is {}, not tentative",
                r.state.as_str()
            )));
        }
        r.state = ReservationState::Committed;
        r.expires_at = None;
        Ok(())
    }

    /// Moves live reservation `id` to `[start, end)` with the jobs bound to it that have
    /// not started (a begin time that only waited for the window comes earlier with it):
    /// how a site follows the centre that moves a grid part earlier when processors free
    /// up. Refused, changing nothing, when a job bound to it runs, it holds named
    /// processors, or its processors are not free for the whole new window: a move takes no
    /// time planned for anyone. On a cluster that schedules itself only the record and the
    /// mirror move; the caller asks the cluster, and [`World::restore_reservation`] puts
    /// back what is returned should it refuse. A window that began before `now` (a late
    /// part's reservation stretched in place) holds its processors in the plan from `now`.
    pub(crate) fn move_reservation(
        &mut self,
        now: Time,
        id: ReservationId,
        start: i64,
        end: i64,
    ) -> Result<SavedWindow, Refusal> {
        let r = self.live_reservation(id)?;
        if !r.processors.is_empty() {
            return Err(Refusal::invalid(
                "id",
                format!("reservation {id} holds named processors: it does not move"),
            ));
        }
        crate::state::limits::instant("start", start)?;
        crate::state::limits::instant("end", end)?;
        if end <= start || end <= now.secs() {
            return Err(Refusal::invalid(
                "end",
                format!("[{start}, {end}) is no window ahead of {}", now.secs()),
            ));
        }
        let cluster = r.cluster.clone();
        let k = self
            .cluster_index(&cluster)
            .ok_or_else(|| self.unknown_cluster(&cluster))?;
        let bound: Vec<(u64, Option<i64>)> = self
            .jobs
            .values()
            .filter(|j| j.reservation == Some(id.0) && !j.state.is_final())
            .map(|j| (j.id, j.begin))
            .collect();
        let saved = SavedWindow {
            start: r.start,
            end: r.end,
            begins: bound.clone(),
        };
        self.broker.clusters[k]
            .sched
            .move_reservation(
                now,
                id,
                Interval::new(Time(start.max(now.secs())), Time(end)),
            )
            .map_err(|e| {
                Refusal::conflict_at(
                    "start",
                    format!("reservation {id} cannot move to [{start}, {end}): {e}"),
                )
            })?;
        if let Some(r) = self.reservations.get_mut(&id) {
            r.start = start;
            r.end = end;
        }
        for (job, begin) in bound {
            if let Some(b) = begin.filter(|&b| b <= saved.start && b > start) {
                if let Some(j) = self.jobs.get_mut_if(&JobId(job), |j| j.begin == Some(b)) {
                    j.begin = Some(start);
                }
            }
        }
        if !self.clusters[k].kind.schedules_itself() {
            self.tick_cluster(now, k);
        }
        Ok(saved)
    }

    /// Puts reservation `id` on a cluster that schedules itself back as `saved` after the
    /// cluster refused its move: the mirror when it still fits (the next snapshot rebuilds
    /// it otherwise), the record and its jobs' begin times in any case.
    pub(crate) fn restore_reservation(&mut self, now: Time, id: ReservationId, saved: SavedWindow) {
        if let Err(e) = self.move_reservation(now, id, saved.start, saved.end) {
            tracing::warn!("putting back reservation {id}: {e}");
            if let Some(r) = self.reservations.get_mut(&id) {
                r.start = saved.start;
                r.end = saved.end;
            }
        }
        for (job, begin) in saved.begins {
            if let Some(j) = self.jobs.get_mut_if(&JobId(job), |j| j.begin != begin) {
                j.begin = begin;
            }
        }
    }

    /// Reservation `id`, refused when there is none or it has ended.
    fn live_reservation(&self, id: ReservationId) -> Result<&ReservationRecord, Refusal> {
        let r = self
            .reservations
            .get(&id)
            .ok_or_else(|| Refusal::not_found_at("id", format!("no reservation {id}")))?;
        if !r.state.is_live() {
            return Err(Refusal::conflict(format!(
                "reservation {id} is already {}",
                r.state.as_str()
            )));
        }
        Ok(r)
    }

    /// Releases a live reservation.
    pub fn release_reservation(&mut self, now: Time, id: ReservationId) -> Result<(), Refusal> {
        self.live_reservation(id)?;
        self.end_reservation(now, id, ReservationState::Released);
        Ok(())
    }

    pub(crate) fn end_reservation(
        &mut self,
        now: Time,
        id: ReservationId,
        state: ReservationState,
    ) {
        if let Some(k) = self.close_reservation(now, id, state) {
            let _ = self.broker.clusters[k].sched.remove_reservation(now, id);
            self.tick_cluster(now, k);
        }
    }

    /// Records a reservation's end (and releases it on a cluster that schedules itself);
    /// its cluster, for the caller to take it out of the local scheduler.
    pub(crate) fn close_reservation(
        &mut self,
        now: Time,
        id: ReservationId,
        state: ReservationState,
    ) -> Option<ClusterId> {
        let k = self.close_reservation_record(id, state)?;
        let r = &self.reservations[&id];
        // At its end a remote cluster ends it itself; releasing it there would cancel a part
        // still finishing inside it (one that started a second or two late).
        let ends_by_itself = state == ReservationState::Finished && Time(r.end) <= now;
        if self.clusters[k].kind.schedules_itself() && !ends_by_itself {
            self.effects.push(Effect::Release {
                cluster: k,
                reservation: id,
            });
        }
        Some(k)
    }

    /// Records a reservation's end, and nothing more: its cluster's index (`None` when it
    /// had ended already).
    pub(crate) fn close_reservation_record(
        &mut self,
        id: ReservationId,
        state: ReservationState,
    ) -> Option<ClusterId> {
        let r = self.reservations.get_mut(&id)?;
        if !r.state.is_live() {
            return None;
        }
        r.state = state;
        r.expires_at = None;
        let cluster = r.cluster.clone();
        self.asked.confirmed_at.remove(&id);
        self.cluster_index(&cluster)
    }
}

/// A reservation's window and its bound jobs' begin times before a move, to put back.
#[derive(Clone, Debug, PartialEq)]
pub struct SavedWindow {
    /// Its start.
    pub start: i64,
    /// Its end.
    pub end: i64,
    /// Each bound job not ended, with its begin time.
    pub begins: Vec<(u64, Option<i64>)>,
}
