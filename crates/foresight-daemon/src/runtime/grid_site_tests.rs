//! The site's side of a grid, in-process on paused time: each command of the centre is
//! carried out once however often it comes, within what the site lends, and reaches only
//! the grid's own jobs.

use super::*;
use crate::runtime::paused::{Paused, T0};
use foresight_rm::LaunchSpec;

const SITE: &str = r#"
[[cluster]]
name = "abisko"
procs = 4

[[user]]
name = "grid"
token_sha256 = "0000000000000000000000000000000000000000000000000000000000000000"

[unix_user]
grid = "root"
"#;

fn agent(p: &Paused, lend: u32) -> GridAgent {
    let cfg = GridConfig {
        centres: vec!["http://127.0.0.1:9".into()],
        site: "umea".into(),
        token_file: "/nonexistent".into(),
        user: "grid".into(),
        lend: [("abisko".to_string(), lend)].into(),
        snapshot_ms: 1000,
        ca_cert: None,
        inbox_dir: None,
    };
    GridAgent {
        service: p.s.clone(),
        client: CentreClient::new(&cfg.centres, "umea", "t", None).unwrap(),
        cfg,
        contact: Mutex::new(crate::runtime::grid_site::Contact::new()),
        fetching: Mutex::default(),
        late: Mutex::default(),
        naming: Mutex::new(Some(("foresight".into(), Naming::default()))),
        mailbox: std::sync::atomic::AtomicU64::new(1),
    }
}

async fn run(a: &GridAgent, op: Op) -> Reply {
    a.carry_out(Command {
        seq: 1,
        cluster: "abisko".into(),
        op,
    })
    .await
}

fn reserve(id: u64, procs: u32, start: i64, end: i64) -> Op {
    Op::Reserve {
        request: ReserveRequest {
            id,
            start,
            end,
            procs,
        },
        over_suspended: false,
    }
}

fn submit(job: u64, reservation: u64) -> Op {
    Op::Submit {
        submission: Submission {
            spec: LaunchSpec {
                job,
                attempt: 0,
                cluster: "umea-abisko".into(),
                processors: vec![0, 1],
                command: vec!["true".into()],
                env: vec![],
                cwd: "/centre/only".into(),
                stdout: "out".into(),
                stderr: "err".into(),
                walltime_secs: 60,
                grace_secs: 1,
                unix_user: None,
                max_output_bytes: None,
                service_output: false,
            },
            reservation: Some(reservation),
            begin: None,
        },
    }
}

fn grid_reservations(p: &Paused) -> Vec<ReservationRecord> {
    p.s.world()
        .reservations
        .values()
        .filter(|r| r.owner.starts_with("grid:foresight:"))
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_repeated_reservation_or_submission_is_carried_out_once() {
    let p = Paused::open(SITE).await;
    let a = agent(&p, 4);
    let (start, end) = (T0 + 600, T0 + 1200);
    assert_eq!(run(&a, reserve(7, 2, start, end)).await, Reply::Done);
    assert_eq!(run(&a, reserve(7, 2, start, end)).await, Reply::Done);
    let held = grid_reservations(&p);
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0].owner, "grid:foresight:7");
    assert_eq!((held[0].procs, held[0].start, held[0].end), (2, start, end));

    let first = run(&a, submit(31, 7)).await;
    let again = run(&a, submit(31, 7)).await;
    let Reply::Submitted { part } = &first else {
        panic!("{first:?}")
    };
    assert_eq!(first, again);
    let jobs: Vec<JobRecord> =
        p.s.world()
            .jobs
            .values()
            .filter(|j| j.name.as_deref() == Some("foresight-31.0"))
            .cloned()
            .collect();
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(part.external, Some(jobs[0].id.to_string()));
    assert_eq!(jobs[0].user, "grid");
    assert_eq!(jobs[0].reservation, Some(held[0].id));
    // A directory of its own at the site (the centre's does not exist here), where its
    // outputs are sent up from.
    let cwd = jobs[0].cwd.clone().unwrap();
    assert!(cwd.ends_with("grid-inbox/abisko/foresight-31.0"), "{cwd}");
    assert!(std::path::Path::new(&cwd).is_dir(), "{cwd}");

    // Released twice: the second finds it released.
    assert_eq!(run(&a, Op::Release { reservation: 7 }).await, Reply::Done);
    assert_eq!(run(&a, Op::Release { reservation: 7 }).await, Reply::Done);
    assert!(!grid_reservations(&p)[0].state.is_live());
}

#[tokio::test]
async fn the_grid_holds_no_more_than_the_site_lends() {
    let p = Paused::open(SITE).await;
    let a = agent(&p, 3);
    assert_eq!(
        run(&a, reserve(1, 2, T0 + 100, T0 + 200)).await,
        Reply::Done
    );
    let refused = run(&a, reserve(2, 2, T0 + 150, T0 + 250)).await;
    let Reply::Refused { message, .. } = &refused else {
        panic!("{refused:?}")
    };
    assert!(message.contains("lends at most 3"), "{message}");
    // Outside the first one's window the same request fits.
    assert_eq!(
        run(&a, reserve(3, 2, T0 + 200, T0 + 300)).await,
        Reply::Done
    );
    assert_eq!(grid_reservations(&p).len(), 2);
}

#[tokio::test]
async fn the_centre_reaches_only_the_grids_jobs_and_lent_clusters() {
    let p = Paused::open(SITE).await;
    let a = agent(&p, 4);
    let local = p
        .submit(serde_json::json!({
            "procs": 1, "walltime": 60, "cluster": "abisko", "command": ["true"],
        }))
        .await;
    let part = PartHandle {
        job: 5,
        attempt: 0,
        external: Some(local.to_string()),
    };
    let refused = run(&a, Op::Cancel { part }).await;
    assert!(
        matches!(&refused, Reply::Refused { message, .. } if message.contains("no job")),
        "{refused:?}"
    );
    assert!(!p.job(local).state.is_final());
    let elsewhere = a
        .carry_out(Command {
            seq: 2,
            cluster: "kebnekaise".into(),
            op: Op::Release { reservation: 1 },
        })
        .await;
    assert!(
        matches!(&elsewhere, Reply::Refused { message, .. } if message.contains("lends no cluster kebnekaise")),
        "{elsewhere:?}"
    );
}

#[tokio::test]
async fn the_snapshot_names_the_centres_parts_and_reservations_as_the_centre_does() {
    let p = Paused::open(SITE).await;
    let a = agent(&p, 4);
    assert_eq!(
        run(&a, reserve(7, 2, T0 + 600, T0 + 1200)).await,
        Reply::Done
    );
    assert!(matches!(
        run(&a, submit(31, 7)).await,
        Reply::Submitted { .. }
    ));
    let local = p
        .submit(serde_json::json!({
            "procs": 1, "walltime": 60, "cluster": "abisko", "command": ["true"],
        }))
        .await;
    let naming = Naming::default();
    let snaps = a.snapshots("foresight", &naming);
    assert_eq!(snaps.len(), 1);
    let st = &snaps[0].state;
    assert_eq!(st.processors, 4);
    let part = st
        .jobs
        .iter()
        .find(|j| j.foresight == Some((31, 0)))
        .unwrap();
    assert_eq!(part.reservation.as_deref(), Some("foresight-7"));
    assert_eq!(part.user, "grid");
    let theirs = st
        .jobs
        .iter()
        .find(|j| j.external == local.to_string())
        .unwrap();
    assert_eq!(
        theirs.foresight, None,
        "a local user's job is not the centre's"
    );
    let r = st
        .reservations
        .iter()
        .find(|r| r.foresight == Some(7))
        .unwrap();
    assert_eq!((r.name.as_str(), r.procs), ("foresight-7", 2));
}

#[tokio::test]
async fn a_site_whose_grid_user_is_disabled_takes_no_grid_work() {
    let p = Paused::open(SITE).await;
    let a = agent(&p, 4);
    p.s.world().users.get_mut("grid").unwrap().disabled = true;
    let refused = run(&a, reserve(1, 1, T0 + 100, T0 + 200)).await;
    assert!(
        matches!(&refused, Reply::Refused { message, .. } if message.contains("is disabled")),
        "{refused:?}"
    );
    assert!(grid_reservations(&p).is_empty());
}

/// What was wrong: a part submitted after its reservation had begun (the centre's
/// reservation and submission took longer than the time to its start: a standby taking
/// over, a slow link) no longer fitted the window the centre reserved for exactly its
/// walltime, and waited there for ever.
#[tokio::test]
async fn a_part_submitted_after_its_reservation_began_starts_at_once() {
    let p = Paused::open(SITE).await;
    let a = agent(&p, 4);
    let (start, end) = (T0 + 10, T0 + 130);
    assert_eq!(run(&a, reserve(7, 1, start, end)).await, Reply::Done);
    p.advance_to(start + 2).await;
    let held = grid_reservations(&p);
    assert_eq!(
        held[0].state,
        foresight_store::ReservationState::Active,
        "{held:?}"
    );
    let mut op = submit(31, 7);
    if let Op::Submit { submission } = &mut op {
        submission.spec.processors = vec![0];
        submission.spec.walltime_secs = (end - start) as u64;
        submission.begin = Some(start);
    }
    let first = run(&a, op.clone()).await;
    let Reply::Submitted { part } = first.clone() else {
        panic!("not submitted: {first:?}")
    };
    // Stretched to run from now, in place (never released and made again: on a Slurm
    // cluster that would free its nodes in between); a repeated submission finds the part
    // it became.
    let held = grid_reservations(&p);
    assert_eq!(held.len(), 1, "{held:?}");
    assert!(held[0].state.is_live(), "{held:?}");
    assert_eq!(
        (held[0].start, held[0].end),
        (p.now(), p.now() + (end - start) + RENEWED_SLACK_SECS)
    );
    assert_eq!(run(&a, op).await, first);
    p.cycle().await;
    let id: u64 = part.external.unwrap().parse().unwrap();
    let j = p.job(id);
    assert_eq!(j.state, foresight_api::JobState::Running, "{j:?}");
}

/// What was wrong: a part submitted in time, whose site's cycle came a second after its
/// reservation began (a loaded host; or the centre moved the reservation to begin in the
/// very second the processors freed up), no longer fitted the window reserved for exactly
/// its walltime and waited there until the reservation ended. Seen as a standby centre's
/// job reserved for ever in `centre_failover`.
#[tokio::test]
async fn a_part_that_missed_its_reservations_first_second_is_stretched_and_starts() {
    let p = Paused::open(SITE).await;
    let a = agent(&p, 4);
    let (start, end) = (T0 + 10, T0 + 70);
    assert_eq!(run(&a, reserve(7, 2, start, end)).await, Reply::Done);
    let mut op = submit(31, 7);
    if let Op::Submit { submission } = &mut op {
        submission.spec.walltime_secs = (end - start) as u64;
        submission.begin = Some(start);
    }
    let reply = run(&a, op).await;
    let Reply::Submitted { part } = reply else {
        panic!("not submitted: {reply:?}")
    };
    let id: u64 = part.external.unwrap().parse().unwrap();
    // The cycle of the reservation's first second did not run: one a second later cannot
    // start the part in what is left of the window.
    p.clock.set(foresight_core::time::Time(start + 1));
    p.cycle().await;
    assert_eq!(p.job(id).state, foresight_api::JobState::Pending);
    let late = late_parts(&p.s.world(), p.s.now(), "grid", &owner_of("foresight"));
    assert_eq!(late.len(), 1, "{late:?}");
    assert_eq!((late[0].centre, late[0].walltime), (7, end - start));
    // Not the centre's other instance's, nor before the window begins.
    assert!(late_parts(&p.s.world(), p.s.now(), "grid", &owner_of("other")).is_empty());
    let before = foresight_core::time::Time(start);
    assert!(late_parts(&p.s.world(), before, "grid", &owner_of("foresight")).is_empty());
    a.stretch_late_parts("foresight").await;
    let held = grid_reservations(&p);
    assert_eq!(
        (held[0].start, held[0].end),
        (start + 1, start + 1 + (end - start) + RENEWED_SLACK_SECS),
        "{held:?}"
    );
    p.cycle().await;
    assert_eq!(p.job(id).state, foresight_api::JobState::Running);
    // Running, it is late no more.
    assert!(late_parts(&p.s.world(), p.s.now(), "grid", &owner_of("foresight")).is_empty());
}

/// A part late for a reservation that cannot stretch (a local job takes the processors
/// from its end on): the reservation is released, and the submission refused naming why, so
/// that the centre plans the part again.
#[tokio::test]
async fn a_late_part_whose_reservation_cannot_stretch_is_refused_and_the_reservation_released() {
    let p = Paused::open(SITE).await;
    let a = agent(&p, 4);
    let (start, end) = (T0 + 10, T0 + 70);
    assert_eq!(run(&a, reserve(7, 4, start, end)).await, Reply::Done);
    // A local job reserved all four processors from the grid's end.
    p.s.mutate(move |w, now| {
        let acl = AclSpec {
            users: vec!["admin".into()],
            ..AclSpec::default()
        };
        w.create_reservation(
            now,
            "admin",
            "abisko",
            Held::Count(4),
            end,
            end + 600,
            acl,
            None,
        )
    })
    .await
    .unwrap();
    p.advance_to(start + 2).await;
    let mut op = submit(31, 7);
    if let Op::Submit { submission } = &mut op {
        submission.spec.walltime_secs = (end - start) as u64;
        submission.begin = Some(start);
    }
    let refused = run(&a, op).await;
    assert!(refusal(&refused).contains("cannot move"), "{refused:?}");
    let held = grid_reservations(&p);
    assert!(held.iter().all(|r| !r.state.is_live()), "{held:?}");
}

fn moved(id: u64, procs: u32, start: i64, end: i64) -> Op {
    Op::Move {
        to: ReserveRequest {
            id,
            start,
            end,
            procs,
        },
        part: None,
    }
}

#[track_caller]
fn refusal(reply: &Reply) -> &str {
    match reply {
        Reply::Refused { message, .. } => message,
        other => panic!("not refused: {other:?}"),
    }
}

/// What was wrong: a site refused every move, so a part reserved behind a job that ended
/// early waited for its reserved start. Now the reservation moves earlier with the part
/// bound to it (and back, as the centre undoes a co-allocated move), once however often
/// asked, within what the site lends and only into free time; a refused move, or one of a
/// part that has started, changes nothing.
#[tokio::test]
async fn a_reservation_moves_earlier_with_its_part_within_what_the_site_lends() {
    let p = Paused::open(SITE).await;
    let a = agent(&p, 3);
    // A local job holds three processors until T0 + 100.
    let local = p
        .submit(serde_json::json!({
            "procs": 3, "walltime": 100, "cluster": "abisko", "command": ["sleep", "1000"],
        }))
        .await;
    p.cycle().await;
    assert_eq!(p.job(local).state, foresight_api::JobState::Running);
    let (start, end) = (T0 + 600, T0 + 660);
    assert_eq!(run(&a, reserve(7, 2, start, end)).await, Reply::Done);
    let mut op = submit(31, 7);
    if let Op::Submit { submission } = &mut op {
        submission.begin = Some(start);
    }
    let Reply::Submitted { part } = run(&a, op).await else {
        panic!("not submitted")
    };
    let id: u64 = part.external.unwrap().parse().unwrap();
    let window = |r: u64| {
        let held = grid_reservations(&p);
        let r = held
            .iter()
            .find(|x| x.owner == format!("grid:foresight:{r}"))
            .unwrap();
        (r.start, r.end)
    };
    // Three of the four processors are the local job's until T0 + 100: no room before.
    let busy = run(&a, moved(7, 2, T0 + 20, T0 + 80)).await;
    assert!(refusal(&busy).contains("cannot move"), "{busy:?}");
    assert_eq!(window(7), (start, end));
    assert_eq!(p.job(id).begin, Some(start));
    // Room from T0 + 100, but reservation 8 holds two of the three processors lent.
    assert_eq!(
        run(&a, reserve(8, 2, T0 + 100, T0 + 300)).await,
        Reply::Done
    );
    let lent = run(&a, moved(7, 2, T0 + 100, T0 + 160)).await;
    assert!(refusal(&lent).contains("lends at most 3"), "{lent:?}");
    assert_eq!(window(7), (start, end));
    assert_eq!(p.job(id).begin, Some(start));
    assert_eq!(run(&a, Op::Release { reservation: 8 }).await, Reply::Done);
    assert_eq!(run(&a, moved(7, 2, T0 + 100, T0 + 160)).await, Reply::Done);
    assert_eq!(window(7), (T0 + 100, T0 + 160));
    assert_eq!(p.job(id).begin, Some(T0 + 100));
    // Asked again: it stays. Moved back (another cluster of the job refused): it goes
    // back; and forth again.
    assert_eq!(run(&a, moved(7, 2, T0 + 100, T0 + 160)).await, Reply::Done);
    assert_eq!(window(7), (T0 + 100, T0 + 160));
    assert_eq!(run(&a, moved(7, 2, start, end)).await, Reply::Done);
    assert_eq!(window(7), (start, end));
    assert_eq!(run(&a, moved(7, 2, T0 + 100, T0 + 160)).await, Reply::Done);
    // The local job ends early. Asked for a start already past, it moves to now, and
    // the same command carried out again later leaves it there.
    p.s.mutate(move |w, now| w.cancel(now, foresight_core::JobId(local)))
        .await
        .unwrap();
    p.advance_to(T0 + 30).await;
    assert_eq!(run(&a, moved(7, 2, T0 + 25, T0 + 85)).await, Reply::Done);
    assert_eq!(window(7), (T0 + 30, T0 + 90));
    assert_eq!(p.job(id).begin, Some(T0 + 30));
    p.advance_to(T0 + 31).await;
    assert_eq!(run(&a, moved(7, 2, T0 + 25, T0 + 85)).await, Reply::Done);
    assert_eq!(window(7), (T0 + 30, T0 + 90));
    p.cycle().await;
    assert_eq!(p.job(id).state, foresight_api::JobState::Running);
    // Its part started: it moves no more.
    let running = run(&a, moved(7, 2, T0 + 100, T0 + 160)).await;
    assert!(refusal(&running).contains("has started"), "{running:?}");
    assert_eq!(window(7), (T0 + 30, T0 + 90));
    assert_eq!(
        refusal(&run(&a, moved(9, 1, T0 + 40, T0 + 50)).await),
        "no reservation 9 of the grid here"
    );
}

/// The site gave up a transfer only after 24 hours, whatever the centre waited: it went on
/// sending (or fetching) what no one waited for any more. It now gives up when the centre
/// does (`within_ms`, the centre's `copy_timeout_seconds`).
#[tokio::test]
async fn a_transfer_is_given_up_when_the_centre_stops_waiting_for_it() {
    let p = Paused::open(SITE).await;
    let mut a = agent(&p, 4);
    // A centre that takes connections and never answers.
    let mute = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", mute.local_addr().unwrap());
    a.client = CentreClient::new(&[url], "umea", "t", None).unwrap();
    let name = Naming::default().part(31, 0);
    let dir = a.workspace("abisko", &name, "root").unwrap();
    std::fs::write(dir.join("out.dat"), vec![7u8; 1 << 20]).unwrap();
    let part = PartHandle {
        job: 31,
        attempt: 0,
        external: None,
    };
    let send = Op::Send {
        part: part.clone(),
        files: vec![foresight_rm::grid::Wanted {
            path: "out.dat".into(),
            from: 0,
        }],
        within_ms: Some(0),
    };
    let sent = run(&a, send).await;
    assert!(refusal(&sent).contains("not done"), "{sent:?}");
    let fetch = Op::Fetch {
        part,
        files: vec![foresight_rm::grid::FileOffer {
            name: "in.dat".into(),
            bytes: 1 << 20,
            sha256: "00".repeat(32),
        }],
        within_ms: Some(0),
    };
    let fetched = run(&a, fetch).await;
    assert!(refusal(&fetched).contains("not done"), "{fetched:?}");
    // A centre's wait longer than a day is bounded by a day.
    assert!(transfer_deadline(Some(u64::MAX)) <= tokio::time::Instant::now() + MOST_TRANSFER);
}
