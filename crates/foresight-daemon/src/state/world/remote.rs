//! Clusters that schedule themselves (Slurm): the service mirrors each from its snapshots,
//! reserves and submits there through effects whose answers come back here, and reconciles
//! its records with what the cluster reports — after its own restarts and the cluster's.
//!
//! The rules, applied at every snapshot:
//! - a part of ours the cluster runs, or ended, moves its job along (the cluster's own start
//!   and end times are the truth);
//! - a part the cluster has never heard of is submitted (again) — unless its submission is on
//!   its way; a part it has forgotten after being submitted fails with that reason;
//! - a job or reservation of ours that no live record wants is cancelled or released there;
//! - an unreachable cluster offers nothing to the planner, and the global jobs reserved there
//!   that have not started are planned again elsewhere.
//!
//! Nothing here does I/O: effects go to the caller, answers come back as calls.

use super::{Effect, MoveStep, World};
use foresight_api::{JobState, ReservationState};
use foresight_core::broker::{Phase, ReservedPart, SpeedGroup};
use foresight_core::reservation::{Acl, AdminReservation};
use foresight_core::scheduler::{Domain, LocalScheduler};
use foresight_core::time::{Dur, Interval, Time};
use foresight_core::{Job, JobId, ReservationId};
use foresight_rm::{
    BookedPart, ClusterState, Outcome, PartHandle, ReserveRequest, RmJobState, Submission,
};
use foresight_store::JobRecord;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Ids of the mirror's stand-ins for the cluster's own jobs and reservations, apart from
/// Foresight's.
const FOREIGN: u64 = 1 << 62;

/// A part of ours on a remote cluster: (job, attempt, its id there, its reservation, the
/// job's state).
type OurPart = (JobId, u32, Option<String>, Option<ReservationId>, JobState);

/// Seconds Slurm's clock may lag ours when comparing its submit times with our records.
const CLOCK_SLACK_SECS: i64 = 5;

/// Slurm holds a running job's processors through the second its limit ends (a reservation
/// starting exactly at `start + limit` is refused: "Requested nodes are busy", checked on
/// Slurm 22.05), so in the half-open mirror running jobs, and our reservations they run in,
/// end this much later.
const SLURM_END_PAD_SECS: i64 = 1;

/// What was asked of clusters that schedule themselves and not yet seen answered in their
/// snapshots.
#[derive(Debug, Default)]
pub(crate) struct Asked {
    /// Parts whose submission to a remote cluster is on its way: (job, attempt, cluster).
    pub(super) submitting: BTreeSet<(JobId, u32, usize)>,
    /// When parts were submitted to a remote cluster (this run of the service only): a
    /// snapshot older than that may not show them yet.
    pub(super) submitted_at: HashMap<(JobId, u32, usize), Time>,
    /// When remote reservations were confirmed (this run only), for the same reason.
    pub(super) confirmed_at: HashMap<ReservationId, Time>,
    /// Cancels and releases already sent to remote clusters and not yet seen through.
    pub(super) sent: BTreeSet<(usize, String)>,
    /// How this instance names what it makes on remote clusters (`instance`): the
    /// reservations of ours it reads back in their snapshots.
    pub(super) naming: foresight_rm::slurm::Naming,
    /// Victims of preemptions asked of clusters that schedule themselves and not answered
    /// yet, by the job asking (`preempt_remote.rs`).
    pub(super) preempt_victims: BTreeMap<JobId, Vec<JobId>>,
    /// Jobs whose preemption was just answered yes: their reservation is made over the
    /// victims' processors.
    pub(super) preempting: BTreeSet<JobId>,
}

impl World {
    /// A remote cluster answered phase one for reservation `rid`: held, or refused (why).
    pub fn reservation_answered(
        &mut self,
        now: Time,
        rid: ReservationId,
        answer: Result<(), String>,
    ) {
        let awaited = self.broker.entries().any(|e| match &e.phase {
            Phase::Reserving { awaiting, .. } => awaiting.contains(&rid),
            _ => false,
        });
        let live = self
            .reservations
            .get(&rid)
            .is_some_and(|r| r.state.is_live());
        if !awaited {
            // The job was cancelled, held or withdrawn meanwhile: give it back.
            if answer.is_ok() && !live {
                if let Some(k) = self.reservation_cluster(rid) {
                    self.effects.push(Effect::Release {
                        cluster: k,
                        reservation: rid,
                    });
                }
            }
            return;
        }
        let cluster = self
            .reservations
            .get(&rid)
            .map(|r| r.cluster.clone())
            .unwrap_or_default();
        let answer = match answer {
            Ok(()) if live => {
                self.asked.confirmed_at.insert(rid, now);
                Ok(())
            }
            Ok(()) => Err(format!(
                "the tentative reservation on {cluster} expired before it was held"
            )),
            Err(why) => Err(why),
        };
        let mut out = Vec::new();
        self.broker
            .on_reservation_answered(now, rid, answer, &mut out);
        self.carry_out(now, out);
    }

    /// The broker asks to move a reserved job earlier on clusters that schedule themselves:
    /// one step per part there, each with its reservation's old and new window and the
    /// part's id there once submitted. Parts on the local executor hold their new window in
    /// the broker meanwhile and move when the answer is yes.
    pub(super) fn ask_move(&mut self, now: Time, id: JobId, parts: &[ReservedPart]) {
        let Some(j) = self.jobs.get(&id) else {
            return self.move_answered(now, id, Err(format!("job {id} is unknown")));
        };
        if self.asked.submitting.iter().any(|&(job, _, _)| job == id) {
            // Its begin time is on its way to the cluster: moved at a later pass.
            return self.move_answered(now, id, Err("a part is being submitted".into()));
        }
        let mut steps = Vec::with_capacity(parts.len());
        for p in parts
            .iter()
            .filter(|p| self.clusters[p.cluster].kind.schedules_itself())
        {
            let rid = p.reservation;
            let Some(r) = self.reservations.get(&rid) else {
                return self.move_answered(now, id, Err(format!("reservation {rid} is unknown")));
            };
            let external = j
                .parts
                .iter()
                .find(|x| x.reservation == Some(rid.0) && !x.ended)
                .and_then(|x| x.external.clone());
            steps.push(MoveStep {
                cluster: p.cluster,
                to: ReserveRequest {
                    id: rid.0,
                    start: p.window.start.secs(),
                    end: p.window.end.secs(),
                    procs: p.procs,
                },
                back: ReserveRequest {
                    id: rid.0,
                    start: r.start,
                    end: r.end,
                    procs: r.procs,
                },
                part: external.map(|external| PartHandle {
                    job: id.0,
                    attempt: j.attempt,
                    external: Some(external),
                }),
            });
        }
        self.effects.push(Effect::Move { job: id, steps });
    }

    /// The clusters answered a move asked by [`Effect::Move`]: all moved, or none (why).
    pub fn move_answered(&mut self, now: Time, id: JobId, answer: Result<(), String>) {
        if let Err(why) = &answer {
            tracing::info!("job {id} stays at its reserved start: {why}");
        }
        let mut out = Vec::new();
        self.broker.on_move_answered(now, id, answer, &mut out);
        self.carry_out(now, out);
    }

    fn reservation_cluster(&self, rid: ReservationId) -> Option<usize> {
        self.reservations
            .get(&rid)
            .and_then(|r| self.cluster_index(&r.cluster))
    }

    /// Whether cluster `k` is up: takes global jobs, or answers while it takes none by design
    /// (scheduled by Maui through WIKI, or a WIKI cluster without a submission route).
    pub fn cluster_up(&self, k: usize) -> bool {
        let c = &self.clusters[k];
        self.broker.clusters[k].available
            || c.kind.maui_schedules()
            || (c.snapshot.is_some()
                && c.unavailable_reason.as_deref()
                    == Some(crate::config::wiki_rm::no_route_reason().as_str()))
    }

    /// The book of WIKI cluster `k` as the records keep it, given back to its adapter after a
    /// restart: the live reservations held there, and every part there not ended with its
    /// reservation and the second it may start.
    pub fn wiki_book(&self, k: usize) -> (Vec<ReserveRequest>, Vec<BookedPart>) {
        let name = &self.clusters[k].cfg.name;
        let reservations = self
            .reservations
            .values()
            .filter(|r| &r.cluster == name && r.state.is_live())
            .map(|r| ReserveRequest {
                id: r.id,
                start: r.start,
                end: r.end,
                procs: r.procs,
            })
            .collect();
        let parts = self
            .jobs
            .values()
            .filter(|j| !j.state.is_final())
            .flat_map(|j| {
                j.parts
                    .iter()
                    .filter(|p| &p.cluster == name && !p.ended)
                    .map(|p| BookedPart {
                        job: j.id,
                        attempt: j.attempt,
                        reservation: p.reservation,
                        begin: self.part_begin(j, p.reservation),
                    })
            })
            .collect();
        (reservations, parts)
    }

    /// When a remote part may start: not before its reservation, nor the job's own begin.
    fn part_begin(&self, j: &foresight_store::JobRecord, reservation: Option<u64>) -> Option<i64> {
        let reservation = reservation
            .and_then(|r| self.reservations.get(&ReservationId(r)))
            .filter(|r| r.kind == "job");
        reservation.map(|r| r.start).max(j.begin)
    }

    /// Submits the parts of job `id` on remote clusters that are not there yet.
    pub(super) fn submit_remote_parts(&mut self, id: JobId) {
        let Some(j) = self.jobs.get(&id) else { return };
        let attempt = j.attempt;
        let mut subs = Vec::new();
        for (index, p) in j.parts.iter().enumerate() {
            let Some(k) = self.cluster_index(&p.cluster) else {
                continue;
            };
            if !self.clusters[k].kind.schedules_itself()
                || p.ended
                || p.external.is_some()
                || self.asked.submitting.contains(&(id, attempt, k))
            {
                continue;
            }
            let begin = self.part_begin(j, p.reservation);
            // Slurm picks the processors: the spec only says how many.
            let Some(spec) = self.part_spec(id, index, (0..p.procs).collect()) else {
                continue;
            };
            subs.push((
                k,
                Submission {
                    spec,
                    reservation: p.reservation,
                    begin,
                },
            ));
        }
        for (k, submission) in subs {
            self.asked.submitting.insert((id, attempt, k));
            let name = self.clusters[k].cfg.name.clone();
            let stage = crate::state::staging::copies(&self.jobs[&id], &name, &submission.spec.cwd);
            self.effects.push(Effect::Submit {
                cluster: k,
                submission,
                stage,
            });
        }
    }

    /// The copy of a part's input before its submission to remote cluster `k` ended: done
    /// (true: submit it now), or failed, which fails the part (and so the job) with the
    /// reason and releases what it held (false).
    pub fn remote_staged(
        &mut self,
        now: Time,
        k: usize,
        id: JobId,
        attempt: u32,
        result: Result<(), String>,
    ) -> bool {
        let name = self.clusters[k].cfg.name.clone();
        if !self.staging_ended(now, &name, id, attempt, &result) {
            return false;
        }
        let Err(e) = result else {
            return true;
        };
        self.asked.submitting.remove(&(id, attempt, k));
        let why = format!("staging its input to {name} failed: {e}");
        let j = &self.jobs[&id];
        let wanted = j.attempt == attempt && !j.state.is_final() && j.state_after.is_none();
        if !wanted {
            return false;
        }
        if j.state == JobState::Running {
            let outcome = failed_outcome(now, why);
            self.finish_remote_part(now, k, id, attempt, &outcome);
        } else {
            self.unqueue(now, id);
            self.fail(now, id, why);
        }
        false
    }

    /// A remote cluster answered a submission: the part's id there, or why not
    /// (`unreachable`: the cluster could not be asked; the part is submitted again once it
    /// answers).
    pub fn part_submitted(
        &mut self,
        now: Time,
        k: usize,
        id: JobId,
        attempt: u32,
        answer: Result<PartHandle, (String, bool)>,
    ) {
        self.asked.submitting.remove(&(id, attempt, k));
        let name = self.clusters[k].cfg.name.clone();
        let wanted = self.jobs.get(&id).is_some_and(|j| {
            j.attempt == attempt
                && !j.state.is_final()
                && j.state_after.is_none()
                && j.parts.iter().any(|p| p.cluster == name && !p.ended)
        });
        match answer {
            Ok(handle) if wanted => {
                self.asked.submitted_at.insert((id, attempt, k), now);
                if let Some(j) = self.jobs.get_mut(&id) {
                    if let Some(p) = j.parts.iter_mut().find(|p| p.cluster == name && !p.ended) {
                        p.external = handle.external;
                    }
                }
            }
            Ok(handle) => {
                // Cancelled or requeued while it was being submitted.
                self.effects.push(Effect::Cancel {
                    cluster: k,
                    part: handle,
                });
            }
            Err((_, true)) => {}
            Err((why, false)) if wanted => {
                let Some(j) = self.jobs.get(&id) else { return };
                if j.state == JobState::Running {
                    let outcome = failed_outcome(now, format!("{name} refused the job: {why}"));
                    self.finish_remote_part(now, k, id, attempt, &outcome);
                } else {
                    self.unqueue(now, id);
                    self.fail(now, id, format!("cluster {name} refused the job: {why}"));
                }
            }
            Err(_) => {}
        }
    }

    /// A remote part ended (or never could start): the job moves on as for a local part.
    fn finish_remote_part(&mut self, now: Time, k: usize, id: JobId, attempt: u32, o: &Outcome) {
        if let Some(j) = self.jobs.get_mut(&id) {
            if j.attempt == attempt && !j.state.is_final() && j.state != JobState::Running {
                // Ended before it was seen running (cancelled while pending, refused at
                // start): nothing was used.
                j.state = JobState::Running;
            }
        }
        let was_final = self.jobs.get(&id).is_none_or(|j| j.state.is_final());
        self.on_finished(now, k, id, attempt, o);
        if let Some(j) = self.jobs.get_mut(&id) {
            if !was_final && j.state.is_final() && (1..now.secs()).contains(&o.ended_at) {
                // The cluster's own end time is the truth, as for starts (not when this
                // snapshot saw it).
                j.ended_at = Some(o.ended_at.max(j.started_at.unwrap_or(0)));
            }
        }
    }

    /// A snapshot of remote cluster `k`, or why none could be taken (the cluster is then
    /// unavailable).
    pub fn sync_remote(&mut self, now: Time, k: usize, snapshot: Result<ClusterState, String>) {
        self.stats.snapshots += 1;
        match snapshot {
            Err(why) => self.mark_unavailable(now, k, why),
            Ok(state) => {
                if crate::config::wiki_rm::takes_foresight_jobs(&self.clusters[k].cfg) {
                    self.broker.on_cluster_up(now, k);
                    self.clusters[k].unavailable_reason = None;
                } else {
                    // Up, but none of Foresight's jobs can reach its queue.
                    self.clusters[k].unavailable_reason =
                        Some(crate::config::wiki_rm::no_route_reason());
                }
                self.reconcile(now, k, &state);
                self.rebuild_mirror(now, k, &state);
                self.clusters[k].snapshot = Some(state);
            }
        }
    }

    fn mark_unavailable(&mut self, now: Time, k: usize, why: String) {
        let name = self.clusters[k].cfg.name.clone();
        if self.broker.clusters[k].available {
            tracing::warn!("cluster {name} is unavailable: {why}");
        }
        self.clusters[k].unavailable_reason = Some(why.clone());
        // Global jobs reserved there that have not started go elsewhere.
        let withdraw: Vec<JobId> = self
            .broker
            .entries()
            .filter(|e| match &e.phase {
                Phase::Reserving { parts, .. } | Phase::Reserved { parts, .. } => {
                    parts.iter().any(|p| p.cluster == k)
                }
                _ => false,
            })
            .map(|e| e.job.id)
            .collect();
        for id in withdraw {
            self.withdraw(
                now,
                id,
                format!("cluster {name} became unavailable ({why}); planned again"),
            );
        }
        let mut out = Vec::new();
        self.broker.on_cluster_down(now, k, &mut out);
        self.carry_out(now, out);
    }

    /// Takes a global job that has not started off its clusters and plans it again. Parts
    /// already submitted to a remote cluster are cancelled there (now if it answers, else at
    /// reconciliation), and the job runs as a new attempt so the two can never be confused.
    pub(super) fn withdraw(&mut self, now: Time, id: JobId, reason: String) {
        self.unqueue(now, id);
        if let Some(j) = self.jobs.get_mut(&id) {
            j.state = JobState::Pending;
            j.planned_start = None;
            j.reason = Some(reason);
        }
        self.enqueue_global(now, id);
    }

    /// Brings our records in line with what cluster `k` reports: what no record wants is
    /// cancelled or released there, our parts follow what it says of them, and reserved
    /// jobs whose reservation vanished there are planned again.
    fn reconcile(&mut self, now: Time, k: usize, state: &ClusterState) {
        let theirs = self.our_jobs_there(state);
        let mut seen = BTreeSet::new();
        self.cancel_unwanted_jobs(k, state, &mut seen);
        self.release_unwanted_reservations(now, k, state, &mut seen);
        // Forget sent requests that are seen through, so a failed one is sent again.
        self.asked.sent.retain(|s| s.0 != k || seen.contains(s));
        self.follow_parts(now, k, state, &theirs);
        self.replan_vanished_reservations(now, k, state);
    }

    /// Our parts in a snapshot, by (job, attempt); the newest Slurm job when there are
    /// several.
    fn our_jobs_there<'s>(
        &self,
        state: &'s ClusterState,
    ) -> HashMap<(JobId, u32), &'s foresight_rm::RmJob> {
        let mut theirs: HashMap<(JobId, u32), &foresight_rm::RmJob> = HashMap::new();
        for j in &state.jobs {
            if let Some((job, attempt)) = j.foresight {
                let key = (JobId(job), attempt);
                // A Slurm job submitted before our job was accepted is not ours: it is a
                // namesake left by another Foresight (an earlier data directory, whose ids
                // started at 1 too) that Slurm still shows for MinJobAge. Adopting it would
                // end our job with its outcome.
                let namesake = self
                    .jobs
                    .get(&key.0)
                    .is_some_and(|r| j.submitted_at + CLOCK_SLACK_SECS < r.submitted_at);
                if namesake {
                    continue;
                }
                let newer = theirs
                    .get(&key)
                    .is_none_or(|o| o.submitted_at <= j.submitted_at);
                if newer {
                    theirs.insert(key, j);
                }
            }
        }
        theirs
    }

    /// Cancels the jobs of ours there that no record wants (`seen`: the requests this
    /// snapshot still calls for).
    fn cancel_unwanted_jobs(
        &mut self,
        k: usize,
        state: &ClusterState,
        seen: &mut BTreeSet<(usize, String)>,
    ) {
        let name = self.clusters[k].cfg.name.clone();
        // Jobs of ours there that nothing wants: cancel.
        for j in &state.jobs {
            let Some((id, attempt)) = j.foresight else {
                continue;
            };
            let id = JobId(id);
            if matches!(j.state, RmJobState::Ended(_)) {
                continue;
            }
            let wanted = self.jobs.get(&id).is_some_and(|r| {
                r.attempt == attempt
                    && !r.state.is_final()
                    && r.parts.iter().any(|p| {
                        p.cluster == name
                            && !p.ended
                            && p.external.as_ref().is_none_or(|e| *e == j.external)
                    })
            });
            let key = (k, format!("job {}", j.external));
            if !wanted && !self.asked.submitting.contains(&(id, attempt, k)) {
                seen.insert(key.clone());
                if self.asked.sent.insert(key) {
                    tracing::info!(
                        "cluster {name}: cancelling job {} (part of job {id} attempt {attempt}), \
                         which no record wants",
                        j.external
                    );
                    self.effects.push(Effect::Cancel {
                        cluster: k,
                        part: PartHandle {
                            job: id.0,
                            attempt,
                            external: Some(j.external.clone()),
                        },
                    });
                }
            }
        }
    }

    /// Releases the reservations of ours there that no live record wants.
    fn release_unwanted_reservations(
        &mut self,
        now: Time,
        k: usize,
        state: &ClusterState,
        seen: &mut BTreeSet<(usize, String)>,
    ) {
        // Reservations of ours there that no live record wants: release. One that finished at
        // its end is left to the cluster, which ends it itself: releasing it would cancel a
        // part still finishing inside it. So is one a part we still want runs in, or is
        // suspended in (preempted: Slurm refuses to delete it while the part is in it, and
        // releasing would cancel the part).
        let occupied: BTreeSet<&str> = state
            .jobs
            .iter()
            .filter(|j| matches!(j.state, RmJobState::Running | RmJobState::Suspended))
            .filter(|j| {
                j.foresight.is_some_and(|(id, attempt)| {
                    self.jobs.get(&JobId(id)).is_some_and(|r| {
                        r.attempt == attempt && !r.state.is_final() && r.state_after.is_none()
                    })
                })
            })
            .filter_map(|j| j.reservation.as_deref())
            .collect();
        for r in &state.reservations {
            let Some(rid) = r.foresight.map(ReservationId) else {
                continue;
            };
            let wanted = occupied.contains(r.name.as_str())
                || self.reservations.get(&rid).is_some_and(|x| {
                    x.state.is_live() || x.state == ReservationState::Finished && Time(x.end) <= now
                });
            if !wanted {
                let key = (k, format!("reservation {rid}"));
                seen.insert(key.clone());
                if self.asked.sent.insert(key) {
                    self.effects.push(Effect::Release {
                        cluster: k,
                        reservation: rid,
                    });
                }
            }
        }
    }

    /// Follows each of our parts on cluster `k` from what the snapshot says of it: adopted,
    /// queued, running, suspended, ended, lost, or never submitted.
    fn follow_parts(
        &mut self,
        now: Time,
        k: usize,
        state: &ClusterState,
        theirs: &HashMap<(JobId, u32), &foresight_rm::RmJob>,
    ) {
        let name = self.clusters[k].cfg.name.clone();
        // Our parts: follow them.
        let parts: Vec<OurPart> = self
            .jobs
            .values()
            .filter(|j| {
                matches!(
                    j.state,
                    JobState::Pending | JobState::Reserved | JobState::Running
                )
            })
            .flat_map(|j| {
                j.parts
                    .iter()
                    .filter(|p| p.cluster == name && !p.ended)
                    .map(move |p| {
                        let reservation = p.reservation.map(ReservationId);
                        (
                            JobId(j.id),
                            j.attempt,
                            p.external.clone(),
                            reservation,
                            j.state,
                        )
                    })
            })
            .collect();
        let mut resubmit = BTreeSet::new();
        for (id, attempt, external, reservation, job_state) in parts {
            match theirs.get(&(id, attempt)) {
                Some(t) => {
                    if external.as_deref() != Some(t.external.as_str()) {
                        // Adopted: submitted before a restart, or its answer was lost.
                        self.set_part(id, &name, |p| p.external = Some(t.external.clone()));
                    }
                    match &t.state {
                        RmJobState::Pending => {
                            if job_state == JobState::Pending {
                                self.set_reason(id, format!("queued in {name}"));
                            }
                        }
                        RmJobState::Running | RmJobState::Suspended => {
                            let start = t.start.map_or(now, Time);
                            self.remote_part_started(now, id, &name, start);
                            // A preemption, or a resumption, whose answer a restart lost:
                            // the part is brought back to what the records say.
                            let stop = match t.state {
                                RmJobState::Suspended if self.stray_suspended(id) => Some(false),
                                RmJobState::Running
                                    if self.stray_running(id, Time(state.taken_at)) =>
                                {
                                    Some(true)
                                }
                                _ => None,
                            };
                            if let Some(stop) = stop {
                                let verb = if stop { "suspend" } else { "resume" };
                                let key = (k, format!("{verb} job {}", t.external));
                                if self.asked.sent.insert(key) {
                                    tracing::info!(
                                        "cluster {name}: {verb} job {} (part of job {id}): its \
                                         record says {}",
                                        t.external,
                                        if stop { "suspended" } else { "running" }
                                    );
                                    self.effects.push(Effect::Control {
                                        cluster: k,
                                        part: PartHandle {
                                            job: id.0,
                                            attempt,
                                            external: Some(t.external.clone()),
                                        },
                                        stop,
                                    });
                                }
                            }
                        }
                        RmJobState::Ended(outcome) => {
                            if outcome.started_at > 0 && outcome.error.is_none() {
                                self.remote_part_started(now, id, &name, Time(outcome.started_at));
                            }
                            self.finish_remote_part(now, k, id, attempt, outcome);
                        }
                    }
                }
                None if self.asked.submitting.contains(&(id, attempt, k)) => {}
                None if external.is_some() => {
                    let recent = self
                        .asked
                        .submitted_at
                        .get(&(id, attempt, k))
                        .is_some_and(|&at| Time(state.taken_at) <= at + Dur(1));
                    if !recent {
                        let outcome = failed_outcome(
                            now,
                            format!(
                                "cluster {name} no longer knows its job {}",
                                external.unwrap_or_default()
                            ),
                        );
                        self.finish_remote_part(now, k, id, attempt, &outcome);
                    }
                }
                None => {
                    // Never submitted (the service stopped before it could): submit now,
                    // if its reservation still stands.
                    let ok = reservation.is_none_or(|r| {
                        self.reservations.get(&r).is_some_and(|r| r.state.is_live())
                    });
                    if ok {
                        resubmit.insert(id);
                    }
                }
            }
        }
        for id in resubmit {
            self.submit_remote_parts(id);
        }
    }

    /// Plans again the reserved global jobs whose reservation vanished from cluster `k`.
    fn replan_vanished_reservations(&mut self, now: Time, k: usize, state: &ClusterState) {
        let name = self.clusters[k].cfg.name.clone();
        // Reserved global jobs whose reservation vanished from the cluster: plan again.
        let present: BTreeSet<ReservationId> = state
            .reservations
            .iter()
            .filter_map(|r| r.foresight.map(ReservationId))
            .collect();
        let vanished: Vec<(JobId, ReservationId)> = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Reserved)
            .flat_map(|j| {
                j.parts
                    .iter()
                    .filter(|p| p.cluster == name)
                    .filter_map(move |p| Some((JobId(j.id), ReservationId(p.reservation?))))
            })
            .filter(|&(_, r)| {
                !present.contains(&r)
                    && self
                        .asked
                        .confirmed_at
                        .get(&r)
                        .is_none_or(|&at| Time(state.taken_at) > at + Dur(1))
                    && self
                        .reservations
                        .get(&r)
                        .is_some_and(|x| Time(x.end) > now + Dur(5))
            })
            .collect();
        for (id, r) in vanished {
            self.withdraw(
                now,
                id,
                format!("its reservation {r} vanished from cluster {name}; planned again"),
            );
        }
    }

    fn set_part(
        &mut self,
        id: JobId,
        cluster: &str,
        f: impl FnOnce(&mut foresight_store::PartRecord),
    ) {
        if let Some(j) = self.jobs.get_mut(&id) {
            if let Some(p) = j
                .parts
                .iter_mut()
                .find(|p| p.cluster == cluster && !p.ended)
            {
                f(p);
            }
        }
    }

    fn set_reason(&mut self, id: JobId, reason: String) {
        let changed = |j: &JobRecord| j.reason.as_deref() != Some(reason.as_str());
        if let Some(j) = self.jobs.get_mut_if(&id, changed) {
            j.reason = Some(reason);
        }
    }

    /// A remote part is running since `start` (the cluster's clock).
    fn remote_part_started(&mut self, _now: Time, id: JobId, cluster: &str, start: Time) {
        // Seen at every snapshot while it runs: changed (and written) only the first time.
        let new = |j: &JobRecord| {
            j.parts
                .iter()
                .any(|p| p.cluster == cluster && !p.ended && p.started_at.is_none())
        };
        let Some(j) = self.jobs.get_mut_if(&id, new) else {
            return;
        };
        let Some(p) = j
            .parts
            .iter_mut()
            .find(|p| p.cluster == cluster && !p.ended)
        else {
            return;
        };
        if p.started_at.is_some() {
            return;
        }
        p.started_at = Some(start.secs());
        if j.started_at.is_none_or(|s| start < Time(s)) {
            if j.started_at.is_none() {
                if let Some(planned) = j.first_planned_start {
                    self.stats.estimate_error_sum += (start.secs() - planned).abs() as f64;
                    self.stats.estimate_error_count += 1;
                }
            }
            j.started_at = Some(start.secs());
        }
        if j.stdout.is_none() {
            let n = j.parts.len();
            let ext = |e: &str| {
                if n == 1 {
                    format!("{id}.{e}")
                } else {
                    format!("{id}.0.{e}")
                }
            };
            j.stdout = Some(
                self.launch
                    .output_dir
                    .join(ext("out"))
                    .display()
                    .to_string(),
            );
            j.stderr = Some(
                self.launch
                    .output_dir
                    .join(ext("err"))
                    .display()
                    .to_string(),
            );
        }
        j.state = JobState::Running;
        j.reason = None;
        self.broker.on_part_started(start, id);
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        let starts: Vec<i64> = j.parts.iter().filter_map(|p| p.started_at).collect();
        if j.parts.len() > 1 && starts.len() == j.parts.len() {
            let skew =
                (starts.iter().max().unwrap_or(&0) - starts.iter().min().unwrap_or(&0)) as f64;
            self.stats.skew_count += 1;
            self.stats.skew_sum += skew;
            self.stats.skew_max = self.stats.skew_max.max(skew);
            j.reason = Some(format!("co-allocated parts started within {skew} s"));
        }
    }

    /// Rebuilds the mirror of remote cluster `k`: its processors, running jobs until their
    /// limits, its own reservations and ours, and its waiting jobs in its own order (by its
    /// expected start, then priority), which the mirror's policy forecasts forward.
    fn rebuild_mirror(&mut self, now: Time, k: usize, state: &ClusterState) {
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

/// An end without a run: `started_at` 0 says it never started.
fn failed_outcome(now: Time, why: String) -> Outcome {
    Outcome::failed(0, now.secs(), why)
}
