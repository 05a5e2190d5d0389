//! `job submit`: its options, what is checked before the server is asked, and the request
//! built from them (the environment `--export` takes, the files staged in and out).

use super::input::{bad, begin_of, parse_price, walltime_ok};
use super::Client;
use crate::format::OutputOpt;
use anyhow::Result;
use clap::Args;
use foresight_api::{ArraySpec, Dependency, InputSpec, OutputSpec, SubmitJob, Submitted, Walltime};
use std::collections::BTreeMap;
use std::path::PathBuf;
/// Options of `job submit`.
#[derive(Args)]
pub struct SubmitOpts {
    /// Processors.
    #[arg(short = 'n', long, default_value_t = 1)]
    procs: u32,
    /// Walltime, as `sbatch --time`: M (a bare number is minutes), M:S, H:M:S, D-H, D-H:M,
    /// D-H:M:S; or with units: 90s, 15m, 1h30m, 2d.
    #[arg(short = 't', long, default_value = "1h", value_name = "TIME")]
    time: String,
    /// Not before this time, as `sbatch --begin`: 16:00, now+1hour, now+90 (= 90 s),
    /// 2026-11-23, 2026-11-23T16:00(:00) (local time; or with a zone, …T16:00:00Z), midnight,
    /// tomorrow, +DURATION as -t (+10m; +90 = 90 minutes), or seconds since the epoch.
    #[arg(long, value_name = "TIME")]
    begin: Option<String>,
    /// Max price per processor-second.
    #[arg(long, allow_negative_numbers = true, value_parser = parse_price)]
    price: Option<f64>,
    /// Run as a local job of this cluster instead of planning it over the grid.
    #[arg(long)]
    cluster: Option<String>,
    /// Run inside this reservation.
    #[arg(long)]
    reservation: Option<u64>,
    /// A feature the cluster must offer (installed software, architecture; repeat or join
    /// with commas): only clusters whose `features` have them all are used.
    #[arg(long, value_delimiter = ',', value_name = "FEATURE")]
    requires: Vec<String>,
    /// Licences held for the whole run, NAME:COUNT (`ansys:2`; a bare NAME is one; repeat
    /// or join with commas): the job starts only when its pool has them free.
    #[arg(long, value_delimiter = ',', value_name = "NAME:COUNT")]
    licence: Vec<String>,
    /// The application it runs, for runtime prediction: runs of one application with the
    /// same processors and arguments predict each other (default: the program).
    #[arg(long, value_name = "NAME")]
    app: Option<String>,
    /// An input file, `PATH[@CLUSTER]` (repeat for more): measured at submission, and copied
    /// into the job's working directory before it starts on any cluster other than
    /// CLUSTER, the one holding it (default: where the job is submitted). A relative PATH
    /// is taken from the current directory.
    #[arg(long, value_name = "PATH[@CLUSTER]")]
    input: Vec<String>,
    /// An output file, `PATH[@CLUSTER]` (repeat for more), relative to the working
    /// directory: once the job completes (exit 0), copied from its working directory on the
    /// cluster it ran on to the same PATH under its working directory on CLUSTER (default:
    /// where the job is submitted, or its input's cluster).
    #[arg(long, value_name = "PATH[@CLUSTER]")]
    output_file: Vec<String>,
    /// With --reservation: may start before it if processors are free.
    #[arg(long)]
    allow_early_start: bool,
    /// Never split over several clusters.
    #[arg(long)]
    no_coallocation: bool,
    /// Absolute priority level of a global job: it takes the processors of running global
    /// jobs of lower levels when it cannot start otherwise.
    #[arg(long, default_value_t = 0)]
    priority: u32,
    /// When preempted, kill the job and queue it again instead of suspending it.
    #[arg(long)]
    requeue: bool,
    /// A name.
    #[arg(long)]
    name: Option<String>,
    /// Hold it at submission.
    #[arg(long)]
    hold: bool,
    /// Wait for other jobs, as sbatch: afterok:ID[:ID...], afterany:ID, afternotok:ID,
    /// after:ID, singleton; joined by ',' (all must hold) or '?' (any one). A dependency
    /// that can never hold cancels the job.
    #[arg(short = 'd', long, value_name = "LIST")]
    dependency: Option<String>,
    /// Submit an array of tasks, as sbatch: 0-99, 1,3,5-7, 0-15:4, and %N for at most N
    /// running at once; each task gets FORESIGHT_ARRAY_TASK_ID and runs as ARRAY_TASK.
    #[arg(short = 'a', long, value_name = "INDICES")]
    array: Option<String>,
    /// Account (for reservation ACLs).
    #[arg(long)]
    account: Option<String>,
    /// Working directory [default: the current one].
    #[arg(long)]
    chdir: Option<PathBuf>,
    /// Extra environment, KEY=VALUE (repeatable); applied after --export.
    #[arg(long = "env", value_name = "KEY=VALUE")]
    env: Vec<String>,
    /// Which of this shell's variables the job gets, as sbatch's --export: NONE (the
    /// default: a grid job may run at another site, as HTCondor's getenv = false), ALL, or
    /// NAME[=VALUE] items joined by ',' (after ALL, added to it). FORESIGHT_* variables are
    /// never taken from the shell: the service sets its own, and the token is a credential.
    #[arg(
        long,
        value_name = "ALL|NONE|[ALL,]NAME[=VALUE],...",
        default_value = "NONE"
    )]
    export: String,
    #[command(flatten)]
    out: OutputOpt,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// What `job submit` checks before looking for a server: its begin time, read now, and the
/// licences it holds.
pub(super) fn check(o: &SubmitOpts) -> Result<(Option<i64>, BTreeMap<String, u32>)> {
    walltime_ok(&o.time)?;
    let begin = begin_of(o.begin.as_deref())?;
    if let Some(d) = &o.dependency {
        d.parse::<Dependency>()
            .map_err(|e| bad(format!("--dependency: {e}")))?;
    }
    if let Some(a) = &o.array {
        a.parse::<ArraySpec>()
            .map_err(|e| bad(format!("--array: {e}")))?;
    }
    let mut licences = BTreeMap::new();
    for l in &o.licence {
        let (name, count) =
            foresight_core::licence::parse_demand(l).map_err(|e| bad(format!("--licence: {e}")))?;
        *licences.entry(name).or_insert(0u32) += count;
    }
    Ok((begin, licences))
}

/// Runs `job submit`, with what [`check`] read; prints the job's id.
pub(super) fn submit(
    c: &Client,
    o: SubmitOpts,
    (begin, licences): (Option<i64>, BTreeMap<String, u32>),
) -> Result<()> {
    let mut env = exported(&o.export, std::env::vars_os())?;
    for kv in &o.env {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| bad(format!("--env {kv:?}: expected KEY=VALUE")))?;
        env.insert(k.to_string(), v.to_string());
    }
    let cwd = match o.chdir {
        Some(d) => d,
        None => std::env::current_dir()?,
    };
    let cwd = std::path::absolute(&cwd)?;
    let inputs = o
        .input
        .iter()
        .map(|i| parse_input(i))
        .collect::<Result<Vec<_>, _>>()?;
    let outputs = o
        .output_file
        .iter()
        .map(|f| parse_output(f))
        .collect::<Result<Vec<_>, _>>()?;
    let req = SubmitJob {
        name: o.name,
        procs: o.procs,
        walltime: Walltime::Text(o.time),
        price: o.price,
        cluster: o.cluster,
        reservation: o.reservation,
        allow_early_start: o.allow_early_start,
        co_allocate: !o.no_coallocation,
        command: o.command,
        env,
        cwd: Some(cwd.display().to_string()),
        hold: o.hold,
        group: None,
        account: o.account,
        class: None,
        qos: None,
        dependency: o.dependency,
        array: o.array,
        priority: o.priority,
        requeue: o.requeue,
        begin,
        requires: o.requires,
        licences,
        app: o.app,
        inputs,
        outputs,
    };
    let s: Submitted = c.post("/jobs", &req)?;
    o.out.output.print_compact(&s, || format!("{}\n", s.id))
}

/// The variables `--export SPEC` takes from `shell` (this process's environment), as sbatch
/// reads its `--export`: `NONE`, `ALL`, or `NAME[=VALUE]` items, after `ALL` added to it.
/// Names that are not shell identifiers (exported bash functions) and `FORESIGHT_*` are left
/// out of `ALL`, and refused when named.
fn exported(
    spec: &str,
    shell: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> anyhow::Result<BTreeMap<String, String>> {
    let shell: BTreeMap<String, String> = shell
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| is_env_name(k) && !k.starts_with("FORESIGHT_"))
        .collect();
    let mut env = BTreeMap::new();
    for (i, item) in spec.split(',').enumerate() {
        match item {
            "NONE" if i == 0 => {}
            "ALL" if i == 0 => env.clone_from(&shell),
            _ => {
                let (name, value) = match item.split_once('=') {
                    Some((name, value)) => (name, Some(value)),
                    None => (item, None),
                };
                if !is_env_name(name) || name.starts_with("FORESIGHT_") {
                    return Err(bad(format!(
                        "--export {spec:?}: {item:?} is not NAME or NAME=VALUE with NAME in \
                         [A-Za-z_][A-Za-z0-9_]* and not FORESIGHT_* (or give ALL or NONE alone)"
                    )));
                }
                // A name without a value that this shell does not have is left out, as sbatch does.
                if let Some(v) = value
                    .map(str::to_owned)
                    .or_else(|| shell.get(name).cloned())
                {
                    env.insert(name.to_owned(), v);
                }
            }
        }
    }
    Ok(env)
}

/// A name a shell can export: `[A-Za-z_][A-Za-z0-9_]*`.
fn is_env_name(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `--input PATH[@CLUSTER]`: the text after the last `@` names the cluster unless it holds a
/// `/` (then the `@` belongs to the path); a relative path is made absolute here, where the
/// user stands.
fn parse_input(text: &str) -> Result<InputSpec> {
    let (path, cluster) = match text.rsplit_once('@') {
        Some((p, c)) if !c.contains('/') => (p, Some(c)),
        _ => (text, None),
    };
    if path.is_empty() || cluster.is_some_and(str::is_empty) {
        return Err(bad(format!("--input {text:?}: expected PATH[@CLUSTER]")));
    }
    let path = std::path::absolute(path).map_err(|e| bad(format!("--input {text:?}: {e}")))?;
    Ok(InputSpec {
        path: path.display().to_string(),
        cluster: cluster.map(Into::into),
    })
}

/// `--output-file PATH[@CLUSTER]`: split as `--input` is; the path stays relative (the
/// server refuses any other).
fn parse_output(text: &str) -> Result<OutputSpec> {
    let (path, cluster) = match text.rsplit_once('@') {
        Some((p, c)) if !c.contains('/') => (p, Some(c)),
        _ => (text, None),
    };
    if path.is_empty() || cluster.is_some_and(str::is_empty) {
        return Err(bad(format!(
            "--output-file {text:?}: expected PATH[@CLUSTER]"
        )));
    }
    Ok(OutputSpec {
        path: path.into(),
        cluster: cluster.map(Into::into),
    })
}

#[cfg(test)]
mod export_tests {
    use super::exported;

    fn shell() -> impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)> {
        [
            ("PATH", "/opt/bin:/usr/bin"),
            ("HOME", "/home/a"),
            ("FORESIGHT_TOKEN", "secret"),
            ("BASH_FUNC_f%%", "() { :; }"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
    }

    fn names(spec: &str) -> Vec<(String, String)> {
        exported(spec, shell()).unwrap().into_iter().collect()
    }

    #[test]
    fn none_exports_nothing_and_all_exports_the_shell_but_tokens_and_functions() {
        assert!(names("NONE").is_empty());
        let all = names("ALL");
        let keys: Vec<&str> = all.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["HOME", "PATH"]);
    }

    #[test]
    fn named_items_take_the_shells_value_or_their_own_and_add_to_all() {
        assert_eq!(
            names("PATH,X=1,MISSING"),
            [
                ("PATH".into(), "/opt/bin:/usr/bin".into()),
                ("X".into(), "1".into())
            ]
        );
        assert_eq!(names("ALL,HOME=/w").len(), 2);
        assert_eq!(names("ALL,HOME=/w")[0], ("HOME".into(), "/w".into()));
    }

    #[test]
    fn a_token_or_a_bad_name_is_refused_by_name() {
        for spec in ["FORESIGHT_TOKEN", "A-B=1", "=1", "1X"] {
            let e = exported(spec, shell()).unwrap_err().to_string();
            assert!(e.contains("--export"), "{spec}: {e}");
        }
    }
}
