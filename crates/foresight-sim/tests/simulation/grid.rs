//! The grid simulation on small synthetic grids: the lookahead planner runs what no single
//! cluster can, budgets hold, runs are deterministic, and bad configurations are named.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use foresight_core::Time;
use foresight_sim::grid::{
    simulate_grid, simulate_grid_watched, BrokerKind, GridConfig, GridPass, GridProgress,
};

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
    let look = simulate_grid(&cfg, BrokerKind::Lookahead).unwrap();
    let queue = simulate_grid(&cfg, BrokerKind::Queue).unwrap();
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

/// `sim grid` shows how far each run has got: the broker's run, then the baseline, each
/// from the start to the last arrival with a clock that never goes back, and watching
/// changes nothing in the report.
#[test]
fn a_watched_run_reports_its_clock_from_start_to_last_arrival_in_both_passes() {
    let cfg = GridConfig::parse(GRID, "grid.toml").unwrap();
    let mut seen: Vec<GridProgress> = Vec::new();
    let watched =
        simulate_grid_watched(&cfg, BrokerKind::Lookahead, &mut |p| seen.push(p)).unwrap();
    let plain = simulate_grid(&cfg, BrokerKind::Lookahead).unwrap();
    assert_eq!(watched, plain);
    let split = seen
        .iter()
        .position(|p| p.pass == GridPass::LocalOnly)
        .unwrap();
    let (with, without) = seen.split_at(split);
    assert!(without.iter().all(|p| p.pass == GridPass::LocalOnly));
    for pass in [with, without] {
        let last = pass[0].last_arrival;
        // A day of arrivals: the last one late in the day.
        assert!(last > Time(20 * 3600) && last <= Time(86_400), "{last:?}");
        assert!(pass.iter().all(|p| p.last_arrival == last));
        assert_eq!(pass.first().unwrap().now, Time(0));
        assert_eq!(pass.last().unwrap().now, last);
        assert!(pass.windows(2).all(|w| w[0].now <= w[1].now), "{pass:?}");
    }
}

#[test]
fn the_same_configuration_gives_the_same_report() {
    let cfg = GridConfig::parse(GRID, "grid.toml").unwrap();
    for broker in [
        BrokerKind::Lookahead,
        BrokerKind::Queue,
        BrokerKind::Dedicated(0.25),
    ] {
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
    let r = simulate_grid(&cfg, BrokerKind::Lookahead).unwrap();
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
            "policy: \"lifo\" is not a policy",
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
    assert!(BrokerKind::parse("dedicated:1.5").is_none());
    assert_eq!(
        BrokerKind::parse("dedicated:0.25"),
        Some(BrokerKind::Dedicated(0.25))
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
    let look = simulate_grid(&cfg, BrokerKind::Lookahead).unwrap();
    assert_eq!(look.global_submitted, 3);
    assert_eq!(look.global.jobs, 3);
    assert!(
        look.coallocated_share > 0.0,
        "the 100-processor job spans both clusters"
    );
    let queue = simulate_grid(&cfg, BrokerKind::Queue).unwrap();
    assert_eq!(queue.global_refused, 1);
}

/// A one-cluster grid of 2 slow (1.0) and 2 fast (2.0) processors with the given local and
/// global traces, written next to the configuration.
fn mixed_grid(dir: &std::path::Path, local: &str, global: &str) -> GridConfig {
    std::fs::write(dir.join("local.swf"), format!("; MaxProcs: 4\n{local}")).unwrap();
    std::fs::write(dir.join("global.swf"), format!("; MaxProcs: 4\n{global}")).unwrap();
    let text = r#"
days = 1
cycle_seconds = 60
lead_time_seconds = 600
[[cluster]]
name = "mixed"
procs = 4
groups = [ { procs = 2, speed = 1.0 }, { procs = 2, speed = 2.0 } ]
local = { trace = "local.swf" }
[global]
trace = "global.swf"
price = [1.0, 1.0]
"#;
    let path = dir.join("grid.toml");
    std::fs::write(&path, text).unwrap();
    GridConfig::read(&path).unwrap()
}

/// One global job of 2 processors, 1000 s (estimate = runtime), at 0 on an idle cluster of
/// 2 slow + 2 fast processors. Earliest finish: the fast pair, [0, 500) — half its walltime —
/// charged 2 × 500 × 1.0 = 1000. The queue baseline counts on the slowest group: 1000 s,
/// charged 2000.
#[test]
fn a_fast_pair_within_a_cluster_runs_a_job_in_half_its_walltime() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = mixed_grid(
        dir.path(),
        "",
        "1 0 -1 1000 2 -1 -1 2 1000 -1 1 1 1 -1 1 -1 -1 -1\n",
    );
    let look = simulate_grid(&cfg, BrokerKind::Lookahead).unwrap();
    assert_eq!(look.global.jobs, 1, "{look:?}");
    assert_eq!(look.global.mean_wait, 0.0);
    assert_eq!(look.global.mean_response, 500.0);
    assert_eq!(look.clusters[0].global_proc_seconds, 1000.0);
    assert_eq!(look.charged, 1000.0);
    let queue = simulate_grid(&cfg, BrokerKind::Queue).unwrap();
    assert_eq!(queue.global.jobs, 1, "{queue:?}");
    assert_eq!(queue.global.mean_response, 1000.0);
    assert_eq!(queue.charged, 2000.0);
}

/// A local job of 2 processors runs [0, 300); the planner sees it on the fast pair (work
/// already on a cluster is laid on its fastest processors). For the 2-processor, 1000 s global
/// job the slow pair would finish at 1000, the fast pair, free at 300, at 300 + 500 = 800:
/// earliest finish waits for the fast pair. The local job keeps its trace runtime.
#[test]
fn earliest_finish_waits_for_the_fast_group_when_that_ends_sooner() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = mixed_grid(
        dir.path(),
        "1 0 -1 300 2 -1 -1 2 300 -1 1 1 1 -1 1 -1 -1 -1\n",
        "1 0 -1 1000 2 -1 -1 2 1000 -1 1 1 1 -1 1 -1 -1 -1\n",
    );
    let look = simulate_grid(&cfg, BrokerKind::Lookahead).unwrap();
    assert_eq!(look.global.jobs, 1, "{look:?}");
    assert_eq!(look.global.mean_wait, 300.0);
    assert_eq!(look.global.mean_response, 800.0);
    assert_eq!(look.local.jobs, 1);
    assert_eq!(look.local.mean_response, 300.0);
    assert_eq!(look.charged, 1000.0);
}

#[test]
fn one_group_of_reference_speed_is_a_plain_cluster() {
    let plain = GridConfig::parse(GRID, "grid.toml").unwrap();
    let grouped = GridConfig::parse(
        &GRID.replace(
            "name = \"a\"\nprocs = 64\n",
            "name = \"a\"\nprocs = 64\ngroups = [ { procs = 64, speed = 1.0 } ]\n",
        ),
        "grid.toml",
    )
    .unwrap();
    assert!(grouped.cluster[0].groups.is_some());
    for broker in [
        BrokerKind::Lookahead,
        BrokerKind::Queue,
        BrokerKind::Dedicated(0.25),
    ] {
        assert_eq!(
            simulate_grid(&plain, broker).unwrap(),
            simulate_grid(&grouped, broker).unwrap()
        );
    }
}

/// Cluster "b" of GRID split into 48 slow and 16 fast processors, over several seeds: runs
/// are deterministic, every global job the planner takes finishes, co-allocated parts start
/// together, no cluster is used above its capacity, and the users' books balance.
#[test]
fn grids_with_speed_groups_are_deterministic_and_consistent() {
    for seed in 1..=4 {
        let text = GRID
            .replace(
                "procs = 64\nspeed = 2.0",
                "procs = 64\ngroups = [ { procs = 48, speed = 1.0 }, { procs = 16, speed = 3.0 } ]",
            )
            .replace("seed = 3", &format!("seed = {seed}"));
        let cfg = GridConfig::parse(&text, "grid.toml").unwrap();
        assert!(cfg.cluster[1].groups.is_some());
        for broker in [
            BrokerKind::Lookahead,
            BrokerKind::Queue,
            BrokerKind::Dedicated(0.25),
        ] {
            let r = simulate_grid(&cfg, broker).unwrap();
            assert_eq!(r, simulate_grid(&cfg, broker).unwrap(), "seed {seed}");
            for c in &r.clusters {
                assert!(c.utilization > 0.0 && c.utilization <= 1.0, "{c:?}");
            }
            assert_books_balance(&r);
            if broker == BrokerKind::Lookahead {
                assert_eq!(r.global_refused, 0, "seed {seed}: {r:?}");
                assert_eq!(r.global_unfinished, 0, "seed {seed}: {r:?}");
                assert_eq!(r.max_start_skew, 0);
            }
        }
    }
}

#[test]
fn bad_speed_groups_are_named() {
    let grouped = |groups: &str| {
        GRID.replace(
            "procs = 64\nspeed = 2.0",
            &format!("procs = 64\ngroups = {groups}"),
        )
    };
    let cases = [
        (
            GRID.replace(
                "procs = 64\nspeed = 2.0",
                "procs = 64\nspeed = 2.0\ngroups = [ { procs = 64, speed = 2.0 } ]",
            ),
            "cluster \"b\": give either speed or groups, not both",
        ),
        (
            grouped("[ { procs = 32, speed = 1.0 }, { procs = 16, speed = 2.0 } ]"),
            "cluster \"b\": the procs of groups add up to 48, procs is 64",
        ),
        (
            grouped("[ { procs = 32, speed = 1.0 }, { procs = 32, speed = 0.0 } ]"),
            "cluster \"b\": groups[1].speed must be positive",
        ),
        (
            grouped("[ { procs = 0, speed = 1.0 }, { procs = 64, speed = 2.0 } ]"),
            "cluster \"b\": groups[0].procs must be at least 1",
        ),
        (
            grouped("[]"),
            "cluster \"b\": groups must list at least one",
        ),
        (
            grouped("[ { procs = 64, speed = 1.0, colour = 1 } ]"),
            "unknown field `colour`",
        ),
        (
            GRID.replace("speed = 2.0", "speed = -1.0"),
            "cluster \"b\": speed must be positive",
        ),
        (
            GRID.replace(
                "[[user]]\nid = 0\nbudget = 1e12",
                "[[user]]\nid = 0\nbudget = 1e12\n[[user]]\nid = 0\nbudget = 1",
            ),
            "user 0 is defined twice",
        ),
        (
            GRID.replace("budget = 1e12", "budget = -5"),
            "user 0: budget must be a number >= 0",
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
}

/// Per-user figures add up to the grid's, and no budget ends below zero.
fn assert_books_balance(r: &foresight_sim::grid::GridReport) {
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
    let charged: f64 = r.users.iter().map(|u| u.charged).sum();
    assert!(close(charged, r.charged), "{charged} vs {}", r.charged);
    let sum = |f: fn(&foresight_sim::grid::UserReport) -> u64| r.users.iter().map(f).sum::<u64>();
    assert_eq!(sum(|u| u.submitted), r.global_submitted);
    assert_eq!(sum(|u| u.refused), r.global_refused);
    assert_eq!(sum(|u| u.finished), r.global.jobs);
    let mut ids: Vec<u32> = r.users.iter().map(|u| u.user).collect();
    ids.dedup();
    assert_eq!(ids.len(), r.users.len(), "one row per user, by id");
    for u in &r.users {
        assert!(u.refused + u.finished <= u.submitted, "{u:?}");
        match (u.budget, u.remaining) {
            (Some(b), Some(left)) => {
                assert!(left >= 0.0, "{} went below zero: {u:?}", r.broker);
                assert!(close(left, b - u.charged), "{u:?}");
                assert!(u.charged <= b * (1.0 + 1e-12), "{u:?}");
            }
            (None, None) => {}
            _ => panic!("a budget and its rest are both given or both unlimited: {u:?}"),
        }
    }
}

#[test]
fn per_user_reports_balance_and_tiny_budgets_refuse() {
    let text = GRID.replace(
        "[[user]]\nid = 0\nbudget = 1e12",
        "[[user]]\nid = 0\nbudget = 1e12\n[[user]]\nid = 1\nbudget = 1e3",
    );
    let cfg = GridConfig::parse(&text, "grid.toml").unwrap();
    for broker in [
        BrokerKind::Lookahead,
        BrokerKind::Queue,
        BrokerKind::Dedicated(0.25),
    ] {
        let r = simulate_grid(&cfg, broker).unwrap();
        assert_books_balance(&r);
        let ids: Vec<u32> = r.users.iter().map(|u| u.user).collect();
        assert_eq!(ids, [0, 1], "{}", r.broker);
        let tiny = &r.users[1];
        assert!(tiny.submitted > 5, "{tiny:?}");
        assert!(tiny.refused > 0, "{}: {tiny:?}", r.broker);
        assert!(tiny.charged <= 1e3, "{tiny:?}");
        assert_eq!(tiny.budget, Some(1e3));
        let rich = &r.users[0];
        assert!(
            rich.charged > 0.0 && rich.finished > 0,
            "{}: {rich:?}",
            r.broker
        );
    }
    // Users without a [[user]] entry have an unlimited budget.
    let cfg = GridConfig::parse(
        &GRID.replace("[[user]]\nid = 0\nbudget = 1e12\n", ""),
        "grid.toml",
    )
    .unwrap();
    let r = simulate_grid(&cfg, BrokerKind::Lookahead).unwrap();
    assert_books_balance(&r);
    assert_eq!(r.users.len(), 1);
    assert_eq!(r.users[0].user, 0);
    assert_eq!(r.users[0].budget, None);
    assert_eq!(r.users[0].remaining, None);
    assert_eq!(r.users[0].refused, 0);
    assert_eq!(r.users[0].submitted, r.global_submitted);
}

/// Users cancel a share of the global jobs: every broker accounts for each job once
/// (finished, refused, cancelled before it started, or unfinished), refunds what it held,
/// and the rest of the stream is the one drawn without cancels.
#[test]
fn cancelled_jobs_are_withdrawn_by_every_broker() {
    let text = GRID.replace(
        "seed = 3\n",
        "seed = 3\ncancel_share = 0.3\ncancel_after_seconds = [60, 1200]\n",
    );
    let cfg = GridConfig::parse(&text, "grid.toml").unwrap();
    let plain = GridConfig::parse(GRID, "grid.toml").unwrap();
    for broker in [
        BrokerKind::Lookahead,
        BrokerKind::Queue,
        BrokerKind::Dedicated(0.25),
    ] {
        let r = simulate_grid(&cfg, broker).unwrap();
        let without = simulate_grid(&plain, broker).unwrap();
        assert_eq!(r.global_submitted, without.global_submitted, "{broker:?}");
        // (Dedicated partitions refuse most of these jobs at once: nothing left to cancel.)
        if broker != BrokerKind::Dedicated(0.25) {
            assert!(r.global_cancelled > 0, "{broker:?}: {r:?}");
        }
        assert_eq!(
            r.global.jobs + r.global_refused + r.global_cancelled + r.global_unfinished,
            r.global_submitted,
            "{broker:?}: {r:?}"
        );
        for u in &r.users {
            assert!(u.remaining.is_none_or(|left| left >= 0.0), "{u:?}");
        }
    }
    let bad = GRID.replace("seed = 3\n", "seed = 3\ncancel_share = 1.5\n");
    let e = GridConfig::parse(&bad, "grid.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("cancel_share"), "{e}");
}
