//! What the tests of the scheduler side build their resource managers from.

use super::{NodeRecord, NodeState};

/// `n` one-processor nodes `p0…`, those in `busy` busy and the others idle.
pub(super) fn nodes(n: u32, busy: &[u32]) -> Vec<NodeRecord> {
    (0..n)
        .map(|p| {
            let b = busy.contains(&p);
            NodeRecord {
                cproc: 1,
                aproc: u32::from(!b),
                ..NodeRecord::new(
                    format!("p{p}"),
                    if b { NodeState::Busy } else { NodeState::Idle },
                )
            }
        })
        .collect()
}
