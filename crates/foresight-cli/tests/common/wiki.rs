//! Two real daemons joined by WIKI, for the WIKI end-to-end tests: B schedules its cluster
//! `maui` through its WIKI server, A drives it as a cluster `w` of kind `wiki`.
#![allow(dead_code)] // each test file uses a different part

use crate::common::{free_port, wait_for, Server};
use serde_json::Value;
use std::time::Duration;

/// The WIKI checksum key both daemons share.
pub const KEY: u32 = 4418;

/// Daemon A (cluster `w` of kind `wiki` on B, policy `fcfs`, polling B every 300 ms and
/// giving up on an answer after `timeout_ms`) and daemon B (cluster `maui`, 4 processors,
/// scheduled through WIKI), once A sees `w` up; with the directory of their key and B's
/// token, which must outlive them.
pub fn wiki_pair(timeout_ms: u64) -> (Server, Server, tempfile::TempDir) {
    let keys = tempfile::tempdir().unwrap();
    let key_file = std::fs::canonicalize(keys.path()).unwrap().join("wiki.key");
    std::fs::write(&key_file, format!("{KEY}\n")).unwrap();
    let port = free_port();
    let b = Server::with_config(&format!(
        r#"
[[cluster]]
name = "maui"
procs = 4
scheduler = "wiki"

[cluster.wiki]
listen = "127.0.0.1:{port}"
key_file = "{}"
allowed_peers = ["127.0.0.1"]
"#,
        key_file.display()
    ));
    let token_file = keys.path().join("peer.token");
    std::fs::write(&token_file, &b.token).unwrap();
    let a = Server::with_config(&format!(
        r#"
[[cluster]]
name = "w"
kind = "wiki"
policy = "fcfs"

[cluster.wiki_rm]
address = "127.0.0.1:{port}"
key_file = "{}"
poll_ms = 300
timeout_ms = {timeout_ms}
submit_url = "{}"
submit_cluster = "maui"
token_file = "{}"
"#,
        key_file.display(),
        b.url,
        token_file.display()
    ));
    wait_for("cluster w up", Duration::from_secs(15), || {
        (first_cluster(&a)["state"] == "up").then_some(())
    });
    (a, b, keys)
}

/// The first (here the only) cluster a daemon lists.
pub fn first_cluster(s: &Server) -> Value {
    let (status, c) = s.http().get("/clusters");
    assert_eq!(status, 200, "{c}");
    c[0].clone()
}
