//! What a WIKI resource manager reports, as the service's forecast reads it: GETNODES and
//! GETJOBS records become a [`ClusterState`] (processors, jobs with Foresight's parts
//! recognised, the reservations Foresight holds there). Pure: no I/O, no clock.
//!
//! WIKI has no reservations: when Foresight is a WIKI resource manager's scheduler, the
//! reservations it makes there are its own book ([`ReserveRequest`]s), which
//! [`crate::WikiCluster`] honours itself when it starts jobs (see `dispatch`), and which are
//! reported here under the instance's names (`<instance>-<id>`, [`Naming::reservation`]).

use super::record::{JobRecord, JobState, NodeRecord, NodeState};
use crate::manager::{ClusterState, ReserveRequest, RmJob, RmJobState, RmReservation};
use crate::slurm::Naming;
use crate::spec::Outcome;
use std::collections::{BTreeMap, HashMap};

/// One of Foresight's parts in the resource manager's queue, recognised by its job id there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OurPart {
    /// The Foresight job and attempt.
    pub job: u64,
    /// Its attempt.
    pub attempt: u32,
    /// The Foresight reservation it runs in, if any.
    pub reservation: Option<u64>,
    /// Not to be started before this Unix second.
    pub begin: Option<i64>,
    /// How it ended, when the submission route knows (exit code, signal, timeout).
    pub outcome: Option<Outcome>,
}

/// Processors that accept jobs: every node's configured processors but those of `Down`
/// nodes.
pub fn processors(nodes: &[NodeRecord]) -> u32 {
    nodes
        .iter()
        .filter(|n| n.state != NodeState::Down)
        .map(|n| n.cproc)
        .fold(0u32, u32::saturating_add)
}

/// The free processors, one task slot each, named by their node as a `TASKLIST` names them,
/// in the resource manager's node order: `APROC` of every `Idle` or `Running` node.
pub fn free_slots(nodes: &[NodeRecord]) -> Vec<String> {
    nodes
        .iter()
        .filter(|n| matches!(n.state, NodeState::Idle | NodeState::Running))
        .flat_map(|n| std::iter::repeat_n(n.name.clone(), n.aproc.min(n.cproc) as usize))
        .collect()
}

/// The cluster at `taken_at` as the forecast reads it: its processors, its jobs (ours carry
/// `(job, attempt)` and their reservation's name), and the reservations Foresight holds, all
/// named as `naming` (this instance) names them.
pub fn cluster_state(
    taken_at: i64,
    nodes: &[NodeRecord],
    jobs: &[JobRecord],
    ours: &HashMap<String, OurPart>,
    reservations: &BTreeMap<u64, ReserveRequest>,
    naming: &Naming,
) -> ClusterState {
    ClusterState {
        taken_at,
        processors: processors(nodes),
        jobs: jobs
            .iter()
            .map(|j| rm_job(j, ours.get(&j.id), naming))
            .collect(),
        reservations: reservations
            .values()
            .map(|r| RmReservation {
                name: naming.reservation(r.id),
                foresight: Some(r.id),
                start: r.start,
                end: r.end,
                procs: r.procs,
            })
            .collect(),
    }
}

/// One GETJOBS record as an [`RmJob`] (its reservation named by `naming`).
pub fn rm_job(j: &JobRecord, ours: Option<&OurPart>, naming: &Naming) -> RmJob {
    let secs = |t: Option<u64>| t.map(|t| i64::try_from(t).unwrap_or(i64::MAX));
    let started = secs(j.start_time);
    let state = match j.state {
        JobState::Idle | JobState::Hold => RmJobState::Pending,
        JobState::Running => RmJobState::Running,
        JobState::Suspended => RmJobState::Suspended,
        JobState::Completed | JobState::Removed => {
            let known = ours.and_then(|o| o.outcome.clone());
            RmJobState::Ended(known.unwrap_or_else(|| ended(j, started)))
        }
    };
    let limit = i64::try_from(j.wclimit_secs).unwrap_or(i64::MAX);
    RmJob {
        external: j.id.clone(),
        foresight: ours.map(|o| (o.job, o.attempt)),
        user: j.user.clone(),
        state,
        procs: j.tasks,
        time_limit: (limit > 0).then_some(limit),
        submitted_at: secs(Some(j.queue_time)).unwrap_or(0),
        start: match j.state {
            JobState::Running | JobState::Suspended => started,
            _ => None,
        },
        priority: 0,
        reservation: ours
            .and_then(|o| o.reservation)
            .map(|r| naming.reservation(r)),
    }
}

/// The outcome a WIKI record alone tells, read as Maui reads it: `Removed` at or past the
/// wallclock limit after its start is a job killed at its limit, and before it a cancel;
/// `Completed` says nothing of the exit status, so it is recorded as unknown (an error
/// naming that), never as success.
fn ended(j: &JobRecord, started: Option<i64>) -> Outcome {
    let end = j
        .complete_time
        .map(|t| i64::try_from(t).unwrap_or(i64::MAX))
        .unwrap_or(0);
    let limit = i64::try_from(j.wclimit_secs).unwrap_or(i64::MAX);
    let removed = j.state == JobState::Removed;
    let timed_out = removed && limit > 0 && started.is_some_and(|s| end >= s.saturating_add(limit));
    Outcome {
        exit_code: None,
        signal: None,
        timed_out,
        cancelled: removed && !timed_out,
        started_at: started.unwrap_or(0),
        ended_at: end,
        error: (!removed).then(|| {
            format!(
                "job {} completed in the WIKI resource manager, which does not report exit \
                 statuses",
                j.id
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, state: NodeState, cproc: u32, aproc: u32) -> NodeRecord {
        NodeRecord {
            cproc,
            aproc,
            ..NodeRecord::new(name, state)
        }
    }

    fn job(id: &str, state: JobState, tasks: u32) -> JobRecord {
        JobRecord {
            queue_time: 1_000,
            ..JobRecord::new(id, state, tasks, 600, "ann", "ann")
        }
    }

    #[test]
    fn down_nodes_are_left_out_and_free_slots_follow_node_order() {
        let nodes = [
            node("n1", NodeState::Running, 4, 1),
            node("n2", NodeState::Down, 8, 8),
            node("n3", NodeState::Idle, 2, 2),
            node("n4", NodeState::Busy, 2, 0),
        ];
        assert_eq!(processors(&nodes), 8);
        assert_eq!(free_slots(&nodes), ["n1", "n3", "n3"]);
    }

    #[test]
    fn records_become_the_forecast_with_our_parts_and_reservations_named() {
        let nodes = [
            node("p0", NodeState::Busy, 1, 0),
            node("p1", NodeState::Idle, 1, 1),
        ];
        let running = JobRecord {
            start_time: Some(1_100),
            tasklist: vec!["p0".into()],
            ..job("7", JobState::Running, 1)
        };
        let jobs = [
            running,
            job("8", JobState::Idle, 2),
            job("9", JobState::Hold, 1),
            JobRecord {
                start_time: Some(1_100),
                complete_time: Some(1_200),
                ..job("10", JobState::Completed, 1)
            },
            JobRecord {
                complete_time: Some(1_150),
                ..job("11", JobState::Removed, 1)
            },
        ];
        let ours = HashMap::from([(
            "8".to_string(),
            OurPart {
                job: 42,
                attempt: 1,
                reservation: Some(5),
                begin: Some(2_000),
                outcome: None,
            },
        )]);
        let reservations = BTreeMap::from([(
            5,
            ReserveRequest {
                id: 5,
                start: 2_000,
                end: 2_600,
                procs: 2,
            },
        )]);
        let s = cluster_state(
            1_300,
            &nodes,
            &jobs,
            &ours,
            &reservations,
            &Naming::instance("east").unwrap(),
        );
        assert_eq!(s.taken_at, 1_300);
        assert_eq!(s.processors, 2);
        assert_eq!(
            s.reservations,
            [RmReservation {
                name: "east-5".into(),
                foresight: Some(5),
                start: 2_000,
                end: 2_600,
                procs: 2,
            }]
        );
        let by_id: HashMap<&str, &RmJob> =
            s.jobs.iter().map(|j| (j.external.as_str(), j)).collect();
        let r = by_id["7"];
        assert_eq!(
            (&r.state, r.start, r.procs, r.time_limit, r.foresight),
            (&RmJobState::Running, Some(1_100), 1, Some(600), None)
        );
        let o = by_id["8"];
        assert_eq!(o.state, RmJobState::Pending);
        assert_eq!(o.foresight, Some((42, 1)));
        assert_eq!(o.reservation.as_deref(), Some("east-5"));
        assert_eq!(o.start, None);
        assert_eq!(o.submitted_at, 1_000);
        assert_eq!(by_id["9"].state, RmJobState::Pending);
        match &by_id["10"].state {
            RmJobState::Ended(out) => {
                assert_eq!((out.started_at, out.ended_at), (1_100, 1_200));
                assert!(!out.succeeded());
                assert!(out.error.as_deref().unwrap().contains("exit status"));
            }
            other => panic!("{other:?}"),
        }
        match &by_id["11"].state {
            RmJobState::Ended(out) => assert!(out.cancelled && out.error.is_none()),
            other => panic!("{other:?}"),
        }
    }

    /// Removed at its wallclock limit: killed there, not cancelled (a `JOBWCVIOLATION` to
    /// Maui); removed a second before it: a cancel.
    #[test]
    fn a_job_removed_at_its_limit_timed_out() {
        let removed = |end| JobRecord {
            start_time: Some(1_000),
            complete_time: Some(end),
            ..job("5", JobState::Removed, 1)
        };
        let outcome = |end| match rm_job(&removed(end), None, &Naming::default()).state {
            RmJobState::Ended(out) => (out.timed_out, out.cancelled),
            other => panic!("{other:?}"),
        };
        assert_eq!(outcome(1_600), (true, false));
        assert_eq!(outcome(1_599), (false, true));
    }

    #[test]
    fn a_known_outcome_of_ours_wins_over_the_record() {
        let done = Outcome {
            exit_code: Some(3),
            signal: None,
            timed_out: false,
            cancelled: false,
            started_at: 10,
            ended_at: 20,
            error: None,
        };
        let ours = OurPart {
            job: 1,
            attempt: 0,
            reservation: None,
            begin: None,
            outcome: Some(done.clone()),
        };
        let j = rm_job(
            &job("3", JobState::Completed, 1),
            Some(&ours),
            &Naming::default(),
        );
        assert_eq!(j.state, RmJobState::Ended(done));
    }
}
