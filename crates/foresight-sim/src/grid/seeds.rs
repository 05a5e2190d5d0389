//! The grid over several seeds of its random streams: means with confidence intervals, and
//! brokers compared pairwise on the same seeds.
//!
//! Local schedules under EASY are chaotic: moving one global job by a minute reshuffles the
//! backfilling of every local job after it, so one seed's mean local wait swings by several
//! percent either way. A broker is better than another only where the paired differences
//! over seeds agree on the sign.

use super::{simulate_grid, BrokerKind, GridConfig, GridError, GridReport};
use crate::stats::Estimate;
use rayon::prelude::*;
use serde::Serialize;

impl GridConfig {
    /// The same grid with every random stream drawn from seed + `offset`: the global stream
    /// and the synthetic local streams (a local trace replays as it is).
    pub fn reseeded(&self, offset: u64) -> GridConfig {
        let mut cfg = self.clone();
        cfg.global.seed = cfg.global.seed.wrapping_add(offset);
        for c in &mut cfg.cluster {
            c.local.seed = c.local.seed.wrapping_add(offset);
        }
        cfg
    }
}

/// One broker's runs, one per seed offset (in offset order).
#[derive(Clone, Debug, Serialize)]
pub struct BrokerRuns {
    /// The broker, as `--broker` names it.
    pub broker: String,
    /// The reports, the i-th from seed offset i.
    pub runs: Vec<GridReport>,
}

/// Every broker over seed offsets `0..seeds`, in parallel; the brokers in the order given.
pub fn simulate_seeds(
    cfg: &GridConfig,
    brokers: &[BrokerKind],
    seeds: u64,
) -> Result<Vec<BrokerRuns>, GridError> {
    simulate_seeds_watched(cfg, brokers, seeds, &|| {})
}

/// [`simulate_seeds`], calling `finished` as each of its `brokers × seeds` runs ends (from
/// the thread that ran it), for a progress display.
pub fn simulate_seeds_watched(
    cfg: &GridConfig,
    brokers: &[BrokerKind],
    seeds: u64,
    finished: &(dyn Fn() + Sync),
) -> Result<Vec<BrokerRuns>, GridError> {
    let jobs: Vec<(usize, u64)> = (0..brokers.len())
        .flat_map(|b| (0..seeds).map(move |s| (b, s)))
        .collect();
    let reports: Vec<GridReport> = jobs
        .par_iter()
        .map(|&(b, s)| {
            let report = simulate_grid(&cfg.reseeded(s), brokers[b]);
            finished();
            report
        })
        .collect::<Result<_, _>>()?;
    let mut reports = reports.into_iter();
    Ok(brokers
        .iter()
        .map(|b| BrokerRuns {
            broker: b.name(),
            runs: reports.by_ref().take(seeds as usize).collect(),
        })
        .collect())
}

/// A broker's figures over the seeds, each a mean with its 95 % interval.
#[derive(Clone, Debug, Serialize)]
pub struct SeedSummary {
    /// The broker.
    pub broker: String,
    /// Mean wait of local jobs, seconds.
    pub local_wait: Estimate,
    /// Mean bounded slowdown of local jobs.
    pub local_bsld: Estimate,
    /// Local mean wait minus the same without the global stream, seconds.
    pub local_delay: Estimate,
    /// Mean wait of global jobs, seconds.
    pub global_wait: Estimate,
    /// Mean bounded slowdown of global jobs.
    pub global_bsld: Estimate,
    /// Utilization averaged over the clusters.
    pub utilization: Estimate,
    /// Processor-hours left idle while a global job that could have used them waited
    /// (brokers that plan only).
    pub idle_hours: Option<Estimate>,
    /// Against the first broker on the same seeds: this broker's local mean wait minus
    /// the first's (none for the first itself).
    pub local_wait_vs_first: Option<Estimate>,
    /// The same for the global mean wait.
    pub global_wait_vs_first: Option<Estimate>,
    /// Per priority level (the lowest first; `global.levels` above 1 only), over the seeds
    /// where the level finished jobs: mean response, seconds.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub level_response: Vec<Estimate>,
    /// The same for the mean bounded slowdown.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub level_bsld: Vec<Estimate>,
    /// Preemptions per run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preemptions: Option<Estimate>,
}

/// The summary of every broker's runs; the paired differences are against `runs[0]`.
pub fn summarize(runs: &[BrokerRuns]) -> Vec<SeedSummary> {
    let over = |r: &BrokerRuns, f: &dyn Fn(&GridReport) -> f64| -> Estimate {
        Estimate::ci95(&r.runs.iter().map(f).collect::<Vec<_>>())
    };
    let paired = |r: &BrokerRuns, f: &dyn Fn(&GridReport) -> f64| -> Estimate {
        let diffs: Vec<f64> = r
            .runs
            .iter()
            .zip(&runs[0].runs)
            .map(|(a, b)| f(a) - f(b))
            .collect();
        Estimate::ci95(&diffs)
    };
    // Per level, over the runs where it finished jobs.
    let per_level = |r: &BrokerRuns, f: &dyn Fn(&super::LevelReport) -> f64| -> Vec<Estimate> {
        let levels = r
            .runs
            .iter()
            .filter_map(|g| g.levels.as_ref().map(|l| l.per_level.len()))
            .max()
            .unwrap_or(0);
        (0..levels)
            .map(|i| {
                let xs: Vec<f64> = r
                    .runs
                    .iter()
                    .filter_map(|g| g.levels.as_ref()?.per_level.get(i))
                    .filter(|l| l.finished > 0)
                    .map(f)
                    .collect();
                Estimate::ci95(&xs)
            })
            .collect()
    };
    let local_wait = |g: &GridReport| g.local.mean_wait;
    let global_wait = |g: &GridReport| g.global.mean_wait;
    runs.iter()
        .enumerate()
        .map(|(i, r)| SeedSummary {
            broker: r.broker.clone(),
            local_wait: over(r, &local_wait),
            local_bsld: over(r, &|g| g.local.mean_bsld),
            local_delay: over(r, &|g| g.local_delay),
            global_wait: over(r, &global_wait),
            global_bsld: over(r, &|g| g.global.mean_bsld),
            utilization: over(r, &|g| {
                g.clusters.iter().map(|c| c.utilization).sum::<f64>()
                    / g.clusters.len().max(1) as f64
            }),
            idle_hours: r
                .runs
                .iter()
                .map(|g| g.idle_while_waiting.map(|s| s / 3600.0))
                .collect::<Option<Vec<f64>>>()
                .map(|v| Estimate::ci95(&v)),
            local_wait_vs_first: (i > 0).then(|| paired(r, &local_wait)),
            global_wait_vs_first: (i > 0).then(|| paired(r, &global_wait)),
            level_response: per_level(r, &|l| l.mean_response),
            level_bsld: per_level(r, &|l| l.mean_bsld),
            preemptions: r
                .runs
                .iter()
                .map(|g| g.levels.as_ref().map(|l| l.preemptions as f64))
                .collect::<Option<Vec<f64>>>()
                .map(|v| Estimate::ci95(&v)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRID: &str = r#"
days = 1
cycle_seconds = 300
lead_time_seconds = 600
horizon_hours = 48

[[cluster]]
name = "a"
procs = 32
policy = "easy"
tariff = 1.0
local = { load = 0.6, seed = 3 }

[[cluster]]
name = "b"
procs = 16
policy = "conservative"
tariff = 1.0
local = { load = 0.5, seed = 5 }

[global]
arrivals_per_hour = 2
procs = [2, 24]
runtime_seconds = [300, 3600]
price = [1.0, 2.0]
seed = 11
"#;

    #[test]
    fn each_seed_is_the_single_run_of_its_reseeded_config() {
        let cfg = GridConfig::parse(GRID, "test").unwrap();
        let runs = simulate_seeds(&cfg, &[BrokerKind::Lookahead, BrokerKind::Queue], 3).unwrap();
        assert_eq!(runs.len(), 2);
        for (b, broker) in [BrokerKind::Lookahead, BrokerKind::Queue]
            .into_iter()
            .enumerate()
        {
            assert_eq!(runs[b].broker, broker.name());
            assert_eq!(runs[b].runs.len(), 3);
            for s in 0..3 {
                let alone = simulate_grid(&cfg.reseeded(s), broker).unwrap();
                assert_eq!(
                    runs[b].runs[s as usize],
                    alone,
                    "{} seed offset {s}",
                    broker.name()
                );
            }
        }
        // The seeds draw different streams.
        assert_ne!(
            runs[0].runs[0].global.mean_wait,
            runs[0].runs[1].global.mean_wait
        );

        let summary = summarize(&runs);
        let waits: Vec<f64> = runs[0].runs.iter().map(|r| r.local.mean_wait).collect();
        assert_eq!(summary[0].local_wait, Estimate::ci95(&waits));
        assert!(summary[0].local_wait_vs_first.is_none());
        let diffs: Vec<f64> = (0..3)
            .map(|s| runs[1].runs[s].global.mean_wait - runs[0].runs[s].global.mean_wait)
            .collect();
        assert_eq!(
            summary[1].global_wait_vs_first,
            Some(Estimate::ci95(&diffs))
        );
        assert!(summary[0].idle_hours.is_some());
    }

    #[test]
    fn reseeding_moves_every_random_stream() {
        let cfg = GridConfig::parse(GRID, "test").unwrap();
        let r = cfg.reseeded(4);
        assert_eq!(r.global.seed, 15);
        assert_eq!(r.cluster[0].local.seed, 7);
        assert_eq!(r.cluster[1].local.seed, 9);
        assert_eq!(cfg.reseeded(0).global.seed, 11);
    }
}
