//! `sim grid` with licence pools (`[[licence]]`): a pool shared by both clusters, asked
//! for by a share of the local and of the global jobs. Replayed from what the lookahead run
//! started, the licences held at once never exceed the pool; jobs asking for licences wait
//! longer than the others; a bad pool is named.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use foresight_sim::grid::{lookahead_trace, simulate_grid, BrokerKind, GridConfig, TracedJob};
use std::collections::BTreeMap;

const GRID: &str = r#"
days = 1
cycle_seconds = 300
lead_time_seconds = 600
[[cluster]]
name = "a"
procs = 32
local = { load = 0.5, seed = 1 }
[[cluster]]
name = "b"
procs = 32
local = { load = 0.5, seed = 2 }
[global]
arrivals_per_hour = 3
procs = [1, 40]
runtime_seconds = [600, 7200]
price = [2.0, 8.0]
seed = 3
[[licence]]
name = "ansys"
count = 3
clusters = ["a", "b"]
local_share = 0.3
global_share = 0.3
max = 2
seed = 4
"#;

#[test]
fn a_shared_pool_is_never_oversubscribed_and_makes_its_jobs_wait() {
    let cfg = GridConfig::parse(GRID, "grid.toml").unwrap();
    let t = lookahead_trace(&cfg).unwrap();
    // (instant, +held / −held) of every job that ran, local and global, asking licences.
    let mut changes: BTreeMap<i64, i64> = BTreeMap::new();
    let mut asking = 0;
    for (k, starts) in t.starts.iter().enumerate() {
        for (&job, &start) in starts {
            let (n, run) = match job {
                TracedJob::Local(i) => {
                    let (j, runtime) = &t.local[k][i as usize];
                    (j.licences.get("ansys").copied(), (*runtime).min(j.estimate))
                }
                TracedJob::Global(i) => {
                    let (g, runtime) = &t.global[i as usize];
                    // Held once for the whole job: counted on its lowest cluster only.
                    let lowest = t
                        .starts
                        .iter()
                        .position(|s| s.contains_key(&TracedJob::Global(i)))
                        .unwrap();
                    let n = if lowest == k {
                        g.licences.get("ansys").copied()
                    } else {
                        None
                    };
                    (n, (*runtime).min(g.walltime))
                }
            };
            if let Some(n) = n {
                asking += 1;
                *changes.entry(start.secs()).or_default() += i64::from(n);
                *changes.entry((start + run).secs()).or_default() -= i64::from(n);
            }
        }
    }
    assert!(asking > 20, "{asking} jobs asked for licences");
    let mut held = 0;
    for (at, delta) in changes {
        held += delta;
        assert!(held <= 3, "{held} licences held at {at}");
    }
    let r = simulate_grid(&cfg, BrokerKind::Lookahead).unwrap();
    assert_eq!(r.global_unfinished, 0);
    assert!(r.with_licences.jobs > 20, "{r:?}");
    assert_eq!(
        r.with_licences.jobs + r.without_licences.jobs,
        r.local.jobs + r.global.jobs
    );
    assert!(
        r.with_licences.mean_wait > r.without_licences.mean_wait,
        "{:?} {:?}",
        r.with_licences,
        r.without_licences
    );
}

#[test]
fn bad_licence_pools_are_named() {
    for (change, want) in [
        ("count = 3", "count = 0", "count must be at least 1"),
        (
            "clusters = [\"a\", \"b\"]",
            "clusters = [\"c\"]",
            "no cluster is named \"c\"",
        ),
        (
            "max = 2",
            "max = 4",
            "max must be from 1 to the count 3, got 4",
        ),
        (
            "local_share = 0.3",
            "local_share = 1.5",
            "local_share must be from 0 to 1",
        ),
    ]
    .map(|(from, to, want)| ((from, to), want))
    {
        let text = GRID.replace(change.0, change.1);
        let e = GridConfig::parse(&text, "grid.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("licence \"ansys\"") && e.contains(want), "{e}");
    }
}
