//! Submission: a job checked, given its credentials and inputs, and stored, on this
//! service's world or (in dispatcher mode) on the shared global queue.

use crate::runtime::Service;
use crate::state::refusal::Refusal;
use crate::state::world::World;
use foresight_api::{ArraySpec, JobState, SubmitJob};
use foresight_core::time::Time;
use foresight_core::JobId;
use foresight_store::CredentialNames;
use foresight_store::{ArrayTask, DependencyRecord, JobRecord, Links, UserRecord};
use std::sync::Arc;
use std::time::Instant;

impl Service {
    /// Accepts jobs: checked, made durable, then queued. All or none. Returns one id per
    /// request: an array's is its array job id (its first task's).
    pub async fn submit(
        self: &Arc<Self>,
        user: &UserRecord,
        requests: Vec<SubmitJob>,
        batch: bool,
    ) -> Result<Vec<u64>, Refusal> {
        let started = Instant::now();
        let now = self.now();
        let largest_site = match &self.dispatcher {
            Some(d) => Some(d.largest_cluster().await?),
            None => None,
        };
        let mut shared_deps = self.shared_dependencies(user, &requests, batch).await?;
        self.check_inputs_readable(user, &requests, batch).await?;
        let mut records = Vec::with_capacity(requests.len());
        // Where each request's records start in `records`.
        let mut firsts = Vec::with_capacity(requests.len());
        {
            let w = self.world();
            for (i, r) in requests.into_iter().enumerate() {
                let at = |e: Refusal| if batch { e.at(i) } else { e };
                let dependency = shared_deps.get_mut(i).and_then(Option::take);
                let (rec, array) =
                    job_record(&w, user, r, now, largest_site, dependency).map_err(at)?;
                firsts.push(records.len());
                records.extend(array_tasks(rec, array));
            }
            // The jobs of a batch and the tasks of an array each passed alone; together
            // they must fit the budget too, or none is taken.
            let together: Vec<(&JobRecord, usize)> = records.iter().map(|r| (r, 1)).collect();
            w.check_budget_together(&user.name, &together, if batch { "jobs" } else { "array" })?;
        }
        if records.is_empty() {
            return Err(Refusal::invalid("jobs", "no jobs given"));
        }
        let (ids, ticket) = self.store_jobs(user, &mut records).await?;
        self.take_in(now, &user.name, records, &ids, ticket).await;
        let mut t = self.timings.lock().unwrap_or_else(|p| p.into_inner());
        t.submitted += ids.len() as u64;
        let ids = firsts.into_iter().map(|i| ids[i]).collect();
        if t.submit.len() >= 4096 {
            t.submit.remove(0);
        }
        t.submit.push(started.elapsed().as_secs_f64());
        Ok(ids)
    }

    /// In dispatcher mode, the dependencies of each global job among `requests`, resolved
    /// in the shared store: they may name jobs of any site.
    async fn shared_dependencies(
        &self,
        user: &UserRecord,
        requests: &[SubmitJob],
        batch: bool,
    ) -> Result<Vec<Option<DependencyRecord>>, Refusal> {
        let mut shared_deps = Vec::with_capacity(requests.len());
        if let Some(d) = &self.dispatcher {
            for (i, r) in requests.iter().enumerate() {
                let global = r.cluster.is_none() && r.reservation.is_none();
                shared_deps.push(match (&r.dependency, global) {
                    (Some(text), true) => {
                        Some(d.resolve_dependency(user, text).await.map_err(|e| {
                            if batch {
                                e.at(i)
                            } else {
                                e
                            }
                        })?)
                    }
                    _ => None,
                });
            }
        }
        Ok(shared_deps)
    }

    /// Inputs are measured and copied by the service: first, each must be readable by the
    /// account the job runs as, asked of the system as that account.
    async fn check_inputs_readable(
        &self,
        user: &UserRecord,
        requests: &[SubmitJob],
        batch: bool,
    ) -> Result<(), Refusal> {
        if requests.iter().any(|r| !r.inputs.is_empty()) {
            let account = self.world().unix_account(&user.name).0;
            for (i, r) in requests.iter().enumerate() {
                crate::runtime::staging::readable_by(&r.inputs, &account)
                    .await
                    .map_err(|e| if batch { e.at(i) } else { e })?;
            }
        }
        Ok(())
    }

    /// Makes `records` durable and returns their ids: in this service's store, or in
    /// dispatcher mode (for global jobs, and for a user with a limited budget) in the shared
    /// database, checked there against the budget in the same transaction. Also the ticket
    /// of what they may cost, set aside until they are taken in.
    async fn store_jobs(
        &self,
        user: &UserRecord,
        records: &mut [JobRecord],
    ) -> Result<(Vec<u64>, u64), Refusal> {
        // In dispatcher mode a limited budget holds each local job's worst case in the
        // shared budget as the job is stored, so that every site's admissions count it
        // (settled at its end, see `foresight_store::local_taken`).
        if self.dispatcher.is_some() {
            let w = self.world();
            if w.users.get(&user.name).is_some_and(|u| u.budget.is_some()) {
                for r in records.iter_mut() {
                    if let Some(price) = w.local_tariff(r) {
                        r.budget_hold = World::worst_case(r, price);
                    }
                }
            }
        }
        // Until they are taken in, what these local jobs may cost is set aside, so that a
        // submission checked while they are being stored counts them.
        let (ticket, committed) = {
            let mut w = self.world();
            let ticket = w.set_aside_admitted(records);
            (ticket, w.uncharged_of(&user.name))
        };
        let limited = self
            .world()
            .users
            .get(&user.name)
            .is_some_and(|u| u.budget.is_some());
        let shared = self
            .dispatcher
            .as_ref()
            .filter(|_| limited || records.iter().any(foresight_store::is_global));
        let stored = if let Some(d) = shared {
            // Checked against the budget in the shared database, with the user's global jobs
            // not yet started (wherever submitted), and stored in the same transaction.
            d.submit(&user.name, records, committed).await
        } else {
            let (reply, answer) = tokio::sync::oneshot::channel();
            match self.inserts.send((records.to_vec(), reply)) {
                Err(_) => Err(Refusal::internal("the store writer has stopped")),
                Ok(()) => answer
                    .await
                    .map_err(|_| Refusal::internal("the store writer has stopped"))
                    .and_then(|r| {
                        r.map_err(|e| Refusal::internal(format!("storing the jobs: {e}")))
                    }),
            }
        };
        match stored {
            Ok(ids) => Ok((ids, ticket)),
            Err(e) => {
                self.world().uncharged.release(ticket);
                Err(e)
            }
        }
    }

    /// Numbers the stored `records` with their `ids` and takes them into the world (what
    /// they may cost stops being set aside as they are counted in, under one lock): the
    /// local ones queued (global ones of a dispatcher went to the shared queue, to be sold
    /// by auction), the cycle woken when there is something to plan, then written.
    async fn take_in(
        self: &Arc<Self>,
        now: Time,
        user: &str,
        mut records: Vec<JobRecord>,
        ids: &[u64],
        ticket: u64,
    ) {
        let mut array_job = 0;
        for (r, id) in records.iter_mut().zip(ids) {
            r.id = *id;
            // An array's job id is its first task's: known now, written with the next flush.
            if let Some(a) = r.links.as_mut().and_then(|l| l.array.as_mut()) {
                if a.position == 0 {
                    array_job = *id;
                }
                a.job = array_job;
            }
        }
        let numbered: Vec<u64> = records
            .iter()
            .filter(|r| r.links.as_ref().is_some_and(|l| l.array.is_some()))
            .map(|r| r.id)
            .collect();
        if let Some(d) = &self.dispatcher {
            // Global jobs went to the shared queue with their records: sold by auction.
            records.retain(|r| !foresight_store::is_global(r));
            d.poke();
        }
        // A global job is planned at the next cycle; a begin time is a new moment for the
        // cycle to wake at.
        let plan_now = records.iter().any(|r| {
            !r.held && (r.begin.is_some() || (r.cluster.is_none() && r.reservation.is_none()))
        });
        {
            let mut w = self.world();
            w.uncharged.release(ticket);
            // The holds left the shared budget with the jobs: this copy follows at once.
            w.holds_taken(user, &records);
            w.accept(now, records);
            for id in numbered {
                w.jobs.mark(JobId(id));
            }
        }
        if plan_now {
            self.wake.notify_one();
        }
        self.flush().await;
    }

    /// Runs `op` on the world, then persists and acts.
    pub async fn mutate<T>(
        self: &Arc<Self>,
        op: impl FnOnce(&mut World, Time) -> Result<T, Refusal>,
    ) -> Result<T, Refusal> {
        let out = {
            let mut w = self.world();
            op(&mut w, self.now())?
        };
        self.wake.notify_one();
        self.flush().await;
        Ok(out)
    }
}

/// One request checked and made a job record (its id still 0), with its array, if any.
fn job_record(
    w: &World,
    user: &UserRecord,
    r: SubmitJob,
    now: Time,
    largest_site: Option<u32>,
    shared_dependency: Option<DependencyRecord>,
) -> Result<(JobRecord, Option<ArraySpec>), Refusal> {
    let walltime = r
        .walltime
        .seconds()
        .map_err(|m| Refusal::invalid("walltime", m))?;
    // A malformed credential is a bad request before it is a forbidden one.
    for (field, c) in ["group", "account", "class", "qos"]
        .into_iter()
        .zip([&r.group, &r.account, &r.class, &r.qos])
    {
        if let Some(c) = c {
            crate::state::limits::name(field, c)?;
        }
    }
    let dependency = match shared_dependency {
        Some(d) => Some(d),
        None => r
            .dependency
            .as_deref()
            .map(|d| w.resolve_dependency(user, d))
            .transpose()?,
    };
    let array = r
        .array
        .as_deref()
        .map(|a| {
            let spec = a
                .parse::<ArraySpec>()
                .map_err(|e| Refusal::invalid("array", e))?;
            crate::state::limits::array("array", &spec)?;
            Ok::<_, Refusal>(spec)
        })
        .transpose()?;
    // In dispatcher mode an input may live on another site's cluster.
    let inputs = crate::runtime::staging::measure(r.inputs, |c| {
        largest_site.is_some() || w.cluster_index(c).is_some()
    })?;
    let outputs = crate::state::staging::check_outputs(r.outputs, |c| {
        largest_site.is_some() || w.cluster_index(c).is_some()
    })?;
    // A dispatcher's global job: unnamed inputs are on this site (its first
    // cluster), from which other sites stage them.
    let inputs = match (&largest_site, &r.cluster, w.clusters.first()) {
        (Some(_), None, Some(here)) => inputs
            .into_iter()
            .map(|mut i| {
                i.cluster.get_or_insert_with(|| here.cfg.name.clone());
                i
            })
            .collect(),
        _ => inputs,
    };
    let links = (dependency.is_some() || array.is_some()).then_some(Links {
        dependency,
        array: None,
        waiting: false,
    });
    let rec = JobRecord {
        id: 0,
        user: user.name.clone(),
        name: r.name,
        procs: r.procs,
        walltime,
        price: r.price,
        cluster: r.cluster,
        reservation: r.reservation,
        allow_early_start: r.allow_early_start,
        co_allocate: r.co_allocate,
        command: r.command,
        env: r.env,
        cwd: r.cwd,
        cred: w.job_credentials(
            &user.name,
            CredentialNames {
                group: r.group,
                account: r.account,
                class: r.class,
                qos: r.qos,
            },
        )?,
        state: JobState::Pending,
        state_after: None,
        held: r.hold,
        suspended: false,
        priority: r.priority,
        requeue: r.requeue,
        requeue_pending: false,
        exit_code: None,
        signal: None,
        reason: r.hold.then(|| "held".to_string()),
        submitted_at: now.secs(),
        first_planned_start: None,
        planned_start: None,
        started_at: None,
        ended_at: None,
        charged: 0.0,
        settled: 0.0,
        prepaid: 0.0,
        budget_hold: 0.0,
        parts: vec![],
        attempt: 0,
        stdout: None,
        stderr: None,
        links,
        begin: r.begin,
        requires: r.requires,
        licences: r.licences,
        preemption: None,
        app: r.app,
        prediction: None,
        inputs,
        staging: Vec::new(),
        outputs,
        output_staging: None,
    };
    match largest_site {
        Some(largest) if foresight_store::is_global(&rec) => {
            crate::runtime::dispatcher::admit_global(
                &rec,
                array.as_ref().and_then(|a| a.limit),
                largest,
            )?;
            // Its size is checked against every site's clusters, not this one's.
            let mut here = rec.clone();
            here.procs = here.procs.min(1);
            w.admit(&here)?;
        }
        _ => w.admit(&rec)?,
    }
    Ok((rec, array))
}

/// The records of one request: the job itself, or one per task of its array.
fn array_tasks(rec: JobRecord, array: Option<ArraySpec>) -> Vec<JobRecord> {
    let Some(spec) = array else {
        return vec![rec];
    };
    spec.indices()
        .into_iter()
        .enumerate()
        .map(|(position, task)| {
            let mut t = rec.clone();
            if let Some(l) = t.links.as_mut() {
                l.array = Some(ArrayTask {
                    job: 0,
                    task,
                    position: position as u32,
                    limit: spec.limit,
                });
            }
            t
        })
        .collect()
}
