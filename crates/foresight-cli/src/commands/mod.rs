//! One module per noun.
pub mod sim;
