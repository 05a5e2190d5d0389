//! An input on the centre's host reaches a site on another host over the delayed, lossy,
//! capped link: the site fetches it through its relay, checks its SHA-256, the part reads
//! it there, and the centre reads the part's output from the site.

use crate::grid::{Grid, DEFAULT};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

/// Writes `mb` MB of data that does not compress into `path`; its SHA-256 (hex).
pub fn random_file(path: &Path, mb: usize) -> String {
    let dd = std::process::Command::new("dd")
        .args([
            "if=/dev/urandom",
            "bs=1M",
            &format!("count={mb}"),
            "status=none",
        ])
        .arg(format!("of={}", path.display()))
        .status()
        .unwrap();
    assert!(dd.success(), "dd into {}", path.display());
    sha256(path)
}

/// The SHA-256 of `path` (hex), by `sha256sum`.
pub fn sha256(path: &Path) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "sha256sum {}", path.display());
    let text = String::from_utf8(out.stdout).unwrap();
    text.split_whitespace().next().unwrap().to_string()
}

#[test]
fn an_input_on_the_centres_host_is_fetched_over_the_link_checked_and_read_at_the_site() {
    let Some(_serial) = crate::harness("an input fetched across hosts") else {
        return;
    };
    let grid = Grid::new(1, DEFAULT);
    let input = grid.centre.scratch().join("in.dat");
    let want = random_file(&input, 8);
    let id = grid.centre.http().submit(json!({
        "procs": 1, "walltime": 120, "command": ["sh", "-c", "sha256sum < in.dat; pwd"],
        "inputs": [{ "path": input.display().to_string() }],
    }));
    let j = grid.centre.wait_final(id, Duration::from_secs(90));
    assert_eq!(j["state"], "completed", "{j}");
    let staged = j["staging"].as_array().unwrap();
    assert_eq!(staged.len(), 1, "{j}");
    assert!(staged[0]["ended_at"].is_i64(), "{j}");
    // Read at the centre, from the site: the part read the whole file, where it landed.
    let out = grid.centre.run(&["job", "cat", &id.to_string()]);
    let mut lines = out.lines();
    assert_eq!(
        lines.next().and_then(|l| l.split_whitespace().next()),
        Some(want.as_str()),
        "{out}"
    );
    let cwd = Path::new(lines.next().unwrap()).to_path_buf();
    let site = &grid.sites[0].server;
    assert!(cwd.starts_with(site.root()), "{out}");
    assert!(!cwd.starts_with(grid.centre.root()), "{out}");
}
