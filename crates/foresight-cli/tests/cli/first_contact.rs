//! First contact on a machine where the service runs as root (a container, a CI runner, a
//! test VM): the quick start's first job, submitted with the administrator's token, runs, as
//! root, instead of being refused for want of a Unix account named "admin".

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use crate::common::*;
use std::time::Duration;

#[test]
fn the_administrators_first_local_job_runs_when_the_service_is_root() {
    assert!(
        foresight_rm::account::running_as_root() || std::env::var_os("CI").is_none(),
        "this test needs root under CI"
    );
    let mut s = Server::start(1);
    // No [unix_user] mapping at all, as on a fresh machine.
    s.sigterm(Duration::from_secs(20)).expect("stopped");
    s.env.push(("FORESIGHT_UNIX_USER".into(), String::new()));
    s.launch();
    let id = s.submit(&["--cluster", "local", "-t", "30s", "--", "id", "-un"]);
    let j = s.wait_final(id, Duration::from_secs(30));
    assert_eq!(j["state"], "completed", "{j}");
    let out = s.run(&["job", "cat", &id.to_string()]);
    let me = if foresight_rm::account::running_as_root() {
        "root".to_string()
    } else {
        std::env::var("USER").unwrap_or_default()
    };
    assert_eq!(out.trim(), me, "{j}");
}
