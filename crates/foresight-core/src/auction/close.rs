//! How an auction ends: the one choice of winner, as a pure function of the standing bids,
//! that the simulator's [`AuctionHouse`](super::AuctionHouse) and the dispatchers' shared
//! queue both make, so that `sim auction` measures what the dispatchers run.

use super::config::{AuctionConfig, Tie};
use super::SiteId;
use crate::time::Dur;
use serde::Serialize;
use std::cmp::Ordering;

/// A standing bid as its auction closes: only what the choice of winner reads.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct StandingBid {
    /// The bidder.
    pub site: SiteId,
    /// Its price.
    pub amount: f64,
    /// When it was placed, as an order: smaller is earlier (a re-bid at the same price keeps
    /// its place). Only [`Tie::EarliestBid`] reads it; equal places go to the lower site id.
    pub placed: u64,
}

/// How an auction closes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum Outcome {
    /// The job goes to `site`, whose standing bid priced `amount`.
    Awarded {
        /// The winner.
        site: SiteId,
        /// The winning price.
        amount: f64,
        /// How many bids were valid (at or above the opening bid), the winner's included.
        valid_bids: usize,
    },
    /// No valid standing bid.
    Unsold {
        /// How long after the close the job is auctioned again
        /// ([`Unsold::Reopen`](super::Unsold::Reopen)); `None`: at the next load change
        /// ([`Unsold::Wait`](super::Unsold::Wait)).
        reopen_after: Option<Dur>,
    },
}

/// The winning bid: the highest of those at or above the opening bid (all of them without
/// one), equal highest prices decided by `tie` (lowest site id, or earliest placed then
/// lowest site id). `None` when no bid is valid. The order of `bids` does not matter.
pub fn winner(tie: Tie, opening_bid: Option<f64>, bids: &[StandingBid]) -> Option<&StandingBid> {
    bids.iter()
        .filter(|b| clears(opening_bid, b.amount))
        .min_by(|a, b| rank(tie, a, b))
}

/// Whether a bid at `amount` clears the opening bid (always, without one), as
/// [`AuctionConfig::clears_opening`] says.
fn clears(opening_bid: Option<f64>, amount: f64) -> bool {
    opening_bid.is_none_or(|min| amount >= min)
}

/// The order of preference: `Less` for the bid that wins over the other.
fn rank(tie: Tie, a: &StandingBid, b: &StandingBid) -> Ordering {
    let price = b.amount.total_cmp(&a.amount);
    match tie {
        Tie::LowestSite => price.then(a.site.cmp(&b.site)),
        Tie::EarliestBid => price
            .then(a.placed.cmp(&b.placed))
            .then(a.site.cmp(&b.site)),
    }
}

/// Closes an auction on `bids` under `cfg`: the [`winner`], or the job is unsold and, under
/// [`Unsold::Reopen`](super::Unsold::Reopen), reopens after its delay in mean runtimes
/// (`mean_runtime`, seconds) rounded to whole seconds.
pub fn close(cfg: &AuctionConfig, mean_runtime: f64, bids: &[StandingBid]) -> Outcome {
    match winner(cfg.tie, cfg.opening_bid, bids) {
        Some(b) => Outcome::Awarded {
            site: b.site,
            amount: b.amount,
            valid_bids: bids
                .iter()
                .filter(|b| clears(cfg.opening_bid, b.amount))
                .count(),
        },
        None => Outcome::Unsold {
            reopen_after: cfg.unsold.reopen_after(mean_runtime),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auction::Unsold;

    fn bid(site: u32, amount: f64, placed: u64) -> StandingBid {
        StandingBid {
            site: SiteId(site),
            amount,
            placed,
        }
    }

    fn cfg(tie: Tie, unsold: Unsold, opening_bid: Option<f64>) -> AuctionConfig {
        AuctionConfig {
            tie,
            unsold,
            opening_bid,
            ..AuctionConfig::default()
        }
    }

    fn site(o: Outcome) -> Option<u32> {
        match o {
            Outcome::Awarded { site, .. } => Some(site.0),
            Outcome::Unsold { .. } => None,
        }
    }

    #[test]
    fn the_highest_bid_wins_whatever_the_order() {
        let bids = [bid(2, 1.0, 1), bid(0, 1.5, 2), bid(1, -3.0, 3)];
        for tie in [Tie::LowestSite, Tie::EarliestBid] {
            let mut b = bids;
            for _ in 0..bids.len() {
                b.rotate_left(1);
                let o = close(&cfg(tie, Unsold::Wait, None), 100.0, &b);
                assert_eq!(
                    o,
                    Outcome::Awarded {
                        site: SiteId(0),
                        amount: 1.5,
                        valid_bids: 3
                    },
                    "{tie:?} {b:?}"
                );
            }
        }
    }

    #[test]
    fn ties_go_to_the_lowest_site_id_or_the_earliest_bid() {
        struct Case {
            name: &'static str,
            tie: Tie,
            bids: Vec<StandingBid>,
            want: u32,
        }
        let cases = [
            Case {
                name: "lowest site, placed later",
                tie: Tie::LowestSite,
                bids: vec![bid(3, 2.0, 1), bid(1, 2.0, 5), bid(0, 1.0, 0)],
                want: 1,
            },
            Case {
                name: "lowest site ignores the order given",
                tie: Tie::LowestSite,
                bids: vec![bid(1, 2.0, 5), bid(3, 2.0, 1)],
                want: 1,
            },
            Case {
                name: "earliest bid, higher site",
                tie: Tie::EarliestBid,
                bids: vec![bid(1, 2.0, 5), bid(3, 2.0, 1), bid(0, 1.0, 0)],
                want: 3,
            },
            Case {
                name: "earliest bid, equal places: lowest site",
                tie: Tie::EarliestBid,
                bids: vec![bid(4, 2.0, 7), bid(2, 2.0, 7), bid(3, 2.0, 9)],
                want: 2,
            },
            Case {
                name: "a negative tie",
                tie: Tie::LowestSite,
                bids: vec![bid(9, -0.5, 0), bid(8, -0.5, 1)],
                want: 8,
            },
        ];
        for c in cases {
            let o = close(&cfg(c.tie, Unsold::Wait, None), 100.0, &c.bids);
            assert_eq!(site(o), Some(c.want), "{}", c.name);
            let w = winner(c.tie, None, &c.bids).expect(c.name);
            assert_eq!(w.site, SiteId(c.want), "{}", c.name);
        }
    }

    #[test]
    fn without_a_valid_bid_the_job_waits_or_reopens_after_its_delay() {
        struct Case {
            name: &'static str,
            unsold: Unsold,
            opening_bid: Option<f64>,
            bids: Vec<StandingBid>,
            want: Option<Dur>,
        }
        let below = vec![bid(0, -0.1, 0), bid(1, -2.0, 1)];
        let cases = [
            Case {
                name: "no bid, wait",
                unsold: Unsold::Wait,
                opening_bid: None,
                bids: vec![],
                want: None,
            },
            Case {
                name: "all below the opening bid, wait",
                unsold: Unsold::Wait,
                opening_bid: Some(0.0),
                bids: below.clone(),
                want: None,
            },
            Case {
                name: "no bid, reopen after 0.25 mean runtimes",
                unsold: Unsold::Reopen { delay: 0.25 },
                opening_bid: None,
                bids: vec![],
                want: Some(Dur(25)),
            },
            Case {
                name: "all below the opening bid, reopen at once",
                unsold: Unsold::Reopen { delay: 0.0 },
                opening_bid: Some(0.0),
                bids: below.clone(),
                want: Some(Dur(0)),
            },
            Case {
                name: "reopen rounds to whole seconds",
                unsold: Unsold::Reopen { delay: 0.014 },
                opening_bid: Some(0.0),
                bids: below,
                want: Some(Dur(1)),
            },
        ];
        for c in cases {
            for tie in [Tie::LowestSite, Tie::EarliestBid] {
                let o = close(&cfg(tie, c.unsold, c.opening_bid), 100.0, &c.bids);
                assert_eq!(
                    o,
                    Outcome::Unsold {
                        reopen_after: c.want
                    },
                    "{} ({tie:?})",
                    c.name
                );
                assert_eq!(winner(tie, c.opening_bid, &c.bids), None, "{}", c.name);
            }
        }
    }

    #[test]
    fn a_bid_at_the_opening_bid_is_valid() {
        let bids = [bid(1, 0.0, 0), bid(0, -0.0001, 0)];
        let o = close(&cfg(Tie::LowestSite, Unsold::Wait, Some(0.0)), 100.0, &bids);
        assert_eq!(
            o,
            Outcome::Awarded {
                site: SiteId(1),
                amount: 0.0,
                valid_bids: 1
            }
        );
    }
}
