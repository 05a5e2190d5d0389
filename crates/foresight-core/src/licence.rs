//! Licences as resources (seed 003): countable pools of software licences, held by a job for
//! its whole run like processors. A pool belongs to one cluster or is shared by several (a
//! floating licence server); a scheduler sees its pools as profiles of free licences over
//! time, so that a job starts, or is reserved, only where every licence it asks for stays
//! free for its whole planned run.

use crate::profile::Profile;
use crate::time::{Dur, Time};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A licence pool as configured: `[[licence]] name = "ansys" count = 4 clusters = ["a"]`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LicencePool {
    /// The name jobs ask for (`--licence ansys:2`).
    pub name: String,
    /// Licences in the pool.
    pub count: u32,
    /// The clusters whose jobs draw on it; more than one for a floating licence server.
    pub clusters: Vec<String>,
}

impl LicencePool {
    /// Every rule a pool must follow, each error naming the pool; `known` are the
    /// configured clusters' names.
    pub fn check(&self, known: &[&str]) -> Result<(), String> {
        let at = |what: String| format!("licence {:?}: {what}", self.name);
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(at(
                "the name must be letters, digits, '-', '_' or '.'".into()
            ));
        }
        if self.count == 0 {
            return Err(at("count must be at least 1".into()));
        }
        if self.clusters.is_empty() {
            return Err(at("clusters must name at least one cluster".into()));
        }
        for c in &self.clusters {
            if !known.contains(&c.as_str()) {
                return Err(at(format!("no cluster is named {c:?}")));
            }
        }
        Ok(())
    }
}

/// Checks a set of pools: each valid, no name twice.
pub fn check_pools(pools: &[LicencePool], known: &[&str]) -> Result<(), String> {
    for (i, p) in pools.iter().enumerate() {
        p.check(known)?;
        if pools[..i].iter().any(|q| q.name == p.name) {
            return Err(format!("licence {:?} is configured twice", p.name));
        }
    }
    Ok(())
}

/// Why a job's licence demand can never be met by `pools` (the pools its clusters draw on),
/// naming the pool and its size.
pub fn demand_refusal(demand: &BTreeMap<String, u32>, pools: &[LicencePool]) -> Option<String> {
    for (name, &n) in demand {
        match pools.iter().find(|p| &p.name == name) {
            None => return Some(format!("no licence pool is named {name:?}")),
            Some(p) if n > p.count => {
                return Some(format!(
                    "{n} licences {name:?} asked, the pool {name:?} has {}",
                    p.count
                ))
            }
            Some(_) => {}
        }
    }
    None
}

/// Parses a demand written `NAME:COUNT` (`ansys:2`); a bare `NAME` asks for one.
pub fn parse_demand(text: &str) -> Result<(String, u32), String> {
    let (name, count) = match text.split_once(':') {
        Some((n, c)) => {
            let c: u32 = c
                .trim()
                .parse()
                .map_err(|_| format!("licence {text:?}: the count must be a whole number"))?;
            (n.trim(), c)
        }
        None => (text.trim(), 1),
    };
    if name.is_empty() {
        return Err(format!("licence {text:?}: the name is empty"));
    }
    if count == 0 {
        return Err(format!("licence {text:?}: the count must be at least 1"));
    }
    Ok((name.to_string(), count))
}

/// A change a scheduler made to a pool it shares with other clusters (a floating licence
/// server): the other clusters' schedulers apply it to their own view of the pool
/// ([`LicenceBook::apply`]), so that the pool is one pool of `count` licences across them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hold {
    /// The pool.
    pub pool: String,
    /// From.
    pub start: Time,
    /// Until (excluded).
    pub end: Time,
    /// Licences given back (positive) or taken (negative).
    pub delta: i64,
}

/// Free licences over time, per pool, as one scheduler holds them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LicenceBook {
    /// By pool name.
    pools: BTreeMap<String, Profile>,
    /// Pools other clusters draw on too: every change to them is journaled.
    shared: std::collections::BTreeSet<String>,
    /// Changes to shared pools not yet passed on ([`LicenceBook::drain_journal`]).
    journal: Vec<Hold>,
    /// When licences other clusters held come back: no event of this cluster's own marks
    /// those instants, so its scheduler must be woken then.
    comebacks: std::collections::BTreeSet<Time>,
}

impl LicenceBook {
    /// True when no pool is known: every licence check is skipped.
    pub fn is_empty(&self) -> bool {
        self.pools.is_empty()
    }

    /// Adds (or resizes, while nothing is held) a pool of `count` licences.
    pub fn add_pool(&mut self, name: &str, count: u32) {
        self.pools.insert(name.to_string(), Profile::new(count));
    }

    /// Marks the pool as shared with other clusters: from now on every change this book
    /// makes to it is journaled for them.
    pub fn share(&mut self, name: &str) {
        if self.pools.contains_key(name) {
            self.shared.insert(name.to_string());
        }
    }

    /// The changes to shared pools made since the last call, oldest first.
    pub fn drain_journal(&mut self) -> Vec<Hold> {
        std::mem::take(&mut self.journal)
    }

    /// Applies a change another cluster made to a pool shared with this one (not journaled
    /// again); a pool this book does not know is ignored.
    pub fn apply(&mut self, hold: &Hold) {
        if let Some(p) = self.pools.get_mut(&hold.pool) {
            p.add(hold.start, hold.end, hold.delta);
            let back = if hold.delta > 0 { hold.start } else { hold.end };
            if back < Time::MAX {
                self.comebacks.insert(back);
            }
        }
    }

    /// The first instant after `now` at which licences another cluster held come back.
    pub fn next_comeback(&self, now: Time) -> Option<Time> {
        self.comebacks
            .range((std::ops::Bound::Excluded(now), std::ops::Bound::Unbounded))
            .next()
            .copied()
    }

    /// Every pool, by name, with its free licences over time.
    pub fn profiles(&self) -> impl Iterator<Item = (&str, &Profile)> {
        self.pools.iter().map(|(n, p)| (n.as_str(), p))
    }

    /// The fewest licences of the pool free during `[start, end)`.
    pub fn min_free(&self, name: &str, start: Time, end: Time) -> Option<i64> {
        self.pools.get(name).map(|p| p.min_free(start, end))
    }

    /// The pool's size, if known.
    pub fn count(&self, name: &str) -> Option<u32> {
        self.pools.get(name).map(Profile::capacity)
    }

    /// Licences of the pool free at `t` (`None`: no such pool).
    pub fn free_at(&self, name: &str, t: Time) -> Option<i64> {
        self.pools.get(name).map(|p| p.free_at(t))
    }

    /// Why the demand can never be met here, if it cannot.
    pub fn refusal(&self, demand: &BTreeMap<String, u32>) -> Option<String> {
        for (name, &n) in demand {
            match self.pools.get(name) {
                None => return Some(format!("no licence pool {name:?} on this cluster")),
                Some(p) if n > p.capacity() => {
                    return Some(format!(
                        "{n} licences {name:?} asked, the pool {name:?} has {}",
                        p.capacity()
                    ))
                }
                Some(_) => {}
            }
        }
        None
    }

    /// Forgets the past before `now`.
    pub fn advance(&mut self, now: Time) {
        for p in self.pools.values_mut() {
            p.advance(now);
        }
        while self.comebacks.first().is_some_and(|&t| t <= now) {
            self.comebacks.pop_first();
        }
    }

    /// Every licence of the demand stays free over `[start, start + dur)`.
    pub fn fits(&self, demand: &BTreeMap<String, u32>, start: Time, dur: Dur) -> bool {
        demand
            .iter()
            .all(|(name, &n)| self.pools.get(name).is_some_and(|p| p.fits(start, n, dur)))
    }

    /// The earliest start at or after `from` at which the demand stays free for `dur`.
    pub fn earliest(&self, demand: &BTreeMap<String, u32>, from: Time, dur: Dur) -> Option<Time> {
        let mut t = from;
        loop {
            let mut moved = false;
            for (name, &n) in demand {
                let s = self.pools.get(name)?.earliest(t, n, dur)?;
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

    /// Holds the demand over `[start, end)`.
    pub fn take(&mut self, demand: &BTreeMap<String, u32>, start: Time, end: Time) {
        if end <= start {
            return;
        }
        for (name, &n) in demand {
            if let Some(p) = self.pools.get_mut(name) {
                p.take(start, end, n);
                if self.shared.contains(name) {
                    self.journal.push(Hold {
                        pool: name.clone(),
                        start,
                        end,
                        delta: -i64::from(n),
                    });
                }
            }
        }
    }

    /// Lets go of the demand over `[start, end)`.
    pub fn give(&mut self, demand: &BTreeMap<String, u32>, start: Time, end: Time) {
        if end <= start {
            return;
        }
        for (name, &n) in demand {
            if let Some(p) = self.pools.get_mut(name) {
                p.give(start, end, n);
                if self.shared.contains(name) {
                    self.journal.push(Hold {
                        pool: name.clone(),
                        start,
                        end,
                        delta: i64::from(n),
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demand(n: u32) -> BTreeMap<String, u32> {
        BTreeMap::from([("ansys".to_string(), n)])
    }

    #[test]
    fn two_of_four_wait_while_three_are_held() {
        let mut b = LicenceBook::default();
        b.add_pool("ansys", 4);
        b.take(&demand(3), Time(0), Time(100));
        assert!(!b.fits(&demand(2), Time(0), Dur(10)));
        assert!(b.fits(&demand(1), Time(0), Dur(10)));
        assert_eq!(b.earliest(&demand(2), Time(0), Dur(10)), Some(Time(100)));
        b.give(&demand(3), Time(50), Time(100));
        assert_eq!(b.earliest(&demand(2), Time(0), Dur(10)), Some(Time(50)));
        assert_eq!(b.earliest(&demand(5), Time(0), Dur(10)), None);
    }

    #[test]
    fn demands_parse_and_refusals_name_the_pool() {
        assert_eq!(parse_demand("ansys:2"), Ok(("ansys".into(), 2)));
        assert_eq!(parse_demand("fluent"), Ok(("fluent".into(), 1)));
        assert!(parse_demand("ansys:0").unwrap_err().contains("at least 1"));
        assert!(parse_demand("ansys:x")
            .unwrap_err()
            .contains("whole number"));
        let pools = [LicencePool {
            name: "ansys".into(),
            count: 4,
            clusters: vec!["a".into()],
        }];
        assert_eq!(
            demand_refusal(&demand(5), &pools).unwrap(),
            "5 licences \"ansys\" asked, the pool \"ansys\" has 4"
        );
        assert!(demand_refusal(&demand(4), &pools).is_none());
        assert!(pools[0]
            .check(&["b"])
            .unwrap_err()
            .contains("no cluster is named \"a\""));
        assert!(check_pools(&[pools[0].clone(), pools[0].clone()], &["a"])
            .unwrap_err()
            .contains("configured twice"));
    }
}
