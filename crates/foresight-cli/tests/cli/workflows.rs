//! Workflows through the real `foresight` binary and service: a diamond whose tasks hand
//! files to each other runs in dependency order, a failed task cancels its dependants (or
//! runs again under `retry`), bad workflows are refused whole and named, workflows survive
//! a restart, and users see only their own.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use crate::common::*;
use serde_json::{json, Value};
use std::time::Duration;

const T: Duration = Duration::from_secs(60);

/// A diamond A → B, C → D; each task leaves a file the next one reads, so a task started
/// before its inputs exist fails. `b` is the command of B.
fn diamond(b: &str, on_failure: &str) -> String {
    format!(
        r#"name: diamond
on_failure: {on_failure}
tasks:
  - name: A
    command: [sh, -c, "sleep 1; echo a > a.txt"]
    walltime: 1
  - name: B
    command: [sh, -c, '{b}']
    walltime: 1
  - name: C
    command: [sh, -c, "cat a.txt > c.txt; echo c >> c.txt"]
    processors: 2
    walltime: 1
  - name: D
    command: [sh, -c, "cat b.txt c.txt > d.txt"]
    walltime: 1
edges:
  - {{from: A, to: B, data_mb: 10}}
  - {{from: A, to: C}}
  - {{from: B, to: D}}
  - {{from: C, to: D, size_mb: 1.5}}
"#
    )
}

const B_OK: &str = "sleep 1; cat a.txt > b.txt; echo b >> b.txt";

fn submit(s: &Server, yaml: &str, extra: &[&str]) -> u64 {
    let path = s.scratch().join("wf.yaml");
    std::fs::write(&path, yaml).unwrap();
    let mut args = vec!["workflow", "submit", path.to_str().unwrap()];
    args.extend_from_slice(extra);
    s.run(&args).trim().parse().unwrap()
}

fn show(s: &Server, id: u64) -> Value {
    serde_json::from_str(&s.run(&["workflow", "show", &id.to_string(), "-o", "json"])).unwrap()
}

fn wait_workflow(s: &Server, id: u64, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    wait_for(&format!("workflow {id} {what}"), T, || {
        let w = show(s, id);
        pred(&w).then_some(w)
    })
}

fn over(w: &Value) -> bool {
    !matches!(w["state"].as_str(), Some("pending" | "running"))
}

fn task<'a>(w: &'a Value, name: &str) -> &'a Value {
    w["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap()
}

#[test]
fn a_diamond_runs_in_dependency_order_and_completes() {
    let s = Server::start(4);
    let id = submit(&s, &diamond(B_OK, "cancel"), &["--mapper", "heft"]);
    let w = show(&s, id);
    assert_eq!(w["mapper"], "heft");
    assert_eq!(w["tasks"].as_array().unwrap().len(), 4);
    // D waits for both its inputs, as a job waiting at the gate.
    let d = task(&w, "D");
    assert_eq!(d["after"], json!(["B", "C"]));
    assert_eq!(d["cluster"], "local");
    let jd = s.show(d["job"].as_u64().unwrap());
    assert_eq!(jd["state"], "pending", "{jd}");
    assert!(
        jd["reason"]
            .as_str()
            .unwrap()
            .starts_with("Dependency: waiting for afterok:task "),
        "{jd}"
    );
    // The mapping planned D after B and C.
    let planned = |t: &str| int(task(&w, t), "planned_start");
    let planned_end = |t: &str| int(task(&w, t), "planned_end");
    assert!(
        planned("D") >= planned_end("B").max(planned_end("C")),
        "{w}"
    );
    assert!(planned("B") >= planned_end("A"), "{w}");

    let w = wait_workflow(&s, id, "over", over);
    assert_eq!(w["state"], "completed", "{w}");
    let started = |t: &str| int(task(&w, t), "started_at");
    let ended = |t: &str| int(task(&w, t), "ended_at");
    assert!(
        started("B") >= ended("A") && started("C") >= ended("A"),
        "{w}"
    );
    assert!(started("D") >= ended("B").max(ended("C")), "{w}");
    let d = std::fs::read_to_string(s.scratch().join("d.txt")).unwrap();
    assert_eq!(d, "a\nb\na\nc\n");

    // What people see: the start the mapping planned beside the actual one.
    let text = s.run(&["workflow", "show", &id.to_string()]);
    let list = s.run(&["workflow", "list"]);
    insta::with_settings!({filters => vec![
        (r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC", "[time]"),
    ]}, {
        insta::assert_snapshot!("workflow_show_table", text);
        insta::assert_snapshot!("workflow_list_table", list);
    });
}

#[test]
fn a_failed_task_cancels_its_dependants_naming_it_or_runs_again() {
    let s = Server::start(4);
    let id = submit(&s, &diamond("exit 3", "cancel"), &[]);
    let w = wait_workflow(&s, id, "over", over);
    assert_eq!(w["state"], "failed", "{w}");
    assert_eq!(task(&w, "B")["state"], "failed");
    assert_eq!(task(&w, "C")["state"], "completed");
    let d = task(&w, "D");
    assert_eq!(d["state"], "cancelled", "{w}");
    assert!(d["started_at"].is_null());
    let reason = d["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("DependencyNeverSatisfied:")
            && reason.contains("afterok:task B (job ")
            && reason.contains("is failed"),
        "{reason}"
    );

    // Under `retry: 1`, B fails once, runs again and succeeds: D runs.
    let flaky = "if [ -f tried ]; then cat a.txt > b.txt; echo b >> b.txt; \
                 else touch tried; exit 1; fi";
    let id = submit(&s, &diamond(flaky, "{retry: 1}"), &["--mapper", "greedy"]);
    let w = wait_workflow(&s, id, "over", over);
    assert_eq!(w["state"], "completed", "{w}");
    assert_eq!(task(&w, "B")["retries"], 1);
    assert_eq!(task(&w, "A")["retries"], 0);
    let jb = s.show(task(&w, "B")["job"].as_u64().unwrap());
    assert_eq!(jb["state"], "completed");

    // Retries run out: the task fails for good and D is cancelled.
    let id = submit(&s, &diamond("exit 5", "{retry: 2}"), &[]);
    let w = wait_workflow(&s, id, "over", over);
    assert_eq!(w["state"], "failed", "{w}");
    assert_eq!(task(&w, "B")["retries"], 2);
    assert_eq!(task(&w, "D")["state"], "cancelled");
}

#[test]
fn bad_workflows_are_refused_whole_naming_the_task_or_line() {
    let s = Server::start(4);
    let cycle = "name: loop\ntasks:\n  - {name: A, command: [true], walltime: 1}\n  \
                 - {name: B, command: [true], walltime: 1}\n  \
                 - {name: C, command: [true], walltime: 1}\n\
                 edges:\n  - {from: A, to: B}\n  - {from: B, to: C}\n  - {from: C, to: B}\n";
    let path = s.scratch().join("cycle.yaml");
    std::fs::write(&path, cycle).unwrap();
    let out = s
        .cli()
        .args(["workflow", "submit", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cycle") && err.contains("B -> C -> B"),
        "{err}"
    );

    // Malformed YAML: the line, before any server is asked.
    std::fs::write(&path, "name: x\ntasks:\n  - name: A\n    command: [true\n").unwrap();
    let out = s
        .cli()
        .args(["workflow", "submit", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cycle.yaml") && err.contains("line "), "{err}");

    // Through the REST API: each refusal names the field and the task.
    let http = s.http();
    let task = |name: &str, procs: u32| json!({"name": name, "command": ["true"], "walltime": 60, "procs": procs});
    let cases = [
        (
            json!({"name": "w", "tasks": [task("A", 1), task("B", 1)],
                   "edges": [{"from": "A", "to": "Z"}]}),
            "edges[0].to",
            "unknown task \"Z\"",
        ),
        (
            json!({"name": "w", "tasks": [task("A", 1), task("A", 1)]}),
            "tasks[1].name",
            "\"A\" is used by tasks[0] and tasks[1]",
        ),
        (
            json!({"name": "w", "tasks": [task("A", 1), task("huge", 64)]}),
            "tasks",
            "task \"huge\" can never run",
        ),
        (
            json!({"name": "w", "tasks": [task("A", 1), task("B", 1)],
                   "edges": [{"from": "A", "to": "B"}, {"from": "B", "to": "A"}]}),
            "edges",
            "cycle",
        ),
        (
            json!({"name": "w", "tasks": [task("A", 1)], "on_failure": "shrug"}),
            "on_failure",
            "unknown failure policy",
        ),
    ];
    for (body, field, message) in cases {
        let (status, v) = http.post("/workflows", &body);
        assert_eq!(status, 400, "{body}: {v}");
        assert_eq!(v["field"], field, "{v}");
        assert!(v["message"].as_str().unwrap().contains(message), "{v}");
    }
    // Nothing was half-submitted.
    assert!(http.jobs().is_empty());
    let (_, list) = http.get("/workflows");
    assert_eq!(list, json!([]));
}

#[test]
fn a_workflow_survives_a_restart_and_users_see_only_their_own() {
    let mut s = Server::start(4);
    let ann = s.add_user("ann", None);
    let bob = s.add_user("bob", None);
    let yaml = diamond(B_OK, "cancel").replace("sleep 1; echo a", "sleep 3; echo a");
    let path = s.scratch().join("wf.yaml");
    std::fs::write(&path, yaml).unwrap();
    let id: u64 = s
        .run_as(&ann, &["workflow", "submit", path.to_str().unwrap()])
        .trim()
        .parse()
        .unwrap();
    let before = show(&s, id);
    assert_eq!(before["user"], "ann");

    // Bob sees no such workflow, cannot cancel it, and lists none; the admin sees it.
    let out = s
        .cli_as(&bob)
        .args(["workflow", "show", &id.to_string()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("no workflow {id}")));
    let (status, _) = Http::new(&s.url, &bob).post(&format!("/workflows/{id}/cancel"), &json!({}));
    assert_eq!(status, 404);
    assert_eq!(s.run_as(&bob, &["workflow", "list"]).lines().count(), 1);
    assert!(s.run_as(&ann, &["workflow", "list"]).contains("diamond"));
    assert!(s.run(&["workflow", "list"]).contains("diamond"));

    // A restart while A runs: the workflow, its plan and its links come back, and it ends.
    s.sigterm(T);
    s.launch();
    let after = show(&s, id);
    for t in ["A", "B", "C", "D"] {
        assert_eq!(
            task(&after, t)["planned_start"],
            task(&before, t)["planned_start"]
        );
        assert_eq!(task(&after, t)["job"], task(&before, t)["job"]);
    }
    let w = wait_workflow(&s, id, "over", over);
    assert_eq!(w["state"], "completed", "{w}");
    let started = |t: &str| int(task(&w, t), "started_at");
    let ended = |t: &str| int(task(&w, t), "ended_at");
    assert!(started("D") >= ended("B").max(ended("C")), "{w}");

    // Cancelling a workflow cancels what has not ended; an ended one is a conflict.
    let id2: u64 = s
        .run_as(&ann, &["workflow", "submit", path.to_str().unwrap()])
        .trim()
        .parse()
        .unwrap();
    let w: Value = serde_json::from_str(&s.run_as(
        &ann,
        &["workflow", "cancel", &id2.to_string(), "-o", "json"],
    ))
    .unwrap();
    let w = if over(&w) {
        w
    } else {
        wait_workflow(&s, id2, "over", over)
    };
    assert_eq!(w["state"], "cancelled", "{w}");
    let (status, v) = s
        .http()
        .post(&format!("/workflows/{id}/cancel"), &json!({}));
    assert_eq!(status, 409, "{v}");
}

/// `--reserve`: every task's slot is reserved as mapped and committed, and the tasks run in
/// dependency order, each by its reserved start.
#[test]
fn a_reserved_workflow_runs_in_its_committed_slots() {
    let s = Server::start(4);
    // Slots of 10 s: a task waits at most for its reserved start.
    let yaml = diamond(B_OK, "cancel").replace("walltime: 1\n", "walltime: 10s\n");
    let id = submit(&s, &yaml, &["--reserve"]);
    let w = show(&s, id);
    let (_, rs) = s.http().get("/reservations");
    let rs = rs.as_array().unwrap().clone();
    assert_eq!(rs.len(), 4, "{rs:?}");
    for t in w["tasks"].as_array().unwrap() {
        let r = rs
            .iter()
            .find(|r| r["id"] == t["reservation"])
            .unwrap_or_else(|| panic!("task {t} has no reservation"));
        // Committed (active once its window has begun): never left tentative.
        assert!(r["state"] == "committed" || r["state"] == "active", "{r}");
        assert!(r["expires_at"].is_null(), "{r}");
        assert_eq!(r["acl"]["users"], json!(["admin"]), "{r}");
        assert_eq!(r["start"], t["planned_start"], "{r} {t}");
        assert_eq!(
            s.show(t["job"].as_u64().unwrap())["reservation"],
            t["reservation"]
        );
    }
    let w = wait_workflow(&s, id, "over", over);
    assert_eq!(w["state"], "completed", "{w}");
    let started = |t: &str| int(task(&w, t), "started_at");
    let ended = |t: &str| int(task(&w, t), "ended_at");
    assert!(started("D") >= ended("B").max(ended("C")), "{w}");
    // The reserved start is the latest start (early where inputs and processors are ready).
    for t in ["A", "B", "C", "D"] {
        assert!(started(t) <= int(task(&w, t), "planned_start") + 2, "{w}");
    }
    assert_eq!(
        std::fs::read_to_string(s.scratch().join("d.txt")).unwrap(),
        "a\nb\na\nc\n"
    );
}

/// A workflow's tasks are admitted together: each may fit the budget alone, but the
/// workflow is refused with 402 (naming `tasks`, nothing submitted) unless all of them fit.
#[test]
fn a_workflow_whose_tasks_together_exceed_the_budget_is_refused_whole() {
    let s = Server::start(4);
    let (_, clusters) = s.http().get("/clusters");
    let tariff = clusters[0]["tariff"].as_f64().unwrap();
    assert!(tariff > 0.0, "{clusters}");
    // One task of 1 processor × 60 s fits; three do not.
    let one = tariff * 60.0;
    let eve = s.add_user("eve", Some(one * 2.5));
    let http = Http::new(&s.url, &eve);
    let task = |name: &str| json!({"name": name, "command": ["true"], "walltime": 60});
    let wf = json!({"name": "w", "tasks": [task("A"), task("B"), task("C")]});
    let (status, v) = http.post("/workflows", &wf);
    assert_eq!(status, 402, "{v}");
    assert_eq!(v["field"], "tasks", "{v}");
    let text = v["message"].as_str().unwrap_or_default();
    assert!(
        text.contains(&format!(
            "the 3 jobs together may cost {:.2} at worst",
            one * 3.0
        )) && text.contains("none was submitted"),
        "{v}"
    );
    assert!(s.http().jobs().is_empty());
    // Two fit.
    let wf = json!({"name": "w", "tasks": [task("A"), task("B")]});
    let (status, v) = http.post("/workflows", &wf);
    assert_eq!(status, 201, "{v}");
}

// ------------------------------------------------------------------ files on edges

/// Clusters `a` (feature `one`) and `b` (feature `two`), each with its own scratch
/// `work_dir` under `root`: they share no working directory.
fn two_scratch_clusters(root: &std::path::Path) -> String {
    format!(
        r#"
[[cluster]]
name = "a"
procs = 2
features = ["one"]
work_dir = "{a}"

[[cluster]]
name = "b"
procs = 2
features = ["two"]
work_dir = "{b}"
"#,
        a = root.join("a").display(),
        b = root.join("b").display(),
    )
}

/// A on `a` writes `out/mesh.dat`; B on `b` reads it; the edge names `files`.
fn mesh_then_solve(files: &str) -> String {
    format!(
        r#"name: cae
tasks:
  - name: A
    command: [sh, -c, 'mkdir -p out && echo "mesh from $PWD" > out/mesh.dat']
    walltime: 1
    requires: [one]
  - name: B
    command: [sh, -c, 'cat out/mesh.dat > solved.txt && echo solved >> solved.txt']
    walltime: 1
    requires: [two]
edges:
  - {{from: A, to: B, data_mb: 1, files: {files}}}
"#
    )
}

/// A server on [`two_scratch_clusters`] under a directory of its own.
fn scratch_server() -> (Server, tempfile::TempDir, std::path::PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(d.path()).unwrap();
    (Server::with_config(&two_scratch_clusters(&root)), d, root)
}

#[test]
fn an_edges_files_move_to_the_cluster_the_successor_runs_on() {
    let (s, _d, root) = scratch_server();
    let id = submit(&s, &mesh_then_solve("[out/mesh.dat]"), &[]);
    let w = wait_workflow(&s, id, "over", over);
    assert_eq!(task(&w, "A")["cluster"], "a", "{w}");
    assert_eq!(task(&w, "B")["cluster"], "b", "{w}");
    assert_eq!(w["state"], "completed", "{w}");
    // Each task ran in its cluster's own directory for the workflow; B found A's file
    // there, at the same relative path.
    let on = |c: &str| root.join(c).join(format!("workflow-{id}"));
    let solved = std::fs::read_to_string(on("b").join("solved.txt")).unwrap();
    assert_eq!(
        solved,
        format!("mesh from {}\nsolved\n", on("a").display()),
        "{w}"
    );
    // A's job records the copy, done, to b.
    let ja = s.show(task(&w, "A")["job"].as_u64().unwrap());
    assert_eq!(ja["output_staging"]["cluster"], "b", "{ja}");
    assert!(ja["output_staging"]["error"].is_null(), "{ja}");
    assert!(ja["reason"].is_null(), "{ja}");
    let started_b = int(task(&w, "B"), "started_at");
    assert!(
        started_b >= int(&ja["output_staging"], "ended_at"),
        "{ja} {w}"
    );
}

#[test]
fn a_missing_edge_file_cancels_the_successor_naming_the_edge_and_the_file() {
    let (s, _d, _root) = scratch_server();
    let id = submit(&s, &mesh_then_solve("[out/mesh.dat, out/none.dat]"), &[]);
    let w = wait_workflow(&s, id, "over", over);
    assert_eq!(task(&w, "A")["state"], "completed", "{w}");
    let b = task(&w, "B");
    assert_eq!(b["state"], "cancelled", "{w}");
    assert!(b["started_at"].is_null(), "{w}");
    let reason = b["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("DependencyNeverSatisfied:")
            && reason.contains("edge A -> B, file out/none.dat: ")
            && reason.contains("No such file"),
        "{reason}"
    );
    // The workflow ends as a task that is cancelled leaves it.
    assert_eq!(w["state"], "cancelled", "{w}");
    let ja = s.show(task(&w, "A")["job"].as_u64().unwrap());
    assert!(
        ja["reason"]
            .as_str()
            .unwrap()
            .contains("edge A -> B, file out/none.dat"),
        "{ja}"
    );
}

/// A fork: A on `a` writes `out/b.dat` only; the edge to B names it, the edge to C names a
/// file A never writes. B gets its file and completes; C alone is cancelled, naming its
/// edge and the file; the workflow ends `cancelled`.
#[test]
fn a_missing_edge_file_cancels_only_that_edges_successor() {
    let (s, _d, root) = scratch_server();
    let yaml = r#"name: fork
tasks:
  - name: A
    command: [sh, -c, 'mkdir -p out && echo b > out/b.dat']
    walltime: 1
    requires: [one]
  - name: B
    command: [sh, -c, 'cat out/b.dat > b.txt']
    walltime: 1
    requires: [two]
  - name: C
    command: [sh, -c, 'echo c > c.txt']
    walltime: 1
    requires: [two]
edges:
  - {from: A, to: B, files: [out/b.dat]}
  - {from: A, to: C, files: [out/c.dat]}
"#;
    let id = submit(&s, yaml, &[]);
    let w = wait_workflow(&s, id, "over", over);
    assert_eq!(task(&w, "A")["state"], "completed", "{w}");
    assert_eq!(task(&w, "B")["state"], "completed", "{w}");
    let on_b = root.join("b").join(format!("workflow-{id}"));
    assert_eq!(std::fs::read_to_string(on_b.join("b.txt")).unwrap(), "b\n");
    let c = task(&w, "C");
    assert_eq!(c["state"], "cancelled", "{w}");
    assert!(c["started_at"].is_null(), "{w}");
    assert!(!on_b.join("c.txt").exists(), "{w}");
    let reason = c["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("DependencyNeverSatisfied:")
            && reason.contains("edge A -> C, file out/c.dat: ")
            && reason.contains("No such file")
            && !reason.contains("edge A -> B"),
        "{reason}"
    );
    assert_eq!(w["state"], "cancelled", "{w}");
    // A's copy names the failed edge; its own outputs were not at fault.
    let ja = s.show(task(&w, "A")["job"].as_u64().unwrap());
    let error = ja["output_staging"]["error"].as_str().unwrap_or_default();
    assert!(error.starts_with("edge A -> C, file out/c.dat: "), "{ja}");
}
