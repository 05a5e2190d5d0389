//! The service's side of workflows: submission (mapped under the state's lock, stored with
//! all its task jobs in one transaction, then queued), views and cancellation, each for the
//! owner or an administrator only. The state itself is `state/world/workflow.rs`.

use crate::runtime::Service;
use crate::state::refusal::Refusal;
use crate::state::stored::ToStored;
use foresight_api::{MapperName, SubmittedWorkflow, WorkflowSpec, WorkflowView};
use foresight_store::UserRecord;
use std::sync::Arc;

/// How long phase one may hold a workflow's slots before they lapse by themselves (should
/// the service die between the phases): the store's one transaction takes far less.
const HOLD_SECONDS: i64 = 60;

impl Service {
    /// Maps a workflow on the grid's current plan and accepts its tasks as jobs: all or
    /// none. `mapper` overrides the one the workflow names (DSC by default).
    pub async fn submit_workflow(
        self: &Arc<Self>,
        user: &UserRecord,
        spec: WorkflowSpec,
        mapper: Option<MapperName>,
    ) -> Result<SubmittedWorkflow, Refusal> {
        let now = self.now();
        let mapper = mapper.or(spec.mapper).unwrap_or_default();
        let (mut record, mut jobs, remote, ticket) = {
            let mut w = self.world();
            w.recount_changed();
            let (mut record, mut jobs) = w.plan_workflow(now, user, &spec, mapper.to_stored())?;
            let remote = if spec.reserve {
                // Phase one, under the same lock as the mapping: the slots it found are free.
                w.hold_workflow(now, &mut record, &mut jobs, HOLD_SECONDS)?
            } else {
                Vec::new()
            };
            // In dispatcher mode a limited budget holds each task's worst case (its
            // processors × walltime × its mapped cluster's tariff: a task runs only there) in
            // the shared budget as the workflow is stored, all tasks or none, as it does a
            // local job's; settled at each task's end.
            self.global_queue.hold_budgets(&w, &user.name, &mut jobs);
            // Until they are taken in, what the tasks without a hold may cost is set aside,
            // under the lock that checked them, so that a submission checked while they are
            // being stored counts them (as a job submission's are).
            let ticket = w.set_aside_admitted(&jobs);
            (record, jobs, remote, ticket)
        };
        if !remote.is_empty() {
            // The slots on Slurm clusters, asked there one by one until one is refused.
            let mut answers = Vec::with_capacity(remote.len());
            for slot in &remote {
                let answer = self.reserve_on(slot.cluster, &slot.request).await;
                let refused = answer.is_err();
                answers.push((slot.task, answer));
                if refused {
                    break;
                }
            }
            let held = {
                let mut w = self.world();
                let held = w.remote_slots_answered(self.now(), &record, &answers);
                if held.is_err() {
                    w.uncharged.release(ticket);
                }
                held
            };
            if let Err(r) = held {
                self.flush().await;
                return Err(r);
            }
        }
        let stored = self
            .global_queue
            .store_workflow(self, &user.name, &record, &jobs)
            .await;
        if spec.reserve {
            // Phase two: all committed with the workflow stored, or all released.
            self.world().settle_workflow(now, &record, stored.is_ok());
        }
        let (id, ids) = match stored {
            Ok(x) => x,
            Err(e) => {
                self.world().uncharged.release(ticket);
                self.flush().await;
                return Err(e);
            }
        };
        record.id = id;
        for ((j, t), jid) in jobs.iter_mut().zip(record.tasks.iter_mut()).zip(&ids) {
            j.id = *jid;
            t.job = *jid;
        }
        {
            // Counted as they are taken in: what was set aside for them goes back at once.
            let mut w = self.world();
            w.uncharged.release(ticket);
            // The holds left the shared budget with the tasks: this copy follows at once.
            w.holds_taken(&user.name, &jobs);
            w.accept_workflow(now, record, jobs);
        }
        self.wake.notify_one();
        self.flush().await;
        Ok(SubmittedWorkflow { id, jobs: ids })
    }

    /// A workflow, if the user may see it (its owner, or an administrator).
    pub fn workflow(&self, user: &UserRecord, id: u64) -> Result<WorkflowView, Refusal> {
        let w = self.world();
        match w.workflow_view(id) {
            Some(v) if user.admin || v.user == user.name => Ok(v),
            // Someone else's workflow looks like none at all: ids leak nothing.
            _ => Err(Refusal::not_found_at("id", format!("no workflow {id}"))),
        }
    }

    /// The workflows the user may see, oldest first.
    pub fn workflows(&self, user: &UserRecord) -> Vec<WorkflowView> {
        let w = self.world();
        w.workflows
            .values()
            .filter(|wf| user.admin || wf.user == user.name)
            .filter_map(|wf| w.workflow_view(wf.id))
            .collect()
    }

    /// Cancels every task of a workflow that has not ended.
    pub async fn cancel_workflow(
        self: &Arc<Self>,
        user: &UserRecord,
        id: u64,
    ) -> Result<WorkflowView, Refusal> {
        self.workflow(user, id)?;
        self.world().cancel_workflow(self.now(), id)?;
        self.wake.notify_one();
        self.flush().await;
        self.workflow(user, id)
    }
}
