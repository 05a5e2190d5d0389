//! The decentralized mode's simulation checked against seed 001's claims: results depend only
//! on the ratio of times (scaling every time leaves responses in mean runtimes unchanged),
//! mean response falls with priority, where the best α lies and why, and a run is a function
//! of its seed.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

use foresight_sim::auction::run::run;
use foresight_sim::auction::workload::generate;
use foresight_sim::auction::{sweep, AuctionSimConfig};
use std::path::Path;

fn example() -> AuctionSimConfig {
    example_named("auction.toml")
}

fn example_named(name: &str) -> AuctionSimConfig {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    AuctionSimConfig::read(&path).unwrap()
}

/// The top level's mean response (mean runtimes) at each of `alphas`, over 20 seeds.
fn top_level_response(cfg: &AuctionSimConfig, alphas: &[f64]) -> Vec<f64> {
    let report = sweep(cfg, alphas, 20);
    report
        .rows
        .iter()
        .map(|row| row.response.last().unwrap().mean)
        .collect()
}

#[test]
fn scaling_every_time_leaves_responses_in_mean_runtimes_unchanged() {
    // Times are integer seconds: the base workload is given in thousandths so that rounding
    // an auction's length to whole seconds (the only time not scaled exactly) moves a close
    // by far less than the gap to any other event.
    let mut base = example();
    base.time_scale = 1000;
    let mut scaled = base.clone();
    scaled.time_scale = 3000;
    for seed in [1, 2] {
        let a = generate(&base, seed);
        let b = generate(&scaled, seed);
        assert_eq!(a.global.len(), b.global.len());
        assert!(a
            .global
            .iter()
            .zip(&b.global)
            .all(|(x, y)| 3 * x.submit == y.submit && 3 * x.runtime == y.runtime));
        for alpha in [0.1, 0.4] {
            let x = run(&base, &a, alpha, seed);
            let y = run(&scaled, &b, alpha, seed);
            assert_eq!(x.unfinished, 0);
            assert_eq!(
                (x.auctions, x.unsold, x.preemptions),
                (y.auctions, y.unsold, y.preemptions),
                "seed {seed} α {alpha}: the same auctions happen"
            );
            for (p, (r, s)) in x.response.iter().zip(&y.response).enumerate() {
                assert!(
                    (r - s).abs() <= 1e-4 * r,
                    "seed {seed} α {alpha} priority {p}: {r} vs {s} mean runtimes"
                );
            }
            assert_eq!(x.participation, y.participation);
        }
    }
}

#[test]
fn mean_response_falls_as_priority_rises() {
    let cfg = example();
    let report = sweep(&cfg, &[0.2, 0.5], 4);
    for row in &report.rows {
        let r: Vec<f64> = row.response.iter().map(|e| e.mean).collect();
        assert!(
            r.windows(2).all(|w| w[0] > w[1]),
            "α {}: responses by priority 0..3 should fall: {r:?}",
            row.alpha
        );
    }
}

#[test]
fn waiting_pays_only_when_dispatchers_learn_late_and_the_winning_site_matters() {
    // The seed puts the top level's best α at 0.3–0.4. Where every site bids at once and
    // staging is small, a longer auction only adds its own length: best at the smallest α.
    let at_once = top_level_response(&example(), &[0.05, 0.3, 0.6]);
    assert!(
        at_once[0] < at_once[1] && at_once[1] < at_once[2],
        "auction.toml: the top level's response should grow with α: {at_once:?}"
    );
    // Where dispatchers read the queue every 0.3 mean runtimes and inputs take up to 3.3 mean
    // runtimes to stage, a short auction is sold to whoever bid first, often far from the
    // input; a long one waits for nothing: the best α lies between.
    let delayed = top_level_response(&example_named("auction-delayed.toml"), &[0.05, 0.3, 0.6]);
    assert!(
        delayed[1] < delayed[0] && delayed[1] < delayed[2],
        "auction-delayed.toml: the top level's response should be least at α 0.3: {delayed:?}"
    );
}

#[test]
fn a_run_is_a_function_of_its_seed() {
    let cfg = example();
    let s = generate(&cfg, 5);
    assert_eq!(s, generate(&cfg, 5));
    assert_ne!(s, generate(&cfg, 6));
    assert_eq!(run(&cfg, &s, 0.3, 5), run(&cfg, &s, 0.3, 5));
}

#[test]
fn the_example_reproduces_the_seed_set_up() {
    let cfg = example();
    assert_eq!(cfg.site.len(), 4);
    let centres: std::collections::BTreeSet<_> = cfg.site.iter().map(|s| &s.centre).collect();
    assert_eq!(centres.len(), 2);
    assert!(cfg.site.iter().all(|s| (4..=8).contains(&s.nodes)));
    assert_eq!((cfg.global.jobs, cfg.global.priorities), (400, 4));
    let s = generate(&cfg, 1);
    let levels: std::collections::BTreeSet<u8> = s.global.iter().map(|g| g.priority).collect();
    assert_eq!(levels.len(), 4);
    assert!(s.local.iter().all(|l| !l.is_empty()));
}

#[test]
fn bad_configs_name_what_is_wrong() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/auction.toml"),
    )
    .unwrap();
    for (from, to, want) in [
        ("jobs = 400", "jobs = 0", "global.jobs"),
        ("alpha = 0.35", "alpha = -1", "auction.alpha"),
        (
            "procs = [4, 8, 16, 32]",
            "procs = [4, 128]",
            "fit on no site",
        ),
        ("local_load = 0.4", "local_load = 1.5", "local_load"),
        ("preempt = 0.25", "preempt = -1", "weights.preempt"),
        ("tie = \"lowest_site\"", "tie = \"coin\"", "tie"),
    ] {
        let bad = text.replacen(from, to, 1);
        assert_ne!(bad, text, "{from}");
        let err = AuctionSimConfig::parse(&bad).unwrap_err();
        assert!(err.contains(want), "{from} -> {to}: {err}");
    }
}
