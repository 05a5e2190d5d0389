#![allow(clippy::unwrap_used)]
//! The Slurm adapter's real runner and parsers against live Slurm clusters, e.g. those of
//! `scripts/local-slurm.sh start 2`:
//!
//! ```sh
//! scripts/local-slurm.sh start 2
//! source /tmp/foresight-slurm/env     # FORESIGHT_SLURM_CONFS=c1=/.../slurm.conf,c2=...
//! FORESIGHT_SLURM_CONFS=$FORESIGHT_SLURM_CONFS cargo test -p foresight-rm --test slurm_live
//! ```
//!
//! Skipped (with a message) when `FORESIGHT_SLURM_CONFS` is not set. Needs root (it submits
//! as a second user through `runuser`; `FORESIGHT_SLURM_OTHER_USER`, default `fsowner`) and
//! at least 3 free CPUs per cluster. Every cluster is exercised at once, each through its own
//! `SLURM_CONF`: snapshot, sbatch (as root and as the other user), squeue sees them, suspend
//! and resume, hold and release, an estimate, a reservation created, a job bound to it,
//! deleted, and scancel.

mod common;
use common::{clusters, now};
use foresight_rm::slurm::*;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Polls the cluster's jobs until `job` satisfies `ok`, for at most 20 s.
async fn wait_job(c: &SlurmClient, job: SlurmJobId, what: &str, ok: impl Fn(&Job) -> bool) -> Job {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let jobs = c.jobs().await.unwrap().items;
        let found = jobs.iter().find(|j| j.id == job).cloned();
        match found {
            Some(j) if ok(&j) => return j,
            other if Instant::now() > deadline => {
                panic!(
                    "{}: job {job} never became {what}: {other:?}",
                    c.conf().display()
                )
            }
            _ => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

fn wrap(name: &str, procs: u32, cmd: &str) -> SbatchRequest {
    let mut r = SbatchRequest::new(name, procs, 2, JobScript::Wrap(cmd.to_owned()));
    // Any user can write there, and the output goes nowhere.
    r.workdir = Some("/tmp".into());
    r.output = Some("/dev/null".into());
    r
}

async fn exercise(name: String, conf: String, other_user: String) {
    let runner: Arc<dyn CommandRunner> = Arc::new(SystemRunner::new(Duration::from_secs(60)));
    let root = SlurmClient::new(&conf, runner.clone());
    let owner = SlurmClient::new(&conf, runner).acting_as(other_user.clone());

    assert!(root.ping().await.unwrap(), "{name}: controller down");
    let snap = root.snapshot().await.unwrap();
    assert!(snap.slurm_release.is_some());
    assert!(!snap.nodes.is_empty(), "{name}: no nodes");
    assert!(
        snap.nodes.iter().any(Node::accepts_jobs),
        "{name}: {:?}",
        snap.nodes
    );
    assert!(
        snap.partitions.iter().any(|p| p.default),
        "{name}: no default partition"
    );
    let idle: u32 = snap
        .nodes
        .iter()
        .filter(|n| n.accepts_jobs())
        .map(|n| n.idle_cpus)
        .sum();
    let busy: Vec<_> = snap
        .jobs
        .iter()
        .filter(|j| j.state.is_active())
        .map(|j| (j.id, &j.user, j.cpus))
        .collect();
    assert!(
        idle >= 3,
        "{name}: needs 3 idle CPUs, has {idle}; active jobs (id, user, CPUs): {busy:?}"
    );

    // A site's own user submits straight to Slurm; Foresight sees it with its user.
    let local = owner
        .submit(&wrap("local-job", 1, "sleep 60"))
        .await
        .unwrap();
    let lj = wait_job(&root, local.job_id, "running", |j| {
        j.state == JobState::Running
    })
    .await;
    assert_eq!((lj.user.as_str(), lj.cpus), (other_user.as_str(), 1));
    assert_eq!(lj.time_limit, TimeLimit::Minutes(2));
    assert_eq!(lj.end_time.unwrap() - lj.start_time.unwrap(), 120);

    // A job of ours: submit, squeue sees it run, suspend/resume reach Slurm.
    let mine = root
        .submit(&wrap("foresight-live", 1, "sleep 60"))
        .await
        .unwrap();
    let j = wait_job(&root, mine.job_id, "running", |j| {
        j.state == JobState::Running
    })
    .await;
    assert_eq!(
        (j.user.as_str(), j.name.as_str()),
        ("root", "foresight-live")
    );
    root.control(JobControl::Suspend, mine.job_id)
        .await
        .unwrap();
    wait_job(&root, mine.job_id, "suspended", |j| {
        j.state == JobState::Suspended
    })
    .await;
    root.control(JobControl::Resume, mine.job_id).await.unwrap();
    wait_job(&root, mine.job_id, "running again", |j| {
        j.state == JobState::Running
    })
    .await;
    let e = root
        .control(JobControl::Resume, SlurmJobId(4_000_000))
        .await
        .unwrap_err();
    assert!(e.kind().is_some(), "{e}");

    // Hold and release.
    let mut held = wrap("foresight-held", 1, "sleep 30");
    held.hold = true;
    let h = root.submit(&held).await.unwrap();
    let hj = wait_job(&root, h.job_id, "held", |j| j.state == JobState::Pending).await;
    assert_eq!(hj.reason.as_deref(), Some("JobHeldUser"));
    root.control(JobControl::Release, h.job_id).await.unwrap();
    wait_job(&root, h.job_id, "released", |j| {
        j.reason.as_deref() != Some("JobHeldUser")
    })
    .await;

    // An estimate.
    let est = root
        .test_only(&wrap("foresight-probe", 1, "true"))
        .await
        .unwrap();
    assert_eq!(est.processors, 1);
    assert!(est.start >= now() - 5, "{est:?}");

    // A reservation for Foresight's user, a job bound to it, and its deletion.
    let id = u64::try_from(now()).unwrap() * 1000 + u64::from(std::process::id() % 1000);
    let start = now() + 300;
    let req = ReservationRequest::foresight(id, StartTime::At(start), 5, 2, "root");
    let created = root.create_reservation(&req).await.unwrap();
    assert_eq!(created, reservation_name(id));
    let dup = root.create_reservation(&req).await.unwrap_err();
    assert_eq!(dup.kind(), Some(FailureKind::DuplicateReservation), "{dup}");
    let r = root
        .reservations()
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.name == created)
        .unwrap();
    assert_eq!((r.start, r.end, r.core_count), (start, start + 300, 2));
    assert_eq!(r.users, ["root"]);
    assert!(!r.is_active());
    assert_eq!(foresight_reservation_id(&r.name), Some(id));

    let mut bound = wrap("foresight-bound", 2, "sleep 10");
    bound.reservation = Some(created.clone());
    bound.begin = Some(start);
    let b = root.submit(&bound).await.unwrap();
    let bj = wait_job(&root, b.job_id, "planned at the reservation's start", |j| {
        j.state == JobState::Pending && j.start_time == Some(start)
    })
    .await;
    assert_eq!(bj.reservation.as_deref(), Some(created.as_str()));
    let in_use = root.delete_reservation(&created).await.unwrap_err();
    assert_eq!(
        in_use.kind(),
        Some(FailureKind::ReservationInUse),
        "{in_use}"
    );

    // scancel reaches Slurm; then the reservation can go.
    root.cancel(&[b.job_id, mine.job_id, h.job_id, local.job_id])
        .await
        .unwrap();
    for id in [b.job_id, mine.job_id, h.job_id, local.job_id] {
        wait_job(&root, id, "cancelled", |j| j.state == JobState::Cancelled).await;
    }
    root.delete_reservation(&created).await.unwrap();
    assert!(root
        .reservations()
        .await
        .unwrap()
        .iter()
        .all(|r| r.name != created));
    let gone = root.delete_reservation(&created).await.unwrap_err();
    assert_eq!(gone.kind(), Some(FailureKind::InvalidReservation), "{gone}");
    eprintln!("{name}: ok ({conf})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn live_clusters() {
    let Some(list) = clusters() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "FORESIGHT_SLURM_CONFS is not set under CI (scripts/test.sh starts the clusters)"
        );
        eprintln!("skipped: FORESIGHT_SLURM_CONFS is not set (e.g. `scripts/local-slurm.sh start 2` and source its env file)");
        return;
    };
    let other =
        std::env::var("FORESIGHT_SLURM_OTHER_USER").unwrap_or_else(|_| "fsowner".to_owned());
    let tasks: Vec<_> = list
        .into_iter()
        .map(|(name, conf)| tokio::spawn(exercise(name, conf, other.clone())))
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}
