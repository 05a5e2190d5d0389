//! Effects carried out: what the world asked for (start, kill, reserve, stage, move,
//! preempt) done on the resource managers, outside the world's lock, all or nothing where
//! a job spans clusters.

use crate::runtime::Service;
use crate::state::staging::{Copy, OutputFetch};
use crate::state::world::Effect;
use crate::state::world::MoveStep;
use foresight_core::broker::Preemption;
use foresight_core::{ClusterId, JobId, ReservationId};
use foresight_rm::{LaunchSpec, PartHandle, ReserveRequest, ResourceManager, Submission};
use foresight_store::JobState;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

impl Service {
    pub(crate) fn lock_ahead(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(u64, u32, ClusterId), AheadCopy>> {
        self.ahead.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The outcome of the copy made ahead for this part, once it ends; `None` when there is
    /// none running (never made, or lost to a restart).
    pub(crate) async fn ahead_outcome(
        &self,
        job: u64,
        attempt: u32,
        cluster: ClusterId,
    ) -> Option<Result<(), String>> {
        let mut outcome = self.lock_ahead().get(&(job, attempt, cluster)).cloned()?;
        let seen = outcome.wait_for(Option::is_some).await.ok()?.clone();
        seen
    }

    /// Phase one on a cluster that schedules itself: asks it to hold `request`; a refusal
    /// comes back as its text. Global jobs ([`Effect::Reserve`]) and reserved workflows
    /// both reserve through here.
    pub(crate) async fn reserve_on(
        &self,
        cluster: ClusterId,
        request: &foresight_rm::ReserveRequest,
    ) -> Result<(), String> {
        let answer = self.managers[cluster]
            .reserve(request)
            .await
            .map_err(|e| e.to_string());
        if let Err(e) = &answer {
            tracing::warn!("reservation {} refused: {e}", request.id);
        }
        answer
    }

    /// Carries out one effect: a plain call at once, anything that answers back in a task
    /// of its own, tracked so that shutdown can wait for it ([`Service::spawn_task`]).
    pub(crate) fn run_effect(self: &Arc<Self>, e: Effect) {
        let s = self.clone();
        match e {
            Effect::Launch {
                cluster,
                spec,
                stage,
            } => self.spawn_task(Self::launch(s, cluster, spec, stage)),
            Effect::StageOutputs {
                job,
                stage,
                unix_user,
                uploads,
            } => self.spawn_task(Self::stage_outputs(s, job, stage, unix_user, uploads)),
            Effect::Kill {
                cluster,
                job,
                attempt,
            } => {
                let part = PartHandle {
                    job: job.0,
                    attempt,
                    external: None,
                };
                self.spawn_call(cluster, "cancelling", part, |m, p| {
                    Box::pin(async move { m.cancel(&p).await })
                });
            }
            Effect::Pause {
                cluster,
                job,
                attempt,
                stop,
            } => {
                let part = PartHandle {
                    job: job.0,
                    attempt,
                    external: None,
                };
                self.pause_part(cluster, part, stop);
            }
            Effect::Control {
                cluster,
                part,
                stop,
            } => self.pause_part(cluster, part, stop),
            Effect::Cancel { cluster, part } => {
                self.spawn_call(cluster, "cancelling", part, |m, p| {
                    Box::pin(async move { m.cancel(&p).await })
                });
            }
            Effect::Reserve { cluster, request } => {
                self.spawn_task(Self::reserve(s, cluster, request))
            }
            Effect::ReserveOverSuspended { cluster, request } => {
                self.spawn_task(Self::reserve_over_suspended(s, cluster, request))
            }
            Effect::Preempt { by, victims, .. } => self.spawn_task(Self::preempt(s, by, victims)),
            Effect::ResumePart { job, parts } => self.spawn_task(Self::resume(s, job, parts)),
            Effect::Move { job, steps } => self.spawn_task(Self::move_reserved(s, job, steps)),
            Effect::Release {
                cluster,
                reservation,
            } => self.spawn_task(Self::release(s, cluster, reservation)),
            Effect::StageAhead {
                cluster,
                job,
                attempt,
                stage,
                unix_user,
            } => {
                // Registered before the part's launch can look for it.
                let (tell, outcome) = tokio::sync::watch::channel(None);
                self.lock_ahead().insert((job, attempt, cluster), outcome);
                self.spawn_task(Self::stage_ahead(
                    s, cluster, job, attempt, stage, unix_user, tell,
                ))
            }
            Effect::Submit {
                cluster,
                submission,
                stage,
            } => self.spawn_task(Self::submit_part(s, cluster, submission, stage)),
        }
    }

    /// [`Effect::Launch`]: the part's working directory made and its inputs staged (or the
    /// copy made ahead awaited), then its process started by the cluster's executor.
    async fn launch(s: Arc<Self>, cluster: ClusterId, spec: LaunchSpec, stage: Vec<Copy>) {
        let (job, attempt) = (spec.job, spec.attempt);
        s.make_work_dir(cluster, &spec.cwd, spec.unix_user.as_deref())
            .await;
        if !stage.is_empty() {
            let result = match s.ahead_outcome(job, attempt, cluster).await {
                Some(Ok(())) => Ok(()),
                // Failed ahead, or lost to a restart: copied now.
                _ => {
                    s.stage_inputs(cluster, (job, attempt), &stage, spec.unix_user.as_deref())
                        .await
                }
            };
            if let Err(e) = &result {
                tracing::warn!(job, cluster = cluster.as_num(), "staging input failed: {e}");
            }
            let go = s
                .world()
                .staged(s.now(), cluster, JobId(job), attempt, result);
            if !go {
                s.wake.notify_one();
                s.flush().await;
                return;
            }
            s.flush().await;
        }
        if let Some(dir) = spec.stdout.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let submission = Submission {
            spec,
            reservation: None,
            begin: None,
        };
        match s.managers[cluster].submit(&submission).await {
            Ok(handle) => {
                // Cancelled while starting: stop it now.
                let cancelled = s.world().jobs.get(&JobId(job)).is_some_and(|j| {
                    j.attempt != attempt || j.state_after == Some(JobState::Cancelled)
                });
                if cancelled {
                    let _ = s.managers[cluster].cancel(&handle).await;
                }
            }
            Err(err) => {
                let now = s.now();
                let again = s.world().start_failed(
                    now,
                    cluster,
                    JobId(job),
                    attempt,
                    &err.to_string(),
                    err.is_transient(),
                );
                if again {
                    tracing::warn!(
                        job,
                        cluster = cluster.as_num(),
                        "start failed, requeued: {err}"
                    );
                } else {
                    tracing::warn!(
                        job,
                        cluster = cluster.as_num(),
                        "start failed, the job failed: {err}"
                    );
                }
                s.wake.notify_one();
                s.flush().await;
            }
        }
    }

    /// [`Effect::StageOutputs`]: a job's outputs copied back to their clusters.
    async fn stage_outputs(
        s: Arc<Self>,
        job: u64,
        stage: Vec<OutputFetch>,
        unix_user: Option<String>,
        uploads: Vec<crate::state::staging::Upload>,
    ) {
        let mut came = s.prepare_edge_dirs(&stage, unix_user.as_deref());
        for u in &uploads {
            if came.is_err() {
                break;
            }
            came = s.bring_up(job, u, unix_user.as_deref()).await;
        }
        let came =
            came.map_err(|error| vec![crate::state::staging::FetchFailure { label: None, error }]);
        let result = match came {
            Ok(()) => {
                crate::runtime::staging::stage_within(
                    &stage,
                    unix_user.as_deref(),
                    s.copy_timeout(),
                )
                .await
            }
            Err(e) => Err(e),
        };
        // What came up is copied: gone. After a failure it stays, so that a copy made
        // again (after a restart) resumes what was cut.
        if result.is_ok() {
            for u in &uploads {
                let _ = tokio::fs::remove_dir_all(&u.dir).await;
            }
        }
        for f in result.as_ref().err().into_iter().flatten() {
            tracing::warn!(job, "copying outputs back failed: {}", f.error);
        }
        s.world().outputs_copied(s.now(), JobId(job), &result);
        // Jobs that waited for the copy may go now.
        s.wake.notify_one();
        s.flush().await;
    }

    /// [`Effect::Reserve`]: phase one of a reservation on a cluster that schedules itself.
    async fn reserve(s: Arc<Self>, cluster: ClusterId, request: ReserveRequest) {
        let answer = s.reserve_on(cluster, &request).await;
        s.world()
            .reservation_answered(s.now(), ReservationId(request.id), answer);
        s.wake.notify_one();
        s.flush().await;
    }

    /// [`Effect::ReserveOverSuspended`]: a reservation over the processors of suspended jobs.
    async fn reserve_over_suspended(s: Arc<Self>, cluster: ClusterId, request: ReserveRequest) {
        let answer = s.managers[cluster]
            .reserve_over_suspended(&request)
            .await
            .map_err(|e| e.to_string());
        if let Err(e) = &answer {
            tracing::warn!("reservation {} refused: {e}", request.id);
        }
        s.world()
            .reservation_answered(s.now(), ReservationId(request.id), answer);
        s.wake.notify_one();
        s.flush().await;
    }

    /// [`Effect::Preempt`]: the victims of a preemption stopped, all or none.
    async fn preempt(s: Arc<Self>, by: JobId, victims: Vec<(ClusterId, PartHandle, Preemption)>) {
        let (answer, requeued) = preempt_all(&s.managers, &s.cluster_names(), &victims).await;
        {
            let mut w = s.world();
            let now = s.now();
            let refused = answer.is_err();
            w.preemption_answered(now, by, answer);
            if refused {
                for (k, v) in requeued {
                    w.requeued_anyway(now, by, k, JobId(v));
                }
            }
        }
        s.wake.notify_one();
        s.flush().await;
    }

    /// [`Effect::ResumePart`]: a preempted job's parts resumed, all or none.
    async fn resume(s: Arc<Self>, job: JobId, parts: Vec<(ClusterId, PartHandle)>) {
        let answer = resume_all(&s.managers, &s.cluster_names(), &parts).await;
        s.world().resume_answered(s.now(), job, answer);
        s.wake.notify_one();
        s.flush().await;
    }

    /// [`Effect::Move`]: a reserved job's reservations moved, all or none.
    async fn move_reserved(s: Arc<Self>, job: JobId, steps: Vec<MoveStep>) {
        let answer = move_all(&s.managers, &steps).await;
        s.world().move_answered(s.now(), job, answer);
        s.wake.notify_one();
        s.flush().await;
    }

    /// [`Effect::Release`]: a reservation given back to its cluster.
    async fn release(s: Arc<Self>, cluster: ClusterId, reservation: ReservationId) {
        if let Err(e) = s.managers[cluster].release(reservation.0).await {
            // Released again when the cluster is next reconciled.
            tracing::warn!("releasing reservation {reservation}: {e}");
        }
    }

    /// [`Effect::StageAhead`]: a reserved part's inputs copied ahead of its start; its
    /// launch waits for `tell`.
    async fn stage_ahead(
        s: Arc<Self>,
        cluster: ClusterId,
        job: u64,
        attempt: u32,
        stage: Vec<Copy>,
        unix_user: Option<String>,
        tell: tokio::sync::watch::Sender<Option<Result<(), String>>>,
    ) {
        let result = s
            .stage_inputs(cluster, (job, attempt), &stage, unix_user.as_deref())
            .await;
        if let Err(e) = &result {
            tracing::warn!(
                job,
                cluster = cluster.as_num(),
                "staging input ahead failed: {e}"
            );
        }
        s.world()
            .staged_ahead(s.now(), cluster, JobId(job), attempt, &result);
        let _ = tell.send(Some(result));
        s.lock_ahead().remove(&(job, attempt, cluster));
        s.flush().await;
    }

    /// [`Effect::Submit`]: a part submitted to a cluster that schedules itself, its inputs
    /// staged first.
    async fn submit_part(
        s: Arc<Self>,
        cluster: ClusterId,
        submission: Submission,
        stage: Vec<Copy>,
    ) {
        s.make_work_dir(
            cluster,
            &submission.spec.cwd,
            submission.spec.unix_user.as_deref(),
        )
        .await;
        if !stage.is_empty() {
            let (job, attempt) = (submission.spec.job, submission.spec.attempt);
            s.world()
                .staging_began(s.now(), cluster, JobId(job), attempt);
            let result = if s.cfg.cluster[cluster].cluster_kind().shares_files() {
                s.stage_inputs(
                    cluster,
                    (job, attempt),
                    &stage,
                    submission.spec.unix_user.as_deref(),
                )
                .await
            } else if let Err(e) = s.refuse_remote_inputs(job, &stage) {
                Err(e)
            } else {
                // A copy made here would report success for a file the part never sees: the
                // cluster's host fetches them.
                s.send_inputs(
                    cluster,
                    (job, attempt),
                    (&stage, &submission.spec.cwd),
                    submission.spec.unix_user.as_deref(),
                )
                .await
            };
            let go = s
                .world()
                .remote_staged(s.now(), cluster, JobId(job), attempt, result);
            if !go {
                s.wake.notify_one();
                s.flush().await;
                return;
            }
        }
        if let Some(dir) = submission.spec.stdout.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let (job, attempt) = (submission.spec.job, submission.spec.attempt);
        let answer = s.managers[cluster]
            .submit(&submission)
            .await
            .map_err(|e| (e.to_string(), e.is_unreachable()));
        if let Err((e, _)) = &answer {
            tracing::warn!("submitting job {job} to cluster {cluster}: {e}");
        }
        s.world()
            .part_submitted(s.now(), cluster, JobId(job), attempt, answer);
        s.wake.notify_one();
        s.flush().await;
    }

    /// How long one copy of a job's files, inputs or outputs, may take.
    pub(crate) fn copy_timeout(&self) -> Duration {
        Duration::from_secs(self.cfg.copy_timeout_seconds)
    }

    /// Makes a part's working directory when it lies in its cluster's own `work_dir` (no
    /// one else makes it), as the job's account, within `copy_timeout_seconds`. A failure
    /// is only logged: the part then fails to start in it, with the resource manager's
    /// reason.
    pub(crate) async fn make_work_dir(
        &self,
        cluster: ClusterId,
        cwd: &std::path::Path,
        account: Option<&str>,
    ) {
        let ours = self.cfg.cluster[cluster]
            .work_dir
            .as_ref()
            .is_some_and(|w| cwd.starts_with(w));
        if ours {
            if let Err(e) =
                crate::runtime::staging::make_dir(cwd, account, self.copy_timeout()).await
            {
                tracing::warn!(
                    cluster = cluster.as_num(),
                    "making the working directory: {e}"
                );
            }
        }
    }

    pub(crate) fn pause_part(
        self: &Arc<Self>,
        cluster: ClusterId,
        part: foresight_rm::PartHandle,
        stop: bool,
    ) {
        if stop {
            self.spawn_call(cluster, "suspending", part, |m, p| {
                Box::pin(async move { m.suspend(&p).await })
            });
        } else {
            self.spawn_call(cluster, "resuming", part, |m, p| {
                Box::pin(async move { m.resume(&p).await })
            });
        }
    }

    /// Runs one call on a cluster's resource manager in the background, logging a failure.
    pub(crate) fn spawn_call(
        self: &Arc<Self>,
        cluster: ClusterId,
        what: &'static str,
        part: foresight_rm::PartHandle,
        call: impl FnOnce(Arc<dyn ResourceManager>, foresight_rm::PartHandle) -> ManagerCall
            + Send
            + 'static,
    ) {
        let manager = self.managers[cluster].clone();
        self.spawn_task(async move {
            let job = part.job;
            if let Err(e) = call(manager, part).await {
                tracing::warn!("{what} job {job}: {e}");
            }
        });
    }
}

/// The outcome of a copy made ahead of a job's start, once it is known.
pub(crate) type AheadCopy = tokio::sync::watch::Receiver<Option<Result<(), String>>>;

pub(crate) type ManagerCall =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), foresight_rm::RmError>> + Send>>;

/// Does `run` to each of `steps` in order, all or none: when one fails, the steps done before
/// it are taken back, last first, by `undo` (which logs an undo that fails in its turn), and
/// the answer names the failing step by its index and carries the resource manager's error. A
/// step whose `undo` is `None` cannot be taken back (a requeue) and stays done.
pub(crate) async fn all_or_none<'a, S, R, RF, U, UF>(
    steps: &'a [S],
    run: R,
    undo: U,
) -> Result<(), (usize, foresight_rm::RmError)>
where
    R: Fn(&'a S) -> RF,
    RF: std::future::Future<Output = Result<(), foresight_rm::RmError>>,
    U: Fn(&'a S) -> Option<UF>,
    UF: std::future::Future<Output = ()>,
{
    for (i, step) in steps.iter().enumerate() {
        if let Err(e) = run(step).await {
            for done in steps[..i].iter().rev() {
                if let Some(back) = undo(done) {
                    back.await;
                }
            }
            return Err((i, e));
        }
    }
    Ok(())
}

/// Stops every part of `victims` (each on its cluster: a co-allocated victim has one per
/// cluster), suspends first, then requeues (which cannot be undone), all or none: when one
/// fails, the parts suspended so far are resumed, on every cluster, and the error names the
/// part and its cluster and quotes the resource manager. Also the jobs requeued (with the
/// cluster), which on an error the caller records as requeued all the same
/// ([`World::requeued_anyway`](crate::state::world::World::requeued_anyway)).
pub(crate) async fn preempt_all(
    managers: &[Arc<dyn ResourceManager>],
    names: &[String],
    victims: &[(ClusterId, foresight_rm::PartHandle, Preemption)],
) -> (Result<(), String>, Vec<(ClusterId, u64)>) {
    let mut order: Vec<&(ClusterId, foresight_rm::PartHandle, Preemption)> =
        victims.iter().collect();
    order.sort_by_key(|(_, _, how)| *how == Preemption::Requeue);
    let stopped = all_or_none(
        &order,
        |&&(k, ref part, how)| async move {
            match how {
                Preemption::Suspend => managers[k].suspend(part).await,
                Preemption::Requeue => managers[k].requeue(part).await,
            }
        },
        // A requeued part has been put back in its queue: nothing resumes it.
        |&&(k, ref part, how)| {
            (how == Preemption::Suspend).then_some(async move {
                if let Err(undo) = managers[k].resume(part).await {
                    tracing::warn!(
                        "resuming job {} on cluster {} after a refused preemption: {undo}",
                        part.job,
                        names[k]
                    );
                }
            })
        },
    )
    .await;
    let done = match &stopped {
        Ok(()) => &order[..],
        Err((i, _)) => &order[..*i],
    };
    let requeued = done
        .iter()
        .filter(|(_, _, how)| *how == Preemption::Requeue)
        .map(|(k, part, _)| (*k, part.job))
        .collect();
    let answer = stopped.map_err(|(i, e)| {
        let (k, part, _) = order[i];
        format!("stopping job {} on {}: {e}", part.job, names[*k])
    });
    (answer, requeued)
}

/// Resumes every part of a suspended job (each on its cluster), all or none: when one
/// fails, the parts resumed so far are suspended again and the error names the part and
/// its cluster and quotes the resource manager.
pub(crate) async fn resume_all(
    managers: &[Arc<dyn ResourceManager>],
    names: &[String],
    parts: &[(ClusterId, foresight_rm::PartHandle)],
) -> Result<(), String> {
    all_or_none(
        parts,
        |(k, part)| managers[*k].resume(part),
        |(k, part)| {
            Some(async move {
                if let Err(undo) = managers[*k].suspend(part).await {
                    tracing::warn!(
                        "suspending job {} on cluster {} again after a refused resumption: {undo}",
                        part.job,
                        names[*k]
                    );
                }
            })
        },
    )
    .await
    .map_err(|(i, e)| {
        let (k, part) = &parts[i];
        format!("resuming job {} on {}: {e}", part.job, names[*k])
    })
}

/// Carries out an [`Effect::Move`]: each step in order; when one fails, the steps before it
/// are moved back (a cluster's own step undoes itself), so that the job's reservations move
/// together or stay where they were.
pub(crate) async fn move_all(
    managers: &[Arc<dyn ResourceManager>],
    steps: &[crate::state::world::MoveStep],
) -> Result<(), String> {
    all_or_none(
        steps,
        |step| managers[step.cluster].move_reservation(&step.to, step.part.as_ref()),
        |done| {
            Some(async move {
                let back = managers[done.cluster].move_reservation(&done.back, done.part.as_ref());
                if let Err(undo) = back.await {
                    tracing::warn!(
                        "putting back reservation {} on cluster {}: {undo}",
                        done.back.id,
                        done.cluster
                    );
                }
            })
        },
    )
    .await
    .map_err(|(i, e)| format!("reservation {}: {e}", steps[i].to.id))
}

#[cfg(test)]
mod move_tests {
    use super::*;
    use crate::state::world::MoveStep;
    use async_trait::async_trait;
    use foresight_rm::{ClusterState, PartHandle, ReserveRequest, RmError, Submission};
    use std::sync::Mutex;

    /// A cluster that records the windows it moves reservations to, refusing one start.
    #[derive(Debug, Default)]
    struct Recorder {
        refuse_start: Option<i64>,
        moves: Mutex<Vec<(u64, i64)>>,
        /// Refuses to stop (suspend or requeue) any part.
        refuse_stop: bool,
        /// Refuses to resume any part.
        refuse_resume: bool,
        /// What was asked of its parts: ("suspend" | "resume" | "requeue", Slurm id).
        calls: Mutex<Vec<(&'static str, String)>>,
    }

    impl Recorder {
        fn call(&self, what: &'static str, part: &PartHandle) -> Result<(), RmError> {
            let refused = if what == "resume" {
                self.refuse_resume
            } else {
                self.refuse_stop
            };
            if refused {
                return Err(RmError::Invalid("Access/permission denied".into()));
            }
            let id = part.external.clone().unwrap_or_default();
            self.calls.lock().unwrap().push((what, id));
            Ok(())
        }
    }

    #[async_trait]
    impl ResourceManager for Recorder {
        fn kind(&self) -> &'static str {
            "recorder"
        }
        fn scheduled_by_foresight(&self) -> bool {
            false
        }
        async fn snapshot(&self) -> Result<ClusterState, RmError> {
            Err(RmError::Invalid("unused".into()))
        }
        async fn estimate_start(&self, _: u32, _: i64) -> Result<Option<i64>, RmError> {
            Ok(None)
        }
        async fn reserve(&self, _: &ReserveRequest) -> Result<(), RmError> {
            Ok(())
        }
        async fn release(&self, _: u64) -> Result<(), RmError> {
            Ok(())
        }
        async fn submit(&self, _: &Submission) -> Result<PartHandle, RmError> {
            Err(RmError::Invalid("unused".into()))
        }
        async fn cancel(&self, _: &PartHandle) -> Result<(), RmError> {
            Ok(())
        }
        async fn suspend(&self, part: &PartHandle) -> Result<(), RmError> {
            self.call("suspend", part)
        }
        async fn resume(&self, part: &PartHandle) -> Result<(), RmError> {
            self.call("resume", part)
        }
        async fn requeue(&self, part: &PartHandle) -> Result<(), RmError> {
            self.call("requeue", part)
        }
        async fn move_reservation(
            &self,
            to: &ReserveRequest,
            _: Option<&PartHandle>,
        ) -> Result<(), RmError> {
            if Some(to.start) == self.refuse_start {
                return Err(RmError::Invalid("busy".into()));
            }
            self.moves.lock().unwrap().push((to.id, to.start));
            Ok(())
        }
    }

    fn step(cluster: ClusterId, id: u64, from: i64, to: i64) -> MoveStep {
        let req = |start: i64| ReserveRequest {
            id,
            start,
            end: start + 60,
            procs: 2,
        };
        MoveStep {
            cluster,
            to: req(to),
            back: req(from),
            part: None,
        }
    }

    /// All parts move, or those moved before a refusal are moved back.
    #[tokio::test]
    async fn a_move_is_all_or_nothing_across_clusters() {
        let ok = Arc::new(Recorder::default());
        let refusing = Arc::new(Recorder {
            refuse_start: Some(10),
            ..Recorder::default()
        });
        let managers: Vec<Arc<dyn ResourceManager>> = vec![ok.clone(), refusing.clone()];
        let steps = [
            step(ClusterId(0), 1, 100, 10),
            step(ClusterId(1), 2, 100, 10),
        ];
        let e = move_all(&managers, &steps).await.unwrap_err();
        assert!(e.contains("reservation 2") && e.contains("busy"), "{e}");
        assert_eq!(*ok.moves.lock().unwrap(), vec![(1, 10), (1, 100)]);
        assert!(refusing.moves.lock().unwrap().is_empty());
        let steps = [
            step(ClusterId(0), 1, 100, 20),
            step(ClusterId(1), 2, 100, 20),
        ];
        move_all(&managers, &steps).await.unwrap();
        assert_eq!(ok.moves.lock().unwrap().last(), Some(&(1, 20)));
        assert_eq!(*refusing.moves.lock().unwrap(), vec![(2, 20)]);
    }

    fn part(id: &str) -> PartHandle {
        PartHandle {
            job: 1,
            attempt: 0,
            external: Some(id.into()),
        }
    }

    /// A co-allocated victim's parts on two clusters: c1 suspends its part, c2 refuses, so
    /// c1's part is resumed and the refusal names the part, its cluster and the resource
    /// manager's words. On two clusters that agree, both are stopped, and a resumption
    /// refused on the second suspends the first again.
    #[tokio::test]
    async fn a_preemption_over_two_clusters_is_all_or_nothing() {
        let c1 = Arc::new(Recorder::default());
        let c2 = Arc::new(Recorder {
            refuse_stop: true,
            ..Recorder::default()
        });
        let managers: Vec<Arc<dyn ResourceManager>> = vec![c1.clone(), c2.clone()];
        let names = vec!["c1".to_string(), "c2".to_string()];
        let victims = [
            (ClusterId(0), part("51"), Preemption::Suspend),
            (ClusterId(1), part("52"), Preemption::Suspend),
        ];
        let (answer, requeued) = preempt_all(&managers, &names, &victims).await;
        let e = answer.unwrap_err();
        assert!(
            e.contains("job 1 on c2") && e.contains("Access/permission denied"),
            "{e}"
        );
        assert!(requeued.is_empty());
        assert_eq!(
            *c1.calls.lock().unwrap(),
            vec![("suspend", "51".to_string()), ("resume", "51".to_string())]
        );
        assert!(c2.calls.lock().unwrap().is_empty());

        let c2 = Arc::new(Recorder::default());
        let managers: Vec<Arc<dyn ResourceManager>> = vec![c1.clone(), c2.clone()];
        c1.calls.lock().unwrap().clear();
        let (answer, _) = preempt_all(&managers, &names, &victims).await;
        answer.unwrap();
        assert_eq!(
            *c1.calls.lock().unwrap(),
            vec![("suspend", "51".to_string())]
        );
        assert_eq!(
            *c2.calls.lock().unwrap(),
            vec![("suspend", "52".to_string())]
        );

        // Resumed together: a refusal on c2 suspends c1's part again.
        let refusing = Arc::new(Recorder {
            refuse_resume: true,
            ..Recorder::default()
        });
        let managers: Vec<Arc<dyn ResourceManager>> = vec![c1.clone(), refusing.clone()];
        c1.calls.lock().unwrap().clear();
        let parts = [(ClusterId(0), part("51")), (ClusterId(1), part("52"))];
        let e = resume_all(&managers, &names, &parts).await.unwrap_err();
        assert!(e.contains("job 1 on c2"), "{e}");
        assert_eq!(
            *c1.calls.lock().unwrap(),
            vec![("resume", "51".to_string()), ("suspend", "51".to_string())]
        );
    }
}
