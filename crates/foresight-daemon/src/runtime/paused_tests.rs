//! The service's logic on paused time ([`Paused`]): each test names the exact seconds, by
//! the manual clock, at which jobs start, end and are killed, with fake clusters that run
//! no process. Nothing here sleeps or waits for the machine.

use crate::runtime::fake_rm::Call;
use crate::runtime::paused::{Paused, T0};
use crate::state::world::Held;
use foresight_api::JobState;
use foresight_core::time::Time;
use foresight_core::ClusterId;
use foresight_core::JobId;
use foresight_store::AclSpec;
use serde_json::json;

const TWO: &str = "[[cluster]]\nname = \"a\"\nprocs = 2\n";
const FOUR: &str = "[[cluster]]\nname = \"a\"\nprocs = 4\n";

/// A job of `procs` processors and `walltime` seconds on cluster a.
fn job(procs: u32, walltime: i64) -> serde_json::Value {
    json!({"procs": procs, "walltime": walltime, "command": ["work"], "cluster": "a"})
}

/// A global job (the grid's planner places it) of `procs` processors and `walltime` seconds.
fn global(procs: u32, walltime: i64) -> serde_json::Value {
    json!({"procs": procs, "walltime": walltime, "command": ["work"]})
}

/// Submitted, it starts in the cycle its submission wakes; ended by its process, it is
/// completed at that second, having run exactly that long.
#[tokio::test]
async fn a_job_runs_from_submission_to_its_end_at_the_clocks_times() {
    let p = Paused::open(TWO).await;
    let id = p.submit(job(1, 60)).await;
    assert_eq!(p.rms[0].launches(), vec![(id, 0, T0)]);
    let j = p.job(id);
    assert_eq!((j.state, j.started_at), (JobState::Running, Some(T0)));
    p.advance(7).await;
    assert_eq!(p.job(id).run_secs, Some(7));
    p.end(ClusterId(0), id, 0).await;
    let j = p.job(id);
    assert_eq!(
        (j.state, j.exit_code, j.ended_at, j.run_secs),
        (JobState::Completed, Some(0), Some(T0 + 7), Some(7))
    );
    // A failing exit is a failed job, at its second too.
    let bad = p.submit(job(2, 60)).await;
    p.advance(3).await;
    p.end(ClusterId(0), bad, 3).await;
    let j = p.job(bad);
    assert_eq!(
        (j.state, j.exit_code, j.started_at, j.ended_at),
        (JobState::Failed, Some(3), Some(T0 + 7), Some(T0 + 10))
    );
    assert_eq!(p.rms[0].launches(), vec![(id, 0, T0), (bad, 0, T0 + 7)]);
    p.s.shutdown().await;
}

/// A job that outlives its walltime ends at its limit to the second, as `timeout`, and the
/// job waiting for its processors starts at that same second.
#[tokio::test]
async fn walltime_kills_at_exactly_the_limit_and_the_next_job_starts_then() {
    let p = Paused::open(TWO).await;
    let first = p.submit(job(2, 30)).await;
    let second = p.submit(job(2, 10)).await;
    assert_eq!(p.job(second).planned_start, Some(T0 + 30));
    p.advance_to(T0 + 29).await;
    assert_eq!(p.job(first).state, JobState::Running);
    p.advance_to(T0 + 100).await;
    let (f, s) = (p.job(first), p.job(second));
    assert_eq!(
        (f.state, f.ended_at, f.run_secs),
        (JobState::Timeout, Some(T0 + 30), Some(30))
    );
    assert_eq!(
        (s.state, s.started_at, s.ended_at),
        (JobState::Timeout, Some(T0 + 30), Some(T0 + 40))
    );
    assert_eq!(
        p.rms[0].launches(),
        vec![(first, 0, T0), (second, 0, T0 + 30)]
    );
    p.s.shutdown().await;
}

/// A job bound to an advance reservation waits for it, though the processors are free,
/// and starts at its first second.
#[tokio::test]
async fn a_reservation_is_honoured_at_its_start() {
    let p = Paused::open(TWO).await;
    let acl = AclSpec {
        users: vec!["admin".into()],
        ..AclSpec::default()
    };
    let r =
        p.s.mutate(move |w, now| {
            w.create_reservation(
                now,
                "admin",
                "a",
                Held::Count(2),
                T0 + 100,
                T0 + 200,
                acl,
                None,
            )
        })
        .await
        .unwrap();
    let mut bound = job(2, 60);
    bound["reservation"] = json!(r.0);
    let id = p.submit(bound).await;
    assert_eq!(p.job(id).planned_start, Some(T0 + 100));
    p.advance_to(T0 + 99).await;
    assert!(p.rms[0].launches().is_empty(), "{:?}", p.rms[0].calls());
    let j = p.job(id);
    assert_eq!(
        (j.state, j.planned_start),
        (JobState::Pending, Some(T0 + 100))
    );
    p.advance_to(T0 + 150).await;
    assert_eq!(p.rms[0].launches(), vec![(id, 0, T0 + 100)]);
    let j = p.job(id);
    assert_eq!(
        (j.state, j.started_at, j.reservation),
        (JobState::Running, Some(T0 + 100), Some(r.0))
    );
    p.s.shutdown().await;
}

/// `afterok`: the dependant waits, on free processors, until its predecessor ends well, and
/// starts at the second it does; a dependant of a job that fails never runs.
#[tokio::test]
async fn an_afterok_dependant_starts_only_when_its_predecessor_ends_ok() {
    let p = Paused::open(FOUR).await;
    let first = p.submit(job(1, 60)).await;
    let mut after = job(1, 60);
    after["dependency"] = json!(format!("afterok:{first}"));
    let next = p.submit(after).await;
    p.advance(20).await;
    let n = p.job(next);
    assert_eq!((n.state, n.started_at), (JobState::Pending, None));
    assert!(
        n.reason
            .as_deref()
            .is_some_and(|r| r.contains(&first.to_string())),
        "{n:?}"
    );
    p.end(ClusterId(0), first, 0).await;
    assert_eq!(
        p.rms[0].launches(),
        vec![(first, 0, T0), (next, 0, T0 + 20)]
    );
    assert_eq!(p.job(next).started_at, Some(T0 + 20));

    // Its predecessor fails: it never starts, and says why.
    let failing = p.submit(job(1, 60)).await;
    let mut after = job(1, 60);
    after["dependency"] = json!(format!("afterok:{failing}"));
    let orphan = p.submit(after).await;
    p.advance(5).await;
    p.end(ClusterId(0), failing, 1).await;
    p.advance(100).await;
    let o = p.job(orphan);
    assert!(o.started_at.is_none(), "{o:?}");
    assert!(!p.rms[0].launches().iter().any(|l| l.0 == orphan));
    p.s.shutdown().await;
}

/// Suspended at 10 s and resumed at 60 s, a job's run time stops meanwhile and its walltime
/// with it: 100 s allowed run out 50 s later than they would have.
#[tokio::test]
async fn suspension_stops_the_run_time_and_the_walltime_clock() {
    let p = Paused::open(TWO).await;
    let id = p.submit(job(1, 100)).await;
    p.advance(10).await;
    let j = p.act(id, move |w, now| w.pause(now, JobId(id), true)).await;
    assert!(j.suspended);
    p.advance(50).await;
    let j = p.job(id);
    assert_eq!(
        (j.state, j.suspended, j.run_secs),
        (JobState::Running, true, Some(10))
    );
    p.act(id, move |w, now| w.pause(now, JobId(id), false))
        .await;
    p.advance(30).await;
    assert_eq!(p.job(id).run_secs, Some(40));
    p.advance_to(T0 + 1_000).await;
    let j = p.job(id);
    assert_eq!(
        (j.state, j.ended_at, j.run_secs),
        (JobState::Timeout, Some(T0 + 150), Some(100))
    );
    let pauses: Vec<Call> = p.rms[0]
        .calls()
        .into_iter()
        .filter(|c| matches!(c, Call::Suspend { .. } | Call::Resume { .. }))
        .collect();
    assert_eq!(
        pauses,
        vec![
            Call::Suspend {
                job: id,
                attempt: 0,
                at: T0 + 10
            },
            Call::Resume {
                job: id,
                attempt: 0,
                at: T0 + 60
            },
        ]
    );
    p.s.shutdown().await;
}

/// Issue 12's first observation, on paused time (it was an end-to-end test with a 10 s
/// limit on the machine's speed): 8 global one-processor jobs asking 60 s that run 1 s, on 2
/// processors. Jobs reserved behind a pair's walltime move earlier as soon as the pair
/// ends, so a pair starts every second and all 8 are done 4 s after submission.
#[tokio::test]
async fn short_jobs_with_long_walltimes_keep_the_processors_busy() {
    let p = Paused::open(TWO).await;
    let mut ids = Vec::new();
    for _ in 0..8 {
        ids.push(p.submit(global(1, 60)).await);
    }
    for second in 1..=4 {
        p.advance_to(T0 + second).await;
        let running: Vec<u64> = ids
            .iter()
            .copied()
            .filter(|&id| p.rms[0].runs(id))
            .collect();
        assert_eq!(running.len(), 2, "at +{second}: {running:?}");
        for id in running {
            p.end(ClusterId(0), id, 0).await;
        }
    }
    let starts: Vec<i64> = p.rms[0].launches().iter().map(|l| l.2 - T0).collect();
    assert_eq!(starts, [0, 0, 1, 1, 2, 2, 3, 3]);
    for id in &ids {
        let j = p.job(*id);
        assert_eq!(j.state, JobState::Completed, "{j:?}");
        assert!(j.ended_at.is_some_and(|t| t <= T0 + 4), "{j:?}");
    }
    assert!(p.s.world().broker.stats().moves >= 1);
    assert_eq!(p.s.world().next_due(Time(T0 + 4)), None);
    p.s.shutdown().await;
}

/// Cancelled while it runs, a job is stopped at that second (its cluster told so), ends
/// `cancelled` then, and the job waiting for its processors starts at that same second.
#[tokio::test]
async fn a_cancelled_job_stops_at_once_and_frees_its_processors() {
    let p = Paused::open(TWO).await;
    let running = p.submit(job(2, 600)).await;
    let waiting = p.submit(job(2, 60)).await;
    p.advance(5).await;
    p.act(running, move |w, now| w.cancel(now, JobId(running)))
        .await;
    assert!(p.rms[0].calls().contains(&Call::Cancel {
        job: running,
        attempt: 0,
        at: T0 + 5
    }));
    let j = p.job(running);
    assert_eq!(
        (j.state, j.ended_at, j.run_secs),
        (JobState::Cancelled, Some(T0 + 5), Some(5))
    );
    assert_eq!(
        p.rms[0].launches(),
        vec![(running, 0, T0), (waiting, 0, T0 + 5)]
    );
    p.s.shutdown().await;
}
