//! The figures a scheduling study reports (DESIGN.md "Simulation semantics"): means of wait,
//! response, slowdown and bounded slowdown (τ = 10 s), utilization and makespan; and the
//! tail of the waits (largest, 99th percentile, jobs waiting over a day and over five), which
//! the means hide: a policy that starves a few jobs can still have the best mean.

use crate::runner::Outcome;
use serde::Serialize;
use std::collections::BTreeMap;

/// Bounded-slowdown threshold τ, seconds.
pub const BSLD_TAU: i64 = 10;

/// A day, seconds: the waits counted in [`Metrics::over_1d`] are longer than this.
pub const DAY: i64 = 86_400;

/// Aggregate results of one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Metrics {
    /// Jobs simulated.
    pub jobs: u64,
    /// Trace records not simulated.
    pub skipped: u64,
    /// Jobs whose runtime was cut at their estimate.
    pub cut_at_estimate: u64,
    /// Mean wait (start − submit), seconds.
    pub mean_wait: f64,
    /// Mean response (end − submit), seconds.
    pub mean_response: f64,
    /// Mean slowdown, response / runtime.
    pub mean_slowdown: f64,
    /// Mean bounded slowdown, max(1, response / max(runtime, τ)).
    pub mean_bsld: f64,
    /// Largest wait, seconds.
    pub max_wait: i64,
    /// The 99th percentile of the waits (nearest rank: the smallest wait that at least 99 %
    /// of the jobs do not exceed), seconds.
    pub p99_wait: i64,
    /// Jobs that waited longer than a day.
    pub over_1d: u64,
    /// Jobs that waited longer than five days.
    pub over_5d: u64,
    /// Σ procs·runtime / (P × (last end − first submit)).
    pub utilization: f64,
    /// Last end − first submit, seconds.
    pub makespan: i64,
    /// The same means per class (SWF queue, field 15), where the workload has more than one.
    pub by_class: BTreeMap<u32, ClassMetrics>,
}

/// Means over the jobs of one class.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ClassMetrics {
    /// Jobs of the class.
    pub jobs: u64,
    /// Mean wait, seconds.
    pub mean_wait: f64,
    /// Mean response, seconds.
    pub mean_response: f64,
    /// Mean bounded slowdown.
    pub mean_bsld: f64,
}

impl Metrics {
    /// Computes the figures over every simulated job.
    /// Skipped and cut counts are the caller's to fill in.
    pub fn compute(outcomes: &[Outcome], procs: u32) -> Metrics {
        let n = outcomes.len();
        let mut m = Metrics {
            jobs: n as u64,
            ..Metrics::default()
        };
        if n == 0 {
            return m;
        }
        let (mut wait, mut resp, mut sld, mut bsld, mut area) = (0.0, 0.0, 0.0, 0.0, 0.0);
        let mut waits: Vec<i64> = Vec::with_capacity(n);
        let mut first_submit = i64::MAX;
        let mut last_end = i64::MIN;
        for o in outcomes {
            let w = o.wait();
            let run = o.runtime();
            let r = (o.end - o.submit).as_secs() as f64;
            wait += w as f64;
            resp += r;
            sld += r / run.max(1) as f64;
            bsld += (r / run.max(BSLD_TAU) as f64).max(1.0);
            area += f64::from(o.procs) * run as f64;
            m.max_wait = m.max_wait.max(w);
            waits.push(w);
            first_submit = first_submit.min(o.submit.secs());
            last_end = last_end.max(o.end.secs());
        }
        let mut by_class: BTreeMap<u32, ClassMetrics> = BTreeMap::new();
        for o in outcomes {
            let c = by_class.entry(o.class).or_default();
            let r = (o.end - o.submit).as_secs() as f64;
            c.jobs += 1;
            c.mean_wait += o.wait() as f64;
            c.mean_response += r;
            c.mean_bsld += (r / o.runtime().max(BSLD_TAU) as f64).max(1.0);
        }
        if by_class.len() > 1 {
            for c in by_class.values_mut() {
                let k = c.jobs as f64;
                c.mean_wait /= k;
                c.mean_response /= k;
                c.mean_bsld /= k;
            }
            m.by_class = by_class;
        }
        m.p99_wait = percentile(&mut waits, 99);
        m.over_1d = waits.iter().filter(|w| **w > DAY).count() as u64;
        m.over_5d = waits.iter().filter(|w| **w > 5 * DAY).count() as u64;
        let nf = n as f64;
        m.mean_wait = wait / nf;
        m.mean_response = resp / nf;
        m.mean_slowdown = sld / nf;
        m.mean_bsld = bsld / nf;
        m.makespan = last_end - first_submit;
        m.utilization = if m.makespan > 0 {
            area / (f64::from(procs) * m.makespan as f64)
        } else {
            0.0
        };
        m
    }
}

/// The `pct`-th percentile of `values` by nearest rank (the value at rank ⌈pct·n/100⌉ in
/// ascending order); 0 for none. Reorders `values`.
pub fn percentile(values: &mut [i64], pct: u32) -> i64 {
    if values.is_empty() {
        return 0;
    }
    let n = values.len();
    let rank = (n * pct.min(100) as usize).div_ceil(100).max(1);
    *values.select_nth_unstable(rank - 1).1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_of_the_waits() {
        use foresight_core::{JobId, Time};
        // Waits 0, 1 d, 1 d + 1 s, 5 d and 5 d + 1 s.
        let waits = [0, DAY, DAY + 1, 5 * DAY, 5 * DAY + 1];
        let outcomes: Vec<Outcome> = waits
            .iter()
            .enumerate()
            .map(|(k, w)| Outcome {
                id: JobId(k as u64),
                trace_id: k as i64,
                record: k,
                submit: Time(0),
                start: Time(*w),
                end: Time(*w + 100),
                procs: 1,
                estimate: 100,
                class: 0,
                plan: 100,
                corrections: 0,
            })
            .collect();
        let m = Metrics::compute(&outcomes, 4);
        assert_eq!(m.max_wait, 5 * DAY + 1);
        // ⌈0.99 × 5⌉ = 5: the largest.
        assert_eq!(m.p99_wait, 5 * DAY + 1);
        // Longer than a day: 1 d + 1 s, 5 d, 5 d + 1 s; longer than five days: one.
        assert_eq!(m.over_1d, 3);
        assert_eq!(m.over_5d, 1);
    }

    #[test]
    fn the_nearest_rank_percentile() {
        let mut v: Vec<i64> = (1..=200).rev().collect();
        assert_eq!(percentile(&mut v, 99), 198);
        assert_eq!(percentile(&mut v, 100), 200);
        assert_eq!(percentile(&mut v, 50), 100);
        let mut few = vec![5, 1, 9];
        // ⌈0.99 × 3⌉ = 3: the largest.
        assert_eq!(percentile(&mut few, 99), 9);
        assert_eq!(percentile(&mut [], 99), 0);
        assert_eq!(percentile(&mut [7], 1), 7);
    }
}
