//! Simulation of the decentralized mode (seed 001): sites with local streams and a global
//! stream of prioritised jobs sold by English auctions, run by the same
//! [`AuctionHouse`](foresight_core::auction::AuctionHouse) a dispatcher drives.
//!
//! - [`config`]: the experiment (`auction.toml`), every open assumption a field.
//! - [`workload`]: the seeded streams (Poisson arrivals, lognormal runtimes, power-of-two
//!   sizes).
//! - [`run`]: one run's event loop, [`run::run`].
//! - [`sweep`](mod@sweep): α × seeds, means with Student-t 95 % intervals.
//! - [`lookahead`]: the same streams under the centralized lookahead broker, for comparison.
//! - [`plot`]: response per priority and participation against α (SVG).

pub mod config;
pub mod lookahead;
pub mod plot;
pub mod run;
pub mod sweep;
pub mod workload;

pub use config::AuctionSimConfig;
pub use run::RunResult;
pub use sweep::{lookahead_rows, parse_alphas, sweep, AlphaRow, Estimate, SweepReport};
