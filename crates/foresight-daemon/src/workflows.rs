//! The service's side of workflows: submission (mapped under the state's lock, stored with
//! all its task jobs in one transaction, then queued), views and cancellation, each for the
//! owner or an administrator only. The state itself is `world/workflow.rs`.

use crate::refusal::Refusal;
use crate::service::{unix_now, Service};
use foresight_api::{MapperName, SubmittedWorkflow, WorkflowSpec, WorkflowView};
use foresight_store::UserRecord;
use std::sync::Arc;

impl Service {
    /// Maps a workflow on the grid's current plan and accepts its tasks as jobs: all or
    /// none. `mapper` overrides the one the workflow names (DSC by default).
    pub async fn submit_workflow(
        self: &Arc<Self>,
        user: &UserRecord,
        spec: WorkflowSpec,
        mapper: Option<MapperName>,
    ) -> Result<SubmittedWorkflow, Refusal> {
        let now = unix_now();
        let mapper = mapper.or(spec.mapper).unwrap_or_default();
        let (record, mut jobs) = self.world().plan_workflow(now, user, &spec, mapper)?;
        let (id, ids) = self
            .store
            .insert_workflow(&record, &jobs)
            .await
            .map_err(|e| Refusal::internal(format!("storing the workflow: {e}")))?;
        let mut record = record;
        record.id = id;
        for ((j, t), jid) in jobs.iter_mut().zip(record.tasks.iter_mut()).zip(&ids) {
            j.id = *jid;
            t.job = *jid;
        }
        self.world().accept_workflow(now, record, jobs);
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
        self.world().cancel_workflow(unix_now(), id)?;
        self.wake.notify_one();
        self.flush().await;
        self.workflow(user, id)
    }
}
