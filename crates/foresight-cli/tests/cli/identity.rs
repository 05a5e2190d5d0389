//! Local identity (issue 37): on the service's host the CLI talks over the local socket
//! and the service knows the caller by their Unix account, with no token, like munge under
//! Slurm. Root is the administrator; an ordinary account is the Foresight user of its name
//! (created on first contact) and its jobs run as that account. A token, when given, is
//! still checked; over TCP there is no identity without one.
//!
//! The test that switches accounts needs root and `useradd`; under CI (`CI` set) their
//! absence fails it, elsewhere it says so and passes.

#![allow(clippy::unwrap_used, clippy::print_stderr)] // tests fail loudly by design

use crate::common::*;
use crate::isolation::UnixUser;
use serde_json::Value;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

/// The README's first two jobs: a global one and a local one. `./simulate` prints who ran
/// it, and so does the local job.
const README_JOBS: [&[&str]; 2] = [
    &["job", "submit", "-n", "2", "-t", "10m", "--", "./simulate"],
    &[
        "job",
        "submit",
        "--cluster",
        "local",
        "-t",
        "30s",
        "--",
        "id",
        "-un",
    ],
];

/// True as root with `useradd`; under CI anything less is a failure, not a skip.
fn as_root_with_useradd() -> bool {
    let root = foresight_rm::account::running_as_root();
    let useradd = Command::new("sh")
        .args(["-c", "command -v useradd"])
        .output()
        .is_ok_and(|o| o.status.success());
    if root && useradd {
        return true;
    }
    let why = format!("identity: needs root (root: {root}) and useradd (found: {useradd})");
    assert!(
        std::env::var_os("CI").is_none(),
        "{why}: under CI this is a failure"
    );
    eprintln!("{why}: skipped");
    false
}

/// The CLI with nothing but the data directory: no server URL, no token.
fn local_cli(dir: &Path, cwd: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.env("FORESIGHT_DATA_DIR", dir)
        .env("TZ", "UTC")
        .env_remove("FORESIGHT_SERVER")
        .env_remove("FORESIGHT_TOKEN")
        .env_remove("FORESIGHT_SOCKET")
        .env_remove("XDG_DATA_HOME")
        .current_dir(cwd);
    c
}

fn ok(c: Command, args: &[&str]) -> String {
    run_ok(c.into(), args)
}

fn failing(mut c: Command, args: &[&str]) -> String {
    let out: Output = c.args(args).output().unwrap();
    assert!(
        !out.status.success(),
        "foresight {} should have failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A directory every account may enter and write.
fn open_dir(path: &Path) -> std::path::PathBuf {
    std::fs::create_dir_all(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o1777)).unwrap();
    path.to_path_buf()
}

/// The README's first jobs, with no token anywhere: the service's account (root in CI) is
/// the administrator on the socket, and its jobs run as that account. A made-up token on
/// the socket is refused, and TCP without a token knows nobody.
#[test]
fn the_first_jobs_run_without_a_token_over_the_local_socket() {
    let s = Server::start(2);
    let sock = s.dir.join("foresight.sock");
    let meta = std::fs::symlink_metadata(&sock).expect("the local socket");
    assert!(meta.file_type().is_socket());
    // Whatever the CLI does, it cannot use the admin token now.
    std::fs::remove_file(s.dir.join("admin.token")).unwrap();
    let work = s.scratch();
    let simulate = work.join("simulate");
    std::fs::write(&simulate, "#!/bin/sh\nid -un\n").unwrap();
    std::fs::set_permissions(&simulate, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cli = || local_cli(&s.dir, &work);

    let me: Value = serde_json::from_str(&ok(cli(), &["user", "whoami", "-o", "json"])).unwrap();
    assert_eq!(me["name"], "admin", "{me}");
    assert_eq!(me["admin"], true, "{me}");
    let account = foresight_rm::account::current().unwrap().name;
    for args in README_JOBS {
        let id: u64 = ok(cli(), args).trim().parse().unwrap();
        let job = s.wait_final(id, Duration::from_secs(60));
        assert_eq!(job["state"], "completed", "{args:?}: {job}");
        let out = ok(cli(), &["job", "cat", &id.to_string()]);
        assert_eq!(out.trim(), account, "{args:?}: {job}");
    }

    // A token on the socket is checked: a wrong one is not waved through by the uid.
    let mut lying = cli();
    lying.env("FORESIGHT_TOKEN", "0".repeat(48));
    let err = failing(lying, &["user", "whoami"]);
    assert!(
        err.contains("401") && err.contains("unknown token"),
        "{err}"
    );
    // A user's own token on the socket makes them that user, not the socket's caller.
    let alice = s.add_user("alice", None);
    let mut as_alice = cli();
    as_alice.env("FORESIGHT_TOKEN", &alice);
    let who: Value =
        serde_json::from_str(&ok(as_alice, &["user", "whoami", "-o", "json"])).unwrap();
    assert_eq!(who["name"], "alice", "{who}");

    // TCP: no token, no identity, whoever connects from wherever.
    let (code, body) = Http::new(&s.url, "").get("/whoami");
    assert_eq!(code, 401, "{body}");
    let resp = reqwest::blocking::Client::new()
        .get(format!("{}/api/v1/whoami", s.url))
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 401);
}

/// An ordinary account on the host: known by its uid through the socket (its Foresight user
/// made on first contact), its jobs run as itself, and it is nobody else: it cannot cancel
/// root's job, see the users, or pass for the administrator with a made-up token.
#[test]
fn an_ordinary_account_is_its_own_user_and_nobody_elses() {
    if !as_root_with_useradd() {
        return;
    }
    let unix = UnixUser::create(&format!("fsid-{}", std::process::id() % 100_000), &[]);
    let (uid, gid) = {
        let a = foresight_rm::account::lookup(&unix.0).unwrap().unwrap();
        (a.uid, a.gid)
    };
    let s = Server::start(2);
    // The temporary directory is 0700; open it as an operator would open /var/lib.
    std::fs::set_permissions(s.root(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&s.dir), 0o711, "a root service's data directory");
    assert_eq!(mode(&s.dir.join("foresight.sock")), 0o666, "its socket");
    assert_eq!(mode(&s.dir.join("admin.token")), 0o600, "the admin token");
    let work = open_dir(&s.scratch().join("work"));
    let as_root = || local_cli(&s.dir, &work);
    let as_user = || {
        let mut c = local_cli(&s.dir, &work);
        c.uid(uid).gid(gid).env("HOME", "/").env("USER", &unix.0);
        c
    };

    let roots: u64 = ok(
        as_root(),
        &[
            "job",
            "submit",
            "--cluster",
            "local",
            "-t",
            "60",
            "--",
            "sleep",
            "30",
        ],
    )
    .trim()
    .parse()
    .unwrap();
    s.wait_job(roots, "running", Duration::from_secs(30), |j| {
        j["state"] == "running"
    });

    let me: Value =
        serde_json::from_str(&ok(as_user(), &["user", "whoami", "-o", "json"])).unwrap();
    assert_eq!(me["name"], unix.0.as_str(), "{me}");
    assert_eq!(me["admin"], false, "{me}");
    let id: u64 = ok(as_user(), README_JOBS[1]).trim().parse().unwrap();
    let job = s.wait_final(id, Duration::from_secs(30));
    assert_eq!(job["state"], "completed", "{job}");
    assert_eq!(job["user"], unix.0.as_str(), "{job}");
    let out = ok(as_user(), &["job", "cat", &id.to_string()]);
    assert_eq!(
        out.trim(),
        unix.0,
        "the job ran as the caller's own account"
    );

    let err = failing(as_user(), &["job", "cancel", &roots.to_string()]);
    assert!(err.contains("403") || err.contains("404"), "{err}");
    let err = failing(as_user(), &["user", "list"]);
    assert!(
        err.contains("403") && err.contains("not an administrator"),
        "{err}"
    );
    let mut lying = as_user();
    lying.env("FORESIGHT_TOKEN", "f".repeat(48));
    let err = failing(lying, &["user", "list"]);
    assert!(
        err.contains("401") && err.contains("unknown token"),
        "{err}"
    );
    // The account cannot read the admin token to become the administrator either.
    let err = failing(
        {
            let mut c = as_user();
            c.env_remove("FORESIGHT_DATA_DIR");
            c
        },
        &[
            "user",
            "list",
            "--server",
            &s.url,
            "--data-dir",
            s.dir.to_str().unwrap(),
        ],
    );
    assert!(err.contains("admin.token"), "{err}");

    let root_job = s.show(roots);
    assert_eq!(
        root_job["state"], "running",
        "root's job was left alone: {root_job}"
    );
    let users: Value =
        serde_json::from_str(&ok(as_root(), &["user", "list", "-o", "json"])).unwrap();
    let made = users
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == unix.0.as_str())
        .unwrap_or_else(|| panic!("no user {} in {users}", unix.0));
    assert_eq!(made["unix_user"], unix.0.as_str(), "{made}");
    ok(as_root(), &["job", "cancel", &roots.to_string()]);
}

/// A service started with no options at all, killed (and its jobs with it) when dropped.
struct Bare(std::process::Child);

impl Drop for Bare {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        while std::time::Instant::now() < deadline {
            if self.0.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The README's commands on a fresh machine, word for word, as root and as an ordinary
/// account: root starts `server start` with no option (its default data directory, so it is
/// the host's system-wide service) and submits; the account, with no option and no data
/// directory of its own, finds the system-wide socket and submits, and its jobs run as it.
/// (`FORESIGHT_SYSTEM_SOCKET` moves the system-wide path into the test's directory, so that
/// tests running at the same time do not find this service.)
#[test]
fn on_a_fresh_machine_the_readme_commands_work_as_root_and_as_a_user() {
    if !as_root_with_useradd() {
        return;
    }
    let unix = UnixUser::create(&format!("fsfr-{}", std::process::id() % 100_000), &[]);
    let (uid, gid) = {
        let a = foresight_rm::account::lookup(&unix.0).unwrap().unwrap();
        (a.uid, a.gid)
    };
    let tmp = tempfile::tempdir().unwrap();
    let top = std::fs::canonicalize(tmp.path()).unwrap();
    std::fs::set_permissions(&top, std::fs::Permissions::from_mode(0o711)).unwrap();
    let root_home = top.join("root-home");
    std::fs::create_dir_all(&root_home).unwrap();
    let system = top.join("run").join("foresight.sock");
    let work = open_dir(&top.join("work"));
    let simulate = work.join("simulate");
    std::fs::write(&simulate, "#!/bin/sh\nid -un\n").unwrap();
    std::fs::set_permissions(&simulate, std::fs::Permissions::from_mode(0o755)).unwrap();
    let fresh = |c: &mut Command, home: &Path| {
        c.env("HOME", home)
            .env("FORESIGHT_SYSTEM_SOCKET", &system)
            .env("TZ", "UTC")
            .env_remove("FORESIGHT_DATA_DIR")
            .env_remove("FORESIGHT_SERVER")
            .env_remove("FORESIGHT_TOKEN")
            .env_remove("FORESIGHT_SOCKET")
            .env_remove("FORESIGHT_UNIX_USER")
            .env_remove("XDG_DATA_HOME")
            .current_dir(&work);
    };
    let mut server = Command::new(BIN);
    fresh(&mut server, &root_home);
    // Port 0: the test machine may run another service on the default port.
    server
        .args(["server", "start", "--listen", "127.0.0.1:0"])
        .env("FORESIGHT_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(top.join("stdout.log")).unwrap())
        .stderr(std::fs::File::create(top.join("stderr.log")).unwrap());
    let mut bare = Bare(server.spawn().unwrap());
    wait_for("the system-wide socket", Duration::from_secs(30), || {
        if let Ok(Some(status)) = bare.0.try_wait() {
            panic!(
                "the server exited with {status}: {}",
                std::fs::read_to_string(top.join("stderr.log")).unwrap_or_default()
            );
        }
        std::fs::symlink_metadata(&system)
            .is_ok_and(|m| m.file_type().is_socket())
            .then_some(())
    });
    let as_root = || {
        let mut c = Command::new(BIN);
        fresh(&mut c, &root_home);
        c
    };
    let as_user = || {
        let mut c = Command::new(BIN);
        fresh(&mut c, &top.join("nowhere"));
        c.uid(uid).gid(gid).env("USER", &unix.0);
        c
    };
    let wait = |id: u64| {
        wait_for("the job to end", Duration::from_secs(60), || {
            let out = ok(as_root(), &["job", "show", &id.to_string(), "-o", "json"]);
            let j: Value = serde_json::from_str(&out).unwrap();
            is_final(&j).then_some(j)
        })
    };
    for (who, cli, account) in [
        ("root", &as_root as &dyn Fn() -> Command, "root"),
        ("the account", &as_user, unix.0.as_str()),
    ] {
        for args in README_JOBS {
            let id: u64 = ok(cli(), args).trim().parse().unwrap();
            let job = wait(id);
            assert_eq!(job["state"], "completed", "{who} {args:?}: {job}");
            let out = ok(cli(), &["job", "cat", &id.to_string()]);
            assert_eq!(out.trim(), account, "{who} {args:?}: {job}");
        }
    }
    drop(bare);
    assert!(
        !system.exists(),
        "the system-wide socket is removed when the service stops"
    );
}
