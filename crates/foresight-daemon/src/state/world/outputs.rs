//! Output staging: once a job completes, its output files are copied back from its working
//! directory on the cluster it ran on (a co-allocated job's: the part's that wrote the file)
//! to its working directory on each output's cluster.
//! A workflow task's edge files (`files` on its edges) go the same way, to the working
//! directory each successor runs in, in the same copy and record: its successors wait for
//! the copy as any `afterok` dependant does. The record keeps each edge's outcome
//! (`StagingRecord::edges`): a failed edge file cancels the successor of that edge only,
//! while a failed output of the job's own cancels every dependant.
//! The copy runs outside the lock ([`Effect::StageOutputs`]); its record on the job says
//! whether it is running, done, or failed and why, and survives a restart, which copies
//! again what it cut.

use super::{Effect, World};
use crate::state::staging::{FetchFailure, OutputFetch, Upload};
use foresight_core::time::Time;
use foresight_core::JobId;
use foresight_store::{EdgeCopyRecord, JobRecord, OutputRecord, StagingRecord};
use std::path::PathBuf;

/// What a completed job's copy moves: the fetches (see `World::output_plan`), the places
/// they go to, and the workflow edges whose files are among them.
type OutputPlan = (Vec<OutputFetch>, Vec<String>, Vec<EdgeCopyRecord>);

/// The directory under [`World::uploads_of`] that holds a part's files once they arrived.
pub(crate) const UPLOADED: &str = "files";

impl World {
    /// Job `j`'s working directory on `cluster` (`None`: the service's own host): a
    /// cluster with its own `work_dir` runs a job not submitted to it in `WORK_DIR/job-ID`,
    /// and a workflow's tasks (placed there by the mapping, not by their owner) in
    /// `WORK_DIR/workflow-ID`, one directory its tasks on that cluster share, as tasks share
    /// their owner's directory elsewhere; everywhere else the job runs in the directory it
    /// names (by default the output directory, or its account's home directory).
    pub(super) fn work_dir_on(&self, j: &JobRecord, cluster: Option<&str>) -> PathBuf {
        if let Some(c) = cluster.filter(|c| self.is_site(c)) {
            return self.uploads_of(c, j.id, j.attempt).join(UPLOADED);
        }
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
            || {
                crate::state::world::accounts::default_cwd(
                    &self.launch.output_dir,
                    &self.unix_account(&j.user).0,
                )
            },
            PathBuf::from,
        )
    }

    /// Whether `cluster` is a site's on another host (`kind = "site"`): a part there runs
    /// in a directory of the site's, and its files come up to the centre before they are
    /// copied anywhere.
    fn is_site(&self, cluster: &str) -> bool {
        self.cluster_index(cluster)
            .is_some_and(|k| self.clusters[k].cfg.site.is_some())
    }

    /// The root of [`World::uploads_of`].
    pub(crate) fn uploads_dir(&self) -> &std::path::Path {
        &self.launch.uploads_dir
    }

    /// Where the files part `(job, attempt)` on site cluster `cluster` sends up arrive: the
    /// centre's own directory, whose `files` holds them once each arrived whole and checked
    /// (and is then the job's account's), and where copies to the job's other places read
    /// them as from the part's working directory.
    pub(crate) fn uploads_of(&self, cluster: &str, job: u64, attempt: u32) -> PathBuf {
        self.launch
            .uploads_dir
            .join(cluster)
            .join(format!("{job}.{attempt}"))
    }

    /// Where the workflow edges' files for task `job` on site cluster `cluster` wait at the
    /// centre until its part is sent them as inputs (whatever its attempt then).
    pub(crate) fn edge_dir(&self, cluster: &str, job: u64) -> PathBuf {
        self.launch
            .uploads_dir
            .join(cluster)
            .join(format!("{job}.edges"))
    }

    /// The files of the workflow edges into task `id` that its part on site cluster
    /// `cluster` receives with its inputs, into its working directory `cwd` there: from
    /// [`World::edge_dir`], where its predecessors' copies put them. None elsewhere: there
    /// the copies put them in its working directory itself.
    pub(crate) fn edge_inputs(
        &self,
        id: JobId,
        cluster: &str,
        cwd: &std::path::Path,
    ) -> Vec<crate::state::staging::Copy> {
        let mut out = Vec::new();
        if !self.is_site(cluster) {
            return out;
        }
        let Some(&(w, i)) = self.task_of.get(&id.0) else {
            return out;
        };
        let Some(wf) = self.workflows.get(&w) else {
            return out;
        };
        let held = self.edge_dir(cluster, id.0);
        for e in wf.edges.iter().filter(|e| e.to == i) {
            for file in &e.files {
                out.push(crate::state::staging::Copy {
                    from: held.join(file),
                    to: cwd.join(file),
                    most: None,
                });
            }
        }
        out
    }

    /// The uploads the parts of `j` at sites must make before `stage` is copied: every
    /// file `stage` reads, asked of every such part (a co-allocated job's file is at one of
    /// them; the others leave it out).
    fn uploads(&self, j: &JobRecord, stage: &[OutputFetch]) -> Vec<Upload> {
        let mut files: Vec<String> = Vec::new();
        for f in stage {
            if !files.contains(&f.path) {
                files.push(f.path.clone());
            }
        }
        let mut out: Vec<Upload> = Vec::new();
        for p in j.parts.iter().filter(|p| self.is_site(&p.cluster)) {
            if files.is_empty() || out.iter().any(|u| u.cluster == p.cluster) {
                continue;
            }
            out.push(Upload {
                cluster: p.cluster.clone(),
                attempt: j.attempt,
                dir: self.uploads_of(&p.cluster, j.id, j.attempt),
                files: files.clone(),
            });
        }
        out
    }

    /// The fetches that bring `j`'s outputs back from the working directories its parts
    /// ran in (one per distinct directory, in part order: a co-allocated job's file is taken
    /// from the part that wrote it), then those that take a workflow task's edge files to
    /// its successors (labelled by edge); the names of the places they go to (a cluster, or
    /// `home` for the service's host), in that order; and the edges whose files move.
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
        let mut places: Vec<String> = Vec::new();
        for o in &j.outputs {
            let home = crate::state::staging::output_home(j, o);
            let to = self.work_dir_on(j, home.as_deref());
            let Some(f) = crate::state::staging::output_fetch(o, &dirs, &to) else {
                continue;
            };
            fetches.push(f);
            let place = home.unwrap_or_else(|| "home".into());
            if !places.contains(&place) {
                places.push(place);
            }
        }
        let (more, edges) = self.edge_fetches(j, &dirs);
        fetches.extend(more);
        for e in &edges {
            if !places.contains(&e.cluster) {
                places.push(e.cluster.clone());
            }
        }
        (fetches, places, edges)
    }

    /// The files `j`, a workflow task, leaves its successors on its edges (`files`), as
    /// fetches from the directories it ran in (`dirs`) to each successor's working directory
    /// on the successor's cluster, each labelled with its edge (`edge A -> B`), and the
    /// edges that have any; none where the successor runs in the same directory (the same
    /// cluster, or clusters sharing their `work_dir`), or has already ended.
    fn edge_fetches(
        &self,
        j: &JobRecord,
        dirs: &[PathBuf],
    ) -> (Vec<OutputFetch>, Vec<EdgeCopyRecord>) {
        let mut out = (Vec::new(), Vec::new());
        let Some(&(w, i)) = self.task_of.get(&j.id) else {
            return out;
        };
        let Some(wf) = self.workflows.get(&w) else {
            return out;
        };
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
            // A successor at a site receives them with its inputs, from where they wait.
            let to = if self.is_site(&t.cluster) {
                self.edge_dir(&t.cluster, t.job)
            } else {
                self.work_dir_on(next, Some(&t.cluster))
            };
            let label = format!("edge {} -> {}", wf.tasks[i].name, t.name);
            for file in &e.files {
                let o = OutputRecord {
                    path: file.clone(),
                    cluster: None,
                };
                if let Some(mut f) = crate::state::staging::output_fetch(&o, dirs, &to) {
                    f.label = Some(label.clone());
                    out.0.push(f);
                }
            }
            let moved = out
                .0
                .last()
                .is_some_and(|f| f.label.as_ref() == Some(&label));
            if moved && !out.1.iter().any(|r: &EdgeCopyRecord| r.label == label) {
                out.1.push(EdgeCopyRecord {
                    label,
                    job: t.job,
                    cluster: t.cluster.clone(),
                    error: None,
                });
            }
        }
        out
    }

    /// The copy of `id`'s outputs to ask for, the places it goes to (none: nothing to
    /// copy, the job ran where its outputs belong), and the edges whose files it moves.
    fn output_copy(&self, id: JobId) -> Option<(Effect, Vec<String>, Vec<EdgeCopyRecord>)> {
        let j = self.jobs.get(&id)?;
        let (stage, places, edges) = self.output_plan(j);
        let unix_user = Some(self.unix_account(&j.user).0);
        let uploads = self.uploads(j, &stage);
        let copy = Effect::StageOutputs {
            job: id.0,
            stage,
            unix_user,
            uploads,
        };
        Some((copy, places, edges))
    }

    /// A job completed: its outputs start their way back, if any must move. It stays
    /// `completed`; its reason says the copy is running until it ends.
    pub(super) fn copy_outputs(&mut self, now: Time, id: JobId) {
        let Some((copy, places, edges)) = self.output_copy(id) else {
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
            edges,
        });
        self.effects.push(copy);
    }

    /// A restart found a job's outputs still being copied: the copy is made again from
    /// the start (each file is copied whole, so a second copy is harmless).
    pub(super) fn copy_outputs_again(&mut self, id: JobId) {
        if let Some((copy, _, _)) = self.output_copy(id) {
            self.effects.push(copy);
        }
    }

    /// The copy of job `id`'s outputs ended: done, or failed with the reasons, which the
    /// job's reason then gives (its state stays `completed`: the job itself succeeded). A
    /// failure of a workflow edge's files is kept on that edge (a label the copy does not
    /// name as one of its edges counts as the job's own). Jobs that wait for it (`afterok`,
    /// `afterany`, `afternotok`, a workflow's successors) are decided now: a failed copy of
    /// the job's own outputs counts as not ok for all of them, a failed edge for its
    /// successor.
    pub fn outputs_copied(&mut self, now: Time, id: JobId, result: &Result<(), Vec<FetchFailure>>) {
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        let Some(s) = j.output_staging.as_mut() else {
            return;
        };
        s.ended_at = Some(now.secs());
        s.error = None;
        for e in &mut s.edges {
            e.error = None;
        }
        for f in result.as_ref().err().into_iter().flatten() {
            let edge = f
                .label
                .as_ref()
                .and_then(|l| s.edges.iter_mut().find(|e| &e.label == l));
            let error = match edge {
                Some(e) => &mut e.error,
                None => &mut s.error,
            };
            error.get_or_insert_with(|| f.error.clone());
        }
        let mut why: Vec<String> = s
            .error
            .iter()
            .map(|e| format!("copying its outputs to {} failed: {e}", s.cluster))
            .collect();
        let edges: Vec<&str> = s.edges.iter().filter_map(|e| e.error.as_deref()).collect();
        if !edges.is_empty() {
            why.push(format!("copying edge files failed: {}", edges.join("; ")));
        }
        j.reason = (!why.is_empty()).then(|| why.join("; "));
        self.wake_waiting(now);
    }
}
