//! A job larger than any site runs in parts on two sites, each on a host of its own behind
//! a delayed, lossy, capped link, with one synchronous start: the parts' real start times,
//! as each part wrote them at its site, are within 2 s of each other.

use crate::grid::{Grid, Options, DEFAULT};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

/// The command of a co-allocated job whose parts write their start time (seconds since the
/// epoch, with nanoseconds) into `marks`, one file per site's cluster.
pub fn stamp_start(marks: &Path, tag: &str) -> String {
    format!("date +%s.%N > {}/{tag}.$FORESIGHT_CLUSTER", marks.display())
}

/// The start times the parts of `tag` wrote into `marks`, one per site's cluster.
pub fn starts(marks: &Path, tag: &str, clusters: &[&str]) -> Vec<f64> {
    clusters
        .iter()
        .map(|c| {
            let p = marks.join(format!("{tag}.{c}"));
            let text =
                std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            text.trim()
                .parse()
                .unwrap_or_else(|e| panic!("{}: {text:?}: {e}", p.display()))
        })
        .collect()
}

/// A co-allocated job of 6 processors over the two sites of a grid made with `opt`: one
/// part at each, started within 2 s of each other.
fn co_allocated(opt: Options) {
    let grid = Grid::new(2, opt);
    let marks = tempfile::tempdir().unwrap();
    let id = grid.centre.http().submit(json!({
        "procs": 6, "walltime": 60, "co_allocate": true,
        "command": ["sh", "-c", stamp_start(marks.path(), "job")],
    }));
    let j = grid.centre.wait_final(id, Duration::from_secs(60));
    assert_eq!(j["state"], "completed", "{j}");
    assert_eq!(j["parts"].as_array().unwrap().len(), 2, "{j}");
    let mut procs = 0;
    for s in &grid.sites {
        let parts = s.server.http().grid_parts(id);
        assert_eq!(parts.len(), 1, "at {}: {parts:?}", s.name);
        assert_eq!(parts[0]["state"], "completed", "{}", parts[0]);
        procs += parts[0]["procs"].as_u64().unwrap();
    }
    assert_eq!(procs, 6);
    let clusters: Vec<&str> = grid.sites.iter().map(|s| s.cluster.as_str()).collect();
    let t = starts(marks.path(), "job", &clusters);
    let skew = (t[0] - t[1]).abs();
    assert!(skew <= 2.0, "the parts started {skew:.3} s apart: {t:?}");
}

#[test]
fn a_job_co_allocated_over_two_sites_on_other_hosts_starts_within_2_s_on_both() {
    let Some(_serial) = crate::harness("co-allocation across hosts") else {
        return;
    };
    co_allocated(DEFAULT);
}

/// One of the two sites lends a real Slurm cluster, run in its namespace with a munge key
/// and socket of its own: the grid's reservation there is Slurm's own, and the part is
/// submitted into it with `sbatch --reservation`.
///
/// What was wrong: a site refused to lend a Slurm cluster at all; let through, its
/// reservations were only in its records, and `sbatch` refused the part ("Requested
/// reservation is invalid"), failing the job.
#[test]
fn a_job_co_allocated_over_a_slurm_site_and_a_local_one_starts_within_2_s_on_both() {
    let Some(_serial) = crate::harness("co-allocation with a Slurm site") else {
        return;
    };
    if !crate::slurm::available("co-allocation with a Slurm site") {
        return;
    }
    co_allocated(Options {
        slurm_first: true,
        ..DEFAULT
    });
}
