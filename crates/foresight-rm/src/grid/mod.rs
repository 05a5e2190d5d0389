//! How a site on another host joins a central service: the site connects out to the centre
//! (its firewall need admit only outbound HTTPS), fetches the commands queued for it, answers
//! them, and pushes its clusters' snapshots. At the centre each lent cluster is a
//! [`SiteCluster`], a [`ResourceManager`](crate::ResourceManager) whose calls become
//! [`Command`]s in the site's [`Mailbox`]; at the site a [`CentreClient`] carries them.
//! The design and its reasons: `docs/src/sites-across-hosts.md`.
//!
//! # Layout
//! - this file: the messages both sides exchange ([`Hello`], [`Command`], [`Op`], [`Answer`],
//!   [`Reply`], [`SiteSnapshot`]).
//! - `mailbox`: [`Mailbox`], the centre's queue of commands for one site, their answers, and
//!   the site's latest snapshots.
//! - `site`: [`SiteCluster`], a site's cluster as the centre drives it.
//! - `client`: [`CentreClient`], the site's side of the HTTP exchange.
//! - `files`: [`FileOffer`], input files a site fetches from its centre, and [`Wanted`],
//!   a part's files the site sends up to it; both ranged and sha256-checked.
//! - [`sign`]: the requests' signatures and the centre's check of them.

mod client;
mod files;
mod mailbox;
pub mod sign;
mod site;

pub use client::CentreClient;
pub use files::{
    check_relative, escaped, hash_of, receive, receive_at, upload, FileOffer, Received, SentFile,
    Wanted, PARTIAL,
};
pub use mailbox::Mailbox;
pub use site::SiteCluster;

use crate::manager::{ClusterState, PartHandle, ReserveRequest, Submission};
use serde::{Deserialize, Serialize};

/// The header naming the site a request comes from; its token must be that site's.
pub const SITE_HEADER: &str = "x-foresight-site";

/// The longest a site's long poll for commands is held open, seconds.
pub const MAX_WAIT_SECS: u64 = 25;

/// The most output bytes one answer carries; a reader asks again from where it stopped.
pub const MAX_OUTPUT_CHUNK: usize = 4 << 20;

/// What a site says when it connects: the clusters it lends and how much of each.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The site's name (the subject of its credential).
    pub site: String,
    /// Its lent clusters.
    pub clusters: Vec<LentCluster>,
}

/// One cluster a site lends to the grid.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LentCluster {
    /// Its name at the site.
    pub name: String,
    /// Its processors.
    pub processors: u32,
    /// The most processors grid jobs may hold there at once.
    pub lend: u32,
}

/// The centre's answer to a [`Hello`]: how the site must name the centre's parts and
/// reservations (the names the centre recognises in snapshots).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Welcome {
    /// The centre's instance name (its parts are `<instance>-<job>.<attempt>`).
    pub instance: String,
    /// The parts the centre still wants from this site, by name: the site cancels every
    /// other grid part that has not started (the centre planned it elsewhere while the site
    /// was out of reach) and lets these start.
    #[serde(default)]
    pub parts: Vec<String>,
    /// The centre's lease of this site, seconds (the shortest of its clusters'): a site out
    /// of contact for half of it holds its grid parts that have not started, since past it
    /// the centre may plan them elsewhere.
    #[serde(default = "default_lease_seconds")]
    pub lease_seconds: u64,
    /// The mailbox the site talks to, by a number drawn when it was made: a site fetches
    /// and answers commands naming it, and a centre that restarted (or a standby that took
    /// over) refuses the old one, so that the site says hello again and fetches its new
    /// mailbox from its first command rather than after the old one's last.
    #[serde(default)]
    pub mailbox: u64,
}

fn default_lease_seconds() -> u64 {
    30
}

/// One command the centre queued for a site.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Command {
    /// Its number in the site's mailbox (increasing); the answer names it.
    pub seq: u64,
    /// The cluster at the site it is for.
    pub cluster: String,
    /// What to do.
    pub op: Op,
}

/// What a command asks. Each one that changes state carries its key (a reservation id, a
/// part's job and attempt): the site carries out a repeated command once and answers it
/// again, so a lost answer never books processors or starts a part twice.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// Hold an advance reservation for the grid.
    Reserve {
        /// What to hold.
        request: ReserveRequest,
        /// The processors are held by jobs just suspended for this one.
        over_suspended: bool,
    },
    /// Give a reservation back.
    Release {
        /// The centre's reservation id.
        reservation: u64,
    },
    /// Submit a part, bound to its reservation.
    Submit {
        /// The part.
        submission: Submission,
    },
    /// Cancel a part.
    Cancel {
        /// The part.
        part: PartHandle,
    },
    /// Stop a running part, keeping its processors.
    Suspend {
        /// The part.
        part: PartHandle,
    },
    /// Continue a suspended part.
    Resume {
        /// The part.
        part: PartHandle,
    },
    /// Queue a part again.
    Requeue {
        /// The part.
        part: PartHandle,
    },
    /// Move a reservation (and the part bound to it) earlier.
    Move {
        /// The reservation's new window.
        to: ReserveRequest,
        /// Its part, when submitted.
        part: Option<PartHandle>,
    },
    /// A part's output from a byte on.
    Output {
        /// The part.
        part: PartHandle,
        /// Its standard error rather than its standard output.
        stderr: bool,
        /// From this byte.
        offset: u64,
    },
    /// Fetch a part's input files from the centre (`GET /grid/v1/files/...`) before its
    /// submission; the part then runs in the directory they land in. Repeated, it fetches
    /// only what is missing (a partial file resumes where it stopped).
    Fetch {
        /// The part they are for.
        part: PartHandle,
        /// The files.
        files: Vec<FileOffer>,
        /// How long the centre waits for them, milliseconds (its `copy_timeout_seconds`):
        /// the site gives up then rather than go on fetching what no one waits for.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        within_ms: Option<u64>,
    },
    /// Send files of a part's working directory up to the centre
    /// (`PUT /grid/v1/files/...`, ranged): its outputs and its workflow edges' files, once
    /// it ended. A file the part did not write is left out of the answer, not an error.
    Send {
        /// The part.
        part: PartHandle,
        /// The files, each from the byte the centre already holds.
        files: Vec<Wanted>,
        /// How long the centre waits for them, milliseconds: the site gives up then.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        within_ms: Option<u64>,
    },
    /// When the site would start a job submitted now.
    Estimate {
        /// Processors.
        procs: u32,
        /// Seconds.
        walltime: i64,
    },
}

impl Op {
    /// A few words for logs and errors.
    pub fn describe(&self) -> String {
        match self {
            Op::Reserve { request, .. } => format!("reserve {}", request.id),
            Op::Release { reservation } => format!("release reservation {reservation}"),
            Op::Submit { submission } => format!(
                "submit job {}.{}",
                submission.spec.job, submission.spec.attempt
            ),
            Op::Cancel { part } => format!("cancel job {}.{}", part.job, part.attempt),
            Op::Suspend { part } => format!("suspend job {}.{}", part.job, part.attempt),
            Op::Resume { part } => format!("resume job {}.{}", part.job, part.attempt),
            Op::Requeue { part } => format!("requeue job {}.{}", part.job, part.attempt),
            Op::Move { to, .. } => format!("move reservation {}", to.id),
            Op::Output { part, .. } => format!("output of job {}.{}", part.job, part.attempt),
            Op::Fetch { part, files, .. } => format!(
                "fetch {} input files of job {}.{}",
                files.len(),
                part.job,
                part.attempt
            ),
            Op::Send { part, files, .. } => format!(
                "send {} files of job {}.{}",
                files.len(),
                part.job,
                part.attempt
            ),
            Op::Estimate { procs, walltime } => format!("estimate {procs} x {walltime} s"),
        }
    }
}

/// What a site did with a command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Reply {
    /// Done (or already done: a repeated command).
    Done,
    /// The part was submitted: its handle there.
    Submitted {
        /// The handle.
        part: PartHandle,
    },
    /// Output bytes (at most [`MAX_OUTPUT_CHUNK`]); `None` when the site has none for it.
    Output {
        /// The bytes.
        bytes: Option<Vec<u8>>,
    },
    /// A part's inputs are at the site: `bytes` came over the network in `millis` (what
    /// was there already did not), which measures the link.
    Fetched {
        /// Bytes transferred.
        bytes: u64,
        /// Milliseconds the transfers took.
        millis: u64,
    },
    /// A part's files are at the centre: those the part wrote, each whole and checked;
    /// `bytes` went over the network in `millis`.
    Sent {
        /// The files sent.
        files: Vec<SentFile>,
        /// Bytes transferred.
        bytes: u64,
        /// Milliseconds the transfers took.
        millis: u64,
    },
    /// The site's estimate of a start, Unix seconds.
    Estimate {
        /// `None`: no opinion.
        start: Option<i64>,
    },
    /// Refused, and why. `unreachable`: the site could not reach its own resource manager
    /// (the cluster is then taken as unavailable, as a Slurm cluster whose commands fail).
    Refused {
        /// Why.
        message: String,
        /// The cluster itself was out of reach.
        unreachable: bool,
    },
}

/// A site's answer to one command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// The command's number.
    pub seq: u64,
    /// What came of it.
    pub reply: Reply,
}

/// One lent cluster as the site's resource manager sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteSnapshot {
    /// Its name at the site.
    pub cluster: String,
    /// Its state.
    pub state: ClusterState,
}
