//! The WIKI protocol library end to end: checksum vectors checked against a separate
//! implementation, a client/server round trip over loopback with an in-memory cluster for every
//! command, malformed and hostile requests (each answered `SC=-1` with the reason, never a hang),
//! and property tests that the frame and message parsers never panic.
#![allow(clippy::unwrap_used)]

use foresight_rm::clock::unix_seconds;
use foresight_rm::wiki::{
    check_tasklist, checksum, crc16, mix, parse_jobs, parse_nodes, parse_size, read_frame,
    render_jobs, render_nodes, serve, BackendError, CancelType, ClassSlots, Frame, JobRecord,
    JobState, Key, NodeRecord, NodeState, Reply, ReplyKind, Request, Selection, WikiBackend,
    WikiClient, WikiError, WikiServerConfig,
};
use proptest::prelude::*;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const KEY: Key = Key::new(4418);
const READ_TIMEOUT: Duration = Duration::from_millis(500);
const BACKEND_TIMEOUT: Duration = Duration::from_millis(500);

// ---------------------------------------------------------------------------------------------
// Checksum vectors

/// CRC-16/XMODEM written out bit by bit, independently of the `crc` crate.
fn reference_crc(bytes: &[u8]) -> u16 {
    let mut crc: u32 = 0;
    for &byte in bytes {
        crc ^= u32::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            crc &= 0xffff;
        }
    }
    crc as u16
}

/// Maui's pseudo-DES mix written in 64-bit arithmetic masked to 32 bits, as C's `unsigned
/// long` arithmetic would be truncated, and formatted as `%08x%08x`.
fn reference_checksum(key: u32, bytes: &[u8]) -> String {
    const M: u64 = 0xffff_ffff;
    const C1: [u64; 4] = [0xcba4e531, 0x537158eb, 0x145cdc3c, 0x0d3fdeb2];
    const C2: [u64; 4] = [0x12be4590, 0xab54ce58, 0x6954c7a6, 0x15a2ca46];
    let mut l = u64::from(reference_crc(bytes));
    let mut r = u64::from(key);
    for (c1, c2) in C1.into_iter().zip(C2) {
        let iswap = r;
        let ia = iswap ^ c1;
        let lo = ia & 0xffff;
        let hi = ia >> 16;
        let ib = (lo * lo + (!(hi * hi) & M)) & M;
        let ia = ((ib >> 16) | ((ib & 0xffff) << 16)) & M;
        r = (l ^ (((ia ^ c2) + lo * hi) & M)) & M;
        l = iswap;
    }
    format!("{l:08x}{r:08x}")
}

/// (key, signed bytes, CRC, CK). The first is the worked example; the others were
/// computed with a separate (Python) implementation of the same algorithm.
const VECTORS: [(u32, &str, u16, &str); 7] = [
    (
        4418,
        "TS=1000000000 AUTH=root DT=CMD=GETNODES ARG=0:ALL",
        0xede7,
        "327c863b4fce86d5",
    ),
    (0, "TS=0 AUTH=a DT=", 0xf100, "2a3f8ee42d5e360e"),
    (
        1,
        "TS=1700000000 AUTH=maui DT=CMD=GETJOBS ARG=0:ALL",
        0x7769,
        "83043c30a15f4f31",
    ),
    (
        4294967295,
        "TS=1700000000 AUTH=maui DT=CMD=STARTJOB ARG=42 TASKLIST=n1:n1:n2",
        0x8dcb,
        "0c8d6aaf1813d8e3",
    ),
    (
        123456789,
        "TS=1234567890 AUTH=root DT=SC=-1 RESPONSE=no job \"7\" on this cluster RSP=no job \"7\" on this cluster",
        0x4033,
        "139e5b884cbb9296",
    ),
    (
        4418,
        "TS=1000000001 AUTH=root DT=CMD=GETNODES ARG=0:ALL",
        0x19ac,
        "3b8fbd81caa7dbe0",
    ),
    (
        42,
        "TS=1700000000 AUTH=root DT=SC=0 ARG=1#n1:STATE=Idle;UPDATETIME=1700000000;CPROC=4;APROC=4;CMEMORY=8000;AMEMORY=8000;",
        0xf89f,
        "a88daf3afdfdf1c4",
    ),
];

#[test]
fn checksum_vectors_match_the_reference_implementation() {
    for (key, signed, crc, ck) in VECTORS {
        let bytes = signed.as_bytes();
        assert_eq!(crc16(bytes), crc, "crc of {signed:?}");
        assert_eq!(reference_crc(bytes), crc, "reference crc of {signed:?}");
        assert_eq!(checksum(Key::new(key), bytes), ck, "CK of {signed:?}");
        assert_eq!(
            reference_checksum(key, bytes),
            ck,
            "reference CK of {signed:?}"
        );
        let (l, r) = mix(crc, Key::new(key));
        assert_eq!(format!("{l:08x}{r:08x}"), ck);
    }
}

#[test]
fn worked_example_frame_is_byte_exact() {
    let bytes = Frame::new(1_000_000_000, "root", "CMD=GETNODES ARG=0:ALL")
        .encode(KEY)
        .unwrap();
    assert_eq!(
        bytes,
        b"00000069\nCK=327c863b4fce86d5 TS=1000000000 AUTH=root DT=CMD=GETNODES ARG=0:ALL"
    );
}

proptest! {
    #[test]
    fn checksum_agrees_with_the_reference(key in any::<u32>(), bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        prop_assert_eq!(crc16(&bytes), reference_crc(&bytes));
        prop_assert_eq!(checksum(Key::new(key), &bytes), reference_checksum(key, &bytes));
    }
}

// ---------------------------------------------------------------------------------------------
// An in-memory cluster behind the server

#[derive(Debug)]
struct Cluster {
    nodes: Vec<NodeRecord>,
    jobs: Vec<JobRecord>,
}

/// A cluster of two 4-processor nodes and three queued jobs; `stall` makes GETNODES hang.
struct MemoryBackend {
    cluster: Mutex<Cluster>,
    stall: AtomicBool,
}

impl MemoryBackend {
    fn new() -> Arc<MemoryBackend> {
        let node = |name: &str| NodeRecord {
            update_time: 1_700_000_000,
            cproc: 4,
            aproc: 4,
            cmemory_mb: 8000,
            amemory_mb: 8000,
            cclass: vec![ClassSlots::new("batch", 4)],
            aclass: vec![ClassSlots::new("batch", 4)],
            features: vec!["x86".into()],
            speed: Some(1.0),
            ..NodeRecord::new(name, NodeState::Idle)
        };
        let job = |id: &str, tasks: u32| JobRecord {
            update_time: 1_700_000_000,
            queue_time: 1_700_000_000,
            account: Some("proj".into()),
            class: Some("batch".into()),
            ..JobRecord::new(id, JobState::Idle, tasks, 600, "alice", "users")
        };
        Arc::new(MemoryBackend {
            cluster: Mutex::new(Cluster {
                nodes: vec![node("n1"), node("n2")],
                jobs: vec![job("1", 3), job("2", 4), job("3", 9)],
            }),
            stall: AtomicBool::new(false),
        })
    }

    fn snapshot(&self) -> (Vec<NodeRecord>, Vec<JobRecord>) {
        let c = self.cluster.lock().unwrap();
        (c.nodes.clone(), c.jobs.clone())
    }
}

impl Cluster {
    fn job(&mut self, id: &str) -> Result<&mut JobRecord, BackendError> {
        self.jobs
            .iter_mut()
            .find(|j| j.id == id)
            .ok_or_else(|| BackendError::NoSuchJob { job: id.into() })
    }

    /// Takes (`delta` = -1) or gives back (+1) one processor per task-list entry.
    fn adjust(&mut self, tasklist: &[String], delta: i64) {
        for name in tasklist {
            let node = self.nodes.iter_mut().find(|n| &n.name == name).unwrap();
            node.aproc = (i64::from(node.aproc) + delta) as u32;
            node.state = match node.aproc {
                0 => NodeState::Busy,
                a if a == node.cproc => NodeState::Idle,
                _ => NodeState::Running,
            };
        }
    }
}

#[async_trait::async_trait]
impl WikiBackend for MemoryBackend {
    async fn get_nodes(&self) -> Result<Vec<NodeRecord>, BackendError> {
        if self.stall.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        Ok(self.snapshot().0)
    }

    async fn get_jobs(&self) -> Result<Vec<JobRecord>, BackendError> {
        Ok(self.snapshot().1)
    }

    async fn start_job(&self, id: &str, tasklist: &[String]) -> Result<(), BackendError> {
        let mut c = self.cluster.lock().unwrap();
        let nodes = c.nodes.clone();
        let job = c.job(id)?;
        if job.state != JobState::Idle {
            return Err(BackendError::WrongState {
                job: id.into(),
                state: job.state,
                action: "start",
            });
        }
        if tasklist.len() != job.tasks as usize {
            return Err(BackendError::CannotRun {
                job: id.into(),
                reason: format!(
                    "it has {} task(s), the TASKLIST {}",
                    job.tasks,
                    tasklist.len()
                ),
            });
        }
        check_tasklist(id, &nodes, tasklist)?;
        job.state = JobState::Running;
        job.tasklist = tasklist.to_vec();
        job.start_time = Some(unix_seconds() as u64);
        c.adjust(tasklist, -1);
        Ok(())
    }

    async fn cancel_job(&self, id: &str, _kind: CancelType) -> Result<(), BackendError> {
        let mut c = self.cluster.lock().unwrap();
        let job = c.job(id)?;
        let held = match job.state {
            JobState::Running | JobState::Suspended => std::mem::take(&mut job.tasklist),
            JobState::Idle | JobState::Hold => Vec::new(),
            state => {
                return Err(BackendError::WrongState {
                    job: id.into(),
                    state,
                    action: "cancel",
                })
            }
        };
        job.state = JobState::Removed;
        job.complete_time = Some(unix_seconds() as u64);
        c.adjust(&held, 1);
        Ok(())
    }

    async fn suspend_job(&self, id: &str) -> Result<(), BackendError> {
        let mut c = self.cluster.lock().unwrap();
        let job = c.job(id)?;
        match job.state {
            JobState::Running => {
                job.state = JobState::Suspended;
                Ok(())
            }
            state => Err(BackendError::WrongState {
                job: id.into(),
                state,
                action: "suspend",
            }),
        }
    }

    async fn resume_job(&self, id: &str) -> Result<(), BackendError> {
        let mut c = self.cluster.lock().unwrap();
        let job = c.job(id)?;
        match job.state {
            JobState::Suspended => {
                job.state = JobState::Running;
                Ok(())
            }
            state => Err(BackendError::WrongState {
                job: id.into(),
                state,
                action: "resume",
            }),
        }
    }
}

struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), WikiError>>,
}

impl Server {
    async fn stop(mut self) {
        self.stop.take().unwrap().send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), self.task)
            .await
            .expect("the server stops promptly")
            .unwrap()
            .unwrap();
    }
}

async fn start_server(
    backend: Arc<MemoryBackend>,
    tweak: impl FnOnce(&mut WikiServerConfig),
) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut config = WikiServerConfig::new(KEY, vec!["127.0.0.1".parse().unwrap()], "foresight");
    config.read_timeout = READ_TIMEOUT;
    config.backend_timeout = BACKEND_TIMEOUT;
    tweak(&mut config);
    let (stop, stopped) = oneshot::channel();
    let task = tokio::spawn(serve(listener, config, backend, async {
        let _ = stopped.await;
    }));
    Server {
        addr,
        stop: Some(stop),
        task,
    }
}

fn client(addr: SocketAddr) -> WikiClient {
    WikiClient::new(addr.to_string(), KEY, "maui").with_timeout(Duration::from_secs(5))
}

fn list(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

fn refused(result: Result<String, WikiError>) -> String {
    match result {
        Err(WikiError::Refused { code: -1, reason }) => reason,
        other => panic!("expected an SC=-1 refusal, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Round trip

#[tokio::test]
async fn every_command_round_trips_between_client_and_server() {
    let backend = MemoryBackend::new();
    let server = start_server(backend.clone(), |_| {}).await;
    let client = client(server.addr);

    // GETNODES / GETJOBS give exactly what the backend holds.
    let (nodes, jobs) = backend.snapshot();
    assert_eq!(client.get_nodes().await.unwrap(), nodes);
    assert_eq!(client.get_jobs().await.unwrap(), jobs);

    // STARTJOB on exactly the processors named: two on n1, one on n2.
    let text = client
        .start_job("1", &list(&["n1", "n1", "n2"]))
        .await
        .unwrap();
    assert_eq!(text, "job 1 started on 3 processor(s)");
    let jobs = client.get_jobs().await.unwrap();
    assert_eq!(jobs[0].state, JobState::Running);
    assert_eq!(jobs[0].tasklist, list(&["n1", "n1", "n2"]));
    let nodes = client.get_nodes().await.unwrap();
    assert_eq!((nodes[0].aproc, nodes[0].state), (2, NodeState::Running));
    assert_eq!((nodes[1].aproc, nodes[1].state), (3, NodeState::Running));

    // Refusals name the reason.
    let reason = refused(client.start_job("1", &list(&["n2", "n2", "n2"])).await);
    assert_eq!(reason, "job \"1\" is Running: cannot start it");
    let reason = refused(
        client
            .start_job("2", &list(&["n1", "n1", "n1", "n1"]))
            .await,
    );
    assert_eq!(reason, "node \"n1\": 4 processor(s) asked, 2 available");
    let reason = refused(
        client
            .start_job("2", &list(&["n1", "n1", "n9", "n9"]))
            .await,
    );
    assert_eq!(reason, "no node \"n9\" on this cluster");
    let reason = refused(client.start_job("3", &list(&["n1"; 9])).await);
    assert!(reason.contains("cannot run as asked"), "{reason}");
    let reason = refused(client.start_job("77", &list(&["n1"])).await);
    assert_eq!(reason, "no job \"77\" on this cluster");

    // SUSPENDJOB / RESUMEJOB.
    assert_eq!(client.suspend_job("1").await.unwrap(), "job 1 suspended");
    assert_eq!(
        client.get_jobs().await.unwrap()[0].state,
        JobState::Suspended
    );
    let reason = refused(client.suspend_job("1").await);
    assert_eq!(reason, "job \"1\" is Suspended: cannot suspend it");
    assert_eq!(client.resume_job("1").await.unwrap(), "job 1 resumed");
    assert_eq!(client.get_jobs().await.unwrap()[0].state, JobState::Running);
    let reason = refused(client.resume_job("2").await);
    assert_eq!(reason, "job \"2\" is Idle: cannot resume it");

    // CANCELJOB gives the processors back.
    let text = client.cancel_job("1", CancelType::Wallclock).await.unwrap();
    assert_eq!(text, "job 1 cancelled (WALLCLOCK)");
    assert_eq!(
        client.cancel_job("2", CancelType::Admin).await.unwrap(),
        "job 2 cancelled (ADMIN)"
    );
    let jobs = client.get_jobs().await.unwrap();
    assert_eq!(jobs[0].state, JobState::Removed);
    assert!(jobs[0].complete_time.is_some());
    let nodes = client.get_nodes().await.unwrap();
    assert!(nodes
        .iter()
        .all(|n| n.aproc == 4 && n.state == NodeState::Idle));
    let reason = refused(client.cancel_job("nope", CancelType::Admin).await);
    assert_eq!(reason, "no job \"nope\" on this cluster");

    // ARG= selections: by name, by update time, and an unknown name.
    let named = client
        .call(&Request::GetNodes {
            since: 0,
            select: Selection::Named(list(&["n2"])),
        })
        .await
        .unwrap();
    assert!(matches!(named, Reply::Nodes(ref n) if n.len() == 1 && n[0].name == "n2"));
    let none = client
        .call(&Request::GetJobs {
            since: u64::MAX,
            select: Selection::All,
        })
        .await
        .unwrap();
    assert_eq!(none, Reply::Jobs(vec![]));
    let missing = client
        .call(&Request::GetNodes {
            since: 0,
            select: Selection::Named(list(&["n1", "zz"])),
        })
        .await
        .unwrap();
    assert_eq!(missing, Reply::failed("no node \"zz\" on this cluster"));

    server.stop().await;
}

#[tokio::test]
async fn lists_on_the_wire_are_what_maui_parses() {
    let backend = MemoryBackend::new();
    let server = start_server(backend, |_| {}).await;
    let request = Frame::new(unix_seconds(), "maui", "CMD=GETNODES ARG=0:ALL")
        .encode(KEY)
        .unwrap();
    let reply = exchange(server.addr, &request).await;
    assert_eq!(reply.auth, "foresight");
    assert_eq!(
        reply.data,
        "SC=0 ARG=2#n1:STATE=Idle;UPDATETIME=1700000000;CPROC=4;APROC=4;CMEMORY=8000;\
         AMEMORY=8000;CCLASS=[batch:4];ACLASS=[batch:4];FEATURE=x86;SPEED=1;\
         #n2:STATE=Idle;UPDATETIME=1700000000;CPROC=4;APROC=4;CMEMORY=8000;AMEMORY=8000;\
         CCLASS=[batch:4];ACLASS=[batch:4];FEATURE=x86;SPEED=1;"
    );
    let request = Frame::new(unix_seconds(), "maui", "CMD=GETJOBS ARG=0:ALL")
        .encode(KEY)
        .unwrap();
    let reply = exchange(server.addr, &request).await;
    let list = reply.data.strip_prefix("SC=0 ARG=3#").unwrap();
    for record in list.split('#') {
        assert!(record.ends_with(';'), "{record}");
        assert!(record.contains(":STATE=Idle;"), "{record}");
        assert!(record.contains(";UNAME=alice;GNAME=users;"), "{record}");
    }
    server.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Malformed and hostile requests

/// Sends `bytes` and returns the decoded reply frame.
async fn exchange(addr: SocketAddr, bytes: &[u8]) -> Frame {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    read_reply(&mut stream).await
}

async fn read_reply(stream: &mut (impl tokio::io::AsyncRead + Unpin)) -> Frame {
    let body = tokio::time::timeout(Duration::from_secs(5), read_frame(stream))
        .await
        .expect("a reply within 5 s")
        .unwrap();
    Frame::decode_body(&body, KEY, unix_seconds()).unwrap()
}

/// The reason of an `SC=-1` reply frame.
fn reason_of(frame: &Frame) -> String {
    match Reply::parse(&frame.data, ReplyKind::Done).unwrap() {
        Reply::Failed { code: -1, reason } => reason,
        other => panic!("expected SC=-1, got {other:?}"),
    }
}

#[tokio::test]
async fn malformed_frames_are_answered_with_the_reason() {
    let backend = MemoryBackend::new();
    let server = start_server(backend, |_| {}).await;
    let now = unix_seconds();
    let signed = |ts: i64, data: &str, key: Key| Frame::new(ts, "maui", data).encode(key).unwrap();

    struct Case {
        name: &'static str,
        bytes: Vec<u8>,
        reason: &'static str,
    }
    let cases = [
        Case {
            name: "checksum made with another key",
            bytes: signed(now, "CMD=GETNODES ARG=0:ALL", Key::new(4419)),
            reason: "does not match the message under the shared key",
        },
        Case {
            name: "message altered after signing",
            bytes: String::from_utf8(signed(now, "CMD=GETNODES ARG=0:ALL", KEY))
                .unwrap()
                .replace("GETNODES", "GETJOBS!")
                .into_bytes(),
            reason: "does not match the message under the shared key",
        },
        Case {
            name: "size zero",
            bytes: b"00000000\n".to_vec(),
            reason: "frame size 0 is out of range (1..=2097152 bytes)",
        },
        Case {
            name: "size over 2 MiB",
            bytes: b"02097153\n".to_vec(),
            reason: "frame size 2097153 is out of range (1..=2097152 bytes)",
        },
        Case {
            name: "size not digits",
            bytes: b"-0000001\nCK=".to_vec(),
            reason: "is not 8 decimal digits",
        },
        Case {
            name: "the worked example, signed in 2001",
            bytes:
                b"00000069\nCK=327c863b4fce86d5 TS=1000000000 AUTH=root DT=CMD=GETNODES ARG=0:ALL"
                    .to_vec(),
            reason: "timestamp 1000000000 is",
        },
        Case {
            // A minute past the limit: the server reads its clock later than `now` was
            // taken, a second or more later on a loaded machine.
            name: "an hour and a minute ahead",
            bytes: signed(now + 3660, "CMD=GETNODES ARG=0:ALL", KEY),
            reason: "more than 3600 s is refused",
        },
        Case {
            name: "unknown command",
            bytes: signed(now, "CMD=REQUEUEJOB ARG=1", KEY),
            reason: "unknown command \"REQUEUEJOB\"",
        },
        Case {
            name: "no ARG",
            bytes: signed(now, "CMD=SUSPENDJOB", KEY),
            reason: "SUSPENDJOB needs ARG=",
        },
        Case {
            name: "job id with a separator",
            bytes: signed(now, "CMD=RESUMEJOB ARG=a#b", KEY),
            reason: "job id \"a#b\" cannot be sent",
        },
        Case {
            name: "body not starting with CK=",
            bytes: b"00000004\nABCD".to_vec(),
            reason: "the body does not start with CK=",
        },
    ];
    for case in cases {
        let reply = exchange(server.addr, &case.bytes).await;
        let reason = reason_of(&reply);
        assert!(
            reason.contains(case.reason),
            "{}: {reason:?} lacks {:?}",
            case.name,
            case.reason
        );
    }

    // A client with the wrong key gets the refusal signed with the right one, which it
    // cannot trust.
    let wrong = WikiClient::new(server.addr.to_string(), Key::new(1), "maui");
    assert!(matches!(
        wrong.get_nodes().await,
        Err(WikiError::BadChecksum { .. })
    ));

    // The server is still serving.
    assert_eq!(client(server.addr).get_nodes().await.unwrap().len(), 2);
    server.stop().await;
}

#[tokio::test]
async fn peers_not_listed_are_refused() {
    for allowed in [vec![], vec!["127.0.0.2".parse().unwrap()]] {
        let server = start_server(MemoryBackend::new(), |c| c.allowed_peers = allowed).await;
        let err = client(server.addr).get_nodes().await.unwrap_err();
        match err {
            WikiError::Refused { code: -1, reason } => {
                assert_eq!(reason, "peer 127.0.0.1 is not in the allowed peer list");
            }
            other => panic!("{other:?}"),
        }
        server.stop().await;
    }
}

#[tokio::test]
async fn a_truncated_request_is_answered_at_the_read_timeout() {
    let server = start_server(MemoryBackend::new(), |_| {}).await;
    let frame = Frame::new(unix_seconds(), "maui", "CMD=GETNODES ARG=0:ALL")
        .encode(KEY)
        .unwrap();

    // Part of the frame, then silence with the connection open.
    let started = Instant::now();
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream.write_all(&frame[..30]).await.unwrap();
    let reply = read_reply(&mut stream).await;
    let waited = started.elapsed();
    assert_eq!(reason_of(&reply), "no complete request within 0.5 s");
    assert!(
        waited >= READ_TIMEOUT && waited < READ_TIMEOUT * 4,
        "{waited:?}"
    );

    // Part of the frame, then the sender closes its side.
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream.write_all(&frame[..30]).await.unwrap();
    stream.shutdown().await.unwrap();
    let reply = read_reply(&mut stream).await;
    let want = format!("frame truncated: 21 of {} bytes", frame.len() - 9);
    assert_eq!(reason_of(&reply), want);

    // Half a header.
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream.write_all(b"0000").await.unwrap();
    stream.shutdown().await.unwrap();
    let reply = read_reply(&mut stream).await;
    assert_eq!(reason_of(&reply), "frame truncated: 4 of 9 bytes");

    server.stop().await;
}

#[tokio::test]
async fn a_slow_sender_is_cut_off_at_the_read_timeout() {
    let server = start_server(MemoryBackend::new(), |_| {}).await;
    let frame = Frame::new(unix_seconds(), "maui", "CMD=GETNODES ARG=0:ALL")
        .encode(KEY)
        .unwrap();
    let stream = TcpStream::connect(server.addr).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    // One byte every 50 ms: the whole frame would take about 4 s; each read makes progress,
    // so only a deadline on the whole request stops it.
    let trickle = tokio::spawn(async move {
        for byte in frame {
            if writer.write_all(&[byte]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let started = Instant::now();
    let reply = read_reply(&mut reader).await;
    assert_eq!(reason_of(&reply), "no complete request within 0.5 s");
    assert!(started.elapsed() < Duration::from_secs(2));
    trickle.abort();
    server.stop().await;
}

#[tokio::test]
async fn a_stalled_backend_is_answered_at_the_backend_timeout() {
    let backend = MemoryBackend::new();
    let server = start_server(backend.clone(), |_| {}).await;
    backend.stall.store(true, Ordering::SeqCst);
    let started = Instant::now();
    let err = client(server.addr).get_nodes().await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2));
    match err {
        WikiError::Refused { reason, .. } => {
            assert_eq!(reason, "no answer from the cluster within 0.5 s");
        }
        other => panic!("{other:?}"),
    }
    // Other requests are not held up by it.
    assert_eq!(client(server.addr).get_jobs().await.unwrap().len(), 3);
    backend.stall.store(false, Ordering::SeqCst);
    server.stop().await;
}

#[tokio::test]
async fn a_client_gives_up_on_a_silent_server() {
    // A listener that accepts and never answers.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hold = tokio::spawn(async move {
        let (_stream, _) = listener.accept().await.unwrap();
        tokio::time::sleep(Duration::from_secs(30)).await;
    });
    let client =
        WikiClient::new(addr.to_string(), KEY, "maui").with_timeout(Duration::from_millis(300));
    let err = client.get_nodes().await.unwrap_err();
    assert!(
        matches!(
            err,
            WikiError::Timeout {
                during: "reply",
                ..
            }
        ),
        "{err}"
    );
    hold.abort();
}

// ---------------------------------------------------------------------------------------------
// The parsers never panic

/// A valid frame to mutate.
fn valid_frame() -> Vec<u8> {
    Frame::new(
        1_700_000_000,
        "maui",
        "CMD=STARTJOB ARG=42 TASKLIST=n1:n1:n2",
    )
    .encode(KEY)
    .unwrap()
}

/// Text made of WIKI's own characters, to reach deeper into the parsers than random bytes.
fn wiki_text() -> impl Strategy<Value = String> {
    let prefix = prop_oneof![
        Just(""),
        Just("CMD=GETNODES ARG="),
        Just("CMD=GETJOBS ARG="),
        Just("CMD=STARTJOB ARG=1 TASKLIST="),
        Just("CMD=CANCELJOB ARG=1 TYPE="),
        Just("CMD=SUSPENDJOB ARG="),
        Just("SC=0 ARG="),
        Just("SC=-1 RESPONSE="),
        Just("2#n1:STATE=Idle;"),
    ];
    (prefix, "[A-Z0-9a-z=:;#\\[\\] \t\n.\\-]{0,80}").prop_map(|(p, tail)| format!("{p}{tail}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn frame_parser_never_panics_on_arbitrary_bytes(
        bytes in prop::collection::vec(any::<u8>(), 0..256),
        now in any::<i64>(),
    ) {
        let _ = Frame::decode(&bytes, KEY, now);
        let _ = Frame::decode_body(&bytes, KEY, now);
        let _ = parse_size(&bytes);
    }

    #[test]
    fn frame_parser_never_panics_on_a_damaged_frame(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..6),
        now in prop_oneof![Just(1_700_000_000i64), any::<i64>()],
    ) {
        let mut bytes = valid_frame();
        for (at, byte, op) in edits {
            let i = at.index(bytes.len() + 1);
            match op {
                0 if i < bytes.len() => bytes[i] = byte,
                1 => bytes.insert(i, byte),
                _ => bytes.truncate(i),
            }
        }
        if let Ok(frame) = Frame::decode(&bytes, KEY, now) {
            // What passes the checksum must still be a well-formed frame.
            prop_assert!(!frame.auth.is_empty());
        }
    }

    #[test]
    fn message_parsers_never_panic_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = Request::parse(&text);
        for kind in [ReplyKind::Nodes, ReplyKind::Jobs, ReplyKind::Done] {
            let _ = Reply::parse(&text, kind);
        }
        let _ = parse_nodes(&text);
        let _ = parse_jobs(&text);
    }

    #[test]
    fn message_parsers_never_panic_on_wiki_like_text(text in wiki_text()) {
        if let Ok(request) = Request::parse(&text) {
            // Whatever parses renders, and renders to the same request.
            let again = Request::parse(&request.render().unwrap()).unwrap();
            prop_assert_eq!(again, request);
        }
        for kind in [ReplyKind::Nodes, ReplyKind::Jobs, ReplyKind::Done] {
            let _ = Reply::parse(&text, kind);
        }
        let _ = parse_nodes(&text);
        let _ = parse_jobs(&text);
    }

    #[test]
    fn frames_round_trip(
        key in any::<u32>(),
        ts in 0i64..4_000_000_000,
        auth in "[a-z][a-z0-9_]{0,11}",
        data in "[ -~]{0,200}",
    ) {
        let frame = Frame::new(ts, auth, data);
        let bytes = frame.encode(Key::new(key)).unwrap();
        prop_assert_eq!(Frame::decode(&bytes, Key::new(key), ts).unwrap(), frame);
    }

    #[test]
    fn records_round_trip(
        names in prop::collection::btree_set("[a-z][a-z0-9._-]{0,8}", 1..5),
        numbers in prop::collection::vec(any::<u32>(), 6),
        state in 0usize..4,
        jstate in 0usize..6,
        start in prop::option::of(any::<u32>()),
    ) {
        let names: Vec<String> = names.into_iter().collect();
        let nodes: Vec<NodeRecord> = names
            .iter()
            .map(|name| NodeRecord {
                update_time: u64::from(numbers[0]),
                cproc: numbers[1],
                aproc: numbers[2],
                cmemory_mb: u64::from(numbers[3]),
                features: names.clone(),
                cclass: vec![ClassSlots::new(name.clone(), numbers[4])],
                ..NodeRecord::new(name.clone(), NodeState::ALL[state])
            })
            .collect();
        prop_assert_eq!(parse_nodes(&render_nodes(&nodes).unwrap()).unwrap(), nodes);
        let jobs: Vec<JobRecord> = names
            .iter()
            .map(|name| JobRecord {
                start_time: start.map(u64::from),
                nodes: Some(numbers[5]),
                tasklist: names.clone(),
                account: Some(name.clone()),
                ..JobRecord::new(name.clone(), JobState::ALL[jstate], numbers[1], u64::from(numbers[2]), name.clone(), "g")
            })
            .collect();
        prop_assert_eq!(parse_jobs(&render_jobs(&jobs).unwrap()).unwrap(), jobs);
    }
}
