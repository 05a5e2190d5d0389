//! Errors of the core: invalid input and requests that can never be satisfied. A job that
//! merely cannot run *yet* is not an error; `LocalScheduler::explain` says why it waits.

use crate::ids::{JobId, ReservationId};
use crate::time::Time;
use thiserror::Error;

/// What the core refuses, and why.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CoreError {
    /// The job asks for more processors than the cluster has; it could never start.
    #[error("job {job} asks for {procs} processors but the cluster has only {capacity}")]
    TooLarge {
        /// The job.
        job: JobId,
        /// Processors asked for.
        procs: u32,
        /// The largest number the cluster can ever give.
        capacity: u32,
    },
    /// A field of the job is out of range.
    #[error("job {job}: {field} {reason}")]
    InvalidJob {
        /// The job.
        job: JobId,
        /// The offending field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A job with this id is already known.
    #[error("job {0} was already submitted")]
    DuplicateJob(JobId),
    /// No such job is waiting or running.
    #[error("job {0} is not waiting or running here")]
    UnknownJob(JobId),
    /// The job is known but not running, so it cannot finish.
    #[error("job {0} is not running")]
    NotRunning(JobId),
    /// No such administrative reservation.
    #[error("reservation {0} does not exist")]
    UnknownReservation(ReservationId),
    /// The reservation's ACL does not admit the job bound to it.
    #[error("reservation {reservation} does not admit job {job}")]
    NotAdmitted {
        /// The job.
        job: JobId,
        /// The reservation it asked for.
        reservation: ReservationId,
    },
    /// The reservation can never hold the job (too few processors or too short a window).
    #[error("reservation {reservation} cannot hold job {job}: {reason}")]
    DoesNotFit {
        /// The job.
        job: JobId,
        /// The reservation.
        reservation: ReservationId,
        /// Why not.
        reason: String,
    },
    /// A reservation would take processors that are already promised.
    #[error("reservation {reservation} needs {procs} processors from {start} but only {free} are free then")]
    ReservationConflict {
        /// The reservation refused.
        reservation: ReservationId,
        /// Processors it asked for.
        procs: u32,
        /// Its start.
        start: Time,
        /// The fewest processors free during its window.
        free: i64,
    },
    /// A reservation cannot hold the licences asked for its window.
    #[error("reservation {reservation}: {reason}")]
    LicencesUnavailable {
        /// The reservation.
        reservation: ReservationId,
        /// Which pool, how many asked and how many free.
        reason: String,
    },
    /// A job runs in the reservation, so its window cannot move.
    #[error("reservation {reservation} cannot move: job {job} runs in it")]
    ReservationInUse {
        /// The reservation.
        reservation: ReservationId,
        /// The job running in it.
        job: JobId,
    },
    /// The reservation id is taken.
    #[error("reservation {0} already exists")]
    DuplicateReservation(ReservationId),
}

/// Result alias of the core.
pub type Result<T> = std::result::Result<T, CoreError>;
