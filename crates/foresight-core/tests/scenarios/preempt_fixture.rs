//! The set-up the preemption stories share (`preempt`: clusters the broker schedules itself;
//! `preempt_ask`: a cluster that schedules itself): clusters, the broker over them, global
//! jobs with a level, and what the broker's actions and phases say.

use foresight_core::broker::{
    processors_of, Broker, BrokerAction, GridCluster, Phase, Preemption, SpeedGroup,
};
use foresight_core::grid::{GlobalJob, PlannerConfig};
use foresight_core::select::Criterion;
use foresight_core::{Dur, JobId, LocalScheduler, Policy, Time, UserId};

/// Cluster `name` of `procs` processors of speed 1, scheduled EASY.
pub fn cluster(name: &str, procs: u32) -> GridCluster {
    GridCluster::new(
        name,
        processors_of(name, &[SpeedGroup { procs, speed: 1.0 }]),
        LocalScheduler::new(procs, Policy::easy()),
    )
}

/// A broker over `clusters` that plans a day ahead, starting jobs as soon as they may.
pub fn broker_of(clusters: Vec<GridCluster>) -> Broker {
    Broker::new(
        clusters,
        PlannerConfig {
            horizon: Dur(86_400),
            lead_time: Dur(0),
            plan_depth: 64,
        },
        1,
    )
}

/// Global job `id` of user 1 at priority level `priority`, submitted at 0, that pays up to 1
/// per processor-second; `requeue`: it may be killed and run again instead of suspended.
pub fn global(id: u64, priority: u32, procs: u32, walltime: i64, requeue: bool) -> GlobalJob {
    GlobalJob {
        id: JobId(id),
        user: UserId(1),
        submit: Time(0),
        procs,
        walltime: Dur(walltime),
        max_price: 1.0,
        input_mb: 0.0,
        home: None,
        co_allocate: false,
        criterion: Criterion::EarliestFinish,
        priority,
        requeue,
        begin: None,
        requires: Default::default(),
        licences: Default::default(),
        prediction: None,
    }
}

/// The actions of a cycle at `t`.
pub fn cycle(b: &mut Broker, t: i64) -> Vec<BrokerAction> {
    let mut out = Vec::new();
    b.on_cycle(Time(t), &mut out);
    out
}

/// (victim, job it made room for, how) of each preemption carried out.
pub fn preempted(out: &[BrokerAction]) -> Vec<(u64, u64, Preemption)> {
    out.iter()
        .filter_map(|a| match a {
            BrokerAction::Preempted { job, by, how, .. } => Some((job.0, by.0, *how)),
            _ => None,
        })
        .collect()
}

/// Where job `id` stands in the broker.
pub fn phase(b: &Broker, id: u64) -> Option<&Phase> {
    b.entry(JobId(id)).map(|e| &e.phase)
}
