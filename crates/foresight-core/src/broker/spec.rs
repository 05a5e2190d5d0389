//! What a configuration file says of one cluster to the broker. The service's
//! `foresight.toml` and the simulator's `grid.toml` both read their `[[cluster]]` tables
//! into this one type (each adds its own keys beside it), so a cluster described once means
//! the same to `server start` and to `sim grid`, and both build the broker's cluster from it
//! with [`ClusterSpec::grid_cluster`].

use super::cluster::{check_groups, processors_of, GridCluster, SpeedGroup};
use crate::forecast::Tariff;
use crate::policy::{BackfillOrder, Policy};
use crate::predict::{Correction, Predictor};
use crate::scheduler::LocalScheduler;
use crate::select::Processor;
use crate::time::Dur;
use serde::{Deserialize, Serialize};

/// One cluster's processors, speeds, local policy, prices and link, as configured.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct ClusterSpec {
    /// Unique name.
    pub name: String,
    /// Processors (of speed `speed`, or as many as its `groups` hold together). A cluster
    /// whose resource manager reports its size (Slurm) may leave it out.
    #[serde(default)]
    pub procs: u32,
    /// Speed of every processor relative to the reference processor; 1.0 when neither this
    /// nor `groups` is given. Give `speed` or `groups`, not both.
    ///
    /// A global job's part runs its walltime divided by the slowest speed among the
    /// processors chosen for it (rounded up): that is its limit. In the simulator a cluster
    /// of one speed is that fast throughout: its local jobs run their trace runtime (and
    /// estimate) divided by it too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<f64>,
    /// Speed groups, for a cluster whose processors are not all equally fast, e.g.
    /// `groups = [ { procs = 64, speed = 1.0 }, { procs = 32, speed = 2.0 } ]`; their `procs`
    /// must add up to the cluster's `procs`, every speed must be positive. Give `speed` or
    /// `groups`, not both.
    ///
    /// - The lookahead planner sees every processor at its group's speed, so earliest finish
    ///   (or start) is sought over the groups of one cluster as over clusters. Processors are
    ///   numbered fastest group first; the forecast lays running and reserved work on the
    ///   lowest-numbered processors, so work already there (a running global part, say) is
    ///   seen on the fast processors rather than leaving them to be offered twice.
    /// - The local scheduler counts processors only and cannot say which group a job lands
    ///   on: local jobs run at reference speed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<SpeedGroup>>,
    /// Local policy: `fcfs`, `firstfit[:CAP]`, `easy`, `conservative`, `depth:N`.
    #[serde(default = "default_policy")]
    pub policy: String,
    /// Base price per processor-second of free time.
    #[serde(default = "one")]
    pub tariff: f64,
    /// Extra price factor per unit of priority of a queued local job (see
    /// [`Tariff::local_premium`]).
    #[serde(default = "one")]
    pub local_premium: f64,
    /// Link bandwidth to the grid, MB/s, for staging input.
    #[serde(default = "default_bandwidth")]
    pub bandwidth_mb_s: f64,
    /// Link latency, seconds.
    #[serde(default)]
    pub latency_seconds: i64,
    /// Features its processors offer (installed software, architecture: `["ansys", "gpu"]`):
    /// a job that `requires` a feature is offered only the clusters that have it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<String>,
    /// Runtime prediction for its local policy: `none`, `tsafrir` or `app` (see
    /// [`Predictor`]); unset: the grid's setting. Plans only: the walltime stays the kill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predict: Option<Predictor>,
    /// The order backfill candidates are tried in: `fcfs` or `spf` (shortest planned runtime
    /// first; with `predict` that is EASY++); unset: the grid's setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backfill_order: Option<BackfillOrder>,
    /// How the plan of a job that outlived its prediction grows: `incremental` (the
    /// paper's steps) or `estimate` (straight to the walltime); unset: the grid's setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correction: Option<Correction>,
}

fn one() -> f64 {
    1.0
}
fn default_policy() -> String {
    "easy".into()
}
fn default_bandwidth() -> f64 {
    100.0
}
/// A feature name: letters, digits, `-`, `_`, `.`, `+` (`ansys`, `gcc-12`, `x86_64`).
pub fn check_feature(name: &str) -> Result<(), String> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.+".contains(c))
    {
        return Err(format!(
            "feature {name:?}: use letters, digits, '-', '_', '.' or '+'"
        ));
    }
    Ok(())
}

/// Why no cluster of `specs` can run a job that requires `requires`, naming the first
/// feature none of them offers beside the others (`None`: some cluster has them all).
pub fn features_refusal<'a>(
    specs: impl IntoIterator<Item = &'a ClusterSpec> + Clone,
    requires: &[String],
) -> Option<String> {
    if requires.is_empty()
        || specs
            .clone()
            .into_iter()
            .any(|s| requires.iter().all(|f| s.features.contains(f)))
    {
        return None;
    }
    let missing = requires
        .iter()
        .find(|f| !specs.clone().into_iter().any(|s| s.features.contains(*f)));
    Some(match missing {
        Some(f) => format!("no cluster offers feature {f:?}"),
        None => format!("no cluster offers all of the features {requires:?} together"),
    })
}

fn positive(x: f64) -> bool {
    x.is_finite() && x > 0.0
}

impl ClusterSpec {
    /// A cluster of `procs` reference processors with every other setting at its default.
    pub fn new(name: &str, procs: u32) -> ClusterSpec {
        ClusterSpec {
            name: name.to_string(),
            procs,
            speed: None,
            groups: None,
            policy: default_policy(),
            tariff: one(),
            local_premium: one(),
            bandwidth_mb_s: default_bandwidth(),
            latency_seconds: 0,
            features: Vec::new(),
            predict: None,
            backfill_order: None,
            correction: None,
        }
    }

    /// The cluster's processors by speed: its `groups`, or all `procs` at `speed` (1.0 by
    /// default), in the order given.
    pub fn speed_groups(&self) -> Vec<SpeedGroup> {
        match &self.groups {
            Some(g) => g.clone(),
            None => vec![SpeedGroup {
                procs: self.procs,
                speed: self.speed.unwrap_or(1.0),
            }],
        }
    }

    /// The speed of the slowest processor: what a job placed by the local scheduler, which
    /// promises no particular processors, can count on.
    pub fn slowest_speed(&self) -> f64 {
        self.speed_groups()
            .iter()
            .map(|g| g.speed)
            .fold(f64::INFINITY, f64::min)
    }

    /// The speed local jobs run at: `speed` on a cluster of one speed, the reference speed on
    /// one of speed groups (see [`ClusterSpec::groups`]).
    pub fn local_speed(&self) -> f64 {
        match self.groups {
            Some(_) => 1.0,
            None => self.speed.unwrap_or(1.0),
        }
    }

    /// Its local policy (checked by [`ClusterSpec::check`]; the default policy otherwise).
    pub fn local_policy(&self) -> Policy {
        let mut policy: Policy = self.policy.parse().unwrap_or_else(|_| Policy::easy());
        if let Some(order) = self.backfill_order {
            policy.backfill_order = order;
        }
        if let Some(correction) = self.correction {
            policy.correction = correction;
        }
        policy
    }

    /// The same cluster with the grid's prediction settings where it has none of its own.
    pub fn with_defaults(
        mut self,
        predict: Predictor,
        backfill_order: BackfillOrder,
        correction: Correction,
    ) -> Self {
        self.predict.get_or_insert(predict);
        self.backfill_order.get_or_insert(backfill_order);
        self.correction.get_or_insert(correction);
        self
    }

    /// Its prices.
    pub fn prices(&self) -> Tariff {
        Tariff {
            base: self.tariff,
            local_premium: self.local_premium,
        }
    }

    /// Every rule a cluster's settings must follow, each error naming the cluster and the
    /// setting. `procs_required`: false for a cluster whose resource manager reports its
    /// size.
    pub fn check(&self, procs_required: bool) -> Result<(), String> {
        let name = &self.name;
        let at = |what: String| format!("cluster {name:?}: {what}");
        if procs_required && self.procs == 0 {
            return Err(at("procs must be at least 1".into()));
        }
        if let Some(speed) = self.speed {
            if !positive(speed) {
                return Err(at(format!("speed must be positive, got {speed}")));
            }
        }
        if let Some(groups) = &self.groups {
            if self.speed.is_some() {
                return Err(at("give either speed or groups, not both".into()));
            }
            check_groups(groups).map_err(at)?;
            let sum: u64 = groups.iter().map(|g| u64::from(g.procs)).sum();
            if sum != u64::from(self.procs) {
                return Err(at(format!(
                    "the procs of groups add up to {sum}, procs is {}",
                    self.procs
                )));
            }
        }
        if !(self.tariff.is_finite() && self.tariff >= 0.0) {
            return Err(at(format!("tariff must be >= 0, got {}", self.tariff)));
        }
        if !(self.local_premium.is_finite() && self.local_premium >= 0.0) {
            return Err(at(format!(
                "local_premium must be >= 0, got {}",
                self.local_premium
            )));
        }
        if !positive(self.bandwidth_mb_s) {
            return Err(at(format!(
                "bandwidth_mb_s must be > 0, got {}",
                self.bandwidth_mb_s
            )));
        }
        if self.latency_seconds < 0 {
            return Err(at(format!(
                "latency_seconds must be >= 0, got {}",
                self.latency_seconds
            )));
        }
        self.policy
            .parse::<Policy>()
            .map_err(|e| at(format!("policy: {e}")))?;
        for f in &self.features {
            check_feature(f).map_err(|e| at(format!("features: {e}")))?;
        }
        Ok(())
    }

    /// Processors of `groups` (fastest first) carrying this cluster's features: what a
    /// job's `requires` is matched against, also when the cluster reports its own size.
    pub fn processors(&self, groups: &[SpeedGroup]) -> Vec<Processor> {
        let mut processors = processors_of(&self.name, groups);
        if !self.features.is_empty() {
            let features: std::collections::BTreeSet<String> =
                self.features.iter().cloned().collect();
            for p in &mut processors {
                p.features.clone_from(&features);
            }
        }
        processors
    }

    /// The broker's cluster: its processors by speed (the first `kept` of them, fastest
    /// first; the rest serve a partition outside the broker) under its local policy, its
    /// prices and link. Available and scheduled by the broker, of whole seconds: a caller
    /// whose resource manager schedules itself says so on the result.
    pub fn grid_cluster(&self, kept: u32) -> GridCluster {
        let mut processors = self.processors(&self.speed_groups());
        processors.truncate(kept as usize);
        GridCluster {
            tariff: self.prices(),
            bandwidth_mb_s: self.bandwidth_mb_s,
            latency: Dur(self.latency_seconds),
            ..GridCluster::new(
                &self.name,
                processors,
                LocalScheduler::new(kept, self.local_policy()),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> Result<ClusterSpec, String> {
        let s: ClusterSpec = toml::from_str(text).map_err(|e| e.to_string())?;
        s.check(true)?;
        Ok(s)
    }

    #[test]
    fn groups_become_processors_fastest_first() {
        let s = spec(
            "name = \"a\"\nprocs = 3\ngroups = [ { procs = 1, speed = 1.0 }, { procs = 2, speed = 2.0 } ]",
        )
        .unwrap();
        let c = s.grid_cluster(s.procs);
        let speeds: Vec<f64> = c.processors.iter().map(|p| p.speed).collect();
        assert_eq!(speeds, vec![2.0, 2.0, 1.0]);
        assert_eq!(c.slowest_speed(), 1.0);
        assert_eq!(s.local_speed(), 1.0);
        assert_eq!(c.sched.capacity(), 3);
    }

    #[test]
    fn features_reach_the_processors_and_refusals_name_the_feature() {
        let a = spec("name = \"a\"\nprocs = 2\nfeatures = [\"ansys\", \"gpu\"]").unwrap();
        let b = spec("name = \"b\"\nprocs = 2\nfeatures = [\"fluent\"]").unwrap();
        let c = a.grid_cluster(2);
        assert!(c.processors.iter().all(|p| p.features.contains("ansys")));
        let both = [a, b];
        assert_eq!(features_refusal(&both, &["ansys".into()]), None);
        assert_eq!(
            features_refusal(&both, &["abaqus".into()]).unwrap(),
            "no cluster offers feature \"abaqus\""
        );
        assert!(features_refusal(&both, &["ansys".into(), "fluent".into()])
            .unwrap()
            .contains("all of the features"));
        assert!(spec("name = \"a\"\nprocs = 2\nfeatures = [\"a b\"]")
            .unwrap_err()
            .contains("cluster \"a\": features: feature \"a b\""));
    }

    #[test]
    fn every_rule_names_the_cluster_and_the_setting() {
        for (text, expected) in [
            ("name = \"a\"", "cluster \"a\": procs must be at least 1"),
            (
                "name = \"a\"\nprocs = 2\nspeed = 0.0",
                "speed must be positive, got 0",
            ),
            (
                "name = \"a\"\nprocs = 2\nspeed = 1.0\ngroups = [ { procs = 2, speed = 1.0 } ]",
                "give either speed or groups, not both",
            ),
            (
                "name = \"a\"\nprocs = 3\ngroups = [ { procs = 2, speed = 1.0 } ]",
                "the procs of groups add up to 2, procs is 3",
            ),
            (
                "name = \"a\"\nprocs = 2\ngroups = [ { procs = 2, speed = -1.0 } ]",
                "groups[0].speed must be positive",
            ),
            (
                "name = \"a\"\nprocs = 2\ntariff = -1.0",
                "tariff must be >= 0",
            ),
            (
                "name = \"a\"\nprocs = 2\nbandwidth_mb_s = 0.0",
                "bandwidth_mb_s must be > 0",
            ),
            (
                "name = \"a\"\nprocs = 2\nlatency_seconds = -5",
                "latency_seconds must be >= 0",
            ),
            (
                "name = \"a\"\nprocs = 2\npolicy = \"fifo\"",
                "cluster \"a\": policy:",
            ),
        ] {
            let e = spec(text).unwrap_err();
            assert!(e.contains(expected), "{text:?}: {e}");
        }
    }
}
