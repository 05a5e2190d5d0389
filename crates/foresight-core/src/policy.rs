//! Local (cluster-level) scheduling policies as one parameterised algorithm.
//!
//! Every policy orders the queue, starts jobs that fit now, gives the first
//! `reservation_depth` jobs that do not fit a reservation at their earliest start, and then
//! either stops (strict order) or backfills later jobs into the holes without delaying any
//! reservation. FCFS is depth 0 without backfill; First-Fit is depth 0 with first-fit
//! backfill; EASY is depth 1; conservative backfilling gives every job a reservation.

use crate::predict::Correction;
use crate::priority::PriorityWeights;
use crate::time::Dur;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The order in which waiting jobs are considered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueOrder {
    /// First come, first served (submission time, then submission order).
    Fcfs,
    /// Shortest estimate first.
    Sjf,
    /// Longest estimate first.
    Ljf,
    /// Maui-style multi-factor priority (see [`PriorityWeights`]).
    Priority,
}

/// Which waiting job fills a hole once the reservations are made (Maui `BACKFILLPOLICY`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackfillChoice {
    /// No backfilling: the queue stops at the first job that can neither start nor be reserved.
    None,
    /// The highest-priority job that fits, repeatedly (Maui `FIRSTFIT`).
    FirstFit,
    /// The fitting job with the largest metric, ties by priority, repeatedly (Maui `BESTFIT`).
    BestFit,
    /// The set of fitting jobs with the largest total metric (Maui `GREEDY`); bounded search.
    Greedy,
}

/// What "best" means for BESTFIT and GREEDY (Maui `BACKFILLMETRIC`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackfillMetric {
    /// Processors used.
    Procs,
    /// Estimated runtime.
    Walltime,
    /// Processors × estimated runtime.
    ProcSeconds,
}

/// The order in which backfill candidates are tried once the reservations are made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackfillOrder {
    /// Queue order.
    #[default]
    Fcfs,
    /// Shortest planned runtime (prediction, else estimate) first, then queue order: short
    /// jobs fill holes best (EASY++ with predictions).
    Spf,
}

impl std::str::FromStr for BackfillOrder {
    type Err = String;

    fn from_str(text: &str) -> Result<BackfillOrder, String> {
        match text {
            "fcfs" => Ok(BackfillOrder::Fcfs),
            "spf" => Ok(BackfillOrder::Spf),
            _ => Err(format!("{text:?} is not a backfill order: use fcfs or spf")),
        }
    }
}

/// When reserved jobs are moved to earlier starts that became possible.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Compression {
    /// At every scheduling pass.
    EveryPass,
    /// Only at passes after processors were released by a finished job (pyss).
    AfterRelease,
}

/// Whether a submission triggers a scheduling pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PassOnSubmit {
    /// Always.
    Always,
    /// Only when the new job's processors are free right now, ignoring reservations (pyss's
    /// EASY does exactly this).
    IfProcessorsFreeNow,
}

/// Unlimited reservation depth: conservative backfilling.
pub const ALL: u32 = u32::MAX;

/// A complete local policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    /// Queue order.
    pub order: QueueOrder,
    /// How many waiting jobs hold a reservation at once (Maui `RESERVATIONDEPTH`):
    /// 0 none, 1 EASY, [`ALL`] conservative. A reservation, once given, never moves later.
    pub reservation_depth: u32,
    /// How holes are filled after the reservations.
    pub backfill: BackfillChoice,
    /// Metric for BESTFIT and GREEDY.
    pub metric: BackfillMetric,
    /// First-Fit's starvation bound: once this many later jobs have started ahead of a
    /// waiting job, nothing more may pass it. `None` is unbounded.
    pub overtake_cap: Option<u32>,
    /// GREEDY considers at most this many fitting candidates (the search is exponential).
    pub greedy_candidates: usize,
    /// Weights for [`QueueOrder::Priority`].
    pub priority: PriorityWeights,
    /// When reservations are compressed.
    pub compression: Compression,
    /// Whether a submission triggers a pass.
    pub pass_on_submit: PassOnSubmit,
    /// The order of first-fit backfill candidates (the overtake cap does not apply to
    /// [`BackfillOrder::Spf`]).
    #[serde(default)]
    pub backfill_order: BackfillOrder,
    /// How the plan of a job that outlived its prediction grows.
    #[serde(default)]
    pub correction: Correction,
    /// The starvation guard (see [`crate::scheduler`]'s guard): a job planned by a
    /// prediction may pass the first reserved job only if, run to its estimate, it cannot
    /// delay that job past the start plain EASY would guarantee it. Without predictions it
    /// changes nothing.
    #[serde(default = "on")]
    pub starvation_guard: bool,
    /// How long the first reserved job must have waited (since it became eligible) before
    /// the starvation guard protects it: until then predictions may delay it, as in EASY++.
    #[serde(default = "guard_after")]
    pub guard_after: Dur,
}

/// The default of [`Policy::guard_after`]: a day. Measured on KTH, SDSC-SP2, CTC and
/// SDSC-DS (docs/src/research/prediction.md), guarding from the first second keeps
/// the tail of plain EASY but gives back much of the gain of predictions (on SDSC-SP2 all
/// but 4 %); from a day on it keeps most of the gain and still no job waits more than five
/// days on KTH, CTC and SDSC-DS.
pub const GUARD_AFTER: Dur = Dur::hours(24);

fn on() -> bool {
    true
}

fn guard_after() -> Dur {
    GUARD_AFTER
}

impl Policy {
    fn base(reservation_depth: u32, backfill: BackfillChoice) -> Policy {
        Policy {
            order: QueueOrder::Fcfs,
            reservation_depth,
            backfill,
            metric: BackfillMetric::ProcSeconds,
            overtake_cap: None,
            greedy_candidates: 16,
            priority: PriorityWeights::default(),
            compression: Compression::EveryPass,
            pass_on_submit: PassOnSubmit::Always,
            backfill_order: BackfillOrder::Fcfs,
            correction: Correction::Incremental,
            starvation_guard: true,
            guard_after: GUARD_AFTER,
        }
    }

    /// Strict first come, first served.
    pub fn fcfs() -> Policy {
        Policy::base(0, BackfillChoice::None)
    }

    /// First-Fit: any job that fits starts, optionally with a cap on overtaking.
    pub fn first_fit(overtake_cap: Option<u32>) -> Policy {
        Policy {
            overtake_cap,
            ..Policy::base(0, BackfillChoice::FirstFit)
        }
    }

    /// EASY (aggressive) backfilling: one reservation, for the first job that does not fit.
    pub fn easy() -> Policy {
        Policy::base(1, BackfillChoice::FirstFit)
    }

    /// Conservative backfilling: every waiting job holds a reservation.
    pub fn conservative() -> Policy {
        Policy::base(ALL, BackfillChoice::FirstFit)
    }

    /// Backfilling with `depth` reservations (Maui `RESERVATIONDEPTH`).
    pub fn depth(depth: u32) -> Policy {
        Policy::base(depth, BackfillChoice::FirstFit)
    }

    /// The same policy with pyss's timing: reservations are compressed only after a job
    /// released processors, and a submission triggers a pass only if its processors are free.
    pub fn pyss_timing(mut self) -> Policy {
        self.compression = Compression::AfterRelease;
        if self.reservation_depth != ALL {
            self.pass_on_submit = PassOnSubmit::IfProcessorsFreeNow;
        }
        self
    }

    /// A short name by reservation depth, as `--policy` reads it: `fcfs`, `firstfit`,
    /// `firstfit:CAP`, `easy`, `conservative` or `depth:N`. The backfill choice is named
    /// apart (`easy` with GREEDY backfill is still `easy`).
    pub fn name(&self) -> String {
        match (self.reservation_depth, self.backfill) {
            (0, BackfillChoice::None) => "fcfs".into(),
            (0, _) => match self.overtake_cap {
                Some(cap) => format!("firstfit:{cap}"),
                None => "firstfit".into(),
            },
            (1, _) => "easy".into(),
            (ALL, _) => "conservative".into(),
            (n, _) => format!("depth:{n}"),
        }
    }
}

impl std::str::FromStr for Policy {
    type Err = String;

    /// Parses `fcfs`, `firstfit`, `firstfit:CAP`, `easy`, `conservative`, `depth:N`.
    fn from_str(text: &str) -> Result<Policy, String> {
        let (name, arg) = match text.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (text, None),
        };
        let number = |what: &str| -> Result<u32, String> {
            let a = arg.ok_or_else(|| format!("{name}: give {what}, e.g. {name}:4"))?;
            a.parse::<u32>()
                .map_err(|_| format!("{text}: {a:?} is not a whole number"))
        };
        Ok(match name {
            "fcfs" if arg.is_none() => Policy::fcfs(),
            "firstfit" => Policy::first_fit(arg.map(|_| number("a cap")).transpose()?),
            "easy" if arg.is_none() => Policy::easy(),
            "conservative" if arg.is_none() => Policy::conservative(),
            "depth" => Policy::depth(number("a reservation depth")?),
            _ => {
                return Err(format!(
                    "{text:?} is not a policy: use fcfs, firstfit, firstfit:CAP, easy, conservative or depth:N"
                ))
            }
        })
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_reads_back_as_the_same_policy() {
        for text in [
            "fcfs",
            "firstfit",
            "firstfit:3",
            "easy",
            "conservative",
            "depth:4",
        ] {
            let p: Policy = text.parse().expect("a policy");
            assert_eq!(p.name(), text);
            assert_eq!(p.name().parse::<Policy>(), Ok(p), "{text}");
        }
    }

    #[test]
    fn the_backfill_choice_does_not_rename_the_policy() {
        for choice in [
            BackfillChoice::None,
            BackfillChoice::BestFit,
            BackfillChoice::Greedy,
        ] {
            let p = Policy {
                backfill: choice,
                ..Policy::easy()
            };
            assert_eq!(p.name(), "easy", "{choice:?}");
        }
    }
}
