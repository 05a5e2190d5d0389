//! The start a waiting job is shown (`job list`, `job show`, `job explain`, the dashboard),
//! and whether it is a promise.
//!
//! A global job's start is promised once its reservations are made (within the lead time):
//! it then starts at that second or earlier. Before that it is where the last cycle planned
//! it, and the clusters' own jobs may start first (the planner may have placed it over
//! local work it cannot yet hold) or a job of a higher level or price may take the time. A
//! local job's start is the cluster's forecast around the global jobs the broker has
//! planned there, the same the plan draws: a start that a planned global job will take is
//! never shown. It stays a forecast: a planned global job may still move, one that pays the
//! cluster's premium for queued local work may take its time, and under backfilling a job
//! without a reservation may be passed.

use crate::runtime::plan_input::plan_input;
use crate::state::plan_view;
use crate::state::world::World;
use foresight_core::broker::Phase;
use foresight_core::policy::BackfillChoice;
use foresight_core::scheduler::JobStatus;
use foresight_core::time::Time;
use foresight_core::ClusterId;
use foresight_core::JobId;
use foresight_store::JobRecord;
use foresight_store::JobState;
use std::cell::RefCell;
use std::collections::HashMap;

/// A waiting job's start as users see it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Start {
    /// When.
    pub at: Option<i64>,
    /// A reservation holds it.
    pub guaranteed: bool,
    /// What may still make it later, when it is a forecast.
    pub caveat: Option<String>,
}

/// Starts of the jobs of one view: each cluster's local queue is forecast once, however
/// many of its jobs the view shows.
pub(crate) struct Starts<'w> {
    w: &'w World,
    now: Time,
    local: RefCell<HashMap<ClusterId, HashMap<u64, i64>>>,
}

const LOCAL_CAVEAT: &str = "a global job planned here and not yet reserved may move, and one \
                            that pays this cluster's premium for queued local work may still \
                            take its time";

impl<'w> Starts<'w> {
    pub(crate) fn new(w: &'w World, now: Time) -> Self {
        Starts {
            w,
            now,
            local: RefCell::new(HashMap::new()),
        }
    }

    /// Job `j`'s start: the one the planner gave it (a global job), or its cluster's
    /// forecast (a local one). A started or ended job keeps the start it was planned for.
    pub(crate) fn of(&self, j: &JobRecord) -> Start {
        if let Some(at) = j.planned_start {
            return self.global(j, at);
        }
        if j.state != JobState::Pending || j.held {
            return Start::default();
        }
        let Some(k) = j
            .parts
            .first()
            .and_then(|p| self.w.cluster_index(&p.cluster))
        else {
            return Start::default();
        };
        let sched = &self.w.broker.clusters[k].sched;
        let forecast = self
            .local
            .borrow_mut()
            .entry(k)
            .or_insert_with(|| plan_view::local_starts(&plan_input(self.w, k), self.now.secs()))
            .get(&j.id)
            .copied();
        // A job bound to an administrative reservation is covered by that reservation in
        // the forecast: its own placement says when.
        let own = sched.reservation_of(JobId(j.id));
        let at = forecast.or_else(|| match own {
            Some(p) => Some(p.start.secs()),
            None => match sched.explain(JobId(j.id), self.now) {
                Some(JobStatus::Deferred { earliest, .. }) => earliest.map(|t| t.secs()),
                _ => None,
            },
        });
        let reserved = own.is_some();
        let caveat = if reserved || sched.policy().backfill == BackfillChoice::None {
            format!("forecast: {LOCAL_CAVEAT}")
        } else {
            format!(
                "forecast, not reserved: the cluster's policy reserves only its first waiting \
                 jobs, so jobs behind may be backfilled ahead of this one; and {LOCAL_CAVEAT}"
            )
        };
        Start {
            at,
            guaranteed: false,
            caveat: at.map(|_| caveat),
        }
    }

    fn global(&self, j: &JobRecord, at: i64) -> Start {
        let waiting = matches!(
            j.state,
            JobState::Pending | JobState::Planned | JobState::Reserved
        );
        let phase = self.w.broker.entry(JobId(j.id)).map(|e| &e.phase);
        match phase {
            Some(Phase::Reserving { .. } | Phase::Reserved { .. }) if waiting => Start {
                at: Some(at),
                guaranteed: true,
                caveat: None,
            },
            _ if waiting => Start {
                at: Some(at),
                guaranteed: false,
                caveat: Some(format!(
                    "planned, not reserved: its reservations are made {} s before its start; \
                     until then the clusters' own jobs may start first, and a global job of a \
                     higher level or price may take its time",
                    self.w.broker.planner().lead_time.0
                )),
            },
            // Started or ended: the start it was planned for, a record, not a promise.
            _ => Start {
                at: Some(at),
                guaranteed: false,
                caveat: None,
            },
        }
    }
}

#[cfg(test)]
#[path = "starts_tests.rs"]
mod tests;
