//! `--cacert FILE`: the certificates the client trusts besides the system's roots.
//!
//! A certificate in the file is trusted two ways. As a root, it vouches for the server's
//! certificate it signed (a private CA). And as the server's own certificate, pinned: a
//! server presenting exactly that certificate (byte for byte) is trusted without a chain,
//! its name and its dates still checked. The second is what makes a self-signed
//! certificate made the usual way (`openssl req -x509 …`, which marks it CA:TRUE) work:
//! WebPKI refuses a CA certificate as a server's own (`CaUsedAsEndEntity`) even when it is
//! the root given. Any other CA certificate a server presents is refused with a message
//! saying how to make one that works.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, Error, OtherError, RootCertStore};
use std::sync::Arc;

/// The TLS configuration of a client trusting `certs` (from `--cacert`) as roots and as
/// pinned server certificates, and the system's roots.
pub fn client_config(certs: Vec<CertificateDer<'static>>) -> anyhow::Result<rustls::ClientConfig> {
    let verifier = Pinned::new(certs)?;
    Ok(
        rustls::ClientConfig::builder_with_provider(verifier.provider.clone())
            .with_safe_default_protocol_versions()?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth(),
    )
}

impl Pinned {
    fn new(certs: Vec<CertificateDer<'static>>) -> anyhow::Result<Pinned> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        // The system's roots, as without --cacert; a store that cannot be read leaves only ours.
        let native = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(native.certs);
        for c in &certs {
            // A certificate that cannot be a root (an end entity's) may still be pinned.
            let _ = roots.add(c.clone());
        }
        let chained = if roots.is_empty() {
            None
        } else {
            Some(
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()?,
            )
        };
        Ok(Pinned {
            pinned: certs,
            chained,
            provider,
        })
    }
}

/// Trusts a pinned certificate as the server's own, else a chain to the roots.
#[derive(Debug)]
struct Pinned {
    pinned: Vec<CertificateDer<'static>>,
    chained: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

/// Why a CA certificate presented by a server is refused, and what works instead.
#[derive(thiserror::Error)]
#[error(
    "the server's certificate is a CA certificate (basicConstraints CA:TRUE, which `openssl \
     req -x509` sets by default) and not the certificate given with --cacert. Give the \
     server's own certificate file (its --tls-cert) with --cacert: it is then trusted as \
     pinned, its name and dates still checked. Or make the server a certificate that is not \
     a CA (`openssl req -x509 … -addext basicConstraints=critical,CA:FALSE`), or one signed \
     by a CA, and give the CA with --cacert"
)]
struct CaAsServer;

/// rustls shows the cause of a refused certificate with `Debug`: the message, then.
impl std::fmt::Debug for CaAsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        if self
            .pinned
            .iter()
            .any(|p| p.as_ref() == end_entity.as_ref())
        {
            let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
            rustls::client::verify_server_name(&parsed, server_name)?;
            check_validity(end_entity, now)?;
            return Ok(ServerCertVerified::assertion());
        }
        let Some(chained) = &self.chained else {
            return Err(Error::InvalidCertificate(CertificateError::UnknownIssuer));
        };
        chained
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            .map_err(|e| match e {
                Error::InvalidCertificate(CertificateError::Other(ref other))
                    if matches!(
                        other.0.downcast_ref::<webpki::Error>(),
                        Some(webpki::Error::CaUsedAsEndEntity)
                    ) =>
                {
                    Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(
                        CaAsServer,
                    ))))
                }
                e => e,
            })
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The certificate's notBefore and notAfter hold `now`.
fn check_validity(cert: &CertificateDer<'_>, now: UnixTime) -> Result<(), Error> {
    let (not_before, not_after) =
        validity(cert.as_ref()).ok_or(Error::InvalidCertificate(CertificateError::BadEncoding))?;
    let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
    if now < not_before {
        return Err(Error::InvalidCertificate(CertificateError::NotValidYet));
    }
    if now > not_after {
        return Err(Error::InvalidCertificate(CertificateError::Expired));
    }
    Ok(())
}

/// One DER element: its tag, its contents and what follows it.
fn element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, &b| acc << 8 | usize::from(b));
        rest = &rest[n..];
        len
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// notBefore and notAfter of an X.509 certificate (RFC 5280 §4.1), in seconds since 1970.
fn validity(der: &[u8]) -> Option<(i64, i64)> {
    const SEQUENCE: u8 = 0x30;
    let (SEQUENCE, cert, _) = element(der)? else {
        return None;
    };
    let (SEQUENCE, tbs, _) = element(cert)? else {
        return None;
    };
    let (tag, _, mut rest) = element(tbs)?;
    if tag == 0xa0 {
        // [0] version; then the serial number.
        rest = element(rest)?.2;
    }
    let rest = element(rest)?.2; // signature algorithm
    let rest = element(rest)?.2; // issuer
    let (SEQUENCE, validity, _) = element(rest)? else {
        return None;
    };
    let (t1, before, rest) = element(validity)?;
    let (t2, after, _) = element(rest)?;
    Some((time(t1, before)?, time(t2, after)?))
}

/// A UTCTime (YYMMDDHHMMSSZ) or GeneralizedTime (YYYYMMDDHHMMSSZ), in seconds since 1970.
fn time(tag: u8, text: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(text).ok()?.strip_suffix('Z')?;
    let (year, rest) = match (tag, text.len()) {
        (0x17, 12) => {
            let yy: i16 = text[..2].parse().ok()?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, &text[2..])
        }
        (0x18, 14) => (text[..4].parse().ok()?, &text[4..]),
        _ => return None,
    };
    let num = |i: usize| rest.get(i..i + 2)?.parse::<i8>().ok();
    let at =
        jiff::civil::DateTime::new(year, num(0)?, num(2)?, num(4)?, num(6)?, num(8)?, 0).ok()?;
    Some(
        at.to_zoned(jiff::tz::TimeZone::UTC)
            .ok()?
            .timestamp()
            .as_second(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};

    fn now() -> UnixTime {
        UnixTime::now()
    }

    fn verify(pinned: &[&rcgen::Certificate], presented: &rcgen::Certificate) -> Result<(), Error> {
        let certs: Vec<CertificateDer<'static>> = pinned.iter().map(|c| c.der().clone()).collect();
        let name = ServerName::try_from("localhost").unwrap();
        Pinned::new(certs)
            .unwrap()
            .verify_server_cert(presented.der(), &[], &name, &[], now())
            .map(|_| ())
    }

    #[test]
    fn a_pinned_certificate_is_trusted_only_by_name_and_while_valid() {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let good = p.clone().self_signed(&key).unwrap();
        assert_eq!(verify(&[&good], &good), Ok(()));
        p.not_before = rcgen::date_time_ymd(2000, 1, 1);
        p.not_after = rcgen::date_time_ymd(2001, 1, 1);
        let old = p.clone().self_signed(&key).unwrap();
        assert_eq!(
            verify(&[&old], &old),
            Err(Error::InvalidCertificate(CertificateError::Expired))
        );
        p.not_before = rcgen::date_time_ymd(2999, 1, 1);
        p.not_after = rcgen::date_time_ymd(3000, 1, 1);
        let early = p.self_signed(&key).unwrap();
        assert_eq!(
            verify(&[&early], &early),
            Err(Error::InvalidCertificate(CertificateError::NotValidYet))
        );
        let mut elsewhere = CertificateParams::new(vec!["elsewhere".to_string()]).unwrap();
        elsewhere.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let elsewhere = elsewhere.self_signed(&key).unwrap();
        assert!(matches!(
            verify(&[&elsewhere], &elsewhere),
            Err(Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. }
            ))
        ));
        // Another certificate given is not this one.
        assert!(verify(&[&good], &elsewhere).is_err());
    }

    #[test]
    fn a_ca_certificate_as_a_server_s_own_is_refused_saying_what_works() {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca.self_signed(&ca_key).unwrap();
        let key = KeyPair::generate().unwrap();
        let mut leaf = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        leaf.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let leaf = leaf.signed_by(&key, &ca, &ca_key).unwrap();
        let err = verify(&[&ca], &leaf).unwrap_err().to_string();
        assert!(
            err.contains("basicConstraints CA:TRUE") && err.contains("pinned"),
            "{err}"
        );
    }

    #[test]
    fn times_of_both_kinds_are_read() {
        assert_eq!(time(0x17, b"700101000000Z"), Some(0));
        assert_eq!(time(0x17, b"491231235959Z"), Some(2_524_607_999));
        assert_eq!(time(0x18, b"20500101000000Z"), Some(2_524_608_000));
        assert_eq!(time(0x17, b"7001010000Z"), None);
        assert_eq!(time(0x18, b"2050010100000aZ"), None);
        assert_eq!(time(0x04, b"700101000000Z"), None);
    }
}
