//! The site's side of a grid across hosts: a site lends clusters to a centre on another
//! host. It connects out to the centre, says what it lends, fetches the commands queued for
//! it (reserve, submit, cancel, ...), carries them out here as this service's own
//! reservations and jobs of the grid's user, answers them, and pushes its lent clusters'
//! state. Every command is carried out once however often it comes: a reservation is found
//! again by the centre's id in its owner, a part by its name.

use crate::config::grid::GridConfig;
use crate::runtime::Service;
use crate::state::refusal::Refusal;
use crate::state::world::{Held, World};
use foresight_core::{ClusterId, JobId, ReservationId};
use foresight_rm::grid::{
    Answer, CentreClient, Command, Hello, LentCluster, Op, Reply, SiteSnapshot, MAX_OUTPUT_CHUNK,
    MAX_WAIT_SECS,
};
use foresight_rm::slurm::Naming;
use foresight_rm::{
    ClusterState, Outcome, PartHandle, ReserveRequest, RmJob, RmJobState, RmReservation, Submission,
};
use foresight_store::{AclSpec, JobState};
use foresight_store::{JobRecord, ReservationRecord};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long an ended grid part stays in the snapshots, so that the centre learns its end.
const ENDED_KEPT_SECS: i64 = 3_600;

/// How often a batch of answers is sent before it waits for the next batch.
const ANSWER_TRIES: u32 = 3;

/// A site's link to its centre.
pub(crate) struct GridAgent {
    pub(crate) service: Arc<Service>,
    pub(crate) client: CentreClient,
    pub(crate) cfg: GridConfig,
    /// How the centre names its parts and reservations; known once it welcomed us.
    naming: Mutex<Option<(String, Naming)>>,
    /// The centre's mailbox this site was welcomed to (see `Welcome::mailbox`).
    mailbox: AtomicU64,
    /// When the centre last answered, and its lease of this site.
    contact: Mutex<Contact>,
    /// The fetches being carried out, by command: one delivered again meanwhile is not
    /// started twice (two transfers into one file).
    fetching: Mutex<std::collections::BTreeSet<(u64, u64)>>,
    /// Answers of fetches whose own sending failed, by mailbox: sent with the next batch
    /// to that mailbox (another mailbox numbers its commands anew).
    late: Mutex<Vec<(u64, Answer)>>,
}

/// The site's view of its contact with the centre.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Contact {
    /// When the centre last answered.
    pub(crate) last: tokio::time::Instant,
    /// The centre's lease of this site (its welcome says it).
    pub(crate) lease: Duration,
}

impl Contact {
    pub(crate) fn new() -> Contact {
        Contact {
            last: tokio::time::Instant::now(),
            lease: Duration::from_secs(30),
        }
    }
}

impl Service {
    /// Starts lending this service's clusters to the centre its `[grid]` names, when it
    /// names one.
    pub(crate) fn start_grid_agent(self: &Arc<Self>) -> anyhow::Result<()> {
        let Some(cfg) = self.cfg.grid.clone() else {
            return Ok(());
        };
        let token = crate::config::read_text(&cfg.token_file)
            .map_err(|e| anyhow::anyhow!("[grid] token_file {}: {e}", cfg.token_file.display()))?;
        let ca = match &cfg.ca_cert {
            None => None,
            Some(p) => Some(
                std::fs::read(p)
                    .map_err(|e| anyhow::anyhow!("[grid] ca_cert {}: {e}", p.display()))?,
            ),
        };
        let client = CentreClient::new(&cfg.centres, &cfg.site, &token, ca.as_deref())
            .map_err(|e| anyhow::anyhow!("[grid]: {e}"))?;
        let agent = Arc::new(GridAgent {
            service: self.clone(),
            client,
            cfg,
            naming: Mutex::new(None),
            mailbox: AtomicU64::new(0),
            contact: Mutex::new(Contact::new()),
            fetching: Mutex::default(),
            late: Mutex::default(),
        });
        let a = agent.clone();
        self.spawn_task(async move { a.command_loop().await });
        self.spawn_task(async move { agent.snapshot_loop().await });
        Ok(())
    }
}

impl GridAgent {
    fn naming(&self) -> Option<(String, Naming)> {
        lock(&self.naming).clone()
    }

    fn hello(&self) -> Hello {
        let w = self.service.world();
        Hello {
            site: self.cfg.site.clone(),
            clusters: self
                .cfg
                .lend
                .iter()
                .filter_map(|(name, &lend)| {
                    let k = w.cluster_index(name)?;
                    Some(LentCluster {
                        name: name.clone(),
                        processors: w.clusters[k].procs(),
                        lend,
                    })
                })
                .collect(),
        }
    }

    fn contact(&self) -> std::sync::MutexGuard<'_, Contact> {
        lock(&self.contact)
    }

    /// The centre answered.
    fn touch(&self) {
        self.contact().last = tokio::time::Instant::now();
    }

    /// Silent for half the centre's lease or more: past the lease it may plan this site's
    /// parts elsewhere.
    fn out_of_contact(&self) -> bool {
        let c = *self.contact();
        c.last.elapsed() >= c.lease / 2
    }

    /// Says hello until the centre answers, then settles the parts it no longer wants.
    async fn connect(&self) {
        let mut pause = Duration::from_millis(200);
        loop {
            match self.client.hello(&self.hello()).await {
                Ok(w) => match Naming::instance(&w.instance) {
                    Ok(n) => {
                        tracing::info!(centre = %w.instance, "connected to the centre");
                        if self.cfg.snapshot_ms.saturating_mul(4) > w.lease_seconds * 1_000 {
                            tracing::warn!(
                                "[grid] snapshot_ms = {} is more than a quarter of the centre's \
                                 lease of {} s: the centre may take this site as down between \
                                 two reports",
                                self.cfg.snapshot_ms,
                                w.lease_seconds
                            );
                        }
                        *self.contact() = Contact {
                            last: tokio::time::Instant::now(),
                            lease: Duration::from_secs(w.lease_seconds.max(1)),
                        };
                        if let Err(e) = self.settle(&w.instance, &w.parts).await {
                            tracing::warn!("settling the centre's parts: {e}");
                        }
                        self.mailbox.store(w.mailbox, Ordering::SeqCst);
                        *lock(&self.naming) = Some((w.instance, n));
                        return;
                    }
                    Err(e) => tracing::warn!("the centre's instance name: {e}"),
                },
                Err(e) => tracing::warn!("cannot reach the centre: {e}"),
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(2));
        }
    }

    async fn command_loop(self: Arc<Self>) {
        let mut after = 0;
        loop {
            if self.service.is_closing() {
                return;
            }
            if self.naming().is_none() {
                self.connect().await;
                // A new mailbox (the centre restarted, or another took over) numbers its
                // commands from 1; the same one hands again what is not answered yet.
                after = 0;
            }
            let mailbox = self.mailbox.load(Ordering::SeqCst);
            let wait = Duration::from_secs(MAX_WAIT_SECS);
            let commands = match self.client.commands(mailbox, after, wait).await {
                Ok(c) => {
                    self.touch();
                    c
                }
                Err(e) => {
                    tracing::warn!("fetching the centre's commands: {e}");
                    *lock(&self.naming) = None;
                    continue;
                }
            };
            let mut answers = Vec::with_capacity(commands.len());
            let mut last = after;
            for c in commands {
                last = last.max(c.seq);
                let seq = c.seq;
                if matches!(c.op, Op::Fetch { .. } | Op::Send { .. }) {
                    // A transfer may take long: it must not hold the site's other commands.
                    if lock(&self.fetching).insert((mailbox, seq)) {
                        let agent = self.clone();
                        self.service
                            .spawn_task(async move { agent.fetch_and_answer(mailbox, c).await });
                    }
                    continue;
                }
                let reply = self.carry_out(c).await;
                answers.push(Answer { seq, reply });
            }
            lock(&self.late).retain(|(m, a)| {
                if *m == mailbox {
                    answers.push(a.clone());
                }
                false
            });
            // Answered beside the next long poll, which opens at once: back to back, a
            // command takes one round trip of the link, not two.
            after = last;
            if !answers.is_empty() {
                let agent = self.clone();
                self.service
                    .spawn_task(async move { agent.send_answers(mailbox, answers).await });
            }
        }
    }

    /// Sends `answers` to mailbox `mailbox`, tried again a few times; those that still
    /// cannot be sent go with the command loop's next batch.
    async fn send_answers(&self, mailbox: u64, answers: Vec<Answer>) {
        let mut pause = Duration::from_millis(200);
        for _ in 0..ANSWER_TRIES {
            match self.client.answer(mailbox, &answers).await {
                Ok(()) => return,
                Err(e) => tracing::warn!("answering the centre: {e}"),
            }
            tokio::time::sleep(pause).await;
            pause *= 2;
        }
        lock(&self.late).extend(answers.into_iter().map(|a| (mailbox, a)));
    }

    /// Carries out fetch `c` and answers it; an answer that cannot be sent goes with the
    /// command loop's next batch.
    /// Carries out fetch `c` of mailbox `mailbox` and answers it there.
    async fn fetch_and_answer(&self, mailbox: u64, c: Command) {
        let seq = c.seq;
        let reply = self.carry_out(c).await;
        let answer = Answer { seq, reply };
        if let Err(e) = self
            .client
            .answer(mailbox, std::slice::from_ref(&answer))
            .await
        {
            tracing::warn!("answering the centre: {e}");
            lock(&self.late).push((mailbox, answer));
        }
        lock(&self.fetching).remove(&(mailbox, seq));
    }

    async fn snapshot_loop(self: Arc<Self>) {
        let every = Duration::from_millis(self.cfg.snapshot_ms.max(1));
        loop {
            if self.service.is_closing() {
                return;
            }
            let sent = match self.naming() {
                None => false,
                Some((instance, naming)) => {
                    self.stretch_late_parts(&instance).await;
                    let snaps = self.snapshots(&instance, &naming);
                    // Bounded, so that a link dropping packets is noticed within the lease.
                    let within = self.contact().lease / 4;
                    match tokio::time::timeout(within, self.client.snapshots(&snaps)).await {
                        Ok(Ok(())) => true,
                        Ok(Err(e)) => {
                            tracing::warn!("sending the lent clusters' state: {e}");
                            false
                        }
                        Err(_) => {
                            tracing::warn!("sending the lent clusters' state: no answer in time");
                            false
                        }
                    }
                }
            };
            if sent {
                self.touch();
            } else if self.out_of_contact() {
                let held = self.service.hold_grid_parts(&self.cfg.user);
                if held > 0 {
                    tracing::warn!(
                        held,
                        "the centre is out of reach: grid parts not started are held"
                    );
                    self.service.flush().await;
                    // Lifted by the centre's next welcome: say hello again.
                    *lock(&self.naming) = None;
                }
            }
            tokio::time::sleep(every).await;
        }
    }

    /// Carries out one command of the centre.
    async fn carry_out(&self, c: Command) -> Reply {
        let what = c.op.describe();
        let result = match self.naming() {
            None => Err(Refusal::conflict("not connected to the centre")),
            Some((instance, naming)) => self.run(&c.cluster, c.op, &instance, &naming).await,
        };
        match result {
            Ok(reply) => reply,
            Err(e) => {
                tracing::info!(command = c.seq, "{what} refused: {e}");
                Reply::Refused {
                    message: e.to_string(),
                    unreachable: false,
                }
            }
        }
    }

    async fn run(
        &self,
        cluster: &str,
        op: Op,
        instance: &str,
        naming: &Naming,
    ) -> Result<Reply, Refusal> {
        let lend = *self.cfg.lend.get(cluster).ok_or_else(|| {
            Refusal::forbidden(
                "cluster",
                format!("site {} lends no cluster {cluster}", self.cfg.site),
            )
        })?;
        let s = &self.service;
        let owner = owner_of(instance);
        let lending = Lending {
            cluster: cluster.to_owned(),
            user: self.cfg.user.clone(),
            owner: owner.clone(),
            lend,
        };
        match op {
            Op::Reserve { request, .. } => {
                let cfg = self.cfg.clone();
                let made = s
                    .mutate(move |w, now| {
                        grid_user(w, &cfg)?;
                        reserve(w, now, &lending, &request)
                    })
                    .await?;
                if let Some(id) = made {
                    self.hold_in_slurm(cluster, id).await?;
                }
                Ok(Reply::Done)
            }
            // Released in Slurm too, when Slurm schedules the cluster: the records' release
            // asks its resource manager to.
            Op::Release { reservation } => {
                s.mutate(move |w, now| {
                    if let Some(id) = ours(w, &owner, reservation) {
                        if w.reservations[&id].state.is_live() {
                            w.release_reservation(now, id)?;
                        }
                    }
                    Ok(Reply::Done)
                })
                .await
            }
            Op::Submit { submission } => self.submit(&lending, &submission, naming).await,
            Op::Cancel { part } => {
                let id = self.part(&part, naming)?;
                s.mutate(move |w, now| {
                    if !w.jobs[&id].state.is_final() {
                        w.cancel(now, id)?;
                    }
                    Ok(Reply::Done)
                })
                .await
            }
            Op::Suspend { part } => self.pause(&part, naming, true).await,
            Op::Resume { part } => self.pause(&part, naming, false).await,
            Op::Requeue { part } => {
                let id = self.part(&part, naming)?;
                s.mutate(move |w, now| w.requeue(now, id).map(|_| Reply::Done))
                    .await
            }
            Op::Move { to, .. } => {
                let moved = s
                    .mutate(move |w, now| moves::move_to(w, now, &lending, &to))
                    .await?;
                self.move_in_slurm(cluster, moved).await?;
                Ok(Reply::Done)
            }
            Op::Output {
                part,
                stderr,
                offset,
            } => {
                let id = self.part(&part, naming)?;
                let path = {
                    let w = s.world();
                    let j = &w.jobs[&id];
                    if stderr {
                        j.stderr.clone()
                    } else {
                        j.stdout.clone()
                    }
                };
                let bytes = match path {
                    None => None,
                    Some(p) => read_chunk(std::path::Path::new(&p), offset).await,
                };
                Ok(Reply::Output { bytes })
            }
            Op::Fetch {
                part,
                files,
                within_ms,
            } => {
                let name = naming.part(part.job, part.attempt);
                let deadline = transfer_deadline(within_ms);
                self.fetch(cluster, &part, &files, &name, deadline).await
            }
            Op::Send {
                part,
                files,
                within_ms,
            } => {
                let name = naming.part(part.job, part.attempt);
                let deadline = transfer_deadline(within_ms);
                self.send(cluster, &part, &files, &name, deadline).await
            }
            Op::Estimate { .. } => Ok(Reply::Estimate { start: None }),
        }
    }
}

impl GridAgent {
    /// The job here that is part `part` of the centre's, refused when it is not one of the
    /// grid's (a centre reaches no local user's job).
    fn part(&self, part: &PartHandle, naming: &Naming) -> Result<JobId, Refusal> {
        let name = naming.part(part.job, part.attempt);
        let unknown = || {
            Refusal::not_found(format!(
                "no job {} of the grid here",
                part.external.as_deref().unwrap_or(&name)
            ))
        };
        let id = part
            .external
            .as_deref()
            .and_then(|e| e.parse().ok())
            .map(JobId)
            .ok_or_else(unknown)?;
        let w = self.service.world();
        match w.jobs.get(&id) {
            Some(j) if j.user == self.cfg.user && j.name.as_deref() == Some(&name) => Ok(id),
            _ => Err(unknown()),
        }
    }

    async fn pause(
        &self,
        part: &PartHandle,
        naming: &Naming,
        stop: bool,
    ) -> Result<Reply, Refusal> {
        let id = self.part(part, naming)?;
        self.service
            .mutate(move |w, now| {
                let j = &w.jobs[&id];
                // Already as asked: a repeated command.
                if j.state != JobState::Running || j.suspended == stop {
                    return Ok(Reply::Done);
                }
                w.pause(now, id, stop).map(|_| Reply::Done)
            })
            .await
    }

    /// Submits part `sub` as a job of the grid's user bound to its reservation here; a part
    /// submitted before is answered with the job it became.
    async fn submit(
        &self,
        lending: &Lending,
        sub: &Submission,
        naming: &Naming,
    ) -> Result<Reply, Refusal> {
        let (cluster, owner) = (lending.cluster.as_str(), lending.owner.as_str());
        let spec = &sub.spec;
        let name = naming.part(spec.job, spec.attempt);
        let (user, reservation) = {
            let w = self.service.world();
            if let Some(j) = w
                .jobs
                .values()
                .find(|j| j.user == self.cfg.user && j.name.as_deref() == Some(&name))
            {
                return Ok(submitted(spec.job, spec.attempt, j.id));
            }
            let user = grid_user(&w, &self.cfg)?;
            let reservation = match sub.reservation {
                None => None,
                Some(r) => Some(ours(&w, owner, r).ok_or_else(|| {
                    Refusal::not_found(format!("no reservation {r} of the grid here"))
                })?),
            };
            (user, reservation)
        };
        crate::state::world::accounts::check_runs_as(&self.service.world(), &user.name)?;
        let walltime = if spec.walltime_secs > 0 {
            spec.walltime_secs as i64
        } else {
            3_600
        };
        let reservation = match (reservation, sub.reservation) {
            (Some(id), Some(centre)) => {
                let lending = lending.clone();
                let renewed = self
                    .service
                    .mutate(move |w, now| {
                        Ok(renew_if_late(w, now, &lending, (id, centre), walltime))
                    })
                    .await??;
                if let Some(back) = renewed {
                    let moved = Moved {
                        id,
                        back: Some(back),
                    };
                    if let Err(e) = self.move_in_slurm(cluster, moved).await {
                        // Its old window the part can never use: released, as when there
                        // is no room, so that the centre plans the part again.
                        let _ = self
                            .service
                            .mutate(move |w, now| w.release_reservation(now, id))
                            .await;
                        return Err(e);
                    }
                }
                Some(id)
            }
            _ => None,
        };
        // It runs in its inbox, a directory of its own: with its inputs, when the centre
        // sent some, and where its outputs are sent up from.
        let account = self.service.world().unix_account(&user.name).0;
        let inbox = self
            .workspace(cluster, &name, &account)
            .map_err(Refusal::conflict)?;
        let cwd = Some(inbox.display().to_string());
        let request = serde_json::json!({
            "cwd": cwd,
            "name": name,
            "procs": spec.processors.len().max(1),
            "walltime": walltime,
            "cluster": cluster,
            "reservation": reservation.map(|r| r.0),
            "command": spec.command,
            "env": spec.env.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
            "begin": sub.begin,
        });
        let request = serde_json::from_value(request)
            .map_err(|e| Refusal::invalid("submission", e.to_string()))?;
        let ids = self.service.submit(&user, vec![request], false).await?;
        Ok(submitted(spec.job, spec.attempt, ids[0]))
    }

    /// The lent clusters as they are here, named as the centre names its parts and
    /// reservations.
    fn snapshots(&self, instance: &str, naming: &Naming) -> Vec<SiteSnapshot> {
        let now = self.service.now().secs();
        let owner = owner_of(instance);
        let w = self.service.world();
        self.cfg
            .lend
            .keys()
            .filter_map(|name| {
                let k = w.cluster_index(name)?;
                Some(SiteSnapshot {
                    cluster: name.clone(),
                    state: cluster_state(&w, k, now, &owner, &self.cfg.user, naming),
                })
            })
            .collect()
    }
}

/// The local user the grid's jobs run as, refused when the site's administrator has not
/// made it or has disabled it (which is how a site stops taking the grid's work).
fn grid_user(w: &World, cfg: &GridConfig) -> Result<foresight_store::UserRecord, Refusal> {
    match w.users.get(&cfg.user) {
        None => Err(Refusal::forbidden(
            "user",
            format!(
                "site {} has no user {:?} for the grid's jobs ([grid] user): its \
                 administrator adds it with `foresight user add {}`",
                cfg.site, cfg.user, cfg.user
            ),
        )),
        Some(u) if u.disabled || u.removed => Err(Refusal::forbidden(
            "user",
            format!(
                "site {} takes no grid work: its user {:?} is disabled",
                cfg.site, cfg.user
            ),
        )),
        Some(u) => Ok(u.clone()),
    }
}

fn submitted(job: u64, attempt: u32, id: u64) -> Reply {
    Reply::Submitted {
        part: PartHandle {
            job,
            attempt,
            external: Some(id.to_string()),
        },
    }
}

/// The owner of the reservations made here for the centre `instance`: `grid:<instance>:`
/// then the centre's reservation id, so that the site's administrator sees whose they are
/// and a repeated command finds them again, after a restart too.
fn owner_of(instance: &str) -> String {
    format!("grid:{instance}:")
}

/// The centre's reservation id of a reservation made here for it.
fn centre_id(r: &ReservationRecord, owner: &str) -> Option<u64> {
    r.owner.strip_prefix(owner)?.parse().ok()
}

/// The reservation made here for the centre's reservation `id` (the newest: one made
/// again for a late part replaces the first).
fn ours(w: &World, owner: &str, id: u64) -> Option<ReservationId> {
    w.reservations
        .values()
        .filter(|r| centre_id(r, owner) == Some(id))
        .map(|r| ReservationId(r.id))
        .max()
}

/// What the grid may hold on one lent cluster here: the centre's reservations (by their
/// owner), for the grid's user, up to what the site lends.
#[derive(Clone, Debug)]
struct Lending {
    cluster: String,
    user: String,
    owner: String,
    lend: u32,
}

/// Holds `req` for the grid, once however often it is asked: the reservation, when it is
/// live (`None`: it was made before and has ended or been given back). A repeated command
/// finds the live one again, which its cluster's Slurm is then asked to hold again too (the
/// site may have stopped between its record and Slurm's).
fn reserve(
    w: &mut World,
    now: foresight_core::time::Time,
    lending: &Lending,
    req: &ReserveRequest,
) -> Result<Option<ReservationId>, Refusal> {
    if let Some(id) = ours(w, &lending.owner, req.id) {
        return Ok(w.reservations[&id].state.is_live().then_some(id));
    }
    make_grid_reservation(w, now, lending, req)?;
    Ok(ours(w, &lending.owner, req.id))
}

/// Makes `req` for the grid, within what the site lends.
fn make_grid_reservation(
    w: &mut World,
    now: foresight_core::time::Time,
    lending: &Lending,
    req: &ReserveRequest,
) -> Result<(), Refusal> {
    let Lending {
        cluster,
        user,
        owner,
        ..
    } = lending;
    let (cluster, owner) = (cluster.as_str(), owner.as_str());
    let k = w
        .cluster_index(cluster)
        .ok_or_else(|| Refusal::not_found(format!("no cluster {cluster} here")))?;
    check_lent(w, lending, req, None)?;
    let acl = AclSpec {
        users: vec![user.to_owned()],
        ..AclSpec::default()
    };
    let owner = format!("{owner}{}", req.id);
    w.make_reservation(
        now,
        &owner,
        k,
        Held::Count(req.procs),
        req.start,
        req.end,
        acl,
        None,
    )
    .map(|_| ())
}

/// Refuses `req` when the grid's other live reservations on the lent cluster (all but
/// `except`) and it would hold more than the site lends at any second of its window.
fn check_lent(
    w: &World,
    lending: &Lending,
    req: &ReserveRequest,
    except: Option<ReservationId>,
) -> Result<(), Refusal> {
    let (cluster, lend) = (lending.cluster.as_str(), lending.lend);
    let held: u32 = w
        .reservations
        .values()
        .filter(|r| {
            r.cluster == cluster
                && r.state.is_live()
                && Some(ReservationId(r.id)) != except
                && centre_id(r, &lending.owner).is_some()
                && r.start < req.end
                && req.start < r.end
        })
        .map(|r| r.procs)
        .sum();
    if held + req.procs > lend {
        return Err(Refusal::conflict_at(
            "procs",
            format!(
                "cluster {cluster} lends at most {lend} processors to the grid; {held} are \
                 held during [{}, {})",
                req.start, req.end
            ),
        ));
    }
    Ok(())
}

/// Cluster `k` as a resource manager would report it to the centre: every job on it (ended
/// grid parts for an hour) and every live reservation.
fn cluster_state(
    w: &World,
    k: ClusterId,
    now: i64,
    owner: &str,
    user: &str,
    naming: &Naming,
) -> ClusterState {
    let cluster = w.clusters[k].cfg.name.as_str();
    let reservation_name = |id: u64| -> String {
        match w.reservations.get(&ReservationId(id)) {
            Some(r) => match centre_id(r, owner) {
                Some(c) => naming.reservation(c),
                None => format!("site-{id}"),
            },
            None => format!("site-{id}"),
        }
    };
    let jobs = w
        .jobs
        .values()
        .filter(|j| j.cluster.as_deref() == Some(cluster))
        .filter_map(|j| {
            let foresight = (j.user == user)
                .then(|| j.name.as_deref().and_then(|n| naming.parse_part(n)))
                .flatten();
            let kept = !j.state.is_final()
                || foresight.is_some() && j.ended_at.is_some_and(|e| now - e < ENDED_KEPT_SECS);
            kept.then(|| RmJob {
                external: j.id.to_string(),
                foresight,
                user: j.user.clone(),
                state: rm_state(j),
                procs: j.procs,
                time_limit: (j.walltime > 0).then_some(j.walltime),
                submitted_at: j.submitted_at,
                start: j.started_at.or(j.planned_start),
                priority: u64::from(j.priority),
                reservation: j.reservation.map(reservation_name),
            })
        })
        .collect();
    let reservations = w
        .reservations
        .values()
        .filter(|r| r.cluster == cluster && r.state.is_live() && r.end > now)
        .map(|r| {
            let c = centre_id(r, owner);
            RmReservation {
                name: reservation_name(r.id),
                foresight: c,
                start: r.start,
                end: r.end,
                procs: r.procs,
            }
        })
        .collect();
    ClusterState {
        taken_at: now,
        processors: w.clusters[k].procs(),
        jobs,
        reservations,
    }
}

fn rm_state(j: &JobRecord) -> RmJobState {
    match j.state {
        JobState::Running if j.suspended => RmJobState::Suspended,
        JobState::Running => RmJobState::Running,
        s if s.is_final() => RmJobState::Ended(Outcome {
            exit_code: j.exit_code,
            signal: j.signal,
            timed_out: s == JobState::Timeout,
            cancelled: s == JobState::Cancelled,
            started_at: j.started_at.unwrap_or(0),
            ended_at: j.ended_at.unwrap_or(0),
            error: (s == JobState::Failed && j.exit_code.is_none() && j.signal.is_none()).then(
                || {
                    j.reason
                        .clone()
                        .unwrap_or_else(|| "failed at the site".into())
                },
            ),
        }),
        _ => RmJobState::Pending,
    }
}

/// At most [`MAX_OUTPUT_CHUNK`] bytes of the file from `offset` on; `None` when there is
/// no such file.
async fn read_chunk(path: &std::path::Path, offset: u64) -> Option<Vec<u8>> {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let mut f = tokio::fs::File::open(path).await.ok()?;
    f.seek(std::io::SeekFrom::Start(offset)).await.ok()?;
    let mut bytes = Vec::new();
    f.take(MAX_OUTPUT_CHUNK as u64)
        .read_to_end(&mut bytes)
        .await
        .ok()?;
    Some(bytes)
}

/// The longest a site spends on one transfer when the centre did not say how long it waits.
const MOST_TRANSFER: Duration = Duration::from_secs(24 * 3_600);

/// When a transfer the centre waits `within_ms` for is given up: then, or after
/// [`MOST_TRANSFER`] for a centre that did not say.
fn transfer_deadline(within_ms: Option<u64>) -> tokio::time::Instant {
    let within = within_ms.map_or(MOST_TRANSFER, Duration::from_millis);
    tokio::time::Instant::now() + within.min(MOST_TRANSFER)
}

#[path = "grid_site_move.rs"]
mod moves;
pub(crate) use moves::Moved;

#[path = "grid_site_late.rs"]
mod late;
use late::renew_if_late;
#[cfg(test)]
use late::{late_parts, RENEWED_SLACK_SECS};

#[cfg(test)]
#[path = "grid_site_tests.rs"]
mod tests;

/// `m` locked, whatever a panicking holder left.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
