//! What to plan when a running job outlives its plan.
//!
//! A prediction is only a plan: the job keeps running until it ends or reaches its estimate
//! (the kill time). When it outlives the plan, the plan must grow, and the scheduler plans
//! again. Two rules:
//!
//! - [`Correction::Incremental`], the rule of Tsafrir, Etsion and Feitelson (IEEE TPDS 2007)
//!   in EASY++: the prediction grows in steps of [`STEPS`] (1 min, 5 min, 15 min, 30 min,
//!   1 h, 2 h, 5 h, 10 h, 20 h, 50 h, 100 h): after the k-th correction the plan is the
//!   first prediction plus the k-th step, never more than the estimate. The steps are offsets
//!   from the first prediction, as the pyss reimplementation (corrector `tsafrir`) reads the
//!   paper; past the last step the plan grows by the last step each time. A job that just
//!   outlived its prediction is most likely to end soon, so the plan stays short and the
//!   holes before the reservations stay open.
//! - [`Correction::Estimate`], the rule this project shipped first: plan to the estimate at
//!   once. It never corrects a job twice below its estimate, but it closes every hole the
//!   job's processors could still fill.
//!
//! Past the estimate (a job the resource manager lets overrun, see the simulator's
//! `overrun`) both rules climb [`LADDER`], so that a long overrun costs a handful of
//! re-plans rather than one per minute.

use crate::time::Dur;
use serde::{Deserialize, Serialize};

/// The paper's correction steps, offsets from the first prediction; the last repeats.
pub const STEPS: [Dur; 11] = [
    Dur::minutes(1),
    Dur::minutes(5),
    Dur::minutes(15),
    Dur::minutes(30),
    Dur::hours(1),
    Dur::hours(2),
    Dur::hours(5),
    Dur::hours(10),
    Dur::hours(20),
    Dur::hours(50),
    Dur::hours(100),
];

/// The steps a plan grows by once past the estimate, in order; the last repeats.
pub const LADDER: [Dur; 11] = STEPS;

/// How a plan grows when its job outlives it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Correction {
    /// The paper's: the first prediction plus the next of [`STEPS`], at most the estimate.
    #[default]
    Incremental,
    /// Straight to the estimate.
    Estimate,
}

impl Correction {
    /// The name used on the command line and in configurations.
    pub fn name(self) -> &'static str {
        match self {
            Correction::Incremental => "incremental",
            Correction::Estimate => "estimate",
        }
    }

    /// The next plan (a duration from the job's start) for a job first planned `first`,
    /// still running at the end of `plan`, with `estimate`. Always longer than `plan`.
    pub fn next(self, first: Dur, plan: Dur, estimate: Dur) -> Dur {
        if plan >= estimate {
            return past_estimate(plan, estimate);
        }
        match self {
            Correction::Estimate => estimate,
            Correction::Incremental => {
                let step = STEPS
                    .iter()
                    .map(|s| first.as_secs() + s.as_secs())
                    .find(|t| *t > plan.as_secs())
                    .unwrap_or(plan.as_secs() + STEPS[STEPS.len() - 1].as_secs());
                Dur(step.min(estimate.as_secs()))
            }
        }
    }
}

/// The correction of a grid (the service's and `sim grid`'s `correction` key) when none is
/// configured: [`Correction::Estimate`]. With the starvation guard on, as it is there by
/// default, it gave the lowest mean bounded slowdown and wait on all four archive traces
/// measured (docs/src/research/prediction.md), while the paper's steps kept plans
/// short enough to move the reservation at the head again and again. `sim run` keeps the
/// paper's own default, [`Correction::Incremental`], to reproduce it.
pub fn grid_default() -> Correction {
    Correction::Estimate
}

impl std::str::FromStr for Correction {
    type Err = String;

    fn from_str(text: &str) -> Result<Correction, String> {
        match text {
            "incremental" => Ok(Correction::Incremental),
            "estimate" => Ok(Correction::Estimate),
            _ => Err(format!(
                "{text:?} is not a correction: use incremental or estimate"
            )),
        }
    }
}

/// [`Correction::Estimate`] without the first prediction: the estimate if the plan was
/// shorter; otherwise the plan grown by the next step of [`LADDER`] (the steps add up:
/// estimate + 1 min, + 6 min, + 21 min, …). Always longer than `plan`.
pub fn corrected(plan: Dur, estimate: Dur) -> Dur {
    Correction::Estimate.next(plan, plan, estimate)
}

fn past_estimate(plan: Dur, estimate: Dur) -> Dur {
    let over = plan.as_secs() - estimate.as_secs();
    let mut reached = 0;
    for step in LADDER {
        reached += step.as_secs();
        if reached > over {
            return Dur(estimate.as_secs() + reached);
        }
    }
    Dur(plan.as_secs() + LADDER[LADDER.len() - 1].as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_the_estimate_then_the_ladder() {
        let est = Dur(1000);
        assert_eq!(corrected(Dur(10), est), est);
        assert_eq!(corrected(Dur(999), est), est);
        let mut plan = est;
        let mut got = Vec::new();
        for _ in 0..13 {
            plan = corrected(plan, est);
            got.push((plan.as_secs() - 1000) / 60);
        }
        // Minutes past the estimate: +1, +5, +15, +30, +60, +120, +300, +600, +1200, +3000,
        // +6000, then +6000 again.
        assert_eq!(
            got,
            vec![1, 6, 21, 51, 111, 231, 531, 1131, 2331, 5331, 11331, 17331, 23331]
        );
    }

    #[test]
    fn a_plan_between_rungs_goes_to_the_next_rung() {
        let est = Dur(600);
        // 2 minutes past: the next rung is 6 minutes past.
        assert_eq!(corrected(Dur(600 + 120), est), Dur(600 + 360));
        // Exactly on a rung: the one after.
        assert_eq!(corrected(Dur(600 + 60), est), Dur(600 + 360));
    }

    #[test]
    fn incremental_steps_are_offsets_from_the_first_prediction() {
        let first = Dur(100);
        let est = Dur::hours(400);
        let mut plan = first;
        let mut got = Vec::new();
        for _ in 0..13 {
            plan = Correction::Incremental.next(first, plan, est);
            got.push(plan.as_secs() - 100);
        }
        // Seconds past the first prediction: 1 min, 5 min, 15 min, 30 min, 1 h, 2 h, 5 h,
        // 10 h, 20 h, 50 h, 100 h, then 100 h more each time.
        assert_eq!(
            got,
            vec![
                60, 300, 900, 1800, 3600, 7200, 18000, 36000, 72000, 180000, 360000, 720000,
                1080000
            ]
        );
    }

    #[test]
    fn incremental_stops_at_the_estimate_then_climbs_the_ladder() {
        let first = Dur(100);
        let est = Dur(500);
        let rule = Correction::Incremental;
        assert_eq!(rule.next(first, first, est), Dur(160));
        assert_eq!(rule.next(first, Dur(160), est), Dur(400));
        // 100 + 15 min would pass the estimate: the estimate.
        assert_eq!(rule.next(first, Dur(400), est), est);
        // A plan between steps (restored, or corrected late) goes to the next step.
        assert_eq!(rule.next(first, Dur(200), est), Dur(400));
        // Past the estimate: the ladder, as with the estimate rule.
        assert_eq!(rule.next(first, est, est), Dur(560));
        assert_eq!(rule.next(first, Dur(560), est), corrected(Dur(560), est));
    }

    #[test]
    fn the_estimate_rule_jumps_to_the_estimate() {
        let rule = Correction::Estimate;
        assert_eq!(rule.next(Dur(100), Dur(100), Dur(500)), Dur(500));
        assert_eq!(rule.next(Dur(100), Dur(400), Dur(500)), Dur(500));
        assert_eq!(rule.next(Dur(100), Dur(500), Dur(500)), Dur(560));
    }

    #[test]
    fn names_read_back() {
        for c in [Correction::Incremental, Correction::Estimate] {
            assert_eq!(c.name().parse::<Correction>(), Ok(c));
        }
        assert!("double".parse::<Correction>().is_err());
    }
}
