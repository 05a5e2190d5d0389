//! Multi-factor job priority in Maui's manner: queue time, expansion factor, requested
//! processors, per-credential priorities and fairshare with exponentially decaying usage.
//! The default weights count queue time only, which orders the queue first come, first served.

use crate::ids::{AccountId, ClassId, GroupId, QosId, UserId};
use crate::job::Job;
use crate::time::{Dur, Time};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Weights of the priority factors. Priority is their weighted sum; higher runs first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PriorityWeights {
    /// Per minute waited (Maui `QUEUETIMEWEIGHT`).
    pub queue_time: f64,
    /// Times the expansion factor `(wait + estimate) / estimate` (Maui `XFACTORWEIGHT`).
    pub expansion_factor: f64,
    /// Per requested processor (Maui `RESOURCEWEIGHT` on processors).
    pub procs: f64,
    /// Times the fairshare factor, `−(the user's share of recent usage)` in [−1, 0].
    pub fairshare: f64,
    /// Half-life of recorded usage for fairshare.
    pub fairshare_half_life: Dur,
    /// Per-user priority (Maui `USERCFG[..] PRIORITY`).
    pub user: BTreeMap<UserId, f64>,
    /// Per-group priority.
    pub group: BTreeMap<GroupId, f64>,
    /// Per-account priority.
    pub account: BTreeMap<AccountId, f64>,
    /// Per-class priority.
    pub class: BTreeMap<ClassId, f64>,
    /// Per-QoS priority.
    pub qos: BTreeMap<QosId, f64>,
}

impl Default for PriorityWeights {
    fn default() -> Self {
        PriorityWeights {
            queue_time: 1.0,
            expansion_factor: 0.0,
            procs: 0.0,
            fairshare: 0.0,
            fairshare_half_life: Dur::hours(24),
            user: BTreeMap::new(),
            group: BTreeMap::new(),
            account: BTreeMap::new(),
            class: BTreeMap::new(),
            qos: BTreeMap::new(),
        }
    }
}

impl PriorityWeights {
    /// The priority of `job` at `now`.
    pub fn priority(&self, job: &Job, now: Time, usage: &FairshareUsage) -> f64 {
        let waited = (now - job.submit).as_secs().max(0) as f64;
        let estimate = job.estimate.as_secs().max(1) as f64;
        let mut p = self.queue_time * waited / 60.0
            + self.expansion_factor * (waited + estimate) / estimate
            + self.procs * f64::from(job.procs)
            + credential(&self.user, &job.cred.user)
            + credential(&self.group, &job.cred.group)
            + credential(&self.account, &job.cred.account)
            + credential(&self.class, &job.cred.class)
            + credential(&self.qos, &job.cred.qos);
        if self.fairshare != 0.0 {
            p -= self.fairshare * usage.share(job.cred.user, now, self.fairshare_half_life);
        }
        p
    }
}

fn credential<K: Ord>(weights: &BTreeMap<K, f64>, key: &K) -> f64 {
    weights.get(key).copied().unwrap_or(0.0)
}

/// Processor-seconds used per user, decaying with a half-life, for fairshare.
#[derive(Clone, Debug, Default)]
pub struct FairshareUsage {
    per_user: FxHashMap<UserId, Decaying>,
    total: Decaying,
}

#[derive(Clone, Copy, Debug, Default)]
struct Decaying {
    value: f64,
    at: Time,
}

impl Decaying {
    fn at(self, now: Time, half_life: Dur) -> f64 {
        let dt = (now - self.at).as_secs().max(0) as f64;
        let h = half_life.as_secs().max(1) as f64;
        self.value * 0.5f64.powf(dt / h)
    }

    fn add(&mut self, amount: f64, now: Time, half_life: Dur) {
        self.value = self.at(now, half_life) + amount;
        self.at = now;
    }
}

impl FairshareUsage {
    /// Records `proc_seconds` used by `user`, at `now`.
    pub fn record(&mut self, user: UserId, proc_seconds: f64, now: Time, half_life: Dur) {
        self.per_user
            .entry(user)
            .or_default()
            .add(proc_seconds, now, half_life);
        self.total.add(proc_seconds, now, half_life);
    }

    /// The user's share of all decayed usage, in [0, 1].
    pub fn share(&self, user: UserId, now: Time, half_life: Dur) -> f64 {
        let total = self.total.at(now, half_life);
        if total <= 0.0 {
            return 0.0;
        }
        let mine = self
            .per_user
            .get(&user)
            .map_or(0.0, |d| d.at(now, half_life));
        (mine / total).clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::JobId;

    #[test]
    fn default_weights_prefer_the_longest_waiting_job() {
        let w = PriorityWeights::default();
        let u = FairshareUsage::default();
        let old = Job::new(JobId(1), Time(0), 4, Dur(100));
        let new = Job::new(JobId(2), Time(50), 1, Dur(10));
        assert!(w.priority(&old, Time(100), &u) > w.priority(&new, Time(100), &u));
    }

    #[test]
    fn fairshare_usage_halves_after_one_half_life() {
        let mut u = FairshareUsage::default();
        let h = Dur(100);
        u.record(UserId(1), 100.0, Time(0), h);
        u.record(UserId(2), 100.0, Time(100), h);
        // user 1's 100 decayed to 50; user 2 has 100: shares 1/3 and 2/3.
        assert!((u.share(UserId(1), Time(100), h) - 1.0 / 3.0).abs() < 1e-9);
        assert!((u.share(UserId(2), Time(100), h) - 2.0 / 3.0).abs() < 1e-9);
    }
}
