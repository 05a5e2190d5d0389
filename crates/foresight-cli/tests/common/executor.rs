//! The local executor against real processes, for the executor and confinement tests: a
//! scratch area, the executor with the real `foresight supervise`, a plain launch spec, and
//! what a test reads of live processes (`/proc/<pid>/stat`, pid files).
#![allow(dead_code)] // each test file uses a different part

use foresight_rm::tokio;
use foresight_rm::{Finished, LaunchSpec, LocalExecutor};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tempfile::TempDir;
use tokio::sync::mpsc::UnboundedReceiver;

/// A scratch area: `jobs/` is the executor root, `work/` the jobs' working directory.
pub struct Scratch {
    _tmp: TempDir,
    pub jobs: PathBuf,
    pub work: PathBuf,
}

pub fn scratch() -> Scratch {
    let tmp = tempfile::tempdir().unwrap();
    let jobs = tmp.path().join("jobs");
    let work = tmp.path().join("work");
    fs::create_dir(&work).unwrap();
    let work = fs::canonicalize(work).unwrap();
    Scratch {
        _tmp: tmp,
        jobs,
        work,
    }
}

pub fn executor(root: &Path) -> (LocalExecutor, UnboundedReceiver<Finished>) {
    LocalExecutor::new(
        root.to_path_buf(),
        vec![env!("CARGO_BIN_EXE_foresight").into(), "supervise".into()],
    )
    .unwrap()
}

/// Attempt 0 of `job` on processors 0 and 1 of cluster `local`, run in `work` with a 60 s
/// walltime, its output in `JOB.out` and `JOB.err`.
pub fn spec(job: u64, work: &Path, command: &[&str]) -> LaunchSpec {
    LaunchSpec {
        job,
        attempt: 0,
        cluster: "local".into(),
        processors: vec![0, 1],
        command: command.iter().map(|s| s.to_string()).collect(),
        env: Vec::new(),
        cwd: work.to_path_buf(),
        stdout: format!("{job}.out").into(),
        stderr: format!("{job}.err").into(),
        walltime_secs: 60,
        grace_secs: 1,
        unix_user: None,
        max_output_bytes: None,
        service_output: false,
    }
}

pub async fn next(events: &mut UnboundedReceiver<Finished>) -> Finished {
    tokio::time::timeout(Duration::from_secs(30), events.recv())
        .await
        .expect("a Finished event within 30 s")
        .expect("the channel is open")
}

/// Polls `path` until it holds a line; the jobs of these tests write pids this way.
pub async fn wait_for_line(path: &Path) -> String {
    for _ in 0..400 {
        if let Ok(text) = fs::read_to_string(path) {
            if text.ends_with('\n') {
                return text.trim().to_string();
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{} was never written", path.display());
}

/// The fields of `/proc/<pid>/stat` these tests look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
    pub session: i32,
}

/// `/proc/<pid>/stat` of a live process (`"self"` for this one); None when it is gone.
pub fn proc_stat(pid: &str) -> Option<ProcStat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// One line in the form of `/proc/<pid>/stat` (the command name may hold spaces and
/// parentheses: the fields start after the last `)`).
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(ProcStat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        session: f.get(3)?.parse().ok()?,
    })
}

/// Gone, or a zombie waiting for whoever inherited it.
pub fn is_dead(pid: &str) -> bool {
    proc_stat(pid).is_none_or(|s| s.state == 'Z')
}
