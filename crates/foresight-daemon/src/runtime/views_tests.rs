//! `explain` and job views carry their instants as numbers beside the words: a reason's
//! `at`, the explanation's `now` and a job's `planned_start`, never a time in the text.

use super::super::Service;
use crate::config::Config;
use foresight_api::{JobState, Reason, SubmitJob};
use foresight_core::time::Time;
use foresight_core::JobId;
use foresight_rm::clock::ManualClock;
use std::sync::Arc;

const T0: i64 = 1_795_444_200;

async fn service(dir: &std::path::Path) -> (Arc<Service>, Arc<ManualClock>) {
    let mut cfg: Config =
        toml::from_str("[[cluster]]\nname = \"a\"\nprocs = 2\n[unix_user]\nadmin = \"root\"\n")
            .unwrap();
    cfg.data_dir = dir.to_path_buf();
    let clock = Arc::new(ManualClock::at(Time(T0)));
    let (s, _) = Service::open_with(cfg, clock.clone()).await.unwrap();
    (s, clock)
}

async fn submit(s: &Arc<Service>, job: serde_json::Value) -> JobId {
    let admin = s.world().users["admin"].clone();
    let job: SubmitJob = serde_json::from_value(job).unwrap();
    JobId(s.submit(&admin, vec![job], false).await.unwrap()[0])
}

/// No reason's words hold a number that reads as a time: no year, no seconds count.
fn assert_no_time_in(text: &str) {
    let digits = text.chars().filter(char::is_ascii_digit).count();
    assert!(digits < 4, "a time in the words: {text:?}");
}

#[tokio::test]
async fn a_begin_time_travels_as_at_and_now() {
    let dir = tempfile::tempdir().unwrap();
    let (s, clock) = service(dir.path()).await;
    let begin = T0 + 7_200;
    let id = submit(
        &s,
        serde_json::json!({"procs": 1, "walltime": 60, "command": ["true"], "begin": begin}),
    )
    .await;
    let admin = s.world().users["admin"].clone();
    let e = s.explain(&admin, id).unwrap();
    assert_eq!(e.now, T0);
    assert_eq!(
        e.reasons.first(),
        Some(&Reason::timed("waits for its begin time at", begin)),
        "{e:?}"
    );
    // The API's JSON: the instant and the service's time as numbers.
    let json = serde_json::to_value(&e).unwrap();
    assert_eq!(json["now"], T0, "{json}");
    assert_eq!(json["reasons"][0]["at"], begin, "{json}");
    assert_eq!(
        json["reasons"][0]["text"], "waits for its begin time at",
        "{json}"
    );
    // Planned at its begin, beyond the lead time: the start is `planned_start`, not words.
    s.world().cycle(s.now());
    let j = s.job(&admin, id).unwrap();
    assert_eq!(j.state, JobState::Planned, "{j:?}");
    assert_eq!(j.planned_start, Some(begin), "{j:?}");
    assert_eq!(j.reason.as_deref(), Some("planned beyond the lead time"));
    let e = s.explain(&admin, id).unwrap();
    for r in &e.reasons {
        assert_no_time_in(&r.text);
    }
    assert_eq!(e.planned_start, Some(begin));
    // An hour on, the same instant, counted from the service's new time.
    clock.advance(3_600);
    let e = s.explain(&admin, id).unwrap();
    assert_eq!((e.now, e.reasons[0].at), (T0 + 3_600, Some(begin)));
    s.shutdown().await;
}

#[tokio::test]
async fn a_local_job_waiting_for_its_begin_says_when_it_may_start() {
    let dir = tempfile::tempdir().unwrap();
    let (s, _clock) = service(dir.path()).await;
    let begin = T0 + 600;
    let id = submit(
        &s,
        serde_json::json!({"procs": 1, "walltime": 60, "command": ["true"], "begin": begin,
            "cluster": "a"}),
    )
    .await;
    s.world().cycle(s.now());
    let admin = s.world().users["admin"].clone();
    let e = s.explain(&admin, id).unwrap();
    assert!(
        e.reasons.contains(&Reason::timed(
            "joins a's local queue at its begin time, earliest possible start",
            begin
        )),
        "{e:?}"
    );
    for r in &e.reasons {
        assert_no_time_in(&r.text);
    }
    // A held job's hold speaks of no instant.
    let held = submit(
        &s,
        serde_json::json!({"procs": 1, "walltime": 60, "command": ["true"], "hold": true}),
    )
    .await;
    let e = s.explain(&admin, held).unwrap();
    assert_eq!(
        e.reasons,
        [Reason::new("held: released with `foresight job release`")]
    );
    s.shutdown().await;
}

/// A job of the global queue is said given back from its row's fact, whatever its reason's
/// words, and a reason alone (however worded) does not make it given back.
#[tokio::test]
async fn a_given_back_job_is_said_so_from_its_row_not_from_its_words() {
    let dir = tempfile::tempdir().unwrap();
    let (s, _) = service(dir.path()).await;
    let shared = |given_back: bool, reason: &str| foresight_store::SharedJob {
        record: foresight_store::JobRecord {
            id: 7,
            user: "ann".into(),
            procs: 1,
            reason: Some(reason.into()),
            ..Default::default()
        },
        site: None,
        queue_state: Some("auction".into()),
        site_down: false,
        given_back,
    };
    let view = |j: &foresight_store::SharedJob| {
        super::shared_view(&s.world(), j, Time(T0)).reason.unwrap()
    };
    assert_eq!(
        view(&shared(true, "site b could not start it at once")),
        "in the global queue (auction); site b could not start it at once"
    );
    assert_eq!(
        view(&shared(false, "given back to the auction by site b")),
        "in the global queue (auction)"
    );
}
