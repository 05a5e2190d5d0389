//! A planning cycle bounds each job's search by the results of the jobs placed before it:
//! lower bounds on earliest starts, the failures that dominate later requests (a job that
//! found no window proves that every job asking at least as many processors, as long, at
//! no higher price, with the same usable clusters and times, finds none), and the marks'
//! bound on the latest start. These only save walks: on random grids (speeds, features,
//! tariffs, local load) and random queues (sizes, prices, homes, co-allocation or not,
//! criteria, start-after times, requirements, predictions), every placement with them
//! equals the placement without.

use foresight_core::forecast::Tariff;
use foresight_core::grid::{ClusterView, GlobalJob, GridPlan, PlannerConfig};
use foresight_core::select::{Criterion, Processor};
use foresight_core::{ClusterId, Dur, Event, Job, JobId, LocalScheduler, Policy, Time, UserId};
use proptest::prelude::*;
use std::collections::BTreeSet;

/// One cluster: processors (speed and feature per processor) and local jobs
/// `(procs, walltime)` submitted at 0.
#[derive(Clone, Debug)]
struct Site {
    procs: Vec<(u8, bool)>,
    local: Vec<(u32, i64)>,
    base: u8,
}

/// A global job: procs, walltime, price, home, co-allocate, criterion, begin, needs the
/// feature, predicted fraction (0: none).
type Spec = (u32, i64, u8, usize, bool, usize, i64, bool, u8);

fn site() -> impl Strategy<Value = Site> {
    (
        proptest::collection::vec((0u8..3, any::<bool>()), 2..9),
        proptest::collection::vec((1u32..6, 50i64..4000), 0..12),
        1u8..3,
    )
        .prop_map(|(procs, local, base)| Site { procs, local, base })
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        1u32..12,
        20i64..3000,
        1u8..7,
        0usize..4,
        any::<bool>(),
        0usize..3,
        0i64..2000,
        proptest::bool::weighted(0.2),
        0u8..3,
    )
}

fn global(k: usize, s: &Spec, sites: usize) -> GlobalJob {
    let &(procs, walltime, price, home, co, crit, begin, gpu, predicted) = s;
    GlobalJob {
        id: JobId(k as u64),
        user: UserId(0),
        submit: Time(0),
        procs,
        walltime: Dur(walltime),
        max_price: f64::from(price) / 2.0,
        input_mb: 50.0,
        home: (home < sites).then_some(ClusterId(home)),
        co_allocate: co,
        criterion: [
            Criterion::EarliestStart,
            Criterion::EarliestFinish,
            Criterion::MinCost,
        ][crit]
            .clone(),
        priority: 0,
        requeue: false,
        begin: (begin > 1000).then_some(Time(begin)),
        requires: if gpu {
            BTreeSet::from(["gpu".to_string()])
        } else {
            BTreeSet::new()
        },
        licences: Default::default(),
        prediction: (predicted > 0).then(|| Dur((walltime / (2 * i64::from(predicted))).max(1))),
    }
}

/// Every job's placement, in queue order, planned with past results kept or not.
fn placements(sites: &[Site], jobs: &[Spec], keep: bool) -> Vec<String> {
    let processors: Vec<Vec<Processor>> = sites
        .iter()
        .enumerate()
        .map(|(c, s)| {
            s.procs
                .iter()
                .enumerate()
                .map(|(i, &(speed, gpu))| Processor {
                    id: format!("c{c}/p{i}"),
                    cluster: format!("c{c}"),
                    speed: [1.0, 1.5, 2.0][speed as usize],
                    memory_mb: 0,
                    features: if gpu {
                        BTreeSet::from(["gpu".to_string()])
                    } else {
                        BTreeSet::new()
                    },
                })
                .collect()
        })
        .collect();
    let scheds: Vec<LocalScheduler> = sites
        .iter()
        .map(|s| {
            let mut sched = LocalScheduler::new(s.procs.len() as u32, Policy::easy());
            let mut out = Vec::new();
            for (j, &(p, w)) in s.local.iter().enumerate() {
                let job = Job::new(
                    JobId(j as u64),
                    Time(0),
                    p.min(s.procs.len() as u32),
                    Dur(w),
                );
                sched.handle(Time(0), Event::Submit(job), &mut out).unwrap();
            }
            sched
        })
        .collect();
    let tariffs: Vec<Tariff> = sites
        .iter()
        .map(|s| Tariff {
            base: f64::from(s.base),
            local_premium: 1.0,
        })
        .collect();
    let views: Vec<ClusterView<'_>> = (0..sites.len())
        .map(|c| ClusterView {
            processors: &processors[c],
            sched: &scheds[c],
            tariff: &tariffs[c],
            bandwidth_mb_s: 10.0 * (c + 1) as f64,
            latency: Dur(1),
        })
        .collect();
    let cfg = PlannerConfig {
        horizon: Dur(8000),
        lead_time: Dur(300),
        plan_depth: usize::MAX,
    };
    let mut plan = GridPlan::new(Time(0), &views, &cfg).unwrap();
    plan.bound_searches(keep);
    jobs.iter()
        .enumerate()
        .map(|(k, s)| format!("{:?}", plan.place(&global(k, s, sites.len()))))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn past_results_change_no_placement(
        sites in proptest::collection::vec(site(), 1..4),
        jobs in proptest::collection::vec(spec(), 1..120),
    ) {
        let with = placements(&sites, &jobs, true);
        let without = placements(&sites, &jobs, false);
        for (k, (a, b)) in with.iter().zip(&without).enumerate() {
            prop_assert_eq!(a, b, "job {} of {:?}", k, jobs);
        }
    }

    /// Long queues of identical requests but for size and length on a small, busy grid:
    /// most fail, and most failures are answered by a dominating one.
    #[test]
    fn dominated_failures_are_answered_as_walks_would(
        sites in proptest::collection::vec(site(), 1..3),
        jobs in proptest::collection::vec((1u32..10, 20i64..6000, 1u8..5), 20..150),
    ) {
        let jobs: Vec<Spec> = jobs
            .into_iter()
            .map(|(procs, walltime, price)| (procs, walltime, price, 0, true, 0, 0, false, 0))
            .collect();
        let with = placements(&sites, &jobs, true);
        let without = placements(&sites, &jobs, false);
        for (k, (a, b)) in with.iter().zip(&without).enumerate() {
            prop_assert_eq!(a, b, "job {} of {:?}", k, jobs);
        }
    }
}
