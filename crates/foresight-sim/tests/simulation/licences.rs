//! `sim run` workloads with licence demands: on a synthetic workload where a third of the
//! jobs ask for licences of a small pool, every policy keeps the licences held at any
//! instant within the pool, every job runs, and licences make jobs wait (the same workload
//! without the pool waits less).
#![allow(clippy::unwrap_used)] // tests fail loudly by design

use foresight_core::Policy;
use foresight_sim::prediction::Prediction;
use foresight_sim::{simulate_licensed, simulate_with, LicenceDemand, Semantics, Workload};
use std::collections::BTreeMap;

#[test]
fn licences_held_stay_within_the_pool_under_every_policy() {
    let procs = 64;
    let demand = LicenceDemand {
        pool: "ansys".into(),
        share: 0.35,
        max: 3,
        seed: 7,
    };
    let w = Workload::synthetic(400, procs, 0.6, 3).with_licence_demands(&demand);
    let asking = w.jobs.iter().filter(|j| !j.job.licences.is_empty()).count();
    assert!(
        (100..200).contains(&asking),
        "{asking} jobs ask for licences"
    );
    let pools = [("ansys".to_string(), 4)];
    for policy in [Policy::fcfs(), Policy::easy(), Policy::conservative()] {
        let name = policy.name();
        let out = simulate_licensed(
            &w,
            procs,
            &policy,
            Semantics::Default,
            &Prediction::default(),
            &pools,
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(out.outcomes.len(), w.jobs.len(), "{name}");
        let held: BTreeMap<u64, u32> = w
            .jobs
            .iter()
            .map(|j| {
                (
                    j.job.id.0,
                    j.job.licences.get("ansys").copied().unwrap_or(0),
                )
            })
            .collect();
        for o in &out.outcomes {
            let t = o.start;
            let in_use: u32 = out
                .outcomes
                .iter()
                .filter(|x| x.start <= t && t < x.end)
                .map(|x| held[&x.id.0])
                .sum();
            assert!(in_use <= 4, "{name}: {in_use} licences held at {t:?}");
        }
        let plain = simulate_with(
            &w,
            procs,
            &policy,
            Semantics::Default,
            &Prediction::default(),
            &mut |_| {},
        );
        // Without a pool the scheduler refuses licence demands: nothing is silently ignored.
        assert!(plain.is_err(), "{name}");
        let free = Workload {
            jobs: w
                .jobs
                .iter()
                .cloned()
                .map(|mut j| {
                    j.job.licences.clear();
                    j
                })
                .collect(),
            ..Workload::default()
        };
        let unlicensed = simulate_with(
            &free,
            procs,
            &policy,
            Semantics::Default,
            &Prediction::default(),
            &mut |_| {},
        )
        .unwrap();
        assert!(
            out.metrics.mean_wait > unlicensed.metrics.mean_wait,
            "{name}: licences changed no wait ({} vs {})",
            out.metrics.mean_wait,
            unlicensed.metrics.mean_wait
        );
    }
}
