//! `foresight`: the one binary. Today it runs trace simulations (`foresight sim run`).
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
    /// Print shell completions.
    Completion {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sim { command } => commands::sim::run(command),
        Command::Completion { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "foresight",
                &mut std::io::stdout(),
            );
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
