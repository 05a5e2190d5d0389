//! A lent cluster that Slurm schedules: the grid's reservations there are Slurm's own. The
//! site's records hold each one's window, as for a local cluster; Slurm must hold it too,
//! since a part is submitted with `--reservation` and Slurm alone starts it. So each
//! reservation the centre makes at the site (or the site makes again for a late part) is
//! made in Slurm by the cluster's resource manager, after the record and outside the
//! records' lock; giving one back releases it in Slurm through the records, as any
//! reservation on a cluster that schedules itself.

use crate::runtime::grid_site::{GridAgent, Moved};
use crate::state::refusal::Refusal;
use foresight_core::ReservationId;
use foresight_rm::{PartHandle, ReserveRequest};

impl GridAgent {
    /// The index of lent cluster `cluster` when Slurm schedules it.
    fn slurm_cluster(&self, cluster: &str) -> Option<usize> {
        let w = self.service.world();
        let k = w.cluster_index(cluster)?;
        w.clusters[k].kind.schedules_itself().then_some(k.0)
    }

    /// Has Slurm hold reservation `id` of the site's records on `cluster`, when Slurm
    /// schedules it; when Slurm refuses, the record is given back and the refusal is the
    /// command's answer.
    pub(crate) async fn hold_in_slurm(
        &self,
        cluster: &str,
        id: ReservationId,
    ) -> Result<(), Refusal> {
        let Some(k) = self.slurm_cluster(cluster) else {
            return Ok(());
        };
        let request = {
            let w = self.service.world();
            let r = &w.reservations[&id];
            ReserveRequest {
                id: id.0,
                start: r.start,
                end: r.end,
                procs: r.procs,
            }
        };
        if let Err(e) = self.service.managers[k].reserve(&request).await {
            let _ = self
                .service
                .mutate(move |w, now| w.release_reservation(now, id))
                .await;
            return Err(Refusal::conflict(format!(
                "cluster {cluster} refused the reservation: {e}"
            )));
        }
        Ok(())
    }

    /// Has Slurm hold `moved`'s reservation at the window the site's records now give it,
    /// with the part bound to it, when Slurm schedules `cluster`: asked again for a repeated
    /// command too (the site may have stopped between its records and Slurm, or the answer
    /// was lost). When Slurm refuses, the records go back to where they were and the
    /// refusal is the command's answer.
    pub(crate) async fn move_in_slurm(&self, cluster: &str, moved: Moved) -> Result<(), Refusal> {
        let Some(k) = self.slurm_cluster(cluster) else {
            return Ok(());
        };
        let Moved { id, back } = moved;
        let (to, part) = {
            let w = self.service.world();
            let r = &w.reservations[&id];
            let part = w
                .jobs
                .values()
                .find(|j| j.reservation == Some(id.0) && !j.state.is_final())
                .and_then(|j| {
                    let external = j.parts.first()?.external.clone()?;
                    Some(PartHandle {
                        job: j.id,
                        attempt: j.attempt,
                        external: Some(external),
                    })
                });
            let to = ReserveRequest {
                id: id.0,
                start: r.start,
                end: r.end,
                procs: r.procs,
            };
            (to, part)
        };
        let Err(e) = self.service.managers[k]
            .move_reservation(&to, part.as_ref())
            .await
        else {
            return Ok(());
        };
        if let Some(back) = back {
            let _ = self
                .service
                .mutate(move |w, now| {
                    w.restore_reservation(now, id, back);
                    Ok(())
                })
                .await;
        }
        Err(Refusal::conflict(format!(
            "cluster {cluster} refused to move the reservation: {e}"
        )))
    }
}
