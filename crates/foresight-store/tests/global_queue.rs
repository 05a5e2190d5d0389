//! The shared global queue of peer dispatchers on a real PostgreSQL server: racing closers
//! set exactly one winner per auction, late bids do not count, a claim lost with its lease
//! cannot start, and the database's locks keep modes and sites apart.
#![allow(clippy::unwrap_used)]

use foresight_api::JobState;
use foresight_store::{Claim, Closed, GlobalQueue, JobRecord, PgStore, Store, StoreError, TieRule};
use std::collections::BTreeMap;
use std::time::Duration;

fn job(procs: u32) -> JobRecord {
    JobRecord {
        id: 0,
        user: "ann".into(),
        name: Some("g".into()),
        procs,
        walltime: 60,
        price: None,
        cluster: None,
        reservation: None,
        allow_early_start: false,
        co_allocate: false,
        command: vec!["true".into()],
        env: Default::default(),
        cwd: None,
        cred: Default::default(),
        state: JobState::Pending,
        state_after: None,
        held: false,
        suspended: false,
        priority: 0,
        requeue: false,
        exit_code: None,
        signal: None,
        reason: None,
        submitted_at: 1_000,
        begin: None,
        first_planned_start: None,
        planned_start: None,
        started_at: None,
        ended_at: None,
        charged: 0.0,
        settled: 0.0,
        parts: vec![],
        attempt: 0,
        stdout: None,
        stderr: None,
        links: None,
        requires: Vec::new(),
        licences: Default::default(),
    }
}

/// Site `name`'s store and queue on the database at `url`.
async fn site(url: &str, name: &str, lease_ms: u64) -> (PgStore, GlobalQueue) {
    let store = PgStore::open_site(url, name).await.unwrap();
    let queue = GlobalQueue::new(&store, name, lease_ms);
    queue.register(std::process::id(), "", 4).await.unwrap();
    (store, queue)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_closers_set_exactly_one_winner_per_auction() {
    let url = foresight_testkit::postgres::database();
    let names = ["a", "b", "c"];
    let mut sites = Vec::new();
    for n in names {
        sites.push(site(&url, n, 60_000).await);
    }
    let n = 40;
    let ids = sites[0].0.insert_jobs(&vec![job(1); n]).await.unwrap();
    // A dispatcher's own store does not list the queued jobs: they are nobody's yet.
    assert!(sites[0].0.load_jobs(false).await.unwrap().is_empty());
    // Hand-checked expectations: job i gets prices from (i % 4) rules, ties included.
    let mut expected = BTreeMap::new();
    for (i, &id) in ids.iter().enumerate() {
        assert!(sites[i % 3].1.open(id, 1500).await.unwrap());
        assert!(
            !sites[(i + 1) % 3].1.open(id, 1500).await.unwrap(),
            "opened once"
        );
        let prices = match i % 4 {
            0 => [1.0, 2.0, 3.0],    // c
            1 => [2.0, 2.0, 1.0],    // tie a, b: lowest site a
            2 => [0.5, 3.0, 3.0],    // tie b, c: b
            _ => [-1.0, -2.0, -0.5], // all below the opening bid 0: unsold
        };
        for (k, p) in prices.into_iter().enumerate() {
            assert!(sites[k].1.bid(id, p, 1).await.unwrap());
        }
        expected.insert(
            id,
            match i % 4 {
                0 => Some("c"),
                1 => Some("a"),
                2 => Some("b"),
                _ => None,
            },
        );
    }
    tokio::time::sleep(Duration::from_millis(1600)).await;
    // A late bid is refused: the auction is over, though not yet closed.
    assert!(!sites[0].1.bid(ids[0], 100.0, 1).await.unwrap());
    // Four closers per site, all at once.
    let mut tasks = Vec::new();
    for (_, q) in &sites {
        for _ in 0..4 {
            let q = q.clone();
            tasks.push(tokio::spawn(async move {
                let mut mine = Vec::new();
                while let Some(c) = q.close_one(0.0, TieRule::LowestSite).await.unwrap() {
                    mine.push(c);
                }
                mine
            }));
        }
    }
    let mut closed: BTreeMap<u64, Vec<Closed>> = BTreeMap::new();
    for t in tasks {
        for c in t.await.unwrap() {
            let job = match &c {
                Closed::Awarded { job, .. } | Closed::Unsold { job } => *job,
            };
            closed.entry(job).or_default().push(c);
        }
    }
    assert_eq!(closed.len(), n, "every auction closed");
    for (job, cs) in &closed {
        assert_eq!(cs.len(), 1, "job {job} closed once: {cs:?}");
        match (&cs[0], expected[job]) {
            (Closed::Awarded { site, bidders, .. }, Some(w)) => {
                assert_eq!(site, w, "job {job}");
                assert_eq!(*bidders, 3);
            }
            (Closed::Unsold { .. }, None) => {}
            (c, w) => panic!("job {job}: {c:?}, expected {w:?}"),
        }
    }
    // Each winner holds exactly its awards, each under epoch 1.
    for (k, (_, q)) in sites.iter().enumerate() {
        let claims = q.claims().await.unwrap();
        let want: Vec<u64> = expected
            .iter()
            .filter(|(_, w)| **w == Some(names[k]))
            .map(|(j, _)| *j)
            .collect();
        let mut got: Vec<u64> = claims.iter().map(|c| c.job).collect();
        got.sort();
        assert_eq!(got, want, "site {}", names[k]);
        assert!(claims.iter().all(|c| c.epoch == 1));
    }
    // Unsold jobs are on offer again.
    let offered = sites[0].1.on_offer(100).await.unwrap();
    assert_eq!(offered.len(), n / 4);
    assert!(offered.iter().all(|j| !j.in_auction));
}

#[tokio::test]
async fn a_claim_lost_with_its_lease_is_not_started() {
    let url = foresight_testkit::postgres::database();
    let (_, a) = site(&url, "a", 300).await;
    let (b_store, b) = site(&url, "b", 60_000).await;
    let id = b_store.insert_jobs(&[job(2)]).await.unwrap()[0];
    assert!(a.open(id, 0).await.unwrap());
    // Opened with no time to bid: it closes unsold and is queued again.
    assert_eq!(
        b.close_one(0.0, TieRule::LowestSite).await.unwrap(),
        Some(Closed::Unsold { job: id })
    );
    assert!(a.open(id, 100).await.unwrap());
    assert!(a.bid(id, 1.0, 2).await.unwrap());
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(
        b.close_one(0.0, TieRule::LowestSite).await.unwrap(),
        Some(Closed::Awarded {
            job: id,
            site: "a".into(),
            bidders: 1
        })
    );
    let claim = a.claims().await.unwrap()[0];
    assert_eq!(claim, Claim { job: id, epoch: 1 });
    // a falls silent past its lease: b gives its claim back to the queue.
    assert!(b.reclaim().await.unwrap().is_empty(), "a is still alive");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(b.reclaim().await.unwrap(), vec![id]);
    // a comes back and tries to start what it was awarded: refused, nothing changes.
    a.heartbeat().await.unwrap();
    let mut placed = job(2);
    placed.id = id;
    placed.cluster = Some("a-c".into());
    assert!(!a.start(claim, &placed).await.unwrap());
    assert!(a.claims().await.unwrap().is_empty());
    let shared = a.shared_job(id).await.unwrap().unwrap();
    assert_eq!(shared.site, None);
    assert_eq!(shared.record.cluster, None);
    assert_eq!(shared.queue_state.as_deref(), Some("queued"));
    // Sold again, to b under a new epoch; b starts it and it becomes b's job.
    assert!(b.open(id, 50).await.unwrap());
    assert!(b.bid(id, 1.0, 2).await.unwrap());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(matches!(
        a.close_one(0.0, TieRule::LowestSite).await.unwrap(),
        Some(Closed::Awarded { .. })
    ));
    let claim = b.claims().await.unwrap()[0];
    assert_eq!(claim, Claim { job: id, epoch: 3 });
    placed.cluster = Some("b-c".into());
    assert!(b.start(claim, &placed).await.unwrap());
    assert!(!b.start(claim, &placed).await.unwrap(), "started once");
    let mine = b_store.load_jobs(false).await.unwrap();
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].cluster.as_deref(), Some("b-c"));
    b.finished(id, Some(7.0)).await.unwrap();
    assert_eq!(b.recent_runtimes(10).await.unwrap(), vec![7.0]);
}

#[tokio::test]
async fn single_mode_and_dispatchers_never_share_a_database() {
    let url = foresight_testkit::postgres::database();
    let a = PgStore::open_site(&url, "a").await.unwrap();
    let _b = PgStore::open_site(&url, "b").await.unwrap();
    let again = PgStore::open_site(&url, "a").await.unwrap_err();
    assert!(
        matches!(&again, StoreError::InUse { holder, .. } if holder.contains("site \"a\"")),
        "{again}"
    );
    let single = PgStore::open(&url).await.unwrap_err();
    assert!(matches!(single, StoreError::InUse { .. }), "{single}");
    a.close().await;
    // Site a is free again once its dispatcher has gone.
    let _a = PgStore::open_site(&url, "a").await.unwrap();
}
