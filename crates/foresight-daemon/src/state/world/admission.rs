//! Admission: whether a job may be accepted (texts, limits, needs, clusters), and how an
//! accepted one enters the world: a local job into its cluster's queue, a global one into
//! the broker.

use crate::state::refusal::Refusal;
use crate::state::world::World;
use foresight_core::broker::ClusterSpec;
use foresight_core::broker::{Phase, ReservedPart};
use foresight_core::grid::GlobalJob;
use foresight_core::licence::LicencePool;
use foresight_core::select::Criterion;
use foresight_core::time::{Dur, Interval, Time};
use foresight_core::{Job, JobId, ReservationId, UserId};
use foresight_store::CredentialNames;
use foresight_store::JobState;
use foresight_store::{JobRecord, PartRecord};
use std::collections::BTreeSet;

impl World {
    /// Refuses what `exec` would refuse later (NUL bytes, bad environment names) and names
    /// that would drive a terminal, at submission rather than at launch.
    pub(crate) fn check_texts(j: &JobRecord) -> Result<(), Refusal> {
        use crate::state::limits;
        if let Some(n) = &j.name {
            limits::name("name", n)?;
        }
        if let Some(a) = &j.app {
            limits::name("app", a)?;
        }
        for (field, c) in CredentialNames::KINDS.iter().zip(j.cred.by_kind()) {
            if let Some(c) = c {
                limits::name(field, c)?;
            }
        }
        for a in &j.command {
            limits::exec_text("command", a)?;
        }
        for (k, v) in &j.env {
            limits::env_key("env", k)?;
            limits::exec_text("env", v)?;
        }
        if let Some(cwd) = &j.cwd {
            limits::exec_text("cwd", cwd)?;
        }
        Ok(())
    }

    /// Checks a new job against the grid, the reservations and the user's budget.
    pub fn admit(&self, j: &JobRecord) -> Result<(), Refusal> {
        if j.procs == 0 {
            return Err(Refusal::invalid("procs", "must be at least 1"));
        }
        if j.walltime <= 0 {
            return Err(Refusal::invalid(
                "walltime",
                format!("must be positive, got {} s", j.walltime),
            ));
        }
        crate::state::limits::seconds("walltime", j.walltime)?;
        if let Some(b) = j.begin {
            crate::state::limits::instant("begin", b)?;
        }
        if j.command.is_empty() || j.command[0].is_empty() {
            return Err(Refusal::invalid("command", "must name a program to run"));
        }
        if j.priority > 0 && (j.cluster.is_some() || j.reservation.is_some()) {
            return Err(Refusal::invalid(
                "priority",
                "is a level of global jobs: a job for one cluster or one reservation is that \
                 cluster's own work, never preempted and never preempting",
            ));
        }
        if let Some(p) = j.price {
            crate::state::limits::price("price", p)?;
        }
        Self::check_texts(j)?;
        if let Some(cwd) = &j.cwd {
            if !cwd.starts_with('/') {
                return Err(Refusal::invalid(
                    "cwd",
                    format!("must be absolute, got {cwd:?}"),
                ));
            }
        }
        if let Some(r) = j.reservation {
            let res = self
                .reservations
                .get(&ReservationId(r))
                .filter(|r| r.state.is_live())
                .ok_or_else(|| {
                    Refusal::invalid("reservation", format!("no live reservation {r}"))
                })?;
            if !World::acl_admits(&res.acl, &j.user, Some(j)) {
                return Err(Refusal::forbidden(
                    "reservation",
                    format!("reservation {r}'s ACL does not admit user {:?}", j.user),
                ));
            }
            if j.procs > res.procs {
                return Err(Refusal::invalid(
                    "procs",
                    format!(
                        "{} processors asked; reservation {r} holds {}",
                        j.procs, res.procs
                    ),
                ));
            }
            if let Some(c) = &j.cluster {
                if *c != res.cluster {
                    return Err(Refusal::invalid(
                        "cluster",
                        format!("reservation {r} is on cluster {:?}, not {c:?}", res.cluster),
                    ));
                }
            }
            self.admit_needs(j, Some(&res.cluster))?;
            return self.check_budget(j, self.local_tariff(j).unwrap_or(0.0));
        }
        self.admit_needs(j, j.cluster.as_deref())?;
        match &j.cluster {
            Some(c) => {
                let k = self
                    .cluster_index(c)
                    .ok_or_else(|| self.unknown_cluster(c))?;
                if !crate::config::wiki_rm::takes_foresight_jobs(&self.clusters[k].cfg) {
                    return Err(Refusal::invalid(
                        "cluster",
                        format!("cluster {c}: {}", crate::config::wiki_rm::no_route_reason()),
                    ));
                }
                let max = self.clusters[k].admission_limit();
                if j.procs > max {
                    return Err(Refusal::invalid(
                        "procs",
                        format!(
                            "{} processors asked; cluster {c} has {max}, the most possible",
                            j.procs
                        ),
                    ));
                }
                self.check_budget(j, self.broker.clusters[k].tariff.base)?;
            }
            None => {
                let max = self.global_limit(j.co_allocate);
                if j.procs > max {
                    return Err(Refusal::invalid(
                        "procs",
                        format!(
                            "{} processors asked; the largest possible is {max}{}",
                            j.procs,
                            if j.co_allocate {
                                " (the whole grid)"
                            } else {
                                " (the largest cluster; co-allocation is off)"
                            }
                        ),
                    ));
                }
                self.check_budget(j, j.price.unwrap_or_else(|| self.default_price()))?;
            }
        }
        Ok(())
    }

    /// Refuses features no cluster offers (or `cluster`, for a job of one cluster) and
    /// licences no pool can give, naming the feature or the pool and its size.
    pub(crate) fn admit_needs(&self, j: &JobRecord, cluster: Option<&str>) -> Result<(), Refusal> {
        for f in &j.requires {
            foresight_core::broker::check_feature(f)
                .map_err(|e| Refusal::invalid("requires", e))?;
        }
        let specs: Vec<&ClusterSpec> = self
            .clusters
            .iter()
            .filter(|c| cluster.is_none_or(|n| c.cfg.name == n))
            .map(|c| &c.cfg.spec)
            .collect();
        if let Some(why) =
            foresight_core::broker::features_refusal(specs.iter().copied(), &j.requires)
        {
            let why = match cluster {
                Some(c) => why.replace(
                    "no cluster offers",
                    &format!("cluster {c:?} does not offer"),
                ),
                None => why,
            };
            return Err(Refusal::invalid("requires", why));
        }
        if j.licences.is_empty() {
            return Ok(());
        }
        let Some(cluster) = cluster else {
            // A global job: the planner places it on clusters drawing on its pools.
            if let Some(why) = foresight_core::licence::demand_refusal(&j.licences, &self.licences)
            {
                return Err(Refusal::invalid("licences", why));
            }
            return Ok(());
        };
        let pools: Vec<LicencePool> = self
            .licences
            .iter()
            .filter(|p| p.clusters.iter().any(|c| c == cluster))
            .cloned()
            .collect();
        if let Some(name) = j
            .licences
            .keys()
            .find(|n| !pools.iter().any(|p| &p.name == *n))
        {
            return Err(Refusal::invalid(
                "licences",
                format!("no licence pool {name:?} serves cluster {cluster:?}"),
            ));
        }
        if let Some(why) = foresight_core::licence::demand_refusal(&j.licences, &pools) {
            return Err(Refusal::invalid("licences", why));
        }
        Ok(())
    }

    /// Takes in jobs the store has made durable.
    pub fn accept(&mut self, now: Time, jobs: Vec<JobRecord>) {
        // A pass for these must not take the processors of a job past its prediction.
        self.correct_outlived(now);
        for j in jobs {
            let id = JobId(j.id);
            let held = j.held;
            let global = j.cluster.is_none() && j.reservation.is_none();
            let user = j.user.clone();
            // Stored already: marked only by what changes it from here.
            self.jobs.load(id, j);
            self.recount(id);
            if !global {
                // Counted at once, also by a cycle planning off the lock right now.
                self.sync_broker_budget(&user);
            }
            if held || self.stop_at_gate(id) {
                continue;
            }
            if global {
                self.enqueue_global(now, id);
            } else {
                self.submit_local(now, id);
            }
        }
        self.wake_waiting(now);
    }

    /// Hands a global job to the broker: planned from the next cycle on.
    pub(crate) fn enqueue_global(&mut self, now: Time, id: JobId) {
        self.predict_global(id);
        if let Some(job) = self.global_job(id) {
            self.broker.submit(now, job);
            self.mark_prepaid(id);
        }
    }

    /// Tells the broker that job `id` was paid for before it came here (a peer dispatcher's
    /// award, see [`JobRecord::prepaid`]): it never waits for budget here.
    pub(crate) fn mark_prepaid(&mut self, id: JobId) {
        if self.jobs.get(&id).is_some_and(|j| j.prepaid > 0.0) {
            self.broker.set_prepaid(id);
        }
    }

    /// Puts back into the broker a global job that was reserved or running when the service
    /// stopped (its reservations and parts are already back in the clusters' schedulers).
    /// `due`: a reserved job whose reservations have begun is put back as started at their
    /// start, as the broker had it (its launch waits in `deferred`).
    pub(crate) fn adopt_global(&mut self, id: JobId, due: bool) {
        let Some(job) = self.global_job(id) else {
            return;
        };
        let j = &self.jobs[&id];
        let mut parts = Vec::new();
        let mut ended = BTreeSet::new();
        for p in &j.parts {
            let (Some(k), Some(r)) = (self.cluster_index(&p.cluster), p.reservation) else {
                continue;
            };
            let Some(res) = self.reservations.get(&ReservationId(r)) else {
                continue;
            };
            if p.ended {
                ended.insert(k);
            }
            parts.push(ReservedPart {
                cluster: k,
                reservation: ReservationId(r),
                procs: p.procs,
                processors: p.processors.clone(),
                window: Interval::new(Time(res.start), Time(res.end)),
            });
        }
        let start = parts
            .iter()
            .map(|p| p.window.start)
            .min()
            .unwrap_or(Time(0));
        let end = parts.iter().map(|p| p.window.end).max().unwrap_or(start);
        // What the current attempt's reservation was charged: earlier attempts' use is
        // settled and never refunded.
        let cost = j.charged - j.settled;
        let stopped = j.preemption.clone().unwrap_or_default();
        let phase = match (j.state, j.started_at, stopped.since) {
            // Stopped for a job of a higher level: it holds nothing, and resumes by itself.
            (JobState::Running, Some(s), Some(since)) => Phase::Suspended {
                start: Time(s),
                cost,
                parts,
                since: Time(since),
                left: Dur(stopped.left.max(1)),
                suspended: Dur(stopped.suspended),
            },
            (JobState::Running, Some(s), None) => Phase::Running {
                start: Time(s),
                end,
                cost,
                parts,
                ended,
                suspended: Dur(stopped.suspended),
            },
            (JobState::Reserved, _, _) if due => Phase::Running {
                start,
                end,
                cost,
                parts,
                ended,
                suspended: Dur(stopped.suspended),
            },
            _ => Phase::Reserved {
                start,
                end,
                cost,
                parts,
            },
        };
        self.broker.adopt(job, phase);
        self.mark_prepaid(id);
    }

    /// A global job's record as the broker plans it.
    pub(crate) fn global_job(&mut self, id: JobId) -> Option<GlobalJob> {
        let owner = self.jobs.get(&id)?.user.clone();
        let user = UserId(self.intern(0, &owner));
        Some(self.global_job_of(&self.jobs[&id], user))
    }

    /// What this site's broker would do with global job `record` (a peer dispatcher's
    /// award, or a job it bids for) handed to it at `now`: start it at once, preempting
    /// which jobs, or leave it waiting ([`foresight_core::broker::Broker::promise`]).
    pub(crate) fn promise(
        &mut self,
        now: Time,
        record: &JobRecord,
    ) -> foresight_core::broker::Promise {
        let user = UserId(self.intern(0, &record.user));
        let job = self.global_job_of(record, user);
        // An award is paid for by the hold its start takes, or its user is unlimited.
        self.broker.promise(now, job, true)
    }

    /// A global job's record as the broker plans it, whether or not this site holds it.
    fn global_job_of(&self, j: &JobRecord, user: UserId) -> GlobalJob {
        GlobalJob {
            id: JobId(j.id),
            user,
            submit: Time(j.submitted_at),
            procs: j.procs,
            walltime: Dur(j.walltime),
            max_price: j.price.unwrap_or_else(|| self.default_price()),
            input_mb: crate::state::staging::input_mb(j),
            home: crate::state::staging::data_cluster(j).and_then(|c| self.cluster_index(&c)),
            co_allocate: j.co_allocate,
            criterion: Criterion::EarliestFinish,
            priority: j.priority,
            requeue: j.requeue,
            begin: j.begin.map(Time),
            requires: j.requires.iter().cloned().collect(),
            licences: j.licences.clone(),
            prediction: super::prediction::restored_plan(j),
        }
    }

    /// Queues a local (or reservation-bound) job at its cluster's local policy.
    pub(crate) fn submit_local(&mut self, now: Time, id: JobId) {
        let Some(j) = self.jobs.get(&id) else { return };
        let cluster = match j.reservation {
            Some(r) => self
                .reservations
                .get(&ReservationId(r))
                .map(|r| r.cluster.clone()),
            None => j.cluster.clone(),
        };
        let Some(k) = cluster.as_deref().and_then(|c| self.cluster_index(c)) else {
            self.fail(
                now,
                id,
                "its cluster or reservation no longer exists".into(),
            );
            return;
        };
        let (user, credn, procs, walltime, reservation, early, submitted, begin) = (
            j.user.clone(),
            j.cred.clone(),
            j.procs,
            j.walltime,
            j.reservation,
            j.allow_early_start,
            j.submitted_at,
            j.begin,
        );
        if self.clusters[k].kind.schedules_itself() {
            // The cluster's own scheduler queues it; Foresight follows it from snapshots.
            let name = self.clusters[k].cfg.name.clone();
            if let Some(j) = self.jobs.get_mut(&id) {
                // Bound to its reservation there (a reserved workflow task's slot).
                j.parts = vec![PartRecord {
                    cluster: name.clone(),
                    procs,
                    reservation,
                    ..PartRecord::default()
                }];
                j.reason = Some(format!("submitted to {name}"));
            }
            self.submit_remote_parts(id);
            return;
        }
        if self.clusters[k].kind.maui_schedules() {
            self.queue_for_wiki(k, id);
            return;
        }
        if let Some(why) = self.unadmitted(id) {
            // Its user lost the credential that admitted it (see `credentials`).
            if let Some(j) = self.jobs.get_mut(&id) {
                j.held = true;
                j.state = JobState::Pending;
                j.planned_start = None;
                j.parts.clear();
                j.reason = Some(format!("held: {why}"));
            }
            return;
        }
        let cred = self.cred(&user, &credn);
        let licences = self.jobs[&id].licences.clone();
        let mut job = Job::new(id, Time(submitted), procs, Dur(walltime))
            .with_cred(cred)
            .with_begin(begin.map(Time))
            .with_licences(licences);
        if let Some(r) = reservation {
            job = job.in_reservation(ReservationId(r), early);
        }
        let job = job.with_prediction(self.predict_local(k, id));
        // The part is recorded before the scheduler may start it (a job taken in carries
        // it already: its record is not written again for it).
        let part = PartRecord {
            cluster: self.clusters[k].cfg.name.clone(),
            procs,
            reservation,
            ..PartRecord::default()
        };
        if let Some(j) = self
            .jobs
            .get_mut_if(&id, |j| j.parts.len() != 1 || j.parts[0] != part)
        {
            j.parts = vec![part];
        }
        let mut out = Vec::new();
        match self.broker.submit_local(now, k, job, &mut out) {
            Ok(()) => self.carry_out(now, out),
            Err(e) => {
                if let Some(j) = self.jobs.get_mut(&id) {
                    j.parts.clear();
                }
                self.fail(now, id, format!("refused by cluster: {e}"));
            }
        }
    }
}
