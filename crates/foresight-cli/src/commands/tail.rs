//! `job tail [-f]`: the end of a job's output, and with `-f` what it writes next, read through
//! the API (`GET /api/v1/jobs/ID/output?offset=N`) so that it works from anywhere.

use super::client::{Client, ServerRefused};
use anyhow::Result;
use clap::Args;
use foresight_api::{JobState, JobView};
use std::io::Write;
use std::time::Duration;

/// How often `job tail -f` asks for more.
const FOLLOW_POLL: Duration = Duration::from_millis(300);

/// Options of `job tail`.
#[derive(Args)]
pub struct TailOpts {
    /// The job.
    id: u64,
    /// Keep printing what the job writes until it ends (then exit).
    #[arg(short = 'f', long)]
    follow: bool,
    /// How many of the last lines to print first.
    #[arg(short = 'n', long, default_value_t = 10)]
    lines: usize,
    /// Standard error instead of standard output.
    #[arg(long)]
    stderr: bool,
    /// The part of a co-allocated job (0, 1, …).
    #[arg(long, default_value_t = 0)]
    part: usize,
}

/// The last `n` lines of `bytes` (all of them when there are fewer).
fn last_lines(bytes: &[u8], n: usize) -> &[u8] {
    if n == 0 {
        return &bytes[bytes.len()..];
    }
    // A final newline ends the last line; it does not start another.
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let mut seen = 0;
    for (i, &b) in body.iter().enumerate().rev() {
        if b == b'\n' {
            seen += 1;
            if seen == n {
                return &bytes[i + 1..];
            }
        }
    }
    bytes
}

/// Runs `job tail`.
pub fn tail(c: &Client, o: TailOpts) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let mut offset: u64 = 0;
    let mut first = true;
    loop {
        let job: JobView = c.get(&format!("/jobs/{}", o.id), &[])?;
        let ended = job.state.is_final();
        // Nothing to read before it starts (a job that never started has no output).
        if job.started_at.is_some() && job.stdout.is_some() {
            let mut q = vec![("part", o.part.to_string()), ("offset", offset.to_string())];
            if o.stderr {
                q.push(("stderr", "true".into()));
            }
            let bytes = match c.send_raw(
                c.http
                    .get(c.url(&format!("/jobs/{}/output", o.id)))
                    .query(&q),
            ) {
                Ok(b) => b,
                // Its file is made a moment after it starts: nothing written yet.
                Err(e)
                    if !ended
                        && e.downcast_ref::<ServerRefused>()
                            .is_some_and(|r| r.status == 404) =>
                {
                    Vec::new()
                }
                Err(e) => return Err(e),
            };
            offset += bytes.len() as u64;
            let shown = if first {
                last_lines(&bytes, o.lines)
            } else {
                &bytes[..]
            };
            if !shown.is_empty() || first {
                first = false;
                out.write_all(shown)?;
                out.flush()?;
            }
            if ended && (bytes.is_empty() || !o.follow) {
                return Ok(());
            }
        } else if ended || !o.follow {
            if job.state == JobState::Cancelled || !o.follow {
                eprintln!("job {}: {}, no output", o.id, job.state);
            }
            return Ok(());
        }
        if !o.follow {
            return Ok(());
        }
        std::thread::sleep(FOLLOW_POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::last_lines;

    #[test]
    fn last_lines_counts_from_the_end() {
        assert_eq!(last_lines(b"a\nb\nc\n", 2), b"b\nc\n");
        assert_eq!(last_lines(b"a\nb\nc", 2), b"b\nc");
        assert_eq!(last_lines(b"a\nb\n", 5), b"a\nb\n");
        assert_eq!(last_lines(b"a\nb\n", 0), b"");
        assert_eq!(last_lines(b"", 3), b"");
    }
}
