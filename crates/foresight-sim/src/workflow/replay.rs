//! One cluster's local stream replayed through its local scheduler, in a state that can be
//! cloned at the moment a workflow arrives and continued with and without the workflow's
//! reservations, so that the local jobs' wait is compared on the same history.

use foresight_core::forecast::forecast;
use foresight_core::{
    Acl, Action, AdminReservation, CoreError, Dur, Event, Interval, Job, JobId, LocalScheduler,
    Profile, ReservationId, Time,
};
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::sync::Arc;

/// A cluster's replay, paused between instants.
#[derive(Clone, Debug)]
pub(crate) struct Replay {
    sched: LocalScheduler,
    /// `(job, runtime)` by submission time; job ids are indices.
    jobs: Arc<Vec<(Job, Dur)>>,
    /// The next job to submit.
    next: usize,
    /// Finishes: `(time, job)`.
    finishes: BinaryHeap<Reverse<(Time, u64)>>,
    /// Instants at which the scheduler must be asked again.
    ticks: BTreeSet<Time>,
    /// Start of every started job.
    starts: Vec<Option<Time>>,
    out: Vec<Action>,
}

impl Replay {
    /// A replay of `jobs` (sorted by submission, ids = indices) on `sched`.
    pub fn new(sched: LocalScheduler, jobs: Arc<Vec<(Job, Dur)>>) -> Replay {
        let n = jobs.len();
        Replay {
            sched,
            jobs,
            next: 0,
            finishes: BinaryHeap::new(),
            ticks: BTreeSet::new(),
            starts: vec![None; n],
            out: Vec::new(),
        }
    }

    /// Processes every event before `until`.
    pub fn run_until(&mut self, until: Time) -> Result<(), CoreError> {
        loop {
            let submit = self.jobs.get(self.next).map(|(j, _)| j.submit);
            let finish = self.finishes.peek().map(|Reverse((t, _))| *t);
            let tick = self.ticks.first().copied();
            let Some(now) = [submit, finish, tick].into_iter().flatten().min() else {
                return Ok(());
            };
            if now >= until {
                return Ok(());
            }
            // At one instant: terminations, then submissions, then a pass.
            while let Some(&Reverse((t, id))) = self.finishes.peek() {
                if t != now {
                    break;
                }
                self.finishes.pop();
                self.sched
                    .handle(now, Event::Finish(JobId(id)), &mut self.out)?;
                self.apply(now);
            }
            while let Some((job, _)) = self.jobs.get(self.next) {
                if job.submit != now {
                    break;
                }
                let job = job.clone();
                self.next += 1;
                self.sched.handle(now, Event::Submit(job), &mut self.out)?;
                self.apply(now);
            }
            if self.ticks.first() == Some(&now) {
                self.ticks.pop_first();
                self.sched.handle(now, Event::Tick, &mut self.out)?;
                self.apply(now);
            }
            if let Some(b) = self.sched.next_boundary(now) {
                self.ticks.insert(b);
            }
        }
    }

    fn apply(&mut self, now: Time) {
        for a in self.out.drain(..) {
            match a {
                Action::Start { job, .. } => {
                    let i = job.0 as usize;
                    self.starts[i] = Some(now);
                    self.finishes.push(Reverse((now + self.jobs[i].1, job.0)));
                }
                Action::Reserve { start, .. } => {
                    self.ticks.insert(start);
                }
            }
        }
    }

    /// The processors free over time from `now` on, by the local scheduler's forecast
    /// (running jobs to their estimate, queued jobs at their conservative starts,
    /// reservations held).
    pub fn free_profile(&self, now: Time) -> Profile {
        let mut p = Profile::new(self.sched.capacity());
        for o in forecast(&self.sched, now, |_| 0.0) {
            p.take(o.window.start.max(now), o.window.end, o.procs);
        }
        p
    }

    /// Holds `procs` processors on `[start, end)` for a workflow task (the task's
    /// reservation: outranks the local queue as a grid reservation does). Returns false when
    /// even displacing queued jobs' reservations cannot make room.
    pub fn hold(&mut self, id: u64, procs: u32, start: Time, end: Time) -> bool {
        let res = AdminReservation {
            id: ReservationId(id),
            procs,
            window: Interval::new(start, end),
            acl: Acl::nobody(),
        };
        let ok = self.sched.add_reservation(res.clone()).is_ok()
            || self.sched.add_reservation_displacing(res).is_ok();
        if ok {
            self.ticks.insert(start);
            self.ticks.insert(end);
        }
        ok
    }

    /// True when every local job submitted in `[from, to)` has started.
    pub fn all_started(&self, from: Time, to: Time) -> bool {
        self.jobs
            .iter()
            .zip(&self.starts)
            .filter(|((j, _), _)| j.submit >= from && j.submit < to)
            .all(|(_, s)| s.is_some())
    }

    /// Waits of the local jobs submitted in `[from, to)` that have started (all of them,
    /// once the replay has run far enough), seconds.
    pub fn waits(&self, from: Time, to: Time) -> Vec<i64> {
        self.jobs
            .iter()
            .zip(&self.starts)
            .filter(|((j, _), _)| j.submit >= from && j.submit < to)
            .filter_map(|((j, _), s)| s.map(|s| (s - j.submit).as_secs()))
            .collect()
    }
}
