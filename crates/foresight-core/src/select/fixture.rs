//! Small plans and requests for the unit tests.

use super::{Criterion, Processor, SlotPlan, SlotRequest};
use crate::time::{Dur, Time};
use std::collections::BTreeSet;

pub(super) fn procs(spec: &[(&str, &str, f64)]) -> Vec<Processor> {
    spec.iter()
        .map(|(id, cluster, speed)| Processor {
            id: id.to_string(),
            cluster: cluster.to_string(),
            speed: *speed,
            memory_mb: 0,
            features: BTreeSet::new(),
        })
        .collect()
}

pub(super) fn slot(p: &str, start: i64, end: i64, cost: f64) -> (String, Time, Time, f64) {
    (p.to_string(), Time(start), Time(end), cost)
}

pub(super) fn req(procs: u32, walltime: i64, criterion: Criterion) -> SlotRequest {
    SlotRequest {
        procs,
        walltime: Dur(walltime),
        max_price: 10.0,
        min_memory_mb: 0,
        features: BTreeSet::new(),
        criterion,
        not_before: Time(0),
        deadline: None,
        co_allocate: true,
    }
}

/// A fixed-seed LCG: many random cases, the same at every run.
pub(super) struct Lcg(pub u64);

impl Lcg {
    pub(super) fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// A plan of `n` processors `p0…` over `clusters` clusters (`c0…`), of speeds 1 and 1.5 in
/// turn, each with `per_processor` free slots of 5–44 s after gaps under `gap` s, priced
/// 1 to `prices`.
pub(super) fn random_plan(
    rng: &mut Lcg,
    n: usize,
    clusters: usize,
    per_processor: usize,
    gap: u64,
    prices: u64,
) -> SlotPlan {
    let spec: Vec<(String, String, f64)> = (0..n)
        .map(|i| {
            (
                format!("p{i}"),
                format!("c{}", i % clusters),
                [1.0, 1.5][i % 2],
            )
        })
        .collect();
    let names: Vec<(&str, &str, f64)> = spec
        .iter()
        .map(|(a, b, v)| (a.as_str(), b.as_str(), *v))
        .collect();
    let mut raw = Vec::new();
    for (id, _, _) in &names {
        let mut t = 0;
        for _ in 0..per_processor {
            t += rng.next(gap) as i64;
            let len = 5 + rng.next(40) as i64;
            raw.push(slot(id, t, t + len, 1.0 + rng.next(prices) as f64));
            t += len;
        }
    }
    SlotPlan::new(procs(&names), raw).expect("a valid plan")
}
