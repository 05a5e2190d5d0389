#![allow(clippy::unwrap_used)] // tests fail loudly by design
//! End-to-end: the CLI as a Slurm user meets it (issue 14), against a real server: `job
//! list` as squeue, walltimes with sbatch's meaning, times in the local zone, actions that
//! print the state they lead to, finding a server by its data directory.

use crate::common::{int, now, Server, TWO_CLUSTERS};
use serde_json::Value;
use std::time::Duration;

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

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
    assert_eq!(&row[5..8], ["1:00", "4", "a:2+b:2"], "{table}");
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

    // Several at once, as scancel takes them: one refused does not stop the others.
    let (a, b) = (
        s.submit(&["--hold", "--", "true"]),
        s.submit(&["--hold", "--", "true"]),
    );
    let out = s
        .cli()
        .args(["job", "cancel", &a.to_string(), "999999", &b.to_string()])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(!out.status.success());
    assert_eq!(stdout, format!("job {a}: cancelled\njob {b}: cancelled\n"));
    assert!(
        stderr.contains("job 999999: ")
            && stderr.contains("1 of 3 jobs could not be cancelled: 999999"),
        "{stderr}"
    );
    let (c, d) = (
        s.submit(&["--hold", "--", "true"]),
        s.submit(&["--hold", "--", "true"]),
    );
    let listed: Value = serde_json::from_str(&s.run(&[
        "job",
        "release",
        &c.to_string(),
        &d.to_string(),
        "-o",
        "json",
    ]))
    .unwrap();
    let ids: Vec<u64> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [c, d]);
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

/// `job wait` ends when the jobs do, with the exit code of the first that did not complete.
#[test]
fn job_wait_exits_with_the_jobs_code() {
    let s = Server::start(2);
    let local =
        |script: &str| s.submit(&["--cluster", "local", "-t", "1m", "--", "sh", "-c", script]);
    let ok = local("sleep 1");
    let three = local("sleep 1; exit 3");
    let code = |ids: &[u64]| {
        let mut a = vec!["job".to_string(), "wait".to_string()];
        a.extend(ids.iter().map(u64::to_string));
        let out = s.cli().args(&a).output().unwrap();
        (
            out.status.code().unwrap(),
            String::from_utf8(out.stdout).unwrap(),
        )
    };
    let (c, out) = code(&[ok]);
    assert_eq!(c, 0, "{out}");
    assert_eq!(out, format!("job {ok}: completed, exit code 0\n"));
    let (c, out) = code(&[ok, three]);
    assert_eq!(c, 3, "{out}");
    assert!(
        out.contains(&format!("job {three}: failed, exit code 3")),
        "{out}"
    );
    let killed = local("kill -TERM $$");
    let (c, out) = code(&[killed]);
    assert_eq!(c, 128 + 15, "{out}");
    let cancelled = s.submit(&["--hold", "--", "true"]);
    s.run(&["job", "cancel", &cancelled.to_string()]);
    assert_eq!(code(&[ok, cancelled]).0, 1);
    let e = s.cli().args(["job", "wait", "999"]).output().unwrap();
    assert_eq!(e.status.code(), Some(2));
}

/// `job cat` reads a job's output through the API, as its owner, from anywhere.
#[test]
fn job_cat_prints_the_output_to_its_owner() {
    const TWO: &str =
        "[[cluster]]\nname = \"a\"\nprocs = 1\n\n[[cluster]]\nname = \"b\"\nprocs = 1\n";
    let s = Server::with_config(TWO);
    let alice = s.add_user("alice", None);
    let bob = s.add_user("bob", None);
    let id = parse(&s.run_as(
        &alice,
        &[
            "job",
            "submit",
            "--cluster",
            "a",
            "-t",
            "1m",
            "-o",
            "json",
            "--",
            "sh",
            "-c",
            "echo out; echo err >&2",
        ],
    ))["id"]
        .as_u64()
        .unwrap();
    s.wait_final(id, Duration::from_secs(30));
    let cat = |token: &str, args: &[&str]| {
        let mut a = vec!["job", "cat"];
        a.extend(args);
        s.cli_as(token).args(&a).output().unwrap()
    };
    let out = cat(&alice, &[&id.to_string()]);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "out\n");
    let out = cat(&alice, &[&id.to_string(), "--stderr"]);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "err\n");
    let out = cat(&bob, &[&id.to_string()]);
    assert_eq!(out.status.code(), Some(2), "bob may not read alice's job");
    let out = cat(&alice, &[&id.to_string(), "--part", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8(out.stderr).unwrap().contains("part"));
    // A co-allocated job: one file per part.
    let wide = s.submit(&[
        "-n",
        "2",
        "-t",
        "1m",
        "--",
        "sh",
        "-c",
        "echo $FORESIGHT_CLUSTER",
    ]);
    s.wait_final(wide, Duration::from_secs(60));
    let parts: Vec<String> = (0..2)
        .map(|p| {
            let out = s
                .cli()
                .args(["job", "cat", &wide.to_string(), "--part", &p.to_string()])
                .output()
                .unwrap();
            String::from_utf8(out.stdout).unwrap()
        })
        .collect();
    let mut sorted = parts.clone();
    sorted.sort();
    assert_eq!(sorted, ["a\n", "b\n"], "{parts:?}");
    let pending = s.submit(&["--hold", "--", "true"]);
    let out = s
        .cli()
        .args(["job", "cat", &pending.to_string()])
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("has not started"), "{err}");
}

/// `explain` and `show` speak the local zone too, from the instants the API carries as
/// numbers (`-o json` shows them), and a job cancelled before it started shows no planned
/// start.
#[test]
fn explain_shows_local_times_and_no_plan_after_cancelling() {
    let s = Server::start(1);
    let busy = s.submit(&["--cluster", "local", "-t", "10m", "--", "sleep", "60"]);
    let running = s.wait_job(busy, "running", Duration::from_secs(30), |j| {
        j["state"] == "running"
    });
    let waiting = s.submit(&["-t", "5m", "--", "true"]);
    let j = s.wait_job(waiting, "planned", Duration::from_secs(10), |j| {
        !j["planned_start"].is_null()
    });
    assert!(!j["planned_start"].is_null());
    let rfc3339_utc = |t: &str| {
        t.as_bytes().windows(20).any(|w| {
            w[4] == b'-' && w[10] == b'T' && w[19] == b'Z' && w[..4].iter().all(u8::is_ascii_digit)
        })
    };
    for id in [busy, waiting] {
        let e = s.run(&["job", "explain", &id.to_string()]);
        assert!(!rfc3339_utc(&e), "{e}");
        assert!(!e.contains(" s from now"), "{e}");
    }
    let e = s.run(&["job", "explain", &busy.to_string()]);
    let since = int(&running, "started_at");
    let line = format!(
        "  - running on local (1 processor) since {}\n",
        jiff::Timestamp::from_second(since)
            .unwrap()
            .strftime("%Y-%m-%d %H:%M:%S UTC")
    );
    assert!(e.contains(&line), "{line:?} in {e}");
    // The same reason as the API carries it: words without the time, the time a number.
    let json = parse(&s.run(&["job", "explain", &busy.to_string(), "-o", "json"]));
    assert_eq!(
        json["reasons"][0],
        serde_json::json!({"text": "running on local (1 processor) since", "at": since}),
        "{json}"
    );
    assert!(json["now"].as_i64().is_some_and(|n| n >= since), "{json}");
    s.run(&["job", "cancel", &waiting.to_string()]);
    let e = s.run(&["job", "explain", &waiting.to_string()]);
    assert!(!e.contains("planned start"), "{e}");
    let show = s.run(&["job", "show", &waiting.to_string()]);
    assert!(show.contains("planned       -\n"), "{show}");
    // A held job says so once.
    let held = s.submit(&["--hold", "-t", "5m", "--", "true"]);
    let e = s.run(&["job", "explain", &held.to_string()]);
    assert_eq!(e.matches("held").count(), 1, "{e}");
    s.run(&["job", "cancel", &held.to_string()]);
    s.run(&["job", "cancel", &busy.to_string()]);
}
