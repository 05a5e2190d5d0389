//! One module per noun.
pub mod accounting;
pub mod cacert;
pub mod client;
pub mod docs;
pub mod plan;
pub mod server;
pub mod sim;
pub mod sim_auction;
pub mod sim_sweep;
pub mod sim_workflow;
pub mod tail;
pub mod workflow;
