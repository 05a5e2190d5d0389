//! End-to-end: the real `foresight` binary on small traces.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use assert_cmd::Command;
use predicates::str::contains;
use serde_json::Value;
use std::io::Write;
use std::path::PathBuf;

/// The hand-checked trace of the simulator tests: EASY backfills job 3 at 10, FCFS does not.
const TINY: &str = "; MaxProcs: 4
1   0 -1 100 2 -1 -1 2 100 -1 1 1 1 -1 1 -1 -1 -1
2   0 -1  50 4 -1 -1 4  50 -1 1 2 1 -1 1 -1 -1 -1
3  10 -1  20 2 -1 -1 2  20 -1 1 3 1 -1 1 -1 -1 -1
";

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn foresight() -> Command {
    Command::cargo_bin("foresight").unwrap()
}

fn json_run(args: &[&str]) -> Value {
    let out = foresight()
        .args(args)
        .arg("-o")
        .arg("json")
        .assert()
        .success();
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

#[test]
fn json_output_has_the_documented_keys_and_exact_values() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write(&dir, "tiny.swf", TINY);
    let t = trace.to_str().unwrap();
    let easy = json_run(&["sim", "run", "--trace", t, "--policy", "easy"]);
    for key in [
        "jobs",
        "skipped",
        "mean_wait",
        "mean_response",
        "mean_slowdown",
        "mean_bsld",
        "utilization",
        "makespan",
        "policy",
        "semantics",
    ] {
        assert!(easy.get(key).is_some(), "missing {key}: {easy}");
    }
    assert_eq!(easy["jobs"], 3);
    assert_eq!(easy["skipped"], 0);
    assert_eq!(easy["policy"], "easy");
    assert_eq!(easy["semantics"], "default");
    assert!((easy["mean_wait"].as_f64().unwrap() - 100.0 / 3.0).abs() < 1e-9);
    assert_eq!(easy["makespan"], 150);
    let fcfs = json_run(&[
        "sim",
        "run",
        "--trace",
        t,
        "--policy",
        "fcfs",
        "--semantics",
        "pyss",
    ]);
    assert_eq!(fcfs["mean_wait"], 80.0);
    assert_eq!(fcfs["makespan"], 170);
    assert_eq!(fcfs["semantics"], "pyss");
    let depth = json_run(&[
        "sim",
        "run",
        "--trace",
        t,
        "--policy",
        "depth:2",
        "--backfill",
        "bestfit",
        "--metric",
        "procs",
    ]);
    assert_eq!(depth["policy"], "depth:2");
}

#[test]
fn gzip_traces_read_like_plain_ones() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.swf.gz");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&path).unwrap(),
        flate2::Compression::default(),
    );
    gz.write_all(TINY.as_bytes()).unwrap();
    gz.finish().unwrap();
    let out = json_run(&["sim", "run", "--trace", path.to_str().unwrap()]);
    assert_eq!(out["jobs"], 3);
    assert!((out["mean_wait"].as_f64().unwrap() - 100.0 / 3.0).abs() < 1e-9);
}

#[test]
fn unsorted_traces_are_sorted_before_simulating() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines: Vec<&str> = TINY.lines().collect();
    lines.swap(2, 3); // job 3 (submitted at 10) now comes before job 2 (at 0)
    let trace = write(&dir, "unsorted.swf", &(lines.join("\n") + "\n"));
    let t = trace.to_str().unwrap();
    for policy in ["easy", "fcfs"] {
        let sorted = json_run(&[
            "sim",
            "run",
            "--trace",
            write(&dir, "sorted.swf", TINY).to_str().unwrap(),
            "--policy",
            policy,
        ]);
        let unsorted = json_run(&["sim", "run", "--trace", t, "--policy", policy]);
        assert_eq!(sorted["mean_wait"], unsorted["mean_wait"], "{policy}");
        assert_eq!(sorted["makespan"], unsorted["makespan"], "{policy}");
    }
}

#[test]
fn table_output_is_for_people() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write(&dir, "tiny.swf", TINY);
    foresight()
        .args(["sim", "run", "--trace", trace.to_str().unwrap()])
        .assert()
        .success()
        .stdout(contains("mean wait  33.3 s"))
        .stdout(contains("utilization  73.33 %"))
        .stdout(contains("jobs simulated  3"));
}

#[test]
fn jobs_out_writes_csv_and_swf() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write(&dir, "tiny.swf", TINY);
    let csv = dir.path().join("s.csv");
    let swf = dir.path().join("s.swf");
    for out in [&csv, &swf] {
        foresight()
            .args([
                "sim",
                "run",
                "--trace",
                trace.to_str().unwrap(),
                "--jobs-out",
                out.to_str().unwrap(),
            ])
            .assert()
            .success();
    }
    let csv = std::fs::read_to_string(csv).unwrap();
    assert_eq!(csv.lines().count(), 4);
    let swf = std::fs::read_to_string(swf).unwrap();
    assert!(swf.contains("; MaxProcs: 4"));
    assert!(swf.contains("\n3 10 0 20 2 "), "{swf}");
    foresight()
        .args([
            "sim",
            "run",
            "--trace",
            trace.to_str().unwrap(),
            "--jobs-out",
            "x.txt",
        ])
        .assert()
        .failure()
        .stderr(contains("must end in .csv or .swf"));
}

#[test]
fn malformed_traces_name_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(
        &dir,
        "bad.swf",
        &TINY.replace("3  10 -1  20", "3  1O -1  20"),
    );
    let b = bad.to_str().unwrap();
    foresight()
        .args(["sim", "run", "--trace", b])
        .assert()
        .code(1)
        .stderr(contains(format!(
            "{b}:4: field 2 (submit time): not a number: \"1O\""
        )));
    let out = json_run(&["sim", "run", "--trace", b, "--lenient"]);
    assert_eq!(out["jobs"], 2);
    assert_eq!(out["malformed"], 1);
    let first = format!("{b}:4: field 2 (submit time): not a number: \"1O\"");
    assert_eq!(out["first_malformed"], first.as_str());
    foresight()
        .args(["sim", "run", "--trace", b, "--lenient"])
        .assert()
        .success()
        .stderr(contains(format!(
            "skipped 1 malformed line(s); the first: {first}"
        )))
        .stdout(contains(format!("1 (first: {first})")));
    foresight()
        .args([
            "sim",
            "run",
            "--trace",
            dir.path().join("missing.swf").to_str().unwrap(),
        ])
        .assert()
        .code(1)
        .stderr(contains("missing.swf: No such file"));
    let headless = write(
        &dir,
        "headless.swf",
        "1 0 -1 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1\n",
    );
    foresight()
        .args(["sim", "run", "--trace", headless.to_str().unwrap()])
        .assert()
        .code(1)
        .stderr(contains("neither MaxProcs nor MaxNodes; give --procs"));
}

/// A machine size that is not a whole positive number is an error naming the line and the
/// value (`1e2` used to be read as 1 and skip every larger job; `0` said "neither MaxProcs
/// nor MaxNodes").
#[test]
fn bad_machine_size_headers_name_the_line_and_the_value() {
    let dir = tempfile::tempdir().unwrap();
    for value in ["1e2", "0", "lots"] {
        let bad = write(
            &dir,
            "bad.swf",
            &format!(
                "; Version: 2.2\n{}",
                TINY.replace("MaxProcs: 4", &format!("MaxProcs: {value}"))
            ),
        );
        let b = bad.to_str().unwrap();
        foresight()
            .args(["sim", "run", "--trace", b])
            .assert()
            .code(1)
            .stderr(contains(format!(
                "{b}:2: header `; MaxProcs:` has \"{value}\", which is not a whole number"
            )));
        // --procs makes the header's size irrelevant.
        let out = json_run(&["sim", "run", "--trace", b, "--procs", "4"]);
        assert_eq!(out["jobs"], 3, "{value}");
    }
}

/// Skipped records are reported by reason.
#[test]
fn skipped_records_are_reported_by_reason() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write(
        &dir,
        "skips.swf",
        &format!("{TINY}4  20 -1   0 2 -1 -1 2  20 -1 1 3 1 -1 1 -1 -1 -1\n5  20 -1  10 8 -1 -1 8  20 -1 1 3 1 -1 1 -1 -1 -1\n"),
    );
    let t = trace.to_str().unwrap();
    let out = json_run(&["sim", "run", "--trace", t]);
    assert_eq!(out["skipped"], 2);
    assert_eq!(out["skipped_by_reason"]["no_runtime"], 1);
    assert_eq!(out["skipped_by_reason"]["too_large"], 1);
    foresight()
        .args(["sim", "run", "--trace", t])
        .assert()
        .success()
        .stdout(contains(
            "2 (1 runtime ≤ 0, 1 more processors than the machine)",
        ));
}

#[test]
fn bad_options_are_refused_clearly() {
    foresight()
        .args(["sim", "run", "--policy", "backfill"])
        .assert()
        .code(1)
        .stderr(contains("is not a policy"));
    foresight()
        .args(["sim", "run", "--policy", "depth:x"])
        .assert()
        .code(1)
        .stderr(contains("not a whole number"));
    foresight()
        .args(["sim", "run", "--order", "random"])
        .assert()
        .code(2);
}

#[test]
fn embedded_default_workload_runs() {
    let out = json_run(&["sim", "run", "--jobs", "2000"]);
    assert_eq!(out["jobs"], 2000);
    assert_eq!(out["policy"], "easy");
    let u = out["utilization"].as_f64().unwrap();
    assert!(u > 0.3 && u <= 1.0, "{u}");
}

/// `--licence-pool` over a trace: 40 one-processor jobs of 100 s at once on 64 processors
/// and a pool of 1 licence. Processors never make a job wait; half the jobs ask for the
/// licence, so they run one after the other and wait, and the others do not. The report
/// gives both waits. Same seed, same draws: the run repeats exactly.
#[test]
fn licence_demands_over_a_trace_make_only_the_asking_jobs_wait() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from("; MaxProcs: 64\n");
    for i in 1..=40 {
        text.push_str(&format!(
            "{i} 0 -1 100 1 -1 -1 1 100 -1 1 1 1 -1 1 -1 -1 -1\n"
        ));
    }
    let trace = write(&dir, "flat.swf", &text);
    let t = trace.to_str().unwrap();
    let args = [
        "sim",
        "run",
        "--trace",
        t,
        "--licence-pool",
        "ansys:1",
        "--licence-share",
        "0.5",
        "--seed",
        "7",
    ];
    let run = json_run(&args);
    assert_eq!(run, {
        let mut again = json_run(&args);
        again["elapsed_seconds"] = run["elapsed_seconds"].clone();
        again
    });
    let name = run["trace"].as_str().unwrap();
    // "...; mean wait W s for the N jobs asking for licences, 0 s for the M others"
    let (_, tail) = name.split_once("; mean wait ").unwrap();
    let words: Vec<&str> = tail.split_whitespace().collect();
    let wait: f64 = words[0].parse().unwrap();
    let asking: usize = words[4].parse().unwrap();
    let others_wait: f64 = words[9].parse().unwrap();
    assert!((10..=30).contains(&asking), "{name}");
    // n jobs one after the other: waits 0, 100, …, (n−1)·100, mean 50·(n−1).
    assert_eq!(wait, 50.0 * (asking as f64 - 1.0), "{name}");
    assert_eq!(others_wait, 0.0, "{name}");
    assert_eq!(run["jobs"], 40);
}
