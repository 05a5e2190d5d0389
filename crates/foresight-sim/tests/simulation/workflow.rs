//! `sim workflow`: seeded workflows mapped by DSC, HEFT and greedy onto a loaded grid.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use foresight_sim::workflow::{simulate_workflows, WorkflowSimConfig, WorkflowSimError};
use std::path::PathBuf;

const SYNTHETIC: &str = r#"
seeds = 3
start_hours = 6
spacing_hours = 6
window_hours = 6
[workflow]
tasks = 14
task_procs = [2, 24]
runtime_seconds = [300, 1800]
data_mb = [100, 5000]
runtime_scale = 5.0
data_scale = 20.0
[[cluster]]
name = "a"
procs = 32
bandwidth_mb_s = 10
local = { load = 0.8, seed = 1 }
[[cluster]]
name = "b"
procs = 48
speed = 2.0
policy = "conservative"
bandwidth_mb_s = 20
latency_seconds = 2
local = { load = 0.7, seed = 2 }
"#;

#[test]
fn every_shape_and_mapper_is_measured_and_dsc_never_loses_to_greedy() {
    let cfg = WorkflowSimConfig::parse(SYNTHETIC, "synthetic").unwrap();
    let r = simulate_workflows(&cfg, None).unwrap();
    assert_eq!(r.seeds, 3);
    assert_eq!(r.rows.len(), 7 * 3);
    for chunk in r.rows.chunks(3) {
        let names: Vec<&str> = chunk.iter().map(|x| x.mapper.as_str()).collect();
        assert_eq!(names, ["dsc", "heft", "greedy"]);
        let (dsc, greedy) = (&chunk[0], &chunk[2]);
        // DSC starts from greedy's schedule and merges only to shorten it, seed by seed.
        assert!(dsc.makespan.mean <= greedy.makespan.mean, "{}", dsc.shape);
        assert!(dsc.vs_greedy.mean <= 1.0, "{}", dsc.shape);
        assert_eq!(
            (greedy.vs_greedy.mean, greedy.vs_greedy.half_width),
            (1.0, 0.0)
        );
        for x in chunk {
            assert!(
                x.slr.mean >= 1.0,
                "{} {}: slr {}",
                x.shape,
                x.mapper,
                x.slr.mean
            );
            assert!((0.0..=1.0).contains(&x.staging.mean));
            assert!(x.local_wait.mean >= 0.0);
            assert_eq!(x.refused_holds, 0, "{} {}", x.shape, x.mapper);
            assert!(x.tasks >= 5.0, "{}: {} tasks", x.shape, x.tasks);
        }
    }
    // The loaded grid makes workflows wait: not every SLR is exactly 1.
    assert!(r.rows.iter().any(|x| x.slr.mean > 1.0));
    // Same config, same seeds: the same report.
    assert_eq!(simulate_workflows(&cfg, None).unwrap(), r);
}

#[test]
fn invalid_configs_name_the_key() {
    let cases = [
        (
            "task_procs = [2, 24]",
            "task_procs = [2, 64]",
            "workflow.task_procs allows 64 processors but the largest cluster has 48",
        ),
        ("seeds = 3", "seeds = 0", "seeds must be at least 1"),
        (
            "tasks = 14",
            "tasks = 0",
            "workflow.tasks must be in 1..=10000, got 0",
        ),
        (
            "seeds = 3",
            "seeds = 3\nshapes = [\"spiral\"]",
            "unknown variant `spiral`",
        ),
    ];
    for (from, to, want) in cases {
        let text = SYNTHETIC.replacen(from, to, 1);
        let err = WorkflowSimConfig::parse(&text, "w.toml").unwrap_err();
        assert!(matches!(err, WorkflowSimError::Config { .. }));
        assert!(err.to_string().contains(want), "{err} lacks {want:?}");
    }
}

#[test]
fn real_traces_as_local_load() {
    let dir = std::env::var_os("FORESIGHT_TRACES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces")
        });
    let kth = dir.join("KTH-SP2-1996-2.1-cln.swf.gz");
    if !kth.exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{} not found (set FORESIGHT_TRACES)",
            kth.display()
        );
        eprintln!("{} not found: skipped", kth.display());
        return;
    }
    let text = format!(
        r#"
seeds = 2
shapes = ["montage", "layered"]
[workflow]
tasks = 20
task_procs = [8, 32]
[[cluster]]
name = "kth"
procs = 100
local = {{ trace = "{}", skip_days = 30 }}
[[cluster]]
name = "other"
procs = 64
local = {{ load = 0.6, seed = 3 }}
"#,
        kth.display()
    );
    let cfg = WorkflowSimConfig::parse(&text, "kth.toml").unwrap();
    let r = simulate_workflows(&cfg, None).unwrap();
    assert_eq!(r.rows.len(), 2 * 3);
    // KTH's owners queue: their jobs wait.
    assert!(r.rows.iter().all(|x| x.local_wait.mean > 0.0));
    assert!(r.rows.iter().all(|x| x.refused_holds == 0));
}
