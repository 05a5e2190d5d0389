//! The harness itself: a site's request through its relay takes at least the round trip
//! the relay adds, a cut link carries nothing until it is restored, and neither host has
//! a path to the other but the relay.

use crate::grid::{Grid, API_PORT, DEFAULT, ONE_WAY};
use crate::netns::Host;
use std::time::Duration;

/// `GET base/healthz` from `host` with curl: the status (0: no answer within `max`) and
/// the seconds it took.
pub fn healthz_from(host: &Host, base: &str, max: Duration) -> (u16, f64) {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", &host.ns, "curl", "-s", "-o", "/dev/null"])
        .args(["--max-time", &format!("{:.1}", max.as_secs_f64())])
        .args(["-w", "%{http_code} %{time_total}"])
        .arg(format!("{base}/healthz"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut words = text.split_whitespace();
    let status = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
    let secs = words
        .next()
        .and_then(|w| w.parse().ok())
        .unwrap_or(f64::NAN);
    (status, secs)
}

#[test]
fn the_relay_delays_a_sites_requests_and_a_cut_link_carries_nothing_until_restored() {
    let Some(_serial) = crate::harness("the harness's links") else {
        return;
    };
    let grid = Grid::new(1, DEFAULT);
    let site = &grid.sites[0];
    let via = format!("http://{}", site.relay.addr);
    let (status, secs) = healthz_from(&site.host, &via, Duration::from_secs(10));
    assert_eq!(status, 200, "through the relay");
    // A request and its answer each wait the one-way delay in the relay.
    let rtt = 2.0 * ONE_WAY.as_secs_f64();
    assert!(
        secs >= rtt,
        "a round trip of {secs} s, below the relay's {rtt} s"
    );
    // No other path: the centre's address from the site, the site's from the centre.
    let centre = format!("http://{}:{API_PORT}", grid.centre_host.ip);
    let short = Duration::from_secs(2);
    assert_eq!(
        healthz_from(&site.host, &centre, short).0,
        0,
        "site to centre"
    );
    let site_api = format!("http://{}:{API_PORT}", site.host.ip);
    assert_eq!(
        healthz_from(&grid.centre_host, &site_api, short).0,
        0,
        "centre to site"
    );
    site.host.cut();
    assert_eq!(
        healthz_from(&site.host, &via, short).0,
        0,
        "over a cut link"
    );
    site.host.restore();
    assert_eq!(
        healthz_from(&site.host, &via, Duration::from_secs(10)).0,
        200,
        "restored"
    );
}
