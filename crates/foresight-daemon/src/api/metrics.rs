//! Prometheus metrics, computed from the state at each scrape; in dispatcher mode, with the
//! decentralized grid as the shared store has it ([`grid`]).

use crate::runtime::Service;
use foresight_api::AuctionStage;
use foresight_store::JobState;
use foresight_store::{AuctionCounts, SiteRecord};
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QuantileLabel {
    quantile: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClusterLabel {
    cluster: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SiteLabel {
    site: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: String,
}

/// The decentralized grid at a scrape: the sites' leases, the global jobs on offer by
/// stage, the auctions this dispatcher closed (awarded, unsold) and the rounds it completed.
#[derive(Debug)]
pub struct Grid {
    sites: Vec<SiteRecord>,
    offered: AuctionCounts,
    closes: (u64, u64),
    rounds: u64,
}

/// The grid read for a scrape: `None` alone (mode single), or when the shared store cannot
/// be read (logged; the service's own metrics are still served).
pub async fn grid(service: &Service) -> Option<Grid> {
    let q = &service.global_queue;
    let read = async {
        Ok::<_, crate::state::refusal::Refusal>((q.sites().await?, q.auction_counts().await?))
    };
    match read.await {
        Ok((Some(sites), Some(offered))) => Some(Grid {
            sites,
            offered,
            closes: q.closes(),
            rounds: q.rounds(),
        }),
        Ok(_) => None,
        Err(e) => {
            tracing::warn!("metrics: the grid's sites and auctions: {}", e.reason());
            None
        }
    }
}

/// Registers the grid's metrics: per site `site_up` and `site_lease_seconds`; the global jobs
/// on offer (`auctions_open`, `unsold_jobs`, `offered_jobs` by stage); the auctions closed
/// here by outcome; the rounds completed here.
fn register_grid(registry: &mut Registry, g: &Grid) {
    let up = Family::<SiteLabel, Gauge>::default();
    let lease = Family::<SiteLabel, Gauge<f64, AtomicU64>>::default();
    for s in &g.sites {
        let label = SiteLabel {
            site: s.site.clone(),
        };
        up.get_or_create(&label).set(i64::from(s.alive));
        lease
            .get_or_create(&label)
            .set(s.lease_left_ms as f64 / 1000.0);
    }
    let o = &g.offered;
    let open = Gauge::<i64>::default();
    open.set((o.open + o.closing) as i64);
    let unsold = Gauge::<i64>::default();
    unsold.set((o.reopening + o.unsold) as i64);
    let offered = Family::<StateLabel, Gauge>::default();
    for (stage, n) in [
        (AuctionStage::Queued, o.queued),
        (AuctionStage::Open, o.open),
        (AuctionStage::Closing, o.closing),
        (AuctionStage::Reopening, o.reopening),
        (AuctionStage::Unsold, o.unsold),
    ] {
        offered
            .get_or_create(&StateLabel {
                state: stage.as_str().into(),
            })
            .set(n as i64);
    }
    let closed = Family::<OutcomeLabel, Counter>::default();
    for (outcome, n) in [("awarded", g.closes.0), ("unsold", g.closes.1)] {
        closed
            .get_or_create(&OutcomeLabel {
                outcome: outcome.into(),
            })
            .inc_by(n);
    }
    registry.register(
        "site_up",
        "1 while a site's dispatcher lease holds, 0 once it ran out",
        up,
    );
    registry.register(
        "site_lease_seconds",
        "Seconds until a site's dispatcher lease runs out (negative once it has)",
        lease,
    );
    registry.register(
        "auctions_open",
        "Global jobs in an open auction (or one due to close)",
        open,
    );
    registry.register(
        "unsold_jobs",
        "Global jobs whose last auction closed without a valid bid, waiting to be auctioned again",
        unsold,
    );
    registry.register(
        "offered_jobs",
        "Global jobs on offer by stage: queued, open, closing, reopening, unsold",
        offered,
    );
    registry.register(
        "auctions_closed",
        "Auctions this site's dispatcher closed, by outcome (sum over sites for the grid)",
        closed,
    );
    let rounds = Counter::<u64>::default();
    rounds.inc_by(g.rounds);
    registry.register(
        "dispatcher_rounds",
        "Rounds (bid, close due auctions, start awards) this site's dispatcher completed",
        rounds,
    );
}

/// The exposition text, with the grid's metrics when `grid` is given.
pub fn render(service: &Service, grid: Option<&Grid>) -> String {
    let mut registry = Registry::with_prefix("foresight");
    if let Some(g) = grid {
        register_grid(&mut registry, g);
    }
    let jobs = Family::<StateLabel, Gauge>::default();
    let queue = Gauge::<i64>::default();
    let cycles = Counter::<u64>::default();
    let cycle_seconds = Gauge::<f64, AtomicU64>::default();
    let estimate_error = Gauge::<f64, AtomicU64>::default();
    let submitted = Counter::<u64>::default();
    let submit_latency = Family::<QuantileLabel, Gauge<f64, AtomicU64>>::default();
    let available = Family::<ClusterLabel, Gauge>::default();
    let skew_mean = Gauge::<f64, AtomicU64>::default();
    let skew_max = Gauge::<f64, AtomicU64>::default();
    let coallocated_started = Counter::<u64>::default();
    let idle_while_waiting = Counter::<f64, AtomicU64>::default();
    let moved_earlier = Counter::<u64>::default();
    let snapshots = Counter::<u64>::default();
    let slurm_commands = Counter::<u64>::default();
    slurm_commands.inc_by(
        service
            .slurm_commands
            .load(std::sync::atomic::Ordering::Relaxed),
    );
    {
        let w = service.world();
        let mut counts = std::collections::BTreeMap::new();
        for j in w.jobs.values() {
            *counts.entry(j.state).or_insert(0i64) += 1;
        }
        for s in [
            JobState::Pending,
            JobState::Planned,
            JobState::Reserved,
            JobState::Running,
            JobState::Completed,
            JobState::Failed,
            JobState::Cancelled,
            JobState::Timeout,
        ] {
            jobs.get_or_create(&StateLabel {
                state: s.as_str().into(),
            })
            .set(counts.get(&s).copied().unwrap_or(0));
        }
        queue.set(w.broker.queued().count() as i64);
        cycles.inc_by(w.stats.cycles);
        cycle_seconds.set(w.stats.last_cycle_seconds);
        for c in &w.broker.clusters {
            available
                .get_or_create(&ClusterLabel {
                    cluster: c.name.clone(),
                })
                .set(i64::from(c.available));
        }
        if w.stats.skew_count > 0 {
            skew_mean.set(w.stats.skew_sum / w.stats.skew_count as f64);
        }
        skew_max.set(w.stats.skew_max);
        coallocated_started.inc_by(w.stats.skew_count);
        snapshots.inc_by(w.stats.snapshots);
        let broker = w.broker.stats();
        idle_while_waiting.inc_by(broker.idle_while_waiting);
        moved_earlier.inc_by(broker.moves);
        if w.stats.estimate_error_count > 0 {
            estimate_error.set(w.stats.estimate_error_sum / w.stats.estimate_error_count as f64);
        }
    }
    {
        let t = service.timings.lock().unwrap_or_else(|p| p.into_inner());
        submitted.inc_by(t.submitted);
        let mut sorted = t.submit.clone();
        sorted.sort_by(f64::total_cmp);
        for q in [0.5, 0.99] {
            if let Some(&v) = sorted.get(((sorted.len() as f64 - 1.0) * q).round() as usize) {
                submit_latency
                    .get_or_create(&QuantileLabel {
                        quantile: q.to_string(),
                    })
                    .set(v);
            }
        }
    }
    registry.register("jobs", "Jobs by state", jobs);
    registry.register("queue_length", "Global jobs waiting for the planner", queue);
    registry.register("cycles", "Scheduling cycles run", cycles);
    registry.register(
        "cycle_duration_seconds",
        "Duration of the last scheduling cycle",
        cycle_seconds,
    );
    registry.register(
        "estimate_error_seconds",
        "Mean |first planned start - actual start| of started jobs",
        estimate_error,
    );
    registry.register("submitted_jobs", "Jobs accepted", submitted);
    registry.register(
        "idle_while_waiting_processor_seconds",
        "Processor-seconds left idle while a global job that could have used them waited",
        idle_while_waiting,
    );
    registry.register(
        "moved_earlier",
        "Reserved global jobs moved earlier because processors freed up before planned",
        moved_earlier,
    );
    registry.register(
        "submit_latency_seconds",
        "Submit request handling time over the last 4096 requests",
        submit_latency,
    );
    registry.register(
        "cluster_available",
        "1 while a cluster's resource manager answers",
        available,
    );
    registry.register(
        "coallocation_skew_seconds_mean",
        "Mean start skew (latest part start - earliest) of co-allocated jobs on Slurm clusters",
        skew_mean,
    );
    registry.register(
        "coallocation_skew_seconds_max",
        "Largest start skew of a co-allocated job on Slurm clusters",
        skew_max,
    );
    registry.register(
        "coallocated_started",
        "Co-allocated jobs on Slurm clusters whose every part started",
        coallocated_started,
    );
    registry.register(
        "cluster_snapshots",
        "Snapshots of Slurm clusters read",
        snapshots,
    );
    registry.register(
        "slurm_commands",
        "Commands run against Slurm clusters",
        slurm_commands,
    );
    let mut out = String::new();
    let _ = encode(&mut out, &registry);
    out
}
