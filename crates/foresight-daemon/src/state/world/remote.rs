//! Clusters that schedule themselves (Slurm): the service mirrors each from its snapshots,
//! reserves and submits there through effects whose answers come back here, and reconciles
//! its records with what the cluster reports — after its own restarts and the cluster's.
//!
//! This file holds what is asked of such a cluster (reservations, moves, submissions) and
//! the answers; `remote_sync.rs` reconciles the records with each snapshot, and
//! `remote_mirror.rs` rebuilds the mirror the planner sees from it.
//!
//! Nothing here does I/O: effects go to the caller, answers come back as calls.

use super::{Effect, MoveStep, World};
use foresight_core::broker::{Phase, ReservedPart};
use foresight_core::time::Time;
use foresight_core::{ClusterId, JobId, ReservationId};
use foresight_rm::{BookedPart, Outcome, PartHandle, ReserveRequest, Submission};
use foresight_store::JobState;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// What was asked of clusters that schedule themselves and not yet seen answered in their
/// snapshots.
#[derive(Debug, Default)]
pub(crate) struct Asked {
    /// Parts whose submission to a remote cluster is on its way: (job, attempt, cluster).
    pub(super) submitting: BTreeSet<(JobId, u32, ClusterId)>,
    /// When parts were submitted to a remote cluster (this run of the service only): a
    /// snapshot older than that may not show them yet.
    pub(super) submitted_at: HashMap<(JobId, u32, ClusterId), Time>,
    /// When remote reservations were confirmed (this run only), for the same reason.
    pub(super) confirmed_at: HashMap<ReservationId, Time>,
    /// Cancels and releases already sent to remote clusters and not yet seen through.
    pub(super) sent: BTreeSet<(ClusterId, String)>,
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
        // A site starts a part whose window moved to now at once, before the job's other
        // clusters have answered: parts on several sites would start apart should one
        // refuse.
        let sites = steps
            .iter()
            .filter(|s| self.clusters[s.cluster].cfg.site.is_some())
            .count();
        if sites > 0 && steps.len() > 1 {
            return self.move_answered(
                now,
                id,
                Err("a job in parts on several clusters of other hosts does not move".into()),
            );
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

    fn reservation_cluster(&self, rid: ReservationId) -> Option<ClusterId> {
        self.reservations
            .get(&rid)
            .and_then(|r| self.cluster_index(&r.cluster))
    }

    /// Whether cluster `k` is up: takes global jobs, or answers while it takes none by design
    /// (scheduled by Maui through WIKI, or a WIKI cluster without a submission route).
    pub fn cluster_up(&self, k: ClusterId) -> bool {
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
    pub fn wiki_book(&self, k: ClusterId) -> (Vec<ReserveRequest>, Vec<BookedPart>) {
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
            let cwd = &submission.spec.cwd;
            let mut stage = crate::state::staging::copies(&self.jobs[&id], &name, cwd);
            stage.extend(self.edge_inputs(id, &name, cwd));
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
        k: ClusterId,
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
        k: ClusterId,
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
}

/// An end without a run: `started_at` 0 says it never started.
pub(super) fn failed_outcome(now: Time, why: String) -> Outcome {
    Outcome::failed(0, now.secs(), why)
}
