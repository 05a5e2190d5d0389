//! The broker's global jobs by id, with an index of the ones that hold or use processors
//! (reserving, reserved, running, suspended). Every cycle looks for those — to move reserved
//! jobs earlier, to preempt for a higher level, to resume — and with a long queue a walk of
//! every job was most of a cycle, held under the service's lock (10⁵ queued jobs: 35 ms a
//! cycle, and submissions waiting behind it). The index makes those walks cost what they
//! find. It follows every change of phase by itself: a job is changed only through
//! [`EntryMut`], which files it again when dropped.

use super::{Entry, Phase};
use crate::ids::JobId;
use std::collections::{BTreeMap, BTreeSet};

/// Global jobs by id, and the ids of the active ones.
#[derive(Clone, Debug, Default)]
pub(super) struct Entries {
    map: BTreeMap<JobId, Entry>,
    active: BTreeSet<JobId>,
}

/// Whether a job in `phase` holds or uses processors (or did, and resumes on them).
fn is_active(phase: &Phase) -> bool {
    !matches!(phase, Phase::Queued | Phase::Planned { .. })
}

impl Entries {
    pub(super) fn get(&self, id: &JobId) -> Option<&Entry> {
        self.map.get(id)
    }

    /// The job, to change: filed again by its phase when the guard is dropped.
    pub(super) fn get_mut(&mut self, id: &JobId) -> Option<EntryMut<'_>> {
        let entry = self.map.get_mut(id)?;
        Some(EntryMut {
            id: *id,
            entry,
            active: &mut self.active,
        })
    }

    pub(super) fn contains_key(&self, id: &JobId) -> bool {
        self.map.contains_key(id)
    }

    pub(super) fn insert(&mut self, id: JobId, entry: Entry) {
        if is_active(&entry.phase) {
            self.active.insert(id);
        } else {
            self.active.remove(&id);
        }
        self.map.insert(id, entry);
    }

    pub(super) fn remove(&mut self, id: &JobId) -> Option<Entry> {
        self.active.remove(id);
        self.map.remove(id)
    }

    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    /// Every job, by id.
    pub(super) fn values(&self) -> impl Iterator<Item = &Entry> {
        self.map.values()
    }

    /// The jobs reserving, reserved, running or suspended, by id: what a walk for any of
    /// those needs to see.
    pub(super) fn active(&self) -> impl Iterator<Item = &Entry> {
        self.active.iter().filter_map(|id| self.map.get(id))
    }

    /// The first active job for which `f` gives something, changed as `f` changes it.
    pub(super) fn find_active_mut<T>(
        &mut self,
        mut f: impl FnMut(JobId, &mut Entry) -> Option<T>,
    ) -> Option<T> {
        let ids: Vec<JobId> = self.active.iter().copied().collect();
        ids.into_iter().find_map(|id| {
            let mut e = self.get_mut(&id)?;
            f(id, &mut e)
        })
    }

    /// Whether the index holds exactly the active jobs: a full walk, which the broker's
    /// property tests make after every event (and `on_cycle` in builds with debug
    /// assertions).
    pub(super) fn index_holds(&self) -> bool {
        let want: BTreeSet<JobId> = self
            .map
            .iter()
            .filter(|(_, e)| is_active(&e.phase))
            .map(|(id, _)| *id)
            .collect();
        want == self.active
    }
}

impl std::ops::Index<&JobId> for Entries {
    type Output = Entry;

    fn index(&self, id: &JobId) -> &Entry {
        &self.map[id]
    }
}

/// A job being changed; filed again by its phase when dropped.
#[derive(Debug)]
pub(super) struct EntryMut<'a> {
    id: JobId,
    entry: &'a mut Entry,
    active: &'a mut BTreeSet<JobId>,
}

impl std::ops::Deref for EntryMut<'_> {
    type Target = Entry;

    fn deref(&self) -> &Entry {
        self.entry
    }
}

impl std::ops::DerefMut for EntryMut<'_> {
    fn deref_mut(&mut self) -> &mut Entry {
        self.entry
    }
}

impl Drop for EntryMut<'_> {
    fn drop(&mut self) {
        if is_active(&self.entry.phase) {
            self.active.insert(self.id);
        } else {
            self.active.remove(&self.id);
        }
    }
}
