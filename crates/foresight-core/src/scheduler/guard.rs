//! The starvation guard: predictions may make the first reserved job wait longer than plain
//! EASY could, never more.
//!
//! With predictions (EASY++), jobs backfill on the strength of their predicted runs. When
//! they outlive them, the reservation of the job they passed moves later; new short
//! predictions fill the hole again, and a wide job can wait for weeks. EASY's own promise
//! (Lifka 1995; Mu'alem and Feitelson, IEEE TPDS 2001) is what users rely on: the first
//! waiting job starts no later than the "shadow time" computed from the running jobs'
//! estimates, because no backfilled job may, by its estimate, delay it. The guard keeps that
//! promise beside the predictions: a job may pass the first reserved job only if it fits by
//! its plan (as EASY++ asks) *and*, run to its estimate, it ends before that job's shadow
//! time or uses processors the job does not need then. Predictions keep their two roles
//! (the order of the backfill candidates and the tighter plan of the reservation), so most
//! of their gain stays; the first reserved job starts no later than plain EASY's bound at
//! every pass (the bound never moves later, since every running job ends by its estimate).
//!
//! The guard protects the first reserved job once it has waited [`Policy::guard_after`]
//! (a day by default) since it became eligible: before that, predictions may delay it as in
//! EASY++, and the mean keeps their gain; after, it starts no later than the shadow time
//! computed then, so its wait is bounded by that age plus the longest estimate of the jobs
//! running then. An age threshold before a job's start is protected is the device of
//! selective reservations (Srinivasan, Kettimuthu, Subramani and Sadayappan, JSSPP 2002),
//! where a job gets a reservation only once its slowdown passes a threshold; here the
//! threshold is on the wait, which users see, and what it buys is EASY's bound.
//!
//! [`Policy::guard_after`]: crate::policy::Policy::guard_after
//!
//! Only the first reserved job in queue order is guarded (EASY has only one), against
//! first-fit backfill (EASY's and EASY++'s; BESTFIT and GREEDY are not guarded); the guard
//! is off on clusters with administrative reservations or licence pools, and it changes
//! nothing when neither the running jobs nor the candidate are planned shorter than their
//! estimates, so plain policies are untouched.

use super::{LocalScheduler, State};
use crate::ids::JobId;
use crate::time::Time;

/// What the guard knows in one pass: computed on first need, then kept up to date as jobs
/// start.
#[derive(Clone, Copy, Debug, Default)]
pub(super) enum Guard {
    /// Not computed yet in this pass.
    #[default]
    Unknown,
    /// Off: no reserved job, or the policy or the cluster rules it out.
    Off,
    /// The guarded job's shadow time by estimates, the processors it leaves free then, and
    /// whether some running job is planned shorter than its estimate.
    On {
        shadow: Time,
        extra: i64,
        predicted: bool,
    },
}

impl LocalScheduler {
    /// Whether job `id` may start now beside the first reserved job, by the guard.
    pub(super) fn guard_allows(&self, guard: &mut Guard, id: JobId, now: Time) -> bool {
        if matches!(guard, Guard::Unknown) {
            if self.reserved.is_empty() {
                return true; // nothing to guard yet in this pass
            }
            *guard = self.guard_state(now);
        }
        let Guard::On {
            shadow,
            extra,
            predicted,
        } = *guard
        else {
            return true;
        };
        let job = &self.jobs[&id].job;
        if !predicted && job.plan() >= job.estimate {
            return true; // plain EASY: the reservation already says all
        }
        now + job.estimate <= shadow || i64::from(job.procs) <= extra
    }

    /// Job `id` started now: what it takes from the guarded job's shadow time.
    pub(super) fn guard_started(&self, guard: &mut Guard, id: JobId, now: Time) {
        if let Guard::On {
            shadow,
            extra,
            predicted,
        } = guard
        {
            let job = &self.jobs[&id].job;
            if now + job.estimate > *shadow {
                *extra -= i64::from(job.procs);
            }
            *predicted |= job.plan() < job.estimate;
        }
    }

    /// The shadow time of the first reserved job as plain EASY computes it: when enough
    /// processors are free if every running job runs to its estimate (or to its plan, past
    /// an estimate it overruns).
    fn guard_state(&self, now: Time) -> Guard {
        if !self.policy.starvation_guard || !self.admin.is_empty() || !self.licences.is_empty() {
            return Guard::Off;
        }
        let head = if self.reserved.len() == 1 {
            Some(self.reserved[0])
        } else {
            self.queue.iter_alive().find(|s| s.reserved).map(|s| s.id)
        };
        let Some(head) = head else {
            return Guard::Off;
        };
        let job = &self.jobs[&head].job;
        let eligible = job.begin.map_or(job.submit, |b| b.max(job.submit));
        if now - eligible < self.policy.guard_after {
            return Guard::Off;
        }
        let need = i64::from(job.procs);
        let mut free = i64::from(self.capacity);
        let mut predicted = false;
        let mut ends: Vec<(Time, i64)> = Vec::new();
        for e in self.jobs.values() {
            if let State::Running(p) = e.state {
                let procs = i64::from(e.job.procs);
                free -= procs;
                predicted |= p.end - p.start < e.job.estimate;
                ends.push(((p.start + e.job.estimate).max(p.end).max(now), procs));
            }
        }
        ends.sort_unstable();
        let mut shadow = now;
        for (end, procs) in ends {
            if free >= need && end > shadow {
                break;
            }
            free += procs;
            shadow = end;
        }
        if free < need {
            return Guard::Off; // larger than the cluster: never reached
        }
        Guard::On {
            shadow,
            extra: free - need,
            predicted,
        }
    }
}
