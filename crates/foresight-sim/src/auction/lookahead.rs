//! The centralized comparison: the same streams (arrivals, sizes, runtimes, local streams)
//! brokered by the lookahead planner of `sim grid` instead of auctions.
//!
//! The grid simulator reads streams from SWF traces, so the run's streams are written as
//! traces into a directory and read back, each global job's priority as its SWF queue number
//! (`global.levels_from_queue`): the lookahead broker serves them by level and preempts
//! lower levels' global jobs (suspending them; they resume where they stopped), as the
//! auctions' sites do. What it cannot take: per-job input sizes and homes (it stages the
//! mean input size over each cluster's link, the inter-centre bandwidth here, from a home it
//! draws itself), and local queues in strict priority order (its clusters run FCFS). Global
//! jobs never take time forecast for local jobs (their premium is prohibitive), as auctions
//! never preempt local jobs. A job's response is its end (after any suspensions) less its
//! submission.

use super::config::AuctionSimConfig;
use super::workload::Streams;
use crate::grid::{lookahead_trace, GridConfig, GridError};
use std::fmt::Write as _;
use std::path::Path;

/// Mean response per priority level (index 0 the lowest) of the global jobs under the
/// lookahead broker, in mean runtimes of the run's global jobs, and the jobs that never
/// started. Traces are written into `dir`, which must exist.
pub fn lookahead_response(
    cfg: &AuctionSimConfig,
    streams: &Streams,
    seed: u64,
    dir: &Path,
) -> Result<(Vec<f64>, u64), GridError> {
    let k = i64::from(cfg.time_scale);
    let end = streams
        .local
        .iter()
        .flat_map(|l| l.last().map(|j| j.submit))
        .chain(streams.global.last().map(|g| g.submit))
        .max()
        .unwrap_or(0);
    // A one-second job at time 0 opens every trace, so that the grid simulator (which starts
    // each trace at its first job) keeps all streams aligned; it is left out of the figures.
    // The opener is of level 0, the lowest: it never preempts anything.
    let write = |name: &str, procs: u32, jobs: &mut dyn Iterator<Item = (i64, u32, i64, u8)>| {
        let mut text = format!("; MaxProcs: {procs}\n");
        let all = std::iter::once((0, 1, 1, 0)).chain(jobs);
        for (i, (submit, p, runtime, level)) in all.enumerate() {
            let _ = writeln!(
                text,
                "{} {submit} -1 {runtime} {p} -1 -1 {p} {runtime} -1 1 1 1 -1 {level} -1 -1 -1",
                i + 1
            );
        }
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|source| GridError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Ok::<_, GridError>(path)
    };
    let biggest = cfg.site.iter().map(|s| s.nodes * s.cores_per_node).max();
    let global = write(
        "global.swf",
        biggest.unwrap_or(1),
        &mut streams
            .global
            .iter()
            .map(|g| (g.submit, g.procs, g.runtime, g.priority)),
    )?;
    let cycle = ((0.05 * cfg.global.mean_runtime_seconds).round() as i64).max(1) * k;
    let mut toml = format!(
        "days = {}\ncycle_seconds = {cycle}\nlead_time_seconds = {}\nhorizon_hours = {}\n",
        (end as f64 / 86_400.0) + 1.0,
        3 * cycle,
        (end / 3600 + 48).max(24)
    );
    for (i, s) in cfg.site.iter().enumerate() {
        let procs = s.nodes * s.cores_per_node;
        let local = write(
            &format!("local-{i}.swf"),
            procs,
            &mut streams.local[i]
                .iter()
                .map(|j| (j.submit, j.procs, j.runtime, 0)),
        )?;
        let _ = write!(
            toml,
            "[[cluster]]\nname = {:?}\nprocs = {procs}\npolicy = \"fcfs\"\nlocal_premium = 1e9\n\
             bandwidth_mb_s = {}\nlatency_seconds = {}\nlocal = {{ trace = {:?} }}\n",
            s.name,
            cfg.network.inter_centre_mb_s / k as f64,
            (cfg.network.latency_seconds.round() as i64) * k,
            local.display().to_string(),
        );
    }
    let _ = write!(
        toml,
        "[global]\ntrace = {:?}\nprice = [1.0, 1.0]\nestimate_factor = [1.0, 1.0]\n\
         input_mb = {}\nno_coallocation_share = 1.0\nlevels = {}\nlevels_from_queue = true\n\
         seed = {seed}\n",
        global.display().to_string(),
        (cfg.global.input_mb[0] + cfg.global.input_mb[1]) / 2.0,
        cfg.global.priorities.max(1),
    );
    let grid = GridConfig::parse(&toml, "lookahead comparison")?;
    let trace = lookahead_trace(&grid)?;
    let levels = usize::from(cfg.global.priorities);
    let g = &streams.global;
    let unit = g.iter().map(|j| j.runtime).sum::<i64>() as f64 / g.len().max(1) as f64;
    let mut sum = vec![0.0; levels];
    let mut n = vec![0u64; levels];
    let mut unstarted = 0;
    // Trace job 1 is the opener; global job i is trace job i + 2, index i + 1 of the ends.
    for (i, spec) in g.iter().enumerate() {
        match trace.ends.get(i + 1).copied().flatten() {
            Some(end) => {
                let p = usize::from(spec.priority);
                sum[p] += (end.0 - spec.submit) as f64;
                n[p] += 1;
            }
            None => unstarted += 1,
        }
    }
    let response = sum
        .iter()
        .zip(&n)
        .map(|(s, &c)| {
            if c == 0 {
                f64::NAN
            } else {
                s / c as f64 / unit
            }
        })
        .collect();
    Ok((response, unstarted))
}
