//! Slurm's times and durations. Every command runs with `TZ=UTC` and
//! `SLURM_TIME_FORMAT=standard` (see [`super::FIXED_ENV`]), so Slurm prints and reads
//! timestamps as `YYYY-MM-DDTHH:MM:SS` in UTC, and this module converts them to and from Unix
//! seconds without a time-zone database.

/// Unix seconds of a Slurm timestamp `YYYY-MM-DDTHH:MM:SS` (UTC); `None` when it is not one.
pub fn parse_timestamp(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 19
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        if part.bytes().all(|c| c.is_ascii_digit()) {
            part.parse().ok()
        } else {
            None
        }
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || sec > 60
    {
        return None;
    }
    Some(days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + sec)
}

/// A Slurm timestamp (`YYYY-MM-DDTHH:MM:SS`, UTC) for Unix seconds, as `sbatch --begin` and
/// `scontrol create reservation StartTime=` read it under `TZ=UTC`.
pub fn format_timestamp(unix: i64) -> String {
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        secs / 3600,
        (secs % 3600) / 60,
        secs % 60
    )
}

/// Seconds of a Slurm duration: `[DAYS-]HH:MM:SS`, `MM:SS`, `MINUTES`, `DAYS-HH[:MM]`
/// (as `scontrol` prints time limits and reservation durations). `None` for anything else,
/// including `UNLIMITED`, which callers handle before.
pub fn parse_duration(s: &str) -> Option<i64> {
    let digits = |p: &str| !p.is_empty() && p.len() <= 9 && p.bytes().all(|c| c.is_ascii_digit());
    let (days, rest) = match s.split_once('-') {
        Some((d, rest)) if digits(d) => (d.parse::<i64>().ok()?, rest),
        Some(_) => return None,
        None => (0, s),
    };
    let parts: Vec<&str> = rest.split(':').collect();
    if parts.iter().any(|p| !digits(p)) {
        return None;
    }
    let n: Vec<i64> = parts
        .iter()
        .map(|p| p.parse::<i64>())
        .collect::<Result<_, _>>()
        .ok()?;
    let has_days = s.contains('-');
    let secs = match (has_days, n.as_slice()) {
        (false, [m]) => m * 60,
        (false, [m, sec]) => m * 60 + sec,
        (_, [h, m, sec]) => h * 3600 + m * 60 + sec,
        (true, [h]) => h * 3600,
        (true, [h, m]) => h * 3600 + m * 60,
        _ => return None,
    };
    Some(days * 86_400 + secs)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip() {
        assert_eq!(parse_timestamp("1970-01-01T00:00:00"), Some(0));
        assert_eq!(parse_timestamp("2026-11-22T17:54:29"), Some(1_795_370_069));
        assert_eq!(parse_timestamp("2024-02-29T12:00:00"), Some(1_709_208_000));
        for t in [0, 1_795_370_069, 1_709_208_000, 4_102_444_799, 951_782_400] {
            assert_eq!(parse_timestamp(&format_timestamp(t)), Some(t), "{t}");
        }
        for bad in [
            "",
            "N/A",
            "2026-13-01T00:00:00",
            "2025-02-29T00:00:00",
            "2026-11-22 17:54:29",
        ] {
            assert_eq!(parse_timestamp(bad), None, "{bad}");
        }
        assert_eq!(parse_timestamp("2026-1a-22T17:54:29"), None);
        assert_eq!(parse_timestamp("+026-11-22T17:54:29"), None);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("00:30:00"), Some(1800));
        assert_eq!(parse_duration("1-00:00:00"), Some(86_400));
        assert_eq!(parse_duration("10:00"), Some(600));
        assert_eq!(parse_duration("5"), Some(300));
        assert_eq!(parse_duration("2-12"), Some(2 * 86_400 + 12 * 3600));
        for bad in ["", "UNLIMITED", "1-", "-1", "a:b", "1:2:3:4", "1--2:00:00"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }
}
