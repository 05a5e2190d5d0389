//! What the walks read of each slot, packed for passes in order of start.

use crate::time::Time;

/// Rank of a replaced slot, and of a missing neighbour: above every request's limit.
pub(super) const NEVER: u32 = u32::MAX;

/// What the earliest-window walk needs of one slot, packed so that a pass over slots in
/// order of start reads one record per slot in sequence. A slot is *suitable* for a request
/// when `rank` is below the request's rank limit and its processor is usable; it heads a run
/// when its adjacent predecessor is not suitable (`prev_rank` at or above the limit), and
/// ends one when its adjacent successor is not (`next_rank`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Hot {
    pub(super) start: Time,
    pub(super) end: Time,
    /// End of the chain of adjacent slots this one begins (its processor's time from here
    /// without a break, whatever the price); `chain_max` is the highest rank in it. A run
    /// can last no longer than its chain, and lasts exactly as long when the whole chain is
    /// suitable: the walk learns most runs' ends without following them, and passes over
    /// runs too short for the job without looking at them.
    pub(super) chain_end: Time,
    pub(super) chain_max: u32,
    pub(super) processor: u32,
    /// Rank of the slot's cost in `costs`; `NEVER` once replaced by a commit.
    pub(super) rank: u32,
    /// Rank of the live slot of the same processor that ends exactly at this one's start,
    /// `NEVER` if there is none.
    pub(super) prev_rank: u32,
    /// Rank of the live slot of the same processor that starts exactly at this one's end,
    /// `NEVER` if there is none.
    pub(super) next_rank: u32,
}

/// The part of the [`Hot`] of a slot of list A that the search for heads reads.
#[derive(Clone, Copy, Debug)]
pub(super) struct Scan {
    /// Seconds from the slot's start to its chain's end, at most `u32::MAX` (meaning "at
    /// least that"); commits may leave it longer than the chain now is, never shorter.
    pub(super) reach: u32,
    /// Likewise to the end of the adjacent slots no dearer than this one: the run it heads
    /// under the lowest price that admits it (rank limit `rank + 1`).
    pub(super) reach_low: u32,
    pub(super) processor: u32,
    pub(super) rank: u32,
    pub(super) prev_rank: u32,
}

impl Scan {
    /// What the search for heads reads of slot `h`, whose no-dearer slots end at `low_end`.
    pub(super) fn of(h: &Hot, low_end: Time) -> Scan {
        Scan {
            reach: seconds_between(h.start, h.chain_end),
            reach_low: seconds_between(h.start, low_end),
            processor: h.processor,
            rank: h.rank,
            prev_rank: h.prev_rank,
        }
    }

    /// Could this slot head a run of at least `dur` seconds?
    pub(super) fn may_fit(&self, lim: u32, dur: i64, proc_ok: &[bool]) -> bool {
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

/// Seconds from `from` to `to`, at most `u32::MAX` (meaning "at least that").
pub(super) fn seconds_between(from: Time, to: Time) -> u32 {
    u32::try_from(to.secs().saturating_sub(from.secs())).unwrap_or(u32::MAX)
}
