//! The waiting queue in policy order, stored compactly so that a scheduling pass is a walk
//! over a contiguous array. Started or cancelled jobs are tombstoned and swept out lazily, so
//! removing any job costs O(1) amortized.

use crate::ids::JobId;
use crate::policy::QueueOrder;
use crate::time::Dur;

/// What a pass needs to know of a waiting job without a map lookup.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slot {
    pub id: JobId,
    pub procs: u32,
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
    slots: Vec<Slot>,
    /// Every slot before `head` is dead.
    head: usize,
    dead: usize,
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

    pub fn get(&self, i: usize) -> &Slot {
        &self.slots[i]
    }

    pub fn get_mut(&mut self, i: usize) -> &mut Slot {
        &mut self.slots[i]
    }

    /// Inserts in static order: after every slot with a smaller or equal `(key, seq)`.
    pub fn insert(&mut self, slot: Slot, order: QueueOrder) {
        let sorted_by_key = order != QueueOrder::Priority;
        if !sorted_by_key
            || self
                .slots
                .last()
                .is_none_or(|last| (last.key, last.seq) <= (slot.key, slot.seq))
        {
            self.slots.push(slot);
            return;
        }
        let at = self.head
            + self.slots[self.head..].partition_point(|s| (s.key, s.seq) <= (slot.key, slot.seq));
        self.slots.insert(at, slot);
    }

    /// Marks position `i` as gone.
    pub fn remove_at(&mut self, i: usize) {
        debug_assert!(self.slots[i].alive);
        self.slots[i].alive = false;
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
        }
    }

    /// Re-sorts by priority (highest first), then submission order. Positions change.
    pub fn sort_by_priority(&mut self) {
        self.slots.retain(|s| s.alive);
        self.head = 0;
        self.dead = 0;
        self.slots
            .sort_by(|a, b| b.priority.total_cmp(&a.priority).then(a.seq.cmp(&b.seq)));
    }

    pub fn iter_alive(&self) -> impl Iterator<Item = &Slot> {
        self.slots[self.head..].iter().filter(|s| s.alive)
    }

    pub fn iter_alive_mut(&mut self) -> impl Iterator<Item = &mut Slot> {
        self.slots[self.head..].iter_mut().filter(|s| s.alive)
    }
}
