//! Every store test runs on both backends: an SQLite file in a temporary directory, and a
//! fresh database on this test binary's throwaway PostgreSQL server.
#![allow(clippy::unwrap_used)]

use foresight_store::{
    JobRecord, PartRecord, ReservationRecord, RunRecord, Store, StoreError, StoreLocation,
    UserRecord,
};
use foresight_store::{JobState, ReservationState};
use std::sync::Arc;

/// One backend's database, reopened as often as a test likes.
enum Backend {
    Sqlite(tempfile::TempDir),
    Postgres(String),
}

impl Backend {
    fn sqlite() -> Backend {
        Backend::Sqlite(tempfile::tempdir().unwrap())
    }

    fn postgres() -> Backend {
        Backend::Postgres(foresight_testkit::postgres::database())
    }

    fn location(&self) -> StoreLocation {
        match self {
            Backend::Sqlite(dir) => StoreLocation::Sqlite(dir.path().join("f.db")),
            Backend::Postgres(url) => StoreLocation::Postgres(url.clone()),
        }
    }

    async fn open(&self) -> Arc<dyn Store> {
        foresight_store::open(&self.location()).await.unwrap()
    }

    /// Runs raw SQL on the database behind the store's back (to damage a row).
    async fn execute(&self, sql: &str) {
        use sqlx::Connection;
        match self {
            Backend::Sqlite(dir) => {
                let path = dir.path().join("f.db");
                let mut c =
                    sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
                        .await
                        .unwrap();
                sqlx::query(sql).execute(&mut c).await.unwrap();
                c.close().await.unwrap();
            }
            Backend::Postgres(url) => {
                let mut c = sqlx::PgConnection::connect(url).await.unwrap();
                sqlx::query(sql).execute(&mut c).await.unwrap();
                c.close().await.unwrap();
            }
        }
    }
}

/// `on_both_backends!(name, ...)`: each `async fn name(Backend)` becomes the tests
/// `name::sqlite` and `name::postgres`.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn sqlite() {
                super::$name(super::Backend::sqlite()).await
            }
            #[tokio::test]
            async fn postgres() {
                super::$name(super::Backend::postgres()).await
            }
        }
    )*};
}

on_both_backends!(
    records_survive_reopening_and_updates_replace_them,
    concurrent_inserts_get_distinct_ids_and_lose_nothing,
    every_final_state_is_left_out_of_unfinished_jobs,
    floats_and_text_come_back_exactly,
    users_are_unique_by_name_and_token_and_ordered_bytewise,
    a_damaged_record_is_an_error_naming_its_table_and_row,
    empty_writes_are_no_ops,
    dependencies_and_array_membership_survive_reopening,
    a_workflow_and_its_jobs_survive_reopening_and_updates_replace_it,
    a_workflow_is_stored_with_all_its_jobs_or_not_at_all,
    runs_come_back_as_the_last_per_user_and_per_application,
    a_user_change_writes_only_what_its_writer_changed,
    rows_written_in_the_format_databases_hold_load,
    a_nonce_is_new_once_per_signer_until_forgotten_and_after_reopening_too,
);

/// Rows as existing databases hold them (the `state` columns and the records' text, written
/// behind the store's back) load into the records the service knows, and are written back in
/// the same form.
async fn rows_written_in_the_format_databases_hold_load(b: Backend) {
    b.open().await.close().await;
    b.execute(
        r#"INSERT INTO jobs (user_name, state, submitted_at, data) VALUES ('ann', 'running', 1000,
        '{"user":"ann","name":null,"procs":2,"walltime":60,"price":null,"cluster":null,
        "reservation":null,"allow_early_start":false,"co_allocate":false,"command":["true"],
        "env":{},"cwd":null,"cred":[null,null,null,null],"state":"running",
        "state_after":"cancelled","held":false,"suspended":false,"priority":0,
        "requeue":false,"exit_code":null,"signal":null,"reason":null,"submitted_at":1000,
        "first_planned_start":null,"planned_start":null,"started_at":null,"ended_at":null,
        "charged":0.0,"settled":0.0,"parts":[],"attempt":0,"stdout":null,"stderr":null,
        "links":{"dependency":{"text":"afternotok:1","any":false,"singleton":false,
        "on":[{"kind":"afternotok","target":"1","jobs":[1]}]},"waiting":true}}')"#,
    )
    .await;
    b.execute(
        r#"INSERT INTO reservations (id, state, data) VALUES (4, 'tentative',
        '{"kind":"admin","cluster":"c1","procs":4,"start":10,"end":20,
        "acl":{"users":["ann"],"groups":[],"accounts":[],"classes":[],"qos":[],"job":null},
        "state":"tentative","expires_at":30,"owner":"root"}')"#,
    )
    .await;
    b.execute(
        r#"INSERT INTO users (name, token_hash, data) VALUES ('ann', 'h',
        '{"admin":false,"budget":null,"spent":0.0,
        "credentials":{"groups":["g"],"accounts":[],"classes":[],"qos":["high"]}}')"#,
    )
    .await;
    b.execute(
        r#"INSERT INTO workflows (user_name, data) VALUES ('ann',
        '{"user":"ann","name":"pair","mapper":"greedy","on_failure":{"retry":3},
        "submitted_at":1000,"tasks":[],"edges":[]}')"#,
    )
    .await;

    let store = b.open().await;
    let jobs = store.load_jobs(true).await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].state, JobState::Running);
    assert_eq!(jobs[0].state_after, Some(JobState::Cancelled));
    let on = &jobs[0]
        .links
        .as_ref()
        .unwrap()
        .dependency
        .as_ref()
        .unwrap()
        .on;
    assert_eq!(on[0].kind, foresight_store::DependencyKind::AfterNotOk);
    let rs = store.load_reservations().await.unwrap();
    assert_eq!(rs[0].state, ReservationState::Tentative);
    assert_eq!(rs[0].acl.users, vec!["ann".to_string()]);
    let users = store.load_users().await.unwrap();
    assert_eq!(users[0].credentials.groups, vec!["g".to_string()]);
    assert_eq!(users[0].credentials.qos, vec!["high".to_string()]);
    let wfs = store.load_workflows().await.unwrap();
    assert_eq!(wfs[0].mapper, foresight_store::MapperName::Greedy);
    assert_eq!(wfs[0].on_failure, foresight_store::FailurePolicy::Retry(3));

    // Written back, a final job leaves the unfinished ones by its `state` column.
    let mut done = jobs[0].clone();
    done.state = JobState::Cancelled;
    store.update_jobs(&[done.clone()]).await.unwrap();
    let mut r = rs[0].clone();
    r.state = ReservationState::Committed;
    store.put_reservations(&[r.clone()]).await.unwrap();
    store.close().await;
    let store = b.open().await;
    assert!(store.load_jobs(true).await.unwrap().is_empty());
    assert_eq!(store.load_jobs(false).await.unwrap(), vec![done]);
    assert_eq!(store.load_reservations().await.unwrap(), vec![r]);
    store.close().await;
}

/// Two writers change one user from the same copy: the second, which has not read the
/// first's change, keeps it (a different field) and overrides only the field both changed.
/// A change without a base writes the whole record.
async fn a_user_change_writes_only_what_its_writer_changed(b: Backend) {
    let store = b.open().await;
    let mut base = user("ann", "h0");
    base.budget = Some(10.0);
    store.insert_user(&base).await.unwrap();
    let change = |from: &UserRecord, to: &UserRecord| foresight_store::UserChange {
        base: Some(from.clone()),
        user: to.clone(),
    };
    let mut first = base.clone();
    first.token_hash = "h1".into();
    first.credentials.groups = vec!["g".into()];
    first.unix_user = Some("first".into());
    store.update_users(&[change(&base, &first)]).await.unwrap();
    let mut second = base.clone();
    second.disabled = true;
    second.credentials.accounts = vec!["acc".into()];
    second.unix_user = Some("second".into());
    second.budget = Some(7.0);
    store.update_users(&[change(&base, &second)]).await.unwrap();
    let got = store.load_users().await.unwrap().remove(0);
    let mut want = base.clone();
    want.token_hash = "h1".into();
    want.credentials.groups = vec!["g".into()];
    want.credentials.accounts = vec!["acc".into()];
    want.disabled = true;
    want.unix_user = Some("second".into());
    // A single service's budget is its own: its change is written.
    want.budget = Some(7.0);
    assert_eq!(got, want);
    // Cleared by the writer (an unset field): cleared in the store.
    let mut cleared = got.clone();
    cleared.unix_user = None;
    store.update_users(&[change(&got, &cleared)]).await.unwrap();
    assert_eq!(store.load_users().await.unwrap()[0].unix_user, None);
    // Whole: the stale first copy undoes everything else.
    store.update_users(&[first.clone().into()]).await.unwrap();
    assert_eq!(store.load_users().await.unwrap()[0], first);
    store.close().await;
}

fn run(job: u64, user: &str, app: &str, cluster: Option<&str>, runtime: i64) -> RunRecord {
    RunRecord {
        job,
        user: user.into(),
        app: app.into(),
        params: "1 procs: []".into(),
        cluster: cluster.map(String::from),
        runtime,
        ended_at: 1_000 + runtime,
        // A global job's run (no cluster) counts on the reference processor.
        on_reference: cluster.is_none(),
    }
}

async fn runs_come_back_as_the_last_per_user_and_per_application(b: Backend) {
    let store = b.open().await;
    assert!(store.load_runs(2).await.unwrap().is_empty());
    store.insert_runs(&[]).await.unwrap();
    let all = vec![
        run(1, "a", "x", Some("c1"), 10),
        run(2, "a", "x", Some("c1"), 20),
        run(3, "b", "x", Some("c1"), 30),
        run(4, "a", "y", None, 40),
        run(5, "a", "x", Some("c1"), 50),
        run(6, "b", "z", Some("c2"), 60),
    ];
    store.insert_runs(&all[..3]).await.unwrap();
    store.insert_runs(&all[3..]).await.unwrap();
    // A job record carries its application and its prediction.
    let mut j = job("a");
    j.app = Some("x".into());
    j.prediction = Some(foresight_store::Prediction {
        seconds: 15,
        predictor: "tsafrir".into(),
        runs: 2,
        corrections: 1,
    });
    let id = store.insert_jobs(std::slice::from_ref(&j)).await.unwrap()[0];
    store.close().await;

    let store = b.open().await;
    // Everything, oldest first, when every key keeps more than it has.
    assert_eq!(store.load_runs(8).await.unwrap(), all);
    // A user's runs are kept per processor type: a's last two on c1 are runs 2 and 5, on
    // the reference processor run 4; b's are 3 (c1) and 6 (c2); x on c1's last two are 3
    // and 5; only run 1 is behind all of them. (Before, a's last two were 4 and 5 over
    // every cluster, and run 2, her second last on c1, was not read back.)
    let runtimes: Vec<i64> = store
        .load_runs(2)
        .await
        .unwrap()
        .iter()
        .map(|r| r.runtime)
        .collect();
    assert_eq!(runtimes, vec![20, 30, 40, 50, 60]);
    let back = store.load_jobs(false).await.unwrap();
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].id, id);
    assert_eq!(back[0].app, j.app);
    assert_eq!(back[0].prediction, j.prediction);
    store.close().await;
}

fn workflow(user: &str) -> foresight_store::WorkflowRecord {
    use foresight_store::{WorkflowEdgeRecord, WorkflowTaskRecord};
    let task = |name: &str, start: i64| WorkflowTaskRecord {
        name: name.into(),
        job: 0,
        cluster: "a".into(),
        planned_start: start,
        planned_end: start + 60,
        retries: 0,
        reservation: Some(9),
    };
    foresight_store::WorkflowRecord {
        id: 0,
        user: user.into(),
        name: "pair".into(),
        mapper: foresight_store::MapperName::Heft,
        on_failure: foresight_store::FailurePolicy::Retry(2),
        submitted_at: 1_000,
        tasks: vec![task("mesh", 1_000), task("solve \u{e9}", 1_060)],
        edges: vec![WorkflowEdgeRecord {
            from: 0,
            to: 1,
            data_mb: 12.5,
            files: vec!["mesh.dat".into()],
        }],
    }
}

/// A workflow comes back with its tasks' job ids filled in, and an update replaces it.
async fn a_workflow_and_its_jobs_survive_reopening_and_updates_replace_it(b: Backend) {
    let store = b.open().await;
    store.insert_jobs(&[job("bob")]).await.unwrap();
    let wf = workflow("ann");
    let (id, ids) = store
        .insert_workflow(&wf, &[job("ann"), job("ann")])
        .await
        .unwrap();
    assert_eq!(ids, vec![2, 3]);
    let (id2, _) = store
        .insert_workflow(&workflow("bob"), &[job("bob"), job("bob")])
        .await
        .unwrap();
    assert!(id2 > id);
    store.close().await;
    let store = b.open().await;
    let all = store.load_workflows().await.unwrap();
    assert_eq!(all.len(), 2);
    let mut expected = wf.clone();
    expected.id = id;
    expected.tasks[0].job = 2;
    expected.tasks[1].job = 3;
    assert_eq!(all[0], expected);
    assert_eq!(store.load_jobs(false).await.unwrap().len(), 5);
    expected.tasks[0].retries = 1;
    store.update_workflows(&[expected.clone()]).await.unwrap();
    store.update_workflows(&[]).await.unwrap();
    store.close().await;
    let store = b.open().await;
    assert_eq!(store.load_workflows().await.unwrap()[0], expected);
}

/// When the workflow cannot be written, none of its jobs is stored either.
async fn a_workflow_is_stored_with_all_its_jobs_or_not_at_all(b: Backend) {
    let store = b.open().await;
    store.insert_jobs(&[job("ann")]).await.unwrap();
    store.close().await;
    b.execute("DROP TABLE workflows").await;
    let store = b.open().await;
    let e = store
        .insert_workflow(&workflow("ann"), &[job("ann"), job("ann")])
        .await
        .unwrap_err();
    assert!(e.to_string().contains("workflows"), "{e}");
    assert_eq!(store.load_jobs(false).await.unwrap().len(), 1);
}

/// Dependencies, array membership and the waiting flag are fields of the stored record.
async fn dependencies_and_array_membership_survive_reopening(b: Backend) {
    use foresight_store::{ArrayTask, ConditionRecord, DependencyRecord, Links};
    let store = b.open().await;
    let mut j = job("ann");
    j.links = Some(Links {
        dependency: Some(DependencyRecord {
            text: "afterok:7_1,singleton".into(),
            any: false,
            singleton: true,
            on: vec![ConditionRecord {
                kind: foresight_store::DependencyKind::AfterOk,
                target: "7_1".into(),
                jobs: vec![8],
            }],
        }),
        array: Some(ArrayTask {
            job: 0,
            task: 5,
            position: 2,
            limit: Some(3),
        }),
        waiting: true,
    });
    let ids = store.insert_jobs(&[job("ann"), j.clone()]).await.unwrap();
    j.id = ids[1];
    store.close().await;
    let store = b.open().await;
    let all = store.load_jobs(true).await.unwrap();
    assert_eq!(all[1], j);
    // A job without links is stored without the field, as before it existed.
    assert_eq!(all[0].links, None);
}

fn job(user: &str) -> JobRecord {
    JobRecord {
        user: user.into(),
        name: Some("j".into()),
        procs: 2,
        walltime: 60,
        co_allocate: true,
        command: vec!["true".into()],
        submitted_at: 1_000,
        ..Default::default()
    }
}

fn reservation(id: u64) -> ReservationRecord {
    ReservationRecord {
        id,
        kind: "admin".into(),
        cluster: "local".into(),
        procs: 1,
        processors: vec![],
        start: 10,
        end: 20,
        acl: Default::default(),
        state: ReservationState::Tentative,
        expires_at: Some(15),
        owner: "admin".into(),
    }
}

fn user(name: &str, hash: &str) -> UserRecord {
    UserRecord {
        name: name.into(),
        token_hash: hash.into(),
        budget: Some(5.0),
        ..Default::default()
    }
}

/// A signed request's nonce is taken once per signer for at least the window its timestamp
/// stays valid, after the store is closed and opened again too (a restarted centre, a
/// standby); it is forgotten within a minute after that.
async fn a_nonce_is_new_once_per_signer_until_forgotten_and_after_reopening_too(b: Backend) {
    const T: i64 = 1_800_000_000;
    const WINDOW: i64 = 600;
    async fn first(store: &Arc<dyn Store>, signer: &str, at: i64) -> bool {
        store
            .first_use_of_nonce(signer, "n1", T + at, WINDOW)
            .await
            .unwrap()
    }
    let store = b.open().await;
    assert!(first(&store, "site a", 0).await);
    assert!(!first(&store, "site a", 1).await);
    // Another signer's nonce is its own.
    assert!(first(&store, "site b", 1).await);
    store.close().await;

    let store = b.open().await;
    assert!(!first(&store, "site a", 2).await);
    assert!(!first(&store, "site a", WINDOW).await);
    assert!(!first(&store, "site b", WINDOW + 1).await);
    // A minute past the window both are forgotten (their timestamps are refused long before).
    assert!(first(&store, "site a", WINDOW + 61).await);
    assert!(first(&store, "site b", WINDOW + 61).await);
    store.close().await;
}

async fn records_survive_reopening_and_updates_replace_them(b: Backend) {
    let store = b.open().await;
    let ids = store
        .insert_jobs(&[job("ann"), job("bob"), job("ann")])
        .await
        .unwrap();
    assert_eq!(ids, vec![1, 2, 3]);
    let mut j = job("bob");
    j.id = 2;
    j.state = JobState::Completed;
    j.exit_code = Some(0);
    store.update_jobs(std::slice::from_ref(&j)).await.unwrap();
    let r = reservation(7);
    store
        .put_reservations(std::slice::from_ref(&r))
        .await
        .unwrap();
    // Writing it again replaces it.
    let mut r2 = r.clone();
    r2.state = ReservationState::Active;
    r2.expires_at = None;
    store.put_reservations(&[r2.clone()]).await.unwrap();
    let u = UserRecord {
        unix_user: Some("ann_unix".into()),
        ..user("ann", "h1")
    };
    store.insert_user(&u).await.unwrap();
    assert!(matches!(
        store.insert_user(&u).await,
        Err(StoreError::UserExists(_))
    ));
    store.close().await;

    let store = b.open().await;
    let all = store.load_jobs(false).await.unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(all[1], j);
    let open = store.load_jobs(true).await.unwrap();
    assert_eq!(open.iter().map(|j| j.id).collect::<Vec<_>>(), vec![1, 3]);
    assert_eq!(store.load_reservations().await.unwrap(), vec![r2]);
    assert_eq!(store.load_users().await.unwrap(), vec![u.clone()]);
    // A rotated token, credentials and a disabled flag are written and read back.
    let mut u = u;
    u.token_hash = "h2".into();
    u.credentials.groups = vec!["physics".into()];
    u.disabled = true;
    store.update_users(&[u.clone().into()]).await.unwrap();
    assert_eq!(store.load_users().await.unwrap(), vec![u]);
    // A fourth job continues the numbering: ids are never reused.
    assert_eq!(store.insert_jobs(&[job("cy")]).await.unwrap(), vec![4]);
    store.close().await;
}

async fn concurrent_inserts_get_distinct_ids_and_lose_nothing(b: Backend) {
    let store = b.open().await;
    let tasks: Vec<_> = (0..8)
        .map(|t| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut mine = Vec::new();
                for k in 0..5 {
                    let batch: Vec<JobRecord> = (0..3)
                        .map(|i| {
                            let mut j = job(&format!("u{t}"));
                            j.name = Some(format!("{t}.{k}.{i}"));
                            j
                        })
                        .collect();
                    let ids = store.insert_jobs(&batch).await.unwrap();
                    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
                    mine.extend(ids.into_iter().zip(batch));
                }
                mine
            })
        })
        .collect();
    let mut inserted = Vec::new();
    for t in tasks {
        inserted.extend(t.await.unwrap());
    }
    inserted.sort_by_key(|(id, _)| *id);
    let ids: Vec<u64> = inserted.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, (1..=120).collect::<Vec<_>>());
    let loaded = store.load_jobs(false).await.unwrap();
    assert_eq!(loaded.len(), 120);
    for (l, (id, j)) in loaded.iter().zip(&inserted) {
        assert_eq!(l.id, *id);
        assert_eq!((&l.user, &l.name), (&j.user, &j.name));
    }
    store.close().await;
}

async fn every_final_state_is_left_out_of_unfinished_jobs(b: Backend) {
    let store = b.open().await;
    let states = [
        JobState::Pending,
        JobState::Planned,
        JobState::Reserved,
        JobState::Running,
        JobState::Completed,
        JobState::Failed,
        JobState::Cancelled,
        JobState::Timeout,
    ];
    let jobs: Vec<JobRecord> = states
        .iter()
        .map(|s| JobRecord {
            state: *s,
            ..job("ann")
        })
        .collect();
    let ids = store.insert_jobs(&jobs).await.unwrap();
    let open: Vec<u64> = store
        .load_jobs(true)
        .await
        .unwrap()
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(open, ids[..4]);
    // A job that ends leaves the unfinished ones.
    let mut ended = store.load_jobs(false).await.unwrap()[3].clone();
    ended.state = JobState::Completed;
    store.update_jobs(&[ended]).await.unwrap();
    let open: Vec<u64> = store
        .load_jobs(true)
        .await
        .unwrap()
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(open, vec![ids[0], ids[1], ids[2]]);
    store.close().await;
}

async fn floats_and_text_come_back_exactly(b: Backend) {
    let store = b.open().await;
    let values = [
        0.1 + 0.2,
        1e-7,
        5e-324,
        f64::MAX,
        f64::MIN_POSITIVE,
        -1.0 / 3.0,
    ];
    let jobs: Vec<JobRecord> = values
        .iter()
        .map(|v| {
            let mut j = job("ann");
            j.charged = *v;
            j.price = Some(*v);
            j.name = Some("naïve 'quoted' \"job\" ; -- \\ \u{1F600}".into());
            j.env.insert("K".into(), "a\nb\tc".into());
            j.parts = vec![PartRecord {
                cluster: "c".into(),
                procs: u32::MAX,
                processors: vec![0, 7],
                reservation: Some(u64::from(u32::MAX) + 1),
                ended: true,
                external: Some("123".into()),
                started_at: Some(i64::MIN),
                ended_at: Some(i64::MAX),
                speed: Some(0.1 + 0.2),
            }];
            j
        })
        .collect();
    store.insert_jobs(&jobs).await.unwrap();
    let mut u = user("ann", "h");
    u.budget = Some(0.1 + 0.2);
    u.spent = 1e300;
    store.insert_user(&u).await.unwrap();
    store.close().await;
    let store = b.open().await;
    let loaded = store.load_jobs(false).await.unwrap();
    for (l, j) in loaded.iter().zip(&jobs) {
        assert_eq!(l.charged.to_bits(), j.charged.to_bits());
        assert_eq!(&JobRecord { id: 0, ..l.clone() }, j);
    }
    assert_eq!(store.load_users().await.unwrap(), vec![u]);
    store.close().await;
}

async fn users_are_unique_by_name_and_token_and_ordered_bytewise(b: Backend) {
    let store = b.open().await;
    for (name, hash) in [("bob", "h1"), ("Zed", "h2"), ("ann", "h3"), ("_x", "h4")] {
        store.insert_user(&user(name, hash)).await.unwrap();
    }
    // Another user with a taken token is refused like a taken name.
    assert!(matches!(
        store.insert_user(&user("cy", "h1")).await,
        Err(StoreError::UserExists(n)) if n == "cy"
    ));
    let names: Vec<String> = store
        .load_users()
        .await
        .unwrap()
        .into_iter()
        .map(|u| u.name)
        .collect();
    // Byte order, as SQLite compares: upper case before `_` before lower case.
    assert_eq!(names, ["Zed", "_x", "ann", "bob"]);
    store.close().await;
}

async fn a_damaged_record_is_an_error_naming_its_table_and_row(b: Backend) {
    let store = b.open().await;
    store.insert_jobs(&[job("ann"), job("bob")]).await.unwrap();
    store.close().await;
    b.execute("UPDATE jobs SET data = '{\"user\": 5}' WHERE id = 2")
        .await;
    let store = b.open().await;
    let e = store.load_jobs(false).await.unwrap_err();
    assert!(
        matches!(&e, StoreError::Decode { table: "jobs", id, .. } if id == "2"),
        "{e}"
    );
    assert!(e.to_string().starts_with("jobs row 2: "), "{e}");
    store.close().await;
}

async fn empty_writes_are_no_ops(b: Backend) {
    let store = b.open().await;
    assert_eq!(store.insert_jobs(&[]).await.unwrap(), Vec::<u64>::new());
    store.update_jobs(&[]).await.unwrap();
    store.put_reservations(&[]).await.unwrap();
    store.update_users(&[]).await.unwrap();
    assert!(store.load_jobs(false).await.unwrap().is_empty());
    assert!(store.load_reservations().await.unwrap().is_empty());
    assert!(store.load_users().await.unwrap().is_empty());
    store.close().await;
}

#[test]
fn both_backends_have_the_same_migrations() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let names = |b: &str| {
        let mut v: Vec<String> = std::fs::read_dir(dir.join(b))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let sqlite = names("sqlite");
    assert!(!sqlite.is_empty());
    assert_eq!(sqlite, names("postgres"));
}

#[tokio::test]
async fn an_unreachable_server_is_an_error_naming_the_url_without_password() {
    // Port 1 on loopback: nothing listens there.
    let url = "postgres://ann:s3cret@127.0.0.1:1/grid";
    let e = foresight_store::open(&StoreLocation::parse(url).unwrap())
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.starts_with("cannot connect to the database at postgres://ann:***@127.0.0.1:1/grid: "),
        "{e}"
    );
    assert!(!e.contains("s3cret"), "{e}");
}

#[tokio::test]
async fn a_missing_database_is_an_error_naming_it() {
    let server = foresight_testkit::postgres::server();
    let url = server.url("no_such_db");
    let e = foresight_store::open(&StoreLocation::Postgres(url.clone()))
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains(&url), "{e}");
    assert!(e.contains("no_such_db\" does not exist"), "{e}");
}

#[tokio::test]
async fn a_postgres_database_serves_one_store_at_a_time() {
    let url = foresight_testkit::postgres::database();
    let location = StoreLocation::Postgres(url.clone());
    let first = foresight_store::open_by(&location, &holder("/srv/first"))
        .await
        .unwrap();
    let e = foresight_store::open(&location).await.err().unwrap();
    let named = format!(
        "foresight (pid {} on {}, data /srv/first) from 127.0.0.1, connected since 2",
        std::process::id(),
        holder("").host
    );
    assert!(
        matches!(&e, StoreError::InUse { location, holder }
            if *location == url && holder.starts_with(&named)),
        "{e}"
    );
    // Closing hands the database over.
    first.close().await;
    let second = foresight_store::open(&location).await.unwrap();
    assert!(second.load_jobs(false).await.unwrap().is_empty());
    second.close().await;
}

/// This process as the service of data directory `dir`.
fn holder(dir: &str) -> foresight_store::Holder {
    foresight_store::Holder::this_process(Some(std::path::Path::new(dir)))
}

#[tokio::test]
async fn an_sqlite_file_serves_one_store_at_a_time_by_any_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.db");
    let first = foresight_store::open_by(&StoreLocation::Sqlite(path.clone()), &holder("/srv/a"))
        .await
        .unwrap();
    let id = first.insert_jobs(&[job("ann")]).await.unwrap()[0];
    // The file itself is locked: a link to it is the same file.
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    for p in [&path, &link] {
        let e = foresight_store::open(&StoreLocation::Sqlite(p.clone()))
            .await
            .err()
            .unwrap();
        let StoreError::InUse { location, holder } = &e else {
            panic!("{e}");
        };
        assert_eq!(*location, p.display().to_string());
        let named = format!(
            "the server with PID {} on {} (data directory /srv/a), since 2",
            std::process::id(),
            self::holder("").host
        );
        assert!(holder.starts_with(&named), "{e}");
    }
    // The refusals changed nothing; closing hands the file over.
    first.insert_jobs(&[job("bob")]).await.unwrap();
    first.close().await;
    let second = foresight_store::open(&StoreLocation::Sqlite(link))
        .await
        .unwrap();
    let jobs = second.load_jobs(false).await.unwrap();
    assert_eq!(jobs.len(), 2);
    assert_eq!(jobs[0].id, id);
    second.close().await;
}

/// The pid of the session holding the lock of the store this process opened on `url`.
async fn lock_session(url: &str) -> i32 {
    use sqlx::Connection;
    let mut c = sqlx::PgConnection::connect(url).await.unwrap();
    let pid = sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() \
         AND application_name LIKE $1",
    )
    .bind(format!("foresight (pid {} %", std::process::id()))
    .fetch_one(&mut c)
    .await
    .unwrap();
    c.close().await.unwrap();
    pid
}

#[tokio::test]
async fn a_postgres_store_whose_lock_session_ends_takes_the_lock_again() {
    let url = foresight_testkit::postgres::database();
    let location = StoreLocation::Postgres(url.clone());
    let store = foresight_store::open(&location).await.unwrap();
    let ended = lock_session(&url).await;
    let server = foresight_testkit::postgres::server();
    server.psql(&url, &format!("SELECT pg_terminate_backend({ended}, 5000)"));
    // Writes wait for the lock (refused meanwhile, never written without it), then go on.
    let t0 = std::time::Instant::now();
    let id = loop {
        match store.insert_jobs(&[job("ann")]).await {
            Ok(ids) => break ids[0],
            Err(StoreError::LockLost { .. }) if t0.elapsed().as_secs() < 10 => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert_ne!(lock_session(&url).await, ended);
    assert!(matches!(
        foresight_store::open(&location).await.err().unwrap(),
        StoreError::InUse { .. }
    ));
    assert_eq!(store.load_jobs(false).await.unwrap()[0].id, id);
    store.close().await;
}

#[tokio::test]
async fn a_postgres_store_taken_while_its_lock_session_was_gone_writes_nothing_and_says_who() {
    use sqlx::Connection;
    let url = foresight_testkit::postgres::database();
    let store = foresight_store::open(&StoreLocation::Postgres(url.clone()))
        .await
        .unwrap();
    let ended = lock_session(&url).await;
    // Another holder takes the lock the moment the session ends, before the store can.
    let mut other = sqlx::PgConnection::connect(&format!("{url}?application_name=intruder"))
        .await
        .unwrap();
    sqlx::raw_sql(&format!(
        "SELECT pg_terminate_backend({ended}, 5000); \
         SELECT pg_advisory_lock({})",
        0x466f_7265_7369_6768_i64
    ))
    .execute(&mut other)
    .await
    .unwrap();
    let e = tokio::time::timeout(std::time::Duration::from_secs(10), store.taken_over())
        .await
        .expect("the store learns it was taken over");
    assert!(
        matches!(&e, StoreError::InUse { location, holder }
            if *location == url && holder.starts_with("intruder from 127.0.0.1")),
        "{e}"
    );
    let refused = store.insert_jobs(&[job("ann")]).await.err().unwrap();
    assert!(matches!(refused, StoreError::InUse { .. }), "{refused}");
    other.close().await.unwrap();
    let rows = foresight_testkit::postgres::server().psql(&url, "SELECT count(*) FROM jobs");
    assert_eq!(rows, "0");
    store.close().await;
}
