//! What an adversarial probe found (issue 33, item 5), end to end: `sim run` bounded on an
//! endless input; the CLI quiet when its standard output closes early (`| head -1`); and a
//! self-signed certificate made the usual way (`openssl req -x509`) accepted when it is the
//! certificate given with `--cacert`.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use crate::common::*;
use crate::tls::TlsServer;
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

// ------------------------------------------------------------------ sim: bounded input

const JOB_LINE: &str = "1 0 5 100 4 -1 -1 4 200 -1 1 3 2 -1 1 -1 -1 -1";

#[test]
fn sim_run_stops_an_endless_trace_at_its_limits_naming_the_file_and_the_line() {
    // A line without end: the default line limit.
    let out = Command::new(BIN)
        .args(["sim", "run", "--trace", "/dev/zero", "--procs", "4"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("/dev/zero:1: the line is longer than 65536 bytes")
            && err.contains("--max-line-bytes"),
        "{err}"
    );

    // Job lines without end (`yes`), through a pipe: the job limit, and memory stays small.
    let mut yes = Command::new("yes")
        .arg(JOB_LINE)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = Command::new(BIN)
        .args(["sim", "run", "--trace", "/dev/stdin", "--procs", "4"])
        .args(["--max-jobs", "20000", "--lenient"])
        .stdin(yes.stdout.take().unwrap())
        .output()
        .unwrap();
    let _ = yes.kill();
    let _ = yes.wait();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains(
            "/dev/stdin:20001: the trace has more than 20000 job lines, the limit (--max-jobs \
             raises it)"
        ),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");

    // A limit raised by a flag admits what it refused.
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("long.swf");
    let long_comment = format!("; {}\n", "x".repeat(100));
    std::fs::write(&trace, format!("{long_comment}{JOB_LINE}\n")).unwrap();
    let run = |extra: &[&str]| {
        Command::new(BIN)
            .args(["sim", "run", "--procs", "4", "--trace"])
            .arg(&trace)
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&["--max-line-bytes", "80"]);
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}:1: the line is longer than 80 bytes",
            trace.display()
        )),
        "{err}"
    );
    let out = run(&["--max-line-bytes", "200", "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["jobs"], 1);
}

#[test]
fn a_configuration_or_workflow_without_end_is_refused_naming_it() {
    for args in [
        &["sim", "grid", "--config", "/dev/zero"][..],
        &["sim", "sweep", "--config", "/dev/zero"],
        &[
            "workflow",
            "submit",
            "/dev/zero",
            "--server",
            "http://127.0.0.1:1",
        ],
    ] {
        let out = Command::new(BIN)
            .args(args)
            .env("FORESIGHT_TOKEN", "t")
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(
            err.contains("/dev/zero") && err.contains("longer than 16777216 bytes"),
            "{args:?}: {err}"
        );
    }
}

// --------------------------------------------------- standard output closed early

/// Runs `cmd` with its standard output read for `lines` lines, then closed; its status and
/// standard error.
fn cut_after(mut cmd: Command, lines: usize) -> (ExitStatus, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    for _ in 0..lines {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
    }
    drop(reader);
    let out = child.wait_with_output().unwrap();
    (out.status, text(&out.stderr))
}

/// Quiet, as coreutils in a pipe: no panic, no message, status 141 (128 + SIGPIPE); or 0
/// when `written_before` and all of it fit in the pipe before the reader went.
fn assert_quiet_exit(what: &str, (status, err): (ExitStatus, String), written_before: bool) {
    assert!(!err.contains("panicked"), "{what}: {err}");
    assert_ne!(status.code(), Some(101), "{what}: {err}");
    let allowed: &[i32] = if written_before { &[141, 0] } else { &[141] };
    assert!(
        status.code().is_some_and(|c| allowed.contains(&c)),
        "{what}: {status}: {err}"
    );
    assert!(err.trim().is_empty(), "{what}: {err}");
}

#[test]
fn the_cli_exits_quietly_when_its_output_is_closed_early() {
    let s = Server::start(2);
    let http = s.http();
    // Output over a pipe's 64 KiB, so that what follows the first line cannot all be written
    // before the reader goes: a job that printed 1.5 MB, and a thousand jobs queued.
    let big = http.submit(json!({"name": "big", "procs": 1, "walltime": 60,
                                 "command": ["seq", "1", "250000"]}));
    s.wait_final(big, Duration::from_secs(60));
    for i in 0..1000 {
        http.submit(
            json!({"name": format!("queued-{i}-{}", "q".repeat(40)), "procs": 2,
                           "walltime": 3600, "command": ["sleep", "3600"]}),
        );
    }
    let cli = |args: &[&str]| {
        let mut c = Command::new(BIN);
        c.args(args)
            .env("FORESIGHT_DATA_DIR", &s.dir)
            .env_remove("FORESIGHT_SERVER")
            .env_remove("FORESIGHT_TOKEN");
        c
    };
    for args in [
        &["job", "list", "--all"][..],
        &["job", "list", "--all", "-o", "json"],
        &["job", "cat", &big.to_string()],
        &["plan", "show", "-o", "json"],
    ] {
        assert_quiet_exit(&args.join(" "), cut_after(cli(args), 1), true);
        // Closed before anything is written.
        assert_quiet_exit(&args.join(" "), cut_after(cli(args), 0), false);
    }
}

#[test]
fn sim_and_completion_exit_quietly_when_their_output_is_closed() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = write_trace(tmp.path(), 2000);
    for args in [
        vec!["sim", "run", "--jobs", "3000"],
        vec!["sim", "run", "--jobs", "3000", "-o", "json"],
        vec!["sim", "run", "--trace", trace.to_str().unwrap()],
        vec!["completion", "bash"],
    ] {
        let mut c = Command::new(BIN);
        c.args(&args);
        assert_quiet_exit(&args.join(" "), cut_after(c, 0), false);
    }
}

fn write_trace(dir: &Path, jobs: usize) -> PathBuf {
    let path = dir.join("t.swf");
    let mut text = String::from("; MaxProcs: 8\n");
    for i in 1..=jobs {
        text.push_str(&format!(
            "{i} {} 0 100 4 -1 -1 4 200 -1 1 3 2 -1 1 -1 -1 -1\n",
            i * 10
        ));
    }
    std::fs::write(&path, text).unwrap();
    path
}

// ------------------------------------------------------- a self-signed certificate

/// `openssl`, which must be there under CI.
fn openssl() -> bool {
    let found = Command::new("openssl")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "openssl is not installed (apt-get install openssl)"
        );
        eprintln!("openssl is not installed: skipped");
    }
    found
}

/// A self-signed certificate and its key made the usual way, for `names`.
fn openssl_self_signed(dir: &Path, stem: &str, cn: &str, san: &str) -> (PathBuf, PathBuf) {
    let cert = dir.join(format!("{stem}-c.pem"));
    let key = dir.join(format!("{stem}-k.pem"));
    let out = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .args(["-subj", &format!("/CN={cn}"), "-addext", san])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    (cert, key)
}

#[test]
fn a_self_signed_certificate_made_the_usual_way_is_trusted_when_pinned() {
    if !openssl() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (cert, key) = openssl_self_signed(
        tmp.path(),
        "good",
        "localhost",
        "subjectAltName=DNS:localhost,IP:127.0.0.1",
    );
    let server = TlsServer::start(tmp.path(), &cert, &key);
    let out = server.cli(&["job", "list", "--cacert", cert.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let port = server.url.rsplit(':').next().unwrap().to_string();
    // By its other name too.
    let out = server.cli(&[
        "job",
        "list",
        "--cacert",
        cert.to_str().unwrap(),
        "--server",
        &format!("https://localhost:{port}"),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));

    // Pinned, the name is still checked: a certificate for another name is refused.
    let other = tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let (cert, key) = openssl_self_signed(
        &other,
        "elsewhere",
        "elsewhere",
        "subjectAltName=DNS:elsewhere.example",
    );
    let server = TlsServer::start(&other, &cert, &key);
    let out = server.cli(&["job", "list", "--cacert", cert.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("not valid for name \"127.0.0.1\""), "{err}");
    // Without --cacert it is not trusted at all.
    let out = server.cli(&["job", "list"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("cannot reach the server"));
}
