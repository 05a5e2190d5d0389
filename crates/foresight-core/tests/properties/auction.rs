//! The auction house on random interleavings of opens, bids (duplicate, late, too small,
//! over capacity), withdrawals, load changes, finished jobs, cancellations and ticks from
//! several sites. Checked after every event against an independent model: at most one award
//! per job, ever; an award goes to the highest standing valid bid under the tie rule, at its
//! price; no bid is accepted after its auction's close or after an award; under
//! `Overcommit::Reserve` no site's standing bids hold more processors than it said it has;
//! and no auction is left open past its close.
//!
//! And without an opening bid (the default), the price never vetoes: every offer a site's
//! load allows ([`make_offer`]) is accepted, however much preemption or staging it costs, so
//! a job some site can run now (if need be by preempting lower priorities) is always sold.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

use foresight_core::auction::{
    make_offer, price, Announcement, AuctionConfig, AuctionEvent, AuctionHouse, BidWeights, Lot,
    Offer, Overcommit, ProcsCap, RuntimeTracker, SiteId, Tie, Unsold, Victim,
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
        prop_oneof![
            Just(None),
            Just(Some(0.0)),
            Just(Some(0.8)),
            Just(Some(f64::NEG_INFINITY))
        ],
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
                Op::Withdraw(j, s) => (AuctionEvent::Withdraw { job: JobId(j), site: SiteId(s) }, None),
                Op::Load(s) => (AuctionEvent::LoadChanged(SiteId(s)), None),
                Op::Finished(r) => (AuctionEvent::Finished(Dur(r)), None),
                Op::Cancel(j) => (AuctionEvent::Cancel(JobId(j)), None),
                Op::Tick => (AuctionEvent::Tick, None),
            };
            let announced = house.handle(now, event.clone());
            for d in &announced {
                match d {
                    Announcement::Opened { job, closes } => {
                        prop_assert!(*closes > now, "opened {job} closing at {closes:?} <= now");
                        prop_assert!(!m.awarded.contains(&job.0), "awarded job {job} reopened");
                        prop_assert!(m.open.insert(job.0, (*closes, BTreeMap::new())).is_none(),
                            "job {job} opened twice");
                    }
                    Announcement::Accepted { job, site, amount } => {
                        let (j, s, offer) = bid.unwrap();
                        prop_assert_eq!((job.0, site.0), (j, s));
                        prop_assert!(!m.awarded.contains(&j), "bid accepted after the award of {}", j);
                        let (closes, bids) = m.open.get(&j).cloned().expect("accepted on an open auction");
                        prop_assert!(closes > now, "bid accepted at {:?}, closes {:?}", now, closes);
                        let need = lot(j).procs;
                        prop_assert!(offer.procs >= need);
                        let want = price(&cfg, need, &offer, mean);
                        prop_assert_eq!(*amount, want);
                        prop_assert!(cfg.opening_bid.is_none_or(|min| *amount >= min));
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
                    Announcement::Refused { .. } => {}
                    Announcement::Lapsed { job, site } => {
                        prop_assert_eq!(cfg.overcommit, Overcommit::LapseOnAward);
                        let s = m.open.get_mut(&job.0).and_then(|(_, b)| b.get_mut(&site.0)).expect("lapse of a standing bid");
                        s.lapsed = true;
                    }
                    Announcement::Rebid { .. } => {}
                    Announcement::Awarded { job, site, amount, .. } => {
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
                    Announcement::Unsold { job, .. } => {
                        let (closes, bids) = m.open.remove(&job.0).expect("unsold auction was open");
                        prop_assert!(closes <= now);
                        prop_assert!(bids.values().all(|b| b.lapsed), "unsold with a standing bid");
                    }
                }
            }
            match event {
                AuctionEvent::Cancel(j) => {
                    m.open.remove(&j.0);
                }
                // The house closes what is due (and lapses bids of the winners) before it
                // withdraws, so the model withdraws after the announcements: from a live
                // auction only, as the house does.
                AuctionEvent::Withdraw { job, site } => {
                    if let Some((_, bids)) = m.open.get_mut(&job.0) {
                        bids.remove(&site.0);
                    }
                }
                _ => {}
            }
            if bid.is_some() && !announced.iter().any(|d| matches!(d, Announcement::Accepted { .. } | Announcement::Refused { .. })) {
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

/// A site's fixed load: free processors, running global jobs, and the staging time of each job.
#[derive(Clone, Debug)]
struct Load {
    free: u32,
    running: Vec<Victim>,
    stage: Vec<i64>,
}

fn loads(jobs: usize) -> impl Strategy<Value = Vec<Load>> {
    let site = (
        0u32..24,
        // Remaining runtimes up to 10^5 mean runtimes: preemption far dearer than processors.
        prop::collection::vec((0u8..4, 1u32..16, 1i64..10_000_000), 0..5),
        prop::collection::vec(prop_oneof![Just(0i64), 1i64..100_000_000], jobs),
    )
        .prop_map(|(free, vs, stage)| Load {
            free,
            running: vs
                .into_iter()
                .enumerate()
                .map(|(k, (priority, procs, remaining))| Victim {
                    job: JobId(1000 + k as u64),
                    priority,
                    procs,
                    remaining: Dur(remaining),
                    started: Time(k as i64),
                })
                .collect(),
            stage,
        });
    prop::collection::vec(site, 1..5)
}

fn no_minimum() -> impl Strategy<Value = AuctionConfig> {
    // The default `Overcommit::Reserve`: under `LapseOnAward` a site may offer the same
    // processors in two auctions closing at once and keep neither, by design.
    (
        prop_oneof![Just(Tie::LowestSite), Just(Tie::EarliestBid)],
        prop_oneof![Just(ProcsCap::Uncapped), Just(ProcsCap::Need)],
        prop_oneof![
            Just(BidWeights::default()),
            (0.0f64..4.0, 0.0f64..4.0, 0.0f64..4.0).prop_map(|(procs, preempt, stage)| {
                BidWeights {
                    procs,
                    preempt,
                    stage,
                }
            }),
        ],
    )
        .prop_map(|(tie, procs_cap, weights)| AuctionConfig {
            tie,
            procs_cap,
            weights,
            ..AuctionConfig::default()
        })
}

/// Every site bids in `lot`'s auction what its load allows now (as a dispatcher does when an
/// auction opens); returns the prices of the offers made.
fn bid_all(
    house: &mut AuctionHouse,
    now: Time,
    lot: &Lot,
    sites: &[Load],
    out: &mut Vec<Announcement>,
) -> Vec<(u32, f64)> {
    let mut made = Vec::new();
    for (s, load) in sites.iter().enumerate() {
        let site = SiteId(s as u32);
        let held = house.held(site, lot.job);
        let stage = Dur(load.stage[lot.job.0 as usize]);
        if let Some((offer, _)) = make_offer(lot, load.free, &load.running, held, stage) {
            let p = price(house.config(), lot.procs, &offer, house.mean_runtime());
            made.push((site.0, p));
            out.extend(house.handle(
                now,
                AuctionEvent::Bid {
                    job: lot.job,
                    site,
                    offer,
                },
            ));
        }
    }
    made
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn without_an_opening_bid_a_job_some_site_can_run_is_sold(
        cfg in no_minimum(),
        lots in prop::collection::vec((1u32..32, 0u8..4, 0i64..200), 1..6),
        sites in loads(6),
    ) {
        prop_assert_eq!(cfg.opening_bid, None, "the default");
        let opens_at = lots.clone();
        let lots: Vec<Lot> = lots
            .iter()
            .enumerate()
            .map(|(j, &(procs, priority, _))| Lot {
                job: JobId(j as u64),
                procs,
                priority,
                home: SiteId(0),
            })
            .collect();
        let mut opens: Vec<(i64, usize)> =
            opens_at.iter().enumerate().map(|(j, &(_, _, t))| (t, j)).collect();
        opens.sort();
        let mut house = AuctionHouse::new(cfg.clone(), RuntimeTracker::new(8, Dur(100)));
        // Per job: the offers made in its auction (site, price), and how it ended.
        let mut offers: BTreeMap<u64, Vec<(u32, f64)>> = BTreeMap::new();
        let mut ended: BTreeMap<u64, Vec<Announcement>> = BTreeMap::new();
        let mut todo: Vec<(Time, Announcement)> = Vec::new();
        let mut times: Vec<Time> = opens.iter().map(|(t, _)| Time(*t)).collect();
        times.push(Time(1_000_000));
        for (k, now) in times.into_iter().enumerate() {
            let event = match opens.get(k) {
                Some((_, j)) => AuctionEvent::Open(lots[*j]),
                None => AuctionEvent::Tick,
            };
            todo.extend(house.handle(now, event).into_iter().map(|d| (now, d)));
            while let Some((now, d)) = todo.pop() {
                let mut more = Vec::new();
                match &d {
                    Announcement::Opened { job, .. } => {
                        let made = bid_all(&mut house, now, &lots[job.0 as usize], &sites, &mut more);
                        offers.entry(job.0).or_default().extend(made);
                    }
                    Announcement::Refused { job, site, why } => {
                        prop_assert!(false, "site {} refused in the auction of {}: {:?}", site, job, why);
                    }
                    Announcement::Awarded { job, .. } | Announcement::Unsold { job, .. } => {
                        ended.entry(job.0).or_default().push(d.clone());
                    }
                    Announcement::Lapsed { .. } => prop_assert!(false, "a lapse under Reserve: {:?}", d),
                    Announcement::Accepted { .. } | Announcement::Rebid { .. } => {}
                }
                todo.extend(more.into_iter().map(|d| (now, d)));
            }
        }
        prop_assert!(house.open_auctions().next().is_none(), "every auction closed");
        for lot in &lots {
            let j = lot.job.0;
            let made = offers.get(&j).cloned().unwrap_or_default();
            let end = ended.get(&j).cloned().unwrap_or_default();
            prop_assert_eq!(end.len(), 1, "job {} closed once: {:?}", j, end);
            match (&end[0], made.is_empty()) {
                (Announcement::Awarded { site, amount, .. }, false) => {
                    let best = made.iter().map(|(_, p)| *p).fold(f64::NEG_INFINITY, f64::max);
                    prop_assert_eq!(*amount, best, "job {}: the best offer wins", j);
                    prop_assert!(made.iter().any(|(s, p)| *s == site.0 && *p == best));
                    prop_assert_eq!(house.winner(lot.job), Some(*site));
                }
                (Announcement::Unsold { bidders: 0, .. }, true) => {}
                (d, _) => prop_assert!(false, "job {}: {:?} after offers {:?}", j, d, made),
            }
        }
    }
}
