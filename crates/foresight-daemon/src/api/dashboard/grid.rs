//! `GET /api/v1/grid`: the grid at a glance — each cluster up or down and why, its processors
//! busy, reserved and free now, its local queue; the global queue by state; when the last
//! scheduling cycle ran and how long it took.

use crate::api::error::ApiError;
use crate::api::Caller;
use crate::runtime::Service;
use axum::extract::State;
use axum::Json;
use foresight_api::ClusterInfo;
use foresight_store::JobState;
use serde::Serialize;
use std::sync::Arc;

/// One cluster now.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ClusterLoad {
    /// What `GET /clusters` says of it.
    #[serde(flatten)]
    pub info: ClusterInfo,
    /// Processors held now by a reservation (a global job's or an administrative one) and
    /// not running anything.
    pub reserved: u32,
    /// Processors neither busy nor reserved now.
    pub free: u32,
}

/// Jobs waiting or running, by state; global jobs are planned over the grid, local ones
/// queue in their cluster's own policy.
#[derive(Default, Serialize, utoipa::ToSchema)]
pub struct QueueCounts {
    /// Global jobs waiting for the planner (held ones included).
    pub pending: usize,
    /// Of those, held.
    pub held: usize,
    /// Global jobs with a planned start beyond the lead time.
    pub planned: usize,
    /// Global jobs whose processors are reserved.
    pub reserved: usize,
    /// Global jobs running.
    pub running: usize,
    /// Local jobs waiting in their cluster's queue.
    pub local_pending: usize,
    /// Local jobs running.
    pub local_running: usize,
}

/// The answer.
#[derive(Serialize, utoipa::ToSchema)]
pub struct GridView {
    /// The server's clock (seconds since the epoch).
    pub now: i64,
    /// When the last scheduling cycle began, if one ran since the server started.
    pub last_cycle_at: Option<i64>,
    /// How long it took, seconds.
    pub last_cycle_seconds: f64,
    /// Cycles since the server started.
    pub cycles: u64,
    /// Queue lengths.
    pub queue: QueueCounts,
    /// The clusters.
    pub clusters: Vec<ClusterLoad>,
}

/// The grid at a glance, for any authenticated user (counts, no job names): what the
/// dashboard's Grid page shows.
#[utoipa::path(get, path = "/api/v1/grid", responses((status = 200, body = GridView)))]
pub async fn show_grid(
    State(s): State<Arc<Service>>,
    caller: Caller,
) -> Result<Json<GridView>, ApiError> {
    let now = s.now().secs();
    // Reserved now: what the plan shows held at this second.
    let plan = s.plan(None, Some(now), Some(now + 1), &caller.0).await?;
    let (queue, last_cycle_at, last_cycle_seconds, cycles) = {
        let w = s.world();
        let mut q = QueueCounts::default();
        for j in w.jobs.values() {
            let global = j.cluster.is_none();
            match (j.state, global) {
                (JobState::Pending, true) => {
                    q.pending += 1;
                    q.held += usize::from(j.held);
                }
                (JobState::Planned, true) => q.planned += 1,
                (JobState::Reserved, true) => q.reserved += 1,
                (JobState::Running, true) => q.running += 1,
                (JobState::Running, false) => q.local_running += 1,
                (s, false) if !s.is_final() => q.local_pending += 1,
                _ => {}
            }
        }
        (
            q,
            w.stats.last_cycle_at,
            w.stats.last_cycle_seconds,
            w.stats.cycles,
        )
    };
    let clusters = s
        .clusters()
        .into_iter()
        .map(|info| {
            let reserved = plan
                .iter()
                .find(|p| p.cluster == info.name)
                .map(|p| {
                    p.slots
                        .iter()
                        .filter(|sl| sl.start <= now && now < sl.end)
                        .filter(|sl| matches!(sl.occupant.as_str(), "reserved" | "held"))
                        .count() as u32
                })
                .unwrap_or(0);
            let reserved = reserved.min(info.procs.saturating_sub(info.busy));
            let free = info.procs.saturating_sub(info.busy + reserved);
            ClusterLoad {
                info,
                reserved,
                free,
            }
        })
        .collect();
    Ok(Json(GridView {
        now,
        last_cycle_at: last_cycle_at.map(|t| t.secs()),
        last_cycle_seconds,
        cycles,
        queue,
        clusters,
    }))
}
