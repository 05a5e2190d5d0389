//! `foresight plan show`: the service's plan as a text Gantt chart per cluster.

use super::input::moment;
use super::{Client, Connection};
use crate::format::OutputOpt;
use crate::moment::when;
use crate::table::printable;
use anyhow::Result;
use clap::Args;
use foresight_api::{format_duration, ClusterPlan};
/// Options of `plan show`.
#[derive(Args)]
pub struct PlanShowOpts {
    /// One cluster only.
    #[arg(long)]
    cluster: Option<String>,
    /// Window start [default: now]: the forms of `reservation create --start` (16:00,
    /// now+1hour, 2026-11-23T16:00, +30m, …).
    #[arg(long, value_name = "TIME")]
    from: Option<String>,
    /// Window end [default: one hour after --from]: the same forms (+DURATION counts from
    /// now).
    #[arg(long, value_name = "TIME")]
    to: Option<String>,
    /// Chart width in characters.
    #[arg(long, default_value_t = 72)]
    width: usize,
    #[command(flatten)]
    out: OutputOpt,
    #[command(flatten)]
    conn: Connection,
}

/// Runs `plan show`: a text Gantt chart per cluster.
pub fn plan_show(o: PlanShowOpts) -> Result<()> {
    let now = crate::moment::now();
    let mut q = Vec::new();
    if let Some(cl) = &o.cluster {
        q.push(("cluster", cl.clone()));
    }
    if let Some(f) = &o.from {
        q.push(("from", moment(f, now, "from")?.to_string()));
    }
    if let Some(t) = &o.to {
        q.push(("to", moment(t, now, "to")?.to_string()));
    }
    let c = Client::new(&o.conn)?;
    let plans: Vec<ClusterPlan> = c.get("/plan", &q)?;
    let width = o.width.clamp(10, 400);
    o.out
        .output
        .print(&plans, || plans.iter().map(|p| gantt(p, width)).collect())
}

/// The most processor rows a chart draws: a terminal shows no more, and a server that
/// claims 2³² processors must not make the CLI draw them all.
const GANTT_ROWS: u32 = 4096;

/// The chart of one cluster's plan: one row per processor, one column per time step;
/// `.` free, `#` running, `R` a global job's reservation, `P` a global job planned beyond the
/// lead time, `f` a queued local job's forecast, `H` an administrative reservation.
pub fn gantt(p: &ClusterPlan, width: usize) -> String {
    // What the server says is not trusted: instants anywhere in i64, any processor count.
    let span = p.to.saturating_sub(p.from).max(1);
    let step = (span as f64 / width as f64).max(1.0);
    let mut out = format!(
        "{}: {} processors, {} .. {} ({} per column)\n",
        printable(&p.cluster),
        p.procs,
        when(Some(p.from)),
        when(Some(p.to)),
        format_duration(step.ceil() as i64)
    );
    let rows = p.procs.min(GANTT_ROWS);
    for proc in 0..rows {
        let mut row = vec!['.'; width];
        for s in p.slots.iter().filter(|s| s.processor == proc) {
            let mark = match s.occupant.as_str() {
                "running" => '#',
                "reserved" => 'R',
                "planned" => 'P',
                "forecast" => 'f',
                "held" => 'H',
                _ => continue,
            };
            let a = (s.start.saturating_sub(p.from) as f64 / step).floor() as usize;
            let b = ((s.end.saturating_sub(p.from) as f64 / step).ceil() as usize).min(width);
            for cell in row.iter_mut().take(b).skip(a.min(width)) {
                *cell = mark;
            }
        }
        out.push_str(&format!(
            "p{proc:<4}|{}|\n",
            row.into_iter().collect::<String>()
        ));
    }
    if rows < p.procs {
        out.push_str(&format!(
            "      ({} more processors not shown; -o json has them all)\n",
            p.procs - rows
        ));
    }
    out.push_str(
        "      . free  # running  R reserved global job  P planned global job  \
         f queued local job (forecast)  H administrative reservation\n",
    );
    out
}
