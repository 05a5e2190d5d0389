//! Running Slurm's commands: an [`Invocation`] (program, arguments, cluster, user, environment,
//! stdin) goes to a [`CommandRunner`], which returns a [`CommandOutput`]. [`SystemRunner`] runs
//! real processes; [`FakeRunner`] answers from canned outputs and records the calls, for tests.
//!
//! The cluster is chosen per call through `SLURM_CONF` on the child process, never through the
//! daemon's own environment: one daemon talks to several clusters at once, concurrently.

use super::error::SlurmError;
use async_trait::async_trait;
use std::fmt::{self, Write as _};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// The environment every Slurm command runs with, whatever the daemon's environment is: times
/// printed and parsed in UTC, in Slurm's standard ISO format, messages in English.
pub const FIXED_ENV: [(&str, &str); 3] = [
    ("TZ", "UTC"),
    ("SLURM_TIME_FORMAT", "standard"),
    ("LC_ALL", "C"),
];

/// `PATH` for the commands when the daemon has none.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// One command to run against one cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invocation {
    /// The program (`sbatch`, `squeue`, ...), looked up in `PATH`.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// `SLURM_CONF` for the child: which cluster. `None` leaves it unset (Slurm's default).
    pub slurm_conf: Option<PathBuf>,
    /// Run as this user (through `runuser -u USER --`, which needs root); `None` = as ourselves.
    pub user: Option<String>,
    /// Extra environment, on top of [`FIXED_ENV`] and `PATH`.
    pub env: Vec<(String, String)>,
    /// Bytes for the child's stdin (a batch script for `sbatch`); `None` = `/dev/null`.
    pub stdin: Option<String>,
}

impl Invocation {
    /// `program args...` with no cluster, user, extra environment or stdin.
    pub fn new<I, S>(program: &str, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Invocation {
            program: program.to_owned(),
            args: args.into_iter().map(Into::into).collect(),
            slurm_conf: None,
            user: None,
            env: Vec::new(),
            stdin: None,
        }
    }

    /// The command line as a shell would take it, with `SLURM_CONF` and the user in front
    /// (`[as fsowner] SLURM_CONF=/x/slurm.conf sbatch --parsable ...`): used in every error.
    pub fn display(&self) -> String {
        let mut s = String::new();
        if let Some(user) = &self.user {
            let _ = write!(s, "[as {user}] ");
        }
        if let Some(conf) = &self.slurm_conf {
            let _ = write!(s, "SLURM_CONF={} ", shell_quote(&conf.to_string_lossy()));
        }
        s.push_str(&shell_quote(&self.program));
        for a in &self.args {
            s.push(' ');
            s.push_str(&shell_quote(a));
        }
        s
    }
}

impl fmt::Display for Invocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display())
    }
}

fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%[]".contains(c));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// What a command printed and how it ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandOutput {
    /// The exit status; `None` when the process was killed by a signal.
    pub status: Option<i32>,
    /// Standard output (invalid UTF-8 replaced).
    pub stdout: String,
    /// Standard error (invalid UTF-8 replaced).
    pub stderr: String,
}

impl CommandOutput {
    /// A successful run that printed `stdout`.
    pub fn ok(stdout: impl Into<String>) -> Self {
        CommandOutput {
            status: Some(0),
            stdout: stdout.into(),
            stderr: String::new(),
        }
    }

    /// A run that ended with `status` and printed `stdout` and `stderr`.
    pub fn with(status: i32, stdout: impl Into<String>, stderr: impl Into<String>) -> Self {
        CommandOutput {
            status: Some(status),
            stdout: stdout.into(),
            stderr: stderr.into(),
        }
    }

    /// Exit status 0.
    pub fn success(&self) -> bool {
        self.status == Some(0)
    }
}

/// Runs Slurm commands. Object-safe, so the adapter holds an `Arc<dyn CommandRunner>` and tests
/// swap in a [`FakeRunner`].
#[async_trait]
pub trait CommandRunner: Send + Sync + fmt::Debug {
    /// Runs `inv` to completion. A non-zero exit status is not an error here (the caller knows
    /// what it means); only failing to run at all, or running too long, is.
    async fn run(&self, inv: &Invocation) -> Result<CommandOutput, SlurmError>;
}

/// Runs real processes with tokio: the environment is cleared and rebuilt from `PATH`,
/// [`FIXED_ENV`], `SLURM_CONF` and the invocation's own variables; another user goes through
/// `runuser -u USER --`; a command running longer than the timeout is killed.
#[derive(Clone, Debug)]
pub struct SystemRunner {
    timeout: Duration,
    path: String,
}

impl Default for SystemRunner {
    fn default() -> Self {
        SystemRunner::new(Duration::from_secs(60))
    }
}

impl SystemRunner {
    /// A runner that kills commands after `timeout`. Slurm's clients retry an unreachable
    /// controller for a while (MessageTimeout, 10 s by default, per attempt), so keep it above
    /// 30 s unless failing fast matters more than riding out a slow controller.
    pub fn new(timeout: Duration) -> Self {
        let path = std::env::var("PATH").ok().filter(|p| !p.is_empty());
        SystemRunner {
            timeout,
            path: path.unwrap_or_else(|| DEFAULT_PATH.to_owned()),
        }
    }

    /// The time a command may run.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}

#[async_trait]
impl CommandRunner for SystemRunner {
    async fn run(&self, inv: &Invocation) -> Result<CommandOutput, SlurmError> {
        let mut cmd = match &inv.user {
            Some(user) => {
                let mut c = tokio::process::Command::new("runuser");
                c.arg("-u").arg(user).arg("--").arg(&inv.program);
                c
            }
            None => tokio::process::Command::new(&inv.program),
        };
        cmd.args(&inv.args).env_clear().env("PATH", &self.path);
        for (k, v) in FIXED_ENV {
            cmd.env(k, v);
        }
        if let Some(conf) = &inv.slurm_conf {
            cmd.env("SLURM_CONF", conf);
        }
        for (k, v) in &inv.env {
            cmd.env(k, v);
        }
        cmd.stdin(if inv.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
        let spawn_err = |source| SlurmError::Spawn {
            command: inv.display(),
            source,
        };
        let mut child = cmd.spawn().map_err(spawn_err)?;
        let run = async {
            if let (Some(input), Some(mut stdin)) = (&inv.stdin, child.stdin.take()) {
                // A child that exits without reading all of its stdin is not our failure: its
                // status and stderr tell what happened.
                let _ = stdin.write_all(input.as_bytes()).await;
                drop(stdin);
            }
            child.wait_with_output().await
        };
        match tokio::time::timeout(self.timeout, run).await {
            Err(_) => Err(SlurmError::Timeout {
                command: inv.display(),
                seconds: self.timeout.as_secs(),
            }),
            Ok(Err(source)) => Err(spawn_err(source)),
            Ok(Ok(out)) => Ok(CommandOutput {
                status: out.status.code(),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            }),
        }
    }
}

/// A canned answer of a [`FakeRunner`]: the first rule whose program matches and whose
/// arguments start with `args_prefix` answers.
#[derive(Clone, Debug)]
struct Rule {
    program: String,
    args_prefix: Vec<String>,
    output: CommandOutput,
    once: bool,
}

/// A [`CommandRunner`] for tests: answers from rules, records every invocation. An invocation no
/// rule matches gets exit status 127 and `fake: no answer for ...` on stderr.
#[derive(Clone, Debug, Default)]
pub struct FakeRunner {
    rules: Arc<Mutex<Vec<Rule>>>,
    calls: Arc<Mutex<Vec<Invocation>>>,
}

impl FakeRunner {
    /// A runner without rules.
    pub fn new() -> Self {
        FakeRunner::default()
    }

    /// Answers every call of `program` whose arguments start with `args_prefix` with `output`.
    pub fn on(&self, program: &str, args_prefix: &[&str], output: CommandOutput) -> &Self {
        self.add(program, args_prefix, output, false)
    }

    /// Like [`FakeRunner::on`], but the rule answers once and is then removed; rules added with
    /// `once` for the same command answer in the order they were added.
    pub fn once(&self, program: &str, args_prefix: &[&str], output: CommandOutput) -> &Self {
        self.add(program, args_prefix, output, true)
    }

    fn add(&self, program: &str, args_prefix: &[&str], output: CommandOutput, once: bool) -> &Self {
        let rule = Rule {
            program: program.to_owned(),
            args_prefix: args_prefix.iter().map(|s| (*s).to_owned()).collect(),
            output,
            once,
        };
        lock(&self.rules).push(rule);
        self
    }

    /// Every invocation so far, in order.
    pub fn calls(&self) -> Vec<Invocation> {
        lock(&self.calls).clone()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A test that panicked while holding the lock must not hide the calls from the next one.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[async_trait]
impl CommandRunner for FakeRunner {
    async fn run(&self, inv: &Invocation) -> Result<CommandOutput, SlurmError> {
        lock(&self.calls).push(inv.clone());
        let mut rules = lock(&self.rules);
        let hit = rules.iter().position(|r| {
            r.program == inv.program
                && r.args_prefix.len() <= inv.args.len()
                && r.args_prefix.iter().zip(&inv.args).all(|(a, b)| a == b)
        });
        Ok(match hit {
            Some(i) if rules[i].once => rules.remove(i).output,
            Some(i) => rules[i].output.clone(),
            None => CommandOutput::with(127, "", format!("fake: no answer for {}", inv.display())),
        })
    }
}
