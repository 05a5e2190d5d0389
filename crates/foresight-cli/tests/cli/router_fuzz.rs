//! Random and mutated requests at every route of the real server (issue 13, "must also
//! hold"): every method and path of the OpenAPI document (and `/metrics`), with valid and
//! mutated bodies, bad path ids, bad query parameters, wrong methods and content types, as
//! the administrator, as a plain user and without a token.
//!
//! Asserted for every request: an answer (a handler that panics drops the connection), never
//! a 5xx, and every 4xx a JSON body of the document's error shape (`code`, `message`) that
//! names the field at fault where the request was malformed (400, 402, 403, 405, 413, 415).
//! After the run the server's log holds no panic and `/healthz` still answers.
//!
//! The cases are drawn by proptest from a fixed seed, so a failure reproduces; all cases run
//! and every failure is listed, with a table of cases and failures by category (shown with
//! `--nocapture`).

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use crate::common;

use crate::common::Server;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// Cases per category: 14 categories, about a millisecond each.
const CASES_PER_CATEGORY: usize = 300;

/// What a case tries; the table's rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Category {
    Valid,
    WrongMethod,
    BadPathId,
    BadQuery,
    FieldDropped,
    WrongType,
    BadNumber,
    ControlChars,
    LongString,
    UnknownField,
    BadJson,
    WrongContentType,
    NoToken,
    Combined,
}

const CATEGORIES: [Category; 14] = [
    Category::Valid,
    Category::WrongMethod,
    Category::BadPathId,
    Category::BadQuery,
    Category::FieldDropped,
    Category::WrongType,
    Category::BadNumber,
    Category::ControlChars,
    Category::LongString,
    Category::UnknownField,
    Category::BadJson,
    Category::WrongContentType,
    Category::NoToken,
    Category::Combined,
];

impl Category {
    fn label(self) -> &'static str {
        match self {
            Category::Valid => "valid request (random caller)",
            Category::WrongMethod => "wrong method",
            Category::BadPathId => "bad path id or name",
            Category::BadQuery => "bad query parameters",
            Category::FieldDropped => "body field dropped",
            Category::WrongType => "body value of a wrong type",
            Category::BadNumber => "huge, negative, fractional, 2^63 numbers",
            Category::ControlChars => "NUL and control characters",
            Category::LongString => "very long strings",
            Category::UnknownField => "unknown body field",
            Category::BadJson => "bad JSON (truncated, NaN, trailing, not UTF-8)",
            Category::WrongContentType => "wrong or missing content type",
            Category::NoToken => "no token, bad token, plain user",
            Category::Combined => "several mutations at once",
        }
    }
}

/// One operation of the document.
#[derive(Clone, Debug)]
struct Route {
    method: String,
    path: String,
    params: Vec<String>,
    body: Option<Value>,
}

/// A valid body for each operation that takes one; the test fails if the document gains an
/// operation with a body not listed here, so that new routes are fuzzed too.
fn valid_body(method: &str, path: &str, now: i64) -> Option<Value> {
    let job = json!({"name": "fz", "procs": 1, "walltime": 60, "command": ["true"],
                     "cluster": "local", "env": {"A": "b"}, "cwd": "/tmp", "price": 1.0,
                     "hold": true});
    Some(match (method, path) {
        ("post", "/api/v1/jobs") => job,
        ("post", "/api/v1/jobs/batch") => json!({"jobs": [job.clone(), job]}),
        ("post", "/api/v1/estimate") => {
            json!({"procs": 2, "walltime": "1h", "price": 2.5, "co_allocate": true})
        }
        ("post", "/api/v1/reservations") => json!({
            "cluster": "local", "procs": 1, "start": now + 7200, "duration": 60,
            "acl": {"users": ["fuzzbob"], "groups": []}, "ttl": 600
        }),
        ("post", "/api/v1/users") => {
            json!({"name": "fz-new", "admin": false, "budget": 10.0, "unix_user": "root"})
        }
        ("post", "/api/v1/users/{name}/budget") => json!({"set": 100.0, "add": 1.5}),
        ("post", "/api/v1/users/{name}/unix-user") => json!({"unix_user": "root"}),
        ("post", "/api/v1/users/{name}/credentials") => {
            json!({"groups": ["g"], "accounts": ["a"], "classes": [], "qos": ["normal"]})
        }
        ("post", "/api/v1/users/{name}/state") => json!({"disabled": false}),
        ("post", "/api/v1/workflows") => json!({
            "name": "fzw", "on_failure": "cancel",
            "tasks": [{"name": "A", "command": ["true"], "walltime": 60, "procs": 1},
                      {"name": "B", "command": ["true"], "walltime": 60, "procs": 1}],
            "edges": [{"from": "A", "to": "B", "data_mb": 1.0}]
        }),
        _ => return None,
    })
}

/// Path ids: valid ones first (filled in at run time), then hostile ones.
const BAD_IDS: &[&str] = &[
    "abc",
    "-1",
    "-9223372036854775808",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999999999",
    "1e3",
    "1.5",
    "0x10",
    "%00",
    "%1b%5b2J",
    "1_",
    "_1",
    "1_-1",
    "1_18446744073709551616",
    "1_1_1",
    "%D9%A1",
    " 1",
    "NaN",
];

/// User names in the path: the throwaway user, one that does not exist, hostile ones. Never
/// the administrator or the plain user the run acts as (rotating their tokens or removing
/// them would end the run's coverage, not find a fault).
const NAMES: &[&str] = &[
    "fuzzcarol",
    "nobody",
    "%00",
    "%1b%5b31m",
    "..",
    "a%2Fb",
    "%FF%FE",
];

/// Hostile values a body field or a query parameter may be replaced with.
fn wrong_types() -> Vec<Value> {
    vec![
        json!(null),
        json!(true),
        json!("seven"),
        json!([1, 2]),
        json!({"x": 1}),
        json!([]),
        json!(""),
    ]
}

fn bad_numbers() -> Vec<Value> {
    vec![
        json!(-1),
        json!(0),
        json!(-9223372036854775808i64),
        json!(9223372036854775807i64),
        json!(9223372036854775808u64),
        json!(18446744073709551615u64),
        json!(1e308),
        json!(-1e308),
        json!(1.5),
        json!(-0.0),
        json!(5e-324),
        json!(4294967296u64),
        json!(4294967295u64),
        json!("9223372036854775807s"),
        json!("-1h"),
        json!("99999999999d"),
    ]
}

fn control_strings() -> Vec<Value> {
    vec![
        json!("a\u{0}b"),
        json!("\u{1b}[2J\u{1b}]0;owned\u{7}"),
        json!("line\nbreak"),
        json!("\r"),
        json!("\u{7f}"),
        json!("\u{202e}rtl"),
        json!("\u{0}"),
        json!(["\u{0}"]),
        json!({"\u{0}": "x"}),
        json!({"A=B": "\u{1b}"}),
    ]
}

fn long_strings() -> Vec<Value> {
    vec![
        json!("n".repeat(65_536)),
        json!("é".repeat(40_000)),
        json!("9".repeat(5_000)),
        json!(vec!["x".repeat(10_000); 50]),
        json!({"K".repeat(20_000): "v"}),
    ]
}

fn bad_json() -> Vec<Vec<u8>> {
    vec![
        b"".to_vec(),
        b"{".to_vec(),
        b"{\"procs\":".to_vec(),
        b"{\"procs\": NaN, \"walltime\": 60, \"command\": [\"true\"]}".to_vec(),
        b"{\"walltime\": Infinity}".to_vec(),
        b"{} {}".to_vec(),
        b"[]".to_vec(),
        b"null".to_vec(),
        b"\"str\"".to_vec(),
        b"42".to_vec(),
        vec![0xff, 0xfe, b'{', b'}'],
        b"{\"a\":\"\xc3\"}".to_vec(),
        b"{\"procs\": 1, \"procs\": 2}".to_vec(),
        format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)).into_bytes(),
        b"{\"command\": [\"\\ud800\"]}".to_vec(),
    ]
}

/// Every path to a value inside `v` (JSON pointers), the root excluded.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push(p.clone());
                pointers(x, p, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                let p = format!("{at}/{i}");
                out.push(p.clone());
                pointers(x, p, out);
            }
        }
        _ => {}
    }
}

fn parent_and_key(p: &str) -> (&str, String) {
    let (parent, key) = p.rsplit_once('/').unwrap();
    (parent, key.replace("~1", "/").replace("~0", "~"))
}

fn remove_at(v: &mut Value, p: &str) {
    let (parent, key) = parent_and_key(p);
    match v.pointer_mut(parent) {
        Some(Value::Object(m)) => {
            m.remove(&key);
        }
        Some(Value::Array(a)) => {
            if let Ok(i) = key.parse::<usize>() {
                if i < a.len() {
                    a.remove(i);
                }
            }
        }
        _ => {}
    }
}

fn set_at(v: &mut Value, p: &str, x: Value) {
    if let Some(slot) = v.pointer_mut(p) {
        *slot = x;
    }
}

/// The random choices of one case; the request is built from them deterministically.
#[derive(Clone, Debug)]
struct Draw {
    route: Index,
    pick: [Index; 6],
    caller: usize,
}

fn draws() -> impl Strategy<Value = Draw> {
    (any::<Index>(), any::<[Index; 6]>(), 0..3usize).prop_map(|(route, pick, caller)| Draw {
        route,
        pick,
        caller,
    })
}

/// A request as sent.
#[derive(Debug)]
struct Request {
    method: String,
    path: String,
    token: Option<String>,
    content_type: Option<String>,
    body: Option<Vec<u8>>,
}

impl Request {
    fn describe(&self) -> String {
        let body = self.body.as_ref().map(|b| {
            let s = String::from_utf8_lossy(b);
            if s.len() > 200 {
                format!(
                    "{}… ({} bytes)",
                    s.chars().take(200).collect::<String>(),
                    b.len()
                )
            } else {
                s.into_owned()
            }
        });
        let path = if self.path.len() > 200 {
            format!("{}…", self.path.chars().take(200).collect::<String>())
        } else {
            self.path.clone()
        };
        format!(
            "{} {path} (token: {}, content-type: {:?}) body: {body:?}",
            self.method,
            match &self.token {
                None => "none",
                Some(t) if t.len() == 48 => "a user's",
                Some(_) => "malformed",
            },
            self.content_type,
        )
    }
}

/// The run's fixed context: routes, ids that exist, tokens.
struct Context {
    routes: Vec<Route>,
    job_ids: Vec<String>,
    reservation_ids: Vec<String>,
    admin: String,
    user: String,
}

fn mutate_body(body: &mut Value, category: Category, draw: &Draw, k: usize) -> Option<Vec<u8>> {
    let mut ptrs = Vec::new();
    pointers(body, String::new(), &mut ptrs);
    let at = if ptrs.is_empty() {
        None
    } else {
        Some(draw.pick[k].get(&ptrs).clone())
    };
    let pick = |values: Vec<Value>| draw.pick[(k + 1) % 6].get(&values).clone();
    match category {
        Category::FieldDropped => {
            if let Some(p) = at {
                remove_at(body, &p);
            }
        }
        Category::WrongType => match at {
            Some(p) => set_at(body, &p, pick(wrong_types())),
            None => *body = pick(wrong_types()),
        },
        Category::BadNumber => match at {
            Some(p) => set_at(body, &p, pick(bad_numbers())),
            None => *body = pick(bad_numbers()),
        },
        Category::ControlChars => match at {
            Some(p) => set_at(body, &p, pick(control_strings())),
            None => *body = pick(control_strings()),
        },
        Category::LongString => match at {
            Some(p) => set_at(body, &p, pick(long_strings())),
            None => *body = pick(long_strings()),
        },
        Category::UnknownField => {
            let name = draw.pick[k].get(&["walltme", "extra", "\u{0}", "procs ", "__proto__"]);
            let mut objects = vec![String::new()];
            objects.extend(
                ptrs.iter()
                    .filter(|p| body.pointer(p).is_some_and(Value::is_object))
                    .cloned(),
            );
            let target = draw.pick[(k + 1) % 6].get(&objects).clone();
            if let Some(Value::Object(m)) = body.pointer_mut(&target) {
                m.insert(name.to_string(), json!(1));
            }
        }
        Category::BadJson => return Some(draw.pick[k].get(&bad_json()).clone()),
        _ => {}
    }
    None
}

fn build(ctx: &Context, category: Category, route: &Route, draw: &Draw) -> Request {
    let mut method = route.method.to_uppercase();
    let mut token = match draw.caller {
        0 => Some(ctx.admin.clone()),
        _ => Some(ctx.user.clone()),
    };
    // Ids and names: valid ones unless the category is about them.
    let bad_path = matches!(category, Category::BadPathId | Category::Combined);
    let id = if bad_path && draw.pick[0].index(2) == 0 {
        draw.pick[1].get(BAD_IDS).to_string()
    } else if route.path.contains("/reservations/") {
        draw.pick[1].get(&ctx.reservation_ids).clone()
    } else {
        draw.pick[1].get(&ctx.job_ids).clone()
    };
    let name = if bad_path {
        let long = "u".repeat(5_000);
        let mut names: Vec<String> = NAMES.iter().map(|s| s.to_string()).collect();
        names.push(long);
        draw.pick[2].get(&names).clone()
    } else {
        "fuzzcarol".to_string()
    };
    let mut path = route.path.replace("{id}", &id).replace("{name}", &name);
    // Query parameters: the declared ones with hostile values, unknown ones, repeats.
    let mut query = Vec::new();
    if matches!(category, Category::BadQuery | Category::Combined) {
        let values = [
            "-1",
            "abc",
            "18446744073709551616",
            "9223372036854775808",
            "-9223372036854775809",
            "-9223372036854775808",
            "9223372036854775807",
            "18446744073709551615",
            "253402300800",
            "-62167219200",
            "NaN",
            "1e999",
            "%00",
            "%1b%5b2J",
            "",
            "true",
            "running",
            "local",
        ];
        let mut names: Vec<String> = route.params.clone();
        names.extend(["unknown".to_string(), "limit".to_string()]);
        for k in 0..=draw.pick[3].index(3) {
            let n = draw.pick[(3 + k) % 6].get(&names);
            let v = draw.pick[(4 + k) % 6].get(&values);
            query.push(format!("{n}={v}"));
        }
        if draw.pick[5].index(5) == 0 {
            query.push(format!("from={}", "9".repeat(4000)));
        }
    } else if route.params.iter().any(|p| p == "limit") {
        query.push("limit=5".into());
    }
    if !query.is_empty() {
        path = format!("{path}?{}", query.join("&"));
    }
    // The body: valid, then mutated by the category.
    let mut content_type = route.body.as_ref().map(|_| "application/json".to_string());
    let mut raw = None;
    let mut body = route.body.clone();
    if let Some(b) = body.as_mut() {
        match category {
            Category::Combined => {
                let kinds = [
                    Category::FieldDropped,
                    Category::WrongType,
                    Category::BadNumber,
                    Category::ControlChars,
                    Category::UnknownField,
                ];
                for k in 0..3 {
                    let c = *draw.pick[k].get(&kinds);
                    raw = raw.or(mutate_body(b, c, draw, k));
                }
            }
            c => raw = mutate_body(b, c, draw, 0),
        }
    }
    match category {
        Category::WrongMethod => {
            let methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];
            let others: Vec<&str> = methods.iter().copied().filter(|m| *m != method).collect();
            method = draw.pick[4].get(&others).to_string();
        }
        Category::WrongContentType => {
            let types = [
                None,
                Some("text/plain"),
                Some("application/x-www-form-urlencoded"),
                Some("application/jsonp"),
                Some("multipart/form-data; boundary=x"),
                Some("application/json\u{e9}"),
            ];
            content_type = draw.pick[4].get(&types).map(str::to_string);
            if body.is_none() {
                raw = Some(b"x=1".to_vec());
            }
        }
        Category::NoToken => {
            let tokens = [
                None,
                Some("x".to_string()),
                Some("0".repeat(48)),
                Some(ctx.user.clone()),
            ];
            token = draw.pick[4].get(&tokens).clone();
        }
        Category::Combined if draw.pick[4].index(3) == 0 => token = None,
        _ => {}
    }
    let body = raw.or_else(|| body.map(|b| serde_json::to_vec(&b).unwrap()));
    Request {
        method,
        path,
        token,
        content_type,
        body,
    }
}

/// What is wrong with an answer, if anything.
fn judge(status: u16, text: &str) -> Option<String> {
    if status >= 500 {
        return Some(format!("{status}: {text}"));
    }
    if !(400..500).contains(&status) {
        return None;
    }
    let Ok(body) = serde_json::from_str::<Value>(text) else {
        return Some(format!("{status} with a body that is not JSON: {text:?}"));
    };
    let code = body["code"].as_str().unwrap_or_default();
    let message = body["message"].as_str().unwrap_or_default();
    if code.is_empty() || message.is_empty() {
        return Some(format!("{status} without the error shape: {body}"));
    }
    let must_name = matches!(status, 400 | 402 | 403 | 405 | 408 | 413 | 415 | 422);
    if must_name && body["field"].as_str().is_none_or(str::is_empty) {
        return Some(format!("{status} naming no field: {body}"));
    }
    None
}

fn send(client: &reqwest::blocking::Client, base: &str, r: &Request) -> Option<String> {
    let mut req = client.request(r.method.parse().unwrap(), format!("{base}{}", r.path));
    if let Some(t) = &r.token {
        req = req.header("Authorization", format!("Bearer {t}"));
    }
    if let Some(ct) = &r.content_type {
        // Bytes past ASCII are sent as they are (obs-text), as a careless client would.
        let value = reqwest::header::HeaderValue::from_bytes(ct.as_bytes()).unwrap();
        req = req.header("Content-Type", value);
    }
    if let Some(b) = &r.body {
        req = req.body(b.clone());
    }
    match req.send() {
        Err(e) => Some(format!("no answer: {e}")),
        Ok(resp) => {
            let status = resp.status().as_u16();
            let text = resp.text().unwrap_or_default();
            if r.method == "HEAD" {
                return (status >= 500).then(|| format!("{status}"));
            }
            judge(status, &text)
        }
    }
}

/// The operations of the served document, plus `/metrics`.
fn routes(doc: &Value, now: i64) -> Vec<Route> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let params = op["parameters"]
                .as_array()
                .map(|ps| {
                    ps.iter()
                        .filter(|p| p["in"] == "query")
                        .map(|p| p["name"].as_str().unwrap().to_string())
                        .collect()
                })
                .unwrap_or_default();
            let body = if op.get("requestBody").is_some() {
                let b = valid_body(method, path, now);
                assert!(
                    b.is_some(),
                    "{method} {path} takes a body this test has no valid example of: add one"
                );
                b
            } else {
                None
            };
            out.push(Route {
                method: method.clone(),
                path: path.clone(),
                params,
                body,
            });
        }
    }
    out.push(Route {
        method: "get".into(),
        path: "/metrics".into(),
        params: vec![],
        body: None,
    });
    out
}

#[test]
fn random_and_mutated_requests_never_get_a_5xx_or_an_unnamed_4xx() {
    let s = Server::start(4);
    let http = s.http();
    let user = s.add_user("fuzzbob", Some(1e6));
    s.add_user("fuzzcarol", Some(10.0));
    let now = common::now();
    // Ids that exist: a held job, an array, a running one; a reservation.
    let held = http.submit(json!({"procs": 1, "walltime": 600, "command": ["true"], "hold": true}));
    let array = http.submit(json!({"procs": 1, "walltime": 60, "command": ["true"],
                                   "array": "0-2", "hold": true}));
    let (st, r) = http.post(
        "/reservations",
        &json!({"cluster": "local", "procs": 1, "start": now + 3600, "duration": 60}),
    );
    assert_eq!(st, 201, "{r}");
    let (_, doc) = s.http_as("").get("/api/v1/openapi.json");
    let ctx = Context {
        routes: routes(&doc, now),
        // Jobs the run itself submits get the ids after these.
        job_ids: [held.to_string(), array.to_string(), format!("{array}_1")]
            .into_iter()
            .chain((1..40).map(|i| i.to_string()))
            .chain(["999999".to_string()])
            .collect(),
        reservation_ids: vec![r["id"].to_string(), "999999".into()],
        admin: s.token.clone(),
        user,
    };
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut runner = TestRunner::new_with_rng(
        Config {
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &[13; 32]),
    );
    let mut table: BTreeMap<Category, (usize, usize)> = BTreeMap::new();
    let mut failures = Vec::new();
    for category in CATEGORIES {
        // Every route at least once in every category, then random ones.
        for n in 0..CASES_PER_CATEGORY.max(ctx.routes.len()) {
            let draw = draws().new_tree(&mut runner).unwrap().current();
            let route = if n < ctx.routes.len() {
                n
            } else {
                draw.route.index(ctx.routes.len())
            };
            let req = build(&ctx, category, &ctx.routes[route], &draw);
            let verdict = send(&client, &s.url, &req);
            let row = table.entry(category).or_default();
            row.0 += 1;
            if let Some(why) = verdict {
                row.1 += 1;
                failures.push(format!(
                    "[{}] {}\n    -> {why}",
                    category.label(),
                    req.describe()
                ));
            }
        }
    }
    println!("| category | cases | failures |\n| --- | --- | --- |");
    for (c, (n, f)) in &table {
        println!("| {} | {n} | {f} |", c.label());
    }
    let total: usize = table.values().map(|r| r.0).sum();
    let failed: usize = table.values().map(|r| r.1).sum();
    println!("| all | {total} | {failed} |");
    let (st, _) = s.http_as("").get("/healthz");
    assert_eq!(st, 200, "the server stopped answering");
    let logs = s.logs();
    assert!(!logs.contains("panicked"), "the server panicked:\n{logs}");
    assert!(
        failures.is_empty(),
        "{} of {total} requests were answered wrongly:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
