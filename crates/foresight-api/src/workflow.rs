//! Workflows as users write them (a YAML or JSON file, or the body of
//! `POST /api/v1/workflows`) and as the service shows them: named tasks with data edges
//! between them, run as jobs in dependency order.

use crate::{JobState, Walltime};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use utoipa::ToSchema;

fn one() -> u32 {
    1
}

/// A workflow to run: a DAG of tasks whose edges carry data from one task to the next.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkflowSpec {
    /// A name for people.
    pub name: String,
    /// Its priority: a larger one gives the DSC mapper a larger search budget.
    #[serde(default)]
    pub priority: u32,
    /// Which algorithm places the tasks on clusters (`dsc` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mapper: Option<MapperName>,
    /// What a failed task does to the rest: `cancel` its dependants (the default), or
    /// `{retry: N}`: run it again up to N times first.
    #[serde(default)]
    pub on_failure: FailurePolicy,
    /// Reserve every task's slot as mapped, two-phase: all held tentatively, then all
    /// committed once the workflow is stored, or all released. Each task then starts, once
    /// its inputs are ready, by its reserved start (earlier where processors are free).
    /// Local clusters only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reserve: bool,
    /// The tasks; each becomes a job.
    pub tasks: Vec<WorkflowTaskSpec>,
    /// Data moving from one task to another: the second starts after the first completes.
    #[serde(default)]
    pub edges: Vec<EdgeSpec>,
}

/// One task of a workflow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkflowTaskSpec {
    /// Unique within the workflow; edges name it.
    pub name: String,
    /// Program and arguments.
    pub command: Vec<String>,
    /// Processors at once (also `processors`).
    #[serde(default = "one", alias = "processors")]
    pub procs: u32,
    /// Run-time limit: text as `sbatch --time` reads it (`"5"` is 5 minutes, `"90s"`,
    /// `"1:30:00"`); a JSON number in a REST body is seconds, but in a workflow file it is
    /// minutes, as on the command line.
    pub walltime: Walltime,
    /// Features a cluster must have (installed software, for instance).
    #[serde(default)]
    pub requires: Vec<String>,
    /// Licences held for the whole run, by pool (`{ansys: 2}`): the task is mapped only onto
    /// a cluster that draws on every such pool, and starts when they are free.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub licences: BTreeMap<String, u32>,
    /// Extra environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory (absolute); the job's own directory when absent.
    #[serde(default)]
    pub cwd: Option<String>,
}

/// Data from one task to another.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EdgeSpec {
    /// The task producing the data.
    pub from: String,
    /// The task consuming it: it starts after `from` completes.
    pub to: String,
    /// How much data, in MB (also `size_mb`): staging time between clusters. The mapping
    /// weighs this figure, also when `files` are named: it places the tasks at submission,
    /// before the files exist.
    #[serde(default, alias = "size_mb")]
    pub data_mb: f64,
    /// Files `from` leaves for `to`, relative to `from`'s working directory (no absolute
    /// path, no `..`): once `from` completes they are copied to the same relative paths in
    /// `to`'s working directory, when `to` runs in another one, before `to` starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
}

/// Why `path` cannot name a file an edge moves (relative to a working directory and under
/// it), or `None` when it can: the rules of a job's output files.
pub fn edge_file_problem(path: &str) -> Option<&'static str> {
    let p = std::path::Path::new(path);
    if path.is_empty() {
        Some("is empty: name a file relative to the working directory")
    } else if path.contains('\0') {
        Some("contains a NUL byte")
    } else if p.is_absolute() {
        Some("must be relative to the task's working directory")
    } else if p
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        Some("must stay under the task's working directory (no \"..\")")
    } else if p.file_name().is_none() {
        Some("names no file")
    } else {
        None
    }
}

/// What a failed task does to the workflow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase", try_from = "PolicyText", into = "PolicyText")]
pub enum FailurePolicy {
    /// Its dependants are cancelled, with a reason naming it.
    #[default]
    Cancel,
    /// It runs again up to this many times; then its dependants are cancelled.
    Retry(u32),
}

/// The policy as written: `cancel`, or a map `{retry: N}` (YAML's own form of an enum
/// with a value is a tag, `!retry 2`, which few people write).
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum PolicyText {
    Word(String),
    Retry { retry: u32 },
}

impl TryFrom<PolicyText> for FailurePolicy {
    type Error = String;
    fn try_from(p: PolicyText) -> Result<Self, String> {
        match p {
            PolicyText::Word(w) if w == "cancel" => Ok(FailurePolicy::Cancel),
            PolicyText::Word(w) => Err(format!(
                "unknown failure policy {w:?}: `cancel`, or `retry: N`"
            )),
            PolicyText::Retry { retry } => Ok(FailurePolicy::Retry(retry)),
        }
    }
}

impl From<FailurePolicy> for PolicyText {
    fn from(p: FailurePolicy) -> PolicyText {
        match p {
            FailurePolicy::Cancel => PolicyText::Word("cancel".into()),
            FailurePolicy::Retry(retry) => PolicyText::Retry { retry },
        }
    }
}

impl std::fmt::Display for FailurePolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FailurePolicy::Cancel => f.write_str("cancel"),
            FailurePolicy::Retry(n) => write!(f, "retry {n}"),
        }
    }
}

/// The mapping algorithms a workflow may ask for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum MapperName {
    /// The seed's Dominant Sequence Clustering variant.
    #[default]
    Dsc,
    /// HEFT (upward ranks, earliest finish with insertion).
    Heft,
    /// Each task at its earliest start, in topological order.
    Greedy,
}

impl MapperName {
    /// The name on the command line and the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            MapperName::Dsc => "dsc",
            MapperName::Heft => "heft",
            MapperName::Greedy => "greedy",
        }
    }
}

impl std::str::FromStr for MapperName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "dsc" => Ok(MapperName::Dsc),
            "heft" => Ok(MapperName::Heft),
            "greedy" => Ok(MapperName::Greedy),
            _ => Err(format!("unknown mapper {s:?}: dsc, heft or greedy")),
        }
    }
}

/// A workflow's state, derived from its tasks' (see [`derive_state`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum WorkflowState {
    /// No task has started yet.
    Pending,
    /// Some task has started and some has not ended.
    Running,
    /// Every task completed.
    Completed,
    /// Every task ended, and one failed (or timed out).
    Failed,
    /// Every task ended, none failed, and one was cancelled.
    Cancelled,
}

impl WorkflowState {
    /// The name used on the wire and in tables.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkflowState::Pending => "pending",
            WorkflowState::Running => "running",
            WorkflowState::Completed => "completed",
            WorkflowState::Failed => "failed",
            WorkflowState::Cancelled => "cancelled",
        }
    }
}

impl std::fmt::Display for WorkflowState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A workflow's state from its tasks': `(state, started)` per task, where `started` says
/// the task has run at least once. Until every task has ended it is `running` once any
/// task has started (or ended), else `pending`; then `failed` if any failed or timed out,
/// else `cancelled` if any was cancelled, else `completed`.
pub fn derive_state(tasks: impl IntoIterator<Item = (JobState, bool)>) -> WorkflowState {
    let (mut all_final, mut started, mut failed, mut cancelled) = (true, false, false, false);
    for (s, ran) in tasks {
        all_final &= s.is_final();
        started |= ran || s == JobState::Running || s == JobState::Completed;
        failed |= matches!(s, JobState::Failed | JobState::Timeout);
        cancelled |= s == JobState::Cancelled;
    }
    match (all_final, failed, cancelled) {
        (true, true, _) => WorkflowState::Failed,
        (true, false, true) => WorkflowState::Cancelled,
        (true, false, false) => WorkflowState::Completed,
        (false, ..) if started => WorkflowState::Running,
        (false, ..) => WorkflowState::Pending,
    }
}

/// The ids of an accepted workflow and of its tasks' jobs, in task order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SubmittedWorkflow {
    /// The workflow's id.
    pub id: u64,
    /// Each task's job id, in the order of the request's tasks.
    pub jobs: Vec<u64>,
}

/// A workflow as users see it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WorkflowView {
    /// Id.
    pub id: u64,
    /// Name.
    pub name: String,
    /// Owner.
    pub user: String,
    /// Derived from its tasks'.
    pub state: WorkflowState,
    /// The algorithm that placed its tasks.
    pub mapper: MapperName,
    /// What a failed task does.
    pub on_failure: FailurePolicy,
    /// Submitted.
    pub submitted_at: i64,
    /// When the mapping planned the last task to end.
    pub planned_end: i64,
    /// The tasks, in submission order.
    pub tasks: Vec<WorkflowTaskView>,
}

/// One task of a workflow: where and when the mapping placed it, and what really happened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WorkflowTaskView {
    /// Its name in the workflow.
    pub name: String,
    /// Its job.
    pub job: u64,
    /// Its job's state.
    pub state: JobState,
    /// The cluster the mapping chose.
    pub cluster: String,
    /// The tasks it waits for.
    pub after: Vec<String>,
    /// The start the mapping planned.
    pub planned_start: i64,
    /// The end the mapping planned.
    pub planned_end: i64,
    /// When it really started (its last attempt).
    pub started_at: Option<i64>,
    /// When it really ended.
    pub ended_at: Option<i64>,
    /// Runs after a failure so far.
    pub retries: u32,
    /// The reservation holding its slot, for a workflow submitted with `reserve`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<u64>,
    /// Why it is where it is.
    pub reason: Option<String>,
}

/// Reads a workflow file: JSON when `json`, else YAML (JSON is YAML too, but its own
/// parser words errors as JSON). Errors name the line and column, and the field's path.
/// In a file, a walltime is read as `sbatch --time` reads it, so a bare number is minutes
/// (`walltime: 5` is 5 minutes), unlike a number in a REST body, which is seconds.
pub fn parse_workflow(text: &str, json: bool) -> Result<WorkflowSpec, String> {
    let mut spec: WorkflowSpec = if json {
        serde_json::from_str(text).map_err(|e| e.to_string())?
    } else {
        serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?
    };
    for t in &mut spec.tasks {
        if let Walltime::Seconds(n) = t.walltime {
            t.walltime = Walltime::Text(n.to_string());
        }
    }
    Ok(spec)
}

impl WorkflowSpec {
    /// Checks what needs no grid: names present and unique, edges naming known tasks and
    /// not a task to itself, edge files relative and under the working directory (see
    /// [`edge_file_problem`]), walltimes that parse, processors and commands given. Returns
    /// each task's walltime in seconds; the error names the field at fault
    /// (`tasks[1].walltime`) and says what is wrong. Cycles and tasks no cluster can host
    /// are found by the mapping, which names the tasks.
    pub fn check(&self) -> Result<Vec<i64>, (String, String)> {
        if self.tasks.is_empty() {
            return Err((
                "tasks".into(),
                format!("workflow {:?} has no task", self.name),
            ));
        }
        let mut seen: HashMap<&str, usize> = HashMap::new();
        let mut walltimes = Vec::with_capacity(self.tasks.len());
        for (i, t) in self.tasks.iter().enumerate() {
            let at = |f: &str| format!("tasks[{i}].{f}");
            if t.name.trim().is_empty() {
                return Err((at("name"), "a task needs a name".into()));
            }
            if let Some(why) = crate::text::hidden_problem(&t.name) {
                return Err((at("name"), format!("task name {:?}: {why}", t.name)));
            }
            if let Some(first) = seen.insert(&t.name, i) {
                return Err((
                    at("name"),
                    format!(
                        "task name {:?} is used by tasks[{first}] and tasks[{i}]",
                        t.name
                    ),
                ));
            }
            if t.command.is_empty() || t.command[0].is_empty() {
                return Err((at("command"), format!("task {:?} has no command", t.name)));
            }
            if t.procs == 0 {
                return Err((
                    at("procs"),
                    format!("task {:?} needs at least 1 processor", t.name),
                ));
            }
            let w = t
                .walltime
                .seconds()
                .map_err(|m| (at("walltime"), format!("task {:?}: {m}", t.name)))?;
            if w <= 0 {
                return Err((
                    at("walltime"),
                    format!("task {:?}: walltime must be positive", t.name),
                ));
            }
            walltimes.push(w);
        }
        for (i, e) in self.edges.iter().enumerate() {
            for (field, name) in [("from", &e.from), ("to", &e.to)] {
                if !seen.contains_key(name.as_str()) {
                    return Err((
                        format!("edges[{i}].{field}"),
                        format!("edge {} -> {} names unknown task {name:?}", e.from, e.to),
                    ));
                }
            }
            if e.from == e.to {
                return Err((
                    format!("edges[{i}]"),
                    format!(
                        "edge {} -> {} joins task {:?} to itself",
                        e.from, e.to, e.from
                    ),
                ));
            }
            if !(e.data_mb.is_finite() && e.data_mb >= 0.0) {
                return Err((
                    format!("edges[{i}].data_mb"),
                    format!("edge {} -> {}: data_mb must be 0 or more", e.from, e.to),
                ));
            }
            for (k, f) in e.files.iter().enumerate() {
                let field = || format!("edges[{i}].files[{k}]");
                if let Some(why) = edge_file_problem(f) {
                    return Err((
                        field(),
                        format!("edge {} -> {}: file {f:?} {why}", e.from, e.to),
                    ));
                }
                if let Some(first) = e.files[..k].iter().position(|g| g == f) {
                    return Err((
                        field(),
                        format!(
                            "edge {} -> {}: file {f:?} is named twice (files[{first}])",
                            e.from, e.to
                        ),
                    ));
                }
            }
        }
        Ok(walltimes)
    }

    /// Each task's predecessors (indices into `tasks`), each once, in edge order. Assumes
    /// [`WorkflowSpec::check`] passed.
    pub fn predecessors(&self) -> Vec<Vec<usize>> {
        let index: HashMap<&str, usize> = self
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.as_str(), i))
            .collect();
        let mut before = vec![Vec::new(); self.tasks.len()];
        for e in &self.edges {
            if let (Some(&f), Some(&t)) = (index.get(e.from.as_str()), index.get(e.to.as_str())) {
                if !before[t].contains(&f) {
                    before[t].push(f);
                }
            }
        }
        before
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const DIAMOND: &str = "\
name: diamond
on_failure:
  retry: 2
tasks:
  - name: A
    command: [sh, -c, 'echo a > a.txt']
    processors: 2
    walltime: '5'
  - name: B
    command: [sh, -c, 'echo b']
    walltime: 90s
    requires: [fluent]
  - name: C
    command: [true]
    walltime: 60
  - name: D
    command: [true]
    walltime: '1:00:00'
edges:
  - {from: A, to: B, size_mb: 100}
  - {from: A, to: C}
  - {from: B, to: D, data_mb: 2.5}
  - {from: C, to: D}
";

    #[test]
    fn a_yaml_diamond_reads_with_its_aliases_and_durations() {
        let w = parse_workflow(DIAMOND, false).unwrap();
        assert_eq!(w.name, "diamond");
        assert_eq!(w.on_failure, FailurePolicy::Retry(2));
        assert_eq!(w.mapper, None);
        assert_eq!(w.tasks[0].procs, 2);
        assert_eq!(w.tasks[1].procs, 1);
        assert_eq!(w.tasks[1].requires, vec!["fluent".to_string()]);
        // sbatch-style: a bare number is minutes, quoted or not.
        assert_eq!(w.check().unwrap(), vec![300, 90, 3600, 3600]);
        assert_eq!(w.edges[0].data_mb, 100.0);
        assert_eq!(w.edges[2].data_mb, 2.5);
        assert_eq!(w.predecessors(), vec![vec![], vec![0], vec![0], vec![1, 2]]);
    }

    #[test]
    fn json_reads_the_same_as_yaml() {
        let y = parse_workflow(DIAMOND, false).unwrap();
        let j = parse_workflow(&serde_json::to_string(&y).unwrap(), true).unwrap();
        assert_eq!(y, j);
        let p: WorkflowSpec =
            serde_json::from_str(r#"{"name":"x","on_failure":"cancel","tasks":[]}"#).unwrap();
        assert_eq!(p.on_failure, FailurePolicy::Cancel);
    }

    #[test]
    fn malformed_yaml_names_the_line() {
        let e =
            parse_workflow("name: x\ntasks:\n  - name: A\n    command: [a\n", false).unwrap_err();
        assert!(e.contains("line 4") || e.contains("line 5"), "{e}");
        let e = parse_workflow(
            "name: x\ntasks:\n  - name: A\n    command: [a]\n    walltime: 5\n    colour: red\n",
            false,
        )
        .unwrap_err();
        assert!(
            e.contains("unknown field `colour`") && e.contains("line 6"),
            "{e}"
        );
        let e =
            parse_workflow("name: x\ntasks:\n  - name: A\n    command: [a]\n", false).unwrap_err();
        assert!(e.contains("missing field `walltime`"), "{e}");
        let e = parse_workflow("{\"name\": \"x\",\n \"tasks\": 3}", true).unwrap_err();
        assert!(e.contains("line 2"), "{e}");
    }

    fn spec(edges: &[(&str, &str)]) -> WorkflowSpec {
        let mut w = parse_workflow(DIAMOND, false).unwrap();
        w.edges = edges
            .iter()
            .map(|(f, t)| EdgeSpec {
                from: f.to_string(),
                to: t.to_string(),
                data_mb: 0.0,
                files: vec![],
            })
            .collect();
        w
    }

    #[test]
    fn checks_name_the_field_and_the_task() {
        assert_eq!(
            spec(&[("A", "X")]).check().unwrap_err(),
            (
                "edges[0].to".into(),
                "edge A -> X names unknown task \"X\"".into()
            )
        );
        assert_eq!(spec(&[("B", "B")]).check().unwrap_err().0, "edges[0]");
        let mut w = spec(&[]);
        w.tasks[2].name = "A".into();
        assert_eq!(
            w.check().unwrap_err(),
            (
                "tasks[2].name".into(),
                "task name \"A\" is used by tasks[0] and tasks[2]".into()
            )
        );
        let mut w = spec(&[]);
        w.tasks[3].walltime = Walltime::Text("soon".into());
        let e = w.check().unwrap_err();
        assert_eq!(e.0, "tasks[3].walltime");
        assert!(e.1.starts_with("task \"D\": "), "{}", e.1);
        let mut w = spec(&[]);
        w.tasks[1].procs = 0;
        assert_eq!(w.check().unwrap_err().0, "tasks[1].procs");
        w.tasks.clear();
        assert_eq!(w.check().unwrap_err().0, "tasks");
    }

    #[test]
    fn edge_files_read_from_yaml_and_json_and_stay_under_the_working_directory() {
        let yaml = DIAMOND.replace(
            "{from: A, to: B, size_mb: 100}",
            "{from: A, to: B, size_mb: 100, files: [a.txt, out/mesh.dat]}",
        );
        let w = parse_workflow(&yaml, false).unwrap();
        assert_eq!(w.edges[0].files, vec!["a.txt", "out/mesh.dat"]);
        // The user's figure stays what the mapping weighs.
        assert_eq!(w.edges[0].data_mb, 100.0);
        assert!(w.edges[1].files.is_empty());
        w.check().unwrap();
        let json = serde_json::to_string(&w).unwrap();
        assert_eq!(parse_workflow(&json, true).unwrap(), w);
        // No files: the field is left out on the wire.
        assert!(!serde_json::to_string(&w.edges[1])
            .unwrap()
            .contains("files"));

        struct Case {
            name: &'static str,
            files: Vec<&'static str>,
            field: &'static str,
            why: &'static str,
        }
        let cases = [
            Case {
                name: "absolute",
                files: vec!["/etc/passwd"],
                field: "edges[0].files[0]",
                why: "edge A -> B: file \"/etc/passwd\" must be relative to the task's working \
                      directory",
            },
            Case {
                name: "escaping",
                files: vec!["ok.txt", "out/../../x"],
                field: "edges[0].files[1]",
                why: "edge A -> B: file \"out/../../x\" must stay under the task's working \
                      directory (no \"..\")",
            },
            Case {
                name: "empty",
                files: vec![""],
                field: "edges[0].files[0]",
                why: "edge A -> B: file \"\" is empty: name a file relative to the working \
                      directory",
            },
            Case {
                name: "no file",
                files: vec!["."],
                field: "edges[0].files[0]",
                why: "edge A -> B: file \".\" names no file",
            },
            Case {
                name: "nul",
                files: vec!["a\0b"],
                field: "edges[0].files[0]",
                why: "edge A -> B: file \"a\\0b\" contains a NUL byte",
            },
            Case {
                name: "twice",
                files: vec!["a.txt", "b.txt", "a.txt"],
                field: "edges[0].files[2]",
                why: "edge A -> B: file \"a.txt\" is named twice (files[0])",
            },
        ];
        for c in cases {
            let mut w = spec(&[("A", "B")]);
            w.edges[0].files = c.files.iter().map(|f| f.to_string()).collect();
            let (field, why) = w.check().unwrap_err();
            assert_eq!(
                (field.as_str(), why.as_str()),
                (c.field, c.why),
                "{}",
                c.name
            );
        }
        let mut w = spec(&[("A", "B")]);
        w.edges[0].files = vec!["deep/dir/f.txt".into(), "./g".into()];
        w.check().unwrap();
    }

    #[test]
    fn the_state_follows_the_tasks() {
        use JobState::*;
        let s = |v: &[(JobState, bool)]| derive_state(v.iter().copied());
        assert_eq!(
            s(&[(Pending, false), (Pending, false)]),
            WorkflowState::Pending
        );
        assert_eq!(
            s(&[(Reserved, false), (Pending, false)]),
            WorkflowState::Pending
        );
        assert_eq!(
            s(&[(Running, true), (Pending, false)]),
            WorkflowState::Running
        );
        assert_eq!(
            s(&[(Completed, true), (Pending, false)]),
            WorkflowState::Running
        );
        // A task waiting for its retry has run before.
        assert_eq!(
            s(&[(Pending, true), (Pending, false)]),
            WorkflowState::Running
        );
        assert_eq!(
            s(&[(Completed, true), (Completed, true)]),
            WorkflowState::Completed
        );
        assert_eq!(
            s(&[(Completed, true), (Failed, true), (Cancelled, false)]),
            WorkflowState::Failed
        );
        assert_eq!(
            s(&[(Timeout, true), (Completed, true)]),
            WorkflowState::Failed
        );
        assert_eq!(
            s(&[(Completed, true), (Cancelled, false)]),
            WorkflowState::Cancelled
        );
        // Cancelled before anything ran.
        assert_eq!(s(&[(Cancelled, false)]), WorkflowState::Cancelled);
    }
}
