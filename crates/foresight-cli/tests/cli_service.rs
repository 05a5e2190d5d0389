#![allow(clippy::unwrap_used)] // tests fail loudly by design
//! End-to-end: the CLI as a Slurm user meets it (issue 14), against a real server: `job
//! list` as squeue, walltimes with sbatch's meaning, times in the local zone, actions that
//! print the state they lead to, finding a server by its data directory.

mod common;

use common::{int, now, Server};
use serde_json::Value;
use std::time::Duration;

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

const TWO_CLUSTERS: &str = r#"
[[cluster]]
name = "a"
procs = 2

[[cluster]]
name = "b"
procs = 2
"#;

/// `-t 90` is 90 minutes, `-t 1-12` a day and a half; JSON strings read alike, JSON numbers
/// are seconds.
#[test]
fn walltimes_have_sbatch_meaning() {
    let s = Server::start(2);
    let walltime = |t: &str| {
        let id = s.submit(&["--hold", "-t", t, "--", "true"]);
        int(&s.show(id), "walltime")
    };
    assert_eq!(walltime("90"), 5_400);
    assert_eq!(walltime("10:30"), 630);
    assert_eq!(walltime("1:00:00"), 3_600);
    assert_eq!(walltime("1-12"), 129_600);
    assert_eq!(walltime("0-1:30"), 5_400);
    assert_eq!(walltime("90s"), 90);
    let http = s.http();
    let id = http.submit(serde_json::json!({"walltime": "90", "hold": true, "command": ["true"]}));
    assert_eq!(int(&s.show(id), "walltime"), 5_400);
    let id = http.submit(serde_json::json!({"walltime": 90, "hold": true, "command": ["true"]}));
    assert_eq!(int(&s.show(id), "walltime"), 90);
}

/// squeue: active jobs by default, `--all` for history, `--state` with several states in any
/// case, TIME elapsed, every cluster of a co-allocated job.
#[test]
fn job_list_is_squeue() {
    let s = Server::with_config(TWO_CLUSTERS);
    let done = s.submit(&["--cluster", "a", "--name", "done", "-t", "1m", "--", "true"]);
    s.wait_final(done, Duration::from_secs(30));
    let wide = s.submit(&["--name", "wide", "-n", "4", "-t", "1m", "--", "sleep", "30"]);
    s.wait_job(wide, "running", Duration::from_secs(30), |j| {
        j["state"] == "running"
    });
    let held = s.submit(&["--name", "held", "--hold", "-t", "2h", "--", "true"]);
    let ids = |args: &[&str]| -> Vec<u64> {
        let mut a = vec!["job", "list", "-o", "json"];
        a.extend(args);
        parse(&s.run(&a))
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(ids(&[]), vec![wide, held]);
    assert_eq!(ids(&["--all"]), vec![done, wide, held]);
    assert_eq!(ids(&["--state", "COMPLETED,Pending"]), vec![done, held]);
    assert_eq!(
        ids(&["--state", "completed", "--state", "running"]),
        vec![done, wide]
    );
    assert_eq!(ids(&["--state", "suspended"]), Vec::<u64>::new());
    let e = s
        .cli()
        .args(["job", "list", "--state", "asleep"])
        .assert()
        .failure();
    let err = String::from_utf8(e.get_output().stderr.clone()).unwrap();
    assert!(err.contains("\"asleep\" is not a job state"), "{err}");

    std::thread::sleep(Duration::from_millis(1100));
    let table = s.run(&["job", "list"]);
    let lines: Vec<&str> = table.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header,
        ["ID", "USER", "NAME", "STATE", "TIME", "LIMIT", "PROCS", "CLUSTER", "START"]
    );
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        &row[..4],
        [&wide.to_string()[..], "admin", "wide", "running"]
    );
    assert!(row[4].starts_with("0:0"), "elapsed {}: {table}", row[4]);
    assert_eq!(&row[5..8], ["1m", "4", "a:2+b:2"], "{table}");
    assert_eq!(row.last(), Some(&"UTC"), "{table}");
    let row: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(&row[3..6], ["pending", "(held)", "0:00"], "{table}");
    s.run(&["job", "cancel", &wide.to_string()]);
}

/// `cancel` and `requeue` print the state the job is left in.
#[test]
fn actions_print_the_resulting_state() {
    let s = Server::start(1);
    let run = s.submit(&["-t", "1m", "--cluster", "local", "--", "sleep", "60"]);
    s.wait_job(run, "running", Duration::from_secs(30), |j| {
        j["state"] == "running"
    });
    // Requeued, it may already run again (a new attempt): never the old run's `running`.
    std::thread::sleep(Duration::from_millis(1100));
    let first = int(&s.show(run), "started_at");
    let out = s.run(&["job", "requeue", &run.to_string()]);
    assert!(
        !out.contains("stopping") && out.starts_with(&format!("job {run}: ")),
        "{out}"
    );
    if out.contains("running") {
        assert!(int(&s.show(run), "started_at") > first);
    }
    s.wait_job(run, "running again", Duration::from_secs(30), |j| {
        j["state"] == "running"
    });
    // (Starts are whole seconds: the run to cancel began in an earlier one.)
    std::thread::sleep(Duration::from_millis(1100));
    let out = s.run(&["job", "cancel", &run.to_string()]);
    assert_eq!(out, format!("job {run}: cancelled\n"));
    let queued = s.submit(&["--hold", "--", "true"]);
    let out = s.run(&["job", "cancel", &queued.to_string()]);
    assert_eq!(out, format!("job {queued}: cancelled\n"));
}

/// `--start` reads sbatch `--begin` forms; times come back in the local zone, marked.
#[test]
fn times_are_read_as_sbatch_begin_and_shown_in_the_local_zone() {
    let s = Server::start(2);
    let create = |start: &str, tz: &str| -> Value {
        let out = s
            .cli()
            .env("TZ", tz)
            .args([
                "reservation",
                "create",
                "--cluster",
                "local",
                "-n",
                "1",
                "-t",
                "10m",
                "--start",
                start,
                "-o",
                "json",
            ])
            .assert()
            .success();
        parse(&String::from_utf8(out.get_output().stdout.clone()).unwrap())
    };
    let t0 = now();
    let r = create("now+1hour", "UTC");
    assert!(
        (t0 + 3_600..=now() + 3_600).contains(&int(&r, "start")),
        "{r}"
    );
    let r = create("+90", "UTC");
    assert!(
        (t0 + 5_400..=now() + 5_400).contains(&int(&r, "start")),
        "{r}"
    );
    // A local date and time means the same instant as its UTC spelling.
    let r = create("2030-06-01T14:00", "Europe/Berlin");
    let berlin = int(&r, "start");
    let r = create("2030-06-01T12:00:00Z", "UTC");
    assert_eq!(berlin, int(&r, "start"));
    let shown = |tz: &str| {
        let out = s
            .cli()
            .env("TZ", tz)
            .args(["reservation", "show", &r["id"].to_string()])
            .assert()
            .success();
        String::from_utf8(out.get_output().stdout.clone()).unwrap()
    };
    let utc = shown("UTC");
    assert!(utc.contains("2030-06-01 12:00:00 UTC"), "{utc}");
    let berlin = shown("Europe/Berlin");
    assert!(berlin.contains("2030-06-01 14:00:00 CEST"), "{berlin}");
}

/// A client given the server's data directory finds it, by flag or environment.
#[test]
fn a_server_is_found_by_its_data_dir() {
    let s = Server::start(1);
    let elsewhere = s.root().join("elsewhere");
    let mut c = s.cli();
    c.env("FORESIGHT_DATA_DIR", &elsewhere)
        .args(["cluster", "list", "--data-dir"])
        .arg(&s.dir);
    let out = c.assert().success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(text.contains("local"), "{text}");
    let mut c = s.cli();
    c.env("FORESIGHT_DATA_DIR", &elsewhere)
        .args(["cluster", "list"]);
    let out = c.assert().failure();
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(
        err.contains("no server found") && err.contains("--data-dir"),
        "{err}"
    );
}
