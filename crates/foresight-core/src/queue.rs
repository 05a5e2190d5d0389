//! The waiting queue in policy order, stored compactly so that a scheduling pass is a walk
//! over a contiguous array. Started or cancelled jobs are tombstoned and swept out lazily, so
//! removing any job costs O(1) amortized.

use crate::ids::JobId;
use crate::policy::QueueOrder;
use crate::shortest::{Candidate, ShortestIndex};
use crate::time::{Dur, Time};

/// What a pass needs to know of a waiting job without a map lookup.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QueueSlot {
    pub id: JobId,
    pub procs: u32,
    /// The planned duration: the job's prediction if it has one, else its estimate.
    pub estimate: Dur,
    /// Submission order: the final tie-breaker of every order.
    pub seq: u64,
    /// Static sort key (submit time for FCFS, ±estimate for SJF/LJF).
    pub key: i64,
    /// Dynamic priority, refreshed each pass under [`QueueOrder::Priority`].
    pub priority: f64,
    /// The job holds a reservation.
    pub reserved: bool,
    /// False once the job left the queue.
    pub alive: bool,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Queue {
    slots: Vec<QueueSlot>,
    /// Every slot before `head` is dead.
    head: usize,
    dead: usize,
    /// Per block of [`BLOCK`] positions: the smallest processor count and the smallest
    /// estimate among its live, unreserved slots, or `None` when it must be recomputed. A
    /// backfill pass skips a whole block when even those minima cannot fit.
    blocks: Vec<Option<(u32, i64)>>,
    /// Per block: bounds over its live reserved slots, which let compression pass over a
    /// whole block whose jobs cannot move; `None` when they must be recomputed.
    reserved: Vec<Option<ReservedBlock>>,
    /// The live, unreserved slots by plan, for shortest-first backfill; kept only when the
    /// policy asks for it ([`Queue::index_shortest`]).
    shortest: Option<ShortestIndex>,
}

/// Bounds over the reserved jobs of one block, kept by compression: every one of them asks
/// for at least `procs` processors, holds a reservation starting at or before `start`, and
/// was last found at its earliest start when the pool was at version `checked` or later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReservedBlock {
    pub procs: u32,
    pub start: Time,
    pub checked: u64,
}

impl ReservedBlock {
    /// The bounds of a block with no reserved job.
    pub const NONE: ReservedBlock = ReservedBlock {
        procs: u32::MAX,
        start: Time::MIN,
        checked: u64::MAX,
    };

    /// The bounds widened to cover one more job.
    pub fn with(self, procs: u32, start: Time, checked: u64) -> ReservedBlock {
        ReservedBlock {
            procs: self.procs.min(procs),
            start: self.start.max(start),
            checked: self.checked.min(checked),
        }
    }
}

/// Positions per summary block.
pub(crate) const BLOCK: usize = 32;

/// A summary that admits nothing (an empty block).
pub(crate) const EMPTY: (u32, i64) = (u32::MAX, i64::MAX);

fn candidate(s: &QueueSlot) -> Candidate {
    Candidate {
        estimate: s.estimate.as_secs(),
        seq: s.seq,
        key: s.key,
        procs: s.procs,
    }
}

fn summary(s: &QueueSlot) -> (u32, i64) {
    if s.alive && !s.reserved {
        (s.procs, s.estimate.as_secs())
    } else {
        EMPTY
    }
}

impl Queue {
    pub fn len(&self) -> usize {
        self.slots.len() - self.head - self.dead
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The positions to walk, in order: `head..end`.
    pub fn range(&self) -> std::ops::Range<usize> {
        self.head..self.slots.len()
    }

    pub fn get(&self, i: usize) -> &QueueSlot {
        &self.slots[i]
    }

    /// Keeps an index of the live, unreserved jobs by plan from now on (see
    /// [`Queue::shortest`]), for a machine of `capacity` processors. Only for a queue in
    /// static order, where [`Queue::position_of`] finds a job by its key.
    pub fn index_shortest(&mut self, capacity: u32) {
        let mut index = ShortestIndex::new(capacity);
        for s in self.iter_alive().filter(|s| !s.reserved) {
            index.insert(candidate(s));
        }
        self.shortest = Some(index);
    }

    /// Stops keeping the index: the backfill then sorts the queue, as a reference.
    #[cfg(test)]
    pub fn drop_shortest_index(&mut self) {
        self.shortest = None;
    }

    /// The index of live, unreserved jobs by plan, if kept.
    pub fn shortest(&self) -> Option<&ShortestIndex> {
        self.shortest.as_ref()
    }

    /// Takes a job out of the index or puts it back, without changing the queue: a pass
    /// hides the candidates it refused so that the next lookup passes them over.
    pub fn set_hidden(&mut self, c: Candidate, hidden: bool) {
        if let Some(index) = &mut self.shortest {
            if hidden {
                index.remove(c);
            } else {
                index.insert(c);
            }
        }
    }

    /// The position of the live job with static key `key` and submission order `seq`, by
    /// binary search (the queue is sorted by `(key, seq)` unless ordered by priority).
    pub fn position_of(&self, key: i64, seq: u64) -> Option<usize> {
        let i =
            self.head + self.slots[self.head..].partition_point(|s| (s.key, s.seq) < (key, seq));
        self.slots
            .get(i)
            .is_some_and(|s| s.alive && s.seq == seq)
            .then_some(i)
    }

    /// Marks whether the job at `i` holds a reservation.
    pub fn set_reserved(&mut self, i: usize, reserved: bool) {
        let s = self.slots[i];
        if let Some(index) = &mut self.shortest {
            if s.alive && s.reserved != reserved {
                if reserved {
                    index.remove(candidate(&s));
                } else {
                    index.insert(candidate(&s));
                }
            }
        }
        self.slots[i].reserved = reserved;
        self.blocks[i / BLOCK] = None;
        self.reserved[i / BLOCK] = None;
    }

    /// The bounds over the reserved jobs of block `b`, if known.
    pub fn reserved_block(&self, b: usize) -> Option<ReservedBlock> {
        self.reserved[b]
    }

    /// Records the bounds over the reserved jobs of block `b` (`None` to forget them, when
    /// a reservation there moved later).
    pub fn set_reserved_block(&mut self, b: usize, bounds: Option<ReservedBlock>) {
        self.reserved[b] = bounds;
    }

    /// Forgets the bounds of every block.
    pub fn forget_reserved_blocks(&mut self) {
        self.reserved.fill(None);
    }

    /// The minima of the block that holds position `i` (recomputed if stale).
    pub fn block_minima(&mut self, i: usize) -> (u32, i64) {
        let b = i / BLOCK;
        if let Some(m) = self.blocks[b] {
            return m;
        }
        let end = ((b + 1) * BLOCK).min(self.slots.len());
        let m = self.slots[b * BLOCK..end]
            .iter()
            .map(summary)
            .fold(EMPTY, |a, s| (a.0.min(s.0), a.1.min(s.1)));
        self.blocks[b] = Some(m);
        m
    }

    /// Forgets every block summary after positions moved.
    fn reset_blocks(&mut self) {
        self.blocks.clear();
        self.blocks.resize(self.slots.len().div_ceil(BLOCK), None);
        self.reserved.clear();
        self.reserved.resize(self.slots.len().div_ceil(BLOCK), None);
    }

    /// Inserts in static order: after every slot with a smaller or equal `(key, seq)`.
    pub fn insert(&mut self, slot: QueueSlot, order: QueueOrder) {
        let sorted_by_key = order != QueueOrder::Priority;
        if let Some(index) = &mut self.shortest {
            if slot.alive && !slot.reserved {
                index.insert(candidate(&slot));
            }
        }
        if !sorted_by_key
            || self
                .slots
                .last()
                .is_none_or(|last| (last.key, last.seq) <= (slot.key, slot.seq))
        {
            let i = self.slots.len();
            self.slots.push(slot);
            if i % BLOCK == 0 {
                self.blocks.push(Some(EMPTY));
                self.reserved.push(Some(ReservedBlock::NONE));
            }
            if let Some(m) = &mut self.blocks[i / BLOCK] {
                let s = summary(&slot);
                *m = (m.0.min(s.0), m.1.min(s.1));
            }
            return;
        }
        let at = self.head
            + self.slots[self.head..].partition_point(|s| (s.key, s.seq) <= (slot.key, slot.seq));
        self.slots.insert(at, slot);
        self.reset_blocks();
    }

    /// Marks position `i` as gone.
    pub fn remove_at(&mut self, i: usize) {
        debug_assert!(self.slots[i].alive);
        if let Some(index) = &mut self.shortest {
            if !self.slots[i].reserved {
                index.remove(candidate(&self.slots[i]));
            }
        }
        self.slots[i].alive = false;
        // The reserved bounds stay true of the jobs left.
        self.blocks[i / BLOCK] = None;
        if i == self.head {
            self.head += 1;
            while self.head < self.slots.len() && !self.slots[self.head].alive {
                self.head += 1;
                self.dead -= 1;
            }
        } else {
            self.dead += 1;
        }
    }

    /// Position of a job, by linear search (only for rare operations such as cancel).
    pub fn position(&self, id: JobId) -> Option<usize> {
        self.range()
            .find(|&i| self.slots[i].alive && self.slots[i].id == id)
    }

    /// Drops tombstones when they are at least half of the storage; positions change.
    pub fn compact(&mut self) {
        if self.head + self.dead >= self.slots.len() / 2 && self.head + self.dead > 0 {
            self.slots.retain(|s| s.alive);
            self.head = 0;
            self.dead = 0;
            self.reset_blocks();
        }
    }

    /// Re-sorts by priority (highest first), then submission order. Positions change.
    pub fn sort_by_priority(&mut self) {
        self.slots.retain(|s| s.alive);
        self.head = 0;
        self.dead = 0;
        self.slots
            .sort_by(|a, b| b.priority.total_cmp(&a.priority).then(a.seq.cmp(&b.seq)));
        self.reset_blocks();
    }

    pub fn iter_alive(&self) -> impl Iterator<Item = &QueueSlot> {
        self.slots[self.head..].iter().filter(|s| s.alive)
    }

    pub fn iter_alive_mut(&mut self) -> impl Iterator<Item = &mut QueueSlot> {
        self.slots[self.head..].iter_mut().filter(|s| s.alive)
    }
}
