//! A job's credentials follow its user's: when an administrator takes a group (account,
//! class, QoS) away from a user, their queued jobs no longer enter the reservations that
//! credential admitted them to. Hand-checked cases on the world, no processes.
#![allow(clippy::unwrap_used)]

use super::tests::{cluster, job, world};
use super::*;
use foresight_api::CredentialsChange;
use foresight_core::ClusterId;
use foresight_rm::Outcome;

/// `cat`, a member of group `physics`.
fn with_physicist(w: &mut World) {
    w.add_user(UserRecord {
        name: "cat".into(),
        token_hash: "hash-cat".into(),
        budget: None,
        credentials: foresight_store::UserCredentials {
            groups: vec!["physics".into()],
            ..Default::default()
        },
        ..Default::default()
    });
}

fn physics_only() -> AclSpec {
    AclSpec {
        groups: vec!["physics".into()],
        ..AclSpec::default()
    }
}

fn no_more_physics() -> CredentialsChange {
    CredentialsChange {
        groups: Some(Vec::new()),
        ..CredentialsChange::default()
    }
}

/// A job bound to a group's reservation, queued while its user was in the group, is held
/// (naming the group) once the user is not, instead of starting in the reservation.
#[test]
fn a_bound_job_is_held_when_its_user_leaves_the_admitting_group() {
    let mut w = world(vec![cluster("a", 4)]);
    with_physicist(&mut w);
    let r = w
        .create_reservation(
            Time(1_000),
            "admin",
            "a",
            Held::Count(2),
            2_000,
            3_000,
            physics_only(),
            None,
        )
        .unwrap();
    let mut bound = job(1, "cat", 2, 60);
    bound.reservation = Some(r.0);
    bound.cred = w.job_credentials("cat", Default::default()).unwrap();
    assert_eq!(bound.cred.group.as_deref(), Some("physics"));
    w.admit(&bound).unwrap();
    w.accept(Time(1_000), vec![bound]);
    w.cycle(Time(1_000));
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Pending);

    w.change_credentials(Time(1_500), "cat", no_more_physics())
        .unwrap();
    w.cycle(Time(2_000));
    let j = &w.jobs[&JobId(1)];
    assert_ne!(j.state, JobState::Running, "{j:?}");
    assert!(j.held, "{j:?}");
    let reason = j.reason.clone().unwrap_or_default();
    assert!(
        reason.contains("group \"physics\"") && reason.contains(&format!("reservation {r}")),
        "{reason}"
    );
    assert_eq!(j.cred.group, None, "the job no longer claims the group");
    // Released while the user is still out of the group, it is refused, naming the group.
    let e = w.release(Time(2_001), JobId(1)).unwrap_err();
    assert!(e.reason().contains("physics"), "{}", e.reason());
    assert!(w.jobs[&JobId(1)].held);
    // Once the group is granted again, it may run in the reservation.
    w.change_credentials(
        Time(2_002),
        "cat",
        CredentialsChange {
            groups: Some(vec!["physics".into()]),
            ..CredentialsChange::default()
        },
    )
    .unwrap();
    w.release(Time(2_003), JobId(1)).unwrap();
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Running);
}

/// A local job not bound to any reservation may use one its credentials admit it to; once
/// its user has lost the credential, it is queued again with the user's current ones and
/// waits for the pool instead.
#[test]
fn a_queued_local_job_no_longer_enters_a_reservation_of_a_group_its_user_left() {
    let mut w = world(vec![cluster("a", 2)]);
    with_physicist(&mut w);
    // Ann's job holds both processors until 2 000; from then on they are the physicists'.
    let mut busy = job(1, "ann", 2, 1_000);
    busy.cluster = Some("a".into());
    w.accept(Time(1_000), vec![busy]);
    w.cycle(Time(1_000));
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Running);
    let r = w
        .create_reservation(
            Time(1_000),
            "admin",
            "a",
            Held::Count(2),
            2_000,
            5_000,
            physics_only(),
            None,
        )
        .unwrap();
    let mut local = job(2, "cat", 2, 100);
    local.cluster = Some("a".into());
    local.cred = w.job_credentials("cat", Default::default()).unwrap();
    w.admit(&local).unwrap();
    w.accept(Time(1_000), vec![local]);
    w.cycle(Time(1_000));
    assert_eq!(w.jobs[&JobId(2)].state, JobState::Pending);

    w.change_credentials(Time(1_500), "cat", no_more_physics())
        .unwrap();
    let done = Outcome {
        exit_code: Some(0),
        signal: None,
        timed_out: false,
        cancelled: false,
        started_at: 1_000,
        ended_at: 2_000,
        error: None,
    };
    w.on_finished(Time(2_000), ClusterId(0), JobId(1), 0, &done);
    w.cycle(Time(2_000));
    let j = &w.jobs[&JobId(2)];
    assert_eq!(
        j.state,
        JobState::Pending,
        "job 2 entered reservation {r} on a group its user left: {j:?}"
    );
    assert_eq!(j.cred.group, None, "the job no longer claims the group");
}

/// Credentials changed in the store while the service was down: at restore, a queued local
/// job takes its user's current credentials before its cluster's scheduler sees it, so it
/// does not enter a reservation of a group its user has left.
#[test]
fn a_restored_queued_job_takes_its_users_current_credentials() {
    let mut w = world(vec![cluster("a", 2)]);
    with_physicist(&mut w);
    let r = w
        .create_reservation(
            Time(1_000),
            "admin",
            "a",
            Held::Count(2),
            1_000,
            5_000,
            physics_only(),
            None,
        )
        .unwrap();
    // Held at submission so that it is still queued when the service stops.
    let mut local = job(1, "cat", 2, 100);
    local.cluster = Some("a".into());
    local.held = true;
    local.cred = w.job_credentials("cat", Default::default()).unwrap();
    assert_eq!(local.cred.group.as_deref(), Some("physics"));
    w.admit(&local).unwrap();
    w.accept(Time(1_000), vec![local]);
    w.cycle(Time(1_000));
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Pending);

    let mut users: Vec<UserRecord> = w.users.values().cloned().collect();
    for u in users.iter_mut().filter(|u| u.name == "cat") {
        u.credentials.groups.clear();
    }
    let mut again = world(vec![cluster("a", 2)]);
    again.restore(
        Time(1_100),
        w.jobs.values().cloned().collect(),
        w.reservations.values().cloned().collect(),
        users,
    );
    let j = &again.jobs[&JobId(1)];
    assert_eq!(j.cred.group, None, "the job still claims the group: {j:?}");
    again.release(Time(1_100), JobId(1)).unwrap();
    again.cycle(Time(1_100));
    let j = &again.jobs[&JobId(1)];
    assert_eq!(
        j.state,
        JobState::Pending,
        "job 1 entered reservation {r} on a group its user left: {j:?}"
    );
}

/// A change made here and not yet written, and another site's change taken in meanwhile:
/// the record keeps both, and what is written next is only this site's change (its base is
/// the shared record). A user disabled elsewhere is disabled here though this site's own
/// change is pending.
#[test]
fn a_change_here_and_one_taken_in_from_another_site_both_stand() {
    let mut w = world(vec![cluster("c", 2)]);
    with_physicist(&mut w);
    let now = Time(1_000);
    w.change_credentials(
        now,
        "cat",
        CredentialsChange {
            qos: Some(vec!["high".into()]),
            ..CredentialsChange::default()
        },
    )
    .unwrap();
    assert!(w.users.changed().contains("cat"));
    // Meanwhile another site rotated cat's token, added a group and disabled cat.
    let mut shared = w.users_base["cat"].clone();
    shared.token_hash = "hash-cat-2".into();
    shared.credentials.groups = vec!["physics".into(), "chemistry".into()];
    shared.disabled = true;
    shared.budget = Some(3.0);
    assert!(w.adopt_user(now, shared.clone()));
    let cat = &w.users["cat"];
    assert_eq!(cat.token_hash, "hash-cat-2");
    assert_eq!(cat.credentials.groups, ["physics", "chemistry"]);
    assert_eq!(cat.credentials.qos, ["high"], "this site's change stays");
    assert!(cat.disabled);
    assert_eq!(cat.budget, Some(3.0));
    assert_eq!(
        w.users_base["cat"], shared,
        "the next write is made from the shared record"
    );
    // Merged onto the shared record, the pending change writes only the QoS.
    let written = foresight_store::merge_user(&w.users_base["cat"], cat, &shared).unwrap();
    assert_eq!(&written, cat);
    // Taking in the same record again changes nothing.
    assert!(!w.adopt_user(now, shared));
}
