//! A table of records that knows which of its rows changed since they were last written:
//! every write goes through [`Table::insert`] or [`Table::get_mut`], which mark the row, so
//! the store is never left behind by a change that forgot to say so.
//!
//! Two readers take the marks, each at its own pace: the store writer
//! ([`Table::take_changed`], at each flush) and the running totals derived from the rows
//! ([`Table::take_to_recount`], before each admission), so neither walks the rows the other
//! has not yet taken.

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Deref;

/// Rows by key, with the keys of the rows changed since [`Table::take_changed`] and since
/// [`Table::take_to_recount`].
///
/// Reads go through `Deref` to the map; there is no `DerefMut`, so a change cannot bypass
/// the marking.
#[derive(Debug)]
pub struct Table<K, V> {
    rows: BTreeMap<K, V>,
    changed: BTreeSet<K>,
    to_recount: BTreeSet<K>,
}

impl<K, V> Default for Table<K, V> {
    fn default() -> Self {
        Table {
            rows: BTreeMap::new(),
            changed: BTreeSet::new(),
            to_recount: BTreeSet::new(),
        }
    }
}

impl<K: Ord + Clone, V> Table<K, V> {
    /// Adds or replaces a row, marked changed.
    pub fn insert(&mut self, key: K, row: V) -> Option<V> {
        self.mark(key.clone());
        self.rows.insert(key, row)
    }

    /// Adds a row as the store has it (read at start-up or taken in from a shared store):
    /// not marked, since there is nothing to write.
    pub fn load(&mut self, key: K, row: V) -> Option<V> {
        self.rows.insert(key, row)
    }

    /// The row of `key` to change, marked changed: take it only to write it (read with
    /// `get`), or the row is written again unchanged.
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized + ToOwned<Owned = K>,
    {
        let row = self.rows.get_mut(key)?;
        // A row changed again before it is written costs no allocation of its key.
        if !self.changed.contains(key) {
            self.changed.insert(key.to_owned());
        }
        if !self.to_recount.contains(key) {
            self.to_recount.insert(key.to_owned());
        }
        Some(row)
    }

    /// The row of `key` to change if `needs` says its row needs a change: marked only then,
    /// so a pass over many rows writes only those it changes.
    pub fn get_mut_if<Q>(&mut self, key: &Q, needs: impl FnOnce(&V) -> bool) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized + ToOwned<Owned = K>,
    {
        if !self.rows.get(key).is_some_and(needs) {
            return None;
        }
        self.get_mut(key)
    }

    /// The row of `key`, changed to follow what the store already holds (a shared record
    /// another site changed, or a hold the store took): not marked, since writing it back
    /// would apply the change twice.
    pub fn follow_store<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.rows.get_mut(key)
    }

    /// Marks a row changed that was changed otherwise (a field the store derives, such as
    /// an id known only once stored), or to write it again after a failed write.
    pub fn mark(&mut self, key: K) {
        self.to_recount.insert(key.clone());
        self.changed.insert(key);
    }

    /// The keys of the rows changed since they were last taken.
    pub fn changed(&self) -> &BTreeSet<K> {
        &self.changed
    }

    /// Takes the keys of the changed rows: the caller writes those rows.
    pub fn take_changed(&mut self) -> BTreeSet<K> {
        std::mem::take(&mut self.changed)
    }

    /// The keys of the rows changed since the totals derived from them were last recounted.
    pub fn to_recount(&self) -> &BTreeSet<K> {
        &self.to_recount
    }

    /// Takes the keys of the rows changed since the last recount: the caller recounts what
    /// it derives from those rows.
    pub fn take_to_recount(&mut self) -> BTreeSet<K> {
        std::mem::take(&mut self.to_recount)
    }
}

impl<K, V> Deref for Table<K, V> {
    type Target = BTreeMap<K, V>;

    fn deref(&self) -> &BTreeMap<K, V> {
        &self.rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_taken_to_change_is_marked_and_a_row_only_read_is_not() {
        let mut t: Table<u32, String> = Table::default();
        t.load(1, "a".into());
        t.load(2, "b".into());
        assert!(t.changed().is_empty(), "loaded rows are as stored");
        assert_eq!(t.get(&1).unwrap(), "a");
        assert!(t.changed().is_empty(), "a row only read is not marked");
        t.get_mut(&2).unwrap().push('!');
        assert_eq!(t.take_changed().into_iter().collect::<Vec<_>>(), vec![2]);
        assert_eq!(t[&2], "b!");
        assert!(t.changed().is_empty());
        t.insert(3, "c".into());
        t.mark(1);
        assert_eq!(t.take_changed().into_iter().collect::<Vec<_>>(), vec![1, 3]);
        assert!(t.get_mut(&9).is_none());
        assert!(t.get_mut_if(&1, |r| r.is_empty()).is_none());
        assert!(
            t.changed().is_empty(),
            "a row that needs no change is not marked"
        );
        t.get_mut_if(&1, |r| r == "a").unwrap().push('?');
        assert_eq!(t.take_changed().into_iter().collect::<Vec<_>>(), vec![1]);
        assert!(t.changed().is_empty(), "a missing row marks nothing");
    }

    #[test]
    fn the_store_and_the_recount_take_the_marks_each_at_its_own_pace() {
        let mut t: Table<u32, String> = Table::default();
        t.load(1, "a".into());
        t.insert(2, "b".into());
        t.get_mut(&1).unwrap().push('!');
        assert_eq!(t.take_changed().into_iter().collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(
            t.to_recount().iter().copied().collect::<Vec<_>>(),
            vec![1, 2]
        );
        t.get_mut(&2).unwrap().push('?');
        assert_eq!(
            t.take_to_recount().into_iter().collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert_eq!(t.changed().iter().copied().collect::<Vec<_>>(), vec![2]);
        assert!(t.to_recount().is_empty());
        t.follow_store(&1).unwrap().push('~');
        t.load(3, "c".into());
        assert!(
            t.to_recount().is_empty(),
            "what the store holds already is counted"
        );
    }
}
