//! [`LocalCluster`]: a cluster run by the local executor, as a [`ResourceManager`]. Here
//! Foresight itself is the resource manager: the service's own local scheduler decides when
//! each part starts and holds the cluster's reservations, and this manager only runs,
//! signals and reports processes (`scheduled_by_foresight() == true`).

use crate::clock::unix_seconds;
use crate::executor::LocalExecutor;
use crate::layout::{AttemptDir, SPEC, SUPERVISOR_PID, SUSPENDED};
use crate::manager::{
    ClusterState, PartHandle, ReserveRequest, ResourceManager, RmError, RmJob, RmJobState,
    Submission,
};
use crate::spec::Outcome;
use crate::ExecError;
use async_trait::async_trait;
use std::path::Path;
use std::time::UNIX_EPOCH;

/// How long an attempt may have a directory without a supervisor pid before it counts as lost
/// rather than still being launched (the executor's handshake gives up after 10 s).
const LAUNCH_GRACE_SECS: i64 = 30;

/// A cluster of `processors` processors whose jobs are local processes of a [`LocalExecutor`].
/// Cheap to clone.
#[derive(Clone, Debug)]
pub struct LocalCluster {
    name: String,
    processors: u32,
    executor: LocalExecutor,
}

impl LocalCluster {
    /// The cluster `name` of `processors` processors, running its parts with `executor`.
    pub fn new(name: impl Into<String>, processors: u32, executor: LocalExecutor) -> LocalCluster {
        LocalCluster {
            name: name.into(),
            processors,
            executor,
        }
    }

    /// The cluster's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The executor.
    pub fn executor(&self) -> &LocalExecutor {
        &self.executor
    }
}

#[async_trait]
impl ResourceManager for LocalCluster {
    fn kind(&self) -> &'static str {
        "local"
    }

    fn scheduled_by_foresight(&self) -> bool {
        true
    }

    /// The configured processors and every attempt under the executor's root, read from its
    /// files without side effects (nothing is adopted, signalled or recorded): ended →
    /// [`RmJobState::Ended`] with its outcome; a live supervisor → running (suspended while
    /// marked so); a supervisor gone without an outcome → ended with an error (the executor
    /// records the same when it settles it); no supervisor yet → pending (being launched).
    /// `external` is `JOB.ATTEMPT`. No reservations: the service's own local scheduler holds a
    /// local cluster's reservations.
    async fn snapshot(&self) -> Result<ClusterState, RmError> {
        let executor = self.executor.clone();
        let processors = self.processors;
        let read = tokio::task::spawn_blocking(move || -> Result<ClusterState, RmError> {
            let taken_at = unix_seconds();
            let user = crate::slurm::effective_user_name()
                .unwrap_or_else(|_| nix::unistd::geteuid().to_string());
            let mut jobs = Vec::new();
            for (job, attempt) in executor.attempts()? {
                let dir = AttemptDir::new(executor.root(), job, attempt);
                if let Some(j) = attempt_job(&dir, &user, taken_at)? {
                    jobs.push(j);
                }
            }
            Ok(ClusterState {
                taken_at,
                processors,
                jobs,
                reservations: Vec::new(),
            })
        });
        read.await.map_err(|e| {
            RmError::Invalid(format!("local cluster {}: snapshot failed: {e}", self.name))
        })?
    }

    /// `None`: the service's own forecast is the only opinion about a local cluster.
    async fn estimate_start(&self, _procs: u32, _walltime: i64) -> Result<Option<i64>, RmError> {
        Ok(None)
    }

    /// Nothing to do: the service's own local scheduler holds a local cluster's reservations.
    async fn reserve(&self, _req: &ReserveRequest) -> Result<(), RmError> {
        Ok(())
    }

    /// Nothing to do, as for [`reserve`](Self::reserve).
    async fn release(&self, _reservation: u64) -> Result<(), RmError> {
        Ok(())
    }

    /// Launches the part now ([`LocalExecutor::launch`]): the service submits a local part
    /// when its scheduler starts it, so the submission's reservation and begin time have
    /// already been honoured and are not looked at here.
    async fn submit(&self, sub: &Submission) -> Result<PartHandle, RmError> {
        self.executor.launch(&sub.spec).await?;
        Ok(PartHandle {
            job: sub.spec.job,
            attempt: sub.spec.attempt,
            external: None,
        })
    }

    /// [`LocalExecutor::cancel`].
    async fn cancel(&self, part: &PartHandle) -> Result<(), RmError> {
        Ok(self.executor.cancel(part.job, part.attempt)?)
    }

    /// [`LocalExecutor::suspend`].
    async fn suspend(&self, part: &PartHandle) -> Result<(), RmError> {
        Ok(self.executor.suspend(part.job, part.attempt)?)
    }

    /// [`LocalExecutor::resume`].
    async fn resume(&self, part: &PartHandle) -> Result<(), RmError> {
        Ok(self.executor.resume(part.job, part.attempt)?)
    }

    /// Cancels the attempt: the executor never runs an attempt twice, so the service requeues
    /// a local part by launching attempt + 1 itself when its scheduler starts it again.
    async fn requeue(&self, part: &PartHandle) -> Result<(), RmError> {
        self.cancel(part).await
    }
}

/// One attempt as an [`RmJob`]; `None` when its directory vanished meanwhile.
fn attempt_job(dir: &AttemptDir, user: &str, now: i64) -> Result<Option<RmJob>, RmError> {
    let spec = match dir.read_spec() {
        Ok(spec) => spec,
        Err(_) if !dir.path.is_dir() => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let submitted_at = mtime(&dir.file(SPEC)).unwrap_or(now);
    let started_at = dir.read_job().ok().flatten().map(|p| p.started_at);
    let (state, start) = match attempt_state(dir, submitted_at, now)? {
        RmJobState::Ended(outcome) => {
            let start = Some(outcome.started_at);
            (RmJobState::Ended(outcome), start)
        }
        other => (other, started_at),
    };
    Ok(Some(RmJob {
        external: format!("{}.{}", dir.job, dir.attempt),
        foresight: Some((dir.job, dir.attempt)),
        user: user.to_owned(),
        state,
        procs: u32::try_from(spec.processors.len()).unwrap_or(u32::MAX),
        time_limit: (spec.walltime_secs > 0)
            .then(|| i64::try_from(spec.walltime_secs).unwrap_or(i64::MAX)),
        submitted_at,
        start,
        priority: 0,
        reservation: None,
    }))
}

/// Where an attempt is, from its files only (what [`LocalExecutor::adopt`] finds, without
/// starting a watcher).
fn attempt_state(dir: &AttemptDir, submitted_at: i64, now: i64) -> Result<RmJobState, ExecError> {
    if let Some(outcome) = dir.read_status()? {
        return Ok(RmJobState::Ended(outcome));
    }
    let alive = dir
        .read_supervisor_pid()?
        .is_some_and(|pid| dir.supervisor_alive(pid));
    // It may have recorded its outcome between our looks.
    if let Some(outcome) = dir.read_status()? {
        return Ok(RmJobState::Ended(outcome));
    }
    if alive {
        return Ok(if dir.has(SUSPENDED) {
            RmJobState::Suspended
        } else {
            RmJobState::Running
        });
    }
    if !dir.has(SUPERVISOR_PID) && now - submitted_at < LAUNCH_GRACE_SECS {
        return Ok(RmJobState::Pending);
    }
    let started_at = dir
        .read_job()
        .ok()
        .flatten()
        .map_or(submitted_at, |p| p.started_at);
    Ok(RmJobState::Ended(Outcome::failed(
        started_at,
        now,
        format!(
            "no live supervisor and no recorded outcome in {}",
            dir.path.display()
        ),
    )))
}

fn mtime(path: &Path) -> Option<i64> {
    let t = std::fs::metadata(path).ok()?.modified().ok()?;
    i64::try_from(t.duration_since(UNIX_EPOCH).ok()?.as_secs()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{JobProcess, STATUS};
    use crate::spec::tests::sample_spec;
    use std::fs;

    /// A process whose command line names `dir`, as a supervisor's does.
    /// A process that passes for `dir`'s supervisor, returned once it has exec'd (before,
    /// its command line is still the test's, and a loaded machine shows that window).
    fn fake_supervisor(dir: &Path) -> std::process::Child {
        let child = std::process::Command::new("sh")
            .args(["-c", "sleep 30; true", "supervisor"])
            .arg(dir)
            .spawn()
            .expect("spawn sh");
        let cmdline = format!("/proc/{}/cmdline", child.id());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !fs::read(&cmdline)
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&*dir.to_string_lossy()))
        {
            assert!(std::time::Instant::now() < deadline, "sh never started");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        child
    }

    fn attempt(root: &Path, job: u64) -> AttemptDir {
        let dir = AttemptDir::new(root, job, 0);
        fs::create_dir(&dir.path).expect("mkdir");
        let mut spec = sample_spec();
        spec.job = job;
        spec.attempt = 0;
        dir.write_spec(&spec).expect("spec");
        dir
    }

    #[tokio::test]
    async fn snapshot_reads_every_attempt_without_side_effects() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let (executor, _events) =
            LocalExecutor::new(tmp.path().to_owned(), vec!["true".into()]).expect("executor");
        let root = executor.root().to_owned();
        let cluster = LocalCluster::new("alpha", 16, executor);
        assert_eq!(
            (cluster.kind(), cluster.scheduled_by_foresight()),
            ("local", true)
        );
        assert_eq!(cluster.name(), "alpha");

        let ended = attempt(&root, 1);
        let outcome = Outcome {
            exit_code: Some(0),
            signal: None,
            timed_out: false,
            cancelled: false,
            started_at: 100,
            ended_at: 160,
            error: None,
        };
        ended.write_status(&outcome).expect("status");
        let running = attempt(&root, 2);
        let suspended = attempt(&root, 3);
        let mut children = Vec::new();
        for dir in [&running, &suspended] {
            let child = fake_supervisor(&dir.path);
            dir.write(
                "supervisor.pid",
                format!("{}\n", child.id()).as_bytes(),
                false,
            )
            .expect("pid");
            dir.write_job(JobProcess {
                pgid: 1,
                start_ticks: None,
                started_at: 200,
            })
            .expect("job");
            children.push(child);
        }
        suspended.write(SUSPENDED, b"1\n", false).expect("marker");
        let lost = attempt(&root, 4);
        lost.write("supervisor.pid", b"999999999\n", false)
            .expect("pid");
        let _launching = attempt(&root, 5);

        let state = cluster.snapshot().await.expect("snapshot");
        for mut child in children {
            let _ = child.kill();
            let _ = child.wait();
        }
        assert_eq!(state.processors, 16);
        assert!(state.reservations.is_empty());
        let states: Vec<_> = state
            .jobs
            .iter()
            .map(|j| {
                (
                    j.external.as_str(),
                    j.foresight,
                    j.procs,
                    j.time_limit,
                    j.start,
                )
            })
            .collect();
        assert_eq!(
            states,
            [
                ("1.0", Some((1, 0)), 3, Some(3600), Some(100)),
                ("2.0", Some((2, 0)), 3, Some(3600), Some(200)),
                ("3.0", Some((3, 0)), 3, Some(3600), Some(200)),
                (
                    "4.0",
                    Some((4, 0)),
                    3,
                    Some(3600),
                    Some(state.jobs[3].submitted_at)
                ),
                ("5.0", Some((5, 0)), 3, Some(3600), None),
            ]
        );
        assert_eq!(state.jobs[0].state, RmJobState::Ended(outcome));
        assert_eq!(state.jobs[1].state, RmJobState::Running);
        assert_eq!(state.jobs[2].state, RmJobState::Suspended);
        let RmJobState::Ended(o) = &state.jobs[3].state else {
            panic!("{:?}", state.jobs[3])
        };
        assert!(
            o.error
                .as_deref()
                .unwrap_or("")
                .contains("no live supervisor"),
            "{o:?}"
        );
        assert_eq!(state.jobs[4].state, RmJobState::Pending);
        assert!((state.jobs[4].submitted_at - state.taken_at).abs() < 5);
        // Nothing was written: the lost attempt still has no outcome on disk.
        assert!(!lost.has(STATUS));
    }

    #[tokio::test]
    async fn reservations_are_the_services_and_controls_reach_the_executor() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let (executor, _events) =
            LocalExecutor::new(tmp.path().to_owned(), vec!["true".into()]).expect("executor");
        let cluster = LocalCluster::new("alpha", 4, executor);
        let req = ReserveRequest {
            id: 1,
            start: 10,
            end: 20,
            procs: 100,
        };
        cluster.reserve(&req).await.expect("reserve");
        cluster.release(1).await.expect("release");
        assert_eq!(cluster.estimate_start(1, 60).await.expect("estimate"), None);
        let part = PartHandle {
            job: 9,
            attempt: 0,
            external: None,
        };
        for r in [
            cluster.cancel(&part).await,
            cluster.suspend(&part).await,
            cluster.resume(&part).await,
            cluster.requeue(&part).await,
        ] {
            assert!(
                matches!(r, Err(RmError::Exec(ExecError::NotFound { job: 9, .. }))),
                "{r:?}"
            );
        }
        // `true` is no supervisor: the launch fails, naming the job.
        let sub = Submission {
            spec: sample_spec(),
            reservation: None,
            begin: None,
        };
        let e = cluster.submit(&sub).await.expect_err("no real supervisor");
        assert!(e.to_string().contains("job 42"), "{e}");
    }
}
