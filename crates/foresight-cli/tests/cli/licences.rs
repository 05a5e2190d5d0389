//! Features and licences on the real binary: clusters declare `features`, `[[licence]]`
//! pools hold licences in time. Two jobs asking for 3 licences of a pool of 4 run one after
//! the other although processors are free for both; a job requiring a feature goes only
//! where it is offered; demands that can never be met are refused at submission, naming
//! the feature or the pool and its size.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

use crate::common::{int, Server};
use std::time::Duration;

const GRID: &str = r#"
[[cluster]]
name = "a"
procs = 4
features = ["ansys", "x86_64"]

[[cluster]]
name = "b"
procs = 4
features = ["x86_64"]

[[licence]]
name = "ansys"
count = 4
clusters = ["a"]
"#;

/// The standard error of a submission that must fail.
fn refused(s: &Server, args: &[&str]) -> String {
    let mut a = vec!["job", "submit"];
    a.extend_from_slice(args);
    let out = s.cli().args(&a).output().unwrap();
    assert!(!out.status.success(), "{args:?} was accepted");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn jobs_sharing_a_licence_pool_run_one_after_the_other() {
    let s = Server::with_config(GRID);
    let args = [
        "--cluster",
        "a",
        "--licence",
        "ansys:3",
        "-t",
        "1m",
        "--",
        "sleep",
        "2",
    ];
    let first = s.submit(&args);
    let second = s.submit(&args);
    let (f, g) = (
        s.wait_final(first, Duration::from_secs(30)),
        s.wait_final(second, Duration::from_secs(30)),
    );
    assert_eq!(f["state"], "completed", "{f}");
    assert_eq!(g["state"], "completed", "{g}");
    // The job says what it held, in the API and in `job show`.
    assert_eq!(f["licences"]["ansys"], 3, "{f}");
    let out = s
        .cli()
        .args(["job", "show", &first.to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("licences      ansys:3"), "{text}");
    // 1 processor each on a cluster of 4: only the licences keep them apart.
    let (a, b) = if int(&f, "started_at") <= int(&g, "started_at") {
        (f, g)
    } else {
        (g, f)
    };
    assert!(
        int(&b, "started_at") >= int(&a, "ended_at"),
        "they overlapped: {a} {b}"
    );
}

#[test]
fn features_choose_the_cluster_and_impossible_demands_are_refused() {
    let s = Server::with_config(GRID);
    let id = s.submit(&["--requires", "ansys", "-n", "2", "-t", "1m", "--", "true"]);
    let j = s.wait_final(id, Duration::from_secs(30));
    assert_eq!(j["state"], "completed", "{j}");
    assert_eq!(j["parts"][0]["cluster"], "a", "{j}");
    assert_eq!(j["parts"].as_array().unwrap().len(), 1, "{j}");
    assert_eq!(j["requires"][0], "ansys", "{j}");

    let e = refused(&s, &["--requires", "abaqus", "--", "true"]);
    assert!(e.contains("no cluster offers feature \"abaqus\""), "{e}");
    let e = refused(&s, &["--cluster", "b", "--requires", "ansys", "--", "true"]);
    assert!(
        e.contains("cluster \"b\" does not offer feature \"ansys\""),
        "{e}"
    );
    let e = refused(
        &s,
        &["--cluster", "a", "--licence", "ansys:5", "--", "true"],
    );
    assert!(
        e.contains("5 licences \"ansys\" asked, the pool \"ansys\" has 4"),
        "{e}"
    );
    let e = refused(
        &s,
        &["--cluster", "b", "--licence", "ansys:1", "--", "true"],
    );
    assert!(
        e.contains("no licence pool \"ansys\" serves cluster \"b\""),
        "{e}"
    );
    let e = refused(&s, &["--licence", "ansys:0", "--", "true"]);
    assert!(e.contains("--licence"), "{e}");
}

/// A floating licence server: one pool of 4 drawn on by clusters a and b. A job on each
/// asks for 3; they run one after the other although each has its own idle cluster.
#[test]
fn a_pool_shared_by_two_clusters_is_held_once() {
    let s = Server::with_config(
        r#"
[[cluster]]
name = "a"
procs = 4

[[cluster]]
name = "b"
procs = 4

[[licence]]
name = "ansys"
count = 4
clusters = ["a", "b"]
"#,
    );
    let on = |c: &'static str| {
        [
            "--cluster",
            c,
            "--licence",
            "ansys:3",
            "-t",
            "1m",
            "--",
            "sleep",
            "2",
        ]
    };
    let first = s.submit(&on("a"));
    let second = s.submit(&on("b"));
    let (f, g) = (
        s.wait_final(first, Duration::from_secs(30)),
        s.wait_final(second, Duration::from_secs(30)),
    );
    assert_eq!(f["state"], "completed", "{f}");
    assert_eq!(g["state"], "completed", "{g}");
    assert_eq!(f["parts"][0]["cluster"], "a", "{f}");
    assert_eq!(g["parts"][0]["cluster"], "b", "{g}");
    let (a, b) = if int(&f, "started_at") <= int(&g, "started_at") {
        (f, g)
    } else {
        (g, f)
    };
    assert!(
        int(&b, "started_at") >= int(&a, "ended_at"),
        "they overlapped: {a} {b}"
    );
    // More than the shared pool holds is refused on either cluster.
    let e = refused(
        &s,
        &["--cluster", "b", "--licence", "ansys:5", "--", "true"],
    );
    assert!(
        e.contains("5 licences \"ansys\" asked, the pool \"ansys\" has 4"),
        "{e}"
    );
}
