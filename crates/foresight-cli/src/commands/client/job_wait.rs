//! `job wait`: until jobs end, with the exit code of the first that did not complete.

use super::Client;
use crate::format::{Format, OutputOpt};
use anyhow::Result;
use clap::Args;
use foresight_api::{JobState, JobView};
use std::collections::BTreeMap;
/// Options of `job wait`.
#[derive(Args)]
pub struct WaitOpts {
    /// The jobs.
    #[arg(required = true, value_name = "ID")]
    ids: Vec<u64>,
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

/// Runs `job wait`.
pub(super) fn wait(c: &Client, o: WaitOpts) -> Result<std::process::ExitCode> {
    let mut done: BTreeMap<u64, JobView> = BTreeMap::new();
    loop {
        for &id in &o.ids {
            if done.contains_key(&id) {
                continue;
            }
            let j: JobView = c.get(&format!("/jobs/{id}"), &[])?;
            if j.state.is_final() {
                if o.out.output == Format::Table {
                    let how = match (j.exit_code, j.signal) {
                        (_, Some(sig)) => format!(", signal {sig}"),
                        (Some(code), None) => format!(", exit code {code}"),
                        (None, None) => String::new(),
                    };
                    outln!("job {id}: {}{how}", j.state);
                }
                done.insert(id, j);
            }
        }
        if done.len()
            == o.ids
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len()
        {
            break;
        }
        std::thread::sleep(WAIT_POLL);
    }
    let ended: Vec<&JobView> = o.ids.iter().map(|id| &done[id]).collect();
    // For people, each job was told of as it ended.
    o.out.output.print(&ended, String::new)?;
    let code = ended
        .iter()
        .map(|j| exit_code_of(j))
        .find(|&c| c != 0)
        .unwrap_or(0);
    Ok(std::process::ExitCode::from(code))
}
