//! The plan drawn from the world's real state (`plan_input`, then `plan_view::draw`) on the
//! case of issue 35: a co-allocated job running on two clusters, a local job beside it, a
//! global job planned behind them.
#![allow(clippy::unwrap_used)]

use crate::config::Config;
use crate::runtime::plan_input::plan_input;
use crate::state::plan_view::drawn::{self, slot, Drawn};
use crate::state::plan_view::{self, Visible};
use crate::state::world::World;
use foresight_core::time::Time;
use foresight_core::ClusterId;
use foresight_store::{JobRecord, UserRecord};

fn world() -> World {
    let mut cfg: Config = toml::from_str(
        "[[cluster]]\nname = \"alpha\"\nprocs = 8\npolicy = \"easy\"\n\
         [[cluster]]\nname = \"beta\"\nprocs = 4\ntariff = 2.5\npolicy = \"conservative\"\n",
    )
    .unwrap();
    cfg.data_dir = "/nonexistent".into();
    let mut w = World::new(&cfg);
    w.add_user(UserRecord {
        name: "ann".into(),
        token_hash: "h".into(),
        ..Default::default()
    });
    w
}

fn job(id: u64, procs: u32, walltime: i64, cluster: Option<&str>) -> JobRecord {
    JobRecord {
        id,
        user: "ann".into(),
        procs,
        walltime,
        co_allocate: true,
        cluster: cluster.map(Into::into),
        command: vec!["true".into()],
        submitted_at: 1_000,
        ..Default::default()
    }
}

/// Per processor of `cluster`, its busy slots.
fn rows(plan: &[foresight_api::ClusterPlan], cluster: &str) -> Vec<Vec<Drawn>> {
    drawn::rows(plan.iter().find(|c| c.cluster == cluster).unwrap())
}

/// Job 13 (local, 2 processors, 30 min) starts on beta's processors 0-1; job 12 (10
/// processors) is co-allocated over alpha's 8 and beta's 2-3 for an hour; job 14 (global, 2
/// processors, 16 min) is planned on beta at job 13's end. The planner numbers beta's
/// processors in its own model (job 12's reservation first), so its choice for job 14 names
/// 2-3, where job 12 runs: the plan draws job 14 on 0-1, where job 13 was, and job 12
/// unbroken on exactly its processors.
#[test]
fn a_planned_job_is_drawn_on_processors_free_then_not_on_a_running_part() {
    let mut w = world();
    w.accept(Time(1_000), vec![job(13, 2, 1_800, Some("beta"))]);
    w.cycle(Time(1_000));
    w.accept(Time(1_010), vec![job(12, 10, 3_600, None)]);
    w.cycle(Time(1_010));
    w.accept(Time(1_020), vec![job(14, 2, 960, None)]);
    w.cycle(Time(1_020));
    let parts = |id: u64| -> Vec<(String, Vec<u32>)> {
        w.jobs[&foresight_core::JobId(id)]
            .parts
            .iter()
            .map(|p| (p.cluster.clone(), p.processors.clone()))
            .collect()
    };
    assert_eq!(parts(13), [("beta".to_string(), vec![0, 1])]);
    assert_eq!(
        parts(12),
        [
            ("alpha".to_string(), (0..8).collect()),
            ("beta".to_string(), vec![2, 3])
        ]
    );
    let now = 1_030;
    let inputs: Vec<_> = (0..2).map(|k| plan_input(&w, ClusterId(k))).collect();
    let plan = plan_view::draw(inputs, now, now, now + 7_200, &Visible::All);
    let twelve = vec![slot("running", 12, now, 4_610)];
    let thirteen_then_fourteen = vec![
        slot("running", 13, now, 2_800),
        slot("planned", 14, 2_800, 3_760),
    ];
    assert_eq!(
        rows(&plan, "beta"),
        [
            thirteen_then_fourteen.clone(),
            thirteen_then_fourteen,
            twelve.clone(),
            twelve
        ]
    );
    assert_eq!(
        rows(&plan, "alpha"),
        vec![vec![slot("running", 12, now, 4_610)]; 8]
    );
}
