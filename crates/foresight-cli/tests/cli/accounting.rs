#![allow(clippy::unwrap_used)] // tests fail loudly by design
//! End-to-end: `job tail -f` sees a job's lines as it writes them, `job history` (sacct) lists
//! finished jobs with their exit codes and charges, and `report usage` (sreport) adds up to the
//! jobs' own processor-hours and charges, on the real binary and service.

use crate::common::{int, Server};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn tail_history_and_usage_agree_with_the_jobs() {
    let s = Server::start(2);
    let alice = s.add_user("alice", Some(1e6));
    let submit = |args: &[&str]| -> u64 {
        let mut a = vec!["job", "submit"];
        a.extend_from_slice(args);
        s.run_as(&alice, &a).trim().parse().unwrap()
    };
    let writer = submit(&[
        "-n",
        "1",
        "-t",
        "1m",
        "--",
        "sh",
        "-c",
        "for i in 1 2 3 4; do echo line$i; sleep 1; done",
    ]);
    // Follows the writer from before it starts until it ends.
    let mut tail = Command::new(env!("CARGO_BIN_EXE_foresight"))
        .args(["job", "tail", "-f", &writer.to_string()])
        .env("FORESIGHT_SERVER", &s.url)
        .env("FORESIGHT_TOKEN", &alice)
        .env("TZ", "UTC")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = tail.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        BufReader::new(out)
            .lines()
            .map(|l| (Instant::now(), l.unwrap()))
            .collect::<Vec<_>>()
    });
    let wide = submit(&["-n", "2", "-t", "1m", "--", "true"]);
    let failing = submit(&["-n", "1", "-t", "1m", "--", "sh", "-c", "exit 3"]);
    let mut jobs = Vec::new();
    for id in [writer, wide, failing] {
        jobs.push(s.wait_final(id, Duration::from_secs(60)));
    }
    // `tail -f` ends by itself once the job has ended and everything was read.
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(st) = tail.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "job tail -f did not end");
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut tail.stderr.take().unwrap(), &mut err).unwrap();
    assert!(status.success(), "job tail -f: {status}: {err}");
    let lines = reader.join().unwrap();
    let text: Vec<&str> = lines.iter().map(|(_, l)| l.as_str()).collect();
    assert_eq!(text, ["line1", "line2", "line3", "line4"]);
    // Seen as written (a second apart), not all at the end.
    let spread = lines[3].0 - lines[0].0;
    assert!(
        spread >= Duration::from_millis(2000),
        "lines came {spread:?} apart"
    );
    // Without -f: the last lines only.
    let last = s.run_as(&alice, &["job", "tail", "-n", "2", &writer.to_string()]);
    assert_eq!(last, "line3\nline4\n");

    // sacct: the three jobs, their exit codes and charges as the job records say.
    let history: Vec<Value> = serde_json::from_str(&s.run_as(
        &alice,
        &["job", "history", "--since", "now-1hour", "-o", "json"],
    ))
    .unwrap();
    assert_eq!(history.len(), 3, "{history:#?}\n{jobs:#?}");
    for j in &jobs {
        let h = history.iter().find(|h| h["id"] == j["id"]).unwrap();
        assert_eq!(h["state"], j["state"]);
        assert_eq!(h["exit_code"], j["exit_code"]);
        assert_eq!(h["charged"], j["charged"]);
        assert_eq!(
            int(h, "elapsed"),
            int(j, "ended_at") - int(j, "started_at"),
            "{h}"
        );
        assert_eq!(h["parts"].as_array().unwrap().len(), 1);
    }
    let failed = history.iter().find(|h| h["id"] == failing).unwrap();
    assert_eq!(failed["exit_code"], 3);
    let table = s.run_as(&alice, &["job", "history", "--since", "now-1hour"]);
    let row = table
        .lines()
        .find(|l| l.starts_with(&format!("{failing} ")))
        .unwrap();
    assert!(row.contains(" 3:0 "), "{table}");
    let csv = s.run_as(
        &alice,
        &["job", "history", "--since", "now-1hour", "-o", "csv"],
    );
    assert_eq!(csv.lines().count(), 4, "{csv}");
    assert!(csv.starts_with("id,name,user,account,state,start,end,elapsed"));
    // Nothing ended before the period.
    let none = s.run_as(
        &alice,
        &[
            "job",
            "history",
            "--since",
            "now-2hours",
            "--until",
            "now-1hour",
            "-o",
            "json",
        ],
    );
    assert_eq!(serde_json::from_str::<Vec<Value>>(&none).unwrap().len(), 0);

    // sreport: by user and by cluster, the sums are the jobs' own.
    let proc_hours: f64 = jobs
        .iter()
        .map(|j| {
            int(j, "procs") as f64 * (int(j, "ended_at") - int(j, "started_at")) as f64 / 3600.0
        })
        .sum();
    let charged: f64 = jobs.iter().map(|j| j["charged"].as_f64().unwrap()).sum();
    for by in ["user", "cluster", "account"] {
        let rows: Vec<Value> = serde_json::from_str(&s.run(&[
            "report",
            "usage",
            "--by",
            by,
            "--since",
            "now-1hour",
            "-o",
            "json",
        ]))
        .unwrap();
        let ph: f64 = rows.iter().map(|r| r["proc_hours"].as_f64().unwrap()).sum();
        let ch: f64 = rows.iter().map(|r| r["charged"].as_f64().unwrap()).sum();
        assert!((ph - proc_hours).abs() < 1e-9, "{by}: {ph} vs {proc_hours}");
        assert!((ch - charged).abs() < 1e-6, "{by}: {ch} vs {charged}");
    }
    let by_user: Vec<Value> =
        serde_json::from_str(&s.run(&["report", "usage", "--since", "now-1hour", "-o", "json"]))
            .unwrap();
    assert_eq!(by_user.len(), 1, "{by_user:?}");
    assert_eq!(
        (by_user[0]["key"].as_str(), by_user[0]["jobs"].as_u64()),
        (Some("alice"), Some(3))
    );
    let table = s.run(&["report", "usage", "--by", "cluster", "--since", "now-1hour"]);
    assert!(table.contains("TOTAL"), "{table}");
    // A period that ends before it starts is refused, naming the options.
    let bad = s
        .cli()
        .args(["report", "usage", "--since", "now", "--until", "now-1hour"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--until"));
}
