//! The invariants of absolute priorities, checked from a caller's record of what runs where
//! rather than from the broker's own: shared by `properties/preempt.rs` (a small driver) and the
//! grid simulator's tests (`foresight-sim/tests/simulation/grid_levels.rs`, which includes this file),
//! so that both drivers of the broker are held to one statement of them.
//!
//! - no cluster runs more processors than it has;
//! - after a cycle, no queued job that cannot start on idle processors waits while idle
//!   processors plus those held by running global jobs of lower levels on one cluster would
//!   be enough for it (unless taking them would leave a queued job of a higher level that
//!   fits the idle processors now without room: a higher level comes first on idle
//!   processors);
//! - after a cycle that started no global job, no suspended job waits while its cluster has
//!   that much for it either (it resumes, or takes them back from lower levels).
#![allow(dead_code)] // each test binary uses a different part

use foresight_core::broker::{Broker, Phase};
use foresight_core::{ClusterId, JobId, Time};
use std::collections::{BTreeMap, BTreeSet};

/// What a caller sees at an instant: the broker, and every part it runs (local jobs and
/// global jobs' parts) whose end it has not yet reported: (job, cluster) → (end, processors).
pub struct Sight<'a> {
    /// The broker.
    pub broker: &'a Broker,
    /// The instant.
    pub now: Time,
    /// What runs.
    pub running: &'a BTreeMap<(JobId, ClusterId), (Time, u32)>,
}

impl Sight<'_> {
    fn size(&self, k: ClusterId) -> u32 {
        self.broker.clusters[k].sched.capacity()
    }

    fn clusters(&self) -> usize {
        self.broker.clusters.len()
    }

    /// No cluster runs more than it has. Windows are half-open: a part whose run ends at
    /// `now` holds nothing at `now`, even while its end (one of several at this instant) is
    /// yet to be reported.
    pub fn capacity(&self) -> Result<(), String> {
        for k in ClusterId::all(self.clusters()) {
            let used: u32 = self
                .running
                .iter()
                .filter(|((_, c), (end, _))| *c == k && *end > self.now)
                .map(|(_, (_, p))| p)
                .sum();
            if used > self.size(k) {
                return Err(format!(
                    "at {}: cluster {k} runs {used} of {}",
                    self.now,
                    self.size(k)
                ));
            }
        }
        Ok(())
    }

    /// Idle processors of cluster `k` plus those global jobs below `level` hold there.
    fn room(&self, k: ClusterId, level: u32) -> u32 {
        let mut busy = 0;
        let mut lower = 0;
        for ((job, c), (_, procs)) in self.running {
            if *c != k {
                continue;
            }
            busy += procs;
            if self
                .broker
                .entry(*job)
                .is_some_and(|e| e.job.priority < level)
            {
                lower += procs;
            }
        }
        self.size(k).saturating_sub(busy) + lower
    }

    /// True when taking `used` idle processors of cluster `k` for a job of `level` would
    /// leave a queued job of a higher level that fits on the idle processors now without
    /// them: the higher level comes first on idle processors, even while the planner keeps
    /// it for later.
    fn yields(&self, idle: &[u32], level: u32, k: ClusterId, used: u32) -> bool {
        let mut after = idle.to_vec();
        after[k] = after[k].saturating_sub(used);
        self.broker.queued().any(|q| {
            q.job.priority > level
                && q.not_before <= self.now
                && fits_idle(idle, q.job.procs, q.job.co_allocate)
                && !fits_idle(&after, q.job.procs, q.job.co_allocate)
        })
    }

    /// The waiting invariants, after a cycle. `requeued`: jobs preempted to be requeued
    /// while the cycle's decisions were carried out (queued again only after it served
    /// the levels; the next cycle serves them). `started_global`: whether the cycle
    /// started a global job's part.
    pub fn no_job_waits_on_lower_levels(
        &self,
        requeued: &BTreeSet<JobId>,
        started_global: bool,
    ) -> Result<(), String> {
        let idle: Vec<u32> = ClusterId::all(self.clusters())
            .map(|k| self.room(k, 0))
            .collect();
        for e in self.broker.queued() {
            if e.not_before > self.now || requeued.contains(&e.job.id) {
                continue;
            }
            // It could start without preempting anyone: the planner's to place.
            let fits = fits_idle(&idle, e.job.procs, e.job.co_allocate);
            for k in ClusterId::all(self.clusters()) {
                // Taking what it needs on `k` uses at least this many idle processors there.
                let lower = self.room(k, e.job.priority) - idle[k];
                let used = e.job.procs.saturating_sub(lower);
                if !(fits
                    || self.room(k, e.job.priority) < e.job.procs
                    || self.yields(&idle, e.job.priority, k, used))
                {
                    return Err(format!(
                        "at {}: queued job {} (level {}, {} procs) waits while lower levels \
                         hold what it needs on cluster {k}",
                        self.now, e.job.id, e.job.priority, e.job.procs
                    ));
                }
            }
        }
        if started_global {
            return Ok(());
        }
        for e in self.broker.entries() {
            if let Phase::Suspended { parts, .. } = &e.phase {
                if let [p] = parts.as_slice() {
                    // Queued jobs of a higher level come first on idle processors, even
                    // while the planner keeps them for later.
                    let yields = self.yields(&idle, e.job.priority, p.cluster, p.procs);
                    if !(yields || self.room(p.cluster, e.job.priority) < p.procs) {
                        return Err(format!(
                            "at {}: suspended job {} waits while cluster {} has room",
                            self.now, e.job.id, p.cluster
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// True when `procs` processors are idle on one cluster (or over several, `co_allocate`).
fn fits_idle(idle: &[u32], procs: u32, co_allocate: bool) -> bool {
    idle.iter().any(|&i| i >= procs) || (co_allocate && idle.iter().sum::<u32>() >= procs)
}
