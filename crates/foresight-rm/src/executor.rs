//! [`LocalExecutor`]: the daemon's side of the local cluster. It runs each attempt as a real
//! process group under a detached supervisor (`foresight supervise DIR`, see
//! [`crate::supervise`]), so jobs keep running, and their walltime keeps being enforced, while
//! the daemon is down; a restarted daemon calls [`LocalExecutor::adopt`] to pick them up again.
//!
//! Ends are reported on one channel of [`Finished`] events. While the daemon lives, it awaits
//! each supervisor it started (reaping it) and reads the outcome the moment it exits; adopted
//! supervisors are not its children, so their status files are polled every 200 ms instead.
//!
//! Each attempt is confined as [`Confinement`] asks (see `cgroup`): in a cgroup v2 of its own
//! under a parent made for this executor, or by the supervisor's session sweep alone. The
//! attempt's cgroup path is in its directory (`cgroup`), so that a restarted daemon, with
//! whatever setting, still kills exactly that attempt's processes.
//!
//! The supervisor is spawned in a process group of its own with null stdin and its stderr in
//! `supervisor.log`, so neither a SIGKILL of the daemon's process group nor a closed terminal
//! reaches it. (A service manager that kills a whole cgroup, like systemd's default
//! `KillMode=control-group`, still does: run the daemon with `KillMode=process`.)

use crate::cgroup::{Cgroup, Confined, Confinement};
use crate::clock::unix_seconds;
use crate::error::ExecError;
use crate::layout::{
    parse_attempt_dir_name, AttemptDir, CANCEL, CGROUP, STATUS, SUPERVISOR_LOG, SUSPENDED,
};
use crate::spec::{Adoption, Finished, LaunchSpec, Outcome};
use crate::supervisor::Handshake;
use nix::errno::Errno;
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use std::collections::HashSet;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;

/// How long `launch` waits for the supervisor to say whether the job started. It normally
/// answers within milliseconds; past this it is considered hung and killed.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often an adopted attempt's status file is looked at.
const ADOPT_POLL: Duration = Duration::from_millis(200);

/// Runs jobs as local process groups under detached supervisors; see the module docs.
///
/// Cheap to clone (all clones share one state and one event channel); `Send + Sync`.
#[derive(Clone)]
pub struct LocalExecutor {
    inner: Arc<Inner>,
}

struct Inner {
    /// Absolute, so the directory named on a supervisor's command line (which adoption matches)
    /// does not depend on the daemon's working directory.
    root: PathBuf,
    /// Program and leading arguments; the attempt directory is appended.
    supervisor: Vec<OsString>,
    events: mpsc::UnboundedSender<Finished>,
    /// Where watcher tasks run: `adopt` is synchronous but must start one.
    runtime: tokio::runtime::Handle,
    /// Attempts with a watcher task in this process, so each gets exactly one Finished event.
    watched: Mutex<HashSet<(u64, u32)>>,
    /// How attempts launched from now on are confined.
    confined: Confined,
}

/// How long a killed cgroup may take to empty before it is given up on.
const CGROUP_KILL_TIMEOUT: Duration = Duration::from_secs(10);

impl LocalExecutor {
    /// An executor keeping attempt directories under `root` (created if missing) and starting
    /// supervisors as `supervisor... <attempt dir>`, e.g. `[current_exe, "supervise"]`; the
    /// same command with `--exec` before the directory must run [`crate::exec_job`].
    /// Jobs are confined in cgroups where cgroup v2 is writable ([`Confinement::Auto`]).
    /// Must be called inside a tokio runtime, where the watcher tasks will run.
    pub fn new(
        root: PathBuf,
        supervisor: Vec<OsString>,
    ) -> Result<(LocalExecutor, mpsc::UnboundedReceiver<Finished>), ExecError> {
        LocalExecutor::confined(root, supervisor, Confinement::Auto)
    }

    /// [`LocalExecutor::new`] with the confinement `wanted`; [`ExecError::Confinement`] when
    /// it is [`Confinement::Cgroup`] and this host has no writable cgroup v2 hierarchy.
    pub fn confined(
        root: PathBuf,
        supervisor: Vec<OsString>,
        wanted: Confinement,
    ) -> Result<(LocalExecutor, mpsc::UnboundedReceiver<Finished>), ExecError> {
        if supervisor.is_empty() {
            return Err(ExecError::NoSupervisor);
        }
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| ExecError::NoRuntime)?;
        let root_error = |source| ExecError::Root {
            path: root.clone(),
            source,
        };
        fs::create_dir_all(&root).map_err(root_error)?;
        let absolute = fs::canonicalize(&root).map_err(root_error)?;
        let confined = crate::cgroup::resolve(wanted, &absolute)
            .map_err(|reason| ExecError::Confinement { wanted, reason })?;
        let (events, receiver) = mpsc::unbounded_channel();
        let inner = Inner {
            root: absolute,
            supervisor,
            events,
            runtime,
            watched: Mutex::new(HashSet::new()),
            confined,
        };
        Ok((
            LocalExecutor {
                inner: Arc::new(inner),
            },
            receiver,
        ))
    }

    /// The (absolute) directory holding one directory per attempt.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// How the attempts this executor launches are confined, for the daemon's start log.
    pub fn confinement(&self) -> &Confined {
        &self.inner.confined
    }

    /// The directory of one attempt, `root/<job>.<attempt>`, whether or not it exists.
    pub fn job_dir(&self, job: u64, attempt: u32) -> PathBuf {
        self.dir(job, attempt).path
    }

    /// Every attempt that has a directory under the root, in (job, attempt) order: what a
    /// restarted daemon may sweep with [`LocalExecutor::adopt`].
    pub fn attempts(&self) -> Result<Vec<(u64, u32)>, ExecError> {
        let root_error = |source| ExecError::Root {
            path: self.inner.root.clone(),
            source,
        };
        let mut found = Vec::new();
        for entry in fs::read_dir(&self.inner.root).map_err(root_error)? {
            let entry = entry.map_err(root_error)?;
            if let Some(key) = entry.file_name().to_str().and_then(parse_attempt_dir_name) {
                found.push(key);
            }
        }
        found.sort_unstable();
        Ok(found)
    }

    /// Starts one attempt and returns its start time (unix seconds) once the job process has
    /// been spawned. Its end arrives later as a [`Finished`] event.
    ///
    /// Errors leave no running process behind. A command that cannot be started (missing
    /// program, bad working directory, unwritable output file) is [`ExecError::Start`] naming
    /// the cause, e.g. `no such program: foo`; the same error is recorded as the attempt's
    /// outcome, and no event is sent for it. An attempt can be launched once: a requeue is a
    /// launch of `attempt + 1`.
    #[tracing::instrument(skip(self, spec), fields(job = spec.job, attempt = spec.attempt))]
    pub async fn launch(&self, spec: &LaunchSpec) -> Result<i64, ExecError> {
        validate(spec)?;
        let dir = self.dir(spec.job, spec.attempt);
        match fs::create_dir(&dir.path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(ExecError::AlreadyLaunched {
                    job: spec.job,
                    attempt: spec.attempt,
                    dir: dir.path,
                })
            }
            Err(e) => return Err(dir.io_error(dir.path.clone(), e)),
        }
        dir.write_spec(spec)?;
        if let Confined::Cgroup(parent) = &self.inner.confined {
            let cgroup = parent.join(crate::layout::attempt_dir_name(spec.job, spec.attempt));
            let mut line = cgroup.into_os_string().into_vec();
            line.push(b'\n');
            dir.write(CGROUP, &line, false)?;
        }
        let log_path = dir.file(SUPERVISOR_LOG);
        let log = fs::File::create(&log_path).map_err(|e| dir.io_error(log_path.clone(), e))?;

        let program = self.supervisor_program();
        let mut command = tokio::process::Command::new(&self.inner.supervisor[0]);
        command
            .args(&self.inner.supervisor[1..])
            .arg(&dir.path)
            .current_dir(&dir.path)
            // The service's environment (its tokens, database passwords) is not the
            // supervisor's business, and the job gets its own (`supervisor::job_environment`).
            .env_clear()
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(false);
        let mut child = command
            .spawn()
            .map_err(|source| ExecError::SupervisorSpawn {
                job: spec.job,
                attempt: spec.attempt,
                program: program.clone(),
                source,
            })?;
        // Watched from here on; the guard forgets it again on every path that does not hand
        // the supervisor over to a watcher task, including this future being dropped.
        let mut watch = WatchGuard::new(&self.inner, (spec.job, spec.attempt));
        let failed = |detail: String| ExecError::SupervisorFailed {
            job: spec.job,
            attempt: spec.attempt,
            program: program.clone(),
            detail,
            log: log_path.clone(),
        };

        let mut line = String::new();
        let read = match child.stdout.take() {
            Some(stdout) => {
                let mut reader = BufReader::new(stdout);
                tokio::time::timeout(HANDSHAKE_TIMEOUT, reader.read_line(&mut line)).await
            }
            None => Ok(Ok(0)),
        };
        let handshake = match read {
            Ok(Ok(_)) => serde_json::from_str::<Handshake>(line.trim()).ok(),
            Ok(Err(e)) => {
                self.abandon(&dir, child);
                return Err(failed(format!("cannot read its report: {e}")));
            }
            Err(_elapsed) => {
                self.abandon(&dir, child);
                return Err(failed(format!(
                    "no report within {} s; killed it",
                    HANDSHAKE_TIMEOUT.as_secs()
                )));
            }
        };
        match handshake {
            Some(Handshake::Started { started_at, pgid }) => {
                watch.disarm();
                tracing::info!(pgid, started_at, "job started");
                let inner = Arc::clone(&self.inner);
                self.inner.runtime.spawn(watch_launched(inner, dir, child));
                Ok(started_at)
            }
            Some(Handshake::Failed { error }) => {
                self.reap(child);
                if dir.has(STATUS) {
                    Err(ExecError::Start {
                        job: spec.job,
                        attempt: spec.attempt,
                        program: spec.command.first().cloned().unwrap_or_default(),
                        error,
                    })
                } else {
                    Err(failed(error))
                }
            }
            None => {
                // Mostly EOF: it died before reporting. Its exit status says more.
                let status = tokio::time::timeout(Duration::from_secs(1), child.wait()).await;
                let detail = match status {
                    Ok(Ok(status)) if line.is_empty() => format!("it exited with {status}"),
                    _ if line.is_empty() => "it closed its output without a report".to_string(),
                    _ => format!("it reported {:?}", line.trim()),
                };
                self.abandon(&dir, child);
                Err(failed(detail))
            }
        }
    }

    /// Cancels an attempt: SIGTERM to its whole process group, SIGKILL after its grace period;
    /// the outcome has `cancelled = true`. The request is recorded in the attempt directory
    /// before anything is signalled, so it holds whatever the job then dies of. Cancelling an
    /// attempt that has already ended does nothing (its outcome stays as recorded).
    #[tracing::instrument(skip(self))]
    pub fn cancel(&self, job: u64, attempt: u32) -> Result<(), ExecError> {
        let dir = self.existing_dir(job, attempt)?;
        if dir.has(STATUS) {
            return Ok(());
        }
        dir.write(CANCEL, format!("{}\n", unix_seconds()).as_bytes(), false)?;
        match self.live_supervisor(&dir)? {
            Some(pid) => self.signal_supervisor(&dir, pid, Signal::SIGUSR1),
            None if dir.has(STATUS) => Ok(()),
            None => Err(dir.lost()),
        }
    }

    /// Stops every process of the attempt's group (SIGSTOP). Its walltime clock stops too. Fails with [`ExecError::Finished`] when it has already ended.
    #[tracing::instrument(skip(self))]
    pub fn suspend(&self, job: u64, attempt: u32) -> Result<(), ExecError> {
        self.stop_or_continue(job, attempt, true)
    }

    /// Continues a suspended attempt (SIGCONT to its group) and restarts its walltime clock.
    /// Resuming an attempt that is not suspended is harmless.
    #[tracing::instrument(skip(self))]
    pub fn resume(&self, job: u64, attempt: u32) -> Result<(), ExecError> {
        self.stop_or_continue(job, attempt, false)
    }

    /// The recorded outcome, None while the attempt has not ended.
    pub fn outcome(&self, job: u64, attempt: u32) -> Result<Option<Outcome>, ExecError> {
        self.existing_dir(job, attempt)?.read_status()
    }

    /// Takes an attempt back after a daemon restart. [`Adoption::Running`] attempts will produce
    /// exactly one [`Finished`] event on this executor's channel; [`Adoption::Finished`] ones
    /// ended meanwhile and produce none; [`Adoption::Lost`] means no outcome and no live
    /// supervisor (including an attempt this executor has never seen). Idempotent.
    #[tracing::instrument(skip(self))]
    pub fn adopt(&self, job: u64, attempt: u32) -> Result<Adoption, ExecError> {
        let key = (job, attempt);
        if self.inner.is_watched(key) {
            return Ok(Adoption::Running);
        }
        let dir = self.dir(job, attempt);
        if !dir.path.is_dir() {
            return Ok(Adoption::Lost);
        }
        if let Some(outcome) = dir.read_status()? {
            return Ok(Adoption::Finished(outcome));
        }
        let Some(pid) = self.live_supervisor(&dir)? else {
            // It may have recorded its outcome between our two looks.
            return Ok(match dir.read_status()? {
                Some(outcome) => Adoption::Finished(outcome),
                None => {
                    // The supervisor died with the daemon: its job may still run, unpoliced.
                    // Kill it before the daemon launches the attempt again, or it would run
                    // twice.
                    self.inner.kill_orphaned_job(&dir);
                    Adoption::Lost
                }
            });
        };
        if self.inner.watch(key) {
            let inner = Arc::clone(&self.inner);
            self.inner.runtime.spawn(watch_adopted(inner, dir, pid));
        }
        Ok(Adoption::Running)
    }

    fn dir(&self, job: u64, attempt: u32) -> AttemptDir {
        AttemptDir::new(&self.inner.root, job, attempt)
    }

    fn existing_dir(&self, job: u64, attempt: u32) -> Result<AttemptDir, ExecError> {
        let dir = self.dir(job, attempt);
        if dir.path.is_dir() {
            Ok(dir)
        } else {
            Err(dir.not_found())
        }
    }

    fn supervisor_program(&self) -> String {
        self.inner.supervisor[0].to_string_lossy().into_owned()
    }

    /// The supervisor's pid if it is alive and really supervises this directory.
    fn live_supervisor(&self, dir: &AttemptDir) -> Result<Option<i32>, ExecError> {
        Ok(dir
            .read_supervisor_pid()?
            .filter(|pid| dir.supervisor_alive(*pid)))
    }

    fn signal_supervisor(
        &self,
        dir: &AttemptDir,
        pid: i32,
        signal: Signal,
    ) -> Result<(), ExecError> {
        match kill(Pid::from_raw(pid), signal) {
            Ok(()) => Ok(()),
            // Exited between the liveness check and now: it has recorded (or is recording) an
            // outcome, which is all a wake-up could have led to.
            Err(Errno::ESRCH) => Ok(()),
            Err(source) => Err(ExecError::Signal {
                job: dir.job,
                attempt: dir.attempt,
                signal,
                target: format!("supervisor {pid}"),
                source,
            }),
        }
    }

    fn stop_or_continue(&self, job: u64, attempt: u32, stop: bool) -> Result<(), ExecError> {
        let dir = self.existing_dir(job, attempt)?;
        let finished = || ExecError::Finished { job, attempt };
        if dir.has(STATUS) {
            return Err(finished());
        }
        let Some(pid) = self.live_supervisor(&dir)? else {
            return Err(if dir.has(STATUS) {
                finished()
            } else {
                dir.lost()
            });
        };
        let Some(process) = dir.read_job()? else {
            return Err(dir.io_error(
                dir.file(crate::layout::JOB),
                io::Error::new(
                    io::ErrorKind::NotFound,
                    "the supervisor recorded no job process",
                ),
            ));
        };
        // Marker first: the supervisor reads it to stop or restart the walltime clock.
        let signal = if stop {
            dir.write(SUSPENDED, format!("{}\n", unix_seconds()).as_bytes(), false)?;
            Signal::SIGSTOP
        } else {
            let marker = dir.file(SUSPENDED);
            match fs::remove_file(&marker) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(dir.io_error(marker, e)),
            }
            Signal::SIGCONT
        };
        match killpg(Pid::from_raw(process.pgid), signal) {
            Ok(()) => {}
            // The whole group is gone: the job ended and its outcome is being recorded.
            Err(Errno::ESRCH) => return Err(finished()),
            Err(source) => {
                return Err(ExecError::Signal {
                    job,
                    attempt,
                    signal,
                    target: format!("process group {}", process.pgid),
                    source,
                })
            }
        }
        self.signal_supervisor(&dir, pid, Signal::SIGUSR2)
    }

    /// Gives up on a supervisor that failed its handshake: kills it and, if it got as far as
    /// starting the job, the job's group, so a failed launch leaves nothing running.
    fn abandon(&self, dir: &AttemptDir, mut child: tokio::process::Child) {
        let _ = child.start_kill();
        if let Ok(Some(process)) = dir.read_job() {
            if dir.job_leader_alive(&process) {
                let _ = killpg(Pid::from_raw(process.pgid), Signal::SIGKILL);
            }
        }
        self.inner.kill_cgroup(dir);
        self.reap(child);
    }

    fn reap(&self, mut child: tokio::process::Child) {
        self.inner.runtime.spawn(async move {
            let _ = child.wait().await;
        });
    }
}

impl std::fmt::Debug for LocalExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalExecutor")
            .field("root", &self.inner.root)
            .field("supervisor", &self.inner.supervisor)
            .finish_non_exhaustive()
    }
}

impl Drop for Inner {
    /// Removes this executor's parent cgroup if no attempt's cgroup is left in it (one
    /// still running keeps it, for the next daemon).
    fn drop(&mut self) {
        if let Confined::Cgroup(parent) = &self.confined {
            let _ = fs::remove_dir(parent);
        }
    }
}

impl Inner {
    /// Marks an attempt watched; false when it already was.
    fn watch(&self, key: (u64, u32)) -> bool {
        self.watched
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(key)
    }

    fn unwatch(&self, key: (u64, u32)) {
        self.watched
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(&key);
    }

    fn is_watched(&self, key: (u64, u32)) -> bool {
        self.watched
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .contains(&key)
    }

    /// Kills every process in the attempt's cgroup, if it has one, and removes the cgroup.
    /// True when there was one to kill.
    fn kill_cgroup(&self, dir: &AttemptDir) -> bool {
        let Some(cgroup) = dir.read_cgroup().ok().flatten().filter(Cgroup::exists) else {
            return false;
        };
        tracing::warn!(
            job = dir.job,
            attempt = dir.attempt,
            cgroup = %cgroup.path.display(),
            "killing the cgroup of an unsupervised attempt"
        );
        if !cgroup.kill_and_remove(CGROUP_KILL_TIMEOUT) {
            tracing::warn!(job = dir.job, attempt = dir.attempt, cgroup = %cgroup.path.display(),
                "the cgroup could not be emptied and removed");
        }
        true
    }

    /// Kills an attempt whose supervisor is gone: all of its cgroup, if it has one, and its
    /// process group if its leader is still the process the supervisor started (so the group
    /// id cannot be a stranger's).
    fn kill_orphaned_job(&self, dir: &AttemptDir) {
        self.kill_cgroup(dir);
        if let Some(process) = dir.read_job().ok().flatten() {
            if dir.job_leader_alive(&process) {
                tracing::warn!(
                    job = dir.job,
                    attempt = dir.attempt,
                    pgid = process.pgid,
                    "killing the orphaned process group of an unsupervised attempt"
                );
                let _ = killpg(Pid::from_raw(process.pgid), Signal::SIGKILL);
            }
        }
    }

    /// The attempt's outcome once its supervisor is gone. If the supervisor died without
    /// recording one (killed, out of memory), the job is unsupervised: kill it if its leader
    /// is still the process we started, and record that, so the daemon and a later `adopt`
    /// agree on how the attempt ended.
    fn settle(&self, dir: &AttemptDir, how: &str) -> Outcome {
        match dir.read_status() {
            Ok(Some(outcome)) => return outcome,
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(job = dir.job, attempt = dir.attempt, error = %e, "unreadable outcome");
                let now = unix_seconds();
                return Outcome::failed(now, now, e.to_string());
            }
        }
        let process = dir.read_job().ok().flatten();
        let mut error = format!(
            "the supervisor {how} without recording an outcome (see {})",
            dir.file(SUPERVISOR_LOG).display()
        );
        let mut killed = self.kill_cgroup(dir);
        if let Some(process) = process.filter(|p| dir.job_leader_alive(p)) {
            let _ = killpg(Pid::from_raw(process.pgid), Signal::SIGKILL);
            killed = true;
        }
        if killed {
            error.push_str("; the job was killed");
        }
        let now = unix_seconds();
        let started_at = process.map_or(now, |p| p.started_at);
        let outcome = Outcome::failed(started_at, now, error);
        if let Err(e) = dir.write_status(&outcome) {
            tracing::warn!(job = dir.job, attempt = dir.attempt, error = %e, "cannot record outcome");
        }
        outcome
    }

    fn finish(&self, dir: AttemptDir, outcome: Outcome) {
        tracing::info!(
            job = dir.job,
            attempt = dir.attempt,
            ?outcome,
            "job finished"
        );
        self.unwatch((dir.job, dir.attempt));
        // A closed channel means the daemon is shutting down; the outcome is on disk.
        let _ = self.events.send(Finished {
            job: dir.job,
            attempt: dir.attempt,
            outcome,
        });
    }
}

/// Waits for a supervisor this process started (reaping it), then reports the attempt's end.
async fn watch_launched(inner: Arc<Inner>, dir: AttemptDir, mut child: tokio::process::Child) {
    let how = match child.wait().await {
        Ok(status) => format!("exited with {status}"),
        Err(e) => format!("could not be waited for ({e})"),
    };
    let outcome = inner.settle(&dir, &how);
    inner.finish(dir, outcome);
}

/// Polls an adopted attempt (whose supervisor is not our child) until it has ended.
async fn watch_adopted(inner: Arc<Inner>, dir: AttemptDir, supervisor: i32) {
    let mut tick = tokio::time::interval(ADOPT_POLL);
    loop {
        tick.tick().await;
        if dir.has(STATUS) || !dir.supervisor_alive(supervisor) {
            break;
        }
    }
    let outcome = inner.settle(&dir, "died");
    inner.finish(dir, outcome);
}

/// Forgets a watched attempt on drop unless disarmed.
struct WatchGuard<'a> {
    inner: &'a Inner,
    key: (u64, u32),
    armed: bool,
}

impl<'a> WatchGuard<'a> {
    fn new(inner: &'a Inner, key: (u64, u32)) -> WatchGuard<'a> {
        inner.watch(key);
        WatchGuard {
            inner,
            key,
            armed: true,
        }
    }

    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for WatchGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.inner.unwatch(self.key);
        }
    }
}

/// Rejects what the supervisor could not pass to exec(2) or would misread.
fn validate(spec: &LaunchSpec) -> Result<(), ExecError> {
    let invalid = |reason: String| ExecError::InvalidSpec {
        job: spec.job,
        attempt: spec.attempt,
        reason,
    };
    let has_nul = |s: &[u8]| s.contains(&0);
    if spec.command.is_empty() {
        return Err(invalid("the command is empty".into()));
    }
    if let Some(arg) = spec.command.iter().find(|a| has_nul(a.as_bytes())) {
        return Err(invalid(format!(
            "command argument {arg:?} contains a NUL byte"
        )));
    }
    if !spec.cwd.is_absolute() {
        return Err(invalid(format!(
            "the working directory {} is not absolute",
            spec.cwd.display()
        )));
    }
    for (what, path) in [
        ("working directory", &spec.cwd),
        ("stdout", &spec.stdout),
        ("stderr", &spec.stderr),
    ] {
        if has_nul(path.as_os_str().as_bytes()) || path.as_os_str().is_empty() {
            return Err(invalid(format!(
                "the {what} path {path:?} is empty or contains a NUL byte"
            )));
        }
    }
    for (key, value) in &spec.env {
        if key.is_empty()
            || key.contains('=')
            || has_nul(key.as_bytes())
            || has_nul(value.as_bytes())
        {
            return Err(invalid(format!(
                "environment variable {key:?} is not a valid name=value pair"
            )));
        }
    }
    if has_nul(spec.cluster.as_bytes()) {
        return Err(invalid(format!(
            "cluster name {:?} contains a NUL byte",
            spec.cluster
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::tests::sample_spec;

    #[test]
    fn executor_is_send_sync_and_clone() {
        fn assert_traits<T: Send + Sync + Clone + 'static>() {}
        assert_traits::<LocalExecutor>();
    }

    #[test]
    fn invalid_specs_are_rejected_with_the_reason() {
        struct Case {
            name: &'static str,
            change: fn(&mut LaunchSpec),
            want: &'static str,
        }
        let cases = [
            Case {
                name: "empty command",
                change: |s| s.command.clear(),
                want: "command is empty",
            },
            Case {
                name: "nul in arg",
                change: |s| s.command.push("a\0b".into()),
                want: "NUL",
            },
            Case {
                name: "relative cwd",
                change: |s| s.cwd = "rel".into(),
                want: "not absolute",
            },
            Case {
                name: "empty stdout",
                change: |s| s.stdout = PathBuf::new(),
                want: "stdout",
            },
            Case {
                name: "bad env name",
                change: |s| s.env.push(("A=B".into(), "1".into())),
                want: "\"A=B\"",
            },
            Case {
                name: "empty env name",
                change: |s| s.env.push((String::new(), "1".into())),
                want: "environment",
            },
        ];
        assert!(validate(&sample_spec()).is_ok());
        for case in cases {
            let mut spec = sample_spec();
            (case.change)(&mut spec);
            let err = validate(&spec).expect_err(case.name).to_string();
            assert!(err.contains(case.want), "{}: {err}", case.name);
            assert!(err.contains("job 42 attempt 3"), "{}: {err}", case.name);
        }
    }

    #[tokio::test]
    async fn new_creates_the_root_and_lists_attempts() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("a/b");
        let (executor, _events) =
            LocalExecutor::new(root.clone(), vec!["true".into()]).expect("executor");
        assert!(root.is_dir());
        assert!(executor.root().is_absolute());
        assert_eq!(executor.job_dir(7, 1), executor.root().join("7.1"));
        for name in ["7.1", "3.0", "7.0", "junk", "8.x"] {
            fs::create_dir(executor.root().join(name)).expect("mkdir");
        }
        assert_eq!(
            executor.attempts().expect("list"),
            vec![(3, 0), (7, 0), (7, 1)]
        );
        assert_eq!(executor.adopt(9, 0).expect("adopt"), Adoption::Lost);
        assert!(matches!(
            executor.cancel(9, 0),
            Err(ExecError::NotFound { job: 9, .. })
        ));
        assert!(matches!(executor.outcome(3, 0), Ok(None)));
    }

    #[test]
    fn new_needs_a_runtime_and_a_supervisor() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let no_runtime = LocalExecutor::new(tmp.path().into(), vec!["x".into()]);
        assert!(matches!(no_runtime, Err(ExecError::NoRuntime)));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let _guard = runtime.enter();
        let empty = LocalExecutor::new(tmp.path().into(), Vec::new());
        assert!(matches!(empty, Err(ExecError::NoSupervisor)));
    }
}
