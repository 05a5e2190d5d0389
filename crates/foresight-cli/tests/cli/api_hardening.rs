//! Defects an adversarial probe of the service found, each through the real binary: an
//! estimate's price checked as a submission's, every route in the OpenAPI document, JSON
//! bodies on the errors hyper answers by itself, a relative `--data-dir`, Unix accounts
//! that do not exist, and names with bidirectional or invisible characters.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use crate::common::*;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

// ------------------------------------------------------------------ prices

/// The prices a submission refuses, an estimate refuses alike: same status, same field,
/// same message.
#[test]
fn an_estimate_refuses_the_prices_a_submission_refuses() {
    let s = Server::start(1);
    let http = s.http();
    for price in [
        json!(-1),
        json!(1e308),
        json!(-1e308),
        json!(1e10),
        json!(-0.5),
    ] {
        let (est_status, est) = http.post(
            "/estimate",
            &json!({"procs": 1, "walltime": 60, "price": price}),
        );
        let (sub_status, sub) = http.post(
            "/jobs",
            &json!({"procs": 1, "walltime": 60, "command": ["true"], "price": price}),
        );
        assert_eq!(est_status, 400, "estimate at price {price}: {est}");
        assert_eq!(sub_status, 400, "submission at price {price}: {sub}");
        assert_eq!(est["field"], "price", "{est}");
        assert_eq!(est["message"], sub["message"], "price {price}");
        assert!(
            est["message"]
                .as_str()
                .unwrap()
                .contains("per processor-second"),
            "{est}"
        );
    }
    let (status, est) = http.post(
        "/estimate",
        &json!({"procs": 1, "walltime": 60, "price": 2}),
    );
    assert_eq!(status, 200, "{est}");
    // NaN cannot be written in JSON; the CLI refuses it rather than send null (the default
    // price).
    for bad in ["NaN", "inf", "-inf"] {
        let out = s
            .cli()
            .args([
                "estimate",
                "-n",
                "1",
                "-t",
                "60s",
                &format!("--price={bad}"),
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "--price {bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--price") && err.contains("finite"), "{err}");
    }
    let out = s
        .cli()
        .args(["estimate", "-n", "1", "-t", "60s", "--price", "-1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("price"), "{err}");
}

// ------------------------------------------------------------------ the document

/// Every route the router serves (the list the router is built from) is in the OpenAPI
/// document with exactly the methods it answers, and the document has nothing else.
#[test]
fn every_route_of_the_router_is_in_the_openapi_document() {
    let s = Server::start(1);
    let (status, doc) = s.http_as("").get("/api/v1/openapi.json");
    assert_eq!(status, 200, "{doc}");
    let paths = doc["paths"].as_object().unwrap();
    let client = reqwest::blocking::Client::new();
    let routes = foresight_daemon::api::route_paths();
    assert!(routes.len() > 30, "{routes:?}");
    let mut problems = Vec::new();
    for (path, documented) in &routes {
        let concrete = path.replace("{id}", "1").replace("{name}", "nobody");
        let mut answered = Vec::new();
        for method in ["get", "post", "put", "patch", "delete"] {
            let m = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let resp = client
                .request(m, format!("{}{concrete}", s.url))
                .send()
                .unwrap();
            let status = resp.status().as_u16();
            let body: Value = serde_json::from_str(&resp.text().unwrap()).unwrap_or(Value::Null);
            assert_ne!(
                body["message"], "no such endpoint",
                "{method} {path} is in route_paths() but not routed"
            );
            if status != 405 {
                answered.push(method);
            }
        }
        assert!(!answered.is_empty(), "{path} answers no method");
        if !documented {
            assert!(paths.get(path).is_none(), "{path} is a page, documented");
            continue;
        }
        match paths.get(path) {
            None => problems.push(format!("{path} ({answered:?}) is not in the document")),
            Some(item) => {
                let mut in_doc: Vec<&str> = item
                    .as_object()
                    .unwrap()
                    .keys()
                    .map(String::as_str)
                    .filter(|k| ["get", "post", "put", "patch", "delete"].contains(k))
                    .collect();
                in_doc.sort_unstable();
                answered.sort_unstable();
                if in_doc != answered {
                    problems.push(format!(
                        "{path}: the router answers {answered:?}, the document has {in_doc:?}"
                    ));
                }
            }
        }
    }
    for path in paths.keys() {
        if !routes.iter().any(|(p, _)| p == path) {
            problems.push(format!("{path} is documented but not routed"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    for path in ["/metrics", "/api/v1/grid", "/api/v1/openapi.json"] {
        let op = &paths[path]["get"];
        assert!(
            op["description"].is_string() || op["summary"].is_string(),
            "{path}: {op}"
        );
        assert!(op["responses"]["200"].is_object(), "{path}: {op}");
    }
    assert!(paths["/metrics"]["get"]["responses"]["403"].is_object());
    assert!(paths["/api/v1/grid"]["get"]["responses"]["401"].is_object());
    assert!(paths["/api/v1/openapi.json"]["get"]["responses"]["401"].is_null());
}

// ------------------------------------------------------------------ raw HTTP errors

/// Sends `request` on a new connection and reads the whole answer until the server closes
/// (or 10 s pass): status and body.
fn raw(server: &Server, request: &[u8]) -> (u16, String, String) {
    let addr = server.url.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // The server may answer and close before it has read everything.
    let _ = s.write_all(request);
    let mut answer = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                answer.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&answer);
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let length = head.lines().find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse::<usize>().unwrap())
                    });
                    if length.is_some_and(|n| body.len() >= n) {
                        break;
                    }
                }
            }
            Err(e) => panic!("reading the answer: {e} after {answer:?}"),
        }
    }
    let text = String::from_utf8_lossy(&answer).to_string();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no answer head: {text:?}"));
    let status = head
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status: {head:?}"));
    (status, head.to_string(), body.to_string())
}

/// The body is the API's JSON error with this code.
fn assert_json_error(what: &str, head: &str, body: &str, code: &str) {
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{what}: {head}"
    );
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{what}: {e}: {body:?}"));
    assert_eq!(v["code"], code, "{what}: {v}");
    assert!(!v["message"].as_str().unwrap().is_empty(), "{what}: {v}");
}

/// Every error the server answers, hyper's own included, carries the JSON error body.
#[test]
fn errors_hyper_answers_itself_carry_the_json_body() {
    let s = Server::with_config(
        "[http]\nbody_timeout_ms = 1000\n\n[[cluster]]\nname = \"local\"\nprocs = 1\n",
    );
    let head_limit = foresight_daemon::api::MAX_HEAD_BYTES;
    let long_uri = format!(
        "GET /api/v1/jobs?x={} HTTP/1.1\r\nHost: x\r\n\r\n",
        "a".repeat(70_000)
    );
    let mut huge = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ".to_vec();
    // Exactly the read buffer, never ending: all of it read, then refused.
    huge.resize(head_limit, b'a');
    let mut many = "GET /healthz HTTP/1.1\r\nHost: x\r\n".to_string();
    for i in 0..150 {
        many.push_str(&format!("X-H{i}: v\r\n"));
    }
    many.push_str("\r\n");
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("long URI", long_uri.into_bytes(), 414, "uri_too_long"),
        ("huge header", huge, 431, "request_header_fields_too_large"),
        (
            "many headers",
            many.into_bytes(),
            431,
            "request_header_fields_too_large",
        ),
        (
            "malformed request line",
            b"GARBAGE\r\n\r\n".to_vec(),
            400,
            "bad_request",
        ),
        (
            "bad method",
            b"G(T / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            400,
            "bad_request",
        ),
        (
            "bad version",
            b"GET / HTTP/9.9\r\nHost: x\r\n\r\n".to_vec(),
            400,
            "bad_request",
        ),
        (
            "bad header",
            b"GET / HTTP/1.1\r\nNo colon here\r\n\r\n".to_vec(),
            400,
            "bad_request",
        ),
        (
            "header with a NUL",
            b"GET / HTTP/1.1\r\nX-A: a\0b\r\n\r\n".to_vec(),
            400,
            "bad_request",
        ),
        (
            // One byte over the limit (2 MiB): all of it read, then refused.
            "body over the limit",
            format!(
                "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
                s.token,
                2 * 1024 * 1024 + 1,
                " ".repeat(2 * 1024 * 1024 + 1)
            )
            .into_bytes(),
            413,
            "payload_too_large",
        ),
        (
            "body that does not arrive",
            format!(
                "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
                 Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{",
                s.token
            )
            .into_bytes(),
            408,
            "request_timeout",
        ),
        (
            "unknown path",
            b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            404,
            "not_found",
        ),
        (
            "method not allowed",
            b"PUT /api/v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n".to_vec(),
            405,
            "method_not_allowed",
        ),
    ];
    for (what, request, status, code) in cases {
        let (got, head, body) = raw(&s, &request);
        assert_eq!(got, status, "{what}: {head}\n{body}");
        assert_json_error(what, &head, &body, code);
    }
    // The server still serves.
    let (status, _) = s.http().get("/whoami");
    assert_eq!(status, 200);
}

// ------------------------------------------------------------------ relative data dir

/// A server started by hand, stopped when dropped.
struct Started(Child);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        for _ in 0..100 {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// With `--data-dir data` (relative, the server started in a temporary directory), a job
/// runs and its output is kept: the directory is made absolute at start.
#[test]
fn a_relative_data_dir_runs_jobs() {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let log = std::fs::File::create(root.join("stderr.log")).unwrap();
    let child = Command::new(BIN)
        .args(["server", "start", "--listen", "127.0.0.1:0", "--procs", "1"])
        .args(["--data-dir", "data"])
        .current_dir(&root)
        .env("FORESIGHT_LOG", "warn")
        .env("FORESIGHT_UNIX_USER", "*=root")
        .env_remove("FORESIGHT_SERVER")
        .env_remove("FORESIGHT_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut server = Started(child);
    let dir = root.join("data");
    let url = wait_for("server.url", Duration::from_secs(30), || {
        if let Ok(Some(st)) = server.0.try_wait() {
            panic!(
                "the server exited with {st}: {}",
                std::fs::read_to_string(root.join("stderr.log")).unwrap_or_default()
            );
        }
        std::fs::read_to_string(dir.join("server.url"))
            .ok()
            .filter(|s| s.ends_with('\n'))
    });
    let token = std::fs::read_to_string(dir.join("admin.token")).unwrap();
    let http = Http::new(url.trim(), token.trim());
    let work = root.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let id = http.submit(json!({
        "procs": 1, "walltime": 60, "command": ["sh", "-c", "echo from-the-job"],
        "cwd": work.to_str().unwrap()
    }));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let job = loop {
        let (status, j) = http.get(&format!("/jobs/{id}"));
        assert_eq!(status, 200, "{j}");
        if is_final(&j) {
            break j;
        }
        assert!(std::time::Instant::now() < deadline, "job {id}: {j}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(job["state"], "completed", "{job}");
    let out = reqwest::blocking::Client::new()
        .get(format!("{}/api/v1/jobs/{id}/output", url.trim()))
        .bearer_auth(token.trim())
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert_eq!(out, "from-the-job\n");
    // Nothing was written under the job's working directory by mistake.
    assert!(!work.join("data").exists());
    drop(server);
}

// ------------------------------------------------------------------ Unix accounts

fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").unwrap().uid() == 0
}

/// `user add --unix-user` and `user modify --unix-user` with an account that does not exist
/// on the host: refused naming it when the service is root, else accepted with a warning.
#[test]
fn a_unix_account_that_does_not_exist_is_refused_or_warned_of() {
    let s = Server::start(1);
    let ghost = "no-such-account-4217";
    s.add_user("bob", None);
    for args in [
        vec!["user", "add", "carol", "--unix-user", ghost],
        vec!["user", "modify", "bob", "--unix-user", ghost],
    ] {
        let out = s.cli().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(ghost) && err.contains("does not exist"),
            "{args:?}: {err}"
        );
        if running_as_root() {
            assert!(!out.status.success(), "{args:?}");
            assert!(err.contains("unix_user"), "{err}");
        } else {
            assert!(out.status.success(), "{args:?}: {err}");
            assert!(err.contains("warning"), "{err}");
        }
    }
    if running_as_root() {
        let (status, v) = s
            .http()
            .post("/users/bob/unix-user", &json!({"unix_user": ghost}));
        assert_eq!(status, 400, "{v}");
        assert_eq!(v["field"], "unix_user", "{v}");
        let (status, v) = s.http().get("/users");
        assert_eq!(status, 200);
        assert!(
            v.as_array().unwrap().iter().all(|u| u["name"] != "carol"),
            "{v}"
        );
    }
    // An account that exists: no warning.
    let out = s
        .cli()
        .args(["user", "modify", "bob", "--unix-user", "root"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("warning"));
}

// ------------------------------------------------------------------ hidden characters

const HIDDEN: [char; 8] = [
    '\u{202e}', '\u{202a}', '\u{2066}', '\u{2069}', '\u{200f}', '\u{061c}', '\u{200b}', '\u{1b}',
];

/// User, job, workflow and task names with bidirectional controls or invisible characters
/// are refused, naming the field and the character.
#[test]
fn names_with_hidden_characters_are_refused() {
    let s = Server::start(1);
    let http = s.http();
    for c in HIDDEN {
        let name = format!("ev{c}il");
        let shown = c.escape_unicode().to_string();
        let (status, v) = http.post("/users", &json!({"name": name}));
        assert_eq!(status, 400, "{v}");
        assert_eq!(v["field"], "name");
        assert!(v["message"].as_str().unwrap().contains(&shown), "{v}");
        let (status, v) = http.post(
            "/jobs",
            &json!({"name": name, "procs": 1, "walltime": 60, "command": ["true"]}),
        );
        assert_eq!(status, 400, "{v}");
        assert_eq!(v["field"], "name");
        let task = json!({"name": "A", "command": ["true"], "walltime": 60});
        let (status, v) = http.post("/workflows", &json!({"name": name, "tasks": [task]}));
        assert_eq!(status, 400, "{v}");
        assert_eq!(v["field"], "name", "{v}");
        let task = json!({"name": name, "command": ["true"], "walltime": 60});
        let (status, v) = http.post("/workflows", &json!({"name": "w", "tasks": [task]}));
        assert_eq!(status, 400, "{v}");
        assert_eq!(v["field"], "tasks[0].name", "{v}");
    }
    let out = s
        .cli()
        .args(["user", "add", "ev\u{202e}il"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("\\u{202e}") && !err.contains('\u{202e}'),
        "{err}"
    );
    // Accents and other scripts are names like any other.
    let (status, v) = http.post("/users", &json!({"name": "Jürgen-李"}));
    assert_eq!(status, 201, "{v}");
}

/// A server that answers every request with one canned body; its address.
fn canned_server(answers: Vec<(String, String)>) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut buf = vec![0u8; 65536];
            let n = conn.read(&mut buf).unwrap_or(0);
            let req = String::from_utf8_lossy(&buf[..n]).to_string();
            let target = req.split_whitespace().nth(1).unwrap_or("").to_string();
            let path = target.split('?').next().unwrap_or("").to_string();
            let body = answers.iter().find(|(p, _)| *p == path).map_or_else(
                || "{\"code\":\"not_found\",\"message\":\"x\"}".into(),
                |(_, b)| b.clone(),
            );
            let _ = conn.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            );
        }
    });
    url
}

/// What a (hostile) server sends with bidirectional and invisible characters in it, the CLI
/// prints escaped, in tables and in JSON alike.
#[test]
fn the_cli_prints_hidden_characters_escaped() {
    let s = Server::start(1);
    let http = s.http();
    let id = http.submit(json!({"name": "plain", "procs": 1, "walltime": 60,
                               "command": ["true"], "hold": true}));
    let (_, jobs) = http.get("/jobs");
    let (_, job) = http.get(&format!("/jobs/{id}"));
    let (_, users) = http.get("/users");
    let bad = "ev\u{202e}il\u{2066}\u{200b}\u{85}\u{7f}";
    let taint = |v: &Value| {
        v.to_string()
            .replace("plain", bad)
            .replace("\"name\":\"admin\"", &format!("\"name\":{}", json!(bad)))
    };
    let url = canned_server(vec![
        ("/api/v1/jobs".into(), taint(&jobs)),
        (format!("/api/v1/jobs/{id}"), taint(&job)),
        ("/api/v1/users".into(), taint(&users)),
    ]);
    let id = id.to_string();
    for args in [
        vec!["job", "list"],
        vec!["job", "list", "-o", "json"],
        vec!["job", "show", id.as_str()],
        vec!["job", "show", id.as_str(), "-o", "json"],
        vec!["user", "list"],
        vec!["user", "list", "-o", "json"],
    ] {
        let out = assert_cmd::Command::new(BIN)
            .args(&args)
            .args(["--server", &url, "--token", "t"])
            .env("TZ", "UTC")
            .env_remove("FORESIGHT_SERVER")
            .env_remove("FORESIGHT_TOKEN")
            .env("FORESIGHT_DATA_DIR", "/nonexistent")
            .timeout(Duration::from_secs(20))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let raw: Vec<String> = stdout
            .chars()
            .filter(|&c| c != '\n' && foresight_api::text::is_hidden(c))
            .map(|c| c.escape_unicode().to_string())
            .collect();
        assert!(raw.is_empty(), "{args:?} printed {raw:?} raw:\n{stdout}");
        assert!(
            stdout.contains("\\u{202e}") || stdout.contains("\\u202e"),
            "{args:?}:\n{stdout}"
        );
        if args.contains(&"json") {
            // The same value: the escapes are JSON's own.
            let v: Value = serde_json::from_str(&stdout).unwrap();
            assert!(v.to_string().contains('\u{202e}'), "{v}");
        }
    }
}
