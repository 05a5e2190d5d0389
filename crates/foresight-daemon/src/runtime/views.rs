//! What the API shows of the world: jobs, explanations, clusters, plans, users and
//! reservations, each read under the world's lock.

use crate::runtime::plan_input::plan_input;
use crate::runtime::starts::Starts;
use crate::runtime::Service;
use crate::state::plan_view::{self, Visible};
use crate::state::refusal::Refusal;
use crate::state::stored::ToApi;
use crate::state::world::World;
use foresight_api::{
    ClusterInfo, ClusterPlan, Explanation, JobState, JobView, PartView, Reason, ReservationView,
    UserView,
};
use foresight_core::scheduler::JobStatus;
use foresight_core::time::Time;
use foresight_core::ClusterId;
use foresight_core::JobId;
use foresight_store::{JobRecord, UserRecord};

impl Service {
    /// A job, if the user may see it.
    pub fn job(&self, user: &UserRecord, id: JobId) -> Result<JobView, Refusal> {
        let w = self.world();
        check_owner(&w, user, id)?;
        view_of(&w, id, self.now())
            .ok_or_else(|| Refusal::not_found_at("id", format!("no job {id}")))
    }

    /// Jobs the user may see, filtered.
    pub fn jobs(
        &self,
        user: &UserRecord,
        state: Option<JobState>,
        owner: Option<&str>,
        limit: usize,
    ) -> Vec<JobView> {
        let now = self.now();
        let w = self.world();
        let starts = Starts::new(&w, now);
        w.jobs
            .values()
            .rev()
            .filter(|j| user.admin || j.user == user.name)
            .filter(|j| owner.is_none_or(|o| j.user == o))
            .filter(|j| state.is_none_or(|s| j.state.to_api() == s))
            .take(limit)
            .map(|j| view_with(j, now, &starts))
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect()
    }

    /// Why a job has not started (or what it is doing). Each reason's instant travels in
    /// its `at`, not in its words: clients show it in their reader's zone.
    pub fn explain(&self, user: &UserRecord, id: JobId) -> Result<Explanation, Refusal> {
        let w = self.world();
        check_owner(&w, user, id)?;
        let j = &w.jobs[&id];
        let now = self.now();
        let mut reasons = Vec::new();
        if j.held {
            reasons.push(Reason::new("held: released with `foresight job release`"));
        }
        match j.state.to_api() {
            JobState::Pending | JobState::Planned | JobState::Reserved => {
                waiting_reasons(&w, j, now, &mut reasons)
            }
            JobState::Running => reasons.push(Reason::timed(
                format!(
                    "running on {} since",
                    j.parts
                        .iter()
                        .map(|p| {
                            let s = if p.procs == 1 { "" } else { "s" };
                            format!("{} ({} processor{s})", p.cluster, p.procs)
                        })
                        .collect::<Vec<_>>()
                        .join(" + ")
                ),
                j.started_at.unwrap_or(now.secs()),
            )),
            s => reasons.push(Reason::new(format!(
                "{s}{}",
                j.reason
                    .as_ref()
                    .map_or(String::new(), |r| format!(": {r}"))
            ))),
        }
        let start = Starts::new(&w, now).of(j);
        Ok(Explanation {
            id: id.0,
            state: j.state.to_api(),
            now: now.secs(),
            reasons,
            planned_start: start.at,
            start_guaranteed: start.guaranteed,
            start_caveat: start.caveat,
        })
    }

    /// Clusters with their load.
    pub fn clusters(&self) -> Vec<ClusterInfo> {
        let w = self.world();
        w.clusters
            .iter()
            .zip(&w.broker.clusters)
            .enumerate()
            .map(|(k, (c, g))| ClusterInfo {
                name: c.cfg.name.clone(),
                kind: c.cfg.kind.clone(),
                // A cluster Maui schedules is up, though it takes no global job.
                state: if w.cluster_up(ClusterId(k)) {
                    "up"
                } else {
                    "down"
                }
                .into(),
                reason: c.unavailable_reason.clone(),
                procs: c.procs(),
                busy: c.busy(),
                running: g.sched.running(),
                queued: g.sched.waiting() + w.wiki_waiting(ClusterId(k)),
                tariff: g.tariff.base,
                policy: if c.kind.maui_schedules() {
                    "wiki".into()
                } else {
                    c.cfg.policy.clone()
                },
            })
            .collect()
    }

    /// The plan of each cluster (or one) over `[from, to)` as `viewer` may see it (see the
    /// `plan_view` module): copied under the lock, drawn off it.
    pub async fn plan(
        &self,
        cluster: Option<&str>,
        from: Option<i64>,
        to: Option<i64>,
        viewer: &UserRecord,
    ) -> Result<Vec<ClusterPlan>, Refusal> {
        // The plan view speaks the API's seconds.
        let now = self.now().secs();
        let from = from.unwrap_or(now).max(now);
        let to = to.unwrap_or(from + 3_600);
        if to <= from {
            return Err(Refusal::invalid("to", "must be after from"));
        }
        let (inputs, visible) = {
            let w = self.world();
            if let Some(c) = cluster {
                if w.cluster_index(c).is_none() {
                    return Err(w.unknown_cluster(c));
                }
            }
            let visible = if viewer.admin {
                Visible::All
            } else {
                Visible::Own(
                    w.jobs
                        .values()
                        .filter(|j| j.user == viewer.name)
                        .map(|j| j.id)
                        .collect(),
                )
            };
            let inputs: Vec<plan_view::ClusterInput> = ClusterId::all(w.clusters.len())
                .filter(|&k| cluster.is_none_or(|n| n == w.clusters[k].cfg.name))
                .map(|k| plan_input(&w, k))
                .collect();
            (inputs, visible)
        };
        tokio::task::spawn_blocking(move || plan_view::draw(inputs, now, from, to, &visible))
            .await
            .map_err(|e| Refusal::internal(format!("drawing the plan failed: {e}")))
    }

    /// Users (admin).
    pub fn users(&self) -> Vec<UserView> {
        let w = self.world();
        w.users
            .values()
            .filter(|u| !u.removed)
            .map(|u| user_view(&w, u))
            .collect()
    }

    /// Reservations the user may see: all for admins, else those whose ACL names them.
    pub fn reservations(&self, user: &UserRecord) -> Vec<ReservationView> {
        let w = self.world();
        w.reservations
            .values()
            .filter(|r| {
                user.admin
                    || r.owner == user.name
                    || World::acl_admits(&r.acl, &user.name, None)
                    || r.acl
                        .job
                        .is_some_and(|j| w.jobs.get(&JobId(j)).is_some_and(|j| j.user == user.name))
            })
            .map(ToApi::to_api)
            .collect()
    }
}

/// Why a job that has not started waits: its begin time, its record's reason, each of its
/// parts in its cluster's local queue, and its place in the global queue.
fn waiting_reasons(w: &World, j: &JobRecord, now: Time, reasons: &mut Vec<Reason>) {
    let id = JobId(j.id);
    if let Some(b) = j.begin.filter(|&b| Time(b) > now) {
        reasons.push(Reason::timed("waits for its begin time at", b));
    }
    // A held job's reason is its hold, said before.
    if let Some(r) = j.reason.as_ref().filter(|_| !j.held) {
        reasons.push(Reason::new(r.clone()));
    }
    for p in &j.parts {
        let status = w
            .cluster_index(&p.cluster)
            .and_then(|k| w.broker.clusters[k].sched.explain(id, now));
        reasons.extend(status.and_then(|s| local_reason(&p.cluster, s)));
    }
    let waiting = j.links.as_ref().is_some_and(|l| l.waiting);
    if j.cluster.is_none() && j.reservation.is_none() && !j.held && !waiting && j.parts.is_empty() {
        reasons.push(global_queue_reason(w, id));
    }
}

/// Where a part stands in `cluster`'s local queue, if it waits there.
fn local_reason(cluster: &str, status: JobStatus) -> Option<Reason> {
    // The earliest possible start ends the text when the policy knows one.
    let earliest = |text: String, t: Option<Time>| match t {
        Some(t) => Reason::timed(format!("{text}, earliest possible start"), t.secs()),
        None => Reason::new(text),
    };
    match status {
        JobStatus::Reserved { start, .. } => Some(Reason::timed(
            format!("reserved on {cluster} from"),
            start.secs(),
        )),
        JobStatus::Waiting {
            procs,
            free_now,
            earliest: t,
            position,
        } => Some(earliest(
            format!(
                "waiting in {cluster}'s local queue: {procs} processors asked, {free_now} free \
                 now, {position} job{} ahead",
                if position == 1 { "" } else { "s" }
            ),
            t,
        )),
        JobStatus::Deferred { earliest: t, .. } => Some(earliest(
            format!("joins {cluster}'s local queue at its begin time"),
            t,
        )),
        _ => None,
    }
}

/// A global job not placed yet: its place in the global queue, and whether the planner
/// looks at it each cycle.
fn global_queue_reason(w: &World, id: JobId) -> Reason {
    let Some(p) = w.broker.queued().position(|e| e.job.id == id) else {
        return Reason::new("arrived; planned at the next cycle");
    };
    let depth = w.plan_depth();
    let s = if p == 1 { "" } else { "s" };
    Reason::new(if p < depth {
        format!("in the global queue, {p} job{s} ahead; planned each cycle")
    } else {
        format!(
            "in the global queue, {p} job{s} ahead: beyond the {depth} planned per cycle, it \
             is planned once it moves up"
        )
    })
}

/// A job of the shared store as the API shows it, its reason naming where it is: the site
/// that runs it, or its place in the global queue.
pub(crate) fn shared_view(w: &World, j: &foresight_store::SharedJob, now: Time) -> JobView {
    let mut view = record_view(w, &j.record, now);
    view.reason = Some(match (&j.site, j.queue_state.as_deref()) {
        // Stopped there for a job of a higher level: why, as that site says.
        // Its site is down: what it last recorded may no longer be true (it may have
        // ended there), and the site tells when it is back.
        (Some(site), _) if j.site_down && !j.record.state.is_final() => format!(
            "run by site {site}, which is down (its dispatcher's lease lapsed): this is the \
             last state it recorded, and the job may have ended since"
        ),
        (Some(site), _) => match j.record.reason.as_deref() {
            Some(why) if j.record.suspended => format!("run by site {site}; {why}"),
            _ => format!("run by site {site}"),
        },
        // Cancelled in the queue: by its owner, or because its dependencies can never hold
        // (which its record says).
        (None, Some("cancelled")) => match j.record.reason.as_deref() {
            Some(why) if why != "cancelled" => why.to_string(),
            _ => "cancelled in the global queue".into(),
        },
        (None, Some("held")) => {
            "held in the global queue: released with `foresight job release`".into()
        }
        (None, Some("waiting")) => format!(
            "waiting in the global queue for its dependencies ({})",
            j.record
                .links
                .as_ref()
                .and_then(|l| l.dependency.as_ref())
                .map_or("", |d| d.text.as_str())
        ),
        (None, Some("over_budget")) => j
            .record
            .reason
            .clone()
            .unwrap_or_else(|| "over budget: waits off sale".into()),
        // Given back by a site that won it but could not start it at once (its row says so;
        // its reason says why): said until a site starts it.
        (None, Some(q)) => match j.record.reason.as_deref() {
            Some(why) if j.given_back => format!("in the global queue ({q}); {why}"),
            _ => format!("in the global queue ({q})"),
        },
        (None, None) => "in the shared store".into(),
    });
    view
}

/// A job as the API shows it.
pub fn view_of(w: &World, id: JobId, now: Time) -> Option<JobView> {
    w.jobs.get(&id).map(|j| record_view(w, j, now))
}

/// A job record as the API shows it at `now` (`w` gives its planned start on its cluster).
pub fn record_view(w: &World, j: &JobRecord, now: Time) -> JobView {
    view_with(j, now, &Starts::new(w, now))
}

/// [`record_view`] with the starts of the view it is part of.
fn view_with(j: &JobRecord, now: Time, starts: &Starts) -> JobView {
    let start = starts.of(j);
    JobView {
        id: j.id,
        name: j.name.clone(),
        user: j.user.clone(),
        account: j.cred.account.clone(),
        state: j.state.to_api(),
        held: j.held,
        suspended: j.suspended,
        priority: j.priority,
        exit_code: j.exit_code,
        signal: j.signal,
        procs: j.procs,
        walltime: j.walltime,
        price: j.price,
        cluster: j
            .parts
            .first()
            .map(|p| p.cluster.clone())
            .or_else(|| j.cluster.clone()),
        parts: j
            .parts
            .iter()
            .map(|p| PartView {
                cluster: p.cluster.clone(),
                procs: p.procs,
                processors: p.processors.clone(),
                // A local part starts with its job; a part that ended before parts kept
                // their own end ended with its job.
                started_at: p.started_at.or(j.started_at),
                ended_at: p.ended_at.or(j.ended_at.filter(|_| p.ended)),
            })
            .collect(),
        reservation: j.reservation,
        submitted_at: j.submitted_at,
        planned_start: start.at,
        start_guaranteed: start.guaranteed,
        start_caveat: start.caveat,
        first_planned_start: j.first_planned_start,
        started_at: j.started_at,
        ended_at: j.ended_at,
        run_secs: run_secs(j, now),
        charged: j.charged,
        reason: j.reason.clone(),
        command: j.command.clone(),
        stdout: j.stdout.clone(),
        stderr: j.stderr.clone(),
        array_job_id: j
            .links
            .as_ref()
            .and_then(|l| l.array.as_ref())
            .map(|a| a.job),
        array_task_id: j
            .links
            .as_ref()
            .and_then(|l| l.array.as_ref())
            .map(|a| a.task),
        dependency: j
            .links
            .as_ref()
            .and_then(|l| l.dependency.as_ref())
            .map(|d| d.text.clone()),
        begin: j.begin,
        requires: j.requires.clone(),
        licences: j.licences.clone(),
        app: j.app.clone(),
        prediction: j.prediction.as_ref().map(ToApi::to_api),
        inputs: j.inputs.iter().map(ToApi::to_api).collect(),
        staging: j.staging.iter().map(ToApi::to_api).collect(),
        outputs: j.outputs.iter().map(ToApi::to_api).collect(),
        output_staging: j.output_staging.as_ref().map(ToApi::to_api),
    }
}

/// How long job `j` has actually run by `now` (or by its end): its elapsed time less the
/// time it was suspended, by `job suspend` or by a job of a higher level, as its walltime
/// counts it. `None` before it starts.
pub(crate) fn run_secs(j: &JobRecord, now: Time) -> Option<i64> {
    let start = j.started_at?;
    let end = j.ended_at.unwrap_or(now.secs()).max(start);
    let open = |since: Option<i64>| since.map_or(0, |s| (end - s.max(start)).max(0));
    let by_admin = j.suspended_secs + open(j.suspended_since);
    let by_preemption = j
        .preemption
        .as_ref()
        .map_or(0, |p| p.suspended + open(p.since));
    Some((end - start - by_admin - by_preemption).max(0))
}

/// A user as the API shows it, with the Unix account their jobs run as (`w` holds the
/// `[unix_user]` table that maps those no administrator mapped).
pub fn user_view(w: &World, u: &UserRecord) -> UserView {
    let (runs_as, from) = w.runs_as(&u.name, u.unix_user.as_deref());
    UserView {
        name: u.name.clone(),
        admin: u.admin,
        budget: u.budget,
        spent: u.spent,
        unix_user: u.unix_user.clone(),
        runs_as: Some(runs_as),
        runs_as_from: Some(from.as_str().to_string()),
        credentials: u.credentials.clone().to_api(),
        disabled: u.disabled,
        warnings: Vec::new(),
    }
}

pub(crate) fn check_owner(w: &World, user: &UserRecord, id: JobId) -> Result<(), Refusal> {
    match w.jobs.get(&id) {
        Some(j) if user.admin || j.user == user.name => Ok(()),
        // Someone else's job looks like no job at all: ids leak nothing.
        _ => Err(Refusal::not_found_at("id", format!("no job {id}"))),
    }
}

#[cfg(test)]
#[path = "views_tests.rs"]
mod tests;
