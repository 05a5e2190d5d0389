//! Committing selections into a plan: the plan that results answers every later request
//! exactly as a plan built from scratch out of the same remaining slots. And a plan built
//! from slots naming processors by index answers as one built from the same slots by name.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use foresight_core::select::{Criterion, Processor, Slot, SlotPlan, SlotRequest};
use foresight_core::{Dur, Time};
use proptest::prelude::*;
use std::collections::BTreeSet;

fn processors(n: usize, clusters: usize) -> Vec<Processor> {
    (0..n)
        .map(|i| Processor {
            id: format!("p{i}"),
            cluster: format!("c{}", i % clusters),
            speed: [1.0, 1.5, 2.0][i % 3],
            memory_mb: 0,
            features: BTreeSet::new(),
        })
        .collect()
}

/// Slots per processor from (gap, length, cost) triples laid end to end.
fn slots(n: usize, shape: &[(i64, i64, u8)]) -> Vec<(String, Time, Time, f64)> {
    let mut out = Vec::new();
    for p in 0..n {
        let mut t = 0;
        for (k, (gap, len, cost)) in shape.iter().enumerate() {
            if (k + p) % 3 == 0 {
                continue; // vary processors
            }
            t += gap;
            out.push((format!("p{p}"), Time(t), Time(t + len), f64::from(*cost)));
            t += len;
        }
    }
    out
}

/// A request for `procs` processors over `walltime` seconds at `price`, by criterion
/// `crit` (0: earliest start, 1: earliest finish, 2: minimum cost).
fn request(procs: u32, walltime: i64, crit: usize, price: u8) -> SlotRequest {
    SlotRequest {
        procs,
        walltime: Dur(walltime),
        max_price: f64::from(price),
        min_memory_mb: 0,
        features: BTreeSet::new(),
        criterion: [
            Criterion::EarliestStart,
            Criterion::EarliestFinish,
            Criterion::MinCost,
        ][crit]
            .clone(),
        not_before: Time(0),
        deadline: None,
        co_allocate: true,
    }
}

fn rebuilt(plan: &SlotPlan, n: usize, clusters: usize) -> SlotPlan {
    let names: Vec<String> = plan.processors().iter().map(|p| p.id.clone()).collect();
    SlotPlan::new(
        processors(n, clusters),
        plan.live_slots()
            .map(|s| (names[s.processor as usize].clone(), s.start, s.end, s.cost)),
    )
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn committed_plans_answer_like_rebuilt_ones(
        n in 1usize..12,
        clusters in 1usize..3,
        shape in proptest::collection::vec((0i64..20, 1i64..60, 1u8..8), 1..30),
        jobs in proptest::collection::vec((1u32..5, 1i64..50, 0usize..3, 1u8..8, 0i64..3), 1..80),
    ) {
        let mut plan = SlotPlan::new(processors(n, clusters), slots(n, &shape)).unwrap();
        // Prices below the dearest slot split chains of adjacent slots into several runs,
        // and staging delays the second cluster: the pieces commits make must keep both.
        // Seven prices make the walks' tiers of list A group several prices.
        for (procs, walltime, crit, price, stage) in jobs {
            let staging = [Some(Dur(0)), Some(Dur(stage * 7))];
            let req = request(procs, walltime, crit, price);
            let fresh = rebuilt(&plan, n, clusters);
            let a = plan.select(&req, &staging);
            let b = fresh.select(&req, &staging);
            match (&a, &b) {
                (Ok(x), Ok(y)) => {
                    prop_assert_eq!((x.start, x.end), (y.start, y.end));
                    prop_assert!((x.cost - y.cost).abs() < 1e-9);
                }
                (Err(_), Err(_)) => {}
                _ => prop_assert!(false, "committed {:?} vs rebuilt {:?}", a, b),
            }
            if let Ok(sel) = a {
                let before: i64 = plan.live_slots().map(|s| (s.end - s.start).as_secs()).sum();
                plan.commit(&sel);
                let after: i64 = plan.live_slots().map(|s| (s.end - s.start).as_secs()).sum();
                let used: i64 = sel.slots.iter().map(|u| (u.end - u.start).as_secs()).sum();
                prop_assert_eq!(before - after, used, "a commit removes exactly what was used");
            }
        }
    }

    #[test]
    fn plans_by_index_answer_as_plans_by_name(
        n in 1usize..12,
        clusters in 1usize..3,
        shape in proptest::collection::vec((0i64..20, 1i64..60, 1u8..8), 1..30),
        jobs in proptest::collection::vec((1u32..5, 1i64..50, 0usize..3, 1u8..8), 1..20),
    ) {
        let named = slots(n, &shape);
        let indexed: Vec<Slot> = named
            .iter()
            .map(|(name, start, end, cost)| Slot {
                processor: name[1..].parse().unwrap(),
                start: *start,
                end: *end,
                cost: *cost,
            })
            .collect();
        // The same slots in reverse: the plan sorts them.
        let by_name = SlotPlan::new(processors(n, clusters), named.into_iter().rev()).unwrap();
        let by_index = SlotPlan::from_indexed(processors(n, clusters), indexed).unwrap();
        let staging = [Some(Dur(0)), Some(Dur(5))];
        for (procs, walltime, crit, price) in jobs {
            let req = request(procs, walltime, crit, price);
            prop_assert_eq!(by_name.select(&req, &staging), by_index.select(&req, &staging));
        }
    }
}
