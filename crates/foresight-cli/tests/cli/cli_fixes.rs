//! End-to-end: what a new user of the real `foresight` binary sees without a server
//! (issue 14): help texts, policy names, refusals before work, errors said once,
//! schedules that read back.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use assert_cmd::Command;
use serde_json::Value;

fn foresight() -> Command {
    let mut c = Command::cargo_bin("foresight").unwrap();
    c.env("TZ", "UTC")
        .env_remove("FORESIGHT_SERVER")
        .env_remove("FORESIGHT_TOKEN")
        .env_remove("FORESIGHT_DATA_DIR");
    c
}

fn stdout(args: &[&str]) -> String {
    let out = foresight().args(args).assert().success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

fn stderr_failing(args: &[&str]) -> (i32, String) {
    let out = foresight().args(args).assert().failure();
    let o = out.get_output();
    (
        o.status.code().unwrap(),
        String::from_utf8(o.stderr.clone()).unwrap(),
    )
}

fn json(args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["-o", "json"]);
    serde_json::from_str(&stdout(&a)).unwrap()
}

#[test]
fn server_options_appear_only_on_commands_that_talk_to_a_server() {
    for args in [
        &["sim", "run", "--help"][..],
        &["sim", "grid", "--help"],
        &["plan", "select", "--help"],
        &["server", "start", "--help"],
        &["completion", "--help"],
    ] {
        let help = stdout(args);
        assert!(!help.contains("--server"), "{args:?}:\n{help}");
        assert!(!help.contains("--token"), "{args:?}:\n{help}");
    }
    for args in [
        &["job", "list", "--help"][..],
        &["job", "submit", "--help"],
        &["estimate", "--help"],
        &["reservation", "create", "--help"],
        &["cluster", "list", "--help"],
        &["user", "list", "--help"],
        &["plan", "show", "--help"],
    ] {
        let help = stdout(args);
        for opt in ["--server", "--token", "--data-dir"] {
            assert!(help.contains(opt), "{args:?} lacks {opt}:\n{help}");
        }
    }
}

#[test]
fn help_texts() {
    let top = stdout(&["--help"]);
    assert!(!top.contains("tomorrow"), "{top}");
    insta::assert_snapshot!("top_help", top);
    insta::assert_snapshot!("job_submit_help", stdout(&["job", "submit", "--help"]));
    insta::assert_snapshot!("job_list_help", stdout(&["job", "list", "--help"]));
    insta::assert_snapshot!(
        "reservation_create_help",
        stdout(&["reservation", "create", "--help"])
    );
}

#[test]
fn without_a_server_the_error_lists_every_way_to_find_one() {
    let dir = tempfile::tempdir().unwrap();
    let nowhere = dir.path().join("nowhere");
    let out = foresight()
        .args(["job", "list", "--data-dir"])
        .arg(&nowhere)
        .assert()
        .failure();
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    let err = err.replace(&nowhere.display().to_string(), "[DIR]");
    for way in [
        "--server",
        "FORESIGHT_SERVER",
        "--data-dir",
        "FORESIGHT_DATA_DIR",
        "foresight server start",
    ] {
        assert!(err.contains(way), "{way}: {err}");
    }
    insta::assert_snapshot!("no_server", err);
}

#[test]
fn policies_are_named_as_given() {
    let run = |args: &[&str]| {
        let mut a = vec!["sim", "run", "--jobs", "200", "--procs", "16"];
        a.extend(args);
        json(&a)
    };
    let p = run(&["--policy", "firstfit:3"]);
    assert_eq!(p["policy"], "firstfit:3", "{p}");
    let p = run(&["--policy", "easy", "--backfill", "greedy"]);
    assert_eq!(
        (&p["policy"], &p["backfill"]),
        (&"easy".into(), &"greedy".into())
    );
    let p = run(&["--policy", "depth:3", "--backfill", "bestfit"]);
    assert_eq!(
        (&p["policy"], &p["backfill"]),
        (&"depth:3".into(), &"bestfit".into())
    );
    let p = run(&["--policy", "fcfs", "--backfill", "none"]);
    assert_eq!(
        (&p["policy"], &p["backfill"]),
        (&"fcfs".into(), &"none".into())
    );
}

#[test]
fn fcfs_with_a_backfill_choice_is_refused() {
    let (code, err) = stderr_failing(&[
        "sim",
        "run",
        "--jobs",
        "10",
        "--policy",
        "fcfs",
        "--backfill",
        "bestfit",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("fcfs never backfills") && err.contains("--backfill bestfit"),
        "{err}"
    );
}

#[test]
fn jobs_out_is_checked_before_simulating() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such/dir/x.csv");
    let started = std::time::Instant::now();
    // A million jobs would take many seconds: the refusal must come first.
    let (code, err) = stderr_failing(&[
        "sim",
        "run",
        "--jobs",
        "1000000",
        "--jobs-out",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(started.elapsed().as_secs() < 5, "{:?}", started.elapsed());
    assert!(err.contains("creating") && err.contains("x.csv"), "{err}");
    let bad_name = dir.path().join("x.txt");
    let (_, err) = stderr_failing(&[
        "sim",
        "run",
        "--jobs",
        "1000000",
        "--jobs-out",
        bad_name.to_str().unwrap(),
    ]);
    assert!(err.contains(".csv or .swf"), "{err}");
    assert!(!bad_name.exists());
    // A simulation that fails leaves no empty file behind.
    let trace = dir.path().join("bad.swf");
    std::fs::write(
        &trace,
        "; MaxProcs: 4\n1 0 -1 10 99 -1 -1 99 10 -1 1 1 1 -1 1 -1 -1 -1\n",
    )
    .unwrap();
    let out = dir.path().join("out.csv");
    let failed = foresight()
        .args([
            "sim",
            "run",
            "--trace",
            trace.to_str().unwrap(),
            "--jobs-out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    if !failed.status.success() {
        assert!(!out.exists(), "a failed run left {}", out.display());
    }
}

#[test]
fn errors_say_their_cause_once() {
    let (code, err) = stderr_failing(&["sim", "run", "--trace", "/no/such/trace.swf"]);
    assert_eq!(code, 1);
    assert_eq!(
        err.matches("No such file or directory").count(),
        1,
        "the cause is repeated: {err}"
    );
}

#[test]
fn a_synthetic_schedule_reads_back_as_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    let swf = dir.path().join("x.swf");
    let first = json(&[
        "sim",
        "run",
        "--jobs",
        "300",
        "--procs",
        "32",
        "--jobs-out",
        swf.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&swf).unwrap();
    assert!(text.contains("; MaxProcs: 32\n"), "{}", &text[..200]);
    // Without --procs: the machine size comes from the header written.
    let again = json(&["sim", "run", "--trace", swf.to_str().unwrap()]);
    assert_eq!(again["procs"], 32, "{again}");
    assert_eq!(again["jobs"], first["jobs"], "{again}");
}

#[test]
fn negative_prices_reach_the_price_check() {
    // Parsed as a value (not an unknown option): the failure is finding no server.
    for args in [
        &["job", "submit", "--price", "-1", "--", "true"][..],
        &["estimate", "--price", "-1"],
    ] {
        let (_, err) = stderr_failing(args);
        assert!(!err.contains("unexpected argument"), "{args:?}: {err}");
        assert!(err.contains("no server found"), "{args:?}: {err}");
    }
}

#[test]
fn bad_walltimes_and_times_are_refused_naming_the_input() {
    let (code, err) = stderr_failing(&["job", "submit", "-t", "1h30", "--", "true"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("\"1h30\"") && err.contains("D-H:M:S"), "{err}");
    let (code, err) = stderr_failing(&["plan", "show", "--from", "soon"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--from") && err.contains("\"soon\""), "{err}");
}
