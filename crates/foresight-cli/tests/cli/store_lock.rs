//! One server per store: a second `server start` with its own data directory but the first
//! one's SQLite file as `--store` refuses, naming the server that holds the file, and
//! launches nothing: the running job runs once.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use crate::common::*;
use predicates::str::contains;
use std::time::Duration;

#[test]
fn a_second_server_on_the_same_sqlite_store_refuses_naming_the_holder_and_a_job_runs_once() {
    let s = Server::start(1);
    let db = s.dir.join("foresight.db");
    let runs = s.scratch().join("runs");
    let id = s.submit(&[
        "-t",
        "60",
        "--",
        "sh",
        "-c",
        &format!("echo run >> {}; sleep 8", runs.display()),
    ]);
    s.wait_job(id, "running", Duration::from_secs(30), |j| {
        j["state"] == "running"
    });
    wait_for("the job's first line", Duration::from_secs(10), || {
        std::fs::read_to_string(&runs)
            .ok()
            .filter(|r| !r.is_empty())
    });
    let other = tempfile::tempdir().unwrap();
    let other_dir = other.path().join("data");
    start_on_store(&other_dir, &db)
        .assert()
        .code(1)
        .stderr(contains(format!("database {} is in use by", db.display())))
        .stderr(contains(format!("the server with PID {} on ", s.pid())))
        .stderr(contains(format!(
            "(data directory {}), since ",
            s.dir.display()
        )))
        .stderr(contains("stop that one"));
    // The refused server left no address behind, and the job, still running while it was
    // refused, ends having run once.
    assert!(!other_dir.join("server.url").exists());
    let job = s.wait_final(id, Duration::from_secs(30));
    assert_eq!(job["state"], "completed", "{job}\n{}", s.logs());
    assert_eq!(lines(&runs), ["run"], "{}", s.logs());
}

/// `server start` on the data directory `dir` and the store `db`, for at most 30 s.
fn start_on_store(dir: &std::path::Path, db: &std::path::Path) -> assert_cmd::Command {
    let mut c = assert_cmd::Command::new(BIN);
    c.args(["server", "start", "--listen", "127.0.0.1:0", "--procs", "1"])
        .arg("--data-dir")
        .arg(dir)
        .arg("--store")
        .arg(db)
        .env("FORESIGHT_UNIX_USER", "*=root")
        .env("FORESIGHT_LOG", "warn")
        .timeout(Duration::from_secs(30));
    c
}
