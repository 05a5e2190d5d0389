//! What a mapper sees of the grid: per cluster, the processors still free over time (after
//! local jobs, their forecast and existing reservations) and the link to the others.

use super::model::{Edge, Task};
use crate::grid::staging_time;
use crate::profile::Profile;
use crate::time::{Dur, Time};

/// One cluster as a mapper sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Site {
    /// The cluster's name; tasks' `runtime_on` tables are keyed by it.
    pub name: String,
    /// Free processors over time: everything already promised (running and forecast local
    /// jobs, reservations) is taken out. A mapping only ever takes free time from it.
    pub free: Profile,
    /// Speed relative to the reference processor: a task runs `ceil(planned / speed)`.
    pub speed: f64,
    /// Features (software, architecture) offered.
    pub features: Vec<String>,
    /// Link to the grid, MB/s.
    pub bandwidth_mb_s: f64,
    /// Link latency.
    pub latency: Dur,
}

impl Site {
    /// A homogeneous cluster of `procs` free processors of speed 1.0, with a 100 MB/s link.
    pub fn new(name: impl Into<String>, procs: u32) -> Site {
        Site {
            name: name.into(),
            free: Profile::new(procs),
            speed: 1.0,
            features: Vec::new(),
            bandwidth_mb_s: 100.0,
            latency: Dur::ZERO,
        }
    }

    /// True when the cluster is large enough and offers every feature the task needs.
    pub fn can_host(&self, task: &Task) -> bool {
        task.procs <= self.free.capacity()
            && task.requires.iter().all(|f| self.features.contains(f))
    }

    /// How long the task runs here: its measured time on this cluster if known, otherwise
    /// its planned reference runtime divided by the speed, rounded up (at least 1 s).
    pub fn runtime(&self, task: &Task) -> Dur {
        if let Some(&d) = task.runtime_on.get(&self.name) {
            return d;
        }
        let secs = (task.planned().as_secs() as f64 / self.speed.max(1e-9)).ceil() as i64;
        Dur(secs.max(1))
    }
}

/// The grid at the moment of mapping.
#[derive(Clone, Debug, PartialEq)]
pub struct GridState {
    /// Nothing is placed before this instant.
    pub now: Time,
    /// The plan's horizon: a slot starting at or after it is not offered (the DSC mapper
    /// merges only onto slots within it; the others may go beyond when they must).
    pub horizon: Time,
    /// The clusters, in a fixed order: placements name them by index.
    pub sites: Vec<Site>,
}

impl GridState {
    /// Seconds to move an edge's data from cluster `a` to cluster `b`: nothing on one
    /// cluster, else the size over the slower of the two links plus the larger latency.
    pub fn transfer(&self, edge: &Edge, a: usize, b: usize) -> Dur {
        if a == b {
            return Dur::ZERO;
        }
        let (sa, sb) = (&self.sites[a], &self.sites[b]);
        staging_time(
            edge.data_mb,
            sa.bandwidth_mb_s.min(sb.bandwidth_mb_s),
            sa.latency.max(sb.latency),
        )
    }

    /// The mean transfer time of an edge over all ordered pairs of distinct clusters: the
    /// communication cost of the abstract DAG (HEFT's `c̄`, DSC's arc weight).
    pub fn mean_transfer(&self, edge: &Edge) -> f64 {
        let n = self.sites.len();
        if n < 2 {
            return 0.0;
        }
        let mut sum = 0i64;
        for a in 0..n {
            for b in 0..n {
                if a != b {
                    sum += self.transfer(edge, a, b).as_secs();
                }
            }
        }
        sum as f64 / (n * (n - 1)) as f64
    }
}
