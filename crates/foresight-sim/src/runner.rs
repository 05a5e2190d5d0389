//! The discrete-event loop. Virtual time jumps from event to event; the scheduler is the
//! same [`LocalScheduler`] the service runs, fed the same events and obeyed through the same
//! actions.

use crate::metrics::Metrics;
use crate::prediction::{run_key, Prediction};
use crate::workload::{Semantics, SimJob, Workload};
use foresight_core::predict::{corrected, RuntimeStats};
use foresight_core::{Action, CoreError, Dur, Event, JobId, LocalScheduler, Policy, Time};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use thiserror::Error;

/// What a simulation could not do.
#[derive(Debug, Error)]
pub enum SimError {
    /// The scheduler refused a job of the workload.
    #[error("trace job {trace_id}: {source}")]
    Rejected {
        /// The job's id in the trace.
        trace_id: i64,
        /// Why.
        source: CoreError,
    },
    /// The run stopped with jobs that never started: a scheduler defect.
    #[error("{0} jobs never started")]
    Stuck(usize),
    /// A streamed job was submitted before the one streamed ahead of it.
    #[error("trace job {trace_id} is submitted before the job listed ahead of it")]
    Unsorted {
        /// The job's id in the trace.
        trace_id: i64,
    },
}

/// One simulated job's life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Outcome {
    /// Workload id.
    pub id: JobId,
    /// Trace id (SWF field 1).
    pub trace_id: i64,
    /// Index of the source record.
    #[serde(skip)]
    pub record: usize,
    /// Submission.
    pub submit: Time,
    /// Start.
    pub start: Time,
    /// End.
    pub end: Time,
    /// Processors.
    pub procs: u32,
    /// The estimate the scheduler planned with, seconds.
    pub estimate: i64,
    /// The job's class (SWF queue), for per-class figures.
    #[serde(skip)]
    pub class: u32,
    /// The runtime planned at submission (the prediction, or the estimate), seconds.
    #[serde(skip)]
    pub plan: i64,
    /// How often the plan was corrected because the job outlived it.
    #[serde(skip)]
    pub corrections: u32,
}

impl Outcome {
    /// Seconds waited.
    pub fn wait(&self) -> i64 {
        (self.start - self.submit).as_secs()
    }

    /// Seconds run.
    pub fn runtime(&self) -> i64 {
        (self.end - self.start).as_secs()
    }
}

/// A finished simulation.
#[derive(Clone, Debug, Serialize)]
pub struct SimOutput {
    /// Every job, in workload order.
    pub outcomes: Vec<Outcome>,
    /// The aggregate figures.
    pub metrics: Metrics,
}

// Event ranks at one instant, as pyss orders them: submissions, terminations, starts. A
// correction comes before all of them: the job's processors are not free at its plan's end.
const CORRECTION: u8 = 0;
const TERMINATION: u8 = 1;
const WAKE: u8 = 2;

/// A queued event: (time, rank, tie-breakers…, job).
type Queued = Reverse<(Time, u8, i64, u64, JobId)>;

/// Runs `workload` on `procs` processors under `policy`. `progress` is called now and then
/// with the number of jobs submitted so far.
pub fn simulate(
    workload: &Workload,
    procs: u32,
    policy: &Policy,
    semantics: Semantics,
    progress: &mut dyn FnMut(usize),
) -> Result<SimOutput, SimError> {
    simulate_with(
        workload,
        procs,
        policy,
        semantics,
        &Prediction::default(),
        progress,
    )
}

/// [`simulate`] with runtime predictions.
pub fn simulate_with(
    workload: &Workload,
    procs: u32,
    policy: &Policy,
    semantics: Semantics,
    prediction: &Prediction,
    progress: &mut dyn FnMut(usize),
) -> Result<SimOutput, SimError> {
    simulate_licensed(
        workload,
        procs,
        policy,
        semantics,
        prediction,
        &[],
        progress,
    )
}

/// Runs jobs as they arrive from `jobs`, which must come in order of submission with ids
/// 0, 1, 2, … (a [`crate::workload::Converter`] over a sorted trace gives exactly that), so
/// that a trace can be simulated while it is still being read. A job submitted before its
/// predecessor stops the run with [`SimError::Unsorted`]. The metrics count no skipped
/// records: the caller knows them.
pub fn simulate_stream(
    jobs: impl Iterator<Item = SimJob>,
    procs: u32,
    policy: &Policy,
    semantics: Semantics,
    progress: &mut dyn FnMut(usize),
) -> Result<SimOutput, SimError> {
    simulate_stream_with(
        jobs,
        procs,
        policy,
        semantics,
        &Prediction::default(),
        progress,
    )
}

/// [`simulate_stream`] with runtime predictions: each job is planned with its predictor's
/// guess from the runs finished before its submission; a job still running at the end of its
/// plan gets the plan [`corrected`] and the scheduler plans again at once. Without a
/// predictor and with runtimes cut at the estimate no correction ever happens and the
/// schedule is exactly [`simulate_stream`]'s.
pub fn simulate_stream_with(
    jobs: impl Iterator<Item = SimJob>,
    procs: u32,
    policy: &Policy,
    semantics: Semantics,
    prediction: &Prediction,
    progress: &mut dyn FnMut(usize),
) -> Result<SimOutput, SimError> {
    run_stream(jobs, procs, policy, semantics, prediction, &[], progress)
}

/// [`simulate_with`] on a cluster drawing on licence pools `(name, count)`: jobs asking
/// for licences ([`foresight_core::Job::licences`], e.g. drawn by
/// [`crate::workload::Workload::with_licence_demands`]) start only when they are free.
pub fn simulate_licensed(
    workload: &Workload,
    procs: u32,
    policy: &Policy,
    semantics: Semantics,
    prediction: &Prediction,
    pools: &[(String, u32)],
    progress: &mut dyn FnMut(usize),
) -> Result<SimOutput, SimError> {
    let mut out = run_stream(
        workload.jobs.iter().cloned(),
        procs,
        policy,
        semantics,
        prediction,
        pools,
        progress,
    )?;
    out.metrics.skipped = workload.skipped.total();
    out.metrics.cut_at_estimate = workload.cut_at_estimate;
    Ok(out)
}

fn run_stream(
    jobs: impl Iterator<Item = SimJob>,
    procs: u32,
    policy: &Policy,
    semantics: Semantics,
    prediction: &Prediction,
    pools: &[(String, u32)],
    progress: &mut dyn FnMut(usize),
) -> Result<SimOutput, SimError> {
    let policy = match semantics {
        Semantics::Default => policy.clone(),
        Semantics::Pyss => policy.clone().pyss_timing(),
    };
    // pyss creates a job's start event when it gets a reservation under conservative
    // backfilling, and when it starts under the other policies; termination order at one
    // instant follows start-event order.
    let start_event_at_reservation = policy.reservation_depth == foresight_core::policy::ALL;
    let mut sched = LocalScheduler::new(procs, policy);
    for (name, count) in pools {
        sched.add_licence_pool(name, *count);
    }
    let mut jobs = jobs.peekable();
    // Per job, indexed by id: what the simulator alone knows, and what happened.
    let mut known: Vec<SimJob> = Vec::with_capacity(jobs.size_hint().0);
    let mut start: Vec<Time> = Vec::with_capacity(known.capacity());
    let mut end: Vec<Time> = Vec::with_capacity(known.capacity());
    let mut decided: Vec<u64> = Vec::with_capacity(known.capacity());
    // The plan each job was submitted with, the plan it has now, and its corrections.
    let mut first_plan: Vec<Dur> = Vec::with_capacity(known.capacity());
    let mut plan: Vec<Dur> = Vec::with_capacity(known.capacity());
    let mut corrections: Vec<u32> = Vec::with_capacity(known.capacity());
    let mut stats = RuntimeStats::new();
    let mut seq = 0u64;
    let mut heap: BinaryHeap<Queued> = BinaryHeap::with_capacity(1024);
    let mut actions = Vec::with_capacity(64);
    // Default semantics: the instants at which a wake-up is already queued. A pass there
    // reconsiders every job, so one wake-up per instant is enough; conservative backfilling
    // moves reservations earlier again and again, and without this the queue fills with
    // wake-ups for the same instants.
    let dedupe_wakes = semantics == Semantics::Default;
    let mut wakes: HashSet<Time> = HashSet::new();

    // Carries out the scheduler's decisions: a start schedules the job's end, a reservation
    // schedules a wake-up at its start.
    let mut apply = |now: Time,
                     actions: &mut Vec<Action>,
                     heap: &mut BinaryHeap<Queued>,
                     known: &[SimJob],
                     start: &mut [Time],
                     end: &mut [Time],
                     decided: &mut [u64],
                     plan: &[Dur],
                     wakes: &mut HashSet<Time>| {
        for a in actions.drain(..) {
            seq += 1;
            match a {
                Action::Start { job, .. } => {
                    let k = job.0 as usize;
                    start[k] = now;
                    end[k] = now + known[k].runtime;
                    if known[k].runtime > plan[k] {
                        heap.push(Reverse((now + plan[k], CORRECTION, 0, seq, job)));
                    }
                    let order = if start_event_at_reservation && decided[k] != 0 {
                        decided[k]
                    } else {
                        seq
                    };
                    heap.push(Reverse((end[k], TERMINATION, now.secs(), order, job)));
                }
                Action::Reserve { job, start: at } => {
                    decided[job.0 as usize] = seq;
                    if at > now && (!dedupe_wakes || wakes.insert(at)) {
                        heap.push(Reverse((at, WAKE, 0, seq, job)));
                    }
                }
            }
        }
    };

    let rejected = |sim: &SimJob, source| SimError::Rejected {
        trace_id: sim.trace_id,
        source,
    };
    // Takes the next job off the stream into the per-job tables.
    let predictor = prediction.predictor;
    let mut admit = |known: &mut Vec<SimJob>,
                     start: &mut Vec<Time>,
                     end: &mut Vec<Time>,
                     decided: &mut Vec<u64>,
                     plans: (&mut Vec<Dur>, &mut Vec<Dur>, &mut Vec<u32>),
                     stats: &RuntimeStats,
                     mut sim: SimJob|
     -> Result<(), SimError> {
        if let Some(prev) = known.last() {
            if sim.job.submit < prev.job.submit {
                return Err(SimError::Unsorted {
                    trace_id: sim.trace_id,
                });
            }
        }
        debug_assert_eq!(
            sim.job.id.0 as usize,
            known.len(),
            "ids are arrival indices"
        );
        let guess = predictor.predict(stats, &run_key(&sim), sim.job.estimate);
        sim.job = sim.job.with_prediction(guess);
        plans.0.push(sim.job.plan());
        plans.1.push(sim.job.plan());
        plans.2.push(0);
        known.push(sim);
        start.push(Time::MIN);
        end.push(Time::MIN);
        decided.push(0);
        if known.len() % 4096 == 0 {
            progress(known.len());
        }
        Ok(())
    };

    loop {
        let sub_time = jobs.peek().map(|j| j.job.submit);
        let ev_time = heap.peek().map(|Reverse(e)| e.0);
        let now = match (sub_time, ev_time) {
            (None, None) => break,
            (Some(s), Some(e)) => s.min(e),
            (Some(s), None) => s,
            (None, Some(e)) => e,
        };
        match semantics {
            Semantics::Pyss => {
                let correction_due = heap
                    .peek()
                    .is_some_and(|Reverse(e)| e.0 == now && e.1 == CORRECTION);
                if sub_time == Some(now) && !correction_due {
                    let sim = jobs.next().expect("invariant: peeked");
                    admit(
                        &mut known,
                        &mut start,
                        &mut end,
                        &mut decided,
                        (&mut first_plan, &mut plan, &mut corrections),
                        &stats,
                        sim,
                    )?;
                    let k = known.len() - 1;
                    let job = known[k].job.clone();
                    sched
                        .handle(now, Event::Submit(job), &mut actions)
                        .map_err(|e| rejected(&known[k], e))?;
                } else {
                    let Reverse((_, rank, _, _, job)) = heap.pop().expect("invariant: peeked");
                    let k = job.0 as usize;
                    if rank == CORRECTION {
                        correct(
                            &mut sched,
                            now,
                            job,
                            (&known[k], start[k]),
                            (&mut plan[k], &mut corrections[k]),
                            &mut heap,
                        )
                        .map_err(|e| rejected(&known[k], e))?;
                        // One pass after all corrections of the instant: a pass between two
                        // would see the second job's processors free.
                        let more = heap
                            .peek()
                            .is_some_and(|Reverse(e)| e.0 == now && e.1 == CORRECTION);
                        if !more {
                            sched
                                .handle(now, Event::Tick, &mut actions)
                                .map_err(|e| rejected(&known[k], e))?;
                        }
                    } else if rank == TERMINATION {
                        stats.record(&run_key(&known[k]), known[k].runtime);
                        sched
                            .handle(now, Event::Finish(job), &mut actions)
                            .map_err(|e| rejected(&known[k], e))?;
                    } else if sched.reservation_of(job).is_some_and(|p| p.start == now) {
                        sched
                            .handle(now, Event::Tick, &mut actions)
                            .map_err(|e| rejected(&known[k], e))?;
                    }
                }
            }
            Semantics::Default => {
                while let Some(Reverse((t, rank, _, _, job))) = heap.peek().copied() {
                    if t != now {
                        break;
                    }
                    heap.pop();
                    let k = job.0 as usize;
                    if rank == WAKE {
                        wakes.remove(&now);
                    } else if rank == TERMINATION {
                        stats.record(&run_key(&known[k]), known[k].runtime);
                        sched.finish(now, job).map_err(|e| rejected(&known[k], e))?;
                    } else if rank == CORRECTION {
                        correct(
                            &mut sched,
                            now,
                            job,
                            (&known[k], start[k]),
                            (&mut plan[k], &mut corrections[k]),
                            &mut heap,
                        )
                        .map_err(|e| rejected(&known[k], e))?;
                    }
                }
                while jobs.peek().is_some_and(|j| j.job.submit == now) {
                    let sim = jobs.next().expect("invariant: peeked");
                    admit(
                        &mut known,
                        &mut start,
                        &mut end,
                        &mut decided,
                        (&mut first_plan, &mut plan, &mut corrections),
                        &stats,
                        sim,
                    )?;
                    let k = known.len() - 1;
                    let job = known[k].job.clone();
                    sched.submit(job).map_err(|e| rejected(&known[k], e))?;
                }
                sched.schedule(now, &mut actions);
            }
        }
        apply(
            now,
            &mut actions,
            &mut heap,
            &known,
            &mut start,
            &mut end,
            &mut decided,
            &plan,
            &mut wakes,
        );
    }
    progress(known.len());
    let never = start.iter().filter(|s| **s == Time::MIN).count();
    if never > 0 {
        return Err(SimError::Stuck(never));
    }
    let outcomes: Vec<Outcome> = known
        .iter()
        .enumerate()
        .map(|(k, sim)| Outcome {
            id: sim.job.id,
            trace_id: sim.trace_id,
            record: sim.record,
            submit: sim.job.submit,
            start: start[k],
            end: end[k],
            procs: sim.job.procs,
            estimate: sim.job.estimate.as_secs(),
            class: sim.job.cred.class.as_num(),
            plan: first_plan[k].as_secs(),
            corrections: corrections[k],
        })
        .collect();
    let metrics = Metrics::compute(&outcomes, procs);
    Ok(SimOutput { outcomes, metrics })
}

/// A job is still running at the end of its plan: plan it longer (the next step of the
/// correction ladder), tell the scheduler, and come back if that is still too short.
fn correct(
    sched: &mut LocalScheduler,
    now: Time,
    job: JobId,
    (sim, start): (&SimJob, Time),
    (plan, corrections): (&mut Dur, &mut u32),
    heap: &mut BinaryHeap<Queued>,
) -> Result<(), CoreError> {
    *plan = sched
        .corrected_plan(job, *plan)
        .unwrap_or_else(|| corrected(*plan, sim.job.estimate));
    *corrections += 1;
    sched.correct(now, job, *plan)?;
    if sim.runtime > *plan {
        heap.push(Reverse((start + *plan, CORRECTION, 0, 0, job)));
    }
    Ok(())
}
