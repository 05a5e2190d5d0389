//! A resource manager with no processes, for logic tests of the service on a manual clock:
//! it records what the service asks of it (launches, reservations, cancels, suspensions),
//! each stamped with the clock's time, and ends parts when the test says, with the exit
//! status it chooses, or at their walltime as a supervisor would (time suspended not
//! counted). Like the local executor it leaves scheduling to the service.

use async_trait::async_trait;
use foresight_core::time::Time;
use foresight_rm::clock::{Clock, ManualClock};
use foresight_rm::{
    ClusterState, Finished, Outcome, PartHandle, ReserveRequest, ResourceManager, RmError,
    Submission,
};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// What the service asked of a [`FakeRm`], and when by its clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    /// A part started: (job, attempt) on these processors.
    Launch {
        job: u64,
        attempt: u32,
        processors: Vec<u32>,
        at: i64,
    },
    /// A reservation held over `[start, end)`.
    Reserve {
        id: u64,
        start: i64,
        end: i64,
        at: i64,
    },
    /// A reservation given back.
    Release { id: u64, at: i64 },
    /// A part cancelled.
    Cancel { job: u64, attempt: u32, at: i64 },
    /// A part stopped, keeping its processors.
    Suspend { job: u64, attempt: u32, at: i64 },
    /// A stopped part continued.
    Resume { job: u64, attempt: u32, at: i64 },
    /// A part put back in the queue.
    Requeue { job: u64, attempt: u32, at: i64 },
}

/// A running (or stopped) part.
#[derive(Clone, Debug)]
struct Part {
    started_at: i64,
    /// Seconds allowed running; 0: no limit.
    walltime: i64,
    /// Seconds run before `since`.
    ran: i64,
    /// Running since then; `None` while suspended.
    since: Option<i64>,
}

impl Part {
    /// When its walltime runs out, if it is running and has one.
    fn limit_at(&self) -> Option<i64> {
        let since = self.since?;
        (self.walltime > 0).then(|| since + self.walltime - self.ran)
    }
}

#[derive(Debug, Default)]
struct Book {
    calls: Vec<Call>,
    parts: BTreeMap<(u64, u32), Part>,
    /// Ends to report that the test did not choose (cancels, requeues).
    reports: Vec<Finished>,
}

/// See the module's documentation.
#[derive(Debug)]
pub(crate) struct FakeRm {
    clock: Arc<ManualClock>,
    book: Mutex<Book>,
}

impl FakeRm {
    /// A cluster on `clock`, with nothing running.
    pub(crate) fn new(clock: Arc<ManualClock>) -> FakeRm {
        FakeRm {
            clock,
            book: Mutex::default(),
        }
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now(&self) -> i64 {
        self.clock.now().0
    }

    /// Everything asked of it so far, in order.
    pub(crate) fn calls(&self) -> Vec<Call> {
        self.book().calls.clone()
    }

    /// The launches so far: (job, attempt, when).
    pub(crate) fn launches(&self) -> Vec<(u64, u32, i64)> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Launch {
                    job, attempt, at, ..
                } => Some((job, attempt, at)),
                _ => None,
            })
            .collect()
    }

    /// Whether a part of `job` is running (or stopped) here.
    pub(crate) fn runs(&self, job: u64) -> bool {
        self.book().parts.keys().any(|(j, _)| *j == job)
    }

    /// Ends the part of `job` running here now, with `exit_code`: the report its executor
    /// would send. `None` when no part of it runs here.
    pub(crate) fn end(&self, job: u64, exit_code: i32) -> Option<Finished> {
        let now = self.now();
        let mut book = self.book();
        let key = *book.parts.keys().find(|(j, _)| *j == job)?;
        let part = book.parts.remove(&key)?;
        Some(finished(key, &part, now, |o| o.exit_code = Some(exit_code)))
    }

    /// The earliest moment a running part's walltime runs out.
    pub(crate) fn next_limit(&self) -> Option<Time> {
        self.book()
            .parts
            .values()
            .filter_map(Part::limit_at)
            .min()
            .map(Time)
    }

    /// Whether [`FakeRm::take_reports`] has something to report at `now`.
    pub(crate) fn has_reports(&self, now: Time) -> bool {
        let book = self.book();
        !book.reports.is_empty()
            || book
                .parts
                .values()
                .any(|p| p.limit_at().is_some_and(|t| t <= now.0))
    }

    /// The ends due by now: parts cancelled or requeued, then parts whose walltime ran out
    /// (ended at their limit to the second, as a supervisor ends them).
    pub(crate) fn take_reports(&self) -> Vec<Finished> {
        let now = self.now();
        let mut book = self.book();
        let mut out = std::mem::take(&mut book.reports);
        let due: Vec<((u64, u32), i64)> = book
            .parts
            .iter()
            .filter_map(|(k, p)| p.limit_at().filter(|&t| t <= now).map(|t| (*k, t)))
            .collect();
        for (key, at) in due {
            if let Some(part) = book.parts.remove(&key) {
                out.push(finished(key, &part, at, |o| {
                    o.timed_out = true;
                    o.signal = Some(15);
                }));
            }
        }
        out
    }

    fn record(&self, call: Call) {
        self.book().calls.push(call);
    }

    /// Stops (`stop`) or continues a part, keeping the account of its run time.
    fn pause(&self, part: &PartHandle, stop: bool) -> Result<(), RmError> {
        let at = self.now();
        let key = (part.job, part.attempt);
        let mut book = self.book();
        let p = book.parts.get_mut(&key).ok_or_else(|| no_part(part))?;
        match (stop, p.since) {
            (true, Some(since)) => {
                p.ran += at - since;
                p.since = None;
            }
            (false, None) => p.since = Some(at),
            _ => {}
        }
        let (job, attempt) = key;
        book.calls.push(if stop {
            Call::Suspend { job, attempt, at }
        } else {
            Call::Resume { job, attempt, at }
        });
        Ok(())
    }

    /// Ends a part at the service's request: reported as cancelled, as the executor does.
    fn stop(&self, part: &PartHandle, call: Call) {
        let at = self.now();
        let key = (part.job, part.attempt);
        let mut book = self.book();
        book.calls.push(call);
        if let Some(p) = book.parts.remove(&key) {
            let f = finished(key, &p, at, |o| {
                o.cancelled = true;
                o.signal = Some(15);
            });
            book.reports.push(f);
        }
    }
}

fn no_part(part: &PartHandle) -> RmError {
    RmError::Invalid(format!(
        "no part of job {} attempt {} runs here",
        part.job, part.attempt
    ))
}

/// The report of part `key` ended at `at`, as `how` sets it.
fn finished(key: (u64, u32), part: &Part, at: i64, how: impl FnOnce(&mut Outcome)) -> Finished {
    let mut outcome = Outcome {
        exit_code: None,
        signal: None,
        timed_out: false,
        cancelled: false,
        started_at: part.started_at,
        ended_at: at,
        error: None,
    };
    how(&mut outcome);
    Finished {
        job: key.0,
        attempt: key.1,
        outcome,
    }
}

#[async_trait]
impl ResourceManager for FakeRm {
    fn kind(&self) -> &'static str {
        "local"
    }
    fn scheduled_by_foresight(&self) -> bool {
        true
    }
    async fn snapshot(&self) -> Result<ClusterState, RmError> {
        Err(RmError::Invalid("a fake cluster has no snapshot".into()))
    }
    async fn estimate_start(&self, _: u32, _: i64) -> Result<Option<i64>, RmError> {
        Ok(None)
    }
    async fn reserve(&self, req: &ReserveRequest) -> Result<(), RmError> {
        self.record(Call::Reserve {
            id: req.id,
            start: req.start,
            end: req.end,
            at: self.now(),
        });
        Ok(())
    }
    async fn release(&self, reservation: u64) -> Result<(), RmError> {
        self.record(Call::Release {
            id: reservation,
            at: self.now(),
        });
        Ok(())
    }
    async fn submit(&self, sub: &Submission) -> Result<PartHandle, RmError> {
        let at = self.now();
        let spec = &sub.spec;
        let key = (spec.job, spec.attempt);
        let mut book = self.book();
        if book.parts.contains_key(&key) {
            return Err(RmError::Invalid(format!(
                "job {} attempt {} is already running",
                spec.job, spec.attempt
            )));
        }
        book.parts.insert(
            key,
            Part {
                started_at: at,
                walltime: i64::try_from(spec.walltime_secs).unwrap_or(i64::MAX),
                ran: 0,
                since: Some(at),
            },
        );
        book.calls.push(Call::Launch {
            job: spec.job,
            attempt: spec.attempt,
            processors: spec.processors.clone(),
            at,
        });
        Ok(PartHandle {
            job: spec.job,
            attempt: spec.attempt,
            external: None,
        })
    }
    async fn cancel(&self, part: &PartHandle) -> Result<(), RmError> {
        let call = Call::Cancel {
            job: part.job,
            attempt: part.attempt,
            at: self.now(),
        };
        self.stop(part, call);
        Ok(())
    }
    async fn suspend(&self, part: &PartHandle) -> Result<(), RmError> {
        self.pause(part, true)
    }
    async fn resume(&self, part: &PartHandle) -> Result<(), RmError> {
        self.pause(part, false)
    }
    async fn requeue(&self, part: &PartHandle) -> Result<(), RmError> {
        let call = Call::Requeue {
            job: part.job,
            attempt: part.attempt,
            at: self.now(),
        };
        self.stop(part, call);
        Ok(())
    }
}
