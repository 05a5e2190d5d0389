//! A tiny discrete-event driver for [`LocalScheduler`], shared by the scenario and property
//! tests: it plays the part the trace simulator and the service play in production.
//!
//! Semantics:
//! - every job has a submission time, an estimate and an actual runtime; a started job
//!   finishes `min(runtime, estimate)` seconds later (the resource manager kills it at its
//!   estimate);
//! - at one timestamp, finishes are handled first, then submissions (in input order), then one
//!   tick; every one is a separate [`LocalScheduler::handle`] call;
//! - [`Action::Start`] records the start and schedules the finish; [`Action::Reserve`]
//!   schedules a tick at the reserved start;
//! - the caller also ticks at the start and the end of every administrative reservation it
//!   added: nothing else tells the scheduler that processors were handed to a reservation or
//!   came back from one (a waiting job without a job reservation would otherwise only be
//!   reconsidered at the next unrelated event);
//! - a job with a prediction that is still running at the end of its plan gets the plan
//!   corrected ([`foresight_core::predict::corrected`]) before anything else happens at that
//!   instant; all corrections of an instant are followed by one tick.
#![allow(dead_code)] // each test binary uses a different part of the driver

use foresight_core::predict::corrected;
use foresight_core::{
    Action, AdminReservation, CoreError, Domain, Dur, Event, Job, JobId, LocalScheduler, Policy,
    ReservationId, Time, UserId,
};
use std::collections::{BTreeMap, BTreeSet};

/// A job together with how long it really runs.
#[derive(Clone, Debug)]
pub struct Spec {
    pub job: Job,
    pub runtime: i64,
}

/// A job of user 0 with no reservation binding.
pub fn spec(id: u64, submit: i64, procs: u32, estimate: i64, runtime: i64) -> Spec {
    Spec {
        job: Job::new(JobId(id), Time(submit), procs, Dur(estimate)),
        runtime,
    }
}

impl Spec {
    pub fn user(mut self, user: u32) -> Spec {
        self.job = self.job.with_user(UserId(user));
        self
    }

    pub fn predicted(mut self, prediction: i64) -> Spec {
        self.job = self.job.with_prediction(Some(Dur(prediction)));
        self
    }

    pub fn bound(mut self, reservation: u64, may_start_early: bool) -> Spec {
        self.job = self
            .job
            .in_reservation(ReservationId(reservation), may_start_early);
        self
    }
}

/// Everything one run needs.
#[derive(Clone, Debug)]
pub struct World {
    pub capacity: u32,
    pub policy: Policy,
    /// Added at time 0, before any job, in this order; refused ones are reported.
    pub reservations: Vec<AdminReservation>,
    pub jobs: Vec<Spec>,
}

/// What happened to one job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    pub submit: Time,
    pub procs: u32,
    pub start: Option<Time>,
    pub end: Option<Time>,
    pub domain: Option<Domain>,
    /// Every reservation the job was given: (when, reserved start).
    pub reserves: Vec<(Time, Time)>,
    /// When the job was cancelled (while waiting, or running: then `end` is the same).
    pub cancelled: Option<Time>,
}

/// The schedule of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub records: BTreeMap<JobId, Record>,
    /// Every action, with the time it was returned, in order.
    pub log: Vec<(Time, Action)>,
    /// Refused submissions and finishes.
    pub errors: Vec<(Time, JobId, CoreError)>,
    /// Administrative reservations refused by `add_reservation`.
    pub refused: Vec<(ReservationId, CoreError)>,
    /// Plan corrections: (when, job, new planned duration).
    pub corrections: Vec<(Time, JobId, Dur)>,
}

impl Outcome {
    /// `(job id, start)` for every started job, by id.
    pub fn starts(&self) -> Vec<(u64, i64)> {
        self.records
            .iter()
            .filter_map(|(id, r)| r.start.map(|s| (id.0, s.0)))
            .collect()
    }

    pub fn record(&self, id: u64) -> &Record {
        self.records
            .get(&JobId(id))
            .unwrap_or_else(|| panic!("job {id} has no record"))
    }

    /// Reserve actions in order: (when, job, reserved start).
    pub fn reserves(&self) -> Vec<(i64, u64, i64)> {
        self.log
            .iter()
            .filter_map(|(t, a)| match a {
                Action::Reserve { job, start } => Some((t.0, job.0, start.0)),
                Action::Start { .. } => None,
            })
            .collect()
    }
}

/// Things that happen to a run from outside, besides submissions: each is followed by a
/// [`Event::Tick`] so that the scheduler reacts at once.
#[derive(Clone, Debug, Default)]
pub struct Disruptions {
    /// `LocalScheduler::cancel(now, job)` at `now`; ignored (no error recorded) when the job
    /// has already finished or is not yet submitted.
    pub cancels: Vec<(i64, JobId)>,
    /// `LocalScheduler::remove_reservation(now, id)` at `now`.
    pub removals: Vec<(i64, ReservationId)>,
}

#[derive(Default)]
struct Bucket {
    corrections: Vec<JobId>,
    finishes: Vec<JobId>,
    cancels: Vec<JobId>,
    removals: Vec<ReservationId>,
    submits: Vec<Job>,
    tick: bool,
}

enum Step {
    Correct(JobId),
    Handle(Event),
    Cancel(JobId),
    Remove(ReservationId),
}

/// Runs the world to completion.
pub fn run(world: &World) -> Outcome {
    run_checked(world, |_, _| {})
}

/// Runs the world to completion, calling `check(scheduler, now)` after every event.
pub fn run_checked(world: &World, check: impl FnMut(&LocalScheduler, Time)) -> Outcome {
    run_disrupted(world, &Disruptions::default(), check)
}

/// Runs the world with cancellations and reservation removals; at one instant the order is
/// finishes, cancellations, removals, submissions, tick.
pub fn run_disrupted(
    world: &World,
    disruptions: &Disruptions,
    mut check: impl FnMut(&LocalScheduler, Time),
) -> Outcome {
    let mut sched = LocalScheduler::new(world.capacity, world.policy.clone());
    let mut out = Outcome::default();
    let mut events: BTreeMap<Time, Bucket> = BTreeMap::new();
    for r in &world.reservations {
        match sched.add_reservation(r.clone()) {
            Ok(()) => {
                events.entry(r.window.start).or_default().tick = true;
                events.entry(r.window.end).or_default().tick = true;
            }
            Err(e) => out.refused.push((r.id, e)),
        }
    }
    let mut runtime: BTreeMap<JobId, i64> = BTreeMap::new();
    // The current plan of every job and, once started, its start.
    let mut plan: BTreeMap<JobId, Dur> = BTreeMap::new();
    let mut started: BTreeMap<JobId, Time> = BTreeMap::new();
    for s in &world.jobs {
        events
            .entry(s.job.submit)
            .or_default()
            .submits
            .push(s.job.clone());
        // A duplicate id keeps the first runtime: the second submission is refused anyway.
        runtime.entry(s.job.id).or_insert(s.runtime);
        plan.entry(s.job.id).or_insert(s.job.plan());
    }
    for &(at, id) in &disruptions.cancels {
        events.entry(Time(at)).or_default().cancels.push(id);
    }
    for &(at, id) in &disruptions.removals {
        events.entry(Time(at)).or_default().removals.push(id);
    }
    // Jobs cancelled while running: their pending finish is dropped.
    let mut gone: BTreeSet<JobId> = BTreeSet::new();
    let mut actions = Vec::new();
    let mut steps = 0u64;
    while let Some((now, bucket)) = events.pop_first() {
        let mut batch: Vec<Step> = Vec::new();
        // Every correction of the instant before one tick: a pass between two corrections
        // would see the second job's processors free.
        let before = batch.len();
        batch.extend(
            bucket
                .corrections
                .into_iter()
                .filter(|id| !gone.contains(id))
                .map(Step::Correct),
        );
        if batch.len() > before {
            batch.push(Step::Handle(Event::Tick));
        }
        batch.extend(
            bucket
                .finishes
                .into_iter()
                .filter(|id| !gone.contains(id))
                .map(|id| Step::Handle(Event::Finish(id))),
        );
        batch.extend(bucket.cancels.into_iter().map(Step::Cancel));
        batch.extend(bucket.removals.into_iter().map(Step::Remove));
        batch.extend(
            bucket
                .submits
                .into_iter()
                .map(|j| Step::Handle(Event::Submit(j))),
        );
        if bucket.tick {
            batch.push(Step::Handle(Event::Tick));
        }
        for step in batch {
            steps += 1;
            assert!(steps < 1_000_000, "the run does not terminate");
            let event = match step {
                Step::Handle(event) => event,
                Step::Correct(id) => {
                    let estimate = sched.estimate_of(id).expect("a running job");
                    let new = corrected(plan[&id], estimate);
                    sched
                        .correct(now, id, new)
                        .unwrap_or_else(|e| panic!("correcting job {id} at {now}: {e}"));
                    plan.insert(id, new);
                    out.corrections.push((now, id, new));
                    let run = runtime[&id].min(estimate.as_secs());
                    let start = started[&id];
                    if start + Dur(run) > start + new {
                        events.entry(start + new).or_default().corrections.push(id);
                    }
                    check(&sched, now);
                    continue;
                }
                Step::Cancel(id) => {
                    let running = sched.running_jobs().any(|(j, _, _)| j == id);
                    if sched.cancel(now, id).is_ok() {
                        let r = out.records.entry(id).or_default();
                        r.cancelled = Some(now);
                        if running {
                            r.end = Some(now);
                            gone.insert(id);
                        }
                    }
                    check(&sched, now);
                    Event::Tick
                }
                Step::Remove(id) => {
                    if let Err(e) = sched.remove_reservation(now, id) {
                        out.refused.push((id, e));
                    }
                    check(&sched, now);
                    Event::Tick
                }
            };
            let id = match &event {
                Event::Submit(job) => Some((job.id, job.submit, job.procs)),
                _ => None,
            };
            let finished = match &event {
                Event::Finish(id) => Some(*id),
                _ => None,
            };
            actions.clear();
            match sched.handle(now, event, &mut actions) {
                Ok(()) => {
                    if let Some((jid, submit, procs)) = id {
                        let r = out.records.entry(jid).or_default();
                        r.submit = submit;
                        r.procs = procs;
                    }
                    if let Some(jid) = finished {
                        if let Some(r) = out.records.get_mut(&jid) {
                            r.end = Some(now);
                        }
                    }
                }
                Err(e) => {
                    let jid = id.map(|x| x.0).or(finished).unwrap_or_default();
                    out.errors.push((now, jid, e));
                }
            }
            for a in &actions {
                out.log.push((now, *a));
                match *a {
                    Action::Start { job, domain, .. } => {
                        let r = out.records.entry(job).or_default();
                        assert!(r.start.is_none(), "job {job} started twice");
                        r.start = Some(now);
                        r.domain = Some(domain);
                        let run = runtime[&job].min(
                            sched
                                .estimate_of(job)
                                .unwrap_or_else(|| panic!("started job {job} is unknown"))
                                .as_secs(),
                        );
                        let at = now + Dur(run);
                        events.entry(at).or_default().finishes.push(job);
                        started.insert(job, now);
                        if run > plan[&job].as_secs() {
                            events
                                .entry(now + plan[&job])
                                .or_default()
                                .corrections
                                .push(job);
                        }
                    }
                    Action::Reserve { job, start } => {
                        assert!(
                            start >= now,
                            "job {job} reserved in the past ({start} < {now})"
                        );
                        out.records
                            .entry(job)
                            .or_default()
                            .reserves
                            .push((now, start));
                        events.entry(start).or_default().tick = true;
                    }
                }
            }
            check(&sched, now);
        }
    }
    out
}
