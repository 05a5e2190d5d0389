//! Slot selection for the lookahead grid planner (seed 000 §5.1): given a plan of slots —
//! `(processor, start, end, cost)` pieces of free or cheap-enough time on many processors of
//! many clusters — find `procs` slots that share a window of the job's length, by a criterion
//! (earliest start, earliest finish on heterogeneous processors, minimum cost).
//!
//! # The linear walk
//! Adjacent suitable slots of one processor are merged into *runs*. Runs are visited in order
//! of their usable start (list A; a cluster's slots become usable only after the job's input
//! is staged there) while a second pointer moves through runs in order of end (list B). For a
//! candidate start `t0` with end `t1 = t0 + T`, a run visited in A is *counted* when it lasts
//! until `t1`; every counted run that B passes because it ends before `t1` is un-counted.
//! Hence `M` = number of suitable runs covering `[t0, t1)`, and the first `t0` with `M ≥ P`
//! is the earliest start. (The seed's pseudo-code also un-counts runs that were never counted;
//! the `counted` flags avoid that.) Both lists come pre-sorted from the plan, so the walk is
//! linear in the number of slots (times the number of clusters' merge, a small constant).
//!
//! # Indexes, and what a commit costs
//! A planning cycle selects and commits thousands of jobs on one plan, so the plan keeps
//! indexes that let a walk start close to its answer and a commit stay local:
//! - slots keep their numbers until a full rebuild; a commit marks the slot it cuts, gives
//!   the part before the used time a new number and lets the part after keep the old one
//!   (its end, so its place in the order by end, is unchanged);
//! - the pieces of commits wait in ordered sets that walks merge in, until they are folded
//!   into the sorted lists (two merges) once they grow past a quarter of them;
//! - marks every `1/256` of the plan's span hold, per processor, the slot containing the
//!   mark and the reach of its chain, and per speed class a histogram of those reaches:
//!   a walk starts at the last mark before a lower bound on its answer (from past answers
//!   of requests asking no more, and from marks where too few processors reach far
//!   enough), with the runs through the mark counted at once; past answers of slower
//!   speed levels count too (their processors are a superset), and a walk stops after
//!   the last mark where enough processors reach far enough (no window starts later);
//! - requests that found no window at all are kept apart per price, as a staircase of
//!   (processors, seconds), so every later request asking at least as much fails in
//!   logarithmic time, without a walk (`SlotPlan::bound_searches(false)` turns every
//!   bound off, to check that none changes an answer);
//! - a skip index over blocks of 256 slots passes over blocks of chains too short for the
//!   job;
//! - list A is kept in up to four tiers of price (each in order of start, merged by the
//!   walk), so a job that cannot afford the dearer slots never reads them.
//!
//! The speed levels of one request are walked side by side (rayon); the decisions are the
//! same as one after the other.
//!
//! # Choosing
//! Among the runs covering `[t0, t1)` the `P` cheapest are taken (cost of the part used),
//! ties to the faster processor, then to the processor id (string order); the job runs for its
//! estimate divided by the slowest chosen speed, rounded up to a whole second.
//!
//! # Layout
//! - `processor`, `request`, `selection`, `error`: the public data ([`Processor`];
//!   [`SlotRequest`], [`Criterion`]; [`Selection`], [`UsedSlot`], [`NoFit`]; [`PlanError`]).
//!   [`Slot`] and [`SlotPlan`] are defined here, with the plan's read-only accessors.
//! - `build`: plan construction: the input checked, slots numbered and linked per
//!   processor, lists A and B, the walks' per-slot data, tiers, the skip index and marks.
//! - `commit`: taking a selection's time out of the plan, folding the pieces of commits into
//!   the lists (re-indexing) and renumbering from scratch (rebuild).
//! - `hot`: what the walks read of each slot, and the part of it the head search reads.
//! - `tier`: list A in tiers of price, its skip index over blocks, and the search for heads.
//! - `mark`: marks in time, and the lower bound on a window's start they give.
//! - `memo`: what selections learn and later ones reuse (lower bounds, usable processors,
//!   walk state); `failed`: the requests that found no window, and those they dominate.
//! - `level`: [`SlotPlan::select`]: requirements, cluster masks and speed levels, and the
//!   best window over them by the criterion.
//! - `earliest`: the earliest-window walk.
//! - `cheapest`: runs, and the candidate windows of the minimum-cost search.
//! - `choice`: the `P` cheapest covering runs of a window, and what they cost.
//! - `reach`: the processors' reach per price, cluster and usable time, kept up to date
//!   through commits, for the reasons of requests that find no window.

mod build;
mod cheapest;
mod choice;
mod commit;
mod earliest;
mod error;
mod failed;
#[cfg(test)]
mod fixture;
mod hot;
mod level;
mod mark;
mod memo;
mod processor;
mod reach;
mod request;
mod selection;
mod tier;

pub use error::PlanError;
pub use processor::Processor;
pub use request::{Criterion, SlotRequest, Staging};
pub use selection::{NoFit, Selection, UsedSlot};

use crate::time::Time;
use hot::{Hot, Scan};
use memo::{Bounds, UsableCache, WalkStates};
use reach::ReachIndex;
use std::collections::BTreeSet;

/// A piece of time on one processor that a global job may take, at a price per
/// processor-second.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slot {
    /// Index of the processor in the plan.
    pub processor: u32,
    /// First second.
    pub start: Time,
    /// First second after.
    pub end: Time,
    /// Price per processor-second.
    pub cost: f64,
}

const NONE: u32 = u32::MAX;

/// Slots of many processors of many clusters, indexed for linear selection.
#[derive(Clone, Debug)]
pub struct SlotPlan {
    processors: Vec<Processor>,
    clusters: Vec<String>,
    /// Cluster index of each processor.
    cluster_of: Vec<u32>,
    /// Every slot ever held, by number: commits add pieces at the end and only mark the
    /// slots they replace, so numbers stay valid until a full rebuild.
    slots: Vec<Slot>,
    /// The next slot of the same processor in time, or `NONE`.
    next: Vec<u32>,
    /// The previous slot of the same processor in time, or `NONE`.
    prev: Vec<u32>,
    /// The slots live at the last re-index, by tier (see `tier_of`), then in order of start
    /// (then end): the walks' list A. Pieces made by commits since are listed in
    /// `extra_start`.
    order: Vec<u32>,
    /// Where each tier's part of `order` begins, and (last) where the last one ends.
    tier_at: Vec<usize>,
    /// Tier of each price rank. A walk reads only the tiers holding ranks it can afford,
    /// so a job with a low price passes over the dearer slots without reading them.
    tier_of: Vec<u32>,
    /// Start of each slot of `order` when it was placed there.
    order_start: Vec<Time>,
    /// Position of each slot in `order`, or `NONE` if it is not there (any more): a slot
    /// a commit shortened at its start or replaced leaves its old place.
    position: Vec<u32>,
    /// The same slots in order of end: list B (ties by start when it was built; a commit
    /// may move a slot's start, never its end).
    by_end: Vec<u32>,
    /// First slot of each processor in time, or `NONE`.
    head: Vec<u32>,
    /// False for slots replaced by [`SlotPlan::commit`].
    alive: Vec<bool>,
    /// Pieces created by commits since the last re-index, by tier then start and by end
    /// (ties by the other bound, then number); walks merge them in, so a commit costs no
    /// full re-sort.
    extra_start: BTreeSet<(u32, Time, Time, u32)>,
    extra_end: BTreeSet<(Time, Time, u32)>,
    /// Slots replaced since the last re-index.
    dead: usize,
    /// Slots live now.
    live: usize,
    /// Distinct slot costs, ascending: a request's price becomes a rank limit once, so the
    /// walks compare small integers instead of reading costs.
    costs: Vec<f64>,
    /// Per slot, what the earliest-window walk reads (see [`Hot`]).
    hot: Vec<Hot>,
    /// Per slot, the end of the adjacent slots from it no dearer than it, or earlier (see
    /// [`Scan::reach_low`]).
    low_end: Vec<Time>,
    /// End of each slot of `by_end`, in the same order: the walk in order of end reads
    /// this array in sequence.
    by_end_time: Vec<Time>,
    /// Processor of each slot of `by_end`, in the same order.
    by_end_proc: Vec<u32>,
    /// What the search for heads reads of each slot of `order`, in that order (kept in step
    /// with `hot` by commits), a quarter of a [`Hot`].
    scan: Vec<Scan>,
    /// The processors' distinct speeds, fastest first.
    speeds: Vec<f64>,
    /// Speed of each processor, by index (read once per speed level of every selection).
    speed_of: Vec<f64>,
    /// Per block of [`BLOCK`](tier::BLOCK) slots of `order`: the longest chain any of them
    /// begins, seconds. Commits only shorten chains, so this stays an upper bound until the
    /// next re-index, and the walk passes over a block whose chains are all shorter than the
    /// job without reading it.
    block_reach: Vec<i64>,
    /// Marks in time: mark `c` is at `mark_base + c × mark_step`, and `marks[c × P + p]`
    /// is the live slot of processor `p` that contains that second, or `NONE`. A walk
    /// that knows no window starts before a mark begins there: the runs that contain the
    /// mark are counted at once, and the pass over heads starts at the mark.
    marks: Vec<u32>,
    /// In the same layout, seconds from the mark to the end of the chain of adjacent slots
    /// through it (at most `u32::MAX`; 0 without a slot): a walk reads it to pass over the
    /// processors that cannot last the job from the mark without reading their slots.
    mark_reach: Vec<u32>,
    /// Per mark and speed class (index in `speeds`), how many processors have a reach in
    /// each band of `mark_step` seconds (`reach / mark_step`, the last band open-ended);
    /// processors with no slot at the mark are left out. Kept exact under commits. Any
    /// window of at least `mark_step` seconds contains a mark, and its processors reach
    /// from there to the window's end: marks where too few could are passed over at once.
    mark_bands: Vec<u32>,
    /// Speed class of each processor.
    speed_class: Vec<u32>,
    /// Place of each processor in order of id: the last tie-break of the choice, compared
    /// as a number rather than as a string.
    id_rank: Vec<u32>,
    mark_base: Time,
    mark_step: i64,
    n_marks: usize,
    /// Earliest starts found by past selections: a lower bound for later ones.
    bounds: Bounds,
    /// Usable processors per set of usable clusters and speed level, for requests any
    /// processor meets.
    usable: UsableCache,
    /// Per-processor state of earliest-window walks, kept for the next ones rather than
    /// allocated and cleared for each: a walk takes one, leaves it as it found it (no
    /// processor counted) and gives it back.
    walk_states: WalkStates,
    /// The processors' reach per price, cluster and usable time, for the reasons of
    /// requests that find no window (see [`ReachIndex`]).
    reach: ReachIndex,
}

impl SlotPlan {
    /// The slots still in the plan, in no particular order.
    pub fn live_slots(&self) -> impl Iterator<Item = &Slot> {
        self.slots
            .iter()
            .zip(&self.alive)
            .filter(|(_, a)| **a)
            .map(|(s, _)| s)
    }

    /// The processors, by index.
    pub fn processors(&self) -> &[Processor] {
        &self.processors
    }

    /// The cluster names, by index.
    pub fn clusters(&self) -> &[String] {
        &self.clusters
    }

    /// The cluster index of a cluster name.
    pub fn cluster_index(&self, name: &str) -> Option<usize> {
        self.clusters.iter().position(|c| c == name)
    }

    /// Whether selections bound their walks by what is known without walking (the
    /// default): past selections' results and the marks. The answers are the same, only
    /// slower without; the switch is there to check that.
    pub fn bound_searches(&mut self, on: bool) {
        self.bounds.set_kept(on);
    }

    /// Every slot ever held, including those replaced by [`SlotPlan::commit`] (see
    /// [`SlotPlan::live_slots`]); indices of [`Slot`]s are positions here.
    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }
}
