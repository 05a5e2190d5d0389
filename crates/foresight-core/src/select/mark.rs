//! Marks in time: per processor, the slot containing each mark and the reach of its chain,
//! and per speed class a histogram of those reaches, which bound a window's start from below.

use super::SlotPlan;
use crate::time::{Dur, Time};

/// The most marks a plan keeps.
pub(super) const MAX_MARKS: i64 = 256;

/// The marks inside `[start, end)`.
pub(super) fn mark_range(
    base: Time,
    step: i64,
    n: usize,
    start: Time,
    end: Time,
) -> (usize, usize) {
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

impl SlotPlan {
    /// The second mark `c` stands at.
    pub(super) fn mark_time(&self, c: usize) -> Time {
        self.mark_base + Dur(c as i64 * self.mark_step)
    }

    /// A later lower bound on the start of a window of `dur` on `procs` processors at least
    /// `min_speed` fast, none of which starts before `lower`: windows of at least
    /// `mark_step` seconds start no later than their first mark, and need `procs` processors
    /// whose chains reach `dur - mark_step + 1` past it. `Time::MAX`: no such window.
    pub(super) fn lower_by_marks(&self, lower: Time, dur: Dur, procs: u32, min_speed: f64) -> Time {
        let step = self.mark_step;
        if self.n_marks == 0 || dur.as_secs() < step {
            return lower;
        }
        let able = self.able_at_marks(dur, min_speed);
        // The first mark at or after `lower`.
        let first = if lower.secs() <= self.mark_base.secs() {
            0
        } else {
            ((lower.secs() - self.mark_base.secs() + step - 1) / step) as usize
        };
        for c in first..self.n_marks {
            if able(c) >= procs {
                if c == first {
                    return lower;
                }
                return (self.mark_time(c - 1) + Dur(1)).max(lower);
            }
        }
        Time::MAX
    }

    /// An upper bound on the start of any window of `dur` on `procs` processors at least
    /// `min_speed` fast, by the same reasoning as [`SlotPlan::lower_by_marks`]: a window
    /// starts no later than its first mark, where `procs` processors must reach far
    /// enough, so none starts after the last such mark. A walk that passes it has seen
    /// every window there is. `Time::MAX` when marks say nothing.
    pub(super) fn upper_by_marks(&self, dur: Dur, procs: u32, min_speed: f64) -> Time {
        if self.n_marks == 0 || dur.as_secs() < self.mark_step {
            return Time::MAX;
        }
        let able = self.able_at_marks(dur, min_speed);
        (0..self.n_marks)
            .rev()
            .find(|&c| able(c) >= procs)
            .map_or(Time::MAX, |c| self.mark_time(c))
    }

    /// Per mark, how many processors at least `min_speed` fast have a chain through it
    /// reaching `dur - mark_step + 1` seconds past it (all a window of `dur` that holds
    /// the mark as its first needs). Only for `dur` of at least `mark_step`.
    fn able_at_marks(&self, dur: Dur, min_speed: f64) -> impl Fn(usize) -> u32 + '_ {
        let step = self.mark_step;
        let bands = self.n_marks + 1;
        let least = ((dur.as_secs() - step + 1) / step) as usize;
        let classes = self.speeds.iter().take_while(|&&v| v >= min_speed).count();
        move |c| {
            let row = c * self.speeds.len() * bands;
            (0..classes)
                .map(|k| {
                    let at = row + k * bands;
                    self.mark_bands[at + least.min(bands - 1)..at + bands]
                        .iter()
                        .sum::<u32>()
                })
                .sum()
        }
    }
}
