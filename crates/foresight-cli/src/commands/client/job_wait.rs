//! `job wait`: until jobs end, with the exit code of the first that did not complete. An
//! array job's id waits for every task of the array, as `sbatch --wait` does.

use super::Client;
use crate::format::{Format, OutputOpt};
use anyhow::Result;
use clap::Args;
use foresight_api::{JobRef, JobState, JobView};

/// Options of `job wait`.
#[derive(Args)]
pub struct WaitOpts {
    /// The jobs: IDs, or ARRAY_TASK (`12_3`) for one task of an array job; an array job's
    /// ID waits for every task of the array.
    #[arg(required = true, value_name = "ID")]
    ids: Vec<JobRef>,
    #[command(flatten)]
    out: OutputOpt,
}

/// How often `job wait` looks.
const WAIT_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// The exit code a finished job gives `job wait`: 0 completed, its own exit code, 128 + the
/// signal that killed it, else 1 (cancelled, or failed without starting).
fn exit_code_of(j: &JobView) -> u8 {
    match (j.state, j.exit_code, j.signal) {
        (JobState::Completed, _, _) => 0,
        (_, _, Some(sig)) => u8::try_from(128 + sig.clamp(0, 127)).unwrap_or(1),
        (_, Some(c), None) if c != 0 => u8::try_from(c.rem_euclid(256)).unwrap_or(1).max(1),
        _ => 1,
    }
}

/// One job `job wait` was given, as it last saw it: a job or task, or every task of an
/// array job.
struct Waited {
    /// As given.
    name: JobRef,
    /// Its jobs (the array's tasks in index order), as last read.
    jobs: Vec<JobView>,
    /// Whether it names a whole array, whose tasks are read together.
    array: bool,
}

impl Waited {
    /// Reads it again: the array's tasks, or the one job.
    fn refresh(&mut self, c: &Client) -> Result<()> {
        if self.array {
            let mut tasks: Vec<JobView> =
                c.get("/jobs", &[("array", self.name.job.to_string())])?;
            tasks.sort_by_key(|t| t.array_task_id);
            self.jobs = tasks;
        } else {
            self.jobs = vec![c.get(&format!("/jobs/{}", self.name), &[])?];
        }
        Ok(())
    }

    fn ended(&self) -> bool {
        !self.jobs.is_empty() && self.jobs.iter().all(|j| j.state.is_final())
    }
}

/// Runs `job wait`.
pub(super) fn wait(c: &Client, o: WaitOpts) -> Result<std::process::ExitCode> {
    let mut waited = Vec::new();
    for &name in &o.ids {
        if waited.iter().any(|w: &Waited| w.name == name) {
            continue;
        }
        let first: JobView = c.get(&format!("/jobs/{name}"), &[])?;
        // An array job's id is its first task's: it names the whole array.
        let array = name.task.is_none() && first.array_job_id == Some(name.job);
        let mut w = Waited {
            name,
            jobs: vec![first],
            array,
        };
        if array {
            w.refresh(c)?;
        }
        waited.push(w);
    }
    let mut told = std::collections::BTreeSet::new();
    loop {
        for w in &mut waited {
            if !w.ended() {
                w.refresh(c)?;
            }
            // For people, each job is told of as it ends.
            if o.out.output == Format::Table {
                for j in w.jobs.iter().filter(|j| j.state.is_final()) {
                    if told.insert(j.id) {
                        let how = match (j.exit_code, j.signal) {
                            (_, Some(sig)) => format!(", signal {sig}"),
                            (Some(code), None) => format!(", exit code {code}"),
                            (None, None) => String::new(),
                        };
                        outln!("job {}: {}{how}", j.display_id(), j.state);
                    }
                }
            }
        }
        if waited.iter().all(Waited::ended) {
            break;
        }
        std::thread::sleep(WAIT_POLL);
    }
    let ended: Vec<&JobView> = waited.iter().flat_map(|w| &w.jobs).collect();
    o.out.output.print(&ended, String::new)?;
    // The first that did not complete, in the order given (an array's tasks by index).
    let code = ended
        .iter()
        .map(|j| exit_code_of(j))
        .find(|&c| c != 0)
        .unwrap_or(0);
    Ok(std::process::ExitCode::from(code))
}
