//! Workflows in the world on hand-checked cases: tasks in order, retries, slots held all or
//! none (here and on Slurm), edge files copied between clusters, restarts.
#![allow(clippy::unwrap_used)]

use super::tests::{cluster, exit, launches, world};
use super::workflow::*;
use super::*;
use crate::state::staging::FetchFailure;
use foresight_api::{parse_workflow, WorkflowState};
use foresight_core::time::Time;
use foresight_core::{ClusterId, JobId, ReservationId};
use foresight_store::JobState;
use foresight_store::MapperName;
use foresight_store::{JobRecord, Links, WorkflowRecord};
use std::collections::BTreeSet;

const DIAMOND: &str = "\
name: d
on_failure: {retry: 1}
tasks:
  - {name: A, command: [a], walltime: 1}
  - {name: B, command: [b], walltime: 1}
  - {name: C, command: [c], processors: 2, walltime: 1}
  - {name: D, command: [d], walltime: 1}
edges:
  - {from: A, to: B}
  - {from: A, to: C}
  - {from: B, to: D}
  - {from: C, to: D}
";

/// Plans and accepts a workflow as the service does, numbering its jobs from `first`.
fn submit(w: &mut World, yaml: &str, first: u64) -> u64 {
    let ann = w.users["ann"].clone();
    let spec = parse_workflow(yaml, false).unwrap();
    let (mut wf, mut jobs) = w
        .plan_workflow(Time(1_000), &ann, &spec, MapperName::Heft)
        .unwrap();
    wf.id = 7;
    for (i, (j, t)) in jobs.iter_mut().zip(wf.tasks.iter_mut()).enumerate() {
        j.id = first + i as u64;
        t.job = j.id;
    }
    w.accept_workflow(Time(1_000), wf, jobs);
    7
}

fn launched(w: &mut World) -> Vec<u64> {
    launches(w).iter().map(|l| l.1).collect()
}

#[test]
fn tasks_run_in_order_retry_once_then_cancel_their_dependants() {
    let mut w = world(vec![cluster("a", 4)]);
    let id = submit(&mut w, DIAMOND, 1);
    assert_eq!(
        w.jobs[&JobId(4)]
            .links
            .as_ref()
            .unwrap()
            .dependency
            .as_ref()
            .unwrap()
            .text,
        "afterok:2:3"
    );
    assert_eq!(w.jobs[&JobId(1)].cluster.as_deref(), Some("a"));
    assert_eq!(launched(&mut w), vec![1]);
    assert_eq!(w.workflow_view(id).unwrap().state, WorkflowState::Running);
    w.on_finished(Time(1_010), ClusterId(0), JobId(1), 0, &exit(0));
    assert_eq!(launched(&mut w), vec![2, 3]);
    // B fails: one retry, a new attempt of the same job; D still waits.
    w.on_finished(Time(1_020), ClusterId(0), JobId(2), 0, &exit(3));
    assert_eq!(w.jobs[&JobId(2)].attempt, 1);
    // Started again at once on the free cluster (the retry's reason shows while it waits).
    assert_eq!(w.jobs[&JobId(2)].state, JobState::Running);
    assert_eq!(w.workflows[&id].tasks[1].retries, 1);
    assert!(w.workflows.changed().contains(&id));
    assert_eq!(launched(&mut w), vec![2]);
    assert_eq!(w.jobs[&JobId(4)].state, JobState::Pending);
    // It fails again: no retry left, D is cancelled naming B.
    w.on_finished(Time(1_030), ClusterId(0), JobId(2), 1, &exit(4));
    assert_eq!(w.jobs[&JobId(2)].state, JobState::Failed);
    assert_eq!(w.jobs[&JobId(4)].state, JobState::Cancelled);
    let reason = w.jobs[&JobId(4)].reason.clone().unwrap();
    assert!(
        reason.contains("afterok:task B (job 2 is failed)"),
        "{reason}"
    );
    assert_eq!(w.workflow_view(id).unwrap().state, WorkflowState::Running);
    w.on_finished(Time(1_040), ClusterId(0), JobId(3), 0, &exit(0));
    let v = w.workflow_view(id).unwrap();
    assert_eq!(v.state, WorkflowState::Failed);
    assert_eq!(v.tasks[3].after, vec!["B".to_string(), "C".to_string()]);
    assert_eq!(
        w.cancel_workflow(Time(1_050), id).unwrap_err(),
        Refusal::conflict("workflow 7 is already failed")
    );
}

#[test]
fn a_restart_links_tasks_stored_before_their_links() {
    let mut w = world(vec![cluster("a", 4)]);
    let id = submit(&mut w, DIAMOND, 1);
    let wf = w.workflows[&id].clone();
    // As stored by the transaction, before the flush that writes the links.
    let mut jobs: BTreeMap<u64, JobRecord> = w
        .jobs
        .values()
        .cloned()
        .map(|mut j| {
            j.links = Some(Links {
                waiting: true,
                ..Links::default()
            });
            j.state = JobState::Pending;
            j.parts.clear();
            (j.id, j)
        })
        .collect();
    link_tasks(&mut jobs, &wf);
    let mut again = world(vec![cluster("a", 4)]);
    again.restore(Time(1_100), jobs.into_values().collect(), vec![], vec![]);
    again.add_workflow(wf);
    assert_eq!(launched(&mut again), vec![1]);
    assert!(again.jobs[&JobId(4)].links.as_ref().unwrap().waiting);
}

/// Phase one holds every slot or none: a slot another reservation took between the
/// mapping and the hold fails the whole workflow, naming the task, and releases the
/// slots already held; phase two commits them all.
#[test]
fn a_workflow_holds_every_slot_or_none() {
    use foresight_store::{AclSpec, ReservationState};
    let mut w = world(vec![cluster("a", 4)]);
    let ann = w.users["ann"].clone();
    let spec = parse_workflow(DIAMOND, false).unwrap();
    let (wf, jobs) = w
        .plan_workflow(Time(1_000), &ann, &spec, MapperName::Greedy)
        .unwrap();
    // Someone reserves C's slot meanwhile (C takes 2 of the 4 processors; 3 are taken).
    let c = &wf.tasks[2];
    w.create_reservation(
        Time(1_000),
        "root",
        "a",
        crate::state::world::Held::Count(3),
        c.planned_start,
        c.planned_end,
        AclSpec::default(),
        None,
    )
    .unwrap();
    let (mut wf1, mut jobs1) = (wf.clone(), jobs.clone());
    let e = w
        .hold_workflow(Time(1_000), &mut wf1, &mut jobs1, 60)
        .unwrap_err();
    assert_eq!(e.field(), Some("tasks[2].start"), "{e:?}");
    assert!(e.reason().starts_with("task \"C\": "), "{e:?}");
    let states: Vec<ReservationState> = w.reservations.values().skip(1).map(|r| r.state).collect();
    assert_eq!(
        states,
        vec![ReservationState::Released; 2],
        "A's and B's slots"
    );

    // On a free cluster every slot is held tentatively, then committed.
    let mut w = world(vec![cluster("a", 4)]);
    let (mut wf, mut jobs) = w
        .plan_workflow(Time(1_000), &ann, &spec, MapperName::Greedy)
        .unwrap();
    w.hold_workflow(Time(1_000), &mut wf, &mut jobs, 60)
        .unwrap();
    assert!(jobs
        .iter()
        .zip(&wf.tasks)
        .all(|(j, t)| j.reservation.is_some() && j.reservation == t.reservation));
    assert!(w
        .reservations
        .values()
        .all(|r| r.state == ReservationState::Tentative && r.expires_at == Some(1_060)));
    w.settle_workflow(Time(1_000), &wf, true);
    assert!(w
        .reservations
        .values()
        .all(|r| r.state == ReservationState::Committed));
}

/// A reserved task that ends before its slot does gives the rest of the slot back at
/// its end: the reservation is over and the cluster's scheduler no longer holds it.
#[test]
fn a_reserved_task_gives_back_the_rest_of_its_slot_when_it_ends() {
    use foresight_store::ReservationState;
    let mut w = world(vec![cluster("a", 4)]);
    let ann = w.users["ann"].clone();
    let spec = parse_workflow(DIAMOND, false).unwrap();
    let (mut wf, mut jobs) = w
        .plan_workflow(Time(1_000), &ann, &spec, MapperName::Greedy)
        .unwrap();
    wf.id = 7;
    for (i, (j, t)) in jobs.iter_mut().zip(wf.tasks.iter_mut()).enumerate() {
        j.id = 1 + i as u64;
        t.job = j.id;
    }
    w.hold_workflow(Time(1_000), &mut wf, &mut jobs, 60)
        .unwrap();
    w.settle_workflow(Time(1_000), &wf, true);
    let a = ReservationId(wf.tasks[0].reservation.unwrap());
    let b = ReservationId(wf.tasks[1].reservation.unwrap());
    w.accept_workflow(Time(1_000), wf, jobs);
    assert_eq!(launched(&mut w), vec![1]);
    let held =
        |w: &World, r: ReservationId| w.broker.clusters[0].sched.reservations().any(|x| x.id == r);
    assert!(held(&w, a));
    // A ends 10 s in, long before its one-minute slot does.
    w.on_finished(Time(1_010), ClusterId(0), JobId(1), 0, &exit(0));
    assert_eq!(w.reservations[&a].state, ReservationState::Finished);
    assert!(!held(&w, a), "A's slot is still held after A ended");
    // B's slot, not used yet, stands.
    assert!(held(&w, b));
    assert!(w.reservations[&b].state.is_live());
}

#[test]
fn bad_workflows_name_the_task_and_change_nothing() {
    let w = world(vec![cluster("a", 4), cluster("b", 2)]);
    let ann = w.users["ann"].clone();
    let plan = |yaml: &str| {
        let spec = parse_workflow(yaml, false).unwrap();
        w.plan_workflow(Time(1_000), &ann, &spec, MapperName::Dsc)
    };
    let big = DIAMOND.replace("processors: 2", "processors: 5");
    let e = plan(&big).unwrap_err();
    assert_eq!(e.field(), Some("tasks"));
    assert!(e.reason().contains("task \"C\" can never run"), "{e:?}");
    let cyc = DIAMOND.replace("{from: C, to: D}", "{from: D, to: A}");
    let e = plan(&cyc).unwrap_err();
    assert_eq!(e.field(), Some("edges"));
    assert!(e.reason().contains("cycle"), "{e:?}");
    let cmd = DIAMOND.replace("command: [d]", "command: [d], cwd: relative");
    let e = plan(&cmd).unwrap_err();
    assert_eq!(e.field(), Some("tasks[3].cwd"));
    assert!(e.reason().starts_with("task \"D\": "), "{e:?}");
    assert!(w.jobs.is_empty() && w.workflows.is_empty());
    // A good one: every task on a cluster that can host it, D after B and C.
    let (wf, jobs) = plan(DIAMOND).unwrap();
    assert_eq!(jobs.len(), 4);
    assert!(wf.tasks[3].planned_start >= wf.tasks[1].planned_end.max(wf.tasks[2].planned_end));
    assert!(jobs.iter().all(|j| j.links.as_ref().unwrap().waiting));
}

/// A chain whose first task needs a local cluster and the others a Slurm one.
const MIXED: &str = "\
name: m
tasks:
  - {name: A, command: [a], walltime: 10s, requires: [here]}
  - {name: B, command: [b], walltime: 10s, requires: [slurm]}
  - {name: C, command: [c], walltime: 10s, requires: [slurm]}
edges:
  - {from: A, to: B}
  - {from: B, to: C}
";

/// A local cluster `a` (feature `here`) and a Slurm cluster `c1` (feature `slurm`, 8
/// processors as last read).
fn mixed() -> World {
    use super::tests::{empty_state, slurm};
    let mut a = cluster("a", 4);
    a.spec.features = vec!["here".into()];
    let mut c1 = slurm("c1");
    c1.spec.features = vec!["slurm".into()];
    let mut w = world(vec![a, c1]);
    w.sync_remote(Time(1_000), ClusterId(1), Ok(empty_state(1_000, 8)));
    w
}

/// Phase one on a Slurm cluster: the task's slot is a tentative reservation there too,
/// asked of Slurm (not refused as an administrative reservation would be).
#[test]
fn a_reserved_workflow_holds_its_slurm_slots_too() {
    use foresight_store::ReservationState;
    let mut w = mixed();
    let ann = w.users["ann"].clone();
    let spec = parse_workflow(MIXED, false).unwrap();
    let (mut wf, mut jobs) = w
        .plan_workflow(Time(1_000), &ann, &spec, MapperName::Heft)
        .unwrap();
    assert_eq!(
        wf.tasks
            .iter()
            .map(|t| t.cluster.as_str())
            .collect::<Vec<_>>(),
        ["a", "c1", "c1"]
    );
    w.hold_workflow(Time(1_000), &mut wf, &mut jobs, 60)
        .unwrap();
    assert!(wf.tasks.iter().all(|t| t.reservation.is_some()));
    assert!(w
        .reservations
        .values()
        .all(|r| r.state == ReservationState::Tentative && r.expires_at == Some(1_060)));
}

/// Plans and holds MIXED in `w` as the service does (workflow 7, jobs 1..=3): the Slurm
/// slots still to ask.
fn hold_mixed(w: &mut World) -> (WorkflowRecord, Vec<JobRecord>, Vec<RemoteSlot>) {
    let ann = w.users["ann"].clone();
    let spec = parse_workflow(MIXED, false).unwrap();
    let (mut wf, mut jobs) = w
        .plan_workflow(Time(1_000), &ann, &spec, MapperName::Heft)
        .unwrap();
    wf.id = 7;
    for (i, (j, t)) in jobs.iter_mut().zip(wf.tasks.iter_mut()).enumerate() {
        j.id = 1 + i as u64;
        t.job = j.id;
    }
    let remote = w
        .hold_workflow(Time(1_000), &mut wf, &mut jobs, 60)
        .unwrap();
    (wf, jobs, remote)
}

fn released(effects: &[Effect]) -> BTreeSet<u64> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Release { reservation, .. } => Some(reservation.0),
            _ => None,
        })
        .collect()
}

/// All or none across a local and a Slurm cluster: Slurm refuses C's slot after it held
/// B's; the workflow is refused (409 naming C, quoting Slurm), B's and C's reservations
/// are released in Slurm and A's leaves the local scheduler.
#[test]
fn one_slurm_refusal_releases_every_slot_of_the_workflow() {
    use foresight_store::ReservationState;
    let mut w = mixed();
    let (wf, _, remote) = hold_mixed(&mut w);
    assert_eq!(
        remote
            .iter()
            .map(|s| (s.task, s.cluster))
            .collect::<Vec<_>>(),
        [(1, ClusterId(1)), (2, ClusterId(1))]
    );
    // Slurm reserves whole minutes: the 10 s slots are held for 60 s.
    for s in &remote {
        assert_eq!(s.request.start, wf.tasks[s.task].planned_start);
        assert_eq!(s.request.end - s.request.start, 60, "{s:?}");
        assert_eq!(s.request.procs, 1);
        assert_eq!(Some(s.request.id), wf.tasks[s.task].reservation);
    }
    w.effects.clear();
    let answers = [
        (1, Ok(())),
        (2, Err("Requested nodes are busy".to_string())),
    ];
    let e = w
        .remote_slots_answered(Time(1_001), &wf, &answers)
        .unwrap_err();
    assert!(matches!(e, Refusal::Conflict { .. }), "{e:?}");
    assert_eq!(e.field(), Some("tasks[2].start"), "{e:?}");
    assert!(
        e.reason()
            .starts_with("task \"C\": cluster c1 refused to reserve its slot: "),
        "{e:?}"
    );
    assert!(e.reason().contains("Requested nodes are busy"), "{e:?}");
    assert!(w
        .reservations
        .values()
        .all(|r| r.state == ReservationState::Released));
    assert_eq!(
        released(&w.effects),
        remote.iter().map(|s| s.request.id).collect()
    );
    let a = ReservationId(wf.tasks[0].reservation.unwrap());
    assert!(!w.broker.clusters[0].sched.reservations().any(|x| x.id == a));
}

/// Once held everywhere and committed, a Slurm task is submitted into its reservation when
/// its input is ready, gives the rest of its slot back in Slurm when it ends early, and
/// cancelling the workflow releases the slots left.
#[test]
fn a_slurm_task_runs_in_its_slot_and_gives_it_back() {
    use super::tests::{empty_state, ours};
    use foresight_rm::{PartHandle, RmJobState, RmReservation};
    use foresight_store::ReservationState;
    let mut w = mixed();
    let (wf, jobs, remote) = hold_mixed(&mut w);
    let answers: Vec<_> = remote.iter().map(|s| (s.task, Ok(()))).collect();
    w.remote_slots_answered(Time(1_001), &wf, &answers).unwrap();
    w.settle_workflow(Time(1_001), &wf, true);
    assert!(w
        .reservations
        .values()
        .all(|r| r.state == ReservationState::Committed));
    let rid = |i: usize| wf.tasks[i].reservation.unwrap();
    let (b, c) = (rid(1), rid(2));
    w.accept_workflow(Time(1_001), wf, jobs);
    assert_eq!(launched(&mut w), vec![1]);
    w.on_finished(Time(1_010), ClusterId(0), JobId(1), 0, &exit(0));
    let submitted: Vec<_> = std::mem::take(&mut w.effects)
        .into_iter()
        .filter_map(|e| match e {
            Effect::Submit {
                cluster,
                submission,
                ..
            } => Some((cluster, submission.spec.job, submission.reservation)),
            _ => None,
        })
        .collect();
    assert_eq!(submitted, vec![(ClusterId(1), 2, Some(b))]);
    w.part_submitted(
        Time(1_011),
        ClusterId(1),
        JobId(2),
        0,
        Ok(PartHandle {
            job: 2,
            attempt: 0,
            external: Some("51".into()),
        }),
    );
    // B ran 5 s of its one-minute slot.
    let mut s = empty_state(1_030, 8);
    let mut done = ours("51", 2, 0, 1, RmJobState::Ended(exit(0)));
    done.start = Some(1_020);
    done.reservation = Some(format!("foresight-{b}"));
    s.jobs.push(done);
    for r in [b, c] {
        s.reservations.push(RmReservation {
            name: format!("foresight-{r}"),
            foresight: Some(r),
            start: w.reservations[&ReservationId(r)].start,
            end: w.reservations[&ReservationId(r)].end,
            procs: 1,
        });
    }
    w.sync_remote(Time(1_030), ClusterId(1), Ok(s));
    assert_eq!(w.jobs[&JobId(2)].state, JobState::Completed);
    assert_eq!(
        w.reservations[&ReservationId(b)].state,
        ReservationState::Finished
    );
    let effects = std::mem::take(&mut w.effects);
    assert_eq!(released(&effects), BTreeSet::from([b]));
    // C follows B, into its own slot.
    assert!(effects.iter().any(|e| matches!(
        e,
        Effect::Submit { cluster: ClusterId(1), submission, .. }
            if submission.spec.job == 3 && submission.reservation == Some(c)
    )));
    w.cancel_workflow(Time(1_031), 7).unwrap();
    assert_eq!(released(&w.effects), BTreeSet::from([c]));
    assert_eq!(
        w.reservations[&ReservationId(c)].state,
        ReservationState::Released
    );
}

/// A restart between the phases: a committed workflow slot on Slurm is kept, a
/// tentative one (its workflow never stored) is released there at the first snapshot.
#[test]
fn a_restart_keeps_committed_slurm_slots_and_drops_tentative_ones() {
    use super::tests::empty_state;
    use foresight_rm::RmReservation;
    use foresight_store::ReservationRecord;
    use foresight_store::{AclSpec, ReservationState};
    let mut w = world(vec![super::tests::slurm("c1")]);
    let slot = |id: u64, state: ReservationState| ReservationRecord {
        id,
        kind: "admin".into(),
        cluster: "c1".into(),
        procs: 1,
        processors: vec![],
        start: 1_000,
        end: 1_060,
        acl: AclSpec {
            users: vec!["ann".into()],
            ..AclSpec::default()
        },
        state,
        expires_at: (state == ReservationState::Tentative).then_some(1_060),
        owner: "ann".into(),
    };
    w.restore(
        Time(1_010),
        vec![],
        vec![
            slot(1, ReservationState::Committed),
            slot(2, ReservationState::Tentative),
        ],
        vec![],
    );
    let mut s = empty_state(1_011, 8);
    for id in [1, 2] {
        s.reservations.push(RmReservation {
            name: format!("foresight-{id}"),
            foresight: Some(id),
            start: 1_000,
            end: 1_060,
            procs: 1,
        });
    }
    w.sync_remote(Time(1_011), ClusterId(0), Ok(s));
    assert_eq!(released(&w.effects), BTreeSet::from([2]));
    assert!(w.reservations[&ReservationId(1)].state.is_live());
    assert!(!w.reservations[&ReservationId(2)].state.is_live());
}

/// A on `a` leaves `out/m.dat` for B on `b`.
const PAIR: &str = "\
name: p
tasks:
  - {name: A, command: [a], walltime: 1, requires: [one]}
  - {name: B, command: [b], walltime: 1, requires: [two]}
edges:
  - {from: A, to: B, data_mb: 1, files: [out/m.dat]}
";

/// Clusters `a` (feature `one`) and `b` (feature `two`) with these `work_dir`s.
fn pair_grid(a: Option<&str>, b: Option<&str>) -> World {
    let mut ca = cluster("a", 2);
    ca.spec.features = vec!["one".into()];
    ca.work_dir = a.map(Into::into);
    let mut cb = cluster("b", 2);
    cb.spec.features = vec!["two".into()];
    cb.work_dir = b.map(Into::into);
    world(vec![ca, cb])
}

/// The output copies asked for, as `(job, [(from, to)], labels)`; the launches' working
/// directories, as `(job, cwd)`.
type Copies = Vec<(u64, Vec<(Vec<String>, String)>, Vec<Option<String>>)>;
fn copies_and_launches(w: &mut World) -> (Copies, Vec<(u64, String)>) {
    let (mut copies, mut launched) = (Vec::new(), Vec::new());
    for e in std::mem::take(&mut w.effects) {
        match e {
            Effect::StageOutputs { job, stage, .. } => copies.push((
                job,
                stage
                    .iter()
                    .map(|f| {
                        let from = f.from.iter().map(|p| p.display().to_string());
                        (from.collect(), f.to.display().to_string())
                    })
                    .collect(),
                stage.iter().map(|f| f.label.clone()).collect(),
            )),
            Effect::Launch { spec, .. } => {
                launched.push((spec.job, spec.cwd.display().to_string()))
            }
            _ => {}
        }
    }
    (copies, launched)
}

/// An edge's files go from the directory its first task ran in to the one its second
/// runs in; the second waits for the copy, saying so, and starts once it is done.
#[test]
fn a_successor_on_another_cluster_waits_for_the_edges_files() {
    let mut w = pair_grid(Some("/wa"), Some("/wb"));
    let id = submit(&mut w, PAIR, 1);
    assert_eq!(w.workflows[&id].edges[0].files, vec!["out/m.dat"]);
    let (copies, launched) = copies_and_launches(&mut w);
    assert!(copies.is_empty());
    // A task runs in its cluster's own directory for the workflow.
    assert_eq!(launched, vec![(1, "/wa/workflow-7".to_string())]);
    w.on_finished(Time(1_010), ClusterId(0), JobId(1), 0, &exit(0));
    let (copies, launched) = copies_and_launches(&mut w);
    assert_eq!(
        copies,
        vec![(
            1,
            vec![(
                vec!["/wa/workflow-7/out/m.dat".to_string()],
                "/wb/workflow-7/out/m.dat".to_string()
            )],
            vec![Some("edge A -> B".to_string())]
        )]
    );
    assert!(
        launched.is_empty(),
        "B started before the copy: {launched:?}"
    );
    let b = &w.jobs[&JobId(2)];
    assert_eq!(b.state, JobState::Pending);
    assert_eq!(
        b.reason.as_deref(),
        Some(
            "Dependency: waiting for afterok:task A (job 1 is copying the files of edge \
             A -> B to b)"
        )
    );
    w.outputs_copied(Time(1_012), JobId(1), &Ok(()));
    let (_, launched) = copies_and_launches(&mut w);
    assert_eq!(launched, vec![(2, "/wb/workflow-7".to_string())]);
}

/// A failed copy (a missing file): the successor never starts; it is cancelled with a
/// reason naming the edge, the file and the error, and the workflow ends `cancelled`.
#[test]
fn a_failed_edge_copy_cancels_the_successor_and_the_workflow() {
    let mut w = pair_grid(Some("/wa"), Some("/wb"));
    let id = submit(&mut w, PAIR, 1);
    copies_and_launches(&mut w);
    w.on_finished(Time(1_010), ClusterId(0), JobId(1), 0, &exit(0));
    let err = "edge A -> B, file out/m.dat: copying /wa/workflow-7/out/m.dat to \
               /wb/workflow-7/out/m.dat: cp: cannot stat: No such file or directory";
    let failed = FetchFailure {
        label: Some("edge A -> B".into()),
        error: err.into(),
    };
    w.outputs_copied(Time(1_012), JobId(1), &Err(vec![failed]));
    let (_, launched) = copies_and_launches(&mut w);
    assert!(launched.is_empty());
    let b = &w.jobs[&JobId(2)];
    assert_eq!(b.state, JobState::Cancelled);
    let reason = b.reason.clone().unwrap();
    assert!(
        reason.starts_with("DependencyNeverSatisfied: ") && reason.contains(err),
        "{reason}"
    );
    assert_eq!(w.jobs[&JobId(1)].state, JobState::Completed);
    assert_eq!(w.workflow_view(id).unwrap().state, WorkflowState::Cancelled);
}

/// A fork: A on `a` leaves one file for B and another for C, both on `b`.
const FORK: &str = "\
name: f
tasks:
  - {name: A, command: [a], walltime: 1, requires: [one]}
  - {name: B, command: [b], walltime: 1, requires: [two]}
  - {name: C, command: [c], walltime: 1, requires: [two]}
edges:
  - {from: A, to: B, files: [out/b.dat]}
  - {from: A, to: C, files: [out/c.dat]}
";

/// A failed edge file cancels the successor of that edge only: the other successor,
/// whose files were copied, runs; the workflow ends `cancelled`.
#[test]
fn a_failed_edge_copy_cancels_only_that_edges_successor() {
    let mut w = pair_grid(Some("/wa"), Some("/wb"));
    let id = submit(&mut w, FORK, 1);
    copies_and_launches(&mut w);
    w.on_finished(Time(1_010), ClusterId(0), JobId(1), 0, &exit(0));
    let (copies, _) = copies_and_launches(&mut w);
    assert_eq!(
        copies[0].2,
        vec![
            Some("edge A -> B".to_string()),
            Some("edge A -> C".to_string())
        ]
    );
    for (job, edge) in [(2, "B"), (3, "C")] {
        assert_eq!(
            w.jobs[&JobId(job)].reason.as_deref(),
            Some(
                format!(
                    "Dependency: waiting for afterok:task A (job 1 is copying the files of \
                     edge A -> {edge} to b)"
                )
                .as_str()
            )
        );
    }
    let err = "edge A -> C, file out/c.dat: copying /wa/workflow-7/out/c.dat to \
               /wb/workflow-7/out/c.dat: cp: cannot stat: No such file or directory";
    let failed = FetchFailure {
        label: Some("edge A -> C".into()),
        error: err.into(),
    };
    w.outputs_copied(Time(1_012), JobId(1), &Err(vec![failed]));
    let (_, launched) = copies_and_launches(&mut w);
    assert_eq!(launched, vec![(2, "/wb/workflow-7".to_string())]);
    let c = &w.jobs[&JobId(3)];
    assert_eq!(c.state, JobState::Cancelled);
    let reason = c.reason.clone().unwrap();
    assert!(
        reason.starts_with("DependencyNeverSatisfied: ") && reason.contains(err),
        "{reason}"
    );
    let a = &w.jobs[&JobId(1)];
    assert_eq!(a.output_staging.as_ref().unwrap().error, None);
    assert_eq!(
        a.reason.as_deref(),
        Some(format!("copying edge files failed: {err}").as_str())
    );
    w.on_finished(Time(1_020), ClusterId(1), JobId(2), 0, &exit(0));
    assert_eq!(w.jobs[&JobId(2)].state, JobState::Completed);
    assert_eq!(w.workflow_view(id).unwrap().state, WorkflowState::Cancelled);
}

/// A failed copy of the task's own outputs still cancels every successor.
#[test]
fn a_failed_output_copy_cancels_every_successor() {
    let mut w = pair_grid(Some("/wa"), Some("/wb"));
    submit(&mut w, FORK, 1);
    copies_and_launches(&mut w);
    w.on_finished(Time(1_010), ClusterId(0), JobId(1), 0, &exit(0));
    copies_and_launches(&mut w);
    let failed = FetchFailure {
        label: None,
        error: "copying /wa/r.txt to /home/r.txt: gone".into(),
    };
    w.outputs_copied(Time(1_012), JobId(1), &Err(vec![failed]));
    let (_, launched) = copies_and_launches(&mut w);
    assert!(launched.is_empty(), "{launched:?}");
    for job in [2, 3] {
        assert_eq!(w.jobs[&JobId(job)].state, JobState::Cancelled, "{job}");
    }
}

/// No copy where the successor's directory already holds the files: tasks on one cluster,
/// or on clusters sharing their `work_dir`, or without one (the owner's directory), also
/// when the slots are reserved.
#[test]
fn no_copy_where_the_successor_runs_in_the_same_directory() {
    let one_cluster = PAIR.replace("requires: [two]", "requires: [one]");
    for (name, a, b, yaml, reserve) in [
        ("shared work_dir", Some("/w"), Some("/w"), PAIR, false),
        ("no work_dir", None, None, PAIR, false),
        (
            "one cluster",
            Some("/wa"),
            Some("/wb"),
            one_cluster.as_str(),
            false,
        ),
        (
            "one cluster, reserved",
            Some("/wa"),
            Some("/wb"),
            one_cluster.as_str(),
            true,
        ),
    ] {
        let mut w = pair_grid(a, b);
        let ann = w.users["ann"].clone();
        let spec = parse_workflow(yaml, false).unwrap();
        let (mut wf, mut jobs) = w
            .plan_workflow(Time(1_000), &ann, &spec, MapperName::Heft)
            .unwrap();
        wf.id = 7;
        for (i, (j, t)) in jobs.iter_mut().zip(wf.tasks.iter_mut()).enumerate() {
            j.id = 1 + i as u64;
            t.job = j.id;
        }
        if reserve {
            w.hold_workflow(Time(1_000), &mut wf, &mut jobs, 60)
                .unwrap();
            w.settle_workflow(Time(1_000), &wf, true);
        }
        w.accept_workflow(Time(1_000), wf, jobs);
        copies_and_launches(&mut w);
        w.on_finished(Time(1_010), ClusterId(0), JobId(1), 0, &exit(0));
        let (copies, launched) = copies_and_launches(&mut w);
        assert!(copies.is_empty(), "{name}: {copies:?}");
        assert!(w.jobs[&JobId(1)].output_staging.is_none(), "{name}");
        // B no longer waits: it starts at once (reserved: by its slot at the latest).
        assert!(!w.jobs[&JobId(2)].links.as_ref().unwrap().waiting, "{name}");
        if !reserve {
            assert_eq!(launched.len(), 1, "{name}: B starts at once");
        }
    }
}

/// A restart that cut an edge's copy makes it again, once the workflow is known.
#[test]
fn a_restart_copies_an_edges_files_again() {
    let mut w = pair_grid(Some("/wa"), Some("/wb"));
    let id = submit(&mut w, PAIR, 1);
    w.on_finished(Time(1_010), ClusterId(0), JobId(1), 0, &exit(0));
    let wf = w.workflows[&id].clone();
    let jobs: Vec<JobRecord> = w.jobs.values().cloned().collect();
    assert!(jobs[0].output_staging.as_ref().unwrap().ended_at.is_none());
    let mut again = pair_grid(Some("/wa"), Some("/wb"));
    again.add_workflow(wf);
    again.restore(Time(1_100), jobs, vec![], vec![]);
    let (copies, launched) = copies_and_launches(&mut again);
    assert_eq!(copies.len(), 1, "{copies:?}");
    assert_eq!(copies[0].1[0].1, "/wb/workflow-7/out/m.dat");
    assert!(launched.is_empty());
    again.outputs_copied(Time(1_102), JobId(1), &Ok(()));
    let (_, launched) = copies_and_launches(&mut again);
    assert_eq!(launched, vec![(2, "/wb/workflow-7".to_string())]);
}
