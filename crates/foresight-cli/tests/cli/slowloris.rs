//! Slow and idle clients against the real daemon: many connections that trickle a request
//! head or body a byte at a time, or hold a connection open doing nothing, must neither keep
//! a normal client waiting nor stay open past the `[http]` limits; connections past
//! `max_connections` are closed at once with a log line.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use crate::common::Server;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Limits short enough for a test: heads and bodies 2 s, idle 2 s, 150 connections.
const LIMITS: &str = r#"
[http]
header_timeout_ms = 2000
body_timeout_ms = 2000
idle_timeout_ms = 2000
max_connections = 150

[[cluster]]
name = "local"
procs = 2
"#;

/// One attacking connection and what became of it.
struct Slow {
    stream: TcpStream,
    /// When the server closed it, after the attack began.
    closed_after: Option<Duration>,
    /// What the server sent before closing.
    answer: Vec<u8>,
}

impl Slow {
    fn open(addr: &str, first: &[u8]) -> Slow {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.write_all(first).unwrap();
        stream.set_nonblocking(true).unwrap();
        Slow {
            stream,
            closed_after: None,
            answer: Vec::new(),
        }
    }

    /// Sends one more byte (if `trickle`) and notes whether the server has closed.
    fn poke(&mut self, start: Instant, trickle: bool) {
        if self.closed_after.is_some() {
            return;
        }
        let mut buf = [0u8; 4096];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => break self.closed_after = Some(start.elapsed()),
                Ok(n) => self.answer.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if trickle && self.stream.write_all(b"x").is_err() {
                        self.closed_after = Some(start.elapsed());
                    }
                    break;
                }
                Err(_) => break self.closed_after = Some(start.elapsed()),
            }
        }
    }
}

fn addr(server: &Server) -> String {
    server.url.trim_start_matches("http://").to_string()
}

#[test]
fn slow_clients_are_cut_off_and_a_normal_client_is_served_meanwhile() {
    let server = Server::with_config(LIMITS);
    let addr = addr(&server);
    let start = Instant::now();
    // 80 heads trickled a byte a second (a header line that never ends), 20 bodies
    // trickled likewise after a complete head, 20 connections that say nothing at all.
    let mut heads: Vec<Slow> = (0..80)
        .map(|_| Slow::open(&addr, b"GET /api/v1/whoami HTTP/1.1\r\nHost: x\r\nX-Slow: "))
        .collect();
    let body_head = format!(
        "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{{",
        server.token
    );
    let mut bodies: Vec<Slow> = (0..20)
        .map(|_| Slow::open(&addr, body_head.as_bytes()))
        .collect();
    let mut silent: Vec<Slow> = (0..20).map(|_| Slow::open(&addr, b"")).collect();

    let http = server.http();
    let mut served = Vec::new();
    while start.elapsed() < Duration::from_secs(8) {
        for s in heads.iter_mut().chain(bodies.iter_mut()) {
            s.poke(start, true);
        }
        for s in silent.iter_mut() {
            s.poke(start, false);
        }
        // A normal client, meanwhile.
        let asked = Instant::now();
        let (status, who) = http.get("/whoami");
        assert_eq!(status, 200, "{who}");
        served.push(asked.elapsed());
        std::thread::sleep(Duration::from_millis(500));
    }
    let slowest = served.iter().max().unwrap();
    assert!(
        *slowest < Duration::from_secs(1),
        "a normal request took {slowest:?} during the attack: {served:?}"
    );
    // Every attacker was cut off, none later than its limit (2 s) plus a second of slack
    // for the daemon to notice and this loop to look.
    for (kind, group) in [("head", &heads), ("body", &bodies), ("silent", &silent)] {
        for s in group.iter() {
            let closed = s
                .closed_after
                .unwrap_or_else(|| panic!("a slow {kind} connection is still open after 8 s"));
            assert!(
                closed < Duration::from_millis(3600),
                "a slow {kind} connection was closed only after {closed:?}"
            );
        }
    }
    // A trickled body is answered 408 naming the body before the connection is closed.
    for s in &bodies {
        let answer = String::from_utf8_lossy(&s.answer);
        assert!(
            answer.starts_with("HTTP/1.1 408") && answer.contains("\"field\":\"body\""),
            "{answer}"
        );
    }
}

#[test]
fn an_idle_keep_alive_connection_is_closed() {
    let server = Server::with_config(LIMITS);
    let mut s = TcpStream::connect(addr(&server)).unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let start = Instant::now();
    let mut all = Vec::new();
    let _ = s.read_to_end(&mut all);
    let held = start.elapsed();
    let answer = String::from_utf8_lossy(&all);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        held >= Duration::from_millis(1500) && held < Duration::from_millis(3500),
        "the kept-alive connection was closed after {held:?}"
    );
}

#[test]
fn at_the_cap_the_oldest_waiting_connections_make_room_with_a_log_line() {
    let server = Server::with_config(LIMITS);
    let addr = addr(&server);
    let start = Instant::now();
    let mut held: Vec<Slow> = (0..200).map(|_| Slow::open(&addr, b"")).collect();
    std::thread::sleep(Duration::from_millis(500));
    for s in held.iter_mut() {
        s.poke(start, false);
    }
    let closed: Vec<usize> = (0..held.len())
        .filter(|&i| held[i].closed_after.is_some())
        .collect();
    assert_eq!(
        closed,
        (0..50).collect::<Vec<_>>(),
        "200 silent connections against a cap of 150: the 50 oldest should make room"
    );
    // A normal client is served at once, though the cap is full of waiting connections.
    let asked = Instant::now();
    assert!(healthy(&addr), "a new client was not served at the cap");
    assert!(
        asked.elapsed() < Duration::from_secs(1),
        "{:?}",
        asked.elapsed()
    );
    let log = std::fs::read_to_string(server.stderr_path()).unwrap();
    assert!(
        log.contains("connection limit reached (150 open, [http] max_connections)"),
        "{log}"
    );
}

/// Does `GET /healthz` on a new connection get 200?
fn healthy(addr: &str) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    answer.starts_with(b"HTTP/1.1 200")
}
