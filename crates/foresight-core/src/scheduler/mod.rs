//! The local scheduler of one cluster: the one entry point that both the trace simulator and
//! the service drive. It keeps the waiting queue, the running jobs, the reservations and the
//! availability profile; every call takes `now` and returns its decisions as [`Action`]s for
//! the caller to carry out. Nothing here reads a clock or touches the world.
//!
//! # The pass
//! 1. Forget the past of every profile (`advance(now)`); order the queue.
//! 2. Compress: every job holding a reservation is taken out and put back at its earliest
//!    start, in queue order, if that is earlier (never later).
//! 3. Start every job whose reservation has come.
//! 4. Walk the queue in order: a job that fits now starts; one that does not gets a
//!    reservation at its earliest start while fewer than `reservation_depth` jobs hold one;
//!    otherwise the backfill choice decides (stop, skip, or collect for BESTFIT/GREEDY).
//!
//! A job "fits now" when its processors stay free, on top of everything started and reserved,
//! for its whole estimate, so no backfilled job can delay a reservation.
//!
//! A job with a begin time still ahead ([`Job::begin`], `sbatch --begin`) is not in the
//! queue: it waits beside it, overtaking and blocking no one, and joins the queue at the
//! first pass at or after its begin (in FCFS order from then, as Slurm counts a job's age
//! from when it became eligible). [`LocalScheduler::next_boundary`] names that instant so
//! that callers tick then; the forecast places such a job no earlier than its begin.

mod admin;
#[cfg(test)]
mod begin_tests;
mod bestfit;
mod firstfit;
mod greedy;
mod guard;
mod inspect;
mod lookahead;
mod metric;
mod pass;
mod placement;
#[cfg(test)]
mod spf_tests;
#[cfg(test)]
mod tests;

use crate::error::{CoreError, Result};
use crate::ids::{JobId, ReservationId};
use crate::job::Job;
use crate::licence::LicenceBook;
use crate::policy::{BackfillChoice, BackfillOrder, PassOnSubmit, Policy, QueueOrder};
use crate::priority::FairshareUsage;
use crate::profile::{FirstFree, Horizons, Profile};
use crate::queue::{Queue, QueueSlot};
use crate::reservation::AdminReservation;
use crate::time::{Dur, Time};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Something that happened, for the scheduler to react to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A job entered the queue.
    Submit(Job),
    /// A running job ended (finished, failed, or was killed at its estimate).
    Finish(JobId),
    /// Nothing happened but time passed: a reservation may have come due. Callers tick at
    /// every [`Action::Reserve`] start and at every [`LocalScheduler::next_boundary`], since
    /// waiting jobs are reconsidered only when the scheduler hears of something.
    Tick,
}

/// Where a job's processors come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Domain {
    /// The cluster's general pool.
    Pool,
    /// The processors held by an administrative reservation.
    Reservation(ReservationId),
}

/// A decision for the caller to carry out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    /// Start the job now, on `procs` processors from `domain`.
    Start {
        /// The job.
        job: JobId,
        /// Processors it takes.
        procs: u32,
        /// Where they come from.
        domain: Domain,
    },
    /// The job's reservation now begins at `start` (new, or moved earlier). The caller should
    /// call back with [`Event::Tick`] at `start` so that the job starts on time.
    Reserve {
        /// The job.
        job: JobId,
        /// The reserved start.
        start: Time,
    },
}

/// Where and when a job runs or is reserved to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// Processor domain.
    pub domain: Domain,
    /// Start of the run.
    pub start: Time,
    /// End of the run as planned: by the prediction if the job has one, else by the estimate.
    pub end: Time,
}

/// A job's situation, for "why has my job not started" and for tests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobStatus {
    /// Waiting, holding a reservation that starts at `start`.
    Reserved {
        /// The reserved start.
        start: Time,
        /// The reserved domain.
        domain: Domain,
    },
    /// Not eligible before its begin time: it waits outside the queue.
    Deferred {
        /// The instant it becomes eligible.
        begin: Time,
        /// The earliest start from its begin the profile allows right now.
        earliest: Option<Time>,
    },
    /// Waiting without a reservation.
    Waiting {
        /// Processors asked for.
        procs: u32,
        /// Processors free in the pool now.
        free_now: i64,
        /// The earliest start the profile allows right now (later jobs may still pass it).
        earliest: Option<Time>,
        /// Jobs ahead of it in the queue.
        position: usize,
    },
    /// Running since `start`.
    Running {
        /// Where and when.
        placement: Placement,
    },
}

#[derive(Clone, Debug)]
struct Entry {
    job: Job,
    state: State,
}

#[derive(Clone, Copy, Debug)]
enum State {
    /// Submitted with a begin time still ahead: outside the queue until then.
    Deferred,
    Waiting {
        reservation: Option<Placement>,
        /// How many later jobs started ahead of this one (First-Fit's cap).
        overtaken: u32,
        /// The pool's [`Profile::version`] when the reservation was last found at the
        /// earliest start the pool allows: only what the pool gained since can move it.
        checked: u64,
    },
    Running(Placement),
}

#[derive(Clone, Debug)]
struct AdminSlot {
    res: AdminReservation,
    profile: Profile,
    /// Licences the reservation holds over its window (a global job's, whose part bound to
    /// it holds none of its own).
    licences: BTreeMap<String, u32>,
}

/// The local scheduler of one cluster of identical processors.
#[derive(Clone, Debug)]
pub struct LocalScheduler {
    capacity: u32,
    policy: Policy,
    /// Free processors of the general pool, net of running jobs, job reservations and
    /// administrative reservations.
    pool: Profile,
    admin: BTreeMap<ReservationId, AdminSlot>,
    jobs: FxHashMap<JobId, Entry>,
    queue: Queue,
    /// Jobs holding a reservation (unordered).
    reserved: Vec<JobId>,
    next_seq: u64,
    /// Processors were released since the last pass (compression has work to do).
    released: bool,
    usage: FairshareUsage,
    /// Jobs not eligible before their begin time, by (begin, id): outside the queue.
    deferred: BTreeSet<(Time, JobId)>,
    /// Scratch for the First-Fit cap, kept to avoid an allocation per pass.
    skipped: Vec<JobId>,
    /// Scratch for [`Profile::horizons`].
    horizon: Horizons,
    /// Scratch for [`Profile::first_free`].
    first_free: FirstFree,
    /// How many waiting jobs without a reservation ask for each processor count: when the
    /// smallest does not fit in the free processors, a pass can stop without walking.
    unreserved_by_procs: BTreeMap<u32, u32>,
    /// No job reservation starts before this instant (a lower bound, made exact by every
    /// pass that finds one due): a pass before it has no reservation to start.
    reserved_from: Time,
    /// Free licences over time, per pool; empty (and every licence check skipped) when the
    /// cluster draws on no pool.
    licences: LicenceBook,
}

impl LocalScheduler {
    /// A cluster of `capacity` processors run by `policy`.
    pub fn new(capacity: u32, policy: Policy) -> LocalScheduler {
        let mut queue = Queue::default();
        // Shortest-first backfill takes its candidates from an ordered index, which finds a
        // job's position by its static key.
        if policy.backfill == BackfillChoice::FirstFit
            && policy.backfill_order == BackfillOrder::Spf
            && policy.order != QueueOrder::Priority
            && capacity <= crate::shortest::MAX_INDEXED_PROCS
        {
            queue.index_shortest(capacity);
        }
        LocalScheduler {
            capacity,
            policy,
            pool: Profile::new(capacity),
            admin: BTreeMap::new(),
            jobs: FxHashMap::default(),
            queue,
            reserved: Vec::new(),
            next_seq: 0,
            released: false,
            usage: FairshareUsage::default(),
            deferred: BTreeSet::new(),
            skipped: Vec::new(),
            horizon: Horizons::default(),
            first_free: FirstFree::default(),
            licences: LicenceBook::default(),
            unreserved_by_procs: BTreeMap::new(),
            reserved_from: Time::MIN,
        }
    }

    /// Processors of the cluster.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// The policy in force.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The general pool's availability (running jobs, reservations, held processors).
    pub fn pool(&self) -> &Profile {
        &self.pool
    }

    /// Jobs waiting (in the queue, or for their begin time).
    pub fn waiting(&self) -> usize {
        self.queue.len() + self.deferred.len()
    }

    /// Jobs running.
    pub fn running(&self) -> usize {
        self.jobs.len() - self.queue.len() - self.deferred.len()
    }

    /// The reservation a waiting job holds, if any.
    pub fn reservation_of(&self, id: JobId) -> Option<Placement> {
        match self.jobs.get(&id)?.state {
            State::Waiting { reservation, .. } => reservation,
            State::Running(_) | State::Deferred => None,
        }
    }

    /// Reacts to `event` at `now`, appending the decisions to `out`.
    ///
    /// Errors leave the scheduler unchanged.
    pub fn handle(&mut self, now: Time, event: Event, out: &mut Vec<Action>) -> Result<()> {
        match event {
            Event::Submit(job) => {
                let procs = i64::from(job.procs);
                self.submit(job)?;
                let pass = match self.policy.pass_on_submit {
                    PassOnSubmit::Always => true,
                    PassOnSubmit::IfProcessorsFreeNow => {
                        procs <= self.free_ignoring_reservations(now)
                    }
                };
                if pass {
                    self.schedule(now, out);
                }
            }
            Event::Finish(id) => {
                self.finish(now, id)?;
                self.schedule(now, out);
            }
            Event::Tick => self.schedule(now, out),
        }
        Ok(())
    }

    /// Puts a job in the queue without scheduling; a job with a begin time waits beside the
    /// queue until the first pass at or after it.
    pub fn submit(&mut self, job: Job) -> Result<()> {
        self.validate(&job)?;
        if let Some(begin) = job.begin {
            self.deferred.insert((begin, job.id));
            self.jobs.insert(
                job.id,
                Entry {
                    job,
                    state: State::Deferred,
                },
            );
            return Ok(());
        }
        self.enqueue(job);
        Ok(())
    }

    /// Moves the jobs whose begin time has come into the queue.
    fn release_deferred(&mut self, now: Time) {
        while let Some(&(begin, id)) = self.deferred.first() {
            if begin > now {
                break;
            }
            self.deferred.pop_first();
            if let Some(e) = self.jobs.remove(&id) {
                self.enqueue(e.job);
            }
        }
    }

    /// Puts a validated, eligible job in the queue.
    fn enqueue(&mut self, job: Job) {
        // FCFS counts from when the job became eligible, as Slurm's age does.
        let eligible = job.begin.map_or(job.submit, |b| b.max(job.submit));
        let key = match self.policy.order {
            QueueOrder::Fcfs | QueueOrder::Priority => eligible.secs(),
            QueueOrder::Sjf => job.estimate.as_secs(),
            QueueOrder::Ljf => -job.estimate.as_secs(),
        };
        let slot = QueueSlot {
            id: job.id,
            procs: job.procs,
            estimate: job.plan(),
            seq: self.next_seq,
            key,
            priority: 0.0,
            reserved: false,
            alive: true,
        };
        self.next_seq += 1;
        self.count_unreserved(slot.procs, 1);
        self.queue.insert(slot, self.policy.order);
        self.jobs.insert(
            job.id,
            Entry {
                job,
                state: State::Waiting {
                    reservation: None,
                    overtaken: 0,
                    checked: 0,
                },
            },
        );
    }

    fn validate(&self, job: &Job) -> Result<()> {
        if self.jobs.contains_key(&job.id) {
            return Err(CoreError::DuplicateJob(job.id));
        }
        if job.procs == 0 {
            return Err(CoreError::InvalidJob {
                job: job.id,
                field: "procs",
                reason: "must be at least 1".into(),
            });
        }
        if job.estimate.as_secs() <= 0 {
            return Err(CoreError::InvalidJob {
                job: job.id,
                field: "estimate",
                reason: format!("must be positive, got {}", job.estimate.as_secs()),
            });
        }
        if job.procs > self.capacity {
            return Err(CoreError::TooLarge {
                job: job.id,
                procs: job.procs,
                capacity: self.capacity,
            });
        }
        if !job.licences.is_empty() {
            if let Some(reason) = self.licences.refusal(&job.licences) {
                return Err(CoreError::InvalidJob {
                    job: job.id,
                    field: "licences",
                    reason,
                });
            }
        }
        if let Some(rid) = job.reservation {
            let slot = self
                .admin
                .get(&rid)
                .ok_or(CoreError::UnknownReservation(rid))?;
            if !slot.res.acl.admits(job) {
                return Err(CoreError::NotAdmitted {
                    job: job.id,
                    reservation: rid,
                });
            }
            if !job.may_start_early {
                let window = slot.res.window;
                if job.procs > slot.res.procs {
                    return Err(CoreError::DoesNotFit {
                        job: job.id,
                        reservation: rid,
                        reason: format!("{} processors asked, {} held", job.procs, slot.res.procs),
                    });
                }
                if job.estimate > window.len() {
                    return Err(CoreError::DoesNotFit {
                        job: job.id,
                        reservation: rid,
                        reason: format!(
                            "estimate {} is longer than the window {}",
                            job.estimate,
                            window.len()
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// Puts back a job that was already running when the caller lost its state (a service
    /// restart): it holds `job.procs` processors of `domain` from `start` to the end of its
    /// plan (its prediction, else its estimate), as if it had been started then. Refused when those processors are not free
    /// from `now` on.
    pub fn restore_running(
        &mut self,
        now: Time,
        job: Job,
        start: Time,
        domain: Domain,
    ) -> Result<()> {
        self.validate(&job)?;
        if let Domain::Reservation(r) = domain {
            if !self.admin.contains_key(&r) {
                return Err(CoreError::UnknownReservation(r));
            }
        }
        // Planned like a job started here: to its prediction (if any), not its estimate.
        let end = start + job.plan();
        let from = now.min(end);
        let free = self
            .profile_mut(domain)
            .min_free(from, end.max(from + Dur(1)));
        if end > from && free < i64::from(job.procs) {
            return Err(CoreError::ReservationConflict {
                reservation: ReservationId(0),
                procs: job.procs,
                start: from,
                free,
            });
        }
        if end > from {
            self.profile_mut(domain).take(from, end, job.procs);
            self.licences.take(&job.licences, from, end);
        }
        let placement = Placement { domain, start, end };
        self.jobs.insert(
            job.id,
            Entry {
                job,
                state: State::Running(placement),
            },
        );
        Ok(())
    }

    /// Records that a running job ended at `now` and frees the rest of its estimate.
    pub fn finish(&mut self, now: Time, id: JobId) -> Result<()> {
        let entry = self.jobs.get(&id).ok_or(CoreError::UnknownJob(id))?;
        let State::Running(p) = entry.state else {
            return Err(CoreError::NotRunning(id));
        };
        let (procs, user) = (entry.job.procs, entry.job.cred.user);
        let entry = self.jobs.remove(&id).expect("invariant: looked up above");
        if now < p.end {
            self.profile_mut(p.domain).give(now, p.end, procs);
            self.licences.give(&entry.job.licences, now, p.end);
        }
        let used = f64::from(procs) * (now - p.start).as_secs().max(0) as f64;
        if self.policy.priority.fairshare != 0.0 {
            self.usage
                .record(user, used, now, self.policy.priority.fairshare_half_life);
        }
        self.released = true;
        Ok(())
    }

    /// A running job outlived its plan: it is now planned to run `plan` from its start (see
    /// [`crate::predict::corrected`]; may pass the estimate when the resource manager lets
    /// jobs overrun). Job reservations that no longer fit beside the longer run are taken
    /// away and placed again, later, at the next pass; the caller should tick at `now`. A
    /// plan no longer than the current one changes nothing.
    pub fn correct(&mut self, now: Time, id: JobId, plan: Dur) -> Result<()> {
        let entry = self.jobs.get(&id).ok_or(CoreError::UnknownJob(id))?;
        let State::Running(p) = entry.state else {
            return Err(CoreError::NotRunning(id));
        };
        let procs = entry.job.procs;
        let end = p.start + plan;
        if end <= p.end {
            return Ok(());
        }
        // The plan's old end may lie in the past when the caller corrects late.
        let from = p.end.max(now);
        if end > from {
            let short = self.profile(p.domain).min_free(from, end) < i64::from(procs);
            if short {
                let overlapping: Vec<JobId> = self
                    .job_reservations()
                    .filter(|(_, _, r)| r.domain == p.domain && r.start < end && from < r.end)
                    .map(|(j, _, _)| j)
                    .collect();
                for j in overlapping {
                    self.drop_job_reservation(j);
                }
            }
            self.profile_mut(p.domain).take(from, end, procs);
            self.hold_licences(id, from, end, true);
        }
        if let Some(e) = self.jobs.get_mut(&id) {
            e.state = State::Running(Placement { end, ..p });
        }
        self.released = true;
        Ok(())
    }

    /// Running jobs planned by a prediction that have outlived it at `now` while it is still
    /// shorter than their estimate, with their plan so far (from their start): each is due a
    /// [`LocalScheduler::correct`] by [`crate::predict::corrected`]. In job id order.
    pub fn outlived(&self, now: Time) -> Vec<(JobId, Dur)> {
        let mut due: Vec<(JobId, Dur)> = self
            .jobs
            .iter()
            .filter_map(|(id, e)| match e.state {
                State::Running(p)
                    if e.job.prediction.is_some()
                        && p.end <= now
                        && p.end - p.start < e.job.estimate =>
                {
                    Some((*id, p.end - p.start))
                }
                _ => None,
            })
            .collect();
        due.sort_unstable();
        due
    }

    /// The earliest end after `now` of a running job's plan that is shorter than its
    /// estimate: when [`LocalScheduler::outlived`] may next name a job.
    pub fn next_plan_end(&self, now: Time) -> Option<Time> {
        self.jobs
            .values()
            .filter_map(|e| match e.state {
                State::Running(p)
                    if e.job.prediction.is_some()
                        && p.end > now
                        && p.end - p.start < e.job.estimate =>
                {
                    Some(p.end)
                }
                _ => None,
            })
            .min()
    }

    /// Removes a waiting job from the queue (releasing its reservation) or ends a running one
    /// at `now`.
    pub fn cancel(&mut self, now: Time, id: JobId) -> Result<()> {
        let entry = self.jobs.get(&id).ok_or(CoreError::UnknownJob(id))?;
        match entry.state {
            State::Running(_) => self.finish(now, id),
            State::Deferred => {
                if let Some(b) = entry.job.begin {
                    self.deferred.remove(&(b, id));
                }
                self.jobs.remove(&id);
                Ok(())
            }
            State::Waiting { reservation, .. } => {
                let procs = entry.job.procs;
                if let Some(p) = reservation {
                    self.profile_mut(p.domain).give(p.start, p.end, procs);
                    self.hold_licences(id, p.start, p.end, false);
                    self.unmark_reserved(id);
                    self.released = true;
                } else {
                    self.count_unreserved(procs, -1);
                }
                if let Some(i) = self.queue.position(id) {
                    self.queue.remove_at(i);
                }
                self.jobs.remove(&id);
                Ok(())
            }
        }
    }
}
