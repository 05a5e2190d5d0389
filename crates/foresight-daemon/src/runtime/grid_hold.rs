//! A site out of contact with its centre holds the grid's parts that have not started: past
//! its lease the centre plans them elsewhere, and a part started here as well would run
//! twice. On reconnection the centre's welcome names the parts it still wants: the site
//! lets those start and cancels the others. A site that restarts holds them as it reads its
//! records, before anything is scheduled, since it cannot know how long it was away.

use crate::runtime::grid_site::GridAgent;
use crate::runtime::Service;
use crate::state::refusal::Refusal;
use foresight_core::JobId;
use foresight_store::{JobRecord, JobState};

/// The reason of a part held while the centre is out of reach; the hold the site lifts by
/// itself (an administrator's own hold on a grid job stays).
const OUT_OF_REACH: &str = "held: the grid's centre is out of reach";

fn unstarted(state: JobState) -> bool {
    matches!(
        state,
        JobState::Pending | JobState::Planned | JobState::Reserved
    )
}

/// A job of the grid's user `user` that the site holds while out of reach: not started,
/// not held already.
fn holdable(j: &JobRecord, user: &str) -> bool {
    j.user == user && !j.held && unstarted(j.state)
}

/// Holds, in the records of a restarting site, every job of the grid's user `user` that
/// has not started, before any is scheduled; how many.
pub(crate) fn hold_records(jobs: &mut [JobRecord], user: &str) -> usize {
    let mut held = 0;
    for j in jobs.iter_mut().filter(|j| holdable(j, user)) {
        j.held = true;
        j.state = JobState::Pending;
        j.planned_start = None;
        j.reason = Some(OUT_OF_REACH.into());
        held += 1;
    }
    held
}

impl Service {
    /// Holds every job of the grid's user `user` that has not started (the centre may plan
    /// them elsewhere); how many.
    pub(crate) fn hold_grid_parts(&self, user: &str) -> usize {
        let now = self.now();
        let mut w = self.world();
        let ids: Vec<JobId> = w
            .jobs
            .values()
            .filter(|j| holdable(j, user))
            .map(|j| JobId(j.id))
            .collect();
        let mut held = 0;
        for id in ids {
            if w.hold(now, id).is_ok() {
                if let Some(j) = w.jobs.get_mut(&id) {
                    j.reason = Some(OUT_OF_REACH.into());
                }
                held += 1;
            }
        }
        held
    }
}

impl GridAgent {
    /// After the centre's welcome: the grid's parts of this centre that have not started
    /// and that it no longer wants are cancelled; those it wants, held while it was out of
    /// reach, may start.
    pub(crate) async fn settle(&self, instance: &str, wanted: &[String]) -> Result<(), Refusal> {
        let prefix = format!("{instance}-");
        let user = self.cfg.user.clone();
        let wanted: std::collections::BTreeSet<String> = wanted.iter().cloned().collect();
        let (cancelled, released) = self
            .service
            .mutate(move |w, now| {
                let mut cancel = Vec::new();
                let mut release = Vec::new();
                for j in w.jobs.values() {
                    let Some(name) = j.name.as_deref() else {
                        continue;
                    };
                    if j.user != user || !name.starts_with(&prefix) || !unstarted(j.state) {
                        continue;
                    }
                    if !wanted.contains(name) {
                        cancel.push(JobId(j.id));
                    } else if j.held && j.reason.as_deref() == Some(OUT_OF_REACH) {
                        release.push(JobId(j.id));
                    }
                }
                // One refused does not stop the others.
                for id in &cancel {
                    if let Err(e) = w.cancel(now, *id) {
                        tracing::warn!(
                            "cancelling job {id}, which the centre no longer wants: {e}"
                        );
                    }
                }
                for id in &release {
                    if let Err(e) = w.release(now, *id) {
                        tracing::warn!("releasing job {id}, which the centre still wants: {e}");
                    }
                }
                Ok((cancel.len(), release.len()))
            })
            .await?;
        if cancelled + released > 0 {
            tracing::info!(
                cancelled,
                released,
                "the centre's parts settled on reconnection"
            );
        }
        Ok(())
    }
}
