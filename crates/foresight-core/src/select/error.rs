//! What a plan refuses to be built from.

use crate::time::Time;
use thiserror::Error;

/// What a plan refuses to be built from.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum PlanError {
    /// Two processors share a name.
    #[error("processor {0:?} is listed twice")]
    DuplicateProcessor(String),
    /// A processor's speed is not a positive number.
    #[error("processor {id:?}: speed must be positive, got {speed}")]
    BadSpeed {
        /// The processor.
        id: String,
        /// Its speed.
        speed: f64,
    },
    /// A slot names no known processor.
    #[error("slot {index}: unknown processor {processor:?}")]
    UnknownProcessor {
        /// Position of the slot in the input.
        index: usize,
        /// The name it gave.
        processor: String,
    },
    /// A slot names a processor by an index past the processors.
    #[error("slot {index}: processor index {processor} is out of range ({processors} processors)")]
    ProcessorOutOfRange {
        /// Position of the slot in the input.
        index: usize,
        /// The index it gave.
        processor: u32,
        /// How many processors there are.
        processors: usize,
    },
    /// A slot ends before it starts.
    #[error("slot {index}: end {end} is not after start {start}")]
    EmptySlot {
        /// Position of the slot in the input.
        index: usize,
        /// Its start.
        start: Time,
        /// Its end.
        end: Time,
    },
    /// A slot's cost is negative or not a number.
    #[error("slot {index}: cost must be a non-negative number, got {cost}")]
    BadCost {
        /// Position of the slot in the input.
        index: usize,
        /// Its cost.
        cost: f64,
    },
    /// Two slots of one processor overlap.
    #[error(
        "processor {processor:?}: slots [{a_start}, {a_end}) and [{b_start}, {b_end}) overlap"
    )]
    Overlap {
        /// The processor.
        processor: String,
        /// First slot's start.
        a_start: Time,
        /// First slot's end.
        a_end: Time,
        /// Second slot's start.
        b_start: Time,
        /// Second slot's end.
        b_end: Time,
    },
}
