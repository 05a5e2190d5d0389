//! A dispatcher round's two statements on a real PostgreSQL server: the glance reads what
//! the round's reads one by one read, and one statement opens, bids and withdraws as the
//! one-by-one calls did.
#![allow(clippy::unwrap_used)]

use foresight_core::auction::{close, AuctionConfig};
use foresight_store::{
    Claim, Closed, JobRecord, NewBid, PgStore, QueuedJob, SharedQueue, StandingOwn, Start, Store,
    StoreError, UserRecord,
};

fn job(procs: u32, priority: u32) -> JobRecord {
    JobRecord {
        user: "ann".into(),
        name: Some("g".into()),
        procs,
        priority,
        walltime: 60,
        command: vec!["true".into()],
        submitted_at: 1_000,
        ..Default::default()
    }
}

/// Site `name`'s store and queue on the database at `url`.
async fn site(url: &str, name: &str) -> (PgStore, SharedQueue) {
    let store = PgStore::open_site(url, name).await.unwrap();
    let queue = SharedQueue::new(&store, name, 60_000);
    queue
        .register(std::process::id(), "", 4, 0.0)
        .await
        .unwrap();
    (store, queue)
}

/// Closes one due auction as a dispatcher does (opening bid 0).
async fn close_one(q: &SharedQueue) -> Option<Closed> {
    let cfg = AuctionConfig {
        opening_bid: Some(0.0),
        ..AuctionConfig::default()
    };
    let due = q.due_auction().await.unwrap()?;
    let outcome = close(&cfg, 100.0, &due.bids);
    Some(due.settle(&outcome, 100).await.unwrap())
}

/// A bid `bid_all` places.
fn new_bid(job: u64, price: f64, procs: u32, open: bool) -> NewBid {
    NewBid {
        job,
        price,
        procs,
        open,
    }
}

#[tokio::test]
async fn a_glance_reads_what_the_round_read_one_statement_at_a_time() {
    let url = foresight_testkit::postgres::database();
    let (store, a) = site(&url, "a").await;
    let (_, b) = site(&url, "b").await;
    for (name, budget) in [("ann", Some(1000.0)), ("bob", None)] {
        let u = UserRecord {
            name: name.into(),
            token_hash: format!("hash-{name}"),
            budget,
            ..Default::default()
        };
        store.insert_user(&u).await.unwrap();
    }
    let ids = store
        .insert_jobs(&[job(1, 0), job(2, 3), job(1, 0), job(4, 1), job(1, 0)])
        .await
        .unwrap();
    // ids[0]: won by a and started, ended after 7 s; ids[1]: won by a, not started;
    // ids[2]: in an auction with bids of a and b; ids[3]: queued; ids[4]: won by b, started,
    // its owner asks to cancel it.
    for (id, winner) in [(ids[0], &a), (ids[1], &a), (ids[4], &b)] {
        assert!(winner.open(id, 60_000).await.unwrap());
        assert!(winner.bid(id, 1.0, 1).await.unwrap());
    }
    // Only due auctions close: shorten these three by hand.
    let pool = store.pool();
    sqlx::query("UPDATE global_jobs SET closes_at = now() WHERE job_id = ANY($1)")
        .bind(vec![ids[0] as i64, ids[1] as i64, ids[4] as i64])
        .execute(pool)
        .await
        .unwrap();
    while close_one(&b).await.is_some() {}
    // Both take a hold on ann's budget (its ledger moves); a's comes back as its job ends.
    for (q, id, hold) in [(&a, ids[0], 10.0), (&b, ids[4], 5.0)] {
        // a's claims come highest priority first: ids[1] (level 3), then ids[0].
        let claims = q.claims().await.unwrap();
        let claim = *claims.iter().find(|c| c.job == id).unwrap();
        let mut placed = job(1, 0);
        placed.id = id;
        assert_eq!(
            q.start_holding(claim, &placed, hold).await.unwrap(),
            Start::Started
        );
    }
    a.finished(ids[0], Some(7.0)).await.unwrap();
    assert!(matches!(
        b.apply(ids[4], foresight_store::QueueOp::Cancel, 2_000)
            .await
            .unwrap(),
        foresight_store::OpOutcome::Requested { .. }
    ));
    assert!(a.open(ids[2], 60_000).await.unwrap());
    assert!(a.bid(ids[2], 2.5, 1).await.unwrap());
    assert!(b.bid(ids[2], 1.5, 1).await.unwrap());

    for q in [&a, &b] {
        let g = q.glance(50, 256).await.unwrap();
        assert_eq!(g.users, q.users().await.unwrap());
        assert_eq!(g.users[0].budget, Some(995.0), "{:?}", g.users);
        assert_eq!(g.claims, q.claims().await.unwrap());
        assert_eq!(g.started_here, q.started_here().await.unwrap());
        assert_eq!(g.cancel_requests, q.cancel_requests().await.unwrap());
        assert_eq!(g.runtimes, q.recent_runtimes(50).await.unwrap());
        assert_eq!(g.on_offer, q.on_offer(256).await.unwrap());
        let standing: Vec<(u64, u32)> = g.standing.iter().map(|b| (b.job, b.procs)).collect();
        assert_eq!(standing, q.standing_bids().await.unwrap());
        assert!(!g.dead_sites && !g.due && !g.waiting);
        let next = g.next_close_ms.unwrap();
        assert!(next > 50_000 && next <= 60_000, "{next}");
    }
    // Hand-checked, as well as against the one-by-one reads.
    let g = a.glance(50, 256).await.unwrap();
    assert_eq!(
        g.claims,
        vec![Claim {
            job: ids[1],
            epoch: 1
        }]
    );
    assert_eq!(g.runtimes, vec![7.0]);
    assert_eq!(
        g.on_offer,
        vec![
            QueuedJob {
                job: ids[3],
                procs: 4,
                priority: 1,
                in_auction: false
            },
            QueuedJob {
                job: ids[2],
                procs: 1,
                priority: 0,
                in_auction: true
            },
        ]
    );
    assert_eq!(
        g.standing,
        vec![StandingOwn {
            job: ids[2],
            procs: 1,
            price: 2.5,
            offered: 1
        }]
    );
    assert_eq!(
        b.glance(50, 256).await.unwrap().cancel_requests,
        vec![ids[4]]
    );
    // An auction falls due: the glance says so, and does not count it as the next close.
    sqlx::query("UPDATE global_jobs SET closes_at = now() WHERE job_id = $1")
        .bind(ids[2] as i64)
        .execute(pool)
        .await
        .unwrap();
    let g = a.glance(50, 1).await.unwrap();
    assert!(g.due);
    assert_eq!(g.next_close_ms, None);
    assert_eq!(g.on_offer.len(), 1, "limited");
}

#[tokio::test]
async fn one_statement_opens_bids_and_withdraws_as_the_calls_one_by_one_did() {
    let url = foresight_testkit::postgres::database();
    let (store, a) = site(&url, "a").await;
    let (_, b) = site(&url, "b").await;
    let ids = store
        .insert_jobs(&[job(1, 0), job(1, 0), job(1, 0), job(1, 0)])
        .await
        .unwrap();
    // ids[0] queued; ids[1] in b's auction; ids[2] in a's auction with a's bid, to be
    // withdrawn; ids[3] in an auction that is over (due, not closed).
    assert!(b.open(ids[1], 60_000).await.unwrap());
    assert!(a.open(ids[2], 60_000).await.unwrap());
    assert!(a.bid(ids[2], 1.0, 1).await.unwrap());
    assert!(b.open(ids[3], 0).await.unwrap());
    // Asked twice for one job: refused, nothing written.
    let twice = a
        .bid_all(
            &[new_bid(ids[0], 1.0, 1, true), new_bid(ids[0], 2.0, 1, true)],
            &[],
            60_000,
        )
        .await;
    assert!(
        matches!(twice, Err(StoreError::BidTwice(j)) if j == ids[0]),
        "{twice:?}"
    );
    assert!(!a.on_offer(10).await.unwrap()[0].in_auction);
    let placed = a
        .bid_all(
            &[
                new_bid(ids[0], 1.25, 1, true),
                new_bid(ids[1], 0.75, 1, false),
                new_bid(ids[3], 9.0, 1, false),
            ],
            &[ids[2]],
            60_000,
        )
        .await
        .unwrap();
    // The queued job's auction opened (by a) and its bid stands in it, as does the bid in
    // b's auction; the one in the auction that is over does not; a's other bid is gone.
    assert_eq!(placed.into_iter().collect::<Vec<_>>(), vec![ids[0], ids[1]]);
    let offer = a.on_offer(10).await.unwrap();
    assert!(offer.iter().all(|j| j.in_auction), "{offer:?}");
    assert_eq!(
        a.standing_bids().await.unwrap(),
        vec![(ids[0], 1), (ids[1], 1)]
    );
    let opened_by: Option<String> =
        sqlx::query_scalar("SELECT opened_by FROM global_jobs WHERE job_id = $1")
            .bind(ids[0] as i64)
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(opened_by.as_deref(), Some("a"));
    // Opening an auction someone else opened first is no second opening.
    let auctions: i32 = sqlx::query_scalar("SELECT auctions FROM global_jobs WHERE job_id = $1")
        .bind(ids[1] as i64)
        .fetch_one(store.pool())
        .await
        .unwrap();
    b.bid_all(&[new_bid(ids[1], 1.0, 1, true)], &[], 60_000)
        .await
        .unwrap();
    let again: i32 = sqlx::query_scalar("SELECT auctions FROM global_jobs WHERE job_id = $1")
        .bind(ids[1] as i64)
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!((auctions, again), (1, 1));
    // The prices stand as placed: the best of them wins when the auction closes.
    sqlx::query("UPDATE global_jobs SET closes_at = now() WHERE job_id = $1")
        .bind(ids[1] as i64)
        .execute(store.pool())
        .await
        .unwrap();
    let mut closed = Vec::new();
    while let Some(c) = close_one(&a).await {
        closed.push(c);
    }
    assert!(
        closed.contains(&Closed::Awarded {
            job: ids[1],
            site: "b".into(),
            bidders: 2
        }),
        "{closed:?}"
    );
}
