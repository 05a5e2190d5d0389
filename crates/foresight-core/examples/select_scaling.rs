//! How slot selection scales with the size of the plan.
//!
//! Builds random plans of 10^3 … 10^6 slots — 1000 processors in two clusters, `k` slots each
//! laid end to end with random free gaps (a third of them adjacent to the previous slot), a
//! third priced above the job's price, and an open-ended last slot (free after the
//! forecast) — and times one [`SlotPlan::select`] for the earliest start of a job on 10 % of
//! the processors, best of a few repetitions, plan construction excluded. The job is longer
//! than almost any run of suitable slots inside the forecast, so its window is found near the
//! end of the plan and the walk visits most of it.
//!
//! For comparison it times the straightforward quadratic method (the seed's "modified
//! backfill"): for each candidate start, recount the free processors by scanning every slot;
//! up to 10^5 slots (null above), and checks that both find the same start.
//!
//! Output: one JSON line per size, `{"slots":N,"seconds":S,"quadratic_seconds":Q}`, then one
//! with the log-log slope of `seconds` between 10^3 and 10^6 and the nanoseconds per slot at
//! 10^6. Run with `cargo run --release -p foresight-core --example select_scaling`
//! (`SKIP_QUADRATIC=1` leaves the quadratic method out, e.g. for profiling).
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]
// foresight-core's clippy.toml bans clocks in the library; measuring is this example's job.
#![allow(clippy::disallowed_methods)]

use foresight_core::select::{Criterion, Processor, SlotPlan, SlotRequest};
use foresight_core::{Dur, Time};
use std::collections::BTreeSet;
use std::hint::black_box;
use std::time::Instant;

const PROCESSORS: usize = 1000;
const CLUSTERS: usize = 2;
const PROCS: u32 = 100;
const WALLTIME: i64 = 2000;
const MAX_PRICE: f64 = 2.5;
/// Staging delay of each cluster.
const STAGING: [i64; CLUSTERS] = [0, 120];
/// The end of the open last slot of every processor.
const OPEN_END: i64 = 1_000_000_000;

/// Knuth's MMIX linear congruential generator; the high bits are good enough here.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    /// Uniform in `lo..hi`.
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo) as u64) as i64
    }
}

/// `(processor, start, end, cost)` slots, processor-major in time order.
fn random_slots(per_processor: usize, seed: u64) -> Vec<(usize, i64, i64, f64)> {
    let mut rng = Lcg(seed);
    let mut out = Vec::with_capacity(PROCESSORS * per_processor);
    for p in 0..PROCESSORS {
        let mut t = 0;
        for k in 0..per_processor {
            let gap = if rng.range(0, 3) == 0 {
                0
            } else {
                rng.range(1, 50)
            };
            let len = rng.range(10, 500);
            let cost = [1.0, 2.0, 3.0][rng.range(0, 3) as usize];
            let start = t + gap;
            let end = if k + 1 == per_processor {
                OPEN_END
            } else {
                start + len
            };
            out.push((p, start, end, cost));
            t = end;
        }
    }
    out
}

fn processors() -> Vec<Processor> {
    (0..PROCESSORS)
        .map(|p| Processor {
            id: format!("p{p}"),
            cluster: format!("c{}", p % CLUSTERS),
            speed: 1.0,
            memory_mb: 0,
            features: BTreeSet::new(),
        })
        .collect()
}

fn request() -> SlotRequest {
    SlotRequest {
        procs: PROCS,
        walltime: Dur(WALLTIME),
        max_price: MAX_PRICE,
        min_memory_mb: 0,
        features: BTreeSet::new(),
        criterion: Criterion::EarliestStart,
        not_before: Time(0),
        deadline: None,
        co_allocate: true,
    }
}

/// The quadratic method: every usable start of a run of suitable slots is a candidate; for
/// each, in order, scan all slots (joining adjacent suitable ones of a processor) and count
/// the processors free over the whole window.
fn quadratic(slots: &[(usize, i64, i64, f64)]) -> Option<i64> {
    let usable_from = |p: usize| STAGING[p % CLUSTERS];
    let suitable = |s: &(usize, i64, i64, f64)| s.3 <= MAX_PRICE;
    // Candidate starts: the usable start of every run.
    let mut candidates = Vec::new();
    for (i, s) in slots.iter().enumerate() {
        let continues = i > 0 && {
            let q = &slots[i - 1];
            q.0 == s.0 && q.2 == s.1 && suitable(q)
        };
        if suitable(s) && !continues {
            candidates.push(s.1.max(usable_from(s.0)));
        }
    }
    candidates.sort_unstable();
    candidates.dedup();
    for t0 in candidates {
        let t1 = t0 + WALLTIME;
        let mut free = 0u32;
        // The current run: (processor, start, end).
        let mut run: Option<(usize, i64, i64)> = None;
        let mut close = |run: Option<(usize, i64, i64)>| {
            if let Some((p, a, b)) = run {
                if a.max(usable_from(p)) <= t0 && b >= t1 {
                    free += 1;
                }
            }
        };
        for s in slots {
            if !suitable(s) {
                close(run.take());
                continue;
            }
            match &mut run {
                Some((p, _, b)) if *p == s.0 && *b == s.1 => *b = s.2,
                _ => close(run.replace((s.0, s.1, s.2))),
            }
        }
        close(run);
        if free >= PROCS {
            return Some(t0);
        }
    }
    None
}

/// Best wall time of `reps` runs of `f`, and its last result.
fn best_of<T>(reps: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut best = f64::INFINITY;
    let mut out = None;
    for _ in 0..reps {
        let t = Instant::now();
        let r = black_box(f());
        best = best.min(t.elapsed().as_secs_f64());
        out = Some(r);
    }
    (best, out.unwrap())
}

fn main() {
    let staging: Vec<Option<Dur>> = STAGING.iter().map(|&d| Some(Dur(d))).collect();
    let req = request();
    let mut seconds = Vec::new();
    for (n, per_processor) in [(1_000, 1), (10_000, 10), (100_000, 100), (1_000_000, 1000)] {
        let slots = random_slots(per_processor, 0x5eed + n as u64);
        assert_eq!(slots.len(), n);
        let plan = SlotPlan::new(
            processors(),
            slots
                .iter()
                .map(|&(p, a, b, c)| (format!("p{p}"), Time(a), Time(b), c)),
        )
        .unwrap();
        // The plan's clusters are numbered by first appearance: c0, c1.
        assert_eq!(plan.clusters(), ["c0", "c1"]);
        let reps = if n >= 1_000_000 { 5 } else { 20 };
        let (secs, sel) = best_of(reps, || plan.select(&req, &staging));
        let sel = sel.expect("the open last slots always fit the job");
        let quadratic_secs = if n <= 100_000 && std::env::var_os("SKIP_QUADRATIC").is_none() {
            let reps = if n >= 100_000 { 1 } else { 3 };
            let (q, start) = best_of(reps, || quadratic(&slots));
            assert_eq!(
                start,
                Some(sel.start.secs()),
                "{n} slots: the quadratic method and select disagree"
            );
            Some(q)
        } else {
            None
        };
        // Control for the memory hierarchy: one pass over the plan's slots in order of start
        // (the order the walk visits them; storage is processor-major).
        let mut by_start: Vec<usize> = (0..plan.slots().len()).collect();
        by_start.sort_by_key(|&i| plan.slots()[i].start);
        let (control, _) = best_of(reps, || {
            by_start
                .iter()
                .map(|&i| plan.slots()[i].end.secs())
                .fold(0i64, i64::wrapping_add)
        });
        eprintln!(
            "{n} slots: start {} (of a forecast up to ~{}), cost {}; {:.1} ns/slot, \
             control pass in start order {:.1} ns/slot",
            sel.start,
            slots
                .iter()
                .filter(|s| s.2 != OPEN_END)
                .map(|s| s.2)
                .max()
                .unwrap_or(0),
            sel.cost,
            secs * 1e9 / n as f64,
            control * 1e9 / n as f64
        );
        let q = quadratic_secs.map_or("null".to_string(), |q| format!("{q:.6}"));
        println!("{{\"slots\":{n},\"seconds\":{secs:.6},\"quadratic_seconds\":{q}}}");
        seconds.push((n, secs));
    }
    let (n0, s0) = seconds[0];
    let (n1, s1) = seconds[seconds.len() - 1];
    let slope = (s1 / s0).ln() / (n1 as f64 / n0 as f64).ln();
    let ns_per_slot = s1 * 1e9 / n1 as f64;
    println!("{{\"loglog_slope_1e3_1e6\":{slope:.3},\"ns_per_slot_at_1e6\":{ns_per_slot:.1}}}");
}
