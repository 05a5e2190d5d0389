//! List A in tiers of price (a job that cannot afford the dearer slots never reads them),
//! its skip index over blocks of slots, and the search for run heads a block at a time.

use super::hot::{Hot, Scan};
use super::SlotPlan;
use crate::time::Time;
use itertools::{Either, Itertools};

/// Numbered slots per block of the walk's skip index (and per batch of its head search).
pub(super) const BLOCK: usize = 256;

/// Words of one bit per slot of a block.
const WORDS: usize = BLOCK / 64;

/// Most tiers of list A (see [`SlotPlan::tier_of`]).
const MAX_TIERS: usize = 4;

/// One bit per item of `items` (at most 64) that passes `test`, the first item lowest:
/// written without branches, so that it compiles to vector compares.
pub(super) fn mask<T>(items: &[T], test: impl Fn(&T) -> bool) -> u64 {
    items
        .iter()
        .enumerate()
        .fold(0u64, |m, (i, item)| m | (u64::from(test(item)) << i))
}

/// Groups price ranks, cheapest first, into at most [`MAX_TIERS`] tiers of consecutive
/// ranks holding about equal numbers of slots (`per_rank`); a rank is never split. With
/// few distinct prices each has a tier of its own.
pub(super) fn tiers(per_rank: &[usize]) -> Vec<u32> {
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

/// Where each of `tiers` tiers' part of `order` (sorted by tier) begins, and where the
/// last ends.
pub(super) fn tier_bounds(order: &[u32], tiers: usize, tier: impl Fn(u32) -> u32) -> Vec<usize> {
    let mut at: Vec<usize> = (0..tiers)
        .map(|t| order.partition_point(|&i| (tier(i) as usize) < t))
        .collect();
    at.push(order.len());
    at
}

/// Per block of [`BLOCK`] slots of list A, the longest chain any of them begins, seconds
/// (`i64::MAX`: too long to say).
pub(super) fn block_reach(scan: &[Scan]) -> Vec<i64> {
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

/// One tier's share of a walk's pass over heads in order of start: its part of list A,
/// read a block at a time without branching, and its pieces of commits.
pub(super) struct TierHeads<'a> {
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
    pub(super) listed: Option<(Time, u32)>,
    pub(super) piece: Option<(Time, u32)>,
}

impl<'a> TierHeads<'a> {
    /// The heads of tier `t` that start at `from` or later (all of them without).
    pub(super) fn new(plan: &'a SlotPlan, t: usize, from: Option<Time>) -> TierHeads<'a> {
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
    pub(super) fn next_listed(&mut self, plan: &SlotPlan, lim: u32, secs: i64, ok: &[bool]) {
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
    pub(super) fn next_piece(&mut self, plan: &SlotPlan, may_fit: &impl Fn(&Hot) -> bool) {
        self.piece = self
            .pieces
            .by_ref()
            .map(|&(_, start, _, k)| (start, k))
            .find(|&(_, k)| may_fit(&plan.hot[k as usize]));
    }
}

impl SlotPlan {
    /// The places of `places` in list A whose slot is still there.
    pub(super) fn placed(
        &self,
        places: std::ops::Range<usize>,
    ) -> impl Iterator<Item = usize> + '_ {
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
    pub(super) fn in_start_order(&self) -> impl Iterator<Item = u32> + '_ {
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
