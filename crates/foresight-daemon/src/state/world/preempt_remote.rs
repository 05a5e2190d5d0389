//! Preemption on clusters that schedule themselves (Slurm), as the broker asks it
//! (`foresight_core::broker` `preempt_ask`): the victims are stopped there through the
//! resource manager (`scontrol suspend`, or `scontrol requeue` for jobs that say they may be
//! requeued), all or none, and the answer goes back to the broker; resumptions likewise
//! (`scontrol resume`). A victim co-allocated over several clusters is stopped whole: each
//! part on a cluster that schedules itself through that cluster's resource manager (all or
//! none over them), each part on a cluster the service schedules itself by its executor
//! once the answer is yes; it resumes whole likewise.
//!
//! A restart of the service between ask and answer loses nobody: the ask changes no record
//! but reasons, so the waiting job is still pending in its record and is queued and served
//! again; a victim Slurm suspended whose answer was never recorded runs in its record, and
//! reconciliation resumes it at each cluster's first snapshot, every part of it
//! ([`World::stray_suspended`]);
//! a victim whose answer was recorded is back as suspended (its record's preemption) and is
//! resumed when there is room, as before the restart. A restart between the ask to resume a
//! victim and the answer leaves it suspended in its record while Slurm may run some parts:
//! reconciliation suspends each such part again at its cluster's first snapshot
//! ([`World::stray_running`]), and the victim is resumed whole when there is room.

use super::{Effect, World};
use foresight_core::broker::{Phase, Preemption};
use foresight_core::time::Time;
use foresight_core::ClusterId;
use foresight_core::JobId;
use foresight_rm::PartHandle;
use foresight_store::JobState;

impl World {
    /// The broker asks cluster `k` to stop `victims` so that job `by` can start there: every
    /// part of each victim on a cluster that schedules itself is stopped through its
    /// resource manager, all or none (a co-allocated victim runs synchronously: one part
    /// stopped means all stopped); its parts on clusters the service schedules itself are
    /// paused by their executor once the answer is yes ([`World::preemption_answered`]).
    pub(super) fn ask_preemption(
        &mut self,
        now: Time,
        by: JobId,
        k: ClusterId,
        victims: &[(JobId, Preemption)],
    ) {
        let name = self.clusters[k].cfg.name.clone();
        let mut parts = Vec::with_capacity(victims.len());
        for &(v, how) in victims {
            let Some(j) = self.jobs.get(&v) else {
                return self.preemption_answered(now, by, Err(format!("job {v} is unknown")));
            };
            let mut here = false;
            for p in j.parts.iter().filter(|p| !p.ended) {
                let Some(c) = self.cluster_index(&p.cluster) else {
                    continue;
                };
                if !self.clusters[c].kind.schedules_itself() {
                    continue;
                }
                here |= c == k;
                if p.external.is_none() {
                    return self.preemption_answered(
                        now,
                        by,
                        Err(format!(
                            "job {v} has no Slurm job id on {} yet",
                            self.clusters[c].cfg.name
                        )),
                    );
                }
                parts.push((
                    c,
                    PartHandle {
                        job: v.0,
                        attempt: j.attempt,
                        external: p.external.clone(),
                    },
                    how,
                ));
            }
            if !here {
                return self.preemption_answered(
                    now,
                    by,
                    Err(format!("job {v} has no running part on {name}")),
                );
            }
        }
        let list: Vec<String> = victims.iter().map(|(v, _)| v.to_string()).collect();
        if let Some(j) = self.jobs.get_mut(&by) {
            j.reason = Some(format!(
                "asking cluster {name} to preempt job(s) {} of lower priority",
                list.join(", ")
            ));
        }
        self.asked
            .preempt_victims
            .insert(by, victims.iter().map(|&(v, _)| v).collect());
        self.effects.push(Effect::Preempt {
            cluster: k,
            by,
            victims: parts,
        });
    }

    /// Cluster answered the preemption asked for job `by`: every victim stopped (`Ok`), or
    /// none (`Err`: why; any suspended meanwhile was resumed).
    pub fn preemption_answered(&mut self, now: Time, by: JobId, answer: Result<(), String>) {
        if let Err(why) = &answer {
            tracing::info!("preemption for job {by} refused: {why}");
        }
        self.asked.preempt_victims.remove(&by);
        if answer.is_ok() {
            self.asked.preempting.insert(by);
        }
        let mut out = Vec::new();
        self.broker
            .on_preemption_answered(now, by, answer, &mut out);
        self.carry_out(now, out);
        self.asked.preempting.remove(&by);
    }

    /// Cluster `k` requeued victim `v` of the preemption asked for job `by`, which failed
    /// on a later victim: a requeue cannot be undone, so `v` is recorded as preempted to
    /// run again (its Slurm job is cancelled, and it is queued again as its next attempt
    /// when that ends), while `by` waits as the refusal says.
    pub fn requeued_anyway(&mut self, now: Time, by: JobId, k: ClusterId, v: JobId) {
        tracing::info!(
            "job {v} was requeued on cluster {} before the preemption for job {by} failed: it \
             runs again",
            self.clusters[k].cfg.name
        );
        let mut out = Vec::new();
        self.broker.on_requeued_anyway(now, by, k, v, &mut out);
        self.carry_out(now, out);
    }

    /// The broker asks to resume suspended job `id` (cluster `k` is one it spans that
    /// schedules itself): every part of it on such a cluster is resumed through its
    /// resource manager, all or none; its parts on clusters the service schedules itself
    /// are continued by their executor once the answer is yes ([`World::resume_answered`]).
    pub(super) fn ask_resume(&mut self, now: Time, id: JobId, k: ClusterId) {
        let Some(j) = self.jobs.get(&id) else {
            return self.resume_answered(now, id, Err(format!("job {id} is unknown")));
        };
        let parts: Vec<(ClusterId, PartHandle)> = j
            .parts
            .iter()
            .filter(|p| !p.ended)
            .filter_map(|p| {
                let c = self.cluster_index(&p.cluster)?;
                self.clusters[c].kind.schedules_itself().then(|| {
                    (
                        c,
                        PartHandle {
                            job: id.0,
                            attempt: j.attempt,
                            external: p.external.clone(),
                        },
                    )
                })
            })
            .collect();
        if parts.is_empty() {
            let name = &self.clusters[k].cfg.name;
            return self.resume_answered(now, id, Err(format!("job {id} has no part on {name}")));
        }
        self.effects.push(Effect::ResumePart { job: id, parts });
    }

    /// Cluster answered the resumption of job `id`.
    pub fn resume_answered(&mut self, now: Time, id: JobId, answer: Result<(), String>) {
        if let Err(why) = &answer {
            tracing::info!("resuming job {id} refused: {why}");
        }
        let mut out = Vec::new();
        self.broker.on_resume_answered(now, id, answer, &mut out);
        self.carry_out(now, out);
    }

    /// True when the cluster's report that job `id`'s part there is suspended is news: its
    /// record neither says it is suspended (by its owner, or by preemption) nor is it a
    /// victim of a preemption asked and not yet answered. That is a preemption whose answer
    /// a restart lost: the part is resumed, and the job that asked is served again.
    pub(super) fn stray_suspended(&self, id: JobId) -> bool {
        !self.asked.preempt_victims.values().any(|v| v.contains(&id))
            && self
                .jobs
                .get(&id)
                .is_some_and(|j| j.state == JobState::Running && !j.suspended)
    }

    /// True when the cluster's report that job `id`'s part there runs is news: the broker
    /// has the job suspended by preemption and asked no resumption since (or a restart lost
    /// the answer to the one asked). The broker counts a suspended job's processors free and
    /// may have planned others onto them, so the part is suspended again rather than adopted
    /// as running: a stop only frees processors, while an adoption would take them back
    /// whatever was planned there meanwhile. The broker resumes it, every part together, once
    /// its mirrors show room, as for any suspended job.
    /// A report taken before the job was stopped (`taken_at` earlier) is old, not news.
    pub(super) fn stray_running(&self, id: JobId, taken_at: Time) -> bool {
        !self.broker.resumption_asked(id)
            && matches!(
                self.broker.entry(id).map(|e| &e.phase),
                Some(Phase::Suspended { since, .. }) if *since <= taken_at
            )
    }

    /// True when job `id` is suspended on cluster `k`, one that schedules itself: its
    /// reservation there is ended in the records only. Slurm refuses to delete a reservation
    /// a job is in, and releasing it would cancel the parts bound to it, the suspended one
    /// too; reconciliation releases it once no part of ours is in it.
    pub(super) fn suspended_in_rm(&self, k: ClusterId, id: JobId) -> bool {
        self.clusters
            .get(k.as_num())
            .is_some_and(|c| c.kind.schedules_itself())
            && matches!(
                self.broker.entry(id).map(|e| &e.phase),
                Some(Phase::Suspended { .. })
            )
    }

    /// True when a job of ours is suspended by preemption on cluster `k`, one that schedules
    /// itself: its cores are idle in Slurm, but its reservation there still holds them, so
    /// a reservation over them now must be made over suspended jobs.
    pub(super) fn suspended_on(&self, k: ClusterId) -> bool {
        let name = &self.clusters[k].cfg.name;
        self.clusters[k].kind.schedules_itself()
            && self.jobs.values().any(|j| {
                j.suspended
                    && j.parts.iter().any(|p| &p.cluster == name && !p.ended)
                    && self.suspended_in_rm(k, JobId(j.id))
            })
    }
}
