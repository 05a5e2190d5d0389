//! The auction house: all open auctions of global jobs as one pure state machine.
//!
//! Every event first closes the auctions that are due at `now`, so a bid that arrives at or
//! after its auction's close is refused whatever order the driver delivers events in, and a
//! job is awarded at most once: an awarded job is never reopened.

use super::bid::{price, Offer};
use super::close::{close, Outcome, StandingBid};
use super::config::{AuctionConfig, Overcommit};
use super::tracker::RuntimeTracker;
use super::{Lot, SiteId};
use crate::ids::JobId;
use crate::time::{Dur, Time};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// What drives the house.
#[derive(Clone, Debug, PartialEq)]
pub enum AuctionEvent {
    /// A job entered the global queue: open its auction (idempotent: a job the house already
    /// knows is not opened again).
    Open(Lot),
    /// A site bids (or re-bids: its new bid replaces its standing one, up or down, since bids
    /// track the site's real load).
    Bid {
        /// The job.
        job: JobId,
        /// The bidder.
        site: SiteId,
        /// What it offers.
        offer: Offer,
    },
    /// A site takes back its standing bid (it can no longer run the job now).
    Withdraw {
        /// The job.
        job: JobId,
        /// The site.
        site: SiteId,
    },
    /// A site's load changed (a local arrival or end, a global job ended, it won an auction):
    /// it is asked to re-bid, and jobs waiting unsold are auctioned again.
    LoadChanged(SiteId),
    /// A job finished after running this long: feeds the mean runtime.
    Finished(Dur),
    /// The job left the global queue (cancelled): its auction ends without a winner.
    Cancel(JobId),
    /// Time passed: close what is due.
    Tick,
}

/// Why a bid was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum BidRefusal {
    /// No auction of this job was ever opened.
    UnknownJob,
    /// The job's auction is closed (it waits unsold, or was cancelled).
    Closed,
    /// The job was already awarded.
    Sold,
    /// Fewer processors than the job needs.
    TooFewProcs,
    /// The processors are more than the site's capacity once its standing bids in other open
    /// auctions are held ([`Overcommit::Reserve`]).
    Held,
    /// The bid is below the opening bid (only when one is set).
    BelowOpening,
}

/// What the house announces; the driver acts on it (submit, stage, preempt, invite bids).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Announcement {
    /// An auction opened (or reopened); every site may bid until `closes`.
    Opened {
        /// The job.
        job: JobId,
        /// When it closes.
        closes: Time,
    },
    /// A bid stands at this price.
    Accepted {
        /// The job.
        job: JobId,
        /// The bidder.
        site: SiteId,
        /// Its price.
        amount: f64,
    },
    /// A bid was refused.
    Refused {
        /// The job.
        job: JobId,
        /// The bidder.
        site: SiteId,
        /// Why.
        why: BidRefusal,
    },
    /// A site's standing bid lapsed because it won another auction
    /// ([`Overcommit::LapseOnAward`]); it may bid again.
    Lapsed {
        /// The job.
        job: JobId,
        /// The site.
        site: SiteId,
    },
    /// The site should re-bid in this open auction: its load changed, or an auction it lost
    /// closed and gave back what its bid held there ([`Overcommit::Reserve`]).
    Rebid {
        /// The job.
        job: JobId,
        /// The site.
        site: SiteId,
    },
    /// The auction closed and the job goes to `site`, which submits it to its resource
    /// manager with the offer's processors, then stages the input.
    Awarded {
        /// The job.
        job: JobId,
        /// The winner.
        site: SiteId,
        /// The winning price.
        amount: f64,
        /// The winning offer.
        offer: Offer,
        /// Sites that placed an accepted bid during this auction.
        bidders: usize,
    },
    /// The auction closed without a valid standing bid.
    Unsold {
        /// The job.
        job: JobId,
        /// Sites that placed an accepted bid during this auction (all withdrawn or lapsed).
        bidders: usize,
        /// When it reopens by itself ([`Unsold::Reopen`](super::Unsold::Reopen)); `None`: at
        /// the next load change.
        reopens: Option<Time>,
    },
}

#[derive(Clone, Debug)]
struct Standing {
    offer: Offer,
    amount: f64,
    seq: u64,
    lapsed: bool,
}

#[derive(Clone, Debug)]
struct Auction {
    lot: Lot,
    closes: Time,
    bids: BTreeMap<SiteId, Standing>,
    bidders: BTreeSet<SiteId>,
}

/// The open auctions, the unsold jobs and the awarded ones, with the mean-runtime tracker.
#[derive(Clone, Debug)]
pub struct AuctionHouse {
    cfg: AuctionConfig,
    tracker: RuntimeTracker,
    open: BTreeMap<JobId, Auction>,
    waiting: BTreeMap<JobId, Lot>,
    delayed: BTreeMap<JobId, (Lot, Time)>,
    sold: BTreeMap<JobId, SiteId>,
    cancelled: BTreeSet<JobId>,
    now: Time,
    seq: u64,
}

impl AuctionHouse {
    /// A house with no auctions. `cfg` should be valid ([`AuctionConfig::problems`]).
    pub fn new(cfg: AuctionConfig, tracker: RuntimeTracker) -> AuctionHouse {
        AuctionHouse {
            cfg,
            tracker,
            open: BTreeMap::new(),
            waiting: BTreeMap::new(),
            delayed: BTreeMap::new(),
            sold: BTreeMap::new(),
            cancelled: BTreeSet::new(),
            now: Time(i64::MIN),
            seq: 0,
        }
    }

    /// The options.
    pub fn config(&self) -> &AuctionConfig {
        &self.cfg
    }

    /// The mean runtime the house measures in, seconds.
    pub fn mean_runtime(&self) -> f64 {
        self.tracker.mean()
    }

    /// Open auctions by job, with their lots and closing times, in job order.
    pub fn open_auctions(&self) -> impl Iterator<Item = (&Lot, Time)> {
        self.open.values().map(|a| (&a.lot, a.closes))
    }

    /// The earliest time something is due (a close or a delayed reopen): when the driver
    /// should next deliver [`AuctionEvent::Tick`].
    pub fn next_due(&self) -> Option<Time> {
        let closes = self.open.values().map(|a| a.closes);
        let reopens = self.delayed.values().map(|(_, t)| *t);
        closes.chain(reopens).min()
    }

    /// Processors `site`'s standing bids in open auctions other than `job` hold: what it may
    /// not offer `job` again under [`Overcommit::Reserve`] (always 0 otherwise).
    pub fn held(&self, site: SiteId, job: JobId) -> u32 {
        if self.cfg.overcommit != Overcommit::Reserve {
            return 0;
        }
        self.open
            .iter()
            .filter(|(j, _)| **j != job)
            .filter_map(|(_, a)| a.bids.get(&site).filter(|b| !b.lapsed).map(|_| a.lot.procs))
            .sum()
    }

    /// The winner of `job`, once awarded.
    pub fn winner(&self, job: JobId) -> Option<SiteId> {
        self.sold.get(&job).copied()
    }

    /// Applies one event at `now` (times earlier than the last are taken as the last).
    pub fn handle(&mut self, now: Time, event: AuctionEvent) -> Vec<Announcement> {
        self.now = self.now.max(now);
        let mut out = Vec::new();
        self.close_due(&mut out);
        match event {
            AuctionEvent::Open(lot) => self.open_lot(lot, &mut out),
            AuctionEvent::Bid { job, site, offer } => self.bid(job, site, offer, &mut out),
            AuctionEvent::Withdraw { job, site } => {
                if let Some(a) = self.open.get_mut(&job) {
                    a.bids.remove(&site);
                }
            }
            AuctionEvent::LoadChanged(site) => {
                let waiting = std::mem::take(&mut self.waiting);
                for lot in waiting.into_values() {
                    self.start(lot, &mut out);
                }
                for job in self.open.keys() {
                    out.push(Announcement::Rebid { job: *job, site });
                }
            }
            AuctionEvent::Finished(runtime) => self.tracker.record(runtime),
            AuctionEvent::Cancel(job) => {
                let known = self.open.remove(&job).is_some()
                    || self.waiting.remove(&job).is_some()
                    || self.delayed.remove(&job).is_some();
                if known {
                    self.cancelled.insert(job);
                }
            }
            AuctionEvent::Tick => {}
        }
        out
    }

    fn open_lot(&mut self, lot: Lot, out: &mut Vec<Announcement>) {
        let job = lot.job;
        let known = self.open.contains_key(&job)
            || self.waiting.contains_key(&job)
            || self.delayed.contains_key(&job)
            || self.sold.contains_key(&job)
            || self.cancelled.contains(&job);
        if !known {
            self.start(lot, out);
        }
    }

    fn start(&mut self, lot: Lot, out: &mut Vec<Announcement>) {
        let closes = self.now + self.tracker.fraction(self.cfg.alpha);
        self.open.insert(
            lot.job,
            Auction {
                lot,
                closes,
                bids: BTreeMap::new(),
                bidders: BTreeSet::new(),
            },
        );
        out.push(Announcement::Opened {
            job: lot.job,
            closes,
        });
    }

    fn bid(&mut self, job: JobId, site: SiteId, offer: Offer, out: &mut Vec<Announcement>) {
        let refuse = |why| Announcement::Refused { job, site, why };
        let Some(a) = self.open.get(&job) else {
            let why = if self.sold.contains_key(&job) {
                BidRefusal::Sold
            } else if self.waiting.contains_key(&job)
                || self.delayed.contains_key(&job)
                || self.cancelled.contains(&job)
            {
                BidRefusal::Closed
            } else {
                BidRefusal::UnknownJob
            };
            out.push(refuse(why));
            return;
        };
        let need = a.lot.procs;
        if offer.procs < need {
            out.push(refuse(BidRefusal::TooFewProcs));
            return;
        }
        if need + self.held(site, job) > offer.capacity {
            out.push(refuse(BidRefusal::Held));
            return;
        }
        let amount = price(&self.cfg, need, &offer, self.tracker.mean());
        if !self.cfg.clears_opening(amount) {
            out.push(refuse(BidRefusal::BelowOpening));
            return;
        }
        self.seq += 1;
        let seq = self.seq;
        let a = self
            .open
            .get_mut(&job)
            .expect("invariant: the auction was found above");
        // A re-bid at the same price keeps its place under `Tie::EarliestBid`.
        let seq = match a.bids.get(&site) {
            Some(old) if !old.lapsed && old.amount == amount => old.seq,
            _ => seq,
        };
        a.bids.insert(
            site,
            Standing {
                offer,
                amount,
                seq,
                lapsed: false,
            },
        );
        a.bidders.insert(site);
        out.push(Announcement::Accepted { job, site, amount });
    }

    /// Closes every auction due at `now`, earliest close first, then higher priority, then
    /// lower job id; then reopens delayed jobs that are due.
    fn close_due(&mut self, out: &mut Vec<Announcement>) {
        loop {
            let due = self
                .open
                .values()
                .filter(|a| a.closes <= self.now)
                .min_by_key(|a| (a.closes, std::cmp::Reverse(a.lot.priority), a.lot.job))
                .map(|a| a.lot.job);
            let Some(job) = due else { break };
            let a = self
                .open
                .remove(&job)
                .expect("invariant: the due auction is open");
            self.close(a, out);
        }
        let due: Vec<JobId> = self
            .delayed
            .iter()
            .filter(|(_, (_, t))| *t <= self.now)
            .map(|(j, _)| *j)
            .collect();
        for job in due {
            let (lot, _) = self
                .delayed
                .remove(&job)
                .expect("invariant: the due job is delayed");
            self.start(lot, out);
        }
    }

    fn close(&mut self, a: Auction, out: &mut Vec<Announcement>) {
        let job = a.lot.job;
        let bidders = a.bidders.len();
        let standing: Vec<StandingBid> = a
            .bids
            .iter()
            .filter(|(_, b)| !b.lapsed)
            .map(|(site, b)| StandingBid {
                site: *site,
                amount: b.amount,
                placed: b.seq,
            })
            .collect();
        let site = match close(&self.cfg, self.tracker.mean(), &standing) {
            Outcome::Awarded { site, .. } => site,
            Outcome::Unsold { reopen_after } => {
                let reopens = match reopen_after {
                    None => {
                        self.waiting.insert(job, a.lot);
                        None
                    }
                    Some(delay) => {
                        let at = self.now + delay;
                        self.delayed.insert(job, (a.lot, at));
                        Some(at)
                    }
                };
                out.push(Announcement::Unsold {
                    job,
                    bidders,
                    reopens,
                });
                // A reopen at once happens in this same pass (`close_due` runs the delayed list).
                return;
            }
        };
        let win = a.bids[&site].clone();
        self.sold.insert(job, site);
        out.push(Announcement::Awarded {
            job,
            site,
            amount: win.amount,
            offer: win.offer,
            bidders,
        });
        if self.cfg.overcommit == Overcommit::Reserve {
            // What the losers' bids held here is theirs to offer again: a load change for
            // them, so they re-bid in the auctions still open (where it may have been refused
            // as `Held`).
            for (&loser, _) in a.bids.iter().filter(|(s, b)| **s != site && !b.lapsed) {
                for &other in self.open.keys() {
                    out.push(Announcement::Rebid {
                        job: other,
                        site: loser,
                    });
                }
            }
        }
        if self.cfg.overcommit == Overcommit::LapseOnAward {
            for (other, b) in self.open.iter_mut() {
                if let Some(s) = b.bids.get_mut(&site) {
                    if !s.lapsed {
                        s.lapsed = true;
                        out.push(Announcement::Lapsed { job: *other, site });
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auction::{Tie, Unsold};

    fn lot(job: u64, procs: u32, priority: u8) -> Lot {
        Lot {
            job: JobId(job),
            procs,
            priority,
            home: SiteId(0),
        }
    }

    fn offer(procs: u32, capacity: u32, stage: i64) -> Offer {
        Offer {
            procs,
            capacity,
            preempt_work: 0.0,
            stage: Dur(stage),
        }
    }

    fn house(cfg: AuctionConfig) -> AuctionHouse {
        AuctionHouse::new(cfg, RuntimeTracker::new(10, Dur(100)))
    }

    fn bid(job: u64, site: u32, o: Offer) -> AuctionEvent {
        AuctionEvent::Bid {
            job: JobId(job),
            site: SiteId(site),
            offer: o,
        }
    }

    #[test]
    fn closes_after_alpha_mean_runtimes_and_the_highest_bid_wins() {
        let mut h = house(AuctionConfig {
            alpha: 0.3,
            ..AuctionConfig::default()
        });
        let d = h.handle(Time(0), AuctionEvent::Open(lot(1, 4, 2)));
        assert_eq!(
            d,
            vec![Announcement::Opened {
                job: JobId(1),
                closes: Time(30)
            }]
        );
        // 8/4 − 10/100 = 1.9 against 4/4 − 0 = 1.0; then site 1 re-bids lower (loaded).
        h.handle(Time(5), bid(1, 0, offer(4, 4, 0)));
        h.handle(Time(6), bid(1, 1, offer(8, 8, 10)));
        h.handle(Time(7), bid(1, 2, offer(6, 6, 0)));
        h.handle(Time(8), bid(1, 2, offer(4, 4, 0)));
        assert!(h.handle(Time(29), AuctionEvent::Tick).is_empty());
        let d = h.handle(Time(30), AuctionEvent::Tick);
        assert_eq!(
            d,
            vec![Announcement::Awarded {
                job: JobId(1),
                site: SiteId(1),
                amount: 1.9,
                offer: offer(8, 8, 10),
                bidders: 3,
            }]
        );
        let late = h.handle(Time(30), bid(1, 0, offer(16, 16, 0)));
        assert_eq!(
            late,
            vec![Announcement::Refused {
                job: JobId(1),
                site: SiteId(0),
                why: BidRefusal::Sold
            }]
        );
    }

    #[test]
    fn ties_go_to_the_lowest_site_or_the_earliest_bid() {
        for (tie, want) in [(Tie::LowestSite, 1), (Tie::EarliestBid, 3)] {
            let mut h = house(AuctionConfig {
                tie,
                ..AuctionConfig::default()
            });
            h.handle(Time(0), AuctionEvent::Open(lot(1, 4, 0)));
            h.handle(Time(1), bid(1, 3, offer(4, 4, 0)));
            h.handle(Time(2), bid(1, 1, offer(4, 4, 0)));
            // A repeated equal bid keeps its place.
            h.handle(Time(3), bid(1, 3, offer(4, 4, 0)));
            h.handle(Time(100), AuctionEvent::Tick);
            assert_eq!(h.winner(JobId(1)), Some(SiteId(want)), "{tie:?}");
        }
    }

    #[test]
    fn reserved_processors_are_not_offered_twice() {
        let mut h = house(AuctionConfig::default());
        h.handle(Time(0), AuctionEvent::Open(lot(1, 6, 0)));
        h.handle(Time(0), AuctionEvent::Open(lot(2, 4, 0)));
        h.handle(Time(1), bid(1, 0, offer(8, 8, 0)));
        assert_eq!(h.held(SiteId(0), JobId(2)), 6);
        let d = h.handle(Time(1), bid(2, 0, offer(8, 8, 0)));
        assert_eq!(
            d,
            vec![Announcement::Refused {
                job: JobId(2),
                site: SiteId(0),
                why: BidRefusal::Held
            }]
        );
        // Withdrawn from job 1, the processors are free to offer job 2.
        h.handle(
            Time(2),
            AuctionEvent::Withdraw {
                job: JobId(1),
                site: SiteId(0),
            },
        );
        let d = h.handle(Time(2), bid(2, 0, offer(8, 8, 0)));
        assert!(matches!(d[..], [Announcement::Accepted { .. }]), "{d:?}");
    }

    #[test]
    fn a_lost_auction_gives_back_what_the_losers_bid_held_and_asks_them_to_rebid() {
        let mut h = house(AuctionConfig::default());
        h.handle(Time(0), AuctionEvent::Open(lot(1, 6, 0)));
        h.handle(Time(10), AuctionEvent::Open(lot(2, 4, 0)));
        // Site 0 (8/6) loses job 1 to site 1 (12/6); its bid holds 6 of its 8 meanwhile.
        h.handle(Time(1), bid(1, 0, offer(8, 8, 0)));
        h.handle(Time(2), bid(1, 1, offer(12, 12, 0)));
        let d = h.handle(Time(11), bid(2, 0, offer(8, 8, 0)));
        assert!(
            matches!(
                d[..],
                [Announcement::Refused {
                    why: BidRefusal::Held,
                    ..
                }]
            ),
            "{d:?}"
        );
        let d = h.handle(Time(35), AuctionEvent::Tick);
        assert!(
            matches!(
                d[0],
                Announcement::Awarded {
                    site: SiteId(1),
                    ..
                }
            ),
            "{d:?}"
        );
        let rebids: Vec<_> = d
            .iter()
            .filter(|x| matches!(x, Announcement::Rebid { .. }))
            .collect();
        assert_eq!(
            rebids,
            vec![&Announcement::Rebid {
                job: JobId(2),
                site: SiteId(0)
            }],
            "only the loser re-bids, in the auction still open"
        );
        assert_eq!(h.held(SiteId(0), JobId(2)), 0);
        let d = h.handle(Time(36), bid(2, 0, offer(8, 8, 0)));
        assert!(matches!(d[..], [Announcement::Accepted { .. }]), "{d:?}");
        h.handle(Time(45), AuctionEvent::Tick);
        assert_eq!(h.winner(JobId(2)), Some(SiteId(0)));
    }

    #[test]
    fn a_win_lapses_the_winners_other_bids() {
        let mut h = house(AuctionConfig {
            overcommit: Overcommit::LapseOnAward,
            ..AuctionConfig::default()
        });
        h.handle(Time(0), AuctionEvent::Open(lot(1, 8, 0)));
        h.handle(Time(10), AuctionEvent::Open(lot(2, 8, 0)));
        h.handle(Time(11), bid(1, 0, offer(8, 8, 0)));
        h.handle(Time(11), bid(2, 0, offer(8, 8, 0)));
        h.handle(Time(11), bid(2, 1, offer(8, 8, 50)));
        let d = h.handle(Time(35), AuctionEvent::Tick);
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(matches!(
            d[1],
            Announcement::Lapsed {
                job: JobId(2),
                site: SiteId(0)
            }
        ));
        h.handle(Time(45), AuctionEvent::Tick);
        assert_eq!(h.winner(JobId(2)), Some(SiteId(1)), "site 0's bid lapsed");
    }

    #[test]
    fn unsold_jobs_wait_for_a_load_change_or_reopen_after_a_delay() {
        let mut h = house(AuctionConfig::default());
        h.handle(Time(0), AuctionEvent::Open(lot(1, 4, 0)));
        let d = h.handle(Time(35), AuctionEvent::Tick);
        assert_eq!(
            d,
            vec![Announcement::Unsold {
                job: JobId(1),
                bidders: 0,
                reopens: None
            }]
        );
        assert!(h
            .handle(Time(36), bid(1, 0, offer(4, 4, 0)))
            .contains(&Announcement::Refused {
                job: JobId(1),
                site: SiteId(0),
                why: BidRefusal::Closed
            }));
        // Reopened, then the site whose load changed is asked to bid in it.
        let d = h.handle(Time(50), AuctionEvent::LoadChanged(SiteId(2)));
        assert_eq!(
            d,
            vec![
                Announcement::Opened {
                    job: JobId(1),
                    closes: Time(85)
                },
                Announcement::Rebid {
                    job: JobId(1),
                    site: SiteId(2)
                }
            ]
        );

        let mut h = house(AuctionConfig {
            unsold: Unsold::Reopen { delay: 0.5 },
            ..AuctionConfig::default()
        });
        h.handle(Time(0), AuctionEvent::Open(lot(1, 4, 0)));
        h.handle(Time(35), AuctionEvent::Tick);
        assert_eq!(h.next_due(), Some(Time(85)));
        let d = h.handle(Time(85), AuctionEvent::Tick);
        assert_eq!(
            d,
            vec![Announcement::Opened {
                job: JobId(1),
                closes: Time(120)
            }]
        );
    }

    #[test]
    fn a_site_that_can_run_a_job_only_by_preempting_a_long_one_wins_under_the_defaults() {
        // Mean runtime 100 s. A level-3 job of 4 processors; site 0's only way to run it is
        // to preempt a level-0 job of 4 processors with 1000 s (10 mean runtimes) left; site 1
        // can run nothing of it. Bid = 4/4 − 0.25 × (1 × 4 × 1000)/(4 × 100) = 1 − 2.5 = −1.5.
        use crate::auction::bid::{make_offer, Victim};
        let mut h = house(AuctionConfig::default());
        let top = lot(1, 4, 3);
        h.handle(Time(0), AuctionEvent::Open(top));
        let running = [Victim {
            job: JobId(9),
            priority: 0,
            procs: 4,
            remaining: Dur(1000),
            started: Time(0),
        }];
        let (o, victims) = make_offer(&top, 0, &running, 0, Dur(0)).expect("by preemption");
        assert_eq!(victims, vec![JobId(9)]);
        assert!(make_offer(&top, 2, &[], 0, Dur(0)).is_none());
        let d = h.handle(Time(1), bid(1, 0, o));
        assert_eq!(
            d,
            vec![Announcement::Accepted {
                job: JobId(1),
                site: SiteId(0),
                amount: -1.5
            }]
        );
        let d = h.handle(Time(35), AuctionEvent::Tick);
        assert_eq!(
            d,
            vec![Announcement::Awarded {
                job: JobId(1),
                site: SiteId(0),
                amount: -1.5,
                offer: o,
                bidders: 1,
            }]
        );
    }

    #[test]
    fn staging_longer_than_a_mean_runtime_does_not_keep_a_site_out() {
        // Mean runtime 100 s; a job of 4 processors whose input is on neither site. Site 2
        // offers 8 free processors after 300 s of staging: 8/4 − 300/100 = −1; site 1 offers
        // 4 after 450 s: 4/4 − 4.5 = −3.5. Both bid; the cheaper staging (per processor) wins.
        let mut h = house(AuctionConfig::default());
        h.handle(Time(0), AuctionEvent::Open(lot(1, 4, 0)));
        h.handle(Time(1), bid(1, 1, offer(4, 4, 450)));
        h.handle(Time(2), bid(1, 2, offer(8, 8, 300)));
        let d = h.handle(Time(35), AuctionEvent::Tick);
        assert_eq!(
            d,
            vec![Announcement::Awarded {
                job: JobId(1),
                site: SiteId(2),
                amount: -1.0,
                offer: offer(8, 8, 300),
                bidders: 2,
            }]
        );
    }

    #[test]
    fn a_set_opening_bid_still_refuses_lower_bids() {
        // The seed's minimum price, when configured, keeps its meaning: 0 refuses −1.
        let mut h = house(AuctionConfig {
            opening_bid: Some(0.0),
            ..AuctionConfig::default()
        });
        h.handle(Time(0), AuctionEvent::Open(lot(1, 4, 0)));
        let d = h.handle(Time(1), bid(1, 2, offer(8, 8, 300)));
        assert_eq!(
            d,
            vec![Announcement::Refused {
                job: JobId(1),
                site: SiteId(2),
                why: BidRefusal::BelowOpening
            }]
        );
        let d = h.handle(Time(2), bid(1, 1, offer(4, 4, 0)));
        assert!(
            matches!(d[..], [Announcement::Accepted { amount, .. }] if amount == 1.0),
            "{d:?}"
        );
        h.handle(Time(35), AuctionEvent::Tick);
        assert_eq!(h.winner(JobId(1)), Some(SiteId(1)));
    }

    #[test]
    fn the_auction_lasts_alpha_times_the_tracked_mean_runtime() {
        let mut h = house(AuctionConfig {
            alpha: 0.5,
            ..AuctionConfig::default()
        });
        h.handle(Time(0), AuctionEvent::Finished(Dur(300)));
        h.handle(Time(0), AuctionEvent::Finished(Dur(500)));
        let d = h.handle(Time(10), AuctionEvent::Open(lot(1, 1, 0)));
        assert_eq!(
            d,
            vec![Announcement::Opened {
                job: JobId(1),
                closes: Time(210)
            }]
        );
        assert_eq!(h.mean_runtime(), 400.0);
    }
}
