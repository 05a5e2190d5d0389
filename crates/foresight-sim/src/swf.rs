//! The Standard Workload Format (SWF) of the Parallel Workloads Archive: one job per line,
//! 18 whitespace-separated fields, header comments starting with `;`.
//!
//! The reader streams (one reused line buffer, plain or gzip by magic number) and never
//! panics: a malformed line is an error naming the file, the line and the field, or, in
//! lenient mode, is skipped and counted.
//!
//! It is also bounded ([`Limits`]): an endless input, a line without end or a trace larger
//! than any archive log ends in an error naming the limit, the file and the line, never in
//! memory exhausted.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;
use thiserror::Error;

/// Names of the 18 SWF fields, 1-based in messages.
pub const FIELD_NAMES: [&str; 18] = [
    "job number",
    "submit time",
    "wait time",
    "run time",
    "allocated processors",
    "average CPU time",
    "used memory",
    "requested processors",
    "requested time",
    "requested memory",
    "status",
    "user id",
    "group id",
    "executable",
    "queue",
    "partition",
    "preceding job",
    "think time",
];

/// One job line. Unknown values are −1 as in the format.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SwfRecord {
    /// Field 1.
    pub job_number: i64,
    /// Field 2, seconds from the trace start.
    pub submit: i64,
    /// Field 3, seconds.
    pub wait: i64,
    /// Field 4, seconds.
    pub run_time: i64,
    /// Field 5.
    pub allocated_procs: i64,
    /// Field 6, seconds (may be fractional).
    pub avg_cpu_time: f64,
    /// Field 7, KB per processor (may be fractional).
    pub used_memory: f64,
    /// Field 8.
    pub requested_procs: i64,
    /// Field 9, seconds.
    pub requested_time: i64,
    /// Field 10, KB per processor (may be fractional).
    pub requested_memory: f64,
    /// Field 11: 1 completed, 0 failed, 5 cancelled, …
    pub status: i64,
    /// Field 12.
    pub user: i64,
    /// Field 13.
    pub group: i64,
    /// Field 14.
    pub executable: i64,
    /// Field 15.
    pub queue: i64,
    /// Field 16.
    pub partition: i64,
    /// Field 17.
    pub preceding_job: i64,
    /// Field 18, seconds.
    pub think_time: i64,
}

/// What the header comments say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwfHeader {
    /// `; MaxProcs: N`.
    pub max_procs: Option<u32>,
    /// `; MaxNodes: N`.
    pub max_nodes: Option<u32>,
    /// A `MaxProcs` line whose value is not a machine size. Kept rather than raised at once
    /// because `--procs` makes the header's size irrelevant; raised when the size is needed.
    pub bad_max_procs: Option<BadHeader>,
    /// Likewise for `MaxNodes`.
    pub bad_max_nodes: Option<BadHeader>,
    /// Every header line as read (without the newline), for writing them back.
    pub lines: Vec<String>,
}

impl SwfHeader {
    /// The machine size: MaxProcs, else MaxNodes; `Ok(None)` when the header has neither.
    /// A size line that does not hold a whole number from 1 to 2³² − 1 is an error naming
    /// the line and the value, never a guess (`1e2` is not 1, `0` is not "missing").
    pub fn machine_size(&self) -> Result<Option<u32>, BadHeader> {
        if let Some(bad) = &self.bad_max_procs {
            return Err(bad.clone());
        }
        if let Some(n) = self.max_procs {
            return Ok(Some(n));
        }
        if let Some(bad) = &self.bad_max_nodes {
            return Err(bad.clone());
        }
        Ok(self.max_nodes)
    }
}

/// A machine-size header line with a value that is not a machine size.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error(
    "{path}:{line}: header `; {key}:` has {value:?}, which is not a whole number of processors \
     from 1 to 4294967295; fix the header or give --procs"
)]
pub struct BadHeader {
    /// The file.
    pub path: String,
    /// 1-based line number.
    pub line: u64,
    /// `MaxProcs` or `MaxNodes`.
    pub key: &'static str,
    /// The value as written (its first word).
    pub value: String,
}

/// Bounds on what one trace may take. The defaults are far above any trace of the Parallel
/// Workloads Archive (its largest log, MetaCentrum 2013, has 5.7 million jobs of about 100
/// bytes a line; HPC2N, the largest here, 203 thousand) and keep memory to a few GB: a job
/// read is about 150 bytes held, plus its schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The longest line, in bytes, without its newline. Default 64 KiB.
    pub max_line_bytes: usize,
    /// The most job lines (well-formed, or malformed and skipped in lenient mode).
    /// Default 10 million.
    pub max_jobs: u64,
    /// The most bytes read, after decompression, blank and comment lines included: what ends
    /// an endless input of blank lines or skipped junk. Default 4 GiB.
    pub max_bytes: u64,
    /// The most bytes of header comments kept (they are held to be written back). Default
    /// 1 MiB; archive headers hold a few KB.
    pub max_header_bytes: usize,
}

impl Limits {
    /// Default [`Limits::max_line_bytes`].
    pub const MAX_LINE_BYTES: usize = 64 << 10;
    /// Default [`Limits::max_jobs`].
    pub const MAX_JOBS: u64 = 10_000_000;
    /// Default [`Limits::max_bytes`].
    pub const MAX_BYTES: u64 = 4 << 30;
    /// Default [`Limits::max_header_bytes`].
    pub const MAX_HEADER_BYTES: usize = 1 << 20;
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_line_bytes: Limits::MAX_LINE_BYTES,
            max_jobs: Limits::MAX_JOBS,
            max_bytes: Limits::MAX_BYTES,
            max_header_bytes: Limits::MAX_HEADER_BYTES,
        }
    }
}

/// Which of the [`Limits`] a trace went past.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// A line longer than `max_line_bytes`.
    LineBytes(usize),
    /// More job lines than `max_jobs`.
    Jobs(u64),
    /// More bytes than `max_bytes`.
    Bytes(u64),
    /// More header comments than `max_header_bytes`.
    HeaderBytes(usize),
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limit::LineBytes(n) => write!(
                f,
                "the line is longer than {n} bytes, the limit (an SWF line is about 100 \
                 bytes: is this a trace? --max-line-bytes raises the limit)"
            ),
            Limit::Jobs(n) => write!(
                f,
                "the trace has more than {n} job lines, the limit (--max-jobs raises it)"
            ),
            Limit::Bytes(n) => write!(
                f,
                "the trace is longer than {n} bytes (uncompressed), the limit \
                 (--max-trace-bytes raises it)"
            ),
            Limit::HeaderBytes(n) => write!(
                f,
                "the header comments (lines starting with `;`) exceed {n} bytes, the limit"
            ),
        }
    }
}

/// A trace that could not be read.
#[derive(Debug, Error)]
pub enum SwfError {
    /// The file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: io::Error,
    },
    /// A job line has the wrong number of fields.
    #[error("{path}:{line}: expected 18 fields, found {found}")]
    FieldCount {
        /// The file.
        path: String,
        /// 1-based line number.
        line: u64,
        /// Fields found.
        found: usize,
    },
    /// A field is not a number.
    #[error("{path}:{line}: field {field} ({name}): {reason}")]
    Field {
        /// The file.
        path: String,
        /// 1-based line number.
        line: u64,
        /// 1-based field number.
        field: usize,
        /// The field's name.
        name: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A machine-size header line is not a machine size.
    #[error(transparent)]
    Header(#[from] BadHeader),
    /// The trace went past one of its [`Limits`].
    #[error("{path}:{line}: {limit}")]
    Limit {
        /// The file.
        path: String,
        /// 1-based line number of the line that went past it.
        line: u64,
        /// Which limit.
        limit: Limit,
    },
}

/// Streams records out of an SWF source.
pub struct SwfReader<R> {
    src: R,
    path: String,
    line: u64,
    buf: Vec<u8>,
    header: SwfHeader,
    lenient: bool,
    malformed: u64,
    first_error: Option<String>,
    limits: Limits,
    jobs: u64,
    bytes: u64,
    header_bytes: usize,
}

/// Opens a trace file, plain or gzip-compressed (detected by its magic number).
pub fn open(path: &Path) -> Result<SwfReader<Box<dyn BufRead + Send>>, SwfError> {
    let name = path.display().to_string();
    let io_err = |source| SwfError::Io {
        path: name.clone(),
        source,
    };
    let mut file = BufReader::with_capacity(1 << 16, File::open(path).map_err(io_err)?);
    let gz = file.fill_buf().map_err(io_err)?.starts_with(&[0x1f, 0x8b]);
    let src: Box<dyn BufRead + Send> = if gz {
        Box::new(BufReader::with_capacity(
            1 << 16,
            inflate_in_background(file),
        ))
    } else {
        Box::new(file)
    };
    Ok(SwfReader::new(src, name))
}

/// Decompresses on a second thread so that inflating and parsing overlap: on a two-core
/// machine this hides most of the decompression time of a large trace.
fn inflate_in_background(file: BufReader<File>) -> ChannelReader {
    let (tx, rx) = std::sync::mpsc::sync_channel::<io::Result<Vec<u8>>>(8);
    std::thread::spawn(move || {
        let mut gz = flate2::bufread::MultiGzDecoder::new(file);
        loop {
            let mut chunk = vec![0u8; 1 << 18];
            let mut filled = 0;
            let result = loop {
                match gz.read(&mut chunk[filled..]) {
                    Ok(0) => break Ok(()),
                    Ok(k) => {
                        filled += k;
                        if filled == chunk.len() {
                            break Ok(());
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => break Err(e),
                }
            };
            chunk.truncate(filled);
            let done = filled == 0 || result.is_err();
            let msg = match result {
                Ok(()) if filled == 0 => break,
                Ok(()) => Ok(chunk),
                Err(e) => Err(e),
            };
            if tx.send(msg).is_err() || done {
                break;
            }
        }
    });
    ChannelReader {
        rx,
        chunk: Vec::new(),
        pos: 0,
    }
}

/// The reading end of `inflate_in_background`.
pub struct ChannelReader {
    rx: std::sync::mpsc::Receiver<io::Result<Vec<u8>>>,
    chunk: Vec<u8>,
    pos: usize,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.chunk.len() {
            match self.rx.recv() {
                Ok(Ok(chunk)) => {
                    self.chunk = chunk;
                    self.pos = 0;
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => return Ok(0), // the sender finished
            }
        }
        let k = buf.len().min(self.chunk.len() - self.pos);
        buf[..k].copy_from_slice(&self.chunk[self.pos..self.pos + k]);
        self.pos += k;
        Ok(k)
    }
}

impl<R: BufRead> SwfReader<R> {
    /// Reads from `src`; `path` names it in errors.
    pub fn new(src: R, path: impl Into<String>) -> SwfReader<R> {
        SwfReader {
            src,
            path: path.into(),
            line: 0,
            buf: Vec::with_capacity(256),
            header: SwfHeader::default(),
            lenient: false,
            malformed: 0,
            first_error: None,
            limits: Limits::default(),
            jobs: 0,
            bytes: 0,
            header_bytes: 0,
        }
    }

    /// Reads within `limits` instead of the defaults.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// In lenient mode malformed lines are skipped and counted instead of failing.
    pub fn lenient(mut self, lenient: bool) -> Self {
        self.lenient = lenient;
        self
    }

    /// The header seen so far (complete once the first record has been read).
    pub fn header(&self) -> &SwfHeader {
        &self.header
    }

    /// Malformed lines skipped in lenient mode.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    /// The first error skipped in lenient mode, for the report.
    pub fn first_skipped_error(&self) -> Option<&str> {
        self.first_error.as_deref()
    }

    /// The next record, `None` at the end.
    pub fn next_record(&mut self) -> Option<Result<SwfRecord, SwfError>> {
        loop {
            match self.read_line() {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => return Some(Err(e)),
            }
            let text = trim(&self.buf);
            if text.is_empty() {
                continue;
            }
            if text[0] == b';' {
                self.header_bytes += text.len();
                if self.header_bytes > self.limits.max_header_bytes {
                    return Some(Err(
                        self.limit(Limit::HeaderBytes(self.limits.max_header_bytes))
                    ));
                }
                self.read_header_line();
                continue;
            }
            self.jobs += 1;
            if self.jobs > self.limits.max_jobs {
                return Some(Err(self.limit(Limit::Jobs(self.limits.max_jobs))));
            }
            match parse_record(text) {
                Ok(r) => return Some(Ok(r)),
                Err(e) => {
                    let err = e.into_error(&self.path, self.line);
                    if self.lenient {
                        self.malformed += 1;
                        if self.first_error.is_none() {
                            self.first_error = Some(err.to_string());
                        }
                        continue;
                    }
                    return Some(Err(err));
                }
            }
        }
    }

    /// Reads the next line into `buf` (without its newline) and counts it; `false` at the
    /// end. Never holds more than `max_line_bytes` (plus one read chunk) of a line.
    fn read_line(&mut self) -> Result<bool, SwfError> {
        self.buf.clear();
        let mut any = false;
        loop {
            let chunk = match self.src.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(SwfError::Io {
                        path: self.path.clone(),
                        source,
                    })
                }
            };
            if chunk.is_empty() {
                if any {
                    self.line += 1;
                }
                return Ok(any);
            }
            any = true;
            let newline = chunk.iter().position(|&b| b == b'\n');
            let content = newline.unwrap_or(chunk.len());
            let used = newline.map_or(content, |i| i + 1);
            let fits = self.buf.len() + content <= self.limits.max_line_bytes;
            if fits {
                self.buf.extend_from_slice(&chunk[..content]);
            }
            self.src.consume(used);
            self.bytes += used as u64;
            if !fits {
                self.line += 1;
                return Err(self.limit(Limit::LineBytes(self.limits.max_line_bytes)));
            }
            if self.bytes > self.limits.max_bytes {
                self.line += 1;
                return Err(self.limit(Limit::Bytes(self.limits.max_bytes)));
            }
            if newline.is_some() {
                self.line += 1;
                return Ok(true);
            }
        }
    }

    fn limit(&self, limit: Limit) -> SwfError {
        SwfError::Limit {
            path: self.path.clone(),
            line: self.line,
            limit,
        }
    }

    fn read_header_line(&mut self) {
        let line = String::from_utf8_lossy(trim(&self.buf)).into_owned();
        let body = line.trim_start_matches(';').trim_start();
        for key in ["MaxProcs", "MaxNodes"] {
            let Some(rest) = body
                .strip_prefix(key)
                .and_then(|r| r.trim_start().strip_prefix(':'))
            else {
                continue;
            };
            // The first word is the value; archive traces comment after it ("338 (batch)").
            let word = rest.split_whitespace().next().unwrap_or("");
            let parsed = (!word.is_empty() && word.bytes().all(|b| b.is_ascii_digit()))
                .then(|| word.parse::<u32>().ok())
                .flatten()
                .filter(|n| *n > 0);
            let bad = match parsed {
                Some(_) => None,
                None => Some(BadHeader {
                    path: self.path.clone(),
                    line: self.line,
                    key,
                    value: word.to_string(),
                }),
            };
            let (good_slot, bad_slot) = if key == "MaxProcs" {
                (&mut self.header.max_procs, &mut self.header.bad_max_procs)
            } else {
                (&mut self.header.max_nodes, &mut self.header.bad_max_nodes)
            };
            *good_slot = parsed;
            *bad_slot = bad;
        }
        self.header.lines.push(line);
    }
}

impl<R: BufRead> Iterator for SwfReader<R> {
    type Item = Result<SwfRecord, SwfError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_record()
    }
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if first.is_ascii_whitespace() {
            s = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = s {
        if last.is_ascii_whitespace() {
            s = rest;
        } else {
            break;
        }
    }
    s
}

enum LineError {
    Count(usize),
    Field(usize, String),
}

impl LineError {
    fn into_error(self, path: &str, line: u64) -> SwfError {
        match self {
            LineError::Count(found) => SwfError::FieldCount {
                path: path.to_string(),
                line,
                found,
            },
            LineError::Field(i, reason) => SwfError::Field {
                path: path.to_string(),
                line,
                field: i + 1,
                name: FIELD_NAMES[i],
                reason,
            },
        }
    }
}

/// A plain decimal integer (the common case), without going through `str::parse`.
fn plain_int(tok: &[u8]) -> Option<i64> {
    let (neg, digits) = match tok {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, tok),
    };
    if digits.is_empty() || digits.len() > 18 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = digits
        .iter()
        .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0'));
    Some(if neg { -v } else { v })
}

/// An integer field; a fractional or exponent form is rounded to the nearest integer
/// (some archive traces write `-1.00`).
fn int_field(tok: &[u8], i: usize) -> Result<i64, LineError> {
    if let Some(v) = plain_int(tok) {
        return Ok(v);
    }
    let f = float_field(tok, i)?;
    if f.abs() > 9.0e15 {
        return Err(LineError::Field(i, format!("{f} is out of range")));
    }
    Ok(f.round() as i64)
}

fn float_field(tok: &[u8], i: usize) -> Result<f64, LineError> {
    if let Some(v) = plain_int(tok) {
        return Ok(v as f64);
    }
    let text = std::str::from_utf8(tok).ok();
    match text.and_then(|t| t.parse::<f64>().ok()) {
        Some(f) if f.is_finite() => Ok(f),
        _ => Err(LineError::Field(
            i,
            format!("not a number: {:?}", String::from_utf8_lossy(tok)),
        )),
    }
}

fn parse_record(line: &[u8]) -> Result<SwfRecord, LineError> {
    let mut toks: [&[u8]; 18] = [&[]; 18];
    let mut ints = [0i64; 18];
    let mut plain = [false; 18];
    let mut n = 0;
    let mut i = 0;
    let len = line.len();
    // One pass: cut tokens and parse plain integers on the fly; anything else (fractions,
    // exponents, junk) is parsed again below, where errors are made.
    while i < len {
        while i < len && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == len {
            break;
        }
        let start = i;
        let neg = line[i] == b'-';
        if neg || line[i] == b'+' {
            i += 1;
        }
        let digits_start = i;
        let mut v: i64 = 0;
        while i < len && line[i].is_ascii_digit() {
            v = v.wrapping_mul(10).wrapping_add(i64::from(line[i] - b'0'));
            i += 1;
        }
        let digits = i - digits_start;
        while i < len && !line[i].is_ascii_whitespace() {
            i += 1;
        }
        if n < 18 {
            toks[n] = &line[start..i];
            plain[n] = digits > 0 && digits <= 18 && digits_start + digits == i;
            ints[n] = if neg { -v } else { v };
        }
        n += 1;
    }
    if n != 18 {
        return Err(LineError::Count(n));
    }
    let int = |k: usize| {
        if plain[k] {
            Ok(ints[k])
        } else {
            int_field(toks[k], k)
        }
    };
    let float = |k: usize| {
        if plain[k] {
            Ok(ints[k] as f64)
        } else {
            float_field(toks[k], k)
        }
    };
    Ok(SwfRecord {
        job_number: int(0)?,
        submit: int(1)?,
        wait: int(2)?,
        run_time: int(3)?,
        allocated_procs: int(4)?,
        avg_cpu_time: float(5)?,
        used_memory: float(6)?,
        requested_procs: int(7)?,
        requested_time: int(8)?,
        requested_memory: float(9)?,
        status: int(10)?,
        user: int(11)?,
        group: int(12)?,
        executable: int(13)?,
        queue: int(14)?,
        partition: int(15)?,
        preceding_job: int(16)?,
        think_time: int(17)?,
    })
}

/// A whole trace in memory.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// The header.
    pub header: SwfHeader,
    /// Every well-formed record, in file order.
    pub records: Vec<SwfRecord>,
    /// Malformed lines skipped (lenient mode only).
    pub malformed: u64,
    /// The first of them, as an error message.
    pub first_malformed: Option<String>,
}

impl Trace {
    /// Reads a whole trace file within the default [`Limits`].
    pub fn read(path: &Path, lenient: bool) -> Result<Trace, SwfError> {
        Trace::read_within(path, lenient, Limits::default())
    }

    /// Reads a whole trace file within `limits`.
    pub fn read_within(path: &Path, lenient: bool, limits: Limits) -> Result<Trace, SwfError> {
        Trace::from_reader(open(path)?.lenient(lenient).limits(limits))
    }

    /// Reads everything from a reader.
    pub fn from_reader<R: BufRead>(mut reader: SwfReader<R>) -> Result<Trace, SwfError> {
        let mut records = Vec::new();
        while let Some(r) = reader.next_record() {
            records.push(r?);
        }
        Ok(Trace {
            header: reader.header.clone(),
            records,
            malformed: reader.malformed,
            first_malformed: reader.first_error.clone(),
        })
    }

    /// Parses SWF text held in memory (tests, embedded workloads).
    pub fn parse(text: &str, name: &str, lenient: bool) -> Result<Trace, SwfError> {
        Trace::from_reader(SwfReader::new(text.as_bytes(), name).lenient(lenient))
    }
}

/// Writes records in SWF, header lines first.
pub struct SwfWriter<W: Write> {
    out: W,
}

impl<W: Write> SwfWriter<W> {
    /// Writes the header lines (each must start with `;`).
    pub fn new(mut out: W, header: &[String]) -> io::Result<SwfWriter<W>> {
        for line in header {
            writeln!(out, "{line}")?;
        }
        Ok(SwfWriter { out })
    }

    /// Writes one record.
    pub fn write(&mut self, r: &SwfRecord) -> io::Result<()> {
        writeln!(
            self.out,
            "{} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}",
            r.job_number,
            r.submit,
            r.wait,
            r.run_time,
            r.allocated_procs,
            Num(r.avg_cpu_time),
            Num(r.used_memory),
            r.requested_procs,
            r.requested_time,
            Num(r.requested_memory),
            r.status,
            r.user,
            r.group,
            r.executable,
            r.queue,
            r.partition,
            r.preceding_job,
            r.think_time
        )
    }

    /// Flushes and returns the sink.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Prints integral floats without a fraction, as the archive does.
struct Num(f64);

impl std::fmt::Display for Num {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.fract() == 0.0 && self.0.abs() < 1e15 {
            write!(f, "{}", self.0 as i64)
        } else {
            write!(f, "{:.2}", self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "; Version: 2.2\n;MaxNodes: 64\n; MaxProcs: 128 (batch)\n\
        1 0 5 100 4 -1 -1 4 200 -1 1 3 2 -1 1 -1 -1 -1\n\
        \n   2   10 -1 50.00 8 12.5 -1 -1 -1 -1 0 4 2 -1 2 -1 -1 -1  \n";

    #[test]
    fn reads_header_and_records() {
        let t = Trace::parse(SAMPLE, "sample.swf", false).unwrap();
        assert_eq!(t.header.max_procs, Some(128));
        assert_eq!(t.header.max_nodes, Some(64));
        assert_eq!(t.header.machine_size(), Ok(Some(128)));
        assert_eq!(t.records.len(), 2);
        assert_eq!(t.records[1].run_time, 50);
        assert_eq!(t.records[1].avg_cpu_time, 12.5);
        assert_eq!(t.records[0].requested_time, 200);
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let text = "; MaxProcs: 4\n1 0 5 100 4 -1 -1 4 2x0 -1 1 3 2 -1 1 -1 -1 -1\n";
        let err = Trace::parse(text, "bad.swf", false)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "bad.swf:2: field 9 (requested time): not a number: \"2x0\""
        );
        let short = "1 0 5 100\n";
        let err = Trace::parse(short, "short.swf", false)
            .unwrap_err()
            .to_string();
        assert_eq!(err, "short.swf:1: expected 18 fields, found 4");
    }

    #[test]
    fn lenient_mode_skips_and_counts() {
        let text = "1 0 5 100\n2 0 5 100 4 -1 -1 4 200 -1 1 3 2 -1 1 -1 -1 -1\nx\n";
        let t = Trace::parse(text, "t.swf", true).unwrap();
        assert_eq!(t.records.len(), 1);
        assert_eq!(t.malformed, 2);
        assert_eq!(
            t.first_malformed.as_deref(),
            Some("t.swf:1: expected 18 fields, found 4")
        );
    }

    #[test]
    fn machine_size_headers_are_read_exactly() {
        struct Case {
            name: &'static str,
            header: &'static str,
            want: Result<Option<u32>, (u64, &'static str, &'static str)>,
        }
        let cases = [
            Case {
                name: "plain",
                header: "; MaxProcs: 338 (batch)\n",
                want: Ok(Some(338)),
            },
            Case {
                name: "largest",
                header: "; MaxProcs: 4294967295\n",
                want: Ok(Some(u32::MAX)),
            },
            Case {
                name: "exponent",
                header: "; Version: 2\n; MaxProcs: 1e2\n",
                want: Err((2, "MaxProcs", "1e2")),
            },
            Case {
                name: "zero",
                header: "; MaxProcs: 0\n",
                want: Err((1, "MaxProcs", "0")),
            },
            Case {
                name: "too large",
                header: "; MaxProcs: 4294967296\n",
                want: Err((1, "MaxProcs", "4294967296")),
            },
            Case {
                name: "empty",
                header: "; MaxNodes:\n",
                want: Err((1, "MaxNodes", "")),
            },
            Case {
                name: "nodes when procs is absent",
                header: "; MaxNodes: 64\n",
                want: Ok(Some(64)),
            },
            Case {
                name: "a good MaxProcs wins over a bad MaxNodes",
                header: "; MaxNodes: -1\n; MaxProcs: 8\n",
                want: Ok(Some(8)),
            },
            Case {
                name: "neither",
                header: "; MaxJobs: 5\n",
                want: Ok(None),
            },
        ];
        for c in cases {
            let t = Trace::parse(c.header, "h.swf", false).unwrap();
            let got = t.header.machine_size().map_err(|e| {
                assert!(
                    e.to_string().starts_with(&format!("h.swf:{}: ", e.line)),
                    "{}: {e}",
                    c.name
                );
                (e.line, e.key, e.value.clone())
            });
            let want = c.want.map_err(|(l, k, v)| (l, k, v.to_string()));
            assert_eq!(got, want, "{}", c.name);
        }
    }

    /// An endless source: `text` over and over.
    struct Endless(&'static [u8], usize);

    impl Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let mut k = 0;
            while k < buf.len() {
                buf[k] = self.0[self.1 % self.0.len()];
                self.1 += 1;
                k += 1;
            }
            Ok(k)
        }
    }

    fn endless(text: &'static [u8], limits: Limits, lenient: bool) -> String {
        let src = io::BufReader::new(Endless(text, 0));
        let reader = SwfReader::new(src, "endless.swf")
            .lenient(lenient)
            .limits(limits);
        Trace::from_reader(reader).unwrap_err().to_string()
    }

    #[test]
    fn swf_limits_end_endless_inputs_naming_the_limit_file_and_line() {
        let small = Limits {
            max_line_bytes: 1000,
            max_jobs: 5000,
            max_bytes: 1 << 20,
            max_header_bytes: 4096,
        };
        // A line without end (/dev/zero, a binary file): stopped at the line's limit.
        assert_eq!(
            endless(b"x", small, false),
            "endless.swf:1: the line is longer than 1000 bytes, the limit (an SWF line is \
             about 100 bytes: is this a trace? --max-line-bytes raises the limit)"
        );
        assert!(endless(b"\0", Limits::default(), true)
            .starts_with("endless.swf:1: the line is longer than 65536 bytes"));
        // Job lines without end: stopped at the job limit, lenient or not.
        let job = b"1 0 5 100 4 -1 -1 4 200 -1 1 3 2 -1 1 -1 -1 -1\n";
        assert_eq!(
            endless(job, small, false),
            "endless.swf:5001: the trace has more than 5000 job lines, the limit \
             (--max-jobs raises it)"
        );
        assert!(endless(b"junk\n", small, true).starts_with("endless.swf:5001: "));
        // Blank lines without end hold nothing, but end at the byte limit.
        assert_eq!(
            endless(b"\n", small, false),
            "endless.swf:1048577: the trace is longer than 1048576 bytes (uncompressed), the \
             limit (--max-trace-bytes raises it)"
        );
        // Header comments without end: they are kept, so they are bounded too.
        assert_eq!(
            endless(b"; note\n", small, false),
            "endless.swf:683: the header comments (lines starting with `;`) exceed 4096 \
             bytes, the limit"
        );
    }

    #[test]
    fn swf_limits_admit_a_trace_up_to_them() {
        let text = "; MaxProcs: 4\n1 0 5 100 4 -1 -1 4 200 -1 1 3 2 -1 1 -1 -1 -1\n\
                    2 0 5 100 4 -1 -1 4 200 -1 1 3 2 -1 1 -1 -1 -1";
        let exact = Limits {
            max_line_bytes: 46,
            max_jobs: 2,
            max_bytes: text.len() as u64,
            max_header_bytes: 13,
        };
        let read =
            |limits| Trace::from_reader(SwfReader::new(text.as_bytes(), "t.swf").limits(limits));
        assert_eq!(read(exact).unwrap().records.len(), 2);
        let err = |limits| read(limits).unwrap_err().to_string();
        assert!(err(Limits {
            max_line_bytes: 45,
            ..exact
        })
        .starts_with("t.swf:2: the line is longer than 45 bytes"));
        assert!(err(Limits {
            max_jobs: 1,
            ..exact
        })
        .starts_with("t.swf:3: the trace has more than 1 job lines"));
        assert!(err(Limits {
            max_bytes: exact.max_bytes - 1,
            ..exact
        })
        .starts_with("t.swf:3: the trace is longer than"));
        assert!(err(Limits {
            max_header_bytes: 12,
            ..exact
        })
        .starts_with("t.swf:1: the header comments"));
    }

    #[test]
    fn writer_round_trips() {
        let t = Trace::parse(SAMPLE, "s", false).unwrap();
        let mut w = SwfWriter::new(Vec::new(), &t.header.lines).unwrap();
        for r in &t.records {
            w.write(r).unwrap();
        }
        let text = String::from_utf8(w.finish().unwrap()).unwrap();
        let again = Trace::parse(&text, "again", false).unwrap();
        assert_eq!(again.records, t.records);
        assert_eq!(again.header, t.header);
    }
}
