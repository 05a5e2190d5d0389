//! The promise made to local users: a global job without a price of its own (it pays at most
//! the grid's dearest base tariff) never displaces a queued local job, whatever the
//! clusters' tariffs, premiums and policies. Checked on random grids through the broker, as
//! the service and the simulator drive it: every queued local job's forecast start after
//! the global job is reserved is no later than before.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

use foresight_core::broker::{processors_of, Broker, GridCluster, Phase, SpeedGroup};
use foresight_core::forecast::{forecast, OccupancyKind, Tariff};
use foresight_core::grid::{GlobalJob, PlannerConfig};
use foresight_core::select::Criterion;
use foresight_core::{ClusterId, Dur, Job, JobId, LocalScheduler, Policy, Time, UserId};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// One cluster: size, base tariff, local premium, policy, and its local jobs (procs,
/// walltime), submitted in order at time 0 (the first ones start, the rest queue).
#[derive(Clone, Debug)]
struct ClusterCase {
    procs: u32,
    base: f64,
    premium: f64,
    policy: u8,
    locals: Vec<(u32, i64)>,
}

fn cluster_case() -> impl Strategy<Value = ClusterCase> {
    (1u32..6, 0.1f64..5.0, 0.0f64..3.0, 0u8..3).prop_flat_map(|(procs, base, premium, policy)| {
        prop::collection::vec((1..=procs, 10i64..400), 0..8).prop_map(move |locals| ClusterCase {
            procs,
            base,
            premium,
            policy,
            locals,
        })
    })
}

/// Each queued local job's forecast start, per cluster.
fn local_starts(b: &Broker, now: Time) -> BTreeMap<(usize, JobId), Time> {
    let mut out = BTreeMap::new();
    for (k, c) in b.clusters.iter().enumerate() {
        for o in forecast(&c.sched, now, |_| 1.0) {
            if let OccupancyKind::Planned { job, .. } = o.kind {
                out.insert((k, job), o.window.start);
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn a_job_without_a_price_never_displaces_a_queued_local_job(
        cases in prop::collection::vec(cluster_case(), 1..4),
        procs in 1u32..8,
        walltime in 10i64..600,
        co_allocate in any::<bool>(),
    ) {
        let clusters: Vec<GridCluster> = cases
            .iter()
            .enumerate()
            .map(|(k, c)| {
                let name = format!("c{k}");
                let policy = match c.policy {
                    0 => Policy::easy(),
                    1 => "conservative".parse().unwrap(),
                    _ => "fcfs".parse().unwrap(),
                };
                GridCluster {
                    tariff: Tariff { base: c.base, local_premium: c.premium },
                    ..GridCluster::new(
                        &name,
                        processors_of(&name, &[SpeedGroup { procs: c.procs, speed: 1.0 }]),
                        LocalScheduler::new(c.procs, policy),
                    )
                }
            })
            .collect();
        // A long lead time: whatever the planner chooses is reserved at once.
        let planner = PlannerConfig { horizon: Dur(100_000), lead_time: Dur(100_000), plan_depth: 16 };
        let mut b = Broker::new(clusters, planner, 1);
        let now = Time(0);
        let mut next = 0u64;
        for (k, c) in cases.iter().enumerate() {
            for &(p, w) in &c.locals {
                next += 1;
                let mut out = Vec::new();
                b.submit_local(now, ClusterId(k), Job::new(JobId(next), now, p, Dur(w)), &mut out).unwrap();
            }
        }
        let before = local_starts(&b, now);
        // What the service gives a job without a price: the dearest base tariff.
        let price = b.clusters.iter().map(|c| c.tariff.base).fold(0.0, f64::max);
        let id = JobId(1 << 40);
        b.submit(now, GlobalJob {
            id,
            user: UserId(1),
            submit: now,
            procs,
            walltime: Dur(walltime),
            max_price: price,
            input_mb: 0.0,
            home: None,
            co_allocate,
            criterion: Criterion::EarliestFinish,
            priority: 0,
            requeue: false,
            begin: None,
            requires: Default::default(),
            licences: Default::default(),
            prediction: None,
        });
        let mut out = Vec::new();
        b.on_cycle(now, &mut out);
        let reserved = b.entry(id).map(|e| e.phase.clone());
        let after = local_starts(&b, now);
        for (key, start) in &before {
            if let Some(later) = after.get(key) {
                prop_assert!(
                    later <= start,
                    "local job {} of cluster c{} moved from {start} to {later} for a job \
                     without a price ({reserved:?})",
                    key.1, key.0
                );
            }
        }
        // Whatever it holds is priced at base tariffs only: procs × walltime × at most the
        // dearest base.
        if let Some(Phase::Reserved { cost, .. } | Phase::Running { cost, .. }) = reserved {
            let most = price * f64::from(procs) * walltime as f64;
            prop_assert!(cost <= most * (1.0 + 1e-9), "charged {cost} > {most}");
        }
    }
}
