//! End-to-end tests of `foresight sim`: trace replays, grids, auctions, workflows,
//! predictions and pictures, run through the binary.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

mod auction;
mod grid;
mod pictures;
mod predict;
mod run;
mod workflow;
