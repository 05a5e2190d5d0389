//! Users' jobs are isolated from each other and from the service: with the daemon running as
//! root, each job runs as its user's Unix account, and cannot read the admin token, another
//! user's output, or another user's job spec (which holds the job's environment).
//!
//! Needs root and `useradd` (it creates two throwaway accounts and deletes them at the end);
//! elsewhere it says why and passes.

#![allow(clippy::unwrap_used, clippy::print_stderr)] // tests fail loudly by design

mod common;

use common::*;
use serde_json::json;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Command;
use std::time::Duration;

/// A Unix account made for the test, deleted on drop.
struct UnixUser(String);

impl UnixUser {
    fn create(name: &str) -> UnixUser {
        let _ = Command::new("userdel").arg(name).status();
        let status = Command::new("useradd")
            .args(["--no-create-home", "--shell", "/bin/sh", name])
            .status()
            .unwrap();
        assert!(status.success(), "useradd {name}");
        UnixUser(name.to_string())
    }

    fn uid(&self) -> u32 {
        let out = Command::new("id").args(["-u", &self.0]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }
}

impl Drop for UnixUser {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.0).status();
    }
}

fn can_run() -> bool {
    let uid = Command::new("id").arg("-u").output().map(|o| o.stdout);
    if !uid.is_ok_and(|u| u.trim_ascii() == b"0") {
        eprintln!("isolation: not root, so jobs cannot switch accounts: skipped");
        return false;
    }
    if Command::new("useradd").arg("--help").output().is_err() {
        eprintln!("isolation: no useradd on this host: skipped");
        return false;
    }
    true
}

fn add_user(s: &Server, name: &str, account: &str) -> String {
    s.run(&["user", "add", name, "--unix-user", account])
        .trim()
        .to_string()
}

#[test]
fn jobs_run_as_their_users_account_and_cannot_read_what_is_not_theirs() {
    if !can_run() {
        return;
    }
    let tag = std::process::id() % 100_000;
    let alice_unix = UnixUser::create(&format!("fsiso-a{tag}"));
    let bob_unix = UnixUser::create(&format!("fsiso-b{tag}"));
    let s = Server::start(2);
    // The temporary directory is 0700; open it as an operator would open /var/lib.
    std::fs::set_permissions(s.root(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let data = s.root().join("data");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&data), 0o711, "data directory");
    assert_eq!(mode(&data.join("admin.token")), 0o600, "admin.token");
    assert_eq!(mode(&data.join("foresight.db")), 0o600, "database");

    let alice = add_user(&s, "alice", &alice_unix.0);
    let bob = add_user(&s, "bob", &bob_unix.0);
    let (code, body) = s.http_as(&alice).post(
        "/api/v1/jobs",
        &json!({"walltime": 60, "command": ["sh", "-c", "id -un; echo alice-output-secret"],
                "env": {"ALICE_SECRET": "alice-env-secret"}}),
    );
    assert_eq!(code, 201, "{body}");
    let a = int(&body, "id") as u64;
    let job = s.wait_final(a, Duration::from_secs(30));
    assert_eq!(job["state"], "completed", "{job}");
    let a_out = data.join("output").join(format!("{a}.out"));
    let text = std::fs::read_to_string(&a_out).unwrap();
    assert_eq!(text, format!("{}\nalice-output-secret\n", alice_unix.0));
    let meta = std::fs::metadata(&a_out).unwrap();
    assert_eq!(meta.uid(), alice_unix.uid(), "alice owns her output");
    assert_eq!(meta.mode() & 0o777, 0o600, "her output is private");
    let spec = data.join("clusters/local").join(format!("{a}.0/spec.json"));
    assert!(std::fs::read_to_string(&spec)
        .unwrap()
        .contains("alice-env-secret"));
    assert_eq!(mode(&spec), 0o600, "spec.json");

    let script = format!(
        "id -un; for f in {} {} {}; do cat \"$f\" || echo \"denied $f\"; done",
        data.join("admin.token").display(),
        a_out.display(),
        spec.display()
    );
    let (code, body) = s.http_as(&bob).post(
        "/api/v1/jobs",
        &json!({"walltime": 60, "command": ["sh", "-c", script]}),
    );
    assert_eq!(code, 201, "{body}");
    let b = int(&body, "id") as u64;
    s.wait_final(b, Duration::from_secs(30));
    let out = std::fs::read_to_string(data.join("output").join(format!("{b}.out"))).unwrap();
    let err = std::fs::read_to_string(data.join("output").join(format!("{b}.err"))).unwrap();
    assert!(out.starts_with(&format!("{}\n", bob_unix.0)), "{out}");
    assert_eq!(out.matches("denied ").count(), 3, "{out}\n{err}");
    assert!(!out.contains(&s.token), "bob read the admin token");
    assert!(
        !out.contains("alice-output-secret"),
        "bob read alice's output"
    );
    assert!(
        !out.contains("alice-env-secret"),
        "bob read alice's environment"
    );
    assert_eq!(err.matches("Permission denied").count(), 3, "{err}");

    // A user whose account does not exist cannot run local jobs, and is told why.
    let carol = add_user(&s, "carol", "fsiso-nobody-here");
    let (code, body) = s.http_as(&carol).post(
        "/api/v1/jobs",
        &json!({"walltime": 60, "command": ["true"]}),
    );
    assert_eq!(code, 403, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("\"carol\"") && message.contains("\"fsiso-nobody-here\""),
        "{message}"
    );
    drop(s);
}
