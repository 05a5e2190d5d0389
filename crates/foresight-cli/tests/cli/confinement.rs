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
    let ticks = s.work.join("ticks");
    let first = tokio::runtime::Runtime::new().unwrap();
    let child = first.block_on(async {
        let (executor, _events) = executor(&s.jobs);
        executor
            .launch(&escaping_job(3, &s.work, "child.pid", &ticking(&ticks)))
            .await
            .unwrap();
        wait_for_line(&s.work.join("child.pid")).await
    });
    drop(first);
    let _leftovers = Leftovers(vec![child.clone()]);
    let supervisor = fs::read_to_string(s.jobs.join("3.0/supervisor.pid")).unwrap();
    let supervisor = supervisor.trim();
    let killed = std::process::Command::new("kill")
        .args(["-KILL", supervisor])
        .status()
        .unwrap();
    assert!(killed.success());
    poll("the supervisor is dead", || is_dead(supervisor));
    // Ticks written after the supervisor died: the child runs on without it.
    let at_death = line_count(&ticks);
    poll("the child ticks on without a supervisor", || {
        line_count(&ticks) > at_death
    });
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

/// The rest of an escaping job's child that appends a line to `ticks` every 50 ms while it
/// runs: fresh lines prove it alive (and none while it is frozen).
fn ticking(ticks: &Path) -> String {
    format!(
        "while :; do echo tick >> {}; sleep 0.05; done",
        ticks.display()
    )
}

/// Polls `condition` until it holds (10 s at most): the tests wait for what they assert,
/// never a fixed time.
fn poll(what: &str, mut condition: impl FnMut() -> bool) {
    for _ in 0..400 {
        if condition() {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("timed out waiting until {what}");
}

/// [`poll`] inside a runtime: the executor's tasks run while it waits.
async fn poll_async(what: &str, mut condition: impl FnMut() -> bool) {
    for _ in 0..400 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("timed out waiting until {what}");
}

/// Whether the kernel reports the cgroup of process `pid` frozen (`frozen 1` in its
/// `cgroup.events`): every process in it is held, whatever it was doing.
fn cgroup_frozen(pid: &str) -> bool {
    let Ok(membership) = fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
        return false;
    };
    let Some(path) = membership.lines().find_map(|l| l.strip_prefix("0::")) else {
        return false;
    };
    let Some(mount) = fs::read_to_string("/proc/self/mountinfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.contains(" - cgroup2 "))
                .and_then(|l| l.split_whitespace().nth(4).map(str::to_string))
        })
    else {
        return false;
    };
    fs::read_to_string(format!("{mount}{path}/cgroup.events"))
        .is_ok_and(|events| events.lines().any(|l| l.trim() == "frozen 1"))
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
    executor
        .launch(&escaping_job(4, &s.work, "child.pid", &ticking(&ticks)))
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
    poll_async("the child writes while the job runs", || {
        line_count(&ticks) > 0
    })
    .await;

    executor.suspend(4, 0).unwrap();
    // The supervisor freezes the cgroup once the group has stopped (SIGUSR2 wakes it): the
    // kernel then reports the setsid child's cgroup frozen, which holds it whatever it does.
    poll_async("the job's own process reads as stopped", || {
        proc_stat(&leader).is_some_and(|p| p.state == 'T')
    })
    .await;
    poll_async("the setsid child's cgroup is frozen", || {
        cgroup_frozen(&child)
    })
    .await;
    let held = line_count(&ticks);

    executor.resume(4, 0).unwrap();
    poll_async("the child goes on after resume", || {
        line_count(&ticks) > held
    })
    .await;
    poll_async("the job's own process runs again", || {
        proc_stat(&leader).is_some_and(|p| p.state != 'T')
    })
    .await;
    assert!(!cgroup_frozen(&child), "the child's cgroup thawed");
    executor.cancel(4, 0).unwrap();
    let finished = next(&mut events).await;
    assert!(finished.outcome.cancelled, "{:?}", finished.outcome);
    assert!(is_dead(&child), "the setsid child outlived the cancel");
}
