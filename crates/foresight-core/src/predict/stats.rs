//! The statistics store: the real runtimes of finished jobs, keyed by who ran what, with which
//! parameters, on which processors (seed 003's statistics manager). The simulator fills it as
//! jobs finish; the service can fill it from its own store the same way.

use crate::ids::UserId;
use crate::time::Dur;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// How many runs are kept per key: enough for every predictor here, small enough that the
/// store stays a few words per user and application.
pub const KEPT: usize = 8;

/// What identifies "the same kind of run".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RunKey {
    /// The submitting user.
    pub user: UserId,
    /// The application (an SWF executable number, or a hash of a command or `--app` name);
    /// `None` when unknown.
    pub app: Option<u64>,
    /// The application's parameters that shape its runtime (here: processors requested, or
    /// a hash of the arguments).
    pub params: u64,
    /// The processor type the job runs on (0 when a cluster has only one).
    pub arch: u32,
}

/// Finished runs, most recent last, per user and per (application, parameters, processor
/// type).
#[derive(Clone, Debug, Default)]
pub struct RuntimeStats {
    by_user: FxHashMap<UserId, VecDeque<Dur>>,
    by_app: FxHashMap<(u64, u64, u32), VecDeque<Dur>>,
    /// Runs recorded.
    pub recorded: u64,
}

fn push(runs: &mut VecDeque<Dur>, runtime: Dur) {
    if runs.len() == KEPT {
        runs.pop_front();
    }
    runs.push_back(runtime);
}

impl RuntimeStats {
    /// An empty store.
    pub fn new() -> RuntimeStats {
        RuntimeStats::default()
    }

    /// Records that a job with `key` finished after running `runtime`.
    pub fn record(&mut self, key: &RunKey, runtime: Dur) {
        push(self.by_user.entry(key.user).or_default(), runtime);
        if let Some(app) = key.app {
            push(
                self.by_app.entry((app, key.params, key.arch)).or_default(),
                runtime,
            );
        }
        self.recorded += 1;
    }

    /// The user's last finished runs, oldest first (at most [`KEPT`]).
    pub fn user_runs(&self, user: UserId) -> impl Iterator<Item = Dur> + '_ {
        self.by_user.get(&user).into_iter().flatten().copied()
    }

    /// The last finished runs of the key's application, parameters and processor type, oldest
    /// first (at most [`KEPT`]); none when the application is unknown.
    pub fn app_runs(&self, key: &RunKey) -> impl Iterator<Item = Dur> + '_ {
        key.app
            .and_then(|app| self.by_app.get(&(app, key.params, key.arch)))
            .into_iter()
            .flatten()
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_runs_per_user_and_per_application() {
        let mut s = RuntimeStats::new();
        let key = |user, app| RunKey {
            user: UserId(user),
            app,
            params: 4,
            arch: 0,
        };
        for r in 1..=10 {
            s.record(&key(1, Some(7)), Dur(r));
        }
        s.record(&key(2, None), Dur(99));
        let user1: Vec<i64> = s.user_runs(UserId(1)).map(Dur::as_secs).collect();
        assert_eq!(user1, vec![3, 4, 5, 6, 7, 8, 9, 10]);
        assert_eq!(s.app_runs(&key(2, Some(7))).count(), KEPT);
        assert_eq!(s.app_runs(&key(2, None)).count(), 0);
        let other_params = RunKey {
            params: 8,
            ..key(1, Some(7))
        };
        assert_eq!(s.app_runs(&other_params).count(), 0);
        assert_eq!(s.recorded, 11);
    }
}
