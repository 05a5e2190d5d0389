//! The pure scheduling library of Foresight.
//!
//! Nothing in this crate reads a clock, touches a file or a socket, or draws random numbers:
//! `now` is always a parameter and decisions come back as data. The trace simulator and the
//! service call exactly this code, so a policy measured in simulation is the policy that runs.
//!
//! # Layout
//! - [`time`]: integer seconds, [`Time`], [`Dur`], [`Interval`].
//! - [`ids`]: typed identifiers.
//! - [`job`]: the rigid parallel job and its credentials.
//! - [`licence`]: licence pools held in time like processors.
//! - [`licence_plan`]: licence pools as the grid planner holds them.
//! - [`profile`]: the availability profile (free processors over time).
//! - [`reservation`]: administrative advance reservations and their ACLs.
//! - [`policy`]: local policies as one algorithm parameterised by order, reservation depth
//!   and backfill choice; [`priority`]: Maui-style multi-factor priority and fairshare.
//! - [`predict`]: runtime predictions from finished runs, and their correction.
//! - [`scheduler`]: [`LocalScheduler`], the entry point: events in, actions out.
//! - [`forecast`]: a cluster's future as the grid planner's slots (the resource agent).
//! - [`grid`]: the metascheduler's planning cycle over all clusters.
//! - [`auction`]: the decentralized mode's English auctions of global jobs (seed 001), one
//!   state machine for a dispatcher and the simulator.
//! - [`broker`]: the lifecycle of global jobs around the planning cycle, one state machine
//!   for the service and the simulator (two-phase reservation, charging, work conservation).
//! - [`select`]: the grid planner's slot plan and linear slot selection (co-allocation,
//!   earliest start / finish / minimum cost).
//! - [`workflow`]: DAGs of tasks mapped onto the clusters' free time (DSC, HEFT, greedy).
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod auction;
pub mod broker;
pub mod error;
pub mod forecast;
pub mod grid;
pub mod ids;
pub mod job;
pub mod licence;
pub mod licence_plan;
pub mod policy;
pub mod predict;
pub mod priority;
pub mod profile;
mod queue;
pub mod reservation;
pub mod scheduler;
pub mod select;
mod shortest;
pub mod time;
pub mod workflow;

pub use error::{CoreError, Result};
pub use ids::{AccountId, ClassId, ClusterId, GroupId, JobId, QosId, ReservationId, UserId};
pub use job::{Credentials, Job};
pub use policy::{BackfillChoice, BackfillMetric, BackfillOrder, Policy, QueueOrder};
pub use profile::{FirstFree, Horizons, Profile};
pub use reservation::{Acl, AdminReservation};
pub use scheduler::{Action, Domain, Event, JobStatus, LocalScheduler, Placement};
pub use time::{Dur, Interval, Time};
