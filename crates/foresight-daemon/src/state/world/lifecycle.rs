//! A job's parts from start to end: launched on processors, staged, started, finished or
//! lost, requeued, and the job ended once every part has.

use crate::state::world::effect::Effect;
use crate::state::world::World;
use foresight_core::time::Time;
use foresight_core::{ClusterId, JobId, ReservationId};
use foresight_rm::Outcome;
use foresight_store::{JobRecord, ReservationRecord};
use foresight_store::{JobState, ReservationState};
use std::collections::{BTreeMap, BTreeSet};

/// Running jobs on their way somewhere: being stopped, to be requeued, or started while
/// their processors are not free yet.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    /// Running jobs to put back in the queue once their processes are gone.
    pub(super) requeue: BTreeSet<JobId>,
    /// Running jobs whose parts are being stopped because one part failed or on cancel.
    pub(super) stopping: BTreeSet<JobId>,
    /// Parts a local policy started while too few of the cluster's processors were really
    /// free: (cluster, job, procs), launched in this order as processors come free. A policy
    /// counts a job's processors free at the end of its walltime, or once it is preempted to
    /// be requeued, but the supervisor counts the walltime from the process's own start and
    /// gives a killed process a grace period to die. Not stored: a restart defers again the
    /// parts that have a start but no processors ([`World::restore`]).
    pub(super) deferred: Vec<(ClusterId, JobId, u32)>,
    /// Why a job in `requeue` runs again, when it is not the user's requeue: shown as its
    /// reason once it is back in the queue.
    pub(super) requeue_why: BTreeMap<JobId, String>,
    /// Starts of each job that failed for reasons of the machine (see
    /// [`World::start_failed`]). Not stored: a restart gives a job its retries again.
    pub(super) start_failures: BTreeMap<JobId, u32>,
}

/// How many times a job's start may fail for reasons of the machine (a supervisor that
/// could not be spawned, died or hung before starting it; a resource manager out of reach)
/// before the job fails: each such failure requeues it, as Slurm requeues a job whose node
/// failed at launch.
pub const START_RETRIES: u32 = 3;

/// How local jobs are launched, from the configuration.
#[derive(Debug)]
pub(crate) struct LaunchSettings {
    /// Seconds a killed process is given to end before it is killed hard.
    pub(super) grace: u64,
    /// Where local jobs' output files are written.
    pub(super) output_dir: std::path::PathBuf,
    /// Where the files of parts that ran at sites on other hosts arrive (see
    /// `World::uploads_of`).
    pub(crate) uploads_dir: std::path::PathBuf,
    /// The `[unix_user]` table (see `accounts`).
    pub(crate) unix_users: std::collections::BTreeMap<String, String>,
    /// Cap of each output file of a local job.
    pub(super) max_output_bytes: Option<u64>,
    /// Whether jobs may run as root (`[identity] root_jobs`).
    pub(crate) root_jobs: crate::config::identity::RootJobs,
}

impl World {
    pub(crate) fn fail(&mut self, now: Time, id: JobId, reason: String) {
        let mut out = Vec::new();
        self.broker.withdraw(now, id, &mut out);
        self.carry_out(now, out);
        if let Some(j) = self.jobs.get_mut(&id) {
            j.state = JobState::Failed;
            j.reason = Some(reason);
            j.ended_at = Some(now.secs());
        }
        self.wake_waiting(now);
    }

    /// Starts a part on processors that are really free, or defers it (in order) until
    /// jobs that overran their walltime have let go of enough of them.
    pub(crate) fn start_part(&mut self, now: Time, k: ClusterId, id: JobId, procs: u32) {
        let behind = self.in_flight.deferred.iter().any(|d| d.0 == k);
        if behind || self.usable_now(now, k, id) < procs {
            self.in_flight.deferred.push((k, id, procs));
            if let Some(j) = self.jobs.get_mut(&id) {
                j.reason = Some(
                    "starting: waiting for processors still held by a job being stopped".into(),
                );
            }
            return;
        }
        self.launch_part(now, k, id, procs);
    }

    /// Launches the deferred parts of cluster `k` that now fit, in order.
    pub(crate) fn start_deferred(&mut self, now: Time, k: ClusterId) {
        while let Some(i) = self.in_flight.deferred.iter().position(|d| d.0 == k) {
            let (_, id, procs) = self.in_flight.deferred[i];
            if self.usable_now(now, k, id) < procs {
                break;
            }
            self.in_flight.deferred.remove(i);
            self.launch_part(now, k, id, procs);
        }
    }

    /// Free processors of cluster `k` that job `id`'s part may take now: not those of a
    /// reservation on named processors whose window is open, unless it is the job's own.
    fn usable_now(&self, now: Time, k: ClusterId, id: JobId) -> u32 {
        let c = &self.clusters[k];
        let own = self.jobs.get(&id).and_then(|j| {
            j.parts
                .iter()
                .find(|p| p.cluster == c.cfg.name)
                .and_then(|p| p.reservation)
        });
        let held: BTreeSet<u32> = self
            .reservations
            .values()
            .filter(|r| {
                r.state.is_live()
                    && r.cluster == c.cfg.name
                    && Some(r.id) != own
                    && r.start <= now.secs()
                    && now.secs() < r.end
            })
            .flat_map(|r| r.processors.iter().copied())
            .collect();
        c.free.iter().filter(|p| !held.contains(p)).count() as u32
    }

    pub(crate) fn launch_part(&mut self, now: Time, k: ClusterId, id: JobId, procs: u32) {
        let taken = self.choose_processors(now, k, id, procs);
        self.launch_on(now, k, id, taken);
    }

    /// Launches job `id`'s part on cluster `k` on the free processors `taken`.
    pub(crate) fn launch_on(&mut self, now: Time, k: ClusterId, id: JobId, taken: Vec<u32>) {
        let cluster = &mut self.clusters[k];
        for p in &taken {
            cluster.free.remove(p);
        }
        let name = cluster.cfg.name.clone();
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        let Some(index) = j.parts.iter().position(|p| p.cluster == name) else {
            return;
        };
        j.parts[index].processors = taken.clone();
        j.state = JobState::Running;
        j.reason = None;
        let Some(spec) = self.part_spec(id, index, taken) else {
            return;
        };
        let mut stage = crate::state::staging::copies(&self.jobs[&id], &name, &spec.cwd);
        let ahead = self.jobs[&id]
            .staging
            .iter()
            .rev()
            .find(|s| s.cluster == name && s.attempt == self.jobs[&id].attempt)
            .map(|s| (s.ended_at.is_some(), s.error.is_none()));
        if ahead == Some((true, true)) {
            // Copied ahead, while it was reserved.
            stage.clear();
        }
        if let Some(j) = self.jobs.get_mut(&id) {
            if index == 0 {
                j.stdout = Some(spec.stdout.display().to_string());
                j.stderr = Some(spec.stderr.display().to_string());
            }
            if !stage.is_empty() && ahead == Some((false, true)) {
                // The copy ahead is still running: the launch waits for it (or, after a
                // restart lost it, copies again), and its record is that copy's.
                j.reason = Some(format!("staging its input to {name}"));
            } else if !stage.is_empty() {
                // It starts once its input is there: staging is time before the start.
                j.reason = Some(format!("staging its input to {name}"));
                let attempt = j.attempt;
                self.staging_began(now, k, id, attempt);
            }
        }
        if stage.is_empty() {
            self.mark_started(now, id);
        }
        self.effects.push(Effect::Launch {
            cluster: k,
            spec,
            stage,
        });
    }

    /// Records a job's start (its first part's), and how far it was from the plan.
    pub(crate) fn mark_started(&mut self, now: Time, id: JobId) {
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        if j.started_at.is_none() {
            j.started_at = Some(now.secs());
            if let Some(p) = j.first_planned_start {
                self.stats.estimate_error_sum += (now.secs() - p).abs() as f64;
                self.stats.estimate_error_count += 1;
            }
        }
    }

    /// The copy of a part's input to cluster `k` ended: done, the part starts now (true:
    /// launch it); failed or no longer wanted (the job was cancelled or requeued
    /// meanwhile), the part ends without having run and releases what it held (false).
    pub fn staged(
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
        let j = self
            .jobs
            .get_mut(&id)
            .expect("invariant: staging_ended found it");
        let current = j.attempt == attempt && j.state == JobState::Running;
        let cancelled =
            j.state_after == Some(JobState::Cancelled) || self.in_flight.stopping.contains(&id);
        match result {
            Ok(()) if current && !cancelled => {
                if j.reason.as_deref() == Some(&format!("staging its input to {name}")) {
                    j.reason = None;
                }
                self.mark_started(now, id);
                true
            }
            Ok(()) => {
                let mut outcome =
                    Outcome::failed(now.secs(), now.secs(), "stopped while staging".into());
                outcome.error = None;
                outcome.cancelled = true;
                self.on_finished(now, k, id, attempt, &outcome);
                false
            }
            Err(e) => {
                let outcome = Outcome::failed(
                    now.secs(),
                    now.secs(),
                    format!("staging its input to {name} failed: {e}"),
                );
                self.on_finished(now, k, id, attempt, &outcome);
                false
            }
        }
    }

    /// Records the start of a copy of job `id`'s input to cluster `k` for `attempt`.
    pub fn staging_began(&mut self, now: Time, k: ClusterId, id: JobId, attempt: u32) {
        let name = self.clusters[k].cfg.name.clone();
        if let Some(j) = self.jobs.get_mut(&id) {
            j.staging.push(foresight_store::StagingRecord {
                cluster: name,
                attempt,
                began_at: now.secs(),
                ended_at: None,
                error: None,
                edges: Vec::new(),
            });
        }
    }

    /// A job's environment: its own variables, then, for a task of an array job,
    /// `FORESIGHT_ARRAY_JOB_ID` and `FORESIGHT_ARRAY_TASK_ID` (and Slurm's names for them on
    /// a Slurm cluster, which sets them only for its own arrays), last so that they win.
    pub(crate) fn job_env(&self, j: &JobRecord, cluster: &str) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> =
            j.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        if let Some(a) = j.links.as_ref().and_then(|l| l.array.as_ref()) {
            let prefixes = self.cluster_index(cluster).map_or(&["FORESIGHT"][..], |k| {
                self.clusters[k].kind.array_variable_prefixes()
            });
            for p in prefixes {
                env.retain(|(k, _)| {
                    k != &format!("{p}_ARRAY_JOB_ID") && k != &format!("{p}_ARRAY_TASK_ID")
                });
                env.push((format!("{p}_ARRAY_JOB_ID"), a.job.to_string()));
                env.push((format!("{p}_ARRAY_TASK_ID"), a.task.to_string()));
            }
        }
        env
    }

    /// Which free processors a part gets: those its reservation names first; then those no
    /// other reservation names during its walltime (seconds of overlap, fewest first),
    /// those named by a reservation that begins after it ends before unnamed ones, fewest
    /// seconds of overlap with its kill grace; then the lowest ids. The scheduler's counts guarantee enough free
    /// processors; this keeps named ones for their reservations.
    pub(crate) fn choose_processors(
        &self,
        now: Time,
        k: ClusterId,
        id: JobId,
        procs: u32,
    ) -> Vec<u32> {
        let c = &self.clusters[k];
        let Some(j) = self.jobs.get(&id) else {
            return c.free.iter().take(procs as usize).copied().collect();
        };
        let own = j
            .parts
            .iter()
            .find(|p| p.cluster == c.cfg.name)
            .and_then(|p| p.reservation);
        let end = now.secs() + j.walltime;
        let until = end + self.launch.grace as i64;
        let overlap =
            |from: i64, to: i64, r: &ReservationRecord| (to.min(r.end) - from.max(r.start)).max(0);
        let mut mine = BTreeSet::new();
        // Per processor: seconds another reservation names it within the walltime, within
        // the grace after it, and whether one names it from the walltime's end on.
        let mut taken: BTreeMap<u32, (i64, i64, bool)> = BTreeMap::new();
        for r in self.reservations.values() {
            if !r.state.is_live() || r.cluster != c.cfg.name || r.processors.is_empty() {
                continue;
            }
            if Some(r.id) == own {
                mine.extend(r.processors.iter().copied());
                continue;
            }
            let (hard, soft) = (overlap(now.secs(), end, r), overlap(end, until, r));
            for p in &r.processors {
                let t = taken.entry(*p).or_default();
                t.0 += hard;
                t.1 += soft;
                t.2 |= end <= r.start;
            }
        }
        // The local scheduler counts processors; names are kept here. A job that ends
        // before a reservation on named processors begins takes those first, so that the
        // unnamed ones are left to the jobs that will still run in its window: the other
        // way round, a long job finds only named processors free and runs into the window.
        let mut free: Vec<u32> = c.free.iter().copied().collect();
        free.sort_by_key(|p| {
            let (hard, soft, later) = taken.get(p).copied().unwrap_or_default();
            (!mine.contains(p), hard, !later, soft, *p)
        });
        free.truncate(procs as usize);
        free.sort_unstable();
        free
    }

    /// A part's process ended (or could not start).
    pub fn on_finished(
        &mut self,
        now: Time,
        k: ClusterId,
        id: JobId,
        attempt: u32,
        outcome: &Outcome,
    ) {
        // The pass this end brings must not take the processors of a job past its prediction.
        self.correct_outlived(now);
        let name = self.clusters[k].cfg.name.clone();
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        if j.attempt != attempt || j.state != JobState::Running {
            return; // a stale report of an earlier attempt
        }
        let Some(index) = j.parts.iter().position(|p| p.cluster == name && !p.ended) else {
            return;
        };
        // When the part really ended, as its supervisor (or resource manager) recorded it:
        // a part that ended while the service was down is not charged for the downtime.
        let ended_at = if (1..now.secs()).contains(&outcome.ended_at) {
            outcome.ended_at.max(j.started_at.unwrap_or(0))
        } else {
            now.secs()
        };
        j.parts[index].ended = true;
        j.parts[index].ended_at = Some(ended_at);
        let part = j.parts[index].clone();
        for p in &part.processors {
            self.clusters[k].free.insert(*p);
        }
        self.start_deferred(now, k);
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        let failed = outcome.error.is_some()
            || outcome.timed_out
            || outcome.cancelled
            || outcome.signal.is_some()
            || outcome.exit_code != Some(0);
        // The first bad outcome names the job's fate; good ones fill in until then.
        let first_bad = failed && j.exit_code.is_none_or(|c| c == 0) && j.signal.is_none();
        if first_bad || j.exit_code.is_none() && j.signal.is_none() {
            j.exit_code = outcome.exit_code;
            j.signal = outcome.signal;
            if outcome.timed_out {
                j.state_after = Some(JobState::Timeout);
            } else if outcome.cancelled {
                j.state_after = Some(JobState::Cancelled);
            } else if failed {
                j.state_after = Some(JobState::Failed);
            }
            if let Some(e) = &outcome.error {
                j.reason = Some(e.clone());
            }
        }
        let all_ended = j.parts.iter().all(|p| p.ended);
        let siblings: Vec<(String, u32)> = j
            .parts
            .iter()
            .filter(|p| !p.ended)
            .map(|p| (p.cluster.clone(), attempt))
            .collect();
        let _ = part;
        let mut out = Vec::new();
        self.broker
            .on_part_ended_at(now, Time(ended_at), k, id, &mut out);
        self.carry_out(now, out);
        if failed && !siblings.is_empty() && self.in_flight.stopping.insert(id) {
            self.kill_unended_parts(id);
        }
        if all_ended {
            self.in_flight.stopping.remove(&id);
            self.job_ended(Time(ended_at), id, outcome);
        }
    }

    /// A part that was running when the service stopped and is gone without a trace: the
    /// job runs again as a new attempt.
    pub fn mark_lost(&mut self, now: Time, k: ClusterId, id: JobId, attempt: u32) {
        self.mark_requeue(id);
        let outcome = Outcome::failed(
            now.secs(),
            now.secs(),
            "lost while the service was down".into(),
        );
        self.on_finished(now, k, id, attempt, &outcome);
    }

    /// Attempt `attempt` of job `id` could not be started on cluster `k`: `error` says why.
    /// When the failure is the machine's (`transient`), the job runs again as its next
    /// attempt, at most [`START_RETRIES`] times, and its reason says so; otherwise (a missing
    /// program, an unwritable output file), or past the retries, it fails with `error`.
    /// Returns whether the job runs again.
    pub fn start_failed(
        &mut self,
        now: Time,
        k: ClusterId,
        id: JobId,
        attempt: u32,
        error: &str,
        transient: bool,
    ) -> bool {
        // A job cancelled (or requeued, or preempted) while it was starting ends as asked.
        let as_started = self
            .jobs
            .get(&id)
            .is_some_and(|j| j.attempt == attempt && j.state_after.is_none() && !j.requeue_pending);
        let failures = self.in_flight.start_failures.get(&id).copied().unwrap_or(0);
        let retry = transient && as_started && failures < START_RETRIES;
        let outcome = Outcome::failed(
            now.secs(),
            now.secs(),
            if transient && as_started && !retry {
                format!("could not start, {START_RETRIES} times: {error}")
            } else {
                format!("could not start: {error}")
            },
        );
        if retry {
            self.in_flight.start_failures.insert(id, failures + 1);
            let why = format!(
                "requeued: its start on {} failed ({error}); retry {} of {START_RETRIES}",
                self.clusters[k].cfg.name,
                failures + 1
            );
            self.mark_requeue(id);
            self.in_flight.requeue_why.insert(id, why);
        }
        self.on_finished(now, k, id, attempt, &outcome);
        retry
    }

    /// Job `id`'s running attempt is to run again as its next attempt once it has ended;
    /// kept in its record too, for a restart before then.
    pub(crate) fn mark_requeue(&mut self, id: JobId) {
        self.in_flight.requeue.insert(id);
        if let Some(j) = self.jobs.get_mut(&id) {
            j.requeue_pending = true;
        }
    }

    /// Forgets that job `id` is to run again; whether it was to.
    pub(crate) fn unmark_requeue(&mut self, id: JobId) -> bool {
        if let Some(j) = self.jobs.get_mut_if(&id, |j| j.requeue_pending) {
            j.requeue_pending = false;
        }
        self.in_flight.requeue_why.remove(&id);
        self.in_flight.requeue.remove(&id)
    }

    pub(crate) fn is_job_reservation(&self, r: Option<u64>) -> bool {
        r.and_then(|r| self.reservations.get(&ReservationId(r)))
            .is_some_and(|r| r.kind == "job")
    }

    /// The last part of a job's attempt ended at `now` (when it really ended).
    pub(crate) fn job_ended(&mut self, now: Time, id: JobId, last: &Outcome) {
        let retry = if self.in_flight.requeue.contains(&id) {
            self.in_flight.requeue_why.remove(&id)
        } else {
            self.retry_task(id)
        };
        let requeue = self.unmark_requeue(id) || retry.is_some();
        if !requeue {
            self.in_flight.start_failures.remove(&id);
        }
        // A global job: the broker has charged what was used of what was reserved. A local
        // job (or one in an administrative reservation) pays here for what it held.
        if let Some(amount) = self.local_charge(now, id) {
            self.charge(id, amount);
        }
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        j.settled = j.charged;
        if requeue {
            j.attempt += 1;
            j.state = JobState::Pending;
            j.started_at = None;
            // The next attempt's run time starts from nothing.
            j.suspended_since = None;
            j.suspended_secs = 0;
            j.exit_code = None;
            j.signal = None;
            j.state_after = None;
            j.reason = Some(retry.unwrap_or_else(|| format!("requeued (attempt {})", j.attempt)));
            j.parts.clear();
            let global = j.cluster.is_none() && j.reservation.is_none();
            if global {
                self.enqueue_global(now, id);
            } else {
                self.submit_local(now, id);
            }
            return;
        }
        j.ended_at = Some(now.secs());
        j.state = j
            .state_after
            .take()
            .unwrap_or(if last.exit_code == Some(0) {
                JobState::Completed
            } else {
                JobState::Failed
            });
        if j.state == JobState::Failed && j.reason.is_none() {
            j.reason = Some(match (j.exit_code, j.signal) {
                (Some(c), _) => format!("exited with code {c}"),
                (None, Some(s)) => format!("killed by signal {s}"),
                _ => "failed".into(),
            });
        }
        self.record_run(id);
        if self.jobs[&id].state == JobState::Completed {
            self.copy_outputs(now, id);
        }
        // A workflow task's reserved slot: the rest of it goes back at the task's end, so
        // that a task ending early leaves no processors idle under its reservation.
        let slot = self.task_of.get(&id.0).and_then(|&(w, i)| {
            self.workflows
                .get(&w)
                .and_then(|wf| wf.tasks.get(i))
                .and_then(|t| t.reservation)
        });
        if let Some(r) = slot.map(ReservationId) {
            if self.reservations.get(&r).is_some_and(|x| x.state.is_live()) {
                self.end_reservation(now, r, ReservationState::Finished);
            }
        }
        self.wake_waiting(now);
    }
}
