//! Peer dispatchers and the PostgreSQL store, end to end: real `foresight` processes on one
//! throwaway PostgreSQL server (started once for this binary by `foresight-testkit`). The test
//! that restarts that server is a binary of its own (`peer_restart`).
#![allow(clippy::unwrap_used)] // tests fail loudly by design

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/peer.rs"]
mod peer;

mod budgets;
mod centre_failover;
mod dispatchers;
mod grid_view;
mod live_auctions;
mod peer_inputs;
mod postgres_store;
mod preempt;
mod promise;
mod requests;
