#![allow(clippy::unwrap_used)] // tests fail loudly by design
//! End-to-end: absolute priorities through the real service and real processes on the local
//! executor. A long low-priority global job fills the cluster; a high-priority one arrives
//! and starts at once; the low one's processes are really stopped (`T` in /proc) while it
//! runs, continue afterwards, and the low job completes, charged for its run only. A job
//! that may be requeued is killed instead and runs again as its next attempt. A job for one
//! cluster cannot carry a priority.

use crate::common;

use crate::common::{int, Server};
use serde_json::Value;
use std::time::Duration;

/// The state letter of `/proc/PID/stat` (`T` stopped, `S` sleeping...).
fn proc_state(pid: &str) -> Option<char> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_whitespace().next()?.chars().next()
}

fn read_pid(path: &std::path::Path) -> String {
    common::wait_for("the job's pid", Duration::from_secs(20), || {
        std::fs::read_to_string(path)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    })
}

fn running(j: &Value) -> bool {
    j["state"] == "running"
}

#[test]
fn a_high_priority_job_suspends_a_low_one_which_resumes_and_completes() {
    let s = Server::start(2);
    let dir = s.scratch();
    let pid_file = dir.join("low.pid");
    // The low job works 4 s in steps of half a second (a stop delays every step after it),
    // in a process group whose leader writes its pid down.
    let script = format!(
        "echo $$ > {}; for i in 1 2 3 4 5 6 7 8; do sleep 0.5; done",
        pid_file.display()
    );
    let low = s.submit(&["-n", "2", "-t", "1m", "--", "sh", "-c", &script]);
    s.wait_job(low, "running", Duration::from_secs(20), running);
    let pid = read_pid(&pid_file);
    assert!(
        matches!(proc_state(&pid), Some('S' | 'R')),
        "the low job runs: {:?}",
        proc_state(&pid)
    );

    // The high job itself records, half-way through its run, the state of the low one's
    // process (field 3 of its /proc stat).
    let seen = dir.join("low-state-seen-by-high.txt");
    let high_script = format!(
        "sleep 1; sed 's/.*) //' /proc/{pid}/stat | cut -c1 > {}; sleep 1",
        seen.display()
    );
    let high = s.submit(&[
        "--priority",
        "2",
        "-n",
        "2",
        "-t",
        "1m",
        "--",
        "sh",
        "-c",
        &high_script,
    ]);
    let submitted = common::now();
    let h = s.wait_job(high, "running", Duration::from_secs(10), running);
    assert!(
        int(&h, "started_at") - submitted <= 3,
        "the high job starts at once: {h}"
    );
    assert_eq!(h["priority"], 2);
    let l = s.show(low);
    assert_eq!(l["state"], "running", "{l}");
    assert_eq!(l["suspended"], true, "{l}");
    let reason = l["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&format!("preempted by job {high}")),
        "{reason}"
    );
    common::wait_for(
        "the low job's process stopped",
        Duration::from_secs(5),
        || (proc_state(&pid) == Some('T')).then_some(()),
    );
    // A user cannot resume it while the high job holds its processors.
    let e = s
        .cli()
        .args(["job", "resume", &low.to_string()])
        .assert()
        .failure();
    let err = String::from_utf8(e.get_output().stderr.clone()).unwrap();
    assert!(err.contains("higher priority level"), "{err}");

    // While the high job ran, the low one stayed stopped: the high job saw it so.
    let h = s.wait_final(high, Duration::from_secs(20));
    assert_eq!(h["state"], "completed", "{h}");
    let state = std::fs::read_to_string(&seen).unwrap();
    assert_eq!(
        state.trim(),
        "T",
        "the low job's state half-way through the high one"
    );

    let l = s.wait_job(low, "resumed", Duration::from_secs(10), |j| {
        j["suspended"] == false
    });
    assert_eq!(l["state"], "running", "{l}");
    common::wait_for(
        "the low job's process continued",
        Duration::from_secs(5),
        || matches!(proc_state(&pid), Some('S' | 'R')).then_some(()),
    );
    let l = s.wait_final(low, Duration::from_secs(30));
    assert_eq!(l["state"], "completed", "{l}");
    assert_eq!(l["exit_code"], 0, "{l}");
    // Its run took its 4 s (3.5 at least for the last step) plus the time it was stopped
    // (the high job's 2 s at least), and the stopped time counts neither against its
    // walltime nor in its charge.
    let elapsed = int(&l, "ended_at") - int(&l, "started_at");
    assert!(elapsed >= 5, "elapsed {elapsed} s: {l}");
    // The default tariff: 1 per processor-second.
    let charged = l["charged"].as_f64().unwrap();
    assert!(
        charged > 0.0 && charged <= 2.0 * (elapsed - 2) as f64,
        "charged {charged} for {elapsed} s of which at least 2 stopped: {l}"
    );
}

#[test]
fn a_requeueable_job_is_killed_and_runs_again() {
    let s = Server::start(2);
    let low = s.submit(&["-n", "2", "-t", "1m", "--requeue", "--", "sleep", "3"]);
    s.wait_job(low, "running", Duration::from_secs(20), running);
    let high = s.submit(&["--priority", "1", "-n", "2", "-t", "1m", "--", "sleep", "1"]);
    s.wait_job(high, "running", Duration::from_secs(10), running);
    let h = s.wait_final(high, Duration::from_secs(20));
    assert_eq!(h["state"], "completed", "{h}");
    let l = s.wait_final(low, Duration::from_secs(30));
    assert_eq!(l["state"], "completed", "{l}");
    // Its second run started after the high job (a suspended one keeps its first start).
    assert!(
        int(&l, "started_at") >= int(&h, "started_at"),
        "ran again after the high job: {l} {h}"
    );
    let mut attempts: Vec<String> = std::fs::read_dir(s.dir.join("clusters").join("local"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("{low}.")))
        .collect();
    attempts.sort();
    assert_eq!(attempts, vec![format!("{low}.0"), format!("{low}.1")]);
}

#[test]
fn a_job_for_one_cluster_carries_no_priority() {
    let s = Server::start(2);
    let e = s
        .cli()
        .args([
            "job",
            "submit",
            "--cluster",
            "local",
            "--priority",
            "3",
            "-t",
            "1m",
            "--",
            "true",
        ])
        .assert()
        .failure();
    let err = String::from_utf8(e.get_output().stderr.clone()).unwrap();
    assert!(err.contains("priority"), "{err}");
}

#[test]
fn a_job_suspended_by_preemption_resumes_after_a_restart() {
    let mut s = Server::start(2);
    let dir = s.scratch();
    let pid_file = dir.join("low.pid");
    let script = format!(
        "echo $$ > {}; for i in 1 2 3 4 5 6; do sleep 0.5; done",
        pid_file.display()
    );
    let low = s.submit(&["-n", "2", "-t", "1m", "--", "sh", "-c", &script]);
    s.wait_job(low, "running", Duration::from_secs(20), running);
    let pid = read_pid(&pid_file);
    // The high job runs across the restart.
    let high = s.submit(&["--priority", "1", "-n", "2", "-t", "1m", "--", "sleep", "5"]);
    s.wait_job(high, "running", Duration::from_secs(10), running);
    common::wait_for(
        "the low job's process stopped",
        Duration::from_secs(5),
        || (proc_state(&pid) == Some('T')).then_some(()),
    );
    let status = s
        .sigterm(Duration::from_secs(10))
        .expect("exits within 10 s of SIGTERM");
    assert!(status.success(), "{status}");
    s.launch();

    // After the restart the low job is still suspended by the high one, not running.
    let l = s.show(low);
    assert_eq!(l["state"], "running", "{l}");
    assert_eq!(l["suspended"], true, "{l}");
    assert_eq!(
        proc_state(&pid),
        Some('T'),
        "still stopped after the restart"
    );
    let h = s.wait_final(high, Duration::from_secs(20));
    assert_eq!(h["state"], "completed", "{h}");
    let l = s.wait_job(low, "resumed", Duration::from_secs(10), |j| {
        j["suspended"] == false
    });
    assert_eq!(l["state"], "running", "{l}");
    common::wait_for(
        "the low job's process continued",
        Duration::from_secs(5),
        || matches!(proc_state(&pid), Some('S' | 'R')).then_some(()),
    );
    let l = s.wait_final(low, Duration::from_secs(30));
    assert_eq!(l["state"], "completed", "{l}");
    assert_eq!(l["exit_code"], 0, "{l}");
    // The time it was stopped (the high job's 5 s, the restart within them) counts
    // neither against its walltime nor in its charge (default tariff: 1 per
    // processor-second).
    let elapsed = int(&l, "ended_at") - int(&l, "started_at");
    assert!(elapsed >= 7, "elapsed {elapsed} s: {l}");
    let charged = l["charged"].as_f64().unwrap();
    assert!(
        charged > 0.0 && charged <= 2.0 * (elapsed - 4) as f64,
        "charged {charged} for {elapsed} s of which at least 4 stopped: {l}"
    );
}

/// Beats of `log` (`ATTEMPT SECONDS` a line) of one attempt, as seconds.
fn beats(log: &std::path::Path, attempt: u32) -> Vec<f64> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(a, _)| a.parse() == Ok(attempt))
        .map(|(_, t)| t.parse().unwrap())
        .collect()
}

/// A requeueable job that ignores SIGTERM is preempted, and the service restarts while the
/// kill waits out its grace period: after the restart the job still runs again as its next
/// attempt (never `failed`), and the high job and either attempt never run at once on the
/// cluster's two processors.
#[test]
fn a_requeue_caught_mid_kill_by_a_restart_still_runs_again() {
    let mut s =
        Server::with_config("grace_seconds = 5\n\n[[cluster]]\nname = \"local\"\nprocs = 2\n");
    let dir = s.scratch();
    let low_log = dir.join("low.log");
    let high_log = dir.join("high.log");
    // Beats every 0.2 s for 12 s, deaf to SIGTERM (its `sleep`s inherit the ignored signal).
    let low_script = format!(
        "trap '' TERM; i=0; while [ $i -lt 60 ]; do \
         echo \"$FORESIGHT_ATTEMPT $(date +%s.%N)\" >> {log}; sleep 0.2; i=$((i+1)); done",
        log = low_log.display()
    );
    let high_script = format!(
        "echo \"0 $(date +%s.%N)\" >> {log}; sleep 2; echo \"0 $(date +%s.%N)\" >> {log}",
        log = high_log.display()
    );
    let low = s.submit(&[
        "-n",
        "2",
        "-t",
        "1m",
        "--requeue",
        "--",
        "sh",
        "-c",
        &low_script,
    ]);
    s.wait_job(low, "running", Duration::from_secs(20), running);
    common::wait_for("the low job's first beat", Duration::from_secs(10), || {
        (!beats(&low_log, 0).is_empty()).then_some(())
    });
    let high = s.submit(&[
        "--priority",
        "1",
        "-n",
        "2",
        "-t",
        "1m",
        "--",
        "sh",
        "-c",
        &high_script,
    ]);
    // Preempted: the kill is asked and the job ignores its SIGTERM.
    s.wait_job(low, "preempted", Duration::from_secs(10), |j| {
        j["reason"]
            .as_str()
            .is_some_and(|r| r.contains("preempted"))
    });
    let status = s
        .sigterm(Duration::from_secs(10))
        .expect("exits within 10 s of SIGTERM");
    assert!(status.success(), "{status}");
    let before = beats(&low_log, 0).len();
    s.launch();

    let h = s.wait_final(high, Duration::from_secs(30));
    assert_eq!(h["state"], "completed", "{h}");
    let l = s.wait_final(low, Duration::from_secs(40));
    assert_eq!(l["state"], "completed", "{l}");
    let mut attempts: Vec<String> = std::fs::read_dir(s.dir.join("clusters").join("local"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("{low}.")))
        .collect();
    attempts.sort();
    assert_eq!(
        attempts,
        vec![format!("{low}.0"), format!("{low}.1")],
        "{l}"
    );
    let first = beats(&low_log, 0);
    let second = beats(&low_log, 1);
    assert!(
        first.len() > before && first.len() < 60,
        "the first attempt was still dying across the restart, then killed: {} beats",
        first.len()
    );
    assert_eq!(second.len(), 60, "the second attempt ran to its end");
    let high_run = beats(&high_log, 0);
    assert_eq!(high_run.len(), 2, "the high job's start and end");
    let last_first = first.iter().cloned().fold(f64::MIN, f64::max);
    assert!(
        last_first <= high_run[0] + 0.1,
        "the high job started at {} while the first attempt still ran (beat at {last_first})",
        high_run[0]
    );
    assert!(
        second[0] >= high_run[1] - 0.1,
        "the second attempt started at {} before the high job ended at {}",
        second[0],
        high_run[1]
    );
}
