//! End-to-end on the real binary: inputs that must not hurt the service (issue 13, items
//! 14–16). Every refusal is a 4xx with a JSON body naming the field at fault.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use crate::common;

use crate::common::Server;
use serde_json::{json, Value};

/// Sends a raw request; the status and the body parsed as JSON (panics if it is not JSON).
fn raw(s: &Server, method: &str, path: &str, body: Option<Vec<u8>>) -> (u16, Value) {
    let client = reqwest::blocking::Client::new();
    let mut req = client
        .request(method.parse().unwrap(), format!("{}{path}", s.url))
        .bearer_auth(&s.token);
    if let Some(b) = body {
        req = req.header("content-type", "application/json").body(b);
    }
    let resp = req.send().unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().unwrap();
    let body: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{method} {path}: {status} with a non-JSON body {text:?}: {e}"));
    (status, body)
}

/// Sends a POST announcing `length` bytes of JSON and sends only part of them; the answer as
/// text.
fn head_only(s: &Server, path: &str, length: usize) -> String {
    use std::io::{Read, Write};
    let addr = s.url.trim_start_matches("http://");
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    write!(
        c,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n",
        s.token
    )
    .unwrap();
    // Past the 2 MiB limit, short of the announced length: the server must answer anyway.
    let _ = c.write_all(&vec![b' '; (2 << 20) + 4096]);
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = c.read(&mut buf) {
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
        if String::from_utf8_lossy(&answer).contains("\"message\"") {
            break;
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}

fn assert_refused(what: &str, (status, body): (u16, Value), want_status: u16, field: &str) {
    assert_eq!(status, want_status, "{what}: {body}");
    assert_eq!(body["field"], json!(field), "{what}: {body}");
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{what}: {body}"
    );
}

fn job(extra: Value) -> Vec<u8> {
    let mut j = json!({"procs": 1, "walltime": 60, "command": ["true"], "cluster": "local"});
    for (k, v) in extra.as_object().unwrap() {
        j[k] = v.clone();
    }
    serde_json::to_vec(&j).unwrap()
}

#[test]
fn malformed_requests_get_json_naming_the_field() {
    let s = Server::start(2);
    assert_refused(
        "non-numeric path id",
        raw(&s, "GET", "/api/v1/jobs/abc", None),
        400,
        "id",
    );
    assert_refused(
        "non-numeric reservation id",
        raw(&s, "POST", "/api/v1/reservations/x/commit", None),
        400,
        "id",
    );
    // Found by router_fuzz.rs: axum's own plain-text rejection answered this.
    assert_refused(
        "a user name that is not UTF-8",
        raw(&s, "DELETE", "/api/v1/users/%FF%FE", None),
        400,
        "name",
    );
    assert_refused(
        "a type error",
        raw(
            &s,
            "POST",
            "/api/v1/jobs",
            Some(job(json!({"procs": "four"}))),
        ),
        400,
        "procs",
    );
    assert_refused(
        "a type error inside a batch",
        raw(
            &s,
            "POST",
            "/api/v1/jobs/batch",
            Some(serde_json::to_vec(&json!({"jobs": [{"walltime": 60, "command": [1]}]})).unwrap()),
        ),
        400,
        "jobs[0].command[0]",
    );
    assert_refused(
        "a misspelt field",
        raw(
            &s,
            "POST",
            "/api/v1/jobs",
            Some(job(json!({"walltme": 60}))),
        ),
        400,
        "walltme",
    );
    assert_refused(
        "a query of the wrong type",
        raw(&s, "GET", "/api/v1/jobs?limit=many", None),
        400,
        "limit",
    );
    let (status, body) = raw(&s, "POST", "/api/v1/jobs", Some(b"{\"procs\":".to_vec()));
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["field"], json!("body"), "{body}");
    // An oversized body: 413, not 400.
    let answer = head_only(&s, "/api/v1/jobs", 4 << 20);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("\"field\":\"body\""), "{answer}");
    let (status, body) = raw(&s, "DELETE", "/api/v1/jobs", None);
    assert_eq!(status, 405, "{body}");
    assert_eq!(body["code"], json!("method_not_allowed"), "{body}");
}

#[test]
fn numbers_out_of_range_are_refused_naming_the_range() {
    let s = Server::start(2);
    for (what, extra, field) in [
        ("walltime 2^63-1", json!({"walltime": i64::MAX}), "walltime"),
        (
            "walltime over a year",
            json!({"walltime": "400d"}),
            "walltime",
        ),
        ("price infinite-ish", json!({"price": 1e308}), "price"),
    ] {
        let answer = raw(&s, "POST", "/api/v1/jobs", Some(job(extra)));
        assert!(
            answer.1["message"]
                .as_str()
                .unwrap_or("")
                .contains("at most"),
            "{what}: {}",
            answer.1
        );
        assert_refused(what, answer, 400, field);
    }
    let now = common::now();
    let reservation = |extra: Value| {
        let mut r = json!({"cluster": "local", "procs": 1, "start": now + 100, "duration": 60});
        for (k, v) in extra.as_object().unwrap() {
            r[k] = v.clone();
        }
        serde_json::to_vec(&r).unwrap()
    };
    assert_refused(
        "a huge TTL",
        raw(
            &s,
            "POST",
            "/api/v1/reservations",
            Some(reservation(json!({"ttl": i64::MAX}))),
        ),
        400,
        "ttl",
    );
    assert_refused(
        "start + duration overflows",
        raw(
            &s,
            "POST",
            "/api/v1/reservations",
            Some(reservation(json!({"start": i64::MAX - 10, "duration": 60}))),
        ),
        400,
        "start",
    );
    assert_refused(
        "an end past year 9999",
        raw(
            &s,
            "POST",
            "/api/v1/reservations",
            Some(reservation(json!({"end": i64::MAX}))),
        ),
        400,
        "end",
    );
}

#[test]
fn what_the_launch_would_reject_is_refused_at_submission() {
    let s = Server::start(2);
    for (what, extra, field) in [
        (
            "NUL in the command",
            json!({"command": ["true", "a\u{0}b"]}),
            "command",
        ),
        ("NUL in cwd", json!({"cwd": "/tmp/\u{0}"}), "cwd"),
        (
            "NUL in an env value",
            json!({"env": {"A": "x\u{0}"}}),
            "env",
        ),
        ("an empty env key", json!({"env": {"": "x"}}), "env"),
        ("'=' in an env key", json!({"env": {"A=B": "x"}}), "env"),
        (
            "an escape in the name",
            json!({"name": "\u{1b}]0;owned\u{7}"}),
            "name",
        ),
        (
            "a name too long",
            json!({"name": "n".repeat(65_536)}),
            "name",
        ),
        (
            "an escape in the group",
            json!({"group": "g\u{1b}[2J"}),
            "group",
        ),
    ] {
        assert_refused(
            what,
            raw(&s, "POST", "/api/v1/jobs", Some(job(extra))),
            400,
            field,
        );
    }
    // Still accepted: a plain name, tabs in arguments, UTF-8.
    let (status, body) = raw(
        &s,
        "POST",
        "/api/v1/jobs",
        Some(job(json!({"name": "Größe 1", "command": ["echo", "a\tb"]}))),
    );
    assert_eq!(status, 201, "{body}");
}
