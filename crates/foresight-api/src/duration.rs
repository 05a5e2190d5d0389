//! Durations as people type them: `90`, `90s`, `15m`, `1h30m`, `2d`, `01:30:00`, `1-12:00:00`
//! (Slurm's `days-hours:minutes:seconds`).

/// Seconds in `text`, or a message saying why it is not a duration. Zero and negative
/// durations parse; callers decide whether they make sense.
pub fn parse_duration(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let bad =
        || format!("{text:?} is not a duration (try 90, 15m, 1h30m, 2d, 01:30:00 or 1-12:00:00)");
    if t.is_empty() {
        return Err(bad());
    }
    if let Ok(n) = t.parse::<i64>() {
        return Ok(n);
    }
    if t.contains(':') {
        let (days, clock) = match t.split_once('-') {
            Some((d, rest)) => (d.parse::<i64>().map_err(|_| bad())?, rest),
            None => (0, t),
        };
        let fields: Vec<&str> = clock.split(':').collect();
        if fields.len() > 3 || fields.iter().any(|f| f.is_empty()) {
            return Err(bad());
        }
        let mut secs = 0i64;
        for f in &fields {
            let v: i64 = f.parse().map_err(|_| bad())?;
            if v < 0 {
                return Err(bad());
            }
            secs = secs
                .checked_mul(60)
                .and_then(|s| s.checked_add(v))
                .ok_or_else(bad)?;
        }
        return days
            .checked_mul(86_400)
            .and_then(|d| d.checked_add(secs))
            .ok_or_else(bad);
    }
    let mut total = 0i64;
    let mut number = String::new();
    for ch in t.chars() {
        if ch.is_ascii_digit() {
            number.push(ch);
            continue;
        }
        let unit = match ch {
            's' => 1,
            'm' => 60,
            'h' => 3_600,
            'd' => 86_400,
            'w' => 604_800,
            _ => return Err(bad()),
        };
        let n: i64 = number.parse().map_err(|_| bad())?;
        number.clear();
        total = n
            .checked_mul(unit)
            .and_then(|x| total.checked_add(x))
            .ok_or_else(bad)?;
    }
    if !number.is_empty() {
        return Err(bad());
    }
    Ok(total)
}

/// A duration the way `parse_duration` reads it back: `1h30m`, `45s`, `2d3h`.
pub fn format_duration(secs: i64) -> String {
    if secs <= 0 {
        return format!("{secs}s");
    }
    let mut out = String::new();
    let mut rest = secs;
    for (unit, name) in [(86_400, 'd'), (3_600, 'h'), (60, 'm'), (1, 's')] {
        if rest >= unit {
            out.push_str(&format!("{}{}", rest / unit, name));
            rest %= unit;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_people_type() {
        assert_eq!(parse_duration("90"), Ok(90));
        assert_eq!(parse_duration("90s"), Ok(90));
        assert_eq!(parse_duration("15m"), Ok(900));
        assert_eq!(parse_duration("1h30m"), Ok(5_400));
        assert_eq!(parse_duration("2d"), Ok(172_800));
        assert_eq!(parse_duration("01:30:00"), Ok(5_400));
        assert_eq!(parse_duration("10:00"), Ok(600));
        assert_eq!(parse_duration("1-12:00:00"), Ok(129_600));
        assert_eq!(parse_duration("0"), Ok(0));
    }

    #[test]
    fn garbage_is_refused_with_the_text() {
        for bad in ["", "1x", "h", "1:2:3:4", "::", "1h30", "-1-00:00"] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.contains("not a duration"), "{bad}: {e}");
        }
    }

    #[test]
    fn formatting_reads_back() {
        for s in [1, 59, 60, 61, 3_600, 5_400, 86_401, 200_000] {
            assert_eq!(parse_duration(&format_duration(s)), Ok(s));
        }
    }
}
