//! The availability profile: how many processors are free at every future instant.
//!
//! A profile is a step function kept as a sorted vector of breakpoints. Every query the
//! policies need ("how many are free at t", "the earliest t ≥ after at which n processors stay
//! free for d seconds") is a walk over the breakpoints from the one containing the query time,
//! so its cost is proportional to the number of breakpoints it passes, and a profile never
//! holds more breakpoints than twice the number of spans added to it. Adjacent steps with the
//! same value are merged, so adding a span and removing it again restores an equal profile.

use crate::time::{Dur, Time};

/// One step of the function: `free` processors from `at` until the next step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// Where the step begins.
    pub at: Time,
    /// Free processors on the step (negative only if the caller overbooked).
    pub free: i64,
}

/// Free processors over time, for one pool of identical processors.
#[derive(Clone, Debug)]
pub struct Profile {
    capacity: i64,
    /// Sorted by `at`, strictly increasing, no two neighbours equal in `free`; never empty.
    /// The last step extends to infinity.
    steps: Vec<Step>,
    /// What the profile gained since a given moment: see [`Profile::gained_since`].
    gains: Gains,
}

/// Profiles are equal when their steps are; the record of gains is bookkeeping.
impl PartialEq for Profile {
    fn eq(&self, other: &Profile) -> bool {
        self.capacity == other.capacity && self.steps == other.steps
    }
}

impl Eq for Profile {}

/// The spans on which a profile gained free processors, reduced to what
/// [`Profile::gained_since`] needs: for every version, the latest end of a gain made at or
/// after it.
#[derive(Clone, Debug, Default)]
struct Gains {
    /// Gains made so far: the version of the profile.
    count: u64,
    /// `(version, end)` with versions increasing and ends strictly decreasing: the gain
    /// numbered `version` ends at `end`, and no later gain ends later.
    ends: Vec<(u64, Time)>,
}

/// For every processor count `p`, the first instant at or after a given `now` at which fewer
/// than `p` processors are free: see [`Profile::horizons`].
///
/// Kept as the descending staircase of the answer (one entry per drop of the minimum), so a
/// machine of 2³² − 1 processors costs no more than one of 128.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Horizons {
    now: Time,
    free_now: i64,
    /// `(low, at)` with `low` strictly decreasing: counts in `(low, previous low]` (the first
    /// previous low being `free_now`) stop fitting at `at`.
    levels: Vec<(i64, Time)>,
}

impl Horizons {
    /// The first instant at or after `now` at which fewer than `procs` processors are free
    /// (`now` itself when fewer are free already, `Time::MAX` if never).
    pub fn get(&self, procs: u32) -> Time {
        let p = i64::from(procs);
        if p > self.free_now {
            return self.now;
        }
        let k = self.levels.partition_point(|&(low, _)| low >= p);
        self.levels.get(k).map_or(Time::MAX, |&(_, at)| at)
    }

    /// The staircase as bands `(lo, hi, until)`: every count in `lo < p <= hi` (from 0 to
    /// the processors free now) gets `until` from [`Horizons::get`]. Lets an index look for
    /// fitting jobs band by band instead of job by job.
    pub fn bands(&self) -> impl Iterator<Item = (i64, i64, Time)> + '_ {
        let mut prev = self.free_now;
        self.levels
            .iter()
            .map(move |&(low, at)| {
                let band = (low, prev, at);
                prev = low;
                band
            })
            .chain(std::iter::once(Time::MAX).map(move |at| {
                let last = self.levels.last().map_or(self.free_now, |&(low, _)| low);
                (-1, last, at)
            }))
    }
}

/// For every processor count `p`, the first instant at or after a given `now` at which at
/// least `p` processors are free: see [`Profile::first_free`]. Kept as the ascending
/// staircase of the answer, one entry per rise of the running maximum.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FirstFree {
    /// `(to, at)` with `to` strictly increasing: counts in `(previous to, to]` are free from
    /// `at` on.
    levels: Vec<(i64, Time)>,
}

impl FirstFree {
    /// The first instant at which at least `procs` processors are free (`Time::MAX` if
    /// never).
    pub fn get(&self, procs: u32) -> Time {
        let p = i64::from(procs);
        let k = self.levels.partition_point(|&(to, _)| to < p);
        self.levels.get(k).map_or(Time::MAX, |&(_, at)| at)
    }
}

impl Profile {
    /// All `capacity` processors free forever.
    pub fn new(capacity: u32) -> Profile {
        Profile {
            capacity: i64::from(capacity),
            steps: vec![Step {
                at: Time::MIN,
                free: i64::from(capacity),
            }],
            gains: Gains::default(),
        }
    }

    /// How many times free processors were added so far: a version to pass to
    /// [`Profile::gained_since`] later.
    pub fn version(&self) -> u64 {
        self.gains.count
    }

    /// The latest end of a span on which free processors were added since `version` (`None`
    /// if none was, or every such span ended before the last [`Profile::advance`]).
    ///
    /// A request that found no earlier start than `s` when the profile was at `version` can
    /// find one now only in a window that meets such a span, so it need not be sought at or
    /// after this end: this keeps re-checking reservations short.
    pub fn gained_since(&self, version: u64) -> Option<Time> {
        let ends = &self.gains.ends;
        let k = ends.partition_point(|&(v, _)| v < version);
        ends.get(k).map(|&(_, end)| end)
    }

    /// A profile with `procs` processors free only during `[start, end)` and none elsewhere:
    /// the capacity of an administrative reservation.
    pub fn window(procs: u32, start: Time, end: Time) -> Profile {
        let mut p = Profile::new(procs);
        p.add(Time::MIN, start, -i64::from(procs));
        p.add(end, Time::MAX, -i64::from(procs));
        p
    }

    /// Number of processors when nothing is used.
    pub fn capacity(&self) -> u32 {
        u32::try_from(self.capacity).unwrap_or(u32::MAX)
    }

    /// The breakpoints, for inspection and tests.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Index of the step that contains `t`.
    fn index_of(&self, t: Time) -> usize {
        // steps[0].at is never after any query in practice; clamp for safety.
        self.steps.partition_point(|s| s.at <= t).saturating_sub(1)
    }

    /// Forgets everything before `now`: the step containing `now` becomes the first. Queries
    /// before `now` are meaningless afterwards. Keeps walks short in a long simulation.
    pub fn advance(&mut self, now: Time) {
        let i = self.index_of(now);
        if i > 0 {
            self.steps.drain(..i);
        }
        // Gains that ended by now meet no window from now on (the latest are on top).
        while self.gains.ends.last().is_some_and(|&(_, end)| end <= now) {
            self.gains.ends.pop();
        }
    }

    /// Free processors at instant `t`.
    pub fn free_at(&self, t: Time) -> i64 {
        self.steps[self.index_of(t)].free
    }

    /// The fewest free processors at any instant of `[start, end)` (the capacity if empty).
    pub fn min_free(&self, start: Time, end: Time) -> i64 {
        if end <= start {
            return self.capacity;
        }
        let mut i = self.index_of(start);
        let mut min = self.steps[i].free;
        i += 1;
        while i < self.steps.len() && self.steps[i].at < end {
            min = min.min(self.steps[i].free);
            i += 1;
        }
        min
    }

    /// True when `procs` processors stay free for `dur` from `start`.
    pub fn fits(&self, start: Time, procs: u32, dur: Dur) -> bool {
        self.min_free(start, start + dur) >= i64::from(procs)
    }

    /// The earliest `t ≥ after` at which `procs` processors stay free for `dur`, or `None`
    /// when that never happens (the profile ends with fewer free processors).
    ///
    /// Cost: linear in the number of steps between `after` and the answer.
    pub fn earliest(&self, after: Time, procs: u32, dur: Dur) -> Option<Time> {
        self.earliest_before(after, procs, dur, (Time::MAX, Time::MAX, 0), Time::MAX)
    }

    /// Like [`Profile::earliest`], but counts `credit` more free processors on `[from, to)`,
    /// and gives up (returns `None`) once the answer would not be before `limit`. This asks
    /// "could a job that holds `[from, to)` move earlier?" without taking it out first.
    pub fn earliest_before(
        &self,
        after: Time,
        procs: u32,
        dur: Dur,
        (from, to, credit): (Time, Time, i64),
        limit: Time,
    ) -> Option<Time> {
        let need = i64::from(procs);
        let n = self.steps.len();
        let mut cand = after;
        // One forward pass over the pieces of the function: a step is one piece unless it
        // meets [from, to), where it is cut so that the credit applies exactly there. Returns
        // the answer once known.
        let mut piece = |start: Time, end: Time, free: i64| -> Option<Option<Time>> {
            if start >= end {
                return None;
            }
            if cand >= limit {
                return Some(None);
            }
            if start >= cand + dur {
                return Some(Some(cand));
            }
            if free < need {
                if end >= Time::MAX {
                    return Some(None);
                }
                cand = end;
            }
            None
        };
        for k in self.index_of(after)..n {
            let at = self.steps[k].at.max(after);
            let end = if k + 1 < n {
                self.steps[k + 1].at
            } else {
                Time::MAX
            };
            let free = self.steps[k].free;
            if end <= from || at >= to {
                if let Some(answer) = piece(at, end, free) {
                    return answer;
                }
                continue;
            }
            for (piece_start, piece_end, piece_free) in [
                (at, end.min(from), free),
                (at.max(from), end.min(to), free + credit),
                (at.max(to), end, free),
            ] {
                if let Some(answer) = piece(piece_start, piece_end, piece_free) {
                    return answer;
                }
            }
        }
        (cand < limit).then_some(cand)
    }

    /// Fills `out` so that `out.get(p)`, for every `p` in `0..=free_at(now)`, is the first
    /// instant at or after `now` at which fewer than `p` processors are free (`Time::MAX` if
    /// never). A job of `p` processors and estimate `d` then fits now iff `now + d <=
    /// out.get(p)`: one lookup instead of a walk, which makes a backfill pass linear in the
    /// queue length. The table holds one entry per step where the answer changes, so its
    /// cost follows the profile, not the number of processors.
    pub fn horizons(&self, now: Time, out: &mut Horizons) {
        let i = self.index_of(now);
        let free_now = self.steps[i].free.max(0);
        out.now = now;
        out.free_now = free_now;
        out.levels.clear();
        let mut min = free_now;
        for s in &self.steps[i + 1..] {
            if s.free < min {
                let low = s.free.max(0);
                out.levels.push((low, s.at));
                min = low;
                if min == 0 {
                    break;
                }
            }
        }
    }

    /// Fills `out` so that `out.get(p)`, for every `p` in `0..=capacity`, is the first
    /// instant at or after `now` at which at least `p` processors are free (`Time::MAX` if
    /// never). No job of `p` processors can start before it, which lets compression skip
    /// most reserved jobs with one lookup. Like [`Horizons`], the table's size follows the
    /// profile's steps, not the number of processors.
    pub fn first_free(&self, now: Time, out: &mut FirstFree) {
        out.levels.clear();
        let mut max = -1i64;
        for s in &self.steps[self.index_of(now)..] {
            if s.free > max {
                let at = s.at.max(now);
                let from = (max + 1).max(0);
                let to = s.free.min(self.capacity);
                if from <= to {
                    out.levels.push((to, at));
                }
                max = s.free;
                if max >= self.capacity {
                    break;
                }
            }
        }
    }

    /// Adds `delta` free processors on `[start, end)` (negative to take them).
    pub fn add(&mut self, start: Time, end: Time, delta: i64) {
        if end <= start || delta == 0 {
            return;
        }
        let start = start.max(self.steps[0].at);
        if end <= start {
            return;
        }
        if delta > 0 {
            let g = &mut self.gains;
            while g.ends.last().is_some_and(|&(_, e)| e <= end) {
                g.ends.pop();
            }
            g.ends.push((g.count, end));
            g.count += 1;
        }
        let i = self.split_at(start);
        let j = if end >= Time::MAX {
            self.steps.len()
        } else {
            self.split_at(end)
        };
        for s in &mut self.steps[i..j] {
            s.free += delta;
        }
        // Merge around the two boundaries; the end boundary first so `i` stays valid.
        if j < self.steps.len() && self.steps[j].free == self.steps[j - 1].free {
            self.steps.remove(j);
        }
        if i > 0 && self.steps[i].free == self.steps[i - 1].free {
            self.steps.remove(i);
        }
    }

    /// Takes `procs` processors on `[start, end)`.
    pub fn take(&mut self, start: Time, end: Time, procs: u32) {
        self.add(start, end, -i64::from(procs));
    }

    /// Gives `procs` processors back on `[start, end)`.
    pub fn give(&mut self, start: Time, end: Time, procs: u32) {
        self.add(start, end, i64::from(procs));
    }

    /// Makes sure a step begins at `t` and returns its index.
    fn split_at(&mut self, t: Time) -> usize {
        let i = self.index_of(t);
        if self.steps[i].at == t {
            return i;
        }
        let free = self.steps[i].free;
        self.steps.insert(i + 1, Step { at: t, free });
        i + 1
    }

    /// True when no instant has negative free processors or more than the capacity.
    pub fn is_consistent(&self) -> bool {
        self.steps
            .iter()
            .all(|s| (0..=self.capacity).contains(&s.free))
            && self
                .steps
                .windows(2)
                .all(|w| w[0].at < w[1].at && w[0].free != w[1].free)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: i64) -> Time {
        Time(n)
    }

    #[test]
    fn earliest_skips_a_dip_that_is_too_long() {
        let mut p = Profile::new(10);
        p.take(t(0), t(100), 8); // 2 free until 100
        p.take(t(150), t(200), 5); // 5 free on [150, 200)
        assert_eq!(p.earliest(t(0), 2, Dur(1000)), Some(t(0)));
        assert_eq!(p.earliest(t(0), 3, Dur(10)), Some(t(100)));
        assert_eq!(p.earliest(t(0), 6, Dur(50)), Some(t(100)));
        assert_eq!(p.earliest(t(0), 6, Dur(51)), Some(t(200)));
        assert_eq!(p.earliest(t(120), 10, Dur(1)), Some(t(120)));
        assert_eq!(p.earliest(t(0), 11, Dur(1)), None);
    }

    #[test]
    fn add_then_remove_restores_an_equal_profile() {
        let mut p = Profile::new(4);
        p.take(t(5), t(10), 1);
        let before = p.clone();
        p.take(t(7), t(20), 2);
        p.give(t(7), t(20), 2);
        assert_eq!(p, before);
        assert!(p.is_consistent());
    }

    #[test]
    fn windows_have_capacity_only_inside() {
        let w = Profile::window(3, t(10), t(20));
        assert_eq!(w.free_at(t(9)), 0);
        assert_eq!(w.free_at(t(10)), 3);
        assert_eq!(w.free_at(t(20)), 0);
        assert_eq!(w.earliest(t(0), 2, Dur(10)), Some(t(10)));
        assert_eq!(w.earliest(t(0), 2, Dur(11)), None);
    }

    #[test]
    fn horizons_say_when_each_size_stops_fitting() {
        let mut p = Profile::new(10);
        p.take(t(0), t(100), 4); // 6 free until 100
        p.take(t(50), t(80), 3); // 3 free on [50, 80)
        p.take(t(200), t(300), 9); // 1 free on [200, 300)
        let mut h = Horizons::default();
        p.horizons(t(10), &mut h);
        let got: Vec<Time> = (0..=6).map(|k| h.get(k)).collect();
        assert_eq!(
            got,
            vec![Time::MAX, Time::MAX, t(200), t(200), t(50), t(50), t(50)]
        );
        assert_eq!(h.get(7), t(10), "7 processors are not free now");
    }

    #[test]
    fn earliest_before_counts_the_credit_and_stops_at_the_limit() {
        let mut p = Profile::new(4);
        p.take(t(0), t(100), 2);
        p.take(t(100), t(150), 4); // a job of 4 reserved at [100, 150)
                                   // Without its own span the job could start at 0 if 2 processors sufficed.
        assert_eq!(
            p.earliest_before(t(0), 2, Dur(50), (t(100), t(150), 4), t(100)),
            Some(t(0))
        );
        // 4 processors: not before 100 even with the credit.
        assert_eq!(
            p.earliest_before(t(0), 4, Dur(50), (t(100), t(150), 4), t(100)),
            None
        );
    }

    #[test]
    fn first_free_says_when_each_size_can_start() {
        let mut p = Profile::new(4);
        p.take(t(0), t(100), 3); // 1 free until 100
        p.take(t(100), t(200), 1); // 3 free on [100, 200)
        let mut f = FirstFree::default();
        p.first_free(t(10), &mut f);
        let got: Vec<Time> = (0..=4).map(|k| f.get(k)).collect();
        assert_eq!(got, vec![t(10), t(10), t(100), t(100), t(200)]);
    }

    #[test]
    fn lookup_tables_of_a_huge_machine_stay_small() {
        let mut p = Profile::new(u32::MAX);
        p.take(t(0), t(100), u32::MAX - 5);
        p.take(t(100), t(200), 1);
        let mut h = Horizons::default();
        p.horizons(t(10), &mut h);
        assert_eq!(h.get(5), Time::MAX);
        assert_eq!(h.get(6), t(10));
        let mut f = FirstFree::default();
        p.first_free(t(10), &mut f);
        assert_eq!(f.get(5), t(10));
        assert_eq!(f.get(6), t(100));
        assert_eq!(f.get(u32::MAX - 1), t(100));
        assert_eq!(f.get(u32::MAX), t(200));
        assert!(f.levels.len() <= 3 && h.levels.len() <= 3);
    }

    #[test]
    fn gained_since_names_the_latest_end_of_a_later_gain() {
        let mut p = Profile::new(4);
        p.take(t(0), t(100), 4);
        let v0 = p.version();
        assert_eq!(p.gained_since(v0), None, "taking is no gain");
        p.give(t(10), t(50), 1);
        let v1 = p.version();
        p.give(t(20), t(30), 1);
        assert_eq!(p.gained_since(v0), Some(t(50)));
        assert_eq!(p.gained_since(v1), Some(t(30)));
        p.advance(t(40));
        assert_eq!(p.gained_since(v1), None, "ended before now");
        assert_eq!(p.gained_since(v0), Some(t(50)));
    }

    #[test]
    fn advance_keeps_the_step_that_contains_now() {
        let mut p = Profile::new(4);
        p.take(t(0), t(10), 1);
        p.take(t(10), t(20), 2);
        p.advance(t(15));
        assert_eq!(p.free_at(t(15)), 2);
        assert_eq!(p.free_at(t(25)), 4);
        assert_eq!(p.steps().len(), 2);
    }
}
