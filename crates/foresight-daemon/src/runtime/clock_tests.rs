//! The service reads the time only from its clock: a manual clock stamps what it writes and
//! dates its cycles, whatever the system's time.

use super::Service;
use crate::config::Config;
use foresight_api::{JobState, SubmitJob};
use foresight_core::time::Time;
use foresight_core::JobId;
use foresight_rm::clock::ManualClock;
use std::sync::Arc;

#[tokio::test]
async fn the_service_stamps_and_plans_by_its_own_clock() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg: Config =
        toml::from_str("[[cluster]]\nname = \"a\"\nprocs = 2\n[unix_user]\nadmin = \"root\"\n")
            .unwrap();
    cfg.data_dir = dir.path().to_path_buf();
    let clock = Arc::new(ManualClock::at(Time(1_000_000)));
    let (s, _) = Service::open_with(cfg, clock.clone()).await.unwrap();
    let admin = s.world().users["admin"].clone();
    let job: SubmitJob = serde_json::from_value(serde_json::json!({
        "procs": 1, "walltime": 60, "command": ["true"], "cluster": "a", "hold": true
    }))
    .unwrap();
    let ids = s.submit(&admin, vec![job], false).await.unwrap();
    let view = s.job(&admin, JobId(ids[0])).unwrap();
    assert_eq!(
        (view.submitted_at, view.state),
        (1_000_000, JobState::Pending)
    );
    clock.advance(3_600);
    s.world().cycle(s.now());
    assert_eq!(s.world().stats.last_cycle_at, Some(Time(1_003_600)));
    s.shutdown().await;
}
