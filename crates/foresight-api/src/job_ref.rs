//! How people name a job: `123`, or `123_7` for task 7 of array job 123, as Slurm prints
//! them.

use std::fmt;
use std::str::FromStr;

/// A job, or one task of an array job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobRef {
    /// The job id (for an array task, the array job's id).
    pub job: u64,
    /// The array task index, for `JOB_TASK`.
    pub task: Option<u32>,
}

impl JobRef {
    /// A plain job id.
    pub fn job(job: u64) -> JobRef {
        JobRef { job, task: None }
    }
}

impl FromStr for JobRef {
    type Err = String;
    fn from_str(s: &str) -> Result<JobRef, String> {
        let number = |t: &str, what: &str| -> Result<u64, String> {
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!(
                    "{s:?} is not a job id: {what} {t:?} is not a number (ids are N, or N_TASK \
                     for an array task)"
                ));
            }
            t.parse::<u64>()
                .map_err(|_| format!("{s:?} is not a job id: {what} {t:?} is too large"))
        };
        match s.split_once('_') {
            None => Ok(JobRef::job(number(s, "id")?)),
            Some((j, t)) => {
                let job = number(j, "id")?;
                let task = number(t, "task")?;
                let task = u32::try_from(task)
                    .map_err(|_| format!("{s:?} is not a job id: task {t:?} is too large"))?;
                Ok(JobRef {
                    job,
                    task: Some(task),
                })
            }
        }
    }
}

impl fmt::Display for JobRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.task {
            None => write!(f, "{}", self.job),
            Some(t) => write!(f, "{}_{t}", self.job),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_task_ids_round_trip() {
        for s in ["0", "123", "123_0", "123_7"] {
            assert_eq!(s.parse::<JobRef>().unwrap().to_string(), s);
        }
        assert_eq!(
            "123_7".parse::<JobRef>().unwrap(),
            JobRef {
                job: 123,
                task: Some(7)
            }
        );
    }

    #[test]
    fn malformed_ids_are_named() {
        let cases = [
            ("", "\"\" is not a job id: id \"\" is not a number (ids are N, or N_TASK for an array task)"),
            ("abc", "\"abc\" is not a job id: id \"abc\" is not a number (ids are N, or N_TASK for an array task)"),
            ("12_", "\"12_\" is not a job id: task \"\" is not a number (ids are N, or N_TASK for an array task)"),
            ("_3", "\"_3\" is not a job id: id \"\" is not a number (ids are N, or N_TASK for an array task)"),
            ("-1", "\"-1\" is not a job id: id \"-1\" is not a number (ids are N, or N_TASK for an array task)"),
            ("1_99999999999", "\"1_99999999999\" is not a job id: task \"99999999999\" is too large"),
        ];
        for (input, want) in cases {
            assert_eq!(
                input.parse::<JobRef>().unwrap_err(),
                want,
                "input {input:?}"
            );
        }
    }
}
