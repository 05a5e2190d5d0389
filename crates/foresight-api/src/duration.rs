//! Durations as people type them, with `sbatch --time` meaning: a bare number is **minutes**.
//!
//! | form | meaning | example |
//! | --- | --- | --- |
//! | `M` | minutes | `90` = 1 h 30 min |
//! | `M:S` | minutes and seconds | `10:30` |
//! | `H:M:S` | hours, minutes, seconds | `01:30:00` |
//! | `D-H` | days and hours | `2-12` |
//! | `D-H:M` | days, hours, minutes | `1-12:30` |
//! | `D-H:M:S` | days, hours, minutes, seconds | `1-12:00:00` |
//! | units | `s`, `m`, `h`, `d`, `w`, summed | `90s`, `15m`, `1h30m`, `2d` |
//!
//! The same parser serves the CLI (`-t`, `--ttl`, `+DURATION`) and the API's walltimes and
//! durations given as text; a JSON *number* is seconds.

/// The forms, for messages.
const FORMS: &str = "minutes (90), M:S, H:M:S, D-H, D-H:M, D-H:M:S, or units (90s, 15m, 1h30m, 2d)";

/// Seconds in `text`, or a message naming `text` and saying why it is not a duration. Zero
/// parses; callers decide whether it makes sense.
pub fn parse_duration(text: &str) -> Result<i64, String> {
    let bad = || format!("{text:?} is not a duration: use {FORMS}");
    let t = text.trim();
    if t.is_empty() {
        return Err(bad());
    }
    let number = |s: &str| -> Result<i64, String> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        s.parse::<i64>().map_err(|_| bad())
    };
    let sum = |parts: &[(i64, i64)]| -> Result<i64, String> {
        parts.iter().try_fold(0i64, |acc, &(n, unit)| {
            n.checked_mul(unit)
                .and_then(|x| acc.checked_add(x))
                .ok_or_else(bad)
        })
    };
    if t.bytes().all(|b| b.is_ascii_digit()) {
        return sum(&[(number(t)?, 60)]);
    }
    if t.contains('-') || t.contains(':') {
        let (days, clock) = match t.split_once('-') {
            Some((d, rest)) => (Some(number(d)?), rest),
            None => (None, t),
        };
        let f: Vec<&str> = clock.split(':').collect();
        let n = |i: usize| number(f[i]);
        return match (days, f.len()) {
            // M:S, H:M:S
            (None, 2) => sum(&[(n(0)?, 60), (n(1)?, 1)]),
            (None, 3) => sum(&[(n(0)?, 3_600), (n(1)?, 60), (n(2)?, 1)]),
            // D-H, D-H:M, D-H:M:S
            (Some(d), 1) => sum(&[(d, 86_400), (n(0)?, 3_600)]),
            (Some(d), 2) => sum(&[(d, 86_400), (n(0)?, 3_600), (n(1)?, 60)]),
            (Some(d), 3) => sum(&[(d, 86_400), (n(0)?, 3_600), (n(1)?, 60), (n(2)?, 1)]),
            _ => Err(bad()),
        };
    }
    let mut parts = Vec::new();
    let mut digits = String::new();
    for ch in t.chars() {
        if ch.is_ascii_digit() {
            digits.push(ch);
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
        parts.push((number(&digits)?, unit));
        digits.clear();
    }
    if !digits.is_empty() {
        return Err(bad());
    }
    sum(&parts)
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
    fn every_sbatch_form_and_every_unit() {
        struct Case {
            text: &'static str,
            want: i64,
        }
        let case = |text, want| Case { text, want };
        let cases = [
            // M
            case("90", 5_400),
            case("1", 60),
            case("0", 0),
            case(" 5 ", 300),
            // M:S
            case("10:00", 600),
            case("1:30", 90),
            case("0:45", 45),
            // H:M:S
            case("01:30:00", 5_400),
            case("100:00:01", 360_001),
            // D-H
            case("2-12", 216_000),
            case("0-1", 3_600),
            // D-H:M
            case("1-12:30", 131_400),
            // D-H:M:S
            case("1-12:00:00", 129_600),
            case("3-00:00:05", 259_205),
            // units
            case("90s", 90),
            case("15m", 900),
            case("1h30m", 5_400),
            case("2d", 172_800),
            case("1w", 604_800),
            case("1d2h3m4s", 93_784),
            case("0s", 0),
        ];
        for c in cases {
            assert_eq!(parse_duration(c.text), Ok(c.want), "{:?}", c.text);
        }
    }

    #[test]
    fn bad_forms_are_refused_naming_the_input() {
        for bad in [
            "",
            " ",
            "1x",
            "h",
            "1h30",
            "1:2:3:4",
            "::",
            ":30",
            "10:",
            "-1",
            "-1-00:00",
            "1-",
            "1-2-3",
            "1-2:3:4:5",
            "+5",
            "1.5h",
            "1:xx",
            "99999999999999999999",
            "999999999999999999d",
        ] {
            let e = parse_duration(bad).unwrap_err();
            assert!(
                e.contains(&format!("{bad:?}")) && e.contains("not a duration"),
                "{bad:?}: {e}"
            );
        }
    }

    #[test]
    fn formatting_reads_back() {
        for s in [1, 59, 60, 61, 3_600, 5_400, 86_401, 200_000] {
            assert_eq!(parse_duration(&format_duration(s)), Ok(s));
        }
    }
}
