#![allow(clippy::unwrap_used)]
//! The Slurm output parsers and command builders, on outputs of real Slurm 22.05.8 clusters
//! captured by `tests/fixtures/slurm/capture.sh` (see `index.tsv` there for each command, its
//! user and exit status), plus garbage that must give errors, never panics.

use foresight_rm::slurm::*;
use proptest::prelude::*;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/slurm")
}

/// stdout of the captured case.
fn out(name: &str) -> String {
    std::fs::read_to_string(dir().join(format!("{name}.out"))).unwrap()
}

/// stderr of the captured case.
fn err(name: &str) -> String {
    std::fs::read_to_string(dir().join(format!("{name}.err"))).unwrap()
}

/// name -> (exit status, user, command) from index.tsv.
fn index() -> HashMap<String, (i32, String, String)> {
    let text = std::fs::read_to_string(dir().join("index.tsv")).unwrap();
    text.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.splitn(4, '\t').collect();
            (
                f[0].to_owned(),
                (f[1].parse().unwrap(), f[2].to_owned(), f[3].to_owned()),
            )
        })
        .collect()
}

/// The captured case as the runner would have returned it.
fn output(name: &str) -> CommandOutput {
    let (status, _, _) = index()[name].clone();
    CommandOutput::with(status, out(name), err(name))
}

fn ts(s: &str) -> i64 {
    parse_timestamp(s).unwrap()
}

// ------------------------------------------------------------------------------- nodes --

#[test]
fn sinfo_idle_cluster() {
    let a = parse_sinfo_json("sinfo --json", &out("sinfo-idle")).unwrap();
    assert_eq!(a.release.as_deref(), Some("22.05.8"));
    let names: Vec<&str> = a.items.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["c1-n1", "c1-n2", "c1-n3", "c1-n4"]);
    for n in &a.items {
        assert_eq!(n.state, NodeState::Idle);
        assert!(n.flags.is_empty());
        assert_eq!((n.cpus, n.alloc_cpus, n.idle_cpus), (2, 0, 2));
        assert_eq!(n.partitions, ["debug"]);
        assert_eq!(n.reason, None);
        assert_eq!(n.real_memory_mb, 2000);
        assert!(n.accepts_jobs());
    }
}

#[test]
fn sinfo_busy_and_drained() {
    let busy = parse_sinfo_json("sinfo --json", &out("sinfo-busy"))
        .unwrap()
        .items;
    assert!(busy
        .iter()
        .all(|n| n.state == NodeState::Allocated && n.alloc_cpus == 2 && n.idle_cpus == 0));
    assert!(busy.iter().all(Node::accepts_jobs));

    let nodes = parse_sinfo_json("sinfo --json", &out("sinfo-reserved"))
        .unwrap()
        .items;
    let n4 = nodes.iter().find(|n| n.name == "c1-n4").unwrap();
    assert_eq!(n4.state, NodeState::Mixed);
    assert_eq!(n4.flags, ["DRAIN"]);
    assert_eq!(n4.reason.as_deref(), Some("disk check"));
    assert_eq!((n4.alloc_cpus, n4.idle_cpus), (1, 1));
    assert!(!n4.accepts_jobs(), "a draining node takes no new job");
    assert!(nodes
        .iter()
        .filter(|n| n.name != "c1-n4")
        .all(Node::accepts_jobs));
}

// -------------------------------------------------------------------------- partitions --

#[test]
fn partitions() {
    let p = parse_partitions("scontrol show partition -o", &out("partitions")).unwrap();
    assert_eq!(p.len(), 1);
    let d = &p[0];
    assert_eq!(d.name, "debug");
    assert_eq!(d.nodes.as_deref(), Some("c1-n[1-4]"));
    assert_eq!((d.total_cpus, d.total_nodes), (8, 4));
    assert_eq!(d.state, "UP");
    assert!(d.default);
    assert_eq!(d.default_time, Some(TimeLimit::Minutes(60)));
    assert_eq!(d.max_time, TimeLimit::Unlimited);
    assert_eq!(
        parse_partitions("c", "No partitions in the system\n").unwrap(),
        []
    );
}

// -------------------------------------------------------------------------------- jobs --

fn job(jobs: &[Job], id: u32) -> &Job {
    jobs.iter().find(|j| j.id == SlurmJobId(id)).unwrap()
}

#[test]
fn squeue_idle_cluster_has_no_jobs() {
    let a = parse_squeue_json("squeue --json", &out("squeue-idle")).unwrap();
    assert_eq!(a.release.as_deref(), Some("22.05.8"));
    assert!(a.items.is_empty());
}

#[test]
fn squeue_busy_two_users_running_and_pending() {
    let jobs = parse_squeue_json("squeue --json", &out("squeue-busy"))
        .unwrap()
        .items;
    let ids: Vec<u32> = jobs.iter().map(|j| j.id.0).collect();
    assert_eq!(ids, (1..=9).collect::<Vec<_>>());

    let ok = job(&jobs, 1);
    assert_eq!(
        (ok.state.clone(), ok.exit_code, ok.exit_signal),
        (JobState::Completed, 0, None)
    );
    let fails = job(&jobs, 2);
    assert_eq!(fails.state, JobState::Failed);
    assert_eq!(fails.reason.as_deref(), Some("NonZeroExitCode"));
    assert_eq!(
        (fails.exit_code, fails.exit_signal),
        (3, None),
        "raw wait status 768 = exit 3"
    );
    assert!(!fails.state.is_active());

    let run = job(&jobs, 3);
    assert_eq!((run.name.as_str(), run.user.as_str()), ("root-run", "root"));
    assert_eq!(run.state, JobState::Running);
    assert!(run.state.holds_cpus());
    assert_eq!(run.reason, None);
    assert_eq!((run.cpus, run.node_count), (4, 2));
    assert_eq!(run.nodes.as_deref(), Some("c1-n[1-2]"));
    assert_eq!(run.time_limit, TimeLimit::Minutes(10));
    assert_eq!(run.end_time.unwrap() - run.start_time.unwrap(), 600);
    assert_eq!(run.partition, "debug");
    assert_eq!(run.cluster, "c1");
    assert_eq!(run.account, None);
    assert_eq!(run.reservation, None);

    let other = job(&jobs, 4);
    assert_eq!(
        (other.user.as_str(), other.state.clone(), other.cpus),
        ("fsowner", JobState::Running, 3)
    );

    // Pending jobs carry Slurm's own expected start (backfill): the end of the running jobs
    // whose CPUs they wait for.
    let pend = job(&jobs, 5);
    assert_eq!(
        (pend.state.clone(), pend.reason.as_deref()),
        (JobState::Pending, Some("Priority"))
    );
    assert_eq!(pend.start_time, run.end_time);
    assert_eq!(pend.end_time.unwrap() - pend.start_time.unwrap(), 300);
    assert!(pend.nodes.is_none());
    let big = job(&jobs, 6);
    assert_eq!(
        (big.user.as_str(), big.cpus, big.reason.as_deref()),
        ("fsowner", 6, Some("Resources"))
    );
    assert_eq!(big.start_time, other.end_time);
    assert!(
        big.priority > pend.priority,
        "job size weighs in the priority"
    );

    let held = job(&jobs, 7);
    assert_eq!(held.reason.as_deref(), Some("JobHeldUser"));
    assert_eq!(
        (held.priority, held.start_time, held.end_time),
        (0, None, None)
    );

    let unlimited = job(&jobs, 8);
    assert_eq!(unlimited.time_limit, TimeLimit::Unlimited);
    assert_eq!(unlimited.time_limit.as_secs(), None);

    let later = job(&jobs, 9);
    assert_eq!(later.reason.as_deref(), Some("BeginTime"));
    assert_eq!(later.start_time, later.eligible_time);
    assert!(later.start_time.unwrap() >= later.submit_time + 7200);
}

/// The JSON `start_time` of pending jobs is what `squeue --start` prints, taken at the same
/// moment: one `squeue --json` serves the forecast.
#[test]
fn json_start_time_is_squeue_start() {
    let jobs = parse_squeue_json("squeue --json", &out("squeue-busy"))
        .unwrap()
        .items;
    let text = out("squeue-start-busy");
    assert_eq!(text.lines().count(), 4);
    for line in text.lines() {
        let f: Vec<&str> = line.split('|').collect();
        let j = job(&jobs, f[0].parse().unwrap());
        assert_eq!(j.state, JobState::Pending);
        assert_eq!(j.reason.as_deref(), Some(f[3]));
        assert_eq!(j.start_time, parse_timestamp(f[2]), "job {}", f[0]);
    }
}

#[test]
fn squeue_suspended_and_requeued_and_reserved() {
    let jobs = parse_squeue_json("squeue --json", &out("squeue-suspended"))
        .unwrap()
        .items;
    let s = job(&jobs, 3);
    assert_eq!(s.state, JobState::Suspended);
    assert!(s.state.holds_cpus() && s.state.is_active());
    assert_eq!(s.priority, 0);

    let jobs = parse_squeue_json("squeue --json", &out("squeue-reserved"))
        .unwrap()
        .items;
    let requeued = job(&jobs, 8);
    assert_eq!(
        (requeued.state.clone(), requeued.restarts),
        (JobState::Pending, 1)
    );
    assert_eq!(requeued.reason.as_deref(), Some("BeginTime"));
    let cancelled = job(&jobs, 7);
    assert_eq!(cancelled.state, JobState::Cancelled);
    assert!(!cancelled.state.is_active());

    let bound = job(&jobs, 13);
    assert_eq!(bound.name, "foresight-job-1");
    assert_eq!(bound.reservation.as_deref(), Some("foresight-1"));
    assert_eq!(bound.cpus, 3);
    let resv = parse_reservations("r", &out("reservations")).unwrap();
    let r1 = resv.iter().find(|r| r.name == "foresight-1").unwrap();
    assert_eq!(
        bound.start_time,
        Some(r1.start),
        "a bound job is expected at its reservation's start"
    );
}

// ------------------------------------------------------------------------ reservations --

#[test]
fn reservations() {
    assert_eq!(
        parse_reservations("r", &out("reservations-none")).unwrap(),
        []
    );

    let r = parse_reservations("scontrol show reservation -o", &out("reservations")).unwrap();
    assert_eq!(r.len(), 2);
    let (a, b) = (&r[0], &r[1]);
    assert_eq!(a.name, "foresight-1");
    assert_eq!(foresight_reservation_id(&a.name), Some(1));
    assert_eq!(a.end - a.start, 1800);
    assert_eq!(a.nodes.as_deref(), Some("c1-n[1-2]"));
    assert_eq!((a.node_count, a.core_count), (2, 3));
    assert_eq!(a.partition.as_deref(), Some("debug"));
    assert!(a.flags.is_empty());
    assert_eq!(a.users, ["root"]);
    assert!(a.accounts.is_empty());
    assert!(!a.is_active());
    assert_eq!(a.state, "INACTIVE");

    assert_eq!(b.name, "foresight-2");
    assert_eq!(b.end - b.start, 3600);
    assert_eq!((b.node_count, b.core_count), (1, 2));
    assert_eq!(b.flags, ["IGNORE_JOBS"]);
    assert_eq!(b.users, ["root", "fsowner"]);
    assert!(b.is_active());
    assert!(b.cores.is_empty());

    let c = parse_reservations("r", &out("reservations-cores")).unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].core_count, 3);
    assert!(
        c[0].flags.is_empty(),
        "`Flags=` is empty, the NodeName= after it is a key"
    );
    assert_eq!(
        c[0].cores,
        [
            ("c2-n1".to_owned(), "0-1".to_owned()),
            ("c2-n2".to_owned(), "0".to_owned())
        ]
    );
    assert_eq!(c[0].users, ["root"]);
}

// ---------------------------------------------------------------------- the one-liners --

#[test]
fn sbatch_answers() {
    let s = parse_sbatch_parsable("sbatch", &out("sbatch-parsable")).unwrap();
    assert_eq!(
        s,
        Submitted {
            job_id: SlurmJobId(2),
            cluster: None
        }
    );
    let s = parse_sbatch_parsable("sbatch", &out("sbatch-in-reservation")).unwrap();
    assert_eq!(s.job_id, SlurmJobId(13));
    // With -M (needs slurmdbd), 22.05 prints ID;CLUSTER (seen on siteb in the recipe).
    let s = parse_sbatch_parsable("sbatch", "1;siteb\n").unwrap();
    assert_eq!(
        s,
        Submitted {
            job_id: SlurmJobId(1),
            cluster: Some("siteb".to_owned())
        }
    );
    // Without --parsable the answer is prose: an error naming the command and the text.
    let e = parse_sbatch_parsable("sbatch -n 1", &out("sbatch-plain")).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("sbatch -n 1") && msg.contains("Submitted batch job 1"),
        "{msg}"
    );
    for bad in [
        "",
        "\n\n",
        "0",
        "-3",
        "12;",
        "x;c1",
        "12;c 1",
        "99999999999",
    ] {
        assert!(parse_sbatch_parsable("sbatch", bad).is_err(), "{bad:?}");
    }
}

#[test]
fn test_only_answers() {
    let t = parse_test_only("sbatch --test-only", &err("test-only")).unwrap();
    assert_eq!(t.job_id, SlurmJobId(10));
    assert_eq!(t.processors, 2);
    assert_eq!(t.nodes, "c1-n1");
    assert_eq!(t.partition.as_deref(), Some("debug"));
    // The cluster was full: Slurm's estimate is after the running jobs' ends.
    let jobs = parse_squeue_json("squeue --json", &out("squeue-busy"))
        .unwrap()
        .items;
    assert!(t.start >= job(&jobs, 3).end_time.unwrap());

    let t = parse_test_only("sbatch --test-only", &err("test-only-in-reservation")).unwrap();
    let r = parse_reservations("r", &out("reservations")).unwrap();
    assert_eq!(
        t.start, r[0].start,
        "inside its reservation, from its first second"
    );
    assert_eq!((t.processors, t.nodes.as_str()), (3, "c1-n[1-2]"));

    assert!(parse_test_only("sbatch --test-only", &err("test-only-too-big")).is_err());
    assert!(parse_test_only(
        "s",
        "sbatch: Job 1 to start at soon using 2 processors on nodes n1"
    )
    .is_err());
    assert!(parse_test_only(
        "s",
        "Job 1 to start at 2026-11-22T18:47:50 using 2 processors on nodes n1"
    )
    .is_ok());
    assert!(parse_test_only(
        "s",
        "Job 1 to start at 2026-11-22T18:47:50 using 2 processors on nodes n1 in"
    )
    .is_err());
}

#[test]
fn reservation_created_and_ping() {
    assert_eq!(
        parse_reservation_created("c", &out("create-reservation")).unwrap(),
        "foresight-1"
    );
    assert_eq!(
        parse_reservation_created("c", &out("create-reservation-nodes")).unwrap(),
        "foresight-2"
    );
    assert!(parse_reservation_created("c", &out("create-reservation-busy")).is_err());
    assert!(parse_reservation_created("c", "Reservation created: \n").is_err());

    assert!(parse_ping("scontrol ping", &out("ping")).unwrap());
    assert!(!parse_ping("scontrol ping", &out("ping-unreachable")).unwrap());
    assert!(parse_ping("scontrol ping", "").is_err());
}

#[test]
fn key_values_of_a_job_record() {
    let pairs = parse_key_values(out("scontrol-job-running").trim()).unwrap();
    let get = |k: &str| {
        pairs
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(get("JobId"), Some("3"));
    assert_eq!(get("UserId"), Some("root(0)"));
    assert!(get("AllocNode:Sid").unwrap().starts_with("localhost:"));
    assert_eq!(get("TRES"), Some("cpu=4,node=2,billing=4"));
    assert_eq!(get("Power"), Some(""));
    // A value with spaces (node records print `OS=Linux 6.1.0 #1 SMP ...`).
    let p = parse_key_values("NodeName=n1 OS=Linux 6.1 #1 SMP Arch=x86_64").unwrap();
    assert_eq!(p[1], ("OS".to_owned(), "Linux 6.1 #1 SMP".to_owned()));
    assert_eq!(p[2].0, "Arch");
    assert!(parse_key_values("no pairs here").is_none());
    assert!(parse_key_values("").is_none());
}

// ------------------------------------------------------------------------------ errors --

/// What Slurm 22.05 printed for `StartTime=` on a reservation that had begun (CI's log).
#[test]
fn a_new_start_for_a_begun_reservation_is_classified() {
    let printed = "Error updating the reservation: Reservation already started\n\
                   slurm_update error: Reservation already started";
    assert_eq!(
        FailureKind::classify(printed),
        FailureKind::ReservationStarted
    );
}

/// Every captured case: a non-zero exit is an error of the expected kind, a zero exit is not.
#[test]
fn failures_are_classified() {
    let expected: &[(&str, FailureKind)] = &[
        ("test-only-too-big", FailureKind::UnsatisfiableRequest),
        ("suspend-pending", FailureKind::JobPending),
        ("hold-unknown", FailureKind::InvalidJobId),
        ("scancel-other-user", FailureKind::AccessDenied),
        ("sbatch-bad-partition", FailureKind::InvalidPartition),
        ("sbatch-bad-reservation", FailureKind::InvalidReservation),
        ("create-reservation-busy", FailureKind::ReservationBusy),
        (
            "create-reservation-duplicate",
            FailureKind::DuplicateReservation,
        ),
        ("create-reservation-bad-user", FailureKind::InvalidUser),
        ("create-reservation-bad-time", FailureKind::InvalidTime),
        ("create-reservation-not-operator", FailureKind::InvalidUser),
        (
            "delete-reservation-unknown",
            FailureKind::InvalidReservation,
        ),
        ("delete-reservation-in-use", FailureKind::ReservationInUse),
        (
            "delete-reservation-pending-job",
            FailureKind::ReservationInUse,
        ),
        ("sbatch-unreachable", FailureKind::ControllerUnreachable),
        (
            "reservations-unreachable",
            FailureKind::ControllerUnreachable,
        ),
        ("ping-unreachable", FailureKind::Other),
    ];
    let idx = index();
    for (name, (status, _, command)) in &idx {
        let o = output(name);
        let r = check_status(command, &o);
        assert_eq!(r.is_err(), *status != 0, "{name}");
        if let Err(e) = r {
            let want = expected.iter().find(|(n, _)| n == name).map(|(_, k)| *k);
            assert_eq!(e.kind(), want, "{name}: {e}");
            assert!(e.to_string().contains(command.as_str()), "{name}: {e}");
        }
    }
    for (name, _) in expected {
        assert!(idx.contains_key(*name), "{name} not captured");
    }
    let busy = check_status("c", &output("create-reservation-busy")).unwrap_err();
    assert!(busy.kind().unwrap().is_reservation_refused());
    let msg = busy.to_string();
    assert!(msg.contains("Requested nodes are busy"), "{msg}");
    assert!(check_status("c", &output("sbatch-unreachable"))
        .unwrap_err()
        .is_unavailable());
}

/// `squeue --json` and `sinfo --json` exit 0 when the controller is down: the `errors` array
/// must make them fail.
#[test]
fn json_queries_of_a_dead_controller_fail() {
    for (name, status) in [("squeue-unreachable", 0), ("sinfo-unreachable", 0)] {
        assert_eq!(index()[name].0, status);
        let e = if name.starts_with("squeue") {
            parse_squeue_json("squeue --json", &out(name))
                .map(|_| ())
                .unwrap_err()
        } else {
            parse_sinfo_json("sinfo --json", &out(name))
                .map(|_| ())
                .unwrap_err()
        };
        assert_eq!(e.kind(), Some(FailureKind::ControllerUnreachable), "{e}");
        assert!(e.is_unavailable());
    }
}

#[test]
fn parse_errors_name_the_command_and_the_text() {
    let e = parse_squeue_json(
        "SLURM_CONF=/x squeue --json",
        "{\"jobs\": [ {\"job_id\": \"seven\"} ]}",
    )
    .unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, SlurmError::Parse { .. }));
    assert!(
        msg.contains("SLURM_CONF=/x squeue --json") && msg.contains("seven"),
        "{msg}"
    );

    let e = parse_reservations(
        "scontrol show reservation -o",
        "ReservationName=r StartTime=tomorrow",
    )
    .unwrap_err();
    assert!(e.to_string().contains("StartTime=tomorrow"), "{e}");
    let e = parse_partitions(
        "scontrol show partition -o",
        "PartitionName=p TotalCPUs=many",
    )
    .unwrap_err();
    assert!(e.to_string().contains("TotalCPUs"), "{e}");
    assert!(parse_sinfo_json("sinfo --json", "{\"nodes\": null}").is_err());
    assert!(parse_squeue_json("squeue --json", "{}").is_err());
    assert!(parse_squeue_json("squeue --json", "[]").is_err());
}

/// Every prefix of a real JSON output (a command killed mid-way) is an error; prefixes of the
/// line-oriented ones give errors or the records so far; nothing panics.
#[test]
fn truncated_outputs_are_errors() {
    for name in ["squeue-busy", "sinfo-busy"] {
        let text = out(name);
        for cut in (0..text.len() - 2).step_by(7) {
            let part = text.get(..cut).unwrap_or("");
            if name.starts_with("squeue") {
                assert!(
                    parse_squeue_json("squeue --json", part).is_err(),
                    "{name} cut at {cut}"
                );
            } else {
                assert!(
                    parse_sinfo_json("sinfo --json", part).is_err(),
                    "{name} cut at {cut}"
                );
            }
        }
    }
    let text = out("reservations");
    for cut in 1..text.len() {
        let part = &text[..cut];
        if let Ok(r) = parse_reservations("r", part) {
            assert_eq!(r.len(), part.lines().count(), "cut at {cut}: {part:?}");
        }
    }
}

fn all_parsers(s: &str) {
    let _ = parse_sinfo_json("c", s);
    let _ = parse_squeue_json("c", s);
    let _ = parse_partitions("c", s);
    let _ = parse_reservations("c", s);
    let _ = parse_sbatch_parsable("c", s);
    let _ = parse_test_only("c", s);
    let _ = parse_reservation_created("c", s);
    let _ = parse_ping("c", s);
    let _ = parse_key_values(s);
    let _ = parse_timestamp(s);
    let _ = parse_duration(s);
    let _ = FailureKind::classify(s);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn garbage_gives_errors_not_panics(s in "\\PC{0,300}") {
        all_parsers(&s);
        prop_assert!(parse_sinfo_json("c", &s).is_err());
        prop_assert!(parse_squeue_json("c", &s).is_err());
        prop_assert!(parse_test_only("c", &s).is_err());
        prop_assert!(parse_reservation_created("c", &s).is_err());
        if !s.trim().is_empty() {
            prop_assert!(parse_reservations("c", &s).is_err());
            prop_assert!(parse_partitions("c", &s).is_err());
        }
    }

    #[test]
    fn garbage_key_values_give_errors_not_panics(
        pairs in proptest::collection::vec(("[A-Za-z][A-Za-z:/]{0,12}", "[ -~]{0,20}"), 0..30)
    ) {
        let line: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let line = line.join(" ");
        all_parsers(&line);
        let _ = parse_reservations("c", &format!("ReservationName=x {line}"));
        let _ = parse_partitions("c", &format!("PartitionName=x {line}"));
    }

    /// Real outputs with bytes changed: errors or plausible data, never a panic.
    #[test]
    fn mutated_fixtures_never_panic(
        which in 0usize..6,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<char>()), 1..8)
    ) {
        let name = ["squeue-busy", "sinfo-reserved", "reservations", "partitions", "test-only", "reservations-cores"][which];
        let mut chars: Vec<char> = if name == "test-only" { err(name) } else { out(name) }.chars().collect();
        for (at, c) in edits {
            let i = at.index(chars.len());
            chars[i] = c;
        }
        let text: String = chars.into_iter().collect();
        all_parsers(&text);
    }

    #[test]
    fn timestamps_round_trip(t in 0i64..253_402_300_799) {
        prop_assert_eq!(parse_timestamp(&format_timestamp(t)), Some(t));
    }
}

// ---------------------------------------------------------------------------- builders --

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn sbatch_command_lines() {
    let mut r = SbatchRequest::new("foresight-42", 3, 10, JobScript::Wrap("sleep 60".into()));
    r.reservation = Some("foresight-7".into());
    r.begin = Some(ts("2026-11-22T20:09:54"));
    r.workdir = Some("/tmp/jobs".into());
    r.comment = Some("foresight job 42".into());
    let (args, stdin) = r.args(false).unwrap();
    assert_eq!(
        args,
        strings(&[
            "--parsable",
            "--job-name=foresight-42",
            "--ntasks=3",
            "--time=10",
            "--reservation=foresight-7",
            "--begin=2026-11-22T20:09:54",
            "--chdir=/tmp/jobs",
            "--comment=foresight job 42",
            "--wrap=sleep 60",
        ])
    );
    assert_eq!(stdin, None);
    assert_eq!(r.args(true).unwrap().0[0], "--test-only");

    let mut r = SbatchRequest::new("j", 1, 1, JobScript::Inline("#!/bin/sh\ntrue\n".into()));
    r.partition = Some("debug".into());
    r.account = Some("proj".into());
    r.hold = true;
    r.export = Some(vec![("FORESIGHT_JOB_ID".into(), "42".into())]);
    r.output = Some("out-%j.txt".into());
    let (args, stdin) = r.args(false).unwrap();
    assert_eq!(
        args,
        strings(&[
            "--parsable",
            "--job-name=j",
            "--ntasks=1",
            "--time=1",
            "--partition=debug",
            "--account=proj",
            "--output=out-%j.txt",
            "--hold",
            "--export=NONE,FORESIGHT_JOB_ID=42",
        ])
    );
    assert_eq!(stdin.as_deref(), Some("#!/bin/sh\ntrue\n"));
    let r = SbatchRequest::new("j", 1, 1, JobScript::File("/x/job.sh".into()));
    assert_eq!(r.args(false).unwrap().0.last().unwrap(), "/x/job.sh");

    let bad = [
        SbatchRequest::new("two words", 1, 1, JobScript::Wrap("true".into())),
        SbatchRequest::new("--hold", 1, 1, JobScript::Wrap("true".into())),
        SbatchRequest::new("j", 0, 1, JobScript::Wrap("true".into())),
        SbatchRequest::new("j", 1, 0, JobScript::Wrap("true".into())),
        SbatchRequest::new("j", 1, 1, JobScript::Wrap(" ".into())),
        SbatchRequest::new("j", 1, 1, JobScript::Inline("true".into())),
        SbatchRequest::new("j", 1, 1, JobScript::File("-x.sh".into())),
        SbatchRequest {
            reservation: Some("a b".into()),
            ..SbatchRequest::new("j", 1, 1, JobScript::Wrap("true".into()))
        },
        SbatchRequest {
            export: Some(vec![("A".into(), "1,B=2".into())]),
            ..SbatchRequest::new("j", 1, 1, JobScript::Wrap("true".into()))
        },
    ];
    for r in bad {
        assert!(
            matches!(r.args(false), Err(SlurmError::InvalidRequest { .. })),
            "{r:?}"
        );
    }
    assert_eq!(
        (
            minutes_ceil(0),
            minutes_ceil(60),
            minutes_ceil(61),
            minutes_ceil(3600)
        ),
        (1, 1, 2, 60)
    );
}

#[test]
fn reservation_command_lines() {
    let r =
        ReservationRequest::foresight(7, StartTime::At(ts("2026-11-22T20:09:54")), 30, 3, "root");
    assert_eq!(
        r.args().unwrap(),
        strings(&[
            "create",
            "reservation",
            "ReservationName=foresight-7",
            "StartTime=2026-11-22T20:09:54",
            "Duration=30",
            "CoreCnt=3",
            "Users=root",
        ])
    );
    let r = ReservationRequest {
        name: "foresight-8".into(),
        start: StartTime::Now,
        duration_minutes: 60,
        size: ReservationSize::Nodes(2),
        users: strings(&["root", "fsowner"]),
        accounts: strings(&["proj"]),
        partition: Some("debug".into()),
        flags: strings(&["IGNORE_JOBS", "PURGE_COMP"]),
    };
    assert_eq!(
        r.args().unwrap()[3..],
        strings(&[
            "StartTime=now",
            "Duration=60",
            "NodeCnt=2",
            "PartitionName=debug",
            "Users=root,fsowner",
            "Accounts=proj",
            "Flags=IGNORE_JOBS,PURGE_COMP",
        ])
    );
    let nodes = ReservationRequest {
        size: ReservationSize::NodeList("c1-n[1-2]".into()),
        ..r.clone()
    };
    assert!(nodes
        .args()
        .unwrap()
        .contains(&"Nodes=c1-n[1-2]".to_owned()));

    let bad = [
        ReservationRequest {
            users: strings(&["root Flags=MAINT"]),
            ..r.clone()
        },
        ReservationRequest {
            users: strings(&["a,b"]),
            ..r.clone()
        },
        ReservationRequest {
            users: vec![],
            accounts: vec![],
            ..r.clone()
        },
        ReservationRequest {
            duration_minutes: 0,
            ..r.clone()
        },
        ReservationRequest {
            size: ReservationSize::Cores(0),
            ..r.clone()
        },
        ReservationRequest {
            size: ReservationSize::NodeList("n1 n2".into()),
            ..r.clone()
        },
        ReservationRequest {
            name: String::new(),
            ..r.clone()
        },
    ];
    for b in bad {
        assert!(
            matches!(b.args(), Err(SlurmError::InvalidRequest { .. })),
            "{b:?}"
        );
    }
    assert_eq!(
        delete_reservation_args("foresight-7").unwrap(),
        strings(&["delete", "reservation", "foresight-7"])
    );
    assert!(delete_reservation_args("x y").is_err());
}

#[test]
fn job_control_command_lines() {
    let j = SlurmJobId(12);
    assert_eq!(JobControl::Suspend.args(j), strings(&["suspend", "12"]));
    assert_eq!(JobControl::Resume.args(j), strings(&["resume", "12"]));
    assert_eq!(JobControl::Requeue.args(j), strings(&["requeue", "12"]));
    assert_eq!(JobControl::Hold.args(j), strings(&["hold", "12"]));
    assert_eq!(JobControl::Release.args(j), strings(&["release", "12"]));
    assert_eq!(
        scancel_args(&[SlurmJobId(1), SlurmJobId(5)]).unwrap(),
        strings(&["1", "5"])
    );
    assert!(scancel_args(&[]).is_err());
    assert_eq!(
        update_begin_args(j, StartTime::Now),
        strings(&["update", "JobId=12", "StartTime=now"])
    );
    assert_eq!(
        update_begin_args(j, StartTime::At(0)),
        strings(&["update", "JobId=12", "StartTime=1970-01-01T00:00:00"])
    );
}

#[test]
fn foresight_names() {
    assert_eq!(reservation_name(42), "foresight-42");
    assert_eq!(foresight_reservation_id("foresight-42"), Some(42));
    for other in [
        "foresight-",
        "foresight-x",
        "foresight-042",
        "maint",
        "foresight-1-2",
        "Foresight-1",
    ] {
        assert_eq!(foresight_reservation_id(other), None, "{other}");
    }
}

// ------------------------------------------------------------ client over a fake runner --

fn fake_cluster() -> FakeRunner {
    let f = FakeRunner::new();
    f.on("sinfo", &["--json"], output("sinfo-reserved"))
        .on("squeue", &["--json"], output("squeue-reserved"))
        .on("scontrol", &["show", "partition"], output("partitions"))
        .on("scontrol", &["show", "reservation"], output("reservations"));
    f
}

#[tokio::test]
async fn snapshot_is_four_commands_against_the_cluster() {
    let fake = fake_cluster();
    let client = SlurmClient::new("/etc/c1/slurm.conf", Arc::new(fake.clone())).acting_as("root");
    let s = client.snapshot().await.unwrap();
    assert_eq!(s.slurm_release.as_deref(), Some("22.05.8"));
    assert_eq!(
        (
            s.nodes.len(),
            s.partitions.len(),
            s.jobs.len(),
            s.reservations.len()
        ),
        (4, 1, 10, 2)
    );
    assert!(s.taken_at > 1_700_000_000);
    let calls = fake.calls();
    assert_eq!(calls.len(), 4);
    for c in &calls {
        assert_eq!(
            c.slurm_conf.as_deref(),
            Some(std::path::Path::new("/etc/c1/slurm.conf"))
        );
        assert_eq!(c.user.as_deref(), Some("root"));
    }
    let mut programs: Vec<String> = calls
        .iter()
        .map(|c| format!("{} {}", c.program, c.args.join(" ")))
        .collect();
    programs.sort();
    assert_eq!(
        programs,
        [
            "scontrol show partition -o",
            "scontrol show reservation -o",
            "sinfo --json",
            "squeue --json"
        ]
    );
}

#[tokio::test]
async fn a_dead_controller_fails_the_snapshot() {
    let fake = fake_cluster();
    let f2 = FakeRunner::new();
    f2.on("squeue", &[], output("squeue-unreachable"))
        .on("sinfo", &[], output("sinfo-unreachable"))
        .on(
            "scontrol",
            &["show", "reservation"],
            output("reservations-unreachable"),
        )
        .on(
            "scontrol",
            &["show", "partition"],
            output("reservations-unreachable"),
        )
        .on("scontrol", &["ping"], output("ping-unreachable"));
    let client = SlurmClient::new("/c2.conf", Arc::new(f2));
    let e = client.snapshot().await.unwrap_err();
    assert!(e.is_unavailable(), "{e}");
    assert!(!client.ping().await.unwrap());
    let up = SlurmClient::new("/c1.conf", Arc::new(fake));
    assert!(up.snapshot().await.is_ok());
}

#[tokio::test]
async fn client_commands_over_the_fake() {
    let fake = FakeRunner::new();
    fake.once("sbatch", &["--parsable"], output("sbatch-in-reservation"))
        .once("sbatch", &["--parsable"], output("sbatch-bad-reservation"))
        .on("sbatch", &["--test-only"], output("test-only"))
        .once(
            "scontrol",
            &["create", "reservation"],
            output("create-reservation"),
        )
        .once(
            "scontrol",
            &["create", "reservation"],
            output("create-reservation-busy"),
        )
        .once(
            "scontrol",
            &["delete", "reservation"],
            output("delete-reservation-in-use"),
        )
        .on(
            "scontrol",
            &["delete", "reservation"],
            output("delete-reservation"),
        )
        .on("scancel", &[], output("scancel"))
        .on("scontrol", &["suspend"], output("suspend-pending"))
        .on("scontrol", &["resume"], output("resume"))
        .on("scontrol", &["update"], CommandOutput::ok(""));
    let c = SlurmClient::new("/c1.conf", Arc::new(fake.clone()));

    let mut req = SbatchRequest::new(
        "foresight-job-1",
        3,
        10,
        JobScript::Inline("#!/bin/sh\nsleep 60\n".into()),
    );
    req.reservation = Some("foresight-1".into());
    assert_eq!(c.submit(&req).await.unwrap().job_id, SlurmJobId(13));
    let e = c.submit(&req).await.unwrap_err();
    assert_eq!(e.kind(), Some(FailureKind::InvalidReservation));
    let t = c.test_only(&req).await.unwrap();
    assert_eq!(t.processors, 2);

    let r = ReservationRequest::foresight(1, StartTime::Now, 30, 3, "root");
    assert_eq!(c.create_reservation(&r).await.unwrap(), "foresight-1");
    let e = c.create_reservation(&r).await.unwrap_err();
    assert!(e.kind().unwrap().is_reservation_refused(), "{e}");
    assert_eq!(
        c.delete_reservation("foresight-1")
            .await
            .unwrap_err()
            .kind(),
        Some(FailureKind::ReservationInUse)
    );
    c.delete_reservation("foresight-1").await.unwrap();
    c.cancel(&[SlurmJobId(13)]).await.unwrap();
    assert_eq!(
        c.control(JobControl::Suspend, SlurmJobId(6))
            .await
            .unwrap_err()
            .kind(),
        Some(FailureKind::JobPending)
    );
    c.control(JobControl::Resume, SlurmJobId(3)).await.unwrap();
    c.update_begin(SlurmJobId(8), StartTime::Now).await.unwrap();
    // Invalid requests never reach the runner.
    let before = fake.calls().len();
    assert!(c.delete_reservation("bad name").await.is_err());
    assert!(c.cancel(&[]).await.is_err());
    assert_eq!(fake.calls().len(), before);

    let calls = fake.calls();
    assert_eq!(
        calls[0].stdin.as_deref(),
        Some("#!/bin/sh\nsleep 60\n"),
        "inline scripts go to stdin"
    );
    assert!(calls[0]
        .args
        .contains(&"--reservation=foresight-1".to_owned()));
    assert_eq!(
        calls.last().unwrap().args,
        strings(&["update", "JobId=8", "StartTime=now"])
    );
    // No rule: exit 127, an error naming the command.
    let e = c
        .control(JobControl::Hold, SlurmJobId(1))
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("SLURM_CONF=/c1.conf scontrol hold 1"),
        "{e}"
    );
}
