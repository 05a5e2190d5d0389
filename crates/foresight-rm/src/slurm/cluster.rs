//! [`SlurmCluster`]: a real Slurm cluster as a [`ResourceManager`]. Slurm schedules by
//! itself: the service mirrors it from [`snapshot`](ResourceManager::snapshot)s (one
//! [`SlurmClient::snapshot`], four commands whatever the number of jobs), asks it for
//! estimates (`sbatch --test-only`), holds advance reservations in it (`scontrol create
//! reservation`, named [`reservation_name`]) and submits parts bound to them (`sbatch
//! --reservation --begin`, named [`part_name`]).
//!
//! Everything Foresight creates in Slurm carries a name it can parse back
//! ([`foresight_reservation_id`], [`parse_part_name`]), so a restarted service finds its own
//! reservations and parts in the next snapshot instead of creating them twice.

use super::client::SlurmClient;
use super::commands::{
    minutes_ceil, shell_command, shell_quote, JobControl, JobScript, Naming, ReservationRequest,
    ReservationSize, SbatchRequest, StartTime,
};
use super::error::{FailureKind, SlurmError};
use super::model::{Job, JobState, Node, Reservation, SlurmJobId, Snapshot};
use super::runner::FIXED_ENV;
use crate::manager::{
    ClusterState, PartHandle, ReserveRequest, ResourceManager, RmError, RmJob, RmJobState,
    RmReservation, Submission,
};
use crate::spec::Outcome;
use async_trait::async_trait;
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

/// How often [`SlurmCluster::release`] tries `scontrol delete reservation` again after
/// cancelling the parts bound to it, and how long it waits between tries: Slurm lets go of a
/// reservation only once its cancelled jobs are gone (a running one first completes).
const RELEASE_RETRIES: u32 = 8;
const RELEASE_RETRY_PAUSE: Duration = Duration::from_millis(500);

/// `PATH` given to jobs when the daemon has none.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// One Slurm cluster driven by the service: a [`SlurmClient`] (its `slurm.conf`, the user
/// Foresight acts as) plus where Foresight's work goes in it (partition, account).
///
/// Reservations are made `Users=<acting user>` and parts are submitted as that user, so only
/// Foresight's parts can run in Foresight's reservations. The acting user is the client's
/// [`SlurmClient::acting_as`] user, else the daemon's own effective user.
#[derive(Clone, Debug)]
pub struct SlurmCluster {
    client: SlurmClient,
    partition: Option<String>,
    account: Option<String>,
    /// The user named in reservations' `Users=`: the one sbatch runs as.
    user: String,
    /// The `PATH` parts run with: the daemon's, so that a part finds the same programs the
    /// local executor would.
    path: String,
    /// How this instance names its reservations and parts.
    naming: Naming,
}

impl SlurmCluster {
    /// The cluster behind `client`, with Foresight's parts and reservations in `partition`
    /// (else Slurm's default partition) under `account` (else the user's default account).
    ///
    /// Fails when the client acts as nobody in particular and the daemon's effective uid has
    /// no user name (Slurm's `Users=` needs one).
    pub fn new(
        client: SlurmClient,
        partition: Option<String>,
        account: Option<String>,
    ) -> Result<SlurmCluster, RmError> {
        let user = match client.user() {
            Some(u) => u.to_owned(),
            None => effective_user_name()?,
        };
        let path = std::env::var("PATH")
            .ok()
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| DEFAULT_PATH.to_owned());
        Ok(SlurmCluster {
            client,
            partition,
            account,
            user,
            path,
            naming: Naming::default(),
        })
    }

    /// Names reservations and parts as instance `naming` does (see [`Naming`]).
    pub fn with_naming(mut self, naming: Naming) -> SlurmCluster {
        self.naming = naming;
        self
    }

    /// The Slurm client.
    pub fn client(&self) -> &SlurmClient {
        &self.client
    }

    /// The partition Foresight uses, when not Slurm's default.
    pub fn partition(&self) -> Option<&str> {
        self.partition.as_deref()
    }

    /// The account Foresight's parts are charged to, when not the user's default.
    pub fn account(&self) -> Option<&str> {
        self.account.as_deref()
    }

    /// The user Foresight acts as: its parts run as this user, its reservations admit only it.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The `sbatch` of one part (see [`ResourceManager::submit`] on this type).
    pub fn sbatch_request(&self, sub: &Submission) -> Result<SbatchRequest, RmError> {
        let spec = &sub.spec;
        let job = spec.job;
        let invalid = |what: String| RmError::Invalid(format!("job {job}: {what}"));
        let procs = u32::try_from(spec.processors.len()).unwrap_or(u32::MAX);
        if procs == 0 {
            return Err(invalid(
                "no processors to ask Slurm for (the launch spec's processor list is empty)"
                    .to_owned(),
            ));
        }
        if spec.command.is_empty() {
            return Err(invalid("empty command".to_owned()));
        }
        if !spec.cwd.is_absolute() {
            return Err(invalid(format!(
                "working directory {}: give an absolute path",
                spec.cwd.display()
            )));
        }
        let mut req = SbatchRequest::new(
            &self.naming.part(job, spec.attempt),
            procs,
            time_limit_minutes(spec.walltime_secs),
            JobScript::Wrap(self.wrap_line(sub)?),
        );
        req.reservation = sub.reservation.map(|r| self.naming.reservation(r));
        req.begin = sub.begin;
        req.partition.clone_from(&self.partition);
        req.account.clone_from(&self.account);
        req.workdir = Some(spec.cwd.clone());
        req.output = Some(output_pattern(&spec.stdout));
        if spec.stderr != spec.stdout {
            req.error = Some(output_pattern(&spec.stderr));
        }
        Ok(req)
    }

    /// The `--wrap` line of a part: drop the variables the Slurm commands run with
    /// ([`FIXED_ENV`]), export `PATH`, the spec's variables and the `FORESIGHT_*` ones (these
    /// last, so they win, as on the local executor), then `exec` the command.
    fn wrap_line(&self, sub: &Submission) -> Result<String, RmError> {
        let spec = &sub.spec;
        let mut vars: Vec<(String, String)> = vec![("PATH".to_owned(), self.path.clone())];
        vars.extend(spec.env.iter().cloned());
        vars.extend([
            ("FORESIGHT_JOB_ID".to_owned(), spec.job.to_string()),
            ("FORESIGHT_ATTEMPT".to_owned(), spec.attempt.to_string()),
            ("FORESIGHT_CLUSTER".to_owned(), spec.cluster.clone()),
            (
                "FORESIGHT_PROCS".to_owned(),
                spec.processors.len().to_string(),
            ),
        ]);
        let mut exports = Vec::with_capacity(vars.len());
        for (name, value) in &vars {
            if !is_env_name(name) {
                return Err(RmError::Invalid(format!(
                    "job {}: environment variable name {name:?}: use [A-Za-z_][A-Za-z0-9_]*",
                    spec.job
                )));
            }
            exports.push(format!("{name}={}", shell_quote(value)));
        }
        let unset: Vec<&str> = FIXED_ENV.iter().map(|(k, _)| *k).collect();
        Ok(format!(
            "unset {}; export {}; exec {}",
            unset.join(" "),
            exports.join(" "),
            shell_command(&spec.command)
        ))
    }

    /// Stretches reservation `b`, which has begun, to end at `to.end`: its start stays
    /// (Slurm refuses any `StartTime=` for it; a window asked from now is held from its
    /// start, which covers it), and a move to begin in the future is refused, naming why.
    async fn stretch_begun(&self, b: &Reservation, to: &ReserveRequest) -> Result<(), RmError> {
        if to.start > b.start && to.start > crate::clock::unix_seconds() {
            return Err(RmError::Invalid(format!(
                "reservation {} began at {}: it cannot move to begin later, at {}",
                b.name,
                super::time::format_timestamp(b.start),
                super::time::format_timestamp(to.start)
            )));
        }
        Ok(self.client.extend_reservation(&b.name, to.end).await?)
    }

    /// The request of [`ResourceManager::reserve`].
    pub fn reservation_request(&self, req: &ReserveRequest) -> Result<ReservationRequest, RmError> {
        if req.end <= req.start {
            return Err(RmError::Invalid(format!(
                "reservation {}: ends ({}) at or before its start ({})",
                self.naming.reservation(req.id),
                req.end,
                req.start
            )));
        }
        let secs = u64::try_from(req.end - req.start).unwrap_or(u64::MAX);
        let mut r = ReservationRequest::foresight(
            req.id,
            StartTime::At(req.start),
            minutes_ceil(secs),
            req.procs,
            &self.user,
        );
        r.name = self.naming.reservation(req.id);
        r.partition.clone_from(&self.partition);
        Ok(r)
    }

    /// The Slurm job id of a part.
    fn slurm_id(part: &PartHandle) -> Result<SlurmJobId, RmError> {
        let Some(external) = &part.external else {
            return Err(RmError::Invalid(format!(
                "job {} attempt {}: no Slurm job id (was it submitted to Slurm?)",
                part.job, part.attempt
            )));
        };
        external.trim().parse::<u32>().map(SlurmJobId).map_err(|_| {
            RmError::Invalid(format!(
                "job {} attempt {}: {external:?} is not a Slurm job id",
                part.job, part.attempt
            ))
        })
    }

    async fn control(&self, action: JobControl, part: &PartHandle) -> Result<(), RmError> {
        let id = Self::slurm_id(part)?;
        self.client.control(action, id).await?;
        Ok(())
    }

    /// After Slurm said the reservation exists: Ok when it is the one asked for (a retry after
    /// a crash), an error naming both otherwise.
    async fn check_existing(
        &self,
        req: &ReserveRequest,
        duplicate: SlurmError,
    ) -> Result<(), RmError> {
        let name = self.naming.reservation(req.id);
        let found = self
            .client
            .reservations()
            .await?
            .into_iter()
            .find(|r| r.name == name);
        match found {
            Some(r) if r.start == req.start && r.core_count == req.procs => Ok(()),
            Some(r) => Err(RmError::Invalid(format!(
                "reservation {name} already exists in Slurm with start {} and {} cores, \
                 not start {} and {} processors as asked",
                r.start, r.core_count, req.start, req.procs
            ))),
            // Gone again between the two commands: report what Slurm said.
            None => Err(duplicate.into()),
        }
    }
}

#[async_trait]
impl ResourceManager for SlurmCluster {
    fn kind(&self) -> &'static str {
        "slurm"
    }

    fn scheduled_by_foresight(&self) -> bool {
        false
    }

    /// One [`SlurmClient::snapshot`]: processors are the CPUs of the nodes that accept jobs
    /// (of Foresight's partition, when one is set); jobs are every job Slurm knows, ended ones
    /// too (`MinJobAge`), whatever their partition; reservations are all of them.
    async fn snapshot(&self) -> Result<ClusterState, RmError> {
        let snap = self.client.snapshot().await?;
        Ok(cluster_state(
            &snap,
            self.partition.as_deref(),
            &self.naming,
        ))
    }

    /// `sbatch --test-only -n PROCS --time=MINUTES --wrap=true` (with the partition and
    /// account): Slurm's own start for such a job submitted now. `walltime` 0 leaves the
    /// partition's default time limit. Slurm uses up a job id for it.
    async fn estimate_start(&self, procs: u32, walltime: i64) -> Result<Option<i64>, RmError> {
        if procs == 0 {
            return Err(RmError::Invalid(
                "an estimate needs at least one processor".to_owned(),
            ));
        }
        let secs = u64::try_from(walltime.max(0)).unwrap_or(0);
        let mut req = SbatchRequest::new(
            "foresight-estimate",
            procs,
            time_limit_minutes(secs),
            JobScript::Wrap("true".to_owned()),
        );
        req.partition.clone_from(&self.partition);
        req.account.clone_from(&self.account);
        // Where sbatch would put its output, were it a job: must exist for --test-only too.
        req.workdir = Some("/tmp".into());
        req.output = Some("/dev/null".to_owned());
        Ok(Some(self.client.test_only(&req).await?.start))
    }

    /// `scontrol create reservation ReservationName=foresight-<id> StartTime=<start>
    /// Duration=<minutes, rounded up> CoreCnt=<procs> [PartitionName=..] Users=<acting user>`.
    /// A refusal is the [`SlurmError::Failed`] whose message names the command (and so the
    /// reservation) and quotes Slurm's reason. If Slurm already has a reservation of that name
    /// (a retry after a crash), it is success when it has the asked start and processors, an
    /// error otherwise.
    async fn reserve(&self, req: &ReserveRequest) -> Result<(), RmError> {
        let r = self.reservation_request(req)?;
        match self.client.create_reservation(&r).await {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == Some(FailureKind::DuplicateReservation) => {
                self.check_existing(req, e).await
            }
            Err(e) => Err(e.into()),
        }
    }

    /// [`reserve`](Self::reserve) with `Flags=IGNORE_JOBS,OVERLAP`, on the idle cores of
    /// named nodes (`Nodes=.. CoreCnt=a,b,..`, chosen from the idle CPUs `sinfo` reports).
    /// Slurm 22.05 frees a suspended job's cores for new jobs, but refuses a reservation over
    /// them ("Requested nodes are busy") without `IGNORE_JOBS`, and over the suspended job's
    /// own reservation (which cannot be deleted while the job is in it) without `OVERLAP`;
    /// and with `IGNORE_JOBS` a bare `CoreCnt` may take cores of running jobs.
    async fn reserve_over_suspended(&self, req: &ReserveRequest) -> Result<(), RmError> {
        let mut r = self.reservation_request(req)?;
        let nodes = self.client.nodes().await?.items;
        let Some(cores) =
            super::free_cores::idle_cores(&nodes, self.partition.as_deref(), req.procs)
        else {
            return Err(RmError::Invalid(format!(
                "reservation {}: the nodes have fewer than {} idle cores, even with the \
                 suspended jobs' counted as idle",
                r.name, req.procs
            )));
        };
        r.size = ReservationSize::CoresOn(cores);
        r.flags = vec!["IGNORE_JOBS".to_owned(), "OVERLAP".to_owned()];
        match self.client.create_reservation(&r).await {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == Some(FailureKind::DuplicateReservation) => {
                self.check_existing(req, e).await
            }
            Err(e) => Err(e.into()),
        }
    }

    /// `scontrol delete reservation foresight-<id>`. Not found is success. While jobs are bound
    /// to it (Slurm refuses even for pending ones), the Foresight parts bound to it are
    /// cancelled (one `squeue --json`, one `scancel`) and the delete is retried for a few
    /// seconds; other jobs bound to it are left alone, and the error is then reported.
    async fn release(&self, reservation: u64) -> Result<(), RmError> {
        let name = self.naming.reservation(reservation);
        let mut cancelled = false;
        let mut tries = 0;
        loop {
            let err = match self.client.delete_reservation(&name).await {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            match err.kind() {
                Some(FailureKind::InvalidReservation) => return Ok(()),
                Some(FailureKind::ReservationInUse) if tries < RELEASE_RETRIES => {}
                _ => return Err(err.into()),
            }
            if !cancelled {
                cancelled = true;
                let bound: Vec<SlurmJobId> = self
                    .client
                    .jobs()
                    .await?
                    .items
                    .into_iter()
                    .filter(|j| {
                        j.state.is_active()
                            && j.reservation.as_deref() == Some(name.as_str())
                            && self.naming.parse_part(&j.name).is_some()
                    })
                    .map(|j| j.id)
                    .collect();
                if !bound.is_empty() {
                    tracing::info!(reservation = %name, jobs = ?bound, "cancelling the parts bound to a reservation being released");
                    self.client.cancel(&bound).await?;
                }
            }
            tries += 1;
            tokio::time::sleep(RELEASE_RETRY_PAUSE).await;
        }
    }

    /// `sbatch --parsable -J foresight-<job>.<attempt> -n <processors> [--time=<minutes>]
    /// [--reservation=foresight-<id>] [--begin=<begin>] [-p ..] [-A ..] --chdir=<cwd>
    /// -o <stdout> [-e <stderr>] --wrap=<command>`.
    ///
    /// - `-n` is the number of the spec's processors (an empty list is an error); the ids
    ///   themselves mean nothing to Slurm, which picks the CPUs. So `FORESIGHT_PROCESSORS`
    ///   cannot be known before Slurm allocates and is **not** set; `FORESIGHT_JOB_ID`,
    ///   `FORESIGHT_ATTEMPT`, `FORESIGHT_CLUSTER` and `FORESIGHT_PROCS` are, together with the
    ///   spec's variables and the daemon's `PATH`, exported by the wrap line itself (so values
    ///   may hold any character, and `--export` keeps Slurm's default).
    /// - `walltime_secs` 0 passes no `--time`: Slurm's default for the partition.
    /// - Relative output paths are relative to `cwd` (Slurm's rule too); `%` in them is
    ///   escaped, so Slurm's `%j`-style patterns do not apply. The spec's append-on-requeue rule
    ///   is Slurm's business here (`--open-mode` is its default).
    ///
    /// Returns the Slurm job id as the handle's `external`.
    async fn submit(&self, sub: &Submission) -> Result<PartHandle, RmError> {
        let req = self.sbatch_request(sub)?;
        let submitted = self.client.submit(&req).await?;
        Ok(PartHandle {
            job: sub.spec.job,
            attempt: sub.spec.attempt,
            external: Some(submitted.job_id.to_string()),
        })
    }

    /// `scancel <id>`. A part that has already ended is left as it is (Slurm 22.05 says
    /// nothing for ids it has forgotten).
    async fn cancel(&self, part: &PartHandle) -> Result<(), RmError> {
        let id = Self::slurm_id(part)?;
        match self.client.cancel(&[id]).await {
            Err(e) if e.kind() == Some(FailureKind::JobStateConflict) => Ok(()),
            other => Ok(other?),
        }
    }

    /// `scontrol suspend <id>`.
    async fn suspend(&self, part: &PartHandle) -> Result<(), RmError> {
        self.control(JobControl::Suspend, part).await
    }

    /// `scontrol resume <id>`.
    async fn resume(&self, part: &PartHandle) -> Result<(), RmError> {
        self.control(JobControl::Resume, part).await
    }

    /// `scontrol requeue <id>`: the same Slurm job (and attempt) runs again; Slurm holds it
    /// back as `BeginTime` for about two minutes first.
    async fn requeue(&self, part: &PartHandle) -> Result<(), RmError> {
        self.control(JobControl::Requeue, part).await
    }

    /// `scontrol update ReservationName=foresight-<id> StartTime=<start> Duration=<minutes,
    /// rounded up>`, then, for a submitted part, `scontrol update JobId=<id>
    /// StartTime=<start>`. A reservation that has begun (Slurm refuses any `StartTime=` for
    /// it, even its own) keeps its start and only its end moves (`EndTime=`); moving it to
    /// begin in the future is refused. When the part cannot be moved, the reservation is put back
    /// where it was (as read from Slurm before the move), so that both move or neither does.
    async fn move_reservation(
        &self,
        to: &ReserveRequest,
        part: Option<&PartHandle>,
    ) -> Result<(), RmError> {
        let r = self.reservation_request(to)?;
        let read = || async {
            Ok::<_, RmError>(
                self.client
                    .reservations()
                    .await?
                    .into_iter()
                    .find(|x| x.name == r.name),
            )
        };
        let before = read().await?;
        let mut begun = before
            .clone()
            .filter(|b| b.is_active() || b.start <= crate::clock::unix_seconds());
        if let Some(b) = &begun {
            self.stretch_begun(b, to).await?;
        } else {
            match self
                .client
                .update_reservation(&r.name, r.start, r.duration_minutes)
                .await
            {
                Ok(()) => {}
                // It began between the read and the update (a move near its start).
                Err(e) if e.kind() == Some(FailureKind::ReservationStarted) => {
                    let Some(b) = read().await? else {
                        return Err(e.into());
                    };
                    self.stretch_begun(&b, to).await?;
                    begun = Some(b);
                }
                Err(e) => return Err(e.into()),
            }
        }
        let Some(part) = part else { return Ok(()) };
        let moved = match Self::slurm_id(part) {
            Ok(id) => self
                .client
                .update_begin(
                    id,
                    StartTime::At(to.start.max(crate::clock::unix_seconds())),
                )
                .await
                .map_err(RmError::from),
            Err(e) => Err(e),
        };
        if let (Err(e), Some(b)) = (&moved, &before) {
            let undo = if begun.is_some() {
                self.client.extend_reservation(&r.name, b.end).await
            } else {
                let minutes = minutes_ceil(u64::try_from(b.end - b.start).unwrap_or(0).max(1));
                match self
                    .client
                    .update_reservation(&r.name, StartTime::At(b.start), minutes)
                    .await
                {
                    // Moved to begin now, it has begun since: its end alone goes back.
                    Err(u) if u.kind() == Some(FailureKind::ReservationStarted) => {
                        self.client.extend_reservation(&r.name, b.end).await
                    }
                    other => other,
                }
            };
            if let Err(undo) = undo {
                tracing::warn!("putting back reservation {} after {e}: {undo}", r.name);
            }
        }
        moved
    }
}

/// `--time` minutes for a walltime in seconds; 0 = no `--time`.
fn time_limit_minutes(walltime_secs: u64) -> u32 {
    if walltime_secs == 0 {
        SbatchRequest::DEFAULT_TIME_LIMIT
    } else {
        minutes_ceil(walltime_secs).min(SbatchRequest::DEFAULT_TIME_LIMIT - 1)
    }
}

/// An output path for `sbatch -o/-e`, with `%` escaped so that Slurm takes it literally.
fn output_pattern(path: &Path) -> String {
    path.to_string_lossy().replace('%', "%%")
}

fn is_env_name(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The name of the effective user, from the user database.
pub(crate) fn effective_user_name() -> Result<String, RmError> {
    let uid = nix::unistd::geteuid();
    match nix::unistd::User::from_uid(uid) {
        Ok(Some(user)) => Ok(user.name),
        Ok(None) => Err(RmError::Invalid(format!(
            "the daemon's effective uid {uid} has no user name: name the user to act as"
        ))),
        Err(e) => Err(RmError::Invalid(format!(
            "cannot look up the name of uid {uid}: {e}"
        ))),
    }
}

/// The service's view of a Slurm snapshot; `partition` restricts the processors counted.
pub(crate) fn cluster_state(
    snap: &Snapshot,
    partition: Option<&str>,
    naming: &Naming,
) -> ClusterState {
    let part_hosts: Option<Vec<String>> = partition.map(|p| {
        snap.partitions
            .iter()
            .find(|q| q.name == p)
            .and_then(|q| q.nodes.as_deref())
            .map(expand_hostlist)
            .unwrap_or_default()
    });
    let in_partition = |n: &Node| match (partition, &part_hosts) {
        (Some(p), Some(hosts)) => {
            n.partitions.iter().any(|q| q == p)
                || (n.partitions.is_empty() && hosts.contains(&n.name))
        }
        _ => true,
    };
    let processors = snap
        .nodes
        .iter()
        .filter(|n| n.accepts_jobs() && in_partition(n))
        .map(|n| n.cpus)
        .fold(0u32, u32::saturating_add);
    let cpus: HashMap<&str, u32> = snap
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.cpus))
        .collect();
    ClusterState {
        taken_at: snap.taken_at,
        processors,
        jobs: snap
            .jobs
            .iter()
            .map(|j| rm_job(j, snap.taken_at, naming))
            .collect(),
        reservations: snap
            .reservations
            .iter()
            .map(|r| rm_reservation(r, &cpus, naming))
            .collect(),
    }
}

fn rm_job(j: &Job, taken_at: i64, naming: &Naming) -> RmJob {
    let state = match &j.state {
        JobState::Pending | JobState::Requeued => RmJobState::Pending,
        JobState::Running | JobState::Completing | JobState::Configuring => RmJobState::Running,
        JobState::Suspended => RmJobState::Suspended,
        ended => RmJobState::Ended(outcome(j, ended, taken_at)),
    };
    RmJob {
        external: j.id.to_string(),
        foresight: naming.parse_part(&j.name),
        user: j.user.clone(),
        state,
        procs: j.cpus,
        time_limit: j.time_limit.as_secs(),
        submitted_at: j.submit_time,
        start: j.start_time,
        priority: j.priority,
        reservation: j.reservation.clone(),
    }
}

/// How an ended Slurm job ended, in the executor's terms.
fn outcome(j: &Job, state: &JobState, taken_at: i64) -> Outcome {
    let ended_at = j.end_time.unwrap_or(taken_at);
    let why = |word: &str| match &j.reason {
        Some(r) => format!("Slurm: {word} ({r})"),
        None => format!("Slurm: {word}"),
    };
    let error = match state {
        JobState::NodeFail => Some(why("NODE_FAIL")),
        JobState::BootFail => Some(why("BOOT_FAIL")),
        JobState::OutOfMemory => Some(why("OUT_OF_MEMORY")),
        JobState::Preempted => Some(why("PREEMPTED")),
        JobState::Deadline => Some(why("DEADLINE")),
        JobState::Other(word) => Some(why(word)),
        // Failed with status 0 and no signal: it could not be started (e.g. a bad working
        // directory); say so rather than look successful.
        JobState::Failed if j.exit_code == 0 && j.exit_signal.is_none() => Some(why("FAILED")),
        _ => None,
    };
    Outcome {
        exit_code: if j.exit_signal.is_some() {
            None
        } else {
            Some(j.exit_code)
        },
        signal: j.exit_signal,
        timed_out: *state == JobState::Timeout,
        cancelled: *state == JobState::Cancelled,
        started_at: j.start_time.unwrap_or(ended_at),
        ended_at,
        error,
    }
}

fn rm_reservation(r: &Reservation, cpus: &HashMap<&str, u32>, naming: &Naming) -> RmReservation {
    let procs = if r.core_count > 0 {
        r.core_count
    } else {
        let hosts = r.nodes.as_deref().map(expand_hostlist).unwrap_or_default();
        let known: Vec<u32> = hosts
            .iter()
            .filter_map(|h| cpus.get(h.as_str()).copied())
            .collect();
        if !known.is_empty() && known.len() == hosts.len() {
            known.into_iter().fold(0u32, u32::saturating_add)
        } else {
            // Nodes we do not see: assume the widest node we know for each.
            let widest = cpus.values().copied().max().unwrap_or(0);
            r.node_count.saturating_mul(widest)
        }
    };
    RmReservation {
        name: r.name.clone(),
        foresight: naming.reservation_id(&r.name),
        start: r.start,
        end: r.end,
        procs,
    }
}

/// The host names of a Slurm host list (`c1-n[1-3,5],gpu[01-02]`, nested groups allowed, as
/// in `rack[1-2]-n[1-2]`). Anything unparsable stays as written (one "host" that matches no
/// node), never a panic; at most 100 000 names.
pub(crate) fn expand_hostlist(list: &str) -> Vec<String> {
    const MAX: usize = 100_000;
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut item = String::new();
    for c in list.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ => {}
        }
        if c == ',' && depth <= 0 {
            flush_host(&item, &mut out, MAX);
            item.clear();
            depth = 0;
        } else {
            item.push(c);
        }
    }
    flush_host(&item, &mut out, MAX);
    out
}

fn flush_host(item: &str, out: &mut Vec<String>, max: usize) {
    let word = item.trim();
    if !word.is_empty() {
        expand_one(word, out, max);
    }
}

fn expand_one(word: &str, out: &mut Vec<String>, max: usize) {
    let (Some(open), Some(close)) = (word.find('['), word.find(']')) else {
        out.push(word.to_owned());
        return;
    };
    if close < open {
        out.push(word.to_owned());
        return;
    }
    let (prefix, ranges, rest) = (&word[..open], &word[open + 1..close], &word[close + 1..]);
    let mut heads = Vec::new();
    for range in ranges.split(',') {
        let (lo, hi) = range.split_once('-').unwrap_or((range, range));
        let width = lo.len();
        match (lo.parse::<u64>(), hi.parse::<u64>()) {
            (Ok(a), Ok(b)) if a <= b && b - a < max as u64 => {
                for n in a..=b {
                    heads.push(format!("{prefix}{n:0width$}"));
                }
            }
            _ => {
                out.push(word.to_owned());
                return;
            }
        }
    }
    for head in heads {
        let mut tails = Vec::new();
        expand_one(rest, &mut tails, max);
        if rest.is_empty() {
            tails = vec![String::new()];
        }
        for tail in tails {
            if out.len() >= max {
                return;
            }
            out.push(format!("{head}{tail}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slurm::{CommandOutput, FakeRunner};
    use crate::spec::LaunchSpec;
    use crate::RmError;
    use std::sync::Arc;

    fn fixture(name: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/slurm")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// The captured answer of `name` (its `.out` and `.err`) with exit status `status`.
    fn answer(name: &str, status: i32) -> CommandOutput {
        CommandOutput::with(
            status,
            fixture(&format!("{name}.out")),
            fixture(&format!("{name}.err")),
        )
    }

    fn cluster(fake: &FakeRunner, partition: Option<&str>, account: Option<&str>) -> SlurmCluster {
        let client = SlurmClient::new("/etc/c1/slurm.conf", Arc::new(fake.clone())).acting_as("fs");
        SlurmCluster::new(
            client,
            partition.map(str::to_owned),
            account.map(str::to_owned),
        )
        .expect("a named user needs no lookup")
    }

    fn snapshot_rules(fake: &FakeRunner, squeue: &str) {
        fake.on("sinfo", &["--json"], answer("sinfo-reserved", 0))
            .on("squeue", &["--json"], answer(squeue, 0))
            .on("scontrol", &["show", "partition"], answer("partitions", 0))
            .on(
                "scontrol",
                &["show", "reservation"],
                answer("reservations", 0),
            );
    }

    fn spec() -> LaunchSpec {
        LaunchSpec {
            job: 42,
            attempt: 1,
            cluster: "c1".into(),
            processors: vec![0, 1, 2],
            command: vec!["echo".into(), "it's $HOME".into(), "a b".into()],
            env: vec![("GREETING".into(), "hello, world".into())],
            cwd: "/scratch/run".into(),
            stdout: "out-%.txt".into(),
            stderr: "/var/tmp/err.txt".into(),
            walltime_secs: 61,
            grace_secs: 10,
            unix_user: None,
            max_output_bytes: None,
            service_output: false,
        }
    }

    fn part(external: Option<&str>) -> PartHandle {
        PartHandle {
            job: 42,
            attempt: 1,
            external: external.map(str::to_owned),
        }
    }

    #[tokio::test]
    async fn snapshot_maps_one_slurm_snapshot() {
        let fake = FakeRunner::new();
        snapshot_rules(&fake, "squeue-reserved");
        let state = cluster(&fake, None, None).snapshot().await.unwrap();
        // Four commands whatever the number of jobs.
        assert_eq!(fake.calls().len(), 4);
        // Four nodes of 2 CPUs, one drained.
        assert_eq!(state.processors, 6);

        let job = |id: &str| state.jobs.iter().find(|j| j.external == id).unwrap();
        assert_eq!(state.jobs.len(), 10);
        let ok = job("1");
        let RmJobState::Ended(o) = &ok.state else {
            panic!("{ok:?}")
        };
        assert!(o.succeeded(), "{o:?}");
        let RmJobState::Ended(o) = &job("2").state else {
            panic!()
        };
        assert_eq!((o.exit_code, o.signal, o.cancelled), (Some(3), None, false));
        assert!(!o.succeeded());
        let RmJobState::Ended(o) = &job("7").state else {
            panic!()
        };
        assert!(o.cancelled && o.error.is_none(), "{o:?}");

        let run = job("3");
        assert_eq!(run.state, RmJobState::Running);
        assert_eq!((run.user.as_str(), run.procs), ("root", 4));
        assert_eq!(run.time_limit, Some(600));
        assert_eq!(run.start, Some(1_795_370_990));
        assert_eq!(run.priority, 375);
        assert_eq!(run.foresight, None);
        // Pending: Slurm's own expected start.
        let pend = job("6");
        assert_eq!(pend.state, RmJobState::Pending);
        assert_eq!(pend.start, Some(1_795_374_601));
        assert_eq!(pend.user, "fsowner");
        assert_eq!(job("8").time_limit, None);
        let bound = job("13");
        assert_eq!(bound.reservation.as_deref(), Some("foresight-1"));
        assert_eq!(bound.submitted_at, 1_795_370_994);

        let resv: Vec<_> = state
            .reservations
            .iter()
            .map(|r| (r.name.as_str(), r.foresight, r.procs, r.end - r.start))
            .collect();
        assert_eq!(
            resv,
            [
                ("foresight-1", Some(1), 3, 1800),
                ("foresight-2", Some(2), 2, 3600)
            ]
        );
    }

    #[tokio::test]
    async fn snapshot_recognises_parts_and_states() {
        let fake = FakeRunner::new();
        let squeue = fixture("squeue-suspended.out")
            .replace("\"root-run\"", "\"foresight-7.2\"")
            .replace("\"owner-run\"", "\"foresight-07.2\"");
        fake.on("sinfo", &["--json"], answer("sinfo-idle", 0))
            .on("squeue", &["--json"], CommandOutput::ok(squeue))
            .on("scontrol", &["show", "partition"], answer("partitions", 0))
            .on(
                "scontrol",
                &["show", "reservation"],
                answer("reservations-none", 0),
            );
        let state = cluster(&fake, None, None).snapshot().await.unwrap();
        assert_eq!(state.processors, 8);
        assert!(state.reservations.is_empty());
        let j3 = state.jobs.iter().find(|j| j.external == "3").unwrap();
        assert_eq!(
            (j3.foresight, &j3.state),
            (Some((7, 2)), &RmJobState::Suspended)
        );
        let j4 = state.jobs.iter().find(|j| j.external == "4").unwrap();
        assert_eq!(j4.foresight, None, "leading zero: not our name");
    }

    #[tokio::test]
    async fn snapshot_counts_only_the_partitions_nodes() {
        let fake = FakeRunner::new();
        snapshot_rules(&fake, "squeue-idle");
        let state = cluster(&fake, Some("debug"), None)
            .snapshot()
            .await
            .unwrap();
        assert_eq!(state.processors, 6);
        let fake = FakeRunner::new();
        snapshot_rules(&fake, "squeue-idle");
        let state = cluster(&fake, Some("gpu"), None).snapshot().await.unwrap();
        assert_eq!(state.processors, 0);
    }

    #[test]
    fn ended_states_map_to_outcomes() {
        let text = fixture("squeue-busy.out");
        let jobs = crate::slurm::parse_squeue_json("squeue --json", &text)
            .unwrap()
            .items;
        let base = jobs[0].clone();
        let cases = [
            (JobState::Timeout, 0, None, true, false, None),
            (JobState::Cancelled, 0, Some(15), false, true, None),
            (
                JobState::NodeFail,
                0,
                None,
                false,
                false,
                Some("Slurm: NODE_FAIL"),
            ),
            (
                JobState::BootFail,
                0,
                None,
                false,
                false,
                Some("Slurm: BOOT_FAIL"),
            ),
            (
                JobState::OutOfMemory,
                0,
                None,
                false,
                false,
                Some("Slurm: OUT_OF_MEMORY"),
            ),
            (
                JobState::Preempted,
                0,
                None,
                false,
                false,
                Some("Slurm: PREEMPTED"),
            ),
            (
                JobState::Deadline,
                0,
                None,
                false,
                false,
                Some("Slurm: DEADLINE"),
            ),
            (
                JobState::Other("WEIRD".into()),
                0,
                None,
                false,
                false,
                Some("Slurm: WEIRD"),
            ),
            (
                JobState::Failed,
                0,
                None,
                false,
                false,
                Some("Slurm: FAILED"),
            ),
            (JobState::Failed, 2, None, false, false, None),
        ];
        for (state, code, signal, timed_out, cancelled, error) in cases {
            let j = Job {
                state: state.clone(),
                exit_code: code,
                exit_signal: signal,
                reason: None,
                ..base.clone()
            };
            let RmJobState::Ended(o) = rm_job(&j, 5, &Naming::default()).state else {
                panic!("{state:?}")
            };
            assert_eq!(o.timed_out, timed_out, "{state:?}");
            assert_eq!(o.cancelled, cancelled, "{state:?}");
            assert_eq!(o.error.as_deref(), error, "{state:?}");
            assert_eq!(o.signal, signal, "{state:?}");
            assert_eq!(o.exit_code, signal.is_none().then_some(code), "{state:?}");
            assert_eq!(
                (o.started_at, o.ended_at),
                (base.start_time.unwrap(), base.end_time.unwrap())
            );
        }
        let j = Job {
            state: JobState::NodeFail,
            reason: Some("NodeDown".into()),
            ..base
        };
        let RmJobState::Ended(o) = rm_job(&j, 5, &Naming::default()).state else {
            panic!()
        };
        assert_eq!(o.error.as_deref(), Some("Slurm: NODE_FAIL (NodeDown)"));
    }

    #[test]
    fn node_reservations_count_their_nodes_cpus() {
        let cpus: HashMap<&str, u32> = [("c1-n1", 2), ("c1-n2", 2), ("c1-n3", 4)].into();
        let r = Reservation {
            name: "maint".into(),
            start: 10,
            end: 20,
            nodes: Some("c1-n[2-3]".into()),
            node_count: 2,
            core_count: 0,
            partition: None,
            flags: vec!["MAINT".into()],
            users: vec!["root".into()],
            accounts: vec![],
            state: "INACTIVE".into(),
            cores: vec![],
        };
        let got = rm_reservation(&r, &cpus, &Naming::default());
        assert_eq!((got.procs, got.foresight), (6, None));
        let unknown = Reservation {
            nodes: Some("x[1-3]".into()),
            node_count: 3,
            ..r
        };
        assert_eq!(
            rm_reservation(&unknown, &cpus, &Naming::default()).procs,
            12
        );
    }

    #[test]
    fn hostlists_expand() {
        let cases: [(&str, &[&str]); 7] = [
            ("c1-n1", &["c1-n1"]),
            ("c1-n[1-3]", &["c1-n1", "c1-n2", "c1-n3"]),
            ("a[01-02,5],b", &["a01", "a02", "a5", "b"]),
            ("r[1-2]-n[1-2]", &["r1-n1", "r1-n2", "r2-n1", "r2-n2"]),
            ("", &[]),
            ("bad[x-2]", &["bad[x-2]"]),
            ("bad[3-1", &["bad[3-1"]),
        ];
        for (list, want) in cases {
            assert_eq!(expand_hostlist(list), want, "{list}");
        }
        assert_eq!(expand_hostlist("n[0-99999999999]").len(), 1);
    }

    #[tokio::test]
    async fn submit_builds_one_sbatch() {
        let fake = FakeRunner::new();
        fake.on("sbatch", &[], answer("sbatch-parsable", 0));
        let c = cluster(&fake, Some("debug"), Some("proj"));
        let sub = Submission {
            spec: spec(),
            reservation: Some(7),
            begin: Some(1_795_378_194),
        };
        let handle = c.submit(&sub).await.unwrap();
        assert_eq!(handle, part(Some("2")));
        let calls = fake.calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].user.as_deref(), Some("fs"));
        let path = std::env::var("PATH").unwrap();
        let wrap = format!(
            "--wrap=unset TZ SLURM_TIME_FORMAT LC_ALL; export PATH={} GREETING='hello, world' \
             FORESIGHT_JOB_ID=42 FORESIGHT_ATTEMPT=1 FORESIGHT_CLUSTER=c1 FORESIGHT_PROCS=3; \
             exec echo 'it'\\''s $HOME' 'a b'",
            shell_quote(&path)
        );
        assert_eq!(
            calls[0].args,
            [
                "--parsable",
                "--job-name=foresight-42.1",
                "--ntasks=3",
                "--time=2",
                "--reservation=foresight-7",
                "--begin=2026-11-22T20:09:54",
                "--partition=debug",
                "--account=proj",
                "--chdir=/scratch/run",
                "--output=out-%%.txt",
                "--error=/var/tmp/err.txt",
                wrap.as_str(),
            ]
        );
    }

    #[tokio::test]
    async fn submit_without_limit_or_extras() {
        let fake = FakeRunner::new();
        fake.on("sbatch", &[], CommandOutput::ok("9;c1\n"));
        let c = cluster(&fake, None, None);
        let mut s = spec();
        s.walltime_secs = 0;
        s.stderr = s.stdout.clone();
        let sub = Submission {
            spec: s,
            reservation: None,
            begin: None,
        };
        assert_eq!(c.submit(&sub).await.unwrap(), part(Some("9")));
        let args = &fake.calls()[0].args;
        assert_eq!(
            args[..5],
            [
                "--parsable",
                "--job-name=foresight-42.1",
                "--ntasks=3",
                "--chdir=/scratch/run",
                "--output=out-%%.txt",
            ]
        );
        assert!(args[5].starts_with("--wrap="), "{args:?}");
        assert_eq!(args.len(), 6);
    }

    #[tokio::test]
    async fn bad_submissions_are_refused_before_slurm() {
        let fake = FakeRunner::new();
        let c = cluster(&fake, None, None);
        let mut cases: Vec<(&str, LaunchSpec)> = Vec::new();
        let mut s = spec();
        s.processors.clear();
        cases.push(("processors", s));
        let mut s = spec();
        s.command.clear();
        cases.push(("empty command", s));
        let mut s = spec();
        s.cwd = "rel".into();
        cases.push(("absolute", s));
        let mut s = spec();
        s.env.push(("BAD NAME".into(), "x".into()));
        cases.push(("BAD NAME", s));
        for (want, spec) in cases {
            let sub = Submission {
                spec,
                reservation: None,
                begin: None,
            };
            let e = c.submit(&sub).await.unwrap_err();
            assert!(matches!(e, RmError::Invalid(_)), "{e}");
            let msg = e.to_string();
            assert!(msg.contains("job 42") && msg.contains(want), "{msg}");
        }
        assert!(fake.calls().is_empty());
    }

    /// The wrap line, run by a real shell, gives the command its arguments and variables
    /// exactly.
    #[tokio::test]
    async fn the_wrap_line_runs_the_command_with_its_variables() {
        let fake = FakeRunner::new();
        let c = cluster(&fake, None, None);
        let mut s = spec();
        s.command = vec![
            "sh".into(),
            "-c".into(),
            r#"printf '%s|' "$@" "$FORESIGHT_JOB_ID" "$FORESIGHT_ATTEMPT" "$FORESIGHT_CLUSTER" "$FORESIGHT_PROCS" "$GREETING" "${TZ-unset}" "${FORESIGHT_PROCESSORS-unset}""#.into(),
            "zero".into(),
            "a b".into(),
            "it's".into(),
            "$HOME `id` \\ \"q\"".into(),
            "line\nbreak".into(),
        ];
        s.env
            .push(("FORESIGHT_JOB_ID".into(), "overridden?".into()));
        let sub = Submission {
            spec: s,
            reservation: None,
            begin: None,
        };
        let req = c.sbatch_request(&sub).unwrap();
        let JobScript::Wrap(line) = &req.script else {
            panic!("{:?}", req.script)
        };
        let out = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(line)
            .env("TZ", "UTC")
            .output()
            .await
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "a b|it's|$HOME `id` \\ \"q\"|line\nbreak|42|1|c1|3|hello, world|unset|unset|"
        );
    }

    #[tokio::test]
    async fn estimate_is_a_test_only() {
        let fake = FakeRunner::new();
        fake.on("sbatch", &["--test-only"], answer("test-only", 0));
        let c = cluster(&fake, Some("debug"), Some("proj"));
        let t = c.estimate_start(2, 600).await.unwrap();
        assert_eq!(t, crate::slurm::parse_timestamp("2026-11-22T18:47:50"));
        assert_eq!(
            fake.calls()[0].args,
            [
                "--test-only",
                "--job-name=foresight-estimate",
                "--ntasks=2",
                "--time=10",
                "--partition=debug",
                "--account=proj",
                "--chdir=/tmp",
                "--output=/dev/null",
                "--wrap=true",
            ]
        );
        assert!(matches!(
            c.estimate_start(0, 60).await,
            Err(RmError::Invalid(_))
        ));
        let fake = FakeRunner::new();
        fake.on("sbatch", &[], answer("test-only-too-big", 1));
        let e = cluster(&fake, None, None)
            .estimate_start(100, 60)
            .await
            .unwrap_err();
        assert!(matches!(e, RmError::Slurm(_)), "{e}");
    }

    fn reserve_req() -> ReserveRequest {
        ReserveRequest {
            id: 1,
            start: crate::slurm::parse_timestamp("2026-11-22T20:09:54").unwrap(),
            end: crate::slurm::parse_timestamp("2026-11-22T20:39:54").unwrap() - 30,
            procs: 3,
        }
    }

    #[tokio::test]
    async fn reserve_creates_a_core_reservation_for_the_acting_user() {
        let fake = FakeRunner::new();
        fake.on("scontrol", &["create"], answer("create-reservation", 0));
        let c = cluster(&fake, Some("debug"), None);
        c.reserve(&reserve_req()).await.unwrap();
        assert_eq!(
            fake.calls()[0].args,
            [
                "create",
                "reservation",
                "ReservationName=foresight-1",
                "StartTime=2026-11-22T20:09:54",
                "Duration=30",
                "CoreCnt=3",
                "PartitionName=debug",
                "Users=fs",
            ]
        );
        let bad = ReserveRequest {
            end: 0,
            ..reserve_req()
        };
        assert!(matches!(c.reserve(&bad).await, Err(RmError::Invalid(_))));
    }

    #[tokio::test]
    async fn a_refused_reservation_names_it_and_quotes_slurm() {
        let fake = FakeRunner::new();
        fake.on(
            "scontrol",
            &["create"],
            answer("create-reservation-busy", 1),
        );
        let e = cluster(&fake, None, None)
            .reserve(&reserve_req())
            .await
            .unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("foresight-1"), "{msg}");
        assert!(msg.contains("Requested nodes are busy"), "{msg}");
        assert!(!e.is_unreachable());
    }

    #[tokio::test]
    async fn an_existing_reservation_counts_only_when_it_matches() {
        let fake = FakeRunner::new();
        fake.on(
            "scontrol",
            &["create"],
            answer("create-reservation-duplicate", 1),
        )
        .on(
            "scontrol",
            &["show", "reservation"],
            answer("reservations", 0),
        );
        let c = cluster(&fake, None, None);
        // foresight-1 in the fixture: 3 cores from 20:09:54.
        c.reserve(&reserve_req()).await.unwrap();
        let other = ReserveRequest {
            procs: 4,
            ..reserve_req()
        };
        let msg = c.reserve(&other).await.unwrap_err().to_string();
        assert!(msg.contains("foresight-1 already exists"), "{msg}");
        let missing = ReserveRequest {
            id: 99,
            ..reserve_req()
        };
        let e = c.reserve(&missing).await.unwrap_err();
        assert!(e.to_string().contains("Duplicate reservation name"), "{e}");
    }

    #[tokio::test]
    async fn release_deletes_and_forgives_unknown() {
        let fake = FakeRunner::new();
        fake.once("scontrol", &["delete"], answer("delete-reservation", 0))
            .once(
                "scontrol",
                &["delete"],
                answer("delete-reservation-unknown", 1),
            );
        let c = cluster(&fake, None, None);
        c.release(1).await.unwrap();
        c.release(1).await.unwrap();
        let calls = fake.calls();
        assert_eq!(calls[0].args, ["delete", "reservation", "foresight-1"]);
        assert_eq!(calls.len(), 2);
    }

    #[tokio::test]
    async fn release_cancels_its_parts_when_in_use() {
        let fake = FakeRunner::new();
        // Job 13 is bound to foresight-1: one of ours under its part name; job 9 is made
        // bound to it too but is not ours, so it is left alone.
        let squeue =
            fixture("squeue-reserved.out").replace("\"foresight-job-1\"", "\"foresight-5.0\"");
        fake.once(
            "scontrol",
            &["delete"],
            answer("delete-reservation-pending-job", 1),
        )
        .once(
            "scontrol",
            &["delete"],
            answer("delete-reservation-pending-job", 1),
        )
        .once("scontrol", &["delete"], answer("delete-reservation", 0))
        .on("squeue", &["--json"], CommandOutput::ok(squeue))
        .on("scancel", &[], answer("scancel", 0));
        cluster(&fake, None, None).release(1).await.unwrap();
        let calls: Vec<String> = fake
            .calls()
            .iter()
            .map(|c| format!("{} {}", c.program, c.args.join(" ")))
            .collect();
        assert_eq!(
            calls,
            [
                "scontrol delete reservation foresight-1",
                "squeue --json",
                "scancel 13",
                "scontrol delete reservation foresight-1",
                "scontrol delete reservation foresight-1",
            ]
        );
    }

    #[tokio::test]
    async fn release_gives_up_when_still_in_use() {
        let fake = FakeRunner::new();
        fake.on(
            "scontrol",
            &["delete"],
            answer("delete-reservation-pending-job", 1),
        )
        .on("squeue", &["--json"], answer("squeue-idle", 0));
        let e = cluster(&fake, None, None).release(1).await.unwrap_err();
        assert_eq!(
            match &e {
                RmError::Slurm(s) => s.kind(),
                _ => None,
            },
            Some(FailureKind::ReservationInUse),
            "{e}"
        );
        let deletes = fake
            .calls()
            .iter()
            .filter(|c| c.program == "scontrol")
            .count();
        assert_eq!(deletes, 1 + RELEASE_RETRIES as usize);
    }

    #[tokio::test]
    async fn controls_reach_slurm_by_job_id() {
        let fake = FakeRunner::new();
        fake.on("scontrol", &[], CommandOutput::ok(""))
            .on("scancel", &[], answer("scancel", 0));
        let c = cluster(&fake, None, None);
        let p = part(Some("17"));
        c.cancel(&p).await.unwrap();
        c.suspend(&p).await.unwrap();
        c.resume(&p).await.unwrap();
        c.requeue(&p).await.unwrap();
        let calls: Vec<String> = fake
            .calls()
            .iter()
            .map(|c| format!("{} {}", c.program, c.args.join(" ")))
            .collect();
        assert_eq!(
            calls,
            [
                "scancel 17",
                "scontrol suspend 17",
                "scontrol resume 17",
                "scontrol requeue 17"
            ]
        );
        for bad in [part(None), part(Some("x17"))] {
            for r in [
                c.cancel(&bad).await,
                c.suspend(&bad).await,
                c.resume(&bad).await,
                c.requeue(&bad).await,
            ] {
                let e = r.unwrap_err();
                assert!(matches!(e, RmError::Invalid(_)), "{e}");
                assert!(e.to_string().contains("job 42"), "{e}");
            }
        }
        assert_eq!(fake.calls().len(), 4);
    }

    #[tokio::test]
    async fn suspend_of_a_pending_part_is_slurms_error() {
        let fake = FakeRunner::new();
        fake.on("scontrol", &["suspend"], answer("suspend-pending", 1));
        let e = cluster(&fake, None, None)
            .suspend(&part(Some("6")))
            .await
            .unwrap_err();
        assert!(
            matches!(&e, RmError::Slurm(s) if s.kind() == Some(FailureKind::JobPending)),
            "{e}"
        );
    }

    #[test]
    fn kind_and_user() {
        let fake = FakeRunner::new();
        let c = cluster(&fake, None, None);
        assert_eq!(
            (c.kind(), c.scheduled_by_foresight(), c.user()),
            ("slurm", false, "fs")
        );
        let own = SlurmCluster::new(
            SlurmClient::new("/x", Arc::new(FakeRunner::new())),
            None,
            None,
        )
        .unwrap();
        assert_eq!(own.user(), effective_user_name().unwrap());
        assert!(!own.user().is_empty());
    }
}
