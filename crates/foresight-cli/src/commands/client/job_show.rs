//! What `job show` and `job explain` say of one job for people, and the state as every
//! job command shows it.

use crate::moment::when;
use crate::table::printable;
use foresight_api::{format_duration, Explanation, JobState, JobView};
pub(super) fn describe_state(j: &JobView, now: i64) -> String {
    let mut s = j.state.to_string();
    if j.held {
        s.push_str(" (held)");
    }
    // Not eligible yet, by Slurm's reason name.
    if !j.state.is_final() && j.started_at.is_none() && j.begin.is_some_and(|b| b > now) {
        s.push_str(" (BeginTime)");
    }
    // What a job waiting at the gate waits for, by Slurm's reason name.
    if j.state == JobState::Pending && !j.held {
        if let Some(r) = &j.reason {
            for name in ["Dependency", "JobArrayTaskLimit"] {
                if r.starts_with(&format!("{name}:")) {
                    s.push_str(&format!(" ({name})"));
                }
            }
        }
    }
    if j.suspended {
        s.push_str(" (suspended)");
    }
    s
}

/// A prediction and where it came from: `2s (tsafrir: the user's last 2 runs)`.
fn prediction_text(p: &foresight_api::PredictionView) -> String {
    let source = match (p.predictor.as_str(), p.runs) {
        (name, 0) => format!("{name}: too few earlier runs, so the walltime"),
        ("tsafrir" | "tsafrir-last1", n) => {
            format!("{}: mean of the user's last {n} runs", p.predictor)
        }
        ("app", n) => format!("app: median of the application's last {n} runs"),
        (name, n) => format!("{name}: {n} runs"),
    };
    let corrected = match p.corrections {
        0 => String::new(),
        n => format!(", corrected {n}x: outlived"),
    };
    format!("{} ({source}{corrected})", format_duration(p.seconds))
}

/// The `job show` text.
pub(super) fn job_details(j: &JobView) -> String {
    let mut s = String::new();
    let mut kv = |k: &str, v: String| s.push_str(&format!("{k:<14}{}\n", printable(&v)));
    kv("id", j.display_id());
    if j.array_job_id.is_some() {
        kv("job id", j.id.to_string());
    }
    if let Some(d) = &j.dependency {
        kv("dependency", d.clone());
    }
    kv("name", j.name.clone().unwrap_or_else(|| "-".into()));
    kv("user", j.user.clone());
    kv("state", describe_state(j, crate::moment::now()));
    kv("procs", j.procs.to_string());
    kv("walltime", crate::table::squeue_time(j.walltime));
    kv("price", j.price.map_or("-".into(), |p| p.to_string()));
    kv(
        "placement",
        if j.parts.is_empty() {
            j.cluster.clone().unwrap_or_else(|| "-".into())
        } else {
            j.parts
                .iter()
                .map(|p| format!("{}:{}", p.cluster, p.procs))
                .collect::<Vec<_>>()
                .join(" + ")
        },
    );
    kv("submitted", when(Some(j.submitted_at)));
    if let Some(b) = j.begin {
        kv("begin", when(Some(b)));
    }
    if !j.requires.is_empty() {
        kv("requires", j.requires.join(","));
    }
    if !j.licences.is_empty() {
        let held: Vec<String> = j.licences.iter().map(|(p, n)| format!("{p}:{n}")).collect();
        kv("licences", held.join(","));
    }
    if let Some(a) = &j.app {
        kv("app", a.clone());
    }
    if let Some(p) = &j.prediction {
        kv("predicted", prediction_text(p));
    }
    for i in &j.inputs {
        let at = i
            .cluster
            .as_deref()
            .map_or(String::new(), |c| format!("@{c}"));
        kv("input", format!("{}{at} ({} bytes)", i.path, i.bytes));
    }
    for st in &j.staging {
        let how = match (&st.ended_at, &st.error) {
            (_, Some(e)) => format!("failed {}: {e}", when(st.ended_at)),
            (Some(_), None) => format!("done {}", when(st.ended_at)),
            (None, None) => "copying".into(),
        };
        kv(
            "staging",
            format!(
                "to {}: began {}, {how}",
                st.cluster,
                when(Some(st.began_at))
            ),
        );
    }
    for o in &j.outputs {
        let at = o
            .cluster
            .as_deref()
            .map_or(String::new(), |c| format!("@{c}"));
        kv("output", format!("{}{at}", o.path));
    }
    if let Some(st) = &j.output_staging {
        let how = match (&st.ended_at, &st.error) {
            (_, Some(e)) => format!("failed {}: {e}", when(st.ended_at)),
            (Some(_), None) => format!("done {}", when(st.ended_at)),
            (None, None) => "copying".into(),
        };
        kv(
            "outputs",
            format!(
                "back to {}: began {}, {how}",
                st.cluster,
                when(Some(st.began_at))
            ),
        );
    }
    // A job that ended without starting has no plan left.
    let ended_unstarted = j.state.is_final() && j.started_at.is_none();
    kv(
        "planned",
        when(j.planned_start.filter(|_| !ended_unstarted)),
    );
    if j.started_at.is_none() && !j.state.is_final() && j.planned_start.is_some() {
        kv(
            "promise",
            promise(j.start_guaranteed, j.start_caveat.as_deref()),
        );
    }
    kv("started", when(j.started_at));
    kv("ended", when(j.ended_at));
    kv(
        "exit code",
        j.exit_code.map_or("-".into(), |c| c.to_string()),
    );
    if let Some(sig) = j.signal {
        kv("signal", sig.to_string());
    }
    kv("charged", format!("{:.2}", j.charged));
    if let Some(r) = &j.reason {
        kv("reason", r.clone());
    }
    kv("command", j.command.join(" "));
    if let Some(p) = &j.stdout {
        kv("stdout", p.clone());
    }
    if let Some(p) = &j.stderr {
        kv("stderr", p.clone());
    }
    s
}

/// The `job explain` text: the state, the reasons the job waits (each instant in the local
/// zone, and how far ahead of the service's now), and its planned start.
pub(super) fn explanation(e: &Explanation) -> String {
    let mut s = format!("job {}: {}\n", e.id, e.state);
    let tz = crate::moment::local_zone();
    for r in &e.reasons {
        s.push_str(&format!(
            "  - {}\n",
            printable(&crate::moment::reason_in(r, e.now, &tz))
        ));
    }
    if let Some(p) = e.planned_start.filter(|_| !e.state.is_final()) {
        s.push_str(&format!(
            "  planned start: {} ({})\n",
            when(Some(p)),
            promise(e.start_guaranteed, e.start_caveat.as_deref())
        ));
    }
    s
}

/// Whether a planned start is a promise, and if not, what may still make it later.
fn promise(guaranteed: bool, caveat: Option<&str>) -> String {
    if guaranteed {
        "guaranteed: a reservation holds it".into()
    } else {
        format!("not guaranteed: {}", caveat.unwrap_or("a forecast"))
    }
}
