//! One run of the decentralized grid: sites with their local resource managers, local
//! streams, and the global stream sold by [`AuctionHouse`] — the same house a dispatcher
//! process drives. The simulator keeps only its own bookkeeping: the virtual clock, what
//! runs where, and the bids each site's dispatcher computes from its load.
//!
//! A site's resource manager keeps one queue in strict order (no backfilling): global jobs
//! by priority (highest first, then arrival), then local jobs first come first served. A
//! global job is awarded only to a site that can run it now: it starts at once on the
//! winner's free processors, preempting the running global jobs of strictly lower priority
//! its offer named (they keep their progress, wait at the head of that site's queue by
//! priority and resume when processors free up). Local jobs are never preempted. The winner
//! submits first and then stages the input (seed 001): the job holds its processors during
//! the transfer, which adds to its run.

use super::config::{AuctionSimConfig, Normaliser};
use super::workload::Streams;
use foresight_core::auction::{
    make_offer, Announcement, AuctionEvent, AuctionHouse, Lot, RuntimeTracker, SiteId, Victim,
};
use foresight_core::{Dur, JobId, Time};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};

/// What one run measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunResult {
    /// Auction length in mean runtimes.
    pub alpha: f64,
    /// The workload's seed.
    pub seed: u64,
    /// Mean response (arrival in the global queue to end) per priority level (index 0 the
    /// lowest), in mean runtimes of the run's global jobs; NaN for a level without jobs.
    pub response: Vec<f64>,
    /// Global jobs per priority level.
    pub jobs: Vec<u64>,
    /// Mean share of the sites' dispatchers that bid in an auction (every auction closed,
    /// sold or not).
    pub participation: f64,
    /// The same over the auctions that sold their job.
    pub participation_sold: f64,
    /// Auctions closed (a job unsold and auctioned again counts again).
    pub auctions: u64,
    /// Auctions that closed without a bid.
    pub unsold: u64,
    /// Preemptions of running global jobs.
    pub preemptions: u64,
    /// Awards the winner could not start at once (its load changed after its bid), given
    /// back to the auction as the dispatchers do: the job is auctioned again.
    pub given_back: u64,
    /// Mean response of the local jobs that ended before the last global job, in mean
    /// runtimes of the run's global jobs.
    pub local_response: f64,
    /// Global jobs that never ended (0 unless the run is broken).
    pub unfinished: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Jid {
    Global(usize),
    Local(usize, usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// A running job's end, valid while its run's version is current.
    End {
        site: usize,
        job: Jid,
        version: u64,
    },
    Local {
        site: usize,
        index: usize,
    },
    Global {
        index: usize,
    },
    /// An auction is due to close (or an unsold job to reopen).
    Due,
    /// A site's dispatcher reads the global queue.
    Poll {
        site: usize,
    },
}

#[derive(Clone, Copy, Debug)]
struct Run {
    procs: u32,
    since: Time,
    left: i64,
    version: u64,
}

/// Queue key: global jobs first by priority then arrival; then local jobs in order.
type QueueKey = (u8, Reverse<u8>, i64, Jid);

struct Site {
    centre: String,
    free: u32,
    running: BTreeMap<Jid, Run>,
    queue: BTreeSet<QueueKey>,
}

struct GlobalState {
    /// Work left when it is not running (runtime plus staging once awarded).
    left: i64,
    end: Option<Time>,
}

struct Sim<'a> {
    cfg: &'a AuctionSimConfig,
    streams: &'a Streams,
    house: AuctionHouse,
    sites: Vec<Site>,
    global: Vec<GlobalState>,
    local_left: BTreeMap<(usize, usize), i64>,
    local_end: BTreeMap<(usize, usize), Time>,
    heap: BinaryHeap<Reverse<(Time, u64, Ev)>>,
    due: BTreeSet<Time>,
    seq: u64,
    version: u64,
    now: Time,
    finished: usize,
    /// Between reads of the global queue, `Some(seconds)`; `None`: dispatchers see at once.
    poll: Option<i64>,
    /// Per site, the jobs whose auctions its dispatcher has seen.
    known: Vec<BTreeSet<JobId>>,
    bidders: u64,
    bidders_sold: u64,
    auctions: u64,
    unsold: u64,
    preemptions: u64,
    given_back: u64,
}

/// Runs `streams` on the configured grid with auctions of `alpha` mean runtimes.
pub fn run(cfg: &AuctionSimConfig, streams: &Streams, alpha: f64, seed: u64) -> RunResult {
    let mut auction = cfg.auction.clone();
    auction.alpha = alpha;
    let prior =
        Dur((cfg.global.mean_runtime_seconds.round() as i64).max(1) * i64::from(cfg.time_scale));
    let mut sim = Sim {
        cfg,
        streams,
        house: AuctionHouse::new(auction, RuntimeTracker::new(cfg.tracker_window, prior)),
        sites: cfg
            .site
            .iter()
            .map(|s| Site {
                centre: s.centre.clone(),
                free: s.nodes * s.cores_per_node,
                running: BTreeMap::new(),
                queue: BTreeSet::new(),
            })
            .collect(),
        global: streams
            .global
            .iter()
            .map(|g| GlobalState {
                left: g.runtime,
                end: None,
            })
            .collect(),
        local_left: BTreeMap::new(),
        local_end: BTreeMap::new(),
        heap: BinaryHeap::new(),
        due: BTreeSet::new(),
        seq: 0,
        version: 0,
        now: Time(0),
        finished: 0,
        poll: (cfg.dispatcher_poll > 0.0).then(|| {
            ((cfg.dispatcher_poll * cfg.global.mean_runtime_seconds).round() as i64).max(1)
                * i64::from(cfg.time_scale)
        }),
        known: vec![BTreeSet::new(); cfg.site.len()],
        bidders: 0,
        bidders_sold: 0,
        auctions: 0,
        unsold: 0,
        preemptions: 0,
        given_back: 0,
    };
    for (i, g) in streams.global.iter().enumerate() {
        sim.push(Time(g.submit), Ev::Global { index: i });
    }
    for (s, jobs) in streams.local.iter().enumerate() {
        if let Some(j) = jobs.first() {
            sim.push(Time(j.submit), Ev::Local { site: s, index: 0 });
        }
    }
    if let Some(every) = sim.poll {
        let n = cfg.site.len() as i64;
        for site in 0..cfg.site.len() {
            sim.push(Time(every * (site as i64 + 1) / n), Ev::Poll { site });
        }
    }
    while sim.finished < streams.global.len() {
        let Some(Reverse((t, _, ev))) = sim.heap.pop() else {
            break;
        };
        sim.now = t;
        sim.event(ev);
        if let Some(at) = sim.house.next_due() {
            if sim.due.insert(at) {
                sim.push(at.max(sim.now), Ev::Due);
            }
        }
    }
    sim.result(alpha, seed)
}

impl Sim<'_> {
    fn push(&mut self, at: Time, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, ev)));
    }

    fn event(&mut self, ev: Ev) {
        match ev {
            Ev::Global { index } => {
                let g = &self.streams.global[index];
                let lot = Lot {
                    job: JobId(index as u64),
                    procs: g.procs,
                    priority: g.priority,
                    home: SiteId(g.home as u32),
                };
                self.house_event(AuctionEvent::Open(lot));
            }
            Ev::Local { site, index } => {
                let j = self.streams.local[site][index];
                if let Some(next) = self.streams.local[site].get(index + 1) {
                    self.push(
                        Time(next.submit),
                        Ev::Local {
                            site,
                            index: index + 1,
                        },
                    );
                }
                self.local_left.insert((site, index), j.runtime);
                let id = Jid::Local(site, index);
                self.sites[site].queue.insert((1, Reverse(0), j.submit, id));
                self.load_changed(site);
            }
            Ev::End { site, job, version } => {
                let current = self.sites[site].running.get(&job).map(|r| r.version);
                if current != Some(version) {
                    return; // preempted since: a stale end
                }
                let run = self.sites[site]
                    .running
                    .remove(&job)
                    .expect("invariant: the job runs");
                self.sites[site].free += run.procs;
                let (submit, runtime) = match job {
                    Jid::Global(i) => {
                        self.global[i].end = Some(self.now);
                        self.global[i].left = 0;
                        self.finished += 1;
                        let g = &self.streams.global[i];
                        (g.submit, g.runtime)
                    }
                    Jid::Local(s, i) => {
                        self.local_end.insert((s, i), self.now);
                        let l = &self.streams.local[s][i];
                        (l.submit, l.runtime)
                    }
                };
                let measure = match self.cfg.normaliser {
                    Normaliser::Runtime => runtime,
                    Normaliser::Response => self.now.0 - submit,
                };
                self.house_event(AuctionEvent::Finished(Dur(measure)));
                self.load_changed(site);
            }
            Ev::Due => {
                self.due.remove(&self.now);
                self.house_event(AuctionEvent::Tick);
            }
            Ev::Poll { site } => {
                if let Some(every) = self.poll {
                    self.push(self.now + Dur(every), Ev::Poll { site });
                }
                let open: Vec<JobId> = self.house.open_auctions().map(|(l, _)| l.job).collect();
                self.known[site].extend(open);
                self.house_event(AuctionEvent::Tick);
                self.rebid(site, None);
            }
        }
    }

    /// Starts queued jobs in strict order, then has the site's dispatcher re-bid (the house
    /// asks it to).
    fn load_changed(&mut self, site: usize) {
        self.start_queued(site);
        self.house_event(AuctionEvent::LoadChanged(SiteId(site as u32)));
    }

    fn start_queued(&mut self, site: usize) {
        while let Some(&key) = self.sites[site].queue.first() {
            let job = key.3;
            let procs = self.procs_of(job);
            if procs > self.sites[site].free {
                break;
            }
            self.sites[site].queue.remove(&key);
            self.start(site, job);
        }
    }

    fn procs_of(&self, job: Jid) -> u32 {
        match job {
            Jid::Global(i) => self.streams.global[i].procs,
            Jid::Local(s, i) => self.streams.local[s][i].procs,
        }
    }

    fn start(&mut self, site: usize, job: Jid) {
        let procs = self.procs_of(job);
        let left = match job {
            Jid::Global(i) => self.global[i].left,
            Jid::Local(s, i) => self.local_left[&(s, i)],
        };
        self.version += 1;
        let version = self.version;
        let s = &mut self.sites[site];
        s.free -= procs;
        s.running.insert(
            job,
            Run {
                procs,
                since: self.now,
                left,
                version,
            },
        );
        self.push(self.now + Dur(left), Ev::End { site, job, version });
    }

    fn preempt(&mut self, site: usize, job: Jid) {
        let Some(run) = self.sites[site].running.remove(&job) else {
            return;
        };
        let Jid::Global(i) = job else {
            unreachable!("invariant: local jobs are never preempted by global ones")
        };
        self.preemptions += 1;
        self.sites[site].free += run.procs;
        self.global[i].left = run.left - (self.now - run.since).0;
        let g = &self.streams.global[i];
        self.sites[site]
            .queue
            .insert((0, Reverse(g.priority), g.submit, job));
    }

    fn victims(&self, site: usize) -> Vec<Victim> {
        self.sites[site]
            .running
            .iter()
            .filter_map(|(job, run)| match job {
                Jid::Global(i) => Some(Victim {
                    job: JobId(*i as u64),
                    priority: self.streams.global[*i].priority,
                    procs: run.procs,
                    remaining: Dur(run.left - (self.now - run.since).0),
                    started: run.since,
                }),
                Jid::Local(..) => None,
            })
            .collect()
    }

    fn staging(&self, job: usize, site: usize) -> Dur {
        let g = &self.streams.global[job];
        if g.home == site {
            return Dur(0);
        }
        let n = &self.cfg.network;
        let bw = if self.sites[g.home].centre == self.sites[site].centre {
            n.intra_centre_mb_s
        } else {
            n.inter_centre_mb_s
        };
        let secs = (n.latency_seconds + g.input_mb / bw).round() as i64;
        Dur(secs * i64::from(self.cfg.time_scale))
    }

    /// The site's dispatcher bids in every open auction (or only `only`), higher priority
    /// first, so that under reservation its processors go to the more important jobs.
    fn rebid(&mut self, site: usize, only: Option<JobId>) {
        let mut lots: Vec<Lot> = self
            .house
            .open_auctions()
            .map(|(l, _)| *l)
            .filter(|l| only.is_none_or(|j| j == l.job))
            .filter(|l| self.poll.is_none() || self.known[site].contains(&l.job))
            .collect();
        lots.sort_by_key(|l| (Reverse(l.priority), l.job));
        let sid = SiteId(site as u32);
        for lot in lots {
            let held = self.house.held(sid, lot.job);
            let stage = self.staging(lot.job.0 as usize, site);
            let offer = make_offer(
                &lot,
                self.sites[site].free,
                &self.victims(site),
                held,
                stage,
            );
            let ev = match offer {
                Some((offer, _)) => AuctionEvent::Bid {
                    job: lot.job,
                    site: sid,
                    offer,
                },
                None => AuctionEvent::Withdraw {
                    job: lot.job,
                    site: sid,
                },
            };
            self.house_event(ev);
        }
    }

    /// Delivers an event to the house and acts on its announcements (which may cause more).
    fn house_event(&mut self, ev: AuctionEvent) {
        let mut todo: VecDeque<Announcement> = self.house.handle(self.now, ev).into();
        // Sites asked to re-bid do so once, in every open auction in priority order, after
        // the rest of these announcements.
        let mut rebid = BTreeSet::new();
        while let Some(d) = todo.pop_front() {
            match d {
                // Polling dispatchers see a new auction at their next read of the queue.
                Announcement::Opened { job, .. } if self.poll.is_none() => {
                    for s in 0..self.sites.len() {
                        self.rebid(s, Some(job));
                    }
                }
                Announcement::Awarded {
                    job, site, bidders, ..
                } => {
                    self.auctions += 1;
                    self.bidders += bidders as u64;
                    self.bidders_sold += bidders as u64;
                    self.award(job.0 as usize, site.0 as usize);
                }
                Announcement::Unsold { bidders, .. } => {
                    self.auctions += 1;
                    self.unsold += 1;
                    self.bidders += bidders as u64;
                }
                Announcement::Lapsed { job, site } => self.rebid(site.0 as usize, Some(job)),
                Announcement::Rebid { site, .. } => {
                    rebid.insert(site.0 as usize);
                }
                Announcement::Opened { .. }
                | Announcement::Accepted { .. }
                | Announcement::Refused { .. } => {}
            }
        }
        for site in rebid {
            self.rebid(site, None);
        }
    }

    fn award(&mut self, i: usize, site: usize) {
        let g = self.streams.global[i];
        let lot = Lot {
            job: JobId(i as u64),
            procs: g.procs,
            priority: g.priority,
            home: SiteId(g.home as u32),
        };
        let stage = self.staging(i, site);
        self.global[i].left = g.runtime + stage.0;
        let job = Jid::Global(i);
        match make_offer(&lot, self.sites[site].free, &self.victims(site), 0, stage) {
            Some((_, victims)) => {
                for v in victims {
                    self.preempt(site, Jid::Global(v.0 as usize));
                }
                self.start(site, job);
            }
            None => {
                // A bid is a promise: what the winner cannot start now goes back to the
                // auction at once, as a dispatcher's award does (`SharedQueue::give_back`).
                self.given_back += 1;
                self.global[i].left = g.runtime;
                self.house_event(AuctionEvent::Open(lot));
                return;
            }
        }
        self.load_changed(site);
    }

    fn result(&self, alpha: f64, seed: u64) -> RunResult {
        let levels = usize::from(self.cfg.global.priorities);
        let g = &self.streams.global;
        let unit = g.iter().map(|j| j.runtime).sum::<i64>() as f64 / g.len().max(1) as f64;
        let mut sum = vec![0.0; levels];
        let mut jobs = vec![0u64; levels];
        let mut unfinished = 0;
        for (spec, st) in g.iter().zip(&self.global) {
            match st.end {
                Some(end) => {
                    let p = usize::from(spec.priority);
                    sum[p] += (end.0 - spec.submit) as f64;
                    jobs[p] += 1;
                }
                None => unfinished += 1,
            }
        }
        let response = sum
            .iter()
            .zip(&jobs)
            .map(|(s, &n)| {
                if n == 0 {
                    f64::NAN
                } else {
                    s / n as f64 / unit
                }
            })
            .collect();
        let (ls, ln) = self
            .local_end
            .iter()
            .fold((0.0, 0u64), |(s, n), ((site, i), end)| {
                (
                    s + (end.0 - self.streams.local[*site][*i].submit) as f64,
                    n + 1,
                )
            });
        RunResult {
            alpha,
            seed,
            response,
            jobs,
            participation: if self.auctions == 0 {
                0.0
            } else {
                self.bidders as f64 / (self.auctions as f64 * self.sites.len() as f64)
            },
            participation_sold: if self.auctions == self.unsold {
                0.0
            } else {
                self.bidders_sold as f64
                    / ((self.auctions - self.unsold) as f64 * self.sites.len() as f64)
            },
            auctions: self.auctions,
            unsold: self.unsold,
            preemptions: self.preemptions,
            given_back: self.given_back,
            local_response: if ln == 0 { 0.0 } else { ls / ln as f64 / unit },
            unfinished,
        }
    }
}
