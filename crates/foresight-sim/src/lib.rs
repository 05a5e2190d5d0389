//! The trace simulator of Foresight.
//!
//! It replays a workload (an SWF trace from the Parallel Workloads Archive, or a seeded
//! synthetic stream) through `foresight-core`'s [`LocalScheduler`](foresight_core::LocalScheduler)
//! in virtual time, exactly as the service drives it in real time, and measures the result.
//!
//! # Layout
//! - [`swf`]: streaming SWF reader (plain or gzip) with precise errors, and writer.
//! - [`workload`]: trace records → jobs under a [`Semantics`]; synthetic workloads.
//! - [`runner`]: the event loop, [`simulate`].
//! - [`auction`]: the decentralized mode: sites bidding for prioritised global jobs in English
//!   auctions (seed 001), swept over the auction's length.
//! - [`grid`]: several clusters, local streams and a global stream, brokered by the lookahead
//!   planner or a baseline.
//! - [`metrics`]: mean wait, response, slowdown, bounded slowdown, utilization, makespan.
//! - [`output`]: the per-job schedule as CSV or SWF.
//! - [`prediction`]: runtime prediction settings and the statistics key of a job.
//! - [`replay`]: simulating a trace file while another thread is still reading it.
//! - [`sweep`]: traces × policies × options, run in parallel.
//! - [`plot`]: SVG figures of a run, a grid run or a sweep.
//! - [`input`]: whole input files (configurations, workflows) read within a bound.
//! - [`stats`]: means with confidence intervals over seeded repetitions.
//! - [`workflow`]: seeded workflows of standard shapes mapped by DSC, HEFT and greedy onto a
//!   grid with trace-driven local load.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod auction;
pub mod grid;
pub mod input;
pub mod metrics;
pub mod output;
pub mod plot;
pub mod prediction;
pub mod replay;
pub mod runner;
pub mod stats;
pub mod sweep;
pub mod swf;
pub mod workflow;
pub mod workload;

pub use metrics::{ClassMetrics, Metrics};
pub use prediction::Prediction;
pub use runner::{
    simulate, simulate_licensed, simulate_stream, simulate_stream_with, simulate_with, Outcome,
    SimError, SimOutput,
};
pub use swf::{SwfError, SwfReader, SwfRecord, Trace};
pub use workload::{Converter, LicenceDemand, Semantics, SimJob, Workload};
