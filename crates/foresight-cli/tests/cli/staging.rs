//! Input staging on the real binary with real files: a global job whose input lives on
//! cluster `a` is placed on `b` (a is full), finds the input copied into its working
//! directory there, copied while it was reserved, and starts only after the transfer its
//! link needs; a job run on its data's cluster is not copied; a missing input is refused
//! naming it; a copy that fails fails the job with the reason and releases its processors,
//! and one that never ends (a named pipe) is killed at `copy_timeout_seconds` and fails it.
//! Outputs: a job run in a far cluster's own `work_dir` has its outputs copied back home once
//! it completes (again after a restart that cut the copy); bad paths are refused; a missing
//! output is recorded on the completed job; a failed job's outputs are not copied.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

use crate::common;

use crate::common::{int, Server};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `b`'s link brings 1 MB/s after 3 s of latency: 2 MB of input take 2 + 3 = 5 s.
const GRID: &str = r#"
[[cluster]]
name = "a"
procs = 2

[[cluster]]
name = "b"
procs = 2
bandwidth_mb_s = 1.0
latency_seconds = 3
"#;

/// Seconds `b`'s link takes for the 2 MB input.
const STAGE_B: i64 = 5;

/// Fills cluster `a` for ten minutes, so that global jobs go to `b`.
fn fill_a(s: &Server) -> u64 {
    let id = JobBuilder::new()
        .cluster("a")
        .walltime("10m")
        .submit(s, &["sleep", "600"]);
    s.wait_job(id, "running", Duration::from_secs(60), |j| {
        j["state"] == "running"
    });
    id
}

/// A job submitted through the CLI, as these tests vary it: 2 processors for a minute unless
/// told otherwise, global unless given a cluster.
struct JobBuilder {
    procs: u32,
    walltime: &'static str,
    cluster: Option<&'static str>,
    /// An input living on `a`.
    input: Option<std::path::PathBuf>,
    chdir: Option<std::path::PathBuf>,
    outputs: Vec<String>,
    dependency: Option<String>,
    hold: bool,
}

impl JobBuilder {
    fn new() -> JobBuilder {
        JobBuilder {
            procs: 2,
            walltime: "1m",
            cluster: None,
            input: None,
            chdir: None,
            outputs: Vec::new(),
            dependency: None,
            hold: false,
        }
    }

    fn procs(mut self, n: u32) -> Self {
        self.procs = n;
        self
    }

    fn walltime(mut self, t: &'static str) -> Self {
        self.walltime = t;
        self
    }

    fn cluster(mut self, c: &'static str) -> Self {
        self.cluster = Some(c);
        self
    }

    /// Its input, on `a`.
    fn input(mut self, f: &Path) -> Self {
        self.input = Some(f.to_path_buf());
        self
    }

    fn chdir(mut self, d: &Path) -> Self {
        self.chdir = Some(d.to_path_buf());
        self
    }

    fn outputs(mut self, o: &[&str]) -> Self {
        self.outputs.extend(o.iter().map(|o| o.to_string()));
        self
    }

    /// Waits for job `on` to complete (`afterok`).
    fn after(mut self, on: u64) -> Self {
        self.dependency = Some(format!("afterok:{on}"));
        self
    }

    fn hold(mut self) -> Self {
        self.hold = true;
        self
    }

    /// Submits it to run `command`; the job id.
    fn submit(self, s: &Server, command: &[&str]) -> u64 {
        let mut args = vec![
            "-n".to_string(),
            self.procs.to_string(),
            "-t".into(),
            self.walltime.into(),
        ];
        if let Some(c) = self.cluster {
            args.extend(["--cluster".into(), c.into()]);
        }
        if let Some(f) = &self.input {
            args.extend(["--input".into(), format!("{}@a", f.display())]);
        }
        if let Some(d) = &self.chdir {
            args.extend(["--chdir".into(), d.display().to_string()]);
        }
        for o in &self.outputs {
            args.extend(["--output-file".into(), o.clone()]);
        }
        if let Some(d) = &self.dependency {
            args.extend(["--dependency".into(), d.clone()]);
        }
        if self.hold {
            args.push("--hold".into());
        }
        args.push("--".into());
        args.extend(command.iter().map(|c| c.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        s.submit(&args)
    }

    /// Submits it to run `sh -c script`.
    fn sh(self, s: &Server, script: &str) -> u64 {
        self.submit(s, &["sh", "-c", script])
    }
}

/// A 2 MB input file on `a`'s side, under `dir`.
fn input(dir: &Path) -> std::path::PathBuf {
    let a = dir.join("on-a");
    std::fs::create_dir_all(&a).unwrap();
    let f = a.join("in.dat");
    let data: Vec<u8> = (0..2_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&f, data).unwrap();
    f
}

#[test]
fn a_global_job_placed_away_from_its_input_finds_it_copied_and_starts_after_the_transfer() {
    let s = Server::with_config(GRID);
    let scratch = s.scratch();
    let f = input(&scratch);
    let work = scratch.join("work-b");
    std::fs::create_dir_all(&work).unwrap();
    let filler = fill_a(&s);
    let id = JobBuilder::new()
        .input(&f)
        .chdir(&work)
        .submit(&s, &["cmp", "in.dat", f.to_str().unwrap()]);
    let j = s.wait_final(id, Duration::from_secs(120));
    assert_eq!(j["state"], "completed", "the copy is identical: {j}");
    assert_eq!(j["parts"][0]["cluster"], "b", "{j}");
    assert_eq!(j["inputs"][0]["bytes"], 2_000_000, "{j}");
    assert_eq!(j["inputs"][0]["cluster"], "a", "{j}");
    let st = &j["staging"][0];
    assert_eq!(st["cluster"], "b", "{j}");
    assert!(st["error"].is_null(), "{j}");
    let (began, ended, started) = (
        int(st, "began_at"),
        int(st, "ended_at"),
        int(&j, "started_at"),
    );
    assert!(began <= ended && ended <= started, "{j}");
    // The copy ran while the job was reserved, in the transfer time the planner set
    // aside before its slot, not after its start.
    assert!(
        began + STAGE_B - 2 <= started,
        "the copy began at the start, so the job waited for the transfer twice: {j}"
    );
    // The planner started b's slots after the transfer its link needs.
    assert!(
        started >= int(&j, "submitted_at") + STAGE_B,
        "started before 2 MB could cross b's link: {j}"
    );
    assert_eq!(
        std::fs::read(work.join("in.dat")).unwrap(),
        std::fs::read(&f).unwrap()
    );
    let shown = s.run(&["job", "show", &id.to_string()]);
    assert!(shown.contains("to b: began"), "{shown}");
    assert!(
        shown.contains(&format!("{}@a (2000000 bytes)", f.display())),
        "{shown}"
    );
    s.run(&["job", "cancel", &filler.to_string()]);
}

#[test]
fn a_job_on_its_datas_cluster_is_not_copied() {
    let s = Server::with_config(GRID);
    let scratch = s.scratch();
    let f = input(&scratch);
    let work = scratch.join("work-a");
    std::fs::create_dir_all(&work).unwrap();
    // b is as free as a but 5 s away: the earliest finish is on a, where nothing moves.
    let id = JobBuilder::new()
        .input(&f)
        .chdir(&work)
        .sh(&s, "test ! -e in.dat");
    let j = s.wait_final(id, Duration::from_secs(120));
    assert_eq!(j["state"], "completed", "{j}");
    assert_eq!(j["parts"][0]["cluster"], "a", "{j}");
    assert!(
        j.get("staging")
            .is_none_or(|v| v.as_array().unwrap().is_empty()),
        "{j}"
    );
}

#[test]
fn a_missing_input_is_refused_naming_it() {
    let s = Server::with_config(GRID);
    let missing = s.scratch().join("no-such-input.dat");
    let arg = format!("{}@a", missing.display());
    let out = s
        .cli()
        .args(["job", "submit", "--input", &arg, "--", "true"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&missing.display().to_string()), "{err}");
    // Over REST: 400 naming the field and the file; an unknown cluster likewise.
    let body = serde_json::json!({
        "walltime": 60,
        "command": ["true"],
        "inputs": [{ "path": missing.display().to_string() }],
    });
    let (status, e) = s.http().post("/jobs", &body);
    assert_eq!(status, 400, "{e}");
    assert!(e.to_string().contains("no-such-input.dat"), "{e}");
    assert!(e.to_string().contains("inputs"), "{e}");
    let f = input(&s.scratch());
    let body = serde_json::json!({
        "walltime": 60,
        "command": ["true"],
        "inputs": [{ "path": f.display().to_string(), "cluster": "zz" }],
    });
    let (status, e) = s.http().post("/jobs", &body);
    assert_eq!(status, 400, "{e}");
    assert!(e.to_string().contains("unknown cluster"), "{e}");
}

#[test]
fn a_failing_copy_fails_the_job_with_the_reason_and_frees_its_processors() {
    let s = Server::with_config(GRID);
    let scratch = s.scratch();
    let f = input(&scratch);
    let work = scratch.join("work-b");
    let filler = fill_a(&s);
    let id = JobBuilder::new()
        .input(&f)
        .chdir(&work)
        .submit(&s, &["true"]);
    // Gone before b's start, at least 5 s away: the copy cannot be made.
    std::fs::remove_file(&f).unwrap();
    let j = s.wait_final(id, Duration::from_secs(120));
    assert_eq!(j["state"], "failed", "{j}");
    let reason = j["reason"].as_str().unwrap();
    assert!(reason.contains("staging its input to b failed"), "{j}");
    assert!(reason.contains("in.dat"), "{j}");
    assert!(j["started_at"].is_null(), "it never started: {j}");
    assert!(j["staging"][0]["error"].is_string(), "{j}");
    // b's processors are free again: a local job of both runs there at once.
    let next = JobBuilder::new().cluster("b").submit(&s, &["true"]);
    let n = s.wait_final(next, Duration::from_secs(60));
    assert_eq!(n["state"], "completed", "{n}");
    s.run(&["job", "cancel", &filler.to_string()]);
}

#[test]
fn an_input_that_never_ends_fails_its_job_at_the_copy_timeout_naming_it() {
    let s = Server::with_config(&format!("copy_timeout_seconds = 2\n{GRID}"));
    let scratch = s.scratch();
    let f = input(&scratch);
    let work = scratch.join("work-b");
    let filler = fill_a(&s);
    let id = JobBuilder::new()
        .input(&f)
        .chdir(&work)
        .hold()
        .submit(&s, &["true"]);
    // Measured as a file; by its copy, a named pipe nobody writes: the copy would block
    // forever, and the job with it.
    std::fs::remove_file(&f).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&f)
        .status()
        .unwrap();
    assert!(made.success());
    s.run(&["job", "release", &id.to_string()]);
    let j = s.wait_final(id, Duration::from_secs(60));
    assert_eq!(j["state"], "failed", "{j}");
    let reason = j["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("staging its input to b failed"), "{j}");
    assert!(
        reason.contains(&f.display().to_string())
            && reason.contains("timed out after 2 s (copy_timeout_seconds)"),
        "{j}"
    );
    assert!(j["started_at"].is_null(), "it never started: {j}");
    // The copy's process is gone: nobody reads the pipe any more.
    assert_no_reader(&f);
    s.run(&["job", "cancel", &filler.to_string()]);
}

/// Asserts that no process has the named pipe `fifo` open for reading.
fn assert_no_reader(fifo: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    let open = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(O_NONBLOCK)
        .open(fifo);
    assert_eq!(
        open.map(|_| ()).map_err(|e| e.raw_os_error()),
        Err(Some(6)),
        "ENXIO: no reader left"
    );
}

// ------------------------------------------------------------------------- outputs

/// [`GRID`] where `b` does not share the jobs' working directories: a job from elsewhere
/// runs in `b`'s own `work_dir`, under `scratch`.
fn grid_with_work_dir(scratch: &Path) -> String {
    format!(
        "{GRID}work_dir = \"{}\"\n",
        scratch.join("b-scratch").display()
    )
}

/// A server on [`grid_with_work_dir`], with `b`'s scratch outside the server's own files.
fn server_with_work_dir() -> (Server, tempfile::TempDir) {
    let b = tempfile::tempdir().unwrap();
    let b_root = std::fs::canonicalize(b.path()).unwrap();
    (Server::with_config(&grid_with_work_dir(&b_root)), b)
}

/// A global job of 2 processors, `a` full: it runs on `b`, in `b`'s work_dir, with its
/// input from `a` and the outputs named.
fn submit_to_b(s: &Server, home: &Path, input: &Path, outputs: &[&str], script: &str) -> u64 {
    JobBuilder::new()
        .input(input)
        .chdir(home)
        .outputs(outputs)
        .sh(s, script)
}

#[test]
fn a_global_jobs_output_comes_back_from_the_cluster_it_ran_on_to_its_home() {
    let (s, b_dir) = server_with_work_dir();
    let (home, f, filler) = home_with_a_full(&s);
    let id = submit_to_b(
        &s,
        &home,
        &f,
        &["out/result.txt"],
        "test -s in.dat && mkdir -p out && echo \"made in $PWD\" > out/result.txt",
    );
    let j = s.wait_final(id, Duration::from_secs(120));
    assert_eq!(j["state"], "completed", "{j}");
    assert_eq!(j["parts"][0]["cluster"], "b", "{j}");
    // It ran in b's own directory, not in its home, which b does not share.
    let ran_in = std::fs::canonicalize(b_dir.path())
        .unwrap()
        .join("b-scratch")
        .join(format!("job-{id}"));
    let there = std::fs::read_to_string(ran_in.join("out/result.txt")).unwrap();
    assert_eq!(there, format!("made in {}\n", ran_in.display()));
    // Its output is back home, at the same relative path, with the same content, once the
    // copy has ended (the job is completed while it runs).
    let j = wait_outputs_ended(&s, id);
    assert!(j["output_staging"]["error"].is_null(), "{j}");
    assert_eq!(j["output_staging"]["cluster"], "a", "{j}");
    assert!(j["reason"].is_null(), "{j}");
    assert_eq!(
        std::fs::read_to_string(home.join("out/result.txt")).unwrap(),
        there
    );
    assert!(!home.join("in.dat").exists(), "only outputs come back");
    let shown = s.run(&["job", "show", &id.to_string()]);
    assert!(shown.contains("out/result.txt"), "{shown}");
    assert!(shown.contains("back to a: began"), "{shown}");
    s.run(&["job", "cancel", &filler.to_string()]);
}

/// A home directory and an input beside it, with `a` filled so that a global job of 2
/// processors runs on `b`: (home, input, the filler's id).
fn home_with_a_full(s: &Server) -> (PathBuf, PathBuf, u64) {
    let scratch = s.scratch();
    let f = input(&scratch);
    let home = scratch.join("home");
    std::fs::create_dir_all(&home).unwrap();
    (home, f, fill_a(s))
}

/// The job once its output copy has ended.
fn wait_outputs_ended(s: &Server, id: u64) -> serde_json::Value {
    common::wait_for("the outputs copied", Duration::from_secs(60), || {
        let j = s.show(id);
        j["output_staging"]["ended_at"].is_i64().then_some(j)
    })
}

#[test]
fn an_output_path_outside_the_working_directory_is_refused_naming_the_field() {
    let s = Server::with_config(GRID);
    for (path, want) in [
        ("/etc/passwd", "relative"),
        ("../up.txt", ".."),
        ("out/../../up.txt", ".."),
        ("", "empty"),
    ] {
        let body = serde_json::json!({
            "walltime": 60,
            "command": ["true"],
            "outputs": [{ "path": path }],
        });
        let (status, e) = s.http().post("/jobs", &body);
        assert_eq!(status, 400, "{path:?}: {e}");
        let text = e.to_string();
        assert!(
            text.contains("outputs") && text.contains(want),
            "{path:?}: {e}"
        );
    }
    let body = serde_json::json!({
        "walltime": 60,
        "command": ["true"],
        "outputs": [{ "path": "r.txt", "cluster": "zz" }],
    });
    let (status, e) = s.http().post("/jobs", &body);
    assert_eq!(status, 400, "{e}");
    assert!(e.to_string().contains("unknown cluster"), "{e}");
    let out = s
        .cli()
        .args(["job", "submit", "--output-file", "../x@a", "--", "true"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("outputs") && err.contains("../x"), "{err}");
    assert!(s.http().jobs().is_empty(), "nothing was accepted");
}

#[test]
fn a_missing_output_is_recorded_on_the_completed_job_and_a_failed_job_copies_nothing() {
    let (s, _b_dir) = server_with_work_dir();
    let (home, f, filler) = home_with_a_full(&s);
    let id = submit_to_b(
        &s,
        &home,
        &f,
        &["written.txt", "missing.txt"],
        "echo ok > written.txt",
    );
    let j = s.wait_final(id, Duration::from_secs(120));
    assert_eq!(j["state"], "completed", "the job itself succeeded: {j}");
    let j = wait_outputs_ended(&s, id);
    let reason = j["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("copying its outputs to a failed") && reason.contains("missing.txt"),
        "{j}"
    );
    assert!(j["output_staging"]["error"].is_string(), "{j}");
    let shown = s.run(&["job", "show", &id.to_string()]);
    assert!(shown.contains("missing.txt"), "{shown}");
    // A failed job's outputs stay where it ran.
    let id = submit_to_b(
        &s,
        &home,
        &f,
        &["partial.txt"],
        "echo half > partial.txt; exit 3",
    );
    let j = s.wait_final(id, Duration::from_secs(120));
    assert_eq!(j["state"], "failed", "{j}");
    assert!(j["output_staging"].is_null(), "{j}");
    assert!(!home.join("partial.txt").exists());
    s.run(&["job", "cancel", &filler.to_string()]);
}

#[test]
fn outputs_a_kill_cut_short_are_copied_after_the_restart() {
    let (mut s, b_dir) = server_with_work_dir();
    let (home, f, filler) = home_with_a_full(&s);
    // The output is a named pipe: the copy blocks reading it until the service is killed.
    let id = submit_to_b(&s, &home, &f, &["result.txt"], "mkfifo result.txt");
    s.wait_job(
        id,
        "its outputs being copied",
        Duration::from_secs(120),
        |j| j["state"] == "completed" && j["output_staging"]["began_at"].is_i64(),
    );
    std::thread::sleep(Duration::from_millis(300));
    let j = s.show(id);
    assert!(j["output_staging"]["ended_at"].is_null(), "{j}");
    s.sigkill();
    // The file is there now, whole.
    let ran_in = std::fs::canonicalize(b_dir.path())
        .unwrap()
        .join("b-scratch")
        .join(format!("job-{id}"));
    std::fs::remove_file(ran_in.join("result.txt")).unwrap();
    std::fs::write(ran_in.join("result.txt"), "complete\n").unwrap();
    s.launch();
    let j = wait_outputs_ended(&s, id);
    assert_eq!(j["state"], "completed", "{j}");
    assert!(j["output_staging"]["error"].is_null(), "{j}");
    assert_eq!(
        std::fs::read_to_string(home.join("result.txt")).unwrap(),
        "complete\n"
    );
    s.run(&["job", "cancel", &filler.to_string()]);
}

/// A job that waits for a job of b's (`afterok`) in `home`, on `b` itself (free once the
/// job it waits for has ended), checking that `file` is there with `want` in it.
fn submit_dependant(s: &Server, home: &Path, on: u64, file: &str, want: &str) -> u64 {
    JobBuilder::new()
        .cluster("b")
        .procs(1)
        .after(on)
        .chdir(home)
        .sh(s, &format!("grep -q {want} {file}"))
}

/// Where job `id` ran on `b` (its own `work_dir`).
fn ran_on_b(b_dir: &Path, id: u64) -> std::path::PathBuf {
    std::fs::canonicalize(b_dir)
        .unwrap()
        .join("b-scratch")
        .join(format!("job-{id}"))
}

#[test]
fn a_dependant_starts_only_once_the_outputs_it_needs_are_copied() {
    let (s, b_dir) = server_with_work_dir();
    let (home, f, filler) = home_with_a_full(&s);
    // The output is a named pipe: its copy lasts until the test writes into it.
    let id = submit_to_b(&s, &home, &f, &["result.txt"], "mkfifo result.txt");
    let next = submit_dependant(&s, &home, id, "result.txt", "complete");
    s.wait_job(
        id,
        "its outputs being copied",
        Duration::from_secs(120),
        |j| j["state"] == "completed" && j["output_staging"]["began_at"].is_i64(),
    );
    // A cycle after its predecessor completed looked at the dependant and kept it waiting,
    // saying for what (the copy cannot end: nothing writes into the pipe yet).
    let waiting_for = format!("job {id} is copying its outputs to a");
    let n = s.wait_job(
        next,
        "the dependant waiting for the copy",
        Duration::from_secs(60),
        |n| {
            n["reason"]
                .as_str()
                .is_some_and(|r| r.contains(&waiting_for))
        },
    );
    assert_eq!(
        n["state"], "pending",
        "it started before the copy ended: {n}"
    );
    // The copy ends: the dependant starts and finds the file.
    std::fs::write(ran_on_b(b_dir.path(), id).join("result.txt"), "complete\n").unwrap();
    let j = wait_outputs_ended(&s, id);
    assert!(j["output_staging"]["error"].is_null(), "{j}");
    let n = s.wait_final(next, Duration::from_secs(60));
    assert_eq!(n["state"], "completed", "it did not find the output: {n}");
    assert!(
        int(&n, "started_at") >= int(&j["output_staging"], "ended_at"),
        "{n} {j}"
    );
    s.run(&["job", "cancel", &filler.to_string()]);
}

/// Linux's `O_NONBLOCK`: opening a named pipe for writing with it fails (ENXIO) when no
/// process has it open for reading.
const O_NONBLOCK: i32 = 0o4000;

#[test]
fn a_copy_that_outlasts_its_timeout_is_killed_and_fails_the_dependants_naming_the_file() {
    let b = tempfile::tempdir().unwrap();
    let b_root = std::fs::canonicalize(b.path()).unwrap();
    let config = format!(
        "output_copy_timeout_seconds = 2\n{}",
        grid_with_work_dir(&b_root)
    );
    let s = Server::with_config(&config);
    let (home, f, filler) = home_with_a_full(&s);
    // A named pipe nobody writes: the copy would block forever.
    let id = submit_to_b(&s, &home, &f, &["stuck.fifo"], "mkfifo stuck.fifo");
    let next = submit_dependant(&s, &home, id, "stuck.fifo", "x");
    let j = wait_outputs_ended(&s, id);
    assert_eq!(j["state"], "completed", "the job itself succeeded: {j}");
    let error = j["output_staging"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("stuck.fifo") && error.contains("2 s"), "{j}");
    let reason = j["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("timed out") && reason.contains("stuck.fifo"),
        "{j}"
    );
    let took = int(&j["output_staging"], "ended_at") - int(&j["output_staging"], "began_at");
    assert!((1..=10).contains(&took), "{j}");
    // The copy's process is gone: nobody reads the pipe any more.
    assert_no_reader(&ran_on_b(b.path(), id).join("stuck.fifo"));
    // A failed copy is not ok: the dependant is cancelled, naming the copy's error.
    let n = s.wait_final(next, Duration::from_secs(60));
    assert_eq!(n["state"], "cancelled", "{n}");
    let why = n["reason"].as_str().unwrap_or_default();
    assert!(
        why.contains("DependencyNeverSatisfied") && why.contains("stuck.fifo"),
        "{n}"
    );
    assert!(n["started_at"].is_null(), "{n}");
    s.run(&["job", "cancel", &filler.to_string()]);
}

#[test]
fn a_co_allocated_jobs_outputs_come_from_the_part_that_wrote_them() {
    let (s, _b_dir) = server_with_work_dir();
    let home = s.scratch().join("home");
    std::fs::create_dir_all(&home).unwrap();
    // 4 processors on a grid of 2 + 2: one part on a (in its home), one on b (in b's own
    // work_dir); the outputs go to the service's host, its home.
    let spanning = |outputs: &[&str], script: &str| {
        JobBuilder::new()
            .procs(4)
            .chdir(&home)
            .outputs(outputs)
            .sh(&s, script)
    };
    let id = spanning(
        &["made-on-a.txt", "made-on-b.txt"],
        "echo $FORESIGHT_CLUSTER > made-on-$FORESIGHT_CLUSTER.txt",
    );
    let j = s.wait_final(id, Duration::from_secs(120));
    assert_eq!(j["state"], "completed", "{j}");
    let clusters: Vec<&str> = j["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["cluster"].as_str().unwrap())
        .collect();
    assert!(clusters.contains(&"a") && clusters.contains(&"b"), "{j}");
    let j = wait_outputs_ended(&s, id);
    assert!(j["output_staging"]["error"].is_null(), "{j}");
    for c in ["a", "b"] {
        let got = std::fs::read_to_string(home.join(format!("made-on-{c}.txt"))).unwrap();
        assert_eq!(got, format!("{c}\n"));
    }
    // Both parts wrote the same path: neither is taken, and the job says why.
    let id = spanning(&["same.txt"], "echo $FORESIGHT_CLUSTER > same.txt");
    let j = s.wait_final(id, Duration::from_secs(120));
    assert_eq!(j["state"], "completed", "{j}");
    let j = wait_outputs_ended(&s, id);
    let reason = j["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("output same.txt: more than one of the job's parts wrote it"),
        "{j}"
    );
    assert_eq!(
        std::fs::read_to_string(home.join("same.txt")).unwrap(),
        "a\n",
        "the part at home keeps its own file"
    );
}
