//! The one clock of the service and its adapters. The scheduling core reads no clock (every
//! decision takes `now`); everything that does ask for the time asks a [`Clock`], so that a
//! test can hold the time still or move it by hand ([`ManualClock`]) instead of sleeping.

use foresight_core::time::Time;
use std::fmt::Debug;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where `now` comes from.
pub trait Clock: Send + Sync + Debug {
    /// Whole seconds since the Unix epoch.
    fn now(&self) -> Time;
    /// The fraction of the current second already gone (the cycle wakes at second
    /// boundaries, where planned starts fall).
    fn subsecond(&self) -> Duration;
}

/// The system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Time {
        Time(unix_seconds())
    }
    fn subsecond(&self) -> Duration {
        since_epoch().map_or(Duration::ZERO, |d| {
            Duration::from_nanos(u64::from(d.subsec_nanos()))
        })
    }
}

/// A clock that moves only when told: for tests of logic that reads the time.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    /// A clock stopped at `t`.
    pub fn at(t: Time) -> ManualClock {
        ManualClock(AtomicI64::new(t.0))
    }
    /// Moves it to `t`.
    pub fn set(&self, t: Time) {
        self.0.store(t.0, Ordering::SeqCst);
    }
    /// Moves it `seconds` forward.
    pub fn advance(&self, seconds: i64) {
        self.0.fetch_add(seconds, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Time {
        Time(self.0.load(Ordering::SeqCst))
    }
    fn subsecond(&self) -> Duration {
        Duration::ZERO
    }
}

fn since_epoch() -> Option<Duration> {
    SystemTime::now().duration_since(UNIX_EPOCH).ok()
}

/// Unix seconds now, from the system clock: for the places that stamp what they write
/// (WIKI frames' `TS=`, Slurm job comments, attempt files) with the real time whatever
/// clock the service plans by.
pub fn unix_seconds() -> i64 {
    since_epoch().map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let c = ManualClock::at(Time(100));
        assert_eq!(c.now(), Time(100));
        c.advance(5);
        assert_eq!(c.now(), Time(105));
        c.set(Time(7));
        assert_eq!((c.now(), c.subsecond()), (Time(7), Duration::ZERO));
    }

    #[test]
    fn the_system_clock_is_the_wall_clock() {
        let before = unix_seconds();
        let now = SystemClock.now().0;
        assert!(now >= before && now <= unix_seconds());
        assert!(SystemClock.subsecond() < Duration::from_secs(1));
    }
}
