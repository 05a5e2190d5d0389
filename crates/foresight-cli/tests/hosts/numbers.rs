//! The numbers of issue 39, measured through the harness and printed (not asserted: they
//! describe this machine); the failover time is in `failover.rs`. Run them all with
//! `cargo test -p foresight-cli --test hosts -- --ignored --nocapture numbers`.

use crate::coalloc::{stamp_start, starts};
use crate::grid::{Grid, Options, DEFAULT, ONE_WAY};
use crate::inputs::random_file;
use crate::relay::Relay;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

#[test]
#[ignore = "measures; run with --ignored --nocapture"]
fn numbers_across_hosts() {
    let Some(_serial) = crate::harness("the numbers across hosts") else {
        return;
    };
    let grid = Grid::new(
        1,
        Options {
            procs: 8,
            log: "info",
            ..DEFAULT
        },
    );
    println!(
        "links: 100 Mbit/s tbf, 1 % loss each way, relay delay {} ms each way",
        ONE_WAY.as_millis()
    );
    round_trip(&grid);
    dispatch_rate(&grid, 100);
    throughput(&grid, 32);
    drop(grid);
    skew(20);
}

/// The median and the largest of `xs`.
fn median_max(mut xs: Vec<f64>) -> (f64, f64) {
    xs.sort_by(f64::total_cmp);
    (xs[xs.len() / 2], xs[xs.len() - 1])
}

/// A command's round trip centre → site → centre: `job cat` at the centre asks the site
/// for a part's output through its mailbox and waits for the answer.
fn round_trip(grid: &Grid) {
    let id = grid.centre.http().submit(json!({
        "procs": 1, "walltime": 60, "command": ["echo", "hello"],
    }));
    let j = grid.centre.wait_final(id, Duration::from_secs(60));
    assert_eq!(j["state"], "completed", "{j}");
    let http = grid.centre.http();
    let times: Vec<f64> = (0..20)
        .map(|_| {
            let t = Instant::now();
            let (status, body) = http.get(&format!("/jobs/{id}/output"));
            assert_eq!(status, 200, "{body}");
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    let (med, max) = median_max(times);
    println!("command round trip centre -> site -> centre (job output, 20 tries): median {med:.1} ms, max {max:.1} ms");
}

/// `n` one-processor `true` jobs bound to the site: parts finished per second, from the
/// first submission to the last end the centre recorded.
fn dispatch_rate(grid: &Grid, n: usize) {
    let http = grid.centre.http();
    let t = Instant::now();
    let ids: Vec<u64> = (0..n)
        .map(|_| {
            http.submit(json!({
                "procs": 1, "walltime": 30, "cluster": "umea-abisko", "command": ["true"],
            }))
        })
        .collect();
    for &id in &ids {
        let j = grid.centre.wait_final(id, Duration::from_secs(600));
        assert_eq!(j["state"], "completed", "{j}");
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "parts dispatched to one site: {n} in {secs:.1} s, {:.1} parts/s",
        n as f64 / secs
    );
}

/// An input of `mb` MB fetched by the site (the centre logs bytes and milliseconds) against
/// `iperf3` from the site's namespace to the centre's through a relay alike.
fn throughput(grid: &Grid, mb: usize) {
    let input = grid.centre.scratch().join("big.dat");
    random_file(&input, mb);
    let id = grid.centre.http().submit(json!({
        "procs": 1, "walltime": 300, "command": ["sh", "-c", "wc -c < big.dat"],
        "inputs": [{ "path": input.display().to_string() }],
    }));
    let j = grid.centre.wait_final(id, Duration::from_secs(300));
    assert_eq!(j["state"], "completed", "{j}");
    let logs = grid.centre.logs();
    let line = logs
        .lines()
        .find(|l| l.contains("inputs fetched by site"))
        .unwrap_or_else(|| panic!("no transfer logged: {logs}"));
    let field = |name: &str| -> f64 {
        let at = line.find(&format!("{name}=")).unwrap() + name.len() + 1;
        line[at..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let fetch_mbit = field("bytes") * 8.0 / 1e6 / (field("millis") / 1000.0);
    let raw_mbit = iperf3(grid);
    println!(
        "input fetch {mb} MB: {fetch_mbit:.1} Mbit/s; iperf3 on the same path: {raw_mbit:.1} Mbit/s; {:.0} %",
        100.0 * fetch_mbit / raw_mbit
    );
}

/// `iperf3 -R` (the centre's host sending, as for an input) from the site's namespace
/// through a relay like the site's: received Mbit/s.
fn iperf3(grid: &Grid) -> f64 {
    let centre = &grid.centre_host;
    let site = &grid.sites[0].host;
    let port = 5201;
    let mut server = std::process::Command::new("ip")
        .args([
            "netns", "exec", &centre.ns, "iperf3", "-s", "-1", "-p", "5201",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let relay = Relay::start(
        (site.peer, 0).into(),
        SocketAddr::from((centre.ip, port)),
        ONE_WAY,
    );
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", &site.ns, "iperf3", "-R", "-J", "-t", "8"])
        .args([
            "-c",
            &relay.addr.ip().to_string(),
            "-p",
            &relay.addr.port().to_string(),
        ])
        .output()
        .unwrap();
    let _ = server.wait();
    drop(relay);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("iperf3: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or_else(|| panic!("iperf3 said {v}"))
        / 1e6
}

/// `n` co-allocated jobs over two sites of 4: the parts' start skew, median and largest.
fn skew(n: usize) {
    let grid = Grid::new(2, DEFAULT);
    let marks = tempfile::tempdir().unwrap();
    let ids: Vec<u64> = (0..n)
        .map(|k| {
            grid.centre.http().submit(json!({
                "procs": 6, "walltime": 5, "co_allocate": true,
                "command": ["sh", "-c", stamp_start(marks.path(), &format!("job{k}"))],
            }))
        })
        .collect();
    let t = Instant::now();
    let skews: Vec<f64> = ids
        .iter()
        .enumerate()
        .map(|(k, &id)| {
            let j = grid.centre.wait_final(id, Duration::from_secs(600));
            assert_eq!(j["state"], "completed", "{j}");
            let s = starts(marks.path(), &format!("job{k}"), &["abisko", "aurora"]);
            (s[0] - s[1]).abs() * 1000.0
        })
        .collect();
    let (med, max) = median_max(skews);
    println!(
        "co-allocation skew over {n} jobs on two sites: median {med:.0} ms, max {max:.0} ms ({:.0} s for all)",
        t.elapsed().as_secs_f64()
    );
}
