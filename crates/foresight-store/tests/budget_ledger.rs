//! Budgets of peer dispatchers on a real PostgreSQL server, held in a ledger: running a job
//! (its start with a hold, its charges, its user's copy written back, its end) neither takes
//! nor rewrites its user's `users` row, so auctions and starts of one user's jobs at many
//! sites do not queue on it; the budgets read back are the row less the ledger; the ledger
//! is folded into the row when a budget changes or rows pile up.
//!
//! A row taken `FOR UPDATE` gets the locker's transaction as its `xmax`, a row rewritten a
//! new `xmin`: the tests read both around the work.
#![allow(clippy::unwrap_used)]

use foresight_core::auction::{close, AuctionConfig};
use foresight_store::JobState;
use foresight_store::{
    Claim, Closed, JobRecord, PgStore, SharedQueue, Start, Store, UserChange, UserRecord,
};
use std::time::Duration;

fn job(user: &str) -> JobRecord {
    JobRecord {
        user: user.into(),
        procs: 1,
        walltime: 60,
        command: vec!["true".into()],
        submitted_at: 1_000,
        ..Default::default()
    }
}

fn user(name: &str, budget: Option<f64>) -> UserRecord {
    UserRecord {
        name: name.into(),
        token_hash: format!("hash-{name}"),
        budget,
        ..Default::default()
    }
}

/// Site `name`'s store and queue on the database at `url`.
async fn site(url: &str, name: &str) -> (PgStore, SharedQueue) {
    let store = PgStore::open_site(url, name).await.unwrap();
    let queue = SharedQueue::new(&store, name, 60_000);
    queue
        .register(std::process::id(), "", 4, 1.0)
        .await
        .unwrap();
    (store, queue)
}

/// Sells job `id` to `q`'s site: opens its auction, bids, waits for it to fall due, closes
/// it. The claim.
async fn win(q: &SharedQueue, id: u64) -> Claim {
    assert!(q.open(id, 50).await.unwrap());
    assert!(q.bid(id, 1.0, 1).await.unwrap());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let due = q.due_auction().await.unwrap().expect("the auction is due");
    let cfg = AuctionConfig {
        opening_bid: Some(0.0),
        ..AuctionConfig::default()
    };
    let outcome = close(&cfg, 100.0, &due.bids);
    assert!(matches!(
        due.settle(&outcome, 200).await.unwrap(),
        Closed::Awarded { .. }
    ));
    q.claims().await.unwrap()[0]
}

/// `user`'s row version: (`xmin`, `xmax`), and the token hash it holds.
fn row(url: &str, user: &str) -> String {
    foresight_testkit::postgres::server().psql(
        url,
        &format!("SELECT xmin::text, xmax::text, token_hash FROM users WHERE name = '{user}'"),
    )
}

/// How many ledger rows `user` has.
fn ledger_rows(url: &str, user: &str) -> u64 {
    foresight_testkit::postgres::server()
        .psql(
            url,
            &format!("SELECT count(*) FROM budget_ledger WHERE user_name = '{user}'"),
        )
        .parse()
        .unwrap()
}

/// `name` as the queue reads every user.
async fn read(q: &SharedQueue, name: &str) -> (Option<f64>, f64) {
    let users = q.users().await.unwrap();
    let u = users.iter().find(|u| u.name == name).unwrap();
    (u.budget, u.spent)
}

/// Starts `claim` at `q`'s site with `hold`, writes its record back ended after being
/// charged `charge` (and, without a hold, the user's copy charged as the daemon writes it),
/// and reports its end: what a dispatcher does with a job it won.
async fn run(store: &PgStore, q: &SharedQueue, claim: Claim, hold: f64, charge: f64) {
    let mut r = q.record(claim.job).await.unwrap().unwrap();
    r.cluster = Some("a-c".into());
    r.prepaid = hold;
    r.state = JobState::Running;
    assert_eq!(
        q.start_holding(claim, &r, hold).await.unwrap(),
        Start::Started
    );
    r.state = JobState::Completed;
    r.charged = charge;
    store.update_jobs(std::slice::from_ref(&r)).await.unwrap();
    if hold == 0.0 {
        let base = user(&r.user, None);
        let mut charged = base.clone();
        charged.spent += charge;
        store
            .update_users(&[UserChange {
                base: Some(base),
                user: charged,
            }])
            .await
            .unwrap();
    }
    q.finished(claim.job, Some(1.0)).await.unwrap();
}

#[tokio::test]
async fn running_a_job_neither_locks_nor_rewrites_its_users_row() {
    let url = foresight_testkit::postgres::database();
    let (store, q) = site(&url, "a").await;
    store.insert_user(&user("ann", Some(1000.0))).await.unwrap();
    store.insert_user(&user("bob", None)).await.unwrap();
    let ids = store.insert_jobs(&[job("ann"), job("bob")]).await.unwrap();
    let before = (row(&url, "ann"), row(&url, "bob"));
    // ann's budget is limited: a hold of 60 (1 processor × 60 s × tariff 1) as it starts,
    // settled against its charge of 20 as it ends. bob's is not: his charge is taken as
    // it is written.
    let claim = win(&q, ids[0]).await;
    run(&store, &q, claim, 60.0, 20.0).await;
    let claim = win(&q, ids[1]).await;
    run(&store, &q, claim, 0.0, 20.0).await;
    assert_eq!(
        (row(&url, "ann"), row(&url, "bob")),
        before,
        "neither user's row was taken FOR UPDATE nor rewritten"
    );
    // What was moved is there, read by the queue and by a dispatcher's store alike.
    assert_eq!(read(&q, "ann").await, (Some(980.0), 20.0));
    assert_eq!(read(&q, "bob").await, (None, 20.0));
    let loaded = store.load_users().await.unwrap();
    let ann = loaded.iter().find(|u| u.name == "ann").unwrap();
    assert_eq!((ann.budget, ann.spent), (Some(980.0), 20.0));
    // A change of the budget folds the ledger into the row: the row says all after.
    assert_eq!(
        q.change_budget("ann", None, Some(10.0)).await.unwrap(),
        Some(Ok((Some(990.0), 20.0)))
    );
    assert_eq!(ledger_rows(&url, "ann"), 0);
    assert_eq!(read(&q, "ann").await, (Some(990.0), 20.0));
    assert_eq!(
        foresight_testkit::postgres::server().psql(
            &url,
            "SELECT (data::jsonb ->> 'budget') || ' ' || (data::jsonb ->> 'spent') \
             FROM users WHERE name = 'ann'"
        ),
        "990.0 20.0"
    );
}

#[tokio::test]
async fn a_users_row_is_written_only_with_what_changed_there() {
    let url = foresight_testkit::postgres::database();
    let (store, _q) = site(&url, "a").await;
    let bob = user("bob", None);
    store.insert_user(&bob).await.unwrap();
    let before = row(&url, "bob");
    // A dispatcher's copy charged (its budget is the database's): nothing to write.
    let mut charged = bob.clone();
    charged.spent = 5.0;
    let change = |base: &UserRecord, user: &UserRecord| UserChange {
        base: Some(base.clone()),
        user: user.clone(),
    };
    store.update_users(&[change(&bob, &charged)]).await.unwrap();
    assert_eq!(row(&url, "bob"), before, "a charge alone writes nothing");
    // A real change is written, the token hash as it was.
    let mut admin = charged.clone();
    admin.admin = true;
    store
        .update_users(&[change(&charged, &admin)])
        .await
        .unwrap();
    let after = row(&url, "bob");
    assert_ne!(after, before);
    assert!(after.ends_with("|hash-bob"), "{after}");
    let loaded = store.load_users().await.unwrap();
    let b = loaded.iter().find(|u| u.name == "bob").unwrap();
    assert!(b.admin);
    assert_eq!(b.spent, 0.0, "the database's spending stands");
    // A new token is written.
    let mut token = admin.clone();
    token.token_hash = "hash-new".into();
    store.update_users(&[change(&admin, &token)]).await.unwrap();
    assert!(row(&url, "bob").ends_with("|hash-new"));
}

#[tokio::test]
async fn a_users_ledger_is_folded_into_their_row_once_it_piles_up() {
    let url = foresight_testkit::postgres::database();
    let (store, q) = site(&url, "a").await;
    store.insert_user(&user("bob", None)).await.unwrap();
    let ids = store.insert_jobs(&[job("bob")]).await.unwrap();
    let claim = win(&q, ids[0]).await;
    let mut r = q.record(claim.job).await.unwrap().unwrap();
    r.cluster = Some("a-c".into());
    r.state = JobState::Running;
    assert!(q.start(claim, &r).await.unwrap());
    // 300 charges of 1 written one by one: 300 rows, more than are ever summed unfolded.
    for k in 1..=300 {
        r.charged = f64::from(k);
        store.update_jobs(std::slice::from_ref(&r)).await.unwrap();
    }
    assert_eq!(ledger_rows(&url, "bob"), 300);
    assert_eq!(read(&q, "bob").await, (None, 300.0));
    assert_eq!(ledger_rows(&url, "bob"), 0, "folded by that reading");
    assert_eq!(read(&q, "bob").await, (None, 300.0));
    r.charged = 301.0;
    store.update_jobs(std::slice::from_ref(&r)).await.unwrap();
    assert_eq!(ledger_rows(&url, "bob"), 1);
    assert_eq!(read(&q, "bob").await, (None, 301.0));
}
