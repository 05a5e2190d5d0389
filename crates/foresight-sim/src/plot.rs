//! SVG figures of simulations, drawn with plotters, so that a run can be looked at rather
//! than only summed up: utilization and queue length over time, the wait-time CDF, and
//! bounded slowdown by job size and by runtime class.
//!
//! A figure is a row of panels (one per cluster; one in all for `sim run`), and each panel
//! holds one series per run compared (one per broker for `sim grid`). The series are
//! computed by the pure functions here ([`over_time`], [`wait_cdf`], [`bsld_by_class`]) and
//! only then drawn.

use crate::metrics::BSLD_TAU;
use crate::runner::Outcome;
use crate::sweep::SweepRow;
use std::path::{Path, PathBuf};
use thiserror::Error;

mod chart;

use chart::{bar_chart, cdf_chart, figure_sized, hbar_chart, line_chart, Scale, PANEL};
pub(crate) use chart::{color, figure, with_legend, Area, Drawn, Mark, FONT};
pub use chart::{log_tick, tick};

/// A figure could not be written.
#[derive(Debug, Error)]
#[error("writing {path}: {message}")]
pub struct PlotError {
    /// The file.
    pub path: String,
    /// Why.
    pub message: String,
}

/// One job's life as the figures need it, seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// Submission.
    pub submit: i64,
    /// Start.
    pub start: i64,
    /// End.
    pub end: i64,
    /// Processors.
    pub procs: u32,
}

impl From<&Outcome> for Span {
    fn from(o: &Outcome) -> Span {
        Span {
            submit: o.submit.secs(),
            start: o.start.secs(),
            end: o.end.secs(),
            procs: o.procs,
        }
    }
}

/// The jobs one run put on one machine.
#[derive(Clone, Debug)]
pub struct Series {
    /// The run's name in the legend (a policy, a broker).
    pub name: String,
    /// Processors of the machine.
    pub procs: u32,
    /// Its jobs.
    pub jobs: Vec<Span>,
}

/// One machine, compared across runs.
#[derive(Clone, Debug)]
pub struct Panel {
    /// The machine (a trace, a cluster).
    pub title: String,
    /// One per run.
    pub series: Vec<Series>,
}

/// Time-weighted mean utilization (0..1) and mean queue length (jobs submitted and not yet
/// started) in `buckets` equal intervals from the first submission to the last end, as
/// `(bucket start, utilization, queue)` in seconds from the first submission.
pub fn over_time(jobs: &[Span], procs: u32, buckets: usize) -> Vec<(f64, f64, f64)> {
    let (Some(t0), Some(t1)) = (
        jobs.iter().map(|j| j.submit).min(),
        jobs.iter().map(|j| j.end).max(),
    ) else {
        return Vec::new();
    };
    let span = (t1 - t0).max(1);
    let buckets = buckets.clamp(1, span as usize);
    let busy: Vec<(i64, i64)> = jobs
        .iter()
        .flat_map(|j| [(j.start, i64::from(j.procs)), (j.end, -i64::from(j.procs))])
        .collect();
    let queued: Vec<(i64, i64)> = jobs
        .iter()
        .flat_map(|j| [(j.submit, 1), (j.start, -1)])
        .collect();
    let busy = bucket_means(busy, t0, span, buckets);
    let queued = bucket_means(queued, t0, span, buckets);
    let width = span as f64 / buckets as f64;
    (0..buckets)
        .map(|b| {
            (
                b as f64 * width,
                busy[b] / f64::from(procs.max(1)),
                queued[b],
            )
        })
        .collect()
}

/// The time-weighted mean level of a step function, given as `(time, change)` pairs
/// starting from 0 at `t0`, over `buckets` equal intervals of `[t0, t0 + span)`.
fn bucket_means(mut changes: Vec<(i64, i64)>, t0: i64, span: i64, buckets: usize) -> Vec<f64> {
    changes.sort_unstable();
    let width = span as f64 / buckets as f64;
    let mut out = vec![0.0; buckets];
    let mut level = 0i64;
    let mut at = t0 as f64;
    let add = |from: f64, to: f64, level: i64, out: &mut Vec<f64>| {
        // Spreads level × [from, to) over the buckets it covers, walking bucket indices
        // (never recomputing one from a float edge, which could stand still).
        let mut b = (((from - t0 as f64) / width) as usize).min(buckets - 1);
        let mut from = from;
        while from < to {
            let edge = if b + 1 >= buckets {
                to
            } else {
                (t0 as f64 + (b + 1) as f64 * width).min(to)
            };
            out[b] += level as f64 * (edge - from).max(0.0);
            from = edge;
            b += 1;
        }
    };
    for (t, d) in changes {
        let t = t as f64;
        if t > at {
            add(at, t, level, &mut out);
            at = t;
        }
        level += d;
    }
    for v in &mut out {
        *v /= width;
    }
    out
}

/// The wait-time CDF as `(wait seconds, share of jobs that waited at most that long)`, at
/// most `points` points (every job when there are fewer).
pub fn wait_cdf(jobs: &[Span], points: usize) -> Vec<(f64, f64)> {
    let mut waits: Vec<i64> = jobs.iter().map(|j| j.start - j.submit).collect();
    waits.sort_unstable();
    let n = waits.len();
    if n == 0 {
        return Vec::new();
    }
    let step = n.div_ceil(points.max(1)).max(1);
    let mut out: Vec<(f64, f64)> = (step - 1..n)
        .step_by(step)
        .map(|k| (waits[k] as f64, (k + 1) as f64 / n as f64))
        .collect();
    if out.last().map(|p| p.1) != Some(1.0) {
        out.push((waits[n - 1] as f64, 1.0));
    }
    out
}

/// Job-size classes (processors) of [`bsld_by_class`].
pub const SIZE_CLASSES: [(&str, i64); 6] = [
    ("1", 1),
    ("2–4", 4),
    ("5–16", 16),
    ("17–64", 64),
    ("65–256", 256),
    ("257+", i64::MAX),
];

/// Runtime classes (seconds) of [`bsld_by_class`].
pub const RUNTIME_CLASSES: [(&str, i64); 5] = [
    ("< 1 min", 59),
    ("1–10 min", 599),
    ("10 min–1 h", 3599),
    ("1–10 h", 35_999),
    ("≥ 10 h", i64::MAX),
];

/// Mean bounded slowdown (τ = 10 s) and job count per class: each job falls in the first
/// class whose upper bound (inclusive) is at least `key(job)`.
pub fn bsld_by_class(
    jobs: &[Span],
    classes: &[(&str, i64)],
    key: impl Fn(&Span) -> i64,
) -> Vec<(f64, u64)> {
    let mut sums = vec![(0.0, 0u64); classes.len()];
    for j in jobs {
        let k = key(j);
        let c = classes
            .iter()
            .position(|(_, hi)| k <= *hi)
            .unwrap_or(classes.len() - 1);
        let resp = (j.end - j.submit) as f64;
        let run = (j.end - j.start).max(BSLD_TAU) as f64;
        sums[c].0 += (resp / run).max(1.0);
        sums[c].1 += 1;
    }
    sums.into_iter()
        .map(|(s, n)| (if n > 0 { s / n as f64 } else { 0.0 }, n))
        .collect()
}

/// What puts a job in a class: its processors, or its runtime.
type ClassKey = fn(&Span) -> i64;

/// The files [`write_run_figures`] writes, in order.
pub const RUN_FIGURES: [&str; 5] = [
    "utilization.svg",
    "queue.svg",
    "wait_cdf.svg",
    "bsld_size.svg",
    "bsld_runtime.svg",
];

/// The unit of a time axis spanning `span` seconds: days past three days, else hours.
fn time_unit(span: i64) -> (&'static str, f64) {
    if span > 3 * 86_400 {
        ("days", 86_400.0)
    } else {
        ("hours", 3600.0)
    }
}

/// Writes [`RUN_FIGURES`] into `dir` (which must exist): one panel per machine side by side,
/// one series per run in each. Returns the paths written.
pub fn write_run_figures(
    dir: &Path,
    title: &str,
    panels: &[Panel],
) -> Result<Vec<PathBuf>, PlotError> {
    let mut written = Vec::new();
    // One unit and one range for every panel's time axis, so that panels side by side
    // read alike: each series runs from its first submission to its last end.
    let span = panels
        .iter()
        .flat_map(|p| &p.series)
        .filter_map(|s| {
            let first = s.jobs.iter().map(|j| j.submit).min()?;
            Some(s.jobs.iter().map(|j| j.end).max()? - first)
        })
        .max()
        .unwrap_or(0);
    let (unit, per) = time_unit(span);
    let xmax = (span as f64 / per).max(1e-9);
    for name in RUN_FIGURES {
        let path = dir.join(name);
        let what = match name {
            "utilization.svg" => "utilization over time",
            "queue.svg" => "queue length over time",
            "wait_cdf.svg" => "wait-time CDF",
            "bsld_size.svg" => "mean bounded slowdown by job size",
            _ => "mean bounded slowdown by runtime",
        };
        figure(
            &path,
            &format!("{title}: {what}"),
            panels.len(),
            |k, area| {
                let panel = &panels[k];
                match name {
                    "utilization.svg" | "queue.svg" => {
                        let util = name == "utilization.svg";
                        let lines: Vec<(String, Vec<(f64, f64)>)> = panel
                            .series
                            .iter()
                            .map(|s| {
                                let pts = over_time(&s.jobs, s.procs, 400)
                                    .into_iter()
                                    .map(|(t, u, q)| (t / per, if util { u * 100.0 } else { q }))
                                    .collect();
                                (s.name.clone(), pts)
                            })
                            .collect();
                        let y = if util {
                            "utilization (%)"
                        } else {
                            "jobs waiting (mean)"
                        };
                        line_chart(
                            area,
                            &panel.title,
                            (&format!("time since the first submission ({unit})"), y),
                            (xmax, util.then_some(100.0)),
                            &lines,
                        )
                    }
                    "wait_cdf.svg" => {
                        let lines: Vec<(String, Vec<(f64, f64)>)> = panel
                            .series
                            .iter()
                            .map(|s| (s.name.clone(), wait_cdf(&s.jobs, 400)))
                            .collect();
                        cdf_chart(area, &panel.title, &lines)
                    }
                    _ => {
                        let (classes, key): (&[(&str, i64)], ClassKey) = if name == "bsld_size.svg"
                        {
                            (&SIZE_CLASSES, |j| i64::from(j.procs))
                        } else {
                            (&RUNTIME_CLASSES, |j| j.end - j.start)
                        };
                        let by_class: Vec<Vec<(f64, u64)>> = panel
                            .series
                            .iter()
                            .map(|s| bsld_by_class(&s.jobs, classes, key))
                            .collect();
                        // A class no run has a job in (257+ processors on a 100-processor
                        // machine) is left out rather than drawn empty.
                        let kept: Vec<usize> = (0..classes.len())
                            .filter(|&c| by_class.iter().any(|v| v[c].1 > 0))
                            .collect();
                        let bars: Vec<(String, Vec<f64>)> = panel
                            .series
                            .iter()
                            .zip(&by_class)
                            .map(|(s, v)| (s.name.clone(), kept.iter().map(|&c| v[c].0).collect()))
                            .collect();
                        let labels: Vec<String> =
                            kept.iter().map(|&c| classes[c].0.to_string()).collect();
                        let x = if name == "bsld_size.svg" {
                            "processors"
                        } else {
                            "runtime"
                        };
                        bar_chart(
                            area,
                            &panel.title,
                            (x, "mean bounded slowdown"),
                            &labels,
                            &bars,
                        )
                    }
                }
            },
        )?;
        written.push(path);
    }
    Ok(written)
}

/// The sweep's comparison figure: one panel per figure of merit (mean bounded slowdown and
/// mean wait on log scales, utilization), one row per run's options, one bar per trace.
pub fn write_sweep_figure(path: &Path, rows: &[SweepRow]) -> Result<(), PlotError> {
    let mut labels: Vec<String> = Vec::new();
    let mut traces: Vec<String> = Vec::new();
    for r in rows {
        if !labels.contains(&r.label()) {
            labels.push(r.label());
        }
        if !traces.contains(&r.trace) {
            traces.push(r.trace.clone());
        }
    }
    type Metric = fn(&SweepRow) -> f64;
    let metrics: [(&str, Metric, Scale); 3] = [
        ("mean bounded slowdown (log)", |r| r.mean_bsld, Scale::Log),
        ("mean wait (s, log)", |r| r.mean_wait, Scale::Log),
        (
            "utilization (%)",
            |r| r.utilization * 100.0,
            Scale::Linear { max: Some(100.0) },
        ),
    ];
    // Room for every bar, and for the legend strip under the panels (one trace per entry).
    let height = 120
        + 14 * (labels.len() * traces.len()).max(1) as u32
        + 8 * labels.len() as u32
        + 22 * traces.len().div_ceil(2) as u32;
    let label_width = 20 + 7 * labels.iter().map(|l| l.chars().count()).max().unwrap_or(0) as u32;
    figure_sized(
        path,
        "sweep",
        metrics.len(),
        (PANEL.0 + label_width, height.max(PANEL.1)),
        |k, area| {
            let (name, f, scale) = metrics[k];
            let bars: Vec<(String, Vec<f64>)> = traces
                .iter()
                .map(|t| {
                    let short = Path::new(t)
                        .file_name()
                        .map_or(t.clone(), |n| n.to_string_lossy().into_owned());
                    let v = labels
                        .iter()
                        .map(|l| {
                            rows.iter()
                                .find(|r| &r.trace == t && &r.label() == l)
                                .map_or(0.0, f)
                        })
                        .collect();
                    (short, v)
                })
                .collect();
            hbar_chart(area, name, &labels, label_width, &bars, scale)
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(submit: i64, start: i64, end: i64, procs: u32) -> Span {
        Span {
            submit,
            start,
            end,
            procs,
        }
    }

    /// Every `<text>` of an SVG file as (y, text).
    fn texts(path: &Path) -> Vec<(f64, String)> {
        let svg = std::fs::read_to_string(path).expect("written");
        svg.split("<text")
            .skip(1)
            .map(|t| {
                let y = t.split("y=\"").nth(1).and_then(|r| r.split('"').next());
                let body = t.split('>').nth(1).and_then(|r| r.split("</text").next());
                (
                    y.and_then(|y| y.parse().ok()).expect("a y"),
                    body.expect("a body").trim().to_string(),
                )
            })
            .collect()
    }

    /// A tick label with a needless decimal: `50.0`, `10000000.0`.
    fn needless_decimal(t: &str) -> bool {
        t.strip_suffix(".0")
            .is_some_and(|i| !i.is_empty() && i.chars().all(|c| c.is_ascii_digit()))
    }

    /// The defects of the first figures, on a 100-processor machine run by two policies:
    /// legends under the panels, never over data; ticks without needless decimals;
    /// utilization up to 100 % and not past it; no size class the machine cannot hold.
    #[test]
    fn run_figures_are_fit_for_a_paper() {
        let w = crate::Workload::synthetic(400, 100, 0.9, 3);
        let dir = tempfile::tempdir().expect("tempdir");
        let policies = [
            ("fcfs", foresight_core::Policy::fcfs()),
            ("easy", foresight_core::Policy::easy()),
        ];
        let series = policies
            .iter()
            .map(|(name, policy)| {
                let out = crate::simulate(&w, 100, policy, crate::Semantics::Default, &mut |_| {})
                    .expect("runs");
                Series {
                    name: (*name).into(),
                    procs: 100,
                    jobs: out.outcomes.iter().map(Span::from).collect(),
                }
            })
            .collect();
        let panel = Panel {
            title: "synthetic, 100 processors".into(),
            series,
        };
        write_run_figures(dir.path(), "sim run", &[panel]).expect("written");
        for name in RUN_FIGURES {
            let texts = texts(&dir.path().join(name));
            let bad: Vec<&String> = texts
                .iter()
                .map(|(_, t)| t)
                .filter(|t| needless_decimal(t))
                .collect();
            assert!(bad.is_empty(), "{name}: {bad:?}");
            // The axis description is the lowest text of the panel proper; the legend's
            // entries lie below it.
            let axis = texts
                .iter()
                .filter(|(_, t)| {
                    t.starts_with("time since")
                        || t.starts_with("wait (s")
                        || t == "processors"
                        || t == "runtime"
                })
                .map(|(y, _)| *y)
                .next()
                .unwrap_or_else(|| panic!("{name}: no x axis description in {texts:?}"));
            for series in ["fcfs", "easy"] {
                let y = texts
                    .iter()
                    .find(|(_, t)| t == series)
                    .map(|(y, _)| *y)
                    .unwrap_or_else(|| panic!("{name}: no legend entry {series}"));
                assert!(
                    y > axis,
                    "{name}: legend entry {series} at {y}, over the panel"
                );
            }
        }
        let util = texts(&dir.path().join("utilization.svg"));
        let top = util
            .iter()
            .filter_map(|(_, t)| t.parse::<f64>().ok())
            .fold(0.0, f64::max);
        assert_eq!(top, 100.0, "{util:?}");
        let size = texts(&dir.path().join("bsld_size.svg"));
        // Jobs of 1 to 64 processors only: no empty bar for the larger classes.
        assert!(size.iter().any(|(_, t)| t == "17–64"), "{size:?}");
        assert!(
            !size.iter().any(|(_, t)| t == "65–256" || t == "257+"),
            "{size:?}"
        );
    }

    /// The sweep's log axes read as powers of ten, its legend lies under the panels, and
    /// its utilization axis ends at 100 %.
    #[test]
    fn the_sweep_figure_is_fit_for_a_paper() {
        let row = |trace: &str, policy: &str, bsld: f64, wait: f64, util: f64| SweepRow {
            trace: trace.into(),
            procs: 128,
            policy: policy.into(),
            backfill: "none".into(),
            order: "fcfs".into(),
            semantics: "default".into(),
            load: 1.0,
            jobs: 10,
            mean_wait: wait,
            mean_response: wait,
            mean_slowdown: bsld,
            mean_bsld: bsld,
            max_wait: 0,
            utilization: util,
            makespan: 0,
        };
        let rows = [
            row("/data/a.swf", "fcfs", 4000.0, 3.0e7, 0.7),
            row("/data/a.swf", "easy", 90.0, 2.0e4, 0.8),
            row("/data/b.swf", "fcfs", 30.0, 5.0e3, 0.5),
            row("/data/b.swf", "easy", 2.0, 40.0, 0.55),
        ];
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sweep.svg");
        write_sweep_figure(&path, &rows).expect("written");
        let texts = texts(&path);
        let bad: Vec<&String> = texts
            .iter()
            .map(|(_, t)| t)
            .filter(|t| needless_decimal(t))
            .collect();
        assert!(bad.is_empty(), "{bad:?}");
        assert!(texts.iter().any(|(_, t)| t == "10⁷"), "{texts:?}");
        let axis = texts
            .iter()
            .filter(|(_, t)| t == "utilization (%)")
            .map(|(y, _)| *y)
            .fold(0.0, f64::max);
        for trace in ["a.swf", "b.swf"] {
            let ys: Vec<f64> = texts
                .iter()
                .filter(|(_, t)| t == trace)
                .map(|(y, _)| *y)
                .collect();
            assert!(
                !ys.is_empty() && ys.iter().all(|&y| y > axis),
                "{trace}: {ys:?}"
            );
        }
        // The utilization panel is drawn last: its ticks follow its caption.
        let caption = texts
            .iter()
            .position(|(_, t)| t == "utilization (%)")
            .expect("a utilization panel");
        let top = texts[caption..]
            .iter()
            .filter_map(|(_, t)| t.parse::<f64>().ok())
            .fold(0.0, f64::max);
        assert_eq!(top, 100.0, "{texts:?}");
    }

    #[test]
    fn utilization_and_queue_are_time_weighted_means_per_bucket() {
        // 4 processors, 0..100 s. Job a: 2 procs 0..100; job b: submitted at 0, waits until
        // 50, then 2 procs 50..100.
        let jobs = [span(0, 0, 100, 2), span(0, 50, 100, 2)];
        let s = over_time(&jobs, 4, 4);
        assert_eq!(s.len(), 4);
        let want = [
            (0.0, 0.5, 1.0),
            (25.0, 0.5, 1.0),
            (50.0, 1.0, 0.0),
            (75.0, 1.0, 0.0),
        ];
        for (got, want) in s.iter().zip(want) {
            assert!((got.0 - want.0).abs() < 1e-9, "{s:?}");
            assert!((got.1 - want.1).abs() < 1e-9, "{s:?}");
            assert!((got.2 - want.2).abs() < 1e-9, "{s:?}");
        }
        // A change inside a bucket: busy 0..30 of a 0..100 bucket is 30 %.
        let s = over_time(&[span(0, 0, 30, 4), span(0, 99, 100, 1)], 4, 1);
        assert!((s[0].1 - (4.0 * 30.0 + 1.0) / 400.0).abs() < 1e-9, "{s:?}");
        assert!((s[0].2 - 0.99).abs() < 1e-9, "{s:?}");
    }

    #[test]
    fn the_mean_utilization_over_buckets_is_the_run_utilization() {
        let w = crate::Workload::synthetic(500, 32, 0.8, 7);
        let out = crate::simulate(
            &w,
            32,
            &foresight_core::Policy::easy(),
            crate::Semantics::Default,
            &mut |_| {},
        )
        .expect("runs");
        let jobs: Vec<Span> = out.outcomes.iter().map(Span::from).collect();
        for buckets in [1, 7, 400] {
            let s = over_time(&jobs, 32, buckets);
            let mean = s.iter().map(|p| p.1).sum::<f64>() / s.len() as f64;
            assert!(
                (mean - out.metrics.utilization).abs() < 1e-9,
                "{buckets}: {mean} vs {}",
                out.metrics.utilization
            );
        }
    }

    #[test]
    fn the_cdf_rises_to_one_over_the_sorted_waits() {
        let jobs: Vec<Span> = [5, 0, 10, 0]
            .iter()
            .map(|&w| span(0, w, w + 1, 1))
            .collect();
        assert_eq!(
            wait_cdf(&jobs, 100),
            vec![(0.0, 0.25), (0.0, 0.5), (5.0, 0.75), (10.0, 1.0)]
        );
        assert_eq!(wait_cdf(&jobs, 2), vec![(0.0, 0.5), (10.0, 1.0)]);
        assert!(wait_cdf(&[], 10).is_empty());
    }

    #[test]
    fn bounded_slowdown_falls_in_the_right_classes() {
        // 1 proc, waited 10, ran 5 (τ: bsld = 15/10); 3 procs, waited 0, ran 100 (1);
        // 3 procs, waited 100, ran 100 (2).
        let jobs = [span(0, 10, 15, 1), span(0, 0, 100, 3), span(0, 100, 200, 3)];
        let by_size = bsld_by_class(&jobs, &SIZE_CLASSES, |j| i64::from(j.procs));
        assert_eq!(by_size[0], (1.5, 1));
        assert_eq!(by_size[1], (1.5, 2));
        assert!(by_size[2..].iter().all(|&c| c == (0.0, 0)));
        let by_runtime = bsld_by_class(&jobs, &RUNTIME_CLASSES, |j| j.end - j.start);
        assert_eq!(by_runtime[0], (1.5, 1));
        assert_eq!(by_runtime[1], (1.5, 2));
    }
}
