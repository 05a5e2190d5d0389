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

use crate::error::{CoreError, Result};
use crate::ids::{JobId, ReservationId};
use crate::job::Job;
use crate::licence::{Hold, LicenceBook};
use crate::policy::{
    BackfillChoice, BackfillMetric, BackfillOrder, Compression, PassOnSubmit, Policy, QueueOrder,
};
use crate::priority::FairshareUsage;
use crate::profile::{FirstFree, Horizons, Profile};
use crate::queue::{Queue, Slot, BLOCK};
use crate::reservation::AdminReservation;
use crate::time::{Dur, Interval, Time};
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
    /// Free licences over time, per pool; empty (and every licence check skipped) when the
    /// cluster draws on no pool.
    licences: LicenceBook,
}

impl LocalScheduler {
    /// A cluster of `capacity` processors run by `policy`.
    pub fn new(capacity: u32, policy: Policy) -> LocalScheduler {
        LocalScheduler {
            capacity,
            policy,
            pool: Profile::new(capacity),
            admin: BTreeMap::new(),
            jobs: FxHashMap::default(),
            queue: Queue::default(),
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
        let slot = Slot {
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

    /// Holds processors for an administrative reservation. Refused when the pool cannot
    /// give them during the whole window (running jobs and job reservations included).
    pub fn add_reservation(&mut self, res: AdminReservation) -> Result<()> {
        if self.admin.contains_key(&res.id) {
            return Err(CoreError::DuplicateReservation(res.id));
        }
        let Interval { start, end } = res.window;
        let free = self.pool.min_free(start, end);
        if free < i64::from(res.procs) {
            return Err(CoreError::ReservationConflict {
                reservation: res.id,
                procs: res.procs,
                start,
                free,
            });
        }
        self.pool.take(start, end, res.procs);
        let profile = Profile::window(res.procs, start, end);
        self.admin.insert(
            res.id,
            AdminSlot {
                res,
                profile,
                licences: BTreeMap::new(),
            },
        );
        Ok(())
    }

    /// Holds processors for a reservation that outranks the local queue (a global job that
    /// pays at least the price of the local time it takes): it conflicts only with running
    /// jobs and other administrative reservations. Only when it does not fit beside the
    /// waiting jobs' reservations do those it overlaps lose them (they are placed again,
    /// later, at the next pass): a reservation in time nobody planned displaces no one.
    pub fn add_reservation_displacing(&mut self, res: AdminReservation) -> Result<()> {
        if self.admin.contains_key(&res.id) {
            return Err(CoreError::DuplicateReservation(res.id));
        }
        let Interval { start, end } = res.window;
        if self.pool.min_free(start, end) >= i64::from(res.procs) {
            self.pool.take(start, end, res.procs);
            let profile = Profile::window(res.procs, start, end);
            self.admin.insert(
                res.id,
                AdminSlot {
                    res,
                    profile,
                    licences: BTreeMap::new(),
                },
            );
            return Ok(());
        }
        let mut without_queue = self.pool.clone();
        let held: Vec<(JobId, u32, Placement)> = self
            .job_reservations()
            .filter(|(_, _, p)| p.domain == Domain::Pool)
            .collect();
        for (_, procs, p) in &held {
            without_queue.give(p.start, p.end, *procs);
        }
        let free = without_queue.min_free(start, end);
        if free < i64::from(res.procs) {
            return Err(CoreError::ReservationConflict {
                reservation: res.id,
                procs: res.procs,
                start,
                free,
            });
        }
        // Only the overlapping ones need to go: the others do not touch [start, end).
        for (id, _, p) in held {
            if p.start < end && start < p.end {
                self.drop_job_reservation(id);
            }
        }
        self.pool.take(start, end, res.procs);
        let profile = Profile::window(res.procs, start, end);
        self.admin.insert(
            res.id,
            AdminSlot {
                res,
                profile,
                licences: BTreeMap::new(),
            },
        );
        self.released = true;
        Ok(())
    }

    /// Makes an administrative reservation hold licences over its whole window, so that no
    /// local job takes them from under it: a global job's reservation holds the licences
    /// its part (bound to the reservation, asking none itself) runs with. Refused, holding
    /// nothing, when the pools cannot give them for the whole window; given back when the
    /// reservation is released.
    pub fn hold_licences_in_reservation(
        &mut self,
        id: ReservationId,
        demand: &BTreeMap<String, u32>,
    ) -> Result<()> {
        let slot = self
            .admin
            .get(&id)
            .ok_or(CoreError::UnknownReservation(id))?;
        let Interval { start, end } = slot.res.window;
        if let Some(reason) = self.licences.refusal(demand) {
            return Err(CoreError::LicencesUnavailable {
                reservation: id,
                reason,
            });
        }
        for (name, &n) in demand {
            let free = self.licences.min_free(name, start, end).unwrap_or(0);
            if free < i64::from(n) {
                return Err(CoreError::LicencesUnavailable {
                    reservation: id,
                    reason: format!("{n} licences {name:?} asked from {start}, {free} free then"),
                });
            }
        }
        self.licences.take(demand, start, end);
        let slot = self.admin.get_mut(&id).expect("invariant: looked up above");
        for (name, &n) in demand {
            *slot.licences.entry(name.clone()).or_insert(0) += n;
        }
        Ok(())
    }

    /// The licences reservation `id` holds (`None`: no such reservation).
    pub fn reservation_licences(&self, id: ReservationId) -> Option<&BTreeMap<String, u32>> {
        self.admin.get(&id).map(|slot| &slot.licences)
    }

    /// The licence pools this cluster draws on, as it holds them now.
    pub fn licence_book(&self) -> &LicenceBook {
        &self.licences
    }

    /// Takes a waiting job's reservation away; the next pass places it again.
    fn drop_job_reservation(&mut self, id: JobId) {
        let Some(p) = self.reservation_of(id) else {
            return;
        };
        let procs = self.jobs[&id].job.procs;
        self.profile_mut(p.domain).give(p.start, p.end, procs);
        self.hold_licences(id, p.start, p.end, false);
        self.unmark_reserved(id);
        if let Some(i) = self.queue.position(id) {
            self.queue.set_reserved(i, false);
        }
        self.count_unreserved(procs, 1);
        if let Some(Entry {
            state: State::Waiting { reservation, .. },
            ..
        }) = self.jobs.get_mut(&id)
        {
            *reservation = None;
        }
    }

    /// Releases an administrative reservation. Jobs running inside it keep running (their
    /// processors move to the pool); jobs bound to it fall back to the pool.
    pub fn remove_reservation(&mut self, now: Time, id: ReservationId) -> Result<()> {
        let slot = self
            .admin
            .remove(&id)
            .ok_or(CoreError::UnknownReservation(id))?;
        let Interval { start, end } = slot.res.window;
        self.pool.give(start.max(now), end, slot.res.procs);
        self.licences.give(&slot.licences, start.max(now), end);
        let inside: Vec<(JobId, Placement, u32, bool)> = self
            .jobs
            .values()
            .filter_map(|e| match e.state {
                State::Running(p) if p.domain == Domain::Reservation(id) => {
                    Some((e.job.id, p, e.job.procs, true))
                }
                State::Waiting {
                    reservation: Some(p),
                    ..
                } if p.domain == Domain::Reservation(id) => Some((e.job.id, p, e.job.procs, false)),
                _ => None,
            })
            .collect();
        for (jid, p, procs, running) in inside {
            let entry = self
                .jobs
                .get_mut(&jid)
                .expect("invariant: collected from jobs");
            if running {
                self.pool.take(now, p.end, procs);
                entry.state = State::Running(Placement {
                    domain: Domain::Pool,
                    ..p
                });
            } else {
                entry.state = State::Waiting {
                    reservation: None,
                    overtaken: 0,
                };
                self.unmark_reserved(jid);
                if let Some(i) = self.queue.position(jid) {
                    self.queue.set_reserved(i, false);
                }
                self.count_unreserved(procs, 1);
            }
        }
        for e in self.jobs.values_mut() {
            if e.job.reservation == Some(id) {
                e.job.reservation = None;
            }
        }
        self.released = true;
        Ok(())
    }

    /// The next start or end of an administrative reservation, begin time of a deferred
    /// job, or return of licences another cluster held from a shared pool, after `now`: a
    /// moment at which jobs may become able to start with no other
    /// event, so the caller must tick then.
    pub fn next_boundary(&self, now: Time) -> Option<Time> {
        let begin = self.deferred.iter().map(|&(b, _)| b).find(|&b| b > now);
        let comeback = if self.queue.is_empty() {
            None
        } else {
            self.licences.next_comeback(now)
        };
        self.admin
            .values()
            .flat_map(|s| [s.res.window.start, s.res.window.end])
            .filter(|t| *t > now)
            .chain(begin)
            .chain(comeback)
            .min()
    }

    /// The administrative reservations, by id.
    pub fn reservations(&self) -> impl Iterator<Item = &AdminReservation> {
        self.admin.values().map(|s| &s.res)
    }

    /// Processors no running job uses at `now`, whatever reservations hold them: what sits
    /// idle, for the grid broker's idle-time figure.
    pub fn idle_at(&self, now: Time) -> i64 {
        self.free_ignoring_reservations(now)
    }

    /// Processors not used by running jobs at `now`, ignoring every reservation: what pyss's
    /// snapshot shows.
    fn free_ignoring_reservations(&self, now: Time) -> i64 {
        let mut free = self.pool.free_at(now);
        for s in self.admin.values() {
            if s.res.window.contains(now) {
                free += s.profile.free_at(now);
            }
        }
        for id in &self.reserved {
            if let Some(p) = self.reservation_of(*id) {
                if p.domain == Domain::Pool && p.start <= now && now < p.end {
                    free += i64::from(self.jobs[id].job.procs);
                }
            }
        }
        free
    }

    fn profile_mut(&mut self, domain: Domain) -> &mut Profile {
        match domain {
            Domain::Pool => &mut self.pool,
            Domain::Reservation(r) => {
                &mut self
                    .admin
                    .get_mut(&r)
                    .expect("invariant: placements name existing reservations")
                    .profile
            }
        }
    }

    fn profile(&self, domain: Domain) -> &Profile {
        match domain {
            Domain::Pool => &self.pool,
            Domain::Reservation(r) => &self.admin[&r].profile,
        }
    }

    /// The domains a job may use at `now`, in order of preference.
    fn domains<'a>(&'a self, job: &'a Job, now: Time) -> impl Iterator<Item = Domain> + 'a {
        // A bound job: its reservation while it lasts (then the pool if it may start
        // early), or the pool once the reservation is over or gone. Any other job: every
        // live reservation admitting it, then the pool. No allocation: this runs for every
        // waiting job at every pass.
        let (bound, pool, scan) = match job.reservation {
            Some(r) => match self.admin.get(&r) {
                Some(s) if s.res.window.end > now => {
                    (Some(Domain::Reservation(r)), job.may_start_early, false)
                }
                _ => (None, true, false),
            },
            None => (None, true, true),
        };
        let admitting = self
            .admin
            .values()
            .filter(move |s| scan && s.res.window.end > now && s.res.acl.admits(job))
            .map(|s| Domain::Reservation(s.res.id));
        bound
            .into_iter()
            .chain(admitting)
            .chain(pool.then_some(Domain::Pool))
    }

    /// The domain in which the job can start now, if any.
    fn fits_now(&self, id: JobId, now: Time) -> Option<Domain> {
        let job = &self.jobs[&id].job;
        if !job.licences.is_empty() && !self.licences.fits(&job.licences, now, job.plan()) {
            return None;
        }
        if self.admin.is_empty() {
            return self
                .pool
                .fits(now, job.procs, job.plan())
                .then_some(Domain::Pool);
        }
        self.domains(job, now)
            .find(|d| self.profile(*d).fits(now, job.procs, job.plan()))
    }

    /// The earliest placement over the job's domains, no earlier than its begin.
    fn earliest(&self, id: JobId, now: Time) -> Option<Placement> {
        let job = &self.jobs[&id].job;
        let now = job.begin.map_or(now, |b| b.max(now));
        let plan = job.plan();
        let place = |domain: Domain| {
            let profile = self.profile(domain);
            let mut start = profile.earliest(now, job.procs, plan)?;
            if !job.licences.is_empty() {
                // Processors and licences both free for the whole run: each answer is a
                // lower bound of the other's, so alternate until they agree.
                loop {
                    let l = self.licences.earliest(&job.licences, start, plan)?;
                    if l == start {
                        break;
                    }
                    start = profile.earliest(l, job.procs, plan)?;
                }
            }
            Some(Placement {
                domain,
                start,
                end: start + plan,
            })
        };
        if self.admin.is_empty() {
            return place(Domain::Pool);
        }
        self.domains(job, now)
            .filter_map(place)
            .min_by_key(|p| p.start)
    }

    /// Holds (`take`) or lets go of the job's licences over `[start, end)`; nothing when the
    /// cluster has no pool, so jobs without licences pay one branch.
    fn hold_licences(&mut self, id: JobId, start: Time, end: Time, take: bool) {
        if self.licences.is_empty() {
            return;
        }
        let Some(e) = self.jobs.get(&id) else { return };
        if take {
            self.licences.take(&e.job.licences, start, end);
        } else {
            self.licences.give(&e.job.licences, start, end);
        }
    }

    /// The job's licences stay free for its whole plan from `now`.
    fn licences_fit_now(&self, id: JobId, now: Time) -> bool {
        let job = &self.jobs[&id].job;
        job.licences.is_empty() || self.licences.fits(&job.licences, now, job.plan())
    }

    /// Makes the cluster draw on a licence pool of `count` licences (before any job asks for
    /// it): jobs asking for it then start, and are reserved, only where their licences stay
    /// free for their whole run.
    pub fn add_licence_pool(&mut self, name: &str, count: u32) {
        self.licences.add_pool(name, count);
    }

    /// Makes the pool one this cluster shares with others (a floating licence server): every
    /// change this scheduler makes to it is journaled for them
    /// ([`LocalScheduler::drain_licence_journal`]); the broker passes it on.
    pub fn share_licence_pool(&mut self, name: &str) {
        self.licences.share(name);
    }

    /// The changes this scheduler made to shared pools since the last call.
    pub fn drain_licence_journal(&mut self) -> Vec<Hold> {
        self.licences.drain_journal()
    }

    /// Applies a change another cluster's scheduler made to a pool shared with this one.
    pub fn apply_licence_hold(&mut self, hold: &Hold) {
        self.licences.apply(hold);
        if hold.delta > 0 {
            // Licences came back: waiting jobs may start.
            self.released = true;
        }
    }

    /// Licences of the pool free at `t`, for invariant checks and explanations.
    pub fn licences_free_at(&self, name: &str, t: Time) -> Option<i64> {
        self.licences.free_at(name, t)
    }

    /// The licences a known job holds while it runs.
    pub fn licences_of(&self, id: JobId) -> Option<&BTreeMap<String, u32>> {
        self.jobs.get(&id).map(|e| &e.job.licences)
    }

    fn count_unreserved(&mut self, procs: u32, delta: i32) {
        let n = self.unreserved_by_procs.entry(procs).or_insert(0);
        *n = n
            .checked_add_signed(delta)
            .expect("invariant: counts match the queue");
        if *n == 0 {
            self.unreserved_by_procs.remove(&procs);
        }
    }

    /// The fewest processors any unreserved waiting job asks for (`i64::MAX` if none).
    fn smallest_unreserved(&self) -> i64 {
        self.unreserved_by_procs
            .first_key_value()
            .map_or(i64::MAX, |(&p, _)| i64::from(p))
    }

    fn unmark_reserved(&mut self, id: JobId) {
        if let Some(i) = self.reserved.iter().position(|r| *r == id) {
            self.reserved.swap_remove(i);
        }
    }

    /// Runs one scheduling pass at `now`, appending decisions to `out`.
    pub fn schedule(&mut self, now: Time, out: &mut Vec<Action>) {
        self.pool.advance(now);
        if !self.licences.is_empty() {
            self.licences.advance(now);
        }
        for s in self.admin.values_mut() {
            s.profile.advance(now);
        }
        if !self.deferred.is_empty() {
            self.release_deferred(now);
        }
        if self.queue.is_empty() {
            self.released = false;
            return;
        }
        if self.policy.order == QueueOrder::Priority {
            self.refresh_priorities(now);
        } else {
            self.queue.compact();
        }
        let compress = match self.policy.compression {
            Compression::EveryPass => true,
            Compression::AfterRelease => self.released,
        };
        self.released = false;
        if !self.reserved.is_empty() {
            if compress {
                self.compress(now, out);
            }
            self.start_due_reservations(now, out);
        }
        self.walk(now, out);
    }

    fn refresh_priorities(&mut self, now: Time) {
        let weights = &self.policy.priority;
        for slot in self.queue.iter_alive_mut() {
            let job = &self.jobs[&slot.id].job;
            slot.priority = weights.priority(job, now, &self.usage);
        }
        self.queue.sort_by_priority();
    }

    /// Moves every reserved job, in queue order, to its earliest start if that is earlier.
    fn compress(&mut self, now: Time, out: &mut Vec<Action>) {
        let order: Vec<JobId> = if self.reserved.len() == 1 {
            self.reserved.clone()
        } else {
            self.queue
                .iter_alive()
                .filter(|s| s.reserved)
                .map(|s| s.id)
                .collect()
        };
        let plain = self.admin.is_empty();
        // The lookup table pays off only when many jobs are checked (conservative).
        let use_table = plain && order.len() > 8;
        let mut first_free = std::mem::take(&mut self.first_free);
        if use_table {
            self.pool.first_free(now, &mut first_free);
        }
        for id in order {
            let Some(old) = self.reservation_of(id) else {
                continue;
            };
            if old.start <= now {
                continue; // due: it starts in this pass, where it is
            }
            let job = &self.jobs[&id].job;
            let procs = job.procs;
            if plain {
                // Fast path: ask whether an earlier start exists before touching the profile.
                // Before `first_free[procs]` too few processors are free at every instant
                // (the job's own span lies later, so its credit does not help there).
                let from = if use_table {
                    first_free.get(procs)
                } else {
                    now
                };
                if from >= old.start {
                    continue;
                }
                let credit = (old.start, old.end, i64::from(procs));
                if self
                    .pool
                    .earliest_before(from, procs, job.plan(), credit, old.start)
                    .is_none()
                {
                    continue;
                }
            }
            self.profile_mut(old.domain).give(old.start, old.end, procs);
            self.hold_licences(id, old.start, old.end, false);
            let new = match self.earliest(id, now) {
                Some(p) if p.start < old.start => p,
                _ => old,
            };
            self.profile_mut(new.domain).take(new.start, new.end, procs);
            self.hold_licences(id, new.start, new.end, true);
            if new != old {
                self.set_reservation(id, new);
                out.push(Action::Reserve {
                    job: id,
                    start: new.start,
                });
                if use_table {
                    self.pool.first_free(now, &mut first_free);
                }
            }
        }
        self.first_free = first_free;
    }

    fn set_reservation(&mut self, id: JobId, p: Placement) {
        if let Some(Entry {
            state: State::Waiting { reservation, .. },
            ..
        }) = self.jobs.get_mut(&id)
        {
            *reservation = Some(p);
        }
    }

    fn start_due_reservations(&mut self, now: Time, out: &mut Vec<Action>) {
        let mut due = self
            .reserved
            .iter()
            .filter(|id| self.reservation_of(**id).is_some_and(|p| p.start <= now))
            .count();
        for i in self.queue.range() {
            if due == 0 {
                break;
            }
            let slot = *self.queue.get(i);
            if !slot.alive || !slot.reserved {
                continue;
            }
            let p = self
                .reservation_of(slot.id)
                .expect("invariant: reserved slot has a reservation");
            if p.start > now {
                continue;
            }
            due -= 1;
            let mut placement = p;
            if p.start < now {
                // Late (the caller ticked after the reserved start): the rest of the old span
                // may now overlap later promises, so place the job again from now.
                self.profile_mut(p.domain).give(p.start, p.end, slot.procs);
                self.hold_licences(slot.id, p.start, p.end, false);
                let Some(again) = self.earliest(slot.id, now) else {
                    self.profile_mut(p.domain).take(p.start, p.end, slot.procs);
                    self.hold_licences(slot.id, p.start, p.end, true);
                    continue;
                };
                self.profile_mut(again.domain)
                    .take(again.start, again.end, slot.procs);
                self.hold_licences(slot.id, again.start, again.end, true);
                if again.start > now {
                    self.set_reservation(slot.id, again);
                    out.push(Action::Reserve {
                        job: slot.id,
                        start: again.start,
                    });
                    continue;
                }
                placement = again;
            }
            self.unmark_reserved(slot.id);
            self.mark_started(i, placement, out);
        }
    }

    fn mark_started(&mut self, i: usize, placement: Placement, out: &mut Vec<Action>) {
        let slot = *self.queue.get(i);
        self.queue.remove_at(i);
        if !slot.reserved {
            self.count_unreserved(slot.procs, -1);
        }
        if let Some(e) = self.jobs.get_mut(&slot.id) {
            e.state = State::Running(placement);
        }
        out.push(Action::Start {
            job: slot.id,
            procs: slot.procs,
            domain: placement.domain,
        });
    }

    fn start_now(&mut self, i: usize, domain: Domain, now: Time, out: &mut Vec<Action>) {
        let slot = *self.queue.get(i);
        let end = now + slot.estimate;
        self.profile_mut(domain).take(now, end, slot.procs);
        self.hold_licences(slot.id, now, end, true);
        self.mark_started(
            i,
            Placement {
                domain,
                start: now,
                end,
            },
            out,
        );
    }

    fn reserve(&mut self, i: usize, now: Time, out: &mut Vec<Action>) -> bool {
        let slot = *self.queue.get(i);
        let Some(p) = self.earliest(slot.id, now) else {
            return false;
        };
        self.profile_mut(p.domain).take(p.start, p.end, slot.procs);
        self.hold_licences(slot.id, p.start, p.end, true);
        self.queue.set_reserved(i, true);
        self.count_unreserved(slot.procs, -1);
        self.reserved.push(slot.id);
        self.set_reservation(slot.id, p);
        out.push(Action::Reserve {
            job: slot.id,
            start: p.start,
        });
        true
    }

    fn walk(&mut self, now: Time, out: &mut Vec<Action>) {
        let depth = self.policy.reservation_depth;
        let backfill = self.policy.backfill;
        let cap = self.policy.overtake_cap;
        let plain = self.admin.is_empty();
        let mut free_now = self.pool.free_at(now);
        // The most processors free now in any one domain: no waiting job larger than this
        // can start, wherever it may run.
        let free_anywhere = |s: &Self| {
            s.admin
                .values()
                .map(|a| a.profile.free_at(now))
                .fold(s.pool.free_at(now), i64::max)
        };
        let mut free_any = if plain { free_now } else { free_anywhere(self) };
        // Computed on first need and after every change of the pool: most passes never need
        // it because no waiting job is small enough.
        let mut horizon = std::mem::take(&mut self.horizon);
        let mut horizon_valid = false;
        self.skipped.clear();
        let mut collect_from = None;
        let mut shortest_from = None;
        let spf = backfill == BackfillChoice::FirstFit
            && self.policy.backfill_order == BackfillOrder::Spf;
        let mut smallest = self.smallest_unreserved();
        // Once no more reservations can be made, a plain first-fit pass looks only for jobs
        // that fit now, so it skips every block whose minima cannot fit.
        let can_skip = plain && backfill == BackfillChoice::FirstFit && cap.is_none();
        let mut i = self.queue.range().start;
        while i < self.queue.range().end {
            let reservations_full = self.reserved.len() as u64 >= u64::from(depth);
            if smallest > free_any && reservations_full {
                break; // nothing can start and nothing more can be reserved
            }
            if spf && reservations_full {
                shortest_from = Some(i);
                break; // the rest is backfill, tried shortest plan first
            }
            if can_skip && reservations_full && i % BLOCK == 0 {
                let (procs, estimate) = self.queue.block_minima(i);
                let may_fit = i64::from(procs) <= free_now && {
                    if !horizon_valid {
                        self.pool.horizons(now, &mut horizon);
                        horizon_valid = true;
                    }
                    now + Dur(estimate) <= horizon.get(procs)
                };
                if !may_fit {
                    i += BLOCK;
                    continue;
                }
            }
            let pos = i;
            i += 1;
            let i = pos;
            let slot = *self.queue.get(i);
            if !slot.alive || slot.reserved {
                continue;
            }
            let domain = if plain {
                let fits = i64::from(slot.procs) <= free_now
                    && {
                        if !horizon_valid {
                            self.pool.horizons(now, &mut horizon);
                            horizon_valid = true;
                        }
                        now + slot.estimate <= horizon.get(slot.procs)
                    }
                    && (self.licences.is_empty() || self.licences_fit_now(slot.id, now));
                fits.then_some(Domain::Pool)
            } else {
                self.fits_now(slot.id, now)
            };
            if let Some(domain) = domain {
                self.start_now(i, domain, now, out);
                free_now = self.pool.free_at(now);
                free_any = if plain { free_now } else { free_anywhere(self) };
                smallest = self.smallest_unreserved();
                horizon_valid = false;
                if let Some(cap) = cap {
                    if self.count_overtakes(cap) {
                        break;
                    }
                }
                continue;
            }
            if (self.reserved.len() as u64) < u64::from(depth) && self.reserve(i, now, out) {
                free_now = self.pool.free_at(now);
                free_any = if plain { free_now } else { free_anywhere(self) };
                smallest = self.smallest_unreserved();
                horizon_valid = false;
                continue;
            }
            match backfill {
                BackfillChoice::None => break,
                BackfillChoice::FirstFit => {
                    if let Some(cap) = cap {
                        if self.overtaken(slot.id) >= cap {
                            break;
                        }
                        self.skipped.push(slot.id);
                    }
                }
                BackfillChoice::BestFit | BackfillChoice::Greedy => {
                    collect_from = Some(i);
                    break;
                }
            }
        }
        self.horizon = horizon;
        if let Some(from) = collect_from {
            self.backfill_by_metric(from, now, out);
        }
        if let Some(from) = shortest_from {
            self.backfill_shortest(from, now, out);
        }
    }

    /// The most processors free at `now` in any one domain.
    fn free_anywhere(&self, now: Time) -> i64 {
        self.admin
            .values()
            .map(|a| a.profile.free_at(now))
            .fold(self.pool.free_at(now), i64::max)
    }

    /// First-fit backfill over the unreserved jobs from position `from` on, shortest plan
    /// first (ties in queue order): every one that fits without delaying a reservation starts.
    fn backfill_shortest(&mut self, from: usize, now: Time, out: &mut Vec<Action>) {
        let mut cands: Vec<(Dur, u64, usize)> = (from..self.queue.range().end)
            .filter_map(|i| {
                let s = self.queue.get(i);
                (s.alive && !s.reserved).then_some((s.estimate, s.seq, i))
            })
            .collect();
        cands.sort_unstable();
        let mut free_any = self.free_anywhere(now);
        for (_, _, i) in cands {
            if free_any <= 0 {
                break;
            }
            let slot = *self.queue.get(i);
            if i64::from(slot.procs) > free_any {
                continue;
            }
            if let Some(domain) = self.fits_now(slot.id, now) {
                self.start_now(i, domain, now, out);
                free_any = self.free_anywhere(now);
            }
        }
    }

    fn overtaken(&self, id: JobId) -> u32 {
        match self.jobs[&id].state {
            State::Waiting { overtaken, .. } => overtaken,
            State::Running(_) | State::Deferred => 0,
        }
    }

    /// Counts one overtake for every skipped job; true when one of them reached the cap.
    fn count_overtakes(&mut self, cap: u32) -> bool {
        let mut blocked = false;
        for id in &self.skipped {
            if let Some(Entry {
                state: State::Waiting { overtaken, .. },
                ..
            }) = self.jobs.get_mut(id)
            {
                *overtaken += 1;
                blocked |= *overtaken >= cap;
            }
        }
        blocked
    }

    fn metric(&self, slot: &Slot) -> i64 {
        match self.policy.metric {
            BackfillMetric::Procs => i64::from(slot.procs),
            BackfillMetric::Walltime => slot.estimate.as_secs(),
            BackfillMetric::ProcSeconds => i64::from(slot.procs) * slot.estimate.as_secs(),
        }
    }

    /// BESTFIT and GREEDY over the unreserved jobs from position `from` on.
    fn backfill_by_metric(&mut self, from: usize, now: Time, out: &mut Vec<Action>) {
        // Candidates that fit now on their own; fitting only gets harder as jobs start.
        let mut cands: Vec<usize> = (from..self.queue.range().end)
            .filter(|&i| {
                let s = self.queue.get(i);
                s.alive && !s.reserved && self.fits_now(s.id, now).is_some()
            })
            .collect();
        match self.policy.backfill {
            BackfillChoice::BestFit => loop {
                let best = cands
                    .iter()
                    .enumerate()
                    .filter_map(|(k, &i)| {
                        let s = self.queue.get(i);
                        self.fits_now(s.id, now).map(|d| (k, i, d, self.metric(s)))
                    })
                    // Largest metric; ties go to the earlier (higher-priority) job.
                    .min_by_key(|&(k, _, _, m)| (std::cmp::Reverse(m), k));
                let Some((k, i, domain, _)) = best else { break };
                self.start_now(i, domain, now, out);
                cands.remove(k);
            },
            BackfillChoice::Greedy => {
                cands.truncate(self.policy.greedy_candidates);
                let chosen = self.greedy_set(&cands, now);
                for i in chosen {
                    let id = self.queue.get(i).id;
                    let domain = self
                        .fits_now(id, now)
                        .expect("invariant: the greedy set fits together");
                    self.start_now(i, domain, now, out);
                }
            }
            BackfillChoice::None | BackfillChoice::FirstFit => {}
        }
    }

    /// The subset of `cands` (queue positions) with the largest total metric that fits at
    /// once; ties go to the set found first, which prefers higher-priority jobs. Depth-first
    /// with a bound and a node budget.
    fn greedy_set(&mut self, cands: &[usize], now: Time) -> Vec<usize> {
        let metrics: Vec<i64> = cands
            .iter()
            .map(|&i| self.metric(self.queue.get(i)))
            .collect();
        let mut suffix = vec![0i64; cands.len() + 1];
        for k in (0..cands.len()).rev() {
            suffix[k] = suffix[k + 1] + metrics[k];
        }
        let mut search = GreedySearch {
            cands,
            metrics: &metrics,
            suffix: &suffix,
            now,
            best: Vec::new(),
            best_value: 0,
            current: Vec::new(),
            budget: 20_000,
        };
        search.dfs(self, 0, 0);
        search.best
    }

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

    /// Changes how many waiting jobs may hold a reservation (forecasts use [`crate::policy::ALL`]).
    pub fn set_reservation_depth(&mut self, depth: u32) {
        self.policy.reservation_depth = depth;
    }

    /// Gives every job waiting for its begin time a reservation at its earliest start from
    /// its begin, after everything queued, in order of begin: what a forecast expects of
    /// jobs not eligible yet if nothing else arrived. Meant for a forecast's copy.
    pub fn place_deferred(&mut self) {
        for (begin, id) in std::mem::take(&mut self.deferred) {
            let Some(e) = self.jobs.remove(&id) else {
                continue;
            };
            self.enqueue(e.job);
            let Some(i) = self.queue.position(id) else {
                continue;
            };
            let procs = self.jobs[&id].job.procs;
            if let Some(p) = self.earliest(id, begin) {
                self.profile_mut(p.domain).take(p.start, p.end, procs);
                self.hold_licences(id, p.start, p.end, true);
                self.queue.set_reserved(i, true);
                self.count_unreserved(procs, -1);
                self.reserved.push(id);
                self.set_reservation(id, p);
            }
        }
    }

    /// The estimate a job was submitted with.
    pub fn estimate_of(&self, id: JobId) -> Option<Dur> {
        self.jobs.get(&id).map(|e| e.job.estimate)
    }
}

/// Depth-first search state of GREEDY backfill.
struct GreedySearch<'a> {
    cands: &'a [usize],
    metrics: &'a [i64],
    /// `suffix[k]` = total metric of candidates `k..`: the bound.
    suffix: &'a [i64],
    now: Time,
    best: Vec<usize>,
    best_value: i64,
    current: Vec<usize>,
    /// Nodes left to visit; the search returns the best set found when it runs out.
    budget: u32,
}

impl GreedySearch<'_> {
    fn dfs(&mut self, s: &mut LocalScheduler, k: usize, value: i64) {
        if value > self.best_value {
            self.best_value = value;
            self.best = self.current.clone();
        }
        if k == self.cands.len() || self.budget == 0 || value + self.suffix[k] <= self.best_value {
            return;
        }
        self.budget -= 1;
        let i = self.cands[k];
        let slot = *s.queue.get(i);
        if let Some(domain) = s.fits_now(slot.id, self.now) {
            let end = self.now + slot.estimate;
            s.profile_mut(domain).take(self.now, end, slot.procs);
            s.hold_licences(slot.id, self.now, end, true);
            self.current.push(i);
            self.dfs(s, k + 1, value + self.metrics[k]);
            self.current.pop();
            s.profile_mut(domain).give(self.now, end, slot.procs);
            s.hold_licences(slot.id, self.now, end, false);
        }
        self.dfs(s, k + 1, value);
    }
}

#[cfg(test)]
mod tests {
    use crate::reservation::Acl;

    /// A global reservation may take the time a queued local job was promised (the local job
    /// moves later), but never a running job's.
    #[test]
    fn displacing_reservations_push_the_queue_not_the_running() {
        let mut s = LocalScheduler::new(4, Policy::easy());
        let mut out = Vec::new();
        s.handle(
            Time(0),
            Event::Submit(Job::new(JobId(0), Time(0), 3, Dur(100))),
            &mut out,
        )
        .unwrap();
        s.handle(
            Time(0),
            Event::Submit(Job::new(JobId(1), Time(0), 4, Dur(50))),
            &mut out,
        )
        .unwrap();
        assert_eq!(s.reservation_of(JobId(1)).map(|p| p.start), Some(Time(100)));
        let res = |id, procs, from, to| AdminReservation {
            id: ReservationId(id),
            procs,
            window: Interval::new(Time(from), Time(to)),
            acl: Acl::nobody(),
        };
        assert!(matches!(
            s.add_reservation(res(1, 4, 100, 200)),
            Err(CoreError::ReservationConflict { .. })
        ));
        assert!(matches!(
            s.add_reservation_displacing(res(2, 2, 50, 150)),
            Err(CoreError::ReservationConflict { free: 1, .. })
        ));
        s.add_reservation_displacing(res(3, 4, 100, 200)).unwrap();
        assert_eq!(s.reservation_of(JobId(1)), None);
        out.clear();
        s.schedule(Time(10), &mut out);
        assert_eq!(
            out,
            vec![Action::Reserve {
                job: JobId(1),
                start: Time(200)
            }]
        );
        assert!(s.pool().is_consistent());
    }

    use super::*;

    /// A caller that ticks late must not make a reserved job overlap a later reservation:
    /// the late job is placed again from `now`, after the promise that would be broken.
    #[test]
    fn a_late_tick_does_not_break_later_reservations() {
        let mut s = LocalScheduler::new(2, Policy::conservative());
        let mut out = Vec::new();
        for (id, est) in [(0, 100), (1, 50), (2, 50)] {
            s.handle(
                Time(0),
                Event::Submit(Job::new(JobId(id), Time(0), 2, Dur(est))),
                &mut out,
            )
            .unwrap();
        }
        assert_eq!(s.reservation_of(JobId(1)).map(|p| p.start), Some(Time(100)));
        assert_eq!(s.reservation_of(JobId(2)).map(|p| p.start), Some(Time(150)));
        // Job 0 ends on time, but nobody ticks until 120.
        s.finish(Time(100), JobId(0)).unwrap();
        out.clear();
        s.schedule(Time(120), &mut out);
        // Starting job 1 at 120 would run into job 2's [150, 200): it goes after it instead.
        assert_eq!(
            out,
            vec![Action::Reserve {
                job: JobId(1),
                start: Time(200)
            }]
        );
        assert!(s.pool().is_consistent());
    }
}

#[cfg(test)]
mod begin_tests {
    use super::*;
    use crate::forecast::{forecast, OccupancyKind};

    fn starts(out: &[Action]) -> Vec<JobId> {
        out.iter()
            .filter_map(|a| match a {
                Action::Start { job, .. } => Some(*job),
                _ => None,
            })
            .collect()
    }

    /// FCFS without backfilling on 4 processors. Job 1 (4 processors, begin 100) is
    /// submitted first, job 2 (4 processors, 50 s) after it: job 1 is not eligible, so it
    /// blocks no one and job 2 starts at once. The forecast places job 1 at its begin, 100
    /// (job 2 ends at 50); the scheduler names 100 as the moment to tick, and job 1 starts
    /// then, not before.
    #[test]
    fn a_job_waits_for_its_begin_time_without_blocking_the_queue() {
        let mut s = LocalScheduler::new(4, Policy::fcfs());
        let mut out = Vec::new();
        let first = Job::new(JobId(1), Time(0), 4, Dur(30)).with_begin(Some(Time(100)));
        s.handle(Time(0), Event::Submit(first), &mut out).unwrap();
        s.handle(
            Time(0),
            Event::Submit(Job::new(JobId(2), Time(0), 4, Dur(50))),
            &mut out,
        )
        .unwrap();
        assert_eq!(starts(&out), vec![JobId(2)]);
        assert_eq!(s.waiting(), 1);
        assert_eq!(s.running(), 1);
        assert_eq!(s.next_boundary(Time(0)), Some(Time(100)));
        assert_eq!(
            s.explain(JobId(1), Time(0)),
            Some(JobStatus::Deferred {
                begin: Time(100),
                earliest: Some(Time(100)),
            })
        );
        let f = forecast(&s, Time(0), |_| 0.0);
        let planned: Vec<(Time, Time)> = f
            .iter()
            .filter(|o| matches!(o.kind, OccupancyKind::Planned { job, .. } if job == JobId(1)))
            .map(|o| (o.window.start, o.window.end))
            .collect();
        assert_eq!(planned, vec![(Time(100), Time(130))]);
        s.handle(Time(50), Event::Finish(JobId(2)), &mut out)
            .unwrap();
        out.clear();
        s.handle(Time(99), Event::Tick, &mut out).unwrap();
        assert!(starts(&out).is_empty(), "started before its begin: {out:?}");
        s.handle(Time(100), Event::Tick, &mut out).unwrap();
        assert_eq!(starts(&out), vec![JobId(1)]);
        assert_eq!(s.next_boundary(Time(100)), None);
    }

    /// On a busy cluster the forecast places a job waiting for its begin where the profile
    /// has room from its begin: both processors are busy until 200 with job 1, so job 3
    /// (2 processors, begin 150) is forecast at 200. Its id is taken while it waits; once
    /// cancelled it is gone, and its begin is no longer a boundary.
    #[test]
    fn the_forecast_places_a_deferred_job_no_earlier_than_the_profile_allows() {
        let mut s = LocalScheduler::new(2, Policy::easy());
        let mut out = Vec::new();
        s.handle(
            Time(0),
            Event::Submit(Job::new(JobId(1), Time(0), 2, Dur(200))),
            &mut out,
        )
        .unwrap();
        let late = Job::new(JobId(3), Time(0), 2, Dur(10)).with_begin(Some(Time(150)));
        s.handle(Time(0), Event::Submit(late), &mut out).unwrap();
        let f = forecast(&s, Time(0), |_| 0.0);
        let planned = f
            .iter()
            .find(|o| matches!(o.kind, OccupancyKind::Planned { job, .. } if job == JobId(3)))
            .map(|o| o.window);
        assert_eq!(planned, Some(Interval::new(Time(200), Time(210))));
        assert!(matches!(
            s.handle(
                Time(1),
                Event::Submit(Job::new(JobId(3), Time(1), 1, Dur(5))),
                &mut out
            ),
            Err(CoreError::DuplicateJob(_))
        ));
        s.cancel(Time(10), JobId(3)).unwrap();
        assert_eq!(s.waiting(), 0);
        assert_eq!(s.next_boundary(Time(10)), None);
        assert_eq!(s.explain(JobId(3), Time(10)), None);
    }

    /// A job whose begin has passed at submission is queued at once, as without a begin.
    #[test]
    fn a_past_begin_changes_nothing() {
        let mut s = LocalScheduler::new(2, Policy::easy());
        let mut out = Vec::new();
        let job = Job::new(JobId(1), Time(50), 2, Dur(10)).with_begin(Some(Time(40)));
        s.handle(Time(50), Event::Submit(job), &mut out).unwrap();
        assert_eq!(starts(&out), vec![JobId(1)]);
    }
}
