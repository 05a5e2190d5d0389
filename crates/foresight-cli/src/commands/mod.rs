//! One module per noun.
pub mod plan;
pub mod sim;
