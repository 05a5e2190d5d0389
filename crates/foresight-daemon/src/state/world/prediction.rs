//! Runtime prediction in the service: the statistics store of finished runs, filled as jobs
//! end and restored from the store at start, and the predictions local policies plan with
//! (the simulator's `foresight_core::predict` code: the same predictors, the same
//! correction).
//!
//! A run is keyed by its user, its application (the `--app` name, else the program), the
//! application's parameters (processors and arguments) and its processor type: the cluster
//! for a local job, the reference processor for a global job (whose walltime and runtime
//! count on it). Each processor type keeps its own statistics, as the simulator keeps each
//! cluster's apart from the global jobs': a user's history on one cluster never predicts
//! her jobs on another, nor her global jobs. A global job's runtime is recorded in reference
//! seconds: its elapsed time at the speed of the slowest processor its parts were given
//! ([`reference_runtime`], the simulator's rule).

use super::World;
use foresight_core::broker::ReservedPart;
use foresight_core::predict::stats::KEPT;
use foresight_core::predict::{reference_runtime, Predictor, RunKey, RuntimeStats};
use foresight_core::time::{Dur, Time};
use foresight_core::{ClusterId, JobId, UserId};
use foresight_store::JobState;
use foresight_store::{JobRecord, Prediction, RunRecord};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};

/// A hash that is the same in every run of the service (`DefaultHasher::new` has fixed
/// keys); keys are recomputed from the stored text at every start anyway.
fn hash(text: &str) -> u64 {
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

/// The application a job runs: its `--app` name, else its program.
fn app_of(j: &JobRecord) -> String {
    j.app
        .clone()
        .unwrap_or_else(|| j.command.first().cloned().unwrap_or_default())
}

/// The parameters that shape an application's runtime: processors and arguments.
fn params_of(j: &JobRecord) -> String {
    let args = j.command.get(1..).unwrap_or_default();
    format!(
        "{} procs: {}",
        j.procs,
        serde_json::to_string(args).expect("invariant: strings serialize")
    )
}

/// Runtime prediction's state: its statistics and each cluster's predictor.
#[derive(Debug, Default)]
pub(crate) struct Predictions {
    /// The statistics store, one per processor type (a cluster's, or 0 for the reference
    /// processor of global jobs), as the simulator keeps them apart: the last finished runs
    /// per user and per application.
    pub(crate) runtimes: BTreeMap<u32, foresight_core::predict::RuntimeStats>,
    /// Finished runs not yet written to the store.
    pub runs_to_write: Vec<foresight_store::RunRecord>,
    /// Each cluster's predictor, for its local policy.
    pub(super) predictors: Vec<Predictor>,
    /// The grid's predictor (the configuration's `predict`), for global jobs.
    pub(super) global: Predictor,
}

impl World {
    /// The statistics key of a run of `user`'s application `app` with `params` on `cluster`
    /// (`None`: the reference processor of the grid).
    fn run_key(&mut self, user: &str, app: &str, params: &str, cluster: Option<&str>) -> RunKey {
        RunKey {
            user: UserId(self.intern(0, user)),
            app: Some(hash(app)),
            params: hash(params),
            // 0 is the grid's reference processor; a cluster's type is never 0.
            arch: cluster.map_or(0, |c| (hash(c) as u32).max(1)),
        }
    }

    /// Records a finished run of `key` in its processor type's statistics.
    fn record(&mut self, key: &RunKey, runtime: Dur) {
        self.prediction
            .runtimes
            .entry(key.arch)
            .or_default()
            .record(key, runtime);
    }

    /// Runs the store kept, oldest first, back into the statistics; `jobs` are the stored
    /// jobs. A global job's run stored before global runs were kept in reference seconds
    /// holds its elapsed time on its clusters: it is converted as a run is recorded now, at
    /// the speed of its job's slowest part (the speed the part records, else its cluster's
    /// slowest processor), and dropped when its job or one of its clusters is gone.
    pub fn restore_runs(&mut self, runs: Vec<RunRecord>, jobs: &[JobRecord]) {
        let by_id: HashMap<u64, &JobRecord> = jobs.iter().map(|j| (j.id, j)).collect();
        for r in runs {
            let mut runtime = Dur(r.runtime.max(0));
            if r.cluster.is_none() && !r.on_reference {
                let speed = by_id.get(&r.job).and_then(|j| self.run_speed(j));
                let Some((speed, walltime)) = speed else {
                    continue;
                };
                runtime = reference_runtime(runtime, speed, Dur(walltime));
            }
            let key = self.run_key(&r.user, &r.app, &r.params, r.cluster.as_deref());
            self.record(&key, runtime);
        }
    }

    /// The speed a global job's parts ran at, the slowest of theirs (see
    /// [`PartRecord::speed`](foresight_store::PartRecord)), and its walltime; `None` when it
    /// has no parts or one is on a cluster that is gone.
    fn run_speed(&self, j: &JobRecord) -> Option<(f64, i64)> {
        let mut slowest = f64::INFINITY;
        for p in &j.parts {
            let k = self.cluster_index(&p.cluster)?;
            let speed = p
                .speed
                .unwrap_or_else(|| self.broker.clusters[k].slowest_speed());
            slowest = slowest.min(speed);
        }
        slowest.is_finite().then_some((slowest, j.walltime))
    }

    /// The speed of the slowest processor the planner chose for a global job's part, which
    /// it runs at (the part's record keeps it); `None` when it named none.
    pub(super) fn chosen_speed(&self, p: &ReservedPart) -> Option<f64> {
        let procs = &self.broker.clusters.get(p.cluster.as_num())?.processors;
        let slowest = p
            .processors
            .iter()
            .filter_map(|&i| procs.get(i as usize))
            .map(|q| q.speed)
            .fold(f64::INFINITY, f64::min);
        slowest.is_finite().then_some(slowest)
    }

    /// How many runs the service keeps per user and per application: what every predictor
    /// may look at.
    pub fn runs_kept() -> usize {
        KEPT
    }

    /// A job reached its final state: a run that really ran (completed, failed, or stopped
    /// at its walltime; not cancelled) joins the statistics and is written to the store.
    pub(super) fn record_run(&mut self, id: JobId) {
        let Some(j) = self.jobs.get(&id) else { return };
        let (Some(start), Some(end)) = (j.started_at, j.ended_at) else {
            return;
        };
        if !matches!(
            j.state,
            JobState::Completed | JobState::Failed | JobState::Timeout
        ) {
            return;
        }
        let global = j.cluster.is_none() && j.reservation.is_none();
        let elapsed = (end - start).max(0);
        let (cluster, runtime) = if global {
            // Reference seconds: the time it ran (not the time it was stopped for a job of
            // a higher level) at the speed of its slowest part.
            let stopped = j.preemption.as_ref().map_or(0, |p| p.suspended);
            let ran = Dur((elapsed - stopped).max(0));
            let speed = self.run_speed(j).map_or(1.0, |(s, _)| s);
            let runtime = reference_runtime(ran, speed, Dur(j.walltime)).as_secs();
            (None, runtime)
        } else {
            (j.parts.first().map(|p| p.cluster.clone()), elapsed)
        };
        let run = RunRecord {
            job: id.0,
            user: j.user.clone(),
            app: app_of(j),
            params: params_of(j),
            cluster,
            runtime,
            ended_at: end,
            on_reference: global,
        };
        let key = self.run_key(&run.user, &run.app, &run.params, run.cluster.as_deref());
        self.record(&key, Dur(run.runtime));
        self.prediction.runs_to_write.push(run);
    }

    /// The runtime cluster `k`'s local policy plans job `id` with: its predictor's guess
    /// from the runs finished so far, recorded on the job (with where it came from) for
    /// `job show`. `None` (and nothing recorded) when the cluster does not predict.
    pub(super) fn predict_local(&mut self, k: ClusterId, id: JobId) -> Option<Dur> {
        let predictor = self
            .prediction
            .predictors
            .get(k.as_num())
            .copied()
            .unwrap_or_default();
        let cluster = self.clusters[k].cfg.name.clone();
        self.predict(predictor, id, Some(&cluster))
    }

    /// The runtime the grid planner plans global job `id` with (on reference processors),
    /// by the grid's predictor from the global runs finished so far; recorded on the job for
    /// `job show` as a local job's is. `None` when the grid does not predict.
    pub(super) fn predict_global(&mut self, id: JobId) -> Option<Dur> {
        self.predict(self.prediction.global, id, None)
    }

    /// `predictor`'s guess for job `id` run on `cluster` (`None`: the reference processor),
    /// recorded on the job.
    fn predict(&mut self, predictor: Predictor, id: JobId, cluster: Option<&str>) -> Option<Dur> {
        if predictor == Predictor::None {
            return None;
        }
        let j = self.jobs.get(&id)?;
        let (user, app, params, walltime) = (j.user.clone(), app_of(j), params_of(j), j.walltime);
        let key = self.run_key(&user, &app, &params, cluster);
        let empty = RuntimeStats::new();
        let stats = self.prediction.runtimes.get(&key.arch).unwrap_or(&empty);
        let plan = predictor.predict(stats, &key, Dur(walltime))?;
        let runs = predictor.history(stats, &key) as u32;
        if let Some(j) = self.jobs.get_mut(&id) {
            j.prediction = Some(Prediction {
                seconds: plan.as_secs(),
                predictor: predictor.name().into(),
                runs,
                corrections: 0,
            });
        }
        Some(plan)
    }

    /// Local jobs and global jobs' parts (on Slurm clusters too) that have outlived their
    /// prediction are planned to their walltime (where they are killed anyway), and their
    /// clusters, or the grid planner, plan again at once. The parts of a co-allocated job
    /// corrected together are one correction of its prediction.
    pub fn correct_outlived(&mut self, now: Time) {
        let mut out = Vec::new();
        let done = self.broker.correct_outlived(now, &mut out);
        let mut counted = BTreeSet::new();
        for (k, id, plan) in done {
            let estimate = self.broker.clusters[k].sched.estimate_of(id);
            let Some(j) = self.jobs.get_mut_if(&id, |j| j.prediction.is_some()) else {
                continue;
            };
            let global = j.cluster.is_none() && j.reservation.is_none();
            let seconds = match estimate {
                // The part's plan counts in the part's time: on reference processors, as
                // its walltime is to its estimate (the window, or its limit on Slurm).
                Some(e) if global => reference_plan(plan, e, j.walltime),
                _ => plan.as_secs(),
            };
            if let Some(p) = j.prediction.as_mut() {
                if counted.insert(id) {
                    p.seconds = seconds;
                    p.corrections += 1;
                } else {
                    p.seconds = p.seconds.max(seconds);
                }
            }
        }
        self.carry_out(now, out);
    }

    /// Whether some cluster's local policy, or the grid planner, plans with predictions.
    pub fn predicting(&self) -> bool {
        self.prediction.global != Predictor::None
            || self
                .prediction
                .predictors
                .iter()
                .any(|p| *p != Predictor::None)
    }

    /// When the next running job's prediction runs out (a correction is then due).
    pub(super) fn next_plan_end(&self, now: Time) -> Option<Time> {
        self.broker
            .clusters
            .iter()
            .filter_map(|c| c.sched.next_plan_end(now))
            .min()
    }
}

/// The runtime a running job's plan was at when the service stopped, for its restore: the
/// prediction (as corrected so far), or `None` for the walltime. In the job's walltime's
/// units: on reference processors for a global job.
pub(super) fn restored_plan(j: &JobRecord) -> Option<Dur> {
    j.prediction.as_ref().map(|p| Dur(p.seconds))
}

/// A global job's part's plan of `plan` seconds from its start, on a part whose estimate is
/// `estimate` (its window, or its limit on a remote cluster), on reference processors: as
/// the job's `walltime` is to the estimate, rounded up (the part's whole estimate is the
/// walltime).
fn reference_plan(plan: Dur, estimate: Dur, walltime: i64) -> i64 {
    let e = estimate.as_secs().max(1);
    (plan.as_secs() * walltime.max(1) + e - 1) / e
}

/// The plan of a running global job's part that is `len` long (its reservation's window, or
/// its limit on a remote cluster), for its restore and for a remote cluster's mirror: the
/// job's prediction (on reference processors, corrected or not) stretched as its walltime
/// is to `len`, as the broker binds a part. `None` (planned to `len`) when it has no
/// prediction shorter than `len`.
pub(super) fn part_plan(j: &JobRecord, len: i64) -> Option<Dur> {
    let p = j.prediction.as_ref()?;
    let wall = j.walltime.max(1);
    let plan = (p.seconds.max(1) * len + wall - 1) / wall;
    (plan < len).then_some(Dur(plan.max(1)))
}

/// A stored record's prediction in the units it has now (see [`Prediction`]'s `seconds`).
/// Records written before a global job's prediction was kept on reference processors
/// hold a corrected global job's plan in its part's time; a global part's correction
/// always takes it to its estimate (it is only corrected while shorter), which on
/// reference processors is the walltime, so that is what such a plan becomes.
pub(super) fn migrate_prediction(j: &mut JobRecord) {
    let global = j.cluster.is_none() && j.reservation.is_none();
    if let Some(p) = j.prediction.as_mut() {
        if global && p.corrections > 0 {
            p.seconds = j.walltime;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::super::tests::{cluster, exit, job};
    use super::*;
    use crate::config::Config;
    use foresight_core::broker::Phase;
    use foresight_core::predict::Correction;
    use foresight_store::{PartRecord, UserRecord};

    /// The grid's `predict` plans global jobs: ann's first global job (walltime 1 000) has
    /// no history and is planned by its walltime; it runs 100 s. Her second is predicted
    /// 100 s (`tsafrir-last1`: her one finished run), recorded for `job show`, and handed to the
    /// broker; its reservation is still its walltime long. Running at 1 300, past its
    /// prediction, it is corrected once.
    #[test]
    fn a_global_job_is_planned_by_its_prediction_and_corrected_when_it_outlives_it() {
        let mut w = with_ann(&predicting_on(vec![cluster("a", 4)]));
        w.accept(Time(1_000), vec![job(1, "ann", 4, 1_000)]);
        let p = w.jobs[&JobId(1)].prediction.clone().unwrap();
        assert_eq!((p.seconds, p.runs), (1_000, 0));
        assert_eq!(w.broker.entry(JobId(1)).unwrap().job.predicted(), None);
        w.cycle(Time(1_000));
        assert_eq!(w.jobs[&JobId(1)].started_at, Some(1_000));
        let attempt = w.jobs[&JobId(1)].attempt;
        w.on_finished(Time(1_100), ClusterId(0), JobId(1), attempt, &exit(0));
        assert_eq!(w.jobs[&JobId(1)].state, JobState::Completed);

        w.accept(
            Time(1_200),
            vec![JobRecord {
                submitted_at: 1_200,
                ..job(2, "ann", 4, 1_000)
            }],
        );
        let p = w.jobs[&JobId(2)].prediction.clone().unwrap();
        assert_eq!(
            (p.seconds, p.predictor.as_str(), p.runs, p.corrections),
            (100, "tsafrir-last1", 1, 0)
        );
        assert_eq!(
            w.broker.entry(JobId(2)).unwrap().job.prediction,
            Some(Dur(100))
        );
        w.cycle(Time(1_200));
        match &w.broker.entry(JobId(2)).unwrap().phase {
            Phase::Running { start, end, .. } => {
                assert_eq!((*start, *end), (Time(1_200), Time(2_200)))
            }
            other => panic!("{other:?}"),
        }
        assert!(w.predicting());
        assert_eq!(w.next_plan_end(Time(1_200)), Some(Time(1_300)));
        w.correct_outlived(Time(1_300));
        let p = w.jobs[&JobId(2)].prediction.clone().unwrap();
        assert_eq!((p.seconds, p.corrections), (1_000, 1));
        assert_eq!(w.next_plan_end(Time(1_300)), None);
    }

    /// The paper's predictor in the service: the estimate until two of the user's jobs have
    /// terminated, then the mean of her last two. Ann's global jobs ran 100 s and 300 s:
    /// her third is predicted 200 s from two runs, where the second was planned by its
    /// walltime.
    #[test]
    fn the_papers_predictor_waits_for_two_runs() {
        let mut w = with_ann(&Config {
            predict: Predictor::Tsafrir,
            ..predicting_on(vec![cluster("a", 4)])
        });
        let mut at = 1_000;
        for (id, ran) in [(1, 100), (2, 300)] {
            w.accept(
                Time(at),
                vec![JobRecord {
                    submitted_at: at,
                    ..job(id, "ann", 4, 1_000)
                }],
            );
            w.cycle(Time(at));
            let attempt = w.jobs[&JobId(id)].attempt;
            w.on_finished(Time(at + ran), ClusterId(0), JobId(id), attempt, &exit(0));
            at += ran + 100;
        }
        let p = w.jobs[&JobId(2)].prediction.clone().unwrap();
        assert_eq!((p.seconds, p.runs), (1_000, 0));
        w.accept(
            Time(at),
            vec![JobRecord {
                submitted_at: at,
                ..job(3, "ann", 4, 1_000)
            }],
        );
        let p = w.jobs[&JobId(3)].prediction.clone().unwrap();
        assert_eq!(
            (p.seconds, p.predictor.as_str(), p.runs),
            (200, "tsafrir", 2)
        );
    }

    /// `correction = "incremental"` grows the plan by the paper's steps from the first
    /// prediction (100 s): to 160 s, then 400 s, then 1 000 s (the walltime, not 1 000 s
    /// past the first prediction's 15-minute step), one correction each.
    #[test]
    fn the_incremental_correction_grows_the_plan_by_the_papers_steps() {
        let cfg = Config {
            correction: Correction::Incremental,
            ..predicting(1.0)
        };
        let mut w = with_ann(&cfg);
        w.restore_runs(vec![anns_run(&job(2, "ann", 4, 1_000), 1, 100, true)], &[]);
        w.accept(Time(1_000), vec![job(2, "ann", 4, 1_000)]);
        w.cycle(Time(1_000));
        assert_eq!(w.jobs[&JobId(2)].state, JobState::Running);
        let mut seen = Vec::new();
        let mut now = Time(1_000);
        while let Some(end) = w.next_plan_end(now).filter(|_| seen.len() < 10) {
            now = end;
            w.correct_outlived(now);
            let p = w.jobs[&JobId(2)].prediction.clone().unwrap();
            seen.push((now.0 - 1_000, p.seconds, p.corrections));
        }
        assert_eq!(seen, vec![(100, 160, 1), (160, 400, 2), (400, 1_000, 3)]);
    }

    /// `clusters`, predicting with `tsafrir-last1` (a user's one finished run already
    /// predicts her next, so each case needs one earlier run) and the service's default
    /// correction (straight to the walltime).
    fn predicting_on(clusters: Vec<crate::config::ClusterConfig>) -> Config {
        Config {
            cluster: clusters,
            data_dir: "/nonexistent".into(),
            predict: Predictor::TsafrirLast1,
            ..Config::default()
        }
    }

    /// One 4-processor cluster `speed` times as fast as the reference processor, predicting
    /// with `tsafrir-last1`.
    fn predicting(speed: f64) -> Config {
        let mut a = cluster("a", 4);
        a.spec.speed = Some(speed);
        predicting_on(vec![a])
    }

    /// A world of `cfg` where ann is a user.
    fn with_ann(cfg: &Config) -> World {
        let mut w = World::new(cfg);
        w.add_user(UserRecord {
            name: "ann".into(),
            token_hash: "hash-ann".into(),
            ..Default::default()
        });
        w
    }

    /// Ann's earlier run `job` of the application and parameters of job `like`, `runtime`
    /// seconds long (`on_reference`: seconds of the reference processor), ended at 900.
    fn anns_run(like: &JobRecord, job: u64, runtime: i64, on_reference: bool) -> RunRecord {
        RunRecord {
            job,
            user: "ann".into(),
            app: app_of(like),
            params: params_of(like),
            cluster: None,
            runtime,
            ended_at: 900,
            on_reference,
        }
    }

    /// A world of one 4-processor cluster predicting with `tsafrir-last1` in which ann's global job
    /// 1 ran 100 s and her job 2 (walltime 1 000, predicted 100 s) runs from 1 200.
    fn running_predicted_global_job() -> World {
        running_predicted_global_job_at(1.0)
    }

    /// [`running_predicted_global_job`] on a cluster `speed` times as fast, where job 1
    /// runs 100 s of the reference processor's time (`100 / speed` there).
    fn running_predicted_global_job_at(speed: f64) -> World {
        let mut w = with_ann(&predicting(speed));
        w.accept(Time(1_000), vec![job(1, "ann", 4, 1_000)]);
        w.cycle(Time(1_000));
        let attempt = w.jobs[&JobId(1)].attempt;
        let ran = (100.0 / speed).ceil() as i64;
        w.on_finished(Time(1_000 + ran), ClusterId(0), JobId(1), attempt, &exit(0));
        w.accept(
            Time(1_200),
            vec![JobRecord {
                submitted_at: 1_200,
                ..job(2, "ann", 4, 1_000)
            }],
        );
        w.cycle(Time(1_200));
        assert_eq!(w.jobs[&JobId(2)].state, JobState::Running);
        w
    }

    /// A global job's run is recorded in reference seconds, as the simulator records it:
    /// ann's first global job ran 50 s on a cluster twice as fast as the reference
    /// processor, 100 s on it, and her second is predicted 100 s (and planned 50 s there).
    /// Before, the service recorded 50 s, the part's time, beside runs of reference
    /// seconds.
    #[test]
    fn a_global_run_on_a_faster_cluster_is_recorded_in_reference_seconds() {
        let w = running_predicted_global_job_at(2.0);
        assert_eq!(w.jobs[&JobId(1)].parts[0].speed, Some(2.0));
        let run = &w.prediction.runs_to_write[0];
        assert_eq!(
            (run.runtime, run.cluster.as_deref(), run.on_reference),
            (100, None, true)
        );
        let p = w.jobs[&JobId(2)].prediction.clone().unwrap();
        assert_eq!((p.seconds, p.runs), (100, 1));
        assert_eq!(w.next_plan_end(Time(1_200)), Some(Time(1_250)));
    }

    /// Two 4-processor clusters a and b, predicting with `tsafrir-last1`, and ann.
    fn two_predicting() -> World {
        with_ann(&predicting_on(vec![cluster("a", 4), cluster("b", 4)]))
    }

    /// A user's history stays with its processor type, as in the simulator: ann's local
    /// job on a ran 300 s; her local job on b and her global job have no history there
    /// and are planned by their walltimes, while her next job on a is predicted 300 s.
    /// Before, all three were predicted 300 s from one history of ann's across clusters
    /// and units.
    #[test]
    fn a_users_history_stays_with_its_processor_type() {
        let mut w = two_predicting();
        let local = |id: u64, c: &str, at: i64| JobRecord {
            cluster: Some(c.into()),
            submitted_at: at,
            ..job(id, "ann", 1, 1_000)
        };
        w.accept(Time(1_000), vec![local(1, "a", 1_000)]);
        assert_eq!(w.jobs[&JobId(1)].state, JobState::Running);
        let attempt = w.jobs[&JobId(1)].attempt;
        w.on_finished(Time(1_300), ClusterId(0), JobId(1), attempt, &exit(0));
        assert_eq!(w.jobs[&JobId(1)].state, JobState::Completed);
        w.accept(
            Time(1_400),
            vec![
                local(2, "b", 1_400),
                JobRecord {
                    submitted_at: 1_400,
                    ..job(3, "ann", 2, 1_000)
                },
                local(4, "a", 1_400),
            ],
        );
        let predicted = |id: u64| {
            let p = w.jobs[&JobId(id)].prediction.clone().unwrap();
            (p.seconds, p.runs)
        };
        assert_eq!(predicted(2), (1_000, 0));
        assert_eq!(predicted(3), (1_000, 0));
        assert_eq!(predicted(4), (300, 1));
    }

    /// One correction of a co-allocated job's prediction is one: ann's global job over a
    /// and b (two parts) is predicted 100 s from her one global run, outlives it, and both
    /// parts are corrected at once; its prediction says corrected once. Before, it said
    /// twice (once per part).
    #[test]
    fn a_co_allocated_jobs_correction_counts_once() {
        let mut w = two_predicting();
        let two = job(2, "ann", 8, 1_000);
        w.restore_runs(vec![anns_run(&two, 1, 100, true)], &[]);
        w.accept(Time(1_000), vec![two]);
        w.cycle(Time(1_000));
        assert_eq!(w.jobs[&JobId(2)].state, JobState::Running);
        assert_eq!(w.jobs[&JobId(2)].parts.len(), 2);
        assert_eq!(w.next_plan_end(Time(1_000)), Some(Time(1_100)));
        w.correct_outlived(Time(1_100));
        let p = w.jobs[&JobId(2)].prediction.clone().unwrap();
        assert_eq!((p.seconds, p.corrections), (1_000, 1));
        assert_eq!(w.next_plan_end(Time(1_100)), None);
    }

    /// Global runs stored before they were kept in reference seconds hold the elapsed time
    /// on the job's clusters: at restore, one whose job ran on a cluster twice as fast (50 s
    /// there) counts 100 s; one whose job is no longer stored is dropped. Runs stored in
    /// reference seconds, and local runs, are read as they are.
    #[test]
    fn global_runs_stored_in_the_parts_time_are_converted_or_dropped_at_restore() {
        let mut w = World::new(&predicting(2.0));
        let next = job(3, "ann", 4, 1_000);
        let run = |job: u64, runtime: i64, on_reference: bool| {
            anns_run(&next, job, runtime, on_reference)
        };
        let ran = JobRecord {
            parts: vec![PartRecord {
                cluster: "a".into(),
                procs: 4,
                ..PartRecord::default()
            }],
            ..job(1, "ann", 4, 1_000)
        };
        w.restore_runs(
            vec![run(7, 5, false), run(1, 50, false)],
            std::slice::from_ref(&ran),
        );
        let history = |w: &mut World| -> Vec<i64> {
            let user = w.run_key("ann", "x", "y", None).user;
            w.prediction.runtimes[&0]
                .user_runs(user)
                .map(Dur::as_secs)
                .collect()
        };
        assert_eq!(history(&mut w), vec![100]);
        // Stored in reference seconds: as it is.
        let mut w = World::new(&predicting(2.0));
        w.restore_runs(vec![run(1, 50, true)], &[ran]);
        assert_eq!(history(&mut w), vec![50]);
    }

    /// The same world started again from what `w` would have stored.
    fn restarted(w: &World, now: Time) -> World {
        restarted_from(w.jobs.values().cloned().collect(), w, now, 1.0)
    }

    /// A world on a cluster `speed` times as fast started again from `jobs` and what `w`
    /// would have stored besides.
    fn restarted_from(jobs: Vec<JobRecord>, w: &World, now: Time, speed: f64) -> World {
        let mut again = World::new(&predicting(speed));
        let adopt = again.restore(
            now,
            jobs,
            w.reservations.values().cloned().collect(),
            w.users.values().cloned().collect(),
        );
        assert_eq!(adopt, vec![(ClusterId(0), JobId(2), 0)]);
        again
    }

    /// A running global part keeps its prediction across a restart: restored at 1 250, it
    /// is still planned to end at 1 300 (its prediction), not at its walltime, and is
    /// corrected once when it outlives it. Before, it came back planned to its walltime and
    /// was never corrected.
    #[test]
    fn a_running_global_part_keeps_its_prediction_across_a_restart() {
        let w = running_predicted_global_job();
        let mut again = restarted(&w, Time(1_250));
        assert!(again.broker.clusters[0].sched.is_running(JobId(2)));
        assert_eq!(again.next_plan_end(Time(1_250)), Some(Time(1_300)));
        again.correct_outlived(Time(1_300));
        let p = again.jobs[&JobId(2)].prediction.clone().unwrap();
        assert_eq!((p.seconds, p.corrections), (1_000, 1));
        assert_eq!(again.next_plan_end(Time(1_300)), None);
    }

    /// A part corrected before a restart comes back with its corrected plan (its walltime)
    /// and its count of corrections, and is not corrected a second time.
    #[test]
    fn a_corrected_global_part_keeps_its_corrections_across_a_restart() {
        let mut w = running_predicted_global_job();
        w.correct_outlived(Time(1_300));
        let mut again = restarted(&w, Time(1_400));
        assert_eq!(again.next_plan_end(Time(1_400)), None);
        again.correct_outlived(Time(1_500));
        let p = again.jobs[&JobId(2)].prediction.clone().unwrap();
        assert_eq!((p.seconds, p.runs, p.corrections), (1_000, 1, 1));
    }

    /// On a cluster twice as fast as the reference processor, ann's job 2 (walltime 1 000
    /// and predicted 100 s, both on the reference processor) runs in a 500 s window, planned
    /// 50 s. Corrected at 1 250 to its whole window, its prediction reads 1 000 s, still on
    /// the reference processor, not 500 s of the part's time; restarted, the part is
    /// planned to its window and not corrected again. A record that holds the corrected
    /// plan in the part's time, as the service stored it before, is read the same way.
    /// Before, the stored plan mixed the two units, and such a record came back planned to
    /// 250 s and was corrected a second time.
    #[test]
    fn a_corrected_global_prediction_stays_on_the_reference_processor() {
        let mut w = running_predicted_global_job_at(2.0);
        assert_eq!(w.next_plan_end(Time(1_200)), Some(Time(1_250)));
        w.correct_outlived(Time(1_250));
        let p = w.jobs[&JobId(2)].prediction.clone().unwrap();
        assert_eq!((p.seconds, p.corrections), (1_000, 1));
        assert_eq!(w.next_plan_end(Time(1_250)), None);

        let mut old = w.jobs.clone();
        old.get_mut(&JobId(2))
            .unwrap()
            .prediction
            .as_mut()
            .unwrap()
            .seconds = 500;
        for jobs in [w.jobs.clone(), old] {
            let jobs: Vec<JobRecord> = jobs.into_values().collect();
            let mut again = restarted_from(jobs, &w, Time(1_300), 2.0);
            assert_eq!(again.next_plan_end(Time(1_300)), None);
            again.correct_outlived(Time(1_600));
            let p = again.jobs[&JobId(2)].prediction.clone().unwrap();
            assert_eq!((p.seconds, p.corrections), (1_000, 1));
            assert_eq!(again.broker.entry(JobId(2)).unwrap().job.predicted(), None);
        }
    }

    /// A global part on a Slurm cluster is planned to its prediction in the cluster's mirror
    /// (its reservation's rest offered to the planner) and corrected when it outlives it;
    /// the correction survives the mirror's rebuild at the next snapshot, and Slurm's kill
    /// time stays the walltime (nothing is cancelled or resubmitted). Before, parts on Slurm
    /// were planned to their limit and never corrected.
    #[test]
    fn a_global_part_on_slurm_is_planned_by_its_prediction_and_corrected() {
        use super::super::tests::{empty_state, ours, slurm};
        use super::super::Effect;
        use foresight_core::ReservationId;
        use foresight_rm::{PartHandle, RmJobState, RmReservation};
        let mut w = with_ann(&predicting_on(vec![slurm("c1")]));
        let two = job(2, "ann", 4, 1_000);
        // Ann's one earlier run of the same application took 100 s.
        w.restore_runs(vec![anns_run(&two, 1, 100, true)], &[]);
        w.sync_remote(Time(1_000), ClusterId(0), Ok(empty_state(1_000, 8)));
        w.accept(Time(1_000), vec![two]);
        assert_eq!(w.jobs[&JobId(2)].prediction.as_ref().unwrap().seconds, 100);
        w.cycle(Time(1_000));
        let rid = std::mem::take(&mut w.effects)
            .into_iter()
            .find_map(|e| match e {
                Effect::Reserve { request, .. } => Some(request.id),
                _ => None,
            })
            .unwrap();
        w.reservation_answered(Time(1_000), ReservationId(rid), Ok(()));
        w.part_submitted(
            Time(1_000),
            ClusterId(0),
            JobId(2),
            0,
            Ok(PartHandle {
                job: 2,
                attempt: 0,
                external: Some("8".into()),
            }),
        );
        std::mem::take(&mut w.effects);
        let mut running = ours("8", 2, 0, 4, RmJobState::Running);
        running.start = Some(1_000);
        running.time_limit = Some(1_020);
        running.reservation = Some(format!("foresight-{rid}"));
        let snapshot = |at: i64| {
            let mut s = empty_state(at, 8);
            s.jobs.push(running.clone());
            s.reservations.push(RmReservation {
                name: format!("foresight-{rid}"),
                foresight: Some(rid),
                start: 1_000,
                end: 2_020,
                procs: 4,
            });
            s
        };
        w.sync_remote(Time(1_010), ClusterId(0), Ok(snapshot(1_010)));
        assert_eq!(w.jobs[&JobId(2)].state, JobState::Running);
        // 100 s on the reference processor, stretched as 1 000 s are to Slurm's 1 020.
        assert_eq!(w.next_plan_end(Time(1_010)), Some(Time(1_102)));
        assert!(w.broker.clusters[0].sched.predicted_runs().count() == 1);

        w.sync_remote(Time(1_102), ClusterId(0), Ok(snapshot(1_102)));
        w.correct_outlived(Time(1_102));
        let p = w.jobs[&JobId(2)].prediction.clone().unwrap();
        // Planned to its limit: the walltime on the reference processor.
        assert_eq!((p.seconds, p.corrections), (1_000, 1));
        assert_eq!(w.next_plan_end(Time(1_102)), None);
        // The next snapshot rebuilds the mirror with the corrected plan.
        w.sync_remote(Time(1_110), ClusterId(0), Ok(snapshot(1_110)));
        assert_eq!(w.next_plan_end(Time(1_110)), None);
        assert_eq!(w.broker.clusters[0].sched.predicted_runs().count(), 0);
        w.correct_outlived(Time(1_200));
        assert_eq!(
            w.jobs[&JobId(2)].prediction.as_ref().unwrap().corrections,
            1
        );
        let effects = std::mem::take(&mut w.effects);
        assert!(
            !effects
                .iter()
                .any(|e| matches!(e, Effect::Cancel { .. } | Effect::Submit { .. })),
            "{effects:?}"
        );
        assert_eq!(w.jobs[&JobId(2)].state, JobState::Running);
    }
}
