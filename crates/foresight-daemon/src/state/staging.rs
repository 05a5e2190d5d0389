//! Staging planned: which input files a part needs copied before it starts, where each
//! output goes back to, and the sizes the planner weighs ([`input_mb`], [`data_cluster`]).
//! The copies themselves are made by `runtime::staging`, outside the world's lock.
//!
//! Input files live on a cluster (or on the service's host); a part on any other cluster
//! gets them copied into its working directory before it starts. Outputs (relative to the
//! working directory) come back from the cluster a job ran on to the output's cluster.

use crate::state::refusal::Refusal;
use foresight_api::OutputSpec;
use foresight_store::{InputRecord, JobRecord, OutputRecord};
use std::path::{Path, PathBuf};

/// Bytes in the MB that link bandwidths (`bandwidth_mb_s`) count in.
pub const BYTES_PER_MB: f64 = 1_000_000.0;

/// Most input files one job may name.
pub(crate) const MAX_INPUTS: usize = 256;

/// One file to copy before a part starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Copy {
    /// The input file, on the cluster that holds it.
    pub from: PathBuf,
    /// Its place in the job's working directory on the cluster the part runs on.
    pub to: PathBuf,
    /// The most bytes this service reads of it into a directory of its own (a site's
    /// outbox): an input's size at submission, which the planner set the transfer's time
    /// by, so that a FIFO or a link to `/dev/zero` put in its place cannot fill the
    /// service's disk. `None` for a file this service made itself (a workflow edge's copy).
    pub most: Option<u64>,
}

/// Checks the output files a submission names: each path must be relative to the working
/// directory and stay under it (not empty, not absolute, no `..`), and its cluster, when
/// named, must be known.
pub fn check_outputs(
    outputs: Vec<OutputSpec>,
    known: impl Fn(&str) -> bool,
) -> Result<Vec<OutputRecord>, Refusal> {
    if outputs.len() > MAX_INPUTS {
        return Err(Refusal::invalid(
            "outputs",
            format!("at most {MAX_INPUTS} output files, got {}", outputs.len()),
        ));
    }
    let mut out = Vec::with_capacity(outputs.len());
    for o in outputs {
        let bad = |why: &str| Refusal::invalid("outputs", format!("output {:?}: {why}", o.path));
        if o.path.is_empty() {
            return Err(bad(
                "is empty: name a file relative to the working directory",
            ));
        }
        if o.path.contains('\0') {
            return Err(bad("contains a NUL byte"));
        }
        let path = Path::new(&o.path);
        if path.is_absolute() {
            return Err(bad("must be relative to the job's working directory"));
        }
        if path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(bad(
                "must stay under the job's working directory (no \"..\")",
            ));
        }
        if path.file_name().is_none() {
            return Err(bad("names no file"));
        }
        if let Some(c) = &o.cluster {
            if !known(c) {
                return Err(bad(&format!("unknown cluster {c:?}")));
            }
        }
        out.push(OutputRecord {
            path: o.path,
            cluster: o.cluster,
        });
    }
    Ok(out)
}

/// Where an output of `j` is copied to: its own cluster, or where the job was submitted
/// (a local job's cluster), or its data's cluster; `None`: the service's own host, that
/// is, the working directory the job names.
pub fn output_home(j: &JobRecord, output: &OutputRecord) -> Option<String> {
    output
        .cluster
        .clone()
        .or_else(|| j.cluster.clone())
        .or_else(|| data_cluster(j))
}

/// One output to bring back: the file at the same relative path under each working
/// directory the job's parts ran in (`from`: one for most jobs, several for a job
/// co-allocated over clusters that do not share them), copied from the one that has it to
/// `to`. The part that wrote it is found when the copy runs: none, or two, is an error
/// naming the output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputFetch {
    /// The output's path, as the job named it.
    pub path: String,
    /// Where it may be, one place per distinct working directory, in part order.
    pub from: Vec<PathBuf>,
    /// Its place in the working directory on the output's cluster.
    pub to: PathBuf,
    /// What the file is where it is more than one of the job's outputs: a workflow edge's
    /// file is labelled with its edge (`edge A -> B`). A labelled file's error starts with
    /// its label and path, and a failure stops only the fetches of the same label.
    pub label: Option<String>,
}

/// Files a part that ran at a site on another host sends up to the centre before its
/// job's outputs are copied: the part's cluster (its name here), its attempt, and the files'
/// paths relative to its working directory there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upload {
    /// The cluster, by its name at the centre.
    pub cluster: String,
    /// The part's attempt.
    pub attempt: u32,
    /// Where the files land at the centre: `World::uploads_of`.
    pub dir: PathBuf,
    /// The files, relative to the part's working directory at the site.
    pub files: Vec<String>,
}

/// A failed part of an output copy: the label of the fetches that failed (`None`: the job's
/// own outputs) and why, naming the label, the file and the cause.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchFailure {
    /// The label of the fetch that failed, as [`OutputFetch::label`].
    pub label: Option<String>,
    /// The error.
    pub error: String,
}

/// The fetch of `output` from working directories `dirs` (one per part, distinct) to
/// working directory `to`: the same relative path under each (none when the job ran only
/// in `to` itself).
pub fn output_fetch(output: &OutputRecord, dirs: &[PathBuf], to: &Path) -> Option<OutputFetch> {
    if dirs.iter().all(|d| d == to) {
        return None;
    }
    Some(OutputFetch {
        path: output.path.clone(),
        from: dirs.iter().map(|d| d.join(&output.path)).collect(),
        to: to.join(&output.path),
        label: None,
    })
}

pub(crate) fn file_name(p: &Path) -> Option<String> {
    p.file_name().map(|n| n.to_string_lossy().into_owned())
}

/// The cluster where an input of `j` lives: its own, or, when it names none, where the
/// job was submitted (a local job's cluster; `None` for a global job of the central
/// service, whose inputs are on the service's host).
fn home_of<'a>(j: &'a JobRecord, input: &'a InputRecord) -> Option<&'a str> {
    input.cluster.as_deref().or(j.cluster.as_deref())
}

/// The cluster holding most of a job's input bytes (ties: the first named), if any: the
/// planner's data cluster, from which every other cluster stages.
pub fn data_cluster(j: &JobRecord) -> Option<String> {
    let mut by: Vec<(&str, u64)> = Vec::new();
    for i in &j.inputs {
        let Some(c) = home_of(j, i) else { continue };
        match by.iter_mut().find(|(n, _)| *n == c) {
            Some(e) => e.1 += i.bytes,
            None => by.push((c, i.bytes)),
        }
    }
    let best = by.iter().map(|e| e.1).max()?;
    by.into_iter()
        .find(|e| e.1 == best)
        .map(|e| e.0.to_string())
}

/// The job's input size in MB, as the planner weighs transfers.
pub fn input_mb(j: &JobRecord) -> f64 {
    j.inputs.iter().map(|i| i.bytes as f64).sum::<f64>() / BYTES_PER_MB
}

/// The copies a part of `j` on `cluster` needs before it starts, into `cwd`: every input
/// that lives elsewhere and is not already that very file.
pub fn copies(j: &JobRecord, cluster: &str, cwd: &Path) -> Vec<Copy> {
    j.inputs
        .iter()
        .filter(|i| home_of(j, i) != Some(cluster))
        .filter_map(|i| {
            let from = PathBuf::from(&i.path);
            let to = cwd.join(file_name(&from)?);
            (to != from).then_some(Copy {
                from,
                to,
                most: Some(i.bytes),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(path: &str, cluster: Option<&str>, bytes: u64) -> InputRecord {
        InputRecord {
            path: path.into(),
            cluster: cluster.map(Into::into),
            site: None,
            bytes,
        }
    }

    #[test]
    fn the_data_cluster_holds_most_bytes_and_a_local_jobs_unnamed_inputs_are_on_its_cluster() {
        let mut j = JobRecord {
            inputs: vec![
                input("/a/x", Some("a"), 10),
                input("/b/y", Some("b"), 20),
                input("/c/z", None, 15),
            ],
            ..Default::default()
        };
        assert_eq!(data_cluster(&j).as_deref(), Some("b"));
        assert!((input_mb(&j) - 45e-6).abs() < 1e-12);
        // A local job of a: its unnamed input is on a, which now holds 25 bytes.
        j.cluster = Some("a".into());
        assert_eq!(data_cluster(&j).as_deref(), Some("a"));
        let cwd = Path::new("/w");
        let on_a = copies(&j, "a", cwd);
        assert_eq!(
            on_a,
            vec![Copy {
                from: "/b/y".into(),
                to: "/w/y".into(),
                most: Some(20),
            }]
        );
        assert_eq!(copies(&j, "c", cwd).len(), 3);
        // A file already in the working directory is not copied onto itself.
        let j = JobRecord {
            inputs: vec![input("/w/x", Some("a"), 1)],
            ..Default::default()
        };
        assert!(copies(&j, "b", cwd).is_empty());
    }

    #[test]
    fn an_output_must_stay_under_the_working_directory() {
        let spec = |p: &str, c: Option<&str>| OutputSpec {
            path: p.into(),
            cluster: c.map(Into::into),
        };
        let known = |c: &str| c == "a";
        let ok =
            check_outputs(vec![spec("out/r.txt", Some("a")), spec("./x", None)], known).unwrap();
        assert_eq!(ok[0].path, "out/r.txt");
        assert_eq!(ok[0].cluster.as_deref(), Some("a"));
        for (name, s, want) in [
            ("absolute", spec("/etc/passwd", None), "relative"),
            ("parent", spec("../x", None), "\"..\""),
            ("inner parent", spec("out/../../x", None), "\"..\""),
            ("empty", spec("", None), "empty"),
            ("dot", spec(".", None), "names no file"),
            ("nul", spec("a\0b", None), "NUL"),
            ("unknown", spec("r.txt", Some("zz")), "unknown cluster"),
        ] {
            let e = check_outputs(vec![s], known).unwrap_err();
            assert_eq!(e.field(), Some("outputs"), "{name}");
            assert!(e.to_string().contains(want), "{name}: {e}");
        }
    }

    #[test]
    fn outputs_go_home_to_the_same_relative_path_and_never_onto_themselves() {
        let mut j = JobRecord {
            inputs: vec![input("/a/x", Some("a"), 10)],
            outputs: vec![
                OutputRecord {
                    path: "out/r.txt".into(),
                    cluster: None,
                },
                OutputRecord {
                    path: "log".into(),
                    cluster: Some("c".into()),
                },
            ],
            ..Default::default()
        };
        // A global job: its data's cluster; a local job: its own cluster.
        assert_eq!(output_home(&j, &j.outputs[0]).as_deref(), Some("a"));
        assert_eq!(output_home(&j, &j.outputs[1]).as_deref(), Some("c"));
        j.cluster = Some("b".into());
        assert_eq!(output_home(&j, &j.outputs[0]).as_deref(), Some("b"));
        let dirs = [PathBuf::from("/s/job-1")];
        let c = output_fetch(&j.outputs[0], &dirs, Path::new("/home/u")).unwrap();
        assert_eq!(
            c,
            OutputFetch {
                path: "out/r.txt".into(),
                from: vec!["/s/job-1/out/r.txt".into()],
                to: "/home/u/out/r.txt".into(),
                label: None,
            }
        );
        assert!(output_fetch(&j.outputs[0], &["/w".into()], Path::new("/w")).is_none());
        // Parts in two directories, one of them home: the file is looked for in both.
        let two = [PathBuf::from("/w"), PathBuf::from("/s/job-1")];
        let c = output_fetch(&j.outputs[1], &two, Path::new("/w")).unwrap();
        assert_eq!(c.from, vec![PathBuf::from("/w/log"), "/s/job-1/log".into()]);
    }

    // ------------------------------------------------------------------ the copier
}
