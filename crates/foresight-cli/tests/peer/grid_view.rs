//! What operators see of the decentralized grid (real dispatchers, one throwaway
//! PostgreSQL): `site list` shows every site with its lease, up, then down once a killed
//! site's lease runs out; `auction list` shows a job's auction open with its bid, then, the
//! bidder dead, closed unsold; `/metrics` says the same.
#![allow(clippy::unwrap_used)]

use crate::peer;

use crate::common::*;
use peer::*;
use serde_json::{json, Value};
use std::time::Duration;

/// `foresight ARGS` against `url` as `token`'s owner: its standard output.
fn cli(url: &str, token: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(BIN)
        .args(args)
        .env("FORESIGHT_SERVER", url)
        .env("FORESIGHT_TOKEN", token)
        .output()
        .unwrap();
    assert!(out.status.success(), "foresight {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// `foresight NOUN list -o json`, by name or job.
fn listed(url: &str, token: &str, noun: &str) -> Vec<Value> {
    let text = cli(url, token, &[noun, "list", "-o", "json"]);
    serde_json::from_str::<Value>(&text)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// The value of the sample `name` (with its labels, as `name{site="a"}`) in `url`'s metrics.
fn metric(url: &str, token: &str, name: &str) -> Option<f64> {
    let text = reqwest::blocking::Client::new()
        .get(format!("{url}/metrics"))
        .bearer_auth(token)
        .send()
        .unwrap()
        .text()
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn operators_see_the_sites_leases_open_auctions_and_unsold_jobs() {
    let store = foresight_testkit::postgres::database();
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    // Auctions last α × the prior mean runtime: 0.3 × 20 s = 6 s, long enough to be seen open.
    let a = Peer::start_with(&root, "a", &store, 2, 1500, 20, 0.3);
    let admin = admin_token(&a);
    let mut b = Peer::start_with(&root, "b", &store, 2, 1500, 20, 0.3);
    let site = |name: &str| -> Value {
        listed(&a.url, &admin, "site")
            .into_iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("site {name} not listed"))
    };
    // Both sites are listed, up, with their leases and what they advertise.
    let sites = listed(&a.url, &admin, "site");
    let names: Vec<&str> = sites.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a", "b"], "{sites:?}");
    for (s, p) in sites.iter().zip([&a, &b]) {
        assert_eq!(s["state"], "up", "{s}");
        assert_eq!(s["lease_ms"], 1500, "{s}");
        let left = s["lease_left_ms"].as_i64().unwrap();
        assert!(left > 0 && left <= 1500, "{s}");
        assert_eq!(s["max_procs"], 2, "{s}");
        assert_eq!(s["url"], p.url.as_str(), "{s}");
    }
    let table = cli(&a.url, &admin, &["site", "list"]);
    assert!(table.starts_with("NAME  ID  STATE  LEASE"), "{table}");
    for name in ["a", "b"] {
        let line = table
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{table}"));
        assert!(line.contains(" up ") && line.contains("s left"), "{table}");
    }
    // Not for users: the grid names every site and every user's jobs.
    let (status, ann) = Http::new(&a.url, &admin).post("/users", &json!({ "name": "ann" }));
    assert_eq!(status, 201, "{ann}");
    let ann = Http::new(&a.url, ann["token"].as_str().unwrap());
    for path in ["/sites", "/auctions"] {
        let (status, v) = ann.get(path);
        assert_eq!(status, 403, "{path}: {v}");
    }
    // Site a is busy with a job of its own: only b can run a 2-processor global job, and b
    // opens its auction and bids.
    let on_a = Http::new(&a.url, &admin);
    let log = root.join("runs.log");
    let mut blocker = counted_job(&log, 60.0);
    blocker["procs"] = 2.into();
    blocker["cluster"] = "a-c".into();
    on_a.submit(blocker);
    wait_for("a's own job to run", Duration::from_secs(20), || {
        (runs(&log).len() == 1).then_some(())
    });
    let mut global = counted_job(&log, 1.0);
    global["procs"] = 2.into();
    let g = on_a.submit(global);
    let of_g = |stage: &str| {
        listed(&a.url, &admin, "auction")
            .into_iter()
            .find(|x| x["job"] == g && x["state"] == stage)
    };
    let open = wait_for(
        "b's bid in g's open auction",
        Duration::from_secs(20),
        || of_g("open").filter(|x| x["bids"] == 1),
    );
    assert_eq!(open["best_bidder"], "b", "{open}");
    assert_eq!(open["opened_by"], "b", "{open}");
    assert!(open["best_bid"].as_f64().is_some(), "{open}");
    assert_eq!(
        (open["rounds"].as_u64(), open["unsold"].as_u64()),
        (Some(1), Some(0))
    );
    assert_eq!(open["procs"], 2, "{open}");
    assert!(open["closes_at"].as_i64().unwrap() > open["opened_at"].as_i64().unwrap());
    let table = cli(&a.url, &admin, &["auction", "list"]);
    let line = table
        .lines()
        .find(|l| l.starts_with(&format!("{g} ")))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(line.contains(" open ") && line.contains("(b)") && line.contains("closes "));
    assert_eq!(metric(&a.url, &admin, "foresight_auctions_open"), Some(1.0));
    assert_eq!(
        metric(&a.url, &admin, "foresight_offered_jobs{state=\"open\"}"),
        Some(1.0)
    );
    for s in ["a", "b"] {
        let up = format!("foresight_site_up{{site=\"{s}\"}}");
        assert_eq!(metric(&a.url, &admin, &up), Some(1.0), "{up}");
    }
    // b dies: past its lease it is listed down, and its bid no longer counts.
    b.sigkill();
    let down = wait_for("a to list b down", Duration::from_secs(20), || {
        Some(site("b")).filter(|s| s["state"] == "down")
    });
    assert!(down["lease_left_ms"].as_i64().unwrap() <= 0, "{down}");
    assert_eq!(site("a")["state"], "up");
    assert_eq!(
        metric(&a.url, &admin, "foresight_site_up{site=\"b\"}"),
        Some(0.0)
    );
    let lease = metric(&a.url, &admin, "foresight_site_lease_seconds{site=\"b\"}").unwrap();
    assert!(lease <= 0.0, "b's lease ran out: {lease}");
    let table = cli(&a.url, &admin, &["site", "list"]);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("b ") && l.contains(" down ") && l.contains("expired ")),
        "{table}"
    );
    // At its close no live site has bid: unsold, and queued until a site can bid.
    let unsold = wait_for(
        "g's auction to close unsold",
        Duration::from_secs(30),
        || of_g("unsold"),
    );
    assert_eq!(
        (unsold["rounds"].as_u64(), unsold["unsold"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(unsold["bids"], 0, "{unsold}");
    assert!(
        unsold["best_bid"].is_null() && unsold["closes_at"].is_null(),
        "{unsold}"
    );
    assert_eq!(metric(&a.url, &admin, "foresight_unsold_jobs"), Some(1.0));
    assert_eq!(metric(&a.url, &admin, "foresight_auctions_open"), Some(0.0));
    assert_eq!(
        metric(
            &a.url,
            &admin,
            "foresight_auctions_closed_total{outcome=\"unsold\"}"
        ),
        Some(1.0),
        "a closed it"
    );
    let table = cli(&a.url, &admin, &["auction", "list"]);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with(&format!("{g} ")) && l.contains(" unsold ")),
        "{table}"
    );
}
