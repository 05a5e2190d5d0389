//! Usage over a period, as `sreport` reports it: processor-hours and charges by user, account
//! or cluster. Pure, so that the CLI and the dashboard add up the same way from the same
//! [`JobView`]s.
//!
//! The rule: a job that ran from `started_at` to `ended_at` (or to `now` while it runs) used,
//! on each of its parts, the part's processors for that time; the period `[since, until)`
//! counts the share of that time inside it. A job's charge is counted in the same share (its
//! processor-seconds inside the period over all its processor-seconds), and split over its
//! parts by processors; a job that held nothing for any time (it ended the second it started)
//! counts whole in the period its end falls in. Summed over periods that tile time, every job
//! counts once: the totals equal the jobs' charges.

use crate::JobView;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What usage is grouped by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UsageKey {
    /// The job's owner.
    User,
    /// The account the job was charged to (`-` when it names none).
    Account,
    /// The cluster a part ran on.
    Cluster,
}

/// One group's usage over the period.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UsageRow {
    /// The user, account or cluster.
    pub key: String,
    /// Jobs that ran in the period (a co-allocated job counts once per cluster).
    pub jobs: u32,
    /// Processor-hours used in the period.
    pub proc_hours: f64,
    /// Charges for that use.
    pub charged: f64,
}

/// The usage of `jobs` over `[since, until)` at `now`, grouped by `key`, sorted by key.
pub fn usage(jobs: &[JobView], since: i64, until: i64, now: i64, key: UsageKey) -> Vec<UsageRow> {
    let mut rows: BTreeMap<String, UsageRow> = BTreeMap::new();
    for j in jobs {
        let Some(start) = j.started_at else { continue };
        let end = j.ended_at.unwrap_or(now).max(start);
        let inside = (end.min(until) - start.max(since)).max(0);
        let ran = end - start;
        let share = if ran > 0 {
            inside as f64 / ran as f64
        } else if since < end && end <= until {
            1.0
        } else {
            0.0
        };
        if inside == 0 && share == 0.0 {
            continue;
        }
        // One (cluster, processors) per part; a job without parts ran where it was sent.
        let parts: Vec<(String, u32)> = if j.parts.is_empty() {
            vec![(j.cluster.clone().unwrap_or_else(|| "-".into()), j.procs)]
        } else {
            j.parts
                .iter()
                .map(|p| (p.cluster.clone(), p.procs))
                .collect()
        };
        let procs: u32 = parts.iter().map(|p| p.1).sum::<u32>().max(1);
        // The rows this job touched: it counts once in each.
        let mut touched = std::collections::BTreeSet::new();
        for (cluster, p) in parts {
            let name = match key {
                UsageKey::User => j.user.clone(),
                UsageKey::Account => j.account.clone().unwrap_or_else(|| "-".into()),
                UsageKey::Cluster => cluster,
            };
            let row = rows.entry(name.clone()).or_insert_with(|| UsageRow {
                key: name.clone(),
                jobs: 0,
                proc_hours: 0.0,
                charged: 0.0,
            });
            row.proc_hours += f64::from(p) * inside as f64 / 3600.0;
            row.charged += j.charged * share * f64::from(p) / f64::from(procs);
            if touched.insert(name) {
                row.jobs += 1;
            }
        }
    }
    rows.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{JobState, PartView};

    fn job(
        id: u64,
        user: &str,
        run: Option<(i64, i64)>,
        parts: &[(&str, u32)],
        charged: f64,
    ) -> JobView {
        JobView {
            id,
            name: None,
            user: user.into(),
            account: Some(format!("acct-{user}")),
            state: JobState::Completed,
            held: false,
            suspended: false,
            priority: 0,
            exit_code: Some(0),
            signal: None,
            procs: parts.iter().map(|p| p.1).sum(),
            walltime: 3600,
            price: None,
            cluster: parts.first().map(|p| p.0.to_string()),
            parts: parts
                .iter()
                .map(|&(c, p)| PartView {
                    cluster: c.into(),
                    procs: p,
                    processors: vec![],
                    started_at: None,
                    ended_at: None,
                })
                .collect(),
            reservation: None,
            submitted_at: 0,
            planned_start: None,
            start_guaranteed: false,
            start_caveat: None,
            first_planned_start: None,
            started_at: run.map(|r| r.0),
            ended_at: run.map(|r| r.1),
            run_secs: run.map(|r| r.1 - r.0),
            charged,
            reason: None,
            command: vec![],
            stdout: None,
            stderr: None,
            array_job_id: None,
            array_task_id: None,
            dependency: None,
            begin: None,
            requires: vec![],
            licences: Default::default(),
            app: None,
            prediction: None,
            inputs: Vec::new(),
            staging: Vec::new(),
            outputs: Vec::new(),
            output_staging: None,
        }
    }

    /// Hand-checked: a co-allocated job of 2 + 6 processors for an hour, half of it in the
    /// period; a one-cluster job inside it; one that never started.
    #[test]
    fn usage_counts_the_share_inside_the_period() {
        let jobs = vec![
            job(1, "alice", Some((0, 3600)), &[("a", 2), ("b", 6)], 80.0),
            job(2, "bob", Some((1800, 2700)), &[("a", 4)], 10.0),
            job(3, "bob", None, &[], 0.0),
        ];
        let by_cluster = usage(&jobs, 1800, 7200, 9000, UsageKey::Cluster);
        assert_eq!(
            by_cluster,
            vec![
                UsageRow {
                    key: "a".into(),
                    jobs: 2,
                    proc_hours: 2.0 * 0.5 + 4.0 * 0.25,
                    charged: 80.0 * 0.5 * 2.0 / 8.0 + 10.0,
                },
                UsageRow {
                    key: "b".into(),
                    jobs: 1,
                    proc_hours: 3.0,
                    charged: 80.0 * 0.5 * 6.0 / 8.0,
                },
            ]
        );
        let by_user = usage(&jobs, 1800, 7200, 9000, UsageKey::User);
        assert_eq!(by_user.len(), 2);
        assert_eq!((by_user[0].jobs, by_user[0].proc_hours), (1, 4.0));
        assert_eq!(by_user[1].key, "bob");
        let by_account = usage(&jobs, 1800, 7200, 9000, UsageKey::Account);
        assert_eq!(by_account[0].key, "acct-alice");
    }

    /// Periods that tile time count every charge once, including a job that held nothing
    /// for any time and one still running.
    #[test]
    fn tiled_periods_add_up_to_the_charges() {
        let mut running = job(4, "carol", Some((5000, 0)), &[("a", 3)], 7.0);
        running.ended_at = None;
        let jobs = vec![
            job(1, "alice", Some((0, 3600)), &[("a", 2), ("b", 6)], 80.0),
            job(2, "bob", Some((1800, 2700)), &[("a", 4)], 10.0),
            job(3, "bob", Some((4000, 4000)), &[("b", 1)], 0.5),
            running,
        ];
        let now = 6000;
        let mut charged = 0.0;
        let mut hours = 0.0;
        for t in (-1000..7000).step_by(700) {
            for r in usage(&jobs, t, t + 700, now, UsageKey::Cluster) {
                charged += r.charged;
                hours += r.proc_hours;
            }
        }
        assert!((charged - 97.5).abs() < 1e-9, "{charged}");
        assert!(
            (hours - (8.0 + 1.0 + 3.0 * 1000.0 / 3600.0)).abs() < 1e-9,
            "{hours}"
        );
    }
}
