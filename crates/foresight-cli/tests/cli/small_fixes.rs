//! End-to-end, on the real binary and service: small defects users met (issue 35, item 8).
//! - `job wait` on an array waits for every task;
//! - `job list`'s TIME leaves out time suspended;
//! - `job history` names array tasks as `job list` does and times each part;
//! - `reservation list` shows the reservations not yet over, and the id `reservation
//!   create` prints is the one to submit into;
//! - users show the Unix account their jobs run as.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use crate::common::*;
use serde_json::Value;
use std::time::Duration;

const T: Duration = Duration::from_secs(60);

/// The jobs (JSON) of array job `id`.
fn tasks(s: &Server, id: u64) -> Vec<Value> {
    s.http()
        .jobs()
        .into_iter()
        .filter(|j| j["array_job_id"] == id)
        .collect()
}

/// The cell of column `header` in the table row whose first cell is `first` (tables are
/// left-aligned under their headers, and a cell may hold spaces: `pending (held)`).
fn cell(table: &str, first: &str, header: &str) -> String {
    let mut lines = table.lines();
    let head = lines.next().unwrap();
    let at = head
        .find(&format!("  {header}"))
        .map(|i| i + 2)
        .unwrap_or_else(|| panic!("no column {header}: {table}"));
    let row = lines
        .find(|l| l.split_whitespace().next() == Some(first))
        .unwrap_or_else(|| panic!("no row {first}: {table}"));
    row[at..].split("  ").next().unwrap().trim().to_string()
}

/// `M:SS`, `H:MM:SS` or `D-HH:MM:SS` in seconds.
fn secs(text: &str) -> i64 {
    let (days, rest) = match text.split_once('-') {
        Some((d, r)) => (d.parse::<i64>().unwrap(), r),
        None => (0, text),
    };
    days * 86_400
        + rest
            .split(':')
            .fold(0, |acc, p| acc * 60 + p.parse::<i64>().unwrap())
}

#[test]
fn job_wait_on_an_array_waits_for_every_task_with_the_first_failure_as_its_code() {
    let s = Server::start(4);
    // Task 0 ends at once, task 1 completes later, task 2 later still and fails.
    let script =
        "case $FORESIGHT_ARRAY_TASK_ID in 0) exit 0;; 1) sleep 2;; *) sleep 3; exit 4;; esac";
    let id = s.submit(&[
        "--cluster",
        "local",
        "-t",
        "1m",
        "--array",
        "0-2",
        "--",
        "sh",
        "-c",
        script,
    ]);
    let out = s
        .cli()
        .args(["job", "wait", &id.to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    // When it returns, every task has ended, not only task 0.
    let ts = tasks(&s, id);
    assert_eq!(ts.len(), 3, "{ts:?}");
    assert!(
        ts.iter().all(is_final),
        "job wait returned early: {text}\n{ts:#?}"
    );
    // Its code is that of the first task that did not complete, as for several jobs.
    assert_eq!(out.status.code(), Some(4), "{text}");
    for t in 0..3 {
        assert!(text.contains(&format!("job {id}_{t}: ")), "{text}");
    }
    assert!(
        text.contains(&format!("job {id}_2: failed, exit code 4")),
        "{text}"
    );
    // One task waits for it alone; JSON lists every task of an array.
    let one = s
        .cli()
        .args(["job", "wait", &format!("{id}_1")])
        .output()
        .unwrap();
    assert_eq!(one.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(one.stdout).unwrap(),
        format!("job {id}_1: completed, exit code 0\n")
    );
    let json = s
        .cli()
        .args(["job", "wait", &id.to_string(), "-o", "json"])
        .output()
        .unwrap();
    assert_eq!(json.status.code(), Some(4));
    let json: Vec<Value> = serde_json::from_slice(&json.stdout).unwrap();
    let indices: Vec<u64> = json
        .iter()
        .map(|j| j["array_task_id"].as_u64().unwrap())
        .collect();
    assert_eq!(indices, [0, 1, 2], "{json:#?}");
}

#[test]
fn job_list_time_leaves_out_time_suspended() {
    let s = Server::start(2);
    let id = s.submit(&["--cluster", "local", "-t", "10m", "--", "sleep", "60"]);
    let j = s.wait_job(id, "running", T, |j| j["state"] == "running");
    let started = int(&j, "started_at");
    std::thread::sleep(Duration::from_secs(1));
    s.run(&["job", "suspend", &id.to_string()]);
    let suspended = now();
    std::thread::sleep(Duration::from_secs(4));
    // What it ran before the suspension, not the 5 s since its start.
    let table = s.run(&["job", "list"]);
    let time = secs(&cell(&table, &id.to_string(), "TIME"));
    assert!(now() - started >= 5);
    assert!(time <= suspended - started + 1, "TIME {time}: {table}");
    let ran = int(&s.show(id), "run_secs");
    assert!(ran <= suspended - started + 1, "run_secs {ran}");
    // Resumed, it counts again.
    s.run(&["job", "resume", &id.to_string()]);
    std::thread::sleep(Duration::from_secs(2));
    let after = int(&s.show(id), "run_secs");
    assert!(after > ran, "{after} after {ran}");
    assert!(after <= now() - started - 3, "{after}");
    // Ended, its run time stays what it ran.
    s.run(&["job", "cancel", &id.to_string()]);
    let done = s.wait_final(id, T);
    let elapsed = int(&done, "ended_at") - int(&done, "started_at");
    let total = int(&done, "run_secs");
    assert!(total <= elapsed - 3, "{total} of {elapsed}: {done}");
    let table = s.run(&["job", "list", "--all"]);
    assert_eq!(
        secs(&cell(&table, &id.to_string(), "TIME")),
        total,
        "{table}"
    );
}

#[test]
fn job_history_names_array_tasks_as_job_list_and_times_each_part() {
    let s = Server::with_config(
        "[[cluster]]\nname = \"a\"\nprocs = 1\n\n[[cluster]]\nname = \"b\"\nprocs = 1\n",
    );
    let array = s.submit(&["--cluster", "a", "-t", "1m", "--array", "0-1", "--", "true"]);
    // Co-allocated over a and b; the part on b ends two seconds after the part on a.
    let wide = s.submit(&[
        "-n",
        "2",
        "-t",
        "1m",
        "--",
        "sh",
        "-c",
        "if [ \"$FORESIGHT_CLUSTER\" = b ]; then sleep 2; fi",
    ]);
    let w = s.wait_final(wide, T);
    assert_eq!(w["state"], "completed", "{w}");
    for t in tasks(&s, array) {
        s.wait_final(t["id"].as_u64().unwrap(), T);
    }
    let parts = w["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 2, "co-allocated: {w}");
    let (a, b) = (&parts[0], &parts[1]);
    assert_eq!(
        (a["cluster"].as_str(), b["cluster"].as_str()),
        (Some("a"), Some("b"))
    );
    assert!(int(b, "ended_at") > int(a, "ended_at"), "{w}");
    assert_eq!(int(b, "ended_at"), int(&w, "ended_at"), "{w}");

    let table = s.run(&["job", "history", "--since", "now-1hour"]);
    let list = s.run(&["job", "list", "--all"]);
    // Tasks as `job list` names them, never by the service's own numbers.
    for t in ["0", "1"] {
        let name = format!("{array}_{t}");
        assert!(
            list.lines().any(|l| l.starts_with(&format!("{name} "))),
            "{list}"
        );
        assert!(
            table.lines().any(|l| l.starts_with(&format!("{name} "))),
            "{table}"
        );
    }
    assert!(
        !table
            .lines()
            .any(|l| l.starts_with(&format!("{} ", array + 1))),
        "{table}"
    );
    // Each part line carries its own start, end and elapsed time.
    for (i, p) in parts.iter().enumerate() {
        let first = format!("{wide}.{i}");
        let start = cell(&table, &first, "START");
        let end = cell(&table, &first, "END");
        assert_eq!(start, cell(&table, &wide.to_string(), "START"), "{table}");
        assert!(!end.is_empty() && end != "-", "{table}");
        let elapsed = secs(&cell(&table, &first, "ELAPSED"));
        assert_eq!(
            elapsed,
            int(p, "ended_at") - int(p, "started_at"),
            "{table}"
        );
    }
    assert_ne!(
        cell(&table, &format!("{wide}.0"), "END"),
        cell(&table, &format!("{wide}.1"), "END"),
        "{table}"
    );
    // JSON: the display name beside the id, and the parts' times.
    let rows: Vec<Value> =
        serde_json::from_str(&s.run(&["job", "history", "--since", "now-1hour", "-o", "json"]))
            .unwrap();
    let task1 = rows.iter().find(|r| r["id"] == array + 1).unwrap();
    assert_eq!(task1["job"], format!("{array}_1"));
    let h = rows.iter().find(|r| r["id"] == wide).unwrap();
    assert_eq!(h["parts"][1]["end"], b["ended_at"], "{h}");
    assert_eq!(h["parts"][0]["end"], a["ended_at"], "{h}");
}

#[test]
fn reservation_list_shows_those_not_over_and_the_printed_id_is_the_one_to_use() {
    let s = Server::start(2);
    // A global job: planned, it gets a reservation of its own, over once it has run.
    let global = s.submit(&["-t", "1m", "--", "true"]);
    let g = s.wait_final(global, T);
    assert_eq!(g["state"], "completed", "{g}");
    let list = |all: bool| -> Vec<Value> {
        let mut a = vec!["reservation", "list", "-o", "json"];
        if all {
            a.push("--all");
        }
        serde_json::from_str(&s.run(&a)).unwrap()
    };
    let live = ["tentative", "committed", "active"];
    let everything = list(true);
    assert!(
        everything
            .iter()
            .any(|r| r["kind"] == "job" && !live.contains(&r["state"].as_str().unwrap())),
        "the job's own reservation, over: {everything:#?}"
    );
    assert!(
        list(false)
            .iter()
            .all(|r| live.contains(&r["state"].as_str().unwrap())),
        "{:#?}",
        list(false)
    );
    let table = s.run(&["reservation", "list"]);
    assert!(!table.contains("finished"), "{table}");

    // Jobs and reservations share one counter: the id printed is the one to submit into.
    let printed = s.run(&[
        "reservation",
        "create",
        "--cluster",
        "local",
        "-n",
        "1",
        "-t",
        "10m",
        "--user",
        "admin",
    ]);
    let r: u64 = printed.trim().parse().unwrap();
    assert!(r > global, "{r}");
    let inside = s.submit(&["--reservation", &r.to_string(), "-t", "1m", "--", "true"]);
    let j = s.wait_final(inside, T);
    assert_eq!(j["state"], "completed", "{j}");
    assert_eq!(j["reservation"], r, "{j}");
    // Reservation 1 is no reservation at all here (job 1 took the id).
    let wrong = s
        .cli()
        .args([
            "job",
            "submit",
            "--reservation",
            "1",
            "-t",
            "1m",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert!(!wrong.status.success());
    let shown = list(false);
    assert!(shown.iter().any(|x| x["id"] == r), "{shown:#?}");
    // The documentation's examples are the one that works: they submit with the id printed.
    for page in ["quick-start.md", "user/reservations.md"] {
        let path = format!("{}/../../docs/src/{page}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("R=$($B reservation create") && text.contains("--reservation $R"),
            "{page} submits into the id `reservation create` printed"
        );
        assert!(!text.contains("--reservation 1 "), "{page}");
    }
}

#[test]
fn users_show_the_unix_account_their_jobs_run_as() {
    let s = Server::with_env(2, &[("FORESIGHT_UNIX_USER", "*=nobody")]);
    s.add_user("alice", None);
    let users: Vec<Value> = serde_json::from_str(&s.run(&["user", "list", "-o", "json"])).unwrap();
    let alice = users.iter().find(|u| u["name"] == "alice").unwrap();
    assert_eq!(
        alice["unix_user"],
        Value::Null,
        "none set by an administrator"
    );
    assert_eq!(alice["runs_as"], "nobody", "{alice}");
    assert_eq!(alice["runs_as_from"], "default", "{alice}");
    let table = s.run(&["user", "list"]);
    assert_eq!(
        cell(&table, "alice", "UNIX"),
        "nobody (default *)",
        "{table}"
    );
    // One set by an administrator wins, and says so.
    let changed: Value = serde_json::from_str(&s.run(&[
        "user",
        "modify",
        "alice",
        "--unix-user",
        "daemon",
        "-o",
        "json",
    ]))
    .unwrap();
    assert_eq!(changed["runs_as"], "daemon", "{changed}");
    assert_eq!(changed["runs_as_from"], "user", "{changed}");
    assert_eq!(cell(&s.run(&["user", "list"]), "alice", "UNIX"), "daemon");
}
