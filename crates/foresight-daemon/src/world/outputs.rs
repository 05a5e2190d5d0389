//! Output staging: once a job completes, its output files are copied back from its working
//! directory on the cluster it ran on (a co-allocated job's: the part's that wrote the file)
//! to its working directory on each output's cluster.
//! A workflow task's edge files (`files` on its edges) go the same way, to the working
//! directory each successor runs in, with the same record: its successors wait for the copy
//! as any `afterok` dependant does, and a failed copy cancels them.
//! The copy runs outside the lock ([`Effect::StageOutputs`]); its record on the job says
//! whether it is running, done, or failed and why, and survives a restart, which copies
//! again what it cut.

use super::{Effect, World};
use foresight_core::time::Time;
use foresight_core::JobId;
use foresight_store::{JobRecord, OutputRecord, StagingRecord};
use std::path::PathBuf;

/// What a completed job's copy moves: the fetches, each one's label (see
/// `World::output_plan`), and the places they go to.
type OutputPlan = (
    Vec<crate::staging::OutputFetch>,
    Vec<Option<String>>,
    Vec<String>,
);

impl World {
    /// Job `j`'s working directory on `cluster` (`None`: the service's own host): a
    /// cluster with its own `work_dir` runs a job not submitted to it in `WORK_DIR/job-ID`,
    /// and a workflow's tasks (placed there by the mapping, not by their owner) in
    /// `WORK_DIR/workflow-ID`, one directory its tasks on that cluster share, as tasks share
    /// their owner's directory elsewhere; everywhere else the job runs in the directory it
    /// names (by default the output directory, or its account's home directory).
    pub(super) fn work_dir_on(&self, j: &JobRecord, cluster: Option<&str>) -> PathBuf {
        if let Some(&(wf, _)) = self.task_of.get(&j.id) {
            let root = cluster
                .and_then(|c| self.cluster_index(c))
                .and_then(|k| self.clusters[k].cfg.work_dir.clone());
            if let Some(root) = root {
                return root.join(format!("workflow-{wf}"));
            }
        }
        let scratch = cluster
            .filter(|c| j.cluster.as_deref() != Some(*c))
            .and_then(|c| self.cluster_index(c))
            .and_then(|k| self.clusters[k].cfg.work_dir.clone());
        if let Some(root) = scratch {
            return root.join(format!("job-{}", j.id));
        }
        j.cwd.clone().map_or_else(
            || crate::accounts::default_cwd(&self.output_dir, &self.unix_account(&j.user).0),
            PathBuf::from,
        )
    }

    /// The fetches that bring `j`'s outputs back from the working directories its parts
    /// ran in (one per distinct directory, in part order: a co-allocated job's file is taken
    /// from the part that wrote it), then those that take a workflow task's edge files to
    /// its successors; each fetch's label (`None` for an output); and the names of the
    /// places they go to (a cluster, or `home` for the service's host), in that order.
    fn output_plan(&self, j: &JobRecord) -> OutputPlan {
        let mut dirs: Vec<PathBuf> = Vec::new();
        for p in &j.parts {
            let d = self.work_dir_on(j, Some(&p.cluster));
            if !dirs.contains(&d) {
                dirs.push(d);
            }
        }
        if dirs.is_empty() {
            return (Vec::new(), Vec::new(), Vec::new());
        }
        let mut fetches = Vec::new();
        let mut labels = Vec::new();
        let mut places: Vec<String> = Vec::new();
        for o in &j.outputs {
            let home = crate::staging::output_home(j, o);
            let to = self.work_dir_on(j, home.as_deref());
            let Some(f) = crate::staging::output_fetch(o, &dirs, &to) else {
                continue;
            };
            fetches.push(f);
            labels.push(None);
            let place = home.unwrap_or_else(|| "home".into());
            if !places.contains(&place) {
                places.push(place);
            }
        }
        for (f, label, place) in self.edge_fetches(j, &dirs) {
            fetches.push(f);
            labels.push(Some(label));
            if !places.contains(&place) {
                places.push(place);
            }
        }
        (fetches, labels, places)
    }

    /// The files `j`, a workflow task, leaves its successors on its edges (`files`), as
    /// fetches from the directories it ran in (`dirs`) to each successor's working directory
    /// on the successor's cluster, each with the edge and file it moves (for errors) and the
    /// successor's cluster; none where the successor runs in the same directory (the same
    /// cluster, or clusters sharing their `work_dir`), or has already ended.
    fn edge_fetches(
        &self,
        j: &JobRecord,
        dirs: &[PathBuf],
    ) -> Vec<(crate::staging::OutputFetch, String, String)> {
        let Some(&(w, i)) = self.task_of.get(&j.id) else {
            return Vec::new();
        };
        let Some(wf) = self.workflows.get(&w) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for e in wf
            .edges
            .iter()
            .filter(|e| e.from == i && !e.files.is_empty())
        {
            let Some(t) = wf.tasks.get(e.to) else {
                continue;
            };
            let Some(next) = self.jobs.get(&JobId(t.job)).filter(|n| !n.state.is_final()) else {
                continue;
            };
            let to = self.work_dir_on(next, Some(&t.cluster));
            for file in &e.files {
                let o = OutputRecord {
                    path: file.clone(),
                    cluster: None,
                };
                if let Some(f) = crate::staging::output_fetch(&o, dirs, &to) {
                    let label = format!("edge {} -> {}, file {file}", wf.tasks[i].name, t.name);
                    out.push((f, label, t.cluster.clone()));
                }
            }
        }
        out
    }

    /// The copy of `id`'s outputs to ask for, and the places it goes to (none: nothing to
    /// copy, the job ran where its outputs belong).
    fn output_copy(&self, id: JobId) -> Option<(Effect, Vec<String>)> {
        let j = self.jobs.get(&id)?;
        let (stage, labels, places) = self.output_plan(j);
        let unix_user = Some(self.unix_account(&j.user).0);
        let copy = Effect::StageOutputs {
            job: id.0,
            stage,
            labels,
            unix_user,
        };
        Some((copy, places))
    }

    /// A job completed: its outputs start their way back, if any must move. It stays
    /// `completed`; its reason says the copy is running until it ends.
    pub(super) fn copy_outputs(&mut self, now: Time, id: JobId) {
        let Some((copy, places)) = self.output_copy(id) else {
            return;
        };
        if places.is_empty() {
            return;
        }
        let to = places.join(",");
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        j.reason = Some(format!("copying its outputs to {to}"));
        j.output_staging = Some(StagingRecord {
            cluster: to,
            attempt: j.attempt,
            began_at: now.secs(),
            ended_at: None,
            error: None,
        });
        self.dirty_jobs.insert(id);
        self.effects.push(copy);
    }

    /// A restart found a job's outputs still being copied: the copy is made again from
    /// the start (each file is copied whole, so a second copy is harmless).
    pub(super) fn copy_outputs_again(&mut self, id: JobId) {
        if let Some((copy, _)) = self.output_copy(id) {
            self.effects.push(copy);
        }
    }

    /// The copy of job `id`'s outputs ended: done, or failed with the reason, which the
    /// job's reason then gives (its state stays `completed`: the job itself succeeded).
    /// Jobs that wait for it (`afterok`, `afterany`, `afternotok`, a workflow's successors)
    /// are decided now: a failed copy counts as not ok.
    pub fn outputs_copied(&mut self, now: Time, id: JobId, result: &Result<(), String>) {
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        let Some(s) = j.output_staging.as_mut() else {
            return;
        };
        s.ended_at = Some(now.secs());
        s.error = result.as_ref().err().cloned();
        j.reason = match result {
            Ok(()) => None,
            Err(e) => Some(format!("copying its outputs to {} failed: {e}", s.cluster)),
        };
        self.dirty_jobs.insert(id);
        self.wake_waiting(now);
    }
}
