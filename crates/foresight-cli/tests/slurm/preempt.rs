#![allow(clippy::unwrap_used)] // tests fail loudly by design
//! End-to-end: absolute priorities on a real Slurm cluster (started by
//! `scripts/local-slurm.sh`), through the real service. On a cluster of 8 CPUs a local job of
//! the site's own user holds 2, a level-0 global job the other 6; a level-3 global job of 6
//! arrives. The low job is suspended in Slurm (`SUSPENDED`), the high one runs there at once
//! and completes, then the low one is resumed and completes; the local job runs throughout.
//! A low job that says it may be requeued is requeued instead and runs again as its next
//! attempt. A low job co-allocated over two clusters is suspended whole (both parts) for a
//! high job on one of them, and resumed whole once it has ended.
//!
//! They run only when `FORESIGHT_SLURM_CONFS` is set (`source /tmp/foresight-slurm/env`);
//! otherwise each test says it skips and passes. They use the last cluster named there (the
//! co-allocated one the first two),
//! under their own instance name (`fspreempt-…`), so other instances on the cluster are left
//! alone, and cancel at the end what they made.

use crate::common::{wait_for, Server};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::SERIAL;

const OTHER_USER: &str = "fsowner";
const INSTANCE: &str = "fspreempt";

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The cluster to use: (name, slurm.conf), or None (after saying so).
fn cluster(test: &str) -> Option<(String, PathBuf)> {
    let Ok(confs) = std::env::var("FORESIGHT_SLURM_CONFS") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: FORESIGHT_SLURM_CONFS is not set under CI (scripts/test.sh starts the clusters)"
        );
        eprintln!(
            "SKIP {test}: FORESIGHT_SLURM_CONFS is not set (start clusters with \
             `scripts/local-slurm.sh start 2`, then `source /tmp/foresight-slurm/env`)"
        );
        return None;
    };
    let last = confs.split(',').rfind(|s| !s.trim().is_empty())?;
    let (name, conf) = last.split_once('=').unwrap();
    Some((name.trim().to_string(), PathBuf::from(conf.trim())))
}

fn slurm(conf: &Path, program: &str) -> Command {
    let mut c = Command::new(program);
    c.env("SLURM_CONF", conf)
        .env_remove("SLURM_TIME_FORMAT")
        .stdin(Stdio::null());
    c
}

/// Every job Slurm shows.
fn jobs(conf: &Path) -> Vec<Value> {
    wait_for("squeue --json", secs(10), || {
        let out = slurm(conf, "squeue").arg("--json").output().ok()?;
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        v["jobs"].as_array().cloned()
    })
}

fn state(j: &Value) -> String {
    match &j["job_state"] {
        Value::Array(a) => a
            .first()
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        v => v.as_str().unwrap_or_default().to_string(),
    }
}

fn name(j: &Value) -> &str {
    j["name"].as_str().unwrap_or_default()
}

fn live(j: &Value) -> bool {
    matches!(
        state(j).as_str(),
        "PENDING" | "RUNNING" | "SUSPENDED" | "CONFIGURING" | "COMPLETING" | "REQUEUED"
    )
}

/// The highest Slurm job id when the scenario's daemon started: Slurm jobs of earlier
/// runs of the same name (shown for `MinJobAge`) are not this run's.
static FIRST_ID: AtomicU64 = AtomicU64::new(0);

/// The same per cluster (by its `slurm.conf`) when a scenario follows several: each Slurm
/// cluster numbers its jobs itself. Empty for one cluster, [`FIRST_ID`] then counts.
static FIRST_IDS: std::sync::Mutex<Vec<(PathBuf, u64)>> = std::sync::Mutex::new(Vec::new());

/// The highest Slurm job id of the cluster at `conf` when the scenario's daemon started.
fn first_id(conf: &Path) -> u64 {
    let firsts = FIRST_IDS.lock().unwrap_or_else(|p| p.into_inner());
    firsts
        .iter()
        .find(|(c, _)| c == conf)
        .map_or_else(|| FIRST_ID.load(Ordering::SeqCst), |(_, id)| *id)
}

/// The Slurm state of attempt `attempt` (0 first) of Foresight job `id` in this run (the
/// newest such Slurm job).
fn part_state(conf: &Path, id: u64, attempt: u32) -> Option<String> {
    let want = format!("{INSTANCE}-{id}.{attempt}");
    let first = first_id(conf);
    jobs(conf)
        .into_iter()
        .filter(|j| name(j) == want && j["job_id"].as_u64().unwrap_or(0) > first)
        .max_by_key(|j| j["job_id"].as_u64().unwrap_or(0))
        .map(|j| state(&j))
}

/// A local job of the site's own user, straight to Slurm: its Slurm id.
fn sbatch_local(conf: &Path, procs: u32, script: &str) -> String {
    let jobs_dir = conf.parent().unwrap().parent().unwrap().join("jobs");
    let out = Command::new("runuser")
        .args(["-u", OTHER_USER, "--", "env"])
        .arg(format!("SLURM_CONF={}", conf.display()))
        .args(["sbatch", "--parsable", "--job-name=local-preempt"])
        .arg(format!("--chdir={}", jobs_dir.display()))
        .arg("--output=/dev/null")
        .arg(format!("--ntasks={procs}"))
        .arg("--time=5")
        .arg(format!("--wrap={script}"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sbatch as {OTHER_USER}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .split(';')
        .next()
        .unwrap()
        .to_string()
}

/// What a scenario made in Slurm, cancelled when it ends, whatever happens.
struct Cleanup {
    conf: PathBuf,
    local: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let mine: Vec<String> = jobs(&self.conf)
            .into_iter()
            .filter(|j| live(j) && name(j).starts_with(&format!("{INSTANCE}-")))
            .map(|j| j["job_id"].to_string())
            .chain(self.local.iter().cloned())
            .collect();
        if !mine.is_empty() {
            let _ = slurm(&self.conf, "scancel")
                .args(&mine)
                .stderr(Stdio::null())
                .status();
        }
        std::thread::sleep(secs(2));
        let out = slurm(&self.conf, "scontrol")
            .args(["show", "res", "-o"])
            .output()
            .unwrap();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Some(r) = line
                .split_whitespace()
                .find_map(|kv| kv.strip_prefix("ReservationName="))
            else {
                continue;
            };
            if r.starts_with(&format!("{INSTANCE}-")) {
                let _ = slurm(&self.conf, "scontrol")
                    .args(["delete", &format!("reservationname={r}")])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }
}

/// A daemon following the one cluster, under this file's instance name; it waits until the
/// cluster is up and no job of this instance is left on it.
fn server(cluster: &str, conf: &Path) -> Server {
    wait_for("no job of this instance left", secs(60), || {
        (!jobs(conf)
            .iter()
            .any(|j| live(j) && name(j).starts_with(&format!("{INSTANCE}-"))))
        .then_some(())
    });
    let newest = jobs(conf)
        .iter()
        .filter_map(|j| j["job_id"].as_u64())
        .max()
        .unwrap_or(0);
    FIRST_ID.store(newest, Ordering::SeqCst);
    FIRST_IDS.lock().unwrap_or_else(|p| p.into_inner()).clear();
    let toml = format!(
        "listen = \"127.0.0.1:0\"\ninstance = \"{INSTANCE}\"\nlead_time_seconds = 0\n\
         cycle_ms = 200\n\n[[cluster]]\nname = \"{cluster}\"\nkind = \"slurm\"\n\
         slurm_conf = \"{}\"\nsync_ms = 1000\n",
        conf.display()
    );
    let s = Server::with_config_logging(&toml, "info");
    wait_for("the cluster up", secs(30), || {
        let text = s.run(&["cluster", "list", "-o", "json"]);
        let v: Value = serde_json::from_str(&text).ok()?;
        v.as_array()?
            .iter()
            .all(|c| c["state"] == "up" && c["procs"].as_u64().unwrap_or(0) >= 8)
            .then_some(())
    });
    s
}

/// The local job on 2 CPUs, the low global job on the other 6, running; returns the local
/// job's Slurm id and the low job's id.
fn fill(s: &Server, conf: &Path, cleanup: &mut Cleanup, low_args: &[&str]) -> (String, u64) {
    let local = sbatch_local(conf, 2, "sleep 240");
    cleanup.local.push(local.clone());
    wait_for("the local job running", secs(30), || {
        jobs(conf)
            .iter()
            .any(|j| j["job_id"] == local.parse::<u64>().unwrap_or(0) && state(j) == "RUNNING")
            .then_some(())
    });
    let low = s.submit(low_args);
    s.wait_job(low, "running", secs(60), |j| j["state"] == "running");
    wait_for("the low part running in Slurm", secs(30), || {
        (part_state(conf, low, 0).as_deref() == Some("RUNNING")).then_some(())
    });
    (local, low)
}

fn local_state(conf: &Path, local: &str) -> String {
    jobs(conf)
        .iter()
        .find(|j| j["job_id"] == local.parse::<u64>().unwrap_or(0))
        .map(state)
        .unwrap_or_default()
}

#[test]
fn a_high_level_job_suspends_a_low_one_on_slurm_which_resumes_and_completes() {
    let Some((cname, conf)) = cluster("slurm preemption (suspend)") else {
        return;
    };
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut cleanup = Cleanup {
        conf: conf.clone(),
        local: Vec::new(),
    };
    let s = server(&cname, &conf);
    // The low job works 20 one-second steps: a suspension delays the steps after it.
    let (local, low) = fill(
        &s,
        &conf,
        &mut cleanup,
        &[
            "-n",
            "6",
            "-t",
            "5m",
            "--",
            "sh",
            "-c",
            "for i in $(seq 40); do sleep 1; done",
        ],
    );
    let high = s.submit(&["--priority", "3", "-n", "6", "-t", "2m", "--", "sleep", "8"]);
    // Suspended in Slurm, and the high job runs there, long before the low one's end.
    wait_for("the low part suspended in Slurm", secs(60), || {
        (part_state(&conf, low, 0).as_deref() == Some("SUSPENDED")).then_some(())
    });
    let h = s.wait_job(high, "running", secs(90), |j| j["state"] == "running");
    assert_eq!(h["priority"], 3, "{h}");
    assert_eq!(part_state(&conf, high, 0).as_deref(), Some("RUNNING"));
    let l = s.show(low);
    assert_eq!(l["state"], "running", "{l}");
    assert_eq!(l["suspended"], true, "{l}");
    let reason = l["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&format!("preempted by job {high}")),
        "{reason}"
    );
    assert_eq!(part_state(&conf, low, 0).as_deref(), Some("SUSPENDED"));
    // The site's own job is never preempted.
    assert_eq!(local_state(&conf, &local), "RUNNING");

    let h = s.wait_final(high, secs(120));
    assert_eq!(h["state"], "completed", "{h}");
    // Then the low job is resumed in Slurm (the same Slurm job) and completes.
    wait_for("the low part resumed in Slurm", secs(90), || {
        (part_state(&conf, low, 0).as_deref() == Some("RUNNING")).then_some(())
    });
    let l = s.wait_job(low, "resumed", secs(60), |j| j["suspended"] == false);
    assert_eq!(l["state"], "running", "{l}");
    assert_eq!(local_state(&conf, &local), "RUNNING");
    let l = s.wait_final(low, secs(180));
    assert_eq!(l["state"], "completed", "{l}");
    assert_eq!(l["exit_code"], 0, "{l}");
    // Suspended, not run again: its one Slurm job (attempt 0) completed, and no attempt 1.
    assert_eq!(part_state(&conf, low, 0).as_deref(), Some("COMPLETED"));
    assert_eq!(part_state(&conf, low, 1), None, "suspended, not run again");
    assert_eq!(part_state(&conf, high, 0).as_deref(), Some("COMPLETED"));
    assert_eq!(local_state(&conf, &local), "RUNNING");
}

#[test]
fn a_requeueable_low_job_on_slurm_is_requeued_and_runs_again() {
    let Some((cname, conf)) = cluster("slurm preemption (requeue)") else {
        return;
    };
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut cleanup = Cleanup {
        conf: conf.clone(),
        local: Vec::new(),
    };
    let s = server(&cname, &conf);
    let (local, low) = fill(
        &s,
        &conf,
        &mut cleanup,
        &["-n", "6", "-t", "5m", "--requeue", "--", "sleep", "15"],
    );
    let high = s.submit(&["--priority", "3", "-n", "6", "-t", "2m", "--", "sleep", "5"]);
    let h = s.wait_job(high, "running", secs(90), |j| j["state"] == "running");
    assert_eq!(
        part_state(&conf, high, 0).as_deref(),
        Some("RUNNING"),
        "{h}"
    );
    // The first attempt of the low job no longer runs in Slurm.
    let first = part_state(&conf, low, 0).unwrap_or_default();
    assert!(first != "RUNNING" && first != "SUSPENDED", "{first}");
    assert_eq!(local_state(&conf, &local), "RUNNING");
    let h = s.wait_final(high, secs(120));
    assert_eq!(h["state"], "completed", "{h}");
    let l = s.wait_final(low, secs(180));
    assert_eq!(l["state"], "completed", "{l}");
    assert_eq!(l["exit_code"], 0, "{l}");
    // Ran again as its next attempt (a new Slurm job), after the high job had started.
    let first = part_state(&conf, low, 0).unwrap_or_default();
    assert!(first != "RUNNING" && first != "COMPLETED", "{first}");
    assert_eq!(part_state(&conf, low, 1).as_deref(), Some("COMPLETED"));
    assert!(
        l["started_at"].as_i64() >= h["started_at"].as_i64(),
        "the low job's new run started before the high job: {l} {h}"
    );
    assert_eq!(local_state(&conf, &local), "RUNNING");
}

/// The first two clusters named in `FORESIGHT_SLURM_CONFS`, or None (after saying so).
fn two_clusters(test: &str) -> Option<Vec<(String, PathBuf)>> {
    let Ok(confs) = std::env::var("FORESIGHT_SLURM_CONFS") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: FORESIGHT_SLURM_CONFS is not set under CI (scripts/test.sh starts the clusters)"
        );
        eprintln!("SKIP {test}: FORESIGHT_SLURM_CONFS is not set");
        return None;
    };
    let two: Vec<(String, PathBuf)> = confs
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .take(2)
        .map(|s| {
            let (name, conf) = s.split_once('=').unwrap();
            (name.trim().to_string(), PathBuf::from(conf.trim()))
        })
        .collect();
    if two.len() < 2 {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: two Slurm clusters are needed under CI"
        );
        eprintln!("SKIP {test}: two Slurm clusters are needed");
        return None;
    }
    Some(two)
}

/// A daemon following both clusters, as [`server`] does one.
fn server_on_two(clusters: &[(String, PathBuf)]) -> Server {
    let mut firsts = Vec::new();
    for (_, conf) in clusters {
        wait_for("no job of this instance left", secs(60), || {
            (!jobs(conf)
                .iter()
                .any(|j| live(j) && name(j).starts_with(&format!("{INSTANCE}-"))))
            .then_some(())
        });
        let newest = jobs(conf)
            .iter()
            .filter_map(|j| j["job_id"].as_u64())
            .max()
            .unwrap_or(0);
        firsts.push((conf.clone(), newest));
    }
    *FIRST_IDS.lock().unwrap_or_else(|p| p.into_inner()) = firsts;
    let mut toml = format!(
        "listen = \"127.0.0.1:0\"\ninstance = \"{INSTANCE}\"\nlead_time_seconds = 0\n\
         cycle_ms = 200\n"
    );
    for (name, conf) in clusters {
        toml.push_str(&format!(
            "\n[[cluster]]\nname = \"{name}\"\nkind = \"slurm\"\nslurm_conf = \"{}\"\n\
             sync_ms = 1000\n",
            conf.display()
        ));
    }
    let s = Server::with_config_logging(&toml, "info");
    wait_for("both clusters up", secs(30), || {
        let text = s.run(&["cluster", "list", "-o", "json"]);
        let v: Value = serde_json::from_str(&text).ok()?;
        let up = v.as_array()?;
        (up.len() == 2
            && up
                .iter()
                .all(|c| c["state"] == "up" && c["procs"].as_u64().unwrap_or(0) >= 8))
        .then_some(())
    });
    s
}

/// A level-0 job of 12 runs co-allocated over both clusters of 8 (a part in each); a
/// level-3 job of 8 arrives and fits nowhere: both parts are suspended in Slurm (one
/// stopped means all stopped), the high job runs at once on one of the clusters and
/// completes, then both parts are resumed together and the low job completes.
#[test]
fn a_co_allocated_low_job_is_suspended_on_both_clusters_and_resumed_on_both() {
    let Some(clusters) = two_clusters("slurm preemption (co-allocated)") else {
        return;
    };
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let _cleanup: Vec<Cleanup> = clusters
        .iter()
        .map(|(_, conf)| Cleanup {
            conf: conf.clone(),
            local: Vec::new(),
        })
        .collect();
    let s = server_on_two(&clusters);
    let confs: Vec<&Path> = clusters.iter().map(|(_, c)| c.as_path()).collect();
    let parts_are = |id: u64, want: &str| {
        confs
            .iter()
            .all(|c| part_state(c, id, 0).as_deref() == Some(want))
    };
    let low = s.submit(&[
        "-n",
        "12",
        "-t",
        "5m",
        "--",
        "sh",
        "-c",
        "for i in $(seq 20); do sleep 1; done",
    ]);
    let l = s.wait_job(low, "running", secs(60), |j| {
        j["state"] == "running" && j["parts"].as_array().is_some_and(|p| p.len() == 2)
    });
    wait_for("both low parts running in Slurm", secs(30), || {
        parts_are(low, "RUNNING").then_some(())
    });
    let high = s.submit(&["--priority", "3", "-n", "8", "-t", "2m", "--", "sleep", "6"]);
    wait_for("both low parts suspended in Slurm", secs(60), || {
        parts_are(low, "SUSPENDED").then_some(())
    });
    let h = s.wait_job(high, "running", secs(60), |j| j["state"] == "running");
    assert!(
        confs
            .iter()
            .any(|c| part_state(c, high, 0).as_deref() == Some("RUNNING")),
        "{h}"
    );
    let l2 = s.show(low);
    assert_eq!(l2["suspended"], true, "{l2}");
    assert!(
        l2["reason"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("preempted by job {high}")),
        "{l2}"
    );
    assert!(parts_are(low, "SUSPENDED"), "{l}");

    let h = s.wait_final(high, secs(60));
    assert_eq!(h["state"], "completed", "{h}");
    wait_for("both low parts resumed in Slurm", secs(60), || {
        parts_are(low, "RUNNING").then_some(())
    });
    let l = s.wait_job(low, "resumed", secs(30), |j| j["suspended"] == false);
    assert_eq!(l["state"], "running", "{l}");
    let l = s.wait_final(low, secs(90));
    assert_eq!(l["state"], "completed", "{l}");
    assert!(parts_are(low, "COMPLETED"), "{l}");
}
