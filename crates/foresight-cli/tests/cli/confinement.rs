#![allow(clippy::unwrap_used)]
//! Confinement of local jobs, against real processes and the real `foresight supervise`:
//! a job's double-forked `setsid` children (which leave its process group and session, and
//! are no longer its descendants) are killed with it on cancel, at its walltime, and when a
//! restarted daemon finds the job unsupervised, and are held while it is suspended.
//!
//! Where cgroup v2 is writable (root on this machine) the executor confines each attempt in
//! its own cgroup; elsewhere it falls back to the session + process-group sweep, which
//! catches escapees only while the supervisor lives. The tests that need a cgroup say so
//! and pass where there is none.

use crate::fixture;

use fixture::*;
use foresight_rm::tokio;
use foresight_rm::{Adoption, LaunchSpec};
use std::fs;
use std::path::Path;
use std::time::Duration;

/// A job whose shell double-forks a `setsid` child: the child writes its pid to `PIDFILE`,
/// then does what `rest` says (`exec sleep 1000` by default), while the job sleeps.
fn escaping_job(job: u64, work: &Path, pidfile: &str, rest: &str) -> LaunchSpec {
    let inner = format!("echo $$ > {pidfile}; {rest}");
    let script = format!("(setsid sh -c '{inner}' &) ; sleep 1000");
    LaunchSpec {
        processors: vec![0],
        ..spec(job, work, &["sh", "-c", &script])
    }
}

/// Kills the processes a test left behind, whatever it asserted.
struct Leftovers(Vec<String>);

impl Drop for Leftovers {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", pid])
                .status();
        }
    }
}

/// Whether this host gives the executor a writable cgroup v2 hierarchy (as root with
/// cgroup2 mounted); the tests that need one pass elsewhere, saying why.
fn cgroup_v2_writable() -> bool {
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0");
    let mounted = fs::read_to_string("/proc/self/mountinfo")
        .is_ok_and(|m| m.lines().any(|l| l.contains(" - cgroup2 ")));
    if !(root && mounted) {
        assert!(
            std::env::var_os("CI").is_none(),
            "no writable cgroup v2 under CI (root: {root}, cgroup2 mounted: {mounted})"
        );
        eprintln!("no writable cgroup v2 here (root: {root}, cgroup2 mounted: {mounted}): skipped");
    }
    root && mounted
}

/// The double-forked child is not the job's descendant, not in its process group and not in
/// its session, yet dies when the job is cancelled.
#[tokio::test(crate = "foresight_rm::tokio")]
async fn a_double_forked_setsid_child_dies_when_the_job_is_cancelled() {
    let s = scratch();
    let (executor, mut events) = executor(&s.jobs);
    let spec = escaping_job(1, &s.work, "child.pid", "exec sleep 1000");
    executor.launch(&spec).await.unwrap();
    let child = wait_for_line(&s.work.join("child.pid")).await;
    let _leftovers = Leftovers(vec![child.clone()]);
    let job_pgid = fs::read_to_string(executor.job_dir(1, 0).join("job.json")).unwrap();
    let session = proc_stat(&child).unwrap().session;
    assert!(
        !job_pgid.contains(&format!("\"pgid\": {session}")),
        "the child has its own session"
    );
    let cgroup = fs::read_to_string(s.jobs.join("1.0/cgroup")).unwrap_or_default();
    executor.cancel(1, 0).unwrap();
    let finished = next(&mut events).await;
    assert!(finished.outcome.cancelled, "{:?}", finished.outcome);
    assert!(is_dead(&child), "the setsid child outlived the cancel");
    if !cgroup.trim().is_empty() {
        // Its cgroup, and the executor's parent with its last attempt, are removed.
        let cgroup = Path::new(cgroup.trim());
        assert!(!cgroup.exists(), "{} is left", cgroup.display());
        let parent = cgroup.parent().unwrap();
        assert!(!parent.exists(), "{} is left", parent.display());
    }
}

#[tokio::test(crate = "foresight_rm::tokio")]
async fn a_double_forked_setsid_child_dies_at_the_walltime() {
    let s = scratch();
    let (executor, mut events) = executor(&s.jobs);
    let mut spec = escaping_job(2, &s.work, "child.pid", "exec sleep 1000");
    spec.walltime_secs = 1;
    executor.launch(&spec).await.unwrap();
    let child = wait_for_line(&s.work.join("child.pid")).await;
    let _leftovers = Leftovers(vec![child.clone()]);
    let finished = next(&mut events).await;
    assert!(finished.outcome.timed_out, "{:?}", finished.outcome);
    assert!(is_dead(&child), "the setsid child outlived the walltime");
}

/// The daemon and the supervisor both die; the restarted daemon's adoption kills every
/// process of the job (not only its process group) before the attempt can run again.
#[test]
fn an_unsupervised_jobs_setsid_child_dies_before_the_attempt_is_lost() {
    if !cgroup_v2_writable() {
        return;
    }
    let s = scratch();
    let first = tokio::runtime::Runtime::new().unwrap();
    let child = first.block_on(async {
        let (executor, _events) = executor(&s.jobs);
        executor
            .launch(&escaping_job(3, &s.work, "child.pid", "exec sleep 1000"))
            .await
            .unwrap();
        wait_for_line(&s.work.join("child.pid")).await
    });
    drop(first);
    let _leftovers = Leftovers(vec![child.clone()]);
    let supervisor = fs::read_to_string(s.jobs.join("3.0/supervisor.pid")).unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-KILL", supervisor.trim()])
        .status()
        .unwrap();
    assert!(killed.success());
    std::thread::sleep(Duration::from_millis(200));
    assert!(!is_dead(&child), "the child runs on without a supervisor");
    let second = tokio::runtime::Runtime::new().unwrap();
    second.block_on(async {
        let (executor, _events) = executor(&s.jobs);
        assert_eq!(executor.adopt(3, 0).unwrap(), Adoption::Lost);
        assert!(
            is_dead(&child),
            "the setsid child survived its job's adoption"
        );
    });
}

/// How many lines a file has now (0 while it does not exist).
fn line_count(path: &Path) -> usize {
    fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

/// A suspended job holds still whole: its own process is stopped (`T`), and a double-forked
/// `setsid` child that keeps writing is frozen with it; both go on once resumed.
#[tokio::test(crate = "foresight_rm::tokio")]
async fn a_suspended_jobs_setsid_child_is_held_until_resume() {
    if !cgroup_v2_writable() {
        return;
    }
    let s = scratch();
    let (executor, mut events) = executor(&s.jobs);
    let ticks = s.work.join("ticks");
    let rest = format!(
        "while :; do echo tick >> {}; sleep 0.05; done",
        ticks.display()
    );
    executor
        .launch(&escaping_job(4, &s.work, "child.pid", &rest))
        .await
        .unwrap();
    let child = wait_for_line(&s.work.join("child.pid")).await;
    let _leftovers = Leftovers(vec![child.clone()]);
    let leader: String = fs::read_to_string(s.jobs.join("4.0/job.json"))
        .ok()
        .and_then(|t| {
            let v: serde_json::Value = serde_json::from_str(&t).ok()?;
            Some(v["job"]["pgid"].to_string())
        })
        .expect("the supervisor records the job process");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        line_count(&ticks) > 0,
        "the child writes while the job runs"
    );

    executor.suspend(4, 0).unwrap();
    // The supervisor freezes the cgroup once the group has stopped (SIGUSR2 wakes it).
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        proc_stat(&leader).map(|p| p.state),
        Some('T'),
        "the job's own process reads as stopped"
    );
    let held = line_count(&ticks);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        line_count(&ticks),
        held,
        "the setsid child kept writing while its job was suspended"
    );

    executor.resume(4, 0).unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(line_count(&ticks) > held, "the child goes on after resume");
    assert_ne!(proc_stat(&leader).map(|p| p.state), Some('T'));
    executor.cancel(4, 0).unwrap();
    let finished = next(&mut events).await;
    assert!(finished.outcome.cancelled, "{:?}", finished.outcome);
    assert!(is_dead(&child), "the setsid child outlived the cancel");
}
