//! Job dependencies as `sbatch --dependency` writes them: `afterok:12:13`, `afterany:12`,
//! `afternotok:12`, `after:12`, `singleton`; several joined by `,` (all must hold) or by
//! `?` (any one may hold), never both; `12_3` names task 3 of array job 12, `12` an array
//! job as a whole (all its tasks).

use crate::job_ref::JobRef;
use crate::JobState;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// What a job waits for in another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DependencyKind {
    /// The other job has started (or ended without starting).
    After,
    /// The other job has ended, in any state.
    AfterAny,
    /// The other job has completed (exit code 0).
    AfterOk,
    /// The other job has ended other than completed: failed, cancelled or timed out.
    AfterNotOk,
}

/// Where a dependency stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DependencyVerdict {
    /// Holds: the job may be planned.
    Met,
    /// May still hold: the job waits.
    Wait,
    /// Can never hold: the job is cancelled.
    Never,
}

impl DependencyKind {
    /// The keyword, as sbatch spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            DependencyKind::After => "after",
            DependencyKind::AfterAny => "afterany",
            DependencyKind::AfterOk => "afterok",
            DependencyKind::AfterNotOk => "afternotok",
        }
    }

    /// Whether this kind holds for a job in `state` (`started`: it has started at least once).
    pub fn verdict(self, state: JobState, started: bool) -> DependencyVerdict {
        use DependencyVerdict::*;
        match self {
            DependencyKind::After if started || state.is_final() => Met,
            DependencyKind::After => Wait,
            _ if !state.is_final() => Wait,
            DependencyKind::AfterAny => Met,
            DependencyKind::AfterOk if state == JobState::Completed => Met,
            DependencyKind::AfterOk => Never,
            DependencyKind::AfterNotOk if state == JobState::Completed => Never,
            DependencyKind::AfterNotOk => Met,
        }
    }
}

/// Joins verdicts: all must hold (`any == false`, sbatch's `,`) or one is enough (`?`).
pub fn combine(
    any: bool,
    verdicts: impl IntoIterator<Item = DependencyVerdict>,
) -> DependencyVerdict {
    use DependencyVerdict::*;
    let (mut met, mut wait, mut never) = (0, 0, 0);
    for v in verdicts {
        match v {
            Met => met += 1,
            Wait => wait += 1,
            Never => never += 1,
        }
    }
    if any {
        if met > 0 || wait + never == 0 {
            Met
        } else if wait > 0 {
            Wait
        } else {
            Never
        }
    } else if never > 0 {
        Never
    } else if wait > 0 {
        Wait
    } else {
        Met
    }
}

/// A parsed `--dependency`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dependency {
    /// Joined by `?`: one condition is enough. Otherwise all must hold.
    pub any: bool,
    /// `singleton`: at most one job of the same name and user runs at a time.
    pub singleton: bool,
    /// The conditions on other jobs, in the order written.
    pub on: Vec<(DependencyKind, JobRef)>,
}

const FORMS: &str = "afterok:ID[:ID...], afterany:ID, afternotok:ID, after:ID or singleton";

impl FromStr for Dependency {
    type Err = String;
    fn from_str(s: &str) -> Result<Dependency, String> {
        let s = s.trim();
        if s.is_empty() {
            return Err(format!("empty dependency: give {FORMS}"));
        }
        if s.contains(',') && s.contains('?') {
            return Err(format!(
                "{s:?} mixes ',' (all must hold) and '?' (any one may hold): use one of them"
            ));
        }
        let any = s.contains('?');
        let mut dep = Dependency {
            any,
            singleton: false,
            on: Vec::new(),
        };
        for term in s.split([',', '?']) {
            let mut fields = term.split(':');
            let word = fields.next().unwrap_or_default();
            let kind = match word {
                "singleton" => {
                    if term != "singleton" {
                        return Err(format!("{term:?}: singleton takes no job id"));
                    }
                    dep.singleton = true;
                    continue;
                }
                "after" => DependencyKind::After,
                "afterany" => DependencyKind::AfterAny,
                "afterok" => DependencyKind::AfterOk,
                "afternotok" => DependencyKind::AfterNotOk,
                "" => return Err(format!("{s:?} has an empty condition: give {FORMS}")),
                "aftercorr" | "afterburstbuffer" | "expand" => {
                    return Err(format!("{term:?}: {word} is not supported; give {FORMS}"))
                }
                other => {
                    return Err(format!(
                        "{term:?}: unknown dependency type {other:?}; give {FORMS}"
                    ))
                }
            };
            let ids: Vec<&str> = fields.collect();
            if ids.is_empty() || ids.iter().all(|i| i.is_empty()) {
                return Err(format!("{term:?} names no job: write {word}:ID[:ID...]"));
            }
            for id in ids {
                if id.contains('+') {
                    return Err(format!(
                        "{term:?}: a delay after a job ({id:?}) is not supported"
                    ));
                }
                let r: JobRef = id.parse().map_err(|e| format!("{term:?}: {e}"))?;
                dep.on.push((kind, r));
            }
        }
        Ok(dep)
    }
}

impl fmt::Display for Dependency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut terms: Vec<String> = Vec::new();
        for (kind, r) in &self.on {
            match terms.last_mut() {
                Some(last) if last.starts_with(&format!("{}:", kind.as_str())) => {
                    last.push_str(&format!(":{r}"));
                }
                _ => terms.push(format!("{}:{r}", kind.as_str())),
            }
        }
        if self.singleton {
            terms.push("singleton".into());
        }
        f.write_str(&terms.join(if self.any { "?" } else { "," }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DependencyKind::*;

    #[test]
    fn sbatch_forms_parse() {
        let d: Dependency = "afterok:12:13_2,afterany:7,singleton".parse().unwrap();
        assert!(!d.any);
        assert!(d.singleton);
        assert_eq!(
            d.on,
            vec![
                (AfterOk, JobRef::job(12)),
                (
                    AfterOk,
                    JobRef {
                        job: 13,
                        task: Some(2)
                    }
                ),
                (AfterAny, JobRef::job(7)),
            ]
        );
        assert_eq!(d.to_string(), "afterok:12:13_2,afterany:7,singleton");
        let d: Dependency = "afternotok:4?after:5".parse().unwrap();
        assert!(d.any);
        assert_eq!(
            d.on,
            vec![(AfterNotOk, JobRef::job(4)), (After, JobRef::job(5))]
        );
        assert_eq!(d.to_string(), "afternotok:4?after:5");
    }

    #[test]
    fn malformed_dependencies_are_named() {
        let cases = [
            ("", "empty dependency: give afterok:ID[:ID...], afterany:ID, afternotok:ID, after:ID or singleton"),
            ("afterok:", "\"afterok:\" names no job: write afterok:ID[:ID...]"),
            ("afterok", "\"afterok\" names no job: write afterok:ID[:ID...]"),
            ("afterok:abc", "\"afterok:abc\": \"abc\" is not a job id: id \"abc\" is not a number (ids are N, or N_TASK for an array task)"),
            ("afterok:1::2", "\"afterok:1::2\": \"\" is not a job id: id \"\" is not a number (ids are N, or N_TASK for an array task)"),
            ("afterok:1,", "\"afterok:1,\" has an empty condition: give afterok:ID[:ID...], afterany:ID, afternotok:ID, after:ID or singleton"),
            ("afterok:1,afterany:2?after:3", "\"afterok:1,afterany:2?after:3\" mixes ',' (all must hold) and '?' (any one may hold): use one of them"),
            ("before:1", "\"before:1\": unknown dependency type \"before\"; give afterok:ID[:ID...], afterany:ID, afternotok:ID, after:ID or singleton"),
            ("singleton:3", "\"singleton:3\": singleton takes no job id"),
            ("aftercorr:3", "\"aftercorr:3\": aftercorr is not supported; give afterok:ID[:ID...], afterany:ID, afternotok:ID, after:ID or singleton"),
            ("after:3+10", "\"after:3+10\": a delay after a job (\"3+10\") is not supported"),
        ];
        for (input, want) in cases {
            assert_eq!(
                input.parse::<Dependency>().unwrap_err(),
                want,
                "input {input:?}"
            );
        }
    }

    #[test]
    fn each_kind_holds_as_slurm_says() {
        use DependencyVerdict::*;
        use JobState::*;
        let table = [
            (AfterOk, Completed, Met),
            (AfterOk, Failed, Never),
            (AfterOk, Cancelled, Never),
            (AfterOk, Timeout, Never),
            (AfterOk, Running, Wait),
            (AfterNotOk, Completed, Never),
            (AfterNotOk, Failed, Met),
            (AfterNotOk, Cancelled, Met),
            (AfterNotOk, Timeout, Met),
            (AfterNotOk, Pending, Wait),
            (AfterAny, Completed, Met),
            (AfterAny, Failed, Met),
            (AfterAny, Reserved, Wait),
        ];
        for (kind, state, want) in table {
            assert_eq!(kind.verdict(state, false), want, "{kind:?} on {state}");
        }
        assert_eq!(After.verdict(Pending, false), Wait);
        assert_eq!(After.verdict(Running, true), Met);
        // Requeued after it ran once: it has started.
        assert_eq!(After.verdict(Pending, true), Met);
        assert_eq!(After.verdict(Cancelled, false), Met);
    }

    #[test]
    fn all_and_any_combine() {
        use DependencyVerdict::*;
        assert_eq!(combine(false, [Met, Met]), Met);
        assert_eq!(combine(false, [Met, Wait]), Wait);
        assert_eq!(combine(false, [Wait, Never]), Never);
        assert_eq!(combine(true, [Never, Wait]), Wait);
        assert_eq!(combine(true, [Never, Met]), Met);
        assert_eq!(combine(true, [Never, Never]), Never);
        assert_eq!(combine(false, []), Met);
        assert_eq!(combine(true, []), Met);
    }
}
