//! The shared global queue of peer dispatchers on a real PostgreSQL server: racing closers
//! set exactly one winner per auction, late bids do not count, a claim lost with its lease
//! cannot start, and the database's locks keep modes and sites apart.
#![allow(clippy::unwrap_used)]

use foresight_core::auction::{close, AuctionConfig, Unsold};
use foresight_store::JobState;
use foresight_store::{
    Claim, Closed, JobRecord, OpOutcome, PgStore, QueueOp, SharedQueue, Start, Store, StoreError,
};
use std::collections::BTreeMap;
use std::time::Duration;

fn job(procs: u32) -> JobRecord {
    JobRecord {
        user: "ann".into(),
        name: Some("g".into()),
        procs,
        walltime: 60,
        command: vec!["true".into()],
        submitted_at: 1_000,
        ..Default::default()
    }
}

/// The mean runtime the tests' auctions are measured in, seconds.
const MEAN_RUNTIME: f64 = 100.0;

/// The length of an auction reopened after no valid bid, milliseconds.
const REOPENED_MS: i64 = 200;

/// The length of an auction reopened where the test closes every due auction in a loop:
/// past the loop, so that it never closes one it reopened (a loaded host once ran the loop
/// longer than [`REOPENED_MS`], and an auction reopened at once was closed twice).
const LONG_REOPENED_MS: i64 = 600_000;

/// The auction with an opening bid of 0, ties to the lowest site id, unsold jobs queued again.
fn opening_zero() -> AuctionConfig {
    AuctionConfig {
        opening_bid: Some(0.0),
        ..AuctionConfig::default()
    }
}

/// Closes one due auction as a dispatcher does: the queue locks it and its bids, the core
/// picks the winner, the queue records it. `None`: nothing due.
async fn close_one(q: &SharedQueue, cfg: &AuctionConfig) -> Option<Closed> {
    let due = q.due_auction().await.unwrap()?;
    let outcome = close(cfg, MEAN_RUNTIME, &due.bids);
    Some(due.settle(&outcome, REOPENED_MS).await.unwrap())
}

/// Site `name`'s store and queue on the database at `url`.
async fn site(url: &str, name: &str, lease_ms: u64) -> (PgStore, SharedQueue) {
    let store = PgStore::open_site(url, name).await.unwrap();
    let queue = SharedQueue::new(&store, name, lease_ms);
    queue
        .register(std::process::id(), "", 4, 0.0)
        .await
        .unwrap();
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
                while let Some(c) = close_one(&q, &opening_zero()).await {
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
async fn without_an_opening_bid_the_best_bid_wins_however_low() {
    let url = foresight_testkit::postgres::database();
    let (store, a) = site(&url, "a", 60_000).await;
    let (_, b) = site(&url, "b", 60_000).await;
    let ids = store.insert_jobs(&[job(1), job(1)]).await.unwrap();
    for &id in &ids {
        assert!(a.open(id, 300).await.unwrap());
        // Prices a costly preemption or long staging gives: below 0, not below "none".
        assert!(a.bid(id, -3.0, 1).await.unwrap());
        assert!(b.bid(id, -1.5, 1).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    let first = close_one(&a, &AuctionConfig::default()).await;
    assert_eq!(
        first,
        Some(Closed::Awarded {
            job: ids[0],
            site: "b".into(),
            bidders: 2
        })
    );
    // A set opening bid of 0 keeps its meaning: both bids are below it.
    let second = close_one(&a, &opening_zero()).await;
    assert_eq!(second, Some(Closed::Unsold { job: ids[1] }));
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
        close_one(&b, &opening_zero()).await,
        Some(Closed::Unsold { job: id })
    );
    assert!(a.open(id, 100).await.unwrap());
    assert!(a.bid(id, 1.0, 2).await.unwrap());
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(
        close_one(&b, &opening_zero()).await,
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
        close_one(&a, &opening_zero()).await,
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

/// The queue state, site and epoch of `id`, as `shared_job` shows them.
async fn place(q: &SharedQueue, id: u64) -> (String, Option<String>, JobState, bool) {
    let j = q.shared_job(id).await.unwrap().unwrap();
    (
        j.queue_state.unwrap(),
        j.site,
        j.record.state,
        j.record.held,
    )
}

#[tokio::test]
async fn cancel_hold_and_release_apply_in_every_unstarted_state_from_any_site() {
    let url = foresight_testkit::postgres::database();
    let (a_store, a) = site(&url, "a", 60_000).await;
    let (_, b) = site(&url, "b", 60_000).await;
    let mut held = job(1);
    held.held = true;
    let ids = a_store
        .insert_jobs(&[job(1), job(1), job(1), held])
        .await
        .unwrap();
    let (queued, in_auction, claimed, submitted_held) = (ids[0], ids[1], ids[2], ids[3]);
    // Submitted held: off sale.
    assert_eq!(
        place(&a, submitted_held).await,
        ("held".into(), None, JobState::Pending, true)
    );
    let offered: Vec<u64> = a
        .on_offer(10)
        .await
        .unwrap()
        .iter()
        .map(|j| j.job)
        .collect();
    assert_eq!(offered, vec![queued, in_auction, claimed]);
    assert!(a.open(in_auction, 60_000).await.unwrap());
    assert!(b.bid(in_auction, 1.0, 1).await.unwrap());
    assert!(a.open(claimed, 0).await.unwrap());
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(matches!(
        close_one(&a, &opening_zero()).await,
        Some(Closed::Unsold { .. })
    ));
    assert!(a.open(claimed, 100).await.unwrap());
    assert!(b.bid(claimed, 1.0, 1).await.unwrap());
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(matches!(
        close_one(&a, &opening_zero()).await,
        Some(Closed::Awarded { .. })
    ));
    let claim = b.claims().await.unwrap()[0];
    // Hold from a site that is not the winner: the award is void.
    for id in [queued, in_auction, claimed] {
        assert_eq!(
            a.apply(id, QueueOp::Hold, 2_000).await.unwrap(),
            OpOutcome::Done
        );
        assert_eq!(
            place(&b, id).await,
            ("held".into(), None, JobState::Pending, true)
        );
    }
    assert!(b.on_offer(10).await.unwrap().is_empty());
    assert!(
        !b.bid(in_auction, 5.0, 1).await.unwrap(),
        "its auction ended"
    );
    let mut placed = job(1);
    placed.id = claimed;
    placed.cluster = Some("b-c".into());
    assert!(
        !b.start(claim, &placed).await.unwrap(),
        "a held job's claim is void"
    );
    assert!(matches!(
        a.apply(queued, QueueOp::Hold, 2_000).await.unwrap(),
        OpOutcome::Refused(m) if m.contains("already held")
    ));
    // Released, each goes on sale again; cancelled, it never will.
    for id in [queued, in_auction, claimed, submitted_held] {
        assert_eq!(
            b.apply(id, QueueOp::Release, 2_000).await.unwrap(),
            OpOutcome::Done
        );
        assert_eq!(
            place(&a, id).await,
            ("queued".into(), None, JobState::Pending, false)
        );
    }
    assert!(matches!(
        b.apply(queued, QueueOp::Release, 2_000).await.unwrap(),
        OpOutcome::Refused(m) if m.contains("not held")
    ));
    assert!(a.open(in_auction, 60_000).await.unwrap());
    assert!(b.bid(in_auction, 1.0, 1).await.unwrap());
    for id in [queued, in_auction, claimed] {
        assert_eq!(
            b.apply(id, QueueOp::Cancel, 3_000).await.unwrap(),
            OpOutcome::Done
        );
        let j = a.shared_job(id).await.unwrap().unwrap();
        assert_eq!(j.queue_state.as_deref(), Some("cancelled"));
        assert_eq!(j.record.state, JobState::Cancelled);
        assert_eq!(j.record.ended_at, Some(3_000));
        assert!(matches!(
            a.apply(id, QueueOp::Cancel, 3_000).await.unwrap(),
            OpOutcome::Refused(m) if m.contains("ended (cancelled)")
        ));
    }
    let offered: Vec<u64> = a
        .on_offer(10)
        .await
        .unwrap()
        .iter()
        .map(|j| j.job)
        .collect();
    assert_eq!(offered, vec![submitted_held]);
    // A site's local job is not the queue's.
    assert_eq!(
        a.apply(999_999, QueueOp::Cancel, 0).await.unwrap(),
        OpOutcome::NotGlobal
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancel_racing_the_winners_start_has_exactly_one_outcome() {
    let url = foresight_testkit::postgres::database();
    let (a_store, a) = site(&url, "a", 60_000).await;
    let (_, b) = site(&url, "b", 60_000).await;
    let n = 30;
    let ids = a_store.insert_jobs(&vec![job(1); n]).await.unwrap();
    for &id in &ids {
        assert!(a.open(id, 50).await.unwrap());
        assert!(a.bid(id, 1.0, 1).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(80)).await;
    while close_one(&b, &opening_zero()).await.is_some() {}
    let claims = a.claims().await.unwrap();
    assert_eq!(claims.len(), n);
    let (mut cancelled_first, mut started_first) = (0, 0);
    for (k, claim) in claims.into_iter().enumerate() {
        let (a2, b2) = (a.clone(), b.clone());
        let mut placed = job(1);
        placed.id = claim.job;
        placed.cluster = Some("a-c".into());
        // Alternate who is sent first; the database orders them either way.
        let start = tokio::spawn(async move { a2.start(claim, &placed).await.unwrap() });
        let cancel = tokio::spawn(async move {
            if k % 2 == 0 {
                tokio::task::yield_now().await;
            }
            b2.apply(claim.job, QueueOp::Cancel, 5_000).await.unwrap()
        });
        let (started, outcome) = (start.await.unwrap(), cancel.await.unwrap());
        let j = a.shared_job(claim.job).await.unwrap().unwrap();
        match (started, &outcome) {
            (false, OpOutcome::Done) => {
                cancelled_first += 1;
                assert_eq!(j.queue_state.as_deref(), Some("cancelled"));
                assert_eq!(j.record.state, JobState::Cancelled);
                assert_eq!(j.site, None, "never handed to a");
            }
            (true, OpOutcome::Requested { site }) => {
                started_first += 1;
                assert_eq!(site, "a");
                assert_eq!(j.queue_state.as_deref(), Some("started"));
                assert_eq!(j.site.as_deref(), Some("a"));
                assert!(a.cancel_requests().await.unwrap().contains(&claim.job));
            }
            other => panic!("job {}: {other:?}", claim.job),
        }
    }
    assert_eq!(cancelled_first + started_first, n);
    // The site stops what it started and clears the requests.
    for id in a.cancel_requests().await.unwrap() {
        a.cancel_applied(id).await.unwrap();
    }
    assert!(a.cancel_requests().await.unwrap().is_empty());
    assert!(b.cancel_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn an_unsold_auction_reopens_after_its_back_off() {
    let url = foresight_testkit::postgres::database();
    let (a_store, a) = site(&url, "a", 60_000).await;
    let ids = a_store.insert_jobs(&[job(1), job(1)]).await.unwrap();
    let auctions = |id: u64| {
        foresight_testkit::postgres::server().psql(
            &url,
            &format!("SELECT state || ' ' || auctions FROM global_jobs WHERE job_id = {id}"),
        )
    };
    for &id in &ids {
        assert!(a.open(id, 0).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    // One hundredth of the mean runtime of 100 s: 1 s (whole seconds, as `sim auction`
    // counts it), then an auction of `REOPENED_MS`.
    let reopen = AuctionConfig {
        unsold: Unsold::Reopen { delay: 0.01 },
        ..opening_zero()
    };
    // The first closes under "wait" (queued, no auction until a site bids), the second under
    // "reopen" (a new auction after the back-off, whoever bids).
    assert_eq!(
        close_one(&a, &opening_zero()).await,
        Some(Closed::Unsold { job: ids[0] })
    );
    assert_eq!(
        close_one(&a, &reopen).await,
        Some(Closed::Unsold { job: ids[1] })
    );
    assert_eq!(auctions(ids[0]), "queued 1");
    assert_eq!(auctions(ids[1]), "auction 2");
    // During the back-off it is not on offer and bids are refused.
    let offered = a.on_offer(10).await.unwrap();
    assert_eq!(
        offered.iter().map(|j| j.job).collect::<Vec<_>>(),
        vec![ids[0]]
    );
    assert!(!a.bid(ids[1], 1.0, 1).await.unwrap());
    assert_eq!(close_one(&a, &reopen).await, None);
    tokio::time::sleep(Duration::from_millis(1050)).await;
    let offered = a.on_offer(10).await.unwrap();
    assert!(offered.iter().any(|j| j.job == ids[1] && j.in_auction));
    assert!(a.bid(ids[1], 1.0, 1).await.unwrap());
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(
        close_one(&a, &reopen).await,
        Some(Closed::Awarded {
            job: ids[1],
            site: "a".into(),
            bidders: 1
        })
    );
}

#[tokio::test]
async fn a_site_lists_the_jobs_it_does_not_hold() {
    let url = foresight_testkit::postgres::database();
    let (a_store, a) = site(&url, "a", 60_000).await;
    let (b_store, b) = site(&url, "b", 60_000).await;
    let mut local_a = job(1);
    local_a.cluster = Some("a-c".into());
    let mut local_b = job(1);
    local_b.cluster = Some("b-c".into());
    local_b.user = "bob".into();
    let la = a_store.insert_jobs(&[local_a]).await.unwrap()[0];
    let lb = b_store.insert_jobs(&[local_b]).await.unwrap()[0];
    let g = a_store.insert_jobs(&[job(1)]).await.unwrap()[0];
    let seen = |js: Vec<foresight_store::SharedJob>| -> Vec<(u64, Option<String>, Option<String>)> {
        js.into_iter()
            .map(|j| (j.record.id, j.site, j.queue_state))
            .collect()
    };
    assert_eq!(
        seen(a.jobs_elsewhere(None, None, 10).await.unwrap()),
        vec![
            (g, None, Some("queued".into())),
            (lb, Some("b".into()), None)
        ]
    );
    assert_eq!(
        seen(b.jobs_elsewhere(Some("ann"), None, 10).await.unwrap()),
        vec![
            (g, None, Some("queued".into())),
            (la, Some("a".into()), None)
        ]
    );
    assert_eq!(
        seen(b.jobs_elsewhere(Some("ann"), None, 1).await.unwrap()).len(),
        1
    );
    assert!(b
        .jobs_elsewhere(Some("ann"), Some("running"), 10)
        .await
        .unwrap()
        .is_empty());
    assert!(
        a.jobs_elsewhere(Some("bob"), Some("pending"), 10)
            .await
            .unwrap()[0]
            .record
            .id
            == lb
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_sites_starting_at_once_cannot_both_spend_the_last_of_a_budget() {
    let url = foresight_testkit::postgres::database();
    let (a_store, a) = site(&url, "a", 60_000).await;
    let (b_store, b) = site(&url, "b", 60_000).await;
    let ann = foresight_store::UserRecord {
        name: "ann".into(),
        token_hash: "x".into(),
        budget: Some(150.0),
        ..Default::default()
    };
    a_store.insert_user(&ann).await.unwrap();
    let budget = |s: &PgStore| {
        let s = s.clone();
        async move {
            let u = s.load_users().await.unwrap();
            let u = u.iter().find(|u| u.name == "ann").unwrap();
            (u.budget.unwrap(), u.spent)
        }
    };
    for round in 0..10 {
        let ids = a_store.insert_jobs(&[job(1), job(1)]).await.unwrap();
        for (id, q) in ids.iter().zip([&a, &b]) {
            assert!(q.open(*id, 500).await.unwrap());
            assert!(q.bid(*id, 1.0, 1).await.unwrap());
        }
        tokio::time::sleep(Duration::from_millis(550)).await;
        while close_one(&a, &opening_zero()).await.is_some() {}
        let (ca, cb) = (a.claims().await.unwrap()[0], b.claims().await.unwrap()[0]);
        let started = |q: &SharedQueue, c: Claim, cluster: &str| {
            let q = q.clone();
            let mut placed = job(1);
            placed.id = c.job;
            placed.cluster = Some(cluster.into());
            tokio::spawn(async move { q.start_holding(c, &placed, 100.0).await.unwrap() })
        };
        let (ta, tb) = (started(&a, ca, "a-c"), started(&b, cb, "b-c"));
        let (ra, rb) = (ta.await.unwrap(), tb.await.unwrap());
        let outcomes = [ra, rb];
        let won = outcomes.iter().filter(|o| **o == Start::Started).count();
        assert_eq!(won, 1, "round {round}: {outcomes:?}");
        assert!(
            outcomes.contains(&Start::OverBudget { left: 50.0 }),
            "round {round}: {outcomes:?}"
        );
        assert_eq!(
            budget(&a_store).await,
            (50.0, 100.0),
            "the hold is taken once"
        );
        // The loser gives its award back; the winner ends the job after charging 30.
        let (winner, loser, wstore, wclaim, lclaim) = if ra == Start::Started {
            (&a, &b, &a_store, ca, cb)
        } else {
            (&b, &a, &b_store, cb, ca)
        };
        assert!(loser.unclaim(lclaim).await.unwrap());
        assert_eq!(
            loser
                .shared_job(lclaim.job)
                .await
                .unwrap()
                .unwrap()
                .queue_state
                .as_deref(),
            Some("queued")
        );
        let mut ran = wstore
            .load_jobs(false)
            .await
            .unwrap()
            .into_iter()
            .find(|j| j.id == wclaim.job)
            .unwrap();
        ran.charged = 30.0;
        ran.state = JobState::Completed;
        wstore.update_jobs(&[ran]).await.unwrap();
        // A stale cached copy of the user written back changes no budget.
        let mut stale = ann.clone();
        stale.budget = Some(1e9);
        stale.spent = 0.0;
        loser_store(&a_store, &b_store, winner)
            .update_users(&[stale.into()])
            .await
            .unwrap();
        winner.finished(wclaim.job, Some(1.0)).await.unwrap();
        assert_eq!(
            budget(&a_store).await,
            (120.0, 30.0),
            "hold back, real cost charged"
        );
        // The queued one is cancelled, and the budget set back for the next round.
        assert_eq!(
            a.apply(lclaim.job, QueueOp::Cancel, 0).await.unwrap(),
            OpOutcome::Done
        );
        assert_eq!(
            a.change_budget("ann", Some(Some(150.0)), None)
                .await
                .unwrap(),
            Some(Ok((Some(150.0), 30.0)))
        );
        let mut reset = ann.clone();
        reset.budget = Some(150.0);
        a_store.update_users(&[reset.into()]).await.unwrap();
        let (_, spent) = budget(&a_store).await;
        assert_eq!(spent, 30.0, "update_users keeps the database's spending");
        // Back to no spending for the next round.
        foresight_testkit::postgres::server().psql(
            &url,
            "UPDATE users SET data = replace(data, '\"spent\":30.0', '\"spent\":0.0') \
             WHERE name = 'ann'",
        );
    }
    assert_eq!(
        a.change_budget("ann", None, Some(5.0)).await.unwrap(),
        Some(Ok((Some(155.0), 0.0)))
    );
    assert_eq!(
        a.change_budget("nobody", None, Some(5.0)).await.unwrap(),
        None
    );
}

fn loser_store<'a>(a: &'a PgStore, b: &'a PgStore, winner: &SharedQueue) -> &'a PgStore {
    if winner.site() == "a" {
        b
    } else {
        a
    }
}

/// Two sites each change one user from the same cached copy: a writes its change, then b,
/// which has not taken it in, writes its own. Changes to different fields both survive;
/// a change to the same field is the later writer's (the row lock orders them).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn peer_changes_to_one_user_survive_each_other() {
    let url = foresight_testkit::postgres::database();
    let (a_store, _a) = site(&url, "a", 60_000).await;
    let (b_store, _b) = site(&url, "b", 60_000).await;
    let cached = foresight_store::UserRecord {
        name: "ann".into(),
        token_hash: "old".into(),
        budget: Some(100.0),
        ..Default::default()
    };
    a_store.insert_user(&cached).await.unwrap();
    let ann = |s: &PgStore| {
        let s = s.clone();
        async move {
            let us = s.load_users().await.unwrap();
            us.into_iter().find(|u| u.name == "ann").unwrap()
        }
    };
    // a rotates the token and grants a group; b (stale) disables ann and grants a QoS.
    let mut at_a = cached.clone();
    at_a.token_hash = "new".into();
    at_a.credentials.groups = vec!["physics".into()];
    a_store
        .update_users(&[user_change(&cached, &at_a)])
        .await
        .unwrap();
    let mut at_b = cached.clone();
    at_b.disabled = true;
    at_b.credentials.qos = vec!["high".into()];
    b_store
        .update_users(&[user_change(&cached, &at_b)])
        .await
        .unwrap();
    let now = ann(&a_store).await;
    assert_eq!(
        now.token_hash, "new",
        "a's rotation survives b's write: {now:?}"
    );
    assert_eq!(
        now.credentials.groups,
        vec!["physics".to_string()],
        "{now:?}"
    );
    assert!(now.disabled, "b's change is written: {now:?}");
    assert_eq!(now.credentials.qos, vec!["high".to_string()], "{now:?}");
    assert_eq!(now.budget, Some(100.0));
    // The same field from both (b still on its stale copy): the later write stands.
    let mut at_a2 = now.clone();
    at_a2.unix_user = Some("ann_a".into());
    a_store
        .update_users(&[user_change(&now, &at_a2)])
        .await
        .unwrap();
    let mut at_b2 = now.clone();
    at_b2.unix_user = Some("ann_b".into());
    b_store
        .update_users(&[user_change(&now, &at_b2)])
        .await
        .unwrap();
    let last = ann(&b_store).await;
    assert_eq!(last.unix_user.as_deref(), Some("ann_b"), "{last:?}");
    assert_eq!(last.token_hash, "new", "{last:?}");
    assert!(last.disabled, "{last:?}");
}

/// What a writer holding `base` and now `user` asks the store to write.
fn user_change(
    base: &foresight_store::UserRecord,
    user: &foresight_store::UserRecord,
) -> foresight_store::UserChange {
    foresight_store::UserChange {
        base: Some(base.clone()),
        user: user.clone(),
    }
}

/// Local jobs of a limited budget hold their worst case in the shared budget as they are
/// stored: two sites racing for the last of it cannot both take it; the hold is settled to
/// the real charge at the end; a dead site's holds go back at a peer's next reclaim.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn local_holds_count_at_every_site_settle_at_the_end_and_die_with_their_site() {
    let url = foresight_testkit::postgres::database();
    let (a_store, a) = site(&url, "a", 60_000).await;
    let (b_store, b) = site(&url, "b", 60_000).await;
    a_store
        .insert_user(&foresight_store::UserRecord {
            name: "ann".into(),
            token_hash: "x".into(),
            budget: Some(100.0),
            ..Default::default()
        })
        .await
        .unwrap();
    let budget = |s: &PgStore| {
        let s = s.clone();
        async move {
            let u = s.load_users().await.unwrap();
            let u = u.iter().find(|u| u.name == "ann").unwrap();
            (u.budget.unwrap(), u.spent)
        }
    };
    let local = |cluster: &str, hold: f64| JobRecord {
        cluster: Some(cluster.into()),
        budget_hold: hold,
        ..job(1)
    };
    for round in 0..5 {
        let (ja, jb) = ([local("a-c", 60.0)], [local("b-c", 60.0)]);
        let (ra, rb) = tokio::join!(a.submit("ann", &ja, 0.0), b.submit("ann", &jb, 0.0));
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        let stored: Vec<_> = [&ra, &rb]
            .into_iter()
            .filter(|r| matches!(r, foresight_store::Submitted::Stored(_)))
            .collect();
        assert_eq!(stored.len(), 1, "round {round}: {ra:?} {rb:?}");
        let refused = if matches!(ra, foresight_store::Submitted::Stored(_)) {
            &rb
        } else {
            &ra
        };
        match refused {
            foresight_store::Submitted::OverBudget(o) => {
                assert_eq!((o.local, o.local_jobs, o.left), (60.0, 1, 40.0), "{o:?}")
            }
            other => panic!("round {round}: {other:?}"),
        }
        assert_eq!(
            budget(&a_store).await,
            (40.0, 60.0),
            "round {round}: held once"
        );
        // The job ends after using 25: the rest of the hold comes back.
        let winner = if matches!(ra, foresight_store::Submitted::Stored(_)) {
            &a_store
        } else {
            &b_store
        };
        let mut ran = winner.load_jobs(true).await.unwrap().remove(0);
        assert_eq!(ran.budget_hold, 60.0);
        ran.state = JobState::Running;
        winner
            .update_jobs(std::slice::from_ref(&ran))
            .await
            .unwrap();
        assert_eq!(
            budget(&a_store).await,
            (40.0, 60.0),
            "round {round}: running"
        );
        ran.charged = 25.0;
        ran.state = JobState::Completed;
        winner.update_jobs(&[ran]).await.unwrap();
        assert_eq!(
            budget(&a_store).await,
            (75.0, 25.0),
            "round {round}: settled"
        );
        assert_eq!(
            a.change_budget("ann", Some(Some(100.0)), None)
                .await
                .unwrap(),
            Some(Ok((Some(100.0), 25.0)))
        );
        foresight_testkit::postgres::server().psql(
            &url,
            "UPDATE users SET data = replace(data, '\"spent\":25.0', '\"spent\":0.0') \
             WHERE name = 'ann'",
        );
    }
    // A job cancelled before it started gives its whole hold back.
    let ids = match a.submit("ann", &[local("a-c", 30.0)], 0.0).await.unwrap() {
        foresight_store::Submitted::Stored(ids) => ids,
        other => panic!("{other:?}"),
    };
    assert_eq!(budget(&a_store).await, (70.0, 30.0));
    let mut gone = a_store.load_jobs(true).await.unwrap().remove(0);
    assert_eq!(gone.id, ids[0]);
    gone.state = JobState::Cancelled;
    a_store.update_jobs(&[gone]).await.unwrap();
    assert_eq!(budget(&a_store).await, (100.0, 0.0));
    // Site c holds 30 and dies (its lease of 300 ms runs out): a's reclaim gives it back.
    let (c_store, c) = site(&url, "c", 300).await;
    assert!(matches!(
        c.submit("ann", &[local("c-c", 30.0)], 0.0).await.unwrap(),
        foresight_store::Submitted::Stored(_)
    ));
    assert_eq!(budget(&a_store).await, (70.0, 30.0));
    a.reclaim().await.unwrap();
    assert_eq!(budget(&a_store).await, (70.0, 30.0), "c is alive");
    tokio::time::sleep(Duration::from_millis(600)).await;
    a.reclaim().await.unwrap();
    assert_eq!(budget(&a_store).await, (100.0, 0.0), "c's hold is back");
    a.reclaim().await.unwrap();
    assert_eq!(budget(&a_store).await, (100.0, 0.0), "given back once");
    // c returns with its job's old record: charged as it ends, the hold not given twice.
    let mut late = c_store.load_jobs(true).await.unwrap().remove(0);
    assert_eq!(late.budget_hold, 0.0, "its record carries the hold no more");
    late.budget_hold = 30.0;
    late.charged = 10.0;
    late.state = JobState::Completed;
    c_store.update_jobs(&[late]).await.unwrap();
    assert_eq!(budget(&a_store).await, (90.0, 10.0));
}

/// A small seeded generator (xorshift64*), so that the workload is the same at every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One step of the workload, in the order the sites take them (jobs by index).
#[derive(Clone, Copy, Debug)]
enum Act {
    Bid {
        job: usize,
        site: usize,
        offer: foresight_core::auction::Offer,
    },
    Withdraw {
        job: usize,
        site: usize,
    },
}

/// A seeded workload of `jobs` auctions among `sites` sites: each job's need, and the bids
/// and withdrawals in the order they are made. Offers come from a small menu, so equal
/// prices are common; some jobs get no bid, some only bids below an opening bid of 0, and
/// some bids are withdrawn or placed again (at the same price: it keeps its place; or at
/// another). A bid below the opening bid is only ever a site's first in its job, and a
/// re-bid always clears it: how a dispatcher bids (it withdraws instead of bidding low).
fn workload(seed: u64, jobs: usize, sites: usize) -> (Vec<u32>, Vec<Act>) {
    use foresight_core::auction::Offer;
    use foresight_core::time::Dur;
    let mut rng = Rng(seed);
    let offer = |need: u32, twice: bool, stage: i64| Offer {
        procs: if twice { 2 * need } else { need },
        capacity: 1_000,
        preempt_work: 0.0,
        stage: Dur(stage),
    };
    let needs: Vec<u32> = (0..jobs).map(|_| 1 + rng.below(4) as u32).collect();
    let mut per_job = Vec::new();
    for (job, &need) in needs.iter().enumerate() {
        let kind = rng.below(6);
        let mut per_site = Vec::new();
        for site in 0..sites {
            if kind == 0 || rng.below(4) == 0 {
                continue; // nobody bids in a job of kind 0
            }
            // Kind 1: every bid costs 3 mean runtimes of staging, below an opening bid of 0.
            let stage = if kind == 1 {
                300
            } else {
                [0, 50, 300][rng.below(3) as usize]
            };
            let first = offer(need, rng.below(2) == 0, stage);
            let mut mine = vec![Act::Bid {
                job,
                site,
                offer: first,
            }];
            if stage != 300 {
                match rng.below(5) {
                    0 => mine.push(Act::Withdraw { job, site }),
                    1 => mine.push(Act::Bid {
                        job,
                        site,
                        offer: first,
                    }),
                    2 => {
                        let o = offer(need, rng.below(2) == 0, [0, 50][rng.below(2) as usize]);
                        mine.push(Act::Bid {
                            job,
                            site,
                            offer: o,
                        });
                    }
                    _ => {}
                }
            }
            per_site.push(mine);
        }
        per_job.push(interleave(&mut rng, per_site));
    }
    let acts = interleave(&mut rng, per_job);
    (needs, acts)
}

/// The sequences merged in a random order that keeps each one's own order.
fn interleave(rng: &mut Rng, seqs: Vec<Vec<Act>>) -> Vec<Act> {
    let mut seqs: Vec<std::collections::VecDeque<Act>> = seqs.into_iter().map(Into::into).collect();
    let mut out = Vec::new();
    loop {
        let left: Vec<usize> = (0..seqs.len()).filter(|&i| !seqs[i].is_empty()).collect();
        let Some(&i) = left.get(rng.below(left.len().max(1) as u64) as usize) else {
            return out;
        };
        out.extend(seqs[i].pop_front());
    }
}

/// What one path decided for one job.
#[derive(Clone, Debug, PartialEq)]
enum Decided {
    /// Sold to the site of this name.
    Awarded(String),
    /// Unsold: auctioned again this many seconds after the close, or (`None`) queued.
    Unsold(Option<i64>),
}

/// A job's row in the queue as the same-decisions test reads it: id, state, site, epoch,
/// bidders, auctions, when its auction opens and how long it lasts (seconds).
type QueueRow = (
    i64,
    String,
    Option<String>,
    i64,
    i32,
    i32,
    Option<f64>,
    Option<f64>,
);

/// How much of what the same-decisions test must cover one workload covered.
#[derive(Debug, Default)]
struct Coverage {
    /// Jobs whose best valid price several sites bid.
    ties: usize,
    /// Of those, won by a site that is not the lowest-named of the tied.
    ties_not_by_name: usize,
    /// Of those, won by a site that is not the lowest id of the tied.
    ties_not_by_id: usize,
    /// Jobs without a valid bid.
    unsold: usize,
}

/// Runs one seeded workload through the core as `sim auction` does (an [`AuctionHouse`]
/// fed the opens, bids and withdrawals, then closing at its due time) and through the
/// store as dispatchers do (the same bids, priced by the same function, in a real
/// PostgreSQL queue; the queue locks each due auction, the core's `close` picks, the queue
/// records), and asserts that both decide every job alike: the same winner, or unsold with
/// the same reopening, and that the queue's rows record it.
async fn same_decisions_under(cfg: &AuctionConfig, seed: u64) -> Coverage {
    use foresight_core::auction::{
        price, Announcement, AuctionEvent, AuctionHouse, Lot, Outcome, RuntimeTracker, SiteId,
    };
    use foresight_core::{Dur, JobId, Time};
    let url = foresight_testkit::postgres::database();
    // Registered in this order, the sites' ids are 0..4 and not in the order of their names.
    let names = ["d", "b", "c", "a"];
    let mut sites = Vec::new();
    for (k, n) in names.iter().enumerate() {
        let store = PgStore::open_site(&url, n).await.unwrap();
        let q = SharedQueue::new(&store, n, 60_000);
        let id = q.register(std::process::id(), "", 8, 0.0).await.unwrap();
        assert_eq!(id, SiteId(k as u32), "ids in the order sites register");
        sites.push((store, q));
    }
    let (needs, acts) = workload(seed, 40, names.len());
    let jobs: Vec<JobRecord> = needs.iter().map(|&p| job(p)).collect();
    let ids = sites[0].0.insert_jobs(&jobs).await.unwrap();

    // The core, as the simulator drives it.
    let tracker = RuntimeTracker::new(10, Dur(MEAN_RUNTIME as i64));
    let mut house = AuctionHouse::new(cfg.clone(), tracker);
    for (k, &id) in ids.iter().enumerate() {
        let lot = Lot {
            job: JobId(id),
            procs: needs[k],
            priority: 0,
            home: SiteId(0),
        };
        house.handle(Time(0), AuctionEvent::Open(lot));
    }
    // What stands at the close, as a plain model: (job, site) → price.
    let mut standing: BTreeMap<(usize, usize), f64> = BTreeMap::new();
    for (t, a) in acts.iter().enumerate() {
        let now = Time(1 + t as i64 / 1_000);
        match *a {
            Act::Bid { job, site, offer } => {
                house.handle(
                    now,
                    AuctionEvent::Bid {
                        job: JobId(ids[job]),
                        site: SiteId(site as u32),
                        offer,
                    },
                );
                standing.insert((job, site), price(cfg, needs[job], &offer, MEAN_RUNTIME));
            }
            Act::Withdraw { job, site } => {
                house.handle(
                    now,
                    AuctionEvent::Withdraw {
                        job: JobId(ids[job]),
                        site: SiteId(site as u32),
                    },
                );
                standing.remove(&(job, site));
            }
        }
    }
    let closes = house.next_due().expect("auctions open");
    let mut want = BTreeMap::new();
    for d in house.handle(closes, AuctionEvent::Tick) {
        match d {
            Announcement::Awarded { job, site, .. } => {
                want.insert(job.0, Decided::Awarded(names[site.0 as usize].into()));
            }
            Announcement::Unsold { job, reopens, .. } => {
                want.insert(job.0, Decided::Unsold(reopens.map(|t| (t - closes).0)));
            }
            _ => {}
        }
    }
    assert_eq!(want.len(), ids.len(), "the house closed every auction");

    // The store, as dispatchers drive it: every auction open until the bids are in.
    for &id in &ids {
        assert!(sites[0].1.open(id, 600_000).await.unwrap());
    }
    for a in &acts {
        match *a {
            Act::Bid { job, site, offer } => {
                let p = price(cfg, needs[job], &offer, MEAN_RUNTIME);
                assert!(sites[site].1.bid(ids[job], p, offer.procs).await.unwrap());
            }
            Act::Withdraw { job, site } => sites[site].1.withdraw(ids[job]).await.unwrap(),
        }
    }
    let pool = sites[0].0.pool();
    sqlx::query("UPDATE global_jobs SET closes_at = now() WHERE state = 'auction'")
        .execute(pool)
        .await
        .unwrap();
    let clock = move || async move {
        sqlx::query_scalar::<_, f64>("SELECT EXTRACT(EPOCH FROM clock_timestamp())::float8")
            .fetch_one(pool)
            .await
            .unwrap()
    };
    let before = clock().await;
    let mut got = BTreeMap::new();
    while let Some(due) = sites[1].1.due_auction().await.unwrap() {
        let job = due.job;
        let outcome = close(cfg, MEAN_RUNTIME, &due.bids);
        let decided = match (
            due.settle(&outcome, LONG_REOPENED_MS).await.unwrap(),
            outcome,
        ) {
            (Closed::Awarded { site, .. }, _) => Decided::Awarded(site),
            (Closed::Unsold { .. }, Outcome::Unsold { reopen_after }) => {
                Decided::Unsold(reopen_after.map(|d| d.0))
            }
            (c, o) => panic!("job {job}: recorded {c:?} for {o:?}"),
        };
        got.insert(job, decided);
    }
    let after = clock().await;
    assert_eq!(got, want, "the store decided as the simulator ({cfg:?})");

    // What the queue recorded says the same.
    let rows: Vec<QueueRow> = sqlx::query_as(
        "SELECT job_id, state, site, epoch, bidders, auctions, \
         EXTRACT(EPOCH FROM opened_at)::float8, \
         EXTRACT(EPOCH FROM closes_at - opened_at)::float8 \
         FROM global_jobs ORDER BY job_id",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert_eq!(rows.len(), ids.len());
    let mut cov = Coverage::default();
    for (k, (id, state, site, epoch, bidders, auctions, opened, length)) in
        rows.into_iter().enumerate()
    {
        let id = id as u64;
        assert_eq!(id, ids[k]);
        let valid: Vec<(usize, f64)> = standing
            .iter()
            .filter(|((j, _), p)| *j == k && cfg.clears_opening(**p))
            .map(|((_, s), p)| (*s, *p))
            .collect();
        let what = format!("job {id} ({cfg:?}): {:?}", want[&id]);
        match &want[&id] {
            Decided::Awarded(winner) => {
                assert_eq!(state, "claimed", "{what}");
                assert_eq!(site.as_deref(), Some(winner.as_str()), "{what}");
                assert_eq!((epoch, auctions), (1, 1), "{what}");
                assert_eq!(bidders as usize, valid.len(), "{what}");
                let best = valid.iter().map(|v| v.1).fold(f64::MIN, f64::max);
                let tied: Vec<usize> = valid.iter().filter(|v| v.1 == best).map(|v| v.0).collect();
                if tied.len() > 1 {
                    cov.ties += 1;
                    let by_name = tied.iter().min_by_key(|s| names[**s]).copied();
                    let by_id = tied.iter().min().copied();
                    cov.ties_not_by_name +=
                        usize::from(by_name.map(|s| names[s]) != site.as_deref());
                    cov.ties_not_by_id += usize::from(by_id.map(|s| names[s]) != site.as_deref());
                }
            }
            Decided::Unsold(None) => {
                cov.unsold += 1;
                assert!(valid.is_empty(), "{what}");
                assert_eq!(
                    (state.as_str(), site, epoch, auctions),
                    ("queued", None, 0, 1),
                    "{what}"
                );
            }
            Decided::Unsold(Some(delay)) => {
                cov.unsold += 1;
                assert!(valid.is_empty(), "{what}");
                assert_eq!(
                    (state.as_str(), site, epoch, auctions),
                    ("auction", None, 0, 2),
                    "{what}"
                );
                let opened = opened.expect("a reopened auction opens") - *delay as f64;
                // Reopened `delay` after its close, which came between `before` and `after`.
                assert!(
                    before - 0.001 <= opened && opened <= after + 0.001,
                    "{what}: reopens at {opened} + {delay}, closed within [{before}, {after}]"
                );
                let length = length.expect("a reopened auction closes");
                assert!(
                    (length - LONG_REOPENED_MS as f64 / 1000.0).abs() < 1e-6,
                    "{what}: {length}"
                );
            }
        }
    }
    cov
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_store_and_the_simulator_decide_every_auction_alike() {
    use foresight_core::auction::Tie;
    let cases = [
        (Tie::LowestSite, Unsold::Wait, None),
        (Tie::LowestSite, Unsold::Reopen { delay: 0.02 }, Some(0.0)),
        (Tie::EarliestBid, Unsold::Wait, Some(0.0)),
        (Tie::EarliestBid, Unsold::Reopen { delay: 0.0 }, None),
    ];
    let runs = cases
        .iter()
        .enumerate()
        .map(|(k, &(tie, unsold, opening_bid))| {
            let cfg = AuctionConfig {
                tie,
                unsold,
                opening_bid,
                ..AuctionConfig::default()
            };
            async move {
                let cov = same_decisions_under(&cfg, 0x5eed_0000 + k as u64).await;
                (cfg, cov)
            }
        });
    for (cfg, cov) in futures_join_all(runs).await {
        // The workload exercises what the two paths could disagree on.
        assert!(cov.ties >= 2, "{cfg:?}: {cov:?}");
        assert!(cov.unsold >= 2, "{cfg:?}: {cov:?}");
        match cfg.tie {
            Tie::LowestSite => {
                assert_eq!(cov.ties_not_by_id, 0, "{cfg:?}: {cov:?}");
                assert!(
                    cov.ties_not_by_name >= 1,
                    "ids, not names: {cfg:?}: {cov:?}"
                );
            }
            Tie::EarliestBid => {
                assert!(
                    cov.ties_not_by_id >= 1,
                    "the order of bids: {cfg:?}: {cov:?}"
                )
            }
        }
    }
}

/// Runs the futures at once; their outputs in order.
async fn futures_join_all<F>(fs: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = fs.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

/// Wins `id` for site `q` in an auction of its own: opened, bid on, closed.
async fn win(q: &SharedQueue, id: u64) -> Claim {
    assert!(q.open(id, 50).await.unwrap());
    assert!(q.bid(id, 1.0, 1).await.unwrap());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(matches!(
        close_one(q, &opening_zero()).await,
        Some(Closed::Awarded { .. })
    ));
    q.claims().await.unwrap()[0]
}

#[tokio::test]
async fn a_given_back_job_is_reported_given_back_whatever_its_reason_says() {
    let url = foresight_testkit::postgres::database();
    let (a_store, a) = site(&url, "a", 60_000).await;
    let ids = a_store.insert_jobs(&[job(1), job(1)]).await.unwrap();
    // The reason is prose for people, worded as the giving site likes: not a fact to match.
    let claim = win(&a, ids[0]).await;
    assert!(a
        .give_back(claim, "site a could not start it at once")
        .await
        .unwrap());
    let shared = a.shared_job(ids[0]).await.unwrap().unwrap();
    assert!(shared.given_back);
    assert_eq!(
        shared.record.reason.as_deref(),
        Some("site a could not start it at once")
    );
    assert_eq!(shared.queue_state.as_deref(), Some("queued"));
    // An award given up for a short budget is requeued, not given back.
    let claim = win(&a, ids[1]).await;
    assert!(a.unclaim(claim).await.unwrap());
    let listed = a.jobs_elsewhere(None, None, 10).await.unwrap();
    let given_back: Vec<(u64, bool)> = listed.iter().map(|j| (j.record.id, j.given_back)).collect();
    assert_eq!(given_back, vec![(ids[1], false), (ids[0], true)]);
}
