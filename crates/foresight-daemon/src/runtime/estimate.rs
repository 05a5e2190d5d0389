//! Estimates: when and where a job would start if it were submitted now, from the planner
//! and, for remote clusters, from their resource managers.

use crate::runtime::Service;
use crate::state::refusal::Refusal;
use foresight_api::{ClusterEstimate, Estimate, EstimateRequest, PartView};
use foresight_core::broker::GridCluster;
use foresight_core::grid::{GlobalJob, GridPlan, PlannerConfig};
use foresight_core::select::Criterion;
use foresight_core::time::{Dur, Time};
use foresight_core::{ClusterId, JobId, UserId};
use std::time::Duration;

impl Service {
    /// Earliest starts without submitting, all from one plan: the queued global jobs placed
    /// as the next cycle would place them, then the job over the grid and on each cluster
    /// alone. Planned on a copy of the clusters, off the state's lock.
    pub async fn estimate(&self, req: &EstimateRequest) -> Result<Estimate, Refusal> {
        let walltime = req
            .walltime
            .seconds()
            .map_err(|m| Refusal::invalid("walltime", m))?;
        if walltime <= 0 {
            return Err(Refusal::invalid("walltime", "must be positive"));
        }
        crate::state::limits::seconds("walltime", walltime)?;
        if req.procs == 0 {
            return Err(Refusal::invalid("procs", "must be at least 1"));
        }
        if let Some(b) = req.begin {
            crate::state::limits::instant("begin", b)?;
        }
        // Checked as a submission's price is: an estimate answers for a job that could be
        // submitted.
        if let Some(p) = req.price {
            crate::state::limits::price("price", p)?;
        }
        let now = self.now();
        let input = {
            let w = self.world();
            let total = w.global_limit(req.co_allocate);
            if req.procs > total {
                return Err(Refusal::invalid(
                    "procs",
                    format!(
                        "{} processors asked; the largest possible is {total}",
                        req.procs
                    ),
                ));
            }
            let probe = GlobalJob {
                id: JobId(u64::MAX),
                user: UserId(0),
                submit: now,
                procs: req.procs,
                walltime: Dur(walltime),
                max_price: req.price.unwrap_or_else(|| w.default_price()),
                input_mb: 0.0,
                home: None,
                co_allocate: req.co_allocate,
                criterion: Criterion::EarliestFinish,
                priority: 0,
                requeue: false,
                requires: Default::default(),
                begin: req.begin.map(Time),
                licences: Default::default(),
                prediction: None,
            };
            let queue: Vec<GlobalJob> = w
                .broker
                .queued()
                .take(self.cfg.plan_depth)
                .map(|e| e.job.clone())
                .collect();
            let mut jobs = queue.clone();
            jobs.push(probe.clone());
            EstimateInput {
                now,
                planner: w.broker.planner_for(now, &jobs),
                clusters: w.broker.clusters.clone(),
                queue,
                probe,
            }
        };
        tokio::task::spawn_blocking(move || input.answer())
            .await
            .map_err(|e| Refusal::internal(format!("the estimate failed: {e}")))
    }

    /// Adds each remote cluster's own answer (`sbatch --test-only`) to an estimate, asked
    /// concurrently, each given at most a few seconds.
    pub async fn add_resource_manager_estimates(&self, req: &EstimateRequest, est: &mut Estimate) {
        let Ok(walltime) = req.walltime.seconds() else {
            return;
        };
        let asks = self
            .managers
            .iter()
            .enumerate()
            .filter(|(_, m)| !m.scheduled_by_foresight())
            .map(|(k, m)| {
                let m = m.clone();
                async move {
                    let answer = tokio::time::timeout(
                        Duration::from_secs(5),
                        m.estimate_start(req.procs, walltime),
                    )
                    .await;
                    (k, answer)
                }
            });
        for (k, answer) in futures::future::join_all(asks).await {
            if let (Some(c), Ok(Ok(Some(t)))) = (est.clusters.get_mut(k), answer) {
                // Asked without the begin time: no earlier than it.
                c.resource_manager_start = Some(req.begin.map_or(t, |b| t.max(b)));
            }
        }
    }
}

/// What an estimate plans, copied out of the state.
pub(crate) struct EstimateInput {
    now: Time,
    planner: PlannerConfig,
    clusters: Vec<GridCluster>,
    queue: Vec<GlobalJob>,
    probe: GlobalJob,
}

impl EstimateInput {
    fn answer(&self) -> Estimate {
        let views: Vec<_> = self.clusters.iter().map(GridCluster::view).collect();
        let mut out = Estimate {
            clusters: Vec::new(),
            earliest: None,
            end: None,
            parts: Vec::new(),
            cost: None,
        };
        let mut plan = match GridPlan::new(self.now, &views, &self.planner) {
            Ok(plan) => plan,
            Err(reason) => {
                out.clusters = self
                    .clusters
                    .iter()
                    .map(|c| ClusterEstimate {
                        cluster: c.name.clone(),
                        start: None,
                        reason: Some(reason.clone()),
                        resource_manager_start: None,
                    })
                    .collect();
                return out;
            }
        };
        for job in &self.queue {
            plan.place(job);
        }
        if let Ok(sel) = plan.probe(&self.probe, None) {
            out.earliest = Some(sel.start.secs());
            out.end = Some(sel.end.secs());
            out.cost = Some(sel.cost);
            let mut parts: Vec<PartView> = Vec::new();
            let mut processors = sel.processors.clone();
            processors.sort_unstable();
            for p in processors {
                let name = &self.clusters[plan.cluster_of(p)].name;
                let local = plan.local_index(p);
                match parts.iter_mut().find(|x| &x.cluster == name) {
                    Some(x) => {
                        x.procs += 1;
                        x.processors.push(local);
                    }
                    None => parts.push(PartView {
                        cluster: name.clone(),
                        procs: 1,
                        processors: vec![local],
                        started_at: None,
                        ended_at: None,
                    }),
                }
            }
            out.parts = parts;
        }
        for (k, c) in ClusterId::enumerate(&self.clusters) {
            let (start, reason) = if !c.available {
                (None, Some("the cluster is down".to_string()))
            } else {
                match plan.probe(&self.probe, Some(k)) {
                    Ok(sel) => (Some(sel.start.secs()), None),
                    Err(reason) => (None, Some(reason)),
                }
            };
            out.clusters.push(ClusterEstimate {
                cluster: c.name.clone(),
                start,
                reason,
                resource_manager_start: None,
            });
        }
        out
    }
}
