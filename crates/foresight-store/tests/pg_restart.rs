//! A single-mode store while its PostgreSQL server restarts: its lock ends with its
//! connection, it writes nothing until it has taken the lock again, then writes on, and a
//! second store is refused again. A test binary of its own, since every test of a binary
//! shares its throwaway server.
#![allow(clippy::unwrap_used)]

use foresight_store::{JobRecord, StoreError, StoreLocation};
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_store_takes_its_lock_again_when_the_server_comes_back() {
    let location = StoreLocation::Postgres(foresight_testkit::postgres::database());
    let store = foresight_store::open(&location).await.unwrap();
    let job = JobRecord {
        user: "ann".into(),
        ..Default::default()
    };
    store.insert_jobs(std::slice::from_ref(&job)).await.unwrap();
    tokio::task::spawn_blocking(|| {
        foresight_testkit::postgres::server().restart(Duration::from_millis(1500))
    })
    .await
    .unwrap();
    let t0 = Instant::now();
    while let Err(e) = store.insert_jobs(std::slice::from_ref(&job)).await {
        assert!(t0.elapsed() < Duration::from_secs(20), "still refused: {e}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let second = foresight_store::open(&location).await.err().unwrap();
    assert!(matches!(second, StoreError::InUse { .. }), "{second}");
    assert_eq!(store.load_jobs(false).await.unwrap().len(), 2);
    store.close().await;
}
