//! The resource agent's forecast (seed 000 §3.2, §5): what a cluster will do with its own
//! jobs, turned into the slot plan the grid planner selects from.
//!
//! A cluster's future holds running jobs (until their estimated end), the local queue as the
//! cluster's own policy would place it, and administrative reservations. Running jobs and
//! reservations are untouchable. Time planned for a queued local job is offered at a premium
//! that grows with the job's priority: a global job whose price covers it may take it, and
//! the local job is then placed later by its own scheduler. Free time costs the base tariff.

use crate::ids::{JobId, ReservationId};
use crate::policy::ALL;
use crate::scheduler::{Domain, LocalScheduler};
use crate::select::{Processor, Slot};
use crate::time::{Dur, Interval, Time};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// What a cluster charges global jobs, per processor-second.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tariff {
    /// Price of free time.
    pub base: f64,
    /// Extra factor for time planned for a queued local job, per unit of its priority:
    /// such a slot costs `base × (1 + local_premium × priority)`.
    pub local_premium: f64,
}

impl Default for Tariff {
    fn default() -> Self {
        Tariff {
            base: 1.0,
            local_premium: 1.0,
        }
    }
}

/// One thing the cluster expects to do with some of its processors.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Occupancy {
    /// Processors taken.
    pub procs: u32,
    /// When.
    pub window: Interval,
    /// What takes them.
    pub kind: OccupancyKind,
}

/// Who holds processors in a forecast.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum OccupancyKind {
    /// A running job: untouchable until its estimated end.
    Running(JobId),
    /// A queued local job where the local policy would place it; `priority` ≥ 0 scales the
    /// price a global job pays to take its place.
    Planned {
        /// The job.
        job: JobId,
        /// Its priority (0 = lowest).
        priority: f64,
    },
    /// Held by a reservation (administrative or a global job's): untouchable.
    Held(ReservationId),
}

/// The forecast of a local scheduler at `now`: running jobs, then every waiting job at the
/// start the cluster's policy would give it if nothing else arrived (computed by giving every
/// waiting job a reservation on a copy: conservative placement, as `squeue --start` reports),
/// a job waiting for its begin time no earlier than that.
pub fn forecast(
    sched: &LocalScheduler,
    now: Time,
    priority: impl Fn(JobId) -> f64,
) -> Vec<Occupancy> {
    forecast_holding(sched, now, priority, now)
}

/// [`forecast`] in which every running job planned by a prediction (outside a reservation)
/// holds its processors at least until `until`, or its estimate if sooner: a reservation made
/// now, starting before `until`, is then never placed on processors that a job outliving
/// its prediction would still hold (the job keeps them to its estimate, its kill time).
/// Time past `until` is offered by the prediction, to jobs that hold nothing yet.
pub fn forecast_holding(
    sched: &LocalScheduler,
    now: Time,
    priority: impl Fn(JobId) -> f64,
    until: Time,
) -> Vec<Occupancy> {
    let mut copy = sched.clone();
    let short: Vec<(JobId, Dur)> = copy
        .predicted_runs()
        .filter(|(_, p)| p.domain == Domain::Pool && p.end < until)
        .filter_map(|(job, p)| {
            let estimate = copy.estimate_of(job)?;
            Some((job, (until - p.start).min(estimate)))
        })
        .collect();
    for (job, plan) in short {
        let _ = copy.correct(now, job, plan);
    }
    copy.set_reservation_depth(ALL);
    let mut actions = Vec::new();
    copy.schedule(now, &mut actions);
    // Jobs waiting for their begin time come after the queue, no earlier than their begin.
    copy.place_deferred();
    // Jobs inside a reservation are covered by its `Held` occupancy: counting them too
    // would book their processors twice.
    let mut out: Vec<Occupancy> = copy
        .running_jobs()
        .filter(|(_, _, p)| p.domain == Domain::Pool)
        .map(|(job, procs, p)| Occupancy {
            procs,
            window: Interval::new(p.start.max(now), p.end),
            kind: if !sched.is_running(job) {
                // Started only in the copy: it is still waiting for real.
                OccupancyKind::Planned {
                    job,
                    priority: priority(job),
                }
            } else {
                OccupancyKind::Running(job)
            },
        })
        .chain(
            copy.job_reservations()
                .filter(|(_, _, p)| p.domain == Domain::Pool)
                .map(|(job, procs, p)| Occupancy {
                    procs,
                    window: Interval::new(p.start, p.end),
                    kind: OccupancyKind::Planned {
                        job,
                        priority: priority(job),
                    },
                }),
        )
        .chain(copy.reservations().map(|r| Occupancy {
            procs: r.procs,
            window: r.window,
            kind: OccupancyKind::Held(r.id),
        }))
        .filter(|o| o.window.end > now)
        .collect();
    out.sort_by_key(|o| (o.window.start, o.window.end));
    out
}

/// Turns a forecast into slots over `[now, horizon)` for the cluster's `processors` (all of
/// one cluster), each naming its processor by index in `processors`. Processors are assigned
/// to occupancies in order of start (any processor free at an occupancy's start will do,
/// since the forecast never uses more than the cluster has); what is left free costs the
/// base tariff. Time planned for a queued local job costs at least `displacement_floor`
/// (the planner sets it above every cluster's base tariff, so that a job paying at most a
/// base tariff never displaces local work, whatever the premiums).
pub fn slots_from_forecast(
    processors: &[Processor],
    occupancies: &[Occupancy],
    now: Time,
    horizon: Time,
    tariff: &Tariff,
    displacement_floor: f64,
) -> Vec<Slot> {
    let n = processors.len();
    // Per processor: the occupancies assigned to it, in time order.
    let mut lanes: Vec<Vec<(Interval, Option<f64>)>> = vec![Vec::new(); n];
    // Every processor by (busy until, index): those free at an occupancy's start are a
    // prefix, so an occupancy costs the processors it takes, not a scan of the cluster.
    let mut by_free: BTreeSet<(Time, u32)> = (0..n as u32).map(|p| (now, p)).collect();
    let mut order: Vec<&Occupancy> = occupancies.iter().collect();
    order.sort_by_key(|o| (o.window.start, o.window.end));
    for o in order {
        let start = o.window.start.max(now);
        if start >= o.window.end || start >= horizon {
            continue;
        }
        // Prefer the processor freed longest ago, then the lowest index: deterministic.
        let free: Vec<(Time, u32)> = by_free
            .iter()
            .take_while(|&&(busy, _)| busy <= start)
            .take(o.procs as usize)
            .copied()
            .collect();
        let cost = match o.kind {
            OccupancyKind::Planned { priority, .. } => Some(
                (tariff.base * (1.0 + tariff.local_premium * priority.max(0.0)))
                    .max(displacement_floor),
            ),
            OccupancyKind::Running(_) | OccupancyKind::Held(_) => None,
        };
        for key in free {
            by_free.remove(&key);
            by_free.insert((o.window.end, key.1));
            lanes[key.1 as usize].push((Interval::new(start, o.window.end.min(horizon)), cost));
        }
    }
    lanes_to_slots(&lanes, now, horizon, tariff)
}

/// Each processor's lane of occupied windows (in order, with their cost; `None`: held
/// apart, no slot) as slots over `[now, horizon)`, the gaps at the base tariff.
fn lanes_to_slots(
    lanes: &[Vec<(Interval, Option<f64>)>],
    now: Time,
    horizon: Time,
    tariff: &Tariff,
) -> Vec<Slot> {
    let mut out = Vec::new();
    for (p, lane) in lanes.iter().enumerate() {
        let slot = |start, end, cost| Slot {
            processor: p as u32,
            start,
            end,
            cost,
        };
        let mut t = now;
        for (w, cost) in lane {
            if w.start > t {
                out.push(slot(t, w.start, tariff.base));
            }
            if let Some(c) = cost {
                out.push(slot(w.start, w.end, *c));
            }
            t = t.max(w.end);
        }
        if t < horizon {
            out.push(slot(t, horizon, tariff.base));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::Job;
    use crate::policy::Policy;
    use crate::scheduler::Event;
    use crate::time::Dur;
    use std::collections::BTreeSet;

    fn cluster(n: usize) -> Vec<Processor> {
        (0..n)
            .map(|i| Processor {
                id: format!("c/p{i}"),
                cluster: "c".into(),
                speed: 1.0,
                memory_mb: 0,
                features: BTreeSet::new(),
            })
            .collect()
    }

    /// Four processors: job 0 runs on 3 until 100; job 1 (4 processors, 50 s) waits for it.
    /// The forecast puts job 1 at [100, 150); the plan offers p3 free until 100, job 1's time
    /// at a premium, and everything from 150 at the base price.
    #[test]
    fn forecast_places_the_queue_and_prices_it() {
        let mut s = LocalScheduler::new(4, Policy::easy());
        let mut out = Vec::new();
        s.handle(
            Time(0),
            Event::Submit(Job::new(JobId(0), Time(0), 3, Dur(100))),
            &mut out,
        )
        .unwrap();
        s.handle(
            Time(0),
            Event::Submit(Job::new(JobId(1), Time(0), 4, Dur(50))),
            &mut out,
        )
        .unwrap();
        let f = forecast(&s, Time(10), |_| 1.0);
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].kind, OccupancyKind::Running(JobId(0)));
        assert_eq!(f[0].window, Interval::new(Time(10), Time(100)));
        assert_eq!(f[1].window, Interval::new(Time(100), Time(150)));
        let tariff = Tariff {
            base: 1.0,
            local_premium: 2.0,
        };
        let slots = slots_from_forecast(&cluster(4), &f, Time(10), Time(1000), &tariff, 0.0);
        let of = |p: u32| -> Vec<(i64, i64, f64)> {
            slots
                .iter()
                .filter(|s| s.processor == p)
                .map(|s| (s.start.secs(), s.end.secs(), s.cost))
                .collect()
        };
        // p0..p2 run job 0 (no slot), then job 1 at 3.0, then free.
        assert_eq!(of(0), vec![(100, 150, 3.0), (150, 1000, 1.0)]);
        assert_eq!(
            of(3),
            vec![(10, 100, 1.0), (100, 150, 3.0), (150, 1000, 1.0)]
        );
    }

    /// A job running (or waiting) inside a reservation is covered by the reservation's
    /// `Held` time: the forecast books its processors once, not twice. Four processors, a
    /// 2-processor reservation over [0, 100) with its job running: two processors stay free.
    /// Under FCFS no job starts before one ahead of it: a small job behind a large blocked
    /// one is forecast after it, not in the hole before it (where conservative backfilling
    /// would put it, and FCFS never will).
    #[test]
    fn an_fcfs_queue_is_forecast_in_order() {
        let mut s = LocalScheduler::new(5, Policy::fcfs());
        let mut out = Vec::new();
        for (id, procs, secs) in [(1, 1, 240), (2, 5, 60), (3, 1, 60)] {
            s.handle(
                Time(0),
                Event::Submit(Job::new(JobId(id), Time(0), procs, Dur(secs))),
                &mut out,
            )
            .unwrap();
        }
        let start = |f: &[Occupancy], id| {
            f.iter()
                .find(|o| matches!(o.kind, OccupancyKind::Planned { job, .. } if job == JobId(id)))
                .map(|o| o.window.start)
        };
        let f = forecast(&s, Time(0), |_| 0.0);
        assert_eq!(start(&f, 2), Some(Time(240)));
        assert_eq!(start(&f, 3), Some(Time(300)), "{f:?}");
    }

    #[test]
    fn jobs_inside_reservations_are_not_booked_twice() {
        use crate::reservation::{Acl, AdminReservation};
        let mut s = LocalScheduler::new(4, Policy::easy());
        s.add_reservation(AdminReservation {
            id: ReservationId(7),
            procs: 2,
            window: Interval::new(Time(0), Time(100)),
            acl: Acl {
                job: Some(JobId(1)),
                ..Acl::nobody()
            },
        })
        .unwrap();
        let mut out = Vec::new();
        s.handle(
            Time(0),
            Event::Submit(
                Job::new(JobId(1), Time(0), 2, Dur(100)).in_reservation(ReservationId(7), false),
            ),
            &mut out,
        )
        .unwrap();
        assert!(s.is_running(JobId(1)));
        let f = forecast(&s, Time(0), |_| 0.0);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].kind, OccupancyKind::Held(ReservationId(7)));
        let slots =
            slots_from_forecast(&cluster(4), &f, Time(0), Time(200), &Tariff::default(), 0.0);
        let free_now = slots.iter().filter(|s| s.start == Time(0)).count();
        assert_eq!(free_now, 2);
    }

    /// The assignment [`slots_from_forecast`] made before it kept processors ordered by
    /// when they free up: every occupancy scanned and sorted the whole cluster.
    fn slots_by_scan(
        n: usize,
        occupancies: &[Occupancy],
        now: Time,
        horizon: Time,
        tariff: &Tariff,
        floor: f64,
    ) -> Vec<Slot> {
        let mut busy_until = vec![now; n];
        let mut lanes: Vec<Vec<(Interval, Option<f64>)>> = vec![Vec::new(); n];
        let mut order: Vec<&Occupancy> = occupancies.iter().collect();
        order.sort_by_key(|o| (o.window.start, o.window.end));
        for o in order {
            let start = o.window.start.max(now);
            if start >= o.window.end || start >= horizon {
                continue;
            }
            let mut free: Vec<usize> = (0..n).filter(|&p| busy_until[p] <= start).collect();
            free.sort_by_key(|&p| (busy_until[p], p));
            let cost = match o.kind {
                OccupancyKind::Planned { priority, .. } => Some(
                    (tariff.base * (1.0 + tariff.local_premium * priority.max(0.0))).max(floor),
                ),
                OccupancyKind::Running(_) | OccupancyKind::Held(_) => None,
            };
            for &p in free.iter().take(o.procs as usize) {
                busy_until[p] = o.window.end;
                lanes[p].push((Interval::new(start, o.window.end.min(horizon)), cost));
            }
        }
        lanes_to_slots(&lanes, now, horizon, tariff)
    }

    proptest::proptest! {
        /// Processors kept ordered by when they free up give every occupancy the processors
        /// the scan of the whole cluster gave it: the same slots, whatever the forecast
        /// (over-booked ones included).
        #[test]
        fn ordered_assignment_gives_the_slots_of_the_scan(
            n in 1usize..24,
            now in 0i64..200,
            span in 1i64..2_000,
            occ in proptest::collection::vec(
                (1u32..30, 0i64..1_500, 1i64..600, 0u8..3, 0u8..4),
                0..40,
            ),
        ) {
            let tariff = Tariff {
                base: 1.0,
                local_premium: 0.5,
            };
            let occupancies: Vec<Occupancy> = occ
                .iter()
                .enumerate()
                .map(|(i, &(procs, start, len, kind, priority))| Occupancy {
                    procs,
                    window: Interval::new(Time(start), Time(start + len)),
                    kind: match kind {
                        0 => OccupancyKind::Running(JobId(i as u64)),
                        1 => OccupancyKind::Held(ReservationId(i as u64)),
                        _ => OccupancyKind::Planned {
                            job: JobId(i as u64),
                            priority: f64::from(priority),
                        },
                    },
                })
                .collect();
            let (now, horizon) = (Time(now), Time(now + span));
            let got = slots_from_forecast(&cluster(n), &occupancies, now, horizon, &tariff, 1.2);
            let want = slots_by_scan(n, &occupancies, now, horizon, &tariff, 1.2);
            proptest::prop_assert_eq!(got, want);
        }
    }
}
