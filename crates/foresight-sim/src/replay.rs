//! Replaying a trace file while it is still being read: one thread inflates and parses the
//! file and converts records to jobs, the caller's thread simulates them as they come. On a
//! two-core machine reading then costs almost nothing on top of the simulation.

use crate::prediction::Prediction;
use crate::runner::{simulate_stream_with, simulate_with, SimError, SimOutput};
use crate::swf::{self, Limits, SwfError, Trace};
use crate::workload::{Converter, Semantics, SimJob, Skipped, Workload};
use foresight_core::Policy;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver};
use thiserror::Error;

/// Why a trace could not be replayed.
#[derive(Debug, Error)]
pub enum ReplayError {
    /// The trace could not be read.
    #[error(transparent)]
    Trace(#[from] SwfError),
    /// Neither `--procs` nor the header gives the machine size.
    #[error("{0}: the header has neither MaxProcs nor MaxNodes; give --procs")]
    NoMachineSize(String),
    /// The machine size is zero.
    #[error("the machine size must be at least 1 processor")]
    NoProcessors,
    /// The simulation failed.
    #[error(transparent)]
    Sim(#[from] SimError),
}

/// A replayed trace: the schedule, the trace as read, and the machine size used.
#[derive(Debug)]
pub struct Replay {
    /// The schedule and its metrics.
    pub output: SimOutput,
    /// Every record and the header, for writing the schedule back as SWF.
    pub trace: Trace,
    /// Processors simulated.
    pub procs: u32,
    /// Records left out, by reason (their total is `output.metrics.skipped`).
    pub skipped: Skipped,
}

enum Message {
    /// The machine size, once the header is known; always the first message.
    Procs(u32),
    Jobs(Vec<SimJob>),
}

struct ReaderResult {
    trace: Trace,
    skipped: Skipped,
    cut_at_estimate: u64,
}

/// Simulates the trace at `path` on `procs` processors (default: the header's size).
pub fn replay(
    path: &Path,
    procs: Option<u32>,
    lenient: bool,
    policy: &Policy,
    semantics: Semantics,
    progress: &mut dyn FnMut(usize),
) -> Result<Replay, ReplayError> {
    replay_with(
        path,
        procs,
        lenient,
        Limits::default(),
        policy,
        semantics,
        &Prediction::default(),
        progress,
    )
}

/// [`replay`] within `limits`, with runtime predictions (and, if asked, runs past the
/// estimate kept).
#[allow(clippy::too_many_arguments)]
pub fn replay_with(
    path: &Path,
    procs: Option<u32>,
    lenient: bool,
    limits: Limits,
    policy: &Policy,
    semantics: Semantics,
    prediction: &Prediction,
    progress: &mut dyn FnMut(usize),
) -> Result<Replay, ReplayError> {
    let overrun = prediction.overrun;
    let (tx, rx) = sync_channel::<Message>(64);
    let owned: PathBuf = path.to_path_buf();
    let reader = std::thread::spawn(move || -> Result<ReaderResult, ReplayError> {
        let mut reader = swf::open(&owned)?.lenient(lenient).limits(limits);
        let name = owned.display().to_string();
        let size = |header: &swf::SwfHeader| -> Result<u32, ReplayError> {
            let from_header = match procs {
                Some(_) => None,
                None => header.machine_size().map_err(SwfError::from)?,
            };
            match procs.or(from_header) {
                Some(0) => Err(ReplayError::NoProcessors),
                Some(p) => Ok(p),
                None => Err(ReplayError::NoMachineSize(name.clone())),
            }
        };
        let mut records = Vec::with_capacity(1 << 16);
        let mut conv: Option<Converter> = None;
        let mut batch = Vec::with_capacity(1024);
        // Once the simulator stops listening the rest is still read: the caller may need
        // the whole trace (to sort it, or to write the schedule back).
        let mut listening = true;
        while let Some(record) = reader.next_record() {
            let record = record?;
            let conv = match &mut conv {
                Some(c) => c,
                None => {
                    let p = size(reader.header())?;
                    listening = tx.send(Message::Procs(p)).is_ok();
                    conv.insert(Converter::new(p, semantics).overrun(overrun))
                }
            };
            if let Some(job) = conv.convert(&record, records.len()) {
                batch.push(job);
            }
            records.push(record);
            if batch.len() == 1024 && listening {
                let full = std::mem::replace(&mut batch, Vec::with_capacity(1024));
                listening = tx.send(Message::Jobs(full)).is_ok();
            }
        }
        let conv = match conv {
            Some(c) => c,
            None => {
                let p = size(reader.header())?;
                let _ = tx.send(Message::Procs(p));
                Converter::new(p, semantics).overrun(overrun)
            }
        };
        if listening && !batch.is_empty() {
            let _ = tx.send(Message::Jobs(batch));
        }
        Ok(ReaderResult {
            trace: Trace {
                header: reader.header().clone(),
                records,
                malformed: reader.malformed(),
                first_malformed: reader.first_skipped_error().map(str::to_string),
            },
            skipped: conv.skipped,
            cut_at_estimate: conv.cut_at_estimate,
        })
    });
    let first = rx.recv();
    let streamed = match first {
        Ok(Message::Procs(p)) => Some((p, stream(&rx, p, policy, semantics, prediction, progress))),
        _ => None,
    };
    drop(rx);
    let read = reader
        .join()
        .expect("invariant: the reader thread does not panic")?;
    let (procs, output) = match streamed {
        Some((p, Ok(mut output))) => {
            output.metrics.skipped = read.skipped.total();
            output.metrics.cut_at_estimate = read.cut_at_estimate;
            (p, output)
        }
        // A trace not sorted by submission: sort it, then simulate.
        Some((p, Err(SimError::Unsorted { .. }))) => {
            let conv = Converter::new(p, semantics).overrun(overrun);
            let w = Workload::from_trace_with(&read.trace, conv);
            (
                p,
                simulate_with(&w, p, policy, semantics, prediction, progress)?,
            )
        }
        Some((_, Err(e))) => return Err(e.into()),
        None => unreachable!("the reader sends the size before finishing successfully"),
    };
    Ok(Replay {
        output,
        trace: read.trace,
        procs,
        skipped: read.skipped,
    })
}

fn stream(
    rx: &Receiver<Message>,
    procs: u32,
    policy: &Policy,
    semantics: Semantics,
    prediction: &Prediction,
    progress: &mut dyn FnMut(usize),
) -> Result<SimOutput, SimError> {
    let jobs = rx.iter().flat_map(|m| match m {
        Message::Jobs(jobs) => jobs,
        Message::Procs(_) => Vec::new(),
    });
    simulate_stream_with(jobs, procs, policy, semantics, prediction, progress)
}
