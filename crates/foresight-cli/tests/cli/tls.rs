//! HTTPS end to end: the real daemon serves TLS with a certificate from a throwaway private CA
//! (made here with rcgen), the CLI trusts that CA through `--cacert`, and the CLI never sends a
//! token over plain HTTP to another machine unless told `--insecure`.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use crate::common::{free_port, wait_for, BIN};
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::private_ca;

/// `foresight server start --tls-cert --tls-key` on a free loopback port.
pub(crate) struct TlsServer {
    child: Child,
    pub(crate) data: PathBuf,
    pub(crate) url: String,
}

impl TlsServer {
    pub(crate) fn start(dir: &Path, cert: &Path, key: &Path) -> TlsServer {
        let data = dir.join("data");
        let child = Command::new(BIN)
            .args(["server", "start", "--listen", "127.0.0.1:0", "--procs", "2"])
            .arg("--data-dir")
            .arg(&data)
            .arg("--tls-cert")
            .arg(cert)
            .arg("--tls-key")
            .arg(key)
            .env("FORESIGHT_UNIX_USER", "*=root")
            .env("FORESIGHT_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap())
            .spawn()
            .unwrap();
        let url = wait_for("server.url", Duration::from_secs(30), || {
            std::fs::read_to_string(data.join("server.url"))
                .ok()
                .filter(|s| s.ends_with('\n'))
        });
        TlsServer {
            child,
            data,
            url: url.trim().to_string(),
        }
    }

    /// The CLI on this server over HTTPS, with its data directory's admin token.
    pub(crate) fn cli(&self, args: &[&str]) -> std::process::Output {
        // Over HTTPS: on the local socket (which the CLI would otherwise prefer) there is
        // no TLS to check.
        Command::new(BIN)
            .args(args)
            .env("FORESIGHT_DATA_DIR", &self.data)
            .env("FORESIGHT_SERVER", &self.url)
            .env_remove("FORESIGHT_TOKEN")
            .env_remove("FORESIGHT_CACERT")
            .output()
            .unwrap()
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn the_cli_talks_https_to_the_daemon_through_a_private_ca() {
    let tmp = tempfile::tempdir().unwrap();
    let (ca, cert, key) = private_ca(tmp.path());
    let server = TlsServer::start(tmp.path(), &cert, &key);
    assert!(
        server.url.starts_with("https://127.0.0.1:"),
        "server.url says {}",
        server.url
    );
    let ca = ca.to_str().unwrap();

    // With the CA: a job goes in and comes back out over TLS.
    let out = server.cli(&[
        "job", "submit", "--cacert", ca, "-n", "1", "-t", "1m", "--", "true",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let id = text(&out.stdout).trim().to_string();
    let out = server.cli(&["job", "show", "--cacert", ca, &id, "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let job: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(job["id"].to_string(), id);

    // The CA through the environment, as a site would set it.
    let out = Command::new(BIN)
        .args(["user", "list", "-o", "json"])
        .env("FORESIGHT_DATA_DIR", &server.data)
        .env("FORESIGHT_SERVER", &server.url)
        .env("FORESIGHT_CACERT", ca)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));

    // Without it the certificate is not trusted, and nothing is done.
    let out = server.cli(&["job", "list"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("cannot reach the server at https://"), "{err}");

    // A file without a certificate is refused, naming it.
    let out = server.cli(&["job", "list", "--cacert", key.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("--cacert") && err.contains("key.pem"), "{err}");

    // The TLS port does not answer plain HTTP.
    let port = server.url.rsplit(':').next().unwrap();
    let mut s = TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    assert!(
        !text(&answer).contains("200 OK"),
        "plain HTTP was served: {}",
        text(&answer)
    );
}

#[test]
fn a_bad_certificate_file_stops_the_start_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let cert = tmp.path().join("cert.pem");
    std::fs::write(&cert, "not a certificate\n").unwrap();
    let out = Command::new(BIN)
        .args(["server", "start", "--listen", "127.0.0.1:0", "--procs", "1"])
        .arg("--data-dir")
        .arg(tmp.path().join("data"))
        .arg("--tls-cert")
        .arg(&cert)
        .arg("--tls-key")
        .arg(&cert)
        .env("FORESIGHT_UNIX_USER", "*=root")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("http.tls_cert") && err.contains("cert.pem"),
        "{err}"
    );
    let out = Command::new(BIN)
        .args(["server", "start", "--tls-cert"])
        .arg(&cert)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--tls-key"),
        "{}",
        text(&out.stderr)
    );
}

/// An address of this machine that is not loopback, if it has one.
fn outward_address() -> Option<IpAddr> {
    let s = UdpSocket::bind("0.0.0.0:0").ok()?;
    // connect() on UDP sends nothing; it only picks the route's source address.
    s.connect("192.0.2.1:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[test]
fn a_token_is_not_sent_over_plain_http_to_another_machine() {
    let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let ip = outward_address().unwrap_or(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)));
    let cli = |url: &str, extra: &[&str]| {
        Command::new(BIN)
            .args([
                "job",
                "list",
                "--server",
                url,
                "--token",
                "secret-token-1234",
            ])
            .args(extra)
            .env_remove("FORESIGHT_INSECURE")
            .env_remove("FORESIGHT_CACERT")
            .output()
            .unwrap()
    };
    for url in [
        format!("http://{ip}:{port}"),
        format!("http://foresight.example.invalid:{port}"),
    ] {
        let out = cli(&url, &[]);
        assert!(!out.status.success(), "{url}");
        let err = text(&out.stderr);
        assert!(
            err.contains("refusing to send the token over plain http://")
                && err.contains("--insecure")
                && err.contains(&url),
            "{err}"
        );
    }
    // Nothing reached the listener.
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the CLI connected anyway: {other:?}"),
    }
    // Loopback is this machine: allowed (nothing listens there, so it cannot connect).
    let out = cli(&format!("http://localhost:{}", free_port()), &[]);
    assert!(
        text(&out.stderr).contains("cannot reach the server"),
        "{}",
        text(&out.stderr)
    );

    // --insecure sends it; the listener sees the token (only when this machine has an
    // outward address to listen on).
    if outward_address().is_some() {
        let url = format!("http://{ip}:{port}");
        let cli = std::thread::spawn(move || {
            Command::new(BIN)
                .args([
                    "job",
                    "list",
                    "--server",
                    &url,
                    "--token",
                    "secret-token-1234",
                ])
                .arg("--insecure")
                .output()
                .unwrap()
        });
        let mut stream = wait_for("the --insecure connection", Duration::from_secs(20), || {
            listener.accept().ok().map(|(s, _)| s)
        });
        stream.set_nonblocking(false).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut buf = [0u8; 4096];
        let n = stream.read(&mut buf).unwrap();
        assert!(
            text(&buf[..n]).contains("Bearer secret-token-1234"),
            "{}",
            text(&buf[..n])
        );
        drop(stream);
        let _ = cli.join();
    }
}
