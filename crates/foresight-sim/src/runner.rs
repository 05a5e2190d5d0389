//! The discrete-event loop. Virtual time jumps from event to event; the scheduler is the
//! same [`LocalScheduler`] the service runs, fed the same events and obeyed through the same
//! actions.

use crate::metrics::Metrics;
use crate::workload::{Semantics, Workload};
use foresight_core::{Action, CoreError, Event, JobId, LocalScheduler, Policy, Time};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
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

// Event ranks at one instant, as pyss orders them: submissions, terminations, starts.
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
    let policy = match semantics {
        Semantics::Default => policy.clone(),
        Semantics::Pyss => policy.clone().pyss_timing(),
    };
    // pyss creates a job's start event when it gets a reservation under conservative
    // backfilling, and when it starts under the other policies; termination order at one
    // instant follows start-event order.
    let start_event_at_reservation = policy.reservation_depth == foresight_core::policy::ALL;
    let mut sched = LocalScheduler::new(procs, policy);
    let n = workload.jobs.len();
    let mut start = vec![Time::MIN; n];
    let mut end = vec![Time::MIN; n];
    let mut decided = vec![0u64; n];
    let mut seq = 0u64;
    let mut heap: BinaryHeap<Queued> = BinaryHeap::with_capacity(1024);
    let mut actions = Vec::with_capacity(64);
    let mut next = 0usize;

    let mut apply = |now: Time,
                     actions: &mut Vec<Action>,
                     heap: &mut BinaryHeap<Queued>,
                     start: &mut [Time],
                     end: &mut [Time]| {
        for a in actions.drain(..) {
            seq += 1;
            match a {
                Action::Start { job, .. } => {
                    let k = job.0 as usize;
                    let sim = &workload.jobs[k];
                    start[k] = now;
                    end[k] = now + sim.runtime;
                    let order = if start_event_at_reservation && decided[k] != 0 {
                        decided[k]
                    } else {
                        seq
                    };
                    heap.push(Reverse((end[k], TERMINATION, now.secs(), order, job)));
                }
                Action::Reserve { job, start: at } => {
                    decided[job.0 as usize] = seq;
                    if at > now {
                        heap.push(Reverse((at, WAKE, 0, seq, job)));
                    }
                }
            }
        }
    };

    let err = |k: usize, source| SimError::Rejected {
        trace_id: workload.jobs[k].trace_id,
        source,
    };
    match semantics {
        Semantics::Pyss => loop {
            let sub_time = workload.jobs.get(next).map(|j| j.job.submit);
            let ev_time = heap.peek().map(|Reverse(e)| e.0);
            let take_submission = match (sub_time, ev_time) {
                (None, None) => break,
                (Some(s), Some(e)) => s <= e,
                (Some(_), None) => true,
                (None, Some(_)) => false,
            };
            if take_submission {
                let sim = &workload.jobs[next];
                let now = sim.job.submit;
                sched
                    .handle(now, Event::Submit(sim.job.clone()), &mut actions)
                    .map_err(|e| err(next, e))?;
                next += 1;
                if next % 4096 == 0 {
                    progress(next);
                }
                apply(now, &mut actions, &mut heap, &mut start, &mut end);
                continue;
            }
            let Reverse((now, rank, _, _, job)) = heap.pop().expect("invariant: peeked");
            if rank == TERMINATION {
                sched
                    .handle(now, Event::Finish(job), &mut actions)
                    .map_err(|e| err(job.0 as usize, e))?;
            } else if sched.reservation_of(job).is_some_and(|p| p.start == now) {
                sched
                    .handle(now, Event::Tick, &mut actions)
                    .map_err(|e| err(job.0 as usize, e))?;
            }
            apply(now, &mut actions, &mut heap, &mut start, &mut end);
        },
        Semantics::Default => loop {
            let sub_time = workload.jobs.get(next).map(|j| j.job.submit);
            let ev_time = heap.peek().map(|Reverse(e)| e.0);
            let now = match (sub_time, ev_time) {
                (None, None) => break,
                (Some(s), Some(e)) => s.min(e),
                (Some(s), None) => s,
                (None, Some(e)) => e,
            };
            while let Some(Reverse((t, rank, _, _, job))) = heap.peek().copied() {
                if t != now {
                    break;
                }
                heap.pop();
                if rank == TERMINATION {
                    sched.finish(now, job).map_err(|e| err(job.0 as usize, e))?;
                }
            }
            while next < n && workload.jobs[next].job.submit == now {
                sched
                    .submit(workload.jobs[next].job.clone())
                    .map_err(|e| err(next, e))?;
                next += 1;
                if next % 4096 == 0 {
                    progress(next);
                }
            }
            sched.schedule(now, &mut actions);
            apply(now, &mut actions, &mut heap, &mut start, &mut end);
        },
    }
    progress(n);
    let never = start.iter().filter(|s| **s == Time::MIN).count();
    if never > 0 {
        return Err(SimError::Stuck(never));
    }
    let outcomes: Vec<Outcome> = workload
        .jobs
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
        })
        .collect();
    let metrics = Metrics::compute(&outcomes, procs, workload);
    Ok(SimOutput { outcomes, metrics })
}
