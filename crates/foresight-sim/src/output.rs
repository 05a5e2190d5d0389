//! Writing the simulated schedule: CSV for analysis, or SWF with the simulated wait and
//! runtime filled in, so that other tools can read it as a trace.

use crate::runner::Outcome;
use crate::swf::{SwfRecord, SwfWriter, Trace};
use std::io::Write;

/// Writes one CSV row per job.
pub fn write_csv<W: Write>(out: W, outcomes: &[Outcome]) -> csv::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record([
        "id", "trace_id", "submit", "start", "end", "wait", "runtime", "procs", "estimate",
    ])?;
    for o in outcomes {
        w.write_record(&[
            o.id.to_string(),
            o.trace_id.to_string(),
            o.submit.to_string(),
            o.start.to_string(),
            o.end.to_string(),
            o.wait().to_string(),
            o.runtime().to_string(),
            o.procs.to_string(),
            o.estimate.to_string(),
        ])?;
    }
    w.flush()?;
    Ok(())
}

/// Writes the schedule as SWF: each source record with fields 2 (submit), 3 (wait),
/// 4 (runtime), 5 (processors) and 9 (estimate) as simulated. Without a source trace
/// (synthetic workloads), the other fields are −1.
pub fn write_swf<W: Write>(
    out: W,
    outcomes: &[Outcome],
    source: Option<&Trace>,
    note: &str,
) -> std::io::Result<()> {
    let mut header: Vec<String> = source.map(|t| t.header.lines.clone()).unwrap_or_default();
    header.push(format!("; Note: {note}"));
    let mut w = SwfWriter::new(out, &header)?;
    let blank = SwfRecord {
        job_number: -1,
        submit: -1,
        wait: -1,
        run_time: -1,
        allocated_procs: -1,
        avg_cpu_time: -1.0,
        used_memory: -1.0,
        requested_procs: -1,
        requested_time: -1,
        requested_memory: -1.0,
        status: 1,
        user: -1,
        group: -1,
        executable: -1,
        queue: -1,
        partition: -1,
        preceding_job: -1,
        think_time: -1,
    };
    let mut rows: Vec<&Outcome> = outcomes.iter().collect();
    rows.sort_by_key(|o| (o.submit, o.id));
    for o in rows {
        let mut r = source
            .and_then(|t| t.records.get(o.record).copied())
            .unwrap_or(blank);
        r.job_number = o.trace_id;
        r.submit = o.submit.secs();
        r.wait = o.wait();
        r.run_time = o.runtime();
        r.allocated_procs = i64::from(o.procs);
        r.requested_time = o.estimate;
        w.write(&r)?;
    }
    w.finish()?;
    Ok(())
}
