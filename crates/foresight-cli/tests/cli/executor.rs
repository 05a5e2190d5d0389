#![allow(clippy::unwrap_used)]
//! The local executor against real processes, with the real `foresight supervise` as the
//! supervisor: exit codes, environment, output files, walltime, cancel, suspend/resume,
//! process groups and adoption after a (simulated) daemon death.

use crate::fixture;

use fixture::*;
use foresight_rm::tokio;
use foresight_rm::{Adoption, ExecError, Finished, LaunchSpec, LocalExecutor, Outcome};
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedReceiver;

/// Launches and waits for the one Finished event of this attempt.
async fn run(
    executor: &LocalExecutor,
    events: &mut UnboundedReceiver<Finished>,
    spec: &LaunchSpec,
) -> Outcome {
    let started_at = executor.launch(spec).await.unwrap();
    let finished = next(events).await;
    assert_eq!((finished.job, finished.attempt), (spec.job, spec.attempt));
    assert_eq!(finished.outcome.started_at, started_at);
    assert!(finished.outcome.ended_at >= started_at);
    assert_eq!(
        executor.outcome(spec.job, spec.attempt).unwrap(),
        Some(finished.outcome.clone())
    );
    finished.outcome
}

async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    for _ in 0..100 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting until {what}");
}

#[tokio::test(crate = "foresight_rm::tokio")]
async fn exit_codes_are_recorded() {
    let s = scratch();
    let (executor, mut events) = executor(&s.jobs);
    let cases: [(&str, &[&str], i32); 3] = [
        ("true", &["true"], 0),
        ("false", &["false"], 1),
        ("exit 7", &["sh", "-c", "exit 7"], 7),
    ];
    for (job, (name, command, want)) in (1..).zip(cases) {
        let launched = Instant::now();
        let started_at = executor.launch(&spec(job, &s.work, command)).await.unwrap();
        let took = launched.elapsed();
        // The target is well under 20 ms; a loaded 2-core CI machine gets a wide margin.
        assert!(
            took < Duration::from_secs(2),
            "{name}: launch took {took:?}"
        );
        let finished = next(&mut events).await;
        assert_eq!(finished.job, job, "{name}");
        let outcome = finished.outcome;
        assert_eq!(outcome.started_at, started_at, "{name}");
        assert_eq!(outcome.exit_code, Some(want), "{name}: {outcome:?}");
        assert_eq!(outcome.signal, None, "{name}");
        assert!(
            !outcome.timed_out && !outcome.cancelled && outcome.error.is_none(),
            "{name}: {outcome:?}"
        );
        assert_eq!(outcome.succeeded(), want == 0, "{name}");
    }
}

#[tokio::test(crate = "foresight_rm::tokio")]
async fn environment_and_working_directory_reach_the_job() {
    let s = scratch();
    let (executor, mut events) = executor(&s.jobs);
    let script = r#"printf '%s|%s|%s|%s|%s|%s|%s\n' "$FORESIGHT_JOB_ID" "$FORESIGHT_ATTEMPT" \
        "$FORESIGHT_PROCS" "$FORESIGHT_PROCESSORS" "$FORESIGHT_CLUSTER" "$EXTRA" "$(pwd -P)""#;
    let mut spec = spec(17, &s.work, &["sh", "-c", script]);
    spec.processors = vec![3, 5, 8];
    spec.cluster = "alpha".into();
    spec.env = vec![("EXTRA".into(), "hello world".into())];
    let outcome = run(&executor, &mut events, &spec).await;
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
    let out = fs::read_to_string(s.work.join("17.out")).unwrap();
    let want = format!("17|0|3|3,5,8|alpha|hello world|{}\n", s.work.display());
    assert_eq!(out, want);
}

#[tokio::test(crate = "foresight_rm::tokio")]
async fn stdout_and_stderr_go_to_their_files() {
    let s = scratch();
    let (executor, mut events) = executor(&s.jobs);
    let mut spec = spec(
        2,
        &s.work,
        &["sh", "-c", "echo to-out; echo to-err >&2; exit 3"],
    );
    let logs = s.work.join("logs");
    fs::create_dir(&logs).unwrap();
    spec.stderr = logs.join("absolute.err");
    let outcome = run(&executor, &mut events, &spec).await;
    assert_eq!(outcome.exit_code, Some(3));
    assert_eq!(
        fs::read_to_string(s.work.join("2.out")).unwrap(),
        "to-out\n"
    );
    assert_eq!(
        fs::read_to_string(logs.join("absolute.err")).unwrap(),
        "to-err\n"
    );
}

#[tokio::test(crate = "foresight_rm::tokio")]
async fn one_file_can_take_both_streams() {
    let s = scratch();
    let (executor, mut events) = executor(&s.jobs);
    let mut spec = spec(3, &s.work, &["sh", "-c", "echo a; echo b >&2; echo c"]);
    spec.stderr = spec.stdout.clone();
    run(&executor, &mut events, &spec).await;
    assert_eq!(
        fs::read_to_string(s.work.join("3.out")).unwrap(),
        "a\nb\nc\n"
    );
}

#[tokio::test(crate = "foresight_rm::tokio")]
async fn walltime_is_enforced_with_sigterm() {
    let s = scratch();
    let (executor, mut events) = executor(&s.jobs);
    let mut spec = spec(4, &s.work, &["sleep", "30"]);
    spec.walltime_secs = 1;
    spec.grace_secs = 1;
    let outcome = run(&executor, &mut events, &spec).await;
    assert!(outcome.timed_out, "{outcome:?}");
    assert!(!outcome.cancelled);
    assert_eq!(outcome.signal, Some(15), "{outcome:?}");
    assert_eq!(outcome.exit_code, None);
    assert!(outcome.ended_at - outcome.started_at <= 3, "{outcome:?}");
}

#[tokio::test(crate = "foresight_rm::tokio")]
async fn a_job_ignoring_sigterm_is_killed_after_the_grace_period() {
    let s = scratch();
    let (executor, mut events) = executor(&s.jobs);
    let mut spec = spec(
        5,
        &s.work,
        &["sh", "-c", "trap '' TERM; sleep 30; echo survived"],
    );
    spec.walltime_secs = 1;
    spec.grace_secs = 1;
    let outcome = run(&executor, &mut events, &spec).await;
    assert!(outcome.timed_out, "{outcome:?}");
    assert_eq!(outcome.signal, Some(9), "{outcome:?}");
    assert!(outcome.ended_at - outcome.started_at <= 4, "{outcome:?}");
    assert_eq!(fs::read_to_string(s.work.join("5.out")).unwrap(), "");
}

#[tokio::test(crate = "foresight_rm::tokio")]
async fn cancel_terminates_and_is_recorded() {
    let s = scratch();
    let (executor, mut events) = executor(&s.jobs);
    let spec = spec(6, &s.work, &["sleep", "30"]);
    executor.launch(&spec).await.unwrap();
    assert_eq!(executor.outcome(6, 0).unwrap(), None);
    executor.cancel(6, 0).unwrap();
    let outcome = next(&mut events).await.outcome;
    assert!(outcome.cancelled, "{outcome:?}");
    assert!(!outcome.timed_out);
    assert_eq!(outcome.signal, Some(15), "{outcome:?}");
    // Cancelling again is a no-op; suspending a finished attempt is an error.
    executor.cancel(6, 0).unwrap();
    assert_eq!(executor.outcome(6, 0).unwrap(), Some(outcome));
    assert!(matches!(
        executor.suspend(6, 0),
        Err(ExecError::Finished { job: 6, attempt: 0 })
    ));
    assert!(matches!(
        executor.resume(6, 0),
        Err(ExecError::Finished { .. })
    ));
}

#[tokio::test(crate = "foresight_rm::tokio")]
async fn cancel_reaches_the_whole_process_group() {
    let s = scratch();
    let (executor, mut events) = executor(&s.jobs);
    let spec = spec(
        7,
        &s.work,
        &["sh", "-c", "sleep 100 & echo $! > child.pid; wait"],
    );
    executor.launch(&spec).await.unwrap();
    let child = wait_for_line(&s.work.join("child.pid")).await;
    assert!(!is_dead(&child), "the background sleep runs");
    executor.cancel(7, 0).unwrap();
    let outcome = next(&mut events).await.outcome;
    assert!(outcome.cancelled, "{outcome:?}");
    wait_until("the background sleep is dead", || is_dead(&child)).await;
}

#[tokio::test(crate = "foresight_rm::tokio")]
async fn leftovers_are_killed_when_the_job_ends() {
    let s = scratch();
    let (executor, mut events) = executor(&s.jobs);
    let spec = spec(8, &s.work, &["sh", "-c", "sleep 100 & echo $! > child.pid"]);
    let outcome = run(&executor, &mut events, &spec).await;
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
    let child = wait_for_line(&s.work.join("child.pid")).await;
    wait_until("the background sleep is dead", || is_dead(&child)).await;
}

#[tokio::test(crate = "foresight_rm::tokio")]
async fn suspend_stops_the_job_and_its_walltime_clock() {
    let s = scratch();
    let (executor, mut events) = executor(&s.jobs);
    // Runs 1 s of a 2 s walltime, but is suspended for 3 s in between: suspended time must
    // not count, or the supervisor would end it for its walltime.
    let mut spec = spec(9, &s.work, &["sh", "-c", "echo $$ > job.pid; exec sleep 1"]);
    spec.walltime_secs = 2;
    spec.grace_secs = 1;
    executor.launch(&spec).await.unwrap();
    let pid = wait_for_line(&s.work.join("job.pid")).await;
    executor.resume(9, 0).unwrap(); // harmless when not suspended
    executor.suspend(9, 0).unwrap();
    wait_until("the job is stopped", || {
        proc_stat(&pid).is_some_and(|p| p.state == 'T')
    })
    .await;
    // This sleep is the test's input, not a wait for something to happen: the job stays
    // suspended past its walltime (2 s) and grace (1 s). A slow machine only makes the
    // suspension longer, which makes the test stricter; and the check that cannot pass by
    // being early is the one after the resume: the job ends by itself, not timed out.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(proc_stat(&pid).map(|p| p.state), Some('T'), "still stopped");
    assert_eq!(executor.outcome(9, 0).unwrap(), None);
    assert!(events.try_recv().is_err(), "no event while suspended");
    executor.resume(9, 0).unwrap();
    let outcome = next(&mut events).await.outcome;
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
    assert!(!outcome.timed_out, "{outcome:?}");
}

#[tokio::test(crate = "foresight_rm::tokio")]
async fn a_missing_program_is_a_launch_error_naming_it() {
    let s = scratch();
    let (executor, mut events) = executor(&s.jobs);
    let spec = spec(10, &s.work, &["foresight-no-such-program", "--flag"]);
    let err = executor.launch(&spec).await.unwrap_err();
    match &err {
        ExecError::Start {
            job,
            program,
            error,
            ..
        } => {
            assert_eq!(*job, 10);
            assert_eq!(program, "foresight-no-such-program");
            assert_eq!(error, "no such program: foresight-no-such-program");
        }
        other => panic!("want ExecError::Start, got {other:?}"),
    }
    assert!(err.to_string().contains("job 10 attempt 0"), "{err}");
    // The same error is the attempt's recorded outcome; no event is sent for it.
    let outcome = executor.outcome(10, 0).unwrap().unwrap();
    assert_eq!(
        outcome.error.as_deref(),
        Some("no such program: foresight-no-such-program")
    );
    assert_eq!(executor.adopt(10, 0).unwrap(), Adoption::Finished(outcome));
    // No event for it: an event of job 10 would have been sent by launch itself or by a
    // watcher it left behind on a supervisor already gone, both before a job launched after
    // it has even started; that job's end is the next event, and nothing else is queued.
    run(
        &executor,
        &mut events,
        &fixture::spec(15, &s.work, &["true"]),
    )
    .await;
    assert!(events.try_recv().is_err());
}

#[tokio::test(crate = "foresight_rm::tokio")]
async fn a_bad_working_directory_is_a_launch_error_naming_it() {
    let s = scratch();
    let (executor, _events) = executor(&s.jobs);
    let spec = spec(11, &s.work.join("nowhere"), &["true"]);
    let err = executor.launch(&spec).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, ExecError::Start { .. }), "{err:?}");
    assert!(
        text.contains("bad working directory") && text.contains("nowhere"),
        "{text}"
    );
}

#[tokio::test(crate = "foresight_rm::tokio")]
async fn invalid_specs_and_relaunches_are_refused() {
    let s = scratch();
    let (executor, mut events) = executor(&s.jobs);
    let empty = spec(12, &s.work, &[]);
    assert!(matches!(
        executor.launch(&empty).await,
        Err(ExecError::InvalidSpec { .. })
    ));

    let first = spec(
        13,
        &s.work,
        &["sh", "-c", "echo attempt $FORESIGHT_ATTEMPT"],
    );
    run(&executor, &mut events, &first).await;
    let again = executor.launch(&first).await.unwrap_err();
    assert!(
        matches!(
            again,
            ExecError::AlreadyLaunched {
                job: 13,
                attempt: 0,
                ..
            }
        ),
        "{again:?}"
    );
    // A requeue is the next attempt: its own directory, and it appends to the output.
    let second = LaunchSpec {
        attempt: 1,
        ..first
    };
    run(&executor, &mut events, &second).await;
    assert_eq!(
        fs::read_to_string(s.work.join("13.out")).unwrap(),
        "attempt 0\nattempt 1\n"
    );
    assert_eq!(executor.attempts().unwrap(), vec![(13, 0), (13, 1)]);
}

#[tokio::test(crate = "foresight_rm::tokio")]
async fn the_job_has_its_own_process_group_apart_from_the_daemon() {
    let s = scratch();
    let (executor, mut events) = executor(&s.jobs);
    let spec = spec(
        14,
        &s.work,
        &["sh", "-c", "cat /proc/$$/stat; cat /proc/$PPID/stat"],
    );
    run(&executor, &mut events, &spec).await;
    let out = fs::read_to_string(s.work.join("14.out")).unwrap();
    let mut lines = out.lines();
    let job_line = lines.next().unwrap();
    let job_pid: i32 = job_line.split(' ').next().unwrap().parse().unwrap();
    let job = parse_stat(job_line).unwrap();
    let (supervisor_pid, job_group) = (job.ppid, job.pgrp);
    let supervisor_group = parse_stat(lines.next().unwrap()).unwrap().pgrp;
    let our_group = proc_stat("self").unwrap().pgrp;
    assert_eq!(job_group, job_pid, "the job leads its own group");
    assert_eq!(
        supervisor_group, supervisor_pid,
        "the supervisor leads its own group"
    );
    assert_ne!(
        supervisor_group, our_group,
        "the supervisor is out of the daemon's group"
    );
    assert_ne!(supervisor_pid, i32::try_from(std::process::id()).unwrap());
}

/// The daemon dies (its runtime, tasks and executor are dropped) while a job runs; a new
/// executor on the same root adopts the job and reports its end.
#[test]
fn a_restarted_daemon_adopts_a_running_job() {
    let s = scratch();
    let first = tokio::runtime::Runtime::new().unwrap();
    first.block_on(async {
        let (executor, _events) = executor(&s.jobs);
        executor
            .launch(&spec(20, &s.work, &["sleep", "2"]))
            .await
            .unwrap();
        executor
            .launch(&spec(21, &s.work, &["true"]))
            .await
            .unwrap();
        let mut policed = spec(22, &s.work, &["sleep", "30"]);
        policed.walltime_secs = 1;
        executor.launch(&policed).await.unwrap();
    });
    drop(first);
    // Job 21 ends while no daemon watches: its supervisor records the outcome.
    let status = s.jobs.join("21.0").join("status.json");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !status.exists() {
        assert!(Instant::now() < deadline, "job 21 never recorded its end");
        std::thread::sleep(Duration::from_millis(20));
    }

    let second = tokio::runtime::Runtime::new().unwrap();
    second.block_on(async {
        let (executor, mut events) = executor(&s.jobs);
        assert_eq!(executor.adopt(20, 0).unwrap(), Adoption::Running);
        assert_eq!(
            executor.adopt(20, 0).unwrap(),
            Adoption::Running,
            "idempotent"
        );
        let finished = next(&mut events).await;
        assert_eq!((finished.job, finished.attempt), (20, 0));
        assert_eq!(
            finished.outcome.exit_code,
            Some(0),
            "{:?}",
            finished.outcome
        );
        assert!(finished.outcome.error.is_none());
        // The attempt now reads as finished (exactly one event: see the end).
        assert_eq!(
            executor.adopt(20, 0).unwrap(),
            Adoption::Finished(finished.outcome)
        );

        let Adoption::Finished(outcome) = executor.adopt(21, 0).unwrap() else {
            panic!("job 21 should have finished while no daemon watched");
        };
        assert_eq!(outcome.exit_code, Some(0));

        // The walltime is enforced by the supervisor, daemon or not.
        let outcome = match executor.adopt(22, 0).unwrap() {
            Adoption::Running => next(&mut events).await.outcome,
            Adoption::Finished(outcome) => outcome,
            Adoption::Lost => panic!("job 22 lost"),
        };
        assert!(outcome.timed_out, "{outcome:?}");

        // Exactly one event for job 20: a second watcher of it (adopted twice above) would
        // poll on the same ticks as the first and send at once, long before a job launched
        // now ends; that job's end is the next event, and nothing else is queued.
        run(&executor, &mut events, &spec(23, &s.work, &["true"])).await;
        assert!(events.try_recv().is_err(), "a second event");
    });
}

#[tokio::test(crate = "foresight_rm::tokio")]
async fn unknown_and_orphaned_attempts_are_lost() {
    let s = scratch();
    let (executor, _events) = executor(&s.jobs);
    assert_eq!(executor.adopt(30, 0).unwrap(), Adoption::Lost);
    // A directory whose recorded supervisor pid now belongs to another process (here: the
    // test itself) must not be mistaken for a live supervisor.
    let dir = executor.job_dir(31, 0);
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("supervisor.pid"),
        format!("{}\n", std::process::id()),
    )
    .unwrap();
    assert_eq!(executor.adopt(31, 0).unwrap(), Adoption::Lost);
    assert!(matches!(
        executor.cancel(31, 0),
        Err(ExecError::Lost { job: 31, .. })
    ));
    assert!(matches!(
        executor.outcome(32, 0),
        Err(ExecError::NotFound { job: 32, .. })
    ));
}

#[tokio::test(crate = "foresight_rm::tokio")]
async fn a_killed_supervisor_takes_its_job_down_and_says_so() {
    let s = scratch();
    let (executor, mut events) = executor(&s.jobs);
    let script = "echo $PPID > supervisor.pid; echo $$ > job.pid; exec sleep 30";
    executor
        .launch(&spec(40, &s.work, &["sh", "-c", script]))
        .await
        .unwrap();
    let supervisor = wait_for_line(&s.work.join("supervisor.pid")).await;
    let job = wait_for_line(&s.work.join("job.pid")).await;
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &supervisor])
        .status()
        .unwrap();
    assert!(killed.success());
    let outcome = next(&mut events).await.outcome;
    let error = outcome.error.clone().unwrap_or_default();
    assert!(
        error.contains("supervisor") && error.contains("the job was killed"),
        "{outcome:?}"
    );
    wait_until("the unsupervised job is dead", || is_dead(&job)).await;
    assert_eq!(executor.outcome(40, 0).unwrap(), Some(outcome));
}

/// A process that left the job's process group and session (`setsid`) dies with the job: the
/// supervisor is a child subreaper and sweeps its descendants.
#[tokio::test(crate = "foresight_rm::tokio")]
async fn setsid_escapees_are_killed_when_the_job_ends() {
    let s = scratch();
    let (executor, mut events) = executor(&s.jobs);
    let script = "setsid sleep 100 & echo $! > child.pid; sleep 0.3";
    let outcome = run(
        &executor,
        &mut events,
        &spec(60, &s.work, &["sh", "-c", script]),
    )
    .await;
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
    let child = wait_for_line(&s.work.join("child.pid")).await;
    assert!(is_dead(&child), "the setsid sleep outlived its job");

    let mut timed = spec(
        61,
        &s.work,
        &[
            "sh",
            "-c",
            "setsid sleep 100 & echo $! > child2.pid; sleep 100",
        ],
    );
    timed.walltime_secs = 1;
    let outcome = run(&executor, &mut events, &timed).await;
    assert!(outcome.timed_out, "{outcome:?}");
    let child = wait_for_line(&s.work.join("child2.pid")).await;
    assert!(is_dead(&child), "the setsid sleep outlived its walltime");
}

/// When the daemon and a job's supervisor both die, the restarted daemon's adoption kills the
/// orphaned job before the attempt is launched again (it used to run twice).
#[test]
fn an_orphaned_job_is_killed_before_it_is_lost() {
    let s = scratch();
    let first = tokio::runtime::Runtime::new().unwrap();
    first.block_on(async {
        let (executor, _events) = executor(&s.jobs);
        // The job ticks into a file while it runs: fresh ticks prove it alive.
        let script = "echo $PPID > sup.pid; echo $$ > job.pid; \
                      while :; do echo tick >> ticks; sleep 0.05; done";
        executor
            .launch(&spec(62, &s.work, &["sh", "-c", script]))
            .await
            .unwrap();
    });
    drop(first);
    let job = line_of(&s.work.join("job.pid"));
    let supervisor = line_of(&s.work.join("sup.pid"));
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &supervisor])
        .status()
        .unwrap();
    assert!(killed.success());
    let ticks = s.work.join("ticks");
    wait_until_blocking("the supervisor is dead", || is_dead(&supervisor));
    // Ticks written after the supervisor died: the job runs on without it.
    let at_death = tick_count(&ticks);
    wait_until_blocking("the job ticks on without its supervisor", || {
        tick_count(&ticks) > at_death
    });
    let second = tokio::runtime::Runtime::new().unwrap();
    second.block_on(async {
        let (executor, _events) = executor(&s.jobs);
        assert_eq!(executor.adopt(62, 0).unwrap(), Adoption::Lost);
        wait_until("the orphaned job is dead", || is_dead(&job)).await;
    });
}

/// How many lines a file has now (0 while it does not exist).
fn tick_count(path: &Path) -> usize {
    fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

/// Polls `condition` from outside a runtime until it holds (10 s at most).
fn wait_until_blocking(what: &str, mut condition: impl FnMut() -> bool) {
    for _ in 0..400 {
        if condition() {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("timed out waiting until {what}");
}

/// The first line of a file a job writes, waiting for it.
fn line_of(path: &Path) -> String {
    for _ in 0..200 {
        if let Ok(text) = fs::read_to_string(path) {
            if text.ends_with('\n') {
                return text.trim().to_string();
            }
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("{} was not written", path.display());
}

/// With `max_output_bytes` each output file stops at the cap and says so; the job itself
/// writes on undisturbed (no SIGPIPE, no block) and exits normally.
#[tokio::test(crate = "foresight_rm::tokio")]
async fn output_files_are_capped() {
    let s = scratch();
    let (executor, mut events) = executor(&s.jobs);
    let mut capped = spec(
        63,
        &s.work,
        &[
            "sh",
            "-c",
            "head -c 300000 /dev/zero | tr '\\0' a; echo short >&2",
        ],
    );
    capped.max_output_bytes = Some(1000);
    let outcome = run(&executor, &mut events, &capped).await;
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
    let out = fs::read_to_string(s.work.join("63.out")).unwrap();
    assert_eq!(
        out,
        format!(
            "{}\n[foresight: output truncated at 1000 bytes (max_output_bytes)]\n",
            "a".repeat(1000)
        )
    );
    assert_eq!(
        fs::read_to_string(s.work.join("63.err")).unwrap(),
        "short\n"
    );
}
