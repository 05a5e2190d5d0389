//! The processors' reach, for the reasons of requests that find no window: per price,
//! cluster and usable time, each processor's longest run of adjacent slots within the price,
//! kept up to date by reading again only the processors that commits touched since.
//!
//! On a full horizon most of a long queue finds no window, and each such request says why
//! (how many processors have time at its price, how many a run of its length): reading every
//! slot for each of them would cost the queue times the plan. An entry is built once per
//! (price, cluster, usable time) and after each commit re-reads only the processors the
//! commit cut, so a reason costs a few binary searches per cluster.

use super::memo::Memo;
use super::{SlotPlan, NONE};
use crate::time::Time;
use rustc_hash::FxHashMap;

/// Entries a plan keeps; the least recently used goes first.
const ENTRIES_KEPT: usize = 256;

/// Which entry: the price's bits, the cluster, its usable time (`None`: not usable).
type Key = (u64, u32, Option<Time>);

/// The reach of one cluster's processors at one price, from one usable time.
#[derive(Clone, Debug)]
struct ClusterReach {
    /// Length of the cluster's log of touched processors when it was last brought up to date.
    seen: usize,
    /// When it was last used (a counter of queries), for eviction.
    used: u64,
    /// `(has time at the price, longest run within it from the usable time)` per processor,
    /// in the order of the cluster's members (`i64::MIN`: none, or the cluster not usable).
    of: Vec<(bool, i64)>,
    /// How many of them have time at the price.
    priced: usize,
    /// Per speed class, the longest runs of the cluster's processors of that class,
    /// ascending (all empty when the cluster is not usable): how many last a job at that
    /// speed is one binary search.
    longest: Vec<Vec<i64>>,
}

/// What the index holds behind its lock.
#[derive(Clone, Debug, Default)]
struct Entries {
    /// Queries so far.
    clock: u64,
    map: FxHashMap<Key, ClusterReach>,
    /// Per cluster, the processors commits touched, in order (logged only while some entry
    /// may need them).
    touched: Vec<Vec<u32>>,
    /// Per cluster, its processors, ascending.
    members: Vec<Vec<u32>>,
    /// Place of each processor among its cluster's members.
    member_at: Vec<u32>,
}

/// The processors' reach per (price, cluster, usable time), brought up to date from the log
/// of touched processors when read. Selections take the plan by shared reference, so it sits
/// behind a lock; commits, which hold the plan mutably, log without locking.
#[derive(Clone, Debug, Default)]
pub(super) struct ReachIndex(Memo<Entries>);

/// Counts of processors a request could use, for its no-fit reason.
pub(super) struct ReachCounts {
    /// Processors (meeting the requirements) with time at the price.
    pub(super) priced: usize,
    /// Per cluster, those with a run of the job's length at their speed from the cluster's
    /// usable time.
    pub(super) long: Vec<usize>,
}

impl ReachIndex {
    /// An empty index for processors in clusters `cluster_of` (of `clusters` clusters).
    pub(super) fn new(cluster_of: &[u32], clusters: usize) -> ReachIndex {
        let mut members = vec![Vec::new(); clusters];
        let mut member_at = Vec::with_capacity(cluster_of.len());
        for (p, &c) in cluster_of.iter().enumerate() {
            member_at.push(members[c as usize].len() as u32);
            members[c as usize].push(p as u32);
        }
        ReachIndex(Memo::new(Entries {
            clock: 0,
            map: FxHashMap::default(),
            touched: vec![Vec::new(); clusters],
            members,
            member_at,
        }))
    }

    /// Records that a commit cut processor `p` of cluster `c`.
    pub(super) fn touch(&mut self, c: u32, p: u32) {
        let e = self.0.get_mut();
        if !e.map.is_empty() {
            e.touched[c as usize].push(p);
        }
    }
}

impl SlotPlan {
    /// Processor `p`'s reach at `max_price` from `from`: has it any time at the price, and
    /// how long is its longest run of adjacent slots within the price from `from`? Its own
    /// list holds its live slots in time order, so one pass answers both.
    fn processor_reach(&self, p: u32, max_price: f64, from: Option<Time>) -> (bool, i64) {
        let (mut priced, mut longest) = (false, i64::MIN);
        // Slots within the price that meet end to end make one run, as the walks join them.
        let mut run: Option<(Time, Time)> = None;
        let mut i = self.head[p as usize];
        while i != NONE {
            let s = &self.slots[i as usize];
            i = self.next[i as usize];
            if s.cost > max_price {
                continue;
            }
            priced = true;
            let Some(from) = from else {
                break;
            };
            run = match run {
                Some((start, end)) if end == s.start => Some((start, s.end)),
                _ => Some((s.start, s.end)),
            };
            let (start, end) = run.expect("invariant: just set");
            longest = longest.max((end - start.max(from)).as_secs());
        }
        (priced, longest)
    }

    /// A new entry for cluster `c`: every processor read.
    fn cluster_reach(
        &self,
        e: &Entries,
        c: usize,
        max_price: f64,
        from: Option<Time>,
    ) -> ClusterReach {
        let of: Vec<(bool, i64)> = e.members[c]
            .iter()
            .map(|&p| self.processor_reach(p, max_price, from))
            .collect();
        let mut longest = vec![Vec::new(); self.speeds.len()];
        if from.is_some() {
            for (&p, &(_, l)) in e.members[c].iter().zip(&of) {
                longest[self.speed_class[p as usize] as usize].push(l);
            }
            for l in &mut longest {
                l.sort_unstable();
            }
        }
        ClusterReach {
            seen: e.touched[c].len(),
            used: e.clock,
            priced: of.iter().filter(|(priced, _)| *priced).count(),
            of,
            longest,
        }
    }

    /// Brings `r` up to date: the processors touched since it was read are read again.
    fn refresh(
        &self,
        e: &Entries,
        r: &mut ClusterReach,
        c: usize,
        max_price: f64,
        from: Option<Time>,
    ) {
        let log = &e.touched[c];
        if r.seen == log.len() {
            return;
        }
        let mut fresh = log[r.seen..].to_vec();
        fresh.sort_unstable();
        fresh.dedup();
        for p in fresh {
            let k = e.member_at[p as usize] as usize;
            let (was_priced, was_long) = r.of[k];
            let (priced, long) = self.processor_reach(p, max_price, from);
            r.priced = r.priced + usize::from(priced) - usize::from(was_priced);
            if from.is_some() && long != was_long {
                let list = &mut r.longest[self.speed_class[p as usize] as usize];
                let at = list.partition_point(|&x| x < was_long);
                list.remove(at);
                let to = list.partition_point(|&x| x < long);
                list.insert(to, long);
            }
            r.of[k] = (priced, long);
        }
        r.seen = log.len();
    }

    /// How many processors (those `suitable_proc` admits, if given) have time at
    /// `max_price`, and per cluster how many have a run of `walltime` seconds of reference
    /// work at their speed from the cluster's usable time in `avail`.
    pub(super) fn reach_counts(
        &self,
        max_price: f64,
        walltime: i64,
        suitable_proc: Option<&[bool]>,
        avail: &[Option<Time>],
    ) -> ReachCounts {
        let mut guard = self.reach.0.lock();
        let e = &mut *guard;
        e.clock += 1;
        // Each class's run length, as the walks compute it.
        let dur: Vec<i64> = self
            .speeds
            .iter()
            .map(|&v| (walltime as f64 / v).ceil() as i64)
            .collect();
        let mut counts = ReachCounts {
            priced: 0,
            long: vec![0; self.clusters.len()],
        };
        for (c, &from) in avail.iter().enumerate().take(self.clusters.len()) {
            let key = (max_price.to_bits(), c as u32, from);
            let mut r = match e.map.remove(&key) {
                Some(mut r) => {
                    self.refresh(e, &mut r, c, max_price, from);
                    r
                }
                None => self.cluster_reach(e, c, max_price, from),
            };
            r.used = e.clock;
            match suitable_proc {
                None => {
                    counts.priced += r.priced;
                    if from.is_some() {
                        counts.long[c] = r
                            .longest
                            .iter()
                            .zip(&dur)
                            .map(|(list, &d)| list.len() - list.partition_point(|&x| x < d))
                            .sum();
                    }
                }
                Some(ok) => {
                    for (&p, &(priced, long)) in e.members[c].iter().zip(&r.of) {
                        if ok[p as usize] {
                            counts.priced += usize::from(priced);
                            let d = dur[self.speed_class[p as usize] as usize];
                            counts.long[c] += usize::from(from.is_some() && long >= d);
                        }
                    }
                }
            }
            if e.map.len() >= ENTRIES_KEPT {
                let oldest = e
                    .map
                    .iter()
                    .min_by_key(|(_, r)| r.used)
                    .map(|(k, _)| *k)
                    .expect("invariant: a full map has an entry");
                e.map.remove(&oldest);
            }
            e.map.insert(key, r);
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::fixture::{random_plan, req, Lcg};
    use crate::select::Criterion;
    use crate::time::Dur;

    /// The counts read from every live slot afresh: per processor, its live slots in time
    /// order, joined where they meet within the price.
    fn brute(
        plan: &SlotPlan,
        max_price: f64,
        walltime: i64,
        ok: Option<&[bool]>,
        avail: &[Option<Time>],
    ) -> (usize, Vec<usize>) {
        let mut priced = 0;
        let mut long = vec![0; plan.clusters().len()];
        for (p, proc) in plan.processors().iter().enumerate() {
            if ok.is_some_and(|ok| !ok[p]) {
                continue;
            }
            let mut mine: Vec<_> = plan
                .live_slots()
                .filter(|s| s.processor as usize == p && s.cost <= max_price)
                .copied()
                .collect();
            mine.sort_by_key(|s| s.start);
            priced += usize::from(!mine.is_empty());
            let c = plan.cluster_of[p] as usize;
            let Some(from) = avail[c] else { continue };
            let dur = (walltime as f64 / proc.speed).ceil() as i64;
            let mut best = i64::MIN;
            let mut run: Option<(Time, Time)> = None;
            for s in mine {
                run = match run {
                    Some((a, b)) if b == s.start => Some((a, s.end)),
                    _ => Some((s.start, s.end)),
                };
                let (a, b) = run.unwrap();
                best = best.max((b - a.max(from)).as_secs());
            }
            long[c] += usize::from(best >= dur);
        }
        (priced, long)
    }

    /// Through a thousand commits (and the re-indexing and renumbering they cause), the
    /// counts kept up to date from the touched processors equal the counts read afresh, for
    /// random prices, lengths, usable times (some clusters unusable) and requirements.
    #[test]
    fn kept_counts_equal_counts_read_afresh_through_commits() {
        let mut rng = Lcg(11);
        let mut plan = random_plan(&mut rng, 12, 3, 30, 4, 5);
        let mut next = |n: u64| rng.next(n);
        let mut checked = 0;
        for k in 0..1000 {
            let max_price = 1.0 + next(5) as f64;
            let walltime = 1 + next(60) as i64;
            let avail: Vec<Option<Time>> = (0..3)
                .map(|_| (next(5) != 0).then(|| Time(next(30) as i64)))
                .collect();
            let ok: Option<Vec<bool>> =
                (next(3) == 0).then(|| (0..12).map(|_| next(4) != 0).collect());
            let counts = plan.reach_counts(max_price, walltime, ok.as_deref(), &avail);
            assert_eq!(
                (counts.priced, counts.long),
                brute(&plan, max_price, walltime, ok.as_deref(), &avail),
                "request {k}"
            );
            checked += 1;
            let mut r = req(
                1 + next(3) as u32,
                1 + next(20) as i64,
                Criterion::EarliestStart,
            );
            r.max_price = 1.0 + next(5) as f64;
            let staging = [Some(Dur(0)), Some(Dur(next(4) as i64)), Some(Dur(0))];
            if let Ok(sel) = plan.select(&r, &staging) {
                plan.commit(&sel);
            }
        }
        assert_eq!(checked, 1000);
    }
}
