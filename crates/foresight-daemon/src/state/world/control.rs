//! What users and administrators do to a job: cancel, hold, release, suspend or resume,
//! requeue.

use crate::state::refusal::Refusal;
use crate::state::world::effect::Effect;
use crate::state::world::World;
use foresight_core::broker::Phase;
use foresight_core::time::Time;
use foresight_core::{ClusterId, JobId, ReservationId};
use foresight_rm::PartHandle;
use foresight_store::{JobState, ReservationState};

impl World {
    /// Cancels a job in any state but a final one.
    pub fn cancel(&mut self, now: Time, id: JobId) -> Result<(), Refusal> {
        let j = self
            .jobs
            .get(&id)
            .ok_or_else(|| Refusal::not_found_at("id", format!("no job {id}")))?;
        if j.state.is_final() {
            return Err(Refusal::conflict(format!(
                "job {id} is already {}",
                j.state
            )));
        }
        if j.state == JobState::Running {
            self.unmark_requeue(id);
            if let Some(j) = self.jobs.get_mut(&id) {
                j.state_after = Some(JobState::Cancelled);
            }
            self.kill_unended_parts(id);
            return Ok(());
        }
        // The pass this brings must not take the processors of a job past its prediction.
        self.correct_outlived(now);
        self.unqueue(now, id);
        if let Some(j) = self.jobs.get_mut(&id) {
            j.state = JobState::Cancelled;
            j.held = false;
            j.ended_at = Some(now.secs());
            j.reason = Some("cancelled".into());
        }
        self.wake_waiting(now);
        Ok(())
    }

    /// Takes a not-yet-running job out of every queue and gives back its reservations and
    /// its charge.
    pub(crate) fn unqueue(&mut self, now: Time, id: JobId) {
        // Its reservations end and its charge comes back through the broker's actions.
        let mut out = Vec::new();
        self.broker.withdraw(now, id, &mut out);
        self.carry_out(now, out);
        self.in_flight.deferred.retain(|d| d.1 != id);
        // Parts already handed to a cluster that schedules itself are cancelled there, and
        // the job's next run is a new attempt, so the old one can never be taken for it.
        let handed = self.jobs.get(&id).is_some_and(|j| {
            j.parts.iter().any(|p| p.external.is_some())
                || self
                    .asked
                    .submitting
                    .iter()
                    .any(|s| s.0 == id && s.1 == j.attempt)
        });
        if handed {
            self.kill_unended_parts(id);
            if let Some(j) = self.jobs.get_mut(&id) {
                j.attempt += 1;
            }
        }
        let Some(j) = self.jobs.get(&id) else { return };
        let parts = j.parts.clone();
        for p in &parts {
            if let Some(k) = self.cluster_index(&p.cluster) {
                let _ = self.broker.clusters[k].sched.cancel(now, id);
            }
            if self.is_job_reservation(p.reservation) {
                if let Some(r) = p.reservation {
                    self.end_reservation(now, ReservationId(r), ReservationState::Released);
                }
            }
        }
        if let Some(j) = self.jobs.get_mut(&id) {
            j.parts.clear();
        }
    }

    /// Stops every part of a running job whose process has not ended yet.
    pub(crate) fn kill_unended_parts(&mut self, id: JobId) {
        let Some(j) = self.jobs.get(&id) else { return };
        let attempt = j.attempt;
        let parts: Vec<(ClusterId, Option<String>)> = j
            .parts
            .iter()
            .filter(|p| !p.ended)
            .filter_map(|p| Some((self.cluster_index(&p.cluster)?, p.external.clone())))
            .collect();
        for (cluster, external) in parts {
            if !self.clusters[cluster].kind.schedules_itself() {
                self.effects.push(Effect::Kill {
                    cluster,
                    job: id,
                    attempt,
                });
            } else if external.is_some() {
                self.effects.push(Effect::Cancel {
                    cluster,
                    part: PartHandle {
                        job: id.0,
                        attempt,
                        external,
                    },
                });
            }
            // A remote part still being submitted is cancelled when its id comes back.
        }
    }

    /// Holds a job that has not started: it is not planned until released.
    pub fn hold(&mut self, now: Time, id: JobId) -> Result<(), Refusal> {
        let j = self
            .jobs
            .get(&id)
            .ok_or_else(|| Refusal::not_found_at("id", format!("no job {id}")))?;
        if !matches!(
            j.state,
            JobState::Pending | JobState::Planned | JobState::Reserved
        ) {
            return Err(Refusal::conflict(format!(
                "job {id} is {}: only jobs that have not started can be held",
                j.state
            )));
        }
        self.unqueue(now, id);
        if let Some(j) = self.jobs.get_mut(&id) {
            j.held = true;
            j.state = JobState::Pending;
            j.planned_start = None;
            j.reason = Some("held".into());
        }
        Ok(())
    }

    /// Lets a held job be planned again.
    pub fn release(&mut self, now: Time, id: JobId) -> Result<(), Refusal> {
        let j = self
            .jobs
            .get_mut(&id)
            .ok_or_else(|| Refusal::not_found_at("id", format!("no job {id}")))?;
        if !j.held {
            return Err(Refusal::conflict(format!("job {id} is not held")));
        }
        if let Some(why) = self.unadmitted(id) {
            return Err(Refusal::forbidden("reservation", why));
        }
        let Some(j) = self.jobs.get_mut(&id) else {
            return Err(Refusal::not_found_at("id", format!("no job {id}")));
        };
        j.held = false;
        j.reason = None;
        let global = j.cluster.is_none() && j.reservation.is_none();
        if self.stop_at_gate(id) {
            self.wake_waiting(now);
        } else if global {
            self.enqueue_global(now, id);
        } else {
            self.submit_local(now, id);
        }
        Ok(())
    }

    /// Stops (SIGSTOP) or continues (SIGCONT) a running job at `now`, timing the stop so
    /// that its run time (`run_secs`, `job list`'s TIME) leaves it out, as its walltime does.
    pub fn pause(&mut self, now: Time, id: JobId, stop: bool) -> Result<(), Refusal> {
        let j = self
            .jobs
            .get_mut(&id)
            .ok_or_else(|| Refusal::not_found_at("id", format!("no job {id}")))?;
        if j.state != JobState::Running {
            return Err(Refusal::conflict(format!(
                "job {id} is {}: only running jobs can be {}",
                j.state,
                if stop { "suspended" } else { "resumed" }
            )));
        }
        let preempted = self
            .broker
            .entry(id)
            .is_some_and(|e| matches!(e.phase, Phase::Suspended { .. }));
        if preempted {
            return Err(Refusal::conflict(format!(
                "job {id} is suspended by a job of a higher priority level: its processors \
                 are that job's now, and it resumes by itself when processors free up"
            )));
        }
        let Some(j) = self.jobs.get_mut(&id) else {
            return Err(Refusal::not_found_at("id", format!("no job {id}")));
        };
        j.suspended = stop;
        match (stop, j.suspended_since) {
            (true, None) => j.suspended_since = Some(now.secs()),
            (false, Some(since)) => {
                j.suspended_secs += (now.secs() - since).max(0);
                j.suspended_since = None;
            }
            _ => {}
        }
        let attempt = j.attempt;
        let parts: Vec<(String, Option<String>)> = j
            .parts
            .iter()
            .filter(|p| !p.ended)
            .map(|p| (p.cluster.clone(), p.external.clone()))
            .collect();
        for (c, external) in parts {
            let Some(k) = self.cluster_index(&c) else {
                continue;
            };
            self.effects
                .push(if self.clusters[k].kind.schedules_itself() {
                    Effect::Control {
                        cluster: k,
                        part: PartHandle {
                            job: id.0,
                            attempt,
                            external,
                        },
                        stop,
                    }
                } else {
                    Effect::Pause {
                        cluster: k,
                        job: id,
                        attempt,
                        stop,
                    }
                });
        }
        Ok(())
    }

    /// Puts a job back in the queue: a running one is stopped first and runs again as a new
    /// attempt.
    pub fn requeue(&mut self, now: Time, id: JobId) -> Result<(), Refusal> {
        let j = self
            .jobs
            .get(&id)
            .ok_or_else(|| Refusal::not_found_at("id", format!("no job {id}")))?;
        match j.state {
            JobState::Running => {
                self.recount_changed();
                self.check_rerun_budget(now, id)?;
                self.mark_requeue(id);
                self.kill_unended_parts(id);
                Ok(())
            }
            JobState::Reserved | JobState::Planned => {
                self.unqueue(now, id);
                if let Some(j) = self.jobs.get_mut(&id) {
                    j.state = JobState::Pending;
                    j.planned_start = None;
                }
                self.enqueue_global(now, id);
                Ok(())
            }
            s => Err(Refusal::conflict(format!(
                "job {id} is {s}: only running, planned or reserved jobs can be requeued"
            ))),
        }
    }
}
