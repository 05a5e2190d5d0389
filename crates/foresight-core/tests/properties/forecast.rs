//! The forecast as slots: every instant's processors are accounted for exactly (running and
//! held time is never offered, planned local time is offered at its premium, the rest at the
//! base tariff), and a global job displaces local work only if it pays the premium.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use foresight_core::forecast::{forecast, slots_from_forecast, OccupancyKind, Tariff};
use foresight_core::select::{Criterion, Processor, SlotPlan, SlotRequest};
use foresight_core::{Dur, Event, Job, JobId, LocalScheduler, Policy, Time};
use proptest::prelude::*;
use std::collections::BTreeSet;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn forecast_slots_account_for_every_processor(
        capacity in 2u32..24,
        jobs in proptest::collection::vec((1u32..24, 10i64..400), 0..30),
        now in 0i64..100,
        procs in 1u32..24,
        walltime in 5i64..300,
        price in prop_oneof![Just(1.0), Just(1.5), Just(2.0), Just(3.0)],
    ) {
        let mut s = LocalScheduler::new(capacity, Policy::easy());
        let mut out = Vec::new();
        for (k, (p, est)) in jobs.iter().enumerate() {
            let job = Job::new(JobId(k as u64), Time(0), (*p).min(capacity), Dur(*est));
            s.handle(Time(0), Event::Submit(job), &mut out).unwrap();
        }
        let now = Time(now);
        let f = forecast(&s, now, |_| 1.0);
        let processors: Vec<Processor> = (0..capacity)
            .map(|i| Processor {
                id: format!("p{i:02}"),
                cluster: "c".into(),
                speed: 1.0,
                memory_mb: 0,
                features: BTreeSet::new(),
            })
            .collect();
        let tariff = Tariff { base: 1.0, local_premium: 1.0 };
        let horizon = Time(5000);
        let slots = slots_from_forecast(&processors, &f, now, horizon, &tariff, 0.0);
        // Every breakpoint: offered-at-premium = planned, not offered = running + held.
        let mut points: Vec<Time> = slots.iter().flat_map(|s| [s.start, s.end]).collect();
        points.extend(f.iter().flat_map(|o| [o.window.start.max(now), o.window.end]));
        points.retain(|t| *t >= now && *t < horizon);
        points.sort();
        points.dedup();
        for t in points {
            let covering = |want: f64| slots.iter().filter(|s| s.start <= t && t < s.end && s.cost == want).count() as u32;
            let (mut planned, mut fixed) = (0, 0);
            for o in &f {
                if o.window.start.max(now) <= t && t < o.window.end {
                    match o.kind {
                        OccupancyKind::Planned { .. } => planned += o.procs,
                        OccupancyKind::Running(_) | OccupancyKind::Held(_) => fixed += o.procs,
                    }
                }
            }
            prop_assert_eq!(covering(2.0), planned, "premium slots at {}", t);
            prop_assert_eq!(covering(1.0) + planned + fixed, capacity, "all processors at {}", t);
        }
        let plan = SlotPlan::from_indexed(processors, slots).unwrap();
        let req = SlotRequest {
            procs: procs.min(capacity),
            walltime: Dur(walltime),
            max_price: price,
            min_memory_mb: 0,
            features: BTreeSet::new(),
            criterion: Criterion::EarliestStart,
            not_before: now,
            deadline: None,
            co_allocate: true,
        };
        if let Ok(sel) = plan.select(&req, &[]) {
            for u in &sel.slots {
                prop_assert!(u.cost <= price, "a slot dearer than the job's price was taken");
                if price < 2.0 {
                    prop_assert_eq!(u.cost, 1.0, "only a job paying the premium takes local time");
                }
            }
        }
    }
}
