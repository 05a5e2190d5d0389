//! Licence pools of a simulated grid (`[[licence]]`, the service's keys) and the seeded
//! licence demands of its jobs: a share of the local jobs of the clusters drawing on a pool
//! and a share of the global jobs ask for 1 to `max` of its licences.

use foresight_core::licence::{check_pools, LicencePool};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A licence pool and the jobs asking for it.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LicenceConfig {
    /// The pool's name.
    pub name: String,
    /// Licences in the pool.
    pub count: u32,
    /// The clusters drawing on it; several for a floating licence server (one pool).
    pub clusters: Vec<String>,
    /// Share of the local jobs of those clusters asking for it, 0 to 1.
    #[serde(default)]
    pub local_share: f64,
    /// Share of the global jobs asking for it, 0 to 1 (`lookahead` only: the baselines
    /// queue global jobs without their licences).
    #[serde(default)]
    pub global_share: f64,
    /// The most licences one job asks for, 1 to `count`.
    #[serde(default = "one")]
    pub max: u32,
    /// Seed of the draws.
    #[serde(default)]
    pub seed: u64,
}

fn one() -> u32 {
    1
}

impl LicenceConfig {
    /// The pool as the service configures it.
    pub fn pool(&self) -> LicencePool {
        LicencePool {
            name: self.name.clone(),
            count: self.count,
            clusters: self.clusters.clone(),
        }
    }
}

/// Checks the pools against the clusters' names: each pool valid, no name twice, shares
/// and maxima in range.
pub fn check(licences: &[LicenceConfig], clusters: &[&str]) -> Result<(), String> {
    let pools: Vec<LicencePool> = licences.iter().map(LicenceConfig::pool).collect();
    check_pools(&pools, clusters)?;
    for l in licences {
        let at = |what: String| format!("licence {:?}: {what}", l.name);
        for (key, share) in [
            ("local_share", l.local_share),
            ("global_share", l.global_share),
        ] {
            if !(0.0..=1.0).contains(&share) {
                return Err(at(format!("{key} must be from 0 to 1, got {share}")));
            }
        }
        if l.max == 0 || l.max > l.count {
            return Err(at(format!(
                "max must be from 1 to the count {}, got {}",
                l.count, l.max
            )));
        }
    }
    Ok(())
}

/// The demands of `n` jobs of one stream (`stream` tells the streams apart: a cluster's
/// index, or the global stream), for the pools `applies` selects, each with probability
/// `share(pool)`: drawn from generators of their own, so that the streams themselves are
/// the same with or without pools.
pub fn demands(
    licences: &[LicenceConfig],
    stream: u64,
    n: usize,
    applies: impl Fn(&LicenceConfig) -> Option<f64>,
) -> Vec<BTreeMap<String, u32>> {
    let mut out = vec![BTreeMap::new(); n];
    for l in licences {
        let Some(share) = applies(l).filter(|&s| s > 0.0) else {
            continue;
        };
        let mut rng = Pcg64::seed_from_u64(l.seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        for d in out.iter_mut() {
            let asks = rng.gen::<f64>() < share;
            let k = rng.gen_range(1..=l.max);
            if asks {
                d.insert(l.name.clone(), k);
            }
        }
    }
    out
}
