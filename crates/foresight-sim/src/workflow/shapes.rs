//! Seeded random workflows of standard shapes.
//!
//! Synthetic shapes:
//! - `chain`: `n` tasks in a line.
//! - `fork_join`: stages of one task fanning out to `w` parallel tasks that join into the
//!   next stage's head (`w` = √n rounded, stages until `n` tasks).
//! - `layered`: layers of random width in `[1, 2√n]`; each task reads from each task of the
//!   layer above with probability 0.3 (at least one).
//!
//! Application-like shapes, after the structures of Bharathi et al. 2008 ("Characterization
//! of scientific workflows", WORKS'08) and the per-job means of Juve et al. 2013
//! ("Characterizing and profiling scientific workflows", FGCS 29(3)). The runtimes (s) and
//! output sizes (MB) below are rounded from those tables; every task draws its runtime
//! uniformly within ±50 % of its job's mean (times `runtime_scale`) and its output within
//! ±50 % of its mean (times `data_scale`):
//! - `montage` (`k` = n/4 images): k mProjectPP (1.7 s, 8 MB) → mDiffFit on neighbouring
//!   pairs, ≈ 2k (0.7 s, 0.6 MB) → mConcatFit (143 s, 1 MB) → mBgModel (384 s, 0.1 MB) →
//!   k mBackground, each also reading its projection (1.7 s, 8 MB) → mImgtbl (2.8 s,
//!   0.1 MB) → mAdd (282 s, 165 MB) → mShrink (66 s, 5 MB) → mJPEG (0.6 s).
//! - `cybershake` (`s` = max(1, n/20) sites): s ExtractSGT (110 s, 155 MB) → per site
//!   ⌊(n − 2 − s)/(2s)⌋ SeismogramSynthesis (79 s, 0.02 MB) each → PeakValCalcOkaya (0.6 s,
//!   0.01 MB); all seismograms → ZipSeis (265 s), all peak values → ZipPSA (195 s).
//! - `ligo` (`g` = max(2, n/12), max(1, n/(3g+2)) groups of 3g + 3 tasks): per group a
//!   TmpltBank (18 s, 1 MB) → g Inspiral (460 s, 0.3 MB) → Thinca (5.4 s, 0.01 MB) → g
//!   TrigBank (5.1 s, 0.01 MB) → g Inspiral (460 s) → Thinca (5.4 s).
//! - `epigenomics` (`l` = max(1, n/25) lanes, chains of `c` per lane): per lane fastQSplit
//!   (34 s, 250 MB) → c chains of filterContams (2.5 s, 12 MB) → sol2sanger (0.5 s, 12 MB) →
//!   fastq2bfq (1.4 s, 3 MB) → map (202 s, 1.5 MB) → mapMerge per lane (11 s, 15 MB); all
//!   lanes → mapMerge (11 s) → maqIndex (44 s, 60 MB) → pileup (56 s).
//!
//! The published workflows are sequential tasks; here every task takes a random number of
//! processors in `task_procs`, so that they weigh on clusters of hundreds of processors.

use foresight_core::workflow::{Edge, Task, TaskId, Workflow};
use foresight_core::Dur;
use rand::Rng;
use rand_pcg::Pcg64;
use serde::{Deserialize, Serialize};

/// A shape of workflow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// Tasks in a line.
    Chain,
    /// Fan-out / fan-in stages.
    ForkJoin,
    /// Random layered DAG.
    Layered,
    /// Montage-like (image mosaic).
    Montage,
    /// CyberShake-like (seismic hazard).
    Cybershake,
    /// LIGO-Inspiral-like (gravitational waves).
    Ligo,
    /// Epigenomics-like (genome sequencing pipeline).
    Epigenomics,
}

impl Shape {
    /// Every shape, in report order.
    pub const ALL: [Shape; 7] = [
        Shape::Chain,
        Shape::ForkJoin,
        Shape::Layered,
        Shape::Montage,
        Shape::Cybershake,
        Shape::Ligo,
        Shape::Epigenomics,
    ];

    /// The name used in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Chain => "chain",
            Shape::ForkJoin => "fork_join",
            Shape::Layered => "layered",
            Shape::Montage => "montage",
            Shape::Cybershake => "cybershake",
            Shape::Ligo => "ligo",
            Shape::Epigenomics => "epigenomics",
        }
    }
}

/// How big and heavy the generated workflows are.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShapeParams {
    /// About this many tasks (the application shapes round to their structure).
    #[serde(default = "default_tasks")]
    pub tasks: usize,
    /// Processors per task, `[min, max]`, drawn uniformly.
    #[serde(default = "default_procs")]
    pub task_procs: [u32; 2],
    /// Runtime of synthetic-shape tasks, seconds, `[min, max]`.
    #[serde(default = "default_runtime")]
    pub runtime_seconds: [i64; 2],
    /// Output of synthetic-shape tasks, MB, `[min, max]`.
    #[serde(default = "default_data")]
    pub data_mb: [f64; 2],
    /// Multiplies the application shapes' published runtimes.
    #[serde(default = "one")]
    pub runtime_scale: f64,
    /// Multiplies the application shapes' published data sizes.
    #[serde(default = "one")]
    pub data_scale: f64,
    /// The user's walltime is the runtime times this (the plan uses the runtime as the
    /// prediction, the walltime stays the kill time).
    #[serde(default = "default_overestimate")]
    pub walltime_factor: f64,
}

fn default_tasks() -> usize {
    40
}
fn default_procs() -> [u32; 2] {
    [1, 8]
}
fn default_runtime() -> [i64; 2] {
    [300, 3600]
}
fn default_data() -> [f64; 2] {
    [10.0, 2000.0]
}
fn one() -> f64 {
    1.0
}
fn default_overestimate() -> f64 {
    2.0
}

impl Default for ShapeParams {
    fn default() -> Self {
        ShapeParams {
            tasks: default_tasks(),
            task_procs: default_procs(),
            runtime_seconds: default_runtime(),
            data_mb: default_data(),
            runtime_scale: 1.0,
            data_scale: 1.0,
            walltime_factor: default_overestimate(),
        }
    }
}

impl ShapeParams {
    /// Checks ranges; the message names the key.
    pub fn check(&self) -> Result<(), String> {
        if self.tasks == 0 || self.tasks > 10_000 {
            return Err(format!(
                "workflow.tasks must be in 1..=10000, got {}",
                self.tasks
            ));
        }
        let [p0, p1] = self.task_procs;
        if p0 == 0 || p0 > p1 {
            return Err("workflow.task_procs must be [min, max] with 1 <= min <= max".into());
        }
        let [r0, r1] = self.runtime_seconds;
        if r0 <= 0 || r0 > r1 {
            return Err("workflow.runtime_seconds must be [min, max] with 0 < min <= max".into());
        }
        let [d0, d1] = self.data_mb;
        if !(d0.is_finite() && d1.is_finite() && 0.0 <= d0 && d0 <= d1) {
            return Err("workflow.data_mb must be [min, max] with 0 <= min <= max".into());
        }
        for (k, v) in [
            ("runtime_scale", self.runtime_scale),
            ("data_scale", self.data_scale),
            ("walltime_factor", self.walltime_factor),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("workflow.{k} must be positive, got {v}"));
            }
        }
        if self.walltime_factor < 1.0 {
            return Err("workflow.walltime_factor must be at least 1".into());
        }
        Ok(())
    }
}

/// Builds a workflow task by task.
struct Builder<'a> {
    p: &'a ShapeParams,
    rng: &'a mut Pcg64,
    wf: Workflow,
    /// Output size of each task, MB: every edge out of it carries it.
    out_mb: Vec<f64>,
}

impl Builder<'_> {
    /// A task of a synthetic shape: runtime and output from the configured ranges.
    fn synthetic(&mut self, name: &str) -> usize {
        let [r0, r1] = self.p.runtime_seconds;
        let runtime = self.rng.gen_range(r0..=r1);
        let [d0, d1] = self.p.data_mb;
        let out = if d1 > d0 {
            self.rng.gen_range(d0..=d1)
        } else {
            d0
        };
        self.task(name, runtime as f64, out)
    }

    /// A task of an application shape: published mean runtime and output, ±50 %, scaled.
    fn app(&mut self, name: &str, runtime: f64, out_mb: f64) -> usize {
        let r = runtime * self.p.runtime_scale * self.rng.gen_range(0.5..1.5);
        let d = out_mb * self.p.data_scale * self.rng.gen_range(0.5..1.5);
        self.task(name, r, d)
    }

    fn task(&mut self, name: &str, runtime: f64, out_mb: f64) -> usize {
        let i = self.wf.tasks.len();
        let [p0, p1] = self.p.task_procs;
        let procs = self.rng.gen_range(p0..=p1);
        let run = Dur((runtime.ceil() as i64).max(1));
        let wall = Dur(((run.as_secs() as f64) * self.p.walltime_factor).ceil() as i64);
        let mut t = Task::new(i as u32, format!("{name}{i}"), procs, wall);
        t.predicted = Some(run);
        self.wf.tasks.push(t);
        self.out_mb.push(out_mb);
        i
    }

    fn edge(&mut self, from: usize, to: usize) {
        self.wf.edges.push(Edge {
            from: TaskId(from as u32),
            to: TaskId(to as u32),
            data_mb: self.out_mb[from],
        });
    }
}

/// A workflow of `shape`, drawn from `rng`.
pub fn generate(shape: Shape, p: &ShapeParams, rng: &mut Pcg64) -> Workflow {
    let mut b = Builder {
        p,
        rng,
        wf: Workflow {
            name: shape.name().into(),
            ..Workflow::default()
        },
        out_mb: Vec::new(),
    };
    let n = p.tasks.max(1);
    let root = (n as f64).sqrt().round().max(1.0) as usize;
    match shape {
        Shape::Chain => {
            for i in 0..n {
                let t = b.synthetic("chain");
                if i > 0 {
                    b.edge(t - 1, t);
                }
            }
        }
        Shape::ForkJoin => {
            let mut head = b.synthetic("fork");
            while b.wf.tasks.len() + root < n {
                let branches: Vec<usize> = (0..root).map(|_| b.synthetic("branch")).collect();
                let join = b.synthetic("join");
                for &x in &branches {
                    b.edge(head, x);
                    b.edge(x, join);
                }
                head = join;
            }
        }
        Shape::Layered => {
            let mut above: Vec<usize> = Vec::new();
            while b.wf.tasks.len() < n {
                let width = b.rng.gen_range(1..=2 * root).min(n - b.wf.tasks.len());
                let layer: Vec<usize> = (0..width).map(|_| b.synthetic("node")).collect();
                for &x in &layer {
                    if above.is_empty() {
                        continue;
                    }
                    let mut any = false;
                    for &a in &above {
                        if b.rng.gen_bool(0.3) {
                            b.edge(a, x);
                            any = true;
                        }
                    }
                    if !any {
                        let a = above[b.rng.gen_range(0..above.len())];
                        b.edge(a, x);
                    }
                }
                above = layer;
            }
        }
        Shape::Montage => montage(&mut b, (n / 4).max(2)),
        Shape::Cybershake => {
            let sites = (n / 20).max(1);
            let per = ((n.saturating_sub(2 + sites)) / (2 * sites)).max(1);
            let zip_seis = b.app("ZipSeis", 265.0, 0.0);
            let zip_psa = b.app("ZipPSA", 195.0, 0.0);
            for _ in 0..sites {
                let sgt = b.app("ExtractSGT", 110.0, 155.0);
                for _ in 0..per {
                    let seis = b.app("SeismogramSynthesis", 79.0, 0.02);
                    let peak = b.app("PeakValCalcOkaya", 0.6, 0.01);
                    b.edge(sgt, seis);
                    b.edge(seis, peak);
                    b.edge(seis, zip_seis);
                    b.edge(peak, zip_psa);
                }
            }
        }
        Shape::Ligo => {
            let g = (n / 12).max(2);
            let groups = (n / (3 * g + 2)).max(1);
            for _ in 0..groups {
                let bank = b.app("TmpltBank", 18.0, 1.0);
                let first: Vec<usize> = (0..g).map(|_| b.app("Inspiral", 460.0, 0.3)).collect();
                let thinca = b.app("Thinca", 5.4, 0.01);
                for &x in &first {
                    b.edge(bank, x);
                    b.edge(x, thinca);
                }
                let last = b.app("Thinca", 5.4, 0.01);
                for _ in 0..g {
                    let trig = b.app("TrigBank", 5.1, 0.01);
                    let insp = b.app("Inspiral", 460.0, 0.3);
                    b.edge(thinca, trig);
                    b.edge(trig, insp);
                    b.edge(insp, last);
                }
            }
        }
        Shape::Epigenomics => {
            let lanes = (n / 25).max(1);
            let chains = ((n.saturating_sub(3)) / lanes).saturating_sub(2) / 4;
            let chains = chains.max(1);
            let merge_all = b.app("mapMerge", 11.0, 15.0);
            let index = b.app("maqIndex", 44.0, 60.0);
            let pileup = b.app("pileup", 56.0, 0.0);
            for _ in 0..lanes {
                let split = b.app("fastQSplit", 34.0, 250.0);
                let merge = b.app("mapMerge", 11.0, 15.0);
                for _ in 0..chains {
                    let f = b.app("filterContams", 2.5, 12.0);
                    let s = b.app("sol2sanger", 0.5, 12.0);
                    let q = b.app("fastq2bfq", 1.4, 3.0);
                    let m = b.app("map", 202.0, 1.5);
                    b.edge(split, f);
                    b.edge(f, s);
                    b.edge(s, q);
                    b.edge(q, m);
                    b.edge(m, merge);
                }
                b.edge(merge, merge_all);
            }
            b.edge(merge_all, index);
            b.edge(index, pileup);
        }
    }
    b.wf
}

/// Montage over `k` images (see the module doc).
fn montage(b: &mut Builder<'_>, k: usize) {
    let proj: Vec<usize> = (0..k).map(|_| b.app("mProjectPP", 1.7, 8.0)).collect();
    let concat = b.app("mConcatFit", 143.0, 1.0);
    // Overlapping neighbours: each image with the next and the one after.
    for i in 0..k {
        for j in [i + 1, i + 2] {
            if j < k {
                let d = b.app("mDiffFit", 0.7, 0.6);
                b.edge(proj[i], d);
                b.edge(proj[j], d);
                b.edge(d, concat);
            }
        }
    }
    let model = b.app("mBgModel", 384.0, 0.1);
    b.edge(concat, model);
    let tbl = b.app("mImgtbl", 2.8, 0.1);
    let add = b.app("mAdd", 282.0, 165.0);
    for &p in &proj {
        let bg = b.app("mBackground", 1.7, 8.0);
        b.edge(model, bg);
        b.edge(p, bg);
        b.edge(bg, tbl);
        b.edge(bg, add);
    }
    b.edge(tbl, add);
    let shrink = b.app("mShrink", 66.0, 5.0);
    b.edge(add, shrink);
    let jpeg = b.app("mJPEG", 0.6, 0.0);
    b.edge(shrink, jpeg);
}

#[cfg(test)]
mod tests {
    use super::*;
    use foresight_core::workflow::{Dag, GridState, Site};
    use foresight_core::Time;
    use rand::SeedableRng;

    #[test]
    fn every_shape_is_a_valid_dag_of_about_the_asked_size() {
        let p = ShapeParams::default();
        let grid = GridState {
            now: Time(0),
            horizon: Time::MAX,
            sites: vec![Site::new("a", 8)],
        };
        for shape in Shape::ALL {
            for seed in 0..5 {
                let wf = generate(shape, &p, &mut Pcg64::seed_from_u64(seed));
                let dag = Dag::new(&wf, &grid).unwrap_or_else(|e| panic!("{shape:?}: {e}"));
                let n = dag.len();
                assert!((20..=60).contains(&n), "{shape:?} has {n} tasks");
                let entries = dag.preds.iter().filter(|p| p.is_empty()).count();
                let exits = dag.succs.iter().filter(|s| s.is_empty()).count();
                match shape {
                    Shape::Chain => assert_eq!((entries, exits, wf.edges.len()), (1, 1, n - 1)),
                    Shape::ForkJoin | Shape::Montage | Shape::Epigenomics => {
                        assert_eq!(exits, 1, "{shape:?}")
                    }
                    Shape::Cybershake => assert_eq!(exits, 2),
                    _ => {}
                }
            }
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_workflow() {
        let p = ShapeParams::default();
        for shape in Shape::ALL {
            let a = generate(shape, &p, &mut Pcg64::seed_from_u64(7));
            let b = generate(shape, &p, &mut Pcg64::seed_from_u64(7));
            assert_eq!(a, b);
        }
    }
}
