//! The plan as users see it (`GET /plan`, `plan show`, the dashboard's Gantt chart): per
//! processor, what holds it over a window.
//!
//! Only two things hold *named* processors: a running part (the processors it was launched
//! on) and an administrative reservation made on named processors. Everything else is a
//! count: a global job's reservation holds a number of processors (its part gets free ones
//! when it starts), a planned global job holds nothing yet (the processors the planner chose
//! are positions in its own model of the cluster, not the cluster's), and the local
//! scheduler forecasts its queue by count. So the named things are drawn where they are, and
//! the counted ones are given processors here, in order of start, on processors free over
//! their whole window: no processor ever shows two things at once, and each thing is drawn
//! on exactly as many processors as it holds.
//!
//! The counts agree because they come from one forecast: a copy of the cluster's local
//! scheduler in which each planned global part holds its window as a reservation would (the
//! planner put it there, displacing the local queue if it paid for that), so that the local
//! queue is forecast around it rather than under it.

use foresight_api::{ClusterPlan, SlotView};
use foresight_core::forecast::{forecast, Occupancy, OccupancyKind};
use foresight_core::{Acl, AdminReservation, Interval, LocalScheduler, ReservationId, Time};
use std::collections::{HashMap, HashSet};

/// A part running on this cluster.
#[derive(Clone, Debug)]
pub struct RunningPart {
    /// The job.
    pub job: u64,
    /// When the part started: a running job's slot begins at the window's start, and a
    /// reader of the plan (the co-allocated jobs' table) wants the real start.
    pub started_at: Option<i64>,
    /// The end the local scheduler counts (its walltime's, or its prediction's).
    pub end: i64,
    /// The processors it runs on; empty when not known here (a cluster that schedules
    /// itself, a part still waiting for its processors to come free): then it is drawn from
    /// the forecast, by count.
    pub processors: Vec<u32>,
}

/// A global job's part the broker has placed on this cluster, which holds a number of
/// processors and no named ones.
#[derive(Clone, Debug)]
pub struct GlobalPart {
    /// `reserved` or `planned`.
    pub occupant: &'static str,
    /// The job.
    pub job: u64,
    /// Over `[start, end)`.
    pub start: i64,
    /// End.
    pub end: i64,
    /// How many processors.
    pub procs: u32,
    /// The reservation that holds it in the local scheduler, once made.
    pub reservation: Option<u64>,
}

/// What one cluster's plan is drawn from, copied out of the service's state so that the
/// forecast (a copy of the local scheduler run forward) runs off the state's lock.
#[derive(Clone, Debug)]
pub struct ClusterInput {
    /// Name.
    pub name: String,
    /// Processors.
    pub procs: u32,
    /// Base price per processor-second: the cost of free time.
    pub tariff: f64,
    /// Its local scheduler.
    pub sched: LocalScheduler,
    /// Its running parts.
    pub running: Vec<RunningPart>,
    /// Reserved and planned global jobs' parts.
    pub global: Vec<GlobalPart>,
    /// Every global job's reservation on this cluster, and its job: the local scheduler
    /// holds them without naming the job.
    pub job_reservations: HashMap<u64, u64>,
    /// Administrative reservations' named processors (empty: any).
    pub admin_reservations: HashMap<u64, Vec<u32>>,
}

/// Ids a viewer may see: every id, or only their own jobs'.
pub enum Visible {
    /// An administrator.
    All,
    /// A user: the ids of their jobs.
    Own(HashSet<u64>),
}

impl Visible {
    fn job(&self, id: u64) -> Option<u64> {
        match self {
            Visible::All => Some(id),
            Visible::Own(mine) => mine.contains(&id).then_some(id),
        }
    }
}

/// The plan of each cluster over `[from, to)` at `now`.
pub fn draw(
    clusters: Vec<ClusterInput>,
    now: i64,
    from: i64,
    to: i64,
    visible: &Visible,
) -> Vec<ClusterPlan> {
    clusters
        .into_iter()
        .map(|c| draw_cluster(c, now, from, to, visible))
        .collect()
}

/// Something to draw on processors the view chooses.
struct Counted {
    start: i64,
    end: i64,
    procs: u32,
    occupant: &'static str,
    id: Option<u64>,
    started_at: Option<i64>,
}

/// Per processor, the intervals already drawn on it.
struct Rows {
    taken: Vec<Vec<(i64, i64)>>,
    slots: Vec<SlotView>,
    from: i64,
    to: i64,
}

impl Rows {
    /// Whether processor `p` is free over all of `[a, b)`.
    fn free(&self, p: usize, a: i64, b: i64) -> bool {
        self.taken[p].iter().all(|&(s, e)| e <= a || b <= s)
    }

    /// Draws `[start, end)` (clipped to the window) on processor `p`.
    fn put(&mut self, p: u32, start: i64, end: i64, what: &Counted) {
        let (start, end) = (start.max(self.from), end.min(self.to));
        if start >= end || p as usize >= self.taken.len() {
            return;
        }
        self.taken[p as usize].push((start, end));
        self.slots.push(SlotView {
            processor: p,
            start,
            end,
            occupant: what.occupant.into(),
            id: what.id,
            cost: None,
            started_at: what.started_at,
        });
    }

    /// Draws `what` on `what.procs` processors: the lowest ones free over its whole window
    /// (clipped to the view's). Where fewer are (processors named by administrative
    /// reservations can cut every row), the rest is drawn piecewise on processors free over
    /// each piece, so that at every instant it holds exactly its count.
    fn put_counted(&mut self, what: &Counted) {
        let (a, b) = (what.start.max(self.from), what.end.min(self.to));
        if a >= b {
            return;
        }
        let whole: Vec<usize> = (0..self.taken.len())
            .filter(|&p| self.free(p, a, b))
            .take(what.procs as usize)
            .collect();
        let rest = what.procs as usize - whole.len();
        for &p in &whole {
            self.put(p as u32, a, b, what);
        }
        if rest == 0 {
            return;
        }
        // Pieces between every change of what the rows hold within [a, b).
        let mut cuts: Vec<i64> = self
            .taken
            .iter()
            .flatten()
            .flat_map(|&(s, e)| [s, e])
            .filter(|&t| a < t && t < b)
            .chain([a, b])
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        // Per processor, the piece it holds now and since when: kept while it stays free.
        let mut held: Vec<(usize, i64)> = Vec::new();
        let mut drawn: Vec<(usize, i64, i64)> = Vec::new();
        for w in cuts.windows(2) {
            let (x, y) = (w[0], w[1]);
            held.retain(|&(p, since)| {
                let keep = self.free(p, x, y);
                if !keep {
                    drawn.push((p, since, x));
                }
                keep
            });
            let mut more: Vec<usize> = (0..self.taken.len())
                .filter(|&p| self.free(p, x, y) && !held.iter().any(|&(q, _)| q == p))
                .collect();
            more.truncate(rest.saturating_sub(held.len()));
            held.extend(more.into_iter().map(|p| (p, x)));
        }
        drawn.extend(held.into_iter().map(|(p, since)| (p, since, b)));
        for (p, s, e) in drawn {
            self.put(p as u32, s, e, what);
        }
    }
}

/// The cluster's forecast in which each planned global part (and each reservation not made
/// yet) holds its window as its reservation will: the local queue is forecast around them,
/// as it will run. Also the ids of those stand-in reservations.
fn forecast_around_plan(c: &ClusterInput, now: i64) -> (Vec<Occupancy>, HashSet<u64>) {
    let mut sched = c.sched.clone();
    let held: HashSet<u64> = sched.reservations().map(|r| r.id.0).collect();
    let mut unmade = u64::MAX;
    let mut stand_ins = HashSet::new();
    for g in &c.global {
        if g.reservation.is_some_and(|r| held.contains(&r)) {
            continue;
        }
        let start = g.start.max(now);
        if start >= g.end {
            continue;
        }
        let id = ReservationId(unmade);
        unmade -= 1;
        // Refused only when the plan is older than a change here (a reservation made
        // since the cycle): then the local queue is forecast as if it were not there.
        if sched
            .add_reservation_displacing(AdminReservation {
                id,
                procs: g.procs,
                window: Interval::new(Time(start), Time(g.end)),
                acl: Acl::default(),
            })
            .is_ok()
        {
            stand_ins.insert(id.0);
        }
    }
    (forecast(&sched, Time(now), |_| 0.0), stand_ins)
}

/// When each waiting local job of the cluster is forecast to start, around the global jobs
/// the broker has planned there: the start `job list` and `job explain` show, the same the
/// plan draws.
pub fn local_starts(c: &ClusterInput, now: i64) -> HashMap<u64, i64> {
    forecast_around_plan(c, now)
        .0
        .into_iter()
        .filter_map(|o| match o.kind {
            OccupancyKind::Planned { job, .. } => Some((job.0, o.window.start.secs())),
            OccupancyKind::Running(_) | OccupancyKind::Held(_) => None,
        })
        .collect()
}

fn draw_cluster(c: ClusterInput, now: i64, from: i64, to: i64, visible: &Visible) -> ClusterPlan {
    let n = c.procs as usize;
    let mut rows = Rows {
        taken: vec![Vec::new(); n],
        slots: Vec::new(),
        from,
        to,
    };
    let (occupancy, stand_ins) = forecast_around_plan(&c, now);
    let started: HashMap<u64, Option<i64>> =
        c.running.iter().map(|r| (r.job, r.started_at)).collect();
    let running_id = |job: u64| {
        // A job of the cluster's own users on a cluster that schedules itself has no id
        // of ours (ids from 2^62).
        (job < 1 << 62).then_some(job).and_then(|j| visible.job(j))
    };
    // Named processors first: running parts, then administrative reservations on them.
    let mut drawn: HashSet<u64> = HashSet::new();
    for r in c.running.iter().filter(|r| !r.processors.is_empty()) {
        drawn.insert(r.job);
        let what = Counted {
            start: now,
            end: r.end,
            procs: r.processors.len() as u32,
            occupant: "running",
            id: running_id(r.job),
            started_at: r.started_at,
        };
        for &p in &r.processors {
            rows.put(p, now, r.end, &what);
        }
    }
    drawn.extend(c.global.iter().map(|g| g.job));
    let mut counted: Vec<Counted> = c
        .global
        .iter()
        .map(|g| Counted {
            start: g.start,
            end: g.end,
            procs: g.procs,
            occupant: g.occupant,
            id: visible.job(g.job),
            started_at: None,
        })
        .collect();
    for o in &occupancy {
        let (start, end) = (o.window.start.secs(), o.window.end.secs());
        let mut what = Counted {
            start,
            end,
            procs: o.procs,
            occupant: "forecast",
            id: None,
            started_at: None,
        };
        match o.kind {
            OccupancyKind::Running(job) if !drawn.contains(&job.0) => {
                what.occupant = "running";
                what.id = running_id(job.0);
                what.started_at = started.get(&job.0).copied().flatten();
            }
            OccupancyKind::Planned { job, .. } if !drawn.contains(&job.0) => {
                what.id = visible.job(job.0);
            }
            OccupancyKind::Running(_) | OccupancyKind::Planned { .. } => continue,
            OccupancyKind::Held(r) if stand_ins.contains(&r.0) => continue,
            OccupancyKind::Held(r) => match c.job_reservations.get(&r.0) {
                Some(job) if drawn.contains(job) => continue,
                // A running part whose processors are not known here.
                Some(&job) => {
                    what.occupant = "running";
                    what.id = visible.job(job);
                    what.started_at = started.get(&job).copied().flatten();
                }
                None => {
                    what.occupant = "held";
                    what.id = Some(r.0);
                    if let Some(named) = c.admin_reservations.get(&r.0).filter(|p| !p.is_empty()) {
                        for &p in named {
                            rows.put(p, start, end, &what);
                        }
                        continue;
                    }
                }
            },
        }
        counted.push(what);
    }
    // Counted things in order of start: given the lowest processors free over their window.
    counted.sort_by_key(|w| (w.start.max(from), w.end));
    for what in &counted {
        rows.put_counted(what);
    }
    // Free time between, priced at the base tariff.
    let mut busy = std::mem::take(&mut rows.slots);
    busy.sort_by_key(|s| (s.processor, s.start));
    let mut slots = Vec::with_capacity(busy.len() * 2 + n);
    let mut next = busy.into_iter().peekable();
    for p in 0..c.procs {
        let mut t = from;
        while let Some(s) = next.next_if(|s| s.processor == p) {
            if s.start > t {
                slots.push(free_slot(p, t, s.start, c.tariff));
            }
            t = t.max(s.end);
            slots.push(s);
        }
        if t < to {
            slots.push(free_slot(p, t, to, c.tariff));
        }
    }
    ClusterPlan {
        cluster: c.name,
        procs: c.procs,
        from,
        to,
        slots,
    }
}

fn free_slot(p: u32, start: i64, end: i64, cost: f64) -> SlotView {
    SlotView {
        processor: p,
        start,
        end,
        occupant: "free".into(),
        id: None,
        cost: Some(cost),
        started_at: None,
    }
}

/// The plan as the tests compare it: per processor, its busy slots.
#[cfg(test)]
pub(crate) mod drawn {
    use foresight_api::ClusterPlan;

    /// A busy slot: (occupant, id, start, end).
    pub(crate) type Drawn = (String, Option<u64>, i64, i64);

    /// Per processor, its busy slots.
    pub(crate) fn rows(plan: &ClusterPlan) -> Vec<Vec<Drawn>> {
        (0..plan.procs)
            .map(|p| {
                plan.slots
                    .iter()
                    .filter(|s| s.processor == p && s.occupant != "free")
                    .map(|s| (s.occupant.clone(), s.id, s.start, s.end))
                    .collect()
            })
            .collect()
    }

    pub(crate) fn slot(occupant: &str, id: u64, start: i64, end: i64) -> Drawn {
        (occupant.into(), Some(id), start, end)
    }
}

#[cfg(test)]
mod tests {
    use super::drawn::{rows, slot};
    use super::*;
    use foresight_core::{Dur, Event, Job, JobId, Policy};

    fn input(
        sched: LocalScheduler,
        running: Vec<RunningPart>,
        global: Vec<GlobalPart>,
    ) -> ClusterInput {
        ClusterInput {
            name: "c".into(),
            procs: 4,
            tariff: 2.0,
            sched,
            running,
            global,
            job_reservations: HashMap::new(),
            admin_reservations: HashMap::new(),
        }
    }

    fn running(job: u64, end: i64, processors: Vec<u32>) -> RunningPart {
        RunningPart {
            job,
            started_at: Some(0),
            end,
            processors,
        }
    }

    fn planned(job: u64, start: i64, end: i64, procs: u32) -> GlobalPart {
        GlobalPart {
            occupant: "planned",
            job,
            start,
            end,
            procs,
            reservation: None,
        }
    }

    /// A local job running on 3 processors until 60 whose processors are not known here, a
    /// reserved global job for 1 processor from 50 to 90, a local job queued for 2 behind
    /// the running one, and a global job planned for 2 from 100 to 200: each is given the
    /// lowest processors free over its window, in order of start; free time is priced, busy
    /// time is not, and every processor's row covers the window without overlap.
    #[test]
    fn every_kind_on_its_processors() {
        let mut sched = LocalScheduler::new(4, Policy::easy());
        submit(&mut sched, 1, 3, 60);
        submit(&mut sched, 2, 2, 30);
        let global = vec![
            planned(7, 100, 200, 2),
            GlobalPart {
                occupant: "reserved",
                ..planned(8, 50, 90, 1)
            },
        ];
        let plan = draw_cluster(input(sched, vec![], global), 0, 0, 300, &Visible::All);
        let first = vec![
            slot("running", 1, 0, 60),
            slot("forecast", 2, 60, 90),
            slot("planned", 7, 100, 200),
        ];
        assert_eq!(
            rows(&plan),
            [
                first.clone(),
                first,
                vec![slot("running", 1, 0, 60)],
                vec![slot("reserved", 8, 50, 90)]
            ]
        );
        for s in &plan.slots {
            assert_eq!(s.cost.is_some(), s.occupant == "free", "{s:?}");
        }
        for p in 0..4 {
            let row: Vec<&SlotView> = plan.slots.iter().filter(|s| s.processor == p).collect();
            for w in row.windows(2) {
                assert_eq!(w[0].end, w[1].start, "processor {p}: {row:?}");
            }
            assert_eq!(row.first().map(|s| s.start), Some(0));
            assert_eq!(row.last().map(|s| s.end), Some(300));
        }
    }

    /// A user sees their own jobs' ids only.
    #[test]
    fn other_users_jobs_have_no_id() {
        let sched = LocalScheduler::new(4, Policy::easy());
        let mine = Visible::Own(HashSet::from([8]));
        let plan = draw_cluster(
            input(sched, vec![], vec![planned(7, 0, 10, 1)]),
            0,
            0,
            20,
            &mine,
        );
        let s = &plan.slots[0];
        assert_eq!((s.occupant.as_str(), s.id), ("planned", None));
    }
    fn submit(sched: &mut LocalScheduler, id: u64, procs: u32, secs: i64) {
        let mut out = Vec::new();
        sched
            .handle(
                Time(0),
                Event::Submit(Job::new(JobId(id), Time(0), procs, Dur(secs))),
                &mut out,
            )
            .unwrap();
    }

    /// Issue 35: a co-allocated job 12 runs on processors 0-1 until 3600, a local job 13 on
    /// 2-3 until 1800; a global job 14 planned for 2 processors from 1800, which the planner
    /// numbered 0-1 in its own model of the cluster. It is drawn where processors are free
    /// then (2-3), and job 12's bar runs unbroken to its end.
    #[test]
    fn a_planned_job_is_drawn_beside_the_running_parts_not_on_them() {
        let mut sched = LocalScheduler::new(4, Policy::easy());
        submit(&mut sched, 12, 2, 3_600);
        submit(&mut sched, 13, 2, 1_800);
        let running = vec![
            running(12, 3_600, vec![0, 1]),
            running(13, 1_800, vec![2, 3]),
        ];
        let global = vec![planned(14, 1_800, 2_400, 2)];
        let plan = draw_cluster(input(sched, running, global), 0, 0, 4_000, &Visible::All);
        let r = rows(&plan);
        let twelve = vec![slot("running", 12, 0, 3_600)];
        let thirteen_then_fourteen = vec![
            slot("running", 13, 0, 1_800),
            slot("planned", 14, 1_800, 2_400),
        ];
        assert_eq!(
            r,
            vec![
                twelve.clone(),
                twelve,
                thirteen_then_fourteen.clone(),
                thirteen_then_fourteen
            ]
        );
    }

    /// A global job planned over the time the local queue's 4-processor job would have
    /// (the planner displaced it): the local job is forecast after it, on 4 processors, not
    /// squeezed onto the 2 left beside it.
    #[test]
    fn a_local_job_is_forecast_around_a_planned_global_job_on_all_its_processors() {
        let mut sched = LocalScheduler::new(4, Policy::easy());
        submit(&mut sched, 1, 2, 100);
        submit(&mut sched, 2, 2, 50);
        submit(&mut sched, 3, 4, 30);
        let running = vec![running(1, 100, vec![2, 3]), running(2, 50, vec![0, 1])];
        let global = vec![planned(7, 100, 130, 2)];
        let plan = draw_cluster(input(sched, running, global), 0, 0, 200, &Visible::All);
        let r = rows(&plan);
        let forecast = slot("forecast", 3, 130, 160);
        assert_eq!(
            r,
            vec![
                vec![
                    slot("running", 2, 0, 50),
                    slot("planned", 7, 100, 130),
                    forecast.clone()
                ],
                vec![
                    slot("running", 2, 0, 50),
                    slot("planned", 7, 100, 130),
                    forecast.clone()
                ],
                vec![slot("running", 1, 0, 100), forecast.clone()],
                vec![slot("running", 1, 0, 100), forecast],
            ]
        );
    }
}
