//! The attempt directory `root/<job>.<attempt>/`: the only channel between the daemon and a
//! supervisor that outlives it. Everything the executor needs after a restart is in files here:
//!
//! | file             | written by | when                         | content                          |
//! |------------------|------------|------------------------------|----------------------------------|
//! | `spec.json`      | executor   | before spawning supervisor   | versioned [`LaunchSpec`]         |
//! | `cgroup`         | executor   | before spawning supervisor   | the attempt's cgroup v2 path     |
//! | `supervisor.log` | (stderr)   | while the supervisor runs    | the supervisor's own complaints  |
//! | `supervisor.pid` | supervisor | first thing, signals ready   | its pid                          |
//! | `job.json`       | supervisor | right after spawning the job | pgid + start time of the leader  |
//! | `cancel`         | executor   | before signalling a cancel   | request time                     |
//! | `suspended`      | executor   | while suspended              | request time                     |
//! | `status.json`    | supervisor | once, when the job ended     | versioned [`Outcome`]            |
//!
//! Files that others read while they may be rewritten are replaced atomically (tmp + rename), so
//! a reader sees the old or the new content, never half of one.

use crate::error::ExecError;
use crate::spec::{LaunchSpec, Outcome};
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

pub(crate) const SPEC: &str = "spec.json";
pub(crate) const STATUS: &str = "status.json";
pub(crate) const SUPERVISOR_PID: &str = "supervisor.pid";
pub(crate) const SUPERVISOR_LOG: &str = "supervisor.log";
pub(crate) const JOB: &str = "job.json";
pub(crate) const CANCEL: &str = "cancel";
pub(crate) const SUSPENDED: &str = "suspended";
pub(crate) const CGROUP: &str = "cgroup";

/// Format version of `spec.json`, `job.json` and `status.json`. A restarted (maybe upgraded)
/// daemon adopts attempts whose supervisor is an older binary: BUMP THIS on any incompatible
/// change to [`LaunchSpec`], [`Outcome`] or [`JobProcess`], and keep reading the old version.
pub(crate) const FORMAT_VERSION: u32 = 1;

/// The directory name of an attempt: `<job>.<attempt>`.
pub(crate) fn attempt_dir_name(job: u64, attempt: u32) -> String {
    format!("{job}.{attempt}")
}

/// The inverse of [`attempt_dir_name`]; None for anything else found under the root.
pub(crate) fn parse_attempt_dir_name(name: &str) -> Option<(u64, u32)> {
    let (job, attempt) = name.split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(job) || !digits(attempt) {
        return None;
    }
    Some((job.parse().ok()?, attempt.parse().ok()?))
}

/// The job's process group, as the supervisor recorded it right after the spawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct JobProcess {
    /// The group id, which is also the leader's pid.
    pub pgid: i32,
    /// The leader's start time in clock ticks since boot (`/proc/<pid>/stat` field 22): with the
    /// pid it identifies the process across pid reuse. None where there is no /proc.
    pub start_ticks: Option<u64>,
    /// Unix seconds of the spawn.
    pub started_at: i64,
}

#[derive(Serialize, Deserialize)]
struct Versioned<T> {
    version: u32,
    #[serde(flatten)]
    body: T,
}

#[derive(Deserialize)]
struct VersionOnly {
    version: u32,
}

#[derive(Serialize, Deserialize)]
struct SpecBody {
    spec: LaunchSpec,
}

#[derive(Serialize, Deserialize)]
struct StatusBody {
    outcome: Outcome,
}

#[derive(Serialize, Deserialize)]
struct JobBody {
    job: JobProcess,
}

/// One attempt's directory, with the identity every error message needs.
#[derive(Clone, Debug)]
pub(crate) struct AttemptDir {
    pub job: u64,
    pub attempt: u32,
    pub path: PathBuf,
}

impl AttemptDir {
    pub fn new(root: &Path, job: u64, attempt: u32) -> AttemptDir {
        AttemptDir {
            job,
            attempt,
            path: root.join(attempt_dir_name(job, attempt)),
        }
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    pub fn has(&self, name: &str) -> bool {
        self.file(name).exists()
    }

    pub fn io_error(&self, path: PathBuf, source: io::Error) -> ExecError {
        ExecError::Io {
            job: self.job,
            attempt: self.attempt,
            path,
            source,
        }
    }

    pub fn not_found(&self) -> ExecError {
        ExecError::NotFound {
            job: self.job,
            attempt: self.attempt,
            dir: self.path.clone(),
        }
    }

    pub fn lost(&self) -> ExecError {
        ExecError::Lost {
            job: self.job,
            attempt: self.attempt,
            dir: self.path.clone(),
        }
    }

    /// Writes `name` atomically; `durable` adds the fsyncs that make it survive a machine crash.
    pub fn write(&self, name: &str, bytes: &[u8], durable: bool) -> Result<(), ExecError> {
        let path = self.file(name);
        write_atomic(&path, bytes, durable).map_err(|e| self.io_error(path, e))
    }

    fn write_json<T: Serialize>(
        &self,
        name: &str,
        body: T,
        durable: bool,
    ) -> Result<(), ExecError> {
        let versioned = Versioned {
            version: FORMAT_VERSION,
            body,
        };
        let path = self.file(name);
        let mut bytes = serde_json::to_vec_pretty(&versioned).map_err(|e| ExecError::Corrupt {
            job: self.job,
            attempt: self.attempt,
            path: path.clone(),
            source: e,
        })?;
        bytes.push(b'\n');
        self.write(name, &bytes, durable)
    }

    /// None when the file does not exist (yet).
    fn read_json<T: for<'de> Deserialize<'de>>(&self, name: &str) -> Result<Option<T>, ExecError> {
        let path = self.file(name);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.io_error(path, e)),
        };
        let corrupt = |source| ExecError::Corrupt {
            job: self.job,
            attempt: self.attempt,
            path: path.clone(),
            source,
        };
        let version: VersionOnly = serde_json::from_slice(&bytes).map_err(corrupt)?;
        if version.version != FORMAT_VERSION {
            return Err(ExecError::Version {
                job: self.job,
                attempt: self.attempt,
                path,
                found: version.version,
                supported: FORMAT_VERSION,
            });
        }
        let versioned: Versioned<T> = serde_json::from_slice(&bytes).map_err(corrupt)?;
        Ok(Some(versioned.body))
    }

    /// Not durable: the spec matters only while the supervisor lives, and no supervisor survives
    /// a machine crash.
    pub fn write_spec(&self, spec: &LaunchSpec) -> Result<(), ExecError> {
        self.write_json(SPEC, SpecBody { spec: spec.clone() }, false)
    }

    pub fn read_spec(&self) -> Result<LaunchSpec, ExecError> {
        match self.read_json::<SpecBody>(SPEC)? {
            Some(body) => Ok(body.spec),
            None => Err(self.io_error(
                self.file(SPEC),
                io::Error::new(io::ErrorKind::NotFound, "no launch spec"),
            )),
        }
    }

    /// Durable: the outcome is the one thing the daemon must never miss.
    pub fn write_status(&self, outcome: &Outcome) -> Result<(), ExecError> {
        self.write_json(
            STATUS,
            StatusBody {
                outcome: outcome.clone(),
            },
            true,
        )
    }

    pub fn read_status(&self) -> Result<Option<Outcome>, ExecError> {
        Ok(self.read_json::<StatusBody>(STATUS)?.map(|b| b.outcome))
    }

    pub fn write_job(&self, job: JobProcess) -> Result<(), ExecError> {
        self.write_json(JOB, JobBody { job }, false)
    }

    pub fn read_job(&self) -> Result<Option<JobProcess>, ExecError> {
        Ok(self.read_json::<JobBody>(JOB)?.map(|b| b.job))
    }

    /// The cgroup the attempt is confined in, None when it runs without one (the session
    /// sweep, or an attempt launched before cgroups were used).
    pub fn read_cgroup(&self) -> Result<Option<crate::cgroup::Cgroup>, ExecError> {
        let path = self.file(CGROUP);
        match fs::read_to_string(&path) {
            Ok(text) if text.trim().is_empty() => Ok(None),
            Ok(text) => Ok(Some(crate::cgroup::Cgroup::new(Path::new(
                text.trim_end_matches('\n'),
            )))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io_error(path, e)),
        }
    }

    /// The supervisor's pid, None when not (yet) written or not a plausible pid: a corrupt 0 or
    /// -1 must never reach kill(2), where they mean "my group" and "everyone".
    pub fn read_supervisor_pid(&self) -> Result<Option<i32>, ExecError> {
        let path = self.file(SUPERVISOR_PID);
        match fs::read_to_string(&path) {
            Ok(text) => Ok(text.trim().parse::<i32>().ok().filter(|pid| *pid > 1)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io_error(path, e)),
        }
    }

    /// True when `pid` is alive and is the supervisor of this directory (its command line
    /// names the directory), so a recycled pid is not mistaken for it.
    pub fn supervisor_alive(&self, pid: i32) -> bool {
        process_names_dir(pid, &self.path)
    }

    /// True when the job's leader still runs: same pid and same start time as recorded.
    pub fn job_leader_alive(&self, job: &JobProcess) -> bool {
        match (proc_stat(job.pgid), job.start_ticks) {
            (Some(stat), Some(ticks)) => stat.start_ticks == ticks && stat.state != 'Z',
            _ => false,
        }
    }
}

/// Writes via a temporary file and a rename, so readers never see a partial file.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    // 0600 whatever the umask: spec.json holds the job's environment.
    let mut file = {
        use std::os::unix::fs::OpenOptionsExt;
        fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?
    };
    file.write_all(bytes)?;
    if durable {
        file.sync_all()?;
    }
    drop(file);
    fs::rename(&tmp, path)?;
    if durable {
        fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// The fields of `/proc/<pid>/stat` the executor uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ProcStat {
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
    pub start_ticks: u64,
}

/// Parses `/proc/<pid>/stat`; the command name may hold spaces and parentheses, so fields are
/// counted from the last `)`.
pub(crate) fn parse_proc_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3 of the man page, ppid 4, pgrp 5, starttime 22.
    Some(ProcStat {
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start_ticks: fields.get(19)?.parse().ok()?,
    })
}

pub(crate) fn proc_stat(pid: i32) -> Option<ProcStat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_proc_stat(&text)
}

/// Whether one of the NUL-separated arguments in `cmdline` is exactly `dir`.
pub(crate) fn cmdline_names_dir(cmdline: &[u8], dir: &Path) -> bool {
    let dir = dir.as_os_str().as_bytes();
    cmdline.split(|b| *b == 0).any(|arg| arg == dir)
}

fn process_names_dir(pid: i32, dir: &Path) -> bool {
    if pid <= 1 {
        return false;
    }
    match fs::read(format!("/proc/{pid}/cmdline")) {
        // A zombie has an empty command line: it is not alive for our purposes.
        Ok(cmdline) => cmdline_names_dir(&cmdline, dir),
        Err(_) if !Path::new("/proc/self").exists() => {
            // No /proc: fall back to plain existence and accept the pid-reuse risk.
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::tests::sample_spec;

    #[test]
    fn attempt_dir_names_round_trip() {
        let cases = [
            (0, 0, "0.0"),
            (42, 3, "42.3"),
            (u64::MAX, u32::MAX, "18446744073709551615.4294967295"),
        ];
        for (job, attempt, want) in cases {
            assert_eq!(attempt_dir_name(job, attempt), want);
            assert_eq!(parse_attempt_dir_name(want), Some((job, attempt)), "{want}");
        }
        for bad in [
            "", "1", "1.", ".1", "a.1", "1.b", "1.2.3", "+1.2", "1.-2", ".1.2.tmp",
        ] {
            assert_eq!(parse_attempt_dir_name(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn files_round_trip_with_a_version() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = AttemptDir::new(tmp.path(), 42, 3);
        fs::create_dir(&dir.path).expect("mkdir");
        assert_eq!(dir.read_status().expect("read"), None);

        let spec = sample_spec();
        dir.write_spec(&spec).expect("write spec");
        assert_eq!(dir.read_spec().expect("read spec"), spec);

        let outcome = Outcome::failed(5, 6, "no such program: foo".into());
        dir.write_status(&outcome).expect("write status");
        assert_eq!(dir.read_status().expect("read"), Some(outcome));
        let text = fs::read_to_string(dir.file(STATUS)).expect("read text");
        assert!(text.contains("\"version\": 1"), "{text}");

        let job = JobProcess {
            pgid: 1234,
            start_ticks: Some(99),
            started_at: 5,
        };
        dir.write_job(job).expect("write job");
        assert_eq!(dir.read_job().expect("read job"), Some(job));

        // No temporary files are left behind.
        let names: Vec<_> = fs::read_dir(&dir.path)
            .expect("ls")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names.len(), 3, "{names:?}");
    }

    #[test]
    fn other_versions_and_garbage_are_errors_not_panics() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = AttemptDir::new(tmp.path(), 1, 0);
        fs::create_dir(&dir.path).expect("mkdir");
        fs::write(dir.file(STATUS), br#"{"version": 99, "outcome": {}}"#).expect("write");
        assert!(matches!(
            dir.read_status(),
            Err(ExecError::Version { found: 99, .. })
        ));
        fs::write(dir.file(STATUS), b"{not json").expect("write");
        let err = dir.read_status().expect_err("garbage");
        assert!(err.to_string().contains("status.json"), "{err}");
    }

    #[test]
    fn supervisor_pid_rejects_implausible_values() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = AttemptDir::new(tmp.path(), 1, 0);
        fs::create_dir(&dir.path).expect("mkdir");
        for (text, want) in [
            ("1234\n", Some(1234)),
            ("0", None),
            ("-1", None),
            ("1", None),
            ("x", None),
        ] {
            fs::write(dir.file(SUPERVISOR_PID), text).expect("write");
            assert_eq!(dir.read_supervisor_pid().expect("read"), want, "{text:?}");
        }
    }

    #[test]
    fn proc_stat_parses_names_with_spaces_and_parentheses() {
        let line =
            "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 98765 1000 10";
        assert_eq!(
            parse_proc_stat(line),
            Some(ProcStat {
                state: 'S',
                ppid: 1,
                pgrp: 4242,
                start_ticks: 98765
            })
        );
        assert_eq!(parse_proc_stat("garbage"), None);
        let own = proc_stat(i32::try_from(std::process::id()).expect("pid fits"));
        let group = nix::unistd::getpgrp().as_raw();
        assert!(
            own.is_some_and(|s| s.pgrp == group && s.start_ticks > 0),
            "{own:?}"
        );
    }

    #[test]
    fn cmdline_match_is_exact_per_argument() {
        let dir = Path::new("/var/lib/foresight/jobs/42.3");
        let cmd = b"/usr/bin/foresight\0supervise\0/var/lib/foresight/jobs/42.3\0";
        assert!(cmdline_names_dir(cmd, dir));
        let other = b"/usr/bin/foresight\0supervise\0/var/lib/foresight/jobs/42.30\0";
        assert!(!cmdline_names_dir(other, dir));
        assert!(!cmdline_names_dir(b"", dir));
    }
}
