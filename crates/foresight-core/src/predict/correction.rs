//! What to plan when a running job outlives its plan (Tsafrir, Etsion and Feitelson 2007):
//! first the estimate, since the prediction was wrong and the user may be right; past the
//! estimate (a job the resource manager lets overrun), ever larger steps, so that a long
//! overrun costs a handful of re-plans rather than one per minute.

use crate::time::Dur;

/// The steps a plan grows by once past the estimate, in order; the last repeats.
pub const LADDER: [Dur; 11] = [
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

/// The next plan (a duration from the job's start) for a job still running at the end of
/// `plan`: the estimate if the plan was shorter; otherwise the plan grown by the next step of
/// [`LADDER`] (the steps add up: estimate + 1 min, + 6 min, + 21 min, …). Always longer than
/// `plan`.
pub fn corrected(plan: Dur, estimate: Dur) -> Dur {
    if plan < estimate {
        return estimate;
    }
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
}
