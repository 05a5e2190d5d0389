//! Reading a whole input file (a configuration, a workflow, a sweep, a plan) within a bound,
//! so that a FIFO, `/dev/zero` or a runaway file ends in an error saying so instead of being
//! read until memory runs out. Traces are streamed instead, within [`crate::swf::Limits`].

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// The most bytes a configuration, workflow, sweep or plan file may hold: 16 MiB, hundreds
/// of times the largest written by hand or by `plan show -o json` for a busy grid.
pub const MAX_TEXT_BYTES: u64 = 16 << 20;

/// The bytes of `path`, at most `limit` of them; a longer file is an `InvalidData` error
/// saying the limit (the caller names the file).
pub fn read_bytes(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    File::open(path)?
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("longer than {limit} bytes, the most such a file may hold"),
        ));
    }
    Ok(bytes)
}

/// The text of `path`, within [`MAX_TEXT_BYTES`]: too long or not UTF-8 is an
/// `InvalidData` error.
pub fn read_text(path: &Path) -> io::Result<String> {
    String::from_utf8(read_bytes(path, MAX_TEXT_BYTES)?).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_read_up_to_its_limit_and_no_further() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.toml");
        std::fs::write(&path, "a = 1\n").unwrap();
        assert_eq!(read_bytes(&path, 6).unwrap(), b"a = 1\n");
        let err = read_bytes(&path, 5).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert_eq!(
            err.to_string(),
            "longer than 5 bytes, the most such a file may hold"
        );
        assert_eq!(read_text(&path).unwrap(), "a = 1\n");
        // An endless file ends at the limit.
        let err = read_text(Path::new("/dev/zero")).unwrap_err();
        assert!(
            err.to_string().starts_with("longer than 16777216 bytes"),
            "{err}"
        );
        std::fs::write(&path, [0xff, 0xfe]).unwrap();
        assert!(read_text(&path).unwrap_err().to_string().contains("UTF-8"));
    }
}
