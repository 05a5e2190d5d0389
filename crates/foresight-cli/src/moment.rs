//! Times for people: shown in the local time zone (`TZ`, else the system's) with the zone
//! marked, in one format everywhere (`2026-11-23 17:00:00 CET`); read in the forms
//! `sbatch --begin` reads, plus `+DURATION`.
//!
//! The server speaks seconds since the epoch, in fields of their own, never inside its
//! messages: [`reason_in`] writes a reason's instant after its words.

use foresight_api::{parse_duration, Reason};
use jiff::civil::{Date, DateTime, Time};
use jiff::tz::TimeZone;
use jiff::Timestamp;

/// The forms `--start`, `--from` and `--to` read, for help texts and messages.
pub const FORMS: &str = "now, now+N[seconds|minutes|hours|days|weeks] (N alone is seconds, \
    as sbatch --begin), now-N[...] (as sacct --starttime), +DURATION (as -t: +90 is 90 \
    minutes, +1h30m), HH:MM[:SS] (the next such time), YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS] \
    (local time), RFC 3339 with a zone (2026-11-23T16:00:00Z), midnight, noon, elevenses, \
    fika, teatime, today, tomorrow, or seconds since the epoch";

/// The local time zone: `TZ`, else the system's, else UTC.
pub fn local_zone() -> TimeZone {
    TimeZone::try_system().unwrap_or(TimeZone::UTC)
}

/// Seconds since the epoch, now.
pub fn now() -> i64 {
    Timestamp::now().as_second()
}

/// `t` in `tz`: `2026-11-23 17:00:00 CET`. Instants outside years -9999..=9999 are shown as
/// `@SECONDS` rather than refused.
pub fn show_in(t: i64, tz: &TimeZone) -> String {
    match Timestamp::from_second(t) {
        Ok(ts) => ts
            .to_zoned(tz.clone())
            .strftime("%Y-%m-%d %H:%M:%S %Z")
            .to_string(),
        Err(_) => format!("@{t}"),
    }
}

/// A time for people in the local zone; `-` when absent.
pub fn when(t: Option<i64>) -> String {
    match t {
        Some(t) => show_in(t, &local_zone()),
        None => "-".into(),
    }
}

/// A reason as people read it: its words, then its instant (if any) in zone `tz`, and how
/// far ahead of `now` (the service's, when it explained) while it is still to come.
pub fn reason_in(r: &Reason, now: i64, tz: &TimeZone) -> String {
    match r.at {
        None => r.text.clone(),
        Some(at) if at > now => format!(
            "{} {} (in {})",
            r.text,
            show_in(at, tz),
            foresight_api::format_duration(at.saturating_sub(now))
        ),
        Some(at) => format!("{} {}", r.text, show_in(at, tz)),
    }
}

/// Reads a moment (see [`FORMS`]) relative to `now` in zone `tz`: seconds since the epoch,
/// or a message naming `text`.
pub fn parse_moment(text: &str, now: i64, tz: &TimeZone) -> Result<i64, String> {
    let t = text.trim();
    let bad = || format!("{text:?} is not a time: use {FORMS}");
    let lower = t.to_ascii_lowercase();
    let add = |secs: i64| now.checked_add(secs).ok_or_else(bad);
    if lower == "now" {
        return Ok(now);
    }
    if let Some(rest) = lower.strip_prefix("now+") {
        return add(sbatch_offset(rest).ok_or_else(bad)?);
    }
    // sacct's --starttime reads the past the same way.
    if let Some(rest) = lower.strip_prefix("now-") {
        return add(-sbatch_offset(rest).ok_or_else(bad)?);
    }
    if let Some(rest) = t.strip_prefix('+') {
        let d = parse_duration(rest).map_err(|e| format!("{text:?}: {e}"))?;
        return add(d);
    }
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse().map_err(|_| bad());
    }
    let today = Timestamp::from_second(now)
        .map_err(|_| bad())?
        .to_zoned(tz.clone())
        .date();
    let at = |d: DateTime| -> Result<i64, String> {
        d.to_zoned(tz.clone())
            .map(|z| z.timestamp().as_second())
            .map_err(|_| bad())
    };
    // A time of day: the next such moment (today, or tomorrow if already past).
    let next = |clock: Time| -> Result<i64, String> {
        let s = at(today.to_datetime(clock))?;
        if s >= now {
            return Ok(s);
        }
        at(today.tomorrow().map_err(|_| bad())?.to_datetime(clock))
    };
    let named = |h: i8| Time::new(h, 0, 0, 0).map_err(|_| bad());
    match lower.as_str() {
        "midnight" => return next(named(0)?),
        "noon" => return next(named(12)?),
        "elevenses" => return next(named(11)?),
        "fika" => return next(named(15)?),
        "teatime" => return next(named(16)?),
        "today" => return Ok(now),
        "tomorrow" => {
            return at(today
                .tomorrow()
                .map_err(|_| bad())?
                .to_datetime(Time::midnight()))
        }
        _ => {}
    }
    if let Some(clock) = clock_time(t) {
        return next(clock);
    }
    if t.len() == 10 {
        if let Ok(d) = t.parse::<Date>() {
            return at(d.to_datetime(Time::midnight()));
        }
    }
    // With an offset (`Z`, `+02:00`) it is an instant; without, a local date and time.
    if let Ok(ts) = t.parse::<Timestamp>() {
        return Ok(ts.as_second());
    }
    if let Ok(d) = t.parse::<DateTime>() {
        return at(d);
    }
    Err(bad())
}

/// `HH:MM` or `HH:MM:SS`.
fn clock_time(t: &str) -> Option<Time> {
    let f: Vec<&str> = t.split(':').collect();
    if !(2..=3).contains(&f.len()) || f.iter().any(|x| x.is_empty() || x.len() > 2) {
        return None;
    }
    let n = |s: &str| s.parse::<i8>().ok();
    let s = if f.len() == 3 { n(f[2])? } else { 0 };
    Time::new(n(f[0])?, n(f[1])?, s, 0).ok()
}

/// `N[unit]` after `now+`, as sbatch reads it: seconds by default.
fn sbatch_offset(rest: &str) -> Option<i64> {
    let split = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (digits, unit) = rest.split_at(split);
    let n: i64 = digits.parse().ok()?;
    let unit = match unit {
        "" | "s" | "sec" | "secs" | "second" | "seconds" => 1,
        "m" | "min" | "mins" | "minute" | "minutes" => 60,
        "h" | "hour" | "hours" => 3_600,
        "d" | "day" | "days" => 86_400,
        "w" | "week" | "weeks" => 604_800,
        _ => return None,
    };
    n.checked_mul(unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn berlin() -> TimeZone {
        TimeZone::get("Europe/Berlin").expect("the test machine has tzdata")
    }

    /// 2026-11-23 15:30:00 in Berlin (UTC+1).
    const NOW: i64 = 1_795_444_200;

    #[test]
    fn shown_in_the_zone_with_the_zone_marked() {
        assert_eq!(show_in(NOW, &TimeZone::UTC), "2026-11-23 14:30:00 UTC");
        assert_eq!(show_in(NOW, &berlin()), "2026-11-23 15:30:00 CET");
        assert_eq!(show_in(0, &TimeZone::UTC), "1970-01-01 00:00:00 UTC");
        assert_eq!(show_in(-3_600, &TimeZone::UTC), "1969-12-31 23:00:00 UTC");
    }

    #[test]
    fn years_past_9999_do_not_panic() {
        for t in [i64::MAX, i64::MIN, 253_402_300_800, 400_000_000_000] {
            assert_eq!(show_in(t, &TimeZone::UTC), format!("@{t}"));
        }
    }

    #[test]
    fn a_reason_ends_on_its_instant_in_the_zone() {
        let reserved = Reason::timed("reserved on a from", NOW + 3_720);
        assert_eq!(
            reason_in(&reserved, NOW, &berlin()),
            "reserved on a from 2026-11-23 16:32:00 CET (in 1h2m)"
        );
        assert_eq!(
            reason_in(&reserved, NOW, &TimeZone::UTC),
            "reserved on a from 2026-11-23 15:32:00 UTC (in 1h2m)"
        );
        // An instant past or now is no longer ahead: no `in`.
        let running = Reason::timed("running on a (1 processor) since", NOW - 60);
        assert_eq!(
            reason_in(&running, NOW, &berlin()),
            "running on a (1 processor) since 2026-11-23 15:29:00 CET"
        );
        assert_eq!(
            reason_in(&Reason::timed("x at", NOW), NOW, &berlin()),
            "x at 2026-11-23 15:30:00 CET"
        );
        // Counted from the service's now, not the reader's clock.
        assert_eq!(
            reason_in(&Reason::timed("x at", NOW + 1), NOW, &berlin()),
            "x at 2026-11-23 15:30:01 CET (in 1s)"
        );
        // A hostile server's extremes neither overflow nor panic.
        assert!(
            reason_in(&Reason::timed("x at", i64::MAX), i64::MIN, &berlin())
                .starts_with(&format!("x at @{} (in ", i64::MAX))
        );
        // Words alone are shown as they are: nothing in them is read.
        let prose = "planned (60 s from now) 2026-11-23T14:30:00Z";
        assert_eq!(reason_in(&Reason::new(prose), NOW, &berlin()), prose);
    }

    #[test]
    fn every_begin_form() {
        struct Case {
            text: &'static str,
            want: i64,
        }
        let case = |text, want| Case { text, want };
        let h = 3_600;
        let cases = [
            case("now", NOW),
            case("NOW", NOW),
            case("now+90", NOW + 90),
            case("now+1hour", NOW + h),
            case("now-1days", NOW - 24 * h),
            case("now-90", NOW - 90),
            case("now+2hours", NOW + 2 * h),
            case("now+15minutes", NOW + 900),
            case("now+10min", NOW + 600),
            case("now+1day", NOW + 24 * h),
            case("now+1week", NOW + 7 * 24 * h),
            case("+90", NOW + 90 * 60),
            case("+1h30m", NOW + 90 * 60),
            case("+0s", NOW),
            case("+01:00:00", NOW + h),
            // later today
            case("16:00", NOW + 30 * 60),
            case("16:00:30", NOW + 30 * 60 + 30),
            case("teatime", NOW + 30 * 60),
            // already past: tomorrow
            case("15:00", NOW + 23 * h + 30 * 60),
            case("noon", NOW + 20 * h + 30 * 60),
            case("midnight", NOW + 8 * h + 30 * 60),
            case("tomorrow", NOW + 8 * h + 30 * 60),
            case("today", NOW),
            case("2026-11-24", NOW + 8 * h + 30 * 60),
            case("2026-11-23T16:00", NOW + 30 * 60),
            case("2026-11-23T16:00:00", NOW + 30 * 60),
            case("2026-11-23 16:00:00", NOW + 30 * 60),
            case("2026-11-23T14:30:00Z", NOW),
            case("2026-11-23T16:30:00+02:00", NOW),
            case("1795444200", NOW),
        ];
        for c in cases {
            assert_eq!(
                parse_moment(c.text, NOW, &berlin()),
                Ok(c.want),
                "{:?}",
                c.text
            );
        }
        // The zone matters for local forms only.
        assert_eq!(
            parse_moment("16:00", NOW, &TimeZone::UTC),
            Ok(NOW + 90 * 60)
        );
        assert_eq!(
            parse_moment("2026-11-23T14:30:00Z", NOW, &TimeZone::UTC),
            Ok(NOW)
        );
    }

    #[test]
    fn bad_times_are_refused_naming_the_input() {
        for bad in [
            "",
            "soon",
            "now+",
            "now+x",
            "now+5parsecs",
            "+",
            "+soon",
            "25:00",
            "12:60",
            "1:2:3:4",
            "2026-13-01",
            "2026-11-23T25:00",
            "now-",
            "now-5parsecs",
        ] {
            let e = parse_moment(bad, NOW, &berlin()).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{bad:?}: {e}");
        }
    }
}
