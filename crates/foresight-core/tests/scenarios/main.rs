//! Hand-checked scenarios of the scheduling core: exact starts of small workloads under each
//! policy, prediction, preemption and the broker.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

#[path = "../common/mod.rs"]
mod common;

mod broker_predict;
mod grid_predict;
mod policies;
mod predict;
mod preempt;
mod preempt_ask;
mod preempt_fixture;
