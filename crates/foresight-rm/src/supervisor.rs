//! The supervisor: `foresight supervise DIR`, one small process per attempt, started detached
//! by the executor. It spawns the job in its own process group, tells the executor (one JSON
//! line on stdout, read only at launch) whether that worked, then polices the job until it
//! ends: walltime (suspended time excluded), cancel requests, the final SIGKILL after the
//! grace period, and the exit status, which it writes to `status.json` before exiting.
//!
//! It keeps working when the daemon is gone, because the daemon talks to it only through files
//! in the attempt directory, plus signals that merely say "re-read them": SIGUSR1 (cancel) and
//! SIGUSR2 (suspend state changed). A 1 s tick re-reads them anyway, so a lost signal delays
//! an action by at most a second. SIGTERM to the supervisor ends the job like a cancel would
//! (but the outcome is not marked cancelled); SIGHUP is ignored.
//!
//! When the job's leader exits, whatever remains of its process group is SIGKILLed before the
//! leader is reaped (as Slurm ends a step when its batch script ends): the group id cannot
//! be recycled while the leader is a zombie, so that kill cannot hit a stranger.
//!
//! Processes that left the group (`setsid`, `setpgid`) are caught too: the supervisor is a
//! child subreaper (`PR_SET_CHILD_SUBREAPER`), so every orphan the job leaves behind becomes
//! the supervisor's child instead of init's, and once the leader is reaped the supervisor
//! kills and reaps all its remaining descendants (repeating while any is left, since a dying
//! process may fork). If the supervisor itself is SIGKILLed, the executor kills the job's
//! group instead (its descendants outside the group then escape).
//!
//! Where the attempt has a cgroup of its own ([`crate::cgroup`]), it is what catches every
//! escapee: it is killed whole at the end, and frozen while the job is suspended. A suspend
//! stops the job's group with SIGSTOP first and freezes the cgroup only once the group's
//! leader shows it has stopped, so the job's own processes read as stopped (`T`, as Slurm's
//! suspended jobs do) and whatever left the group is held by the freezer.

use crate::account::Account;
use crate::cgroup::Cgroup;
use crate::clock::unix_seconds;
use crate::layout::{
    parse_attempt_dir_name, proc_stat, AttemptDir, JobProcess, CANCEL, SUPERVISOR_PID, SUSPENDED,
};
use crate::spec::{LaunchSpec, Outcome};
use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::signal::unix::{signal, SignalKind};

/// How often the supervisor re-reads the control files even without a signal.
const TICK: Duration = Duration::from_secs(1);

/// How often a suspended job without a cgroup is checked for a SIGCONT it was sent by one of
/// its user's own processes (and stopped again): the most it can run while suspended.
const HELD_TICK: Duration = Duration::from_millis(100);

/// The one line the supervisor writes on its stdout, for the executor's `launch` to return.
/// Not persisted; supervisor and executor come from the same binary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Handshake {
    /// The job process is running.
    Started { pgid: i32, started_at: i64 },
    /// The job could not be started; `status.json` holds the same error when it could be written.
    Failed { error: String },
}

/// Runs one attempt under supervision: reads `DIR/spec.json`, starts the job, enforces its
/// walltime and cancel requests, and writes `DIR/status.json`. This is the body of the hidden
/// `foresight supervise DIR` command, which the local executor starts detached.
///
/// Returns 0 once an outcome is recorded, including for a job that could not start (that is the
/// job's failure, recorded in the outcome), and 1 when no outcome could be recorded.
pub fn supervise(dir: &Path) -> u8 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            fail_before_start(&format!("cannot build the supervisor runtime: {e}"));
            return 1;
        }
    };
    runtime.block_on(run(dir))
}

async fn run(path: &Path) -> u8 {
    // Handlers first: the executor may signal us as soon as supervisor.pid exists, and the
    // default action of SIGUSR1/SIGUSR2 is to die.
    let mut signals = match Signals::install() {
        Ok(signals) => signals,
        Err(e) => {
            fail_before_start(&format!("cannot install signal handlers: {e}"));
            return 1;
        }
    };
    let (job, attempt) = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(parse_attempt_dir_name)
        .unwrap_or((0, 0));
    let mut dir = AttemptDir {
        job,
        attempt,
        path: path.to_path_buf(),
    };
    if let Err(e) = dir.write(
        SUPERVISOR_PID,
        format!("{}\n", std::process::id()).as_bytes(),
        false,
    ) {
        fail_before_start(&e.to_string());
        return 1;
    }
    let spec = match dir.read_spec() {
        Ok(spec) => spec,
        Err(e) => {
            fail_before_start(&e.to_string());
            return 1;
        }
    };
    dir.job = spec.job;
    dir.attempt = spec.attempt;

    // Orphans of the job (even those that left its process group) become our children, so
    // that the sweep after the job ends finds them.
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        complain(&format!("cannot become a child subreaper: {e}"));
    }
    let cgroup = match dir.read_cgroup() {
        Ok(cgroup) => cgroup,
        Err(e) => {
            fail_before_start(&e.to_string());
            return 1;
        }
    };
    let (mut child, piped) = match start_job(&spec, &launcher(path), cgroup.as_ref()) {
        Ok(started) => started,
        Err(error) => {
            let now = unix_seconds();
            let recorded = dir.write_status(&Outcome::failed(now, now, error.clone()));
            handshake(&Handshake::Failed { error });
            return match recorded {
                Ok(()) => 0,
                Err(e) => {
                    complain(&e.to_string());
                    1
                }
            };
        }
    };
    let started_at = unix_seconds();
    let Ok(pgid) = i32::try_from(child.id()) else {
        // Cannot happen on Linux (pid_max < 2^22); without a group id we cannot police the job.
        let _ = child.kill();
        let _ = child.wait();
        let error = format!("job pid {} does not fit a pid_t", child.id());
        let _ = dir.write_status(&Outcome::failed(started_at, unix_seconds(), error.clone()));
        handshake(&Handshake::Failed { error });
        return 1;
    };
    let process = JobProcess {
        pgid,
        start_ticks: proc_stat(pgid).map(|s| s.start_ticks),
        started_at,
    };
    if let Err(e) = dir.write_job(process) {
        // The job runs and will be policed; only suspend/resume from the daemon will fail.
        complain(&e.to_string());
    }
    handshake(&Handshake::Started { pgid, started_at });

    let copies = match (piped, spec.max_output_bytes) {
        (Some(files), Some(cap)) => Some(copy_capped_output(&mut child, files, cap)),
        _ => None,
    };
    let outcome = police(
        &dir,
        &spec,
        &mut child,
        pgid,
        cgroup.as_ref(),
        started_at,
        &mut signals,
    )
    .await;
    if let Some(copies) = copies {
        // The job and its descendants are gone, so the pipes are closed; wait for the copies
        // to finish (bounded, should a stray process still hold a pipe open).
        let until = Instant::now() + Duration::from_secs(5);
        while copies.iter().any(|h| !h.is_finished()) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    match dir.write_status(&outcome) {
        Ok(()) => 0,
        Err(e) => {
            complain(&e.to_string());
            1
        }
    }
}

/// The output files of a job whose streams go through pipes (capped output): the stdout
/// file and, unless both streams share it, the stderr file.
type PipedOutput = (File, Option<File>);

/// The launcher of this attempt's job: this very binary, with the arguments this supervisor
/// was started with (`... supervise DIR`), `--exec` inserted before the directory.
fn launcher(dir: &Path) -> Vec<OsString> {
    let args: Vec<OsString> = std::env::args_os().collect();
    let prefix = args.get(1..args.len().saturating_sub(1)).unwrap_or(&[]);
    let mut launcher = vec![OsString::from("/proc/self/exe")];
    launcher.extend(prefix.iter().cloned());
    launcher.push("--exec".into());
    launcher.push(dir.as_os_str().to_owned());
    launcher
}

/// Spawns the job in a session of its own (and its cgroup, if any) through `launcher`
/// (see [`exec_job`]); the error is the text that goes into the outcome. With an output
/// cap, also the files its piped streams are to be copied to.
///
/// Nothing the user controls reaches a process while it holds root: the launcher starts with
/// an empty environment (the job's own is applied only by its final `exec`, after the
/// privileges are gone), and the working directory and output files, which are the user's
/// paths, are checked and opened with the account's file access ([`with_file_access_of`]).
fn start_job(
    spec: &LaunchSpec,
    launcher: &[OsString],
    cgroup: Option<&Cgroup>,
) -> Result<(Child, Option<PipedOutput>), String> {
    if spec.command.is_empty() {
        return Err("empty command".into());
    }
    // As root the job runs as its account, which must exist; otherwise as ourselves.
    let account = job_account(spec)?;
    let (stdout, stderr, stdout_path, stderr_path) = if spec.service_output {
        with_file_access_of(account.as_ref(), || check_cwd(spec))??;
        open_outputs(spec, account.as_ref().map(|a| (a.uid, a.gid)))?
    } else {
        with_file_access_of(account.as_ref(), || {
            check_cwd(spec)?;
            open_outputs(spec, None)
        })??
    };
    if let Some(cgroup) = cgroup {
        cgroup
            .create()
            .map_err(|e| format!("cannot create cgroup {}: {e}", cgroup.path.display()))?;
    }
    // The launcher reports what failed before its exec on this pipe (its stdin), which the
    // exec closes: end of file without a word means the job runs.
    let (report, report_writer) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| format!("cannot make a pipe: {e}"))?;

    let (program, args) = launcher
        .split_first()
        .ok_or_else(|| "no launcher".to_string())?;
    let mut command = Command::new(program);
    // No process group here: the launcher makes its own session (and so its group) with
    // `setsid`, which a group leader could not.
    command
        .args(args)
        .env_clear()
        .stdin(Stdio::from(report_writer));
    let piped = if spec.max_output_bytes.is_some() {
        // Through pipes that the supervisor copies to the files, up to the cap.
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        let both = stderr_path == stdout_path;
        Some((stdout, (!both).then_some(stderr)))
    } else {
        command.stdout(stdout).stderr(stderr);
        None
    };
    crate::account::job_umask();
    let spawned = command.spawn();
    // Our copy of the pipe's write end goes with the command, so that the launcher's exec
    // (or exit) is the end of the report.
    drop(command);
    let mut child = spawned.map_err(|e| format!("cannot start the job's launcher: {e}"))?;
    let mut error = String::new();
    let _ = File::from(report).read_to_string(&mut error);
    if !error.is_empty() {
        let _ = child.kill();
        let _ = child.wait();
        if let Some(cgroup) = cgroup {
            cgroup.kill_and_remove(Duration::from_secs(5));
        }
        return Err(error);
    }
    Ok((child, piped))
}

/// Whether the job's working directory is a directory (as the account sees it: run with its
/// file access).
fn check_cwd(spec: &LaunchSpec) -> Result<(), String> {
    match std::fs::metadata(&spec.cwd) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(format!(
            "bad working directory {}: not a directory",
            spec.cwd.display()
        )),
        Err(e) => Err(format!("bad working directory {}: {e}", spec.cwd.display())),
    }
}

/// The job's opened output files (stdout, stderr, and their paths), given to `owner` when
/// there is one (see [`LaunchSpec::service_output`]).
type Outputs = (File, File, PathBuf, PathBuf);

fn open_outputs(spec: &LaunchSpec, owner: Option<(u32, u32)>) -> Result<Outputs, String> {
    let stdout_path = spec.cwd.join(&spec.stdout);
    let stderr_path = spec.cwd.join(&spec.stderr);
    let stdout = open_output(&stdout_path, spec.attempt, owner)
        .map_err(|e| format!("cannot open stdout file {}: {e}", stdout_path.display()))?;
    let stderr = if stderr_path == stdout_path {
        stdout.try_clone()
    } else {
        open_output(&stderr_path, spec.attempt, owner)
    }
    .map_err(|e| format!("cannot open stderr file {}: {e}", stderr_path.display()))?;
    Ok((stdout, stderr, stdout_path, stderr_path))
}

/// Runs `f` with the file access of account `a` (its uid, gid and groups) instead of root's,
/// so that a path the user chose (a link to `/etc/shadow` in their working directory, or an
/// absolute output path) opens only what the user could open. Linux's per-thread `setfsuid`
/// also drops root's override of file permissions for the call. The groups are the account's
/// from then on: this supervisor is the job's alone. With no account (we are not root), `f`
/// runs as ourselves.
fn with_file_access_of<T>(a: Option<&Account>, f: impl FnOnce() -> T) -> Result<T, String> {
    use nix::unistd::{initgroups, setfsgid, setfsuid, Gid, Uid};
    let Some(a) = a else { return Ok(f()) };
    let name = std::ffi::CString::new(a.name.clone())
        .map_err(|_| format!("account name {:?} contains a NUL byte", a.name))?;
    initgroups(&name, Gid::from_raw(a.gid))
        .map_err(|e| format!("cannot take the groups of account {:?}: {e}", a.name))?;
    let (gid, uid) = (Gid::from_raw(a.gid), Uid::from_raw(a.uid));
    let root_gid = setfsgid(gid);
    let root_uid = setfsuid(uid);
    // Both calls answer the previous value even when they fail; an invalid id asks without
    // changing anything.
    let taken =
        setfsgid(Gid::from_raw(u32::MAX)) == gid && setfsuid(Uid::from_raw(u32::MAX)) == uid;
    let out = taken.then(f);
    setfsuid(root_uid);
    setfsgid(root_gid);
    out.ok_or_else(|| format!("cannot take the file access of account {:?}", a.name))
}

/// The account the job runs as: its user's when we are root, else None (ourselves).
fn job_account(spec: &LaunchSpec) -> Result<Option<Account>, String> {
    match &spec.unix_user {
        Some(name) if crate::account::running_as_root() => match crate::account::lookup(name)? {
            Some(account) => Ok(Some(account)),
            None => Err(format!("no Unix account {name:?} on this host")),
        },
        _ => Ok(None),
    }
}

/// The job's launcher, `foresight supervise --exec DIR`, started by the supervisor with an
/// empty environment, the job's output files and umask, and the write end of the
/// supervisor's report pipe as its stdin. It makes a session of its own (so the job has no
/// controlling terminal, and no signal sent within the service's session reaches it), enters
/// the attempt's cgroup, becomes the job's account (its groups from the group database, then
/// its gid, then its uid: never root's groups), changes to the working directory as that
/// account, and `exec`s the job's command with stdin from `/dev/null` and the job's
/// environment ([`job_environment`]). Whatever fails before the `exec` is written to the
/// pipe, and the launcher exits with 127; a successful `exec` closes the pipe (close-on-exec).
pub fn exec_job(dir: &Path) -> u8 {
    use std::os::fd::AsFd;
    let Ok(report) = io::stdin().as_fd().try_clone_to_owned() else {
        return 127;
    };
    let mut report = File::from(report);
    match become_job(dir) {
        Ok(never) => match never {},
        Err(error) => {
            let _ = report.write_all(error.as_bytes());
            127
        }
    }
}

/// The launcher's steps; returns only on failure, with the launch error.
fn become_job(dir: &Path) -> Result<std::convert::Infallible, String> {
    use std::os::fd::AsRawFd;
    nix::unistd::setsid().map_err(|e| format!("cannot make a session for the job: {e}"))?;
    let null = File::open("/dev/null").map_err(|e| format!("cannot open /dev/null: {e}"))?;
    nix::unistd::dup2(null.as_raw_fd(), 0).map_err(|e| format!("cannot redirect stdin: {e}"))?;
    drop(null);
    let (job, attempt) = dir
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(parse_attempt_dir_name)
        .unwrap_or((0, 0));
    let attempt_dir = AttemptDir {
        job,
        attempt,
        path: dir.to_path_buf(),
    };
    let spec = attempt_dir.read_spec().map_err(|e| e.to_string())?;
    if let Some(cgroup) = attempt_dir.read_cgroup().map_err(|e| e.to_string())? {
        cgroup
            .enter()
            .map_err(|e| format!("cannot enter cgroup {}: {e}", cgroup.path.display()))?;
    }
    let account = job_account(&spec)?;
    if let Some(a) = &account {
        use nix::unistd::{initgroups, setgid, setuid, Gid, Uid};
        let name = std::ffi::CString::new(a.name.clone())
            .map_err(|_| format!("account name {:?} contains a NUL byte", a.name))?;
        initgroups(&name, Gid::from_raw(a.gid))
            .map_err(|e| format!("cannot take the groups of account {:?}: {e}", a.name))?;
        setgid(Gid::from_raw(a.gid))
            .map_err(|e| format!("cannot take gid {} of account {:?}: {e}", a.gid, a.name))?;
        setuid(Uid::from_raw(a.uid))
            .map_err(|e| format!("cannot take uid {} of account {:?}: {e}", a.uid, a.name))?;
    }
    std::env::set_current_dir(&spec.cwd)
        .map_err(|e| format!("bad working directory {}: {e}", spec.cwd.display()))?;
    let Some((program, args)) = spec.command.split_first() else {
        return Err("empty command".into());
    };
    let own = account.or_else(crate::account::current);
    // The program is looked up in the job's own `PATH`, by the job's account.
    let e = Command::new(program)
        .args(args)
        .env_clear()
        .envs(job_environment(&spec, own.as_ref()))
        .exec();
    Err(match e.kind() {
        io::ErrorKind::NotFound => format!("no such program: {program}"),
        io::ErrorKind::PermissionDenied => format!("cannot execute {program}: permission denied"),
        _ => format!("cannot start {program}: {e}"),
    })
}

/// The `PATH` of a job that sets none, as `login` gives an ordinary user.
pub const DEFAULT_JOB_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A job's whole environment, and nothing of the service's: `PATH` ([`DEFAULT_JOB_PATH`]),
/// then the account's `HOME`, `USER`, `LOGNAME` and `SHELL`, then what the submitter exported
/// (which may replace those), then the `FORESIGHT_*` variables, which win.
pub fn job_environment(spec: &LaunchSpec, account: Option<&Account>) -> Vec<(String, String)> {
    let mut env = std::collections::BTreeMap::new();
    env.insert("PATH".to_owned(), DEFAULT_JOB_PATH.to_owned());
    if let Some(a) = account {
        env.insert("HOME".to_owned(), a.home.to_string_lossy().into_owned());
        env.insert("USER".to_owned(), a.name.clone());
        env.insert("LOGNAME".to_owned(), a.name.clone());
        env.insert("SHELL".to_owned(), a.shell.to_string_lossy().into_owned());
    }
    env.extend(spec.env.iter().cloned());
    let processors: Vec<String> = spec.processors.iter().map(u32::to_string).collect();
    env.extend([
        ("FORESIGHT_JOB_ID".to_owned(), spec.job.to_string()),
        ("FORESIGHT_ATTEMPT".to_owned(), spec.attempt.to_string()),
        (
            "FORESIGHT_PROCS".to_owned(),
            spec.processors.len().to_string(),
        ),
        ("FORESIGHT_PROCESSORS".to_owned(), processors.join(",")),
        ("FORESIGHT_CLUSTER".to_owned(), spec.cluster.clone()),
    ]);
    env.into_iter().collect()
}

/// An output file that takes at most `cap` bytes (counting what earlier attempts wrote), then
/// one line saying it was truncated.
struct Capped {
    file: File,
    written: u64,
    cap: u64,
    truncated: bool,
}

impl Capped {
    fn write(&mut self, bytes: &[u8]) {
        if self.truncated {
            return;
        }
        let room = self.cap.saturating_sub(self.written);
        let take = bytes.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        let _ = self.file.write_all(&bytes[..take]);
        self.written += take as u64;
        if take < bytes.len() {
            self.truncated = true;
            let _ = writeln!(
                self.file,
                "\n[foresight: output truncated at {} bytes (max_output_bytes)]",
                self.cap
            );
        }
    }
}

/// Starts one thread per output pipe of a capped job, copying it into its file up to the
/// cap and draining (dropping) the rest, so the job never blocks or dies of SIGPIPE.
fn copy_capped_output(
    child: &mut Child,
    (stdout, stderr): PipedOutput,
    cap: u64,
) -> Vec<std::thread::JoinHandle<()>> {
    use std::io::Read;
    use std::sync::{Arc, Mutex};
    let capped = |file: File| {
        let written = file.metadata().map_or(0, |m| m.len());
        Arc::new(Mutex::new(Capped {
            file,
            written,
            cap,
            truncated: false,
        }))
    };
    let out = capped(stdout);
    let err = stderr.map_or_else(|| Arc::clone(&out), capped);
    let copy = |mut from: Box<dyn Read + Send>, to: Arc<Mutex<Capped>>| {
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match from.read(&mut buf) {
                    Ok(0) => return,
                    Ok(n) => to
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .write(&buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => return,
                }
            }
        })
    };
    let mut handles = Vec::new();
    if let Some(p) = child.stdout.take() {
        handles.push(copy(Box::new(p), out));
    }
    if let Some(p) = child.stderr.take() {
        handles.push(copy(Box::new(p), err));
    }
    handles
}

/// The first attempt starts a fresh file; a requeued attempt appends to what earlier ones wrote.
/// A file this process owns (or gives to `owner`) is made private (0600), so that only the
/// job's user (and root) can read it; a file of another account that the job's may write (a
/// shared log) keeps its owner and mode. With an `owner`, a link is never followed.
fn open_output(path: &Path, attempt: u32, owner: Option<(u32, u32)>) -> io::Result<File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    let mut options = OpenOptions::new();
    options.create(true).mode(0o600);
    if owner.is_some() {
        options.custom_flags(nix::libc::O_NOFOLLOW);
    }
    if attempt == 0 {
        options.write(true).truncate(true);
    } else {
        options.append(true);
    }
    let file = options.open(path)?;
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::fchown(&file, Some(uid), Some(gid))?;
    }
    let me = nix::unistd::setfsuid(nix::unistd::Uid::from_raw(u32::MAX)).as_raw();
    let own = owner.map_or(me, |(uid, _)| uid);
    if file.metadata()?.uid() == own {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}

/// Waits for the job to end while enforcing walltime, cancel and suspension; returns the outcome.
async fn police(
    dir: &AttemptDir,
    spec: &LaunchSpec,
    child: &mut Child,
    pgid: i32,
    cgroup: Option<&Cgroup>,
    started_at: i64,
    signals: &mut Signals,
) -> Outcome {
    let group = Pid::from_raw(pgid);
    let grace = Duration::from_secs(spec.grace_secs);
    let mut clock = WallClock::new(spec.walltime_secs, Instant::now());
    let mut kill_at: Option<Instant> = None;
    let mut timed_out = false;
    let mut cancelled = false;
    // Whether the cgroup is frozen because the job is suspended.
    let mut frozen = false;
    // Far enough never to fire; stands in for a disabled timer in `select!`.
    let never = Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600);
    let terminate = |kill_at: &mut Option<Instant>| {
        if kill_at.is_none() {
            // TERM first, then CONT (or a thaw): a stopped process only acts on TERM once
            // continued.
            let _ = killpg(group, Signal::SIGTERM);
            let _ = killpg(group, Signal::SIGCONT);
            if let Some(cgroup) = cgroup {
                let _ = cgroup.freeze(false);
            }
            *kill_at = Some(Instant::now() + grace);
        }
    };
    loop {
        if leader_exited(group) {
            break;
        }
        if !cancelled && dir.has(CANCEL) {
            cancelled = true;
            terminate(&mut kill_at);
        }
        let suspended = dir.has(SUSPENDED);
        if let Some(cgroup) = cgroup {
            if kill_at.is_none() && suspended != frozen {
                hold_escapees(cgroup, group, suspended).await;
                frozen = suspended;
            }
        }
        // The clock stops only while the job is seen held, not merely asked to stop: a
        // SIGCONT from one of the user's own processes must not buy running time.
        let held = suspended && kill_at.is_none() && is_held(cgroup, group);
        if suspended && kill_at.is_none() && !held && cgroup.is_none() {
            let _ = killpg(group, Signal::SIGSTOP);
        }
        clock.set_running(!held, Instant::now());
        let deadline = if kill_at.is_none() {
            clock.deadline()
        } else {
            None
        };
        tokio::select! {
            _ = signals.child.recv() => {}
            _ = signals.cancel.recv() => {}
            _ = signals.suspend.recv() => {}
            _ = signals.hangup.recv() => {}
            _ = signals.terminate.recv() => terminate(&mut kill_at),
            _ = tokio::time::sleep_until(deadline.unwrap_or(never).into()), if deadline.is_some() => {
                timed_out = true;
                terminate(&mut kill_at);
            }
            _ = tokio::time::sleep_until(kill_at.unwrap_or(never).into()), if kill_at.is_some() => {
                let _ = killpg(group, Signal::SIGKILL);
                if let Some(cgroup) = cgroup {
                    let _ = cgroup.kill();
                }
                kill_at = Some(never);
            }
            _ = tokio::time::sleep(if suspended && cgroup.is_none() { HELD_TICK } else { TICK }) => {}
        }
    }
    // The leader is a zombie, so the group id is still ours: clear out what it left behind.
    let _ = killpg(group, Signal::SIGKILL);
    let (exit_code, signal, error) = match child.wait() {
        Ok(status) => (status.code(), status.signal(), None),
        Err(e) => (
            None,
            None,
            Some(format!("cannot reap job process {pgid}: {e}")),
        ),
    };
    // Then whatever escaped the group: all of the cgroup, and what was handed to us as a
    // subreaper.
    if let Some(cgroup) = cgroup {
        if !cgroup.kill_and_remove(Duration::from_secs(10)) {
            complain(&format!(
                "cannot empty and remove cgroup {}",
                cgroup.path.display()
            ));
        }
    }
    sweep_descendants();
    Outcome {
        exit_code,
        signal,
        timed_out,
        cancelled,
        started_at,
        ended_at: unix_seconds(),
        error,
    }
}

/// Kills and reaps every remaining descendant of this process, repeating while any is left
/// (a dying process may have forked). Bounded, so a fork bomb cannot keep the outcome from
/// being recorded.
fn sweep_descendants() {
    use nix::sys::signal::kill;
    let me = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
    for _ in 0..200 {
        reap_zombies();
        let alive = descendants(me);
        if alive.is_empty() {
            return;
        }
        for pid in alive {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    reap_zombies();
}

/// Reaps every child that has exited (the orphans the sweep killed), without blocking.
fn reap_zombies() {
    use nix::sys::wait::waitpid;
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// Live (not zombie) descendants of `root`, from the parent links in `/proc`.
fn descendants(root: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut children: std::collections::HashMap<i32, Vec<(i32, char)>> =
        std::collections::HashMap::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if let Some(stat) = proc_stat(pid) {
            children
                .entry(stat.ppid)
                .or_default()
                .push((pid, stat.state));
        }
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        for &(child, state) in children.get(&p).map_or(&[][..], Vec::as_slice) {
            if state != 'Z' {
                out.push(child);
            }
            todo.push(child);
        }
    }
    out
}

/// Whether the leader has exited, without reaping it (so its pid stays reserved).
/// Freezes (`suspended`) or thaws the attempt's cgroup, so that processes which left the
/// job's group are suspended with it. The group is stopped first and frozen only once its
/// leader has stopped (at most half a second): a process frozen before it acts on its
/// SIGSTOP would stay frozen in `S` with the stop pending, not stopped.
async fn hold_escapees(cgroup: &Cgroup, group: Pid, suspended: bool) {
    if suspended {
        // The daemon sent this already; again in case this tick read the marker first.
        let _ = killpg(group, Signal::SIGSTOP);
        for _ in 0..50 {
            if proc_stat(group.as_raw()).is_none_or(|s| s.state == 'T' || s.state == 'Z') {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    if let Err(e) = cgroup.freeze(suspended) {
        complain(&format!(
            "cannot {} cgroup {}: {e}",
            if suspended { "freeze" } else { "thaw" },
            cgroup.path.display()
        ));
    }
}

/// Whether a suspended job is really held: its cgroup frozen (no signal undoes that), or,
/// without a cgroup, its leader stopped (`T`), which a SIGCONT from the user's own processes
/// can undo, and the supervisor then stops it again.
fn is_held(cgroup: Option<&Cgroup>, group: Pid) -> bool {
    match cgroup {
        Some(cgroup) => cgroup.frozen(),
        None => proc_stat(group.as_raw()).is_some_and(|s| s.state == 'T'),
    }
}

fn leader_exited(leader: Pid) -> bool {
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    match waitid(Id::Pid(leader), flags) {
        Ok(WaitStatus::StillAlive) => false,
        Ok(_) => true,
        Err(nix::errno::Errno::EINTR) => false,
        // ECHILD: it is not our child any more (already reaped); nothing left to wait for.
        Err(_) => true,
    }
}

/// Running time against the walltime: it runs only while the job is not suspended.
#[derive(Clone, Debug)]
pub(crate) struct WallClock {
    limit: Option<Duration>,
    used: Duration,
    running_since: Option<Instant>,
}

impl WallClock {
    /// A running clock; `limit_secs == 0` means no limit.
    pub(crate) fn new(limit_secs: u64, now: Instant) -> WallClock {
        WallClock {
            limit: (limit_secs > 0).then(|| Duration::from_secs(limit_secs)),
            used: Duration::ZERO,
            running_since: Some(now),
        }
    }

    /// Stops or restarts the clock; idempotent.
    pub(crate) fn set_running(&mut self, running: bool, now: Instant) {
        match (running, self.running_since) {
            (false, Some(since)) => {
                self.used += now.saturating_duration_since(since);
                self.running_since = None;
            }
            (true, None) => self.running_since = Some(now),
            _ => {}
        }
    }

    /// When the walltime runs out if the job keeps running; None without a limit or while stopped.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        let since = self.running_since?;
        Some(since + self.limit?.saturating_sub(self.used))
    }
}

/// The signals the supervisor listens to; see the module docs for their meaning.
struct Signals {
    child: tokio::signal::unix::Signal,
    cancel: tokio::signal::unix::Signal,
    suspend: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> io::Result<Signals> {
        Ok(Signals {
            child: signal(SignalKind::child())?,
            cancel: signal(SignalKind::user_defined1())?,
            suspend: signal(SignalKind::user_defined2())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }
}

/// Tells the launching executor; if it is gone (EPIPE, Rust ignores SIGPIPE) nobody listens.
fn handshake(message: &Handshake) {
    let Ok(mut line) = serde_json::to_vec(message) else {
        return;
    };
    line.push(b'\n');
    let mut out = io::stdout().lock();
    let _ = out.write_all(&line).and_then(|()| out.flush());
}

fn fail_before_start(error: &str) {
    complain(error);
    handshake(&Handshake::Failed {
        error: error.to_string(),
    });
}

/// The supervisor's stderr is `supervisor.log` in the attempt directory.
fn complain(message: &str) {
    let _ = writeln!(io::stderr(), "foresight supervise: {message}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_clock_excludes_suspended_time() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut clock = WallClock::new(10, t0);
        assert_eq!(clock.deadline(), Some(t0 + s(10)));
        clock.set_running(false, t0 + s(4));
        clock.set_running(false, t0 + s(5)); // idempotent
        assert_eq!(clock.deadline(), None);
        clock.set_running(true, t0 + s(100));
        clock.set_running(true, t0 + s(101)); // idempotent
        assert_eq!(clock.deadline(), Some(t0 + s(106)));
    }

    #[test]
    fn zero_walltime_means_no_limit() {
        let clock = WallClock::new(0, Instant::now());
        assert_eq!(clock.deadline(), None);
    }

    #[test]
    fn handshake_is_one_json_line() {
        let cases = [
            Handshake::Started {
                pgid: 12,
                started_at: 34,
            },
            Handshake::Failed {
                error: "no such program: foo".into(),
            },
        ];
        for case in cases {
            let text = serde_json::to_string(&case).expect("serialise");
            assert!(!text.contains('\n'));
            assert_eq!(
                serde_json::from_str::<Handshake>(&text).expect("parse"),
                case
            );
        }
    }

    #[test]
    fn a_missing_account_is_named_and_nothing_runs_as_root() {
        if !crate::account::running_as_root() {
            return; // accounts are used only by a root supervisor
        }
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut spec = crate::spec::tests::sample_spec();
        spec.cwd = tmp.path().to_path_buf();
        spec.unix_user = Some("foresight-no-such-account".into());
        let err = start_job(&spec, &["true".into()], None).expect_err("missing account");
        assert_eq!(
            err,
            "no Unix account \"foresight-no-such-account\" on this host"
        );
        assert!(!tmp.path().join("out.txt").exists(), "no output file made");
    }

    #[test]
    fn a_bad_cwd_is_named_before_anything_starts() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut spec = crate::spec::tests::sample_spec();
        spec.unix_user = None;
        spec.cwd = tmp.path().join("missing");
        let err = start_job(&spec, &["true".into()], None).expect_err("missing cwd");
        assert!(
            err.starts_with("bad working directory") && err.contains("missing"),
            "{err}"
        );
    }

    #[test]
    fn the_launcher_reports_on_the_pipe_and_its_exec_closes_it() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut spec = crate::spec::tests::sample_spec();
        spec.unix_user = None;
        spec.max_output_bytes = None;
        spec.cwd = tmp.path().to_path_buf();
        // A stand-in launcher: what it writes on its stdin is the launch error.
        let says = |text: &str| -> Vec<OsString> {
            vec![
                "sh".into(),
                "-c".into(),
                format!("printf '{text}' >&0; exit 127").into(),
            ]
        };
        let err = start_job(&spec, &says("no such program: x"), None).expect_err("reported");
        assert_eq!(err, "no such program: x");
        let exec: Vec<OsString> = vec!["sh".into(), "-c".into(), "exec true".into()];
        let (mut child, _) = start_job(&spec, &exec, None).expect("started");
        assert!(child.wait().expect("wait").success());
    }
}
