//! A site's offer for a job, and its price: what a dispatcher computes from its own load and
//! the auction house checks and ranks.

use super::config::{AuctionConfig, ProcsCap};
use super::Lot;
use crate::broker::preempt::{self, Holder};
use crate::ids::JobId;
use crate::time::{Dur, Time};
use serde::{Deserialize, Serialize};

/// What a site offers a job now: facts, priced by [`price`] under the auction's weights, so
/// that every bid is priced alike whoever computed it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Offer {
    /// Processors offered (at least the job's need for a valid bid).
    pub procs: u32,
    /// Processors the site could give this job now before any reservation: free ones plus
    /// those held by global jobs of strictly lower priority.
    pub capacity: u32,
    /// Priority-weighted work the site would preempt, processor-seconds: Σ (1 + victim
    /// priority) × victim processors × victim remaining runtime.
    pub preempt_work: f64,
    /// Time to stage the job's input to the site.
    pub stage: Dur,
}

/// A running global job a site could preempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Victim {
    /// The job.
    pub job: JobId,
    /// Its absolute priority (higher is more important).
    pub priority: u8,
    /// Processors it holds.
    pub procs: u32,
    /// Runtime it has left.
    pub remaining: Dur,
    /// When it started (or last resumed): the broker's preemption order reads it.
    pub started: Time,
}

/// A site's offer for `lot`, with the jobs it would preempt, or `None` when it cannot run the
/// job now.
///
/// The victims are the ones the broker itself would take ([`preempt::victims`]: lowest level
/// first, then the job that started last, and none that is not needed), so that the winner
/// preempts exactly what it bid to preempt and the simulator preempts as the service does.
/// `free` are its idle processors, `running` its running global jobs (local jobs are never
/// preempted, so they are not passed), `held` the processors its standing bids in other open
/// auctions hold (0 unless the house reserves them), `stage` the time to fetch the input.
/// Free processors are used first; victims are preempted only to cover the rest of the need.
pub fn make_offer(
    lot: &Lot,
    free: u32,
    running: &[Victim],
    held: u32,
    stage: Dur,
) -> Option<(Offer, Vec<JobId>)> {
    let lower: u32 = running
        .iter()
        .filter(|v| v.priority < lot.priority)
        .map(|v| v.procs)
        .sum();
    let capacity = free + lower;
    if lot.procs == 0 || lot.procs + held > capacity {
        return None;
    }
    let free_left = free.saturating_sub(held);
    let holders: Vec<Holder> = running
        .iter()
        .map(|v| Holder {
            job: v.job,
            priority: u32::from(v.priority),
            procs: v.procs,
            started: v.started,
        })
        .collect();
    // `None`: the reservations sit on free processors and the rest is not enough.
    let victims = preempt::victims(lot.procs, free_left, u32::from(lot.priority), &holders)?;
    let chosen = || {
        victims
            .iter()
            .filter_map(|id| running.iter().find(|v| v.job == *id))
    };
    let offer = Offer {
        procs: free_left + chosen().map(|v| v.procs).sum::<u32>(),
        capacity,
        preempt_work: chosen().map(weighted_work).sum(),
        stage,
    };
    Some((offer, victims))
}

/// A victim's priority-weighted remaining work, processor-seconds.
pub fn weighted_work(v: &Victim) -> f64 {
    (1.0 + f64::from(v.priority)) * f64::from(v.procs) * v.remaining.0 as f64
}

/// The bid an offer makes for a job of `need` processors when the mean runtime is
/// `mean_runtime` seconds (see [`BidWeights`](super::BidWeights)).
pub fn price(cfg: &AuctionConfig, need: u32, offer: &Offer, mean_runtime: f64) -> f64 {
    let need = f64::from(need.max(1));
    let procs = match cfg.procs_cap {
        ProcsCap::Uncapped => f64::from(offer.procs),
        ProcsCap::Need => f64::from(offer.procs).min(need),
    };
    let w = &cfg.weights;
    w.procs * procs / need
        - w.preempt * offer.preempt_work / (need * mean_runtime)
        - w.stage * offer.stage.0 as f64 / mean_runtime
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auction::SiteId;

    fn lot(procs: u32, priority: u8) -> Lot {
        Lot {
            job: JobId(1),
            procs,
            priority,
            home: SiteId(0),
        }
    }

    fn victim(job: u64, priority: u8, procs: u32, remaining: i64, started: i64) -> Victim {
        Victim {
            job: JobId(job),
            priority,
            procs,
            remaining: Dur(remaining),
            started: Time(started),
        }
    }

    #[test]
    fn free_processors_first_then_the_brokers_victims() {
        let running = [
            victim(10, 1, 4, 100, 30),
            victim(11, 0, 4, 500, 20),
            victim(12, 0, 4, 50, 10),
            victim(13, 2, 8, 10, 40),
        ];
        let (offer, victims) = make_offer(&lot(10, 2), 2, &running, 0, Dur(7)).unwrap();
        assert_eq!(
            victims,
            vec![JobId(11), JobId(12)],
            "priority 0, the last started first (the broker's order), not the least work"
        );
        assert_eq!(offer.procs, 10);
        assert_eq!(
            offer.capacity,
            2 + 12,
            "the equal-priority job is not a victim"
        );
        assert_eq!(offer.preempt_work, 4.0 * 50.0 + 4.0 * 500.0);
        assert!(make_offer(&lot(15, 2), 2, &running, 0, Dur(7)).is_none());
    }

    #[test]
    fn held_processors_are_not_offered_again() {
        assert!(make_offer(&lot(4, 0), 6, &[], 2, Dur(0)).is_some());
        assert!(make_offer(&lot(4, 0), 6, &[], 3, Dur(0)).is_none());
        let (offer, _) = make_offer(&lot(4, 0), 8, &[], 2, Dur(0)).unwrap();
        assert_eq!(offer.procs, 6, "uncapped: every processor not held");
    }

    #[test]
    fn price_hand_checked() {
        let cfg = AuctionConfig::default();
        let offer = Offer {
            procs: 8,
            capacity: 8,
            preempt_work: 400.0,
            stage: Dur(10),
        };
        // 1 × 8/4 − 0.25 × 400/(4 × 100) − 1 × 10/100
        assert!((price(&cfg, 4, &offer, 100.0) - (2.0 - 0.25 - 0.1)).abs() < 1e-12);
        let capped = AuctionConfig {
            procs_cap: ProcsCap::Need,
            ..cfg
        };
        assert!((price(&capped, 4, &offer, 100.0) - (1.0 - 0.25 - 0.1)).abs() < 1e-12);
    }
}
