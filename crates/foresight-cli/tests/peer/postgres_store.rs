//! The real service on PostgreSQL (`server start --store postgres://…`, or `store` in the
//! config file), against this test binary's throwaway server: jobs run on the local executor
//! and their records outlive a restart; a bad or unreachable store is refused by name.
#![allow(clippy::unwrap_used)]

use crate::common::*;
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn a_service_on_postgres_runs_jobs_and_keeps_them_across_a_restart() {
    let url = foresight_testkit::postgres::database();
    let mut s = Server::with_store(2, &url);
    let out = s.scratch().join("ran");
    let done = s.submit(&[
        "-n",
        "1",
        "-t",
        "30s",
        "--",
        "sh",
        "-c",
        &format!("echo ran > {}", out.display()),
    ]);
    let j = s.wait_final(done, Duration::from_secs(30));
    assert_eq!(j["state"], "completed", "{j}\n{}", s.logs());
    assert_eq!(j["exit_code"], 0);
    // It really ran, on the local executor.
    assert!(
        std::fs::read_to_string(&out).unwrap() == "ran\n",
        "{}",
        s.logs()
    );
    let held = s.submit(&["--hold", "--", "true"]);
    // The records are in PostgreSQL: no SQLite file appeared in the data directory.
    assert!(!s.dir.join("foresight.db").exists());
    let token = s.token.clone();

    let status = s
        .sigterm(Duration::from_secs(10))
        .expect("exits within 10 s of SIGTERM");
    assert!(status.success(), "{status}\n{}", s.logs());
    s.launch();
    let after = s.show(done);
    for field in [
        "state",
        "exit_code",
        "submitted_at",
        "started_at",
        "ended_at",
    ] {
        assert_eq!(after[field], j[field], "{field}: {after}");
    }
    // A second service on the same database is refused while this one runs.
    let (status, err) = start_with_store(&url);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "database {url} is in use by foresight (pid {} on ",
            s.pid()
        )),
        "{err}"
    );
    let h = s.show(held);
    assert_eq!(
        (h["state"].as_str(), h["held"].as_bool()),
        (Some("pending"), Some(true))
    );
    // The admin came back from the database (no new token), and ids go on.
    assert_eq!(s.token, token);
    assert_eq!(s.submit(&["--hold", "--", "true"]), held + 1);
    assert!(!s.dir.join("foresight.db").exists());
}

#[test]
fn the_config_file_names_the_store_and_the_data_dir_holds_no_records() {
    let url = foresight_testkit::postgres::database();
    let mut s = Server::with_config(&format!(
        "store = \"{url}\"\n[[cluster]]\nname = \"local\"\nprocs = 1\n"
    ));
    let id = s.submit(&["--hold", "--", "true"]);
    s.sigterm(Duration::from_secs(10)).expect("stops");
    // Everything but the admin token goes: the job comes back from PostgreSQL alone.
    for entry in std::fs::read_dir(&s.dir).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap() != "admin.token" {
            if path.is_dir() {
                std::fs::remove_dir_all(&path).unwrap();
            } else {
                std::fs::remove_file(&path).unwrap();
            }
        }
    }
    s.launch();
    let j = s.show(id);
    assert_eq!(
        (j["state"].as_str(), j["held"].as_bool()),
        (Some("pending"), Some(true))
    );
}

#[test]
fn a_server_that_lost_its_database_to_another_stops_without_writing() {
    let url = foresight_testkit::postgres::database();
    let mut s = Server::with_store(1, &url);
    let held = s.submit(&["--hold", "--", "true"]);
    // The lock's session ends, and another holder takes the lock before the server can
    // take it again (as after a PostgreSQL restart, when another server starts first).
    let session = psql_row(
        &url,
        &format!(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() \
             AND application_name LIKE 'foresight (pid {} %'",
            s.pid()
        ),
    );
    let _other = foresight_testkit::postgres::server().session(
        &format!("{url}?application_name=other"),
        &format!(
            "SELECT pg_terminate_backend({session}, 5000); SELECT pg_advisory_lock({});",
            0x466f_7265_7369_6768_i64
        ),
    );
    let status = s.wait_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(1), "{}", s.logs());
    let logs = s.logs();
    assert!(
        logs.contains(&format!(
            "having lost the store to another server: database {url} is in use by other \
             from 127.0.0.1, connected since "
        )),
        "{logs}"
    );
    // The held job is as it was.
    let state = psql_row(&url, &format!("SELECT state FROM jobs WHERE id = {held}"));
    assert_eq!(state, "pending");
}

fn psql_row(url: &str, sql: &str) -> String {
    foresight_testkit::postgres::server().psql(url, sql)
}

/// `server start` with this `--store`: its exit status and stderr, within 30 s.
fn start_with_store(store: &str) -> (std::process::ExitStatus, String) {
    let tmp = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args(["server", "start", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(tmp.path().join("data"))
        .args(["--store", store])
        .env("FORESIGHT_UNIX_USER", "*=root")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_for("the server to refuse", Duration::from_secs(30), || {
        child.try_wait().unwrap()
    });
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    (status, err)
}

#[test]
fn a_bad_or_unreachable_store_is_refused_by_name_without_its_password() {
    for (store, says) in [
        (
            "postgres://ann:s3cret@127.0.0.1:1/grid",
            "cannot connect to the database at postgres://ann:***@127.0.0.1:1/grid: ",
        ),
        (
            "postgres://ann:s3cret@127.0.0.1:notaport/grid",
            "store location postgres://***@127.0.0.1:notaport/grid: invalid port number",
        ),
        (
            "postgress://ann:s3cret@127.0.0.1/grid",
            "unknown scheme \"postgress\"",
        ),
    ] {
        let (status, err) = start_with_store(store);
        assert_eq!(status.code(), Some(1), "{store}: {err}");
        assert!(err.contains(says), "{store}: {err}");
        assert!(!err.contains("s3cret"), "{store}: {err}");
        assert!(!err.contains("panicked"), "{store}: {err}");
    }
}

#[test]
fn server_config_shows_the_store_without_its_password() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["server", "config", "--data-dir"])
        .arg(dir.path())
        .args(["--store", "postgres://ann:s3cret@db.example:5433/grid"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("store = \"postgres://ann:***@db.example:5433/grid\""),
        "{text}"
    );
    assert!(!text.contains("s3cret"), "{text}");
}
