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
    #[command(flatten)]
    conn: commands::client::Connection,
}

#[derive(Subcommand)]
enum Command {
    /// Replay workloads through the scheduling code in virtual time.
    Sim {
        #[command(subcommand)]
        command: commands::sim::SimCommand,
    },
    /// Run the service.
    Server {
        #[command(subcommand)]
        command: commands::server::ServerCommand,
    },
    /// Submit, list, show, cancel, hold, release and explain jobs.
    Job {
        #[command(subcommand)]
        command: commands::client::JobCommand,
    },
    /// When could a job start? Asks the planner without submitting.
    Estimate(commands::client::EstimateOpts),
    /// Advance reservations.
    Reservation {
        #[command(subcommand)]
        command: commands::client::ReservationCommand,
    },
    /// The grid's clusters.
    Cluster {
        #[command(subcommand)]
        command: commands::client::ClusterCommand,
    },
    /// Users and budgets (administrators).
    User {
        #[command(subcommand)]
        command: commands::client::UserCommand,
    },
    /// The plan: show the service's plan, or choose slots in a plan given as JSON.
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
        Command::Plan { command } => commands::plan::run(command, &cli.conn),
        Command::Server { command } => commands::server::run(command).map(|()| ExitCode::SUCCESS),
        Command::Job { command } => {
            commands::client::job(&cli.conn, command).map(|()| ExitCode::SUCCESS)
        }
        Command::Estimate(o) => {
            commands::client::estimate(&cli.conn, o).map(|()| ExitCode::SUCCESS)
        }
        Command::Reservation { command } => {
            commands::client::reservation(&cli.conn, command).map(|()| ExitCode::SUCCESS)
        }
        Command::Cluster { command } => match command {
            commands::client::ClusterCommand::List(o) => {
                commands::client::cluster_list(&cli.conn, o).map(|()| ExitCode::SUCCESS)
            }
        },
        Command::User { command } => {
            commands::client::user(&cli.conn, command).map(|()| ExitCode::SUCCESS)
        }
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
            } else if let Some(r) = e.downcast_ref::<commands::client::ServerRefused>() {
                // 4xx: the request was wrong (2); 5xx: the server failed (1).
                ExitCode::from(if r.status < 500 { 2 } else { 1 })
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// Every command's definition is consistent (argument types, conflicts, requirements):
    /// clap checks this only when a command is used, so a bad one would panic in a user's
    /// hands.
    #[test]
    fn command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
