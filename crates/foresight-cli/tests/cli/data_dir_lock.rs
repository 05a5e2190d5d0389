//! One server per data directory: a second `server start` on the same directory refuses,
//! naming the PID of the server that holds it, and leaves the first one's files alone.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use crate::common::*;
use predicates::str::contains;
use std::time::Duration;

#[test]
fn a_second_server_on_the_same_data_dir_refuses_naming_the_holder() {
    let mut s = Server::start(1);
    let data = s.root().join("data");
    let url_before = std::fs::read_to_string(data.join("server.url")).unwrap();
    assert_command(&data)
        .assert()
        .code(1)
        .stderr(contains(format!("the server with PID {}", s.pid())))
        .stderr(contains("server.lock"));
    // The refused server touched nothing of the first one's.
    assert_eq!(
        std::fs::read_to_string(data.join("server.url")).unwrap(),
        url_before
    );
    let id = s.submit(&["-t", "30", "--", "true"]);
    let job = s.wait_final(id, Duration::from_secs(30));
    assert_eq!(job["state"], "completed", "{job}");

    // A SIGKILLed server leaves its PID in the file but not the lock: a restart works.
    s.sigkill();
    s.launch();
    let id = s.submit(&["-t", "30", "--", "true"]);
    s.wait_final(id, Duration::from_secs(30));
}

fn assert_command(data: &std::path::Path) -> assert_cmd::Command {
    let mut c = assert_cmd::Command::new(BIN);
    c.args([
        "server",
        "start",
        "--listen",
        "127.0.0.1:0",
        "--procs",
        "1",
        "--data-dir",
    ])
    .arg(data)
    .env("FORESIGHT_UNIX_USER", "*=root")
    .env("FORESIGHT_LOG", "warn")
    .timeout(Duration::from_secs(30));
    c
}
