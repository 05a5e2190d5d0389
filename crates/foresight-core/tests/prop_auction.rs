//! The auction house on random interleavings of opens, bids (duplicate, late, too small,
//! over capacity), withdrawals, load changes, finished jobs, cancellations and ticks from
//! several sites. Checked after every event against an independent model: at most one award
//! per job, ever; an award goes to the highest standing valid bid under the tie rule, at its
//! price; no bid is accepted after its auction's close or after an award; under
//! `Overcommit::Reserve` no site's standing bids hold more processors than it said it has;
//! and no auction is left open past its close.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

use foresight_core::auction::{
    price, AuctionConfig, AuctionEvent, AuctionHouse, Decision, Lot, Offer, Overcommit, ProcsCap,
    RuntimeTracker, SiteId, Tie, Unsold,
};
use foresight_core::{Dur, JobId, Time};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

const SITES: u32 = 4;
const JOBS: u64 = 5;

#[derive(Clone, Debug)]
enum Op {
    Open(u64),
    Bid {
        job: u64,
        site: u32,
        procs: u32,
        capacity: u32,
        work: u32,
        stage: i64,
    },
    Withdraw(u64, u32),
    Load(u32),
    Finished(i64),
    Cancel(u64),
    Tick,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0..JOBS).prop_map(Op::Open),
        // Offers from a small set, so that equal bids from different sites (ties) are common;
        // `procs` is relative to the job's need (0: one too few), `capacity` to `procs`.
        8 => (0..JOBS + 1, 0..SITES, 0u32..3, 0u32..10, prop_oneof![Just(0u32), Just(100)], prop_oneof![Just(0i64), Just(10)]).prop_map(
            |(job, site, procs, capacity, work, stage)| Op::Bid { job, site, procs, capacity, work, stage }
        ),
        1 => (0..JOBS, 0..SITES).prop_map(|(j, s)| Op::Withdraw(j, s)),
        1 => (0..SITES).prop_map(Op::Load),
        1 => (1i64..300).prop_map(Op::Finished),
        1 => (0..JOBS).prop_map(Op::Cancel),
        2 => Just(Op::Tick),
    ]
}

fn config() -> impl Strategy<Value = AuctionConfig> {
    (
        prop_oneof![Just(Overcommit::Reserve), Just(Overcommit::LapseOnAward)],
        prop_oneof![Just(Tie::LowestSite), Just(Tie::EarliestBid)],
        prop_oneof![
            Just(Unsold::Wait),
            Just(Unsold::Reopen { delay: 0.0 }),
            Just(Unsold::Reopen { delay: 0.2 })
        ],
        prop_oneof![Just(ProcsCap::Uncapped), Just(ProcsCap::Need)],
        prop_oneof![Just(0.0), Just(0.8), Just(f64::NEG_INFINITY)],
        prop_oneof![Just(0.1), Just(0.35), Just(1.0)],
    )
        .prop_map(
            |(overcommit, tie, unsold, procs_cap, opening_bid, alpha)| AuctionConfig {
                alpha,
                opening_bid,
                procs_cap,
                tie,
                unsold,
                overcommit,
                ..AuctionConfig::default()
            },
        )
}

#[derive(Clone, Debug)]
struct Standing {
    amount: f64,
    seq: u64,
    lapsed: bool,
    need: u32,
}

#[derive(Default)]
struct Model {
    /// Open auctions: closing time and standing bids.
    open: BTreeMap<u64, (Time, BTreeMap<u32, Standing>)>,
    awarded: BTreeSet<u64>,
    seq: u64,
}

fn lot(job: u64) -> Lot {
    Lot {
        job: JobId(job),
        procs: 1 + (job as u32 * 3) % 8 * (job < JOBS) as u32,
        priority: (job % 4) as u8,
        home: SiteId((job % SITES as u64) as u32),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn exactly_one_winner_the_best_valid_bid(
        cfg in config(),
        ops in prop::collection::vec((0i64..25, op()), 1..120),
    ) {
        let mut house = AuctionHouse::new(cfg.clone(), RuntimeTracker::new(8, Dur(100)));
        let mut m = Model::default();
        let mut now = Time(0);
        for (dt, op) in ops {
            now += Dur(dt);
            let mean = house.mean_runtime();
            let (event, bid) = match op {
                Op::Open(j) => (AuctionEvent::Open(lot(j)), None),
                Op::Bid { job, site, procs, capacity, work, stage } => {
                    let procs = (lot(job).procs + procs).saturating_sub(1);
                    let offer = Offer {
                        procs,
                        capacity: procs + capacity.saturating_sub(2),
                        preempt_work: f64::from(work),
                        stage: Dur(stage),
                    };
                    (
                        AuctionEvent::Bid { job: JobId(job), site: SiteId(site), offer },
                        Some((job, site, offer)),
                    )
                }
                Op::Withdraw(j, s) => {
                    // The house closes what is due first; a withdrawal reaches only a live auction.
                    if let Some((closes, bids)) = m.open.get_mut(&j) {
                        if *closes > now {
                            bids.remove(&s);
                        }
                    }
                    (AuctionEvent::Withdraw { job: JobId(j), site: SiteId(s) }, None)
                }
                Op::Load(s) => (AuctionEvent::LoadChanged(SiteId(s)), None),
                Op::Finished(r) => (AuctionEvent::Finished(Dur(r)), None),
                Op::Cancel(j) => (AuctionEvent::Cancel(JobId(j)), None),
                Op::Tick => (AuctionEvent::Tick, None),
            };
            let decisions = house.handle(now, event.clone());
            for d in &decisions {
                match d {
                    Decision::Opened { job, closes } => {
                        prop_assert!(*closes > now, "opened {job} closing at {closes:?} <= now");
                        prop_assert!(!m.awarded.contains(&job.0), "awarded job {job} reopened");
                        prop_assert!(m.open.insert(job.0, (*closes, BTreeMap::new())).is_none(),
                            "job {job} opened twice");
                    }
                    Decision::Accepted { job, site, amount } => {
                        let (j, s, offer) = bid.unwrap();
                        prop_assert_eq!((job.0, site.0), (j, s));
                        prop_assert!(!m.awarded.contains(&j), "bid accepted after the award of {}", j);
                        let (closes, bids) = m.open.get(&j).cloned().expect("accepted on an open auction");
                        prop_assert!(closes > now, "bid accepted at {:?}, closes {:?}", now, closes);
                        let need = lot(j).procs;
                        prop_assert!(offer.procs >= need);
                        let want = price(&cfg, need, &offer, mean);
                        prop_assert_eq!(*amount, want);
                        prop_assert!(*amount >= cfg.opening_bid);
                        if cfg.overcommit == Overcommit::Reserve {
                            let held: u32 = m.open.iter()
                                .filter(|(k, _)| **k != j)
                                .filter_map(|(_, (_, b))| b.get(&s).filter(|x| !x.lapsed).map(|x| x.need))
                                .sum();
                            prop_assert!(need + held <= offer.capacity,
                                "site {} holds {} elsewhere, offers {} of capacity {}", s, held, need, offer.capacity);
                        }
                        m.seq += 1;
                        let seq = match bids.get(&s) {
                            Some(old) if !old.lapsed && old.amount == *amount => old.seq,
                            _ => m.seq,
                        };
                        m.open.get_mut(&j).unwrap().1.insert(s, Standing { amount: *amount, seq, lapsed: false, need });
                    }
                    Decision::Refused { .. } => {}
                    Decision::Lapsed { job, site } => {
                        prop_assert_eq!(cfg.overcommit, Overcommit::LapseOnAward);
                        let s = m.open.get_mut(&job.0).and_then(|(_, b)| b.get_mut(&site.0)).expect("lapse of a standing bid");
                        s.lapsed = true;
                    }
                    Decision::Rebid { .. } => {}
                    Decision::Awarded { job, site, amount, .. } => {
                        prop_assert!(m.awarded.insert(job.0), "job {} awarded twice", job);
                        let (closes, bids) = m.open.remove(&job.0).expect("award of an open auction");
                        prop_assert!(closes <= now, "awarded before its close");
                        let best = bids.iter().filter(|(_, b)| !b.lapsed).fold(None::<(u32, &Standing)>, |acc, (s, b)| {
                            match acc {
                                None => Some((*s, b)),
                                Some((bs, bb)) => {
                                    let better = b.amount > bb.amount || (b.amount == bb.amount && match cfg.tie {
                                        Tie::LowestSite => *s < bs,
                                        Tie::EarliestBid => b.seq < bb.seq,
                                    });
                                    Some(if better { (*s, b) } else { (bs, bb) })
                                }
                            }
                        });
                        let (bs, bb) = best.expect("an award needs a standing bid");
                        prop_assert_eq!(site.0, bs, "winner is not the best bid under {:?}", cfg.tie);
                        prop_assert_eq!(*amount, bb.amount);
                        prop_assert_eq!(house.winner(*job), Some(*site));
                    }
                    Decision::Unsold { job, .. } => {
                        let (closes, bids) = m.open.remove(&job.0).expect("unsold auction was open");
                        prop_assert!(closes <= now);
                        prop_assert!(bids.values().all(|b| b.lapsed), "unsold with a standing bid");
                    }
                }
            }
            if let AuctionEvent::Cancel(j) = event {
                m.open.remove(&j.0);
            }
            if bid.is_some() && !decisions.iter().any(|d| matches!(d, Decision::Accepted { .. } | Decision::Refused { .. })) {
                prop_assert!(false, "a bid got no answer");
            }
            for (lot, closes) in house.open_auctions() {
                prop_assert!(closes > now, "job {} still open past its close", lot.job);
            }
            let open: BTreeSet<u64> = house.open_auctions().map(|(l, _)| l.job.0).collect();
            let model: BTreeSet<u64> = m.open.keys().copied().collect();
            prop_assert_eq!(open, model);
        }
    }
}
