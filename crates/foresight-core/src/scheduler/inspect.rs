//! What the scheduler tells about its jobs: why one waits, and every placement, for
//! explanations and invariant checks.

use super::{Entry, JobStatus, LocalScheduler, Placement, State};
use crate::ids::JobId;
use crate::time::{Dur, Time};

impl LocalScheduler {
    /// Why a job is where it is.
    pub fn explain(&self, id: JobId, now: Time) -> Option<JobStatus> {
        let entry = self.jobs.get(&id)?;
        Some(match entry.state {
            State::Running(placement) => JobStatus::Running { placement },
            State::Deferred => JobStatus::Deferred {
                begin: entry.job.begin.unwrap_or(now),
                earliest: self.earliest(id, now).map(|p| p.start),
            },
            State::Waiting {
                reservation: Some(p),
                ..
            } => JobStatus::Reserved {
                start: p.start,
                domain: p.domain,
            },
            State::Waiting {
                reservation: None, ..
            } => JobStatus::Waiting {
                procs: entry.job.procs,
                free_now: self.pool.free_at(now),
                earliest: self.earliest(id, now).map(|p| p.start),
                position: self.queue.iter_alive().take_while(|s| s.id != id).count(),
            },
        })
    }

    /// Every running job's placement and processors, for invariant checks.
    pub fn running_jobs(&self) -> impl Iterator<Item = (JobId, u32, Placement)> + '_ {
        self.jobs.values().filter_map(|e| match e.state {
            State::Running(p) => Some((e.job.id, e.job.procs, p)),
            State::Waiting { .. } | State::Deferred => None,
        })
    }

    /// Running jobs planned by a prediction shorter than their estimate, with their
    /// placement (its end is the prediction's): the grid planner offers what such a job
    /// would leave of its reservation to jobs it plans beyond the lead time.
    pub fn predicted_runs(&self) -> impl Iterator<Item = (JobId, Placement)> + '_ {
        self.jobs.values().filter_map(|e| match e.state {
            State::Running(p) if e.job.prediction.is_some() && p.end - p.start < e.job.estimate => {
                Some((e.job.id, p))
            }
            _ => None,
        })
    }

    /// Every job reservation and its processors, for invariant checks.
    pub fn job_reservations(&self) -> impl Iterator<Item = (JobId, u32, Placement)> + '_ {
        self.jobs.values().filter_map(|e| match e.state {
            State::Waiting {
                reservation: Some(p),
                ..
            } => Some((e.job.id, e.job.procs, p)),
            _ => None,
        })
    }

    /// True when the job is running here.
    pub fn is_running(&self, id: JobId) -> bool {
        matches!(
            self.jobs.get(&id),
            Some(Entry {
                state: State::Running(_),
                ..
            })
        )
    }

    /// The estimate a job was submitted with.
    pub fn estimate_of(&self, id: JobId) -> Option<Dur> {
        self.jobs.get(&id).map(|e| e.job.estimate)
    }

    /// The next plan of running job `id`, still running at the end of `plan`, by the
    /// policy's [`crate::predict::Correction`] from the job's first plan; `None` for a job
    /// not known.
    pub fn corrected_plan(&self, id: JobId, plan: Dur) -> Option<Dur> {
        let job = &self.jobs.get(&id)?.job;
        Some(self.policy.correction.next(job.plan(), plan, job.estimate))
    }
}
