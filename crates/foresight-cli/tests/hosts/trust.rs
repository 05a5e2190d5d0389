//! Requests between a site and the centre that must be refused, sent from the site's host
//! through its relay (the only path it has): forged, replayed, stale, and one site's
//! request about another's cluster or files. And the centre's host has no path to a site.

use crate::grid::{Grid, DEFAULT};
use crate::netns::Host;
use foresight_rm::grid::sign;
use serde_json::{json, Value};

/// A signed request: the headers `curl -H` sends, its method, path and body.
struct Signed {
    headers: Vec<String>,
    path: String,
    body: Option<Vec<u8>>,
}

/// A request to `path` signed as `site` with `token` at `timestamp` (POST when `body`).
fn signed(site: &str, token: &str, timestamp: i64, path: &str, body: Option<&Value>) -> Signed {
    let bytes = body.map(|b| serde_json::to_vec(b).unwrap());
    let method = if bytes.is_some() { "POST" } else { "GET" };
    let nonce = sign::nonce();
    let empty = Vec::new();
    let sig = sign::signature(
        token,
        site,
        timestamp,
        &nonce,
        method,
        path,
        bytes.as_ref().unwrap_or(&empty),
    );
    Signed {
        headers: vec![
            "content-type: application/json".to_string(),
            format!("x-foresight-site: {site}"),
            format!("{}: {timestamp}", sign::TIMESTAMP_HEADER),
            format!("{}: {nonce}", sign::NONCE_HEADER),
            format!("{}: {sig}", sign::SIGNATURE_HEADER),
        ],
        path: path.to_string(),
        body: bytes,
    }
}

/// Sends `req` from `host` to `base` with curl; the HTTP status (0: no connection).
fn send_from(host: &Host, base: &str, req: &Signed) -> u16 {
    let mut cmd = std::process::Command::new("ip");
    cmd.args(["netns", "exec", &host.ns, "curl", "-s", "-o", "/dev/null"])
        .args(["--max-time", "10", "-w", "%{http_code}"]);
    for h in &req.headers {
        cmd.arg("-H").arg(h);
    }
    if let Some(b) = &req.body {
        cmd.arg("--data-binary")
            .arg(String::from_utf8(b.clone()).unwrap());
    }
    let out = cmd.arg(format!("{base}{}", req.path)).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

#[test]
fn a_forged_replayed_stale_or_cross_site_request_across_the_link_is_refused() {
    let Some(_serial) = crate::harness("refused requests across hosts") else {
        return;
    };
    let grid = Grid::new(2, DEFAULT);
    let (umea, lund) = (&grid.sites[0], &grid.sites[1]);
    let via = format!("http://{}", umea.relay.addr);
    let token = "umea-token-0123456789abcdef";
    let now = crate::common::now();
    let path = "/grid/v1/commands?after=0&wait=0";
    let good = signed("umea", token, now, path, None);
    assert_eq!(send_from(&umea.host, &via, &good), 200, "a good request");
    assert_eq!(
        send_from(&umea.host, &via, &good),
        401,
        "the same, replayed"
    );
    let checks = [
        (
            signed("umea", "not-the-token-of-umea-at-all", now, path, None),
            401,
            "forged",
        ),
        (
            signed("lund", token, now, path, None),
            401,
            "umea's key, as lund",
        ),
        (
            signed("umea", token, now - 3600, path, None),
            401,
            "an hour old",
        ),
        (
            signed(
                "umea",
                token,
                now,
                "/grid/v1/snapshots",
                Some(&json!([{
                    "cluster": "aurora",
                    "state": {"taken_at": 0, "processors": 4, "jobs": [], "reservations": []}
                }])),
            ),
            403,
            "umea reporting lund's cluster",
        ),
        (
            signed("umea", token, now, "/grid/v1/files/1/0/aurora/in.dat", None),
            403,
            "umea fetching a file of lund's cluster",
        ),
    ];
    for (req, want, what) in &checks {
        assert_eq!(send_from(&umea.host, &via, req), *want, "{what}");
    }
    // The site's host reaches the centre only through its relay, and the centre's host
    // reaches no site at all (no route: a site admits nothing from the grid).
    let direct = format!("http://{}", grid.centre.url.trim_start_matches("http://"));
    assert_eq!(
        send_from(&umea.host, &direct, &good),
        0,
        "umea straight to the centre"
    );
    let lund_api = format!("http://{}:{}", lund.host.ip, crate::grid::API_PORT);
    let healthz = Signed {
        headers: Vec::new(),
        path: "/healthz".to_string(),
        body: None,
    };
    assert_eq!(
        send_from(&grid.centre_host, &lund_api, &healthz),
        0,
        "the centre to lund"
    );
    // Both sites still take the centre's work.
    assert!(grid.clusters().iter().all(|c| c["state"] == "up"));
}
