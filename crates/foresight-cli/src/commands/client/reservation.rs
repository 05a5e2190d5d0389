//! `foresight reservation`: administrative reservations of processors for a window.

use super::input::{bad, moment};
use super::{Client, Connection};
use crate::format::OutputOpt;
use crate::moment::when;
use crate::table::table;
use anyhow::Result;
use clap::{Args, Subcommand};
use foresight_api::{parse_duration, AclSpec, CreateReservation, ReservationView, Walltime};
/// Reservation commands.
#[derive(Subcommand)]
// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
pub enum ReservationCommand {
    /// Reserve processors of a cluster for a window (administrators).
    Create(CreateResOpts),
    /// List the reservations not yet over (tentative, committed, active); --all for the
    /// finished, released and expired ones too.
    List(ListResOpts),
    /// Show one.
    Show(IdOpts),
    /// Commit a tentative reservation.
    Commit(IdOpts),
    /// Release a reservation.
    Release(IdOpts),
}

/// Options of `reservation list`.
#[derive(Args)]
pub struct ListResOpts {
    /// Every reservation, those over too (finished, released, expired): each global job
    /// that ran leaves its own behind.
    #[arg(long, short = 'a')]
    all: bool,
    #[command(flatten)]
    out: OutputOpt,
}

/// A reservation id.
#[derive(Args)]
pub struct IdOpts {
    /// The id.
    id: u64,
    #[command(flatten)]
    out: OutputOpt,
}

/// Options of `reservation create`.
#[derive(Args)]
pub struct CreateResOpts {
    /// Cluster.
    #[arg(long)]
    cluster: String,
    /// How many processors (any of them).
    #[arg(short = 'n', long, required_unless_present = "processors")]
    procs: Option<u32>,
    /// These processors instead (indices within the cluster, e.g. `0,1,6-7`).
    #[arg(long, value_parser = parse_processor_list, conflicts_with = "procs")]
    processors: Option<ProcessorList>,
    /// Start [default: now]: what `sbatch --begin` reads (16:00, now+1hour, now+90 = 90 s,
    /// 2026-11-23, 2026-11-23T16:00, 2026-11-23T16:00:00, local time; or with a zone, 2026-11-23T16:00:00Z),
    /// +DURATION as -t (+10m; +90 = 90 minutes), or seconds since the epoch.
    #[arg(long, value_name = "TIME")]
    start: Option<String>,
    /// Length, as `sbatch --time`: M (a bare number is minutes), M:S, H:M:S, D-H, D-H:M,
    /// D-H:M:S; or with units: 90s, 15m, 1h30m, 2d.
    #[arg(short = 't', long, value_name = "TIME")]
    duration: String,
    /// Users admitted (repeatable).
    #[arg(long = "user")]
    users: Vec<String>,
    /// Accounts admitted (repeatable).
    #[arg(long = "account")]
    accounts: Vec<String>,
    /// Groups admitted (repeatable).
    #[arg(long = "group")]
    groups: Vec<String>,
    /// The one job admitted.
    #[arg(long)]
    job: Option<u64>,
    /// Make it tentative for this long (two-phase; same forms as -t, e.g. 5m); commit it with
    /// `reservation commit`.
    #[arg(long)]
    ttl: Option<String>,
    #[command(flatten)]
    out: OutputOpt,
}

/// Processor indices given as `0,1,6-7`.
#[derive(Clone, Debug)]
pub struct ProcessorList(Vec<u32>);

/// `0,1,6-7` → [0, 1, 6, 7].
fn parse_processor_list(s: &str) -> std::result::Result<ProcessorList, String> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim) {
        let number = |x: &str| {
            x.parse::<u32>()
                .map_err(|_| format!("{x:?} is not a processor index (use e.g. 0,1,6-7)"))
        };
        match item.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if b < a {
                    return Err(format!("range {item:?} runs backwards"));
                }
                out.extend(a..=b);
            }
            None => out.push(number(item)?),
        }
    }
    Ok(ProcessorList(out))
}

/// Runs a reservation command.
pub fn reservation(conn: &Connection, cmd: ReservationCommand) -> Result<()> {
    let c = Client::new(conn)?;
    let (r, out) = match cmd {
        ReservationCommand::Create(o) => return create(&c, o),
        ReservationCommand::List(o) => {
            let mut rs: Vec<ReservationView> = c.get("/reservations", &[])?;
            if !o.all {
                rs.retain(|r| r.state.is_live());
            }
            return o.out.output.print(&rs, || reservations_table(&rs));
        }
        ReservationCommand::Show(o) => {
            let r: ReservationView = c.get(&format!("/reservations/{}", o.id), &[])?;
            (r, o.out)
        }
        ReservationCommand::Commit(o) => {
            let r: ReservationView = c.post(
                &format!("/reservations/{}/commit", o.id),
                &serde_json::json!({}),
            )?;
            (r, o.out)
        }
        ReservationCommand::Release(o) => {
            let r: ReservationView = c.post(
                &format!("/reservations/{}/release", o.id),
                &serde_json::json!({}),
            )?;
            (r, o.out)
        }
    };
    out.output
        .print(&r, || reservations_table(std::slice::from_ref(&r)))
}

/// Runs `reservation create`; prints the new reservation's id.
fn create(c: &Client, o: CreateResOpts) -> Result<()> {
    let now = crate::moment::now();
    let start = o
        .start
        .as_deref()
        .map(|s| moment(s, now, "start"))
        .transpose()?;
    let ttl = o
        .ttl
        .as_deref()
        .map(|t| parse_duration(t).map_err(|e| bad(format!("--ttl: {e}"))))
        .transpose()?;
    let r: ReservationView = c.post(
        "/reservations",
        &CreateReservation {
            cluster: o.cluster,
            procs: o.procs.unwrap_or(0),
            processors: o.processors.map(|p| p.0).unwrap_or_default(),
            start,
            end: None,
            duration: Some(Walltime::Text(o.duration)),
            acl: AclSpec {
                users: o.users,
                groups: o.groups,
                accounts: o.accounts,
                classes: vec![],
                qos: vec![],
                job: o.job,
            },
            ttl,
        },
    )?;
    o.out.output.print(&r, || format!("{}\n", r.id))
}

/// The reservations as a table: who each admits, and its processors (by index when chosen).
fn reservations_table(rs: &[ReservationView]) -> String {
    let rows: Vec<Vec<String>> = rs
        .iter()
        .map(|r| {
            let mut acl = Vec::new();
            if !r.acl.users.is_empty() {
                acl.push(format!("users={}", r.acl.users.join(",")));
            }
            if !r.acl.accounts.is_empty() {
                acl.push(format!("accounts={}", r.acl.accounts.join(",")));
            }
            if !r.acl.groups.is_empty() {
                acl.push(format!("groups={}", r.acl.groups.join(",")));
            }
            if let Some(j) = r.acl.job {
                acl.push(format!("job={j}"));
            }
            vec![
                r.id.to_string(),
                r.kind.clone(),
                r.cluster.clone(),
                if r.processors.is_empty() {
                    r.procs.to_string()
                } else {
                    format!(
                        "{} ({})",
                        r.procs,
                        r.processors
                            .iter()
                            .map(u32::to_string)
                            .collect::<Vec<_>>()
                            .join(",")
                    )
                },
                when(Some(r.start)),
                when(Some(r.end)),
                r.state.as_str().to_string(),
                if acl.is_empty() {
                    "nobody".into()
                } else {
                    acl.join(" ")
                },
            ]
        })
        .collect();
    table(
        &[
            "ID", "KIND", "CLUSTER", "PROCS", "START", "END", "STATE", "ACL",
        ],
        &rows,
    )
}
