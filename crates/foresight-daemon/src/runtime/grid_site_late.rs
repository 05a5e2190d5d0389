//! A grid part that can no longer start in its reservation. The centre reserves exactly a
//! part's walltime, and a job starts in a reservation only if it ends within it, so a part
//! that missed its reservation's first second waits there until the reservation ends: one
//! submitted after its reservation began (a standby taking over, a slow link), one whose
//! reservation the centre moved to begin now, one whose cycle ran a second late on a loaded
//! host. Such a reservation is stretched to run from now, or released when there is no
//! room, so that the centre plans the part again.

use super::{centre_id, check_lent, owner_of, GridAgent, Lending};
use crate::state::refusal::Refusal;
use crate::state::world::{SavedWindow, World};
use foresight_core::time::{Dur, Time};
use foresight_core::ReservationId;
use foresight_rm::ReserveRequest;
use std::collections::BTreeMap;

/// What a reservation stretched for a late part holds beyond its walltime: the part
/// starts at a cycle after the stretch, in a later second maybe, and must still end
/// within the window.
pub(super) const RENEWED_SLACK_SECS: i64 = 5;

/// Stretches reservation `id` (the centre's `centre`) to run from `now` for a part of
/// `walltime` that comes after it began: the centre reserves exactly a part's walltime, and
/// a job starts in a reservation only if it ends within it, so a part late by even a
/// second (a standby taking over, a slow link) would wait there for ever. The reservation
/// moves (its own processors count as free; on a Slurm cluster it is updated in place,
/// never deleted and made again, so that Slurm gives its nodes to no one in between);
/// what to put back should Slurm refuse, `None` when it was not late. On Slurm its start
/// stays (see [`stretched_window`]). When there is no room, it is released: the centre
/// sees it vanish and plans the part again.
pub(super) fn renew_if_late(
    w: &mut World,
    now: Time,
    lending: &Lending,
    (id, centre): (ReservationId, u64),
    walltime: i64,
) -> Result<Option<SavedWindow>, Refusal> {
    let r = &w.reservations[&id];
    if !r.state.is_live() || r.start >= now.secs() || now.secs() + walltime <= r.end {
        return Ok(None);
    }
    let window = stretched_window(w, now, id, walltime);
    tracing::info!(
        reservation = centre,
        late = now.secs() - r.start,
        "a part came after its reservation began: stretching it to run from now"
    );
    let moved = check_lent(w, lending, &window, Some(id))
        .and_then(|()| w.move_reservation(now, id, window.start, window.end));
    match moved {
        Ok(back) => Ok(Some(back)),
        Err(e) => {
            w.release_reservation(now, id)?;
            Err(e)
        }
    }
}

/// The window a late part's reservation `id` is stretched to. On a cluster that schedules
/// itself (Slurm refuses any new start for a reservation that has begun, even its own) it
/// keeps its start and ends when the part, started now, would: its walltime rounded up to
/// the cluster's granularity (Slurm limits a part in whole minutes), plus the slack.
/// Elsewhere it runs from now.
fn stretched_window(w: &World, now: Time, id: ReservationId, walltime: i64) -> ReserveRequest {
    let r = &w.reservations[&id];
    let k = w.cluster_index(&r.cluster);
    let in_place = k.is_some_and(|k| w.clusters[k].kind.schedules_itself());
    let held = k.map_or(walltime, |k| {
        w.broker.clusters[k].granular(Dur(walltime)).as_secs()
    });
    ReserveRequest {
        id: id.0,
        start: if in_place { r.start } else { now.secs() },
        end: now.secs() + held + RENEWED_SLACK_SECS,
        procs: r.procs,
    }
}

/// A grid part waiting here past the first second of its reservation, too long for what
/// is left of it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct LatePart {
    /// The lent cluster.
    pub cluster: String,
    /// The site's reservation.
    pub reservation: ReservationId,
    /// The centre's id of it.
    pub centre: u64,
    /// The part's walltime, seconds.
    pub walltime: i64,
}

/// The parts of the grid's `user` on clusters this site's own scheduler runs whose
/// reservation (made for the centre `owner`) began before `now` and ends before the part
/// could, started now: due (their begin passed), not held, not started. Clusters a Slurm
/// or Maui schedules are left out: there a part's start is known only from the next
/// report, and a reservation moved under a part just started would be refused.
pub(super) fn late_parts(w: &World, now: Time, user: &str, owner: &str) -> Vec<LatePart> {
    let begun: BTreeMap<u64, u64> = w
        .reservations
        .values()
        .filter(|r| r.state.is_live() && r.start < now.secs())
        .filter(|r| {
            w.cluster_index(&r.cluster).is_some_and(|k| {
                let kind = &w.clusters[k].kind;
                !kind.schedules_itself() && !kind.maui_schedules()
            })
        })
        .filter_map(|r| Some((r.id, centre_id(r, owner)?)))
        .collect();
    if begun.is_empty() {
        return Vec::new();
    }
    w.jobs
        .values()
        .filter(|j| {
            j.user == user
                && j.started_at.is_none()
                && !j.held
                && !j.state.is_final()
                && j.begin.is_none_or(|b| b <= now.secs())
        })
        .filter_map(|j| {
            let id = j.reservation?;
            let centre = *begun.get(&id)?;
            let r = &w.reservations[&ReservationId(id)];
            (now.secs() + j.walltime > r.end).then(|| LatePart {
                cluster: r.cluster.clone(),
                reservation: ReservationId(id),
                centre,
                walltime: j.walltime,
            })
        })
        .collect()
}

impl GridAgent {
    /// Stretches the reservation of every late part (see [`late_parts`]) of the centre
    /// `instance`, or releases it when there is no room (the centre then sees it vanish
    /// and plans the part again). Checked at every snapshot: a part found late starts at
    /// the site's next cycle.
    pub(super) async fn stretch_late_parts(&self, instance: &str) {
        let owner = owner_of(instance);
        let late = late_parts(
            &self.service.world(),
            self.service.now(),
            &self.cfg.user,
            &owner,
        );
        for part in late {
            let Some(&lend) = self.cfg.lend.get(&part.cluster) else {
                continue;
            };
            let lending = Lending {
                cluster: part.cluster.clone(),
                user: self.cfg.user.clone(),
                owner: owner.clone(),
                lend,
            };
            let (id, centre, walltime) = (part.reservation, part.centre, part.walltime);
            let renewed = self
                .service
                .mutate(move |w, now| Ok(renew_if_late(w, now, &lending, (id, centre), walltime)))
                .await;
            if let Ok(Err(e)) | Err(e) = renewed {
                tracing::warn!(
                    reservation = centre,
                    "a late part's reservation could not stretch and was released: {e}"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::super::make_grid_reservation;
    use super::*;
    use crate::config::{ClusterConfig, Config};
    use foresight_core::ClusterId;
    use foresight_rm::ClusterState;

    const START: i64 = 1_000;

    fn lending() -> Lending {
        Lending {
            cluster: "abisko".into(),
            user: "grid".into(),
            owner: owner_of("foresight"),
            lend: 8,
        }
    }

    /// A site with one Slurm cluster of 8 processors and the centre's reservation 7 of 4
    /// of them for `[START, START + 120)`.
    fn slurm_site() -> (World, ReservationId) {
        let cfg = Config {
            cluster: vec![ClusterConfig {
                kind: "slurm".into(),
                slurm_conf: Some("/etc/abisko/slurm.conf".into()),
                ..ClusterConfig::local("abisko", 0)
            }],
            data_dir: "/nonexistent".into(),
            ..Config::default()
        };
        let mut w = World::new(&cfg);
        let empty = ClusterState {
            taken_at: START - 10,
            processors: 8,
            jobs: vec![],
            reservations: vec![],
        };
        w.sync_remote(Time(START - 10), ClusterId(0), Ok(empty));
        let req = ReserveRequest {
            id: 7,
            start: START,
            end: START + 120,
            procs: 4,
        };
        make_grid_reservation(&mut w, Time(START - 10), &lending(), &req).unwrap();
        let id = ReservationId(w.reservations.values().next().unwrap().id);
        (w, id)
    }

    /// Slurm refuses any new start for a reservation that has begun (CI saw a co-allocated
    /// job fail so: `Reservation already started`), and limits a part in whole minutes. A
    /// late part's reservation there keeps its start and holds the part's walltime rounded
    /// up to a minute from now; before, it moved to now and held 95 s for a 90 s part, less
    /// than the 2 minutes Slurm limits that part to.
    #[test]
    fn on_slurm_a_late_parts_reservation_keeps_its_start_and_holds_whole_minutes() {
        let late = |w: &mut World, id, now: i64, walltime: i64| {
            renew_if_late(w, Time(now), &lending(), (id, 7), walltime).unwrap()
        };
        let (mut w, id) = slurm_site();
        // Not late before its start, nor for a part that still fits what is left.
        assert!(late(&mut w, id, START, 90).is_none());
        assert!(late(&mut w, id, START + 1, 60).is_none());
        let back = late(&mut w, id, START + 1, 120).unwrap();
        assert_eq!((back.start, back.end), (START, START + 120));
        let r = &w.reservations[&id];
        assert_eq!(
            (r.start, r.end),
            (START, START + 1 + 120 + RENEWED_SLACK_SECS)
        );
        // A 90 s part 31 s late: Slurm limits it to 2 minutes from now.
        let (mut w, id) = slurm_site();
        late(&mut w, id, START + 31, 90).unwrap();
        let r = &w.reservations[&id];
        assert_eq!(
            (r.start, r.end),
            (START, START + 31 + 120 + RENEWED_SLACK_SECS)
        );
    }
}
