#![allow(clippy::unwrap_used)]
//! [`SlurmCluster`], the `ResourceManager` of a Slurm cluster, against live Slurm clusters,
//! e.g. those of `scripts/local-slurm.sh start 2`:
//!
//! ```sh
//! scripts/local-slurm.sh start 2
//! source /tmp/foresight-slurm/env     # FORESIGHT_SLURM_CONFS=c1=/.../slurm.conf,c2=...
//! FORESIGHT_SLURM_CONFS=$FORESIGHT_SLURM_CONFS cargo test -p foresight-rm --test slurm_cluster_live
//! ```
//!
//! Skipped (with a message) when `FORESIGHT_SLURM_CONFS` is not set. Runs as the test's own
//! user (root for reservations), every cluster at once. Expects 4 nodes × 2 CPUs per cluster
//! and a jobs directory anyone can write at `<conf>/../../jobs`. Other tests may use the same
//! clusters meanwhile: nothing here assumes an empty cluster or touches jobs and reservations
//! it did not create (ids are unique per run: time and pid), and everything it creates is
//! cleaned up.
//!
//! Exercised: snapshot (processors), estimate, a refused reservation, a reservation seen in the
//! snapshot and made again after a "crash", a part bound to it with `--begin` at its start
//! (not started before, started within seconds after, by Slurm's own record) that sees the
//! `FORESIGHT_*` variables, suspend, resume, requeue and cancel of a part, release of a
//! reservation that still has a pending part bound to it, and a reservation moved with its
//! part (put back when the part cannot move, then earlier).

mod common;
use common::{clusters, now};
use foresight_rm::slurm::{reservation_name, CommandRunner, SlurmClient, SystemRunner};
use foresight_rm::SlurmCluster;
use foresight_rm::{
    LaunchSpec, PartHandle, ReserveRequest, ResourceManager, RmJob, RmJobState, Submission,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How late after its reservation's start Slurm may start a bound part and still count as "at
/// the start" (the clusters run `bf_interval=1`, `sched_min_interval=0`).
const START_SLACK_SECS: i64 = 5;

/// Ids no other run (or other test) uses: the time, the pid and the cluster's index.
fn unique_base(index: usize) -> u64 {
    (now() as u64 % 1_000_000_000) * 100_000
        + u64::from(std::process::id() % 1000) * 100
        + index as u64 * 10
}

/// Polls snapshots until the part with Slurm id `external` satisfies `ok`, for at most `secs`.
/// `each` sees every snapshot of it on the way.
async fn wait_part(
    c: &SlurmCluster,
    external: &str,
    what: &str,
    secs: u64,
    mut each: impl FnMut(&RmJob),
    ok: impl Fn(&RmJob) -> bool,
) -> RmJob {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let state = c.snapshot().await.unwrap();
        let found = state.jobs.into_iter().find(|j| j.external == external);
        if let Some(j) = &found {
            each(j);
            if ok(j) {
                return j.clone();
            }
        }
        if Instant::now() > deadline {
            panic!(
                "{}: part {external} never became {what}: {found:?}",
                c.client().conf().display()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn part_spec(cluster: &str, job: u64, jobs_dir: &Path, command: &str) -> LaunchSpec {
    LaunchSpec {
        job,
        attempt: 0,
        cluster: cluster.to_owned(),
        processors: vec![0, 1],
        command: vec!["sh".into(), "-c".into(), command.into()],
        env: vec![("GREETING".into(), "hello, world: $HOME 'quoted'".into())],
        cwd: jobs_dir.to_owned(),
        // Relative: Slurm takes it relative to the working directory.
        stdout: format!("foresight-live-{job}.out").into(),
        stderr: format!("foresight-live-{job}.out").into(),
        walltime_secs: 90,
        grace_secs: 5,
        unix_user: None,
        max_output_bytes: None,
        service_output: false,
    }
}

/// Reservation `id` as the cluster's snapshot shows it.
async fn reservation_of(sc: &SlurmCluster, id: u64) -> foresight_rm::RmReservation {
    let snap = sc.snapshot().await.unwrap();
    snap.reservations
        .into_iter()
        .find(|r| r.foresight == Some(id))
        .unwrap()
}

fn ended(j: &RmJob) -> bool {
    matches!(j.state, RmJobState::Ended(_))
}

async fn exercise(index: usize, name: String, conf: String) {
    let runner: Arc<dyn CommandRunner> = Arc::new(SystemRunner::new(Duration::from_secs(60)));
    let sc = SlurmCluster::new(SlurmClient::new(&conf, runner), None, None).unwrap();
    let jobs_dir: PathBuf = Path::new(&conf)
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("jobs");
    assert!(jobs_dir.is_dir(), "{name}: no {}", jobs_dir.display());
    let base = unique_base(index);
    let (resv_bound, resv_pending, resv_refused) = (base + 1, base + 2, base + 3);
    let (job_bound, job_cancel, job_pending) = (base + 4, base + 5, base + 6);

    // Snapshot: 4 nodes × 2 CPUs, whatever runs on them.
    let snap = sc.snapshot().await.unwrap();
    assert_eq!(snap.processors, 8, "{name}");
    assert!((snap.taken_at - now()).abs() < 5);

    // Estimate: Slurm's own start for a small job.
    let est = sc.estimate_start(1, 60).await.unwrap().unwrap();
    assert!(est >= now() - 5, "{name}: estimate {est}");

    // A reservation Slurm cannot hold: an error naming it and quoting Slurm.
    let too_big = ReserveRequest {
        id: resv_refused,
        start: now() + 600,
        end: now() + 1200,
        procs: 1000,
    };
    let refused = sc.reserve(&too_big).await.unwrap_err().to_string();
    assert!(
        refused.contains(&reservation_name(resv_refused)),
        "{name}: {refused}"
    );
    assert!(
        refused.contains("Error creating the reservation"),
        "{name}: {refused}"
    );
    eprintln!("{name}: refused reservation: {refused}");

    // A reservation in the near future, seen in the snapshot as ours.
    let start = now() + 20;
    let req = ReserveRequest {
        id: resv_bound,
        start,
        end: start + 120,
        procs: 2,
    };
    sc.reserve(&req).await.unwrap();
    let snap = sc.snapshot().await.unwrap();
    let r = snap
        .reservations
        .iter()
        .find(|r| r.foresight == Some(resv_bound))
        .unwrap_or_else(|| panic!("{name}: reservation not in {:?}", snap.reservations));
    assert_eq!(
        (r.name.clone(), r.start, r.end, r.procs),
        (reservation_name(resv_bound), start, start + 120, 2)
    );
    // Made again after a "crash": the same reservation is fine, another is not.
    sc.reserve(&req).await.unwrap();
    let other = ReserveRequest {
        procs: 1,
        ..req.clone()
    };
    let e = sc.reserve(&other).await.unwrap_err().to_string();
    assert!(e.contains("already exists"), "{name}: {e}");

    // A part bound to it, not to begin before its start.
    let out = jobs_dir.join(format!("foresight-live-{job_bound}.out"));
    let _ = std::fs::remove_file(&out);
    let bound = Submission {
        spec: part_spec(
            &name,
            job_bound,
            &jobs_dir,
            r#"echo "$FORESIGHT_JOB_ID|$FORESIGHT_ATTEMPT|$FORESIGHT_CLUSTER|$FORESIGHT_PROCS|${FORESIGHT_PROCESSORS-unset}|$GREETING|$(pwd)|$PATH""#,
        ),
        reservation: Some(resv_bound),
        begin: Some(start),
    };
    let handle = sc.submit(&bound).await.unwrap();
    let external = handle.external.clone().unwrap();
    let pending = wait_part(
        &sc,
        &external,
        "pending",
        10,
        |_| {},
        |j| j.state == RmJobState::Pending,
    )
    .await;
    assert_eq!(pending.foresight, Some((job_bound, 0)));
    assert_eq!(
        pending.reservation.as_deref(),
        Some(reservation_name(resv_bound).as_str())
    );
    assert_eq!((pending.procs, pending.time_limit), (2, Some(120)));
    let done = wait_part(
        &sc,
        &external,
        "ended",
        90,
        |j| {
            if matches!(j.state, RmJobState::Running) {
                assert!(
                    now() >= start,
                    "{name}: running before its reservation's start: {j:?}"
                );
            }
        },
        ended,
    )
    .await;
    let RmJobState::Ended(outcome) = &done.state else {
        unreachable!()
    };
    assert!(outcome.succeeded(), "{name}: {outcome:?}");
    let slurm_start = done.start.unwrap();
    let delay = slurm_start - start;
    eprintln!("{name}: bound part started {delay} s after its reservation's start");
    assert!(
        (0..=START_SLACK_SECS).contains(&delay),
        "{name}: Slurm started the bound part at {slurm_start}, reservation start {start}"
    );
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(
        text,
        format!(
            "{job_bound}|0|{name}|2|unset|hello, world: $HOME 'quoted'|{}|{}\n",
            jobs_dir.display(),
            std::env::var("PATH").unwrap()
        ),
        "{name}"
    );
    std::fs::remove_file(&out).unwrap();
    sc.release(resv_bound).await.unwrap();

    // Suspend, resume, requeue and cancel reach Slurm.
    let running = Submission {
        spec: part_spec(&name, job_cancel, &jobs_dir, "sleep 60"),
        reservation: None,
        begin: None,
    };
    let h = sc.submit(&running).await.unwrap();
    let ext = h.external.clone().unwrap();
    wait_part(
        &sc,
        &ext,
        "running",
        30,
        |_| {},
        |j| j.state == RmJobState::Running,
    )
    .await;
    sc.suspend(&h).await.unwrap();
    wait_part(
        &sc,
        &ext,
        "suspended",
        10,
        |_| {},
        |j| j.state == RmJobState::Suspended,
    )
    .await;
    sc.resume(&h).await.unwrap();
    wait_part(
        &sc,
        &ext,
        "running again",
        10,
        |_| {},
        |j| j.state == RmJobState::Running,
    )
    .await;
    sc.requeue(&h).await.unwrap();
    wait_part(
        &sc,
        &ext,
        "pending after requeue",
        20,
        |_| {},
        |j| j.state == RmJobState::Pending,
    )
    .await;
    sc.cancel(&h).await.unwrap();
    let c = wait_part(&sc, &ext, "cancelled", 30, |_| {}, ended).await;
    assert!(
        matches!(&c.state, RmJobState::Ended(o) if o.cancelled),
        "{name}: {c:?}"
    );
    let _ = std::fs::remove_file(jobs_dir.join(format!("foresight-live-{job_cancel}.out")));
    let gone = PartHandle {
        external: None,
        ..h
    };
    assert!(sc.cancel(&gone).await.is_err());

    // Releasing a reservation that still has a pending part bound to it cancels the part.
    let later = now() + 600;
    let req2 = ReserveRequest {
        id: resv_pending,
        start: later,
        end: later + 300,
        procs: 2,
    };
    sc.reserve(&req2).await.unwrap();
    let waiting = Submission {
        spec: part_spec(&name, job_pending, &jobs_dir, "true"),
        reservation: Some(resv_pending),
        begin: Some(later),
    };
    let hp = sc.submit(&waiting).await.unwrap();
    let extp = hp.external.clone().unwrap();
    wait_part(
        &sc,
        &extp,
        "pending",
        10,
        |_| {},
        |j| j.state == RmJobState::Pending,
    )
    .await;
    sc.release(resv_pending).await.unwrap();
    let snap = sc.snapshot().await.unwrap();
    assert!(
        snap.reservations
            .iter()
            .all(|r| r.foresight != Some(resv_pending)),
        "{name}: {:?}",
        snap.reservations
    );
    let p = wait_part(&sc, &extp, "cancelled", 10, |_| {}, ended).await;
    assert!(
        matches!(&p.state, RmJobState::Ended(o) if o.cancelled),
        "{name}: {p:?}"
    );
    // Releasing again (a retry) is fine.
    sc.release(resv_pending).await.unwrap();

    // Moving a reservation and its pending part: both or neither (a part that cannot move
    // puts the reservation back), then earlier (the part starts then).
    let (resv_moved, job_moved) = (base + 7, base + 8);
    let later = now() + 900;
    let req3 = ReserveRequest {
        id: resv_moved,
        start: later,
        end: later + 300,
        procs: 2,
    };
    sc.reserve(&req3).await.unwrap();
    let hm = sc
        .submit(&Submission {
            spec: part_spec(&name, job_moved, &jobs_dir, "true"),
            reservation: Some(resv_moved),
            begin: Some(later),
        })
        .await
        .unwrap();
    let extm = hm.external.clone().unwrap();
    // A part Slurm does not know: the reservation moves, the part cannot, and the
    // reservation is put back where it was.
    let unknown = PartHandle {
        external: Some("999999999".to_owned()),
        ..hm.clone()
    };
    let elsewhere = ReserveRequest {
        start: later + 1200,
        end: later + 1500,
        ..req3.clone()
    };
    let e = sc
        .move_reservation(&elsewhere, Some(&unknown))
        .await
        .unwrap_err()
        .to_string();
    eprintln!("{name}: refused move: {e}");
    let r = reservation_of(&sc, resv_moved).await;
    assert_eq!(r.start, later, "{name}: half a move stayed: {r:?}");
    let soon = now() + 3;
    let earlier = ReserveRequest {
        start: soon,
        end: soon + 300,
        ..req3.clone()
    };
    sc.move_reservation(&earlier, Some(&hm)).await.unwrap();
    let r = reservation_of(&sc, resv_moved).await;
    assert_eq!(r.start, soon, "{name}: {r:?}");
    let done = wait_part(&sc, &extm, "ended after the move", 30, |_| {}, ended).await;
    let started = done.start.unwrap();
    eprintln!(
        "{name}: moved part started {} s after its new start",
        started - soon
    );
    assert!(
        (soon..=soon + START_SLACK_SECS).contains(&started),
        "{name}: started {started}, moved to {soon} from {later}"
    );
    // It has begun: Slurm refuses any `StartTime=` for it, even its own start. Stretched for
    // a part that came late (asked from now), it keeps its start and only its end moves;
    // a move to begin in the future is refused.
    let stretched = ReserveRequest {
        start: now(),
        end: soon + 600,
        ..req3.clone()
    };
    sc.move_reservation(&stretched, None).await.unwrap();
    let r = reservation_of(&sc, resv_moved).await;
    assert_eq!((r.start, r.end), (soon, soon + 600), "{name}: {r:?}");
    let after = ReserveRequest {
        start: now() + 600,
        end: now() + 900,
        ..req3.clone()
    };
    let e = sc
        .move_reservation(&after, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot move to begin later"), "{name}: {e}");
    sc.release(resv_moved).await.unwrap();
    let _ = std::fs::remove_file(jobs_dir.join(format!("foresight-live-{job_moved}.out")));
    eprintln!("{name}: ok ({conf})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slurm_cluster_on_live_clusters() {
    let Some(list) = clusters() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "FORESIGHT_SLURM_CONFS is not set under CI (scripts/test.sh starts the clusters)"
        );
        eprintln!("skipped: FORESIGHT_SLURM_CONFS is not set (e.g. `scripts/local-slurm.sh start 2` and source its env file)");
        return;
    };
    let tasks: Vec<_> = list
        .into_iter()
        .enumerate()
        .map(|(i, (name, conf))| tokio::spawn(exercise(i, name, conf)))
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}
