//! Standard output that may close early (`foresight job list --all | head -1`): every print
//! of the binary goes through `out!` and `outln!` (not `print!`, which panics when the
//! reader has gone), and every error reaching `main` is checked with [`broken_pipe`].
//!
//! A closed pipe ends the process quietly with status 141 (128 + SIGPIPE), which is what a
//! shell reports for a coreutils tool (`yes | head -1`) killed by SIGPIPE: no message, and a
//! pipeline's status (`set -o pipefail`) says the output was cut, as it does for them. Any
//! other failure to write (a full disk: `> /dev/full`) is an error said on stderr, status 1.

use std::fmt;
use std::io::{self, Write};

/// The status of a process whose standard output was closed under it: 128 + SIGPIPE (13).
pub const BROKEN_PIPE_STATUS: u8 = 141;

/// Writes to standard output; a closed pipe ends the process quietly (status 141), any other
/// failure with an error on stderr (status 1).
pub fn write(args: fmt::Arguments<'_>) {
    let result = {
        let mut out = io::stdout().lock();
        out.write_fmt(args)
    };
    if let Err(e) = result {
        if e.kind() == io::ErrorKind::BrokenPipe {
            std::process::exit(i32::from(BROKEN_PIPE_STATUS));
        }
        eprintln!("error: writing to standard output: {e}");
        std::process::exit(1);
    }
}

/// `print!` that never panics: see [`write()`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::write(format_args!($($arg)*))
    };
}

/// `println!` that never panics: see [`write()`].
macro_rules! outln {
    () => {
        $crate::out::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// Whether `e` is, or was caused by, standard output closing early (directly, or through
/// the CSV or JSON writer that wrote to it).
pub fn broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
            || cause
                .downcast_ref::<serde_json::Error>()
                .is_some_and(|e| e.io_error_kind() == Some(io::ErrorKind::BrokenPipe))
            || cause.downcast_ref::<csv::Error>().is_some_and(|e| {
                matches!(e.kind(), csv::ErrorKind::Io(e) if e.kind() == io::ErrorKind::BrokenPipe)
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_pipe_is_known_through_its_context_and_its_writer() {
        let pipe = || io::Error::from(io::ErrorKind::BrokenPipe);
        assert!(broken_pipe(&anyhow::Error::new(pipe()).context("writing")));
        let csv = csv::Error::from(pipe());
        assert!(broken_pipe(&anyhow::Error::new(csv).context("writing")));
        let json = serde_json::Error::io(pipe());
        assert!(broken_pipe(&anyhow::Error::new(json)));
        let full = io::Error::from(io::ErrorKind::StorageFull);
        assert!(!broken_pipe(&anyhow::Error::new(full)));
        assert!(!broken_pipe(&anyhow::anyhow!("broken pipe")));
    }
}
