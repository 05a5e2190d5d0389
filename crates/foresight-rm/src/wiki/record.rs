//! The node and job records of GETNODES and GETJOBS replies, and the list syntax that carries
//! them: `<count>#<id>:<ATTR>=<VAL>;<ATTR>=<VAL>;...#<id>:...`.
//!
//! Rendering follows what the real Maui 3.x parser survives, checked against its source:
//! - every attribute, the last included, ends with `;` (Maui's node parser reads the state up
//!   to the next `;` and crashes when there is none);
//! - `STATE` is the first attribute (Maui finds it with a substring search over the record);
//! - an attribute with no value is left out rather than written empty (Maui skips to the first
//!   alphanumeric character of a value, past the end of an empty one), so `FEATURE`, `CCLASS`,
//!   `ACLASS`, `TASKLIST`, `ACCOUNT`, `RCLASS`, `STARTTIME`, `COMPLETETIME`, `NODES` and
//!   `SPEED` appear only when known;
//! - numbers are never negative (Maui would skip the `-`), hence the unsigned fields.
//!
//! Parsing is lenient where other WIKI servers differ (a missing trailing `;`, empty
//! attributes, unknown attributes, which are kept in `extra`) and strict where a value would
//! otherwise be guessed (an unknown state, a number that does not parse).

use super::error::WikiError;
use std::fmt;
use std::str::FromStr;

/// A node's state as the WIKI interface reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeState {
    /// Up, no processor in use.
    Idle,
    /// Up, some processors in use.
    Running,
    /// Up, every processor in use.
    Busy,
    /// Not usable.
    Down,
}

impl NodeState {
    /// Every state, in wire order.
    pub const ALL: [NodeState; 4] = [
        NodeState::Idle,
        NodeState::Running,
        NodeState::Busy,
        NodeState::Down,
    ];

    /// The wire name (`Idle`, `Running`, `Busy`, `Down`).
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Idle => "Idle",
            NodeState::Running => "Running",
            NodeState::Busy => "Busy",
            NodeState::Down => "Down",
        }
    }
}

impl fmt::Display for NodeState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for NodeState {
    type Err = WikiError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        NodeState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| WikiError::UnknownState {
                kind: "node",
                value: super::error::excerpt(s),
                expected: "Idle, Running, Busy, Down",
            })
    }
}

/// A job's state as the WIKI interface reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JobState {
    /// Queued, waiting for a STARTJOB.
    Idle,
    /// Started.
    Running,
    /// Queued but held: not to be started.
    Hold,
    /// Started, then suspended.
    Suspended,
    /// Finished by itself.
    Completed,
    /// Cancelled (by a user, an administrator, or its wallclock limit).
    Removed,
}

impl JobState {
    /// Every state, in wire order.
    pub const ALL: [JobState; 6] = [
        JobState::Idle,
        JobState::Running,
        JobState::Hold,
        JobState::Suspended,
        JobState::Completed,
        JobState::Removed,
    ];

    /// The wire name (`Idle`, `Running`, `Hold`, `Suspended`, `Completed`, `Removed`).
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Idle => "Idle",
            JobState::Running => "Running",
            JobState::Hold => "Hold",
            JobState::Suspended => "Suspended",
            JobState::Completed => "Completed",
            JobState::Removed => "Removed",
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for JobState {
    type Err = WikiError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| WikiError::UnknownState {
                kind: "job",
                value: super::error::excerpt(s),
                expected: "Idle, Running, Hold, Suspended, Completed, Removed",
            })
    }
}

/// Slots of one class on a node (`CCLASS`/`ACLASS` write them as `[batch:4][debug:2]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassSlots {
    /// The class (queue) name.
    pub class: String,
    /// How many tasks of that class the node takes.
    pub count: u32,
}

impl ClassSlots {
    /// `count` slots of `class`.
    pub fn new(class: impl Into<String>, count: u32) -> ClassSlots {
        ClassSlots {
            class: class.into(),
            count,
        }
    }
}

/// One node of a GETNODES reply.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeRecord {
    /// The node's name, as TASKLISTs name it.
    pub name: String,
    /// `UPDATETIME`: Unix seconds of its last change (GETNODES `ARG=<t>:...` asks for nodes
    /// changed since `t`).
    pub update_time: u64,
    /// `STATE`.
    pub state: NodeState,
    /// `CPROC`: configured processors.
    pub cproc: u32,
    /// `APROC`: processors free now.
    pub aproc: u32,
    /// `CMEMORY`: configured memory, MB.
    pub cmemory_mb: u64,
    /// `AMEMORY`: memory free now, MB.
    pub amemory_mb: u64,
    /// `CCLASS`: configured class slots.
    pub cclass: Vec<ClassSlots>,
    /// `ACLASS`: class slots free now.
    pub aclass: Vec<ClassSlots>,
    /// `FEATURE`: the node's features (`FEATURE=gpu:fast`).
    pub features: Vec<String>,
    /// `SPEED`: relative speed (1.0 = reference), when the site rates its nodes.
    pub speed: Option<f64>,
    /// Other attributes, in order (`ARCH`, `OS`, `CDISK`, ...): kept when parsing another
    /// server's reply, written after the known ones when rendering.
    pub extra: Vec<(String, String)>,
}

impl NodeRecord {
    /// A node `name` in `state` with everything else zero or empty.
    pub fn new(name: impl Into<String>, state: NodeState) -> NodeRecord {
        NodeRecord {
            name: name.into(),
            update_time: 0,
            state,
            cproc: 0,
            aproc: 0,
            cmemory_mb: 0,
            amemory_mb: 0,
            cclass: Vec::new(),
            aclass: Vec::new(),
            features: Vec::new(),
            speed: None,
            extra: Vec::new(),
        }
    }
}

/// One job of a GETJOBS reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRecord {
    /// The job's id, as STARTJOB/CANCELJOB name it.
    pub id: String,
    /// `UPDATETIME`: Unix seconds of its last change.
    pub update_time: u64,
    /// `STATE`.
    pub state: JobState,
    /// `WCLIMIT`: wallclock limit, seconds.
    pub wclimit_secs: u64,
    /// `TASKS`: processors requested (one task per processor).
    pub tasks: u32,
    /// `NODES`: nodes requested, when the job asks for a node count.
    pub nodes: Option<u32>,
    /// `QUEUETIME`: Unix seconds when it was submitted.
    pub queue_time: u64,
    /// `STARTTIME`: Unix seconds when it started, once it has.
    pub start_time: Option<u64>,
    /// `COMPLETETIME`: Unix seconds when it ended, once it has.
    pub complete_time: Option<u64>,
    /// `UNAME`: its user (Maui drops a job without one).
    pub user: String,
    /// `GNAME`: its group (Maui drops a job without one).
    pub group: String,
    /// `ACCOUNT`, when it has one.
    pub account: Option<String>,
    /// `RCLASS`: the class (queue) it asks for, when it asks for one.
    pub class: Option<String>,
    /// `TASKLIST`: where it runs, one node name per task (a node twice = two processors on
    /// it); empty while it does not run.
    pub tasklist: Vec<String>,
    /// Other attributes, in order; see [`NodeRecord::extra`].
    pub extra: Vec<(String, String)>,
}

impl JobRecord {
    /// A job `id` of `user`:`group` in `state`, asking `tasks` processors for `wclimit_secs`,
    /// with everything else zero or empty.
    pub fn new(
        id: impl Into<String>,
        state: JobState,
        tasks: u32,
        wclimit_secs: u64,
        user: impl Into<String>,
        group: impl Into<String>,
    ) -> JobRecord {
        JobRecord {
            id: id.into(),
            update_time: 0,
            state,
            wclimit_secs,
            tasks,
            nodes: None,
            queue_time: 0,
            start_time: None,
            complete_time: None,
            user: user.into(),
            group: group.into(),
            account: None,
            class: None,
            tasklist: Vec::new(),
            extra: Vec::new(),
        }
    }
}

/// Node attributes with a typed field, which `extra` may not repeat.
const NODE_KEYS: [&str; 10] = [
    "UPDATETIME",
    "STATE",
    "CPROC",
    "APROC",
    "CMEMORY",
    "AMEMORY",
    "CCLASS",
    "ACLASS",
    "FEATURE",
    "SPEED",
];

/// Job attributes with a typed field, which `extra` may not repeat.
const JOB_KEYS: [&str; 13] = [
    "UPDATETIME",
    "STATE",
    "WCLIMIT",
    "TASKS",
    "NODES",
    "QUEUETIME",
    "STARTTIME",
    "COMPLETETIME",
    "UNAME",
    "GNAME",
    "ACCOUNT",
    "RCLASS",
    "TASKLIST",
];

/// Checks that `value` can stand as a name in a message (node, job, user, class, feature):
/// non-empty printable ASCII with none of the separators `: ; # = [ ]` and no whitespace.
pub(crate) fn check_name(what: &'static str, value: &str) -> Result<(), WikiError> {
    if value.is_empty() {
        return Err(WikiError::invalid(what, value, "it is empty"));
    }
    if !value.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(WikiError::invalid(
            what,
            value,
            "it holds whitespace, a control or a non-ASCII character",
        ));
    }
    if value.contains([':', ';', '#', '=', '[', ']']) {
        return Err(WikiError::invalid(
            what,
            value,
            "it holds one of the separators : ; # = [ ]",
        ));
    }
    Ok(())
}

/// Checks that `value` can stand as an attribute value: non-empty printable ASCII without
/// `;` or `#` (it may hold `:`, `=`, `[`, `]`).
fn check_value(what: &'static str, value: &str) -> Result<(), WikiError> {
    if value.is_empty() {
        return Err(WikiError::invalid(what, value, "it is empty"));
    }
    if !value.bytes().all(|b| b.is_ascii_graphic()) || value.contains([';', '#']) {
        return Err(WikiError::invalid(
            what,
            value,
            "it holds whitespace, ; or #, or a non-printable character",
        ));
    }
    Ok(())
}

/// Appends `KEY=value;` to `out`.
fn attr(out: &mut String, key: &str, value: impl fmt::Display) {
    use fmt::Write;
    // Writing to a String cannot fail.
    let _ = write!(out, "{key}={value};");
}

/// Checks and appends the `extra` attributes.
fn render_extra(
    out: &mut String,
    extra: &[(String, String)],
    known: &[&str],
) -> Result<(), WikiError> {
    for (key, value) in extra {
        check_name("attribute name", key)?;
        if known.contains(&key.as_str()) {
            return Err(WikiError::invalid(
                "attribute name",
                key,
                "it has a typed field; set that instead",
            ));
        }
        check_value("attribute value", value)?;
        attr(out, key, value);
    }
    Ok(())
}

/// `[class:count]...` for `CCLASS`/`ACLASS`.
fn render_classes(slots: &[ClassSlots]) -> Result<String, WikiError> {
    let mut out = String::new();
    for slot in slots {
        check_name("class name", &slot.class)?;
        out.push_str(&format!("[{}:{}]", slot.class, slot.count));
    }
    Ok(out)
}

impl NodeRecord {
    /// The record as it goes in a list: `name:STATE=...;UPDATETIME=...;...;`.
    pub fn render(&self) -> Result<String, WikiError> {
        check_name("node name", &self.name)?;
        let mut out = format!("{}:", self.name);
        attr(&mut out, "STATE", self.state);
        attr(&mut out, "UPDATETIME", self.update_time);
        attr(&mut out, "CPROC", self.cproc);
        attr(&mut out, "APROC", self.aproc);
        attr(&mut out, "CMEMORY", self.cmemory_mb);
        attr(&mut out, "AMEMORY", self.amemory_mb);
        if !self.cclass.is_empty() {
            attr(&mut out, "CCLASS", render_classes(&self.cclass)?);
        }
        if !self.aclass.is_empty() {
            attr(&mut out, "ACLASS", render_classes(&self.aclass)?);
        }
        if !self.features.is_empty() {
            for feature in &self.features {
                check_name("feature", feature)?;
            }
            attr(&mut out, "FEATURE", self.features.join(":"));
        }
        if let Some(speed) = self.speed {
            if !speed.is_finite() || speed < 0.0 {
                return Err(WikiError::invalid(
                    "SPEED",
                    &speed.to_string(),
                    "it is not a finite non-negative number",
                ));
            }
            attr(&mut out, "SPEED", speed);
        }
        render_extra(&mut out, &self.extra, &NODE_KEYS)?;
        Ok(out)
    }
}

impl JobRecord {
    /// The record as it goes in a list: `id:STATE=...;UPDATETIME=...;...;`.
    pub fn render(&self) -> Result<String, WikiError> {
        check_name("job id", &self.id)?;
        check_name("UNAME", &self.user)?;
        check_name("GNAME", &self.group)?;
        let mut out = format!("{}:", self.id);
        attr(&mut out, "STATE", self.state);
        attr(&mut out, "UPDATETIME", self.update_time);
        attr(&mut out, "WCLIMIT", self.wclimit_secs);
        attr(&mut out, "TASKS", self.tasks);
        if let Some(nodes) = self.nodes {
            attr(&mut out, "NODES", nodes);
        }
        attr(&mut out, "QUEUETIME", self.queue_time);
        if let Some(t) = self.start_time {
            attr(&mut out, "STARTTIME", t);
        }
        if let Some(t) = self.complete_time {
            attr(&mut out, "COMPLETETIME", t);
        }
        attr(&mut out, "UNAME", &self.user);
        attr(&mut out, "GNAME", &self.group);
        if let Some(account) = &self.account {
            check_name("ACCOUNT", account)?;
            attr(&mut out, "ACCOUNT", account);
        }
        if let Some(class) = &self.class {
            check_name("RCLASS", class)?;
            attr(&mut out, "RCLASS", class);
        }
        if !self.tasklist.is_empty() {
            attr(&mut out, "TASKLIST", render_tasklist(&self.tasklist)?);
        }
        render_extra(&mut out, &self.extra, &JOB_KEYS)?;
        Ok(out)
    }
}

/// `node[:node...]`, one entry per task. Refuses an empty list or a bad name.
pub(crate) fn render_tasklist(tasklist: &[String]) -> Result<String, WikiError> {
    if tasklist.is_empty() {
        return Err(WikiError::invalid("TASKLIST", "", "it names no node"));
    }
    for node in tasklist {
        check_name("TASKLIST node", node)?;
    }
    Ok(tasklist.join(":"))
}

/// The node names of a `TASKLIST` value, one per task.
pub(crate) fn parse_tasklist(text: &str) -> Result<Vec<String>, WikiError> {
    let nodes: Vec<String> = text.split(':').map(str::to_owned).collect();
    for node in &nodes {
        if node.is_empty() {
            return Err(WikiError::malformed("TASKLIST", "an empty node name", text));
        }
    }
    Ok(nodes)
}

/// `<count>#rec#rec...`, or `0` for no record.
fn render_list(records: Vec<String>) -> String {
    let mut out = records.len().to_string();
    for record in records {
        out.push('#');
        out.push_str(&record);
    }
    out
}

/// The `ARG=` value of a GETNODES reply.
pub fn render_nodes(nodes: &[NodeRecord]) -> Result<String, WikiError> {
    let records = nodes
        .iter()
        .map(NodeRecord::render)
        .collect::<Result<_, _>>()?;
    Ok(render_list(records))
}

/// The `ARG=` value of a GETJOBS reply.
pub fn render_jobs(jobs: &[JobRecord]) -> Result<String, WikiError> {
    let records = jobs
        .iter()
        .map(JobRecord::render)
        .collect::<Result<_, _>>()?;
    Ok(render_list(records))
}

/// One record of a list before typing: its id and its attributes in order.
type RawRecord<'a> = (&'a str, Vec<(&'a str, &'a str)>);

/// Splits a list (`<count>#<id>:<ATTR>=<VAL>;...#...`) into records. The count must match.
fn parse_list<'a>(what: &'static str, text: &'a str) -> Result<Vec<RawRecord<'a>>, WikiError> {
    let text = text.trim_matches(|c: char| c.is_ascii_whitespace() || c == '\0');
    let (count, rest) = match text.split_once('#') {
        Some((count, rest)) => (count, Some(rest)),
        None => (text, None),
    };
    let count: usize = count
        .trim()
        .parse()
        .map_err(|_| WikiError::malformed(what, "the list does not start with a count", text))?;
    let mut records = Vec::new();
    if let Some(rest) = rest {
        for record in rest.split('#') {
            if record.trim().is_empty() {
                continue;
            }
            let (id, attrs) = record
                .split_once(':')
                .ok_or_else(|| WikiError::malformed(what, "a record without `id:`", record))?;
            let id = id.trim();
            if id.is_empty() {
                return Err(WikiError::malformed(
                    what,
                    "a record with an empty id",
                    record,
                ));
            }
            let mut pairs = Vec::new();
            for piece in attrs.split(';') {
                let piece = piece.trim();
                if piece.is_empty() {
                    continue;
                }
                let (key, value) = piece.split_once('=').ok_or_else(|| {
                    WikiError::malformed(what, format!("attribute {piece:?} has no `=`"), record)
                })?;
                pairs.push((key.trim(), value.trim()));
            }
            records.push((id, pairs));
        }
    }
    if records.len() != count {
        return Err(WikiError::malformed(
            what,
            format!("the count says {count}, the list holds {}", records.len()),
            text,
        ));
    }
    Ok(records)
}

/// `value` as a number, or an error naming the record and attribute.
fn number<T: FromStr>(
    what: &'static str,
    id: &str,
    key: &str,
    value: &str,
) -> Result<T, WikiError> {
    value.parse().map_err(|_| {
        WikiError::malformed(
            what,
            format!("{id}: {key}={value:?} is not a non-negative integer"),
            value,
        )
    })
}

/// `[class:count][class]...` (count 1 when absent), or `[NONE]`/`NONE` for none.
fn parse_classes(id: &str, key: &str, value: &str) -> Result<Vec<ClassSlots>, WikiError> {
    let mut slots = Vec::new();
    for item in value.split(['[', ']']) {
        let item = item.trim();
        if item.is_empty() || item == "NONE" {
            continue;
        }
        let (class, count) = match item.split_once(':') {
            Some((class, count)) => (class, number("node record", id, key, count)?),
            None => (item, 1),
        };
        slots.push(ClassSlots::new(class, count));
    }
    Ok(slots)
}

/// The records of a GETNODES reply's `ARG=` value. Every node must have a `STATE`.
pub fn parse_nodes(text: &str) -> Result<Vec<NodeRecord>, WikiError> {
    const WHAT: &str = "node record";
    let mut nodes = Vec::new();
    for (id, attrs) in parse_list("node list", text)? {
        let mut node = NodeRecord::new(id, NodeState::Down);
        let mut has_state = false;
        for (key, value) in attrs {
            if value.is_empty() {
                continue;
            }
            match key {
                "UPDATETIME" => node.update_time = number(WHAT, id, key, value)?,
                "STATE" => {
                    node.state = value.parse()?;
                    has_state = true;
                }
                "CPROC" => node.cproc = number(WHAT, id, key, value)?,
                "APROC" => node.aproc = number(WHAT, id, key, value)?,
                "CMEMORY" => node.cmemory_mb = number(WHAT, id, key, value)?,
                "AMEMORY" => node.amemory_mb = number(WHAT, id, key, value)?,
                "CCLASS" => node.cclass = parse_classes(id, key, value)?,
                "ACLASS" => node.aclass = parse_classes(id, key, value)?,
                "FEATURE" => {
                    node.features = value
                        .split(':')
                        .filter(|f| !f.is_empty())
                        .map(str::to_owned)
                        .collect();
                }
                "SPEED" => {
                    let speed: f64 = value.parse().map_err(|_| {
                        WikiError::malformed(WHAT, format!("{id}: SPEED is not a number"), value)
                    })?;
                    node.speed = Some(speed);
                }
                _ => node.extra.push((key.to_owned(), value.to_owned())),
            }
        }
        if !has_state {
            return Err(WikiError::malformed(WHAT, format!("{id}: no STATE"), id));
        }
        nodes.push(node);
    }
    Ok(nodes)
}

/// The records of a GETJOBS reply's `ARG=` value. Every job must have a `STATE`.
pub fn parse_jobs(text: &str) -> Result<Vec<JobRecord>, WikiError> {
    const WHAT: &str = "job record";
    let mut jobs = Vec::new();
    for (id, attrs) in parse_list("job list", text)? {
        let mut job = JobRecord::new(id, JobState::Idle, 0, 0, "", "");
        let mut has_state = false;
        for (key, value) in attrs {
            if value.is_empty() {
                continue;
            }
            match key {
                "UPDATETIME" => job.update_time = number(WHAT, id, key, value)?,
                "STATE" => {
                    job.state = value.parse()?;
                    has_state = true;
                }
                "WCLIMIT" => job.wclimit_secs = number(WHAT, id, key, value)?,
                "TASKS" => job.tasks = number(WHAT, id, key, value)?,
                "NODES" => job.nodes = Some(number(WHAT, id, key, value)?),
                "QUEUETIME" => job.queue_time = number(WHAT, id, key, value)?,
                "STARTTIME" => job.start_time = Some(number(WHAT, id, key, value)?),
                "COMPLETETIME" => job.complete_time = Some(number(WHAT, id, key, value)?),
                "UNAME" => job.user = value.to_owned(),
                "GNAME" => job.group = value.to_owned(),
                "ACCOUNT" => job.account = Some(value.to_owned()),
                "RCLASS" => {
                    // `batch`, `[batch]` or `[batch:1]`: the class name.
                    let name = value.trim_matches(['[', ']']);
                    let name = name.split_once(':').map_or(name, |(n, _)| n);
                    if !name.is_empty() && name != "NONE" {
                        job.class = Some(name.to_owned());
                    }
                }
                "TASKLIST" => job.tasklist = parse_tasklist(value)?,
                _ => job.extra.push((key.to_owned(), value.to_owned())),
            }
        }
        if !has_state {
            return Err(WikiError::malformed(WHAT, format!("{id}: no STATE"), id));
        }
        jobs.push(job);
    }
    Ok(jobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> NodeRecord {
        NodeRecord {
            name: "n1".into(),
            update_time: 1_700_000_000,
            state: NodeState::Running,
            cproc: 8,
            aproc: 3,
            cmemory_mb: 16_000,
            amemory_mb: 9_000,
            cclass: vec![ClassSlots::new("batch", 8)],
            aclass: vec![ClassSlots::new("batch", 3)],
            features: vec!["gpu".into(), "fast".into()],
            speed: Some(1.5),
            extra: vec![("ARCH".into(), "x86_64".into())],
        }
    }

    fn job() -> JobRecord {
        JobRecord {
            nodes: Some(2),
            queue_time: 1_700_000_000,
            start_time: Some(1_700_000_100),
            account: Some("physics".into()),
            class: Some("batch".into()),
            tasklist: vec!["n1".into(), "n1".into(), "n2".into()],
            update_time: 1_700_000_100,
            ..JobRecord::new("42", JobState::Running, 3, 3600, "alice", "users")
        }
    }

    #[test]
    fn node_renders_state_first_and_ends_every_attribute_with_semicolon() {
        assert_eq!(
            node().render().unwrap(),
            "n1:STATE=Running;UPDATETIME=1700000000;CPROC=8;APROC=3;CMEMORY=16000;\
             AMEMORY=9000;CCLASS=[batch:8];ACLASS=[batch:3];FEATURE=gpu:fast;SPEED=1.5;\
             ARCH=x86_64;"
        );
        let bare = NodeRecord::new("n2", NodeState::Idle).render().unwrap();
        assert_eq!(
            bare,
            "n2:STATE=Idle;UPDATETIME=0;CPROC=0;APROC=0;CMEMORY=0;AMEMORY=0;"
        );
    }

    #[test]
    fn job_renders_known_attributes_only() {
        assert_eq!(
            job().render().unwrap(),
            "42:STATE=Running;UPDATETIME=1700000100;WCLIMIT=3600;TASKS=3;NODES=2;\
             QUEUETIME=1700000000;STARTTIME=1700000100;UNAME=alice;GNAME=users;\
             ACCOUNT=physics;RCLASS=batch;TASKLIST=n1:n1:n2;"
        );
        let idle = JobRecord::new("7", JobState::Idle, 1, 60, "bob", "bob");
        assert_eq!(
            idle.render().unwrap(),
            "7:STATE=Idle;UPDATETIME=0;WCLIMIT=60;TASKS=1;QUEUETIME=0;UNAME=bob;GNAME=bob;"
        );
    }

    #[test]
    fn lists_round_trip() {
        let nodes = vec![node(), NodeRecord::new("n2", NodeState::Down)];
        let text = render_nodes(&nodes).unwrap();
        assert!(text.starts_with("2#n1:STATE=Running;"));
        assert_eq!(parse_nodes(&text).unwrap(), nodes);
        let jobs = vec![job(), JobRecord::new("8", JobState::Hold, 4, 10, "u", "g")];
        assert_eq!(parse_jobs(&render_jobs(&jobs).unwrap()).unwrap(), jobs);
        assert_eq!(render_nodes(&[]).unwrap(), "0");
        assert_eq!(parse_nodes("0").unwrap(), vec![]);
        assert_eq!(parse_jobs(" 0 \n").unwrap(), vec![]);
    }

    #[test]
    fn parsing_is_lenient_about_form_strict_about_values() {
        // No trailing `;`, empty attributes, spaces, RCLASS in brackets, a trailing `#`.
        let nodes = parse_nodes("1#a:STATE=Idle;;CPROC = 2;FEATURE=;OS=linux#").unwrap();
        assert_eq!(nodes[0].state, NodeState::Idle);
        assert_eq!(nodes[0].cproc, 2);
        assert!(nodes[0].features.is_empty());
        assert_eq!(nodes[0].extra, vec![("OS".to_owned(), "linux".to_owned())]);
        let jobs = parse_jobs("1#j:STATE=Idle;RCLASS=[batch:1];UNAME=u;GNAME=g").unwrap();
        assert_eq!(jobs[0].class.as_deref(), Some("batch"));

        struct Case {
            name: &'static str,
            text: &'static str,
        }
        let bad = [
            Case {
                name: "count mismatch",
                text: "2#a:STATE=Idle;",
            },
            Case {
                name: "no count",
                text: "a:STATE=Idle;",
            },
            Case {
                name: "no id",
                text: "1#STATE=Idle;",
            },
            Case {
                name: "no state",
                text: "1#a:CPROC=1;",
            },
            Case {
                name: "unknown state",
                text: "1#a:STATE=Drained;",
            },
            Case {
                name: "negative",
                text: "1#a:STATE=Idle;CPROC=-1;",
            },
            Case {
                name: "no equals",
                text: "1#a:STATE=Idle;CPROC;",
            },
            Case {
                name: "bad speed",
                text: "1#a:STATE=Idle;SPEED=fast;",
            },
        ];
        for case in bad {
            assert!(parse_nodes(case.text).is_err(), "{}", case.name);
        }
        assert!(matches!(
            parse_jobs("1#j:STATE=Starting;"),
            Err(WikiError::UnknownState { kind: "job", .. })
        ));
    }

    #[test]
    fn rendering_refuses_what_would_break_the_syntax() {
        let cases: Vec<(&str, NodeRecord)> = vec![
            ("colon in name", NodeRecord::new("a:b", NodeState::Idle)),
            ("hash in name", NodeRecord::new("a#b", NodeState::Idle)),
            ("empty name", NodeRecord::new("", NodeState::Idle)),
            (
                "space in feature",
                NodeRecord {
                    features: vec!["a b".into()],
                    ..NodeRecord::new("n", NodeState::Idle)
                },
            ),
            (
                "nan speed",
                NodeRecord {
                    speed: Some(f64::NAN),
                    ..NodeRecord::new("n", NodeState::Idle)
                },
            ),
            (
                "extra repeats STATE",
                NodeRecord {
                    extra: vec![("STATE".into(), "Idle".into())],
                    ..NodeRecord::new("n", NodeState::Idle)
                },
            ),
            (
                "empty extra value",
                NodeRecord {
                    extra: vec![("OS".into(), String::new())],
                    ..NodeRecord::new("n", NodeState::Idle)
                },
            ),
        ];
        for (name, record) in cases {
            assert!(
                matches!(record.render(), Err(WikiError::InvalidValue { .. })),
                "{name}"
            );
        }
        let no_user = JobRecord::new("1", JobState::Idle, 1, 1, "", "g");
        assert!(no_user.render().is_err());
    }
}
