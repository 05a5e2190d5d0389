//! `foresight`: the one binary: the service (`foresight server start`), its client (`job`,
//! `workflow`, `estimate`, `reservation`, `cluster`, `site`, `auction`, `user`, `plan show`), trace simulations
//! (`foresight sim run|grid`) and slot selection (`foresight plan select`).
#![forbid(unsafe_code)]

#[macro_use]
mod out;
mod commands;
mod format;
mod moment;
mod table;

use commands::client::Connection;

use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;

/// Foresight: a lookahead metascheduler for grids of HPC clusters.
#[derive(Parser)]
#[command(name = "foresight", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per run and matched at once: the size of its largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
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
        #[command(flatten)]
        conn: Connection,
    },
    /// Workflows: DAGs of tasks with data edges, mapped onto the grid and run in
    /// dependency order.
    Workflow {
        #[command(subcommand)]
        command: commands::workflow::WorkflowCommand,
        #[command(flatten)]
        conn: Connection,
    },
    /// When could a job start? Asks the planner without submitting.
    Estimate {
        #[command(flatten)]
        opts: commands::client::EstimateOpts,
        #[command(flatten)]
        conn: Connection,
    },
    /// Advance reservations.
    Reservation {
        #[command(subcommand)]
        command: commands::client::ReservationCommand,
        #[command(flatten)]
        conn: Connection,
    },
    /// The grid's clusters.
    Cluster {
        #[command(subcommand)]
        command: commands::client::ClusterCommand,
        #[command(flatten)]
        conn: Connection,
    },
    /// The sites sharing the global queue in dispatcher mode, and their leases.
    Site {
        #[command(subcommand)]
        command: commands::client::SiteCommand,
        #[command(flatten)]
        conn: Connection,
    },
    /// The global jobs on offer in dispatcher mode, and their auctions.
    Auction {
        #[command(subcommand)]
        command: commands::client::AuctionCommand,
        #[command(flatten)]
        conn: Connection,
    },
    /// Users and budgets (administrators).
    User {
        #[command(subcommand)]
        command: commands::client::UserCommand,
        #[command(flatten)]
        conn: Connection,
    },
    /// Accounting reports: `report usage` (as sreport).
    Report {
        #[command(subcommand)]
        command: commands::accounting::ReportCommand,
        #[command(flatten)]
        conn: Connection,
    },
    /// The plan: show the service's plan, or choose slots in a plan given as JSON.
    Plan {
        #[command(subcommand)]
        command: commands::plan::PlanCommand,
    },
    /// Run one job under supervision (started by the local executor, not by people).
    #[command(hide = true)]
    Supervise {
        /// Be the job's launcher, which the supervisor starts: enter its cgroup, become its
        /// account, exec its command.
        #[arg(long)]
        exec: bool,
        /// The job's directory, holding its launch spec.
        dir: std::path::PathBuf,
    },
    /// The documentation made from the program: manual pages and the REST reference.
    #[command(hide = true)]
    Docs {
        #[command(subcommand)]
        command: commands::docs::DocsCommand,
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
        Command::Server { command } => commands::server::run(command).map(|()| ExitCode::SUCCESS),
        Command::Job { command, conn } => commands::client::job(&conn, command),
        Command::Workflow { command, conn } => {
            commands::workflow::run(&conn, command).map(|()| ExitCode::SUCCESS)
        }
        Command::Estimate { opts, conn } => {
            commands::client::estimate(&conn, opts).map(|()| ExitCode::SUCCESS)
        }
        Command::Reservation { command, conn } => {
            commands::client::reservation(&conn, command).map(|()| ExitCode::SUCCESS)
        }
        Command::Cluster { command, conn } => match command {
            commands::client::ClusterCommand::List(o) => {
                commands::client::cluster_list(&conn, o).map(|()| ExitCode::SUCCESS)
            }
        },
        Command::Site { command, conn } => match command {
            commands::client::SiteCommand::List(o) => {
                commands::client::site_list(&conn, o).map(|()| ExitCode::SUCCESS)
            }
        },
        Command::Auction { command, conn } => match command {
            commands::client::AuctionCommand::List(o) => {
                commands::client::auction_list(&conn, o).map(|()| ExitCode::SUCCESS)
            }
        },
        Command::User { command, conn } => {
            commands::client::user(&conn, command).map(|()| ExitCode::SUCCESS)
        }
        Command::Report { command, conn } => {
            commands::accounting::report(&conn, command).map(|()| ExitCode::SUCCESS)
        }
        Command::Supervise { exec: false, dir } => {
            Ok(ExitCode::from(foresight_rm::supervise(&dir)))
        }
        Command::Supervise { exec: true, dir } => Ok(ExitCode::from(foresight_rm::exec_job(&dir))),
        Command::Docs { command } => {
            commands::docs::run(command, Cli::command()).map(|()| ExitCode::SUCCESS)
        }
        Command::Completion { shell } => {
            // Into memory first: the generator panics when it cannot write.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "foresight", &mut script);
            out!("{}", String::from_utf8_lossy(&script));
            Ok(ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        // Standard output closed early (`| head`): quietly, as coreutils do (see `out`).
        Err(e) if out::broken_pipe(&e) => ExitCode::from(out::BROKEN_PIPE_STATUS),
        Err(e) => {
            eprintln!("error: {}", error_chain(&e));
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

/// The error and its causes, `: `-separated, each said once: a cause whose text its
/// context already ends with (`reading x: No such file…` then `No such file…`) is skipped.
fn error_chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if text.is_empty() || out.ends_with(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{error_chain, Cli};
    use clap::CommandFactory;

    #[test]
    fn an_error_says_its_cause_once() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        #[derive(Debug, thiserror::Error)]
        #[error("reading x.swf: {0}")]
        struct Wrapping(#[source] std::io::Error);
        let e = anyhow::Error::new(Wrapping(io())).context("simulating x.swf");
        assert_eq!(
            error_chain(&e),
            "simulating x.swf: reading x.swf: No such file"
        );
        let e = anyhow::Error::new(io()).context("creating out.csv");
        assert_eq!(error_chain(&e), "creating out.csv: No such file");
    }

    /// Every command's definition is consistent (argument types, conflicts, requirements):
    /// clap checks this only when a command is used, so a bad one would panic in a user's
    /// hands.
    #[test]
    fn command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
