//! `foresight job`: the job commands, and the ones that act on one job (cancel, hold,
//! release, suspend, resume, requeue) or read it (show, explain, cat).

use super::job_list::{jobs_table, list_jobs, ListOpts};
use super::job_show::{describe_state, explanation, job_details};
use super::job_wait::{wait, WaitOpts};
use super::submit::{self, SubmitOpts};
use super::{Client, Connection};
use crate::format::OutputOpt;
use anyhow::Result;
use clap::{Args, Subcommand};
use foresight_api::{Explanation, JobRef, JobState, JobView};
use std::process::ExitCode;
/// Job commands.
#[derive(Subcommand)]
// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
pub enum JobCommand {
    /// Submit a job: `foresight job submit -n 4 -t 1h -- ./simulate --steps 10`. Prints its id.
    Submit(SubmitOpts),
    /// List jobs (your own; all for administrators).
    List(ListOpts),
    /// Show one job.
    Show(JobIdOpts),
    /// Cancel jobs (several ids: each in turn, as scancel does).
    Cancel(JobIdsOpts),
    /// Hold jobs that have not started.
    Hold(JobIdsOpts),
    /// Release held jobs.
    Release(JobIdsOpts),
    /// Suspend running jobs.
    Suspend(JobIdsOpts),
    /// Resume suspended jobs.
    Resume(JobIdsOpts),
    /// Put jobs back in the queue (a running one is stopped and runs again).
    Requeue(JobIdsOpts),
    /// Why has a job not started yet?
    Explain(JobIdOpts),
    /// Print a job's output (standard output, or --stderr), from the server.
    Cat(CatOpts),
    /// Print the end of a job's output; with -f, follow it as the job writes, until it ends.
    Tail(crate::commands::tail::TailOpts),
    /// Finished jobs, as sacct: start, end, elapsed, exit code or signal, charge, per part.
    History(crate::commands::accounting::HistoryOpts),
    /// Wait until jobs end (an array job: every task); the exit code is the job's (of the
    /// first that did not complete, an array's tasks in index order: its exit code, 128 +
    /// its signal, else 1), as `hq job wait`.
    Wait(WaitOpts),
}

/// Options of `job cat`.
#[derive(Args)]
pub struct CatOpts {
    /// The job (ID, or ARRAY_TASK for a task of an array job).
    id: JobRef,
    /// Standard error instead of standard output.
    #[arg(long)]
    stderr: bool,
    /// The part of a co-allocated job (0, 1, …).
    #[arg(long, default_value_t = 0)]
    part: usize,
}

/// A job id.
#[derive(Args)]
pub struct JobIdOpts {
    /// The job: ID, or ARRAY_TASK (`12_3`) for one task of an array job; an array job's ID
    /// names every task (`cancel 12` cancels the whole array).
    id: JobRef,
    #[command(flatten)]
    out: OutputOpt,
}

/// Job ids to act on, one or several.
#[derive(Args)]
pub struct JobIdsOpts {
    /// The jobs: IDs, or ARRAY_TASK (`12_3`) for one task of an array job; an array job's
    /// ID names every task (`cancel 12` cancels the whole array). Each is acted on in turn;
    /// one refused does not stop the others, and the command fails if any was refused.
    #[arg(required = true, num_args = 1..)]
    ids: Vec<JobRef>,
    #[command(flatten)]
    out: OutputOpt,
}

/// Runs a job command; the process exit code (the job's, for `job wait`).
pub fn job(conn: &Connection, cmd: JobCommand) -> Result<ExitCode> {
    // Input is checked before looking for a server.
    let mut checked = None;
    if let JobCommand::Submit(o) = &cmd {
        checked = Some(submit::check(o)?);
    }
    let c = Client::new(conn)?;
    match cmd {
        JobCommand::Submit(o) => submit::submit(&c, o, checked.unwrap_or_default())?,
        JobCommand::List(o) => {
            let jobs = list_jobs(&c, &o)?;
            o.out
                .output
                .print(&jobs, || jobs_table(&jobs, crate::moment::now()))?;
        }
        JobCommand::Show(o) => {
            let j: JobView = c.get(&format!("/jobs/{}", o.id), &[])?;
            o.out.output.print(&j, || job_details(&j))?;
        }
        JobCommand::Explain(o) => {
            let e: Explanation = c.get(&format!("/jobs/{}/explain", o.id), &[])?;
            o.out.output.print(&e, || explanation(&e))?;
        }
        JobCommand::Cancel(o) => act_on_each(&c, o, Action::Cancel)?,
        JobCommand::Hold(o) => act_on_each(&c, o, Action::Hold)?,
        JobCommand::Release(o) => act_on_each(&c, o, Action::Release)?,
        JobCommand::Suspend(o) => act_on_each(&c, o, Action::Suspend)?,
        JobCommand::Resume(o) => act_on_each(&c, o, Action::Resume)?,
        JobCommand::Requeue(o) => act_on_each(&c, o, Action::Requeue)?,
        JobCommand::Wait(o) => return wait(&c, o),
        JobCommand::Tail(o) => crate::commands::tail::tail(&c, o)?,
        JobCommand::History(o) => crate::commands::accounting::history(&c, o)?,
        JobCommand::Cat(o) => cat(&c, o)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `job cat`: the job's output as the server keeps it, byte for byte.
fn cat(c: &Client, o: CatOpts) -> Result<()> {
    let mut q = vec![("part", o.part.to_string())];
    if o.stderr {
        q.push(("stderr", "true".into()));
    }
    let bytes = c.send_raw(
        c.http
            .get(c.url(&format!("/jobs/{}/output", o.id)))
            .query(&q),
    )?;
    std::io::Write::write_all(&mut std::io::stdout().lock(), &bytes)?;
    Ok(())
}

/// How long `cancel` and `requeue` wait for a running job's processes to end, so that they
/// can print the state it ends in rather than `running`.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Acts on each job in turn and prints each one's new state (JSON: the job, or a list of
/// them for several ids); a refusal is printed and the others still go, as scancel does.
fn act_on_each(c: &Client, o: JobIdsOpts, action: Action) -> Result<()> {
    let mut done = Vec::new();
    let mut text = String::new();
    let mut refused = Vec::new();
    for id in &o.ids {
        match act(c, id, action) {
            Ok((j, line)) => {
                done.push(j);
                text.push_str(&line);
            }
            Err(e) if o.ids.len() > 1 => {
                eprintln!("job {id}: {e:#}");
                refused.push(id.to_string());
            }
            Err(e) => return Err(e),
        }
    }
    match done.as_slice() {
        [one] if o.ids.len() == 1 => o.out.output.print(one, || text)?,
        _ => o.out.output.print(&done, || text)?,
    }
    if !refused.is_empty() {
        anyhow::bail!(
            "{} of {} jobs could not be {}: {}",
            refused.len(),
            o.ids.len(),
            action.past(),
            refused.join(" ")
        );
    }
    Ok(())
}

/// What a user can do to a job once submitted, as the API names it.
#[derive(Clone, Copy)]
enum Action {
    Cancel,
    Hold,
    Release,
    Suspend,
    Resume,
    Requeue,
}

impl Action {
    /// The route's last segment (`/jobs/ID/cancel`) and the command's verb.
    fn verb(self) -> &'static str {
        match self {
            Action::Cancel => "cancel",
            Action::Hold => "hold",
            Action::Release => "release",
            Action::Suspend => "suspend",
            Action::Resume => "resume",
            Action::Requeue => "requeue",
        }
    }

    /// How the verb reads once done, for "2 of 3 jobs could not be cancelled".
    fn past(self) -> &'static str {
        match self {
            Action::Cancel => "cancelled",
            Action::Hold => "held",
            Action::Release => "released",
            Action::Suspend => "suspended",
            Action::Resume => "resumed",
            Action::Requeue => "requeued",
        }
    }

    /// Whether a running job's processes must end before its new state shows.
    fn stops(self) -> bool {
        matches!(self, Action::Cancel | Action::Requeue)
    }
}

/// Acts on job `id`: its view after the action, and the line that says its new state.
fn act(c: &Client, id: &JobRef, action: Action) -> Result<(JobView, String)> {
    // A running job is stopped by signals: its new state comes once its processes are gone
    // (a requeued one may be running again by then, as a new attempt with a new start).
    let path = format!("/jobs/{id}");
    let verb = action.verb();
    let before: Option<JobView> = if action.stops() {
        Some(c.get(&path, &[])?)
    } else {
        None
    };
    let asked = crate::moment::now();
    let mut j: JobView = c.post(&format!("{path}/{verb}"), &serde_json::json!({}))?;
    // Starts are whole seconds: a run that started in the second of the request is taken
    // for the new attempt.
    let same_run = |j: &JobView| {
        before.as_ref().is_some_and(|b| {
            b.state == JobState::Running
                && j.state == JobState::Running
                && j.started_at == b.started_at
                && j.started_at.is_some_and(|s| s < asked)
        })
    };
    let deadline = std::time::Instant::now() + STOP_WAIT;
    // Most jobs stop within a grace period: asked often at first, then at most every second
    // (a job run by a site that is down would otherwise cost a request every 25 ms).
    let mut pause = std::time::Duration::from_millis(25);
    while same_run(&j) && std::time::Instant::now() < deadline {
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_secs(1));
        j = c.get(&path, &[])?;
    }
    let line = if same_run(&j) {
        let why = j
            .reason
            .as_deref()
            .map_or("its processes have not ended yet".into(), |r| {
                format!("{r}; it has not ended yet")
            });
        format!("job {id}: running, stopping (asked to {verb}; {why})\n")
    } else {
        format!("job {id}: {}\n", describe_state(&j, crate::moment::now()))
    };
    Ok((j, line))
}
