//! The state of the service and every change to it, without I/O of its own: the
//! [`world::World`] (jobs, clusters' mirrors, reservations, users, workflows) under one
//! lock, the refusals it answers with, the limits a request must keep, the dependency and
//! gate rules, and which staging copies a plan needs. It reads no clock (every change takes
//! `now`) and talks to no resource manager: it returns effects, which `runtime` carries out.
//!
//! What it still reads: the password database, for the Unix account a user's jobs run as
//! (`world::accounts`).

pub(crate) mod dependency;
pub(crate) mod limits;
pub(crate) mod moment;
pub(crate) mod plan_view;
pub mod refusal;
pub(crate) mod staging;
pub(crate) mod stored;
pub mod table;
#[doc(hidden)]
pub mod world;
