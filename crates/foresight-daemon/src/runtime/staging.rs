//! Input staging: a job's input files are measured when it is submitted, and copied into
//! its working directory on every cluster it runs on other than the one that holds them,
//! before it starts. The planner reads the size and the data's cluster
//! ([`foresight_core::grid::GlobalJob::input_mb`], `home`) and starts a far cluster's slots
//! after the transfer; the copy itself runs in a task of its own, outside the world's lock.
//!
//! Output staging goes the other way: once a job completes, its output files (relative to
//! its working directory) are copied from its working directory on the cluster it ran on
//! (for a co-allocated job, the one of its parts' directories that has the file) to the
//! same relative paths under its working directory on the output's cluster. A workflow
//! task's edge files go in the same copy, each labelled with its edge, so that the copier
//! names the edge in its errors and a failed edge stops only that edge's files.
//!
//! Both directions copy through one copier: each file by a process of its own, as the
//! job's account when there is one, all killed at one deadline (`copy_timeout_seconds`).

use crate::state::refusal::Refusal;
use crate::state::staging::{file_name, Copy, FetchFailure, OutputFetch, MAX_INPUTS};
use foresight_api::InputSpec;
use foresight_store::InputRecord;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Measures the input files a submission names: each must be an absolute path to a
/// readable regular file; two inputs may not share a file name (they land in one working
/// directory). `known` says whether a cluster name is one the input may live on.
pub fn measure(
    inputs: Vec<InputSpec>,
    known: impl Fn(&str) -> bool,
) -> Result<Vec<InputRecord>, Refusal> {
    if inputs.len() > MAX_INPUTS {
        return Err(Refusal::invalid(
            "inputs",
            format!("at most {MAX_INPUTS} input files, got {}", inputs.len()),
        ));
    }
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    let mut out = Vec::with_capacity(inputs.len());
    for i in inputs {
        let bad = |why: String| Refusal::invalid("inputs", format!("input {}: {why}", i.path));
        let path = Path::new(&i.path);
        if !path.is_absolute() {
            return Err(bad("give an absolute path".into()));
        }
        if let Some(c) = &i.cluster {
            if !known(c) {
                return Err(bad(format!("unknown cluster {c:?}")));
            }
        }
        let meta = std::fs::metadata(path).map_err(|e| bad(e.to_string()))?;
        if !meta.is_file() {
            return Err(bad("not a regular file".into()));
        }
        // Readable by the service, which copies it.
        std::fs::File::open(path).map_err(|e| bad(format!("cannot be read: {e}")))?;
        let name = file_name(path).ok_or_else(|| bad("has no file name".into()))?;
        if let Some(first) = names.insert(name.clone(), i.path.clone()) {
            return Err(bad(format!(
                "{first} has the same file name {name:?}: both would land in one working directory"
            )));
        }
        out.push(InputRecord {
            path: i.path,
            cluster: i.cluster,
            site: None,
            bytes: meta.len(),
        });
    }
    Ok(out)
}

/// Makes directory `dir` (and its parents) as the job's account, as [`stage`] makes the
/// directories it copies into: a working directory of a cluster's own `work_dir`. Bounded
/// as a copy is (`timeout`, `copy_timeout_seconds`): at the timeout the `mkdir` is killed
/// and reaped, and the error names the directory and the timeout's key.
pub async fn make_dir(
    dir: &Path,
    account: Option<&str>,
    timeout: std::time::Duration,
) -> Result<(), String> {
    let a = account.map(as_account).transpose()?.flatten();
    let who = a
        .as_ref()
        .map_or(String::new(), |a| format!(" as {:?}", a.name));
    let deadline = tokio::time::Instant::now() + timeout;
    run_until(deadline, a.as_ref(), &["mkdir", "-p", "--"], &[dir])
        .await
        .map_err(|e| e.told(format!("creating {}{who}", dir.display()), timeout))
}

/// The configuration key that bounds every copy, input or output: a timeout's error names
/// it, so that the operator knows what to change.
const COPY_TIMEOUT_KEY: &str = "copy_timeout_seconds";

/// Copies a part's input files, in order, within `timeout` for all of them: each file by a
/// process of its own, killed at the timeout, so that an input that is a named pipe, or a
/// hung file system, cannot hold the copy (and the job, and a task of the service) forever;
/// the error then names the file and `copy_timeout_seconds`. The one copier of both
/// directions (`copy_files`).
///
/// When the service is root and the job runs as another Unix account (`account`), every
/// copy is made as that account, with its groups: the service never reads an input the
/// job's account could not read, and never writes where it could not write (a working
/// directory is the user's, and a symbolic link planted there must not make root overwrite
/// its target).
pub async fn stage(
    copies: &[Copy],
    account: Option<&str>,
    timeout: std::time::Duration,
) -> Result<(), String> {
    let a = account.map(as_account).transpose()?.flatten();
    copy_files(
        copies,
        a.as_ref(),
        tokio::time::Instant::now() + timeout,
        timeout,
    )
    .await
    .map_err(|(_, e)| e)
}

/// Brings every output back, in order, within `timeout` for all of them: each file is
/// looked for in the parts' working directories, then all are copied as [`stage`] copies
/// inputs, by the same copier and by the same deadline. Fetches of one label (consecutive)
/// go together: a failure of the job's own outputs (no label) stops the copy, one of a
/// labelled file (a workflow edge's) only the rest of its label, and the copy goes on with
/// the next. Every failure is returned, in order.
pub async fn stage_within(
    fetches: &[OutputFetch],
    account: Option<&str>,
    timeout: std::time::Duration,
) -> Result<(), Vec<FetchFailure>> {
    let a = match account.map(as_account).transpose() {
        Ok(a) => a.flatten(),
        Err(error) => return Err(vec![FetchFailure { label: None, error }]),
    };
    let deadline = tokio::time::Instant::now() + timeout;
    let mut failed = Vec::new();
    for group in fetches.chunk_by(|x, y| x.label == y.label) {
        if let Err(error) = fetch_all(group, a.as_ref(), deadline, timeout).await {
            let label = group[0].label.clone();
            let stop = label.is_none();
            failed.push(FetchFailure { label, error });
            if stop {
                break;
            }
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed)
    }
}

/// Fetches `fetches` (of one label) by `deadline`, stopping at the first failure, whose
/// error starts with the fetch's label and path when it has a label.
async fn fetch_all(
    fetches: &[OutputFetch],
    a: Option<&foresight_rm::account::Account>,
    deadline: tokio::time::Instant,
    timeout: std::time::Duration,
) -> Result<(), String> {
    let named = |f: &OutputFetch, e: String| match &f.label {
        Some(l) => format!("{l}, file {}: {e}", f.path),
        None => e,
    };
    let mut copies = Vec::with_capacity(fetches.len());
    let mut of = Vec::with_capacity(fetches.len());
    for f in fetches {
        let from = match f.from.as_slice() {
            [one] => one.clone(),
            many => {
                let found = tokio::time::timeout_at(deadline, existing(many, a))
                    .await
                    .map_err(|_| timed_out(format!("looking for output {}", f.path), timeout))
                    .and_then(|r| r)
                    .map_err(|e| named(f, e))?;
                let list = |p: &[PathBuf]| {
                    p.iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                match found.as_slice() {
                    [one] => one.clone(),
                    [] => {
                        return Err(named(
                            f,
                            format!(
                                "output {}: in none of the working directories the job's \
                                 parts ran in ({})",
                                f.path,
                                list(many)
                            ),
                        ))
                    }
                    _ => {
                        return Err(named(
                            f,
                            format!(
                                "output {}: more than one of the job's parts wrote it ({}); \
                                 none is taken",
                                f.path,
                                list(&found)
                            ),
                        ))
                    }
                }
            }
        };
        // One written where it belongs is not copied onto itself.
        if from != f.to {
            copies.push(Copy {
                from,
                to: f.to.clone(),
                most: None,
            });
            of.push(f);
        }
    }
    copy_files(&copies, a, deadline, timeout)
        .await
        .map_err(|(k, e)| named(of[k], e))
}

/// The one copier of inputs and outputs: copies every file, in order, creating the
/// directories it goes into, as account `a` when there is one; stops at the first failure,
/// naming the file, the account and the cause. Each file is copied by a process of its own
/// (`cp`), killed and reaped at `deadline`, shared by the whole list (`timeout` from its
/// start), so that a named pipe or a hung file system cannot hold the copy, or a task of
/// the service, forever; the error then names the file and the timeout's key, and comes
/// with the index of the copy that failed.
async fn copy_files(
    copies: &[Copy],
    a: Option<&foresight_rm::account::Account>,
    deadline: tokio::time::Instant,
    timeout: std::time::Duration,
) -> Result<(), (usize, String)> {
    let who = a.map_or(String::new(), |a| format!(" as {:?}", a.name));
    let mut made: Vec<&Path> = Vec::new();
    for (k, c) in copies.iter().enumerate() {
        if let Some(dir) = c.to.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !made.contains(&dir) {
                let what = || format!("creating {}{who}", dir.display());
                run_until(deadline, a, &["mkdir", "-p", "--"], &[dir])
                    .await
                    .map_err(|e| (k, e.told(what(), timeout)))?;
                made.push(dir);
            }
        }
        let what = || format!("copying {} to {}{who}", c.from.display(), c.to.display());
        run_until(deadline, a, &["cp", "-T", "--"], &[&c.from, &c.to])
            .await
            .map_err(|e| (k, e.told(what(), timeout)))?;
    }
    Ok(())
}

/// Why a command of [`run_until`] failed.
enum Failed {
    /// It was still running at the deadline, and was killed.
    TimedOut,
    /// It could not be run, or failed saying this.
    Said(String),
}

impl Failed {
    /// The error of doing `what`, which had `timeout` in all.
    fn told(self, what: String, timeout: std::time::Duration) -> String {
        match self {
            Failed::TimedOut => timed_out(what, timeout),
            Failed::Said(e) => format!("{what}: {e}"),
        }
    }
}

/// The error of `what`, stopped at `timeout`.
fn timed_out(what: String, timeout: std::time::Duration) -> String {
    format!(
        "{what} timed out after {} s ({COPY_TIMEOUT_KEY}); the copy was killed",
        timeout.as_secs()
    )
}

/// Runs `command` with `paths`, as account `a` when there is one; at `deadline` it is
/// killed and reaped before this returns, so nothing of it is left, and past it, it is not
/// started. Its error output is the error.
async fn run_until(
    deadline: tokio::time::Instant,
    a: Option<&foresight_rm::account::Account>,
    command: &[&str],
    paths: &[&Path],
) -> Result<(), Failed> {
    use tokio::io::AsyncReadExt;
    if tokio::time::Instant::now() >= deadline {
        return Err(Failed::TimedOut);
    }
    let mut child = command_as(a, command, paths)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| Failed::Said(format!("cannot run {}: {e}", program(a, command))))?;
    let mut stderr = child.stderr.take().expect("invariant: stderr is piped");
    let ran = tokio::time::timeout_at(deadline, async {
        let mut said = Vec::new();
        let _ = stderr.read_to_end(&mut said).await;
        (child.wait().await, said)
    })
    .await;
    let Ok((status, said)) = ran else {
        // The wait dropped: kill it, and wait for it to be gone.
        let _ = child.kill().await;
        return Err(Failed::TimedOut);
    };
    let status = status.map_err(|e| Failed::Said(format!("waiting for {}: {e}", command[0])))?;
    if status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&said).trim().to_string();
    Err(Failed::Said(if said.is_empty() {
        format!("{} exited with {status}", command[0])
    } else {
        said
    }))
}

/// What runs `command`: `setpriv` (util-linux) when there is an account, else the command.
fn program<'a>(a: Option<&foresight_rm::account::Account>, command: &[&'a str]) -> &'a str {
    if a.is_some() {
        "setpriv (util-linux)"
    } else {
        command[0]
    }
}

/// `command` with `paths`, as account `a` when there is one: under `setpriv` (util-linux)
/// with its uid, its gid and its groups from the group database, as the job's launcher
/// takes them. Its input is empty; dropped, it is killed.
pub(crate) fn command_as(
    a: Option<&foresight_rm::account::Account>,
    command: &[&str],
    paths: &[&Path],
) -> tokio::process::Command {
    let mut c = match a {
        Some(a) => {
            let mut c = tokio::process::Command::new("setpriv");
            c.arg(format!("--reuid={}", a.uid))
                .arg(format!("--regid={}", a.gid))
                .arg("--init-groups")
                .arg("--")
                .args(command);
            c
        }
        None => {
            let mut c = tokio::process::Command::new(command[0]);
            c.args(&command[1..]);
            c
        }
    };
    // The copy runs as the user, who may read its environment in /proc: none of the
    // service's (its tokens, database passwords) goes with it.
    c.args(paths)
        .env_clear()
        .env("PATH", copier_path())
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    c
}

/// Where the copier's programs (`setpriv`, `cp`, `mkdir`, `test`) are found: the service's
/// own `PATH`, or the system's when it has none.
fn copier_path() -> String {
    std::env::var("PATH")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into())
}

/// Which of `paths` exist (a dangling link counts), as account `a` sees them when there is
/// one.
async fn existing(
    paths: &[PathBuf],
    a: Option<&foresight_rm::account::Account>,
) -> Result<Vec<PathBuf>, String> {
    let Some(a) = a else {
        let mut found = Vec::new();
        for p in paths {
            if tokio::fs::symlink_metadata(p).await.is_ok() {
                found.push(p.clone());
            }
        }
        return Ok(found);
    };
    let script = r#"for f; do if test -e "$f" || test -L "$f"; then printf '%s\0' "$f"; fi; done"#;
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let out = setpriv(a, &["sh", "-c", script, "sh"], &refs).await?;
    if !out.status.success() {
        return Err(format!(
            "looking for outputs as {:?}: {}",
            a.name,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out
        .stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| PathBuf::from(String::from_utf8_lossy(p).into_owned()))
        .collect())
}

/// Refuses (400, naming the file) an input the job's Unix account cannot read, when the
/// service is root and the account is another: the service would otherwise measure, and
/// later stage, a file only root may read. Asked of the system as that account (`test -r`
/// under `setpriv`), so groups and access lists count as they would for the job.
pub async fn readable_by(inputs: &[InputSpec], account: &str) -> Result<(), Refusal> {
    if inputs.is_empty() {
        return Ok(());
    }
    let refuse = |why: String| Refusal::invalid("inputs", why);
    let Some(a) = as_account(account).map_err(refuse)? else {
        return Ok(());
    };
    let mut command = vec![
        "sh",
        "-c",
        r#"for f; do test -r "$f" || { printf %s "$f"; exit 1; }; done"#,
        "sh",
    ];
    command.extend(inputs.iter().map(|i| i.path.as_str()));
    let out = setpriv(&a, &command, &[])
        .await
        .map_err(|e| refuse(format!("checking the inputs as {account:?}: {e}")))?;
    if out.status.success() {
        return Ok(());
    }
    let path = String::from_utf8_lossy(&out.stdout).to_string();
    Err(refuse(format!(
        "input {path}: not readable by Unix account {account:?}, which the job runs as"
    )))
}

/// The account copies are made as: `None` when the service is not root (jobs then run as
/// the service's own user) or the account is root itself.
pub(crate) fn as_account(name: &str) -> Result<Option<foresight_rm::account::Account>, String> {
    if !foresight_rm::account::running_as_root() {
        return Ok(None);
    }
    match foresight_rm::account::lookup(name)? {
        Some(a) if a.uid == 0 => Ok(None),
        Some(a) => Ok(Some(a)),
        None => Err(format!("no Unix account {name:?} on this host")),
    }
}

/// Runs `command` with `paths` under `setpriv` (util-linux) as account `a`, as
/// [`command_as`] makes it; its output.
async fn setpriv(
    a: &foresight_rm::account::Account,
    command: &[&str],
    paths: &[&Path],
) -> Result<std::process::Output, String> {
    command_as(Some(a), command, paths)
        .output()
        .await
        .map_err(|e| format!("cannot run setpriv (util-linux): {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_relative_or_unknown_input_is_refused_naming_it() {
        let dir = std::env::temp_dir().join(format!("foresight-measure-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("in.dat");
        std::fs::write(&f, b"12345").unwrap();
        let spec = |p: &str, c: Option<&str>| InputSpec {
            path: p.into(),
            cluster: c.map(Into::into),
        };
        let known = |c: &str| c == "a";
        let ok = measure(vec![spec(f.to_str().unwrap(), Some("a"))], known).unwrap();
        assert_eq!(ok[0].bytes, 5);
        for (name, s, want) in [
            (
                "missing",
                spec("/nonexistent/in.dat", None),
                "/nonexistent/in.dat",
            ),
            ("relative", spec("in.dat", None), "absolute"),
            (
                "unknown",
                spec(f.to_str().unwrap(), Some("zz")),
                "unknown cluster",
            ),
            (
                "directory",
                spec(dir.to_str().unwrap(), None),
                "not a regular file",
            ),
        ] {
            let e = measure(vec![s], known).unwrap_err().to_string();
            assert!(e.contains(want), "{name}: {e}");
        }
        let twice = vec![
            spec(f.to_str().unwrap(), None),
            spec(f.to_str().unwrap(), None),
        ];
        assert!(measure(twice, known)
            .unwrap_err()
            .to_string()
            .contains("same file name"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A scratch directory any account may enter, removed on drop.
    fn open_dir() -> tempfile::TempDir {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        d
    }

    fn mkfifo(p: &Path) {
        let made = std::process::Command::new("mkfifo")
            .arg(p)
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo {}", p.display());
    }

    /// The processes whose command line names `path`.
    fn processes_naming(path: &Path) -> Vec<String> {
        let want = path.display().to_string();
        let mut found = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(line) = std::fs::read(e.path().join("cmdline")) else {
                continue;
            };
            let line = String::from_utf8_lossy(&line).replace('\0', " ");
            if line.contains(&want) {
                found.push(format!("{}: {line}", e.file_name().to_string_lossy()));
            }
        }
        found
    }

    #[tokio::test]
    async fn a_named_pipe_times_out_after_the_files_before_it_and_its_copy_is_gone() {
        let d = open_dir();
        let (good, fifo) = (d.path().join("good.dat"), d.path().join("stuck.fifo"));
        std::fs::write(&good, b"data").unwrap();
        mkfifo(&fifo);
        let to = d.path().join("work/sub");
        let copies = [
            Copy {
                from: good.clone(),
                to: to.join("good.dat"),
                most: None,
            },
            Copy {
                from: fifo.clone(),
                to: to.join("stuck.fifo"),
                most: None,
            },
        ];
        let e = stage(&copies, None, std::time::Duration::from_secs(1))
            .await
            .unwrap_err();
        let want = format!(
            "copying {} to {} timed out after 1 s (copy_timeout_seconds); the copy was killed",
            fifo.display(),
            to.join("stuck.fifo").display()
        );
        assert_eq!(e, want);
        // In order: the file before it was copied, into the directory made for it.
        assert_eq!(std::fs::read(to.join("good.dat")).unwrap(), b"data");
        // Killed and reaped before the error came back: no process left reads the pipe.
        assert_eq!(processes_naming(&fifo), Vec::<String>::new());
        use std::os::unix::fs::OpenOptionsExt;
        let open = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(0o4000) // O_NONBLOCK: ENXIO when nobody reads
            .open(&fifo);
        assert_eq!(open.map(|_| ()).map_err(|e| e.raw_os_error()), Err(Some(6)));
    }

    /// The copier runs as the job's account, which may read its environment in `/proc`: none
    /// of the service's goes with it (a token or `PGPASSWORD` there would be the user's).
    #[tokio::test]
    async fn the_copier_carries_none_of_the_services_environment() {
        const SECRET: &str = "copier-environment-secret";
        std::env::set_var("FORESIGHT_TEST_COPIER_SECRET", SECRET);
        let d = open_dir();
        let fifo = d.path().join("held.fifo");
        mkfifo(&fifo);
        let copies = [Copy {
            from: fifo.clone(),
            to: d.path().join("w/held.fifo"),
            most: None,
        }];
        let copy = stage(&copies, None, std::time::Duration::from_secs(2));
        let look = async {
            for _ in 0..200 {
                for line in processes_naming(&fifo) {
                    let pid = line.split(':').next().unwrap_or_default().to_string();
                    if let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) {
                        return Some(String::from_utf8_lossy(&env).replace('\0', "\n"));
                    }
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            None
        };
        let (copied, env) = tokio::join!(copy, look);
        assert!(copied.is_err(), "the pipe never had a writer");
        let env = env.expect("the copy was seen running");
        assert!(
            !env.contains(SECRET),
            "the service's environment reached the copy:\n{env}"
        );
        assert!(env.lines().any(|l| l.starts_with("PATH=")), "{env}");
    }

    #[tokio::test]
    async fn a_missing_file_stops_the_copy_naming_it() {
        let d = open_dir();
        let missing = d.path().join("no-such.dat");
        let after = d.path().join("after.dat");
        std::fs::write(&after, b"x").unwrap();
        let copies = [
            Copy {
                from: missing.clone(),
                to: d.path().join("w/no-such.dat"),
                most: None,
            },
            Copy {
                from: after,
                to: d.path().join("w/after.dat"),
                most: None,
            },
        ];
        let e = stage(&copies, None, std::time::Duration::from_secs(60))
            .await
            .unwrap_err();
        assert!(
            e.starts_with(&format!("copying {} to ", missing.display())),
            "{e}"
        );
        assert!(e.contains("No such file or directory"), "{e}");
        assert!(!d.path().join("w/after.dat").exists(), "it stopped there");
        // An output likewise, and one written where it belongs is not copied.
        let fetch = |from: &Path, to: &Path| OutputFetch {
            path: "r.txt".into(),
            from: vec![from.to_path_buf()],
            to: to.to_path_buf(),
            label: None,
        };
        let here = d.path().join("here.txt");
        std::fs::write(&here, b"y").unwrap();
        let e = stage_within(
            &[
                fetch(&here, &here),
                fetch(&missing, &d.path().join("h/r.txt")),
            ],
            None,
            std::time::Duration::from_secs(60),
        )
        .await
        .unwrap_err();
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].label, None);
        assert!(e[0].error.contains(&missing.display().to_string()), "{e:?}");
    }

    /// A fetch of `from` to `to`, with `label`.
    fn labelled(path: &str, from: &Path, to: &Path, label: Option<&str>) -> OutputFetch {
        OutputFetch {
            path: path.into(),
            from: vec![from.to_path_buf()],
            to: to.to_path_buf(),
            label: label.map(Into::into),
        }
    }

    /// An edge's file that hangs is killed at the deadline of the whole copy; its error
    /// names the edge, the file and the configured total, not what was left of it.
    #[tokio::test]
    async fn a_timed_out_edge_file_names_its_edge_its_file_and_the_whole_timeout() {
        let d = open_dir();
        let (good, fifo) = (d.path().join("good.dat"), d.path().join("stuck.fifo"));
        std::fs::write(&good, b"data").unwrap();
        mkfifo(&fifo);
        let to = d.path().join("w");
        let e = stage_within(
            &[
                labelled("good.dat", &good, &to.join("good.dat"), None),
                labelled(
                    "stuck.fifo",
                    &fifo,
                    &to.join("stuck.fifo"),
                    Some("edge A -> B"),
                ),
            ],
            None,
            std::time::Duration::from_secs(1),
        )
        .await
        .unwrap_err();
        let want = format!(
            "edge A -> B, file stuck.fifo: copying {} to {} timed out after 1 s \
             (copy_timeout_seconds); the copy was killed",
            fifo.display(),
            to.join("stuck.fifo").display()
        );
        assert_eq!(
            e,
            vec![FetchFailure {
                label: Some("edge A -> B".into()),
                error: want
            }]
        );
        assert_eq!(std::fs::read(to.join("good.dat")).unwrap(), b"data");
        assert_eq!(processes_naming(&fifo), Vec::<String>::new());
    }

    /// A failed edge file stops the rest of its edge only: the next edge's files are
    /// copied. A failed output of the job's own stops the whole copy.
    #[tokio::test]
    async fn a_failed_edge_file_stops_its_edge_and_a_failed_output_the_whole_copy() {
        let d = open_dir();
        let (good, missing) = (d.path().join("good.dat"), d.path().join("none.dat"));
        std::fs::write(&good, b"data").unwrap();
        let (to_b, to_c) = (d.path().join("b"), d.path().join("c"));
        let timeout = std::time::Duration::from_secs(60);
        let e = stage_within(
            &[
                labelled(
                    "none.dat",
                    &missing,
                    &to_c.join("none.dat"),
                    Some("edge A -> C"),
                ),
                labelled(
                    "good.dat",
                    &good,
                    &to_c.join("good.dat"),
                    Some("edge A -> C"),
                ),
                labelled(
                    "good.dat",
                    &good,
                    &to_b.join("good.dat"),
                    Some("edge A -> B"),
                ),
            ],
            None,
            timeout,
        )
        .await
        .unwrap_err();
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].label.as_deref(), Some("edge A -> C"));
        assert!(
            e[0].error.starts_with(&format!(
                "edge A -> C, file none.dat: copying {} to ",
                missing.display()
            )) && e[0].error.contains("No such file"),
            "{e:?}"
        );
        assert!(
            !to_c.join("good.dat").exists(),
            "the rest of its edge stopped"
        );
        assert_eq!(std::fs::read(to_b.join("good.dat")).unwrap(), b"data");
        let to_d = d.path().join("d");
        let e = stage_within(
            &[
                labelled("none.dat", &missing, &to_d.join("none.dat"), None),
                labelled(
                    "good.dat",
                    &good,
                    &to_d.join("good.dat"),
                    Some("edge A -> D"),
                ),
            ],
            None,
            timeout,
        )
        .await
        .unwrap_err();
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].label, None);
        assert!(!to_d.join("good.dat").exists(), "the copy stopped");
    }

    /// Making a working directory is bounded by the copy timeout, passed down: past it
    /// nothing is started and the error names the directory and the key; a failure names
    /// the directory and the cause.
    #[tokio::test]
    async fn making_a_working_directory_is_bounded_by_the_copy_timeout() {
        let d = open_dir();
        let dir = d.path().join("w/job-1");
        make_dir(&dir, None, std::time::Duration::from_secs(60))
            .await
            .unwrap();
        assert!(dir.is_dir());
        let late = d.path().join("late");
        let e = make_dir(&late, None, std::time::Duration::ZERO)
            .await
            .unwrap_err();
        assert_eq!(
            e,
            format!(
                "creating {} timed out after 0 s (copy_timeout_seconds); the copy was killed",
                late.display()
            )
        );
        assert!(!late.exists());
        let file = d.path().join("f");
        std::fs::write(&file, b"").unwrap();
        let e = make_dir(&file.join("sub"), None, std::time::Duration::from_secs(60))
            .await
            .unwrap_err();
        assert!(
            e.starts_with(&format!("creating {}: ", file.join("sub").display()))
                && e.contains("Not a directory"),
            "{e}"
        );
    }

    /// As root, a job's files are copied as its account: what it may read lands in
    /// directories it owns, owned by it; what only root may read is refused, naming the
    /// file and the account. Runs where the service would switch accounts (root, with a
    /// `nobody` account).
    #[tokio::test]
    async fn files_are_copied_as_the_jobs_account() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let Ok(Some(nobody)) = as_account("nobody") else {
            assert!(
                !foresight_rm::account::running_as_root()
                    || foresight_rm::account::lookup("nobody").unwrap().is_none(),
                "as root, nobody is an account of its own"
            );
            return;
        };
        let d = open_dir();
        let (open, secret) = (d.path().join("open.dat"), d.path().join("secret.dat"));
        std::fs::write(&open, b"open").unwrap();
        std::fs::write(&secret, b"secret").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        let work = d.path().join("work");
        std::fs::create_dir(&work).unwrap();
        std::os::unix::fs::chown(&work, Some(nobody.uid), Some(nobody.gid)).unwrap();
        let to = work.join("sub/open.dat");
        let copy = |from: &Path, to: &Path| Copy {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
            most: None,
        };
        let timeout = std::time::Duration::from_secs(60);
        stage(&[copy(&open, &to)], Some("nobody"), timeout)
            .await
            .unwrap();
        assert_eq!(std::fs::read(&to).unwrap(), b"open");
        for made in [&to, &work.join("sub")] {
            let m = std::fs::metadata(made).unwrap();
            assert_eq!(m.uid(), nobody.uid, "{}", made.display());
        }
        let e = stage(
            &[copy(&secret, &work.join("secret.dat"))],
            Some("nobody"),
            timeout,
        )
        .await
        .unwrap_err();
        assert!(
            e.starts_with(&format!("copying {} to ", secret.display()))
                && e.contains("as \"nobody\": ")
                && e.contains("Permission denied"),
            "{e}"
        );
        assert!(!work.join("secret.dat").exists());
        // Root itself copies as the service.
        stage(
            &[copy(&open, &d.path().join("as-root.dat"))],
            Some("root"),
            timeout,
        )
        .await
        .unwrap();
    }
}
