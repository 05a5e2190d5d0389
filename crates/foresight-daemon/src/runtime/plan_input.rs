//! What one cluster's plan and its local forecast are drawn from, copied out of the world:
//! the plan view and the starts shown to jobs read the same input.

use crate::state::plan_view;
use crate::state::world::World;
use foresight_core::broker::Phase;
use foresight_core::ClusterId;

/// What cluster `k`'s plan is drawn from: its running parts on the processors they run on,
/// the broker's reserved and planned global jobs by count (the processors the planner chose
/// are positions in its model, not the cluster's), and its administrative reservations.
pub(crate) fn plan_input(w: &World, k: ClusterId) -> plan_view::ClusterInput {
    let c = &w.clusters[k];
    let g = &w.broker.clusters[k];
    let name = &c.cfg.name;
    let running = g
        .sched
        .running_jobs()
        .map(|(job, _, at)| {
            let record = w.jobs.get(&job);
            let part = record.and_then(|j| j.parts.iter().find(|p| &p.cluster == name && !p.ended));
            // The part's own start once its process reports it, until then the job's.
            let started_at = part
                .and_then(|p| p.started_at)
                .or(record.and_then(|j| j.started_at))
                .or(Some(at.start.secs()));
            plan_view::RunningPart {
                job: job.0,
                started_at,
                end: at.end.secs(),
                processors: part.map(|p| p.processors.clone()).unwrap_or_default(),
            }
        })
        .collect();
    let mut global = Vec::new();
    let mut job_reservations = std::collections::HashMap::new();
    for e in w.broker.entries() {
        let job = e.job.id.0;
        match &e.phase {
            Phase::Reserving { parts, .. } | Phase::Reserved { parts, .. } => {
                for p in parts.iter().filter(|p| p.cluster == k) {
                    job_reservations.insert(p.reservation.0, job);
                    global.push(plan_view::GlobalPart {
                        occupant: "reserved",
                        job,
                        start: p.window.start.secs(),
                        end: p.window.end.secs(),
                        procs: p.procs,
                        reservation: Some(p.reservation.0),
                    });
                }
            }
            Phase::Running { parts, .. } => {
                for p in parts.iter().filter(|p| p.cluster == k) {
                    job_reservations.insert(p.reservation.0, job);
                }
            }
            Phase::Planned { start, end, parts } => {
                for p in parts.iter().filter(|p| p.cluster == k) {
                    global.push(plan_view::GlobalPart {
                        occupant: "planned",
                        job,
                        start: start.secs(),
                        end: end.secs(),
                        procs: p.processors.len() as u32,
                        reservation: None,
                    });
                }
            }
            Phase::Queued | Phase::Suspended { .. } => {}
        }
    }
    let admin_reservations = w
        .reservations
        .values()
        .filter(|r| &r.cluster == name && r.kind != "job")
        .map(|r| (r.id, r.processors.clone()))
        .collect();
    plan_view::ClusterInput {
        name: name.clone(),
        procs: c.procs(),
        tariff: g.tariff.base,
        sched: g.sched.clone(),
        running,
        global,
        job_reservations,
        admin_reservations,
    }
}
