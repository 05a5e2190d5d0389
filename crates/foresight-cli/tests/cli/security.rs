//! The security suite: what a user can do to the service, to root and to other users
//! through their jobs, one test per class of attack (docs/src/threat-model.md names each test
//! beside the line of the model it holds).
//!
//! - Nothing a user controls reaches a process while it holds root: the job's environment
//!   (by `--env`, `--export` and a workflow task's `env`), its working directory, the lookup
//!   of its program in `PATH`, and the paths its output goes to.
//! - Nothing of the service's environment reaches a job.
//! - Every job runs in a session of its own, with no controlling terminal: no keystrokes into
//!   the service's terminal, no SIGCONT across users.
//! - A suspended job stays stopped whatever the user's other jobs do, and its walltime
//!   counts the time it really ran.
//!
//! The tests that switch accounts need root, `useradd` and a C compiler (for the loader
//! probe); they make throwaway accounts and remove them. Under CI (`CI` set) a missing
//! requirement fails the test; elsewhere it says so and passes.

use crate::common::*;
use crate::fixture;
use crate::isolation::UnixUser;
use fixture::{executor, next, proc_stat, scratch, spec, wait_for_line};
use foresight_rm::tokio;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// True when the test may run: as root with `useradd` (and `tools`). Under CI a missing
/// requirement is a failure, not a skip.
fn as_root_with(tools: &[&str]) -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0");
    let missing: Vec<&str> = ["useradd"]
        .iter()
        .chain(tools)
        .copied()
        .filter(|t| {
            Command::new("sh")
                .args(["-c", &format!("command -v {t}")])
                .output()
                .is_ok_and(|o| !o.status.success())
        })
        .collect();
    if root && missing.is_empty() {
        return true;
    }
    let why = format!("security: needs root (root: {root}) and {missing:?}");
    assert!(
        std::env::var_os("CI").is_none(),
        "{why}: under CI this is a failure"
    );
    eprintln!("{why}: skipped");
    false
}

/// A throwaway account for one test, named from its tag and this process.
fn account(tag: &str) -> UnixUser {
    UnixUser::create(&format!("fssec-{tag}{}", std::process::id() % 100_000), &[])
}

/// A directory every account may enter and write (a scratch `/tmp` of the test's own).
fn open_dir(path: &Path) -> PathBuf {
    std::fs::create_dir_all(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o1777)).unwrap();
    path.to_path_buf()
}

/// A shared object whose constructor (run when the loader preloads or audits with it)
/// leaves a file `euid-<effective uid>` in `proofs`: a file `euid-0` is a root escalation.
fn loader_probe(dir: &Path, proofs: &Path) -> PathBuf {
    let c = dir.join("probe.c");
    let so = dir.join("probe.so");
    std::fs::write(
        &c,
        format!(
            r#"#include <stdio.h>
#include <unistd.h>
unsigned int la_version(unsigned int v) {{ return v; }}
__attribute__((constructor)) static void probe(void) {{
    char p[4096];
    snprintf(p, sizeof p, "{}/euid-%u", (unsigned) geteuid());
    FILE *f = fopen(p, "a");
    if (f) {{ fputs("loaded\n", f); fclose(f); }}
}}
"#,
            proofs.display()
        ),
    )
    .unwrap();
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&so)
        .arg(&c)
        .status()
        .unwrap();
    assert!(built.success(), "cc {}", c.display());
    std::fs::set_permissions(&so, std::fs::Permissions::from_mode(0o755)).unwrap();
    so
}

/// The uids that loaded the probe.
fn probed_uids(proofs: &Path) -> Vec<u32> {
    let mut uids: Vec<u32> = std::fs::read_dir(proofs)
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("euid-")?.parse().ok())
        .collect();
    uids.sort_unstable();
    uids
}

/// The loader variables a user may set, by every route: `--env`, `--export NAME=VALUE` and a
/// workflow task's `env`. The job itself loads the probe (as its account: the proof that the
/// probe works), and no process loads it as root.
#[test]
fn a_users_environment_never_reaches_a_process_that_holds_root() {
    if !as_root_with(&["cc"]) {
        return;
    }
    let alice_unix = account("env");
    let s = Server::start(2);
    std::fs::set_permissions(s.root(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let work = open_dir(&s.scratch().join("work"));
    let proofs = open_dir(&s.scratch().join("proofs"));
    let so = loader_probe(&s.scratch(), &proofs);
    let alice = s
        .run(&["user", "add", "alice", "--unix-user", &alice_unix.0])
        .trim()
        .to_string();
    let so = so.display().to_string();
    let routes: [Vec<String>; 3] = [
        vec!["--env".into(), format!("LD_PRELOAD={so}")],
        vec!["--env".into(), format!("LD_AUDIT={so}")],
        vec!["--export".into(), format!("LD_PRELOAD={so}")],
    ];
    for route in &routes {
        let mut args = vec!["job", "submit", "-n", "1", "-t", "1", "--chdir"];
        let w = work.display().to_string();
        args.push(&w);
        args.extend(route.iter().map(String::as_str));
        args.extend(["--", "sh", "-c", "true"]);
        let id: u64 = s.run_as(&alice, &args).trim().parse().unwrap();
        let job = s.wait_final(id, Duration::from_secs(30));
        assert_eq!(job["state"], "completed", "{route:?}: {job}");
    }
    let yaml = format!(
        "name: probe\ntasks:\n  - name: A\n    command: [sh, -c, 'true']\n    walltime: 1\n    \
         env: {{LD_PRELOAD: '{so}'}}\n"
    );
    let wf = s.scratch().join("wf.yaml");
    std::fs::write(&wf, yaml).unwrap();
    let id: u64 = s
        .run_as(&alice, &["workflow", "submit", wf.to_str().unwrap()])
        .trim()
        .parse()
        .unwrap();
    wait_for("the workflow ends", Duration::from_secs(30), || {
        let out = s.run_as(&alice, &["workflow", "show", &id.to_string(), "-o", "json"]);
        let w: serde_json::Value = serde_json::from_str(&out).unwrap();
        (w["state"] != "running" && w["state"] != "pending").then_some(())
    });
    assert_eq!(
        probed_uids(&proofs),
        [alice_unix.uid()],
        "the probe must be loaded by alice's jobs, and by nothing as root"
    );
}

/// Nothing of the service's environment (its token, database password, cloud credentials)
/// is a job's: a job gets `PATH`, its account's `HOME`, `USER`, `LOGNAME`, `SHELL`, what its
/// submitter exported, and the `FORESIGHT_*` variables.
#[test]
fn the_services_environment_is_invisible_to_jobs() {
    let secrets = [
        ("FORESIGHT_TOKEN", "service-token-secret"),
        ("PGPASSWORD", "database-secret"),
        ("AWS_SECRET_ACCESS_KEY", "cloud-secret"),
    ];
    let s = Server::with_env(1, &secrets);
    let dump = s.scratch().join("env.txt");
    let id = s.submit(&[
        "-t",
        "1",
        "--env",
        "MINE=exported",
        "--",
        "sh",
        "-c",
        &format!("env > {}", dump.display()),
    ]);
    let job = s.wait_final(id, Duration::from_secs(30));
    assert_eq!(job["state"], "completed", "{job}");
    let env = std::fs::read_to_string(&dump).unwrap();
    for (name, value) in secrets {
        assert!(!env.contains(value), "{name} reached the job:\n{env}");
    }
    let names: std::collections::BTreeSet<&str> = env
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k)
        .collect();
    for want in [
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "MINE",
        "FORESIGHT_JOB_ID",
    ] {
        assert!(names.contains(want), "{want} missing:\n{env}");
    }
    let allowed = |n: &str| {
        n.starts_with("FORESIGHT_")
            || [
                "PATH", "HOME", "USER", "LOGNAME", "SHELL", "MINE", "PWD", "SHLVL", "_",
            ]
            .contains(&n)
    };
    let foreign: Vec<&&str> = names.iter().filter(|n| !allowed(n)).collect();
    assert!(
        foreign.is_empty(),
        "variables not documented: {foreign:?}\n{env}"
    );
}

/// A job is the leader of a session of its own, with no controlling terminal: it cannot
/// open `/dev/tty`, whatever terminal the service was started from.
#[tokio::test(crate = "foresight_rm::tokio")]
async fn every_job_has_a_session_of_its_own_and_no_terminal() {
    let s = scratch();
    let (executor, mut events) = executor(&s.jobs);
    let script = "echo $$ > job.pid; cat /proc/$$/stat > job.stat; \
                  if (exec 3</dev/tty) 2>/dev/null; then echo tty; else echo no-tty; fi > tty.txt";
    let spec = spec(1, &s.work, &["sh", "-c", script]);
    executor.launch(&spec).await.unwrap();
    let outcome = next(&mut events).await.outcome;
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
    let pid: i32 = std::fs::read_to_string(s.work.join("job.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let stat =
        fixture::parse_stat(&std::fs::read_to_string(s.work.join("job.stat")).unwrap()).unwrap();
    assert_eq!(stat.session, pid, "the job leads its own session: {stat:?}");
    assert_eq!(stat.pgrp, pid, "and its own process group: {stat:?}");
    let mine = proc_stat("self").unwrap().session;
    assert_ne!(stat.session, mine, "not the service's session");
    assert_eq!(
        std::fs::read_to_string(s.work.join("tty.txt")).unwrap(),
        "no-tty\n"
    );
}

/// Stops or continues a process group or process with `kill`, as a job would.
fn kill_script(signal: &str, pid: &str) -> String {
    format!("kill -{signal} {pid} 2>/dev/null && echo sent || echo refused")
}

/// A job cannot send a signal (here SIGCONT, which a shared session would allow) to another
/// user's suspended job.
#[tokio::test(crate = "foresight_rm::tokio")]
async fn a_job_cannot_signal_another_users_job() {
    if !as_root_with(&[]) {
        return;
    }
    let (a, b) = (account("sa"), account("sb"));
    let s = scratch();
    std::fs::set_permissions(&s.work, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let mut parent = s.work.parent().unwrap().to_path_buf();
    while parent != Path::new("/") {
        let mode = std::fs::metadata(&parent).unwrap().mode();
        std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(mode | 0o011)).unwrap();
        parent.pop();
    }
    let (executor, mut events) = executor(&s.jobs);
    let mut victim = spec(
        1,
        &s.work,
        &["sh", "-c", "echo $$ > victim.pid; exec sleep 60"],
    );
    victim.unix_user = Some(a.0.clone());
    executor.launch(&victim).await.unwrap();
    let pid = wait_for_line(&s.work.join("victim.pid")).await;
    executor.suspend(1, 0).unwrap();
    let mut attacker = spec(2, &s.work, &["sh", "-c", &kill_script("CONT", &pid)]);
    attacker.unix_user = Some(b.0.clone());
    attacker.stdout = "attacker.out".into();
    executor.launch(&attacker).await.unwrap();
    let finished = next(&mut events).await;
    assert_eq!(finished.job, 2, "{finished:?}");
    let said = std::fs::read_to_string(s.work.join("attacker.out")).unwrap();
    assert_eq!(said, "refused\n", "b's job signalled a's job");
    assert_eq!(
        proc_stat(&pid).map(|p| p.state),
        Some('T'),
        "a's job is still stopped"
    );
    executor.cancel(1, 0).unwrap();
    next(&mut events).await;
}

/// A suspended job stays stopped while another job of the same user keeps sending it
/// SIGCONT (a frozen cgroup holds it; without one the supervisor stops it again at once),
/// and its walltime counts the time it really ran: it ends at its walltime of running, not
/// later.
#[tokio::test(crate = "foresight_rm::tokio")]
async fn a_suspended_job_stays_stopped_and_its_walltime_counts_what_it_ran() {
    suspended_against_sigcont(foresight_rm::Confinement::Auto).await;
}

/// The same without a cgroup (the session sweep, as on a host without cgroup v2): the
/// supervisor stops the job again, and what it ran counts.
#[tokio::test(crate = "foresight_rm::tokio")]
async fn without_a_cgroup_a_suspended_job_continued_by_its_user_is_stopped_and_charged() {
    suspended_against_sigcont(foresight_rm::Confinement::Session).await;
}

async fn suspended_against_sigcont(confinement: foresight_rm::Confinement) {
    let s = scratch();
    let (executor, mut events) = foresight_rm::LocalExecutor::confined(
        s.jobs.clone(),
        vec![env!("CARGO_BIN_EXE_foresight").into(), "supervise".into()],
        confinement,
    )
    .unwrap();
    let ticking = "echo $$ > job.pid; while :; do echo x >> ticks; sleep 0.1; done";
    let mut job = spec(1, &s.work, &["sh", "-c", ticking]);
    job.walltime_secs = 3;
    executor.launch(&job).await.unwrap();
    let pid = wait_for_line(&s.work.join("job.pid")).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    executor.suspend(1, 0).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ticks = || std::fs::read_to_string(s.work.join("ticks")).map_or(0, |t| t.lines().count());
    let before = ticks();
    let waker = format!("for i in $(seq 60); do kill -CONT {pid} -{pid}; sleep 0.1; done");
    executor
        .launch(&spec(2, &s.work, &["sh", "-c", &waker]))
        .await
        .unwrap();
    let woke = next(&mut events).await;
    let during = ticks() - before;
    let cgroup = executor.confinement().to_string().contains("cgroup");
    if cgroup {
        assert_eq!(during, 0, "a frozen job ran {during} ticks after SIGCONTs");
    }
    // Without a cgroup each SIGCONT may buy it up to the supervisor's 100 ms check: counted.
    executor.resume(1, 0).unwrap_or(());
    let ended = if woke.job == 1 {
        woke
    } else {
        next(&mut events).await
    };
    assert_eq!(ended.job, 1);
    assert!(ended.outcome.timed_out, "{:?}", ended.outcome);
    // 3 s of running is about 30 ticks; counting only "not suspended" time gives 60 more.
    let total = ticks();
    assert!(
        total <= 45,
        "it ran {total} ticks for a 3 s walltime (cgroup: {cgroup})"
    );
}

/// The job's program is looked up in its own `PATH` as its account: a directory only root
/// may search yields no program, and nothing runs as root.
#[tokio::test(crate = "foresight_rm::tokio")]
async fn the_program_is_looked_up_as_the_jobs_account() {
    if !as_root_with(&[]) {
        return;
    }
    let a = account("path");
    let s = scratch();
    let hidden = s.jobs.parent().unwrap().join("root-only");
    std::fs::create_dir(&hidden).unwrap();
    std::fs::set_permissions(&hidden, std::fs::Permissions::from_mode(0o700)).unwrap();
    let program = hidden.join("fs-sec-probe");
    std::fs::write(&program, "#!/bin/sh\nid -u > /dev/null\n").unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    open_dir(&s.work);
    let (executor, _events) = executor(&s.jobs);
    let mut job = spec(1, &s.work, &["fs-sec-probe"]);
    job.unix_user = Some(a.0.clone());
    job.env = vec![("PATH".into(), hidden.display().to_string())];
    let err = executor.launch(&job).await.unwrap_err().to_string();
    assert!(
        err.contains("fs-sec-probe")
            && (err.contains("no such program") || err.contains("permission denied")),
        "{err}"
    );
}

/// Output paths that are the user's (a link in their working directory to a file of
/// root's) are opened with the account's access: the root file is untouched and the job
/// fails naming its output. The service's own output directory never follows a link.
#[tokio::test(crate = "foresight_rm::tokio")]
async fn output_paths_reach_nothing_the_user_could_not_write() {
    if !as_root_with(&[]) {
        return;
    }
    let a = account("out");
    let s = scratch();
    let mut up = s.work.parent().unwrap().to_path_buf();
    std::fs::set_permissions(&up, std::fs::Permissions::from_mode(0o711)).unwrap();
    up.pop();
    open_dir(&s.work);
    let precious = s.jobs.parent().unwrap().join("precious");
    std::fs::write(&precious, "root's\n").unwrap();
    std::fs::set_permissions(&precious, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink(&precious, s.work.join("1.out")).unwrap();
    let (executor, _events) = executor(&s.jobs);
    let mut job = spec(1, &s.work, &["sh", "-c", "echo owned"]);
    job.unix_user = Some(a.0.clone());
    let err = executor.launch(&job).await.unwrap_err().to_string();
    assert!(
        err.contains("cannot open stdout file") && err.contains("1.out"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "root's\n");
    assert_eq!(std::fs::metadata(&precious).unwrap().uid(), 0);

    // In the service's own directory, a link is refused rather than followed.
    let own = s.jobs.parent().unwrap().join("output");
    std::fs::create_dir(&own).unwrap();
    std::os::unix::fs::symlink(&precious, own.join("2.out")).unwrap();
    let mut job = spec(2, &s.work, &["sh", "-c", "echo owned"]);
    job.unix_user = Some(a.0.clone());
    job.service_output = true;
    job.stdout = own.join("2.out");
    job.stderr = own.join("2.err");
    let err = executor.launch(&job).await.unwrap_err().to_string();
    assert!(err.contains("cannot open stdout file"), "{err}");
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "root's\n");
    assert_eq!(std::fs::metadata(&precious).unwrap().uid(), 0);
}
