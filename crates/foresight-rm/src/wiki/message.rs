//! WIKI requests and replies: the `DT=` text of a frame, parsed into [`Request`] and [`Reply`]
//! and rendered back.
//!
//! Requests are space-separated `KEY=VALUE` tokens, `CMD=` first by custom:
//! `CMD=GETNODES ARG=0:ALL`, `CMD=GETJOBS ARG=0:ALL`, `CMD=STARTJOB ARG=<job>
//! TASKLIST=<node>[:<node>...]`, `CMD=CANCELJOB ARG=<job> TYPE=ADMIN|WALLCLOCK`,
//! `CMD=SUSPENDJOB ARG=<job>`, `CMD=RESUMEJOB ARG=<job>`.
//!
//! Replies start with `SC=<int>` (0 success, negative failure). Lists follow as `ARG=<list>`
//! (see [`super::record`]). Texts follow as `RESPONSE=<text> RSP=<text>`: the same text under
//! both names, `RSP=` last. Maui 3.x reads `RSP=` (a substring search, then everything to the
//! end), Moab reads `RSP=` then `RESPONSE=`, and Moab's documents and other WIKI peers write
//! `RESPONSE=`; with `RSP=` last every one of them reads exactly the text, and nothing that
//! looks for either name misses it.

use super::error::{excerpt, WikiError};
use super::record::{
    check_name, parse_jobs, parse_nodes, parse_tasklist, render_jobs, render_nodes,
    render_tasklist, JobRecord, NodeRecord,
};
use std::fmt;
use std::str::FromStr;

/// Longest `RSP=` text sent, in characters; longer reasons are cut (Maui copies the text into
/// fixed-size log lines).
pub const MAX_RESPONSE_CHARS: usize = 512;

/// Which records a GETNODES/GETJOBS asks for, after `ARG=<time>:`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    /// `ALL`.
    All,
    /// `<name>[:<name>...]`: these only; one the server does not have is refused.
    Named(Vec<String>),
}

/// How a job is cancelled (`TYPE=` of CANCELJOB): Maui tells an administrator's or user's
/// cancel from the end of the wallclock limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CancelType {
    /// `ADMIN`: cancelled on request.
    Admin,
    /// `WALLCLOCK`: the job reached its wallclock limit.
    Wallclock,
}

impl CancelType {
    /// The wire name (`ADMIN`, `WALLCLOCK`).
    pub fn as_str(self) -> &'static str {
        match self {
            CancelType::Admin => "ADMIN",
            CancelType::Wallclock => "WALLCLOCK",
        }
    }
}

impl fmt::Display for CancelType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for CancelType {
    type Err = WikiError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ADMIN" => Ok(CancelType::Admin),
            "WALLCLOCK" => Ok(CancelType::Wallclock),
            _ => Err(WikiError::malformed(
                "request",
                "TYPE= is neither ADMIN nor WALLCLOCK",
                s,
            )),
        }
    }
}

/// A request of the WIKI interface, from the scheduler to the resource manager.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// `CMD=GETNODES ARG=<since>:<selection>`: the nodes changed at or after `since` (Unix
    /// seconds; Maui sends 0).
    GetNodes {
        /// Only records with `UPDATETIME >= since`.
        since: u64,
        /// Which nodes.
        select: Selection,
    },
    /// `CMD=GETJOBS ARG=<since>:<selection>`: the jobs changed at or after `since`.
    GetJobs {
        /// Only records with `UPDATETIME >= since`.
        since: u64,
        /// Which jobs.
        select: Selection,
    },
    /// `CMD=STARTJOB ARG=<job> TASKLIST=<node>[:<node>...]`: start the job on exactly these
    /// processors, one task per entry.
    StartJob {
        /// The job.
        job: String,
        /// One node name per task (never empty).
        tasklist: Vec<String>,
    },
    /// `CMD=CANCELJOB ARG=<job> TYPE=ADMIN|WALLCLOCK`.
    CancelJob {
        /// The job.
        job: String,
        /// Why (`ADMIN` when `TYPE=` is absent).
        kind: CancelType,
    },
    /// `CMD=SUSPENDJOB ARG=<job>`.
    SuspendJob {
        /// The job.
        job: String,
    },
    /// `CMD=RESUMEJOB ARG=<job>`.
    ResumeJob {
        /// The job.
        job: String,
    },
}

/// What a request's successful reply carries, which [`Reply::parse`] needs to read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyKind {
    /// A node list.
    Nodes,
    /// A job list.
    Jobs,
    /// A text.
    Done,
}

impl Request {
    /// The `CMD=` name.
    pub fn command(&self) -> &'static str {
        match self {
            Request::GetNodes { .. } => "GETNODES",
            Request::GetJobs { .. } => "GETJOBS",
            Request::StartJob { .. } => "STARTJOB",
            Request::CancelJob { .. } => "CANCELJOB",
            Request::SuspendJob { .. } => "SUSPENDJOB",
            Request::ResumeJob { .. } => "RESUMEJOB",
        }
    }

    /// What a successful reply to this request carries.
    pub fn reply_kind(&self) -> ReplyKind {
        match self {
            Request::GetNodes { .. } => ReplyKind::Nodes,
            Request::GetJobs { .. } => ReplyKind::Jobs,
            _ => ReplyKind::Done,
        }
    }

    /// The request in `data` (a frame's `DT=`). Tokens are `KEY=VALUE` separated by
    /// whitespace; unknown keys are ignored (as Maui ignores them), a repeated key is refused.
    pub fn parse(data: &str) -> Result<Request, WikiError> {
        const WHAT: &str = "request";
        let text = data.trim_matches(|c: char| c.is_ascii_whitespace() || c == '\0');
        let mut fields: Vec<(&str, &str)> = Vec::new();
        for token in text.split_ascii_whitespace() {
            let (key, value) = token.split_once('=').ok_or_else(|| {
                WikiError::malformed(WHAT, format!("{:?} is not KEY=VALUE", excerpt(token)), text)
            })?;
            if fields.iter().any(|(k, _)| *k == key) {
                return Err(WikiError::malformed(
                    WHAT,
                    format!("{:?} appears twice", excerpt(key)),
                    text,
                ));
            }
            fields.push((key, value));
        }
        let get = |key: &str| fields.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
        let command = get("CMD").ok_or_else(|| WikiError::malformed(WHAT, "no CMD=", text))?;
        let arg = |name: &str| {
            get("ARG")
                .filter(|a| !a.is_empty())
                .ok_or_else(|| WikiError::malformed(WHAT, format!("{name} needs ARG="), text))
        };
        let job = |name: &str| {
            let job = arg(name)?;
            check_name("job id", job)?;
            Ok::<_, WikiError>(job.to_owned())
        };
        match command {
            "GETNODES" => {
                let (since, select) = parse_selection(arg(command)?, "node name")?;
                Ok(Request::GetNodes { since, select })
            }
            "GETJOBS" => {
                let (since, select) = parse_selection(arg(command)?, "job id")?;
                Ok(Request::GetJobs { since, select })
            }
            "STARTJOB" => {
                let job = job(command)?;
                let list = get("TASKLIST")
                    .ok_or_else(|| WikiError::malformed(WHAT, "STARTJOB needs TASKLIST=", text))?;
                let tasklist = parse_tasklist(list)?;
                for node in &tasklist {
                    check_name("TASKLIST node", node)?;
                }
                Ok(Request::StartJob { job, tasklist })
            }
            "CANCELJOB" => {
                let job = job(command)?;
                let kind = get("TYPE").map_or(Ok(CancelType::Admin), str::parse)?;
                Ok(Request::CancelJob { job, kind })
            }
            "SUSPENDJOB" => Ok(Request::SuspendJob { job: job(command)? }),
            "RESUMEJOB" => Ok(Request::ResumeJob { job: job(command)? }),
            other => Err(WikiError::UnknownCommand {
                name: excerpt(other),
            }),
        }
    }

    /// The request as a frame's `DT=`. Refuses names that would break the syntax.
    pub fn render(&self) -> Result<String, WikiError> {
        let command = self.command();
        match self {
            Request::GetNodes { since, select } | Request::GetJobs { since, select } => {
                let what = if matches!(self, Request::GetNodes { .. }) {
                    "node name"
                } else {
                    "job id"
                };
                let names = match select {
                    Selection::All => "ALL".to_owned(),
                    Selection::Named(names) if names.is_empty() => {
                        return Err(WikiError::invalid(what, "", "the selection names nothing"))
                    }
                    Selection::Named(names) => {
                        for name in names {
                            check_name(what, name)?;
                            if name == "ALL" {
                                return Err(WikiError::invalid(what, name, "ALL means every one"));
                            }
                        }
                        names.join(":")
                    }
                };
                Ok(format!("CMD={command} ARG={since}:{names}"))
            }
            Request::StartJob { job, tasklist } => {
                check_name("job id", job)?;
                let list = render_tasklist(tasklist)?;
                Ok(format!("CMD={command} ARG={job} TASKLIST={list}"))
            }
            Request::CancelJob { job, kind } => {
                check_name("job id", job)?;
                Ok(format!("CMD={command} ARG={job} TYPE={kind}"))
            }
            Request::SuspendJob { job } | Request::ResumeJob { job } => {
                check_name("job id", job)?;
                Ok(format!("CMD={command} ARG={job}"))
            }
        }
    }
}

/// `<since>:ALL` or `<since>:<name>[:<name>...]`.
fn parse_selection(arg: &str, what: &'static str) -> Result<(u64, Selection), WikiError> {
    let malformed = || {
        WikiError::malformed(
            "request",
            "ARG= is not <time>:ALL or <time>:<name>[:<name>...]",
            arg,
        )
    };
    let (since, names) = arg.split_once(':').ok_or_else(malformed)?;
    if since.is_empty() || !since.bytes().all(|b| b.is_ascii_digit()) {
        return Err(malformed());
    }
    let since = since.parse().map_err(|_| malformed())?;
    if names == "ALL" {
        return Ok((since, Selection::All));
    }
    let names: Vec<String> = names.split(':').map(str::to_owned).collect();
    for name in &names {
        if name.is_empty() || name == "ALL" {
            return Err(malformed());
        }
        check_name(what, name)?;
    }
    Ok((since, Selection::Named(names)))
}

/// A reply of the WIKI interface, from the resource manager to the scheduler.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// `SC=0 ARG=<count>#<node>:...`: the answer to GETNODES.
    Nodes(Vec<NodeRecord>),
    /// `SC=0 ARG=<count>#<job>:...`: the answer to GETJOBS.
    Jobs(Vec<JobRecord>),
    /// `SC=0 RESPONSE=<text> RSP=<text>`: a command was carried out.
    Done(String),
    /// `SC=<negative> RESPONSE=<reason> RSP=<reason>`: refused or failed.
    Failed {
        /// The status code (negative).
        code: i32,
        /// Why.
        reason: String,
    },
}

impl Reply {
    /// The `SC=-1` reply giving `reason`.
    pub fn failed(reason: impl fmt::Display) -> Reply {
        Reply::Failed {
            code: -1,
            reason: reason.to_string(),
        }
    }

    /// The reply as a frame's `DT=`. Texts are made single-line and cut to
    /// [`MAX_RESPONSE_CHARS`]; records are checked as in [`NodeRecord::render`].
    pub fn render(&self) -> Result<String, WikiError> {
        match self {
            Reply::Nodes(nodes) => Ok(format!("SC=0 ARG={}", render_nodes(nodes)?)),
            Reply::Jobs(jobs) => Ok(format!("SC=0 ARG={}", render_jobs(jobs)?)),
            Reply::Done(text) => {
                let text = response_text(text);
                Ok(format!("SC=0 RESPONSE={text} RSP={text}"))
            }
            Reply::Failed { code, reason } => {
                if *code >= 0 {
                    return Err(WikiError::invalid(
                        "SC",
                        &code.to_string(),
                        "a failure needs a negative code",
                    ));
                }
                let text = response_text(reason);
                Ok(format!("SC={code} RESPONSE={text} RSP={text}"))
            }
        }
    }

    /// The reply in `data` (a frame's `DT=`) to a request whose successful reply is `kind`.
    /// A negative `SC=` gives [`Reply::Failed`] whatever `kind`, with the text of `RSP=`,
    /// `RESPONSE=` or (as Maui's own server writes it) `ARG=`.
    pub fn parse(data: &str, kind: ReplyKind) -> Result<Reply, WikiError> {
        const WHAT: &str = "reply";
        let text = data.trim_matches(|c: char| c.is_ascii_whitespace() || c == '\0');
        let rest = text
            .strip_prefix("SC=")
            .ok_or_else(|| WikiError::malformed(WHAT, "it does not start with SC=", text))?;
        let (code, rest) = rest
            .split_once(|c: char| c.is_ascii_whitespace())
            .unwrap_or((rest, ""));
        let code: i32 = code
            .parse()
            .map_err(|_| WikiError::malformed(WHAT, "SC= is not an integer", text))?;
        let rest = rest.trim_start();
        if code < 0 {
            return Ok(Reply::Failed {
                code,
                reason: text_of(rest).to_owned(),
            });
        }
        match kind {
            ReplyKind::Nodes => Ok(Reply::Nodes(parse_nodes(list_of(rest, text)?)?)),
            ReplyKind::Jobs => Ok(Reply::Jobs(parse_jobs(list_of(rest, text)?)?)),
            ReplyKind::Done => Ok(Reply::Done(text_of(rest).to_owned())),
        }
    }
}

/// `text` on one line, cut to [`MAX_RESPONSE_CHARS`], never empty.
fn response_text(text: &str) -> String {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let line = line.trim();
    if line.is_empty() {
        return "(no text)".to_owned();
    }
    match line.char_indices().nth(MAX_RESPONSE_CHARS) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line.to_owned(),
    }
}

/// The text of a reply after `SC=`: `RESPONSE=<t> RSP=<t>` gives `t`, as do `RESPONSE=<t>`,
/// `RSP=<t>` and `ARG=<t>`; anything else is taken whole.
fn text_of(rest: &str) -> &str {
    if let Some(both) = rest.strip_prefix("RESPONSE=") {
        // Our own form: the same text twice around " RSP=".
        if let Some(half) = both.len().checked_sub(5).map(|n| n / 2) {
            if let (Some(first), Some(marker), Some(second)) = (
                both.get(..half),
                both.get(half..half + 5),
                both.get(half + 5..),
            ) {
                if marker == " RSP=" && first == second {
                    return first;
                }
            }
        }
        return both;
    }
    rest.strip_prefix("RSP=")
        .or_else(|| rest.strip_prefix("ARG="))
        .unwrap_or(rest)
}

/// The list after `ARG=` in a successful list reply.
fn list_of<'a>(rest: &'a str, text: &str) -> Result<&'a str, WikiError> {
    if let Some(list) = rest.strip_prefix("ARG=") {
        return Ok(list);
    }
    rest.find(" ARG=")
        .map(|at| &rest[at + 5..])
        .ok_or_else(|| WikiError::malformed("reply", "no ARG= list", text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wiki::record::{JobState, NodeState};

    #[test]
    fn requests_parse_as_maui_writes_them() {
        struct Case {
            text: &'static str,
            want: Request,
        }
        let cases = [
            Case {
                text: "CMD=GETNODES ARG=0:ALL",
                want: Request::GetNodes {
                    since: 0,
                    select: Selection::All,
                },
            },
            Case {
                text: "CMD=GETJOBS ARG=1700000000:j1:j2\n",
                want: Request::GetJobs {
                    since: 1_700_000_000,
                    select: Selection::Named(vec!["j1".into(), "j2".into()]),
                },
            },
            Case {
                text: "CMD=STARTJOB ARG=42 TASKLIST=n1:n1:n2",
                want: Request::StartJob {
                    job: "42".into(),
                    tasklist: vec!["n1".into(), "n1".into(), "n2".into()],
                },
            },
            Case {
                text: "CMD=CANCELJOB ARG=42 TYPE=WALLCLOCK",
                want: Request::CancelJob {
                    job: "42".into(),
                    kind: CancelType::Wallclock,
                },
            },
            Case {
                text: "CMD=CANCELJOB ARG=42",
                want: Request::CancelJob {
                    job: "42".into(),
                    kind: CancelType::Admin,
                },
            },
            Case {
                text: "CMD=SUSPENDJOB  ARG=42 COMMENT=x",
                want: Request::SuspendJob { job: "42".into() },
            },
            Case {
                text: "CMD=RESUMEJOB\tARG=42",
                want: Request::ResumeJob { job: "42".into() },
            },
        ];
        for case in cases {
            let got = Request::parse(case.text).unwrap();
            assert_eq!(got, case.want, "{:?}", case.text);
            let again = Request::parse(&got.render().unwrap()).unwrap();
            assert_eq!(again, got, "render of {:?}", case.text);
        }
    }

    #[test]
    fn bad_requests_are_refused_with_the_reason() {
        let cases = [
            ("no CMD", "ARG=0:ALL"),
            ("no ARG", "CMD=GETNODES"),
            ("bare token", "CMD=GETNODES ARG=0:ALL junk"),
            ("twice", "CMD=GETNODES CMD=GETJOBS ARG=0:ALL"),
            ("no since", "CMD=GETNODES ARG=ALL"),
            ("empty name", "CMD=GETNODES ARG=0:a::b"),
            ("ALL among names", "CMD=GETJOBS ARG=0:ALL:j1"),
            ("no tasklist", "CMD=STARTJOB ARG=1"),
            ("empty tasklist", "CMD=STARTJOB ARG=1 TASKLIST="),
            ("hole in tasklist", "CMD=STARTJOB ARG=1 TASKLIST=a::b"),
            ("bad type", "CMD=CANCELJOB ARG=1 TYPE=NOW"),
            ("bad job", "CMD=SUSPENDJOB ARG=a;b"),
        ];
        for (name, text) in cases {
            let err = Request::parse(text).unwrap_err();
            assert!(
                matches!(
                    err,
                    WikiError::Malformed { .. } | WikiError::InvalidValue { .. }
                ),
                "{name}: {err}"
            );
        }
        let err = Request::parse("CMD=REQUEUEJOB ARG=1").unwrap_err();
        assert!(matches!(err, WikiError::UnknownCommand { ref name } if name == "REQUEUEJOB"));
    }

    #[test]
    fn texts_go_under_both_names_rsp_last() {
        let reply = Reply::failed("no job \"9\" on this cluster");
        let text = reply.render().unwrap();
        assert_eq!(
            text,
            "SC=-1 RESPONSE=no job \"9\" on this cluster RSP=no job \"9\" on this cluster"
        );
        // What Maui takes: everything after the first "RSP=".
        let maui = &text[text.find("RSP=").unwrap() + 4..];
        assert_eq!(maui, "no job \"9\" on this cluster");
        assert_eq!(Reply::parse(&text, ReplyKind::Done).unwrap(), reply);

        let done = Reply::Done("job 1 started\non 2 processors".into());
        let text = done.render().unwrap();
        assert_eq!(
            text,
            "SC=0 RESPONSE=job 1 started on 2 processors RSP=job 1 started on 2 processors"
        );
        let long = Reply::failed("x".repeat(2000)).render().unwrap();
        assert!(long.len() < 2 * MAX_RESPONSE_CHARS + 40);
        assert!(Reply::Failed {
            code: 0,
            reason: "x".into()
        }
        .render()
        .is_err());
    }

    #[test]
    fn replies_of_other_servers_parse() {
        let cases = [
            (
                "SC=-300 RESPONSE=job 5 not found",
                Reply::Failed {
                    code: -300,
                    reason: "job 5 not found".into(),
                },
            ),
            (
                "SC=-1 ARG=ERROR:    cannot locate command\n",
                Reply::Failed {
                    code: -1,
                    reason: "ERROR:    cannot locate command".into(),
                },
            ),
            ("SC=0 RSP=ok", Reply::Done("ok".into())),
            ("SC=0", Reply::Done(String::new())),
        ];
        for (text, want) in cases {
            assert_eq!(Reply::parse(text, ReplyKind::Done).unwrap(), want, "{text}");
        }
        let nodes = Reply::parse(
            "SC=0 ARG=2#a:STATE=Idle;CPROC=2;#b:STATE=Busy;CPROC=4;",
            ReplyKind::Nodes,
        )
        .unwrap();
        let Reply::Nodes(nodes) = nodes else {
            panic!("{nodes:?}")
        };
        assert_eq!(nodes[1].state, NodeState::Busy);
        let jobs = Reply::parse(
            "SC=0 ARG=1#7:STATE=Completed;UNAME=u;GNAME=g;",
            ReplyKind::Jobs,
        )
        .unwrap();
        assert!(matches!(jobs, Reply::Jobs(ref j) if j[0].state == JobState::Completed));
        for bad in ["", "RSP=x", "SC=x", "SC=0 RESPONSE=no list"] {
            assert!(Reply::parse(bad, ReplyKind::Nodes).is_err(), "{bad:?}");
        }
    }
}
