//! Requests between a site and its centre are signed, not carried with a bearer token: the
//! site's token never crosses the network, a changed request does not verify, and a captured
//! one cannot be replayed. The signature is HMAC-SHA256, keyed by the site's token, of the
//! site's name, a timestamp, a nonce, the method, the path with its query, and the body's
//! SHA-256. The centre refuses a timestamp more than [`MAX_SKEW_SECS`] off its clock and a
//! nonce it has seen within twice that.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;

/// The header holding the Unix second the request was signed at.
pub const TIMESTAMP_HEADER: &str = "x-foresight-timestamp";
/// The header holding the request's nonce (32 hex digits).
pub const NONCE_HEADER: &str = "x-foresight-nonce";
/// The header holding the signature (64 hex digits).
pub const SIGNATURE_HEADER: &str = "x-foresight-signature";
/// How far a request's timestamp may be from the centre's clock, seconds.
pub const MAX_SKEW_SECS: i64 = 300;

/// The signature of one request.
pub fn signature(
    token: &str,
    site: &str,
    timestamp: i64,
    nonce: &str,
    method: &str,
    path_and_query: &str,
    body: &[u8],
) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(token.as_bytes()).expect("HMAC takes a key of any length");
    let digest = hex::encode(Sha256::digest(body));
    for field in [
        site,
        &timestamp.to_string(),
        nonce,
        method,
        path_and_query,
        &digest,
    ] {
        mac.update(field.as_bytes());
        mac.update(b"\n");
    }
    hex::encode(mac.finalize().into_bytes())
}

/// A fresh nonce.
pub fn nonce() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

/// Why a signed request is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// A header is missing or malformed.
    #[error("{0}")]
    Malformed(String),
    /// The timestamp is too far from the centre's clock.
    #[error("timestamp {0} is more than {MAX_SKEW_SECS} s from this server's clock")]
    Skewed(i64),
    /// The signature does not verify.
    #[error("the signature does not verify")]
    Forged,
    /// The nonce was seen before.
    #[error("the request was replayed (its nonce was seen before)")]
    Replayed,
}

/// Checks requests of one site: their signatures, and their nonces against those seen.
#[derive(Debug, Default)]
pub struct Verifier {
    seen: Mutex<HashMap<String, i64>>,
}

impl Verifier {
    /// Checks one request received at `now` (Unix seconds) from `site` with `token`.
    #[allow(clippy::too_many_arguments)]
    pub fn verify(
        &self,
        token: &str,
        site: &str,
        now: i64,
        timestamp: &str,
        nonce: &str,
        given: &str,
        method: &str,
        path_and_query: &str,
        body: &[u8],
    ) -> Result<(), SignatureError> {
        let ts: i64 = timestamp
            .parse()
            .map_err(|_| SignatureError::Malformed(format!("{TIMESTAMP_HEADER} {timestamp:?}")))?;
        if nonce.len() != 32 || !nonce.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(SignatureError::Malformed(format!(
                "{NONCE_HEADER} must be 32 hex digits"
            )));
        }
        if (now - ts).abs() > MAX_SKEW_SECS {
            return Err(SignatureError::Skewed(ts));
        }
        let want = signature(token, site, ts, nonce, method, path_and_query, body);
        let same = want.len() == given.len()
            && want
                .bytes()
                .zip(given.bytes())
                .fold(0u8, |d, (a, b)| d | (a ^ b))
                == 0;
        if !same {
            return Err(SignatureError::Forged);
        }
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.retain(|_, &mut at| now - at <= 2 * MAX_SKEW_SECS);
        if seen.insert(nonce.to_owned(), now).is_some() {
            return Err(SignatureError::Replayed);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed(now: i64, nonce: &str, body: &[u8]) -> String {
        signature(
            "secret",
            "umea",
            now,
            nonce,
            "POST",
            "/grid/v1/answers",
            body,
        )
    }

    #[test]
    fn a_request_verifies_once_and_not_changed_late_or_again() {
        let v = Verifier::default();
        let n = nonce();
        let sig = signed(1000, &n, b"[]");
        let check = |v: &Verifier, now, ts: &str, n: &str, sig: &str, body: &[u8]| {
            v.verify(
                "secret",
                "umea",
                now,
                ts,
                n,
                sig,
                "POST",
                "/grid/v1/answers",
                body,
            )
        };
        assert_eq!(check(&v, 1000, "1000", &n, &sig, b"[]"), Ok(()));
        assert_eq!(
            check(&v, 1001, "1000", &n, &sig, b"[]"),
            Err(SignatureError::Replayed)
        );
        let n2 = nonce();
        let sig2 = signed(1000, &n2, b"[]");
        assert_eq!(
            check(&v, 1000, "1000", &n2, &sig2, b"[1]"),
            Err(SignatureError::Forged),
            "another body"
        );
        assert_eq!(
            v.verify(
                "secret",
                "lund",
                1000,
                "1000",
                &n2,
                &sig2,
                "POST",
                "/grid/v1/answers",
                b"[]"
            ),
            Err(SignatureError::Forged),
            "another site"
        );
        assert_eq!(
            v.verify(
                "other",
                "umea",
                1000,
                "1000",
                &n2,
                &sig2,
                "POST",
                "/grid/v1/answers",
                b"[]"
            ),
            Err(SignatureError::Forged),
            "another key"
        );
        assert_eq!(
            check(&v, 1000 + MAX_SKEW_SECS + 1, "1000", &n2, &sig2, b"[]"),
            Err(SignatureError::Skewed(1000))
        );
        assert_eq!(check(&v, 1000, "1000", &n2, &sig2, b"[]"), Ok(()));
    }
}
