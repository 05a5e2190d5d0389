//! The WIKI frame and its checksum, as Maui 3.x writes and checks them.
//!
//! A frame is 8 decimal digits giving the byte count of the rest (zero-padded), one separator
//! byte (Maui writes `\n`), then the body `CK=<16 hex> TS=<epoch seconds> AUTH=<user>
//! DT=<message>`. The checksum covers the body from `TS=` to its end: CRC-16/XMODEM of those
//! bytes, then Maui's 4-round pseudo-DES mix of (crc, shared key), printed as two 8-digit hex
//! words. Worked example, key 4418:
//!
//! ```text
//! 00000069
//! CK=327c863b4fce86d5 TS=1000000000 AUTH=root DT=CMD=GETNODES ARG=0:ALL
//! ```
//!
//! The checksum proves only that the sender knows the key, and the key has 32 bits: one
//! observed frame is enough to recover it by trying every key, in seconds. Rely on the
//! server's allowed-peer list and a private network as well.

use super::error::{excerpt, WikiError};
use crc::{Crc, CRC_16_XMODEM};
use std::fmt;
use tokio::io::{AsyncRead, AsyncReadExt};

/// Largest frame body accepted or sent, in bytes (2 MiB): bounds what one connection can make
/// the server buffer. A GETJOBS reply of about 10 000 jobs fits.
pub const MAX_FRAME_BYTES: usize = 2 * 1024 * 1024;

/// Largest difference between a frame's `TS=` and the receiver's clock, in seconds (one hour):
/// a replayed or long-delayed frame is refused.
pub const MAX_SKEW_SECS: u64 = 3600;

/// Bytes before the body: 8 size digits and the separator.
pub const HEADER_BYTES: usize = 9;

/// Digits of the size field.
const SIZE_DIGITS: usize = 8;

/// CRC-16/XMODEM: poly 0x1021, init 0, no reflection, no final xor (Maui's `DoCRC`).
const XMODEM: Crc<u16> = Crc::<u16>::new(&CRC_16_XMODEM);

/// First round constants of Maui's pseudo-DES mix.
const C1: [u32; 4] = [0xcba4_e531, 0x5371_58eb, 0x145c_dc3c, 0x0d3f_deb2];
/// Second round constants of Maui's pseudo-DES mix.
const C2: [u32; 4] = [0x12be_4590, 0xab54_ce58, 0x6954_c7a6, 0x15a2_ca46];

/// The shared key: the number Maui was built with (`configure --with-key=N`). Its `Debug`
/// prints no digits, so a config holding it can be logged.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Key(u32);

impl Key {
    /// The key `value`.
    pub const fn new(value: u32) -> Key {
        Key(value)
    }

    /// The key written in `text` as a decimal number, surrounding whitespace ignored (the
    /// contents of a key file, trailing newline and all).
    pub fn parse(text: &str) -> Result<Key, WikiError> {
        let digits = text.trim();
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(WikiError::BadKey {
                text: excerpt(digits),
            });
        }
        digits
            .parse::<u32>()
            .map(Key)
            .map_err(|_| WikiError::BadKey {
                text: excerpt(digits),
            })
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(<redacted>)")
    }
}

/// CRC-16/XMODEM of `bytes`, the first step of the checksum.
pub fn crc16(bytes: &[u8]) -> u16 {
    XMODEM.checksum(bytes)
}

/// Maui's pseudo-DES mix of `crc` with `key`: returns (lword, rword), the two words the
/// checksum prints. All arithmetic is on `u32`, wrapping, as Maui computes it.
pub fn mix(crc: u16, key: Key) -> (u32, u32) {
    let mut lword = u32::from(crc);
    let mut rword = key.0;
    for (c1, c2) in C1.iter().zip(C2.iter()) {
        let iswap = rword;
        let ia = iswap ^ c1;
        let lo = ia & 0xffff;
        let hi = ia >> 16;
        let ib = lo.wrapping_mul(lo).wrapping_add(!hi.wrapping_mul(hi));
        let ia = (ib >> 16) | ((ib & 0xffff) << 16);
        rword = lword ^ (ia ^ c2).wrapping_add(lo.wrapping_mul(hi));
        lword = iswap;
    }
    (lword, rword)
}

/// The `CK=` value of a frame whose body from `TS=` on is `signed`: 16 lowercase hex digits.
pub fn checksum(key: Key, signed: &[u8]) -> String {
    let (lword, rword) = mix(crc16(signed), key);
    format!("{lword:08x}{rword:08x}")
}

/// One WIKI message with its envelope: who sent it, when, and the message itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// `TS=`: Unix seconds when it was sent.
    pub timestamp: i64,
    /// `AUTH=`: the user it is sent on behalf of (Maui writes its own user; the server does not
    /// authorise by it, the key and the peer list do).
    pub auth: String,
    /// `DT=`: the message (a request such as `CMD=GETNODES ARG=0:ALL`, or a reply).
    pub data: String,
}

impl Frame {
    /// A frame of `data` sent by `auth` at `timestamp`.
    pub fn new(timestamp: i64, auth: impl Into<String>, data: impl Into<String>) -> Frame {
        Frame {
            timestamp,
            auth: auth.into(),
            data: data.into(),
        }
    }

    /// The frame's bytes, checksummed with `key`: size field, `\n`, body. Refuses an `AUTH`
    /// that is empty or holds whitespace or control characters, data holding a NUL (Maui
    /// reads C strings), a negative timestamp, and a body over [`MAX_FRAME_BYTES`].
    pub fn encode(&self, key: Key) -> Result<Vec<u8>, WikiError> {
        if self.auth.is_empty() {
            return Err(WikiError::invalid("AUTH", &self.auth, "it is empty"));
        }
        if self
            .auth
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(WikiError::invalid(
                "AUTH",
                &self.auth,
                "it holds whitespace or a control character",
            ));
        }
        if self.data.contains('\0') {
            return Err(WikiError::invalid("DT", &self.data, "it holds a NUL byte"));
        }
        if self.timestamp < 0 {
            return Err(WikiError::invalid(
                "TS",
                &self.timestamp.to_string(),
                "it is negative",
            ));
        }
        let signed = format!("TS={} AUTH={} DT={}", self.timestamp, self.auth, self.data);
        let body = format!("CK={} {signed}", checksum(key, signed.as_bytes()));
        if body.len() > MAX_FRAME_BYTES {
            return Err(WikiError::SizeOutOfRange {
                size: body.len() as u64,
                max: MAX_FRAME_BYTES,
            });
        }
        let mut bytes = format!("{:0width$}\n", body.len(), width = SIZE_DIGITS).into_bytes();
        bytes.extend_from_slice(body.as_bytes());
        Ok(bytes)
    }

    /// The frame in `bytes` (header and body, nothing more), checked against `key` and against
    /// the clock `now` (Unix seconds).
    pub fn decode(bytes: &[u8], key: Key, now: i64) -> Result<Frame, WikiError> {
        let header = bytes.get(..HEADER_BYTES).ok_or(WikiError::Truncated {
            expected: HEADER_BYTES,
            got: bytes.len(),
        })?;
        let size = parse_size(header)?;
        let body = &bytes[HEADER_BYTES..];
        match body.len().cmp(&size) {
            std::cmp::Ordering::Less => Err(WikiError::Truncated {
                expected: size,
                got: body.len(),
            }),
            std::cmp::Ordering::Greater => Err(WikiError::TrailingBytes {
                extra: body.len() - size,
            }),
            std::cmp::Ordering::Equal => Frame::decode_body(body, key, now),
        }
    }

    /// The frame whose body (what follows the header) is `body`, checked against `key` and the
    /// clock `now`. The checksum is checked before anything in the signed part is trusted;
    /// fields may be separated by runs of spaces or tabs (the seed's `<WS>`).
    pub fn decode_body(body: &[u8], key: Key, now: i64) -> Result<Frame, WikiError> {
        let rest = body.strip_prefix(b"CK=").ok_or(WikiError::MalformedFrame {
            reason: "the body does not start with CK=",
        })?;
        let (ck, rest) = split_token(rest);
        if ck.len() != 16 || !ck.iter().all(u8::is_ascii_hexdigit) {
            return Err(WikiError::MalformedFrame {
                reason: "CK= is not 16 hex digits",
            });
        }
        let signed = skip_ws(rest);
        if signed.len() == rest.len() {
            return Err(WikiError::MalformedFrame {
                reason: "no space or tab after the checksum",
            });
        }
        if !signed.starts_with(b"TS=") {
            return Err(WikiError::MalformedFrame {
                reason: "TS= does not follow the checksum",
            });
        }
        let got = String::from_utf8_lossy(ck).to_ascii_lowercase();
        if got != checksum(key, signed) {
            return Err(WikiError::BadChecksum { got });
        }

        let (ts, rest) = split_token(&signed[3..]);
        let timestamp = parse_timestamp(ts)?;
        let rest = expect_field(rest, b"AUTH=", "AUTH= does not follow TS=")?;
        let (auth, rest) = split_token(rest);
        if auth.is_empty() {
            return Err(WikiError::MalformedFrame {
                reason: "AUTH= is empty",
            });
        }
        let data = expect_field(rest, b"DT=", "DT= does not follow AUTH=")?;
        if now.abs_diff(timestamp) > MAX_SKEW_SECS {
            return Err(WikiError::StaleTimestamp {
                timestamp,
                now,
                max_secs: MAX_SKEW_SECS,
            });
        }
        let text = |bytes: &[u8], reason| {
            String::from_utf8(bytes.to_vec()).map_err(|_| WikiError::MalformedFrame { reason })
        };
        Ok(Frame {
            timestamp,
            auth: text(auth, "AUTH= is not UTF-8")?,
            data: text(data, "DT= is not UTF-8")?,
        })
    }
}

/// The body size announced by a 9-byte header: 8 decimal digits, then any separator byte (the
/// seed allows any; Maui writes `\n`). Refuses a size of 0 or over [`MAX_FRAME_BYTES`].
pub fn parse_size(header: &[u8]) -> Result<usize, WikiError> {
    let digits = header.get(..SIZE_DIGITS).unwrap_or(header);
    if digits.len() != SIZE_DIGITS || !digits.iter().all(u8::is_ascii_digit) {
        return Err(WikiError::BadSizeField {
            field: excerpt(&String::from_utf8_lossy(digits)),
        });
    }
    // Eight ASCII digits: at most 99 999 999, no overflow.
    let size = digits
        .iter()
        .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    if size == 0 || size > MAX_FRAME_BYTES as u64 {
        return Err(WikiError::SizeOutOfRange {
            size,
            max: MAX_FRAME_BYTES,
        });
    }
    usize::try_from(size).map_err(|_| WikiError::SizeOutOfRange {
        size,
        max: MAX_FRAME_BYTES,
    })
}

/// Reads one frame's body from `reader`: the header, then exactly the bytes it announces
/// (buffered as they arrive, so a peer that announces 2 MiB and sends little costs little).
/// No timeout here: callers bound the whole read.
pub async fn read_frame<R: AsyncRead + Unpin>(reader: &mut R) -> Result<Vec<u8>, WikiError> {
    let mut header = [0u8; HEADER_BYTES];
    let mut got = 0;
    while got < HEADER_BYTES {
        let n = reader
            .read(&mut header[got..])
            .await
            .map_err(|e| WikiError::io("read the frame header", e))?;
        if n == 0 {
            return Err(WikiError::Truncated {
                expected: HEADER_BYTES,
                got,
            });
        }
        got += n;
        // Refuse a size field as soon as it shows a non-digit (an HTTP probe, say), without
        // waiting for the rest.
        let digits = &header[..got.min(SIZE_DIGITS)];
        if !digits.iter().all(u8::is_ascii_digit) {
            return Err(WikiError::BadSizeField {
                field: excerpt(&String::from_utf8_lossy(digits)),
            });
        }
    }
    let size = parse_size(&header)?;
    let mut body = Vec::new();
    reader
        .take(size as u64)
        .read_to_end(&mut body)
        .await
        .map_err(|e| WikiError::io("read the frame body", e))?;
    if body.len() < size {
        return Err(WikiError::Truncated {
            expected: size,
            got: body.len(),
        });
    }
    Ok(body)
}

/// The bytes of `input` up to the first space or tab, and the rest from there.
fn split_token(input: &[u8]) -> (&[u8], &[u8]) {
    let end = input
        .iter()
        .position(|&b| b == b' ' || b == b'\t')
        .unwrap_or(input.len());
    input.split_at(end)
}

/// `input` without its leading spaces and tabs.
fn skip_ws(input: &[u8]) -> &[u8] {
    let start = input
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .unwrap_or(input.len());
    &input[start..]
}

/// After at least one space or tab, `input` must go on with `field`; returns what follows it.
fn expect_field<'a>(
    input: &'a [u8],
    field: &[u8],
    reason: &'static str,
) -> Result<&'a [u8], WikiError> {
    let after = skip_ws(input);
    if after.len() == input.len() {
        return Err(WikiError::MalformedFrame { reason });
    }
    after
        .strip_prefix(field)
        .ok_or(WikiError::MalformedFrame { reason })
}

/// A `TS=` value: decimal digits that fit an `i64`.
fn parse_timestamp(digits: &[u8]) -> Result<i64, WikiError> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(WikiError::MalformedFrame {
            reason: "TS= is not a decimal number",
        });
    }
    std::str::from_utf8(digits)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or(WikiError::MalformedFrame {
            reason: "TS= is out of range",
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE_SIGNED: &str = "TS=1000000000 AUTH=root DT=CMD=GETNODES ARG=0:ALL";
    const EXAMPLE_FRAME: &str =
        "00000069\nCK=327c863b4fce86d5 TS=1000000000 AUTH=root DT=CMD=GETNODES ARG=0:ALL";

    #[test]
    fn worked_example_crc_checksum_and_frame() {
        assert_eq!(crc16(EXAMPLE_SIGNED.as_bytes()), 0xede7);
        assert_eq!(
            checksum(Key::new(4418), EXAMPLE_SIGNED.as_bytes()),
            "327c863b4fce86d5"
        );
        let frame = Frame::new(1_000_000_000, "root", "CMD=GETNODES ARG=0:ALL");
        let bytes = frame.encode(Key::new(4418)).unwrap();
        assert_eq!(String::from_utf8(bytes.clone()).unwrap(), EXAMPLE_FRAME);
        assert_eq!(
            Frame::decode(&bytes, Key::new(4418), 1_000_000_000).unwrap(),
            frame
        );
    }

    #[test]
    fn crc_check_value_of_the_catalogue() {
        assert_eq!(crc16(b"123456789"), 0x31c3);
        assert_eq!(crc16(b""), 0);
    }

    #[test]
    fn key_parses_decimal_only_and_never_shows() {
        assert_eq!(Key::parse(" 4418\n").unwrap(), Key::new(4418));
        assert_eq!(Key::parse("4294967295").unwrap(), Key::new(u32::MAX));
        for bad in ["", "  ", "-1", "0x10", "4294967296", "12 3", "+5"] {
            assert!(
                matches!(Key::parse(bad), Err(WikiError::BadKey { .. })),
                "{bad:?}"
            );
        }
        assert_eq!(format!("{:?}", Key::new(4418)), "Key(<redacted>)");
    }

    #[test]
    fn decode_accepts_tabs_runs_of_spaces_and_uppercase_hex() {
        let signed = "TS=1000000000\tAUTH=root  DT=CMD=GETJOBS ARG=0:ALL";
        let ck = checksum(Key::new(7), signed.as_bytes()).to_uppercase();
        let body = format!("CK={ck} \t{signed}");
        let frame = Frame::decode_body(body.as_bytes(), Key::new(7), 1_000_000_100).unwrap();
        assert_eq!(frame.auth, "root");
        assert_eq!(frame.data, "CMD=GETJOBS ARG=0:ALL");
    }

    #[test]
    fn decode_refusals_name_the_fault() {
        let key = Key::new(4418);
        let now = 1_000_000_000;
        let good = EXAMPLE_FRAME.as_bytes();
        type Case = (&'static str, Vec<u8>, fn(&WikiError) -> bool);
        let cases: Vec<Case> = vec![
            ("short header", b"0000".to_vec(), |e| {
                matches!(e, WikiError::Truncated { .. })
            }),
            ("letters in size", b"0000006x\nCK=".to_vec(), |e| {
                matches!(e, WikiError::BadSizeField { .. })
            }),
            ("zero size", b"00000000\n".to_vec(), |e| {
                matches!(e, WikiError::SizeOutOfRange { size: 0, .. })
            }),
            ("too large", b"02097153\n".to_vec(), |e| {
                matches!(
                    e,
                    WikiError::SizeOutOfRange {
                        size: 2_097_153,
                        ..
                    }
                )
            }),
            ("truncated body", good[..good.len() - 1].to_vec(), |e| {
                matches!(
                    e,
                    WikiError::Truncated {
                        expected: 69,
                        got: 68
                    }
                )
            }),
            ("trailing", [good, b"x"].concat(), |e| {
                matches!(e, WikiError::TrailingBytes { extra: 1 })
            }),
            (
                "altered",
                EXAMPLE_FRAME.replace("ARG=0", "ARG=1").into_bytes(),
                |e| matches!(e, WikiError::BadChecksum { .. }),
            ),
            (
                "no CK",
                EXAMPLE_FRAME.replace("CK=", "XK=").into_bytes(),
                |e| matches!(e, WikiError::MalformedFrame { .. }),
            ),
        ];
        for (name, bytes, want) in cases {
            let err = Frame::decode(&bytes, key, now).unwrap_err();
            assert!(want(&err), "{name}: {err}");
        }
        let err = Frame::decode(good, Key::new(4419), now).unwrap_err();
        assert!(matches!(err, WikiError::BadChecksum { .. }), "{err}");
        // The refusal quotes what was received, never what the key would have produced.
        let wanted = checksum(Key::new(4419), EXAMPLE_SIGNED.as_bytes());
        assert!(!err.to_string().contains(&wanted), "{err}");
    }

    #[test]
    fn skew_of_one_hour_is_the_limit() {
        let key = Key::new(4418);
        let bytes = EXAMPLE_FRAME.as_bytes();
        assert!(Frame::decode(bytes, key, 1_000_003_600).is_ok());
        assert!(Frame::decode(bytes, key, 999_996_400).is_ok());
        for now in [1_000_003_601, 999_996_399] {
            let err = Frame::decode(bytes, key, now).unwrap_err();
            assert!(matches!(err, WikiError::StaleTimestamp { .. }), "{err}");
        }
    }

    #[test]
    fn encode_refuses_what_would_break_the_frame() {
        let key = Key::new(1);
        for (auth, data) in [("", "x"), ("a b", "x"), ("a\n", "x"), ("root", "a\0b")] {
            let err = Frame::new(1, auth, data).encode(key).unwrap_err();
            assert!(
                matches!(err, WikiError::InvalidValue { .. }),
                "{auth:?}: {err}"
            );
        }
        let big = "x".repeat(MAX_FRAME_BYTES);
        let err = Frame::new(1, "root", big).encode(key).unwrap_err();
        assert!(matches!(err, WikiError::SizeOutOfRange { .. }), "{err}");
    }

    #[tokio::test]
    async fn read_frame_reads_exactly_the_announced_bytes() {
        let mut input: &[u8] = b"00000003\nabcdef";
        assert_eq!(read_frame(&mut input).await.unwrap(), b"abc");
        let mut short: &[u8] = b"00000010\nabc";
        assert!(matches!(
            read_frame(&mut short).await,
            Err(WikiError::Truncated {
                expected: 10,
                got: 3
            })
        ));
        let mut bad: &[u8] = b"GET / HTTP/1.0\r\n";
        assert!(matches!(
            read_frame(&mut bad).await,
            Err(WikiError::BadSizeField { .. })
        ));
    }
}
