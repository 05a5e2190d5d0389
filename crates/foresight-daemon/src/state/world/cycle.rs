//! The scheduling cycle: the broker planned on the clusters' views, and its actions carried
//! out (reservations, asks, preemptions, staging ahead, starts).

use crate::state::world::effect::Effect;
use crate::state::world::World;
use foresight_core::broker::{
    BrokerAction, CyclePlan, GridCluster, Phase, Preemption, ReservationEnd, ReservedPart,
    WaitReason,
};
use foresight_core::grid::{ClusterView, Decision};
use foresight_core::time::{Dur, Time};
use foresight_core::{ClusterId, JobId, ReservationId};
use foresight_rm::ReserveRequest;
use foresight_store::{AclSpec, JobState, ReservationState};
use foresight_store::{PartRecord, PreemptionRecord, ReservationRecord};

impl World {
    /// A pass of cluster `k`'s local policy at `now`, after the jobs that outlived their
    /// prediction are corrected: the pass must not take their processors (nor would the
    /// service launch on them, which the simulator cannot see).
    pub(crate) fn tick_cluster(&mut self, now: Time, k: ClusterId) {
        self.correct_outlived(now);
        let mut out = Vec::new();
        self.broker.tick(now, k, &mut out);
        self.carry_out(now, out);
    }

    /// The next moment something is due without outside events: a reservation boundary or
    /// expiry.
    pub fn next_due(&self, now: Time) -> Option<Time> {
        let bounds = self
            .broker
            .clusters
            .iter()
            .filter_map(|c| c.sched.next_boundary(now));
        let expiries = self.reservations.values().filter_map(|r| match r.state {
            ReservationState::Tentative => r.expires_at.map(Time),
            ReservationState::Committed => Some(Time(r.start)),
            ReservationState::Active => Some(Time(r.end)),
            _ => None,
        });
        bounds
            .chain(expiries)
            .chain(self.next_plan_end(now))
            .filter(|&x| x > now)
            .min()
    }

    /// How many queued global jobs one cycle plans.
    pub fn plan_depth(&self) -> usize {
        self.broker.planner().plan_depth
    }

    /// Global jobs queued or arrived.
    pub fn has_global_work(&self) -> bool {
        self.broker.has_queued()
    }

    /// One scheduling cycle at `now` (seed 000 §5.4): reservation life cycle, arrivals into
    /// the queue, local ticks, then the planner over every queued global job.
    pub fn cycle(&mut self, now: Time) {
        let plan = self.begin_cycle(now);
        let decisions = plan.decide();
        self.finish_cycle(plan, decisions);
    }

    /// The first half of [`World::cycle`]: reservations expire or activate, budgets reach
    /// the broker, and the broker prepares its planning, which the caller runs off the lock
    /// ([`CyclePlan::decide`]) before [`World::finish_cycle`].
    pub fn begin_cycle(&mut self, now: Time) -> CyclePlan {
        self.correct_outlived(now);
        self.wake_waiting(now);
        self.stats.cycles += 1;
        self.stats.last_cycle_at = Some(now);
        let live: Vec<(ReservationId, ReservationState, Option<Time>, Time, Time)> = self
            .reservations
            .values()
            .filter(|r| r.state.is_live())
            .map(|r| {
                let expires = r.expires_at.map(Time);
                (
                    ReservationId(r.id),
                    r.state,
                    expires,
                    Time(r.start),
                    Time(r.end),
                )
            })
            .collect();
        for (id, state, expires, start, end) in live {
            if state == ReservationState::Tentative && expires.is_some_and(|e| e <= now) {
                self.end_reservation(now, id, ReservationState::Expired);
            } else if end <= now {
                self.end_reservation(now, id, ReservationState::Finished);
            } else if state == ReservationState::Committed && start <= now {
                if let Some(r) = self.reservations.get_mut(&id) {
                    r.state = ReservationState::Active;
                }
            }
        }
        // Budgets may have changed (an administrator, a restart): the broker plans with
        // what each user has left.
        // What their local jobs may still cost is set aside (the sync recounts first): a
        // global job's reservation never takes the money an admitted local job was
        // admitted with.
        self.sync_broker_budgets();
        let mut out = Vec::new();
        let plan = self.broker.begin_cycle(now, &mut out);
        self.carry_out(now, out);
        plan
    }

    /// The second half of [`World::cycle`]: the decisions made on `plan` carried out.
    pub fn finish_cycle(&mut self, plan: CyclePlan, decisions: Vec<Decision>) {
        self.apply_decisions(&plan, decisions);
        self.close_cycle(plan);
    }

    /// Carries out the next slice of the decisions made on `plan`
    /// ([`Broker::apply_decisions`]): the service applies a long list a slice per lock hold,
    /// so that requests are answered between slices.
    pub fn apply_decisions(&mut self, plan: &CyclePlan, decisions: Vec<Decision>) {
        let mut out = Vec::new();
        self.broker.apply_decisions(plan, decisions, &mut out);
        self.carry_out(plan.now(), out);
    }

    /// Ends a cycle whose decisions are all carried out.
    pub fn close_cycle(&mut self, plan: CyclePlan) {
        let now = plan.now();
        let mut out = Vec::new();
        self.broker.close_cycle(plan, &mut out);
        self.carry_out(now, out);
    }

    /// The planner's views of the clusters.
    pub fn views(&self) -> Vec<ClusterView<'_>> {
        self.broker.clusters.iter().map(GridCluster::view).collect()
    }

    /// Carries out the broker's decisions: starts launch, reservations and plans become
    /// records, charges move budgets, and clusters that schedule themselves are asked.
    pub(crate) fn carry_out(&mut self, now: Time, out: Vec<BrokerAction>) {
        #[cfg(test)]
        self.actions.extend(out.iter().cloned());
        for a in out {
            match a {
                BrokerAction::Start {
                    cluster,
                    job,
                    procs,
                    ..
                } => self.start_part(now, cluster, job, procs),
                // Reservation boundaries are due through `next_due`.
                BrokerAction::Wake { .. } | BrokerAction::Ended { .. } => {}
                BrokerAction::Planned { job, start } => {
                    if let Some(j) = self.jobs.get_mut(&job) {
                        j.planned_start = Some(start.secs());
                        j.first_planned_start.get_or_insert(start.secs());
                        // The start is `planned_start`, a number for clients to show.
                        j.reason = Some("planned beyond the lead time".into());
                        j.state = JobState::Planned;
                    }
                }
                BrokerAction::Waiting { job, reason } => {
                    let text = self.wait_reason(now, &reason);
                    if let Some(j) = self.jobs.get_mut(&job) {
                        j.reason = Some(text);
                        j.planned_start = None;
                        j.state = JobState::Pending;
                    }
                }
                BrokerAction::Ask { job, part } => self.ask(now, job, &part),
                BrokerAction::MoveAsked { job, parts, .. } => self.ask_move(now, job, &parts),
                BrokerAction::Reserved {
                    job, start, parts, ..
                } => self.reserved(now, job, start, &parts),
                BrokerAction::Moved {
                    job, start, parts, ..
                } => {
                    for p in &parts {
                        if let Some(r) = self.reservations.get_mut(&p.reservation) {
                            r.start = p.window.start.secs();
                            r.end = p.window.end.secs();
                        }
                    }
                    if let Some(j) = self.jobs.get_mut(&job) {
                        j.planned_start = Some(start.secs());
                    }
                }
                // The broker has taken it out of the local scheduler and run a pass.
                BrokerAction::ReservationEnded {
                    cluster,
                    reservation,
                    job,
                    how,
                } => {
                    let state = match how {
                        ReservationEnd::Released => ReservationState::Released,
                        ReservationEnd::Finished => ReservationState::Finished,
                    };
                    if self.suspended_in_rm(cluster, job) {
                        self.close_reservation_record(reservation, state);
                    } else {
                        self.close_reservation(now, reservation, state);
                    }
                }
                BrokerAction::Refused { job, reason } => {
                    self.fail(now, job, reason.to_string());
                }
                BrokerAction::Charge { job, amount, .. } => self.charge(job, amount),
                BrokerAction::Preempted { job, by, how, .. } => self.preempted(job, by, how),
                BrokerAction::Resumed { job, end, parts } => self.resumed(now, job, end, &parts),
                BrokerAction::PreemptAsked {
                    by,
                    cluster,
                    victims,
                } => self.ask_preemption(now, by, cluster, &victims),
                BrokerAction::ResumeAsked { job, cluster } => self.ask_resume(now, job, cluster),
            }
        }
    }

    /// A running global job gives its processors to job `by`, of a higher priority level:
    /// its processes are stopped (their processors are free for `by` at once), or killed
    /// to run again as its next attempt.
    pub(crate) fn preempted(&mut self, id: JobId, by: JobId, how: Preemption) {
        if !self.jobs.contains_key(&id) {
            return;
        }
        let level = self.jobs.get(&by).map_or(0, |b| b.priority);
        let j = self.jobs.get_mut(&id).expect("invariant: found above");
        match how {
            Preemption::Requeue => {
                j.reason = Some(format!(
                    "preempted by job {by} (priority {level}): stopped, to run again"
                ));
                self.mark_requeue(id);
                self.kill_unended_parts(id);
            }
            Preemption::Suspend => {
                j.suspended = true;
                j.reason = Some(format!(
                    "preempted by job {by} (priority {level}): suspended until processors \
                     free up"
                ));
                let attempt = j.attempt;
                let parts: Vec<(String, Vec<u32>)> = j
                    .parts
                    .iter_mut()
                    .filter(|p| !p.ended)
                    .map(|p| (p.cluster.clone(), std::mem::take(&mut p.processors)))
                    .collect();
                self.record_preemption(id);
                for (c, processors) in parts {
                    let Some(k) = self.cluster_index(&c) else {
                        continue;
                    };
                    if self.clusters[k].kind.schedules_itself() {
                        continue; // stopped there already, when the broker asked
                    }
                    // A stopped process uses no processor: they go to the job preempting it.
                    self.clusters[k].free.extend(processors);
                    self.effects.push(Effect::Pause {
                        cluster: k,
                        job: id,
                        attempt,
                        stop: true,
                    });
                }
            }
        }
    }

    /// A suspended job continues, in new reservations on the clusters it ran on, on free
    /// processors there.
    pub(crate) fn resumed(&mut self, now: Time, id: JobId, end: Time, parts: &[ReservedPart]) {
        let Some(user) = self.jobs.get(&id).map(|j| j.user.clone()) else {
            return;
        };
        for p in parts {
            let rid = p.reservation;
            let rec = self.job_reservation(id, &user, p, ReservationState::Active);
            self.reservations.insert(rid, rec);
            if self.clusters[p.cluster].kind.schedules_itself() {
                // Resumed there already, when the broker asked; it runs on in the
                // reservation it was submitted to, the new one is the mirror's.
                let name = self.clusters[p.cluster].cfg.name.clone();
                if let Some(part) = self
                    .jobs
                    .get_mut(&id)
                    .and_then(|j| j.parts.iter_mut().find(|q| q.cluster == name && !q.ended))
                {
                    part.reservation = Some(rid.0);
                }
                continue;
            }
            let taken: Vec<u32> = self.clusters[p.cluster]
                .free
                .iter()
                .take(p.procs as usize)
                .copied()
                .collect();
            for q in &taken {
                self.clusters[p.cluster].free.remove(q);
            }
            let name = self.clusters[p.cluster].cfg.name.clone();
            let Some(j) = self.jobs.get_mut(&id) else {
                return;
            };
            let attempt = j.attempt;
            if let Some(part) = j.parts.iter_mut().find(|q| q.cluster == name && !q.ended) {
                part.processors = taken;
                part.reservation = Some(rid.0);
            }
            self.effects.push(Effect::Pause {
                cluster: p.cluster,
                job: id,
                attempt,
                stop: false,
            });
        }
        if let Some(j) = self.jobs.get_mut(&id) {
            j.suspended = false;
            j.reason = None;
            j.planned_start = j.planned_start.or(Some(now.secs()));
            let _ = end;
        }
        self.record_preemption(id);
    }

    /// Writes down, in job `id`'s record, what preemption did to it as the broker has it
    /// now (stopped since when, with how much left; time stopped before), so that a restart
    /// puts it back as it was ([`World::adopt_global`]).
    pub(crate) fn record_preemption(&mut self, id: JobId) {
        let rec = match self.broker.entry(id).map(|e| &e.phase) {
            Some(Phase::Suspended {
                since,
                left,
                suspended,
                ..
            }) => PreemptionRecord {
                since: Some(since.secs()),
                left: left.as_secs(),
                suspended: suspended.as_secs(),
            },
            Some(Phase::Running { suspended, .. }) => PreemptionRecord {
                since: None,
                left: 0,
                suspended: suspended.as_secs(),
            },
            _ => return,
        };
        if let Some(j) = self.jobs.get_mut(&id) {
            j.preemption = Some(rec);
        }
    }

    /// A wait reason in the service's words.
    pub(crate) fn wait_reason(&self, now: Time, reason: &WaitReason) -> String {
        match reason {
            WaitReason::ReservationRefused { detail, until, .. } => format!(
                "{detail}; all parts released, planned again in {} s",
                (*until - now).as_secs().max(0)
            ),
            WaitReason::ClustersDown { procs, down } => format!(
                "{procs} processors asked, more than the clusters up have while {} unavailable; \
                 waiting for it",
                down.iter()
                    .map(|&k| self.clusters[k].cfg.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            WaitReason::LostCluster(k) => format!(
                "cluster {} became unavailable ({}); planned again",
                self.clusters[*k].cfg.name,
                self.clusters[*k]
                    .unavailable_reason
                    .as_deref()
                    .unwrap_or("unreachable")
            ),
            other => other.to_string(),
        }
    }

    /// Phase one on a cluster that schedules itself: a tentative reservation record, and
    /// the request to the cluster (its answer goes to [`World::reservation_answered`]).
    pub(crate) fn ask(&mut self, now: Time, id: JobId, part: &ReservedPart) {
        let Some(j) = self.jobs.get(&id) else { return };
        let user = j.user.clone();
        let k = part.cluster;
        let (start, end) = (part.window.start.secs(), part.window.end.secs());
        let rid = part.reservation;
        let cluster = self.clusters[k].cfg.name.clone();
        let mut rec = self.job_reservation(id, &user, part, ReservationState::Tentative);
        rec.expires_at = Some((now + Dur(60)).secs());
        self.reservations.insert(rid, rec);
        let request = ReserveRequest {
            id: rid.0,
            start,
            end,
            procs: part.procs,
        };
        // Over suspended parts of ours too when it starts now: a co-allocated victim's part
        // on another cluster than the one preempted for frees its cores there.
        let over =
            self.asked.preempting.contains(&id) || (start <= now.secs() && self.suspended_on(k));
        self.effects.push(if over {
            Effect::ReserveOverSuspended {
                cluster: k,
                request,
            }
        } else {
            Effect::Reserve {
                cluster: k,
                request,
            }
        });
        if let Some(j) = self.jobs.get_mut(&id) {
            j.state = JobState::Planned;
            j.planned_start = Some(start);
            j.first_planned_start.get_or_insert(start);
            j.reason = Some(format!("reserving {cluster} (phase one: tentative)"));
        }
    }

    /// The record of a global job's reservation for one of its parts.
    pub(crate) fn job_reservation(
        &self,
        id: JobId,
        user: &str,
        p: &ReservedPart,
        state: ReservationState,
    ) -> ReservationRecord {
        ReservationRecord {
            id: p.reservation.0,
            kind: "job".into(),
            cluster: self.clusters[p.cluster].cfg.name.clone(),
            procs: p.procs,
            processors: vec![],
            start: p.window.start.secs(),
            end: p.window.end.secs(),
            acl: AclSpec {
                job: Some(id.0),
                ..AclSpec::default()
            },
            state,
            expires_at: None,
            owner: user.to_string(),
        }
    }

    /// Phase two done: every part of a global job is held. Its reservations are committed,
    /// its parts bound to them, and parts on clusters that schedule themselves submitted.
    pub(crate) fn reserved(&mut self, now: Time, id: JobId, start: Time, parts: &[ReservedPart]) {
        let Some(user) = self.jobs.get(&id).map(|j| j.user.clone()) else {
            return;
        };
        for p in parts {
            let rid = p.reservation;
            let fresh = self.job_reservation(id, &user, p, ReservationState::Committed);
            if !self.reservations.contains_key(&rid) {
                self.reservations.insert(rid, fresh);
            }
            let rec = self
                .reservations
                .get_mut(&rid)
                .expect("invariant: inserted above");
            rec.state = ReservationState::Committed;
            rec.expires_at = None;
        }
        let _ = now;
        let records: Vec<PartRecord> = parts
            .iter()
            .map(|p| PartRecord {
                cluster: self.clusters[p.cluster].cfg.name.clone(),
                procs: p.procs,
                reservation: Some(p.reservation.0),
                speed: self.chosen_speed(p),
                ..PartRecord::default()
            })
            .collect();
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        j.state = JobState::Reserved;
        j.planned_start = Some(start.secs());
        j.first_planned_start.get_or_insert(start.secs());
        j.reason = None;
        j.parts = records;
        self.submit_remote_parts(id);
        self.stage_ahead(now, id);
    }

    /// Starts copying a reserved job's input to each cluster it will run on that the
    /// broker schedules itself, now rather than at its start: the planner placed its
    /// slots there after the transfer, so the copy runs in that time instead of after it.
    /// (Slurm parts are copied before they are submitted, which is also at reservation.)
    pub(crate) fn stage_ahead(&mut self, now: Time, id: JobId) {
        let Some(j) = self.jobs.get(&id) else { return };
        let attempt = j.attempt;
        let mut copies = Vec::new();
        for (index, p) in j.parts.iter().enumerate() {
            let Some(k) = self.cluster_index(&p.cluster) else {
                continue;
            };
            let begun = j
                .staging
                .iter()
                .any(|s| s.cluster == p.cluster && s.attempt == attempt);
            if self.clusters[k].kind.schedules_itself() || p.ended || begun {
                continue;
            }
            let Some(spec) = self.part_spec(id, index, Vec::new()) else {
                continue;
            };
            let stage = crate::state::staging::copies(j, &p.cluster, &spec.cwd);
            if !stage.is_empty() {
                copies.push((k, stage, spec.unix_user));
            }
        }
        for (k, stage, unix_user) in copies {
            self.staging_began(now, k, id, attempt);
            self.effects.push(Effect::StageAhead {
                cluster: k,
                job: id.0,
                attempt,
                stage,
                unix_user,
            });
        }
    }

    /// A copy made ahead of a reserved job's start ended: recorded. A part launched
    /// meanwhile is waiting for it and goes on (or fails) through [`World::staged`]; a
    /// copy that failed ahead is made again at the start, and only that failure fails it.
    pub fn staged_ahead(
        &mut self,
        now: Time,
        k: ClusterId,
        id: JobId,
        attempt: u32,
        result: &Result<(), String>,
    ) {
        let name = self.clusters[k].cfg.name.clone();
        let launched = self.jobs.get(&id).is_some_and(|j| {
            j.attempt == attempt
                && j.state == JobState::Running
                && j.parts
                    .iter()
                    .any(|p| p.cluster == name && !p.processors.is_empty())
        });
        // A launched part's wait ends through `staged`, which records the end itself.
        if !launched {
            self.staging_ended(now, &name, id, attempt, result);
        }
    }

    /// Parts whose start was deferred when the service stopped, (cluster, job, procs) in id
    /// order: launched now if their processors are free, else deferred again until the jobs
    /// holding them end.
    pub(crate) fn start_again(&mut self, now: Time, parts: Vec<(ClusterId, JobId, u32)>) {
        for (k, id, procs) in parts {
            self.start_part(now, k, id, procs);
        }
    }
}
