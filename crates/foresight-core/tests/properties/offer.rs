//! A site's offer and its price on random loads: the bid's three terms (processors offered,
//! priority-weighted work preempted, staging time). Checked against an independent model:
//! an offer exists exactly when free processors not held by other bids plus those of
//! strictly lower-priority running jobs cover the need; free processors are used first and
//! victims only as far as needed, in the broker's preemption order (lowest level, then the
//! job that started last), none of them unneeded; the preempted work is the victims' weighted
//! remaining work; and the price falls with every processor-second preempted and every second
//! of staging, rises with processors offered, and is unchanged when every time is scaled.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

use foresight_core::auction::{
    make_offer, price, AuctionConfig, BidWeights, Lot, ProcsCap, SiteId, Victim,
};
use foresight_core::{Dur, JobId, Time};
use proptest::prelude::*;

fn victims() -> impl Strategy<Value = Vec<Victim>> {
    prop::collection::vec((0u8..4, 1u32..9, 1i64..5_000, 0i64..50), 0..6).prop_map(|vs| {
        vs.into_iter()
            .enumerate()
            .map(|(k, (priority, procs, remaining, started))| Victim {
                job: JobId(100 + k as u64),
                priority,
                procs,
                remaining: Dur(remaining),
                started: Time(started),
            })
            .collect()
    })
}

fn weights() -> impl Strategy<Value = AuctionConfig> {
    (0.0f64..3.0, 0.0f64..3.0, 0.0f64..3.0, any::<bool>()).prop_map(|(p, x, s, cap)| {
        AuctionConfig {
            weights: BidWeights {
                procs: p,
                preempt: x,
                stage: s,
            },
            procs_cap: if cap {
                ProcsCap::Need
            } else {
                ProcsCap::Uncapped
            },
            ..AuctionConfig::default()
        }
    })
}

fn work(v: &Victim) -> f64 {
    (1.0 + f64::from(v.priority)) * f64::from(v.procs) * v.remaining.0 as f64
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn offers_preempt_only_what_they_must_of_strictly_lower_priority(
        need in 1u32..20,
        priority in 0u8..4,
        free in 0u32..16,
        held in 0u32..8,
        running in victims(),
        stage in 0i64..1_000,
    ) {
        let lot = Lot { job: JobId(1), procs: need, priority, home: SiteId(0) };
        let eligible: Vec<&Victim> = running.iter().filter(|v| v.priority < priority).collect();
        let lower: u32 = eligible.iter().map(|v| v.procs).sum();
        let free_left = free.saturating_sub(held);
        let possible = need + held <= free + lower && free_left + lower >= need;
        let got = make_offer(&lot, free, &running, held, Dur(stage));
        prop_assert_eq!(got.is_some(), possible, "free {} held {} lower {}", free, held, lower);
        let Some((offer, chosen)) = got else { return Ok(()) };
        prop_assert_eq!(offer.capacity, free + lower);
        prop_assert_eq!(offer.stage, Dur(stage));
        prop_assert!(offer.procs >= need);
        let picked: Vec<&Victim> = chosen
            .iter()
            .map(|id| running.iter().find(|v| v.job == *id).unwrap())
            .collect();
        // Only strictly lower priorities, each once; local jobs are never passed in.
        prop_assert!(picked.iter().all(|v| v.priority < priority));
        let mut ids = chosen.clone();
        ids.sort();
        ids.dedup();
        prop_assert_eq!(ids.len(), chosen.len());
        // Free first, then victims only while the need is not covered.
        prop_assert_eq!(offer.procs, free_left + picked.iter().map(|v| v.procs).sum::<u32>());
        if free_left >= need {
            prop_assert!(chosen.is_empty());
        }
        // None unneeded: without any one victim the need is no longer covered.
        for v in &picked {
            prop_assert!(offer.procs - v.procs < need, "victim {} not needed", v.job);
        }
        // In the broker's order: every victim lies within the shortest prefix of that order
        // (lowest level, then started last, then highest id) that covers the need.
        let mut order = eligible.clone();
        order.sort_by_key(|v| (v.priority, std::cmp::Reverse(v.started), std::cmp::Reverse(v.job)));
        let mut covered = free_left;
        let prefix: Vec<JobId> = order
            .iter()
            .take_while(|v| {
                let before = covered;
                covered += v.procs;
                before < need
            })
            .map(|v| v.job)
            .collect();
        prop_assert!(chosen.iter().all(|id| prefix.contains(id)), "{:?} outside {:?}", chosen, prefix);
        let want: f64 = picked.iter().map(|v| work(v)).sum();
        prop_assert!((offer.preempt_work - want).abs() <= 1e-9 * want.max(1.0));
    }

    #[test]
    fn price_falls_with_preemption_and_staging_and_depends_only_on_ratios(
        cfg in weights(),
        need in 1u32..20,
        extra in 0u32..20,
        preempt_work in 0.0f64..1e6,
        stage in 0i64..2_000,
        mean in 1.0f64..5_000.0,
        more_work in 0.0f64..1e5,
        more_stage in 0i64..500,
        k in 1i64..50,
    ) {
        let offer = foresight_core::auction::Offer {
            procs: need + extra,
            capacity: need + extra,
            preempt_work,
            stage: Dur(stage),
        };
        let p = price(&cfg, need, &offer, mean);
        let w = &cfg.weights;
        let procs = match cfg.procs_cap {
            ProcsCap::Uncapped => f64::from(need + extra),
            ProcsCap::Need => f64::from(need),
        };
        let n = f64::from(need);
        let hand = w.procs * procs / n
            - w.preempt * preempt_work / (n * mean)
            - w.stage * stage as f64 / mean;
        prop_assert!((p - hand).abs() <= 1e-9 * hand.abs().max(1.0));
        let costlier = foresight_core::auction::Offer {
            preempt_work: preempt_work + more_work,
            stage: Dur(stage + more_stage),
            ..offer
        };
        prop_assert!(price(&cfg, need, &costlier, mean) <= p + 1e-12);
        if w.preempt > 0.0 && more_work > 0.0 {
            prop_assert!(price(&cfg, need, &costlier, mean) < p);
        }
        let bigger = foresight_core::auction::Offer { procs: offer.procs + 1, ..offer };
        prop_assert!(price(&cfg, need, &bigger, mean) >= p - 1e-12);
        // Scale every time (remaining runtimes, so the work; staging; the mean) by k.
        let scaled = foresight_core::auction::Offer {
            preempt_work: preempt_work * k as f64,
            stage: Dur(stage * k),
            ..offer
        };
        let q = price(&cfg, need, &scaled, mean * k as f64);
        prop_assert!((p - q).abs() <= 1e-9 * p.abs().max(1.0), "{} vs {}", p, q);
    }

    #[test]
    fn a_free_site_outbids_one_that_must_preempt_or_stage(
        need in 1u32..16,
        priority in 1u8..4,
        victim_priority in 0u8..4,
        remaining in 1i64..5_000,
        stage in 1i64..1_000,
        mean in 1.0f64..5_000.0,
    ) {
        let victim_priority = victim_priority % priority;
        let cfg = AuctionConfig { procs_cap: ProcsCap::Need, ..AuctionConfig::default() };
        let lot = Lot { job: JobId(1), procs: need, priority, home: SiteId(0) };
        let victim = Victim { job: JobId(2), priority: victim_priority, procs: need, remaining: Dur(remaining), started: Time(0) };
        let (free_offer, none) = make_offer(&lot, need, &[], 0, Dur(0)).unwrap();
        prop_assert!(none.is_empty());
        let (busy_offer, chosen) = make_offer(&lot, 0, &[victim], 0, Dur(0)).unwrap();
        prop_assert_eq!(chosen, vec![JobId(2)]);
        let (far_offer, _) = make_offer(&lot, need, &[], 0, Dur(stage)).unwrap();
        let free = price(&cfg, need, &free_offer, mean);
        prop_assert!(price(&cfg, need, &busy_offer, mean) < free);
        prop_assert!(price(&cfg, need, &far_offer, mean) < free);
        // A job of equal or higher priority is never a victim.
        let peer = Victim { priority, ..victim };
        prop_assert!(make_offer(&lot, 0, &[peer], 0, Dur(0)).is_none());
    }
}
