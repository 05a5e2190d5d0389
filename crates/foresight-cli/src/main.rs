//! `foresight`: the one binary: trace simulations (`foresight sim run`) and slot selection
//! (`foresight plan select`).
#![forbid(unsafe_code)]

mod commands;

use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;

/// Foresight: a lookahead metascheduler for grids of HPC clusters.
#[derive(Parser)]
#[command(name = "foresight", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Replay workloads through the scheduling code in virtual time.
    Sim {
        #[command(subcommand)]
        command: commands::sim::SimCommand,
    },
    /// Inspect the grid planner: choose slots for a request in a given plan.
    Plan {
        #[command(subcommand)]
        command: commands::plan::PlanCommand,
    },
    /// Run one job under supervision (started by the local executor, not by people).
    #[command(hide = true)]
    Supervise {
        /// The job's directory, holding its launch spec.
        dir: std::path::PathBuf,
    },
    /// Print shell completions.
    Completion {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sim { command } => commands::sim::run(command).map(|()| ExitCode::SUCCESS),
        Command::Plan { command } => commands::plan::run(command),
        Command::Supervise { dir } => Ok(ExitCode::from(foresight_rm::supervise(&dir))),
        Command::Completion { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "foresight",
                &mut std::io::stdout(),
            );
            Ok(ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            if e.downcast_ref::<commands::plan::BadInput>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
