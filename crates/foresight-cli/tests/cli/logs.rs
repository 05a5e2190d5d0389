//! What `server start` logs: the service's own events at `info` by default
//! (docs/src/operator/service.md says which confinement a cluster uses is logged),
//! `FORESIGHT_LOG`, else `RUST_LOG`, to change it, and an unreadable filter reported rather
//! than silently ignored.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use crate::common::*;
use std::time::Duration;

const CONFIG: &str = "[[cluster]]\nname = \"a\"\nprocs = 1\n";

/// Restarts `s` with `RUST_LOG` set to `rust_log` and returns what the run logged once it
/// was up and stopped.
fn logged_with(s: &mut Server, rust_log: &str) -> String {
    s.sigterm(Duration::from_secs(20)).expect("stopped");
    s.env.push(("RUST_LOG".into(), rust_log.into()));
    s.launch();
    let log = s.stderr_path();
    s.sigterm(Duration::from_secs(20)).expect("stopped");
    let text = std::fs::read_to_string(log).unwrap();
    s.launch();
    text
}

#[test]
fn the_service_logs_its_events_by_default_and_reads_rust_log() {
    // An empty FORESIGHT_LOG counts as unset.
    let mut s = Server::with_config_logging(CONFIG, "");
    let confined = "local jobs are confined by";

    let default = logged_with(&mut s, "");
    assert!(default.contains(confined), "{default}");
    assert!(default.contains("INFO"), "{default}");

    let quiet = logged_with(&mut s, "error");
    assert!(!quiet.contains(confined), "RUST_LOG=error: {quiet}");

    let bad = logged_with(&mut s, "foresight_daemon=loud");
    assert!(
        bad.contains("RUST_LOG=\"foresight_daemon=loud\" is not a log filter"),
        "{bad}"
    );
    assert!(
        bad.contains(confined),
        "the default after a bad filter: {bad}"
    );
}
