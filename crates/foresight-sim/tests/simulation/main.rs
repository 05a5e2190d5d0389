//! Tests of the simulators: trace replays against the reference results, the grid with its
//! brokers, priorities, licences and predictions, auctions and workflows. One binary for all
//! of them; each module is one subject.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

mod auction;
mod grid;
mod grid_levels;
mod grid_licences;
mod grid_predict;
mod licences;
mod prediction;
mod reference_traces;
mod simulator;
mod workflow;
