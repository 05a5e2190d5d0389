//! The centre's side of one site: the commands queued for it, which a call waits on until
//! the site answers, and the site's latest snapshots.

use super::{Answer, Command, Op, Reply, SiteSnapshot};
use crate::manager::{ClusterState, RmError};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::{oneshot, Notify};
use tokio::time::Instant;

/// One site's mailbox at the centre. Commands stay queued until answered (or their caller
/// gives up), so a site that reconnects fetches again whatever it had not answered. A
/// command the site has not fetched within the lease is never delivered: past the lease the
/// centre takes the site as down and plans elsewhere, so a part submitted then would run
/// twice.
#[derive(Debug)]
pub struct Mailbox {
    site: String,
    lease: Duration,
    /// Drawn when the mailbox is made (never 0): names it to the site (`Welcome::mailbox`).
    epoch: u64,
    /// When it was made (this service's start).
    made: Instant,
    inner: Mutex<Inner>,
    queued: Notify,
}

/// A command waiting for its answer: the command, its caller, and when it was queued until
/// the site fetches it (`None` after: a long transfer may take longer than the lease).
type Pending = (Command, oneshot::Sender<Reply>, Option<Instant>);

#[derive(Debug, Default)]
struct Inner {
    next_seq: u64,
    pending: BTreeMap<u64, Pending>,
    snapshots: HashMap<String, (Instant, ClusterState)>,
}

impl Mailbox {
    /// An empty mailbox for site `site`, taken as down after `lease` of silence.
    pub fn new(site: &str, lease: Duration) -> Mailbox {
        Mailbox {
            site: site.to_owned(),
            lease,
            epoch: rand::random::<u64>().max(1),
            made: Instant::now(),
            inner: Mutex::new(Inner {
                next_seq: 1,
                ..Inner::default()
            }),
            queued: Notify::new(),
        }
    }

    /// The site's name.
    pub fn site(&self) -> &str {
        &self.site
    }

    /// The number this mailbox is known by (see [`super::Welcome::mailbox`]).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Whether a site's request naming mailbox `named` (none from an older site) is for
    /// this one.
    pub fn is_named(&self, named: Option<u64>) -> bool {
        named.is_none_or(|n| n == self.epoch)
    }

    /// How long ago the mailbox was made: a site has had that long to report.
    pub fn age(&self) -> Duration {
        self.made.elapsed()
    }

    /// How long the site may stay silent before it is taken as down.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `op` for cluster `cluster` of the site and waits for the answer, at most
    /// `timeout`: a site that does not answer in time is unreachable for this call.
    pub async fn call(&self, cluster: &str, op: Op, timeout: Duration) -> Result<Reply, RmError> {
        let what = op.describe();
        let (tx, rx) = oneshot::channel();
        let seq = {
            let mut inner = self.lock();
            let seq = inner.next_seq;
            inner.next_seq += 1;
            let command = Command {
                seq,
                cluster: cluster.to_owned(),
                op,
            };
            inner
                .pending
                .insert(seq, (command, tx, Some(Instant::now())));
            seq
        };
        self.queued.notify_waiters();
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(reply)) => Ok(reply),
            _ => {
                self.lock().pending.remove(&seq);
                Err(RmError::Unreachable(format!(
                    "site {} did not answer command {seq} ({what}) within {} s",
                    self.site,
                    timeout.as_secs_f64()
                )))
            }
        }
    }

    /// The commands queued after `after`, waiting up to `wait` for one when there is none.
    pub async fn commands(&self, after: u64, wait: Duration) -> Vec<Command> {
        let deadline = Instant::now() + wait;
        loop {
            // Registered before looking, so that a command queued in between wakes us.
            let queued = self.queued.notified();
            let found: Vec<Command> = {
                let mut inner = self.lock();
                self.drop_stale(&mut inner);
                inner
                    .pending
                    .range_mut(after + 1..)
                    .map(|(_, (c, _, queued))| {
                        *queued = None;
                        c.clone()
                    })
                    .collect()
            };
            if !found.is_empty() {
                return found;
            }
            if tokio::time::timeout_at(deadline, queued).await.is_err() {
                return Vec::new();
            }
        }
    }

    /// Answers as unreachable every command queued longer ago than the lease and not fetched:
    /// the site was not there to fetch it. A fetched command waits for its answer (or its
    /// caller's timeout) however long it takes.
    fn drop_stale(&self, inner: &mut Inner) {
        let stale: Vec<u64> = inner
            .pending
            .iter()
            .filter(|(_, (_, _, queued))| queued.is_some_and(|at| at.elapsed() > self.lease))
            .map(|(seq, _)| *seq)
            .collect();
        for seq in stale {
            if let Some((c, tx, _)) = inner.pending.remove(&seq) {
                let _ = tx.send(Reply::Refused {
                    message: format!(
                        "site {} did not fetch command {seq} ({}) within its lease of {} s",
                        self.site,
                        c.op.describe(),
                        self.lease.as_secs_f64()
                    ),
                    unreachable: true,
                });
            }
        }
    }

    /// Hands each answer to the call waiting for it; answers to commands nobody waits for
    /// any more (answered before, or given up) are dropped. Returns how many were awaited.
    pub fn answer(&self, answers: Vec<Answer>) -> usize {
        let mut inner = self.lock();
        let mut awaited = 0;
        for a in answers {
            if let Some((_, tx, _)) = inner.pending.remove(&a.seq) {
                awaited += usize::from(tx.send(a.reply).is_ok());
            }
        }
        awaited
    }

    /// Keeps the site's latest snapshot of each cluster in `snapshots`.
    pub fn snapshots(&self, snapshots: Vec<SiteSnapshot>) {
        let now = Instant::now();
        let mut inner = self.lock();
        for s in snapshots {
            inner.snapshots.insert(s.cluster, (now, s.state));
        }
    }

    /// The latest snapshot of `cluster` and how long ago it arrived.
    pub fn latest(&self, cluster: &str) -> Option<(Duration, ClusterState)> {
        let inner = self.lock();
        let (at, state) = inner.snapshots.get(cluster)?;
        Some((at.elapsed(), state.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A caller asking site `m` to release reservation 7 of `abisko`, waiting up to 30 s.
    fn release_call(m: &Arc<Mailbox>) -> tokio::task::JoinHandle<Result<Reply, RmError>> {
        let m = m.clone();
        tokio::spawn(async move {
            m.call(
                "abisko",
                Op::Release { reservation: 7 },
                Duration::from_secs(30),
            )
            .await
        })
    }

    #[tokio::test]
    async fn a_call_returns_the_answer_the_site_gives_to_its_command() {
        let m = Arc::new(Mailbox::new("umea", Duration::from_secs(30)));
        let caller = release_call(&m);
        let got = m.commands(0, Duration::from_secs(30)).await;
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].cluster, "abisko");
        assert_eq!(got[0].op, Op::Release { reservation: 7 });
        // A fetch after the command's number waits for a newer one: there is none.
        let none = m.commands(got[0].seq, Duration::from_millis(1)).await;
        assert!(none.is_empty());
        let awaited = m.answer(vec![Answer {
            seq: got[0].seq,
            reply: Reply::Done,
        }]);
        assert_eq!(awaited, 1);
        assert_eq!(caller.await.unwrap().unwrap(), Reply::Done);
        // Answered twice (a retry after a lost response): the second finds nobody waiting.
        assert_eq!(
            m.answer(vec![Answer {
                seq: got[0].seq,
                reply: Reply::Done
            }]),
            0
        );
    }

    #[tokio::test]
    async fn a_site_that_never_answers_makes_the_call_unreachable_and_forgets_it() {
        let m = Mailbox::new("umea", Duration::from_secs(30));
        let e = m
            .call(
                "abisko",
                Op::Release { reservation: 7 },
                Duration::from_millis(20),
            )
            .await
            .unwrap_err();
        assert!(e.is_unreachable(), "{e}");
        assert!(e.to_string().contains("site umea did not answer"), "{e}");
        assert!(m.commands(0, Duration::ZERO).await.is_empty());
    }

    /// What was wrong: a site away past its lease fetched, on its return, a submission the
    /// centre had queued before taking it as down, and ran a part the centre had meanwhile
    /// planned elsewhere.
    #[tokio::test]
    async fn a_command_not_fetched_within_the_lease_is_never_delivered() {
        let m = Arc::new(Mailbox::new("umea", Duration::from_millis(50)));
        let caller = release_call(&m);
        tokio::time::sleep(Duration::from_millis(120)).await;
        assert!(m.commands(0, Duration::ZERO).await.is_empty());
        let reply = caller.await.unwrap().unwrap();
        let Reply::Refused {
            message,
            unreachable: true,
        } = reply
        else {
            panic!("{reply:?}")
        };
        assert!(message.contains("within its lease of 0.05 s"), "{message}");
    }

    #[tokio::test]
    async fn a_command_fetched_in_time_waits_for_its_answer_past_the_lease() {
        let m = Arc::new(Mailbox::new("umea", Duration::from_millis(50)));
        let caller = release_call(&m);
        let fetched = m.commands(0, Duration::from_secs(30)).await[0].seq;
        // A long transfer: answered after the lease has passed.
        tokio::time::sleep(Duration::from_millis(120)).await;
        assert!(m.commands(fetched, Duration::ZERO).await.is_empty());
        m.answer(vec![Answer {
            seq: fetched,
            reply: Reply::Done,
        }]);
        assert_eq!(caller.await.unwrap().unwrap(), Reply::Done);
    }

    #[test]
    fn each_mailbox_is_known_by_its_own_number() {
        let (a, b) = (
            Mailbox::new("umea", Duration::from_secs(30)),
            Mailbox::new("umea", Duration::from_secs(30)),
        );
        assert_ne!(a.epoch(), b.epoch());
        assert_ne!(a.epoch(), 0);
        assert!(a.is_named(Some(a.epoch())));
        assert!(!a.is_named(Some(b.epoch())));
        // A site of an earlier version names none.
        assert!(a.is_named(None));
    }
}
