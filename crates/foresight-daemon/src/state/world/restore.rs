//! The world rebuilt from the store at start: jobs, parts, reservations and preemptions as
//! they were written, running parts re-adopted.

use crate::state::world::World;
use foresight_core::reservation::AdminReservation;
use foresight_core::scheduler::Domain;
use foresight_core::time::{Dur, Interval, Time};
use foresight_core::{ClusterId, Job, JobId, ReservationId};
use foresight_store::{JobRecord, ReservationRecord, UserRecord};
use foresight_store::{JobState, ReservationState};

impl World {
    /// Rebuilds the derived state (local schedulers, queue) from stored records after a
    /// start. Running jobs are put back as running; the caller then asks the executors
    /// about them. Returns the running jobs' parts to re-adopt: (cluster, job, attempt).
    pub fn restore(
        &mut self,
        now: Time,
        jobs: Vec<JobRecord>,
        reservations: Vec<ReservationRecord>,
        users: Vec<UserRecord>,
    ) -> Vec<(ClusterId, JobId, u32)> {
        for u in users {
            self.add_user(u);
        }
        for mut r in reservations {
            self.broker.reserve_ids_below(r.id + 1);
            if r.state.is_live() {
                let k = self.cluster_index(&r.cluster);
                let expired = Time(r.end) <= now
                    || r.state == ReservationState::Tentative
                        && r.expires_at.is_some_and(|e| Time(e) <= now);
                let remote = k.is_some_and(|k| self.clusters[k].kind.schedules_itself());
                // A remote reservation is mirrored at the cluster's first snapshot; one still
                // tentative lost its phase one with the service, and is released there.
                let added = !expired
                    && k.is_some_and(|k| {
                        if remote {
                            return r.state != ReservationState::Tentative;
                        }
                        let acl = self.acl(&r.acl);
                        self.broker.clusters[k]
                            .sched
                            .add_reservation(AdminReservation {
                                id: ReservationId(r.id),
                                procs: r.procs,
                                window: Interval::new(Time(r.start), Time(r.end)),
                                acl,
                            })
                            .is_ok()
                    });
                if !added {
                    r.state = if Time(r.end) <= now {
                        ReservationState::Finished
                    } else {
                        ReservationState::Expired
                    };
                    self.reservations.mark(ReservationId(r.id));
                }
            }
            self.reservations.load(ReservationId(r.id), r);
        }
        let mut adopt = Vec::new();
        // Parts whose start was deferred when the service stopped: (cluster, job, procs).
        let mut again = Vec::new();
        for mut j in jobs {
            super::prediction::migrate_prediction(&mut j);
            if j.requeue_pending && j.state == JobState::Running {
                self.in_flight.requeue.insert(JobId(j.id));
            }
            self.jobs.load(JobId(j.id), j);
        }
        self.refresh_credentials();
        // Running jobs first, so that their processors are taken before any queued job is
        // placed (a backfilled running job may have a later id than a waiting one); then
        // reserved jobs, then the queues in id order.
        let mut ids: Vec<(u8, JobId)> = self
            .jobs
            .values()
            .map(|j| {
                let phase = match j.state {
                    JobState::Running => 0,
                    JobState::Reserved => 1,
                    _ => 2,
                };
                (phase, JobId(j.id))
            })
            .collect();
        ids.sort_unstable();
        for (phase, id) in ids {
            if phase == 2 {
                // Every running and reserved job holds its processors again: the deferred
                // parts before any queued job.
                self.start_again(now, std::mem::take(&mut again));
            }
            let j = self.jobs[&id].clone();
            if j.state.is_final() {
                // Its outputs were being copied back when the service stopped: again.
                if j.output_staging
                    .as_ref()
                    .is_some_and(|s| s.ended_at.is_none())
                {
                    self.copy_outputs_again(id);
                }
                continue;
            }
            let global = j.cluster.is_none() && j.reservation.is_none();
            match j.state {
                JobState::Running => {
                    let cred = self.cred(&j.user, &j.cred);
                    // Stopped for a job of a higher level: its processes are kept (and
                    // followed), its processors are not its own until it resumes.
                    let stopped =
                        global && j.preemption.as_ref().is_some_and(|p| p.since.is_some());
                    for p in j.parts.iter().filter(|p| !p.ended) {
                        let Some(k) = self.cluster_index(&p.cluster) else {
                            continue;
                        };
                        if self.clusters[k].kind.schedules_itself() {
                            continue; // followed from the cluster's snapshots
                        }
                        if stopped {
                            adopt.push((k, id, j.attempt));
                            continue;
                        }
                        // Being killed to run again: it is not planned as running (its
                        // processors are its successor's), but they stay out of the free
                        // ones until it is really gone, so nothing starts beside it.
                        if j.requeue_pending {
                            for q in &p.processors {
                                self.clusters[k].free.remove(q);
                            }
                            adopt.push((k, id, j.attempt));
                            continue;
                        }
                        // A part without processors was never launched: its start was
                        // deferred while its processors were still held (a sibling part
                        // launched). It is planned as running and deferred again below.
                        let deferred = p.processors.is_empty();
                        let domain = match p.reservation {
                            Some(r)
                                if self
                                    .reservations
                                    .get(&ReservationId(r))
                                    .is_some_and(|r| r.state.is_live()) =>
                            {
                                Domain::Reservation(ReservationId(r))
                            }
                            _ => Domain::Pool,
                        };
                        let walltime = match (p.reservation, global) {
                            (Some(r), true) => self
                                .reservations
                                .get(&ReservationId(r))
                                .map_or(j.walltime, |r| r.end - r.start),
                            _ => j.walltime,
                        };
                        let job = Job::new(id, Time(j.submitted_at), p.procs, Dur(walltime))
                            .with_cred(cred)
                            .with_prediction(if global {
                                super::prediction::part_plan(&j, walltime)
                            } else {
                                super::prediction::restored_plan(&j)
                            });
                        let start = Time(j.started_at.unwrap_or(now.secs()));
                        let _ = self.broker.clusters[k]
                            .sched
                            .restore_running(now, job, start, domain);
                        if deferred {
                            again.push((k, id, p.procs));
                            continue;
                        }
                        for q in &p.processors {
                            self.clusters[k].free.remove(q);
                        }
                        adopt.push((k, id, j.attempt));
                    }
                    if global {
                        self.adopt_global(id, false);
                    }
                }
                JobState::Reserved => {
                    let ok = j.parts.iter().all(|p| {
                        p.reservation
                            .and_then(|r| self.reservations.get(&ReservationId(r)))
                            .is_some_and(|r| r.state.is_live())
                    });
                    if !ok {
                        self.unqueue(now, id);
                        if let Some(j) = self.jobs.get_mut(&id) {
                            j.state = JobState::Pending;
                            j.reason = Some(
                                "its reservation lapsed while the service was down; planned again"
                                    .into(),
                            );
                        }
                        self.enqueue_global(now, id);
                        continue;
                    }
                    let cred = self.cred(&j.user, &j.cred);
                    // Its reservations have begun and it is not running: the broker had
                    // started it and its launch was deferred until its processors were let go
                    // of (or the start fell in the downtime). Deferred again, not planned
                    // again: it keeps its reservations, its charge and its place, and starts
                    // as soon as its processors are free. Submitted into its reservation
                    // instead, it would never fit the rest of the window, and stay reserved.
                    let due = global
                        && j.parts.iter().all(|p| {
                            self.cluster_index(&p.cluster)
                                .is_some_and(|k| !self.clusters[k].kind.schedules_itself())
                                && p.reservation
                                    .and_then(|r| self.reservations.get(&ReservationId(r)))
                                    .is_some_and(|r| Time(r.start) <= now)
                        });
                    for p in &j.parts {
                        let (Some(k), Some(r)) = (self.cluster_index(&p.cluster), p.reservation)
                        else {
                            continue;
                        };
                        if self.clusters[k].kind.schedules_itself() {
                            continue;
                        }
                        let res = &self.reservations[&ReservationId(r)];
                        let (start, length) = (Time(res.start), Dur(res.end - res.start));
                        let job =
                            Job::new(id, Time(j.submitted_at), p.procs, length).with_cred(cred);
                        if due {
                            let job = job.with_prediction(super::prediction::part_plan(
                                &j,
                                length.as_secs(),
                            ));
                            let _ = self.broker.clusters[k].sched.restore_running(
                                now,
                                job,
                                start,
                                Domain::Reservation(ReservationId(r)),
                            );
                            again.push((k, id, p.procs));
                        } else {
                            let job = job.in_reservation(ReservationId(r), false);
                            let _ = self.broker.clusters[k].sched.submit(job);
                        }
                    }
                    if global {
                        self.adopt_global(id, due);
                    }
                }
                _ if j.held => {}
                _ if j.links.as_ref().is_some_and(|l| l.waiting) => {
                    self.gate.waiting.insert(id);
                }
                _ if global => self.enqueue_global(now, id),
                // Queued in a cluster that schedules itself: reconciled at its snapshot.
                _ if j.parts.iter().any(|p| {
                    self.cluster_index(&p.cluster)
                        .is_some_and(|k| self.clusters[k].kind.schedules_itself())
                }) => {}
                _ => self.submit_local(now, id),
            }
        }
        self.start_again(now, again);
        self.wake_waiting(now);
        let ids: Vec<JobId> = self.jobs.keys().copied().collect();
        for id in ids {
            self.recount(id);
        }
        adopt
    }
}
