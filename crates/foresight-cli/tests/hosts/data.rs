//! Files between hosts through the centre: a workflow's edge file written at one site is
//! brought up to the centre and fetched by the successor's site, and the successor's
//! output comes back to the job's working directory on the centre's host, each checked by
//! SHA-256, over the delayed, lossy, capped links.

use crate::grid::{Grid, DEFAULT};
use serde_json::Value;
use std::time::Duration;

#[test]
fn a_workflow_edge_file_crosses_sites_and_its_output_comes_back_to_the_centre() {
    let Some(_serial) = crate::harness("a workflow's files across hosts") else {
        return;
    };
    let grid = Grid::new(2, DEFAULT);
    let centre = &grid.centre;
    let home = centre.scratch().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let wf = centre.scratch().join("wf.yaml");
    std::fs::write(
        &wf,
        r#"name: cae
tasks:
  - name: A
    command: [sh, -c, 'mkdir -p out && head -c 6000000 /dev/urandom > out/mesh.dat && sha256sum < out/mesh.dat']
    walltime: 2
    requires: [umea]
  - name: B
    command: [sh, -c, 'sha256sum < out/mesh.dat']
    walltime: 2
    requires: [lund]
edges:
  - {from: A, to: B, data_mb: 6, files: [out/mesh.dat]}
"#,
    )
    .unwrap();
    let id: u64 = centre
        .run(&["workflow", "submit", wf.to_str().unwrap()])
        .trim()
        .parse()
        .unwrap();
    let show = || -> Value {
        serde_json::from_str(&centre.run(&["workflow", "show", &id.to_string(), "-o", "json"]))
            .unwrap()
    };
    let w = crate::common::wait_for("the workflow over", Duration::from_secs(150), || {
        let w = show();
        let over = w["tasks"].as_array().unwrap().iter().all(|t| {
            !matches!(
                t["state"].as_str(),
                Some("pending" | "running" | "reserved" | "planned")
            )
        });
        over.then_some(w)
    });
    assert_eq!(w["state"], "completed", "{w}");
    let job = |name: &str| {
        w["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap()["job"]
            .as_u64()
            .unwrap()
    };
    let (a, b) = (job("A"), job("B"));
    // A's sum at umea is B's at lund: the file crossed whole.
    let sum_a = centre.run(&["job", "cat", &a.to_string()]);
    let sum_b = centre.run(&["job", "cat", &b.to_string()]);
    assert_eq!(sum_a, sum_b);
    assert_eq!(sum_a.len(), "-\n".len() + 64 + 2, "{sum_a:?}");
    // A job's output written at a site comes back to its working directory on the
    // centre's host, once copied.
    let id = centre.http().submit(serde_json::json!({
        "procs": 1, "walltime": 120, "cwd": home.display().to_string(),
        "command": ["sh", "-c", "head -c 5000000 /dev/urandom > back.bin && sha256sum < back.bin"],
        "outputs": [{ "path": "back.bin" }],
    }));
    let j = centre.wait_final(id, Duration::from_secs(90));
    assert_eq!(j["state"], "completed", "{j}");
    let j = crate::common::wait_for("the output copied", Duration::from_secs(60), || {
        let j: Value =
            serde_json::from_str(&centre.run(&["job", "show", &id.to_string(), "-o", "json"]))
                .unwrap();
        j["output_staging"]["ended_at"].is_i64().then_some(j)
    });
    assert!(j["output_staging"]["error"].is_null(), "{j}");
    let there = centre.run(&["job", "cat", &id.to_string()]);
    let here = crate::inputs::sha256(&home.join("back.bin"));
    assert_eq!(
        there.split_whitespace().next(),
        Some(here.as_str()),
        "{there}"
    );
    // Neither site ran in the centre's directory.
    for s in &grid.sites {
        assert!(!s.server.root().starts_with(centre.root()));
    }
}
