//! Property tests of workflow mapping: on random DAGs over random grids with existing
//! reservations, every mapper's result passes the validator (precedence with transfers, no
//! overbooking, reservations untouched), is no shorter than the critical path, and DSC is
//! never worse than greedy (its first evaluation).

use foresight_core::workflow::{
    check, critical_path, map_dag, Dag, DscConfig, Edge, GridState, Mapper, Site, Task, TaskId,
    Workflow,
};
use foresight_core::{Dur, Time};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Input {
    wf: Workflow,
    grid: GridState,
}

fn input() -> impl Strategy<Value = Input> {
    let sites = prop::collection::vec(
        (
            1u32..8,
            prop::sample::select(vec![0.5f64, 1.0, 2.0]),
            prop::sample::select(vec![1.0f64, 10.0, 100.0]),
            prop::collection::vec((0i64..500, 1i64..300, 1u32..8), 0..4),
        ),
        1..4,
    );
    let tasks = prop::collection::vec((1u32..6, 1i64..300), 1..16);
    (sites, tasks, any::<u64>(), 0u32..3, 0i64..100).prop_map(
        |(sites, tasks, edge_bits, priority, now)| {
            let max_cap = sites.iter().map(|s| s.0).max().unwrap_or(1);
            let sites: Vec<Site> = sites
                .into_iter()
                .enumerate()
                .map(|(i, (cap, speed, bw, resv))| {
                    let mut s = Site::new(format!("c{i}"), cap);
                    s.speed = speed;
                    s.bandwidth_mb_s = bw;
                    s.latency = Dur(i as i64);
                    for (start, len, procs) in resv {
                        let p = procs.min(cap);
                        if s.free.min_free(Time(start), Time(start + len)) >= i64::from(p) {
                            s.free.take(Time(start), Time(start + len), p);
                        }
                    }
                    s
                })
                .collect();
            let n = tasks.len();
            let tasks: Vec<Task> = tasks
                .into_iter()
                .enumerate()
                .map(|(i, (procs, wall))| {
                    Task::new(i as u32, format!("t{i}"), procs.min(max_cap), Dur(wall))
                })
                .collect();
            let mut edges = Vec::new();
            let mut bit = 0u32;
            for j in 1..n {
                for i in j.saturating_sub(3)..j {
                    if (edge_bits >> (bit % 64)) & 1 == 1 {
                        edges.push(Edge {
                            from: TaskId(i as u32),
                            to: TaskId(j as u32),
                            data_mb: f64::from((bit * 37) % 500),
                        });
                    }
                    bit += 1;
                }
            }
            Input {
                wf: Workflow {
                    name: "random".into(),
                    priority,
                    tasks,
                    edges,
                },
                grid: GridState {
                    now: Time(now),
                    horizon: Time(now + 2000),
                    sites,
                },
            }
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn every_mapping_is_valid(inp in input()) {
        let dag = Dag::new(&inp.wf, &inp.grid).unwrap();
        let bound = critical_path(&dag, &inp.grid);
        let mut spans = Vec::new();
        for mapper in [Mapper::Dsc(DscConfig::default()), Mapper::Heft, Mapper::Greedy] {
            let m = map_dag(&dag, &inp.grid, &mapper).unwrap();
            if let Err(v) = check(&dag, &inp.grid, &m) {
                return Err(TestCaseError::fail(format!("{}: {v}", mapper.name())));
            }
            prop_assert!(m.makespan() >= bound, "{}: {} < {}", mapper.name(), m.makespan(), bound);
            prop_assert_eq!(&m, &map_dag(&dag, &inp.grid, &mapper).unwrap(), "deterministic");
            spans.push(m.makespan());
        }
        prop_assert!(spans[0] <= spans[2], "dsc {} > greedy {}", spans[0], spans[2]);
    }

    #[test]
    fn the_validator_catches_a_moved_task(inp in input(), k in any::<prop::sample::Index>()) {
        let dag = Dag::new(&inp.wf, &inp.grid).unwrap();
        let mut m = map_dag(&dag, &inp.grid, &Mapper::Heft).unwrap();
        let i = k.index(m.placements.len());
        // Starting a task one second before `now` or before its data is always wrong.
        let p = &mut m.placements[i];
        let shift = p.start - inp.grid.now + Dur(1);
        p.start = p.start - shift;
        p.end = p.end - shift;
        prop_assert!(check(&dag, &inp.grid, &m).is_err());
    }
}
