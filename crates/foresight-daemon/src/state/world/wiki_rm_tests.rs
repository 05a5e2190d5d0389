//! Remote clusters as this instance names them, and WIKI resource managers Foresight
//! schedules: hand-checked cases, no processes.
#![allow(clippy::unwrap_used)]

use super::tests::{job, world};
use super::*;
use crate::config::wiki_rm::WikiRmConfig;
use crate::config::{ClusterConfig, Config};
use foresight_core::ClusterId;
use foresight_rm::ClusterState;
use foresight_rm::PartHandle;
use foresight_rm::ReserveRequest;
use foresight_rm::{BookedPart, RmJob, RmJobState, RmReservation};

fn slurm(name: &str) -> ClusterConfig {
    ClusterConfig {
        kind: "slurm".into(),
        slurm_conf: Some(format!("/etc/{name}/slurm.conf").into()),
        ..ClusterConfig::local(name, 0)
    }
}

fn wiki(name: &str, submit_url: Option<&str>) -> ClusterConfig {
    ClusterConfig {
        kind: "wiki".into(),
        wiki_rm: Some(WikiRmConfig {
            address: "127.0.0.1:15004".into(),
            key_file: "/k".into(),
            auth: None,
            poll_ms: 1_000,
            timeout_ms: 5_000,
            submit_url: submit_url.map(str::to_owned),
            submit_cluster: None,
            token_file: submit_url.map(|_| "/t".into()),
        }),
        ..ClusterConfig::local(name, 0)
    }
}

fn state(at: i64, procs: u32) -> ClusterState {
    ClusterState {
        taken_at: at,
        processors: procs,
        jobs: vec![],
        reservations: vec![],
    }
}

fn take_effects(w: &mut World) -> Vec<Effect> {
    std::mem::take(&mut w.effects)
}

fn reserve_asked(effects: &[Effect]) -> Vec<(ClusterId, ReserveRequest)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Reserve { cluster, request } => Some((*cluster, request.clone())),
            _ => None,
        })
        .collect()
}

/// Instance `east` shares a Slurm cluster with instance `foresight` (the default name). The
/// adapter leaves `foresight-9` unrecognised (not ours); the mirror holds it as a foreign
/// reservation, and holds our own `east-<id>` under a part that runs past its end.
#[test]
fn another_instances_reservations_hold_processors_and_ours_are_read_by_our_prefix() {
    let cfg = Config {
        instance: "east".into(),
        cluster: vec![slurm("c1")],
        data_dir: "/nonexistent".into(),
        ..Config::default()
    };
    let mut w = World::new(&cfg);
    w.add_user(UserRecord {
        name: "ann".into(),
        ..Default::default()
    });
    w.sync_remote(Time(1_000), ClusterId(0), Ok(state(1_000, 8)));
    w.accept(Time(1_000), vec![job(1, "ann", 4, 60)]);
    w.cycle(Time(1_000));
    let (_, req) = reserve_asked(&take_effects(&mut w)).pop().unwrap();
    let rid = req.id;
    w.reservation_answered(Time(1_000), ReservationId(rid), Ok(()));
    w.part_submitted(
        Time(1_000),
        ClusterId(0),
        JobId(1),
        0,
        Ok(PartHandle {
            job: 1,
            attempt: 0,
            external: Some("8".into()),
        }),
    );
    take_effects(&mut w);
    // Our part started 10 s late: it runs until 1 070, past its reservation's end (1 060).
    let ours = RmJob {
        external: "8".into(),
        foresight: Some((1, 0)),
        user: "root".into(),
        state: RmJobState::Running,
        procs: 4,
        time_limit: Some(60),
        submitted_at: 1_000,
        start: Some(1_010),
        priority: 0,
        reservation: Some(format!("east-{rid}")),
    };
    let mut s = state(1_010, 8);
    s.jobs.push(ours);
    s.reservations = vec![
        RmReservation {
            name: format!("east-{rid}"),
            foresight: Some(rid),
            start: 1_000,
            end: 1_060,
            procs: 4,
        },
        // The other instance's: 4 processors until 1 065.
        RmReservation {
            name: "foresight-9".into(),
            foresight: None,
            start: 1_000,
            end: 1_065,
            procs: 4,
        },
    ];
    w.sync_remote(Time(1_010), ClusterId(0), Ok(s));
    let effects = take_effects(&mut w);
    // The other instance's reservation is not ours: never released.
    assert!(
        !effects.iter().any(|e| matches!(e, Effect::Release { .. })),
        "{effects:?}"
    );
    // A job of all 8 processors waits for both: the foreign reservation (1 065) and our part
    // (1 070, one second more for Slurm's closed end).
    w.accept(Time(1_010), vec![job(2, "ann", 8, 60)]);
    w.cycle(Time(1_010));
    let j = &w.jobs[&JobId(2)];
    assert_eq!(j.planned_start, Some(1_071), "{:?}", j.reason);
}

/// Without `submit_url` a WIKI cluster can take none of Foresight's jobs: it is up (its own
/// jobs are scheduled) but offered to no global job, which goes to the other cluster.
#[test]
fn a_wiki_cluster_without_a_submission_route_is_offered_no_global_job() {
    let mut w = world(vec![wiki("w", None), ClusterConfig::local("a", 2)]);
    w.sync_remote(Time(1_000), ClusterId(0), Ok(state(1_000, 8)));
    assert!(w.cluster_up(ClusterId(0)));
    assert!(w.clusters[0]
        .unavailable_reason
        .as_deref()
        .unwrap()
        .contains("wiki_rm.submit_url"));
    // 2 processors: w (8 free) is the cheaper, were it offered.
    w.accept(Time(1_000), vec![job(1, "ann", 2, 60)]);
    w.cycle(Time(1_000));
    assert!(reserve_asked(&take_effects(&mut w)).is_empty());
    let j = &w.jobs[&JobId(1)];
    assert_eq!(j.parts.len(), 1, "{j:?}");
    assert_eq!(j.parts[0].cluster, "a", "{j:?}");
    // A job submitted to it is refused, naming the setting.
    let mut pinned = job(2, "ann", 1, 60);
    pinned.cluster = Some("w".into());
    let e = w.admit(&pinned).unwrap_err();
    assert!(e.reason().contains("wiki_rm.submit_url"), "{e:?}");
    // A global job only w's processors could hold is refused at submission: it would
    // otherwise wait for ever.
    let e = w.admit(&job(3, "ann", 3, 60)).unwrap_err();
    assert!(e.reason().contains("largest possible is 2"), "{e:?}");
    // A failed read is still a down cluster.
    w.sync_remote(Time(1_001), ClusterId(0), Err("no answer".into()));
    assert!(!w.cluster_up(ClusterId(0)));
    // With a route it is offered.
    let mut w = world(vec![wiki("w", Some("http://127.0.0.1:1"))]);
    w.sync_remote(Time(1_000), ClusterId(0), Ok(state(1_000, 8)));
    w.accept(Time(1_000), vec![job(1, "ann", 2, 60)]);
    w.cycle(Time(1_000));
    assert_eq!(reserve_asked(&take_effects(&mut w)).len(), 1);
}

/// After a restart the adapter of a WIKI cluster is given back its book from the records:
/// the live reservations held there and, for each part not ended, its reservation and the
/// second it may start (the later of the reservation's start and the job's begin).
#[test]
fn the_book_of_a_wiki_cluster_is_rebuilt_from_the_records() {
    let mut w = world(vec![wiki("w", Some("http://127.0.0.1:1"))]);
    w.sync_remote(Time(1_000), ClusterId(0), Ok(state(1_000, 8)));
    let mut late = job(1, "ann", 4, 60);
    late.begin = Some(1_010);
    w.accept(Time(1_000), vec![late, job(2, "ann", 4, 60)]);
    w.cycle(Time(1_000));
    let asked = reserve_asked(&take_effects(&mut w));
    assert_eq!(asked.len(), 2, "{asked:?}");
    for (_, r) in &asked {
        w.reservation_answered(Time(1_000), ReservationId(r.id), Ok(()));
    }
    take_effects(&mut w);
    let (mut held, mut parts) = w.wiki_book(ClusterId(0));
    held.sort_by_key(|r| r.id);
    let mut wanted: Vec<ReserveRequest> = asked.into_iter().map(|(_, r)| r).collect();
    wanted.sort_by_key(|r| r.id);
    assert_eq!(held, wanted);
    parts.sort_by_key(|p| p.job);
    let of = |id: u64| {
        let rid = w.jobs[&JobId(id)].parts[0].reservation.unwrap();
        wanted.iter().find(|r| r.id == rid).unwrap()
    };
    let (r1, r2) = (of(1), of(2));
    assert!(r1.start >= 1_010, "{r1:?}");
    assert_eq!(
        parts,
        [
            BookedPart {
                job: 1,
                attempt: 0,
                reservation: Some(r1.id),
                begin: Some(r1.start),
            },
            BookedPart {
                job: 2,
                attempt: 0,
                reservation: Some(r2.id),
                begin: Some(r2.start),
            },
        ]
    );
}
