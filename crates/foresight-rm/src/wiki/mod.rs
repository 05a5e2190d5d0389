//! Maui's WIKI interface, both ways: a server that lets Maui (or Moab) schedule a cluster
//! Foresight runs, and a client that lets Foresight drive any WIKI resource manager.
//!
//! The protocol is the one the real Maui 3.x speaks (seed 002 §6, DESIGN.md "Wire formats"):
//! one request per TCP connection; a frame of 8 size digits, `\n`, then
//! `CK=<16 hex> TS=<epoch> AUTH=<user> DT=<message>`, checksummed with a key shared with Maui
//! (`configure --with-key=N`); requests `CMD=GETNODES|GETJOBS|STARTJOB|CANCELJOB|SUSPENDJOB|
//! RESUMEJOB ARG=...`; replies `SC=<int>` with `ARG=<count>#<id>:<ATTR>=<VAL>;...` lists or a
//! text.
//!
//! # Layout
//! - `frame`: [`Frame`], [`Key`], [`checksum`] (CRC-16/XMODEM and Maui's pseudo-DES mix),
//!   [`read_frame`], and the limits ([`MAX_FRAME_BYTES`], [`MAX_SKEW_SECS`]).
//! - `message`: [`Request`] and [`Reply`], parsed from and rendered to a frame's `DT=`.
//! - `record`: [`NodeRecord`], [`JobRecord`], their states and the list syntax.
//! - `server`: [`serve`], [`WikiServerConfig`], the [`WikiBackend`] trait a cluster
//!   implements, [`respond`] and [`check_tasklist`].
//! - `client`: [`WikiClient`].
//! - `mirror`, `dispatch`, `estimate`, `route`, `cluster`: the scheduler side,
//!   [`WikiCluster`]: a WIKI resource manager as a [`crate::ResourceManager`] Foresight
//!   schedules (records → forecast, which jobs to `STARTJOB` where, when a job submitted now
//!   would start, how Foresight's jobs reach its queue and their output comes back:
//!   [`SubmitRoute`]).
//! - `error`: [`WikiError`], [`BackendError`].
//!
//! # Choices where Maui's behaviour decides
//! - Reply texts go as `RESPONSE=<text> RSP=<text>`: Maui 3.x reads only `RSP=` (everything
//!   after it), Moab's documents write `RESPONSE=`; `RSP=` last gives every reader the text.
//! - Record attributes all end with `;`, `STATE` comes first, and attributes without a value
//!   are left out: Maui's parser crashes or reads past the value otherwise (see `record`).
//! - A request is refused (`SC=-1`, logged) for a peer not in the list, a size field that is
//!   not 8 digits or is 0 or over 2 MiB, a request not complete within the read timeout, a
//!   bad checksum, a timestamp more than an hour off, an unknown command, a malformed
//!   argument, or the backend's refusal (unknown job or node, busy or unknown processors).

mod client;
mod cluster;
mod dispatch;
mod error;
mod estimate;
#[cfg(test)]
mod fixture;
mod frame;
mod message;
mod mirror;
mod record;
mod route;
mod server;

pub use client::WikiClient;
pub use cluster::WikiCluster;
pub use dispatch::{starts, Start};
pub use error::{BackendError, WikiError};
pub use estimate::estimate_start;
pub use frame::{
    checksum, crc16, mix, parse_size, read_frame, Frame, Key, HEADER_BYTES, MAX_FRAME_BYTES,
    MAX_SKEW_SECS,
};
pub use message::{CancelType, Reply, ReplyKind, Request, Selection, MAX_RESPONSE_CHARS};
pub use mirror::{cluster_state, free_slots, processors, rm_job, OurPart};
pub use record::{
    parse_jobs, parse_nodes, render_jobs, render_nodes, ClassSlots, JobRecord, JobState,
    NodeRecord, NodeState,
};
pub use route::SubmitRoute;
pub use server::{check_tasklist, respond, serve, WikiBackend, WikiServerConfig};
