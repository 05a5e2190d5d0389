//! Licence pools as the grid planner sees them (seed 003's licences as resources): free
//! licences over time per pool, held like processors in the slot plan. A pool's free
//! licences start from what its clusters' schedulers hold (running jobs, job reservations,
//! global jobs' reservations, and for a pool shared by several clusters what each holds),
//! less what their queued local jobs would hold where the forecast places them, less what
//! the global jobs planned earlier in the cycle hold.

use crate::forecast::{Occupancy, OccupancyKind};
use crate::ids::ClusterId;
use crate::profile::Profile;
use crate::scheduler::LocalScheduler;
use crate::time::{Dur, Time};
use std::collections::{BTreeMap, BTreeSet};

/// Free licences over the plan, per pool, and the clusters drawing on each.
#[derive(Clone, Debug, Default)]
pub struct LicencePlan {
    /// By pool name: free licences over time, and the clusters (view indices) drawing on it.
    pools: BTreeMap<String, (Profile, BTreeSet<ClusterId>)>,
}

impl LicencePlan {
    /// The plan of the pools of `scheds` (in view order), given each one's forecast.
    pub fn new(scheds: &[&LocalScheduler], forecasts: &[&[Occupancy]]) -> LicencePlan {
        let mut pools: BTreeMap<String, (Profile, BTreeSet<ClusterId>)> = BTreeMap::new();
        for (k, s) in ClusterId::enumerate(scheds) {
            for (name, profile) in s.licence_book().profiles() {
                // A shared pool: every cluster's book holds the same view of it.
                pools
                    .entry(name.to_string())
                    .or_insert_with(|| (profile.clone(), BTreeSet::new()))
                    .1
                    .insert(k);
            }
        }
        if pools.is_empty() {
            return LicencePlan::default();
        }
        for (k, (s, f)) in ClusterId::enumerate(scheds.iter().zip(forecasts)) {
            for o in f.iter() {
                let OccupancyKind::Planned { job, .. } = o.kind else {
                    continue;
                };
                let Some(demand) = s.licences_of(job).filter(|d| !d.is_empty()) else {
                    continue;
                };
                for (name, &n) in demand {
                    let Some((p, on)) = pools.get_mut(name) else {
                        continue;
                    };
                    if !on.contains(&k) {
                        continue;
                    }
                    // Held already where it is reserved now: counted once, where the
                    // forecast places it.
                    if let Some(r) = s.reservation_of(job) {
                        p.give(r.start, r.end, n);
                    }
                    p.take(o.window.start, o.window.end, n);
                }
            }
        }
        LicencePlan { pools }
    }

    /// True when no cluster draws on any pool.
    pub fn is_empty(&self) -> bool {
        self.pools.is_empty()
    }

    /// Cluster `k` draws on every pool of the demand.
    pub fn serves(&self, demand: &BTreeMap<String, u32>, k: ClusterId) -> bool {
        demand
            .keys()
            .all(|name| self.pools.get(name).is_some_and(|(_, on)| on.contains(&k)))
    }

    /// Why the demand can never be met on this grid, naming the pool and its size.
    pub fn refusal(&self, demand: &BTreeMap<String, u32>) -> Option<String> {
        for (name, &n) in demand {
            match self.pools.get(name) {
                None => return Some(format!("no licence pool is named {name:?}")),
                Some((p, _)) if n > p.capacity() => {
                    return Some(format!(
                        "{n} licences {name:?} asked, the pool {name:?} has {}",
                        p.capacity()
                    ))
                }
                Some(_) => {}
            }
        }
        let most = self
            .pools
            .values()
            .flat_map(|(_, on)| on.iter().copied())
            .max()
            .unwrap_or(ClusterId(0));
        let together = ClusterId::all(most.as_num() + 1).any(|k| self.serves(demand, k));
        (!together).then(|| {
            format!(
                "no cluster draws on all of the licence pools {:?}",
                demand.keys().collect::<Vec<_>>()
            )
        })
    }

    /// The earliest start at or after `from` at which every licence of the demand stays
    /// free for `dur`; `None` if never.
    pub fn earliest(&self, demand: &BTreeMap<String, u32>, from: Time, dur: Dur) -> Option<Time> {
        let mut t = from;
        loop {
            let mut moved = false;
            for (name, &n) in demand {
                let s = self.pools.get(name)?.0.earliest(t, n, dur)?;
                if s > t {
                    t = s;
                    moved = true;
                }
            }
            if !moved {
                return Some(t);
            }
        }
    }

    /// Holds the demand over `[start, end)`, for the jobs planned after.
    pub fn take(&mut self, demand: &BTreeMap<String, u32>, start: Time, end: Time) {
        for (name, &n) in demand {
            if let Some((p, _)) = self.pools.get_mut(name) {
                p.take(start, end, n);
            }
        }
    }
}
