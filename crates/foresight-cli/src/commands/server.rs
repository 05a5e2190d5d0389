//! `foresight server start|config`.

use anyhow::Result;
use clap::{Args, Subcommand};
use foresight_daemon::Config;
use std::io::IsTerminal;
use std::path::PathBuf;

/// Server commands.
#[derive(Subcommand)]
pub enum ServerCommand {
    /// Run the service in the foreground until SIGTERM or Ctrl-C.
    Start(ServerOpts),
    /// Print the effective configuration (defaults filled in) as TOML.
    Config(ServerOpts),
}

/// Where the configuration comes from, and overrides.
#[derive(Args)]
pub struct ServerOpts {
    /// Configuration file [default: embedded defaults].
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Data directory (database, tokens, job output).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Where jobs, reservations and users are kept: `postgres://USER:PASSWORD@HOST:PORT/DB`
    /// (password and port optional), or an SQLite file path (sqlite://PATH) [default:
    /// DATA_DIR/foresight.db].
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// `single` (this service alone) or `dispatcher` (one of several peer dispatchers, one
    /// per site, sharing a PostgreSQL --store) [config: mode] [default: single].
    #[arg(long, value_name = "MODE")]
    mode: Option<foresight_daemon::config::dispatcher::Mode>,
    /// This dispatcher's site, unique among the dispatchers of one store [config:
    /// dispatcher.site].
    #[arg(long, value_name = "NAME")]
    site: Option<String>,
    /// Stand by for the service that holds the PostgreSQL --store and take over when it
    /// stops [config: standby].
    #[arg(long)]
    standby: bool,
    /// Address to listen on, e.g. 127.0.0.1:8642 (port 0: any free port).
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// Processors of the default local cluster (when no config file names clusters).
    #[arg(long)]
    procs: Option<u32>,
    /// Serve HTTPS with this PEM certificate chain (with --tls-key) [config: http.tls_cert].
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert [config: http.tls_key].
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

fn effective(o: &ServerOpts) -> Result<Config> {
    let mut cfg = match &o.config {
        Some(p) => Config::read(p)?,
        None => Config::default(),
    };
    if let Some(d) = &o.data_dir {
        cfg.data_dir = d.clone();
    }
    if let Some(s) = &o.store {
        cfg.store = Some(s.clone());
    }
    if let Some(m) = o.mode {
        cfg.mode = m;
    }
    if let Some(site) = &o.site {
        cfg.dispatcher.site = Some(site.clone());
    }
    if let Some(l) = &o.listen {
        cfg.listen = l.clone();
    }
    if o.standby {
        cfg.standby = true;
    }
    if let Some(n) = o.procs {
        if o.config.is_some() {
            anyhow::bail!("--procs applies to the default cluster; set procs in the config file");
        }
        cfg.cluster[0].spec.procs = n;
    }
    if let (Some(cert), Some(key)) = (&o.tls_cert, &o.tls_key) {
        cfg.http.tls_cert = Some(cert.clone());
        cfg.http.tls_key = Some(key.clone());
    }
    if let Ok(v) = std::env::var("FORESIGHT_UNIX_USER") {
        cfg.unix_users_from_env(&v)?;
    }
    cfg.check()?;
    cfg.check_mode()?;
    Ok(cfg)
}

/// Runs a server command.
pub fn run(cmd: ServerCommand) -> Result<()> {
    match cmd {
        ServerCommand::Config(o) => {
            let mut cfg = effective(&o)?;
            // What is printed is shared in tickets and chats: no database password.
            if cfg.store.is_some() {
                cfg.store = Some(cfg.store_location()?.redacted());
            }
            out!("{}", toml::to_string_pretty(&cfg)?);
            Ok(())
        }
        ServerCommand::Start(o) => {
            let cfg = effective(&o)?;
            tracing_subscriber::fmt()
                .with_env_filter(log_filter())
                .with_writer(std::io::stderr)
                // Colour only for people: log files get plain text.
                .with_ansi(std::io::stderr().is_terminal())
                .init();
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            runtime.block_on(foresight_daemon::serve(cfg))
        }
    }
}

/// What the service logs: `FORESIGHT_LOG`, else `RUST_LOG` (the usual variable of Rust
/// programs), else [`DEFAULT_LOG`]. An unreadable filter is reported and the default used.
fn log_filter() -> tracing_subscriber::EnvFilter {
    for var in ["FORESIGHT_LOG", "RUST_LOG"] {
        match std::env::var(var) {
            Ok(text) if !text.trim().is_empty() => {
                match tracing_subscriber::EnvFilter::try_new(&text) {
                    Ok(filter) => return filter,
                    Err(e) => {
                        eprintln!(
                            "{var}={text:?} is not a log filter ({e}); using {DEFAULT_LOG:?}"
                        );
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    tracing_subscriber::EnvFilter::new(DEFAULT_LOG)
}

/// The service's own events at `info` (starts, auctions, WIKI starts, reclaims, which
/// confinement each cluster uses), everything else (HTTP, SQL) at `warn`.
const DEFAULT_LOG: &str =
    "warn,foresight_daemon=info,foresight_rm=info,foresight_store=info,foresight_cli=info";
