//! A start that fails for reasons of the machine requeues the job; one that fails for
//! reasons of the job fails it.

#![allow(clippy::unwrap_used)]

use super::lifecycle::START_RETRIES;
use super::tests::{cluster, job, launches, world};
use foresight_core::time::Time;
use foresight_core::ClusterId;
use foresight_core::JobId;
use foresight_store::JobRecord;
use foresight_store::JobState;

/// A local job on `a` (4 processors), launched at 1 000.
fn launched() -> super::World {
    let mut w = world(vec![cluster("a", 4)]);
    w.accept(
        Time(1_000),
        vec![JobRecord {
            cluster: Some("a".into()),
            ..job(1, "ann", 2, 600)
        }],
    );
    assert_eq!(launches(&mut w).len(), 1);
    w
}

/// A supervisor that hung at the start: the job runs again as its next attempt, launched
/// at once on the free cluster; each of [`START_RETRIES`] failures does the same, and the
/// next one fails the job, naming the error and the count. Before, the first such failure
/// failed the job without it ever running.
#[test]
fn a_start_the_machine_failed_is_retried_then_fails() {
    let mut w = launched();
    let hung = "the supervisor failed before starting the job (no report within 10 s)";
    for n in 1..=START_RETRIES {
        let attempt = w.jobs[&JobId(1)].attempt;
        let now = Time(1_000 + 10 * i64::from(n));
        assert!(w.start_failed(now, ClusterId(0), JobId(1), attempt, hung, true));
        let j = &w.jobs[&JobId(1)];
        assert_eq!(
            (j.attempt, j.state),
            (attempt + 1, JobState::Running),
            "{j:?}"
        );
        assert_eq!(launches(&mut w).len(), 1, "retry {n} launched again");
    }
    let attempt = w.jobs[&JobId(1)].attempt;
    assert!(!w.start_failed(Time(1_100), ClusterId(0), JobId(1), attempt, hung, true));
    let j = &w.jobs[&JobId(1)];
    assert_eq!(j.state, JobState::Failed);
    let reason = j.reason.clone().unwrap();
    assert!(
        reason.contains(&format!("{START_RETRIES} times")) && reason.contains("no report"),
        "{reason}"
    );
}

/// A start that failed for the job's own reason (no such program) fails it at once.
#[test]
fn a_start_the_job_failed_fails_it() {
    let mut w = launched();
    let attempt = w.jobs[&JobId(1)].attempt;
    let again = w.start_failed(
        Time(1_001),
        ClusterId(0),
        JobId(1),
        attempt,
        "no such program: nope",
        false,
    );
    assert!(!again);
    let j = &w.jobs[&JobId(1)];
    assert_eq!((j.state, j.attempt), (JobState::Failed, attempt));
    assert!(
        j.reason.clone().unwrap().contains("no such program"),
        "{j:?}"
    );
}

/// A job cancelled while its failed start was being reported ends there (failed, with the
/// start's error, as any job whose start failed while it was being cancelled), not
/// requeued.
#[test]
fn a_cancel_wins_over_a_start_retry() {
    let mut w = launched();
    let attempt = w.jobs[&JobId(1)].attempt;
    w.cancel(Time(1_001), JobId(1)).unwrap();
    assert!(!w.start_failed(Time(1_002), ClusterId(0), JobId(1), attempt, "hung", true));
    let j = &w.jobs[&JobId(1)];
    assert_eq!((j.state, j.attempt), (JobState::Failed, attempt), "{j:?}");
    assert!(launches(&mut w).is_empty());
}
