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
//!   enough), with the runs through the mark counted at once;
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

use crate::time::{Dur, Time};
use itertools::{Either, Itertools};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::sync::Arc;
use thiserror::Error;

/// A processor the plan can place work on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Processor {
    /// Unique name, e.g. `c1/p0`.
    pub id: String,
    /// The cluster it belongs to.
    pub cluster: String,
    /// Speed relative to the reference processor (1.0).
    #[serde(default = "one")]
    pub speed: f64,
    /// Memory, MB.
    #[serde(default)]
    pub memory_mb: u64,
    /// Features (architecture, OS, installed software, …).
    #[serde(default)]
    pub features: BTreeSet<String>,
}

fn one() -> f64 {
    1.0
}

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

const NONE: u32 = u32::MAX;

/// The processors' clusters, numbered in order of first appearance.
struct ProcessorIndex<'a> {
    /// Processor index by name.
    by_name: std::collections::HashMap<&'a str, u32>,
    clusters: Vec<String>,
    /// Cluster of each processor.
    cluster_of: Vec<u32>,
}

/// Checks the processors (unique names, positive speeds) and indexes them.
fn index_processors(processors: &[Processor]) -> Result<ProcessorIndex<'_>, PlanError> {
    let mut by_name = std::collections::HashMap::with_capacity(processors.len());
    let mut clusters: Vec<String> = Vec::new();
    let mut cluster_of = Vec::with_capacity(processors.len());
    for (i, p) in processors.iter().enumerate() {
        if by_name.insert(p.id.as_str(), i as u32).is_some() {
            return Err(PlanError::DuplicateProcessor(p.id.clone()));
        }
        if !(p.speed > 0.0 && p.speed.is_finite()) {
            return Err(PlanError::BadSpeed {
                id: p.id.clone(),
                speed: p.speed,
            });
        }
        let c = match clusters.iter().position(|c| *c == p.cluster) {
            Some(c) => c,
            None => {
                clusters.push(p.cluster.clone());
                clusters.len() - 1
            }
        };
        cluster_of.push(c as u32);
    }
    Ok(ProcessorIndex {
        by_name,
        clusters,
        cluster_of,
    })
}

/// Checks slot `k` of the input on its own: a known processor, not empty, a usable cost.
fn check_slot(k: usize, slot: &Slot, processors: usize) -> Result<(), PlanError> {
    if slot.processor as usize >= processors {
        return Err(PlanError::ProcessorOutOfRange {
            index: k,
            processor: slot.processor,
            processors,
        });
    }
    if slot.end <= slot.start {
        return Err(PlanError::EmptySlot {
            index: k,
            start: slot.start,
            end: slot.end,
        });
    }
    if !(slot.cost >= 0.0 && slot.cost.is_finite()) {
        return Err(PlanError::BadCost {
            index: k,
            cost: slot.cost,
        });
    }
    Ok(())
}

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
    /// Per block of [`BLOCK`] slots of `order`: the longest chain any of them begins,
    /// seconds. Commits only shorten chains, so this stays an upper bound until the next
    /// re-index, and the walk passes over a block whose chains are all shorter than the job
    /// without reading it.
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
}

/// Walk states kept for reuse; a cloned plan starts without any.
#[derive(Debug, Default)]
struct WalkStates(Memo<Vec<WalkState>>);

impl Clone for WalkStates {
    fn clone(&self) -> WalkStates {
        WalkStates::default()
    }
}

/// Per processor: the end of its counted run, and its place among the counted runs.
type WalkState = (Vec<Time>, Vec<u32>);

/// One set of usable processors: `(usable clusters, speed level's bits, flags)`.
type UsableEntry = (Vec<bool>, u64, Arc<[bool]>);

/// Usable-processor flags already computed. Commits do not change which processors exist,
/// so entries stay valid for the plan's life.
#[derive(Clone, Debug, Default)]
struct UsableCache(Memo<Vec<UsableEntry>>);

/// What selections learn and later ones reuse: selections take the plan by shared
/// reference (the speed levels run side by side), so it sits behind a lock; a cloned plan
/// starts from a copy.
#[derive(Debug, Default)]
struct Memo<T>(std::sync::Mutex<T>);

impl<T: Clone> Clone for Memo<T> {
    fn clone(&self) -> Memo<T> {
        Memo(std::sync::Mutex::new(self.lock().clone()))
    }
}

impl<T> Memo<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Sets of usable processors a plan keeps.
const USABLE_KEPT: usize = 64;

impl UsableCache {
    fn find(&self, clusters: &[bool], speed: f64) -> Option<Arc<[bool]>> {
        self.0
            .lock()
            .iter()
            .find(|(c, s, _)| c == clusters && *s == speed.to_bits())
            .map(|(_, _, flags)| flags.clone())
    }

    fn keep(&self, clusters: Vec<bool>, speed: f64, flags: Arc<[bool]>) {
        let mut all = self.0.lock();
        if all.len() >= USABLE_KEPT {
            all.remove(0);
        }
        all.push((clusters, speed.to_bits(), flags));
    }
}

/// The most marks a plan keeps.
const MAX_MARKS: i64 = 256;

/// What a level's earliest window depends on besides the job: the clusters' usable times,
/// the cluster mask, and the level's speed (every processor meets the requirements).
#[derive(Clone, Debug, PartialEq)]
struct BoundKey {
    avail: Vec<Option<Time>>,
    only: Option<usize>,
    speed: u64,
}

/// One past result: no window of `dur` on `procs` processors at price `max_price` starts
/// before `start`.
#[derive(Clone, Copy, Debug)]
struct BoundEntry {
    procs: u32,
    dur: i64,
    max_price: f64,
    start: Time,
}

/// Earliest starts of past selections. Commits only take time out of the plan, and a
/// window for more processors, a longer time or a lower price is also a window for fewer,
/// shorter or dearer, so a past earliest start of a job that asked no more than this one
/// bounds this one's from below.
#[derive(Clone, Debug, Default)]
struct Bounds(Memo<Vec<(BoundKey, std::collections::VecDeque<BoundEntry>)>>);

/// Past results kept per key, and keys kept.
const BOUND_ENTRIES: usize = 512;
const BOUND_KEYS: usize = 64;

impl Bounds {
    /// The latest start known to come no later than the earliest window of this request.
    fn lower(&self, key: &BoundKey, procs: u32, dur: i64, max_price: f64) -> Time {
        let all = self.0.lock();
        let Some((_, list)) = all.iter().find(|(k, _)| k == key) else {
            return Time::MIN;
        };
        list.iter()
            .filter(|e| e.procs <= procs && e.dur <= dur && e.max_price >= max_price)
            .map(|e| e.start)
            .max()
            .unwrap_or(Time::MIN)
    }

    fn record(&self, key: &BoundKey, entry: BoundEntry) {
        let mut all = self.0.lock();
        let at = match all.iter().position(|(k, _)| k == key) {
            Some(at) => at,
            None => {
                if all.len() >= BOUND_KEYS {
                    all.remove(0);
                }
                all.push((
                    key.clone(),
                    std::collections::VecDeque::with_capacity(BOUND_ENTRIES),
                ));
                all.len() - 1
            }
        };
        let list = &mut all[at].1;
        if list.len() >= BOUND_ENTRIES {
            list.pop_front();
        }
        list.push_back(entry);
    }
}

/// Numbered slots per block of the walk's skip index (and per batch of its head search).
const BLOCK: usize = 256;

/// The part of the [`Hot`] of a slot of list A that the search for heads reads.
#[derive(Clone, Copy, Debug)]
struct Scan {
    /// Seconds from the slot's start to its chain's end, at most `u32::MAX` (meaning "at
    /// least that"); commits may leave it longer than the chain now is, never shorter.
    reach: u32,
    /// Likewise to the end of the adjacent slots no dearer than this one: the run it heads
    /// under the lowest price that admits it (rank limit `rank + 1`).
    reach_low: u32,
    processor: u32,
    rank: u32,
    prev_rank: u32,
}

impl Scan {
    /// What the search for heads reads of slot `h`, whose no-dearer slots end at `low_end`.
    fn of(h: &Hot, low_end: Time) -> Scan {
        Scan {
            reach: seconds_between(h.start, h.chain_end),
            reach_low: seconds_between(h.start, low_end),
            processor: h.processor,
            rank: h.rank,
            prev_rank: h.prev_rank,
        }
    }

    /// Could this slot head a run of at least `dur` seconds?
    fn may_fit(&self, lim: u32, dur: i64, proc_ok: &[bool]) -> bool {
        let reach = if self.rank.wrapping_add(1) == lim {
            self.reach_low
        } else {
            self.reach
        };
        (self.rank < lim)
            & (self.prev_rank >= lim)
            & ((reach == u32::MAX) | (i64::from(reach) >= dur))
            & proc_ok[self.processor as usize]
    }
}

/// One bit per item of `items` (at most 64) that passes `test`, the first item lowest:
/// written without branches, so that it compiles to vector compares.
fn mask<T>(items: &[T], test: impl Fn(&T) -> bool) -> u64 {
    items
        .iter()
        .enumerate()
        .fold(0u64, |m, (i, item)| m | (u64::from(test(item)) << i))
}

/// Words of one bit per slot of a block.
const WORDS: usize = BLOCK / 64;

/// Most tiers of list A (see [`SlotPlan::tier_of`]).
const MAX_TIERS: usize = 4;

/// Groups price ranks, cheapest first, into at most [`MAX_TIERS`] tiers of consecutive
/// ranks holding about equal numbers of slots (`per_rank`); a rank is never split. With
/// few distinct prices each has a tier of its own.
fn tiers(per_rank: &[usize]) -> Vec<u32> {
    if per_rank.len() <= MAX_TIERS {
        return (0..per_rank.len() as u32).collect();
    }
    let total: usize = per_rank.iter().sum();
    let (mut tier, mut seen) = (0usize, 0usize);
    let mut tier_of = Vec::with_capacity(per_rank.len());
    for &count in per_rank {
        tier_of.push(tier as u32);
        seen += count;
        if tier + 1 < MAX_TIERS && seen * MAX_TIERS >= (tier + 1) * total {
            tier += 1;
        }
    }
    tier_of
}

/// One tier's share of a walk's pass over heads in order of start: its part of list A,
/// read a block at a time without branching, and its pieces of commits.
struct TierHeads<'a> {
    /// One bit per slot of the block being read, set for heads; `word` is the first word
    /// that may still hold one, and `block` the block's first position.
    heads: [u64; WORDS],
    word: usize,
    block: usize,
    /// Next position to read, and the end of the tier's part.
    scanned: usize,
    end: usize,
    pieces: std::collections::btree_set::Range<'a, (u32, Time, Time, u32)>,
    /// The next head of list A and of the pieces, with its start.
    listed: Option<(Time, u32)>,
    piece: Option<(Time, u32)>,
}

impl<'a> TierHeads<'a> {
    /// The heads of tier `t` that start at `from` or later (all of them without).
    fn new(plan: &'a SlotPlan, t: usize, from: Option<Time>) -> TierHeads<'a> {
        let (first, end) = (plan.tier_at[t], plan.tier_at[t + 1]);
        let (scanned, lowest) = match from {
            Some(x) => (
                first + plan.order_start[first..end].partition_point(|&s| s < x),
                x,
            ),
            None => (first, Time::MIN),
        };
        TierHeads {
            heads: [0; WORDS],
            word: WORDS,
            block: 0,
            scanned,
            end,
            pieces: plan.tier_pieces(t, lowest),
            listed: None,
            piece: None,
        }
    }

    /// Finds the next head of list A that may last `secs` under rank limit `lim`.
    fn next_listed(&mut self, plan: &SlotPlan, lim: u32, secs: i64, ok: &[bool]) {
        self.listed = loop {
            while self.word < WORDS && self.heads[self.word] == 0 {
                self.word += 1;
            }
            if self.word < WORDS {
                let i = self.heads[self.word].trailing_zeros() as usize;
                self.heads[self.word] &= self.heads[self.word] - 1;
                let k = plan.order[self.block + self.word * 64 + i];
                break Some((plan.hot[k as usize].start, k));
            }
            if self.scanned >= self.end {
                break None;
            }
            let to = ((self.scanned / BLOCK + 1) * BLOCK).min(self.end);
            if plan.block_reach[self.scanned / BLOCK] < secs {
                // No run that starts in this block lasts the job.
                self.scanned = to;
                continue;
            }
            self.heads = [0; WORDS];
            for (w, chunk) in plan.scan[self.scanned..to].chunks(64).enumerate() {
                self.heads[w] = mask(chunk, |h| h.may_fit(lim, secs, ok));
            }
            (self.word, self.block) = (0, self.scanned);
            self.scanned = to;
        };
    }

    /// Finds the next piece of commits that `may_fit`.
    fn next_piece(&mut self, plan: &SlotPlan, may_fit: &impl Fn(&Hot) -> bool) {
        self.piece = self
            .pieces
            .by_ref()
            .map(|&(_, start, _, k)| (start, k))
            .find(|&(_, k)| may_fit(&plan.hot[k as usize]));
    }
}

/// Where each of `tiers` tiers' part of `order` (sorted by tier) begins, and where the
/// last ends.
fn tier_bounds(order: &[u32], tiers: usize, tier: impl Fn(u32) -> u32) -> Vec<usize> {
    let mut at: Vec<usize> = (0..tiers)
        .map(|t| order.partition_point(|&i| (tier(i) as usize) < t))
        .collect();
    at.push(order.len());
    at
}

/// Per block of [`BLOCK`] slots of list A, the longest chain any of them begins, seconds
/// (`i64::MAX`: too long to say).
fn block_reach(scan: &[Scan]) -> Vec<i64> {
    scan.chunks(BLOCK)
        .map(|b| {
            b.iter()
                .map(|s| match s.reach {
                    u32::MAX => i64::MAX,
                    r => i64::from(r),
                })
                .max()
                .unwrap_or(0)
        })
        .collect()
}

/// Seconds from `from` to `to`, at most `u32::MAX` (meaning "at least that").
fn seconds_between(from: Time, to: Time) -> u32 {
    u32::try_from(to.secs().saturating_sub(from.secs())).unwrap_or(u32::MAX)
}

/// The marks inside `[start, end)`.
fn mark_range(base: Time, step: i64, n: usize, start: Time, end: Time) -> (usize, usize) {
    let first = |t: Time| {
        let d = t.secs() - base.secs();
        if d <= 0 {
            0
        } else {
            (((d + step - 1) / step) as usize).min(n)
        }
    };
    (first(start), first(end).max(first(start)))
}

/// Rank of a replaced slot, and of a missing neighbour: above every request's limit.
const NEVER: u32 = u32::MAX;

/// What the earliest-window walk needs of one slot, packed so that a pass over slots in
/// order of start reads one record per slot in sequence. A slot is *suitable* for a request
/// when `rank` is below the request's rank limit and its processor is usable; it heads a run
/// when its adjacent predecessor is not suitable (`prev_rank` at or above the limit), and
/// ends one when its adjacent successor is not (`next_rank`).
#[derive(Clone, Copy, Debug)]
struct Hot {
    start: Time,
    end: Time,
    /// End of the chain of adjacent slots this one begins (its processor's time from here
    /// without a break, whatever the price); `chain_max` is the highest rank in it. A run
    /// can last no longer than its chain, and lasts exactly as long when the whole chain is
    /// suitable: the walk learns most runs' ends without following them, and passes over
    /// runs too short for the job without looking at them.
    chain_end: Time,
    chain_max: u32,
    processor: u32,
    /// Rank of the slot's cost in `costs`; `NEVER` once replaced by a commit.
    rank: u32,
    /// Rank of the live slot of the same processor that ends exactly at this one's start,
    /// `NEVER` if there is none.
    prev_rank: u32,
    /// Rank of the live slot of the same processor that starts exactly at this one's end,
    /// `NEVER` if there is none.
    next_rank: u32,
}

/// The job's view of a selection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Criterion {
    /// Start as early as possible.
    EarliestStart,
    /// Finish as early as possible (faster processors may start later yet end sooner).
    EarliestFinish,
    /// Pay as little as possible, starting no later than the deadline.
    MinCost,
}

/// What a global job asks of the plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SlotRequest {
    /// Processors at once.
    pub procs: u32,
    /// Runtime on reference processors (speed 1.0), seconds.
    pub walltime: Dur,
    /// The most the job pays per processor-second; dearer slots are unsuitable.
    pub max_price: f64,
    /// Memory each processor must have, MB.
    #[serde(default)]
    pub min_memory_mb: u64,
    /// Features each processor must have.
    #[serde(default)]
    pub features: BTreeSet<String>,
    /// What "best" means.
    pub criterion: Criterion,
    /// No start before this.
    #[serde(default)]
    pub not_before: Time,
    /// For [`Criterion::MinCost`]: the latest acceptable start (none: any).
    #[serde(default)]
    pub deadline: Option<Time>,
    /// May the job span several clusters (one synchronous start)?
    #[serde(default = "yes")]
    pub co_allocate: bool,
}

fn yes() -> bool {
    true
}

/// One used part of a slot.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct UsedSlot {
    /// Processor index in the plan.
    pub processor: u32,
    /// Start of the used part.
    pub start: Time,
    /// End of the used part.
    pub end: Time,
    /// Price per processor-second of the slot it was cut from.
    pub cost: f64,
}

/// The slots chosen for a job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    /// The synchronous start.
    pub start: Time,
    /// When the job ends (estimate over the slowest chosen speed).
    pub end: Time,
    /// Total charge: Σ cost × seconds used.
    pub cost: f64,
    /// Processors chosen, in the order chosen.
    pub processors: Vec<u32>,
    /// The used parts of slots, per processor in time order.
    pub slots: Vec<UsedSlot>,
    /// For each used part, the number of the plan's slot it was cut from, so that
    /// [`SlotPlan::commit`] finds it at once (checked, and searched for if it does not hold).
    #[serde(skip)]
    cut_from: Vec<u32>,
}

/// Why nothing fits.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{reason}")]
pub struct NoFit {
    /// For people.
    pub reason: String,
}

/// Staging delay per cluster (by cluster index); `None` means unreachable.
pub type Staging = Vec<Option<Dur>>;

/// A run of adjacent suitable slots of one processor.
#[derive(Clone, Copy, Debug)]
struct Run {
    processor: u32,
    /// First piece (slot index).
    first: u32,
    /// Usable start: the first piece's start, no earlier than the cluster's availability.
    start: Time,
    end: Time,
}

/// What every level of one request shares.
struct Level<'a> {
    req: &'a SlotRequest,
    suitable_proc: Option<&'a [bool]>,
    avail: &'a [Option<Time>],
    /// Every processor meets the request's requirements (past results then apply).
    all_suitable: bool,
}

/// Per-call scratch, reused across levels.
struct Walk {
    runs: Vec<Run>,
    /// Run index of each slot, or NONE if the slot is unsuitable or unusable.
    run_of: Vec<u32>,
    /// Processors usable at this level.
    proc_ok: Arc<[bool]>,
}

impl SlotPlan {
    /// Builds a plan; slots name processors by `id`.
    pub fn new(
        processors: Vec<Processor>,
        slots: impl IntoIterator<Item = (String, Time, Time, f64)>,
    ) -> Result<SlotPlan, PlanError> {
        let index = index_processors(&processors)?;
        let mut list = Vec::new();
        for (k, (name, start, end, cost)) in slots.into_iter().enumerate() {
            let Some(&processor) = index.by_name.get(name.as_str()) else {
                return Err(PlanError::UnknownProcessor {
                    index: k,
                    processor: name,
                });
            };
            let slot = Slot {
                processor,
                start,
                end,
                cost,
            };
            check_slot(k, &slot, processors.len())?;
            list.push(slot);
        }
        let ProcessorIndex {
            clusters,
            cluster_of,
            ..
        } = index;
        Self::from_checked(processors, clusters, cluster_of, list)
    }

    /// Like [`SlotPlan::new`], with each slot's processor given by its index in
    /// `processors`: what a caller that builds the slots itself (the planning cycle, from
    /// the clusters' forecasts) passes, rather than naming every slot's processor.
    pub fn from_indexed(
        processors: Vec<Processor>,
        slots: Vec<Slot>,
    ) -> Result<SlotPlan, PlanError> {
        let ProcessorIndex {
            clusters,
            cluster_of,
            ..
        } = index_processors(&processors)?;
        for (k, slot) in slots.iter().enumerate() {
            check_slot(k, slot, processors.len())?;
        }
        Self::from_checked(processors, clusters, cluster_of, slots)
    }

    fn from_checked(
        processors: Vec<Processor>,
        clusters: Vec<String>,
        cluster_of: Vec<u32>,
        mut slots: Vec<Slot>,
    ) -> Result<SlotPlan, PlanError> {
        slots.par_sort_unstable_by_key(|s| (s.start, s.end, s.processor));
        Self::from_slots(processors, clusters, cluster_of, slots, None)
    }

    /// Indexes `slots`, given in order of start or nearly so (ties keep their order);
    /// `end_order`, if given, lists the same slots by position, in order of end or nearly so:
    /// a re-index passes the orders it already has, so that both sorts merge a few runs.
    fn from_slots(
        processors: Vec<Processor>,
        clusters: Vec<String>,
        cluster_of: Vec<u32>,
        slots: Vec<Slot>,
        end_order: Option<Vec<u32>>,
    ) -> Result<SlotPlan, PlanError> {
        // Slots are numbered in order of start, so that walks in that order read memory in
        // sequence and a processor's earlier slot always has a smaller number.
        let mut by_start: Vec<u32> = (0..slots.len() as u32).collect();
        by_start.par_sort_by_key(|&q| (slots[q as usize].start, slots[q as usize].end));
        let mut number = vec![0u32; slots.len()];
        for (i, &q) in by_start.iter().enumerate() {
            number[q as usize] = i as u32;
        }
        let slots: Vec<Slot> = by_start.iter().map(|&q| slots[q as usize]).collect();
        let n = slots.len();
        let mut next = vec![NONE; n];
        let mut prev = vec![NONE; n];
        let mut head = vec![NONE; processors.len()];
        let mut last = vec![NONE; processors.len()];
        for i in 0..n {
            let b = slots[i];
            let p = b.processor as usize;
            let l = last[p];
            if l == NONE {
                head[p] = i as u32;
            } else {
                let a = slots[l as usize];
                if b.start < a.end {
                    return Err(PlanError::Overlap {
                        processor: processors[p].id.clone(),
                        a_start: a.start,
                        a_end: a.end,
                        b_start: b.start,
                        b_end: b.end,
                    });
                }
                next[l as usize] = i as u32;
                prev[i] = l;
            }
            last[p] = i as u32;
        }
        let mut by_end: Vec<u32> = match end_order {
            Some(q) => q.into_iter().map(|q| number[q as usize]).collect(),
            None => (0..n as u32).collect(),
        };
        by_end.par_sort_by_key(|&i| (slots[i as usize].end, slots[i as usize].start));
        // The distinct costs (few, however many slots), then in order. Adding 0.0 makes -0.0
        // the same cost as 0.0.
        let distinct: rustc_hash::FxHashSet<u64> =
            slots.iter().map(|s| (s.cost + 0.0).to_bits()).collect();
        let mut costs: Vec<f64> = distinct.into_iter().map(f64::from_bits).collect();
        costs.sort_unstable_by(f64::total_cmp);
        let rank_of = |c: f64| costs.partition_point(|&x| x < c) as u32;
        let mut hot: Vec<Hot> = slots
            .iter()
            .map(|s| Hot {
                start: s.start,
                end: s.end,
                chain_end: s.end,
                chain_max: 0,
                processor: s.processor,
                rank: rank_of(s.cost),
                prev_rank: NEVER,
                next_rank: NEVER,
            })
            .collect();
        for i in 0..n {
            let p = prev[i];
            if p != NONE && slots[p as usize].end == slots[i].start {
                hot[i].prev_rank = hot[p as usize].rank;
                hot[p as usize].next_rank = hot[i].rank;
            }
        }
        let by_end_time = by_end.iter().map(|&i| slots[i as usize].end).collect();
        let by_end_proc = by_end
            .iter()
            .map(|&i| slots[i as usize].processor)
            .collect();
        // A processor's later slot has a larger number: suffixes first.
        for i in (0..n).rev() {
            let j = next[i];
            let (end, max) = if j != NONE && slots[j as usize].start == slots[i].end {
                let h = &hot[j as usize];
                (h.chain_end, h.chain_max.max(hot[i].rank))
            } else {
                (hot[i].end, hot[i].rank)
            };
            hot[i].chain_end = end;
            hot[i].chain_max = max;
        }
        // The end of the adjacent slots no dearer than each slot: the start of the next
        // dearer one in its chain (one stack of candidates per processor, right to left).
        let mut low_end = vec![Time::MAX; n];
        let mut stacks: Vec<Vec<(u32, Time)>> = vec![Vec::new(); processors.len()];
        for i in (0..n).rev() {
            let stack = &mut stacks[slots[i].processor as usize];
            let j = next[i];
            if j == NONE || slots[j as usize].start != slots[i].end {
                stack.clear();
            }
            while stack.last().is_some_and(|&(r, _)| r <= hot[i].rank) {
                stack.pop();
            }
            low_end[i] = stack.last().map_or(hot[i].chain_end, |&(_, t)| t);
            stack.push((hot[i].rank, slots[i].start));
        }
        drop(stacks);
        let mut per_rank = vec![0usize; costs.len()];
        for h in &hot {
            per_rank[h.rank as usize] += 1;
        }
        let tier_of = tiers(&per_rank);
        // Slot numbers follow start (then end): a stable sort by tier keeps that order in
        // each tier.
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_by_key(|&i| tier_of[hot[i as usize].rank as usize]);
        let tiers = tier_of.last().map_or(1, |&t| t as usize + 1);
        let tier_at = tier_bounds(&order, tiers, |i| tier_of[hot[i as usize].rank as usize]);
        let mut position = vec![0u32; n];
        for (at, &i) in order.iter().enumerate() {
            position[i as usize] = at as u32;
        }
        let scan: Vec<Scan> = order
            .iter()
            .map(|&i| Scan::of(&hot[i as usize], low_end[i as usize]))
            .collect();
        let speed_of: Vec<f64> = processors.iter().map(|p| p.speed).collect();
        let mut speeds = speed_of.clone();
        speeds.sort_by(|a, b| b.total_cmp(a));
        speeds.dedup();
        let block_reach = block_reach(&scan);
        let np = processors.len();
        let mark_base = slots.iter().map(|s| s.start).min().unwrap_or(Time(0));
        let last_end = slots.iter().map(|s| s.end).max().unwrap_or(Time(0));
        let span = (last_end.secs() - mark_base.secs()).max(1);
        let mark_step = (span + MAX_MARKS - 1) / MAX_MARKS;
        let n_marks = if np == 0 {
            0
        } else {
            ((span + mark_step - 1) / mark_step) as usize
        };
        let mut marks = vec![NONE; n_marks * np];
        let mut mark_reach = vec![0u32; n_marks * np];
        let mut by_id: Vec<u32> = (0..np as u32).collect();
        by_id.sort_unstable_by(|&a, &b| processors[a as usize].id.cmp(&processors[b as usize].id));
        let mut id_rank = vec![0u32; np];
        for (k, &p) in by_id.iter().enumerate() {
            id_rank[p as usize] = k as u32;
        }
        let speed_class: Vec<u32> = speed_of
            .iter()
            .map(|v| speeds.iter().position(|s| s == v).unwrap_or(0) as u32)
            .collect();
        let bands = n_marks + 1;
        let mut mark_bands = vec![0u32; n_marks * speeds.len() * bands];
        // Mark by mark, so that each row is written in sequence, with a cursor per
        // processor moving along its slots; the rows in one group per thread, side by side.
        let group = n_marks.div_ceil(rayon::current_num_threads()).max(1);
        let classes = speeds.len();
        marks
            .par_chunks_mut(group * np.max(1))
            .zip(mark_reach.par_chunks_mut(group * np.max(1)))
            .zip(mark_bands.par_chunks_mut((group * classes * bands).max(1)))
            .enumerate()
            .for_each(|(g, ((marks, mark_reach), mark_bands))| {
                let mut cursor = head.clone();
                for (r, c) in (g * group..((g + 1) * group).min(n_marks)).enumerate() {
                    let x = mark_base + Dur(c as i64 * mark_step);
                    let row = r * np;
                    let band_row = r * classes;
                    for p in 0..np {
                        let mut i = cursor[p];
                        while i != NONE && slots[i as usize].end <= x {
                            i = next[i as usize];
                        }
                        cursor[p] = i;
                        if i == NONE || slots[i as usize].start > x {
                            continue;
                        }
                        let reach = seconds_between(x, hot[i as usize].chain_end);
                        marks[row + p] = i;
                        mark_reach[row + p] = reach;
                        let band = (reach as usize / mark_step as usize).min(bands - 1);
                        mark_bands[(band_row + speed_class[p] as usize) * bands + band] += 1;
                    }
                }
            });
        let order_start = order.iter().map(|&i| slots[i as usize].start).collect();
        let mut plan = SlotPlan {
            marks,
            mark_reach,
            mark_bands,
            speed_class,
            id_rank,
            mark_base,
            mark_step,
            n_marks,
            bounds: Bounds::default(),
            usable: UsableCache::default(),
            walk_states: WalkStates::default(),
            processors,
            clusters,
            cluster_of,
            alive: vec![true; slots.len()],
            slots,
            next,
            prev,
            order,
            tier_at,
            tier_of,
            order_start,
            position,
            by_end,
            head,
            extra_start: BTreeSet::new(),
            extra_end: BTreeSet::new(),
            dead: 0,
            live: n,
            costs,
            hot,
            low_end,
            by_end_time,
            by_end_proc,
            block_reach,
            speeds,
            speed_of,
            scan,
        };
        // Room for the pieces of commits up to the next full rebuild (at twice the live
        // slots), so that growing never copies the per-slot arrays.
        plan.slots.reserve(n);
        plan.next.reserve(n);
        plan.prev.reserve(n);
        plan.alive.reserve(n);
        plan.hot.reserve(n);
        plan.low_end.reserve(n);
        plan.position.reserve(n);
        Ok(plan)
    }

    /// Takes the parts a selection used out of the plan: each slot they were cut from is
    /// replaced by what is left before and after. Amortized cost: the pieces go to small
    /// side lists, merged in by walks, and the plan is re-indexed once they grow large.
    pub fn commit(&mut self, sel: &Selection) {
        for (k, u) in sel.slots.iter().enumerate() {
            let holds = |i: u32| {
                let s = self.slots.get(i as usize);
                self.alive.get(i as usize) == Some(&true)
                    && s.is_some_and(|s| {
                        s.processor == u.processor && s.start <= u.start && u.end <= s.end
                    })
            };
            let mut i = match sel.cut_from.get(k) {
                Some(&i) if holds(i) => i,
                _ => self.head[u.processor as usize],
            };
            while i != NONE {
                let s = self.slots[i as usize];
                if s.start <= u.start && u.end <= s.end {
                    break;
                }
                i = self.next[i as usize];
            }
            if i == NONE {
                debug_assert!(false, "a used part lies inside a live slot");
                continue;
            }
            self.split(i, u.start, u.end);
        }
        if self.dead + self.extra_end.len() > 64.max(self.order.len() / 4) {
            if self.slots.len() > 2 * self.live {
                self.rebuild();
            } else {
                self.reindex();
            }
        }
    }

    /// Replaces slot `i` by its parts outside `[from, to)`. The part after keeps the slot's
    /// number (its end, and so its place in list B and the marks after the used part, do
    /// not change; it moves in list A); the part before gets a new one.
    fn split(&mut self, i: u32, from: Time, to: Time) {
        let s = self.slots[i as usize];
        let h = self.hot[i as usize];
        let p = s.processor as usize;
        let kept = to < s.end;
        let tier = self.tier_of[h.rank as usize];
        // The slot leaves list A where it stands: its start changes, or it is gone.
        match self.position[i as usize] {
            NONE => {
                let listed = self.extra_start.remove(&(tier, s.start, s.end, i));
                debug_assert!(listed, "invariant: a live slot out of list A is a piece");
            }
            at => {
                self.scan[at as usize].rank = NEVER;
                self.position[i as usize] = NONE;
            }
        }
        self.dead += 1;
        if !kept {
            self.alive[i as usize] = false;
            self.hot[i as usize].rank = NEVER;
            self.live -= 1;
        }
        let (before, after) = (self.prev[i as usize], self.next[i as usize]);
        // The neighbours that touched the slot now touch a piece of the same cost, or the
        // used part (nothing free).
        if before != NONE && self.slots[before as usize].end == s.start && from <= s.start {
            self.set_hot(before, |h| h.next_rank = NEVER);
        }
        if after != NONE && self.slots[after as usize].start == s.end && to >= s.end {
            self.set_hot(after, |h| h.prev_rank = NEVER);
        }
        // The chain through the slot now ends at the used part.
        let (end, mut max) = if from > s.start {
            (from, Some(h.rank))
        } else {
            (s.start, None)
        };
        let mut j = before;
        let mut touching = s.start;
        while j != NONE && self.slots[j as usize].end == touching {
            let r = self.hot[j as usize].rank;
            let m = max.map_or(r, |m| m.max(r));
            max = Some(m);
            let low = self.low_end[j as usize].min(end);
            self.low_end[j as usize] = low;
            let h = &mut self.hot[j as usize];
            h.chain_end = end;
            h.chain_max = m;
            let start = h.start;
            if let Some(scan) = self.scan.get_mut(self.position[j as usize] as usize) {
                scan.reach = seconds_between(start, end);
                scan.reach_low = seconds_between(start, low);
            }
            touching = self.slots[j as usize].start;
            j = self.prev[j as usize];
        }
        let mut last = before;
        let mut piece_before = NONE;
        if from > s.start {
            let k = self.slots.len() as u32;
            piece_before = k;
            self.slots.push(Slot { end: from, ..s });
            self.hot.push(Hot {
                start: s.start,
                end: from,
                processor: s.processor,
                rank: h.rank,
                prev_rank: h.prev_rank,
                next_rank: NEVER,
                chain_end: from,
                chain_max: h.rank,
            });
            // Its no-dearer slots end where it does.
            self.low_end.push(from);
            self.alive.push(true);
            self.live += 1;
            self.position.push(NONE);
            self.prev.push(last);
            self.next.push(NONE);
            self.link_after(last, k, p);
            last = k;
            self.extra_start.insert((tier, s.start, from, k));
            self.extra_end.insert((from, s.start, k));
        }
        if kept {
            // The part after continues as the slot did.
            self.slots[i as usize].start = to;
            let h = &mut self.hot[i as usize];
            h.start = to;
            h.prev_rank = NEVER;
            self.prev[i as usize] = last;
            self.link_after(last, i, p);
            self.extra_start.insert((tier, to, s.end, i));
        } else {
            if last == NONE {
                self.head[p] = after;
            } else {
                self.next[last as usize] = after;
            }
            if after != NONE {
                self.prev[after as usize] = last;
            }
        }
        // Marks from the chain's start to the used part's end: the chain through them now
        // ends at the used part, they fall inside it, or the piece before now holds them.
        let np = self.processors.len();
        let (lo, hi) = mark_range(self.mark_base, self.mark_step, self.n_marks, touching, to);
        for c in lo..hi {
            let x = self.mark_time(c);
            if x >= s.start {
                self.marks[c * np + p] = if x < from { piece_before } else { NONE };
            }
            let old = self.mark_reach[c * np + p];
            let new = if x < from {
                old.min(seconds_between(x, from))
            } else {
                0
            };
            if new != old {
                self.mark_reach[c * np + p] = new;
                let row =
                    (c * self.speeds.len() + self.speed_class[p] as usize) * (self.n_marks + 1);
                let band = |r: u32| (r as usize / self.mark_step as usize).min(self.n_marks);
                if old > 0 {
                    self.mark_bands[row + band(old)] -= 1;
                }
                if new > 0 {
                    self.mark_bands[row + band(new)] += 1;
                }
            }
        }
    }

    /// The second mark `c` stands at.
    fn mark_time(&self, c: usize) -> Time {
        self.mark_base + Dur(c as i64 * self.mark_step)
    }

    /// Makes `k` follow `last` in processor `p`'s list (or head it).
    fn link_after(&mut self, last: u32, k: u32, p: usize) {
        if last == NONE {
            self.head[p] = k;
        } else {
            self.next[last as usize] = k;
        }
    }

    /// A later lower bound on the start of a window of `dur` on `procs` processors at least
    /// `min_speed` fast, none of which starts before `lower`: windows of at least
    /// `mark_step` seconds start no later than their first mark, and need `procs` processors
    /// whose chains reach `dur - mark_step + 1` past it. `Time::MAX`: no such window.
    fn lower_by_marks(&self, lower: Time, dur: Dur, procs: u32, min_speed: f64) -> Time {
        let step = self.mark_step;
        if self.n_marks == 0 || dur.as_secs() < step {
            return lower;
        }
        let bands = self.n_marks + 1;
        let least = ((dur.as_secs() - step + 1) / step) as usize;
        let classes = self.speeds.iter().take_while(|&&v| v >= min_speed).count();
        // The first mark at or after `lower`.
        let first = if lower.secs() <= self.mark_base.secs() {
            0
        } else {
            ((lower.secs() - self.mark_base.secs() + step - 1) / step) as usize
        };
        for c in first..self.n_marks {
            let row = c * self.speeds.len() * bands;
            let able: u32 = (0..classes)
                .map(|k| {
                    let at = row + k * bands;
                    self.mark_bands[at + least.min(bands - 1)..at + bands]
                        .iter()
                        .sum::<u32>()
                })
                .sum();
            if able >= procs {
                if c == first {
                    return lower;
                }
                return (self.mark_time(c - 1) + Dur(1)).max(lower);
            }
        }
        Time::MAX
    }

    /// Changes slot `i`'s walk data.
    fn set_hot(&mut self, i: u32, f: impl Fn(&mut Hot)) {
        let h = &mut self.hot[i as usize];
        f(h);
        if let Some(s) = self.scan.get_mut(self.position[i as usize] as usize) {
            s.rank = h.rank;
            s.prev_rank = h.prev_rank;
        }
    }

    /// Folds the pieces of commits into lists A and B, leaving slot numbers (and so the
    /// marks) as they are: two merges of sorted lists.
    fn reindex(&mut self) {
        let alive = &self.alive;
        let slots = &self.slots;
        let hot = &self.hot;
        let low_end = &self.low_end;
        let tiers = self.tier_at.len() - 1;
        let (old_order, old_starts, old_scan) = (&self.order, &self.order_start, &self.scan);
        // List A (with what the walks read of it) and list B are independent: both are
        // built side by side. The slots that keep their place are read in sequence from
        // the lists as they stand (their start, end and walk data are current there).
        let list_a = || {
            // (tier, start, number, old position or NONE), in order of tier, start and
            // end, for list A and for the pieces: merge them, list A first on ties.
            let kept = self.tier_at.windows(2).enumerate().flat_map(|(t, w)| {
                self.placed(w[0]..w[1])
                    .map(move |at| (t as u32, old_starts[at], old_order[at], at as u32))
            });
            let pieces = self
                .extra_start
                .iter()
                .map(|&(t, start, _, i)| (t, start, i, NONE));
            let end = |i: u32| slots[i as usize].end;
            let merged = kept.merge_by(pieces, |a, b| {
                (a.0, a.1)
                    .cmp(&(b.0, b.1))
                    .then_with(|| end(a.2).cmp(&end(b.2)))
                    .is_le()
            });
            let len = self.order.len() + self.extra_start.len();
            let (mut order, mut starts, mut scan) = (
                Vec::with_capacity(len),
                Vec::with_capacity(len),
                Vec::with_capacity(len),
            );
            let mut at = vec![0; tiers + 1];
            for (t, start, i, was) in merged {
                order.push(i);
                starts.push(start);
                scan.push(match was {
                    NONE => Scan::of(&hot[i as usize], low_end[i as usize]),
                    was => old_scan[was as usize],
                });
                at[t as usize + 1] = order.len();
            }
            // Tiers left empty begin where the one before ends.
            for t in 1..=tiers {
                at[t] = at[t].max(at[t - 1]);
            }
            let reach = block_reach(&scan);
            (order, starts, scan, reach, at)
        };
        let list_b = || {
            // Both are in order of end (a commit may change the start of a slot of list B,
            // never its end): merge them, list B first on ties.
            let kept = self
                .by_end
                .iter()
                .zip(&self.by_end_time)
                .zip(&self.by_end_proc)
                .map(|((&i, &end), &p)| (end, i, p));
            let pieces = self
                .extra_end
                .iter()
                .map(|&(end, _, i)| (end, i, slots[i as usize].processor));
            let len = self.by_end.len() + self.extra_end.len();
            let (mut ids, mut ends, mut procs) = (
                Vec::with_capacity(len),
                Vec::with_capacity(len),
                Vec::with_capacity(len),
            );
            for (end, i, p) in kept.merge_by(pieces, |a, b| a.0 <= b.0) {
                if alive[i as usize] {
                    ids.push(i);
                    ends.push(end);
                    procs.push(p);
                }
            }
            (ids, ends, procs)
        };
        let ((order, starts, scan, reach, at), (by_end, ends, procs)) = rayon::join(list_a, list_b);
        // Every slot placed in the old list A is placed in the new one: only the new places
        // are written.
        for (at, &i) in order.iter().enumerate() {
            self.position[i as usize] = at as u32;
        }
        self.order = order;
        self.tier_at = at;
        self.order_start = starts;
        self.scan = scan;
        self.block_reach = reach;
        self.by_end = by_end;
        self.by_end_time = ends;
        self.by_end_proc = procs;
        self.extra_start.clear();
        self.extra_end.clear();
        self.dead = 0;
    }

    /// Re-indexes and renumbers the live slots from scratch, dropping the replaced ones.
    fn rebuild(&mut self) {
        // The live slots in order of start, and by end (list B and its pieces).
        let mut position = vec![NONE; self.slots.len()];
        let mut live: Vec<Slot> = Vec::with_capacity(self.live);
        for i in self.in_start_order() {
            position[i as usize] = live.len() as u32;
            live.push(self.slots[i as usize]);
        }
        let end_order: Vec<u32> = self
            .by_end
            .iter()
            .copied()
            .chain(self.extra_end.iter().map(|&(_, _, k)| k))
            .map(|i| position[i as usize])
            .filter(|&q| q != NONE)
            .collect();
        let processors = std::mem::take(&mut self.processors);
        let clusters = std::mem::take(&mut self.clusters);
        let cluster_of = std::mem::take(&mut self.cluster_of);
        let bounds = std::mem::take(&mut self.bounds);
        let usable = std::mem::take(&mut self.usable);
        let walk_states = std::mem::take(&mut self.walk_states);
        *self = Self::from_slots(processors, clusters, cluster_of, live, Some(end_order))
            .expect("invariant: splitting never makes slots overlap");
        self.bounds = bounds;
        self.usable = usable;
        self.walk_states = walk_states;
    }

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

    /// Every slot ever held, including those replaced by [`SlotPlan::commit`] (see
    /// [`SlotPlan::live_slots`]); indices of [`Slot`]s are positions here.
    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// Selects slots for `req`. `staging[c]` delays cluster `c`'s slots by the time to stage
    /// the job's input there (`None`: the cluster cannot be used); a missing entry is 0.
    pub fn select(&self, req: &SlotRequest, staging: &[Option<Dur>]) -> Result<Selection, NoFit> {
        if req.procs == 0 {
            return Err(NoFit {
                reason: "the job asks for no processors".into(),
            });
        }
        if req.walltime.as_secs() <= 0 {
            return Err(NoFit {
                reason: "the walltime must be positive".into(),
            });
        }
        // Which processors meet the requirements; `None`: all of them.
        let suitable_proc: Option<Vec<bool>> = (req.min_memory_mb != 0 || !req.features.is_empty())
            .then(|| {
                self.processors
                    .iter()
                    .map(|p| {
                        p.memory_mb >= req.min_memory_mb && req.features.is_subset(&p.features)
                    })
                    .collect()
            });
        let suitable_proc = suitable_proc.as_deref();
        let capable = suitable_proc.map_or(self.processors.len(), |s| {
            s.iter().filter(|ok| **ok).count()
        });
        if capable < req.procs as usize {
            return Err(NoFit {
                reason: format!(
                    "only {capable} processors meet the memory and feature requirements, {} needed",
                    req.procs
                ),
            });
        }
        let avail: Vec<Option<Time>> = (0..self.clusters.len())
            .map(|c| match staging.get(c) {
                Some(None) => None,
                Some(Some(d)) => Some(req.not_before + *d),
                None => Some(req.not_before),
            })
            .collect();
        // Speed levels, fastest first.
        let levels: Vec<f64> = if let Some(suitable_proc) = suitable_proc {
            let mut levels: Vec<f64> = self
                .processors
                .iter()
                .zip(suitable_proc)
                .filter(|(_, ok)| **ok)
                .map(|(p, _)| p.speed)
                .collect();
            levels.sort_by(|a, b| b.total_cmp(a));
            levels.dedup();
            levels
        } else {
            self.speeds.clone()
        };
        // Without co-allocation, each cluster is a world of its own.
        let masks: Vec<Option<usize>> = if req.co_allocate || self.clusters.len() <= 1 {
            vec![None]
        } else {
            (0..self.clusters.len()).map(Some).collect()
        };
        let mut best: Option<(Key, Selection)> = None;
        let keep = |sel: Selection, best: &mut Option<(Key, Selection)>| {
            let key = match req.criterion {
                Criterion::EarliestStart => {
                    Key(sel.start.secs() as f64, sel.end.secs() as f64, sel.cost)
                }
                Criterion::EarliestFinish => {
                    Key(sel.end.secs() as f64, sel.start.secs() as f64, sel.cost)
                }
                Criterion::MinCost => Key(sel.cost, sel.start.secs() as f64, sel.end.secs() as f64),
            };
            // Ties go to the earlier mask and level.
            if best.as_ref().is_none_or(|(k, _)| key < *k) {
                *best = Some((key, sel));
            }
        };
        let mut walk = Walk {
            runs: Vec::new(),
            run_of: match req.criterion {
                Criterion::MinCost => vec![NONE; self.slots.len()],
                _ => Vec::new(),
            },
            proc_ok: Arc::from(Vec::new()),
        };
        // Every set of processors runs the job at least this long.
        let shortest = levels.first().map_or(Dur::ZERO, |&v| {
            Dur((req.walltime.as_secs() as f64 / v).ceil() as i64)
        });
        let level = Level {
            req,
            suitable_proc,
            avail: &avail,
            all_suitable: capable == self.processors.len(),
        };
        for only in &masks {
            if req.criterion == Criterion::MinCost {
                for &speed in &levels {
                    let dur = Dur((req.walltime.as_secs() as f64 / speed).ceil() as i64);
                    self.build_runs(req, suitable_proc, &avail, *only, speed, &mut walk);
                    if let Some(sel) = self.cheapest(req, dur, &walk, &avail) {
                        keep(sel, &mut best);
                    }
                }
            } else if best.is_none() && levels.len() > 1 {
                // The levels' walks are independent: they run side by side. (Each finds
                // its earliest window; one a later level would have been spared cannot
                // beat the earlier level's, and loses the comparison.)
                let found: Vec<Option<Selection>> = levels
                    .par_iter()
                    .map(|&speed| self.earliest_level(&level, *only, speed, Time::MAX))
                    .collect();
                for sel in found.into_iter().flatten() {
                    keep(sel, &mut best);
                }
            } else {
                for &speed in &levels {
                    // A window starting later than this cannot beat the best so far.
                    let limit = match (&req.criterion, &best) {
                        (_, None) => Time::MAX,
                        (Criterion::EarliestStart, Some((_, b))) => b.start,
                        (_, Some((_, b))) => b.end - shortest,
                    };
                    if let Some(sel) = self.earliest_level(&level, *only, speed, limit) {
                        keep(sel, &mut best);
                    }
                }
            }
        }
        best.map(|(_, s)| s).ok_or_else(|| NoFit {
            reason: self.why_not(req, suitable_proc, &avail),
        })
    }

    /// The earliest window (and its choice) of one level: processors at least `speed` fast,
    /// of cluster `only` if given, starting no later than `limit`.
    fn earliest_level(
        &self,
        level: &Level<'_>,
        only: Option<usize>,
        speed: f64,
        limit: Time,
    ) -> Option<Selection> {
        let req = level.req;
        let dur = Dur((req.walltime.as_secs() as f64 / speed).ceil() as i64);
        // Past results bound this level's earliest start from below.
        let key = level.all_suitable.then(|| BoundKey {
            avail: level.avail.to_vec(),
            only,
            speed: speed.to_bits(),
        });
        let lower = key.as_ref().map_or(Time::MIN, |k| {
            self.bounds
                .lower(k, req.procs, dur.as_secs(), req.max_price)
        });
        let lower = self.lower_by_marks(lower, dur, req.procs, speed);
        if lower > limit || lower == Time::MAX {
            return None;
        }
        let proc_ok = self.usable_processors(level.suitable_proc, level.avail, only, speed);
        let mut state = self.walk_states.0.lock().pop().unwrap_or_default();
        let found = self.earliest(req, dur, &proc_ok, level.avail, (lower, limit), &mut state);
        self.walk_states.0.lock().push(state);
        let start = match &found {
            Some(sel) => sel.start,
            None if limit == Time::MAX => Time::MAX,
            None => limit + Dur(1),
        };
        if let Some(k) = key.filter(|_| start > lower) {
            self.bounds.record(
                &k,
                BoundEntry {
                    procs: req.procs,
                    dur: dur.as_secs(),
                    max_price: req.max_price,
                    start,
                },
            );
        }
        found
    }

    fn why_not(
        &self,
        req: &SlotRequest,
        suitable_proc: Option<&[bool]>,
        avail: &[Option<Time>],
    ) -> String {
        let priced = self
            .live_slots()
            .filter(|s| {
                suitable_proc.is_none_or(|ok| ok[s.processor as usize]) && s.cost <= req.max_price
            })
            .count();
        if priced == 0 {
            return format!(
                "no slot of a suitable processor costs at most {} per processor-second",
                req.max_price
            );
        }
        if avail.iter().all(Option::is_none) {
            return "no cluster is reachable for staging".into();
        }
        let deadline = match (&req.criterion, req.deadline) {
            (Criterion::MinCost, Some(d)) => format!(" starting by {d}"),
            _ => String::new(),
        };
        format!(
            "no window of {} s{deadline} has {} suitable processors free together{}",
            req.walltime.as_secs(),
            req.procs,
            if req.co_allocate {
                ""
            } else {
                " in one cluster"
            }
        )
    }

    /// Per processor once, so that a pass over slots reads one flag, not a record: is it
    /// usable at this level (at least `min_speed` fast, of cluster `only` if given)? When
    /// every processor meets the request's requirements the answer depends only on the
    /// usable clusters and the speed, and is kept for later requests.
    fn usable_processors(
        &self,
        suitable_proc: Option<&[bool]>,
        avail: &[Option<Time>],
        only: Option<usize>,
        min_speed: f64,
    ) -> Arc<[bool]> {
        let cluster_ok: Vec<bool> = (0..self.clusters.len())
            .map(|c| only.is_none_or(|o| o == c) && avail[c].is_some())
            .collect();
        if suitable_proc.is_none() {
            if let Some(kept) = self.usable.find(&cluster_ok, min_speed) {
                return kept;
            }
        }
        let proc_ok: Arc<[bool]> = self
            .speed_of
            .iter()
            .zip(&self.cluster_of)
            .enumerate()
            .map(|(p, (&speed, &c))| {
                suitable_proc.is_none_or(|ok| ok[p]) & (speed >= min_speed) & cluster_ok[c as usize]
            })
            .collect();
        if suitable_proc.is_none() {
            self.usable.keep(cluster_ok, min_speed, proc_ok.clone());
        }
        proc_ok
    }

    /// Groups suitable slots into runs for one level (processors at least `min_speed` fast,
    /// of cluster `only` if given).
    fn build_runs(
        &self,
        req: &SlotRequest,
        suitable_proc: Option<&[bool]>,
        avail: &[Option<Time>],
        only: Option<usize>,
        min_speed: f64,
        walk: &mut Walk,
    ) {
        walk.runs.clear();
        walk.run_of.iter_mut().for_each(|r| *r = NONE);
        walk.proc_ok = self.usable_processors(suitable_proc, avail, only, min_speed);
        let proc_ok = &walk.proc_ok;
        let usable = |i: usize| {
            let s = &self.slots[i];
            proc_ok[s.processor as usize] && s.cost <= req.max_price
        };
        // In order of start a processor's earlier slot is always seen first.
        for i in self.in_start_order() {
            let i = i as usize;
            if !usable(i) {
                continue;
            }
            let p = self.prev[i];
            let continues = p != NONE
                && usable(p as usize)
                && self.slots[p as usize].end == self.slots[i].start;
            if continues {
                let r = walk.run_of[p as usize];
                walk.run_of[i] = r;
                walk.runs[r as usize].end = self.slots[i].end;
            } else {
                let s = &self.slots[i];
                let c = self.cluster_of[s.processor as usize] as usize;
                let from = avail[c].expect("invariant: usable slots are reachable");
                walk.run_of[i] = walk.runs.len() as u32;
                walk.runs.push(Run {
                    processor: s.processor,
                    first: i as u32,
                    start: s.start.max(from),
                    end: s.end,
                });
            }
        }
    }

    /// The places of `places` in list A whose slot is still there.
    fn placed(&self, places: std::ops::Range<usize>) -> impl Iterator<Item = usize> + '_ {
        places.filter(|&at| self.position[self.order[at] as usize] == at as u32)
    }

    /// The pieces of commits of tier `t` that start at `from` or later, in order.
    fn tier_pieces(
        &self,
        t: usize,
        from: Time,
    ) -> std::collections::btree_set::Range<'_, (u32, Time, Time, u32)> {
        let t = t as u32;
        self.extra_start
            .range((t, from, Time::MIN, 0)..(t + 1, Time::MIN, Time::MIN, 0))
    }

    /// Live slots in order of start, then end: each tier's part of list A and its pieces
    /// of commits, merged.
    fn in_start_order(&self) -> impl Iterator<Item = u32> + '_ {
        let key = |i: u32| {
            let t = &self.slots[i as usize];
            (t.start, t.end, i)
        };
        let listed = self
            .tier_at
            .windows(2)
            .map(|w| self.placed(w[0]..w[1]).map(|at| self.order[at]));
        let pieces = (0..self.tier_at.len() - 1).map(|t| {
            self.tier_pieces(t, Time::MIN)
                .map(|&(_, _, _, i)| i)
                .filter(|&i| self.alive[i as usize])
        });
        listed
            .map(Either::Left)
            .chain(pieces.map(Either::Right))
            .kmerge_by(move |&a, &b| key(a) < key(b))
    }

    /// Runs in order of usable start: one pass in start order, with
    /// the runs that begin before their cluster is usable held back in one bucket per
    /// cluster and released when the pass reaches that cluster's usable time.
    fn runs_by_start<'a>(
        &'a self,
        walk: &'a Walk,
        avail: &'a [Option<Time>],
    ) -> impl Iterator<Item = u32> + 'a {
        let mut buckets: Vec<Vec<u32>> = vec![Vec::new(); self.clusters.len()];
        // Clusters by usable time, for releasing buckets in order.
        let mut release: Vec<(Time, usize)> = avail
            .iter()
            .enumerate()
            .filter_map(|(c, a)| a.map(|t| (t, c)))
            .collect();
        release.sort();
        let mut next_release = 0usize;
        let mut order = self.in_start_order();
        let mut out: std::collections::VecDeque<u32> = std::collections::VecDeque::new();
        std::iter::from_fn(move || loop {
            if let Some(r) = out.pop_front() {
                return Some(r);
            }
            // The next run head in start order, if any.
            let found = order.by_ref().find_map(|k| {
                let r = walk.run_of[k as usize];
                (r != NONE && walk.runs[r as usize].first == k).then_some(r)
            });
            let Some(r) = found else {
                // Flush what is held back, in order of release.
                while next_release < release.len() {
                    let c = release[next_release].1;
                    next_release += 1;
                    out.extend(buckets[c].drain(..));
                }
                return out.pop_front();
            };
            let run = walk.runs[r as usize];
            if self.slots[run.first as usize].start < run.start {
                // Usable only from its cluster's time: held back. (Once a bucket is released,
                // the pass is past that time, so no run joins it later.)
                buckets[self.cluster_of[run.processor as usize] as usize].push(r);
                continue;
            }
            while next_release < release.len() && release[next_release].0 <= run.start {
                let b = release[next_release].1;
                next_release += 1;
                out.extend(buckets[b].drain(..));
            }
            out.push_back(r);
        })
    }

    /// Runs in order of end: the global end-sorted list, keeping each run's last piece.
    fn runs_by_end<'a>(&'a self, walk: &'a Walk) -> impl Iterator<Item = u32> + 'a {
        let key = |i: u32| {
            let t = &self.slots[i as usize];
            (t.end, t.start, i)
        };
        let pieces = self.extra_end.iter().map(|&(_, _, i)| i);
        let merged = self
            .by_end
            .iter()
            .copied()
            .merge_by(pieces, move |&a, &b| key(a) <= key(b));
        merged.filter_map(move |i| {
            let r = walk.run_of[i as usize];
            if r == NONE {
                return None;
            }
            let n = self.next[i as usize];
            let last = n == NONE || walk.run_of[n as usize] != r;
            last.then_some(r)
        })
    }

    /// The earliest window for this level that starts no later than `limit`, and its
    /// cheapest choice.
    ///
    /// This is the linear walk of the module docs, fused into one pass. List A gives the
    /// slots in order of start (the tiers the job can afford, and their pieces, merged as
    /// the walk goes): a suitable slot whose adjacent predecessor is not suitable heads a
    /// run, whose end is found by following its adjacent suitable successors (each slot is
    /// followed at most once, as part of one run); the run is counted when it lasts until
    /// `t1 = t0 + T`. List B is the slots in order of end: a counted run is un-counted when B
    /// passes its end. Only counted runs matter to B, and a processor has at most one
    /// counted run at a time, so B compares each slot's end with its processor's counted run
    /// and moves only when a count is about to be read. The walk stops at the first `t0` with
    /// `M ≥ P`: it reads the plan only up to `t0` (A) and `t1` (B).
    ///
    /// No window starts before `lower` (a bound from past selections) nor is one wanted
    /// after `limit`.
    fn earliest(
        &self,
        req: &SlotRequest,
        dur: Dur,
        proc_ok: &[bool],
        avail: &[Option<Time>],
        (lower, limit): (Time, Time),
        scratch: &mut WalkState,
    ) -> Option<Selection> {
        let lim = self.costs.partition_point(|&c| c <= req.max_price) as u32;
        let need = req.procs as usize;
        let (counted_end, counted_at) = scratch;
        if counted_at.len() != self.processors.len() {
            *counted_end = vec![Time::MIN; self.processors.len()];
            *counted_at = vec![NONE; self.processors.len()];
        }
        let mut walk = EarliestWalk {
            plan: self,
            dur,
            need,
            counted_end,
            counted_at,
            counted: Vec::new(),
            pending: Vec::new(),
            lim,
            bi: 0,
            extras_end: self.extra_end.range(..).peekable(),
            cur: Time::MIN,
            grew: false,
            limit,
        };
        // List A: heads in order of usable start. Runs starting before their cluster is
        // usable wait in one bucket per cluster until the pass reaches that time.
        let mut release: Vec<(Time, usize)> = avail
            .iter()
            .enumerate()
            .filter_map(|(c, a)| a.map(|t| (t, c)))
            .collect();
        release.sort_unstable();
        let mut buckets: Vec<Vec<u32>> = vec![Vec::new(); self.clusters.len()];
        let mut next_release = 0usize;
        // Heads of runs that could last `dur`: no other run is ever counted, and a start
        // at which none is counted is never the first window.
        let may_fit = |h: &Hot| {
            (h.rank < lim)
                & (h.prev_rank >= lim)
                & proc_ok[h.processor as usize]
                & (h.chain_end.secs().saturating_sub(h.start.secs()) >= dur.as_secs())
        };
        // No window starts before `lower`: begin at the last mark before it, once every
        // cluster is usable there, with the runs that contain the mark counted.
        let np = self.processors.len();
        let usable_from = avail.iter().flatten().max().copied().unwrap_or(Time::MIN);
        let mark = (self.n_marks > 0 && lower.secs() > self.mark_base.secs())
            .then(|| {
                (((lower.secs() - 1 - self.mark_base.secs()) / self.mark_step) as usize)
                    .min(self.n_marks - 1)
            })
            .filter(|&c| c > 0)
            .map(|c| (c, self.mark_time(c)))
            .filter(|&(_, x)| x >= usable_from);
        if let Some((c, x)) = mark {
            walk.cur = x;
            let t1 = x + Dur(1) + dur;
            // Processors whose chain through the mark may last until t1, found without
            // branching.
            let least = u32::try_from(dur.as_secs() + 1).unwrap_or(u32::MAX);
            let row = &self.mark_reach[c * np..(c + 1) * np];
            let lasting = row.chunks(64).enumerate().flat_map(|(k, chunk)| {
                // One bit per processor, 64 at a time (8 bytes of 8, which compiles to
                // vector compares), then the set bits.
                let lasts = |&reach: &u32| reach >= least;
                let mut bits = match <&[u32; 64]>::try_from(chunk) {
                    Ok(chunk) => chunk
                        .chunks_exact(8)
                        .enumerate()
                        .fold(0u64, |m, (b, byte)| m | (mask(byte, lasts) << (8 * b))),
                    Err(_) => mask(chunk, lasts),
                };
                std::iter::from_fn(move || {
                    (bits != 0).then(|| {
                        let i = bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        k * 64 + i
                    })
                })
            });
            for p in lasting {
                if !proc_ok[p] {
                    continue;
                }
                let j = self.marks[c * np + p];
                if j == NONE {
                    continue;
                }
                let h = &self.hot[j as usize];
                if h.rank >= lim {
                    continue;
                }
                let end = if h.chain_max < lim {
                    h.chain_end
                } else {
                    let mut last = j;
                    while self.hot[last as usize].next_rank < lim {
                        last = self.next[last as usize];
                    }
                    self.hot[last as usize].end
                };
                if end >= t1 {
                    walk.count(p as u32, j, end);
                }
            }
        }
        // Heads in order of start, from the second after the mark: one source per tier of
        // list A that holds a slot the job can afford.
        let from = mark.map(|(_, x)| x + Dur(1));
        let tiers = match lim {
            0 => 0,
            l => self.tier_of[l as usize - 1] as usize + 1,
        };
        let mut sources: Vec<TierHeads<'_>> =
            (0..tiers).map(|t| TierHeads::new(self, t, from)).collect();
        for s in &mut sources {
            s.next_listed(self, lim, dur.as_secs(), proc_ok);
            s.next_piece(self, &may_fit);
        }
        let outcome = loop {
            // The next head: the earliest of the sources' next ones.
            let next = sources
                .iter()
                .enumerate()
                .flat_map(|(t, s)| [(s.listed, 0, t), (s.piece, 1, t)])
                .filter_map(|(head, piece, t)| head.map(|(st, k)| (st, piece, t, k)))
                .min();
            let (k, st) = next.map_or((None, Time::MAX), |(st, _, _, k)| (Some(k), st));
            let mut stop = None;
            while stop.is_none()
                && next_release < release.len()
                && (k.is_none() || release[next_release].0 <= st)
            {
                let (t, c) = release[next_release];
                next_release += 1;
                for j in std::mem::take(&mut buckets[c]) {
                    if let Some(out) = walk.join(t, j, lim) {
                        stop = Some(out);
                        break;
                    }
                }
            }
            if let Some(out) = stop {
                break out;
            }
            let Some((_, piece, t, k)) = next else {
                break walk.finish();
            };
            if piece == 0 {
                sources[t].next_listed(self, lim, dur.as_secs(), proc_ok);
            } else {
                sources[t].next_piece(self, &may_fit);
            }
            let c = self.cluster_of[self.hot[k as usize].processor as usize] as usize;
            let from = avail[c].expect("invariant: usable slots are reachable");
            if st < from {
                buckets[c].push(k);
                continue;
            }
            if let Some(out) = walk.join(st, k, lim) {
                break out;
            }
        };
        let covering = std::mem::take(&mut walk.counted);
        // Leave the shared state as found: no processor counted.
        for &(p, _) in &covering {
            walk.counted_at[p as usize] = NONE;
        }
        self.choose(req, dur, outcome?, &covering)
    }

    /// The cheapest window starting by the deadline, for this level.
    fn cheapest(
        &self,
        req: &SlotRequest,
        dur: Dur,
        walk: &Walk,
        avail: &[Option<Time>],
    ) -> Option<Selection> {
        // The charge changes only where a window edge crosses a slot boundary, so besides
        // run starts the candidates are every slot start and every slot end minus the length.
        // Between two candidates the cheapest sum is concave in the start, so a deadline that
        // falls between them is a candidate too.
        let mut extra: Vec<Time> = req.deadline.into_iter().collect();
        for (i, &r) in walk.run_of.iter().enumerate() {
            if r == NONE {
                continue;
            }
            let from = walk.runs[r as usize].start;
            let s = &self.slots[i];
            extra.push(s.start.max(from));
            let back = s.end - dur;
            if back >= from {
                extra.push(back);
            }
        }
        extra.sort_unstable();
        extra.dedup();
        let mut windows = Windows::new(self, walk, avail, dur, extra);
        let mut best: Option<Selection> = None;
        while let Some(t0) = windows.next_feasible(req.procs as usize, req.deadline) {
            let covering: Vec<(u32, u32)> = windows
                .counted_runs()
                .iter()
                .map(|&r| (walk.runs[r as usize].processor, walk.runs[r as usize].first))
                .collect();
            if let Some(sel) = self.choose(req, dur, t0, &covering) {
                if best.as_ref().is_none_or(|b| sel.cost < b.cost) {
                    best = Some(sel);
                }
            }
        }
        best
    }

    /// Cost of using the run that begins with slot `first` on `[t0, t1)` (the run covers
    /// it), and the pieces used.
    fn run_cost(
        &self,
        first: u32,
        t0: Time,
        t1: Time,
        pieces: Option<(&mut Vec<UsedSlot>, &mut Vec<u32>)>,
    ) -> f64 {
        let mut cost = 0.0;
        let mut i = first;
        // The run is contiguous from its first slot past t1, so the slot at the last mark
        // before t0, if the run holds it, is a nearer place to start.
        if self.n_marks > 0 && t0 > self.mark_base {
            let c = (((t0.secs() - self.mark_base.secs()) / self.mark_step) as usize)
                .min(self.n_marks - 1);
            let p = self.slots[first as usize].processor as usize;
            let j = self.marks[c * self.processors.len() + p];
            if j != NONE && self.slots[j as usize].start >= self.slots[first as usize].start {
                i = j;
            }
        }
        let mut out = pieces;
        while i != NONE {
            let s = self.slots[i as usize];
            let (a, b) = (s.start.max(t0), s.end.min(t1));
            if a < b {
                cost += s.cost * (b - a).as_secs() as f64;
                if let Some((used, cut_from)) = out.as_mut() {
                    used.push(UsedSlot {
                        processor: s.processor,
                        start: a,
                        end: b,
                        cost: s.cost,
                    });
                    cut_from.push(i);
                }
            }
            if s.end >= t1 {
                break;
            }
            i = self.next[i as usize];
        }
        cost
    }

    /// Picks `procs` of the covering runs, given as `(processor, first slot)`: cheapest
    /// first, then faster, then by processor id.
    fn choose(
        &self,
        req: &SlotRequest,
        dur: Dur,
        t0: Time,
        covering: &[(u32, u32)],
    ) -> Option<Selection> {
        let t1 = t0 + dur;
        let mut ranked: Vec<(f64, f64, u32, u32)> = covering
            .iter()
            .map(|&(p, first)| {
                (
                    self.run_cost(first, t0, t1, None),
                    -self.processors[p as usize].speed,
                    p,
                    first,
                )
            })
            .collect();
        if ranked.len() < req.procs as usize {
            return None;
        }
        let id = |p: u32| self.id_rank[p as usize];
        let rule = |a: &(f64, f64, u32, u32), b: &(f64, f64, u32, u32)| {
            a.0.total_cmp(&b.0)
                .then(a.1.total_cmp(&b.1))
                .then_with(|| id(a.2).cmp(&id(b.2)))
        };
        // Only the first P by the rule matter: partition, then order just those.
        let p = req.procs as usize;
        if ranked.len() > p {
            ranked.select_nth_unstable_by(p - 1, rule);
            ranked.truncate(p);
        }
        ranked.sort_by(rule);
        let slowest = ranked.iter().map(|x| -x.1).fold(f64::INFINITY, f64::min);
        let end = t0 + Dur((req.walltime.as_secs() as f64 / slowest).ceil() as i64);
        let mut slots = Vec::new();
        let mut cut_from = Vec::new();
        let mut cost = 0.0;
        let mut processors = Vec::with_capacity(ranked.len());
        for &(_, _, p, first) in &ranked {
            cost += self.run_cost(first, t0, end, Some((&mut slots, &mut cut_from)));
            processors.push(p);
        }
        Some(Selection {
            start: t0,
            end,
            cost,
            processors,
            slots,
            cut_from,
        })
    }
}

/// State of [`SlotPlan::earliest`]'s walk.
struct EarliestWalk<'a> {
    plan: &'a SlotPlan,
    dur: Dur,
    need: usize,
    /// Per processor: end of its counted run (meaningful while `counted_at` is set).
    counted_end: &'a mut Vec<Time>,
    /// Per processor: position of its counted run in `counted`, or NONE (all NONE between
    /// walks).
    counted_at: &'a mut Vec<u32>,
    /// Counted runs: (processor, first slot).
    counted: Vec<(u32, u32)>,
    /// Runs of several slots that joined since the last count was read, (processor, first
    /// slot): their end is found only when a count is read, as following a run's slots
    /// reads memory far ahead of the pass.
    pending: Vec<(u32, u32)>,
    /// The request's rank limit.
    lim: u32,
    /// Positions in list B: slots of list B, pieces of later commits.
    bi: usize,
    extras_end: std::iter::Peekable<std::collections::btree_set::Range<'a, (Time, Time, u32)>>,
    /// The candidate start being filled, and whether a run was counted at it.
    cur: Time,
    grew: bool,
    /// No window starts later.
    limit: Time,
}

impl EarliestWalk<'_> {
    fn uncount(&mut self, p: u32) {
        let at = self.counted_at[p as usize];
        self.counted_at[p as usize] = NONE;
        self.counted.swap_remove(at as usize);
        if let Some(&(moved, _)) = self.counted.get(at as usize) {
            self.counted_at[moved as usize] = at;
        }
    }

    /// Moves list B to `t1`: every counted run ending before it no longer covers.
    fn advance_b(&mut self, t1: Time) {
        let plan = self.plan;
        // What B would pass is found by bisection; when fewer runs are counted than B would
        // pass, looking at the counted runs themselves un-counts the same ones.
        let main_to = self.bi + plan.by_end_time[self.bi..].partition_point(|&e| e < t1);
        // The pieces of commits are assumed spread over time like those of list B.
        let main_passed = main_to - self.bi;
        let passed = main_passed + main_passed * plan.extra_end.len() / plan.order.len().max(1);
        if self.counted.len() < passed {
            let mut i = 0;
            while i < self.counted.len() {
                let p = self.counted[i].0;
                if self.counted_end[p as usize] < t1 {
                    // The last counted run moves into place `i`.
                    self.uncount(p);
                } else {
                    i += 1;
                }
            }
            self.bi = main_to;
            self.extras_end = plan.extra_end.range((t1, Time::MIN, 0)..).peekable();
            return;
        }
        loop {
            let main = plan.by_end_time.get(self.bi).copied().unwrap_or(Time::MAX);
            let extra = self
                .extras_end
                .peek()
                .map_or(Time::MAX, |&&(end, _, _)| end);
            let (p, end) = if main <= extra {
                if main >= t1 {
                    return;
                }
                self.bi += 1;
                (plan.by_end_proc[self.bi - 1], main)
            } else {
                if extra >= t1 {
                    return;
                }
                let Some(&(_, _, k)) = self.extras_end.next() else {
                    return;
                };
                (plan.hot[k as usize].processor, extra)
            };
            if self.counted_end[p as usize] == end && self.counted_at[p as usize] != NONE {
                self.uncount(p);
            }
        }
    }

    /// Counts run `(p, k)`, which lasts until `end`, past the current window's end.
    fn count(&mut self, p: u32, k: u32, end: Time) {
        if self.counted_at[p as usize] != NONE {
            // An earlier run of the processor, which ended by the current start: B has not
            // been moved past it yet.
            self.uncount(p);
        }
        self.counted_at[p as usize] = self.counted.len() as u32;
        self.counted_end[p as usize] = end;
        self.counted.push((p, k));
    }

    /// Is the candidate being filled a window? Reads the count after moving B and placing
    /// the pending runs.
    fn check(&mut self) -> bool {
        if !self.grew || self.counted.len() + self.pending.len() < self.need {
            return false;
        }
        let t1 = self.cur + self.dur;
        self.advance_b(t1);
        let hot = &self.plan.hot;
        for (p, k) in std::mem::take(&mut self.pending) {
            let mut last = k;
            while hot[last as usize].next_rank < self.lim {
                last = self.plan.next[last as usize];
            }
            // It joined no later than `cur`; it covers the window iff it lasts until t1.
            let end = hot[last as usize].end;
            if end >= t1 {
                self.count(p, k, end);
            }
        }
        self.counted.len() >= self.need
    }

    /// The run headed by slot `k` joins at its usable start `t` (nondecreasing from call to
    /// call). `Some(outcome)` ends the walk.
    fn join(&mut self, t: Time, k: u32, lim: u32) -> Option<Option<Time>> {
        if t != self.cur {
            if self.check() {
                return Some(Some(self.cur));
            }
            if t > self.limit {
                return Some(None);
            }
            self.grew = false;
            self.cur = t;
        }
        let h = self.plan.hot[k as usize];
        let t1 = t + self.dur;
        if h.next_rank >= lim {
            // A run of one slot.
            if h.end >= t1 {
                self.count(h.processor, k, h.end);
                self.grew = true;
            }
        } else {
            let (end, max) = (h.chain_end, h.chain_max);
            if end < t1 {
                // Not even its chain lasts long enough.
            } else if max < lim {
                // The whole chain is the run.
                self.count(h.processor, k, end);
                self.grew = true;
            } else {
                self.pending.push((h.processor, k));
                self.grew = true;
            }
        }
        None
    }

    /// The end of list A.
    fn finish(&mut self) -> Option<Time> {
        self.check().then_some(self.cur)
    }
}

/// Candidate windows of one length, in order of start, with the runs covering each.
struct Windows<'a> {
    walk: &'a Walk,
    dur: Dur,
    by_start: std::iter::Peekable<Box<dyn Iterator<Item = u32> + 'a>>,
    by_end: std::iter::Peekable<Box<dyn Iterator<Item = u32> + 'a>>,
    /// Position in `counted_list` of each counted run, or NONE.
    slot_in_list: Vec<u32>,
    counted_list: Vec<u32>,
    /// Further candidate starts, sorted, besides run starts.
    extra: Vec<Time>,
    next_extra: usize,
}

impl<'a> Windows<'a> {
    fn new(
        plan: &'a SlotPlan,
        walk: &'a Walk,
        avail: &'a [Option<Time>],
        dur: Dur,
        extra: Vec<Time>,
    ) -> Windows<'a> {
        let a: Box<dyn Iterator<Item = u32> + 'a> = Box::new(plan.runs_by_start(walk, avail));
        let b: Box<dyn Iterator<Item = u32> + 'a> = Box::new(plan.runs_by_end(walk));
        Windows {
            walk,
            dur,
            by_start: a.peekable(),
            by_end: b.peekable(),
            slot_in_list: vec![NONE; walk.runs.len()],
            counted_list: Vec::new(),
            extra,
            next_extra: 0,
        }
    }

    fn uncount(&mut self, r: u32) {
        let k = self.slot_in_list[r as usize];
        if k == NONE {
            return;
        }
        self.counted_list.swap_remove(k as usize);
        if let Some(&moved) = self.counted_list.get(k as usize) {
            self.slot_in_list[moved as usize] = k;
        }
        self.slot_in_list[r as usize] = NONE;
    }

    /// Advances to the next candidate start with at least `need` covering runs (no later
    /// than `deadline`), or `None`.
    fn next_feasible(&mut self, need: usize, deadline: Option<Time>) -> Option<Time> {
        let runs = &self.walk.runs;
        loop {
            let run_start = self.by_start.peek().map(|&r| runs[r as usize].start);
            let extra = self.extra.get(self.next_extra).copied();
            let t0 = match (run_start, extra) {
                (None, None) => return None,
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) => a,
                (None, Some(b)) => b,
            };
            while self.extra.get(self.next_extra).is_some_and(|t| *t <= t0) {
                self.next_extra += 1;
            }
            if deadline.is_some_and(|d| t0 > d) {
                return None;
            }
            let t1 = t0 + self.dur;
            // Every run starting by t0 joins before the count is read.
            while let Some(&r) = self.by_start.peek() {
                let run = runs[r as usize];
                if run.start > t0 {
                    break;
                }
                self.by_start.next();
                if run.end >= t1 {
                    self.slot_in_list[r as usize] = self.counted_list.len() as u32;
                    self.counted_list.push(r);
                }
            }
            // Runs ending before t1 no longer cover the window.
            while let Some(&r) = self.by_end.peek() {
                if runs[r as usize].end >= t1 {
                    break;
                }
                self.by_end.next();
                self.uncount(r);
            }
            if self.counted_list.len() >= need {
                return Some(t0);
            }
        }
    }

    fn counted_runs(&self) -> &[u32] {
        &self.counted_list
    }
}

/// Lexicographic comparison key of a selection under a criterion.
#[derive(Clone, Copy, PartialEq, PartialOrd)]
struct Key(f64, f64, f64);

#[cfg(test)]
mod tests {
    use super::*;

    fn procs(spec: &[(&str, &str, f64)]) -> Vec<Processor> {
        spec.iter()
            .map(|(id, cluster, speed)| Processor {
                id: id.to_string(),
                cluster: cluster.to_string(),
                speed: *speed,
                memory_mb: 0,
                features: BTreeSet::new(),
            })
            .collect()
    }

    fn slot(p: &str, start: i64, end: i64, cost: f64) -> (String, Time, Time, f64) {
        (p.to_string(), Time(start), Time(end), cost)
    }

    fn req(procs: u32, walltime: i64, criterion: Criterion) -> SlotRequest {
        SlotRequest {
            procs,
            walltime: Dur(walltime),
            max_price: 10.0,
            min_memory_mb: 0,
            features: BTreeSet::new(),
            criterion,
            not_before: Time(0),
            deadline: None,
            co_allocate: true,
        }
    }

    /// ```text
    /// a: [0 ---- 50)[50 ------ 200)     (two adjacent slots: one run)
    /// b:      [30 ------------ 200)
    /// c: [0 - 40)      [100 -- 200)
    /// ```
    /// Two processors for 100 s: at 0 only a; at 30 a and b cover [30, 130).
    #[test]
    fn earliest_start_merges_adjacent_slots() {
        let plan = SlotPlan::new(
            procs(&[("a", "x", 1.0), ("b", "x", 1.0), ("c", "x", 1.0)]),
            [
                slot("a", 0, 50, 1.0),
                slot("a", 50, 200, 2.0),
                slot("b", 30, 200, 1.0),
                slot("c", 0, 40, 1.0),
                slot("c", 100, 200, 1.0),
            ],
        )
        .unwrap();
        let sel = plan
            .select(&req(2, 100, Criterion::EarliestStart), &[])
            .unwrap();
        assert_eq!((sel.start, sel.end), (Time(30), Time(130)));
        // a costs 20×1 + 80×2 = 180, b costs 100.
        assert_eq!(sel.cost, 280.0);
        assert_eq!(sel.processors, vec![1, 0]);
        assert_eq!(sel.slots.len(), 3);
    }

    #[test]
    fn earliest_finish_prefers_fast_processors_that_start_later() {
        // Two slow processors free at 0, two fast (speed 2) free at 40; 100 s of work.
        let plan = SlotPlan::new(
            procs(&[
                ("s1", "x", 1.0),
                ("s2", "x", 1.0),
                ("f1", "y", 2.0),
                ("f2", "y", 2.0),
            ]),
            [
                slot("s1", 0, 1000, 1.0),
                slot("s2", 0, 1000, 1.0),
                slot("f1", 40, 1000, 1.0),
                slot("f2", 40, 1000, 1.0),
            ],
        )
        .unwrap();
        let start = plan
            .select(&req(2, 100, Criterion::EarliestStart), &[])
            .unwrap();
        assert_eq!((start.start, start.end), (Time(0), Time(100)));
        let finish = plan
            .select(&req(2, 100, Criterion::EarliestFinish), &[])
            .unwrap();
        assert_eq!((finish.start, finish.end), (Time(40), Time(90)));
    }

    #[test]
    fn co_allocation_waits_for_staging_and_can_be_forbidden() {
        let plan = SlotPlan::new(
            procs(&[("a", "c1", 1.0), ("b", "c2", 1.0)]),
            [slot("a", 0, 1000, 1.0), slot("b", 0, 1000, 1.0)],
        )
        .unwrap();
        let staging = vec![Some(Dur(0)), Some(Dur(30))];
        let sel = plan
            .select(&req(2, 100, Criterion::EarliestStart), &staging)
            .unwrap();
        assert_eq!(sel.start, Time(30));
        let mut alone = req(2, 100, Criterion::EarliestStart);
        alone.co_allocate = false;
        let err = plan.select(&alone, &staging).unwrap_err();
        assert!(err.reason.contains("in one cluster"), "{}", err.reason);
    }

    #[test]
    fn min_cost_trades_time_for_money_within_the_deadline() {
        // Dear now, cheap later.
        let plan = SlotPlan::new(
            procs(&[("a", "x", 1.0)]),
            [slot("a", 0, 100, 5.0), slot("a", 100, 300, 1.0)],
        )
        .unwrap();
        let mut r = req(1, 100, Criterion::MinCost);
        let sel = plan.select(&r, &[]).unwrap();
        assert_eq!((sel.start, sel.cost), (Time(100), 100.0));
        // By 50 the cheapest start is the deadline itself: 50 s × 5 + 50 s × 1.
        r.deadline = Some(Time(50));
        let sel = plan.select(&r, &[]).unwrap();
        assert_eq!((sel.start, sel.cost), (Time(50), 300.0));
        r.max_price = 2.0;
        r.deadline = None;
        assert_eq!(plan.select(&r, &[]).unwrap().start, Time(100));
        r.max_price = 0.5;
        let err = plan.select(&r, &[]).unwrap_err();
        assert!(err.reason.contains("costs at most 0.5"), "{}", err.reason);
    }

    #[test]
    fn bad_plans_are_refused() {
        let p = procs(&[("a", "x", 1.0)]);
        let err =
            SlotPlan::new(p.clone(), [slot("a", 0, 10, 1.0), slot("a", 5, 20, 1.0)]).unwrap_err();
        assert!(matches!(err, PlanError::Overlap { .. }));
        let err = SlotPlan::new(p.clone(), [slot("z", 0, 10, 1.0)]).unwrap_err();
        assert_eq!(err.to_string(), "slot 0: unknown processor \"z\"");
        let err = SlotPlan::new(p.clone(), [slot("a", 10, 10, 1.0)]).unwrap_err();
        assert!(matches!(err, PlanError::EmptySlot { .. }));
        // By index: the same checks, and an index past the processors is named.
        let at = |processor, start, end, cost| Slot {
            processor,
            start: Time(start),
            end: Time(end),
            cost,
        };
        let err = SlotPlan::from_indexed(p.clone(), vec![at(0, 0, 10, 1.0), at(1, 0, 10, 1.0)])
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "slot 1: processor index 1 is out of range (1 processors)"
        );
        let err = SlotPlan::from_indexed(p.clone(), vec![at(0, 0, 10, f64::NAN)]).unwrap_err();
        assert!(matches!(err, PlanError::BadCost { index: 0, .. }));
        let err = SlotPlan::from_indexed(p.clone(), vec![at(0, 5, 20, 1.0), at(0, 0, 10, 1.0)])
            .unwrap_err();
        assert!(matches!(err, PlanError::Overlap { .. }));
        let plan = SlotPlan::from_indexed(p, vec![at(0, 20, 30, 2.0), at(0, 0, 10, 1.0)]).unwrap();
        assert_eq!(plan.live_slots().count(), 2);
    }

    #[test]
    fn tiers_give_few_prices_one_each_and_group_many_by_slot_count() {
        assert_eq!(tiers(&[]), Vec::<u32>::new());
        assert_eq!(tiers(&[7, 1, 30]), vec![0, 1, 2]);
        // 100 slots: tiers close once they hold a quarter, a half, three quarters.
        assert_eq!(
            tiers(&[10, 10, 10, 10, 10, 10, 10, 10, 10, 10]),
            vec![0, 0, 0, 1, 1, 2, 2, 2, 3, 3]
        );
        // One price holding most slots fills its tier; the rest share the last ones.
        assert_eq!(tiers(&[1, 90, 1, 1, 1, 6]), vec![0, 0, 1, 2, 3, 3]);
    }

    /// Many commits in a row go through both kinds of re-indexing (folding the pieces into
    /// lists A and B, and renumbering from scratch); after every commit the plan answers
    /// every criterion exactly as a plan built afresh from its live slots.
    #[test]
    fn commits_and_re_indexing_keep_answers_those_of_a_fresh_plan() {
        let spec: Vec<(String, String, f64)> = (0..8)
            .map(|i| (format!("p{i}"), format!("c{}", i % 2), [1.0, 1.5][i % 2]))
            .collect();
        let names: Vec<(&str, &str, f64)> = spec
            .iter()
            .map(|(a, b, v)| (a.as_str(), b.as_str(), *v))
            .collect();
        let mut seed = 7u64;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let mut raw = Vec::new();
        for (id, _, _) in &names {
            let mut t = 0;
            for _ in 0..40 {
                t += next(5) as i64;
                let len = 5 + next(40) as i64;
                // Seven prices: the tiers of list A group several.
                raw.push(slot(id, t, t + len, 1.0 + next(7) as f64));
                t += len;
            }
        }
        let mut plan = SlotPlan::new(procs(&names), raw).unwrap();
        let (mut folded, mut renumbered) = (false, false);
        for k in 0..1000 {
            let criterion = [
                Criterion::EarliestStart,
                Criterion::EarliestFinish,
                Criterion::MinCost,
            ][k % 3]
                .clone();
            let mut r = req(1 + next(3) as u32, 1 + next(30) as i64, criterion);
            r.max_price = 1.0 + next(7) as f64;
            let staging = [Some(Dur(0)), Some(Dur(next(4) as i64))];
            let fresh = SlotPlan::new(
                procs(&names),
                plan.live_slots().map(|s| {
                    (
                        names[s.processor as usize].0.to_string(),
                        s.start,
                        s.end,
                        s.cost,
                    )
                }),
            )
            .unwrap();
            let (a, b) = (plan.select(&r, &staging), fresh.select(&r, &staging));
            match (&a, &b) {
                (Ok(x), Ok(y)) => assert_eq!(
                    (x.start, x.end, x.cost, &x.slots),
                    (y.start, y.end, y.cost, &y.slots),
                    "request {k}"
                ),
                (Err(_), Err(_)) => {}
                _ => panic!("request {k}: committed {a:?}, fresh {b:?}"),
            }
            let Ok(sel) = a else { continue };
            let (pieces, numbered) = (plan.extra_start.len(), plan.slots.len());
            plan.commit(&sel);
            folded |= pieces > 0 && plan.extra_start.is_empty() && plan.slots.len() >= numbered;
            renumbered |= plan.slots.len() < numbered;
        }
        assert!(folded, "no commit folded the pieces into the lists");
        assert!(
            renumbered,
            "no commit renumbered the slots: {} numbered, {} live",
            plan.slots.len(),
            plan.live
        );
    }
}
