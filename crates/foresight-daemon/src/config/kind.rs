//! What a cluster's kind means to the service, asked in one place: who schedules the
//! cluster, where its processes run, how its state is learnt. The world and the runtime
//! ask these questions of [`ClusterKind`] and never compare kind names, so a new kind of
//! cluster is one more implementation here.

use crate::config::ClusterConfig;
use foresight_core::time::Dur;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

/// The answers that depend on a cluster's kind.
pub trait ClusterKind: Debug + Send + Sync {
    /// Its kind as configured (`kind`, with `scheduler` for a local one), for messages.
    fn label(&self) -> &'static str;

    /// A resource manager of its own schedules it and runs its jobs: the service follows
    /// it from snapshots (its scheduler in the broker is a mirror rebuilt from each one,
    /// whose decisions are never carried out) and hands it parts, reservations, stops.
    fn schedules_itself(&self) -> bool;

    /// Maui schedules it through WIKI: its processes run here, but no global job is planned
    /// on it and its local jobs wait for Maui's `STARTJOB`.
    fn maui_schedules(&self) -> bool {
        false
    }

    /// Foresight's own policy places its jobs on its processors (neither Maui nor a
    /// resource manager of its own).
    fn placed_here(&self) -> bool {
        !self.schedules_itself() && !self.maui_schedules()
    }

    /// Its jobs run as their user's Unix account, which must then exist on this host when
    /// the service is root. Slurm runs them as the account that submitted them.
    fn runs_as_unix_account(&self) -> bool {
        true
    }

    /// The step of its reservations and limits.
    fn granularity(&self) -> Dur {
        Dur(1)
    }

    /// The prefixes of the array variables its jobs see (`PREFIX_ARRAY_TASK_ID`, …).
    fn array_variable_prefixes(&self) -> &'static [&'static str] {
        &["FORESIGHT"]
    }

    /// Why it is unavailable before anything has been learnt of it.
    fn unavailable_at_start(&self) -> Option<String> {
        self.schedules_itself()
            .then(|| format!("not read from {} yet", self.label()))
    }

    /// How often its snapshot is read (`None`: it has none; the service runs it).
    fn snapshot_every(&self) -> Option<Duration> {
        None
    }

    /// Files copied on this host reach its jobs (its working directories are here, or on a
    /// file system shared with it). False for a cluster on another host: inputs must travel
    /// there over the network.
    fn shares_files(&self) -> bool {
        true
    }
}

/// A cluster whose processes the service runs and whose jobs its local policy places.
#[derive(Debug)]
pub struct Executor;

impl ClusterKind for Executor {
    fn label(&self) -> &'static str {
        "local"
    }

    fn schedules_itself(&self) -> bool {
        false
    }
}

/// A cluster whose processes the service runs and Maui schedules through WIKI.
#[derive(Debug)]
pub struct MauiScheduled;

impl ClusterKind for MauiScheduled {
    fn label(&self) -> &'static str {
        "local (scheduled through WIKI)"
    }

    fn schedules_itself(&self) -> bool {
        false
    }

    fn maui_schedules(&self) -> bool {
        true
    }

    fn unavailable_at_start(&self) -> Option<String> {
        Some("scheduled by a WIKI scheduler (Maui): global jobs are not planned here".into())
    }
}

/// A Slurm cluster, driven through Slurm's client commands.
#[derive(Debug)]
pub struct Slurm {
    /// How often `squeue`/`sinfo`/`scontrol` are read.
    pub sync: Duration,
}

impl ClusterKind for Slurm {
    fn label(&self) -> &'static str {
        "slurm"
    }

    fn schedules_itself(&self) -> bool {
        true
    }

    fn runs_as_unix_account(&self) -> bool {
        false
    }

    /// Slurm reserves and limits jobs in whole minutes.
    fn granularity(&self) -> Dur {
        Dur(60)
    }

    fn array_variable_prefixes(&self) -> &'static [&'static str] {
        &["FORESIGHT", "SLURM"]
    }

    fn snapshot_every(&self) -> Option<Duration> {
        Some(self.sync)
    }
}

/// A cluster behind a WIKI resource manager (another Foresight), which Foresight schedules.
#[derive(Debug)]
pub struct WikiResourceManager {
    /// How often its state is asked for.
    pub poll: Duration,
}

impl ClusterKind for WikiResourceManager {
    fn label(&self) -> &'static str {
        "wiki"
    }

    fn schedules_itself(&self) -> bool {
        true
    }

    fn snapshot_every(&self) -> Option<Duration> {
        Some(self.poll)
    }
}

/// A cluster lent by a site on another host, which schedules it and pushes its state.
#[derive(Debug)]
pub struct Site {
    /// How often the state it last pushed is read.
    pub poll: Duration,
}

impl ClusterKind for Site {
    fn label(&self) -> &'static str {
        "site"
    }

    fn shares_files(&self) -> bool {
        false
    }

    fn schedules_itself(&self) -> bool {
        true
    }

    /// Its jobs run as the account the site maps the grid to.
    fn runs_as_unix_account(&self) -> bool {
        false
    }

    fn snapshot_every(&self) -> Option<Duration> {
        Some(self.poll)
    }
}

impl ClusterConfig {
    /// What this cluster's kind means to the service (the configuration is checked: an
    /// unknown kind was refused before).
    pub fn cluster_kind(&self) -> Arc<dyn ClusterKind> {
        if self.is_slurm() {
            Arc::new(Slurm {
                sync: Duration::from_millis(self.sync_ms.max(1)),
            })
        } else if self.kind == "site" {
            Arc::new(Site {
                poll: Duration::from_millis(self.sync_ms.max(1)),
            })
        } else if self.is_remote() {
            Arc::new(WikiResourceManager {
                poll: crate::config::wiki_rm::poll_every(self),
            })
        } else if self.is_wiki_scheduled() {
            Arc::new(MauiScheduled)
        } else {
            Arc::new(Executor)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_configured_kind_answers_for_itself() {
        let local = ClusterConfig::local("a", 4);
        let maui = ClusterConfig {
            scheduler: "wiki".into(),
            ..ClusterConfig::local("m", 4)
        };
        let slurm = ClusterConfig {
            kind: "slurm".into(),
            sync_ms: 250,
            ..ClusterConfig::local("s", 0)
        };
        let wiki = ClusterConfig {
            kind: "wiki".into(),
            ..ClusterConfig::local("w", 0)
        };
        let answers = |c: &ClusterConfig| {
            let k = c.cluster_kind();
            (
                k.label(),
                k.schedules_itself(),
                k.maui_schedules(),
                k.placed_here(),
                k.runs_as_unix_account(),
                k.granularity(),
                k.snapshot_every(),
            )
        };
        assert_eq!(
            answers(&local),
            ("local", false, false, true, true, Dur(1), None)
        );
        assert_eq!(
            answers(&maui),
            (
                "local (scheduled through WIKI)",
                false,
                true,
                false,
                true,
                Dur(1),
                None
            )
        );
        assert_eq!(
            answers(&slurm),
            (
                "slurm",
                true,
                false,
                false,
                false,
                Dur(60),
                Some(Duration::from_millis(250))
            )
        );
        assert_eq!(
            answers(&wiki),
            (
                "wiki",
                true,
                false,
                false,
                true,
                Dur(1),
                Some(Duration::from_millis(1_000))
            )
        );
        assert_eq!(
            slurm.cluster_kind().unavailable_at_start().as_deref(),
            Some("not read from slurm yet")
        );
        assert!(local.cluster_kind().unavailable_at_start().is_none());
        assert_eq!(
            slurm.cluster_kind().array_variable_prefixes(),
            ["FORESIGHT", "SLURM"]
        );
    }
}
