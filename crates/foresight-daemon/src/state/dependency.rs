//! Where a job's dependency (`--dependency`) stands: met, still waiting, or never to be met,
//! with the reason in Slurm's words. One verdict for a site's own gate (the jobs it names are
//! this site's records) and for the dispatchers (their states are read from the shared queue),
//! so that the two cannot word or decide it differently.

use crate::state::stored::ToApi;
use foresight_api::{combine, DependencyVerdict};
use foresight_store::DependencyRecord;
use foresight_store::{DependencyKind, JobState};

/// A job a dependency names, as the caller knows it.
pub(crate) struct Named {
    pub state: JobState,
    /// Whether it has ever started (`after` holds once it has).
    pub started: bool,
    /// How the reason names it (an array task reads `7_3`).
    pub label: String,
    /// Where the copy of its outputs stands: a completed job's outputs are part of its
    /// result, so `afterok`, `afterany` and `afternotok` wait for the copy to end, and a
    /// failed copy counts as not ok.
    pub outputs: OutputCopy,
}

/// Where the copy of a job's outputs stands, as one dependant reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum OutputCopy {
    /// Nothing to copy, or the copy is done (or not known to the caller), or what failed
    /// was another dependant's edge files.
    #[default]
    Done,
    /// Running, copying what is named: `its outputs to a`, or, where the dependant is a
    /// workflow successor whose edge has files in the copy, `the files of edge A -> B to b`.
    Running(String),
    /// Failed: what failed and why (`its outputs failed: …`, or the dependant's edge's
    /// files: `an edge's files failed: edge A -> B, file F: …`).
    Failed(String),
}

impl OutputCopy {
    /// The copy recorded on `j`, as job `dependant` reads it.
    pub(crate) fn of(j: &foresight_store::JobRecord, dependant: u64) -> OutputCopy {
        OutputCopy::from_record(j.output_staging.as_ref(), dependant)
    }

    /// The copy a job's `output_staging` records (`None`: nothing to copy), as job
    /// `dependant` reads it, wherever the job runs: a dispatcher reads it from the shared
    /// store, as its site wrote it. A failure of the job's own outputs fails every
    /// dependant; a failure of an edge's files only that edge's successor.
    pub(crate) fn from_record(
        s: Option<&foresight_store::StagingRecord>,
        dependant: u64,
    ) -> OutputCopy {
        let Some(s) = s else {
            return OutputCopy::Done;
        };
        let edge = s.edges.iter().find(|e| e.job == dependant);
        if s.ended_at.is_none() {
            return OutputCopy::Running(match edge {
                Some(e) => format!("the files of {} to {}", e.label, e.cluster),
                None => format!("its outputs to {}", s.cluster),
            });
        }
        if let Some(e) = &s.error {
            return OutputCopy::Failed(format!("its outputs failed: {e}"));
        }
        match edge.and_then(|e| e.error.as_ref()) {
            Some(e) => OutputCopy::Failed(format!("an edge's files failed: {e}")),
            None => OutputCopy::Done,
        }
    }
}

/// How `kind` stands on job `n`, and how the reason says why.
fn on_job(kind: DependencyKind, n: &Named) -> (DependencyVerdict, String) {
    let plain = || {
        (
            kind.to_api().verdict(n.state.to_api(), n.started),
            format!("job {} is {}", n.label, n.state),
        )
    };
    if kind == DependencyKind::After || !n.state.is_final() {
        return plain();
    }
    match &n.outputs {
        OutputCopy::Done => plain(),
        OutputCopy::Running(what) => (
            DependencyVerdict::Wait,
            format!("job {} is copying {what}", n.label),
        ),
        OutputCopy::Failed(what) => (
            kind.to_api()
                .verdict(foresight_api::JobState::Failed, n.started),
            format!("job {} completed but copying {what}", n.label),
        ),
    }
}

/// The verdict on `d` and the reason it waits or can never hold. `named` looks a job up by
/// id (`None`: it is gone). `singleton` is the verdict on the job's `singleton` turn and why
/// it waits, where the caller decides singletons; it joins the other terms as one of them.
pub(crate) fn dependency_verdict(
    d: &DependencyRecord,
    named: impl Fn(u64) -> Option<Named>,
    singleton: Option<(DependencyVerdict, Option<String>)>,
) -> (DependencyVerdict, String) {
    let mut verdicts = Vec::new();
    let mut why_wait = None;
    let mut why_never = Vec::new();
    for c in &d.on {
        let per_job: Vec<(DependencyVerdict, String)> = c
            .jobs
            .iter()
            .map(|&id| match named(id) {
                Some(n) => on_job(c.kind, &n),
                None => (DependencyVerdict::Never, format!("job {id} is gone")),
            })
            .collect();
        let v = combine(false, per_job.iter().map(|p| p.0));
        let detail = per_job
            .iter()
            .find(|p| p.0 == v)
            .map_or(String::new(), |p| p.1.clone());
        let term = format!("{}:{}", c.kind.as_str(), c.target);
        match v {
            DependencyVerdict::Wait if why_wait.is_none() => {
                why_wait = Some(format!("{term} ({detail})"))
            }
            DependencyVerdict::Never => why_never.push(format!("{term} ({detail})")),
            _ => {}
        }
        verdicts.push(v);
    }
    let mut singleton_wait = None;
    if let Some((v, why)) = singleton {
        verdicts.push(v);
        singleton_wait = why;
    }
    match combine(d.any, verdicts) {
        DependencyVerdict::Never => (
            DependencyVerdict::Never,
            format!(
                "DependencyNeverSatisfied: {} can never hold ({})",
                d.text,
                why_never.join(", ")
            ),
        ),
        DependencyVerdict::Wait => (
            DependencyVerdict::Wait,
            format!(
                "Dependency: waiting for {}",
                why_wait.or(singleton_wait).unwrap_or_default()
            ),
        ),
        DependencyVerdict::Met => (DependencyVerdict::Met, String::new()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use foresight_store::ConditionRecord;
    use std::collections::BTreeMap;

    fn dep(any: bool, on: &[(DependencyKind, &[u64])]) -> DependencyRecord {
        DependencyRecord {
            text: "t".into(),
            any,
            singleton: false,
            on: on
                .iter()
                .map(|(kind, jobs)| ConditionRecord {
                    kind: *kind,
                    target: jobs[0].to_string(),
                    jobs: jobs.to_vec(),
                })
                .collect(),
        }
    }

    #[test]
    fn a_dependency_holds_waits_or_never_holds_by_the_states_of_the_jobs_it_names() {
        use DependencyKind::*;
        let states: BTreeMap<u64, (JobState, bool)> = [
            (1, (JobState::Completed, true)),
            (2, (JobState::Running, true)),
            (3, (JobState::Failed, true)),
            (4, (JobState::Pending, false)),
        ]
        .into_iter()
        .collect();
        struct Case {
            name: &'static str,
            d: DependencyRecord,
            want: DependencyVerdict,
            why: &'static str,
        }
        let cases = [
            Case {
                name: "afterok on a completed job",
                d: dep(false, &[(AfterOk, &[1])]),
                want: DependencyVerdict::Met,
                why: "",
            },
            Case {
                name: "afterok on a running job",
                d: dep(false, &[(AfterOk, &[2])]),
                want: DependencyVerdict::Wait,
                why: "Dependency: waiting for afterok:2 (job 2 is running)",
            },
            Case {
                name: "after a job has started",
                d: dep(false, &[(After, &[2])]),
                want: DependencyVerdict::Met,
                why: "",
            },
            Case {
                name: "afterok on a failed job",
                d: dep(false, &[(AfterOk, &[3])]),
                want: DependencyVerdict::Never,
                why: "DependencyNeverSatisfied: t can never hold (afterok:3 (job 3 is failed))",
            },
            Case {
                name: "a job gone",
                d: dep(false, &[(AfterAny, &[9])]),
                want: DependencyVerdict::Never,
                why: "DependencyNeverSatisfied: t can never hold (afterany:9 (job 9 is gone))",
            },
            Case {
                name: "every task of an array",
                d: dep(false, &[(AfterOk, &[1, 4])]),
                want: DependencyVerdict::Wait,
                why: "Dependency: waiting for afterok:1 (job 4 is pending)",
            },
            Case {
                name: "one of two is enough (?)",
                d: dep(true, &[(AfterOk, &[3]), (AfterNotOk, &[3])]),
                want: DependencyVerdict::Met,
                why: "",
            },
        ];
        for c in cases {
            let named = |id| {
                states.get(&id).map(|&(state, started)| Named {
                    state,
                    started,
                    label: id.to_string(),
                    outputs: OutputCopy::Done,
                })
            };
            let (v, why) = dependency_verdict(&c.d, named, None);
            assert_eq!(v, c.want, "{}", c.name);
            assert_eq!(why, c.why, "{}", c.name);
        }
    }

    #[test]
    fn a_completed_jobs_output_copy_is_waited_for_and_a_failed_one_is_not_ok() {
        use DependencyKind::*;
        let completed = |outputs: OutputCopy| {
            move |_| {
                Some(Named {
                    state: JobState::Completed,
                    started: true,
                    label: "1".into(),
                    outputs: outputs.clone(),
                })
            }
        };
        let running = OutputCopy::Running("its outputs to a".into());
        let failed = OutputCopy::Failed("its outputs failed: copying /w/r.txt: gone".into());
        for (kind, copy, want, why) in [
            (
                AfterOk,
                running.clone(),
                DependencyVerdict::Wait,
                "Dependency: waiting for afterok:1 (job 1 is copying its outputs to a)",
            ),
            (
                AfterAny,
                running.clone(),
                DependencyVerdict::Wait,
                "Dependency: waiting for afterany:1 (job 1 is copying its outputs to a)",
            ),
            (
                AfterNotOk,
                running.clone(),
                DependencyVerdict::Wait,
                "Dependency: waiting for afternotok:1 (job 1 is copying its outputs to a)",
            ),
            (After, running, DependencyVerdict::Met, ""),
            (
                AfterOk,
                failed.clone(),
                DependencyVerdict::Never,
                "DependencyNeverSatisfied: t can never hold (afterok:1 (job 1 completed but \
              copying its outputs failed: copying /w/r.txt: gone))",
            ),
            (AfterAny, failed.clone(), DependencyVerdict::Met, ""),
            (AfterNotOk, failed, DependencyVerdict::Met, ""),
            (AfterOk, OutputCopy::Done, DependencyVerdict::Met, ""),
            (
                AfterNotOk,
                OutputCopy::Done,
                DependencyVerdict::Never,
                "DependencyNeverSatisfied: t can never hold (afternotok:1 (job 1 is completed))",
            ),
        ] {
            let d = dep(false, &[(kind, &[1])]);
            let (v, reason) = dependency_verdict(&d, completed(copy.clone()), None);
            assert_eq!((v, reason.as_str()), (want, why), "{kind:?} with {copy:?}");
        }
    }

    /// A workflow successor reads the copy by its own edge: it waits for the edge's files,
    /// saying so, and only a failure of its own edge's files, or of the job's own outputs,
    /// fails it.
    #[test]
    fn a_successor_reads_the_copy_by_its_own_edge() {
        use foresight_store::{EdgeCopyRecord, StagingRecord};
        let edge = |label: &str, job, error: Option<&str>| EdgeCopyRecord {
            label: label.into(),
            job,
            cluster: "b".into(),
            error: error.map(Into::into),
        };
        let mut s = StagingRecord {
            cluster: "home,b".into(),
            edges: vec![
                edge("edge A -> B", 2, None),
                edge("edge A -> C", 3, Some("edge A -> C, file x: gone")),
            ],
            ..Default::default()
        };
        let read = |s: &StagingRecord, job| OutputCopy::from_record(Some(s), job);
        assert_eq!(
            read(&s, 2),
            OutputCopy::Running("the files of edge A -> B to b".into())
        );
        assert_eq!(
            read(&s, 4),
            OutputCopy::Running("its outputs to home,b".into())
        );
        s.ended_at = Some(1);
        assert_eq!(read(&s, 2), OutputCopy::Done);
        assert_eq!(read(&s, 4), OutputCopy::Done);
        assert_eq!(
            read(&s, 3),
            OutputCopy::Failed("an edge's files failed: edge A -> C, file x: gone".into())
        );
        s.error = Some("copying /w/r: gone".into());
        for job in [2, 3, 4] {
            assert_eq!(
                read(&s, job),
                OutputCopy::Failed("its outputs failed: copying /w/r: gone".into()),
                "{job}"
            );
        }
    }
}
