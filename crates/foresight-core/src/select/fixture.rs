//! Small plans and requests for the unit tests.

use super::{Criterion, Processor, SlotRequest};
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
