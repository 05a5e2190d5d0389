//! The delaying relay: the kernel here has no `netem`, so the one-way delay of a link is
//! made in the test process. It accepts connections on one address (a site's side) and
//! opens one to the target (the centre) for each; every chunk read on one side is written
//! to the other a fixed delay after it was read, in order, and an end of stream is passed
//! on (half-close) after the same delay. Nothing goes the other way: a relay is the only
//! path from a site to the centre, and the centre has none to the site.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running relay; stopped, with every connection through it, on drop.
pub struct Relay {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
}

impl Relay {
    /// A relay listening on `listen` (port 0: any) to `target`, delaying each direction by
    /// `delay`.
    pub fn start(listen: SocketAddr, target: SocketAddr, delay: Duration) -> Relay {
        let listener = TcpListener::bind(listen)
            .unwrap_or_else(|e| panic!("the relay cannot listen on {listen}: {e}"));
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let streams = Arc::new(Mutex::new(Vec::new()));
        let (stop2, streams2) = (stop.clone(), streams.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(target) else {
                    continue; // the client sees its connection closed, as with no route
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let mut held = streams2.lock().unwrap();
                held.push(client.try_clone().unwrap());
                held.push(server.try_clone().unwrap());
                drop(held);
                pipe(
                    client.try_clone().unwrap(),
                    server.try_clone().unwrap(),
                    delay,
                );
                pipe(server, client, delay);
            }
        });
        Relay {
            addr,
            stop,
            streams,
        }
    }
}

/// Copies `from` to `to`, each chunk `delay` after it was read: a reader thread stamps the
/// chunks, a writer thread holds each until its time.
fn pipe(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
    let (tx, rx) = mpsc::channel::<(Instant, Option<Vec<u8>>)>();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let got = match from.read(&mut buf) {
                Ok(0) | Err(_) => None,
                Ok(n) => Some(buf[..n].to_vec()),
            };
            let end = got.is_none();
            if tx.send((Instant::now() + delay, got)).is_err() || end {
                return;
            }
        }
    });
    std::thread::spawn(move || {
        for (due, chunk) in rx {
            let wait = due.saturating_duration_since(Instant::now());
            if !wait.is_zero() {
                std::thread::sleep(wait);
            }
            match chunk {
                Some(bytes) if to.write_all(&bytes).is_ok() => {}
                _ => {
                    let _ = to.shutdown(Shutdown::Write);
                    return;
                }
            }
        }
    });
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread, which then sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
        for s in self.streams.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}
