//! The service against real Slurm clusters (`FORESIGHT_SLURM_CONFS`, see
//! `scripts/local-slurm.sh`); every test skips without them.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

#[path = "../common/mod.rs"]
mod common;

/// One scenario at a time, across both modules: they share the clusters.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

mod preempt;
mod service;
