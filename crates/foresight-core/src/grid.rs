//! The lookahead planning cycle of the metascheduler (seed 000 §5.4): every queued global
//! job, in priority order, is planned onto one slot plan built from all clusters' forecasts;
//! jobs whose planned start is within the lead time are to be reserved now, the others keep
//! their place and are planned again next cycle.
//!
//! The cycle is pure: it reads the clusters' local schedulers and returns decisions; the
//! caller (simulator or service) makes the reservations, two-phase, and dispatches.

use crate::forecast::{forecast_holding, slots_from_forecast, Occupancy, OccupancyKind, Tariff};
use crate::ids::{ClusterId, JobId, ReservationId, UserId};
use crate::licence_plan::LicencePlan;
use crate::scheduler::{Domain, LocalScheduler};
use crate::select::{Criterion, Processor, Selection, Slot, SlotPlan, SlotRequest};
use crate::time::{Dur, Interval, Time};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// A job for the grid: it may run on any cluster, or on several at once.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GlobalJob {
    /// Unique id.
    pub id: JobId,
    /// Who pays.
    pub user: UserId,
    /// When it entered the global queue.
    pub submit: Time,
    /// Processors at once.
    pub procs: u32,
    /// Runtime estimate on reference processors.
    pub walltime: Dur,
    /// The most it pays per processor-second.
    pub max_price: f64,
    /// Input to stage before the start, MB.
    pub input_mb: f64,
    /// The cluster holding the input (index), if any.
    pub home: Option<ClusterId>,
    /// May it span clusters?
    pub co_allocate: bool,
    /// What "best" means for it.
    pub criterion: Criterion,
    /// Absolute priority level (seed 001): planned before jobs of lower levels, and takes at
    /// once the processors of running global jobs of lower levels when it cannot start
    /// otherwise ([`crate::broker::preempt`]). 0, the default, is the lowest.
    #[serde(default)]
    pub priority: u32,
    /// When preempted, it is killed and queued again (it checkpoints, or may lose its
    /// progress) instead of being suspended.
    #[serde(default)]
    pub requeue: bool,
    /// Not to start before this instant (`sbatch --begin`): the planner places it no earlier
    /// and the broker never moves it before. `None` may start at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub begin: Option<Time>,
    /// Features every processor it runs on must offer (software, architecture): the planner
    /// offers it only the clusters that have them all.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub requires: BTreeSet<String>,
    /// Licences held for the whole run, by pool (`ansys` → 2): the planner places it only
    /// on clusters drawing on every pool asked, in a window where the pools have them free,
    /// and its reservation holds them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub licences: BTreeMap<String, u32>,
    /// Its predicted runtime on reference processors ([`crate::predict`]), when shorter than
    /// the walltime: planned beyond the lead time, its window is this long, so that it and
    /// the jobs behind it plan earlier; its reservation, its guarantee and its kill time, stays
    /// the walltime. `None` plans with the walltime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prediction: Option<Dur>,
}

impl GlobalJob {
    /// How long it is planned to run beyond the lead time, on reference processors: its
    /// prediction when that is shorter than the walltime (at least a second).
    pub fn predicted(&self) -> Option<Dur> {
        self.prediction
            .filter(|p| *p < self.walltime)
            .map(|p| Dur(p.as_secs().max(1)))
    }

    /// The earliest instant the job may start at, planned at `now`: its begin, if later.
    pub fn eligible(&self, now: Time) -> Time {
        self.begin.map_or(now, |b| b.max(now))
    }

    /// The most the job can be charged: every processor at its price for the whole estimate.
    pub fn worst_case_charge(&self) -> f64 {
        self.max_price * f64::from(self.procs) * self.walltime.as_secs() as f64
    }
}

/// What the planner reads of one cluster.
#[derive(Clone, Copy, Debug)]
pub struct ClusterView<'a> {
    /// Its processors (ids unique across the grid; `cluster` names this cluster).
    pub processors: &'a [Processor],
    /// Its local scheduler, for the forecast.
    pub sched: &'a LocalScheduler,
    /// Its prices.
    pub tariff: &'a Tariff,
    /// Link to the grid, MB/s, for staging.
    pub bandwidth_mb_s: f64,
    /// Link latency.
    pub latency: Dur,
}

/// Windows searched for a job asking for licences before the planner gives up for this
/// cycle: each starts where the previous one's licences become free.
const MAX_LICENCE_ROUNDS: usize = 64;

/// Knobs of the cycle.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannerConfig {
    /// How far ahead the plan reaches.
    pub horizon: Dur,
    /// Jobs planned to start within this are reserved now.
    pub lead_time: Dur,
    /// At most this many queued jobs are planned per cycle, in priority order (the grid's
    /// reservation depth); the rest wait for a later cycle. Each planned job costs one pass
    /// over the plan's slots, so this bounds the cycle's time.
    pub plan_depth: usize,
}

/// One part of a reserved job: processors on one cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    /// The cluster.
    pub cluster: ClusterId,
    /// Processors there.
    pub procs: u32,
}

/// What the cycle decided for a job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Decision {
    /// Reserve now, on every part's cluster, `[start, end)`; charge `cost`.
    Reserve {
        /// The job.
        job: JobId,
        /// Synchronous start.
        start: Time,
        /// End by the estimate on the slowest chosen processor.
        end: Time,
        /// The charge.
        cost: f64,
        /// Processors per cluster.
        parts: Vec<Part>,
        /// The processors chosen, as indices into the grid's processors (the clusters'
        /// processors in the order of the views), ascending.
        processors: Vec<u32>,
        /// Speed of the slowest chosen processor: the job runs its walltime divided by it.
        speed: f64,
    },
    /// Planned to start at `start`, beyond the lead time: planned again next cycle.
    Wait {
        /// The job.
        job: JobId,
        /// The planned start.
        start: Time,
        /// The planned end.
        end: Time,
        /// The processors it is planned on, as in [`Decision::Reserve`].
        processors: Vec<u32>,
    },
    /// Nothing within the horizon now; planned again next cycle.
    NoFit {
        /// The job.
        job: JobId,
        /// Why.
        reason: String,
    },
    /// Can never run: larger than the whole grid.
    Refuse {
        /// The job.
        job: JobId,
        /// Why.
        reason: String,
    },
}

impl Decision {
    /// The job it is about.
    pub fn job(&self) -> JobId {
        match self {
            Decision::Reserve { job, .. }
            | Decision::Wait { job, .. }
            | Decision::NoFit { job, .. }
            | Decision::Refuse { job, .. } => *job,
        }
    }
}

/// Seconds to stage `mb` over a link (rounded up), plus its latency.
pub fn staging_time(mb: f64, bandwidth_mb_s: f64, latency: Dur) -> Dur {
    if mb <= 0.0 {
        return Dur::ZERO;
    }
    Dur((mb / bandwidth_mb_s.max(1e-9)).ceil() as i64) + latency
}

/// Plans `jobs` (in the order given: the caller's priority order) at `now`.
pub fn plan_cycle(
    now: Time,
    clusters: &[ClusterView<'_>],
    jobs: &[GlobalJob],
    cfg: &PlannerConfig,
) -> Vec<Decision> {
    let mut plan = match GridPlan::new(now, clusters, cfg) {
        Ok(p) => p,
        Err(reason) => {
            return jobs
                .iter()
                .map(|j| Decision::NoFit {
                    job: j.id,
                    reason: reason.clone(),
                })
                .collect();
        }
    };
    // The loop runs on a worker of the thread pool, so that the walks a selection runs
    // side by side are shared with the other workers without waking this thread.
    rayon::scope(|_| {
        jobs.iter()
            .enumerate()
            .map(|(k, job)| {
                if k >= cfg.plan_depth {
                    Decision::NoFit {
                        job: job.id,
                        reason: format!(
                            "beyond the planning depth of {} jobs this cycle",
                            cfg.plan_depth
                        ),
                    }
                } else {
                    plan.place(job).decision
                }
            })
            .collect()
    })
}

/// The dearest base tariff of the grid: what a job without a price of its own pays at most
/// per processor-second ([`default_price`]).
pub fn default_price(clusters: &[ClusterView<'_>]) -> f64 {
    clusters.iter().map(|c| c.tariff.base).fold(0.0, f64::max)
}

/// The lowest price of time planned for a queued local job, anywhere on the grid: strictly
/// above every cluster's base tariff. So a job that pays at most the dearest base tariff
/// (every job without a price of its own) takes free time anywhere and never displaces a
/// queued local job, whatever the tariffs and premiums; displacing one takes an explicit
/// price above this.
pub fn displacement_floor(clusters: &[ClusterView<'_>]) -> f64 {
    let dearest = default_price(clusters);
    // The next float up (`f64::next_up` is newer than the workspace's Rust): x·(1 + ε) is
    // at least one unit in the last place above a positive x.
    if dearest > 0.0 {
        dearest * (1.0 + f64::EPSILON)
    } else {
        f64::MIN_POSITIVE
    }
}

/// A forecast in which the reservation of a global job's part running on a prediction
/// shorter than its estimate holds its processors only to the prediction's end, or to
/// `from` (just past the lead time) if later: the rest of its window is offered to jobs
/// planned beyond the lead time, which hold nothing, never to a reservation made now (the
/// running job keeps its guarantee to its walltime). A correction lengthens the prediction
/// and takes the offer back at the next planning.
fn open_predicted_tails(
    sched: &LocalScheduler,
    forecast: &[Occupancy],
    from: Time,
) -> Vec<Occupancy> {
    let ends: BTreeMap<ReservationId, Time> = sched
        .predicted_runs()
        .filter_map(|(_, p)| match p.domain {
            Domain::Reservation(r) => Some((r, p.end)),
            Domain::Pool => None,
        })
        .collect();
    if ends.is_empty() {
        return forecast.to_vec();
    }
    // Only a reservation for exactly one job: an administrative one may start more later.
    let single: BTreeSet<ReservationId> = sched
        .reservations()
        .filter(|r| r.acl.job.is_some())
        .map(|r| r.id)
        .collect();
    forecast
        .iter()
        .map(|o| match o.kind {
            OccupancyKind::Held(r) if single.contains(&r) => match ends.get(&r) {
                Some(&end) => Occupancy {
                    window: Interval::new(
                        o.window.start,
                        end.max(from).min(o.window.end).max(o.window.start),
                    ),
                    ..*o
                },
                None => *o,
            },
            _ => *o,
        })
        .filter(|o| o.window.end > o.window.start)
        .collect()
}

/// The grid's plan at one instant: every cluster's forecast as one slot plan, onto which
/// global jobs are placed one after another. A cycle places the queue ([`plan_cycle`]);
/// an estimate places the queue and then asks where one more job would go, on the grid or
/// on one cluster, so that all its answers come from the same plan.
pub struct GridPlan {
    now: Time,
    cfg: PlannerConfig,
    plan: SlotPlan,
    /// The view index of each of the plan's clusters (the plan numbers them in order of
    /// first appearance).
    order: Vec<ClusterId>,
    /// The view index of each of the plan's processors.
    cluster_of: Vec<ClusterId>,
    /// Each view's link to the grid: bandwidth (MB/s) and latency.
    links: Vec<(f64, Dur)>,
    total: usize,
    largest: usize,
    /// The licence pools, held in time like the processors.
    licences: LicencePlan,
}

/// Where [`GridPlan::place`] put a job.
#[derive(Clone, Debug, PartialEq)]
pub struct Placed {
    /// What the cycle does with it.
    pub decision: Decision,
    /// The window and the processors it holds in the plan (grid indices, ascending), when
    /// it fits: also for a job planned beyond the lead time, which the decision does not
    /// describe in full.
    pub window: Option<(Time, Time, Vec<u32>)>,
}

impl GridPlan {
    /// The plan of `clusters` at `now`; an error only for an inconsistent caller (two
    /// processors with one name, a speed that is not positive, a tariff that is not a price).
    pub fn new(
        now: Time,
        clusters: &[ClusterView<'_>],
        cfg: &PlannerConfig,
    ) -> Result<GridPlan, String> {
        let horizon = now + cfg.horizon;
        let floor = displacement_floor(clusters);
        // The clusters' forecasts are independent: they are made side by side.
        let per_cluster: Vec<_> = clusters
            .par_iter()
            .map(|c| {
                // Running jobs planned by a prediction hold their processors beyond the
                // lead time, as parts running in a reservation do (below).
                let from = now + cfg.lead_time + Dur(1);
                let f = forecast_holding(c.sched, now, |_| 1.0, from);
                let open = open_predicted_tails(c.sched, &f, from);
                let slots = slots_from_forecast(c.processors, &open, now, horizon, c.tariff, floor);
                (slots, f)
            })
            .collect();
        let (per_cluster, forecasts): (Vec<_>, Vec<_>) = per_cluster.into_iter().unzip();
        let licences = LicencePlan::new(
            &clusters.iter().map(|c| c.sched).collect::<Vec<_>>(),
            &forecasts.iter().map(Vec::as_slice).collect::<Vec<_>>(),
        );
        // Each cluster's slots number its processors from 0: offset them to the grid's.
        let mut slots = Vec::with_capacity(per_cluster.iter().map(Vec::len).sum());
        let mut first = 0u32;
        for (c, cluster_slots) in clusters.iter().zip(per_cluster) {
            slots.extend(cluster_slots.into_iter().map(|s| Slot {
                processor: first + s.processor,
                ..s
            }));
            first += c.processors.len() as u32;
        }
        let processors: Vec<Processor> = clusters
            .iter()
            .flat_map(|c| c.processors.iter().cloned())
            .collect();
        let cluster_of: Vec<ClusterId> = ClusterId::enumerate(clusters)
            .flat_map(|(k, c)| std::iter::repeat_n(k, c.processors.len()))
            .collect();
        let total = processors.len();
        let largest = clusters
            .iter()
            .map(|c| c.processors.len())
            .max()
            .unwrap_or(0);
        let plan = SlotPlan::from_indexed(processors, slots)
            .map_err(|e| format!("the grid's plan is inconsistent: {e}"))?;
        let order: Vec<ClusterId> = plan
            .clusters()
            .iter()
            .map(|name| {
                ClusterId(
                    clusters
                        .iter()
                        .position(|c| c.processors.first().is_some_and(|p| &p.cluster == name))
                        .expect("invariant: plan clusters come from the views"),
                )
            })
            .collect();
        Ok(GridPlan {
            now,
            cfg: cfg.clone(),
            plan,
            order,
            cluster_of,
            links: clusters
                .iter()
                .map(|c| (c.bandwidth_mb_s, c.latency))
                .collect(),
            total,
            largest,
            licences,
        })
    }

    /// Why `job` can never run on this grid, if it cannot.
    fn refusal(&self, job: &GlobalJob) -> Option<String> {
        if job.procs as usize > self.total {
            Some(format!(
                "{} processors asked, the grid has {}",
                job.procs, self.total
            ))
        } else if !job.co_allocate && job.procs as usize > self.largest {
            Some(format!(
                "{} processors asked without co-allocation, the largest cluster has {}",
                job.procs, self.largest
            ))
        } else if !job.licences.is_empty() {
            self.licences_refusal(job)
        } else if !job.requires.is_empty() {
            self.features_refusal(job)
        } else {
            None
        }
    }

    /// Why `job`'s licences can never be had, or too few processors draw on its pools.
    fn licences_refusal(&self, job: &GlobalJob) -> Option<String> {
        if let Some(why) = self.licences.refusal(&job.licences) {
            return Some(why);
        }
        let mut per_cluster = vec![0usize; self.links.len()];
        for &c in &self.cluster_of {
            if self.licences.serves(&job.licences, c) {
                per_cluster[c] += 1;
            }
        }
        let serving: usize = per_cluster.iter().sum();
        let largest = per_cluster.iter().copied().max().unwrap_or(0);
        let need = job.procs as usize;
        if serving < need || (!job.co_allocate && largest < need) {
            return Some(format!(
                "{need} processors asked, the clusters drawing on the licence pools {:?} have {}",
                job.licences.keys().collect::<Vec<_>>(),
                if job.co_allocate { serving } else { largest }
            ));
        }
        if job.requires.is_empty() {
            None
        } else {
            self.features_refusal(job)
        }
    }

    /// Why too few processors offer every feature `job` requires, if so.
    fn features_refusal(&self, job: &GlobalJob) -> Option<String> {
        let mut per_cluster = vec![0usize; self.links.len()];
        for (p, proc) in self.plan.processors().iter().enumerate() {
            if job.requires.is_subset(&proc.features) {
                per_cluster[self.cluster_of[p]] += 1;
            }
        }
        let capable: usize = per_cluster.iter().sum();
        let largest = per_cluster.iter().copied().max().unwrap_or(0);
        let need = job.procs as usize;
        if capable == 0 {
            let missing = job.requires.iter().find(|f| {
                !self
                    .plan
                    .processors()
                    .iter()
                    .any(|p| p.features.contains(*f))
            });
            return Some(match missing {
                Some(f) => format!("no cluster offers feature {f:?}"),
                None => format!("no cluster offers all of the features {:?}", job.requires),
            });
        }
        if capable < need {
            Some(format!(
                "{need} processors with features {:?} asked, the grid has {capable}",
                job.requires
            ))
        } else if !job.co_allocate && largest < need {
            Some(format!(
                "{need} processors with features {:?} asked without co-allocation, the largest such cluster has {largest}",
                job.requires
            ))
        } else {
            None
        }
    }

    /// The best window for `job`, on the clusters `only` allows (all when `None`); for a
    /// job asking for licences, only on clusters drawing on its pools and in a window where
    /// they are free: the window is searched again from where they are, until both agree.
    fn select(
        &self,
        job: &GlobalJob,
        only: Option<ClusterId>,
        len: Dur,
    ) -> Result<Selection, String> {
        if job.licences.is_empty() {
            return self.select_from(job, only, job.eligible(self.now), len);
        }
        let mut from = job.eligible(self.now);
        for _ in 0..MAX_LICENCE_ROUNDS {
            let sel = self.select_from(job, only, from, len)?;
            match self
                .licences
                .earliest(&job.licences, sel.start, sel.end - sel.start)
            {
                Some(t) if t == sel.start => return Ok(sel),
                Some(t) => from = t,
                None => break,
            }
        }
        Err(format!(
            "the licences {:?} are not free together with the processors within the plan",
            job.licences
        ))
    }

    /// [`GridPlan::select`] of a window starting no earlier than `from`, `len` long on
    /// reference processors.
    fn select_from(
        &self,
        job: &GlobalJob,
        only: Option<ClusterId>,
        from: Time,
        len: Dur,
    ) -> Result<Selection, String> {
        let staging: Vec<Option<Dur>> = self
            .order
            .iter()
            .map(|&c| {
                if only.is_some_and(|o| o != c)
                    || !(job.licences.is_empty() || self.licences.serves(&job.licences, c))
                {
                    return None;
                }
                let (bandwidth, latency) = self.links[c];
                Some(match job.home {
                    Some(h) if h == c => Dur::ZERO,
                    Some(_) => staging_time(job.input_mb, bandwidth, latency),
                    None => Dur::ZERO,
                })
            })
            .collect();
        let req = SlotRequest {
            procs: job.procs,
            walltime: len,
            max_price: job.max_price,
            min_memory_mb: 0,
            features: job.requires.clone(),
            criterion: job.criterion.clone(),
            not_before: from,
            deadline: None,
            co_allocate: job.co_allocate && only.is_none(),
        };
        self.plan.select(&req, &staging).map_err(|no| no.reason)
    }

    /// The window the cycle gives `job`: by its prediction when that window starts beyond the
    /// lead time (nothing is held for it yet, so a short guess costs nobody), else by its
    /// walltime, the length of the reservation it is about to get.
    fn select_planned(&self, job: &GlobalJob) -> Result<Selection, String> {
        if let Some(p) = job.predicted() {
            if let Ok(sel) = self.select(job, None, p) {
                if sel.start - self.now > self.cfg.lead_time {
                    return Ok(sel);
                }
            }
        }
        self.select(job, None, job.walltime)
    }

    /// Places `job` where the cycle would: its window is taken from the plan for the jobs
    /// placed after it.
    pub fn place(&mut self, job: &GlobalJob) -> Placed {
        if let Some(reason) = self.refusal(job) {
            return Placed {
                decision: Decision::Refuse {
                    job: job.id,
                    reason,
                },
                window: None,
            };
        }
        let sel = match self.select_planned(job) {
            Err(reason) => {
                return Placed {
                    decision: Decision::NoFit {
                        job: job.id,
                        reason,
                    },
                    window: None,
                }
            }
            Ok(sel) => sel,
        };
        self.plan.commit(&sel);
        if !job.licences.is_empty() {
            self.licences.take(&job.licences, sel.start, sel.end);
        }
        let mut chosen = sel.processors.clone();
        chosen.sort_unstable();
        let window = Some((sel.start, sel.end, chosen.clone()));
        if sel.start - self.now > self.cfg.lead_time {
            return Placed {
                decision: Decision::Wait {
                    job: job.id,
                    start: sel.start,
                    end: sel.end,
                    processors: chosen,
                },
                window,
            };
        }
        let mut parts: Vec<Part> = Vec::new();
        let mut speed = f64::INFINITY;
        for &p in &sel.processors {
            speed = speed.min(self.plan.processors()[p as usize].speed);
            let c = self.cluster_of[p as usize];
            match parts.iter_mut().find(|x| x.cluster == c) {
                Some(x) => x.procs += 1,
                None => parts.push(Part {
                    cluster: c,
                    procs: 1,
                }),
            }
        }
        parts.sort_by_key(|x| x.cluster);
        Placed {
            decision: Decision::Reserve {
                job: job.id,
                start: sel.start,
                end: sel.end,
                cost: sel.cost,
                parts,
                processors: chosen,
                speed,
            },
            window,
        }
    }

    /// Where `job` would go now, without taking it from the plan: over the whole grid
    /// (`only` = `None`) or on cluster `only` alone. `Err` says why it fits nowhere.
    pub fn probe(&self, job: &GlobalJob, only: Option<ClusterId>) -> Result<Selection, String> {
        match only {
            None => {
                if let Some(reason) = self.refusal(job) {
                    return Err(reason);
                }
            }
            Some(c) => {
                let here = self.cluster_of.iter().filter(|&&k| k == c).count();
                if job.procs as usize > here {
                    return Err(format!("has only {here} processors"));
                }
            }
        }
        self.select(job, only, job.walltime)
    }

    /// Whether the plan's selections bound their walks by past results and marks (the
    /// default; see [`SlotPlan::bound_searches`]): the same decisions either way.
    pub fn bound_searches(&mut self, on: bool) {
        self.plan.bound_searches(on);
    }

    /// The view index of the plan's processor `p`.
    pub fn cluster_of(&self, p: u32) -> ClusterId {
        self.cluster_of[p as usize]
    }

    /// The index, within its own cluster, of the plan's processor `p`.
    pub fn local_index(&self, p: u32) -> u32 {
        let c = self.cluster_of[p as usize];
        p - self.cluster_of.partition_point(|&k| k < c) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::Job;
    use crate::policy::Policy;
    use crate::scheduler::Event;

    fn procs(cluster: &str, n: usize) -> Vec<Processor> {
        (0..n)
            .map(|i| Processor {
                id: format!("{cluster}/p{i}"),
                cluster: cluster.into(),
                speed: 1.0,
                memory_mb: 0,
                features: BTreeSet::new(),
            })
            .collect()
    }

    fn global(id: u64, procs: u32, walltime: i64, price: f64) -> GlobalJob {
        GlobalJob {
            id: JobId(id),
            user: UserId(1),
            submit: Time(0),
            procs,
            walltime: Dur(walltime),
            max_price: price,
            input_mb: 100.0,
            home: Some(ClusterId(0)),
            co_allocate: true,
            criterion: Criterion::EarliestStart,
            priority: 0,
            requeue: false,
            begin: None,
            requires: Default::default(),
            licences: Default::default(),
            prediction: None,
        }
    }

    /// Two clusters of 4. c0 is busy with a 2-processor local job until 100. A 6-processor
    /// global job co-allocates: 2 free on c0 + 4 on c1, once its input reaches c1 (100 MB at
    /// 10 MB/s = 10 s). A second 4-processor job fits only after the first, at 60, and the
    /// lead time (30 s) leaves it waiting; a 9-processor job can never run.
    #[test]
    fn a_cycle_co_allocates_reserves_near_starts_and_refuses_the_impossible() {
        let mut c0 = LocalScheduler::new(4, Policy::easy());
        let c1 = LocalScheduler::new(4, Policy::easy());
        let mut out = Vec::new();
        c0.handle(
            Time(0),
            Event::Submit(Job::new(JobId(100), Time(0), 2, Dur(100))),
            &mut out,
        )
        .unwrap();
        let (p0, p1) = (procs("c0", 4), procs("c1", 4));
        let tariff = Tariff::default();
        let views = [
            ClusterView {
                processors: &p0,
                sched: &c0,
                tariff: &tariff,
                bandwidth_mb_s: 10.0,
                latency: Dur(0),
            },
            ClusterView {
                processors: &p1,
                sched: &c1,
                tariff: &tariff,
                bandwidth_mb_s: 10.0,
                latency: Dur(0),
            },
        ];
        features_choose_the_cluster(&views);
        let cfg = PlannerConfig {
            horizon: Dur(10_000),
            lead_time: Dur(30),
            plan_depth: 100,
        };
        let jobs = [
            global(1, 6, 50, 2.0),
            global(2, 4, 50, 2.0),
            global(3, 9, 50, 2.0),
        ];
        let d = plan_cycle(Time(0), &views, &jobs, &cfg);
        assert_eq!(
            d[0],
            Decision::Reserve {
                job: JobId(1),
                start: Time(10),
                end: Time(60),
                cost: 300.0,
                processors: vec![2, 3, 4, 5, 6, 7],
                speed: 1.0,
                parts: vec![
                    Part {
                        cluster: ClusterId(0),
                        procs: 2
                    },
                    Part {
                        cluster: ClusterId(1),
                        procs: 4
                    }
                ],
            }
        );
        assert_eq!(
            d[1],
            Decision::Wait {
                job: JobId(2),
                start: Time(60),
                end: Time(110),
                processors: vec![2, 3, 4, 5],
            }
        );
        assert!(matches!(&d[2], Decision::Refuse { reason, .. } if reason.contains("grid has 8")));
        let alone = GlobalJob {
            co_allocate: false,
            ..global(4, 5, 50, 2.0)
        };
        let d = plan_cycle(Time(0), &views, &[alone], &cfg);
        assert!(
            matches!(&d[0], Decision::Refuse { reason, .. } if reason.contains("largest cluster has 4")),
            "{d:?}"
        );
    }

    /// Only c1 offers `ansys`: a job requiring it goes there although c0 is the home of its
    /// input and would start it as early; one requiring a feature no cluster has is refused,
    /// naming it.
    fn features_choose_the_cluster(views: &[ClusterView<'_>]) {
        let mut p1 = views[1].processors.to_vec();
        for p in &mut p1 {
            p.features.insert("ansys".into());
        }
        let views = [
            views[0],
            ClusterView {
                processors: &p1,
                ..views[1]
            },
        ];
        let cfg = PlannerConfig {
            horizon: Dur(10_000),
            lead_time: Dur(1_000),
            plan_depth: 100,
        };
        let ansys = GlobalJob {
            requires: BTreeSet::from(["ansys".to_string()]),
            home: None,
            ..global(5, 2, 50, 2.0)
        };
        let d = plan_cycle(Time(0), &views, std::slice::from_ref(&ansys), &cfg);
        assert!(
            matches!(&d[0], Decision::Reserve { parts, .. } if parts == &vec![Part { cluster: ClusterId(1), procs: 2 }]),
            "{d:?}"
        );
        let too_many = GlobalJob {
            procs: 5,
            ..ansys.clone()
        };
        let d = plan_cycle(Time(0), &views, &[too_many], &cfg);
        assert!(
            matches!(&d[0], Decision::Refuse { reason, .. } if reason.contains("the grid has 4")),
            "{d:?}"
        );
        let abaqus = GlobalJob {
            requires: BTreeSet::from(["abaqus".to_string()]),
            ..ansys
        };
        let d = plan_cycle(Time(0), &views, &[abaqus], &cfg);
        assert!(
            matches!(&d[0], Decision::Refuse { reason, .. } if reason == "no cluster offers feature \"abaqus\""),
            "{d:?}"
        );
    }
}
