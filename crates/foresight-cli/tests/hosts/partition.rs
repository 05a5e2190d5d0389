//! A site's link cut while its grid jobs run, then restored: the centre marks the site down
//! after its lease, the site's running jobs run on there, and after the link is back every
//! job has run exactly once, at the site (each job appends its tag to a file at the site).

use crate::common::wait_for;
use crate::grid::{Grid, Options, DEFAULT};
use serde_json::{json, Value};
use std::time::Duration;

/// Jobs of 2 processors on a site of 4: two run while the link is cut, two wait for them.
const JOBS: usize = 4;

#[test]
fn a_site_cut_off_during_a_run_and_restored_runs_every_job_there_once() {
    let Some(_serial) = crate::harness("a site's link cut and restored") else {
        return;
    };
    let grid = Grid::new(
        1,
        Options {
            lease: 3,
            ..DEFAULT
        },
    );
    let site = &grid.sites[0];
    let runs = site.server.scratch().join("runs");
    let ids: Vec<u64> = (0..JOBS)
        .map(|k| {
            let script = format!("echo job-{k} >> {}; sleep 5", runs.display());
            grid.centre.http().submit(json!({
                "procs": 2, "walltime": 120, "command": ["sh", "-c", script],
            }))
        })
        .collect();
    let running = |id: u64| grid.centre.show(id)["state"] == "running";
    wait_for("two jobs running", Duration::from_secs(30), || {
        (ids.iter().filter(|&&id| running(id)).count() == 2).then_some(())
    });
    site.host.cut();
    let down = wait_for(
        "the site's cluster down at the centre",
        Duration::from_secs(30),
        || grid.clusters().into_iter().find(|c| c["state"] != "up"),
    );
    assert!(
        down["reason"].to_string().contains("silent"),
        "the centre names the silence: {down}"
    );
    site.host.restore();
    for &id in &ids {
        let j = grid.centre.wait_final(id, Duration::from_secs(90));
        assert_eq!(j["state"], "completed", "{j}");
        assert_eq!(j["parts"][0]["cluster"], "umea-abisko", "{j}");
    }
    // Each ran once, at the site: no part started twice, none planned again elsewhere.
    let mut seen: Vec<String> = crate::common::lines(&runs);
    seen.sort();
    let want: Vec<String> = (0..JOBS).map(|k| format!("job-{k}")).collect();
    assert_eq!(seen, want, "the runs the site recorded");
    for &id in &ids {
        let parts: Vec<Value> = site.server.http().grid_parts(id);
        let started: Vec<&Value> = parts.iter().filter(|p| p["started_at"].is_i64()).collect();
        assert_eq!(started.len(), 1, "job {id} at the site: {parts:?}");
        assert_eq!(started[0]["state"], "completed", "{}", started[0]);
    }
}
