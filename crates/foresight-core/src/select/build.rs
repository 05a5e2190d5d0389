//! Plan construction: the input checked, slots numbered in order of start and linked per
//! processor, lists A and B, the walks' per-slot data, tiers, the skip index and the marks.

use super::error::PlanError;
use super::hot::{seconds_between, Hot, Scan, NEVER};
use super::mark::MAX_MARKS;
use super::memo::{Bounds, UsableCache, WalkStates};
use super::processor::Processor;
use super::reach::ReachIndex;
use super::tier::{block_reach, tier_bounds, tiers};
use super::{Slot, SlotPlan, NONE};
use crate::time::{Dur, Time};
use rayon::prelude::*;
use std::collections::BTreeSet;

/// The processors' clusters, numbered in order of first appearance.
struct ProcessorIndex<'a> {
    /// Processor index by name (hashed with Fx: a grid's cycle indexes every processor).
    by_name: rustc_hash::FxHashMap<&'a str, u32>,
    clusters: Vec<String>,
    /// Cluster of each processor.
    cluster_of: Vec<u32>,
}

/// Checks the processors (unique names, positive speeds) and indexes them.
fn index_processors(processors: &[Processor]) -> Result<ProcessorIndex<'_>, PlanError> {
    let mut by_name = rustc_hash::FxHashMap::default();
    by_name.reserve(processors.len());
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
        // A cluster's processors come together: its name is most often the last one seen.
        let c = match clusters
            .last()
            .filter(|c| **c == p.cluster)
            .map(|_| clusters.len() - 1)
            .or_else(|| clusters.iter().position(|c| *c == p.cluster))
        {
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

/// Slot numbers `0..hot.len()` sorted by tier, stably: a counting sort over `tiers` tiers
/// (`tier_of` maps a slot's cost rank to its tier, below `tiers`).
fn order_by_tier(hot: &[Hot], tier_of: &[u32], tiers: usize) -> Vec<u32> {
    let tier = |h: &Hot| tier_of[h.rank as usize] as usize;
    let mut at = vec![0usize; tiers + 1];
    for h in hot {
        at[tier(h) + 1] += 1;
    }
    for t in 0..tiers {
        at[t + 1] += at[t];
    }
    let mut order = vec![0u32; hot.len()];
    for (i, h) in hot.iter().enumerate() {
        let t = tier(h);
        order[at[t]] = i as u32;
        at[t] += 1;
    }
    order
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
    pub(super) fn from_slots(
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
        // each tier. Tiers are few, so the sort counts (linear, not n log n: a grid's plan
        // is rebuilt every cycle).
        let tiers = tier_of.last().map_or(1, |&t| t as usize + 1);
        let order = order_by_tier(&hot, &tier_of, tiers);
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
        // Marks cost a row of every processor each: a plan of few slots per processor
        // (a grid's forecast between jobs) keeps few, since its walks are short anyway, and
        // rebuilding after commits then costs what the slots cost, not 256 rows.
        let marks_wanted = (4 * n / processors.len().max(1)).clamp(8, MAX_MARKS as usize) as i64;
        let mark_step = (span + marks_wanted - 1) / marks_wanted;
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
            reach: ReachIndex::new(&cluster_of, clusters.len()),
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::fixture::{procs, slot};

    proptest::proptest! {
        /// The counting sort by tier orders slots as a stable comparison sort does.
        #[test]
        fn counting_by_tier_is_the_stable_sort(
            ranks in proptest::collection::vec(0u32..12, 0..200),
            cuts in proptest::collection::vec(0u32..3, 12),
        ) {
            // A non-decreasing map of the 12 ranks to tiers, as `tiers` makes.
            let tier_of: Vec<u32> = cuts
                .iter()
                .scan(0u32, |t, &c| {
                    *t += u32::from(c == 0);
                    Some(*t)
                })
                .collect();
            let tiers = tier_of.last().map_or(1, |&t| t as usize + 1);
            let hot: Vec<Hot> = ranks
                .iter()
                .map(|&rank| Hot {
                    start: Time(0),
                    end: Time(1),
                    chain_end: Time(1),
                    chain_max: 0,
                    processor: 0,
                    rank,
                    prev_rank: NEVER,
                    next_rank: NEVER,
                })
                .collect();
            let mut want: Vec<u32> = (0..hot.len() as u32).collect();
            want.sort_by_key(|&i| tier_of[hot[i as usize].rank as usize]);
            proptest::prop_assert_eq!(order_by_tier(&hot, &tier_of, tiers), want);
        }
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
}
