//! One cluster as the service runs it: its configuration, free processors, and the last
//! snapshot of a remote one; and what an administrative reservation holds.

use crate::config::kind::ClusterKind;
use crate::config::ClusterConfig;
use foresight_rm::ClusterState;
use std::collections::BTreeSet;
use std::sync::Arc;

/// One cluster of the grid as the service runs it.
#[derive(Clone, Debug)]
pub struct Cluster {
    /// Its configuration. Its scheduler, processors and prices are the broker's
    /// ([`World::broker`](super::World::broker), same index).
    pub cfg: ClusterConfig,
    /// Processor indices not running anything now.
    pub free: BTreeSet<u32>,
    /// Who schedules it and where its processes run: every answer that depends on its kind.
    pub kind: Arc<dyn ClusterKind>,
    /// Why it is unavailable (the broker's cluster says whether it is).
    pub unavailable_reason: Option<String>,
    /// The last snapshot of a remote cluster.
    pub snapshot: Option<ClusterState>,
}

impl Cluster {
    /// Its processors as best known: configured, or for a remote cluster as last read.
    pub fn procs(&self) -> u32 {
        match &self.snapshot {
            Some(s) if self.kind.schedules_itself() => s.processors,
            _ => self.cfg.procs,
        }
    }

    /// Processors busy now: as the remote cluster last reported, or not free here.
    pub fn busy(&self) -> u32 {
        match &self.snapshot {
            Some(s) if self.kind.schedules_itself() => s
                .jobs
                .iter()
                .filter(|j| {
                    matches!(
                        j.state,
                        foresight_rm::RmJobState::Running | foresight_rm::RmJobState::Suspended
                    )
                })
                .map(|j| j.procs)
                .sum::<u32>()
                .min(s.processors),
            _ => self.procs().saturating_sub(self.free.len() as u32),
        }
    }

    /// The most processors a job may ask of it: unbounded for a remote cluster whose size is
    /// not known yet (its resource manager judges when it answers).
    pub(crate) fn admission_limit(&self) -> u32 {
        if self.kind.schedules_itself() && self.snapshot.is_none() && self.cfg.procs == 0 {
            u32::MAX
        } else {
            self.procs()
        }
    }

    /// The most processors a global job may ask of it: none where no global job can go
    /// (a WIKI cluster without a submission route).
    pub(crate) fn global_admission_limit(&self) -> u32 {
        if crate::config::wiki_rm::takes_foresight_jobs(&self.cfg) {
            self.admission_limit()
        } else {
            0
        }
    }
}

/// What an administrative reservation holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Held {
    /// Any this many processors: the cluster's scheduler keeps that many free.
    Count(u32),
    /// These processors (indices within the cluster).
    These(Vec<u32>),
}
