//! The service in a test, on paused time: a [`ManualClock`] and a [`FakeRm`] per cluster,
//! no cycle loop. The test moves the clock; the harness runs the cycles the service would
//! run on its way there (at every moment one is due, and at every part's walltime limit),
//! waits for their effects to be carried out, and hands the fake clusters' reports to the
//! service as its executors' reports would be. Nothing sleeps: what a test reads is what
//! the service decided at exactly the times it names.

use crate::config::Config;
use crate::runtime::fake_rm::FakeRm;
use crate::runtime::managers::Managers;
use crate::runtime::Service;
use crate::state::refusal::Refusal;
use crate::state::world::World;
use foresight_api::{JobView, SubmitJob};
use foresight_core::time::Time;
use foresight_core::ClusterId;
use foresight_core::JobId;
use foresight_rm::clock::{Clock, ManualClock};
use foresight_rm::ResourceManager;
use foresight_store::UserRecord;
use futures::FutureExt;
use std::sync::Arc;

/// When every paused test begins, Unix seconds (a whole minute, for round numbers).
pub(crate) const T0: i64 = 1_800_000_000;

/// Cycles one step may run before the harness calls it a livelock.
const MAX_CYCLES_PER_STEP: usize = 64;

/// See the module's documentation.
pub(crate) struct Paused {
    /// The service.
    pub(crate) s: Arc<Service>,
    /// Its clock.
    pub(crate) clock: Arc<ManualClock>,
    /// Its clusters, in configuration order.
    pub(crate) rms: Vec<Arc<FakeRm>>,
    /// The administrator, who submits and acts.
    pub(crate) admin: UserRecord,
    _dir: tempfile::TempDir,
}

impl Paused {
    /// The service of configuration `toml` (its data directory a fresh one) at [`T0`].
    pub(crate) async fn open(toml: &str) -> Paused {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut cfg: Config = toml::from_str(toml).expect("the test's configuration");
        cfg.data_dir = dir.path().to_path_buf();
        let clock = Arc::new(ManualClock::at(Time(T0)));
        let rms: Vec<Arc<FakeRm>> = cfg
            .cluster
            .iter()
            .map(|_| Arc::new(FakeRm::new(clock.clone())))
            .collect();
        let managers = rms
            .iter()
            .map(|r| r.clone() as Arc<dyn ResourceManager>)
            .collect();
        let (s, _) = Service::open_on(cfg, clock.clone(), Some(Managers::given(managers)))
            .await
            .expect("the service opens");
        let admin = s.world().users["admin"].clone();
        Paused {
            s,
            clock,
            rms,
            admin,
            _dir: dir,
        }
    }

    /// Now, by the manual clock.
    pub(crate) fn now(&self) -> i64 {
        self.clock.now().0
    }

    /// Submits `job` (the API's JSON) as the administrator and runs the cycle it wakes.
    pub(crate) async fn submit(&self, job: serde_json::Value) -> u64 {
        let job: SubmitJob = serde_json::from_value(job).expect("the test's job");
        let ids = self
            .s
            .submit(&self.admin, vec![job], false)
            .await
            .expect("the job is accepted");
        self.cycle().await;
        ids[0]
    }

    /// What the administrator sees of job `id` now.
    pub(crate) fn job(&self, id: u64) -> JobView {
        self.s.job(&self.admin, JobId(id)).expect("the job exists")
    }

    /// Runs `op` on job `id` as the administrator (the routes' way), then the cycle it wakes.
    pub(crate) async fn act(
        &self,
        id: u64,
        op: impl FnOnce(&mut World, Time) -> Result<(), Refusal>,
    ) -> JobView {
        let view = self
            .s
            .job_op(&self.admin, JobId(id), op)
            .await
            .expect("the operation is accepted");
        self.cycle().await;
        view
    }

    /// Ends job `id`'s part on cluster `k` now with `exit_code`, as its process would, and
    /// runs the cycle its end wakes.
    pub(crate) async fn end(&self, k: ClusterId, id: u64, exit_code: i32) {
        let f = self.rms[k]
            .end(id, exit_code)
            .unwrap_or_else(|| panic!("job {id} does not run on cluster {k}"));
        self.s.part_finished(k, &f).await;
        self.cycle().await;
    }

    /// Moves the clock to `t` as the running service lives through it: at each moment a
    /// cycle is due or a part's walltime runs out on the way, the clock stops there, the
    /// clusters report and a cycle runs; then once more at `t`.
    pub(crate) async fn advance_to(&self, t: i64) {
        loop {
            let now = self.clock.now();
            let due = self.s.world().next_due(now);
            let next = self
                .rms
                .iter()
                .filter_map(|r| r.next_limit())
                .chain(due)
                .filter(|x| *x > now)
                .fold(Time(t), std::cmp::min);
            self.clock.set(next.max(now));
            self.cycle().await;
            if next.0 >= t {
                return;
            }
        }
    }

    /// Moves the clock `seconds` on, as [`Paused::advance_to`].
    pub(crate) async fn advance(&self, seconds: i64) {
        self.advance_to(self.now() + seconds).await;
    }

    /// What the running service does at this moment: the clusters' reports received, a
    /// cycle run and its effects carried out, again as long as something woke the cycle.
    pub(crate) async fn cycle(&self) {
        for _ in 0..MAX_CYCLES_PER_STEP {
            self.s.settle().await;
            for (k, rm) in ClusterId::enumerate(&self.rms) {
                for f in rm.take_reports() {
                    self.s.part_finished(k, &f).await;
                }
            }
            self.s.run_cycle().await;
            self.s.settle().await;
            let reported = self.rms.iter().any(|r| r.has_reports(self.clock.now()));
            let woken = self.s.wake.notified().now_or_never().is_some();
            if !reported && !woken {
                return;
            }
        }
        panic!("the service kept waking its cycle at {}", self.now());
    }
}
