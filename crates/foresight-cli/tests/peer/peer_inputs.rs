//! A global job's input fetched by the winning dispatcher from the site that holds it, over
//! the network: the winner runs in a mount namespace of its own where the holder's scratch
//! directory is an empty file system, so that a copy from the path (which worked only on a
//! shared file system) cannot reach it. The sites serve HTTPS with certificates of a private
//! CA that each trusts through `dispatcher.ca_cert` alone, as sites on separate hosts would.
#![allow(clippy::unwrap_used)]

use crate::peer;

use crate::common::*;
use peer::*;
use serde_json::json;
use std::path::Path;
use std::time::Duration;

/// `data`'s SHA-256 as `sha256sum` prints it.
fn sha256_hex(path: &std::path::Path) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn a_winner_that_cannot_see_the_holders_files_fetches_the_input_over_https() {
    if !can_hide("an input fetched from another site") {
        return;
    }
    let store = foresight_testkit::postgres::database();
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let scratch = root.join("a").join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    // 3 MiB of varied bytes: large enough to measure, not to slow the test.
    let input = scratch.join("in.dat");
    let data: Vec<u8> = (0..3u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&input, &data).unwrap();
    let want = sha256_hex(&input);
    let tls = root.join("tls");
    std::fs::create_dir_all(&tls).unwrap();
    let (ca, cert, key) = private_ca(&tls);
    let pems = (ca.as_path(), cert.as_path(), key.as_path());
    // Site a has one processor, b two: a job of two can only be b's.
    let a = Peer::start_tls(&root, "a", &store, 1, None, pems);
    let b = Peer::start_tls(&root, "b", &store, 2, Some(&scratch), pems);
    assert!(a.url.starts_with("https://"), "{}", a.url);
    let token = admin_token(&a);
    let result = root.join("result.txt");
    let id = Http::with_ca(&a.url, &token, &ca).submit(json!({
        "procs": 2, "walltime": 60,
        // It stays running a while, for the requests below to find it awarded to b.
        "command": ["sh", "-c", format!("sha256sum < in.dat > {}; sleep 30", result.display())],
        "inputs": [{ "path": input.display().to_string() }],
    }));
    let job = || {
        let (status, j) = Http::with_ca(&b.url, &token, &ca).get(&format!("/jobs/{id}"));
        assert_eq!(status, 200, "{j}");
        j
    };
    let ended = |j: &serde_json::Value| {
        matches!(
            j["state"].as_str(),
            Some("completed" | "failed" | "cancelled")
        )
    };
    // Running at b once it has read its input (or ended without).
    let j = wait_for("the job to read its input", Duration::from_secs(60), || {
        let j = job();
        let read = std::fs::read_to_string(&result).is_ok_and(|s| s.ends_with('\n'));
        (read || ended(&j)).then_some(j)
    });
    assert!(!ended(&j), "{j}\na: {}\nb: {}", a.logs(), b.logs());
    let outbox = a
        .data()
        .join("peer-outbox")
        .join("b")
        .join(format!("{id}.0"));
    assert!(
        !outbox.exists(),
        "the holder's copy is removed once fetched"
    );
    requests_between_sites(&store, (&a.url, &ca), id, &want);
    let j = wait_for("the job to end", Duration::from_secs(90), || {
        Some(job()).filter(ended)
    });
    assert_eq!(
        j["state"],
        "completed",
        "{j}\na: {}\nb: {}",
        a.logs(),
        b.logs()
    );
    assert_eq!(j["cluster"], "b-c", "{j}");
    let read = std::fs::read_to_string(&result).unwrap();
    assert_eq!(
        read.split_whitespace().next(),
        Some(want.as_str()),
        "{read}"
    );
    // a served it, b fetched it: over the network, as b cannot see a's scratch directory.
    assert!(a.logs().contains("offered to site b"), "{}", a.logs());
    let logs = b.logs();
    let fetched = logs.lines().find(|l| l.contains("fetched from site a"));
    assert!(fetched.is_some(), "{logs}");
    // What the transfer measured (bytes, milliseconds), and the link's estimate after.
    for l in logs
        .lines()
        .filter(|l| l.contains("fetched from site a") || l.contains("estimate"))
    {
        eprintln!("{l}");
    }
}

/// A site's key, as the shared database keeps it.
fn key_of(store: &str, site: &str) -> String {
    psql(
        store,
        &format!("SELECT peer_key FROM dispatchers WHERE site = '{site}'"),
    )
}

/// `GET path` at `url` (HTTPS, of a site certified by `ca`) signed as `site` with `key`
/// with `nonce`: its status and body.
fn signed_get(url: (&str, &Path), path: &str, by: (&str, &str), nonce: &str) -> (u16, Vec<u8>) {
    signed("GET", url, path, by, nonce)
}

/// `method path` at `url` (HTTPS, of a site certified by `ca`) signed as `site` with `key`
/// with `nonce`: its status and body.
fn signed(
    method: &str,
    (url, ca): (&str, &Path),
    path: &str,
    (site, key): (&str, &str),
    nonce: &str,
) -> (u16, Vec<u8>) {
    use foresight_rm::grid::{sign, SITE_HEADER};
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let sig = sign::signature(key, site, now, nonce, method, path, &[]);
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let resp = https_client(ca)
        .request(method, format!("{url}{path}"))
        .header(SITE_HEADER, site)
        .header(sign::TIMESTAMP_HEADER, now.to_string())
        .header(sign::NONCE_HEADER, nonce)
        .header(sign::SIGNATURE_HEADER, sig)
        .send()
        .unwrap();
    (resp.status().as_u16(), resp.bytes().unwrap().to_vec())
}

/// While job `id` runs at b, holder a (at `a_url`: its address and the CA that certifies it)
/// serves its input to b alone, once per request.
fn requests_between_sites(store: &str, a_url: (&str, &Path), id: u64, want: &str) {
    use foresight_rm::grid::sign;
    let path = format!("/peer/v1/inputs/{id}/0/in.dat");
    let b = ("b", key_of(store, "b"));
    let b = (b.0, b.1.as_str());
    // The winner dropped the holder's copy once it had the input: it is offered again.
    let (status, body) = signed(
        "POST",
        a_url,
        &format!("/peer/v1/inputs/{id}/0"),
        b,
        &sign::nonce(),
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let n = sign::nonce();
    let (status, body) = signed_get(a_url, &path, b, &n);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let got = {
        use std::io::Write;
        let t = tempfile::NamedTempFile::new().unwrap();
        t.as_file().write_all(&body).unwrap();
        sha256_hex(t.path())
    };
    assert_eq!(got, want, "the winner is served the input itself");
    let (status, _) = signed_get(a_url, &path, b, &n);
    assert_eq!(status, 401, "a replayed request is refused");
    let (status, _) = signed_get(a_url, &path, ("b", "a guessed key"), &sign::nonce());
    assert_eq!(status, 401, "a forged request is refused");
    let a_key = key_of(store, "a");
    let (status, body) = signed_get(a_url, &path, ("a", &a_key), &sign::nonce());
    assert_eq!(
        status,
        403,
        "a site the job is not awarded to is refused: {}",
        String::from_utf8_lossy(&body)
    );
    let unsigned = https_client(a_url.1)
        .get(format!("{}{path}", a_url.0))
        .send()
        .unwrap();
    assert_eq!(
        unsigned.status().as_u16(),
        401,
        "an unsigned request is refused"
    );
}
