//! No single point of failure: two central services on one PostgreSQL store, one active and
//! one standing by (`--standby`), with two sites lending their clusters to whichever is
//! active (`[grid] centres` lists both). The active one is SIGKILLed under load: the standby
//! takes over, the sites and the CLI (`--server A,B`) find it by themselves, and every
//! accepted job runs once.
#![allow(clippy::unwrap_used)]

use crate::common::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// A centre lending nothing of its own: the clusters `umea-abisko` and `lund-aurora` of the
/// two sites, with their tokens in `keys`.
fn centre_config(keys: &std::path::Path) -> String {
    let mut toml = String::from("cycle_ms = 200\n");
    for (site, cluster) in [("umea", "abisko"), ("lund", "aurora")] {
        toml += &format!(
            "[[cluster]]\nname = \"{site}-{cluster}\"\nkind = \"site\"\nsync_ms = 200\n\
             [cluster.site]\nsite = \"{site}\"\ncluster = \"{cluster}\"\n\
             token_file = \"{}\"\nlease_seconds = 30\n",
            keys.join(format!("{site}.token")).display()
        );
    }
    toml
}

/// Site `name` lending its 4-processor cluster `cluster` to the centres at `centres`, in
/// that order.
fn site(name: &str, cluster: &str, centres: &[&str], keys: &std::path::Path) -> Server {
    let list: Vec<String> = centres.iter().map(|c| format!("{c:?}")).collect();
    let s = Server::with_config(&format!(
        "[[cluster]]\nname = \"{cluster}\"\nprocs = 4\n\n[grid]\ncentres = [{}]\n\
         site = \"{name}\"\ntoken_file = \"{}\"\nlend = {{ {cluster} = 4 }}\nsnapshot_ms = 200\n",
        list.join(", "),
        keys.join(format!("{name}.token")).display()
    ));
    s.add_user("grid", None);
    s
}

/// A job writing its number `n` to `marks` once it runs, then sleeping `secs`.
fn marked(n: usize, marks: &std::path::Path, secs: u32) -> Value {
    json!({
        "procs": 1, "walltime": 120,
        "command": ["sh", "-c", format!("echo {n} >> {}; sleep {secs}", marks.display())],
    })
}

fn jobs(centre: &Server) -> Vec<Value> {
    centre.http().jobs()
}

#[test]
fn a_standby_takes_over_from_a_killed_centre_and_no_job_is_lost_or_run_twice() {
    let url = foresight_testkit::postgres::database();
    let keys = tempfile::tempdir().unwrap();
    let keys = std::fs::canonicalize(keys.path()).unwrap();
    for site in ["umea", "lund"] {
        std::fs::write(
            keys.join(format!("{site}.token")),
            format!("{site}-token-0123456789abcdef\n"),
        )
        .unwrap();
    }
    let config = centre_config(&keys);
    let mut active = Server::with_config_and_store(&config, &url);
    let standby_listen = format!("127.0.0.1:{}", free_port());
    let mut standby = Server::standby(&config, &url, &standby_listen, &active.token);
    // While the first is active the standby answers every request 503, naming what it is.
    let (status, body) = standby.http().get("/jobs");
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["code"], "not_active", "{body}");
    let centres = [active.url.clone(), standby.url.clone()];
    let centres = [centres[0].as_str(), centres[1].as_str()];
    let sites = [
        site("umea", "abisko", &centres, &keys),
        site("lund", "aurora", &centres, &keys),
    ];
    wait_for("both sites up", Duration::from_secs(20), || {
        let c: Value =
            serde_json::from_str(&active.run(&["cluster", "list", "-o", "json"])).unwrap();
        c.as_array()
            .unwrap()
            .iter()
            .all(|c| c["state"] == "up")
            .then_some(())
    });
    let marks = sites[0].scratch().join("marks");
    // Load: 12 jobs on 8 processors, so that some run and some wait when the centre dies.
    let mut ids: BTreeMap<u64, usize> = BTreeMap::new();
    for n in 0..12 {
        ids.insert(active.http().submit(marked(n, &marks, 3)), n);
    }
    wait_for("jobs running", Duration::from_secs(30), || {
        (jobs(&active)
            .iter()
            .filter(|j| j["state"] == "running")
            .count()
            >= 4)
            .then_some(())
    });
    active.sigkill();
    let killed = Instant::now();
    // Submitted through the CLI with both addresses while the standby takes over: each
    // goes round them until one is active.
    let both = format!("{},{}", centres[0], centres[1]);
    let submitter = {
        let (both, token, marks) = (both.clone(), standby.token.clone(), marks.clone());
        std::thread::spawn(move || {
            (12..16)
                .map(|n| {
                    let out = assert_cmd::Command::new(BIN)
                        .env("FORESIGHT_SERVER", &both)
                        .env("FORESIGHT_TOKEN", &token)
                        .args(["job", "submit", "-n", "1", "-t", "2m", "--", "sh", "-c"])
                        .arg(format!("echo {n} >> {}; sleep 1", marks.display()))
                        .timeout(Duration::from_secs(60))
                        .output()
                        .unwrap();
                    assert!(
                        out.status.success(),
                        "{}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                    let id: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
                    (id, n)
                })
                .collect::<Vec<_>>()
        })
    };
    standby.wait_active(Duration::from_secs(20));
    let took_over = killed.elapsed();
    let late: Vec<(u64, usize)> = submitter.join().unwrap();
    // The first job the standby dispatched itself: one accepted after the kill, running.
    let first_dispatch = wait_for("a new job running", Duration::from_secs(30), || {
        jobs(&standby)
            .iter()
            .any(|j| late.iter().any(|(id, _)| j["id"] == *id) && j["started_at"].is_i64())
            .then(|| killed.elapsed())
    });
    eprintln!(
        "failover: active again after {:.2} s, first new dispatch after {:.2} s",
        took_over.as_secs_f64(),
        first_dispatch.as_secs_f64()
    );
    assert!(
        first_dispatch < Duration::from_secs(10),
        "{first_dispatch:?}\n{}",
        standby.logs()
    );
    ids.extend(late);
    for (&id, n) in &ids {
        let t0 = Instant::now();
        let j = loop {
            let (_, j) = standby.http().get(&format!("/jobs/{id}"));
            if is_final(&j) || t0.elapsed() > Duration::from_secs(40) {
                break j;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        assert_eq!(
            j["state"],
            "completed",
            "job {id} ({n}): {j}\n{}\nthe sites' parts: {:#?}\nthe sites' logs:\n{}",
            standby.logs(),
            sites.iter().map(|s| s.http().jobs()).collect::<Vec<_>>(),
            sites.iter().map(Server::logs).collect::<String>()
        );
    }
    // Each ran once, at one site.
    let mut ran: BTreeMap<usize, usize> = BTreeMap::new();
    for line in lines(&marks) {
        *ran.entry(line.parse().unwrap()).or_default() += 1;
    }
    let once: BTreeMap<usize, usize> = ids.values().map(|&n| (n, 1)).collect();
    assert_eq!(ran, once, "{}", standby.logs());
}
