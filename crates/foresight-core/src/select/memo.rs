//! Memos kept between selections: lower bounds on earliest starts from past ones, sets of
//! usable processors, and the walks' per-processor state.

use super::failed::Failed;
use crate::time::Time;
use std::sync::Arc;

/// What selections learn and later ones reuse: selections take the plan by shared
/// reference (the speed levels run side by side), so it sits behind a lock; a cloned plan
/// starts from a copy.
#[derive(Debug, Default)]
pub(super) struct Memo<T>(std::sync::Mutex<T>);

impl<T: Clone> Clone for Memo<T> {
    fn clone(&self) -> Memo<T> {
        Memo(std::sync::Mutex::new(self.lock().clone()))
    }
}

impl<T> Memo<T> {
    pub(super) fn new(value: T) -> Memo<T> {
        Memo(std::sync::Mutex::new(value))
    }

    /// The value, without locking: the plan is held mutably.
    pub(super) fn get_mut(&mut self) -> &mut T {
        self.0.get_mut().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Walk states kept for reuse; a cloned plan starts without any.
#[derive(Debug, Default)]
pub(super) struct WalkStates(pub(super) Memo<Vec<WalkState>>);

impl Clone for WalkStates {
    fn clone(&self) -> WalkStates {
        WalkStates::default()
    }
}

/// Per processor: the end of its counted run, and its place among the counted runs.
pub(super) type WalkState = (Vec<Time>, Vec<u32>);

/// One set of usable processors: `(usable clusters, speed level's bits, flags)`.
type UsableEntry = (Vec<bool>, u64, Arc<[bool]>);

/// Usable-processor flags already computed. Commits do not change which processors exist,
/// so entries stay valid for the plan's life.
#[derive(Clone, Debug, Default)]
pub(super) struct UsableCache(Memo<Vec<UsableEntry>>);

/// Sets of usable processors a plan keeps.
const USABLE_KEPT: usize = 64;

impl UsableCache {
    pub(super) fn find(&self, clusters: &[bool], speed: f64) -> Option<Arc<[bool]>> {
        self.0
            .lock()
            .iter()
            .find(|(c, s, _)| c == clusters && *s == speed.to_bits())
            .map(|(_, _, flags)| flags.clone())
    }

    pub(super) fn keep(&self, clusters: Vec<bool>, speed: f64, flags: Arc<[bool]>) {
        let mut all = self.0.lock();
        if all.len() >= USABLE_KEPT {
            all.remove(0);
        }
        all.push((clusters, speed.to_bits(), flags));
    }
}

/// What a level's earliest window depends on besides the job: the clusters' usable times,
/// the cluster mask, and the level's speed (every processor meets the requirements).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct BoundKey {
    pub(super) avail: Vec<Option<Time>>,
    pub(super) only: Option<usize>,
    pub(super) speed: u64,
}

/// One past result: no window of `dur` on `procs` processors at price `max_price` starts
/// before `start`.
#[derive(Clone, Copy, Debug)]
pub(super) struct BoundEntry {
    pub(super) procs: u32,
    pub(super) dur: i64,
    pub(super) max_price: f64,
    pub(super) start: Time,
}

/// What is known of one key: past results (newest last), and the requests that found no
/// window at all.
#[derive(Clone, Debug, Default)]
struct KeyMemo {
    past: std::collections::VecDeque<BoundEntry>,
    failed: Failed,
}

/// Earliest starts of past selections. Commits only take time out of the plan, and a
/// window for more processors, a longer time or a lower price is also a window for fewer,
/// shorter or dearer, so a past earliest start of a job that asked no more than this one
/// bounds this one's from below. Results of "no window at all" are kept apart, for the
/// plan's life (see [`Failed`]): on a full horizon they are most of the results, and kept
/// among the others the successes that follow would push them out.
#[derive(Clone, Debug, Default)]
pub(super) struct Bounds {
    memo: Memo<Vec<(BoundKey, KeyMemo)>>,
    /// Past results are neither kept nor used, nor the marks' bounds: every selection
    /// walks the plan from its start (to check that the bounds change no answer).
    off: bool,
}

/// Past results kept per key, and keys kept.
const BOUND_ENTRIES: usize = 512;
const BOUND_KEYS: usize = 64;

impl Bounds {
    /// Keeps and uses past results, or not.
    pub(super) fn set_kept(&mut self, kept: bool) {
        self.off = !kept;
        self.memo.get_mut().clear();
    }

    /// Are past results kept and used?
    pub(super) fn kept(&self) -> bool {
        !self.off
    }

    /// The latest start known to come no later than the earliest window of this request.
    pub(super) fn lower(&self, key: &BoundKey, procs: u32, dur: i64, max_price: f64) -> Time {
        if self.off {
            return Time::MIN;
        }
        let all = self.memo.lock();
        // A window on processors at least as fast is a window on the slower level's
        // processors too (a superset), for the same seconds: the results of slower levels
        // with the same usable clusters bound this one's as well.
        let speed = f64::from_bits(key.speed);
        let mut lower = Time::MIN;
        for (_, memo) in all.iter().filter(|(k, _)| {
            k.only == key.only && f64::from_bits(k.speed) <= speed && k.avail == key.avail
        }) {
            if memo.failed.covers(procs, dur, max_price) {
                return Time::MAX;
            }
            for e in &memo.past {
                if e.procs <= procs && e.dur <= dur && e.max_price >= max_price {
                    lower = lower.max(e.start);
                }
            }
        }
        lower
    }

    pub(super) fn record(&self, key: &BoundKey, entry: BoundEntry) {
        if self.off {
            return;
        }
        let mut all = self.memo.lock();
        let at = match all.iter().position(|(k, _)| k == key) {
            Some(at) => at,
            None => {
                if all.len() >= BOUND_KEYS {
                    all.remove(0);
                }
                all.push((key.clone(), KeyMemo::default()));
                all.len() - 1
            }
        };
        let memo = &mut all[at].1;
        if entry.start == Time::MAX {
            memo.failed.record(entry.procs, entry.dur, entry.max_price);
            return;
        }
        if memo.past.len() >= BOUND_ENTRIES {
            memo.past.pop_front();
        }
        memo.past.push_back(entry);
    }
}
