//! The CLI never panics on what a server returns (issue 13, item 17): every command that
//! lists or shows what the server sends is run against a server whose answers are a real
//! server's, with names of 70 000 characters, control characters, times past year 9999 or
//! before 1970, and extreme numbers put in. The CLI may refuse an answer (an error naming
//! it), but never panics.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use crate::common::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// Keys whose strings are enumerations the CLI must read (left as they are, so that the
/// answer still parses and the hostile values reach the printing code).
const KEEP: &[&str] = &["state", "code", "phase", "kind", "by"];

/// Keys that hold instants.
fn is_time(key: &str) -> bool {
    key.ends_with("_at")
        || key == "at"
        || key.ends_with("_start")
        || matches!(
            key,
            "start" | "end" | "earliest" | "from" | "to" | "now" | "expires" | "until" | "since"
        )
}

/// One way of making a server's answer hostile.
#[derive(Clone, Copy, Debug)]
enum Hostile {
    LongNames,
    ControlChars,
    FarFuture,
    BeforeEpoch,
    ExtremeNumbers,
}

const ALL: [Hostile; 5] = [
    Hostile::LongNames,
    Hostile::ControlChars,
    Hostile::FarFuture,
    Hostile::BeforeEpoch,
    Hostile::ExtremeNumbers,
];

fn mutate(v: &mut Value, key: &str, how: Hostile) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                mutate(x, k, how);
            }
        }
        Value::Array(a) => {
            for x in a {
                mutate(x, key, how);
            }
        }
        Value::String(s) if !KEEP.contains(&key) => match how {
            Hostile::LongNames => *s = format!("{s}{}", "n".repeat(70_000)),
            Hostile::ControlChars => *s = format!("\u{1b}[2J\u{1b}]0;x\u{7}{s}\u{0}\r\u{7f}"),
            _ => {}
        },
        Value::Number(n) => match how {
            Hostile::FarFuture if is_time(key) => *v = json!(i64::MAX),
            Hostile::BeforeEpoch if is_time(key) => *v = json!(i64::MIN),
            // The largest value of the field's type, so that the answer still parses.
            Hostile::ExtremeNumbers => {
                *v = if n.is_f64() {
                    json!(f64::MAX)
                } else if is_time(key) {
                    json!(i64::MAX)
                } else if matches!(key, "id" | "job" | "reservation" | "ids") {
                    json!(u64::MAX)
                } else if matches!(key, "exit_code" | "signal") {
                    json!(i32::MAX)
                } else {
                    json!(u32::MAX)
                }
            }
            _ => {}
        },
        _ => {}
    }
}

/// A server that answers every request with the canned answer for its method and path
/// (query left out), or 404.
struct FakeServer {
    url: String,
    answers: Arc<Mutex<BTreeMap<String, (u16, String)>>>,
}

impl FakeServer {
    fn start() -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let answers: Arc<Mutex<BTreeMap<String, (u16, String)>>> = Arc::default();
        let table = answers.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let table = table.clone();
                std::thread::spawn(move || {
                    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
                    let mut reader = BufReader::new(conn.try_clone().unwrap());
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let mut parts = line.split_whitespace();
                        let method = parts.next().unwrap_or("").to_string();
                        let target = parts.next().unwrap_or("").to_string();
                        let path = target.split('?').next().unwrap_or("").to_string();
                        let mut length = 0usize;
                        loop {
                            let mut h = String::new();
                            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                                return;
                            }
                            if h == "\r\n" {
                                break;
                            }
                            if let Some((k, v)) = h.split_once(':') {
                                if k.eq_ignore_ascii_case("content-length") {
                                    length = v.trim().parse().unwrap_or(0);
                                }
                            }
                        }
                        let mut body = vec![0; length];
                        let _ = reader.read_exact(&mut body);
                        let (status, text) = table
                            .lock()
                            .unwrap()
                            .get(&format!("{method} {path}"))
                            .cloned()
                            .unwrap_or((
                                404,
                                json!({"code": "not_found", "message": "no such endpoint"})
                                    .to_string(),
                            ));
                        let ctype = if path.ends_with("/output") {
                            "text/plain"
                        } else {
                            "application/json"
                        };
                        let head = format!(
                            "HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\n\
                             Content-Length: {}\r\n\r\n",
                            text.len()
                        );
                        if conn.write_all(head.as_bytes()).is_err()
                            || conn.write_all(text.as_bytes()).is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        FakeServer { url, answers }
    }

    fn answer(&self, method: &str, path: &str, status: u16, body: &Value) {
        let text = match body {
            Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        self.answers
            .lock()
            .unwrap()
            .insert(format!("{method} /api/v1{path}"), (status, text));
    }
}

/// The real server's answers to every read route, with a job of each kind in them.
fn real_answers() -> Vec<(&'static str, String, Value)> {
    let s = Server::start(2);
    let http = s.http();
    let done = http.submit(json!({"name": "done", "procs": 1, "walltime": 60,
                                  "command": ["true"], "cluster": "local"}));
    s.wait_final(done, Duration::from_secs(30));
    // With a begin ahead, its explanation has a reason with an instant (`at`).
    let held = http.submit(json!({"name": "held", "procs": 2, "walltime": 600,
                                  "command": ["true"], "hold": true, "begin": now() + 3600}));
    let (st, r) = http.post(
        "/reservations",
        &json!({"cluster": "local", "procs": 1, "start": now() + 3600, "duration": 60}),
    );
    assert_eq!(st, 201, "{r}");
    s.add_user("bob", Some(50.0));
    let get = |p: &str| {
        let (st, v) = http.get(p);
        assert_eq!(st, 200, "{p}: {v}");
        v
    };
    let (st, estimate) = http.post("/estimate", &json!({"procs": 1, "walltime": 60}));
    assert_eq!(st, 200, "{estimate}");
    vec![
        ("GET", "/jobs".into(), get("/jobs?limit=100")),
        (
            "GET",
            format!("/jobs/{done}"),
            get(&format!("/jobs/{done}")),
        ),
        (
            "GET",
            format!("/jobs/{held}"),
            get(&format!("/jobs/{held}")),
        ),
        (
            "GET",
            format!("/jobs/{held}/explain"),
            get(&format!("/jobs/{held}/explain")),
        ),
        (
            "POST",
            format!("/jobs/{held}/cancel"),
            get(&format!("/jobs/{held}")),
        ),
        (
            "POST",
            format!("/jobs/{held}/release"),
            get(&format!("/jobs/{held}")),
        ),
        ("GET", "/reservations".into(), get("/reservations")),
        (
            "GET",
            format!("/reservations/{}", r["id"]),
            get(&format!("/reservations/{}", r["id"])),
        ),
        ("GET", "/clusters".into(), get("/clusters")),
        ("GET", "/plan".into(), get("/plan")),
        ("GET", "/users".into(), get("/users")),
        ("GET", "/whoami".into(), get("/whoami")),
        ("POST", "/estimate".into(), estimate),
        (
            "GET",
            format!("/jobs/{done}/output"),
            Value::String("out\u{1b}[2J\n".into()),
        ),
    ]
}

/// The ids in the real answers, and one fake server per way of making them hostile.
struct Fixture {
    done: String,
    held: String,
    reservation: String,
    servers: Vec<(Hostile, FakeServer)>,
}

static FIXTURE: OnceLock<Fixture> = OnceLock::new();

fn fixture() -> &'static Fixture {
    FIXTURE.get_or_init(|| {
        let answers = real_answers();
        let jobs = answers[0].2.as_array().unwrap();
        let id_of = |name: &str| jobs.iter().find(|j| j["name"] == name).unwrap()["id"].to_string();
        let servers = ALL
            .into_iter()
            .map(|how| {
                let fake = FakeServer::start();
                for (method, path, body) in &answers {
                    let mut v = body.clone();
                    mutate(&mut v, "", how);
                    fake.answer(method, path, 200, &v);
                }
                (how, fake)
            })
            .collect();
        Fixture {
            done: id_of("done"),
            held: id_of("held"),
            reservation: answers[6].2[0]["id"].to_string(),
            servers,
        }
    })
}

/// Runs `foresight ARGS` against every hostile server (`{done}`, `{held}` and `{res}` in
/// the arguments name the finished job, the held job and the reservation): it may fail,
/// but neither panics nor hangs.
fn never_panics(args: &[&str]) {
    let f = fixture();
    let args: Vec<String> = args
        .iter()
        .map(|a| {
            a.replace("{done}", &f.done)
                .replace("{held}", &f.held)
                .replace("{res}", &f.reservation)
        })
        .collect();
    let mut panics = Vec::new();
    for (how, fake) in &f.servers {
        let mut cmd = assert_cmd::Command::new(BIN);
        cmd.args(&args)
            .args(["--server", &fake.url, "--token", "t"])
            .env("TZ", "UTC")
            .env_remove("FORESIGHT_SERVER")
            .env_remove("FORESIGHT_TOKEN")
            .env("FORESIGHT_DATA_DIR", "/nonexistent")
            .timeout(Duration::from_secs(20));
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.code().is_none() {
            panics.push(format!("{how:?}: did not end within 20 s"));
        } else if out.status.code() == Some(101) || stderr.contains("panicked") {
            let tail: String = stderr.chars().take(600).collect();
            panics.push(format!("{how:?}: {tail}"));
        }
    }
    assert!(
        panics.is_empty(),
        "foresight {}:\n{}",
        args.join(" "),
        panics.join("\n")
    );
}

macro_rules! never_panics {
    ($($name:ident: [$($arg:expr),*];)*) => {
        $(
            #[test]
            fn $name() {
                never_panics(&[$($arg),*]);
            }
        )*
    };
}

never_panics! {
    job_list: ["job", "list"];
    job_list_all: ["job", "list", "--all"];
    job_list_json: ["job", "list", "--all", "-o", "json"];
    job_show_finished: ["job", "show", "{done}"];
    job_show_held: ["job", "show", "{held}"];
    job_explain: ["job", "explain", "{held}"];
    job_cancel: ["job", "cancel", "{held}"];
    job_release: ["job", "release", "{held}"];
    job_history: ["job", "history", "--since", "1970-01-01", "--until", "now"];
    job_history_csv: ["job", "history", "-o", "csv"];
    job_wait: ["job", "wait", "{done}"];
    job_cat: ["job", "cat", "{done}"];
    job_tail: ["job", "tail", "{done}"];
    reservation_list: ["reservation", "list"];
    reservation_show: ["reservation", "show", "{res}"];
    user_list: ["user", "list"];
    user_whoami: ["user", "whoami"];
    cluster_list: ["cluster", "list"];
    plan_show: ["plan", "show"];
    plan_show_narrow: ["plan", "show", "--width", "60"];
    report_usage: ["report", "usage", "--since", "1970-01-01"];
    report_usage_by_account: ["report", "usage", "--by", "account"];
    report_usage_by_cluster_csv: ["report", "usage", "--by", "cluster", "-o", "csv"];
    estimate: ["estimate", "-n", "1", "-t", "60s"];
}
