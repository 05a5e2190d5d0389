//! The plan as `GET /api/v1/plan` answers it (issue 35), through the real router over a real
//! service: for random grids of clusters and random jobs and reservations brought to every
//! state the plan draws (running, co-allocated, reserved, planned, a local queue's forecast,
//! administrative reservations on named processors or by count), the answer never has two
//! slots overlapping on one processor, draws every running part on exactly its processors
//! from its real start, and every job and reservation on exactly its processor count at
//! every instant it is drawn. The dashboard's Gantt chart and `plan show` draw these slots
//! as they come.
//!
//! The service runs without its cycle loop: each step changes the world and runs a cycle
//! under the lock, and its effects (processes to start) are dropped, so that jobs run only
//! in the records and nothing races the answer. A part whose walltime is over ends before
//! the next step, as the runtime's supervisors end it.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

use crate::api::router;
use crate::config::Config;
use crate::runtime::Service;
use crate::state::world::{Held, World};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use foresight_api::{ClusterPlan, SlotView};
use foresight_core::broker::Phase;
use foresight_core::time::Time;
use foresight_core::ClusterId;
use foresight_core::JobId;
use foresight_rm::clock::ManualClock;
use foresight_rm::Outcome;
use foresight_store::JobRecord;
use foresight_store::{AclSpec, JobState};
use proptest::prelude::*;
use proptest::sample::Index;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use tower::ServiceExt;

const T0: i64 = 1_795_444_200;

/// One change to the world, followed by a scheduling cycle.
#[derive(Clone, Debug)]
enum Step {
    /// A global job (`cluster` None) or a local job of cluster `cluster % n`; processors
    /// are taken modulo what it may ask.
    Submit {
        cluster: Option<Index>,
        procs: u32,
        walltime: i64,
        co_allocate: bool,
        price: Option<f64>,
    },
    /// An administrative reservation, on named processors (the bits of `named`) or by count.
    Reserve {
        cluster: Index,
        procs: u32,
        named: Option<u8>,
        start_in: i64,
        duration: i64,
    },
    /// A running part ends.
    Finish(Index),
    /// Time passes.
    Wait(i64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (
            proptest::option::of(any::<Index>()),
            1u32..=24,
            60i64..=7_200,
            any::<bool>(),
            prop_oneof![Just(None), Just(Some(10.0))],
        )
            .prop_map(|(cluster, procs, walltime, co_allocate, price)| Step::Submit {
                cluster,
                procs,
                walltime,
                co_allocate,
                price,
            }),
        1 => (
            any::<Index>(),
            1u32..=8,
            proptest::option::of(any::<u8>()),
            prop_oneof![Just(0i64), 0i64..=7_200],
            60i64..=3_600,
        )
            .prop_map(|(cluster, procs, named, start_in, duration)| Step::Reserve {
                cluster,
                procs,
                named,
                start_in,
                duration,
            }),
        1 => any::<Index>().prop_map(Step::Finish),
        1 => (1i64..=1_800).prop_map(Step::Wait),
    ]
}

/// Clusters: (processors, policy).
fn grid() -> impl Strategy<Value = Vec<(u32, &'static str)>> {
    proptest::collection::vec(
        (
            1u32..=8,
            prop_oneof![Just("easy"), Just("conservative"), Just("fcfs")],
        ),
        1..=3,
    )
}

fn config(grid: &[(u32, &str)], dir: &std::path::Path) -> Config {
    let mut text = String::new();
    for (i, (procs, policy)) in grid.iter().enumerate() {
        text.push_str(&format!(
            "[[cluster]]\nname = \"c{i}\"\nprocs = {procs}\npolicy = \"{policy}\"\n"
        ));
    }
    let mut cfg: Config = toml::from_str(&text).unwrap();
    cfg.data_dir = dir.to_path_buf();
    cfg
}

/// The parts running in the records: (cluster index, job, attempt, end of its walltime
/// once it has started).
fn running_parts(w: &World) -> Vec<(ClusterId, JobId, u32, Option<i64>)> {
    w.jobs
        .values()
        .filter(|j| j.state == JobState::Running)
        .flat_map(|j| {
            j.parts.iter().filter(|p| !p.ended).map(move |p| {
                let end = p.started_at.or(j.started_at).map(|s| s + j.walltime);
                (p.cluster.clone(), JobId(j.id), j.attempt, end)
            })
        })
        .filter_map(|(c, id, attempt, end)| Some((w.cluster_index(&c)?, id, attempt, end)))
        .collect()
}

/// Ends every running part whose walltime is over, as the runtime's supervisors do: the
/// effects that would kill them are dropped here.
fn enforce_walltimes(w: &mut World, now: Time) {
    let over: Vec<(ClusterId, JobId, u32, i64)> = running_parts(w)
        .into_iter()
        .filter_map(|(k, id, attempt, end)| Some((k, id, attempt, end?)))
        .filter(|p| p.3 <= now.secs())
        .collect();
    for (k, id, attempt, end) in over {
        let outcome = Outcome {
            exit_code: None,
            signal: Some(15),
            timed_out: true,
            cancelled: false,
            started_at: 0,
            ended_at: end,
            error: None,
        };
        w.on_finished(now, k, id, attempt, &outcome);
    }
}

/// Applies `step` at `now` (job ids from `next_id`).
fn apply(w: &mut World, now: Time, step: &Step, next_id: &mut u64, grid: &[(u32, &str)]) {
    enforce_walltimes(w, now);
    match step {
        Step::Submit {
            cluster,
            procs,
            walltime,
            co_allocate,
            price,
        } => {
            let total: u32 = grid.iter().map(|c| c.0).sum();
            let largest = grid.iter().map(|c| c.0).max().unwrap();
            let (cluster, most) = match cluster {
                Some(i) => {
                    let k = i.index(grid.len());
                    (Some(format!("c{k}")), grid[k].0)
                }
                None if *co_allocate => (None, total),
                None => (None, largest),
            };
            *next_id += 1;
            let job = JobRecord {
                id: *next_id,
                user: "admin".into(),
                procs: (procs - 1) % most + 1,
                walltime: *walltime,
                price: *price,
                co_allocate: *co_allocate,
                cluster,
                command: vec!["true".into()],
                submitted_at: now.secs(),
                ..Default::default()
            };
            w.accept(now, vec![job]);
        }
        Step::Reserve {
            cluster,
            procs,
            named,
            start_in,
            duration,
        } => {
            let k = cluster.index(grid.len());
            let max = grid[k].0;
            // Named processors only from now: the local scheduler keeps a later reservation
            // on named processors by count, and a job started before it may have to take
            // one of them when the others are busy (a known limit, drawn as it happens).
            let held = match named {
                Some(bits) if *start_in == 0 && (0..max).any(|p| bits >> p & 1 == 1) => {
                    Held::These((0..max).filter(|p| bits >> p & 1 == 1).collect())
                }
                _ => Held::Count((procs - 1) % max + 1),
            };
            let start = now.secs() + start_in;
            // Refused when it does not fit: that is a case too.
            let _ = w.create_reservation(
                now,
                "admin",
                &format!("c{k}"),
                held,
                start,
                start + duration,
                AclSpec::default(),
                None,
            );
        }
        Step::Finish(pick) => {
            let running = running_parts(w);
            if !running.is_empty() {
                let (k, id, attempt, _) = running[pick.index(running.len())];
                let outcome = Outcome {
                    exit_code: Some(0),
                    signal: None,
                    timed_out: false,
                    cancelled: false,
                    started_at: 0,
                    ended_at: now.secs(),
                    error: None,
                };
                w.on_finished(now, k, id, attempt, &outcome);
            }
        }
        Step::Wait(_) => {}
    }
    w.cycle(now);
    w.effects.clear();
}

/// What the plan must show, read from the world: per (cluster, occupant, id), the processor
/// count, and for running parts their processors, end and start.
struct Expected {
    counts: BTreeMap<(String, String, u64), u32>,
    /// (cluster, job) → (processors, end, started_at) of a running part on named processors.
    running: BTreeMap<(String, u64), (BTreeSet<u32>, i64, i64)>,
    /// Global parts that must be drawn: (cluster, occupant, job, start, end).
    global: Vec<(String, &'static str, u64, i64, i64)>,
    /// Administrative reservations on named processors.
    named: BTreeMap<(String, u64), BTreeSet<u32>>,
}

fn expected(w: &World) -> Expected {
    let mut e = Expected {
        counts: BTreeMap::new(),
        running: BTreeMap::new(),
        global: Vec::new(),
        named: BTreeMap::new(),
    };
    for (k, c) in w.clusters.iter().enumerate() {
        let name = c.cfg.name.clone();
        for (job, procs, at) in w.broker.clusters[k].sched.running_jobs() {
            e.counts
                .insert((name.clone(), "running".into(), job.0), procs);
            let j = &w.jobs[&job];
            let part = j.parts.iter().find(|p| p.cluster == name && !p.ended);
            if let Some(p) = part.filter(|p| !p.processors.is_empty()) {
                assert_eq!(p.processors.len() as u32, procs, "job {job} on {name}");
                let started = p.started_at.or(j.started_at).unwrap();
                e.running.insert(
                    (name.clone(), job.0),
                    (
                        p.processors.iter().copied().collect(),
                        at.end.secs(),
                        started,
                    ),
                );
            }
        }
    }
    for entry in w.broker.entries() {
        let job = entry.job.id.0;
        match &entry.phase {
            Phase::Reserving { parts, .. } | Phase::Reserved { parts, .. } => {
                for p in parts {
                    let name = w.clusters[p.cluster].cfg.name.clone();
                    e.counts
                        .insert((name.clone(), "reserved".into(), job), p.procs);
                    e.global.push((
                        name,
                        "reserved",
                        job,
                        p.window.start.secs(),
                        p.window.end.secs(),
                    ));
                }
            }
            Phase::Planned { start, end, parts } => {
                for p in parts {
                    let name = w.clusters[p.cluster].cfg.name.clone();
                    e.counts.insert(
                        (name.clone(), "planned".into(), job),
                        p.processors.len() as u32,
                    );
                    e.global
                        .push((name, "planned", job, start.secs(), end.secs()));
                }
            }
            _ => {}
        }
    }
    for j in w.jobs.values().filter(|j| j.cluster.is_some()) {
        e.counts.insert(
            (j.cluster.clone().unwrap(), "forecast".into(), j.id),
            j.procs,
        );
    }
    for r in w.reservations.values().filter(|r| r.kind != "job") {
        e.counts
            .insert((r.cluster.clone(), "held".into(), r.id), r.procs);
        if !r.processors.is_empty() {
            e.named.insert(
                (r.cluster.clone(), r.id),
                r.processors.iter().copied().collect(),
            );
        }
    }
    e
}

/// Checks the answer against the world's state; the message says what broke.
fn check(plans: &[ClusterPlan], e: &Expected, from: i64, to: i64) -> Result<(), String> {
    let mut groups: BTreeMap<(String, String, u64), Vec<&SlotView>> = BTreeMap::new();
    for c in plans {
        // Each processor's row: slots one after another, covering the window, none overlapping.
        for p in 0..c.procs {
            let mut row: Vec<&SlotView> = c.slots.iter().filter(|s| s.processor == p).collect();
            row.sort_by_key(|s| s.start);
            let mut t = from;
            for s in &row {
                if s.start != t || s.end <= s.start {
                    return Err(format!("{} p{p}: row {row:?}", c.cluster));
                }
                t = s.end;
            }
            if t != to {
                return Err(format!("{} p{p}: row ends at {t}: {row:?}", c.cluster));
            }
        }
        if let Some(s) = c.slots.iter().find(|s| s.processor >= c.procs) {
            return Err(format!("{}: no such processor: {s:?}", c.cluster));
        }
        for s in c.slots.iter().filter(|s| s.occupant != "free") {
            let Some(id) = s.id else {
                return Err(format!(
                    "{}: an administrator sees every id: {s:?}",
                    c.cluster
                ));
            };
            groups
                .entry((c.cluster.clone(), s.occupant.clone(), id))
                .or_default()
                .push(s);
        }
    }
    // Every job and reservation on exactly its count at each instant it is drawn.
    for (key, slots) in &groups {
        let Some(&count) = e.counts.get(key) else {
            return Err(format!("{key:?} drawn but not in the world: {slots:?}"));
        };
        let mut cuts: Vec<i64> = slots.iter().flat_map(|s| [s.start, s.end]).collect();
        cuts.sort_unstable();
        cuts.dedup();
        for w in cuts.windows(2) {
            let n = slots
                .iter()
                .filter(|s| s.start <= w[0] && w[1] <= s.end)
                .count();
            if n != count as usize {
                return Err(format!(
                    "{key:?} on {n} processors over [{}, {}), holds {count}: {slots:?}",
                    w[0], w[1]
                ));
            }
        }
    }
    // Running parts: on exactly their processors, from the window's start to their end,
    // with their real start.
    for ((cluster, job), (processors, end, started)) in &e.running {
        let key = (cluster.clone(), "running".to_string(), *job);
        let slots = groups.get(&key).cloned().unwrap_or_default();
        if *end <= from {
            if !slots.is_empty() {
                return Err(format!("{key:?} drawn after its end {end}: {slots:?}"));
            }
            continue;
        }
        let drawn: BTreeSet<u32> = slots.iter().map(|s| s.processor).collect();
        let whole = slots
            .iter()
            .all(|s| s.start == from && s.end == (*end).min(to) && s.started_at == Some(*started));
        if &drawn != processors || slots.len() != processors.len() || !whole {
            return Err(format!(
                "{key:?} runs on {processors:?} until {end} since {started}: {slots:?}"
            ));
        }
    }
    // Reserved and planned parts in the window are drawn.
    for (cluster, occupant, job, start, end) in &e.global {
        if *start < to && from < *end {
            let key = (cluster.clone(), occupant.to_string(), *job);
            if !groups.contains_key(&key) {
                return Err(format!("{key:?} over [{start}, {end}) not drawn"));
            }
        }
    }
    // Administrative reservations on named processors: on those.
    for ((cluster, id), named) in &e.named {
        let key = (cluster.clone(), "held".to_string(), *id);
        if let Some(slots) = groups.get(&key) {
            let drawn: BTreeSet<u32> = slots.iter().map(|s| s.processor).collect();
            if &drawn != named {
                return Err(format!("{key:?} names {named:?}: {slots:?}"));
            }
        }
    }
    Ok(())
}

/// `GET /api/v1/plan?from=…&to=…` through the router, as `token`'s owner.
async fn get_plan(app: &axum::Router, token: &str, from: i64, to: i64) -> Vec<ClusterPlan> {
    let req = Request::get(format!("/api/v1/plan?from={from}&to={to}"))
        .header("authorization", format!("Bearer {token}"))
        .body(Body::empty())
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).unwrap()
}

/// One case: a service on `grid`, the steps, then the plan over `[now + from_in, … + span)`.
fn run_case(
    grid: &[(u32, &'static str)],
    steps: &[Step],
    from_in: i64,
    span: i64,
) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::at(Time(T0)));
        let (s, token) = Service::open_without_cycles(config(grid, dir.path()), clock.clone())
            .await
            .unwrap();
        let token = token.unwrap();
        let mut next_id = 1_000_000;
        for st in steps {
            if let Step::Wait(secs) = st {
                clock.advance(*secs);
            }
            let mut w = s.world();
            apply(&mut w, s.now(), st, &mut next_id, grid);
        }
        let now = s.now().secs();
        let (from, to) = (now + from_in, now + from_in + span);
        let e = expected(&s.world());
        let plans = get_plan(&router(s.clone()), &token, from, to).await;
        s.shutdown().await;
        check(&plans, &e, from, to)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn the_plan_draws_each_job_on_exactly_its_processors(
        grid in grid(),
        steps in proptest::collection::vec(step(), 1..=14),
        from_in in prop_oneof![Just(0i64), 0i64..=3_600],
        span in 600i64..=14_400,
    ) {
        if let Err(e) = run_case(&grid, &steps, from_in, span) {
            prop_assert!(false, "{}", e);
        }
    }
}
