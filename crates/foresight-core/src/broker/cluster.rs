//! One cluster as the grid broker sees it, and its processors by speed.

use crate::forecast::Tariff;
use crate::grid::ClusterView;
use crate::scheduler::LocalScheduler;
use crate::select::Processor;
use crate::time::Dur;
use serde::{Deserialize, Serialize};

/// Processors of one speed inside a cluster.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SpeedGroup {
    /// Processors in the group.
    pub procs: u32,
    /// Their speed relative to the reference processor.
    pub speed: f64,
}

/// The planner's processors of a cluster named `name` with these speed groups: fastest group
/// first, named `<name>/p<i>`. Numbering the fast processors first makes the forecast, which
/// lays running and reserved work on the lowest-numbered processors, see work already there
/// on the fast ones rather than offer them twice.
pub fn processors_of(name: &str, groups: &[SpeedGroup]) -> Vec<Processor> {
    let mut groups = groups.to_vec();
    groups.sort_by(|a, b| b.speed.total_cmp(&a.speed));
    groups
        .iter()
        .flat_map(|g| std::iter::repeat_n(g.speed, g.procs as usize))
        .enumerate()
        .map(|(i, speed)| Processor {
            id: format!("{name}/p{i}"),
            cluster: name.to_string(),
            speed,
            memory_mb: 0,
            features: Default::default(),
        })
        .collect()
}

/// Checks speed groups: at least one, each of at least one processor and a positive speed.
pub fn check_groups(groups: &[SpeedGroup]) -> Result<(), String> {
    if groups.is_empty() {
        return Err("groups must list at least one group".into());
    }
    for (i, g) in groups.iter().enumerate() {
        if g.procs == 0 {
            return Err(format!("groups[{i}].procs must be at least 1"));
        }
        if !(g.speed.is_finite() && g.speed > 0.0) {
            return Err(format!(
                "groups[{i}].speed must be positive, got {}",
                g.speed
            ));
        }
    }
    Ok(())
}

/// A cluster of the grid: its processors, its local scheduler and its prices.
#[derive(Clone, Debug)]
pub struct GridCluster {
    /// Unique name.
    pub name: String,
    /// The planner's processors (all of this cluster, named `<name>/p<i>`).
    pub processors: Vec<Processor>,
    /// Its local policy: the owners' queue and every reservation. For a cluster that
    /// schedules itself (Slurm) a mirror the caller rebuilds, whose starts are forecasts.
    pub sched: LocalScheduler,
    /// Its prices.
    pub tariff: Tariff,
    /// Link to the grid, MB/s, for staging input.
    pub bandwidth_mb_s: f64,
    /// Link latency.
    pub latency: Dur,
    /// False while its resource manager cannot be reached: the planner gives it nothing.
    pub available: bool,
    /// Scheduled by its own resource manager: a reservation there is asked for and answered
    /// later ([`crate::broker::Broker::on_reservation_answered`]), its starts are reported.
    pub self_scheduled: bool,
    /// Reservations there are made in multiples of this (Slurm: whole minutes).
    pub granularity: Dur,
}

impl GridCluster {
    /// A cluster the broker schedules itself, always available, of whole seconds.
    pub fn new(name: &str, processors: Vec<Processor>, sched: LocalScheduler) -> GridCluster {
        GridCluster {
            name: name.to_string(),
            processors,
            sched,
            tariff: Tariff::default(),
            bandwidth_mb_s: 100.0,
            latency: Dur::ZERO,
            available: true,
            self_scheduled: false,
            granularity: Dur(1),
        }
    }

    /// `len` (at least a second) rounded up to whole multiples of the granularity: what a
    /// reservation of that length holds there (Slurm limits in whole minutes).
    pub fn granular(&self, len: Dur) -> Dur {
        let g = self.granularity.as_secs().max(1);
        Dur(g * ((len.as_secs().max(1) + g - 1) / g))
    }

    /// What the planner reads of it; an unavailable cluster offers no processors.
    pub fn view(&self) -> ClusterView<'_> {
        ClusterView {
            processors: if self.available {
                &self.processors
            } else {
                &[]
            },
            sched: &self.sched,
            tariff: &self.tariff,
            bandwidth_mb_s: self.bandwidth_mb_s,
            latency: self.latency,
        }
    }

    /// The speed of its slowest processor (1.0 for a cluster without processors).
    pub fn slowest_speed(&self) -> f64 {
        let s = self
            .processors
            .iter()
            .map(|p| p.speed)
            .fold(f64::INFINITY, f64::min);
        if s.is_finite() {
            s
        } else {
            1.0
        }
    }
}

/// How much a new measurement of a link moves its estimate (the rest is the old estimate):
/// one slow transfer does not halve the planner's view of a link, a few in a row do.
pub const LINK_WEIGHT: f64 = 0.5;

impl crate::broker::Broker {
    /// A transfer to cluster `k` ran at `mb_s`: the link's estimate, which sets aside the
    /// staging time before that cluster's slots, moves toward it. Refused (false) for a
    /// measurement that is not a positive finite rate.
    pub fn measured_link(&mut self, k: crate::ClusterId, mb_s: f64) -> bool {
        let Some(c) = self.clusters.get_mut(k.as_num()) else {
            return false;
        };
        if !(mb_s.is_finite() && mb_s > 0.0) {
            return false;
        }
        c.bandwidth_mb_s = (1.0 - LINK_WEIGHT) * c.bandwidth_mb_s + LINK_WEIGHT * mb_s;
        true
    }

    /// The planner's estimate of the link to cluster `k`, MB/s.
    pub fn link_estimate(&self, k: crate::ClusterId) -> Option<f64> {
        self.clusters.get(k.as_num()).map(|c| c.bandwidth_mb_s)
    }
}

#[cfg(test)]
mod link_tests {
    use super::GridCluster;
    use crate::broker::{Broker, PlannerConfig};
    use crate::policy::Policy;
    use crate::scheduler::LocalScheduler;
    use crate::time::Dur;
    use crate::ClusterId;

    #[test]
    fn a_measured_transfer_moves_the_links_estimate_halfway() {
        let clusters = ["a", "b"]
            .map(|n| GridCluster::new(n, Vec::new(), LocalScheduler::new(4, Policy::easy())));
        let planner = PlannerConfig {
            horizon: Dur(86_400),
            lead_time: Dur(0),
            plan_depth: 8,
        };
        let mut b = Broker::new(clusters.to_vec(), planner, 1);
        let k = ClusterId(1);
        let before = b.link_estimate(k).unwrap();
        assert!(b.measured_link(k, 10.0));
        assert_eq!(b.link_estimate(k), Some(0.5 * before + 5.0));
        // The other cluster's link is its own.
        assert_eq!(b.link_estimate(ClusterId(0)), Some(before));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(!b.measured_link(k, bad));
        }
        assert!(!b.measured_link(ClusterId(7), 1.0));
    }
}
