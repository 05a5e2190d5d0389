//! Integer time. Planning compares slot boundaries exactly, so time is whole seconds, never
//! floats: SWF traces, Slurm limits and reservations are all whole seconds.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// An instant, in seconds. In the service it counts from the Unix epoch (UTC); in a trace
/// simulation it is the trace's own clock (seconds since the trace started).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Time(pub i64);

/// A length of time in seconds. Constructors never produce a negative value from valid input;
/// arithmetic saturates so that `Time::MAX` can stand for "open-ended".
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Dur(pub i64);

impl Time {
    /// Earlier than every real instant; the start of an empty profile.
    pub const MIN: Time = Time(i64::MIN / 4);
    /// Later than every real instant; the end of an open-ended span.
    pub const MAX: Time = Time(i64::MAX / 4);

    /// Seconds since the origin of this clock.
    pub const fn secs(self) -> i64 {
        self.0
    }
}

impl Dur {
    /// No time at all.
    pub const ZERO: Dur = Dur(0);

    /// `n` seconds.
    pub const fn secs(n: i64) -> Dur {
        Dur(n)
    }

    /// `n` minutes.
    pub const fn minutes(n: i64) -> Dur {
        Dur(n * 60)
    }

    /// `n` hours.
    pub const fn hours(n: i64) -> Dur {
        Dur(n * 3600)
    }

    /// The length in seconds.
    pub const fn as_secs(self) -> i64 {
        self.0
    }
}

impl Add<Dur> for Time {
    type Output = Time;
    fn add(self, d: Dur) -> Time {
        Time(self.0.saturating_add(d.0).min(Time::MAX.0))
    }
}

impl AddAssign<Dur> for Time {
    fn add_assign(&mut self, d: Dur) {
        *self = *self + d;
    }
}

impl Sub<Dur> for Time {
    type Output = Time;
    fn sub(self, d: Dur) -> Time {
        Time(self.0.saturating_sub(d.0).max(Time::MIN.0))
    }
}

impl Sub for Time {
    type Output = Dur;
    fn sub(self, other: Time) -> Dur {
        Dur(self.0 - other.0)
    }
}

impl Add for Dur {
    type Output = Dur;
    fn add(self, d: Dur) -> Dur {
        Dur(self.0.saturating_add(d.0))
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}s", self.0)
    }
}

/// A half-open interval `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Interval {
    /// First instant inside the interval.
    pub start: Time,
    /// First instant after the interval.
    pub end: Time,
}

impl Interval {
    /// `[start, end)`; an interval with `end <= start` is empty.
    pub const fn new(start: Time, end: Time) -> Interval {
        Interval { start, end }
    }

    /// The interval's length (zero when empty).
    pub fn len(&self) -> Dur {
        Dur((self.end.0 - self.start.0).max(0))
    }

    /// True when no instant lies inside.
    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }

    /// True when `t` lies inside.
    pub fn contains(&self, t: Time) -> bool {
        self.start <= t && t < self.end
    }

    /// True when some instant lies in both.
    pub fn overlaps(&self, other: &Interval) -> bool {
        self.start < other.end && other.start < self.end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_at_the_open_end() {
        assert_eq!(Time::MAX + Dur::hours(1), Time::MAX);
        assert_eq!(Time(10) + Dur(5), Time(15));
        assert_eq!(Time(15) - Time(10), Dur(5));
    }

    #[test]
    fn intervals_are_half_open() {
        let a = Interval::new(Time(0), Time(10));
        assert!(a.contains(Time(0)));
        assert!(!a.contains(Time(10)));
        assert!(!a.overlaps(&Interval::new(Time(10), Time(20))));
        assert!(a.overlaps(&Interval::new(Time(9), Time(20))));
        assert_eq!(Interval::new(Time(5), Time(1)).len(), Dur::ZERO);
    }
}
