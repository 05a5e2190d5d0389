//! Turning trace records into simulated jobs under a documented semantics, and seeded
//! synthetic workloads for runs that need no trace file.

use crate::swf::{SwfRecord, Trace};
use foresight_core::{ClassId, Credentials, Dur, GroupId, Job, JobId, Time, UserId};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use serde::{Deserialize, Serialize};

/// How trace fields become jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Semantics {
    /// procs = requested (field 8) if > 0 else allocated (5); estimate = requested time (9)
    /// if > 0 else the runtime; a run longer than its estimate is killed at the estimate;
    /// jobs with runtime ≤ 0, procs ≤ 0, procs > machine or submit < 0 are skipped. All
    /// events at one instant are applied, then one scheduling pass runs.
    Default,
    /// The reference simulator pyss (Tsafrir/Feitelson): procs = allocated clamped to
    /// [1, P]; estimate = max(requested time, runtime, 1); runtime = max(min(requested
    /// time, runtime), 1); broken jobs become 1-second jobs instead of being skipped; events
    /// one at a time (submissions, terminations, starts), a pass after each.
    Pyss,
}

impl Semantics {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Semantics::Default => "default",
            Semantics::Pyss => "pyss",
        }
    }
}

/// A job to simulate: what the scheduler sees plus what only the simulator knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimJob {
    /// What the scheduler sees (id = index in the workload).
    pub job: Job,
    /// How long it really runs once started (already cut at the estimate).
    pub runtime: Dur,
    /// The id in the source trace (SWF field 1).
    pub trace_id: i64,
    /// Index of the source record in the trace, for writing the schedule back.
    pub record: usize,
    /// The application (SWF executable number, field 14) when the trace knows it: the
    /// per-application predictor's key.
    pub app: Option<u64>,
}

/// Licence demands to draw over a workload's jobs ([`Workload::with_licence_demands`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LicenceDemand {
    /// The pool asked from.
    pub pool: String,
    /// Share of jobs that ask for licences, 0 to 1.
    pub share: f64,
    /// The most licences one job asks for (at least 1).
    pub max: u32,
    /// Seed.
    pub seed: u64,
}

/// Why records were not simulated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// Runtime ≤ 0.
    pub no_runtime: u64,
    /// Processors ≤ 0.
    pub no_procs: u64,
    /// More processors than the machine.
    pub too_large: u64,
    /// Negative submit time.
    pub bad_submit: u64,
}

impl Skipped {
    /// All skipped records.
    pub fn total(&self) -> u64 {
        self.no_runtime + self.no_procs + self.too_large + self.bad_submit
    }
}

/// A workload ready to simulate: jobs sorted by submission (stable: trace order breaks ties).
#[derive(Clone, Debug, Default)]
pub struct Workload {
    /// The jobs, ids 0..n in submission order.
    pub jobs: Vec<SimJob>,
    /// What was left out.
    pub skipped: Skipped,
    /// Jobs whose runtime was cut to their estimate (default semantics).
    pub cut_at_estimate: u64,
}

fn cred(r: &SwfRecord) -> Credentials {
    let id = |v: i64| u32::try_from(v).unwrap_or(0);
    Credentials {
        user: UserId(id(r.user)),
        group: GroupId(id(r.group)),
        class: ClassId(id(r.queue)),
        ..Credentials::default()
    }
}

/// Turns trace records into jobs one at a time, counting what it leaves out. Ids are given
/// in the order records are converted, so a trace sorted by submission time can be
/// simulated while it is still being read.
#[derive(Clone, Debug)]
pub struct Converter {
    procs: i64,
    semantics: Semantics,
    next_id: u64,
    /// What was left out so far.
    pub skipped: Skipped,
    /// Jobs whose runtime was cut to their estimate so far (default semantics); with
    /// [`Converter::overrun`] the jobs that run past it.
    pub cut_at_estimate: u64,
    overrun: bool,
}

impl Converter {
    /// Whether a run longer than its estimate keeps its whole runtime (default semantics):
    /// the archive's resource managers let some jobs overrun. Off (the default), it is
    /// killed at the estimate. Pyss semantics always kills at the estimate.
    pub fn overrun(mut self, overrun: bool) -> Converter {
        self.overrun = overrun;
        self
    }

    /// For a machine of `procs` processors.
    pub fn new(procs: u32, semantics: Semantics) -> Converter {
        Converter {
            procs: i64::from(procs),
            semantics,
            next_id: 0,
            skipped: Skipped::default(),
            cut_at_estimate: 0,
            overrun: false,
        }
    }

    /// The job for record number `record`, or `None` when the semantics skips it.
    pub fn convert(&mut self, r: &SwfRecord, record: usize) -> Option<SimJob> {
        let p = self.procs;
        let (submit, procs, estimate, runtime) = match self.semantics {
            Semantics::Default => {
                let procs = if r.requested_procs > 0 {
                    r.requested_procs
                } else {
                    r.allocated_procs
                };
                let counter = if r.run_time <= 0 {
                    &mut self.skipped.no_runtime
                } else if procs <= 0 {
                    &mut self.skipped.no_procs
                } else if procs > p {
                    &mut self.skipped.too_large
                } else if r.submit < 0 {
                    &mut self.skipped.bad_submit
                } else {
                    let estimate = if r.requested_time > 0 {
                        r.requested_time
                    } else {
                        r.run_time
                    };
                    if r.run_time > estimate {
                        self.cut_at_estimate += 1;
                    }
                    let runtime = if self.overrun {
                        r.run_time
                    } else {
                        r.run_time.min(estimate)
                    };
                    return Some(self.job(r, record, (r.submit, procs, estimate, runtime)));
                };
                *counter += 1;
                return None;
            }
            Semantics::Pyss => {
                if r.run_time <= 0 || r.allocated_procs <= 0 || r.submit < 0 {
                    (r.submit.max(1), r.allocated_procs.clamp(1, p), 1, 1)
                } else {
                    (
                        r.submit,
                        r.allocated_procs.clamp(1, p),
                        r.requested_time.max(r.run_time).max(1),
                        r.requested_time.min(r.run_time).max(1),
                    )
                }
            }
        };
        Some(self.job(r, record, (submit, procs, estimate, runtime)))
    }

    fn job(
        &mut self,
        r: &SwfRecord,
        record: usize,
        (submit, procs, estimate, runtime): (i64, i64, i64, i64),
    ) -> SimJob {
        let id = JobId(self.next_id);
        self.next_id += 1;
        SimJob {
            job: Job::new(
                id,
                Time(submit),
                u32::try_from(procs).expect("invariant: procs clamped to the machine"),
                Dur(estimate),
            )
            .with_cred(cred(r)),
            runtime: Dur(runtime),
            trace_id: r.job_number,
            record,
            app: u64::try_from(r.executable).ok().filter(|&a| a > 0),
        }
    }
}

impl Workload {
    /// Converts trace records for a machine of `procs` processors, sorted by submission
    /// (stable, so trace order breaks ties) and numbered in that order.
    pub fn from_trace(trace: &Trace, procs: u32, semantics: Semantics) -> Workload {
        Workload::from_trace_with(trace, Converter::new(procs, semantics))
    }

    /// Converts trace records with `conv` (see [`Converter::overrun`]), sorted as
    /// [`Workload::from_trace`] sorts them.
    pub fn from_trace_with(trace: &Trace, mut conv: Converter) -> Workload {
        let mut jobs: Vec<SimJob> = trace
            .records
            .iter()
            .enumerate()
            .filter_map(|(k, r)| conv.convert(r, k))
            .collect();
        jobs.sort_by_key(|j| j.job.submit);
        for (i, j) in jobs.iter_mut().enumerate() {
            j.job.id = JobId(i as u64);
        }
        Workload {
            jobs,
            skipped: conv.skipped,
            cut_at_estimate: conv.cut_at_estimate,
        }
    }

    /// The same workload with licence demands drawn (seeded): each job asks, with
    /// probability `share`, for 1 to `max` licences of the pool, uniformly.
    pub fn with_licence_demands(mut self, demand: &LicenceDemand) -> Workload {
        let mut rng = Pcg64::seed_from_u64(demand.seed);
        for j in &mut self.jobs {
            if rng.gen_bool(demand.share.clamp(0.0, 1.0)) {
                let n = rng.gen_range(1..=demand.max.max(1));
                j.job.licences.insert(demand.pool.clone(), n);
            }
        }
        self
    }

    /// A seeded synthetic workload: Poisson arrivals at `load` (offered utilization) on
    /// `procs` processors; 30 % serial, the rest mostly powers of two up to half the machine;
    /// runtimes log-uniform from 10 s to 12 h; estimates 1–5× the runtime, as users
    /// over-estimate.
    pub fn synthetic(jobs: usize, procs: u32, load: f64, seed: u64) -> Workload {
        let mut rng = Pcg64::seed_from_u64(seed);
        // Sizes as archive logs show them: many serial jobs, mostly powers of two, rarely
        // more than half the machine.
        let half = (procs / 2).max(1);
        let max_log2 = (half as f64).log2().floor() as u32;
        let mut specs = Vec::with_capacity(jobs);
        let mut area = 0.0;
        for _ in 0..jobs {
            let p = if rng.gen_bool(0.3) {
                1
            } else if rng.gen_bool(0.85) {
                1u32 << rng.gen_range(0..=max_log2)
            } else {
                rng.gen_range(1..=half)
            };
            let runtime = (10f64 * (12.0 * 3600.0 / 10.0f64).powf(rng.gen::<f64>())).round() as i64;
            let estimate = ((runtime as f64) * rng.gen_range(1.0..5.0)).ceil() as i64;
            area += f64::from(p) * runtime as f64;
            specs.push((p, runtime, estimate));
        }
        // Mean inter-arrival so that offered load = area / (procs × span).
        let mean_gap = area / (f64::from(procs.max(1)) * load.max(0.01)) / jobs.max(1) as f64;
        let mut t = 0.0f64;
        let jobs = specs
            .into_iter()
            .enumerate()
            .map(|(i, (p, runtime, estimate))| {
                t += -mean_gap * (1.0 - rng.gen::<f64>()).ln();
                let user = rng.gen_range(0..32);
                SimJob {
                    job: Job::new(JobId(i as u64), Time(t as i64), p, Dur(estimate))
                        .with_user(UserId(user)),
                    runtime: Dur(runtime),
                    trace_id: i as i64 + 1,
                    record: i,
                    app: None,
                }
            })
            .collect();
        Workload {
            jobs,
            ..Workload::default()
        }
    }
}
