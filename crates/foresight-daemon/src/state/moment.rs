//! Times in messages people read: UTC, to the second.

/// `2026-11-22T19:33:00Z` for seconds since the epoch.
pub fn utc(t: i64) -> String {
    match u64::try_from(t) {
        Ok(secs) => humantime::format_rfc3339_seconds(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs),
        )
        .to_string(),
        Err(_) => t.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_to_the_second() {
        assert_eq!(super::utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::utc(1_795_369_855), "2026-11-22T17:50:55Z");
        assert_eq!(super::utc(-5), "-5");
    }
}
