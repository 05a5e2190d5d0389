//! Helpers for tests only (a dev-dependency, never a dependency of production code).
//!
//! - [`postgres`]: a throwaway PostgreSQL server, started once per test binary, with a fresh
//!   database per test.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod postgres;
