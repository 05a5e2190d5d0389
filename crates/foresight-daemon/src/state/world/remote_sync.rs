//! Reconciling the records with each snapshot of a cluster that schedules itself.
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

use super::remote::failed_outcome;
use super::{Effect, World};
use foresight_core::broker::Phase;
use foresight_core::time::{Dur, Time};
use foresight_core::{ClusterId, JobId, ReservationId};
use foresight_rm::{ClusterState, Outcome, PartHandle, RmJobState};
use foresight_store::JobRecord;
use foresight_store::{JobState, ReservationState};
use std::collections::{BTreeSet, HashMap};

/// A part of ours on a remote cluster: (job, attempt, its id there, its reservation, the
/// job's state).
type OurPart = (JobId, u32, Option<String>, Option<ReservationId>, JobState);

/// Seconds Slurm's clock may lag ours when comparing its submit times with our records.
const CLOCK_SLACK_SECS: i64 = 5;

impl World {
    /// A remote part ended (or never could start): the job moves on as for a local part.
    pub(super) fn finish_remote_part(
        &mut self,
        now: Time,
        k: ClusterId,
        id: JobId,
        attempt: u32,
        o: &Outcome,
    ) {
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
    pub fn sync_remote(&mut self, now: Time, k: ClusterId, snapshot: Result<ClusterState, String>) {
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

    fn mark_unavailable(&mut self, now: Time, k: ClusterId, why: String) {
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
    fn reconcile(&mut self, now: Time, k: ClusterId, state: &ClusterState) {
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
        k: ClusterId,
        state: &ClusterState,
        seen: &mut BTreeSet<(ClusterId, String)>,
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
        k: ClusterId,
        state: &ClusterState,
        seen: &mut BTreeSet<(ClusterId, String)>,
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
        k: ClusterId,
        state: &ClusterState,
        theirs: &HashMap<(JobId, u32), &foresight_rm::RmJob>,
    ) {
        let name = self.clusters[k].cfg.name.clone();
        let mut resubmit = BTreeSet::new();
        for part in self.our_parts(&name) {
            let (id, attempt, ..) = part;
            match theirs.get(&(id, attempt)) {
                Some(t) => self.follow_known_part(now, k, &name, state, part, t),
                None => {
                    if self.follow_unknown_part(now, k, &name, state, part) {
                        resubmit.insert(id);
                    }
                }
            }
        }
        for id in resubmit {
            self.submit_remote_parts(id);
        }
    }

    /// Our parts on cluster `name` that have not ended, of jobs still under way.
    fn our_parts(&self, name: &str) -> Vec<OurPart> {
        self.jobs
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
            .collect()
    }

    /// Follows one of our parts that cluster `k` (named `name`) knows as `t`: adopted if
    /// its external id is new to us, then queued, started, brought back to what the records
    /// say, or ended.
    fn follow_known_part(
        &mut self,
        now: Time,
        k: ClusterId,
        name: &str,
        state: &ClusterState,
        (id, attempt, external, _, job_state): OurPart,
        t: &foresight_rm::RmJob,
    ) {
        if external.as_deref() != Some(t.external.as_str()) {
            // Adopted: submitted before a restart, or its answer was lost.
            self.set_part(id, name, |p| p.external = Some(t.external.clone()));
        }
        match &t.state {
            RmJobState::Pending => {
                if job_state == JobState::Pending {
                    self.set_reason(id, format!("queued in {name}"));
                }
            }
            RmJobState::Running | RmJobState::Suspended => {
                let start = t.start.map_or(now, Time);
                self.remote_part_started(now, id, name, start);
                self.correct_stray_part(k, name, id, attempt, t, Time(state.taken_at));
            }
            RmJobState::Ended(outcome) => {
                if outcome.started_at > 0 && outcome.error.is_none() {
                    self.remote_part_started(now, id, name, Time(outcome.started_at));
                }
                self.finish_remote_part(now, k, id, attempt, outcome);
            }
        }
    }

    /// A preemption, or a resumption, whose answer a restart lost: the part `t` of job `id`
    /// on cluster `k` is brought back to what the records say (asked once).
    fn correct_stray_part(
        &mut self,
        k: ClusterId,
        name: &str,
        id: JobId,
        attempt: u32,
        t: &foresight_rm::RmJob,
        taken_at: Time,
    ) {
        let stop = match t.state {
            RmJobState::Suspended if self.stray_suspended(id) => false,
            RmJobState::Running if self.stray_running(id, taken_at) => true,
            _ => return,
        };
        let verb = if stop { "suspend" } else { "resume" };
        let key = (k, format!("{verb} job {}", t.external));
        if self.asked.sent.insert(key) {
            tracing::info!(
                "cluster {name}: {verb} job {} (part of job {id}): its record says {}",
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

    /// Follows one of our parts that cluster `k` does not know: still being submitted (left
    /// alone), lost (failed, unless submitted too recently for the snapshot to show it), or
    /// never submitted. True when it is to be submitted now (its reservation still stands).
    fn follow_unknown_part(
        &mut self,
        now: Time,
        k: ClusterId,
        name: &str,
        state: &ClusterState,
        (id, attempt, external, reservation, _): OurPart,
    ) -> bool {
        if self.asked.submitting.contains(&(id, attempt, k)) {
            return false;
        }
        if let Some(external) = external {
            let recent = self
                .asked
                .submitted_at
                .get(&(id, attempt, k))
                .is_some_and(|&at| Time(state.taken_at) <= at + Dur(1));
            if !recent {
                let outcome = failed_outcome(
                    now,
                    format!("cluster {name} no longer knows its job {external}"),
                );
                self.finish_remote_part(now, k, id, attempt, &outcome);
            }
            return false;
        }
        // Never submitted (the service stopped before it could): submit now, if its
        // reservation still stands.
        reservation.is_none_or(|r| self.reservations.get(&r).is_some_and(|r| r.state.is_live()))
    }

    /// Plans again the reserved global jobs whose reservation vanished from cluster `k`.
    fn replan_vanished_reservations(&mut self, now: Time, k: ClusterId, state: &ClusterState) {
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
}
