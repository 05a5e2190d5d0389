//! Users' jobs are isolated from each other and from the service: with the daemon running as
//! root, each job runs as its user's Unix account with that account's groups (and no other),
//! and cannot list the data directory or read the admin token, another user's output, or
//! another user's job spec (which holds the job's environment).
//!
//! Needs root, `useradd` and `groupadd` (it creates two throwaway accounts and a throwaway
//! group, and deletes them at the end); elsewhere it says why and passes.

#![allow(clippy::unwrap_used, clippy::print_stderr)] // tests fail loudly by design

use crate::common::*;
use serde_json::json;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Command;
use std::time::Duration;

/// A Unix account made for the test, deleted on drop.
pub(crate) struct UnixUser(pub(crate) String);

impl UnixUser {
    /// An account, member of the supplementary `groups` besides its own primary group.
    pub(crate) fn create(name: &str, groups: &[&UnixGroup]) -> UnixUser {
        let _ = Command::new("userdel").arg(name).status();
        let mut useradd = Command::new("useradd");
        useradd.args(["--no-create-home", "--shell", "/bin/sh"]);
        if !groups.is_empty() {
            let names: Vec<&str> = groups.iter().map(|g| g.0.as_str()).collect();
            useradd.args(["--groups", &names.join(",")]);
        }
        let status = useradd.arg(name).status().unwrap();
        assert!(status.success(), "useradd {name}");
        UnixUser(name.to_string())
    }

    pub(crate) fn uid(&self) -> u32 {
        let out = Command::new("id").args(["-u", &self.0]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }
}

impl Drop for UnixUser {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.0).status();
    }
}

/// A Unix group made for the test, deleted on drop (after the accounts in it).
pub(crate) struct UnixGroup(pub(crate) String);

impl UnixGroup {
    fn create(name: &str) -> UnixGroup {
        let _ = Command::new("groupdel").arg(name).status();
        let status = Command::new("groupadd").arg(name).status().unwrap();
        assert!(status.success(), "groupadd {name}");
        UnixGroup(name.to_string())
    }

    fn gid(&self) -> u32 {
        let out = Command::new("getent")
            .args(["group", &self.0])
            .output()
            .unwrap();
        let line = String::from_utf8_lossy(&out.stdout).to_string();
        line.split(':').nth(2).unwrap().parse().unwrap()
    }
}

impl Drop for UnixGroup {
    fn drop(&mut self) {
        let _ = Command::new("groupdel").arg(&self.0).status();
    }
}

fn can_run() -> bool {
    let uid = Command::new("id").arg("-u").output().map(|o| o.stdout);
    if !uid.is_ok_and(|u| u.trim_ascii() == b"0") {
        assert!(
            std::env::var_os("CI").is_none(),
            "isolation: not root under CI"
        );
        eprintln!("isolation: not root, so jobs cannot switch accounts: skipped");
        return false;
    }
    for tool in ["useradd", "groupadd"] {
        if Command::new(tool).arg("--help").output().is_err() {
            assert!(
                std::env::var_os("CI").is_none(),
                "isolation: no {tool} under CI"
            );
            eprintln!("isolation: no {tool} on this host: skipped");
            return false;
        }
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
    let extra = UnixGroup::create(&format!("fsiso-g{tag}"));
    let alice_unix = UnixUser::create(&format!("fsiso-a{tag}"), &[&extra]);
    let bob_unix = UnixUser::create(&format!("fsiso-b{tag}"), &[]);
    let s = Server::start(2);
    // The temporary directory is 0700; open it as an operator would open /var/lib.
    std::fs::set_permissions(s.root(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let data = s.root().join("data");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    // Traversable (not listable) so that every account reaches the local socket in it.
    assert_eq!(mode(&data), 0o711, "data directory");
    assert_eq!(mode(&data.join("output")), 0o700, "output directory");
    assert_eq!(mode(&data.join("admin.token")), 0o600, "admin.token");
    assert_eq!(mode(&data.join("foresight.db")), 0o600, "database");

    let alice = add_user(&s, "alice", &alice_unix.0);
    let bob = add_user(&s, "bob", &bob_unix.0);
    let (code, body) = s.http_as(&alice).post(
        "/api/v1/jobs",
        &json!({"walltime": 60,
                "command": ["sh", "-c", "id -un; id -G; pwd; echo alice-output-secret"],
                "env": {"ALICE_SECRET": "alice-env-secret"}}),
    );
    assert_eq!(code, 201, "{body}");
    let a = int(&body, "id") as u64;
    let job = s.wait_final(a, Duration::from_secs(30));
    assert_eq!(job["state"], "completed", "{job}");
    let a_out = data.join("output").join(format!("{a}.out"));
    let text = std::fs::read_to_string(&a_out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert_eq!(lines[0], alice_unix.0, "{text}");
    // Her groups: her own primary group and the extra one she is a member of; never root's.
    let gids: std::collections::BTreeSet<u32> = lines[1]
        .split_whitespace()
        .map(|g| g.parse().unwrap())
        .collect();
    let primary = String::from_utf8_lossy(
        &Command::new("id")
            .args(["-g", &alice_unix.0])
            .output()
            .unwrap()
            .stdout,
    )
    .trim()
    .parse::<u32>()
    .unwrap();
    assert_eq!(
        gids,
        [primary, extra.gid()].into_iter().collect(),
        "id -G in alice's job: {text}"
    );
    // Without a home directory and kept out of the data directory, she starts in `/`.
    assert_eq!(lines[2], "/", "{text}");
    assert_eq!(lines[3], "alice-output-secret", "{text}");
    let meta = std::fs::metadata(&a_out).unwrap();
    assert_eq!(meta.uid(), alice_unix.uid(), "alice owns her output");
    assert_eq!(meta.mode() & 0o777, 0o600, "her output is private");
    let spec = data.join("clusters/local").join(format!("{a}.0/spec.json"));
    assert!(std::fs::read_to_string(&spec)
        .unwrap()
        .contains("alice-env-secret"));
    assert_eq!(mode(&spec), 0o600, "spec.json");

    let script = format!(
        "id -un; ls {} || echo \"denied ls\"; for f in {} {} {}; do cat \"$f\" || echo \"denied $f\"; done",
        data.display(),
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
    assert_eq!(out.matches("denied ").count(), 4, "{out}\n{err}");
    assert!(
        out.contains("denied ls"),
        "bob listed the data directory: {out}"
    );
    assert!(!out.contains(&s.token), "bob read the admin token");
    assert!(
        !out.contains("alice-output-secret"),
        "bob read alice's output"
    );
    assert!(
        !out.contains("alice-env-secret"),
        "bob read alice's environment"
    );
    assert_eq!(err.matches("Permission denied").count(), 4, "{err}");

    // A user cannot be mapped to an account that does not exist (the service is root).
    let out = s
        .cli()
        .args(["user", "add", "carol", "--unix-user", "fsiso-nobody-here"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("\"fsiso-nobody-here\" does not exist"),
        "{err}"
    );
    // A user whose account was removed after the mapping cannot run local jobs, and is
    // told why.
    let gone = UnixUser::create(&format!("fsiso-gone{tag}"), &[]);
    let carol = add_user(&s, "carol", &gone.0);
    drop(gone);
    let (code, body) = s.http_as(&carol).post(
        "/api/v1/jobs",
        &json!({"walltime": 60, "command": ["true"]}),
    );
    assert_eq!(code, 403, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("\"carol\"") && message.contains(&format!("\"fsiso-gone{tag}\"")),
        "{message}"
    );
    drop(s);
    drop((alice_unix, bob_unix));
}

/// Two clusters: inputs named on `a` are copied for parts that run on `b`.
const TWO_CLUSTERS: &str = r#"
[[cluster]]
name = "a"
procs = 2

[[cluster]]
name = "b"
procs = 2
"#;

#[test]
fn staged_inputs_are_copied_as_the_jobs_account_and_never_as_root() {
    use std::os::unix::fs::{chown, symlink};
    if !can_run() {
        return;
    }
    let tag = std::process::id() % 100_000;
    let dan_unix = UnixUser::create(&format!("fsiso-s{tag}"), &[]);
    let s = Server::with_config(TWO_CLUSTERS);
    let root = s.root();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o711)).unwrap();
    let dir = |name: &str, mode: u32| {
        let d = root.join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
        d
    };
    let public = dir("public", 0o755).join("in.dat");
    std::fs::write(&public, "public data\n").unwrap();
    std::fs::set_permissions(&public, std::fs::Permissions::from_mode(0o644)).unwrap();
    // Readable as a file, but behind a directory only root may enter.
    let secret = dir("private", 0o700).join("secret.dat");
    std::fs::write(&secret, "root-only data\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    let victim = root.join("victim.dat");
    std::fs::write(&victim, "untouched\n").unwrap();
    let work = |name: &str| {
        let d = dir(name, 0o755);
        chown(&d, Some(dan_unix.uid()), None).unwrap();
        d
    };
    let dan = add_user(&s, "dan", &dan_unix.0);
    let submit = |input: &std::path::Path, cwd: &std::path::Path, command: &str| {
        let (code, body) = s.http_as(&dan).post(
            "/api/v1/jobs",
            &json!({"walltime": 60, "cluster": "b", "cwd": cwd,
                    "inputs": [{"path": input, "cluster": "a"}],
                    "command": ["sh", "-c", command]}),
        );
        assert_eq!(code, 201, "{body}");
        s.wait_final(int(&body, "id") as u64, Duration::from_secs(60))
    };

    // An input the account may read lands in its working directory, owned by it.
    let w1 = work("work-1");
    let j = submit(&public, &w1, "cat in.dat");
    assert_eq!(j["state"], "completed", "{j}");
    assert_eq!(
        std::fs::metadata(w1.join("in.dat")).unwrap().uid(),
        dan_unix.uid(),
        "the copy belongs to the job's account"
    );

    // One it may not read is refused at submission, naming the file and the account, and
    // the service does not measure it for the user.
    let w2 = work("work-2");
    let (code, body) = s.http_as(&dan).post(
        "/api/v1/jobs",
        &json!({"walltime": 60, "cluster": "b", "cwd": w2,
                "inputs": [{"path": secret, "cluster": "a"}],
                "command": ["cat", "secret.dat"]}),
    );
    assert_eq!(code, 400, "root staged a file dan cannot read: {body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(secret.to_str().unwrap()) && message.contains(&dan_unix.0),
        "{message}"
    );
    assert!(!w2.join("secret.dat").exists());

    // A symbolic link planted where the copy goes does not make root write through it: the
    // copy, made as dan, fails the job and says why.
    let w3 = work("work-3");
    symlink(&victim, w3.join("in.dat")).unwrap();
    let j = submit(&public, &w3, "true");
    assert_eq!(j["state"], "failed", "{j}");
    let reason = j["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("staging its input") && reason.contains(&dan_unix.0),
        "{reason}"
    );
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "untouched\n",
        "the copy wrote through a link into a file of root's"
    );
    drop(s);
    drop(dan_unix);
}

#[test]
fn outputs_come_back_owned_by_the_jobs_account() {
    use std::os::unix::fs::{chown, symlink};
    if !can_run() {
        return;
    }
    let tag = std::process::id() % 100_000;
    let eve_unix = UnixUser::create(&format!("fsiso-o{tag}"), &[]);
    // b keeps its own scratch, open to every account as /tmp is; a has one processor, so
    // a global job of two runs on b, away from its home directory.
    let b = tempfile::tempdir().unwrap();
    let b_root = std::fs::canonicalize(b.path()).unwrap();
    std::fs::set_permissions(&b_root, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let s = Server::with_config(&format!(
        "[[cluster]]\nname = \"a\"\nprocs = 1\n\n[[cluster]]\nname = \"b\"\nprocs = 2\n\
         work_dir = \"{}\"\n",
        b_root.display()
    ));
    let root = s.root();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o711)).unwrap();
    let home = root.join("home-eve");
    std::fs::create_dir_all(&home).unwrap();
    chown(&home, Some(eve_unix.uid()), None).unwrap();
    let victim = root.join("victim.dat");
    std::fs::write(&victim, "untouched\n").unwrap();
    let eve = add_user(&s, "eve", &eve_unix.0);
    let submit = |script: &str, output: &str| {
        let (code, body) = s.http_as(&eve).post(
            "/api/v1/jobs",
            &json!({"walltime": 60, "procs": 2, "cwd": home, "co_allocate": false,
                    "outputs": [{"path": output}],
                    "command": ["sh", "-c", script]}),
        );
        assert_eq!(code, 201, "{body}");
        let id = int(&body, "id") as u64;
        let j = s.wait_final(id, Duration::from_secs(60));
        if j["state"] != "completed" {
            return j;
        }
        s.wait_job(id, "outputs copied", Duration::from_secs(60), |j| {
            j["output_staging"]["ended_at"].is_i64()
        })
    };

    let j = submit("mkdir -p out && id -u > out/result.txt", "out/result.txt");
    assert_eq!(j["state"], "completed", "{j}");
    assert_eq!(j["parts"][0]["cluster"], "b", "{j}");
    assert!(j["output_staging"]["error"].is_null(), "{j}");
    let back = home.join("out/result.txt");
    assert_eq!(
        std::fs::read_to_string(&back).unwrap().trim(),
        eve_unix.uid().to_string(),
        "it ran as eve"
    );
    assert_eq!(
        std::fs::metadata(&back).unwrap().uid(),
        eve_unix.uid(),
        "the copy belongs to the job's account"
    );
    assert_eq!(
        std::fs::metadata(home.join("out")).unwrap().uid(),
        eve_unix.uid(),
        "so does the directory made for it"
    );

    // A link planted at home where the output lands does not make root write through it.
    symlink(&victim, home.join("planted.txt")).unwrap();
    let j = submit("echo overwritten > planted.txt", "planted.txt");
    assert_eq!(j["state"], "completed", "{j}");
    let reason = j["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("copying its outputs") && reason.contains(&eve_unix.0),
        "{reason}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched\n");
    drop(s);
    drop(eve_unix);
}
