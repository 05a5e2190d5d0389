//! Runs every α over every seed and summarises each α by means with 95 % confidence
//! intervals over the seeds (Student t).

use super::config::AuctionSimConfig;
use super::run::{run, RunResult};
use super::workload::generate;
pub use crate::stats::Estimate;
use rayon::prelude::*;
use serde::Serialize;

/// One α summarised over the seeds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AlphaRow {
    /// Auction length in mean runtimes.
    pub alpha: f64,
    /// Mean response per priority level (0 the lowest), in mean runtimes.
    pub response: Vec<Estimate>,
    /// Mean share of dispatchers bidding per auction.
    pub participation: Estimate,
    /// The same over the auctions that sold their job.
    pub participation_sold: Estimate,
    /// Mean response of local jobs, in mean runtimes.
    pub local_response: Estimate,
    /// Auctions closed without a bid, as a share of auctions.
    pub unsold_share: Estimate,
    /// Preemptions per run.
    pub preemptions: Estimate,
}

/// The whole sweep.
#[derive(Clone, Debug, Serialize)]
pub struct SweepReport {
    /// Seeds used per α.
    pub seeds: Vec<u64>,
    /// One row per α, in the order given.
    pub rows: Vec<AlphaRow>,
    /// Every run.
    pub runs: Vec<RunResult>,
}

/// Parses `FROM:TO:STEP` (inclusive of `TO` up to rounding) or a single α.
pub fn parse_alphas(s: &str) -> Result<Vec<f64>, String> {
    let bad = || format!("{s:?}: expected FROM:TO:STEP (e.g. 0.1:1.0:0.1) or one positive number");
    let nums: Vec<f64> = s
        .split(':')
        .map(|x| x.trim().parse::<f64>().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let v = match nums[..] {
        [a] => vec![a],
        [lo, hi, step] => {
            if !(step > 0.0 && lo <= hi) {
                return Err(bad());
            }
            let n = ((hi - lo) / step + 1e-9).floor() as usize;
            if n > 1000 {
                return Err(format!("{s:?}: more than 1000 values"));
            }
            (0..=n)
                .map(|i| ((lo + i as f64 * step) * 1e9).round() / 1e9)
                .collect()
        }
        _ => return Err(bad()),
    };
    if v.iter().any(|a| !(a.is_finite() && *a > 0.0)) {
        return Err(bad());
    }
    Ok(v)
}

/// Mean and 95 % Student-t interval of `xs`, NaNs (levels without jobs) left out.
pub fn estimate(xs: impl IntoIterator<Item = f64>) -> Estimate {
    let v: Vec<f64> = xs.into_iter().filter(|x| !x.is_nan()).collect();
    Estimate::ci95(&v)
}

/// Runs every α over seeds `cfg.seed .. cfg.seed + seeds`, in parallel; the same streams
/// for every α of one seed.
pub fn sweep(cfg: &AuctionSimConfig, alphas: &[f64], seeds: u64) -> SweepReport {
    let seed_list: Vec<u64> = (0..seeds).map(|i| cfg.seed + i).collect();
    let streams: Vec<_> = seed_list.par_iter().map(|&s| generate(cfg, s)).collect();
    let jobs: Vec<(f64, usize)> = alphas
        .iter()
        .flat_map(|&a| (0..seed_list.len()).map(move |i| (a, i)))
        .collect();
    let runs: Vec<RunResult> = jobs
        .par_iter()
        .map(|&(a, i)| run(cfg, &streams[i], a, seed_list[i]))
        .collect();
    let levels = usize::from(cfg.global.priorities);
    let rows = alphas
        .iter()
        .map(|&alpha| {
            let of: Vec<&RunResult> = runs.iter().filter(|r| r.alpha == alpha).collect();
            AlphaRow {
                alpha,
                response: (0..levels)
                    .map(|p| estimate(of.iter().map(|r| r.response[p])))
                    .collect(),
                participation: estimate(of.iter().map(|r| r.participation)),
                participation_sold: estimate(of.iter().map(|r| r.participation_sold)),
                local_response: estimate(of.iter().map(|r| r.local_response)),
                unsold_share: estimate(
                    of.iter()
                        .map(|r| r.unsold as f64 / (r.auctions.max(1)) as f64),
                ),
                preemptions: estimate(of.iter().map(|r| r.preemptions as f64)),
            }
        })
        .collect();
    SweepReport {
        seeds: seed_list,
        rows,
        runs,
    }
}

/// Mean response per priority level over the seeds under the centralized lookahead broker
/// (see [`lookahead`](super::lookahead)), writing traces into `dir`; fails if a global job
/// never started.
pub fn lookahead_rows(
    cfg: &AuctionSimConfig,
    seeds: u64,
    dir: &std::path::Path,
) -> Result<Vec<Estimate>, crate::grid::GridError> {
    let mut per_seed = Vec::new();
    for i in 0..seeds {
        let seed = cfg.seed + i;
        let sub = dir.join(seed.to_string());
        std::fs::create_dir_all(&sub).map_err(|source| crate::grid::GridError::Io {
            path: sub.display().to_string(),
            source,
        })?;
        let (r, unstarted) =
            super::lookahead::lookahead_response(cfg, &generate(cfg, seed), seed, &sub)?;
        if unstarted > 0 {
            return Err(crate::grid::GridError::Config {
                path: "lookahead comparison".into(),
                message: format!("seed {seed}: {unstarted} global jobs never started"),
            });
        }
        per_seed.push(r);
    }
    let levels = usize::from(cfg.global.priorities);
    Ok((0..levels)
        .map(|p| estimate(per_seed.iter().map(|r| r[p])))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alphas_parse_inclusive_and_refuse_nonsense() {
        let v = parse_alphas("0.1:1.0:0.1").unwrap();
        assert_eq!(v.len(), 10);
        assert_eq!(v[0], 0.1);
        assert_eq!(v[9], 1.0);
        assert_eq!(parse_alphas("0.35").unwrap(), vec![0.35]);
        for bad in ["", "a:b:c", "1:0:0.1", "0.1:1:0", "0:1:0.5", "1:2"] {
            assert!(parse_alphas(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn estimate_leaves_out_levels_without_jobs() {
        // mean 2, sample variance 1, n 3: t(0.975, 2) = 4.303 × sqrt(1/3).
        let e = estimate([1.0, f64::NAN, 2.0, 3.0]);
        assert_eq!((e.mean, e.samples), (2.0, 3));
        assert!((e.half_width - 4.303 / 3f64.sqrt()).abs() < 1e-3);
        assert!(estimate([f64::NAN]).mean.is_nan());
    }
}
