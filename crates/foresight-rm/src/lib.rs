//! Adapters to local resource managers. Today: the local process executor, which runs each
//! job as a real process group under a small detached supervisor, so jobs outlive the daemon.
//!
//! # Layout
//! - `executor`: [`LocalExecutor`], the daemon's side: launch, cancel, suspend/resume, outcome,
//!   adoption after a restart, and the channel of [`Finished`] events.
//! - `supervisor`: [`supervise`], the body of the hidden `foresight supervise DIR` command that
//!   runs and polices one attempt, whether or not the daemon is alive.
//! - `layout`: the attempt directory `root/<job>.<attempt>/`, the only contract between the two.
//! - `spec`: the data exchanged: [`LaunchSpec`], [`Outcome`], [`Finished`], [`Adoption`].
//! - [`account`]: the Unix accounts jobs run as, when the daemon is root.
//! - `cgroup`: [`Confinement`] of jobs, a cgroup v2 per attempt or the session sweep.
//! - `error`: [`ExecError`].
//! - `manager`: [`ResourceManager`], the one interface the service has to any cluster, and
//!   the data it exchanges ([`ClusterState`], [`Submission`], [`PartHandle`], ...).
//! - `local`: [`LocalCluster`], the [`ResourceManager`] of a cluster run by the local executor.
//! - [`slurm`]: the Slurm adapter: [`SlurmCluster`], the [`ResourceManager`] of a Slurm
//!   cluster, over [`SlurmClient`] (Slurm's commands run per cluster, their command lines built
//!   from typed requests, their outputs parsed).
//! - [`grid`]: a site on another host, joined over the network: the messages, the centre's
//!   mailbox per site, [`grid::SiteCluster`] (a site's cluster at the centre) and the site's
//!   [`grid::CentreClient`].
//! - [`wiki`]: Maui's WIKI interface both ways: a server through which Maui or Moab schedules
//!   a cluster ([`wiki::serve`] over a [`wiki::WikiBackend`]), and [`wiki::WikiClient`] to
//!   drive any WIKI resource manager; framing, checksum and message syntax as Maui 3.x has them.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod account;
mod cgroup;
pub mod clock;
mod error;
mod executor;
pub mod grid;
mod layout;
mod local;
mod manager;
pub mod slurm;
mod spec;
mod supervisor;
pub mod wiki;

pub use cgroup::{Confined, Confinement};
pub use error::ExecError;
pub use executor::LocalExecutor;
pub use local::LocalCluster;
pub use manager::{
    BookedPart, ClusterState, PartHandle, ReserveRequest, ResourceManager, RmError, RmJob,
    RmJobState, RmReservation, Submission,
};
pub use slurm::{SlurmClient, SlurmCluster, SlurmError};
pub use spec::{Adoption, Finished, LaunchSpec, Outcome};
pub use supervisor::{exec_job, job_environment, supervise, DEFAULT_JOB_PATH};
pub use wiki::WikiCluster;

/// The tokio this crate is built against, re-exported so that callers without their own tokio
/// dependency (the CLI's integration tests) can run the executor's async API.
#[doc(hidden)]
pub use tokio;
