//! A table of records that knows which of its rows changed since they were last written:
//! every write goes through [`Table::insert`] or [`Table::get_mut`], which mark the row, so
//! the store is never left behind by a change that forgot to say so.

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Deref;

/// Rows by key, with the keys of the rows changed since [`Table::take_changed`].
///
/// Reads go through `Deref` to the map; there is no `DerefMut`, so a change cannot bypass
/// the marking.
#[derive(Debug)]
pub struct Table<K, V> {
    rows: BTreeMap<K, V>,
    changed: BTreeSet<K>,
}

impl<K, V> Default for Table<K, V> {
    fn default() -> Self {
        Table {
            rows: BTreeMap::new(),
            changed: BTreeSet::new(),
        }
    }
}

impl<K: Ord + Clone, V> Table<K, V> {
    /// Adds or replaces a row, marked changed.
    pub fn insert(&mut self, key: K, row: V) -> Option<V> {
        self.changed.insert(key.clone());
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
        self.changed.insert(key.to_owned());
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
}
