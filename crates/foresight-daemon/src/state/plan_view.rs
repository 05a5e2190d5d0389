//! The plan as users see it (`GET /plan`, `plan show`): per processor, what holds it over a
//! window. Drawn from the broker's own state — running parts on the processors they run on,
//! reserved global jobs on the processors their reservations hold, planned global jobs where
//! the last cycle placed them — and from the cluster's forecast for its local queue and
//! administrative reservations, which the local scheduler counts without naming processors
//! (drawn on the lowest processors free over their whole window).

use foresight_api::{ClusterPlan, SlotView};
use foresight_core::forecast::{forecast, OccupancyKind};
use foresight_core::{LocalScheduler, Time};
use std::collections::{HashMap, HashSet};

/// Something the broker or the records place on named processors.
#[derive(Clone, Debug)]
pub struct Placed {
    /// `running`, `reserved` or `planned`.
    pub occupant: &'static str,
    /// The job.
    pub job: u64,
    /// Over `[start, end)`.
    pub start: i64,
    /// End (for a running job, its walltime's end).
    pub end: i64,
    /// Its processors on this cluster.
    pub processors: Vec<u32>,
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
    /// Running parts whose processors are known, and reserved and planned global jobs.
    pub placed: Vec<Placed>,
    /// Jobs drawn from `placed` (their occupancies in the forecast are skipped).
    pub placed_jobs: HashSet<u64>,
    /// Reservations of global jobs (drawn from `placed`).
    pub job_reservations: HashSet<u64>,
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

/// Per processor, the intervals already drawn on it.
struct Rows {
    taken: Vec<Vec<(i64, i64)>>,
    slots: Vec<SlotView>,
    from: i64,
    to: i64,
}

impl Rows {
    /// Draws `[start, end)` (clipped to the window) on processor `p`.
    fn put(&mut self, p: u32, start: i64, end: i64, occupant: &str, id: Option<u64>) {
        let (start, end) = (start.max(self.from), end.min(self.to));
        if start >= end || p as usize >= self.taken.len() {
            return;
        }
        self.taken[p as usize].push((start, end));
        self.slots.push(SlotView {
            processor: p,
            start,
            end,
            occupant: occupant.into(),
            id,
            cost: None,
        });
    }

    /// Draws `procs` processors over `[start, end)` on the lowest ones free all that time.
    fn put_anywhere(&mut self, procs: u32, start: i64, end: i64, occupant: &str, id: Option<u64>) {
        let (a, b) = (start.max(self.from), end.min(self.to));
        if a >= b {
            return;
        }
        let free: Vec<u32> = (0..self.taken.len())
            .filter(|&p| self.taken[p].iter().all(|&(s, e)| e <= a || b <= s))
            .take(procs as usize)
            .map(|p| p as u32)
            .collect();
        for p in free {
            self.put(p, a, b, occupant, id);
        }
    }
}

fn draw_cluster(c: ClusterInput, now: i64, from: i64, to: i64, visible: &Visible) -> ClusterPlan {
    let n = c.procs as usize;
    let mut rows = Rows {
        taken: vec![Vec::new(); n],
        slots: Vec::new(),
        from,
        to,
    };
    for p in &c.placed {
        for &q in &p.processors {
            rows.put(q, p.start, p.end, p.occupant, visible.job(p.job));
        }
    }
    let occupancy = forecast(&c.sched, Time(now), |_| 0.0);
    // Running jobs first (they hold their processors from now), then the rest in start order.
    for o in occupancy
        .iter()
        .filter(|o| matches!(o.kind, OccupancyKind::Running(_)))
    {
        let OccupancyKind::Running(job) = o.kind else {
            continue;
        };
        if c.placed_jobs.contains(&job.0) {
            continue;
        }
        // A job of the cluster's own users on a cluster that schedules itself has no id of
        // ours (ids from 2^62).
        let id = (job.0 < 1 << 62)
            .then_some(job.0)
            .and_then(|j| visible.job(j));
        rows.put_anywhere(
            o.procs,
            o.window.start.secs(),
            o.window.end.secs(),
            "running",
            id,
        );
    }
    for o in &occupancy {
        let (start, end) = (o.window.start.secs(), o.window.end.secs());
        match o.kind {
            OccupancyKind::Running(_) => {}
            OccupancyKind::Planned { job, .. } => {
                if !c.placed_jobs.contains(&job.0) {
                    rows.put_anywhere(o.procs, start, end, "forecast", visible.job(job.0));
                }
            }
            OccupancyKind::Held(r) => {
                if c.job_reservations.contains(&r.0) {
                    continue;
                }
                match c.admin_reservations.get(&r.0) {
                    Some(named) if !named.is_empty() => {
                        for &p in named {
                            rows.put(p, start, end, "held", Some(r.0));
                        }
                    }
                    _ => rows.put_anywhere(o.procs, start, end, "held", Some(r.0)),
                }
            }
        }
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use foresight_core::{Dur, Event, Job, JobId, Policy};

    fn input(sched: LocalScheduler, placed: Vec<Placed>) -> ClusterInput {
        ClusterInput {
            name: "c".into(),
            procs: 4,
            tariff: 2.0,
            placed_jobs: placed.iter().map(|p| p.job).collect(),
            placed,
            sched,
            job_reservations: HashSet::new(),
            admin_reservations: HashMap::new(),
        }
    }

    /// A planned global job on processors 2–3 from 100 to 200, a reserved one on 0 from 50,
    /// and a local job queued behind a running one that holds 3 processors until 60: every
    /// kind on its own processors, free time priced, busy time without a price, and no
    /// processor holding two things at once.
    #[test]
    fn every_kind_on_its_processors() {
        let mut sched = LocalScheduler::new(4, Policy::easy());
        let mut out = Vec::new();
        sched
            .handle(
                Time(0),
                Event::Submit(Job::new(JobId(1), Time(0), 3, Dur(60))),
                &mut out,
            )
            .unwrap();
        sched
            .handle(
                Time(0),
                Event::Submit(Job::new(JobId(2), Time(0), 2, Dur(30))),
                &mut out,
            )
            .unwrap();
        let placed = vec![
            Placed {
                occupant: "planned",
                job: 7,
                start: 100,
                end: 200,
                processors: vec![2, 3],
            },
            Placed {
                occupant: "reserved",
                job: 8,
                start: 50,
                end: 90,
                processors: vec![0],
            },
        ];
        let plan = draw_cluster(input(sched, placed), 0, 0, 300, &Visible::All);
        let on = |p: u32| -> Vec<(&str, i64, i64, Option<u64>)> {
            plan.slots
                .iter()
                .filter(|s| s.processor == p)
                .map(|s| (s.occupant.as_str(), s.start, s.end, s.id))
                .collect()
        };
        assert!(
            on(2).contains(&("planned", 100, 200, Some(7))),
            "{:?}",
            on(2)
        );
        assert!(
            on(3).contains(&("planned", 100, 200, Some(7))),
            "{:?}",
            on(3)
        );
        assert!(
            on(0).contains(&("reserved", 50, 90, Some(8))),
            "{:?}",
            on(0)
        );
        let running: Vec<u32> = plan
            .slots
            .iter()
            .filter(|s| s.occupant == "running")
            .map(|s| s.processor)
            .collect();
        assert_eq!(running.len(), 3);
        let forecast: Vec<_> = plan
            .slots
            .iter()
            .filter(|s| s.occupant == "forecast")
            .collect();
        assert_eq!(forecast.len(), 2, "{forecast:?}");
        assert!(forecast.iter().all(|s| s.id == Some(2) && s.start == 60));
        for s in &plan.slots {
            assert_eq!(s.cost.is_some(), s.occupant == "free", "{s:?}");
        }
        for p in 0..4 {
            let row = on(p);
            for w in row.windows(2) {
                assert!(w[0].2 <= w[1].1, "processor {p}: {row:?}");
            }
            assert_eq!(row.first().map(|s| s.1), Some(0));
            assert_eq!(row.last().map(|s| s.2), Some(300));
        }
    }

    /// A user sees their own jobs' ids only.
    #[test]
    fn other_users_jobs_have_no_id() {
        let sched = LocalScheduler::new(4, Policy::easy());
        let placed = vec![Placed {
            occupant: "planned",
            job: 7,
            start: 0,
            end: 10,
            processors: vec![0],
        }];
        let mine = Visible::Own(HashSet::from([8]));
        let plan = draw_cluster(input(sched, placed), 0, 0, 20, &mine);
        let s = &plan.slots[0];
        assert_eq!((s.occupant.as_str(), s.id), ("planned", None));
    }
}
