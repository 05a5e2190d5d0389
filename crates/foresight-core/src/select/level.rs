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
                reason: self.why_unsuitable(req, capable),
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
        let bounded = self.bounds.kept();
        let lower = if bounded {
            self.lower_by_marks(lower, dur, req.procs, speed)
        } else {
            lower
        };
        if lower > limit || lower == Time::MAX {
            return None;
        }
        // No window starts after the last mark where enough processors reach far enough:
        // a walk that finds none by then has found that there is none.
        let upper = if bounded {
            self.upper_by_marks(dur, req.procs, speed)
        } else {
            Time::MAX
        };
        let proc_ok = self.usable_processors(level.suitable_proc, level.avail, only, speed);
        let mut state = self.walk_states.0.lock().pop().unwrap_or_default();
        let within = (lower, limit.min(upper));
        let found = self.earliest(req, dur, &proc_ok, level.avail, within, &mut state);
        self.walk_states.0.lock().push(state);
        let start = match &found {
            Some(sel) => sel.start,
            None if limit == Time::MAX || upper <= limit => Time::MAX,
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

    /// Which requirement leaves fewer than `req.procs` processors: memory, a feature (named),
    /// or the two together.
    fn why_unsuitable(&self, req: &SlotRequest, capable: usize) -> String {
        let need = req.procs;
        let with_memory = self
            .processors
            .iter()
            .filter(|p| p.memory_mb >= req.min_memory_mb)
            .count();
        if with_memory < need as usize {
            return format!(
                "only {with_memory} processors have {} MB of memory, {need} needed",
                req.min_memory_mb
            );
        }
        for f in &req.features {
            let with = self
                .processors
                .iter()
                .filter(|p| p.features.contains(f))
                .count();
            if with < need as usize {
                return format!("only {with} processors have feature {f:?}, {need} needed");
            }
        }
        format!(
            "only {capable} processors have both {} MB of memory and features {:?}, {need} needed",
            req.min_memory_mb, req.features
        )
    }

    /// Why no window was found, naming the first limit that binds: the price, staging,
    /// the length of the free time, one cluster, or only the processors' being free at
    /// once.
    fn why_not(
        &self,
        req: &SlotRequest,
        suitable_proc: Option<&[bool]>,
        avail: &[Option<Time>],
    ) -> String {
        let need = req.procs as usize;
        // How many suitable processors have any time within the price, and how many a free
        // run of the job's length there (at their speed, after their cluster's staging).
        let counts = self.reach_counts(req.max_price, req.walltime.as_secs(), suitable_proc, avail);
        let priced_count = counts.priced;
        if priced_count == 0 {
            return format!(
                "no slot of a suitable processor costs at most {} per processor-second",
                req.max_price
            );
        }
        if priced_count < need {
            return format!(
                "only {priced_count} suitable processors have time at most {} per \
                 processor-second, {need} needed",
                req.max_price
            );
        }
        if avail.iter().all(Option::is_none) {
            return "no cluster is reachable for staging".into();
        }
        let long_count: usize = counts.long.iter().sum();
        if long_count < need {
            return format!(
                "only {long_count} suitable processors within the price have {} s free in one \
                 run (the walltime at their speed, after staging), {need} needed",
                req.walltime.as_secs()
            );
        }
        if !req.co_allocate {
            let (best, most) = counts
                .long
                .iter()
                .enumerate()
                .max_by_key(|(c, n)| (**n, std::cmp::Reverse(*c)))
                .expect("invariant: a plan with slots has a cluster");
            if *most < need {
                return format!(
                    "no one cluster has {need} suitable processors with {} s free within the \
                     price (most: {most} on {}), and the job may not span clusters",
                    req.walltime.as_secs(),
                    self.clusters[best]
                );
            }
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

    /// The reason of a no-fit answer.
    fn why(plan: &SlotPlan, r: &SlotRequest, staging: &[Option<Dur>]) -> String {
        plan.select(r, staging).unwrap_err().reason
    }

    #[test]
    fn a_no_fit_reason_follows_the_commits_between_requests() {
        // Two processors of one cluster, free for 1 000 s each: a job of 3 never fits, and
        // the reason first names the whole window; once a commit cuts p1's time to 400 s
        // the same request's reason must say so (a reach kept from before the commit would
        // still count p1 as long enough).
        let ps = procs(&[("p0", "c", 1.0), ("p1", "c", 1.0)]);
        let mut plan =
            SlotPlan::new(ps, [slot("p0", 0, 1000, 1.0), slot("p1", 0, 1000, 1.0)]).unwrap();
        let mut big = req(2, 800, Criterion::EarliestStart);
        big.max_price = 1.0;
        let mut small = req(1, 600, Criterion::EarliestStart);
        small.max_price = 1.0;
        assert!(plan.select(&big, &[]).is_ok());
        let mut wide = big.clone();
        wide.walltime = Dur(2000);
        assert!(why(&plan, &wide, &[]).starts_with("only 0 suitable processors"));
        // Take 600 s of one processor: the other keeps 1 000 s, this one 400 s.
        let sel = plan.select(&small, &[]).unwrap();
        plan.commit(&sel);
        assert_eq!(
            why(&plan, &big, &[]),
            "only 1 suitable processors within the price have 800 s free in one run (the \
             walltime at their speed, after staging), 2 needed"
        );
    }

    #[test]
    fn a_no_fit_names_the_limit_that_binds() {
        // c1: p0 dear (3.0) and long, p1 cheap (1.0) and long; c2: q0 cheap but short.
        let mut ps = procs(&[("p0", "c1", 1.0), ("p1", "c1", 1.0), ("q0", "c2", 2.0)]);
        ps[0].memory_mb = 8192;
        ps[1].memory_mb = 4096;
        ps[2].memory_mb = 8192;
        ps[0].features.insert("gpu".into());
        let plan = SlotPlan::new(
            ps,
            [
                slot("p0", 0, 3600, 3.0),
                slot("p1", 0, 3600, 1.0),
                slot("q0", 0, 200, 1.0),
            ],
        )
        .unwrap();
        let mut r = req(2, 600, Criterion::EarliestStart);

        r.max_price = 0.5;
        assert_eq!(
            why(&plan, &r, &[]),
            "no slot of a suitable processor costs at most 0.5 per processor-second"
        );
        r.max_price = 2.0;
        assert_eq!(
            why(&plan, &r, &[]),
            "only 1 suitable processors within the price have 600 s free in one run (the \
             walltime at their speed, after staging), 2 needed"
        );
        // A window runs at the pace of its slowest processor: 200 s of work fit q0's 200 s
        // beside p1; 400 s would fit q0 alone (at speed 2) but not beside p1.
        r.walltime = Dur(200);
        assert!(plan.select(&r, &[]).is_ok());
        r.walltime = Dur(400);
        assert_eq!(
            why(&plan, &r, &[]),
            "no window of 400 s has 2 suitable processors free together"
        );
        // Staging eats q0's time.
        r.walltime = Dur(300);
        assert!(why(&plan, &r, &[Some(Dur(0)), Some(Dur(100))]).starts_with("only 1 suitable"));
        assert_eq!(
            why(&plan, &r, &[None, None]),
            "no cluster is reachable for staging"
        );
        r.co_allocate = false;
        assert_eq!(
            why(&plan, &r, &[]),
            "no one cluster has 2 suitable processors with 300 s free within the price (most: \
             1 on c1), and the job may not span clusters"
        );
        r.co_allocate = true;
        r.procs = 3;
        r.max_price = 2.0;
        assert_eq!(
            why(&plan, &r, &[]),
            "only 2 suitable processors have time at most 2 per processor-second, 3 needed"
        );

        let mut r = req(2, 60, Criterion::EarliestStart);
        r.min_memory_mb = 8000;
        r.procs = 3;
        assert_eq!(
            why(&plan, &r, &[]),
            "only 2 processors have 8000 MB of memory, 3 needed"
        );
        r.procs = 2;
        r.features.insert("gpu".into());
        assert_eq!(
            why(&plan, &r, &[]),
            "only 1 processors have feature \"gpu\", 2 needed"
        );
        // Each requirement alone leaves two, together one.
        let mut r = req(2, 60, Criterion::EarliestStart);
        r.min_memory_mb = 8000;
        let mut ps = procs(&[("a", "c", 1.0), ("b", "c", 1.0), ("d", "c", 1.0)]);
        ps[0].memory_mb = 8192;
        ps[1].memory_mb = 8192;
        ps[1].features.insert("ib".into());
        ps[2].features.insert("ib".into());
        let plan2 = SlotPlan::new(ps, [slot("a", 0, 100, 1.0)]).unwrap();
        r.features.insert("ib".into());
        assert_eq!(
            why(&plan2, &r, &[]),
            "only 1 processors have both 8000 MB of memory and features {\"ib\"}, 2 needed"
        );
        // Everything suffices one by one, but never at once.
        let plan3 = SlotPlan::new(
            procs(&[("x", "c", 1.0), ("y", "c", 1.0)]),
            [slot("x", 0, 100, 1.0), slot("y", 100, 200, 1.0)],
        )
        .unwrap();
        assert_eq!(
            why(&plan3, &req(2, 100, Criterion::EarliestStart), &[]),
            "no window of 100 s has 2 suitable processors free together"
        );
    }

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
        assert!(
            err.reason.contains("the job may not span clusters"),
            "{}",
            err.reason
        );
    }
}
