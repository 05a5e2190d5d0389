//! The command lines the adapter runs, built from typed requests and validated before anything
//! runs: [`SbatchRequest`] (submit, `--test-only` estimate), [`ReservationRequest`]
//! (`scontrol create reservation`), [`JobControl`] (`scontrol suspend|resume|requeue|hold|
//! release`), and the cancel, delete and query commands. Each returns the program's arguments;
//! [`super::SlurmClient`] adds the cluster and user.
//!
//! Times go to Slurm as `YYYY-MM-DDTHH:MM:SS`, read in UTC because every command runs with
//! `TZ=UTC` ([`super::FIXED_ENV`]).

use super::error::SlurmError;
use super::model::SlurmJobId;
use super::time::format_timestamp;
use std::path::PathBuf;

/// The prefix of the names of everything Foresight creates in Slurm: reservations
/// `foresight-<reservation id>` and parts (jobs) `foresight-<job>.<attempt>`, so that reconciliation after a restart can find its own.
pub const FORESIGHT_PREFIX: &str = "foresight-";

/// How one Foresight instance names what it creates in Slurm: `<prefix><reservation id>`
/// and `<prefix><job>.<attempt>`. Each instance sharing a Slurm cluster with others (peer
/// dispatchers, test daemons) has its own prefix, so reconciliation touches only its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Naming {
    prefix: String,
}

impl Default for Naming {
    fn default() -> Self {
        Naming {
            prefix: FORESIGHT_PREFIX.to_owned(),
        }
    }
}

impl Naming {
    /// Names of instance `instance`: `foresight-` for `foresight` (the default), else
    /// `<instance>-`. An instance name holds letters, digits and `_`, 1–40 of them, so that no
    /// prefix is a prefix of another's names.
    pub fn instance(instance: &str) -> Result<Naming, SlurmError> {
        let ok = !instance.is_empty()
            && instance.len() <= 40
            && instance
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !ok {
            return Err(SlurmError::invalid(format!(
                "instance name {instance:?}: use 1-40 letters, digits or _"
            )));
        }
        Ok(Naming {
            prefix: format!("{instance}-"),
        })
    }

    /// The Slurm name of reservation `id`.
    pub fn reservation(&self, id: u64) -> String {
        format!("{}{id}", self.prefix)
    }

    /// The reservation id in a name made by [`reservation`](Self::reservation); `None` for
    /// any other name (the site's own reservations, other instances').
    pub fn reservation_id(&self, name: &str) -> Option<u64> {
        let digits = name.strip_prefix(&self.prefix)?;
        if !canonical(digits) {
            return None;
        }
        digits.parse().ok()
    }

    /// The Slurm job name of one part: the one definition both submission (`sbatch -J`) and
    /// recognition in `squeue` use.
    pub fn part(&self, job: u64, attempt: u32) -> String {
        format!("{}{job}.{attempt}", self.prefix)
    }

    /// The `(job, attempt)` in a name made by [`part`](Self::part); `None` for any other name
    /// (the site's own jobs, other instances', or a name that only looks like ours: leading
    /// zeros, signs, spaces).
    pub fn parse_part(&self, name: &str) -> Option<(u64, u32)> {
        let (job, attempt) = name.strip_prefix(&self.prefix)?.split_once('.')?;
        if !canonical(job) || !canonical(attempt) {
            return None;
        }
        Some((job.parse().ok()?, attempt.parse().ok()?))
    }
}

fn canonical(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'))
}

/// The Slurm name of reservation `id` under the default naming: `foresight-<id>`.
pub fn reservation_name(id: u64) -> String {
    Naming::default().reservation(id)
}

/// The reservation id in a name made by [`reservation_name`].
pub fn foresight_reservation_id(name: &str) -> Option<u64> {
    Naming::default().reservation_id(name)
}

/// The Slurm job name of a part under the default naming: `foresight-<job>.<attempt>`.
pub fn part_name(job: u64, attempt: u32) -> String {
    Naming::default().part(job, attempt)
}

/// The `(job, attempt)` in a name made by [`part_name`].
pub fn parse_part_name(name: &str) -> Option<(u64, u32)> {
    Naming::default().parse_part(name)
}

/// One word for a POSIX shell: as is when it holds only characters no shell treats specially,
/// else in single quotes with each `'` written `'\''`. Inside single quotes nothing is special
/// (`$`, backquotes, `\`, `"`, newlines), so the shell reads back exactly `word`.
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:,+@%".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// A shell command line that runs `argv` exactly (each element [`shell_quote`]d, joined by
/// spaces): what goes into `sbatch --wrap`.
pub fn shell_command<S: AsRef<str>>(argv: &[S]) -> String {
    argv.iter()
        .map(|w| shell_quote(w.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whole minutes for a duration in seconds, rounded up, at least 1: Slurm's time limits and
/// reservation durations are minutes.
pub fn minutes_ceil(secs: u64) -> u32 {
    u32::try_from(secs.div_ceil(60)).unwrap_or(u32::MAX).max(1)
}

/// A Slurm name we pass as `Key=Value` or option value: non-empty, at most 200 characters of
/// `[A-Za-z0-9._+@-]`, so that no value can inject another key or option.
fn check_name(what: &str, s: &str) -> Result<(), SlurmError> {
    let ok = !s.is_empty()
        && s.len() <= 200
        && !s.starts_with('-')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._+@-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(SlurmError::invalid(format!(
            "{what} {s:?}: use 1-200 characters of letters, digits and ._+@- (not starting with -)"
        )))
    }
}

/// What a batch job runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobScript {
    /// `--wrap=COMMAND`: a shell command line, run by `sh -c` in a generated script.
    Wrap(String),
    /// A batch script file on the submitting host, absolute path (read by `sbatch` when it
    /// submits).
    File(PathBuf),
    /// The script's text, given to `sbatch` on its stdin (`#!` line first).
    Inline(String),
}

/// One `sbatch`: a job of `processors` tasks (`-n`) for `time_limit_minutes`, optionally bound
/// to a reservation and not to start before `begin`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SbatchRequest {
    /// `-J`: the job's name.
    pub name: String,
    /// `-n`: tasks, one CPU each.
    pub processors: u32,
    /// `--time`: minutes (see [`minutes_ceil`]); [`SbatchRequest::DEFAULT_TIME_LIMIT`] for no
    /// `--time` at all (the partition's default).
    pub time_limit_minutes: u32,
    /// `--reservation`: run inside this reservation only.
    pub reservation: Option<String>,
    /// `--begin`: not before this Unix second.
    pub begin: Option<i64>,
    /// `-p`: the partition (else the cluster's default).
    pub partition: Option<String>,
    /// `-A`: the account.
    pub account: Option<String>,
    /// `--chdir`: the job's working directory (must exist and be writable by the job's user on
    /// the compute nodes; the default is the submitting process's directory).
    pub workdir: Option<PathBuf>,
    /// `-o`: standard output file (Slurm patterns like `%j` allowed).
    pub output: Option<String>,
    /// `-e`: standard error file.
    pub error: Option<String>,
    /// `--comment`: free text kept with the job (e.g. the Foresight job id).
    pub comment: Option<String>,
    /// `-H`: submit held.
    pub hold: bool,
    /// `--export`: `None` = Slurm's default (ALL of the command's environment, which the runner
    /// reduces to `PATH`, `TZ`, `SLURM_TIME_FORMAT`, `LC_ALL`); `Some(vars)` = `NONE` plus these
    /// `NAME=VALUE` pairs (values must not contain `,`).
    pub export: Option<Vec<(String, String)>>,
    /// What to run.
    pub script: JobScript,
}

impl SbatchRequest {
    /// The `time_limit_minutes` that passes no `--time`, leaving the job Slurm's default (the
    /// partition's `DefaultTime`, else its `MaxTime`). `u32::MAX` is Slurm's own `INFINITE`, so
    /// no real limit in minutes collides with it.
    pub const DEFAULT_TIME_LIMIT: u32 = u32::MAX;

    /// A request for `processors` × `time_limit_minutes` running `script`, with nothing else set.
    pub fn new(name: &str, processors: u32, time_limit_minutes: u32, script: JobScript) -> Self {
        SbatchRequest {
            name: name.to_owned(),
            processors,
            time_limit_minutes,
            reservation: None,
            begin: None,
            partition: None,
            account: None,
            workdir: None,
            output: None,
            error: None,
            comment: None,
            hold: false,
            export: None,
            script,
        }
    }

    /// The arguments of `sbatch`: `--parsable` for a submission, `--test-only` for an estimate;
    /// and the script for stdin, for [`JobScript::Inline`].
    pub fn args(&self, test_only: bool) -> Result<(Vec<String>, Option<String>), SlurmError> {
        check_name("job name", &self.name)?;
        if self.processors == 0 {
            return Err(SlurmError::invalid("a job needs at least one processor"));
        }
        if self.time_limit_minutes == 0 {
            return Err(SlurmError::invalid(
                "a job needs a time limit of at least one minute",
            ));
        }
        let mut a = vec![if test_only {
            "--test-only"
        } else {
            "--parsable"
        }
        .to_owned()];
        a.push(format!("--job-name={}", self.name));
        a.push(format!("--ntasks={}", self.processors));
        if self.time_limit_minutes != Self::DEFAULT_TIME_LIMIT {
            a.push(format!("--time={}", self.time_limit_minutes));
        }
        if let Some(r) = &self.reservation {
            check_name("reservation", r)?;
            a.push(format!("--reservation={r}"));
        }
        if let Some(t) = self.begin {
            a.push(format!("--begin={}", format_timestamp(t)));
        }
        if let Some(p) = &self.partition {
            check_name("partition", p)?;
            a.push(format!("--partition={p}"));
        }
        if let Some(acct) = &self.account {
            check_name("account", acct)?;
            a.push(format!("--account={acct}"));
        }
        if let Some(d) = &self.workdir {
            a.push(format!("--chdir={}", d.display()));
        }
        if let Some(o) = &self.output {
            a.push(format!("--output={o}"));
        }
        if let Some(e) = &self.error {
            a.push(format!("--error={e}"));
        }
        if let Some(c) = &self.comment {
            a.push(format!("--comment={c}"));
        }
        if self.hold {
            a.push("--hold".to_owned());
        }
        if let Some(vars) = &self.export {
            let mut spec = vec!["NONE".to_owned()];
            for (k, v) in vars {
                let key_ok = !k.is_empty()
                    && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && !k.starts_with(|c: char| c.is_ascii_digit());
                if !key_ok || v.contains(',') {
                    return Err(SlurmError::invalid(format!(
                        "--export variable {k}={v:?}: names are [A-Za-z_][A-Za-z0-9_]*, values have no ','"
                    )));
                }
                spec.push(format!("{k}={v}"));
            }
            a.push(format!("--export={}", spec.join(",")));
        }
        let stdin = match &self.script {
            JobScript::Wrap(cmd) => {
                if cmd.trim().is_empty() {
                    return Err(SlurmError::invalid("--wrap needs a command"));
                }
                a.push(format!("--wrap={cmd}"));
                None
            }
            JobScript::File(p) => {
                if !p.is_absolute() {
                    return Err(SlurmError::invalid(format!(
                        "batch script {}: give an absolute path",
                        p.display()
                    )));
                }
                a.push(p.display().to_string());
                None
            }
            JobScript::Inline(text) => {
                if !text.starts_with("#!") {
                    return Err(SlurmError::invalid(
                        "an inline batch script must start with #!",
                    ));
                }
                Some(text.clone())
            }
        };
        Ok((a, stdin))
    }
}

/// When something starts: a reservation (`StartTime=`), or a pending job (`--begin`, `scontrol
/// update StartTime=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartTime {
    /// `now`.
    Now,
    /// At this Unix second.
    At(i64),
}

/// How much a reservation holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReservationSize {
    /// `CoreCnt=N`: N cores (CPUs), which Slurm may take from several nodes. What the planner's
    /// processor counts map to.
    Cores(u32),
    /// `NodeCnt=N`: N whole nodes.
    Nodes(u32),
    /// `Nodes=LIST`: these nodes (a Slurm host list).
    NodeList(String),
    /// `Nodes=A,B,.. CoreCnt=a,b,..`: so many cores on each of these nodes. For a
    /// reservation that ignores running jobs, which would otherwise take any cores, busy
    /// ones too.
    CoresOn(Vec<(String, u32)>),
}

/// One `scontrol create reservation`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReservationRequest {
    /// `ReservationName`: see [`reservation_name`].
    pub name: String,
    /// `StartTime`.
    pub start: StartTime,
    /// `Duration`, minutes.
    pub duration_minutes: u32,
    /// `CoreCnt` / `NodeCnt` / `Nodes`.
    pub size: ReservationSize,
    /// `Users`: who may run in it (at least one of users and accounts is needed).
    pub users: Vec<String>,
    /// `Accounts`: which accounts may run in it (needs accounting, i.e. slurmdbd).
    pub accounts: Vec<String>,
    /// `PartitionName`: else the default partition.
    pub partition: Option<String>,
    /// `Flags`, e.g. `IGNORE_JOBS` (accept overlap with running jobs), `PURGE_COMP`.
    pub flags: Vec<String>,
}

impl ReservationRequest {
    /// Foresight's reservation `id` (named [`reservation_name`]) of `cores` CPUs from `start`
    /// for `duration_minutes`, for `user` only.
    pub fn foresight(
        id: u64,
        start: StartTime,
        duration_minutes: u32,
        cores: u32,
        user: &str,
    ) -> Self {
        ReservationRequest {
            name: reservation_name(id),
            start,
            duration_minutes,
            size: ReservationSize::Cores(cores),
            users: vec![user.to_owned()],
            accounts: Vec::new(),
            partition: None,
            flags: Vec::new(),
        }
    }

    /// The arguments of `scontrol`: `create reservation ReservationName=... StartTime=...
    /// Duration=... CoreCnt|NodeCnt|Nodes=... [PartitionName=...] [Users=...] [Accounts=...]
    /// [Flags=...]`.
    pub fn args(&self) -> Result<Vec<String>, SlurmError> {
        check_name("reservation name", &self.name)?;
        if self.duration_minutes == 0 {
            return Err(SlurmError::invalid(
                "a reservation lasts at least one minute",
            ));
        }
        if self.users.is_empty() && self.accounts.is_empty() {
            return Err(SlurmError::invalid("a reservation needs users or accounts"));
        }
        let mut a = vec![
            "create".to_owned(),
            "reservation".to_owned(),
            format!("ReservationName={}", self.name),
            format!(
                "StartTime={}",
                match self.start {
                    StartTime::Now => "now".to_owned(),
                    StartTime::At(t) => format_timestamp(t),
                }
            ),
            format!("Duration={}", self.duration_minutes),
        ];
        let size = match &self.size {
            ReservationSize::Cores(0) | ReservationSize::Nodes(0) => {
                return Err(SlurmError::invalid(
                    "a reservation holds at least one core or node",
                ))
            }
            ReservationSize::Cores(n) => format!("CoreCnt={n}"),
            ReservationSize::Nodes(n) => format!("NodeCnt={n}"),
            ReservationSize::NodeList(list) => {
                let ok = !list.is_empty()
                    && list
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "._-[],".contains(c));
                if !ok {
                    return Err(SlurmError::invalid(format!("node list {list:?}")));
                }
                format!("Nodes={list}")
            }
            ReservationSize::CoresOn(per_node) => {
                if per_node.is_empty() || per_node.iter().any(|(_, n)| *n == 0) {
                    return Err(SlurmError::invalid(
                        "a reservation holds at least one core on each node it names",
                    ));
                }
                for (node, _) in per_node {
                    check_name("node", node)?;
                }
                let nodes: Vec<&str> = per_node.iter().map(|(n, _)| n.as_str()).collect();
                let cores: Vec<String> = per_node.iter().map(|(_, c)| c.to_string()).collect();
                a.push(format!("Nodes={}", nodes.join(",")));
                format!("CoreCnt={}", cores.join(","))
            }
        };
        a.push(size);
        if let Some(p) = &self.partition {
            check_name("partition", p)?;
            a.push(format!("PartitionName={p}"));
        }
        for (key, list) in [
            ("Users", &self.users),
            ("Accounts", &self.accounts),
            ("Flags", &self.flags),
        ] {
            if list.is_empty() {
                continue;
            }
            for item in list {
                check_name(key, item)?;
            }
            a.push(format!("{key}={}", list.join(",")));
        }
        Ok(a)
    }
}

/// The arguments of `scontrol delete reservation NAME`.
pub fn delete_reservation_args(name: &str) -> Result<Vec<String>, SlurmError> {
    check_name("reservation name", name)?;
    Ok(vec![
        "delete".to_owned(),
        "reservation".to_owned(),
        name.to_owned(),
    ])
}

/// The arguments of `scancel ID...` (one command for many jobs). Note that 22.05 exits 0 and
/// says nothing for an id it does not know.
pub fn scancel_args(jobs: &[SlurmJobId]) -> Result<Vec<String>, SlurmError> {
    if jobs.is_empty() {
        return Err(SlurmError::invalid("scancel needs at least one job id"));
    }
    Ok(jobs.iter().map(ToString::to_string).collect())
}

/// A change of a job's state through `scontrol`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JobControl {
    /// `scontrol suspend`: stop a running job (SIGSTOP), keeping its CPUs.
    Suspend,
    /// `scontrol resume`: continue a suspended job.
    Resume,
    /// `scontrol requeue`: back to pending (Slurm then holds it ~120 s as `BeginTime`; use
    /// [`update_begin_args`] to release it earlier).
    Requeue,
    /// `scontrol hold`: a pending job is not scheduled.
    Hold,
    /// `scontrol release`: undo a hold.
    Release,
}

impl JobControl {
    /// The `scontrol` verb.
    pub fn verb(self) -> &'static str {
        match self {
            JobControl::Suspend => "suspend",
            JobControl::Resume => "resume",
            JobControl::Requeue => "requeue",
            JobControl::Hold => "hold",
            JobControl::Release => "release",
        }
    }

    /// The arguments of `scontrol VERB ID`.
    pub fn args(self, job: SlurmJobId) -> Vec<String> {
        vec![self.verb().to_owned(), job.to_string()]
    }
}

/// The arguments of `scontrol update ReservationName=NAME StartTime=T Duration=M`: a
/// reservation moved (its processors stay as they are; Slurm checks they are free then).
pub fn update_reservation_args(
    name: &str,
    start: StartTime,
    duration_minutes: u32,
) -> Result<Vec<String>, SlurmError> {
    check_name("reservation name", name)?;
    if duration_minutes == 0 {
        return Err(SlurmError::invalid(
            "a reservation lasts at least one minute",
        ));
    }
    let t = match start {
        StartTime::Now => "now".to_owned(),
        StartTime::At(t) => format_timestamp(t),
    };
    Ok(vec![
        "update".to_owned(),
        format!("ReservationName={name}"),
        format!("StartTime={t}"),
        format!("Duration={duration_minutes}"),
    ])
}

/// The arguments of `scontrol update ReservationName=NAME EndTime=T`: a reservation that has
/// begun stretched or shortened in place. Slurm refuses any `StartTime=` for a begun
/// reservation, even its own start, so only its end can move.
pub fn extend_reservation_args(name: &str, end: i64) -> Result<Vec<String>, SlurmError> {
    check_name("reservation name", name)?;
    Ok(vec![
        "update".to_owned(),
        format!("ReservationName={name}"),
        format!("EndTime={}", format_timestamp(end)),
    ])
}

/// The arguments of `scontrol update JobId=ID StartTime=T`: a pending job's earliest start
/// (`--begin`), e.g. after a requeue or a re-plan.
pub fn update_begin_args(job: SlurmJobId, begin: StartTime) -> Vec<String> {
    let t = match begin {
        StartTime::Now => "now".to_owned(),
        StartTime::At(t) => format_timestamp(t),
    };
    vec![
        "update".to_owned(),
        format!("JobId={job}"),
        format!("StartTime={t}"),
    ]
}

/// The queries of a [`super::model::Snapshot`], as `(program, arguments)`.
pub const SINFO_JSON: (&str, &[&str]) = ("sinfo", &["--json"]);
/// All jobs, JSON.
pub const SQUEUE_JSON: (&str, &[&str]) = ("squeue", &["--json"]);
/// All partitions, one line each.
pub const SHOW_PARTITIONS: (&str, &[&str]) = ("scontrol", &["show", "partition", "-o"]);
/// All reservations, one line each.
pub const SHOW_RESERVATIONS: (&str, &[&str]) = ("scontrol", &["show", "reservation", "-o"]);
/// Is the controller up.
pub const PING: (&str, &[&str]) = ("scontrol", &["ping"]);

#[cfg(test)]
mod tests {
    use super::*;

    /// A begun reservation moves only its end: Slurm refuses any `StartTime=` for it.
    #[test]
    fn a_begun_reservation_is_stretched_by_its_end_alone() {
        let args = extend_reservation_args("foresight-1", 1_796_086_970).unwrap();
        assert_eq!(
            args,
            [
                "update",
                "ReservationName=foresight-1",
                "EndTime=2026-12-01T01:02:50"
            ]
        );
        assert!(extend_reservation_args("a b", 0).is_err());
    }

    /// Two instances on one cluster never read each other's names as their own.
    #[test]
    fn instances_keep_to_their_own_names() {
        let default = Naming::default();
        let test = Naming::instance("t42").unwrap();
        assert_eq!(test.part(7, 1), "t42-7.1");
        assert_eq!(test.reservation(7), "t42-7");
        assert_eq!(test.parse_part("t42-7.1"), Some((7, 1)));
        assert_eq!(test.reservation_id("t42-7"), Some(7));
        assert_eq!(default.parse_part("t42-7.1"), None);
        assert_eq!(test.parse_part("foresight-7.1"), None);
        let nested = Naming::instance("foresight_b").unwrap();
        assert_eq!(default.parse_part(&nested.part(7, 1)), None);
        assert_eq!(default.reservation_id(&nested.reservation(7)), None);
        assert_eq!(Naming::instance("foresight").unwrap(), default);
        for bad in ["", "a-b", "a b", "é", &"x".repeat(41)] {
            assert!(Naming::instance(bad).is_err(), "{bad:?}");
        }
    }

    /// Cores on named nodes: both lists, in the same order; none empty or zero.
    #[test]
    fn cores_on_named_nodes() {
        let mut r = ReservationRequest::foresight(3, StartTime::Now, 2, 6, "root");
        r.size = ReservationSize::CoresOn(vec![("c1-n2".into(), 4), ("c1-n3".into(), 2)]);
        let a = r.args().unwrap();
        assert!(a.contains(&"Nodes=c1-n2,c1-n3".to_owned()), "{a:?}");
        assert!(a.contains(&"CoreCnt=4,2".to_owned()), "{a:?}");
        for bad in [
            vec![],
            vec![("c1-n2".to_owned(), 0)],
            vec![("n 1".to_owned(), 2)],
        ] {
            r.size = ReservationSize::CoresOn(bad.clone());
            assert!(r.args().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn part_names_round_trip() {
        for (job, attempt) in [(0, 0), (42, 1), (u64::MAX, u32::MAX)] {
            let name = part_name(job, attempt);
            assert_eq!(parse_part_name(&name), Some((job, attempt)), "{name}");
        }
        assert_eq!(part_name(42, 1), "foresight-42.1");
        for other in [
            "foresight-42",
            "foresight-42.",
            "foresight-.1",
            "foresight-042.1",
            "foresight-42.01",
            "foresight-+42.1",
            "foresight-42.1.2",
            "foresight-4 2.1",
            "foresight-18446744073709551616.0",
            "foresight-1.4294967296",
            "Foresight-42.1",
            "foresight-job-1",
            "ok",
            "",
        ] {
            assert_eq!(parse_part_name(other), None, "{other}");
        }
        // Part names and reservation names never mistake each other.
        assert_eq!(foresight_reservation_id(&part_name(4, 2)), None);
        assert_eq!(parse_part_name(&reservation_name(4)), None);
    }

    #[test]
    fn shell_quoting_is_exact() {
        let cases = [
            ("plain", "plain"),
            ("/usr/bin/x-1.2_a:b,c+d@e%f", "/usr/bin/x-1.2_a:b,c+d@e%f"),
            ("", "''"),
            ("a b", "'a b'"),
            ("it's", r"'it'\''s'"),
            ("$HOME", "'$HOME'"),
            ("A=1", "'A=1'"),
            ("~", "'~'"),
            ("\"q\" `x` \\ *", "'\"q\" `x` \\ *'"),
        ];
        for (word, want) in cases {
            assert_eq!(shell_quote(word), want, "{word:?}");
        }
        assert_eq!(shell_command(&["echo", "a b", "$x"]), "echo 'a b' '$x'");
    }

    /// A real shell reads the quoted words back exactly.
    #[test]
    fn a_shell_reads_the_words_back() {
        let words = [
            "a b",
            "it's",
            "$HOME ${X} $(id) `id`",
            "\"double\" 'single'",
            "back\\slash",
            "new\nline\ttab",
            "",
            "*?[a]",
            "; exit 3",
            "ünï©ødé",
        ];
        let line = format!("printf '%s\\0' {}", shell_command(&words));
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&line)
            .output()
            .expect("sh");
        assert!(out.status.success(), "{out:?}");
        let got: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .split_terminator('\0')
            .map(str::to_owned)
            .collect();
        assert_eq!(got, words);
    }

    #[test]
    fn the_default_time_limit_passes_no_time() {
        let r = SbatchRequest::new(
            "j",
            1,
            SbatchRequest::DEFAULT_TIME_LIMIT,
            JobScript::Wrap("true".into()),
        );
        let (args, _) = r.args(false).expect("args");
        assert!(args.iter().all(|a| !a.starts_with("--time")), "{args:?}");
        let r = SbatchRequest::new("j", 1, 5, JobScript::Wrap("true".into()));
        assert!(r
            .args(false)
            .expect("args")
            .0
            .contains(&"--time=5".to_owned()));
    }
}
