//! The grid simulation on small synthetic grids: the lookahead planner runs what no single
//! cluster can, budgets hold, runs are deterministic, and bad configurations are named.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use foresight_sim::grid::{simulate_grid, Broker, GridConfig};

const GRID: &str = r#"
days = 1
cycle_seconds = 300
lead_time_seconds = 600
[[cluster]]
name = "a"
procs = 64
local = { load = 0.5, seed = 1 }
[[cluster]]
name = "b"
procs = 64
speed = 2.0
tariff = 2.0
local = { load = 0.5, seed = 2 }
[[user]]
id = 0
budget = 1e12
[global]
arrivals_per_hour = 2
procs = [8, 100]
runtime_seconds = [600, 7200]
price = [2.0, 8.0]
input_mb = 500
seed = 3
"#;

#[test]
fn lookahead_runs_jobs_no_cluster_holds_and_queues_cannot() {
    let cfg = GridConfig::parse(GRID, "grid.toml").unwrap();
    let look = simulate_grid(&cfg, Broker::Lookahead).unwrap();
    let queue = simulate_grid(&cfg, Broker::Queue).unwrap();
    assert!(look.global_submitted > 20);
    assert_eq!(look.global_submitted, queue.global_submitted);
    // Jobs of more than 64 processors exist; only co-allocation runs them.
    assert!(queue.global_refused > 0, "{queue:?}");
    assert_eq!(look.global_refused, 0);
    assert_eq!(look.global_unfinished, 0);
    assert_eq!(look.global.jobs, look.global_submitted);
    assert!(look.coallocated_share > 0.0);
    assert_eq!(
        look.max_start_skew, 0,
        "co-allocated parts start at the same second"
    );
    assert_eq!(queue.coallocated_share, 0.0);
    for c in &look.clusters {
        assert!(c.utilization > 0.0 && c.utilization <= 1.0, "{c:?}");
    }
    assert!(look.charged > 0.0);
}

#[test]
fn the_same_configuration_gives_the_same_report() {
    let cfg = GridConfig::parse(GRID, "grid.toml").unwrap();
    for broker in [Broker::Lookahead, Broker::Queue, Broker::Dedicated(0.25)] {
        assert_eq!(
            simulate_grid(&cfg, broker).unwrap(),
            simulate_grid(&cfg, broker).unwrap()
        );
    }
}

#[test]
fn budgets_bound_what_users_are_charged() {
    let small = GRID.replace("budget = 1e12", "budget = 2e6");
    let cfg = GridConfig::parse(&small, "grid.toml").unwrap();
    let r = simulate_grid(&cfg, Broker::Lookahead).unwrap();
    assert!(
        r.global_refused > 0,
        "some jobs' worst case exceeds 2e6: {r:?}"
    );
    assert!(r.charged <= 2e6, "charged {} of a 2e6 budget", r.charged);
}

#[test]
fn bad_configurations_name_the_problem() {
    let cases = [
        (
            GRID.replace("procs = 64\nspeed", "procs = 0\nspeed"),
            "cluster \"b\": procs must be at least 1",
        ),
        (
            GRID.replace("name = \"b\"", "name = \"a\""),
            "cluster \"a\" is defined twice",
        ),
        (
            GRID.replace("seed = 3", "seed = 3\ncolour = 1"),
            "unknown field `colour`",
        ),
        (
            GRID.replace(
                "[[cluster]]\nname = \"a\"",
                "[[cluster]]\nname = \"a\"\npolicy = \"lifo\"",
            ),
            "policy \"lifo\"",
        ),
        (
            GRID.replace("procs = [8, 100]", "procs = [8, 4]"),
            "global.procs",
        ),
    ];
    for (text, want) in cases {
        let err = GridConfig::parse(&text, "grid.toml")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("grid.toml: ") && err.contains(want),
            "{err} (wanted {want})"
        );
    }
    assert!(Broker::parse("dedicated:1.5").is_none());
    assert_eq!(
        Broker::parse("dedicated:0.25"),
        Some(Broker::Dedicated(0.25))
    );
}

#[test]
fn the_global_stream_can_replay_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    let swf = dir.path().join("global.swf");
    // Three jobs: 10, 100 (more than either cluster) and 20 processors.
    std::fs::write(
        &swf,
        "; MaxProcs: 128\n\
         1 0 -1 600 10 -1 -1 10 900 -1 1 1 1 -1 1 -1 -1 -1\n\
         2 60 -1 1200 100 -1 -1 100 1800 -1 1 1 1 -1 1 -1 -1 -1\n\
         3 120 -1 300 20 -1 -1 20 600 -1 1 1 1 -1 1 -1 -1 -1\n",
    )
    .unwrap();
    let text = GRID.replace(
        "[global]\narrivals_per_hour = 2\nprocs = [8, 100]\nruntime_seconds = [600, 7200]\n",
        &format!("[global]\ntrace = {:?}\n", swf.to_str().unwrap()),
    );
    assert!(text.contains("trace = "), "{text}");
    let cfg_path = dir.path().join("grid.toml");
    std::fs::write(&cfg_path, &text).unwrap();
    let cfg = GridConfig::read(&cfg_path).unwrap();
    let look = simulate_grid(&cfg, Broker::Lookahead).unwrap();
    assert_eq!(look.global_submitted, 3);
    assert_eq!(look.global.jobs, 3);
    assert!(
        look.coallocated_share > 0.0,
        "the 100-processor job spans both clusters"
    );
    let queue = simulate_grid(&cfg, Broker::Queue).unwrap();
    assert_eq!(queue.global_refused, 1);
}
