//! One module per noun.
pub mod client;
pub mod plan;
pub mod server;
pub mod sim;
pub mod sim_sweep;
