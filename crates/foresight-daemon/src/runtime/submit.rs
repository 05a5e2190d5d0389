//! Submission: a job checked, given its credentials and inputs, and stored; where its
//! global jobs go is the [`GlobalQueue`](crate::runtime::global_queue::GlobalQueue)'s
//! business (this service's world, or the queue every site shares).

use crate::runtime::global_queue::Admission;
use crate::runtime::Service;
use crate::state::refusal::Refusal;
use crate::state::world::World;
use foresight_api::{ArraySpec, SubmitJob};
use foresight_core::time::Time;
use foresight_core::JobId;
use foresight_store::CredentialNames;
use foresight_store::JobState;
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
        let admission = self.global_queue.admission().await?;
        let mut shared_deps = self.shared_dependencies(user, &requests, batch).await?;
        self.check_inputs_readable(user, &requests, batch).await?;
        let mut records = Vec::with_capacity(requests.len());
        // Where each request's records start in `records`.
        let mut firsts = Vec::with_capacity(requests.len());
        {
            let mut w = self.world();
            // What the user's local jobs may still cost is counted from what changed since
            // the last admission, not walked again for each job.
            w.recount_changed();
            for (i, r) in requests.into_iter().enumerate() {
                let at = |e: Refusal| if batch { e.at(i) } else { e };
                let dependency = shared_deps.get_mut(i).and_then(Option::take);
                let (mut rec, array) =
                    job_record(&w, user, r, now, admission, dependency).map_err(at)?;
                admission.mark_holder(&w, self.cfg.dispatcher.site.as_deref(), &mut rec);
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

    /// The dependencies of each global job among `requests` that the global queue resolves
    /// (in dispatcher mode they may name jobs of any site); the others are resolved by the
    /// world.
    async fn shared_dependencies(
        &self,
        user: &UserRecord,
        requests: &[SubmitJob],
        batch: bool,
    ) -> Result<Vec<Option<DependencyRecord>>, Refusal> {
        let mut shared_deps = Vec::with_capacity(requests.len());
        for (i, r) in requests.iter().enumerate() {
            let global = r.cluster.is_none() && r.reservation.is_none();
            shared_deps.push(match (&r.dependency, global) {
                (Some(text), true) => self
                    .global_queue
                    .dependency(user, text)
                    .await
                    .map_err(|e| if batch { e.at(i) } else { e })?,
                _ => None,
            });
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

    /// Makes `records` durable through the global queue and returns their ids, and the
    /// ticket of what they may cost, set aside until they are taken in.
    async fn store_jobs(
        &self,
        user: &UserRecord,
        records: &mut [JobRecord],
    ) -> Result<(Vec<u64>, u64), Refusal> {
        self.global_queue
            .hold_budgets(&self.world(), &user.name, records);
        // Until they are taken in, what these local jobs may cost is set aside, so that a
        // submission checked while they are being stored counts them.
        let (ticket, committed) = {
            let mut w = self.world();
            let ticket = w.set_aside_admitted(records);
            // The lock was let go while the records were built and checked: what changed
            // meanwhile (a job ended, another submission) is counted before the total.
            w.recount_changed();
            (ticket, w.uncharged_of(&user.name))
        };
        let stored = self
            .global_queue
            .store_jobs(self, &user.name, records, committed)
            .await;
        match stored {
            Ok(ids) => Ok((ids, ticket)),
            Err(e) => {
                self.world().uncharged.release(ticket);
                Err(e)
            }
        }
    }

    /// Numbers the stored `records` with their `ids` and takes them into the world (what
    /// they may cost stops being set aside as they are counted in, under one lock): those
    /// the global queue keeps here queued (in dispatcher mode global ones went to the
    /// shared queue, to be sold by auction), the cycle woken when there is something to
    /// plan, then written.
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
        self.global_queue.keep_here(&mut records);
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
    admission: Admission,
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
    let inputs = crate::runtime::staging::measure(r.inputs, |c| admission.knows_cluster(w, c))?;
    let outputs =
        crate::state::staging::check_outputs(r.outputs, |c| admission.knows_cluster(w, c))?;
    let inputs = admission.place_inputs(w, r.cluster.as_deref(), inputs);
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
        suspended_since: None,
        suspended_secs: 0,
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
    admission.admit(w, &rec, array.as_ref().and_then(|a| a.limit))?;
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
