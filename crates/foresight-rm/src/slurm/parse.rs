//! Parsers of what Slurm 22.05 prints, one per command the adapter runs. Each takes the
//! command line (for its errors) and the text, and returns typed data or a
//! [`SlurmError::Parse`] naming the command and quoting the offending text; none panics on
//! any input.
//!
//! | command | format | parser |
//! |---|---|---|
//! | `sinfo --json` | JSON, openapi v0.0.38 | [`parse_sinfo_json`] |
//! | `squeue --json` | JSON, openapi v0.0.38 | [`parse_squeue_json`] |
//! | `scontrol show partition -o` | one `Key=Value ...` line per partition | [`parse_partitions`] |
//! | `scontrol show reservation -o` | one `Key=Value ...` line per reservation | [`parse_reservations`] |
//! | `sbatch --parsable` | `ID` or `ID;CLUSTER` | [`parse_sbatch_parsable`] |
//! | `sbatch --test-only` | stderr `sbatch: Job N to start at T using C processors on nodes L in partition P` | [`parse_test_only`] |
//! | `scontrol create reservation` | `Reservation created: NAME` | [`parse_reservation_created`] |
//! | `scontrol ping` | `Slurmctld(primary) at HOST is UP` | [`parse_ping`] |
//! | any, on failure | exit status + stderr | [`check_status`] |

use super::error::{excerpt, FailureKind, SlurmError};
use super::model::{
    Job, JobState, Node, NodeState, Partition, Reservation, SlurmJobId, Submitted, TestOnly,
    TimeLimit,
};
use super::runner::CommandOutput;
use super::time::{parse_duration, parse_timestamp};
use serde::Deserialize;

/// The items of a `--json` answer and the Slurm release that produced them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonAnswer<T> {
    /// `meta.Slurm.release` (`22.05.8`), when present.
    pub release: Option<String>,
    /// The nodes or jobs.
    pub items: Vec<T>,
}

/// `Err(SlurmError::Failed)` when the command did not exit 0, with the failure classified from
/// what it printed (stderr, else stdout); `Ok(())` otherwise.
pub fn check_status(command: &str, out: &CommandOutput) -> Result<(), SlurmError> {
    if out.success() {
        return Ok(());
    }
    let said = if out.stderr.trim().is_empty() {
        out.stdout.trim()
    } else {
        out.stderr.trim()
    };
    Err(SlurmError::Failed {
        command: command.to_owned(),
        status: out.status,
        kind: FailureKind::classify(said),
        message: excerpt(said),
    })
}

// ---------------------------------------------------------------------------------- JSON --

#[derive(Deserialize)]
struct RawMeta {
    #[serde(rename = "Slurm")]
    slurm: Option<RawSlurmMeta>,
}

#[derive(Deserialize)]
struct RawSlurmMeta {
    release: Option<String>,
}

#[derive(Deserialize)]
struct RawError {
    description: Option<String>,
    error: Option<String>,
    error_number: Option<i64>,
    errno: Option<i64>,
    source: Option<String>,
}

impl RawError {
    fn text(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        for p in [&self.description, &self.error, &self.source]
            .into_iter()
            .flatten()
        {
            if !p.is_empty() {
                parts.push(p.clone());
            }
        }
        if let Some(n) = self.error_number.or(self.errno) {
            parts.push(format!("error number {n}"));
        }
        if parts.is_empty() {
            "error without description".to_owned()
        } else {
            parts.join(": ")
        }
    }
}

#[derive(Deserialize)]
struct RawNodes {
    meta: Option<RawMeta>,
    #[serde(default)]
    errors: Option<Vec<RawError>>,
    nodes: Option<Vec<RawNode>>,
}

#[derive(Deserialize)]
struct RawNode {
    name: String,
    state: String,
    #[serde(default)]
    state_flags: Option<Vec<String>>,
    cpus: u32,
    alloc_cpus: Option<u32>,
    idle_cpus: Option<u32>,
    #[serde(default)]
    partitions: Option<Vec<String>>,
    reason: Option<String>,
    real_memory: Option<u64>,
    alloc_memory: Option<u64>,
}

#[derive(Deserialize)]
struct RawJobs {
    meta: Option<RawMeta>,
    #[serde(default)]
    errors: Option<Vec<RawError>>,
    jobs: Option<Vec<RawJob>>,
}

#[derive(Deserialize)]
struct RawJob {
    job_id: u32,
    name: Option<String>,
    user_name: String,
    account: Option<String>,
    partition: Option<String>,
    job_state: String,
    state_reason: Option<String>,
    cpus: u32,
    node_count: Option<u32>,
    nodes: Option<String>,
    time_limit: Option<u64>,
    submit_time: Option<i64>,
    eligible_time: Option<i64>,
    start_time: Option<i64>,
    end_time: Option<i64>,
    priority: Option<u64>,
    resv_name: Option<String>,
    exit_code: Option<i64>,
    restart_cnt: Option<u32>,
    cluster: Option<String>,
}

fn from_json<'a, T: Deserialize<'a>>(command: &str, text: &'a str) -> Result<T, SlurmError> {
    serde_json::from_str(text).map_err(|e| {
        let near = line_excerpt(text, e.line(), e.column());
        SlurmError::parse(command, format!("not the JSON expected: {e}"), &near)
    })
}

/// The text around `line:column` (1-based), for JSON errors: the offending line, or its part
/// near the column when the line is long.
fn line_excerpt(text: &str, line: usize, column: usize) -> String {
    let l = text.lines().nth(line.saturating_sub(1)).unwrap_or(text);
    let chars: Vec<char> = l.chars().collect();
    let from = column.saturating_sub(80).min(chars.len());
    let to = (column + 80).min(chars.len()).max(from);
    chars[from..to].iter().collect()
}

fn json_errors(command: &str, errors: Option<Vec<RawError>>) -> Result<(), SlurmError> {
    let errors = errors.unwrap_or_default();
    if errors.is_empty() {
        return Ok(());
    }
    let message = errors
        .iter()
        .map(RawError::text)
        .collect::<Vec<_>>()
        .join("; ");
    Err(SlurmError::Failed {
        command: command.to_owned(),
        status: Some(0),
        kind: FailureKind::classify(&message),
        message: excerpt(&message),
    })
}

fn release(meta: Option<RawMeta>) -> Option<String> {
    meta.and_then(|m| m.slurm).and_then(|s| s.release)
}

fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty() && s != "(null)")
}

fn when(t: Option<i64>) -> Option<i64> {
    t.filter(|&t| t > 0)
}

/// Parses `sinfo --json`. A non-empty `errors` array (what 22.05 prints, with exit status 0,
/// when the controller is down) is a [`SlurmError::Failed`].
pub fn parse_sinfo_json(command: &str, text: &str) -> Result<JsonAnswer<Node>, SlurmError> {
    let raw: RawNodes = from_json(command, text)?;
    json_errors(command, raw.errors)?;
    let nodes = raw
        .nodes
        .ok_or_else(|| SlurmError::parse(command, "no `nodes` array", text))?;
    let items = nodes
        .into_iter()
        .map(|n| {
            let alloc = n.alloc_cpus.unwrap_or(0);
            Node {
                state: NodeState::from_slurm(&n.state),
                flags: n.state_flags.unwrap_or_default(),
                alloc_cpus: alloc,
                idle_cpus: n.idle_cpus.unwrap_or_else(|| n.cpus.saturating_sub(alloc)),
                cpus: n.cpus,
                partitions: n.partitions.unwrap_or_default(),
                reason: non_empty(n.reason),
                real_memory_mb: n.real_memory.unwrap_or(0),
                alloc_memory_mb: n.alloc_memory.unwrap_or(0),
                name: n.name,
            }
        })
        .collect();
    Ok(JsonAnswer {
        release: release(raw.meta),
        items,
    })
}

/// Parses `squeue --json`: every job the controller knows, including finished ones. A non-empty
/// `errors` array is a [`SlurmError::Failed`].
pub fn parse_squeue_json(command: &str, text: &str) -> Result<JsonAnswer<Job>, SlurmError> {
    let raw: RawJobs = from_json(command, text)?;
    json_errors(command, raw.errors)?;
    let jobs = raw
        .jobs
        .ok_or_else(|| SlurmError::parse(command, "no `jobs` array", text))?;
    let items = jobs
        .into_iter()
        .map(|j| {
            // 22.05 prints null for INFINITE; older plugins printed NO_VAL/INFINITE as numbers.
            let time_limit = match j.time_limit {
                Some(m) if m < u64::from(u32::MAX - 1) => TimeLimit::Minutes(m as u32),
                _ => TimeLimit::Unlimited,
            };
            let raw_exit = j.exit_code.unwrap_or(0);
            let signal = raw_exit & 0x7f;
            Job {
                id: SlurmJobId(j.job_id),
                name: j.name.unwrap_or_default(),
                user: j.user_name,
                account: non_empty(j.account),
                partition: j.partition.unwrap_or_default(),
                state: JobState::from_slurm(&j.job_state),
                reason: non_empty(j.state_reason).filter(|r| r != "None"),
                cpus: j.cpus,
                node_count: j.node_count.unwrap_or(0),
                nodes: non_empty(j.nodes),
                time_limit,
                submit_time: j.submit_time.unwrap_or(0),
                eligible_time: when(j.eligible_time),
                start_time: when(j.start_time),
                end_time: when(j.end_time),
                priority: j.priority.unwrap_or(0),
                reservation: non_empty(j.resv_name),
                exit_code: ((raw_exit >> 8) & 0xff) as i32,
                exit_signal: (signal != 0).then_some(signal as i32),
                restarts: j.restart_cnt.unwrap_or(0),
                cluster: j.cluster.unwrap_or_default(),
            }
        })
        .collect();
    Ok(JsonAnswer {
        release: release(raw.meta),
        items,
    })
}

// ----------------------------------------------------------------------------- Key=Value --

/// Splits one `scontrol show ... -o` line into its `Key=Value` pairs, in order (keys may repeat:
/// a core reservation lists `NodeName=... CoreIDs=...` once per node). A word without `=` (or
/// whose part before `=` is not a key) continues the previous value, after one space, as in
/// `OS=Linux 6.1.0 #1 SMP`. `None` when the line does not start with a pair.
pub fn parse_key_values(line: &str) -> Option<Vec<(String, String)>> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for word in line.split_whitespace() {
        match word.split_once('=') {
            Some((k, v)) if is_key(k) => pairs.push((k.to_owned(), v.to_owned())),
            _ => {
                let (_, value) = pairs.last_mut()?;
                if !value.is_empty() {
                    value.push(' ');
                }
                value.push_str(word);
            }
        }
    }
    if pairs.is_empty() {
        None
    } else {
        Some(pairs)
    }
}

fn is_key(k: &str) -> bool {
    let mut chars = k.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "_:/.".contains(c))
}

/// A record's pairs, looked up by key (the first occurrence).
struct Record<'a> {
    command: &'a str,
    line: &'a str,
    pairs: Vec<(String, String)>,
}

impl<'a> Record<'a> {
    fn new(command: &'a str, line: &'a str) -> Result<Self, SlurmError> {
        let pairs = parse_key_values(line)
            .ok_or_else(|| SlurmError::parse(command, "expected Key=Value pairs", line))?;
        Ok(Record {
            command,
            line,
            pairs,
        })
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn err(&self, reason: String) -> SlurmError {
        SlurmError::parse(self.command, reason, self.line)
    }

    fn required(&self, key: &str) -> Result<&str, SlurmError> {
        self.get(key).ok_or_else(|| self.err(format!("no {key}=")))
    }

    fn number(&self, key: &str) -> Result<u32, SlurmError> {
        let v = self.required(key)?;
        v.parse()
            .map_err(|_| self.err(format!("{key}={v} is not a count")))
    }

    fn time(&self, key: &str) -> Result<i64, SlurmError> {
        let v = self.required(key)?;
        parse_timestamp(v).ok_or_else(|| {
            self.err(format!(
                "{key}={v} is not a time YYYY-MM-DDTHH:MM:SS (UTC expected)"
            ))
        })
    }

    fn optional(&self, key: &str) -> Option<String> {
        self.get(key)
            .map(str::to_owned)
            .and_then(|v| non_empty(Some(v)))
    }

    fn list(&self, key: &str) -> Vec<String> {
        self.optional(key)
            .map(|v| {
                v.split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    fn limit(&self, key: &str) -> Result<Option<TimeLimit>, SlurmError> {
        let v = self.required(key)?;
        match v.to_ascii_uppercase().as_str() {
            "UNLIMITED" | "INFINITE" => Ok(Some(TimeLimit::Unlimited)),
            "NONE" | "N/A" => Ok(None),
            _ => {
                let secs = parse_duration(v)
                    .filter(|&s| s <= i64::from(u32::MAX) * 60)
                    .ok_or_else(|| self.err(format!("{key}={v} is not a time limit")))?;
                // Slurm's limits are minutes; a limit in seconds is rounded up.
                Ok(Some(TimeLimit::Minutes(((secs + 59) / 60) as u32)))
            }
        }
    }
}

/// The lines of a `scontrol show X -o` answer, without the `No X in the system` of an empty one.
fn records<'a>(text: &'a str, empty_line: &str) -> impl Iterator<Item = &'a str> + 'a {
    let empty = empty_line.to_owned();
    text.lines()
        .map(str::trim)
        .filter(move |l| !l.is_empty() && *l != empty)
}

/// Parses `scontrol show partition -o`.
pub fn parse_partitions(command: &str, text: &str) -> Result<Vec<Partition>, SlurmError> {
    records(text, "No partitions in the system")
        .map(|line| {
            let r = Record::new(command, line)?;
            Ok(Partition {
                name: r.required("PartitionName")?.to_owned(),
                nodes: r.optional("Nodes"),
                total_cpus: r.number("TotalCPUs")?,
                total_nodes: r.number("TotalNodes")?,
                state: r.required("State")?.to_owned(),
                default: r
                    .get("Default")
                    .is_some_and(|v| v.eq_ignore_ascii_case("YES")),
                default_time: r.limit("DefaultTime")?,
                max_time: r.limit("MaxTime")?.unwrap_or(TimeLimit::Unlimited),
            })
        })
        .collect()
}

/// Parses `scontrol show reservation -o` (22.05 has no `--json` for `scontrol`).
pub fn parse_reservations(command: &str, text: &str) -> Result<Vec<Reservation>, SlurmError> {
    records(text, "No reservations in the system")
        .map(|line| {
            let r = Record::new(command, line)?;
            let (start, end) = (r.time("StartTime")?, r.time("EndTime")?);
            if end < start {
                return Err(r.err("EndTime is before StartTime".to_owned()));
            }
            let mut cores = Vec::new();
            let mut node: Option<&str> = None;
            for (k, v) in &r.pairs {
                match k.as_str() {
                    "NodeName" => node = Some(v),
                    "CoreIDs" => {
                        let n = node
                            .take()
                            .ok_or_else(|| r.err("CoreIDs= without NodeName=".into()))?;
                        cores.push((n.to_owned(), v.clone()));
                    }
                    _ => {}
                }
            }
            Ok(Reservation {
                name: r.required("ReservationName")?.to_owned(),
                start,
                end,
                nodes: r.optional("Nodes"),
                node_count: r.number("NodeCnt")?,
                core_count: r.number("CoreCnt")?,
                partition: r.optional("PartitionName"),
                flags: r.list("Flags"),
                users: r.list("Users"),
                accounts: r.list("Accounts"),
                state: r.required("State")?.to_owned(),
                cores,
            })
        })
        .collect()
}

// ------------------------------------------------------------------------- one-liners --

/// Parses the stdout of `sbatch --parsable`: `ID` or `ID;CLUSTER` on the last non-empty line.
pub fn parse_sbatch_parsable(command: &str, stdout: &str) -> Result<Submitted, SlurmError> {
    let line = stdout
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .ok_or_else(|| SlurmError::parse(command, "no job id printed", stdout))?;
    let (id, cluster) = match line.split_once(';') {
        Some((id, cluster)) => (id, Some(cluster)),
        None => (line, None),
    };
    let job_id = id
        .parse::<u32>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| SlurmError::parse(command, "expected ID or ID;CLUSTER", line))?;
    let cluster = match cluster {
        Some(c) if c.is_empty() || c.chars().any(char::is_whitespace) => {
            return Err(SlurmError::parse(
                command,
                "expected ID or ID;CLUSTER",
                line,
            ))
        }
        c => c.map(str::to_owned),
    };
    Ok(Submitted {
        job_id: SlurmJobId(job_id),
        cluster,
    })
}

/// Parses what `sbatch --test-only` prints on **stderr**:
/// `sbatch: Job 10 to start at 2026-11-22T18:32:15 using 2 processors on nodes c1-n1 in
/// partition debug`.
pub fn parse_test_only(command: &str, stderr: &str) -> Result<TestOnly, SlurmError> {
    let line = stderr
        .lines()
        .map(|l| l.trim().strip_prefix("sbatch:").unwrap_or(l).trim())
        .find(|l| l.starts_with("Job ") && l.contains(" to start at "))
        .ok_or_else(|| {
            SlurmError::parse(
                command,
                "no `Job N to start at T using C processors` line",
                stderr,
            )
        })?;
    let bad = |what: &str| SlurmError::parse(command, format!("expected {what}"), line);
    let w: Vec<&str> = line.split_whitespace().collect();
    let fixed = [
        (0, "Job"),
        (2, "to"),
        (3, "start"),
        (4, "at"),
        (6, "using"),
        (8, "processors"),
    ];
    if w.len() < 12 || fixed.iter().any(|&(i, word)| w[i] != word) || w[9..11] != ["on", "nodes"] {
        return Err(bad("`Job N to start at T using C processors on nodes L`"));
    }
    let job_id = w[1]
        .parse::<u32>()
        .map_err(|_| bad("a job id after `Job`"))?;
    let start =
        parse_timestamp(w[5]).ok_or_else(|| bad("a time YYYY-MM-DDTHH:MM:SS after `at`"))?;
    let processors = w[7]
        .parse::<u32>()
        .map_err(|_| bad("a processor count after `using`"))?;
    let partition = match &w[12..] {
        [] => None,
        ["in", "partition", p] => Some((*p).to_owned()),
        _ => return Err(bad("`in partition P` after the nodes")),
    };
    Ok(TestOnly {
        job_id: SlurmJobId(job_id),
        start,
        processors,
        nodes: w[11].to_owned(),
        partition,
    })
}

/// Parses `Reservation created: NAME` from `scontrol create reservation`; returns the name.
pub fn parse_reservation_created(command: &str, stdout: &str) -> Result<String, SlurmError> {
    stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("Reservation created:"))
        .map(str::trim)
        .filter(|n| !n.is_empty() && !n.contains(char::is_whitespace))
        .map(str::to_owned)
        .ok_or_else(|| SlurmError::parse(command, "no `Reservation created: NAME` line", stdout))
}

/// Parses `scontrol ping`: true when a controller line says `is UP`, false when they say
/// `is DOWN` (22.05 then exits 1 and adds a banner; call this before [`check_status`]).
pub fn parse_ping(command: &str, stdout: &str) -> Result<bool, SlurmError> {
    let states: Vec<bool> = stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("Slurmctld("))
        .filter_map(|l| {
            let l = l.trim_end();
            if l.ends_with(" is UP") {
                Some(true)
            } else if l.ends_with(" is DOWN") {
                Some(false)
            } else {
                None
            }
        })
        .collect();
    if states.is_empty() {
        return Err(SlurmError::parse(
            command,
            "no `Slurmctld(...) at HOST is UP|DOWN` line",
            stdout,
        ));
    }
    Ok(states.contains(&true))
}
