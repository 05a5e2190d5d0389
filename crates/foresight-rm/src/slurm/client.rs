//! [`SlurmClient`]: one Slurm cluster (its `SLURM_CONF`, the user to act as) seen through a
//! [`CommandRunner`]: queries that return typed data, and the commands that change Slurm.

use super::commands::{
    delete_reservation_args, extend_reservation_args, scancel_args, update_begin_args,
    update_reservation_args, JobControl, ReservationRequest, SbatchRequest, StartTime, PING,
    SHOW_PARTITIONS, SHOW_RESERVATIONS, SINFO_JSON, SQUEUE_JSON,
};
use super::error::SlurmError;
use super::model::{Job, Node, Partition, Reservation, SlurmJobId, Snapshot, Submitted, TestOnly};
use super::parse::{
    check_status, parse_partitions, parse_ping, parse_reservation_created, parse_reservations,
    parse_sbatch_parsable, parse_sinfo_json, parse_squeue_json, parse_test_only, JsonAnswer,
};
use super::runner::{CommandOutput, CommandRunner, Invocation};
use crate::clock::unix_seconds;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One Slurm cluster, reached through its `SLURM_CONF` as one user. Cheap to clone.
///
/// Every method issues exactly one command, except [`SlurmClient::snapshot`] (four, run
/// concurrently): the number of commands per planning cycle does not grow with the number of
/// jobs.
#[derive(Clone, Debug)]
pub struct SlurmClient {
    conf: PathBuf,
    user: Option<String>,
    runner: Arc<dyn CommandRunner>,
}

impl SlurmClient {
    /// The cluster whose configuration is `conf` (a `slurm.conf` path), reached through `runner`,
    /// as the user the daemon runs as.
    pub fn new(conf: impl Into<PathBuf>, runner: Arc<dyn CommandRunner>) -> Self {
        SlurmClient {
            conf: conf.into(),
            user: None,
            runner,
        }
    }

    /// Acts as `user` (each command through `runuser -u USER --`, which needs root). Jobs are
    /// then submitted as that user, and reservations must name that user in `Users=` for its
    /// jobs to run in them; creating reservations needs root or SlurmUser (or a Slurm operator,
    /// which needs slurmdbd).
    pub fn acting_as(mut self, user: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self
    }

    /// The `slurm.conf` path.
    pub fn conf(&self) -> &Path {
        &self.conf
    }

    /// The user commands run as, when not the daemon's own.
    pub fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    /// `program args...` against this cluster, as this client's user.
    pub fn invocation<I, S>(&self, program: &str, args: I) -> Invocation
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut inv = Invocation::new(program, args);
        inv.slurm_conf = Some(self.conf.clone());
        inv.user.clone_from(&self.user);
        inv
    }

    async fn run(&self, inv: &Invocation) -> Result<(String, CommandOutput), SlurmError> {
        let out = self.runner.run(inv).await?;
        Ok((inv.display(), out))
    }

    async fn run_ok(&self, inv: &Invocation) -> Result<(String, CommandOutput), SlurmError> {
        let (cmd, out) = self.run(inv).await?;
        check_status(&cmd, &out)?;
        Ok((cmd, out))
    }

    async fn query(
        &self,
        (program, args): (&str, &[&str]),
    ) -> Result<(String, String), SlurmError> {
        let (cmd, out) = self
            .run_ok(&self.invocation(program, args.iter().copied()))
            .await?;
        Ok((cmd, out.stdout))
    }

    /// `scontrol ping`: `Ok(true)` when the controller answers, `Ok(false)` when it is down.
    pub async fn ping(&self) -> Result<bool, SlurmError> {
        let (cmd, out) = self
            .run(&self.invocation(PING.0, PING.1.iter().copied()))
            .await?;
        match parse_ping(&cmd, &out.stdout) {
            Ok(up) => Ok(up),
            Err(parse_err) => {
                check_status(&cmd, &out)?;
                Err(parse_err)
            }
        }
    }

    /// `sinfo --json`: the nodes.
    pub async fn nodes(&self) -> Result<JsonAnswer<Node>, SlurmError> {
        let (cmd, text) = self.query(SINFO_JSON).await?;
        parse_sinfo_json(&cmd, &text)
    }

    /// `squeue --json`: every job the controller knows (finished ones too, for `MinJobAge`).
    pub async fn jobs(&self) -> Result<JsonAnswer<Job>, SlurmError> {
        let (cmd, text) = self.query(SQUEUE_JSON).await?;
        parse_squeue_json(&cmd, &text)
    }

    /// `scontrol show partition -o`: the partitions.
    pub async fn partitions(&self) -> Result<Vec<Partition>, SlurmError> {
        let (cmd, text) = self.query(SHOW_PARTITIONS).await?;
        parse_partitions(&cmd, &text)
    }

    /// `scontrol show reservation -o`: the reservations.
    pub async fn reservations(&self) -> Result<Vec<Reservation>, SlurmError> {
        let (cmd, text) = self.query(SHOW_RESERVATIONS).await?;
        parse_reservations(&cmd, &text)
    }

    /// Nodes, partitions, jobs and reservations, queried concurrently (four commands).
    pub async fn snapshot(&self) -> Result<Snapshot, SlurmError> {
        let taken_at = unix_seconds();
        let (nodes, partitions, jobs, reservations) = tokio::try_join!(
            self.nodes(),
            self.partitions(),
            self.jobs(),
            self.reservations()
        )?;
        Ok(Snapshot {
            taken_at,
            slurm_release: jobs.release.or(nodes.release),
            nodes: nodes.items,
            partitions,
            jobs: jobs.items,
            reservations,
        })
    }

    fn sbatch(&self, req: &SbatchRequest, test_only: bool) -> Result<Invocation, SlurmError> {
        let (args, stdin) = req.args(test_only)?;
        let mut inv = self.invocation("sbatch", args);
        inv.stdin = stdin;
        Ok(inv)
    }

    /// `sbatch --parsable ...`: submits; returns the new job's id.
    pub async fn submit(&self, req: &SbatchRequest) -> Result<Submitted, SlurmError> {
        let (cmd, out) = self.run_ok(&self.sbatch(req, false)?).await?;
        parse_sbatch_parsable(&cmd, &out.stdout)
    }

    /// `sbatch --test-only ...`: when and where Slurm would start the job now (no job is made,
    /// but a job id is used up).
    pub async fn test_only(&self, req: &SbatchRequest) -> Result<TestOnly, SlurmError> {
        let (cmd, out) = self.run_ok(&self.sbatch(req, true)?).await?;
        parse_test_only(&cmd, &out.stderr)
    }

    /// `scontrol create reservation ...`: returns the reservation's name as Slurm confirmed it.
    /// A refusal is a [`SlurmError::Failed`] whose kind says why
    /// ([`super::FailureKind::is_reservation_refused`]).
    pub async fn create_reservation(&self, req: &ReservationRequest) -> Result<String, SlurmError> {
        let (cmd, out) = self
            .run_ok(&self.invocation("scontrol", req.args()?))
            .await?;
        parse_reservation_created(&cmd, &out.stdout)
    }

    /// `scontrol delete reservation NAME`. Slurm refuses while a job, running **or pending**,
    /// is bound to it ([`super::FailureKind::ReservationInUse`]): cancel those jobs first.
    pub async fn delete_reservation(&self, name: &str) -> Result<(), SlurmError> {
        self.run_ok(&self.invocation("scontrol", delete_reservation_args(name)?))
            .await?;
        Ok(())
    }

    /// `scancel ID...`: cancels these jobs (one command).
    pub async fn cancel(&self, jobs: &[SlurmJobId]) -> Result<(), SlurmError> {
        self.run_ok(&self.invocation("scancel", scancel_args(jobs)?))
            .await?;
        Ok(())
    }

    /// `scontrol suspend|resume|requeue|hold|release ID`.
    pub async fn control(&self, action: JobControl, job: SlurmJobId) -> Result<(), SlurmError> {
        self.run_ok(&self.invocation("scontrol", action.args(job)))
            .await?;
        Ok(())
    }

    /// `scontrol update ReservationName=NAME StartTime=T Duration=M`.
    pub async fn update_reservation(
        &self,
        name: &str,
        start: StartTime,
        duration_minutes: u32,
    ) -> Result<(), SlurmError> {
        let args = update_reservation_args(name, start, duration_minutes)?;
        self.run_ok(&self.invocation("scontrol", args)).await?;
        Ok(())
    }

    /// `scontrol update ReservationName=NAME EndTime=T`: a begun reservation's new end.
    pub async fn extend_reservation(&self, name: &str, end: i64) -> Result<(), SlurmError> {
        let args = extend_reservation_args(name, end)?;
        self.run_ok(&self.invocation("scontrol", args)).await?;
        Ok(())
    }

    /// `scontrol update JobId=ID StartTime=T`: a pending job's earliest start.
    pub async fn update_begin(&self, job: SlurmJobId, begin: StartTime) -> Result<(), SlurmError> {
        self.run_ok(&self.invocation("scontrol", update_begin_args(job, begin)))
            .await?;
        Ok(())
    }
}
