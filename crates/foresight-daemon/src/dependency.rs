//! Where a job's dependency (`--dependency`) stands: met, still waiting, or never to be met,
//! with the reason in Slurm's words. One verdict for a site's own gate (the jobs it names are
//! this site's records) and for the dispatchers (their states are read from the shared queue),
//! so that the two cannot word or decide it differently.

use foresight_api::{combine, DependencyKind, DependencyVerdict, JobState};
use foresight_store::DependencyRecord;

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

/// Where the copy of a job's outputs stands, as a dependency reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum OutputCopy {
    /// Nothing to copy, or the copy is done (or not known to the caller).
    #[default]
    Done,
    /// Running, to the places named.
    Running(String),
    /// Failed, with the error.
    Failed(String),
}

impl OutputCopy {
    /// The copy recorded on `j`.
    pub(crate) fn of(j: &foresight_store::JobRecord) -> OutputCopy {
        OutputCopy::from_record(j.output_staging.as_ref())
    }

    /// The copy a job's `output_staging` records (`None`: nothing to copy), wherever the
    /// job runs: a dispatcher reads it from the shared store, as its site wrote it.
    pub(crate) fn from_record(s: Option<&foresight_store::StagingRecord>) -> OutputCopy {
        match s {
            Some(s) if s.ended_at.is_none() => OutputCopy::Running(s.cluster.clone()),
            Some(s) => s.error.clone().map_or(OutputCopy::Done, OutputCopy::Failed),
            None => OutputCopy::Done,
        }
    }
}

/// How `kind` stands on job `n`, and how the reason says why.
fn on_job(kind: DependencyKind, n: &Named) -> (DependencyVerdict, String) {
    let plain = || {
        (
            kind.verdict(n.state, n.started),
            format!("job {} is {}", n.label, n.state),
        )
    };
    if kind == DependencyKind::After || !n.state.is_final() {
        return plain();
    }
    match &n.outputs {
        OutputCopy::Done => plain(),
        OutputCopy::Running(to) => (
            DependencyVerdict::Wait,
            format!("job {} is copying its outputs to {to}", n.label),
        ),
        OutputCopy::Failed(e) => (
            kind.verdict(JobState::Failed, n.started),
            format!(
                "job {} completed but copying its outputs failed: {e}",
                n.label
            ),
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
        let running = OutputCopy::Running("a".into());
        let failed = OutputCopy::Failed("copying /w/r.txt: gone".into());
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
}
