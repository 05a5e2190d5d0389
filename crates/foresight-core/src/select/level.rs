//! [`SlotPlan::select`]: the request's requirements, cluster masks and speed levels, each
//! level walked, and the best window over them by the criterion.

use super::cheapest::Walk;
use super::memo::{BoundEntry, BoundKey};
use super::request::{Criterion, SlotRequest};
use super::selection::{NoFit, Selection};
use super::{SlotPlan, NONE};
use crate::time::{Dur, Time};
use rayon::prelude::*;
use std::sync::Arc;

/// What every level of one request shares.
struct Level<'a> {
    req: &'a SlotRequest,
    suitable_proc: Option<&'a [bool]>,
    avail: &'a [Option<Time>],
    /// Every processor meets the request's requirements (past results then apply).
    all_suitable: bool,
}

/// Lexicographic comparison key of a selection under a criterion.
#[derive(Clone, Copy, PartialEq, PartialOrd)]
struct Key(f64, f64, f64);

impl SlotPlan {
    /// Selects slots for `req`. `staging[c]` delays cluster `c`'s slots by the time to stage
    /// the job's input there (`None`: the cluster cannot be used); a missing entry is 0.
    pub fn select(&self, req: &SlotRequest, staging: &[Option<Dur>]) -> Result<Selection, NoFit> {
        if req.procs == 0 {
            return Err(NoFit {
                reason: "the job asks for no processors".into(),
            });
        }
        if req.walltime.as_secs() <= 0 {
            return Err(NoFit {
                reason: "the walltime must be positive".into(),
            });
        }
        // Which processors meet the requirements; `None`: all of them.
        let suitable_proc: Option<Vec<bool>> = (req.min_memory_mb != 0 || !req.features.is_empty())
            .then(|| {
                self.processors
                    .iter()
                    .map(|p| {
                        p.memory_mb >= req.min_memory_mb && req.features.is_subset(&p.features)
                    })
                    .collect()
            });
        let suitable_proc = suitable_proc.as_deref();
        let capable = suitable_proc.map_or(self.processors.len(), |s| {
            s.iter().filter(|ok| **ok).count()
        });
        if capable < req.procs as usize {
            return Err(NoFit {
                reason: format!(
                    "only {capable} processors meet the memory and feature requirements, {} needed",
                    req.procs
                ),
            });
        }
        let avail: Vec<Option<Time>> = (0..self.clusters.len())
            .map(|c| match staging.get(c) {
                Some(None) => None,
                Some(Some(d)) => Some(req.not_before + *d),
                None => Some(req.not_before),
            })
            .collect();
        // Speed levels, fastest first.
        let levels: Vec<f64> = if let Some(suitable_proc) = suitable_proc {
            let mut levels: Vec<f64> = self
                .processors
                .iter()
                .zip(suitable_proc)
                .filter(|(_, ok)| **ok)
                .map(|(p, _)| p.speed)
                .collect();
            levels.sort_by(|a, b| b.total_cmp(a));
            levels.dedup();
            levels
        } else {
            self.speeds.clone()
        };
        // Without co-allocation, each cluster is a world of its own.
        let masks: Vec<Option<usize>> = if req.co_allocate || self.clusters.len() <= 1 {
            vec![None]
        } else {
            (0..self.clusters.len()).map(Some).collect()
        };
        let mut best: Option<(Key, Selection)> = None;
        let keep = |sel: Selection, best: &mut Option<(Key, Selection)>| {
            let key = match req.criterion {
                Criterion::EarliestStart => {
                    Key(sel.start.secs() as f64, sel.end.secs() as f64, sel.cost)
                }
                Criterion::EarliestFinish => {
                    Key(sel.end.secs() as f64, sel.start.secs() as f64, sel.cost)
                }
                Criterion::MinCost => Key(sel.cost, sel.start.secs() as f64, sel.end.secs() as f64),
            };
            // Ties go to the earlier mask and level.
            if best.as_ref().is_none_or(|(k, _)| key < *k) {
                *best = Some((key, sel));
            }
        };
        let mut walk = Walk {
            runs: Vec::new(),
            run_of: match req.criterion {
                Criterion::MinCost => vec![NONE; self.slots.len()],
                _ => Vec::new(),
            },
            proc_ok: Arc::from(Vec::new()),
        };
        // Every set of processors runs the job at least this long.
        let shortest = levels.first().map_or(Dur::ZERO, |&v| {
            Dur((req.walltime.as_secs() as f64 / v).ceil() as i64)
        });
        let level = Level {
            req,
            suitable_proc,
            avail: &avail,
            all_suitable: capable == self.processors.len(),
        };
        for only in &masks {
            if req.criterion == Criterion::MinCost {
                for &speed in &levels {
                    let dur = Dur((req.walltime.as_secs() as f64 / speed).ceil() as i64);
                    self.build_runs(req, suitable_proc, &avail, *only, speed, &mut walk);
                    if let Some(sel) = self.cheapest(req, dur, &walk, &avail) {
                        keep(sel, &mut best);
                    }
                }
            } else if best.is_none() && levels.len() > 1 {
                // The levels' walks are independent: they run side by side. (Each finds
                // its earliest window; one a later level would have been spared cannot
                // beat the earlier level's, and loses the comparison.)
                let found: Vec<Option<Selection>> = levels
                    .par_iter()
                    .map(|&speed| self.earliest_level(&level, *only, speed, Time::MAX))
                    .collect();
                for sel in found.into_iter().flatten() {
                    keep(sel, &mut best);
                }
            } else {
                for &speed in &levels {
                    // A window starting later than this cannot beat the best so far.
                    let limit = match (&req.criterion, &best) {
                        (_, None) => Time::MAX,
                        (Criterion::EarliestStart, Some((_, b))) => b.start,
                        (_, Some((_, b))) => b.end - shortest,
                    };
                    if let Some(sel) = self.earliest_level(&level, *only, speed, limit) {
                        keep(sel, &mut best);
                    }
                }
            }
        }
        best.map(|(_, s)| s).ok_or_else(|| NoFit {
            reason: self.why_not(req, suitable_proc, &avail),
        })
    }

    /// The earliest window (and its choice) of one level: processors at least `speed` fast,
    /// of cluster `only` if given, starting no later than `limit`.
    fn earliest_level(
        &self,
        level: &Level<'_>,
        only: Option<usize>,
        speed: f64,
        limit: Time,
    ) -> Option<Selection> {
        let req = level.req;
        let dur = Dur((req.walltime.as_secs() as f64 / speed).ceil() as i64);
        // Past results bound this level's earliest start from below.
        let key = level.all_suitable.then(|| BoundKey {
            avail: level.avail.to_vec(),
            only,
            speed: speed.to_bits(),
        });
        let lower = key.as_ref().map_or(Time::MIN, |k| {
            self.bounds
                .lower(k, req.procs, dur.as_secs(), req.max_price)
        });
        let lower = self.lower_by_marks(lower, dur, req.procs, speed);
        if lower > limit || lower == Time::MAX {
            return None;
        }
        let proc_ok = self.usable_processors(level.suitable_proc, level.avail, only, speed);
        let mut state = self.walk_states.0.lock().pop().unwrap_or_default();
        let found = self.earliest(req, dur, &proc_ok, level.avail, (lower, limit), &mut state);
        self.walk_states.0.lock().push(state);
        let start = match &found {
            Some(sel) => sel.start,
            None if limit == Time::MAX => Time::MAX,
            None => limit + Dur(1),
        };
        if let Some(k) = key.filter(|_| start > lower) {
            self.bounds.record(
                &k,
                BoundEntry {
                    procs: req.procs,
                    dur: dur.as_secs(),
                    max_price: req.max_price,
                    start,
                },
            );
        }
        found
    }

    fn why_not(
        &self,
        req: &SlotRequest,
        suitable_proc: Option<&[bool]>,
        avail: &[Option<Time>],
    ) -> String {
        let priced = self
            .live_slots()
            .filter(|s| {
                suitable_proc.is_none_or(|ok| ok[s.processor as usize]) && s.cost <= req.max_price
            })
            .count();
        if priced == 0 {
            return format!(
                "no slot of a suitable processor costs at most {} per processor-second",
                req.max_price
            );
        }
        if avail.iter().all(Option::is_none) {
            return "no cluster is reachable for staging".into();
        }
        let deadline = match (&req.criterion, req.deadline) {
            (Criterion::MinCost, Some(d)) => format!(" starting by {d}"),
            _ => String::new(),
        };
        format!(
            "no window of {} s{deadline} has {} suitable processors free together{}",
            req.walltime.as_secs(),
            req.procs,
            if req.co_allocate {
                ""
            } else {
                " in one cluster"
            }
        )
    }

    /// Per processor once, so that a pass over slots reads one flag, not a record: is it
    /// usable at this level (at least `min_speed` fast, of cluster `only` if given)? When
    /// every processor meets the request's requirements the answer depends only on the
    /// usable clusters and the speed, and is kept for later requests.
    pub(super) fn usable_processors(
        &self,
        suitable_proc: Option<&[bool]>,
        avail: &[Option<Time>],
        only: Option<usize>,
        min_speed: f64,
    ) -> Arc<[bool]> {
        let cluster_ok: Vec<bool> = (0..self.clusters.len())
            .map(|c| only.is_none_or(|o| o == c) && avail[c].is_some())
            .collect();
        if suitable_proc.is_none() {
            if let Some(kept) = self.usable.find(&cluster_ok, min_speed) {
                return kept;
            }
        }
        let proc_ok: Arc<[bool]> = self
            .speed_of
            .iter()
            .zip(&self.cluster_of)
            .enumerate()
            .map(|(p, (&speed, &c))| {
                suitable_proc.is_none_or(|ok| ok[p]) & (speed >= min_speed) & cluster_ok[c as usize]
            })
            .collect();
        if suitable_proc.is_none() {
            self.usable.keep(cluster_ok, min_speed, proc_ok.clone());
        }
        proc_ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::fixture::{procs, req, slot};

    #[test]
    fn earliest_finish_prefers_fast_processors_that_start_later() {
        // Two slow processors free at 0, two fast (speed 2) free at 40; 100 s of work.
        let plan = SlotPlan::new(
            procs(&[
                ("s1", "x", 1.0),
                ("s2", "x", 1.0),
                ("f1", "y", 2.0),
                ("f2", "y", 2.0),
            ]),
            [
                slot("s1", 0, 1000, 1.0),
                slot("s2", 0, 1000, 1.0),
                slot("f1", 40, 1000, 1.0),
                slot("f2", 40, 1000, 1.0),
            ],
        )
        .unwrap();
        let start = plan
            .select(&req(2, 100, Criterion::EarliestStart), &[])
            .unwrap();
        assert_eq!((start.start, start.end), (Time(0), Time(100)));
        let finish = plan
            .select(&req(2, 100, Criterion::EarliestFinish), &[])
            .unwrap();
        assert_eq!((finish.start, finish.end), (Time(40), Time(90)));
    }

    #[test]
    fn co_allocation_waits_for_staging_and_can_be_forbidden() {
        let plan = SlotPlan::new(
            procs(&[("a", "c1", 1.0), ("b", "c2", 1.0)]),
            [slot("a", 0, 1000, 1.0), slot("b", 0, 1000, 1.0)],
        )
        .unwrap();
        let staging = vec![Some(Dur(0)), Some(Dur(30))];
        let sel = plan
            .select(&req(2, 100, Criterion::EarliestStart), &staging)
            .unwrap();
        assert_eq!(sel.start, Time(30));
        let mut alone = req(2, 100, Criterion::EarliestStart);
        alone.co_allocate = false;
        let err = plan.select(&alone, &staging).unwrap_err();
        assert!(err.reason.contains("in one cluster"), "{}", err.reason);
    }
}
