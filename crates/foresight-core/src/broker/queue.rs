//! The broker's queue of global jobs waiting to be planned, by absolute priority level
//! (highest first) and then by id, so that jobs of one level keep the order they always had.

use crate::ids::JobId;
use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};

/// Queued global jobs in planning order.
#[derive(Clone, Debug, Default)]
pub(crate) struct BrokerQueue {
    order: BTreeSet<(Reverse<u32>, JobId)>,
    level: HashMap<JobId, u32>,
}

impl BrokerQueue {
    /// Queues `id` at `priority` (again: moved to that level).
    pub(crate) fn insert(&mut self, id: JobId, priority: u32) {
        self.remove(&id);
        self.order.insert((Reverse(priority), id));
        self.level.insert(id, priority);
    }

    /// Takes `id` out; false when it was not queued.
    pub(crate) fn remove(&mut self, id: &JobId) -> bool {
        match self.level.remove(id) {
            Some(p) => self.order.remove(&(Reverse(p), *id)),
            None => false,
        }
    }

    pub(crate) fn contains(&self, id: &JobId) -> bool {
        self.level.contains_key(id)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// In planning order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &JobId> + '_ {
        self.order.iter().map(|(_, id)| id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_first_then_ids() {
        let mut q = BrokerQueue::default();
        q.insert(JobId(3), 0);
        q.insert(JobId(1), 0);
        q.insert(JobId(2), 5);
        q.insert(JobId(4), 1);
        let order: Vec<u64> = q.iter().map(|j| j.0).collect();
        assert_eq!(order, vec![2, 4, 1, 3]);
        assert!(q.remove(&JobId(2)));
        assert!(!q.remove(&JobId(2)));
        assert!(!q.contains(&JobId(2)));
        q.insert(JobId(1), 9);
        let order: Vec<u64> = q.iter().map(|j| j.0).collect();
        assert_eq!(order, vec![1, 4, 3]);
    }
}
