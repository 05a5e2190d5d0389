//! A grid across hosts on one machine (issue 39's harness): the centre and each site in a
//! network namespace of its own, joined only by veth links with a bandwidth cap (`tc tbf`),
//! random loss (nftables `numgen random`) and a delaying relay in the test process, so that
//! the sites reach the centre only through it and the centre cannot reach them. The real
//! `foresight` binary runs in each namespace with its own data directory.
//!
//! Needs root, `ip`, `tc` and `nft`: outside CI a test without them skips saying why; under
//! CI (`CI` set) it fails naming what is missing (`scripts/test.sh` installs them).
#![allow(clippy::unwrap_used)] // tests fail loudly by design

#[path = "../common/mod.rs"]
mod common;

mod grid;
mod netns;
mod relay;
mod slurm;

mod coalloc;
mod data;
mod failover;
mod inputs;
mod links;
mod numbers;
mod partition;
mod trust;

use std::sync::{Mutex, MutexGuard};

/// One grid at a time: the co-allocation skew and the numbers are timings, and a 2-core
/// machine running three grids at once measures its own load.
static SERIAL: Mutex<()> = Mutex::new(());

/// The harness's lock when the machine can run it: root, with `ip`, `tc` and `nft`. Outside
/// CI `None` (the test skips, printing why); under CI a panic naming what is missing.
pub fn harness(test: &str) -> Option<MutexGuard<'static, ()>> {
    let mut missing = Vec::new();
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root {
        missing.push("root".to_string());
    }
    for tool in ["ip", "tc", "nft", "curl"] {
        let found = std::process::Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            missing.push(format!("`{tool}`"));
        }
    }
    if !missing.is_empty() {
        let why = format!("{test}: needs {}", missing.join(", "));
        assert!(
            std::env::var_os("CI").is_none(),
            "{why} (under CI this is a failure: scripts/test.sh installs them, as root)"
        );
        eprintln!("skipped: {why}");
        return None;
    }
    Some(SERIAL.lock().unwrap_or_else(|e| e.into_inner()))
}
