//! Property tests of the scheduling core on random workloads: profiles, policies, selection,
//! commits, forecasts, the broker and its priorities, auctions, licences and workflow mapping.
//! One binary for all of them; each module is one subject.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

#[path = "../common/mod.rs"]
mod common;
#[path = "../levels_check/mod.rs"]
mod levels_check;

mod auction;
mod broker;
mod commit;
mod forecast;
mod grid_licences;
mod licences;
mod no_price;
mod offer;
mod past_results;
mod policies;
mod preempt;
mod profile;
mod select;
mod workflow;
