#![allow(clippy::unwrap_used)]
//! A site on another host lends a cluster to a centre (kind `site`): the site connects out,
//! the centre plans a global job on the site's cluster, reserves there and submits the part
//! through the site's mailbox; the part runs at the site as a job of the site's grid user,
//! and the centre follows it to its end and reads its output from the site. A request with
//! another site's token, a wrong one, or for a cluster the site does not lend is refused.

use crate::common::{wait_for, Server};
use serde_json::{json, Value};
use std::time::Duration;

const TOKEN: &str = "umea-site-token-0123456789abcdef";

/// How the centre and the site are set up.
#[derive(Clone, Copy)]
struct Setup {
    /// The centre serves HTTPS with a certificate of a private CA the site pins.
    tls: bool,
    /// The centre's lease of the site, seconds.
    lease: u64,
    /// Added to the top of the centre's configuration.
    centre: &'static str,
}

const PLAIN: Setup = Setup {
    tls: false,
    lease: 10,
    centre: "",
};

/// A centre with cluster `umea-abisko` lent by site `umea` (its `abisko`, 4 processors),
/// and the site, connected.
fn centre_and_site(setup: Setup) -> (Server, Server, tempfile::TempDir) {
    let keys = tempfile::tempdir().unwrap();
    let dir = std::fs::canonicalize(keys.path()).unwrap();
    let token_file = dir.join("umea.token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let (centre_tls, site_tls) = if setup.tls {
        let (ca, cert, key) = crate::common::private_ca(&dir);
        (
            format!(
                "[http]\ntls_cert = \"{}\"\ntls_key = \"{}\"\n",
                cert.display(),
                key.display()
            ),
            format!("ca_cert = \"{}\"\n", ca.display()),
        )
    } else {
        (String::new(), String::new())
    };
    let more = format!("{}\n{centre_tls}", setup.centre);
    let centre = centre(&[("umea", "abisko", &token_file)], setup.lease, &more);
    let site = site("umea", "abisko", &centre.url, &token_file, &site_tls);
    wait_for(
        "the site's cluster up at the centre",
        Duration::from_secs(20),
        || (cluster_state(&centre) == "up").then_some(()),
    );
    (centre, site, keys)
}

/// The state of the centre's one cluster (through its local socket: HTTPS or not).
fn cluster_state(centre: &Server) -> String {
    let c: Value = serde_json::from_str(&centre.run(&["cluster", "list", "-o", "json"])).unwrap();
    c[0]["state"].as_str().unwrap().to_string()
}

/// Job `id` at the centre (through its local socket).
fn centre_job(centre: &Server, id: u64) -> Value {
    serde_json::from_str(&centre.run(&["job", "show", &id.to_string(), "-o", "json"])).unwrap()
}

#[test]
fn a_global_job_planned_on_a_site_runs_there_and_its_output_is_read_at_the_centre() {
    let (centre, site, _keys) = centre_and_site(PLAIN);
    let id = centre.http().submit(json!({
        "procs": 2, "walltime": 60,
        "command": ["sh", "-c", "echo ran on $FORESIGHT_CLUSTER with $FORESIGHT_PROCS; echo oops >&2"],
    }));
    let j = centre.wait_final(id, Duration::from_secs(60));
    assert_eq!(j["state"], "completed", "{j}");
    assert_eq!(j["exit_code"], 0, "{j}");
    // The part ran at the site once, as the grid's user, in the reservation made for it.
    let parts: Vec<Value> = site.http().grid_parts(id);
    assert_eq!(parts.len(), 1, "{parts:?}");
    assert_eq!(parts[0]["user"], "grid", "{}", parts[0]);
    assert_eq!(parts[0]["state"], "completed", "{}", parts[0]);
    assert!(parts[0]["reservation"].is_u64(), "{}", parts[0]);
    let (status, rs) = site.http().get("/reservations");
    assert_eq!(status, 200, "{rs}");
    let mine: Vec<&Value> = rs
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["id"] == parts[0]["reservation"])
        .collect();
    assert_eq!(mine.len(), 1, "{rs}");
    assert!(
        mine[0]["owner"]
            .as_str()
            .unwrap()
            .starts_with("grid:foresight:"),
        "{}",
        mine[0]
    );
    // Read at the centre, from the site.
    let gs = id.to_string();
    assert_eq!(centre.run(&["job", "cat", &gs]), "ran on abisko with 2\n");
    assert_eq!(centre.run(&["job", "cat", &gs, "--stderr"]), "oops\n");
}

/// What was wrong: the centre copied a job's input into its own directory and reported the
/// staging done, while the part ran at the site without it. Now the site fetches the input
/// from the centre over the signed link, checks its SHA-256, and the part runs where it
/// landed; the centre's outbox is emptied once the site holds it.
#[test]
fn an_input_at_the_centre_is_fetched_by_the_site_and_read_by_the_part_there() {
    let (centre, site, _keys) = centre_and_site(PLAIN);
    let input = centre.scratch().join("in.dat");
    let data: String = (0..200_000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&input, &data).unwrap();
    let id = centre.http().submit(json!({
        "procs": 1, "walltime": 60, "command": ["sh", "-c", "sha256sum < in.dat; pwd"],
        "inputs": [{ "path": input.display().to_string() }],
    }));
    let j = centre.wait_final(id, Duration::from_secs(60));
    assert_eq!(j["state"], "completed", "{j}");
    let out = centre.run(&["job", "cat", &id.to_string()]);
    let mut lines = out.lines();
    let want = std::process::Command::new("sha256sum")
        .arg(&input)
        .output()
        .unwrap();
    let want = String::from_utf8(want.stdout).unwrap();
    assert_eq!(
        lines.next().unwrap().split_whitespace().next(),
        want.split_whitespace().next(),
        "{out}"
    );
    // It ran in the site's inbox, not in any directory of the centre.
    let cwd = lines.next().unwrap();
    assert!(
        cwd.ends_with(&format!("grid-inbox/abisko/foresight-{id}.0")),
        "{out}"
    );
    assert!(std::path::Path::new(cwd).starts_with(site.root()), "{out}");
    let staged = j["staging"].as_array().unwrap();
    assert_eq!(staged.len(), 1, "{j}");
    assert!(staged[0]["ended_at"].is_i64(), "{j}");
    // Nothing is left waiting at the centre: the part's outbox is gone.
    let outbox = centre
        .root()
        .join(format!("data/grid-outbox/umea/abisko/{id}.0"));
    assert!(outbox.parent().unwrap().is_dir(), "{}", outbox.display());
    assert!(!outbox.exists(), "{}", outbox.display());
}

/// What was wrong: a job that ran at a site left its outputs there, and the centre, taking
/// the part's working directory for one of its own, copied nothing and reported the copy
/// done. Now the centre asks the site for them: the site reads each as the grid's account
/// and puts it up in signed chunks, checked by SHA-256, and the centre copies it into the
/// job's working directory; an output the job did not write is named in its reason.
#[test]
fn a_jobs_outputs_written_at_a_site_come_back_to_its_working_directory_at_the_centre() {
    let (centre, _site, _keys) = centre_and_site(PLAIN);
    let home = centre.scratch().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let id = centre.http().submit(json!({
        "procs": 1, "walltime": 60, "cwd": home.display().to_string(),
        "command": ["sh", "-c", "mkdir -p res && head -c 12000000 /dev/urandom > res/big.bin \
            && sha256sum res/big.bin > sum.txt"],
        "outputs": [{ "path": "res/big.bin" }, { "path": "sum.txt" }],
    }));
    let j = centre.wait_final(id, Duration::from_secs(60));
    assert_eq!(j["state"], "completed", "{j}");
    let j = wait_for("the outputs copied", Duration::from_secs(60), || {
        let j = centre_job(&centre, id);
        j["output_staging"]["ended_at"].is_i64().then_some(j)
    });
    assert!(j["output_staging"]["error"].is_null(), "{j}");
    assert!(j["reason"].is_null(), "{j}");
    // The sum the part took at the site matches the file that came back.
    let sum = std::fs::read_to_string(home.join("sum.txt")).unwrap();
    let here = std::process::Command::new("sha256sum")
        .arg("res/big.bin")
        .current_dir(&home)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8(here.stdout).unwrap(), sum);
    assert_eq!(
        std::fs::metadata(home.join("res/big.bin")).unwrap().len(),
        12_000_000
    );
    // What came up is not kept at the centre once copied.
    let up = centre
        .root()
        .join(format!("data/grid-uploads/umea-abisko/{id}.0"));
    assert!(up.parent().unwrap().is_dir(), "{}", up.display());
    assert!(!up.exists(), "{}", up.display());

    let id = centre.http().submit(json!({
        "procs": 1, "walltime": 60, "cwd": home.display().to_string(),
        "command": ["sh", "-c", "echo ok > written.txt"],
        "outputs": [{ "path": "written.txt" }, { "path": "missing.txt" }],
    }));
    centre.wait_final(id, Duration::from_secs(60));
    let j = wait_for("the outputs copied", Duration::from_secs(60), || {
        let j = centre_job(&centre, id);
        j["output_staging"]["ended_at"].is_i64().then_some(j)
    });
    let reason = j["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("missing.txt"), "{j}");
    assert_eq!(
        std::fs::read_to_string(home.join("written.txt")).unwrap(),
        "ok\n"
    );

    // A link the job left is not followed: refused, naming it.
    let id = centre.http().submit(json!({
        "procs": 1, "walltime": 60, "cwd": home.display().to_string(),
        "command": ["ln", "-s", "/etc/hostname", "link.txt"],
        "outputs": [{ "path": "link.txt" }],
    }));
    centre.wait_final(id, Duration::from_secs(60));
    let j = wait_for("the outputs copied", Duration::from_secs(60), || {
        let j = centre_job(&centre, id);
        j["output_staging"]["ended_at"].is_i64().then_some(j)
    });
    let reason = j["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("link.txt is not a regular file"), "{j}");
    assert!(!home.join("link.txt").exists());
}

/// An input gone before its transfer fails the job, naming the file (the centre reads it as
/// the job's account when it sends it), and nothing runs at the site.
#[test]
fn an_input_that_vanished_before_its_transfer_fails_the_job_naming_it() {
    let (centre, site, _keys) = centre_and_site(PLAIN);
    let input = centre.scratch().join("gone.dat");
    std::fs::write(&input, "data\n").unwrap();
    let id = centre.http().submit(json!({
        "procs": 1, "walltime": 60, "command": ["cat", "gone.dat"], "hold": true,
        "inputs": [{ "path": input.display().to_string() }],
    }));
    std::fs::remove_file(&input).unwrap();
    centre.run(&["job", "release", &id.to_string()]);
    let j = centre.wait_final(id, Duration::from_secs(60));
    assert_eq!(j["state"], "failed", "{j}");
    let reason = j["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("gone.dat"), "{j}");
    let ran: Vec<Value> = site.http().grid_parts(id);
    assert!(ran.is_empty(), "{ran:?}");
}

/// A request to the centre at `url` signed as `site` with `token` at `timestamp`: its
/// status, and the request to send again.
fn signed(
    url: &str,
    site: &str,
    token: &str,
    timestamp: i64,
    path: &str,
    body: Option<&Value>,
) -> reqwest::blocking::RequestBuilder {
    use foresight_rm::grid::sign;
    let bytes = body
        .map(|b| serde_json::to_vec(b).unwrap())
        .unwrap_or_default();
    let method = if body.is_some() { "POST" } else { "GET" };
    let nonce = sign::nonce();
    let sig = sign::signature(token, site, timestamp, &nonce, method, path, &bytes);
    let client = reqwest::blocking::Client::new();
    let req = if body.is_some() {
        client.post(format!("{url}{path}")).body(bytes)
    } else {
        client.get(format!("{url}{path}"))
    };
    req.header("content-type", "application/json")
        .header("x-foresight-site", site)
        .header(sign::TIMESTAMP_HEADER, timestamp.to_string())
        .header(sign::NONCE_HEADER, nonce)
        .header(sign::SIGNATURE_HEADER, sig)
}

fn status(req: reqwest::blocking::RequestBuilder) -> u16 {
    req.send().unwrap().status().as_u16()
}

/// The nonces a centre had seen lived in its memory alone: a site's request captured on the
/// wire was taken again by the centre restarted (or by a standby that took over) within the
/// 300 s its timestamp stays valid. They are kept in the store now.
#[test]
fn a_request_replayed_to_a_restarted_centre_is_refused() {
    let (mut centre, _site, _keys) = centre_and_site(PLAIN);
    let now = crate::common::now();
    let path = "/grid/v1/commands?after=0&wait=0";
    let good = signed(&centre.url, "umea", TOKEN, now, path, None);
    let again = good.try_clone().unwrap();
    assert_eq!(status(good), 200);
    centre.listen = Some(centre.url.trim_start_matches("http://").to_string());
    centre.sigkill();
    centre.launch();
    wait_for("the restarted centre", Duration::from_secs(20), || {
        (cluster_state(&centre) == "up").then_some(())
    });
    assert_eq!(status(again), 401, "a request replayed after the restart");
    let fresh = signed(&centre.url, "umea", TOKEN, now, path, None);
    assert_eq!(status(fresh), 200, "a fresh request");
}

#[test]
fn a_forged_replayed_stale_or_cross_site_request_is_refused() {
    let (centre, _site, _keys) = centre_and_site(PLAIN);
    let now = crate::common::now();
    let path = "/grid/v1/commands?after=0&wait=0";
    let good = signed(&centre.url, "umea", TOKEN, now, path, None);
    let again = good.try_clone().unwrap();
    assert_eq!(status(good), 200);
    assert_eq!(status(again), 401, "a replayed request");
    let forged = signed(
        &centre.url,
        "umea",
        "not-the-token-of-umea-at-all",
        now,
        path,
        None,
    );
    assert_eq!(status(forged), 401, "signed with another key");
    assert_eq!(
        status(signed(&centre.url, "lund", TOKEN, now, path, None)),
        401,
        "a site that is not configured"
    );
    assert_eq!(
        status(signed(&centre.url, "umea", TOKEN, now - 3600, path, None)),
        401,
        "an hour old"
    );
    // The token itself, as a bearer, is no signature; nor is the admin's token.
    for token in [TOKEN, &centre.token] {
        let bare = reqwest::blocking::Client::new()
            .get(format!("{}{path}", centre.url))
            .bearer_auth(token)
            .header("x-foresight-site", "umea");
        assert_eq!(status(bare), 401);
    }
    // Signed by umea, about a cluster umea does not lend here.
    let snap = json!([{
        "cluster": "other",
        "state": {"taken_at": 0, "processors": 4, "jobs": [], "reservations": []}
    }]);
    let other = signed(
        &centre.url,
        "umea",
        TOKEN,
        now,
        "/grid/v1/snapshots",
        Some(&snap),
    );
    assert_eq!(status(other), 403);
    // Files: only a lent cluster's, only those offered, only paths under a directory.
    for (path, want) in [
        ("/grid/v1/files/1/0/other/in.dat", 403),
        ("/grid/v1/files/1/0/abisko/in.dat", 404),
        ("/grid/v1/files/1/0/abisko/a%2Fb", 404),
        ("/grid/v1/files/1/0/abisko/a%2F..%2Fb", 400),
        ("/grid/v1/files/1/0/abisko/%2Fetc%2Fpasswd", 400),
    ] {
        assert_eq!(
            status(signed(&centre.url, "umea", TOKEN, now, path, None)),
            want,
            "{path}"
        );
    }
    // Uploads: only to a lent cluster, only of a part whose files the centre asked for,
    // only paths under its directory.
    let q = "?offset=0&total=1&sha256=00";
    let put = |path: &str| {
        let nonce = foresight_rm::grid::sign::nonce();
        let sig =
            foresight_rm::grid::sign::signature(TOKEN, "umea", now, &nonce, "PUT", path, b"x");
        let put = reqwest::blocking::Client::new()
            .put(format!("{}{path}", centre.url))
            .body("x")
            .header("x-foresight-site", "umea")
            .header(foresight_rm::grid::sign::TIMESTAMP_HEADER, now.to_string())
            .header(foresight_rm::grid::sign::NONCE_HEADER, nonce)
            .header(foresight_rm::grid::sign::SIGNATURE_HEADER, sig);
        status(put)
    };
    for (path, want) in [
        (format!("/grid/v1/files/1/0/other/out.txt{q}"), 403),
        (format!("/grid/v1/files/1/0/abisko/out.txt{q}"), 404),
        (format!("/grid/v1/files/1/0/abisko/..%2Fout.txt{q}"), 400),
    ] {
        assert_eq!(put(&path), want, "{path}");
    }
    // While the centre asks part 2.0 for `out.txt` (as it does once the part ended), the
    // site may put that file, and no other, and no file larger than the centre's disk.
    let part = centre.root().join("data/grid-uploads/umea-abisko/2.0");
    std::fs::create_dir_all(part.join(".incoming")).unwrap();
    std::fs::write(part.join(".asked"), "out.txt\n").unwrap();
    let big = format!("?offset=0&total={}&sha256=00", 1u64 << 60);
    for (path, want) in [
        (format!("/grid/v1/files/2/0/abisko/other.txt{q}"), 403),
        (format!("/grid/v1/files/2/0/abisko/out.txt{big}"), 409),
        // Asked, but not the SHA-256 announced: written, checked, deleted.
        (format!("/grid/v1/files/2/0/abisko/out.txt{q}"), 409),
    ] {
        assert_eq!(put(&path), want, "{path}");
    }
    assert!(!part.join(".incoming/other.txt").exists());
    assert!(!part.join(".incoming/other.txt.part").exists());
}

#[test]
fn a_site_reaches_a_centre_over_https_through_the_ca_it_pins() {
    let (centre, site, _keys) = centre_and_site(Setup { tls: true, ..PLAIN });
    assert!(centre.url.starts_with("https://"), "{}", centre.url);
    let id = centre.submit(&["-n", "1", "-t", "1m", "--", "echo", "over", "tls"]);
    wait_for("the job completed", Duration::from_secs(60), || {
        (centre_job(&centre, id)["state"] == "completed").then_some(())
    });
    assert_eq!(centre.run(&["job", "cat", &id.to_string()]), "over tls\n");
    let ran: Vec<Value> = site.http().grid_parts(id);
    assert_eq!(ran.len(), 1, "{ran:?}");
}

#[test]
fn a_site_cut_off_keeps_running_its_part_and_the_centre_learns_its_end_on_reconnection() {
    let (centre, mut site, _keys) = centre_and_site(Setup { lease: 2, ..PLAIN });
    let marks = site.scratch().join("runs");
    let done = site.scratch().join("done");
    let script = format!(
        "echo once >> {}; sleep 4; echo finished; touch {}",
        marks.display(),
        done.display()
    );
    let id = centre.http().submit(json!({
        "procs": 2, "walltime": 120, "command": ["sh", "-c", script],
    }));
    wait_for("the part running", Duration::from_secs(30), || {
        (centre_job(&centre, id)["state"] == "running").then_some(())
    });
    // The site's service dies; its job runs on under its supervisor.
    site.sigkill();
    wait_for(
        "the site's cluster down at the centre",
        Duration::from_secs(20),
        || (cluster_state(&centre) != "up").then_some(()),
    );
    let c: Value = serde_json::from_str(&centre.run(&["cluster", "list", "-o", "json"])).unwrap();
    let reason = c[0]["reason"].to_string();
    assert!(reason.contains("silent"), "{c}");
    // The part ends while the site's service is down, and the centre learns of it only
    // seconds later.
    wait_for("the part's end", Duration::from_secs(20), || {
        done.exists().then_some(())
    });
    std::thread::sleep(Duration::from_secs(3));
    site.launch();
    wait_for(
        "the site's cluster up again",
        Duration::from_secs(20),
        || (cluster_state(&centre) == "up").then_some(()),
    );
    let j = centre.wait_final(id, Duration::from_secs(60));
    assert_eq!(j["state"], "completed", "{j}");
    assert_eq!(centre.run(&["job", "cat", &id.to_string()]), "finished\n");
    // It ran once: neither restarted at the site nor planned again elsewhere.
    assert_eq!(std::fs::read_to_string(&marks).unwrap(), "once\n");
    // Its times and its charge are the site's records, not when the centre learnt of
    // them: the part ended while the site's service was down.
    let parts: Vec<Value> = site.http().grid_parts(id);
    assert_eq!(parts.len(), 1, "{parts:?}");
    for at in ["started_at", "ended_at"] {
        assert_eq!(j[at], parts[0][at], "{at}: centre {j}, site {}", parts[0]);
    }
    let ran = j["ended_at"].as_i64().unwrap() - j["started_at"].as_i64().unwrap();
    assert!((4..=6).contains(&ran), "{j}");
    assert_eq!(j["charged"].as_f64().unwrap(), 2.0 * ran as f64, "{j}");
}

/// A centre with one cluster `<site>-<cluster>` of kind `site` per `(site, cluster,
/// token_file)`, with the site's name as its feature, leased for `lease` seconds; `more`
/// comes first in its configuration.
fn centre(sites: &[(&str, &str, &std::path::Path)], lease: u64, more: &str) -> Server {
    let mut toml = String::new();
    for (site, cluster, token_file) in sites {
        toml += &format!(
            r#"
[[cluster]]
name = "{site}-{cluster}"
kind = "site"
sync_ms = 200
features = ["{site}"]

[cluster.site]
site = "{site}"
cluster = "{cluster}"
token_file = "{}"
lease_seconds = {lease}
"#,
            token_file.display()
        );
    }
    Server::with_config(&format!("{more}\n{toml}"))
}

/// Site `name` lending its cluster `cluster` of 4 processors to the centre at `centre`,
/// with token `token_file`; `more` is added to its `[grid]`.
fn site(
    name: &str,
    cluster: &str,
    centre: &str,
    token_file: &std::path::Path,
    more: &str,
) -> Server {
    let s = Server::with_config(&format!(
        r#"
[[cluster]]
name = "{cluster}"
procs = 4

[grid]
centres = ["{centre}"]
site = "{name}"
token_file = "{}"
lend = {{ {cluster} = 4 }}
snapshot_ms = 200
{more}
"#,
        token_file.display()
    ));
    s.add_user("grid", None);
    s
}

/// A centre with two sites of 4 processors each, `umea` (cluster `abisko`) and `lund`
/// (`aurora`), both up; the sites in that order.
fn two_sites() -> (Server, [Server; 2], tempfile::TempDir) {
    two_sites_leased(30)
}

/// [`two_sites`], the centre's lease of each site `lease` seconds.
fn two_sites_leased(lease: u64) -> (Server, [Server; 2], tempfile::TempDir) {
    let keys = tempfile::tempdir().unwrap();
    let dir = std::fs::canonicalize(keys.path()).unwrap();
    let (umea, lund) = (dir.join("umea.token"), dir.join("lund.token"));
    std::fs::write(&umea, "umea-token-0123456789abcdef\n").unwrap();
    std::fs::write(&lund, "lund-token-0123456789abcdef\n").unwrap();
    let centre = centre(
        &[("umea", "abisko", &umea), ("lund", "aurora", &lund)],
        lease,
        "",
    );
    let sites = [
        site("umea", "abisko", &centre.url, &umea, ""),
        site("lund", "aurora", &centre.url, &lund, ""),
    ];
    wait_for(
        "both sites up at the centre",
        Duration::from_secs(20),
        || {
            let c: Value =
                serde_json::from_str(&centre.run(&["cluster", "list", "-o", "json"])).unwrap();
            c.as_array()
                .unwrap()
                .iter()
                .all(|c| c["state"] == "up")
                .then_some(())
        },
    );
    (centre, sites, keys)
}

/// The reservations the grid holds or held at `site`.
fn grid_reservations(site: &Server) -> Vec<Value> {
    let (status, rs) = site.http().get("/reservations");
    assert_eq!(status, 200, "{rs}");
    rs.as_array()
        .unwrap()
        .iter()
        .filter(|r| r["owner"].as_str().unwrap_or("").starts_with("grid:"))
        .cloned()
        .collect()
}

#[test]
fn a_job_larger_than_any_site_runs_in_parts_on_two_sites_at_one_start() {
    let (centre, sites, _keys) = two_sites();
    let id = centre.http().submit(json!({
        "procs": 6, "walltime": 60, "co_allocate": true,
        "command": ["sh", "-c", "echo $FORESIGHT_CLUSTER $FORESIGHT_PROCS"],
    }));
    let j = centre.wait_final(id, Duration::from_secs(60));
    assert_eq!(j["state"], "completed", "{j}");
    assert_eq!(j["parts"].as_array().unwrap().len(), 2, "{j}");
    // One part at each site, started together.
    let mut starts = Vec::new();
    let mut procs = 0;
    for s in &sites {
        let parts = s.http().grid_parts(id);
        assert_eq!(parts.len(), 1, "{parts:?}");
        assert_eq!(parts[0]["state"], "completed", "{}", parts[0]);
        procs += parts[0]["procs"].as_u64().unwrap();
        starts.push(parts[0]["started_at"].as_i64().unwrap());
    }
    assert_eq!(procs, 6);
    assert!((starts[0] - starts[1]).abs() <= 2, "{starts:?}");
}

/// Co-allocation is two-phase across sites as across clusters: when one site refuses its
/// reservation, the other site's is released, and no part starts anywhere until both hold.
#[test]
fn when_one_site_refuses_a_co_allocated_job_the_other_sites_reservation_is_released() {
    let (centre, sites, _keys) = two_sites();
    // Lund takes no grid work for now.
    sites[1].run(&["user", "disable", "grid"]);
    let id = centre.http().submit(json!({
        "procs": 6, "walltime": 60, "co_allocate": true,
        "command": ["sh", "-c", "echo $FORESIGHT_CLUSTER $FORESIGHT_PROCS"],
    }));
    // Umea is asked again and again; each of its reservations is given back.
    wait_for(
        "two of umea's reservations released",
        Duration::from_secs(60),
        || {
            let released = grid_reservations(&sites[0])
                .iter()
                .filter(|r| r["state"] == "released")
                .count();
            (released >= 2).then_some(())
        },
    );
    let live: Vec<Value> = grid_reservations(&sites[0])
        .into_iter()
        .filter(|r| r["state"] != "released")
        .collect();
    assert!(live.len() <= 1, "{live:?}");
    assert!(grid_reservations(&sites[1]).is_empty());
    for s in &sites {
        assert!(s.http().grid_parts(id).is_empty(), "a part started alone");
    }
    assert_ne!(centre_job(&centre, id)["state"], "running");
    // Lund takes grid work again: the job runs over both, at one start.
    sites[1].run(&["user", "enable", "grid"]);
    let j = centre.wait_final(id, Duration::from_secs(60));
    assert_eq!(j["state"], "completed", "{j}");
    for s in &sites {
        assert_eq!(s.http().grid_parts(id).len(), 1);
    }
    // Every reservation umea held but the one its part ran in was given back.
    let ran_in = sites[0].http().grid_parts(id)[0]["reservation"].clone();
    for r in grid_reservations(&sites[0]) {
        if r["id"] != ran_in {
            assert_eq!(r["state"], "released", "{r}");
        }
    }
}

/// What was wrong: a site that went silent after a part was submitted to it, before its
/// reserved start, ran it on its return although the centre had planned it on another site
/// meanwhile: the job ran twice. Now the site holds its grid parts that have not started
/// while the centre is out of reach (and at once when it restarts), and on reconnection
/// cancels those the centre no longer wants; its reservation is released.
#[test]
fn a_part_not_started_on_a_site_gone_silent_is_planned_on_another_site() {
    let (centre, mut sites, _keys) = two_sites_leased(2);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let id = centre.http().submit(json!({
        "procs": 2, "walltime": 60, "begin": now + 12,
        "command": ["sh", "-c", "echo $FORESIGHT_CLUSTER"],
    }));
    // Submitted there, waiting for its reserved start.
    let k = wait_for(
        "the part submitted to a site",
        Duration::from_secs(20),
        || (0..2).find(|&k| !sites[k].http().grid_parts(id).is_empty()),
    );
    let (gone, other) = (k, 1 - k);
    sites[gone].sigkill();
    let j = centre.wait_final(id, Duration::from_secs(60));
    assert_eq!(j["state"], "completed", "{j}");
    let cluster = ["umea-abisko", "lund-aurora"][other];
    assert_eq!(j["parts"][0]["cluster"], cluster, "{j}");
    assert_eq!(sites[other].http().grid_parts(id).len(), 1);
    // Back, the silent site gives up what it held for the part.
    sites[gone].launch();
    wait_for(
        "the silent site's reservation released",
        Duration::from_secs(30),
        || {
            let held = grid_reservations(&sites[gone]);
            (!held.is_empty() && held.iter().all(|r| r["state"] == "released")).then_some(())
        },
    );
    // Its part there, submitted before it went silent, was cancelled without starting.
    assert!(!sites[gone].http().grid_parts(id).is_empty());
    wait_for(
        "the stale part cancelled at the silent site",
        Duration::from_secs(30),
        || {
            sites[gone]
                .http()
                .grid_parts(id)
                .iter()
                .all(|p| p["state"] == "cancelled")
                .then_some(())
        },
    );
    for p in sites[gone].http().grid_parts(id) {
        assert!(p["started_at"].is_null(), "it ran: {p}");
    }
}

/// What was wrong: the site went on fetching commands after the last one it had answered
/// before the centre restarted, while the restarted centre numbered its commands from 1
/// again: the site never saw them, and every call to it timed out until the numbers caught
/// up. A site now says hello again when the centre's mailbox changes, and fetches it whole.
#[test]
fn a_restarted_centre_reaches_its_site_at_once() {
    let (mut centre, site, _keys) = centre_and_site(PLAIN);
    let job = || {
        json!({
            "procs": 1, "walltime": 60, "command": ["true"],
        })
    };
    for _ in 0..3 {
        let id = centre.http().submit(job());
        let j = centre.wait_final(id, Duration::from_secs(60));
        assert_eq!(j["state"], "completed", "{j}");
    }
    centre.listen = Some(centre.url.trim_start_matches("http://").to_string());
    centre
        .sigterm(Duration::from_secs(20))
        .expect("the centre stops");
    centre.launch();
    wait_for(
        "the site's cluster up at the restarted centre",
        Duration::from_secs(20),
        || (cluster_state(&centre) == "up").then_some(()),
    );
    let id = centre.http().submit(job());
    // Its reservation and part are the restarted centre's commands 1, 2, ...: the site
    // must fetch them (the old site kept fetching after the first centre's last one).
    let j = centre.wait_final(id, Duration::from_secs(60));
    assert_eq!(j["state"], "completed", "{j}");
    let logs = centre.logs();
    assert!(!logs.contains("did not answer command"), "{logs}");
    assert_eq!(site.http().grid_parts(id).len(), 1);
}

/// A workflow's edge file crosses sites: A runs at umea and writes `out/mesh.dat`; the
/// centre brings it up from umea, holds it for B, and lund fetches it with B's inputs, at
/// the same path under B's directory there. Nothing is shared between the sites.
#[test]
fn a_workflow_edge_file_written_at_one_site_is_read_by_the_successor_at_another() {
    let (centre, sites, _keys) = two_sites();
    let wf = centre.scratch().join("wf.yaml");
    std::fs::write(
        &wf,
        r#"name: cae
tasks:
  - name: A
    command: [sh, -c, 'mkdir -p out && echo "mesh from $PWD" > out/mesh.dat']
    walltime: 1
    requires: [umea]
  - name: B
    command: [sh, -c, 'cat out/mesh.dat && echo solved']
    walltime: 1
    requires: [lund]
edges:
  - {from: A, to: B, data_mb: 1, files: [out/mesh.dat]}
"#,
    )
    .unwrap();
    let id: u64 = centre
        .run(&["workflow", "submit", wf.to_str().unwrap()])
        .trim()
        .parse()
        .unwrap();
    let w = wait_for("the workflow over", Duration::from_secs(90), || {
        let w: Value =
            serde_json::from_str(&centre.run(&["workflow", "show", &id.to_string(), "-o", "json"]))
                .unwrap();
        let over = w["tasks"].as_array().unwrap().iter().all(|t| {
            !matches!(
                t["state"].as_str(),
                Some("pending" | "running" | "reserved")
            )
        });
        over.then_some(w)
    });
    assert_eq!(w["state"], "completed", "{w}");
    let job = |name: &str| {
        w["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap()["job"]
            .as_u64()
            .unwrap()
    };
    let (a, b) = (job("A"), job("B"));
    let a_dir = sites[0]
        .root()
        .join(format!("data/grid-inbox/abisko/foresight-{a}.0"));
    let a_dir = std::fs::canonicalize(a_dir).unwrap();
    assert_eq!(
        centre.run(&["job", "cat", &b.to_string()]),
        format!("mesh from {}\nsolved\n", a_dir.display())
    );
    // B's part at lund found it at the same relative path in its own directory.
    let b_dir = sites[1]
        .root()
        .join(format!("data/grid-inbox/aurora/foresight-{b}.0"));
    assert!(b_dir.join("out/mesh.dat").is_file(), "{}", b_dir.display());
    let ja = centre_job(&centre, a);
    assert!(ja["output_staging"]["error"].is_null(), "{ja}");
}

/// What was wrong: a part reserved at a site behind a job that ended early (here a local
/// user's) waited for its reserved start, because a site refused to move a reservation: the centre's work
/// conservation, which moves a reserved job earlier when processors free up, stopped at
/// the site. Now the site moves the reservation (and the part bound to it) earlier when its
/// processors are free for the whole new window, and the part starts there.
#[test]
fn a_part_reserved_behind_a_job_that_ended_early_starts_when_the_site_frees_up() {
    // Reserved as soon as planned, however far ahead.
    let (centre, site, _keys) = centre_and_site(Setup {
        centre: "lead_time_seconds = 3600",
        ..PLAIN
    });
    // A local user of the site holds all its processors for 12 of its 300 s walltime.
    let alice = site.add_user("alice", None);
    let (status, v) = site.http_as(&alice).post(
        "/jobs",
        &json!({
            "procs": 4, "walltime": 300, "cluster": "abisko", "command": ["sleep", "12"],
        }),
    );
    assert_eq!(status, 201, "{v}");
    let blocker = v["id"].as_u64().unwrap();
    wait_for(
        "the site's own job running",
        Duration::from_secs(20),
        || (site.http().get(&format!("/jobs/{blocker}")).1["state"] == "running").then_some(()),
    );
    let id = centre.http().submit(json!({
        "procs": 4, "walltime": 60, "command": ["true"],
    }));
    // Reserved at the site for the local job's walltime's end.
    let reserved = wait_for(
        "the job reserved at the site",
        Duration::from_secs(20),
        || {
            let j = centre_job(&centre, id);
            (j["state"] == "reserved").then_some(j)
        },
    );
    let planned = reserved["planned_start"].as_i64().unwrap();
    let b = site.wait_final(blocker, Duration::from_secs(30));
    assert_eq!(b["state"], "completed", "{b}");
    let ended = b["ended_at"].as_i64().unwrap();
    assert!(
        planned >= ended + 200,
        "planned at {planned}, blocker ended {ended}"
    );
    let j = centre.wait_final(id, Duration::from_secs(60));
    assert_eq!(j["state"], "completed", "{j}");
    let started = j["started_at"].as_i64().unwrap();
    assert!(
        started <= ended + 30,
        "started {started}, the site free from {ended}"
    );
    // It ran at the site once, in its reservation, which moved (it is the same one).
    let parts = site.http().grid_parts(id);
    assert_eq!(parts.len(), 1, "{parts:?}");
    let held: Vec<Value> = grid_reservations(&site)
        .into_iter()
        .filter(|r| r["id"] == parts[0]["reservation"])
        .collect();
    assert_eq!(held.len(), 1, "{held:?}");
    assert!(held[0]["start"].as_i64().unwrap() < planned, "{}", held[0]);
}
