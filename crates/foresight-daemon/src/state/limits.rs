//! The ranges every number and string of a request must fall in, checked at the API so that
//! nothing later (the supervisor's clock, the store, a terminal printing a name) can be hurt.

use crate::state::refusal::Refusal;

/// The longest walltime or reservation: a year. Instants stay far from `i64` overflow.
pub const MAX_SECONDS: i64 = 366 * 86_400;
/// The latest instant accepted: 9999-12-31T23:59:59Z, the last one a date prints.
pub const MAX_INSTANT: i64 = 253_402_300_799;
/// The dearest price per processor-second; worst-case costs stay finite.
pub const MAX_PRICE: f64 = 1e9;
/// The longest name (job name, credential), in characters.
pub const MAX_NAME: usize = 256;
/// The longest argument, environment value or working directory, in bytes.
pub const MAX_TEXT: usize = 64 * 1024;

/// The most tasks one array job may have: each is a job of its own, stored in the one
/// transaction that acknowledges the submission.
pub const MAX_ARRAY_TASKS: u64 = 10_000;
/// The largest array index (Slurm's `MaxArraySize` is one more than its largest index).
pub const MAX_ARRAY_INDEX: u32 = 4_000_000;

/// An array of at most `MAX_ARRAY_TASKS` tasks with indices up to `MAX_ARRAY_INDEX`.
pub fn array(field: &str, a: &foresight_api::ArraySpec) -> Result<(), Refusal> {
    let n = a.count();
    if n > MAX_ARRAY_TASKS {
        return Err(Refusal::invalid(
            field,
            format!("{a} has {n} tasks; an array may have at most {MAX_ARRAY_TASKS}"),
        ));
    }
    if a.max_index() > MAX_ARRAY_INDEX {
        return Err(Refusal::invalid(
            field,
            format!(
                "{a}: index {} is above the largest allowed, {MAX_ARRAY_INDEX}",
                a.max_index()
            ),
        ));
    }
    Ok(())
}

/// A number of seconds in `1..=MAX_SECONDS`.
pub fn seconds(field: &str, s: i64) -> Result<(), Refusal> {
    if (1..=MAX_SECONDS).contains(&s) {
        Ok(())
    } else {
        Err(Refusal::invalid(
            field,
            format!("must be at least 1 s and at most {MAX_SECONDS} s (366 days), got {s} s"),
        ))
    }
}

/// An instant (seconds since the epoch) in `0..=MAX_INSTANT`.
pub fn instant(field: &str, t: i64) -> Result<(), Refusal> {
    if (0..=MAX_INSTANT).contains(&t) {
        Ok(())
    } else {
        Err(Refusal::invalid(
            field,
            format!(
                "must be from 0 to at most {MAX_INSTANT} (year 9999) seconds since the epoch, \
                 got {t}"
            ),
        ))
    }
}

/// A price in `0..=MAX_PRICE` (NaN, negative and infinite prices are refused): the one
/// check of a job's price, at submission and in an estimate.
pub fn price(field: &str, p: f64) -> Result<(), Refusal> {
    if (0.0..=MAX_PRICE).contains(&p) {
        Ok(())
    } else {
        Err(Refusal::invalid(
            field,
            format!(
                "must be a number from 0 to at most {MAX_PRICE:e} per processor-second, got {p}"
            ),
        ))
    }
}

/// A name shown to people: 1 to `MAX_NAME` characters, no control characters (which would
/// drive the terminal that prints it), bidirectional controls (which would make it print as
/// another name) or invisible characters ([`foresight_api::text::is_hidden`]).
pub fn name(field: &str, s: &str) -> Result<(), Refusal> {
    let n = s.chars().count();
    if n == 0 || n > MAX_NAME {
        return Err(Refusal::invalid(
            field,
            format!("must be 1 to at most {MAX_NAME} characters, got {n}"),
        ));
    }
    match foresight_api::text::hidden_problem(s) {
        Some(why) => Err(Refusal::invalid(field, why)),
        None => Ok(()),
    }
}

/// Text handed to `exec` (an argument, a value, a path): no NUL, at most `MAX_TEXT` bytes.
pub fn exec_text(field: &str, s: &str) -> Result<(), Refusal> {
    if s.len() > MAX_TEXT {
        return Err(Refusal::invalid(
            field,
            format!("must be at most {MAX_TEXT} bytes, got {}", s.len()),
        ));
    }
    if s.contains('\0') {
        return Err(Refusal::invalid(field, "must not contain NUL bytes"));
    }
    Ok(())
}

/// An environment variable's name: non-empty, without `=` or NUL.
pub fn env_key(field: &str, k: &str) -> Result<(), Refusal> {
    if k.is_empty() || k.contains('=') || k.contains('\0') {
        return Err(Refusal::invalid(
            field,
            format!("variable name {k:?} must be non-empty, without '=' or NUL"),
        ));
    }
    exec_text(field, k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_of_each_range() {
        assert!(seconds("walltime", 1).is_ok());
        assert!(seconds("walltime", MAX_SECONDS).is_ok());
        assert!(seconds("walltime", MAX_SECONDS + 1).is_err());
        assert!(seconds("walltime", 0).is_err());
        assert!(seconds("walltime", i64::MAX).is_err());
        assert!(instant("end", MAX_INSTANT).is_ok());
        assert!(instant("end", MAX_INSTANT + 1).is_err());
        assert!(instant("start", -1).is_err());
        assert!(price("price", f64::NAN).is_err());
        assert!(price("price", f64::INFINITY).is_err());
        assert!(price("price", 0.0).is_ok());
        assert!(name("name", "Größe 1").is_ok());
        assert!(name("name", "a\u{1b}[2J").is_err());
        assert!(name("name", "\u{9b}2J").is_err());
        for bidi in ['\u{202e}', '\u{2066}', '\u{200f}', '\u{61c}', '\u{200b}'] {
            assert_eq!(
                name("name", &format!("ev{bidi}il"))
                    .unwrap_err()
                    .to_string(),
                format!(
                    "name: must not contain control, bidirectional or invisible characters, \
                     found {} at character 3",
                    bidi.escape_unicode()
                )
            );
        }
        assert!(name("name", &"n".repeat(MAX_NAME)).is_ok());
        assert!(name("name", &"n".repeat(MAX_NAME + 1)).is_err());
        assert!(env_key("env", "A=B").is_err());
        assert!(env_key("env", "").is_err());
        assert!(env_key("env", "PATH").is_ok());
        assert!(exec_text("command", "a\tb").is_ok());
        assert!(exec_text("command", "a\0b").is_err());
        assert_eq!(
            seconds("walltime", 0).unwrap_err().field(),
            Some("walltime")
        );
    }

    #[test]
    fn arrays_too_large_are_refused_before_they_are_listed() {
        let a = |s: &str| s.parse::<foresight_api::ArraySpec>().unwrap();
        assert!(array("array", &a("0-9999")).is_ok());
        assert_eq!(
            array("array", &a("0-10000")).unwrap_err().to_string(),
            "array: 0-10000 has 10001 tasks; an array may have at most 10000"
        );
        assert_eq!(
            array("array", &a("0-4294967295")).unwrap_err().to_string(),
            "array: 0-4294967295 has 4294967296 tasks; an array may have at most 10000"
        );
        assert_eq!(
            array("array", &a("1,4000001")).unwrap_err().to_string(),
            "array: 1,4000001: index 4000001 is above the largest allowed, 4000000"
        );
        assert!(array("array", &a("0-4000000:1000")).is_ok());
    }
}
