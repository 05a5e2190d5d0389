//! Where the durable state lives: an SQLite file (the embedded default) or a PostgreSQL
//! database, named the way operators write it (`/var/lib/foresight/foresight.db`,
//! `sqlite:///abs/path.db`, `postgres://user:secret@host:5432/db`). Errors and logs show it
//! through [`StoreLocation::redacted`], never with its password.

use crate::{Result, StoreError};
use std::fmt;
use std::path::PathBuf;

/// A parsed store location.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// An SQLite database file (created when missing).
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL (`postgres://` or `postgresql://`), password included.
    Postgres(String),
}

impl StoreLocation {
    /// Reads a location: a `postgres://`/`postgresql://` URL, a `sqlite://PATH` (or
    /// `sqlite:PATH`) URL, or a plain file path (SQLite). Any other scheme is refused, so that
    /// a typo such as `postgress://` is not taken for a file name.
    pub fn parse(text: &str) -> Result<StoreLocation> {
        let text = text.trim();
        let bad = |reason: &str| StoreError::BadLocation {
            location: redact(text),
            reason: reason.to_string(),
        };
        if text.is_empty() {
            return Err(bad("empty: give a file path or a postgres:// URL"));
        }
        let lower = text.to_ascii_lowercase();
        if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
            let url = url::Url::parse(text).map_err(|e| bad(&e.to_string()))?;
            if url.host_str().is_none_or(str::is_empty) && !has_socket_host(&url) {
                return Err(bad("no host"));
            }
            return Ok(StoreLocation::Postgres(text.to_string()));
        }
        if let Some(path) = text
            .strip_prefix("sqlite://")
            .or_else(|| text.strip_prefix("sqlite:"))
        {
            let path = path.split('?').next().unwrap_or_default();
            if path.is_empty() {
                return Err(bad("no file path after sqlite://"));
            }
            return Ok(StoreLocation::Sqlite(PathBuf::from(path)));
        }
        if let Some((scheme, _)) = text.split_once("://") {
            return Err(bad(&format!(
                "unknown scheme {scheme:?}: use postgres://, sqlite:// or a file path"
            )));
        }
        Ok(StoreLocation::Sqlite(PathBuf::from(text)))
    }

    /// The location as it may be shown: a URL without its password.
    pub fn redacted(&self) -> String {
        match self {
            StoreLocation::Sqlite(p) => p.display().to_string(),
            StoreLocation::Postgres(url) => redact(url),
        }
    }
}

/// `postgres:///db?host=/run/postgresql`: a Unix socket directory instead of a host name.
fn has_socket_host(url: &url::Url) -> bool {
    url.query_pairs().any(|(k, v)| k == "host" && !v.is_empty())
}

/// Shown, never with the password: not in `Debug` either, which logs and panics print.
impl fmt::Debug for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreLocation::Sqlite(p) => f.debug_tuple("Sqlite").field(p).finish(),
            StoreLocation::Postgres(_) => {
                f.debug_tuple("Postgres").field(&self.redacted()).finish()
            }
        }
    }
}

impl fmt::Display for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

/// A URL with its password (in the user part or a `password=` parameter) replaced by `***`.
/// Text that does not parse as a URL loses everything between `://` and the last `@`.
pub(crate) fn redact(text: &str) -> String {
    match url::Url::parse(text) {
        Ok(mut url) => {
            if url.password().is_some() {
                // Only fails for URLs that cannot have a password, which this one has.
                let _ = url.set_password(Some("***"));
            }
            if url.query_pairs().any(|(k, _)| k == "password") {
                let pairs: Vec<(String, String)> = url
                    .query_pairs()
                    .map(|(k, v)| {
                        let v = if k == "password" {
                            "***".into()
                        } else {
                            v.into_owned()
                        };
                        (k.into_owned(), v)
                    })
                    .collect();
                url.query_pairs_mut().clear().extend_pairs(pairs);
            }
            url.to_string()
        }
        Err(_) => match text.split_once("://") {
            Some((scheme, rest)) => match rest.rsplit_once('@') {
                Some((_, host)) => format!("{scheme}://***@{host}"),
                None => text.to_string(),
            },
            None => text.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn paths_and_sqlite_urls_are_sqlite_files() {
        for (text, path) in [
            ("/var/lib/f.db", "/var/lib/f.db"),
            ("rel/f.db", "rel/f.db"),
            ("sqlite:///var/lib/f.db", "/var/lib/f.db"),
            ("sqlite://rel/f.db", "rel/f.db"),
            ("sqlite:f.db?mode=rwc", "f.db"),
        ] {
            assert_eq!(
                StoreLocation::parse(text).unwrap(),
                StoreLocation::Sqlite(PathBuf::from(path)),
                "{text}"
            );
        }
    }

    #[test]
    fn postgres_urls_are_kept_whole_and_shown_without_password() {
        let text = "postgres://ann:s3cret@db.example:5433/grid?sslmode=disable";
        let loc = StoreLocation::parse(text).unwrap();
        assert_eq!(loc, StoreLocation::Postgres(text.into()));
        assert_eq!(
            loc.redacted(),
            "postgres://ann:***@db.example:5433/grid?sslmode=disable"
        );
        assert!(!format!("{loc:?}").contains("s3cret"));
        assert!(!format!("{loc}").contains("s3cret"));
        let q = StoreLocation::parse("postgresql://ann@h/db?password=s3cret&application_name=f")
            .unwrap();
        assert_eq!(
            q.redacted(),
            "postgresql://ann@h/db?password=***&application_name=f"
        );
        let socket = StoreLocation::parse("postgres:///grid?host=/run/postgresql").unwrap();
        assert!(matches!(socket, StoreLocation::Postgres(_)));
    }

    #[test]
    fn bad_locations_are_refused_naming_them_without_password() {
        for (text, needle) in [
            ("postgres://ann:s3cret@host:notaport/db", "invalid port"),
            ("postgress://ann:s3cret@host/db", "unknown scheme"),
            ("mysql://ann:s3cret@host/db", "unknown scheme"),
            ("postgres://", "host"),
            ("sqlite://", "no file path"),
            ("  ", "empty"),
        ] {
            let e = StoreLocation::parse(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
            assert!(!e.contains("s3cret"), "{text}: {e}");
            if text.contains('@') {
                assert!(e.contains("***@host"), "{text}: {e}");
            }
        }
    }
}
