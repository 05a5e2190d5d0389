//! Decentralized mode (seed 001): every global job is sold by an English auction in which the
//! sites' dispatchers are the buyers and pay with processors they can give it now.
//!
//! - [`config`]: every option the seed leaves open, named, with its default.
//! - [`bid`]: a site's [`Offer`] computed from its load, and its price
//!   (processors − preemption − staging).
//! - [`close`](mod@close): how an auction ends: the one pure choice of winner ([`winner`], [`close()`])
//!   that the house and the dispatchers' shared queue both make.
//! - [`tracker`]: the online mean runtime of recently finished jobs, the auction's unit.
//! - [`house`]: [`AuctionHouse`], the auctions as one state machine: events in (open, bid,
//!   withdraw, load change, job finished, tick), [`Announcement`]s out. A dispatcher process and
//!   the simulator drive the same house; it never reads a clock.
//!
//! Priorities are absolute: higher numbers are more important, and a site may offer the
//! processors of running global jobs of strictly lower priority (they are preempted, keep
//! their progress and resume later); local jobs are never offered.

pub mod bid;
pub mod close;
pub mod config;
pub mod house;
pub mod tracker;

pub use bid::{make_offer, price, Offer, Victim};
pub use close::{close, winner, Outcome, StandingBid};
pub use config::{AuctionConfig, BidWeights, Overcommit, ProcsCap, Tie, Unsold};
pub use house::{Announcement, AuctionEvent, AuctionHouse, BidRefusal};
pub use tracker::RuntimeTracker;

use crate::ids::JobId;
use serde::{Deserialize, Serialize};

crate::define_id!(
    /// A site (one installation and its dispatcher) in the decentralized mode.
    SiteId,
    u32
);

/// A job on sale: what bidders need to know to make an offer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lot {
    /// The job.
    pub job: JobId,
    /// Processors it needs (rigid).
    pub procs: u32,
    /// Its absolute priority (higher is more important).
    pub priority: u8,
    /// The site holding its input data.
    pub home: SiteId,
}
