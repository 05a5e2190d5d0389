//! Where a reservation over suspended jobs goes: Slurm 22.05 counts a suspended job's
//! CPUs as idle on its nodes (`CPUAlloc` drops), but a reservation that must ignore the
//! suspended jobs (`Flags=IGNORE_JOBS`) ignores running ones as well, and with a bare
//! `CoreCnt` it may take cores a running job holds, so that the job it was made for waits
//! (`Resources`) until that one ends. Naming the nodes and the cores on each keeps it to
//! cores no running job holds.

use super::model::Node;

/// `need` cores among the idle CPUs of the nodes that accept jobs (in `partition`, when
/// given): the nodes with the most idle CPUs first (fewest nodes), then by name. `None`
/// when they have fewer than `need` in all. Assumes one CPU per core, as the planner does.
pub fn idle_cores(
    nodes: &[Node],
    partition: Option<&str>,
    need: u32,
) -> Option<Vec<(String, u32)>> {
    let mut usable: Vec<&Node> = nodes
        .iter()
        .filter(|n| n.accepts_jobs() && n.idle_cpus > 0)
        .filter(|n| partition.is_none_or(|p| n.partitions.iter().any(|q| q == p)))
        .collect();
    usable.sort_by(|a, b| {
        b.idle_cpus
            .cmp(&a.idle_cpus)
            .then_with(|| a.name.cmp(&b.name))
    });
    let mut left = need;
    let mut chosen = Vec::new();
    for n in usable {
        if left == 0 {
            break;
        }
        let take = n.idle_cpus.min(left);
        chosen.push((n.name.clone(), take));
        left -= take;
    }
    (left == 0 && need > 0).then_some(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slurm::NodeState;

    fn node(name: &str, cpus: u32, alloc: u32) -> Node {
        Node {
            name: name.into(),
            state: if alloc == 0 {
                NodeState::Idle
            } else if alloc < cpus {
                NodeState::Mixed
            } else {
                NodeState::Allocated
            },
            flags: Vec::new(),
            cpus,
            alloc_cpus: alloc,
            idle_cpus: cpus - alloc,
            partitions: vec!["debug".into()],
            reason: None,
            real_memory_mb: 2000,
            alloc_memory_mb: 0,
        }
    }

    /// The test clusters' case: a local job holds n1, a suspended one n2–n4 (idle to
    /// Slurm): the 6 cores are those of n2–n4, never n1's.
    #[test]
    fn the_busy_node_is_left_out() {
        let nodes = [
            node("c1-n1", 2, 2),
            node("c1-n2", 2, 0),
            node("c1-n3", 2, 0),
            node("c1-n4", 2, 0),
        ];
        assert_eq!(
            idle_cores(&nodes, None, 6),
            Some(vec![
                ("c1-n2".into(), 2),
                ("c1-n3".into(), 2),
                ("c1-n4".into(), 2)
            ])
        );
        assert_eq!(idle_cores(&nodes, None, 7), None);
    }

    /// Partly busy nodes give their idle cores; the fullest idle nodes come first;
    /// drained nodes and other partitions give none.
    #[test]
    fn idle_cores_per_node() {
        let mut drained = node("a4", 4, 0);
        drained.flags.push("DRAIN".into());
        let mut elsewhere = node("a5", 4, 0);
        elsewhere.partitions = vec!["long".into()];
        let nodes = [
            node("a1", 4, 3),
            node("a2", 4, 0),
            node("a3", 4, 2),
            drained,
            elsewhere,
        ];
        assert_eq!(
            idle_cores(&nodes, Some("debug"), 6),
            Some(vec![("a2".into(), 4), ("a3".into(), 2)])
        );
        assert_eq!(
            idle_cores(&nodes, Some("debug"), 7),
            Some(vec![("a2".into(), 4), ("a3".into(), 2), ("a1".into(), 1)])
        );
        assert_eq!(idle_cores(&nodes, Some("debug"), 8), None);
        assert_eq!(idle_cores(&nodes, None, 0), None);
    }
}
