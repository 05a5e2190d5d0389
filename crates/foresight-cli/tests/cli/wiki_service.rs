#![allow(clippy::unwrap_used)]
//! The daemon's WIKI server, driven as Maui drives it: a real `foresight` daemon with a local
//! cluster under `scheduler = "wiki"`, and Foresight's own WIKI client in the role of Maui.
//! Jobs wait for STARTJOB, start as real processes on exactly the processors named, are
//! suspended, resumed and cancelled through WIKI; malformed requests are answered `SC=-1`
//! and the server keeps serving; a restart of the daemon keeps every job where it was.

use crate::common;

use crate::common::{wait_for, Server};
use foresight_rm::tokio;
use foresight_rm::wiki::{
    CancelType, Frame, JobState, Key, NodeState, Reply, WikiClient, WikiError,
};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const KEY: u32 = 4418;

/// A daemon with cluster `maui` (4 processors) scheduled through WIKI, accepting requests
/// from 127.0.0.1 only; with the directory of its key file, which must outlive it.
fn server() -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("wiki.key");
    std::fs::write(&key_file, format!("{KEY}\n")).unwrap();
    let key_file = std::fs::canonicalize(&key_file).unwrap();
    let server = Server::with_config(&format!(
        r#"
[[cluster]]
name = "maui"
procs = 4
scheduler = "wiki"

[cluster.wiki]
listen = "127.0.0.1:0"
key_file = "{}"
allowed_peers = ["127.0.0.1"]
"#,
        key_file.display()
    ));
    (server, dir)
}

fn wiki_addr(s: &Server) -> String {
    let path = s.dir.join("wiki-maui.addr");
    wait_for("wiki-maui.addr", Duration::from_secs(10), || {
        std::fs::read_to_string(&path)
            .ok()
            .filter(|t| t.ends_with('\n'))
            .map(|t| t.trim().to_string())
    })
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn tasklist(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_string()).collect()
}

fn refused(r: Result<String, WikiError>) -> String {
    match r {
        Err(WikiError::Refused { code, reason }) => {
            assert!(code < 0, "{code}");
            reason
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Sends raw bytes and returns the reply frame's `DT=` (checked with the key).
fn raw(addr: &str, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    s.write_all(bytes).unwrap();
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let now = common::now();
    Frame::decode(&out, Key::new(KEY), now).unwrap().data
}

#[test]
fn maui_drives_a_wiki_scheduled_cluster() {
    let (mut s, _key) = server();
    let addr = wiki_addr(&s);
    let rt = rt();
    let maui = WikiClient::new(addr.clone(), Key::new(KEY), "root");

    // Four idle processors, one node each.
    let nodes = rt.block_on(maui.get_nodes()).unwrap();
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["p0", "p1", "p2", "p3"]);
    assert!(nodes
        .iter()
        .all(|n| n.state == NodeState::Idle && n.cproc == 1 && n.aproc == 1));

    // A job queued on the cluster waits for STARTJOB, and says so.
    let out = s.scratch().join("procs.txt");
    let script = format!("echo $FORESIGHT_PROCESSORS >> {}; sleep 30", out.display());
    let id = s.submit(&[
        "--cluster",
        "maui",
        "-n",
        "2",
        "-t",
        "60s",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    // Its cycle leaves it to the WIKI scheduler, saying so.
    let j = s.wait_job(
        id,
        "left to the WIKI scheduler",
        Duration::from_secs(30),
        |j| {
            j["reason"]
                .as_str()
                .is_some_and(|r| r.contains("WIKI scheduler"))
        },
    );
    assert_eq!(j["state"], "pending", "{j}");
    let explain = s.run(&["job", "explain", &id.to_string()]);
    assert!(explain.contains("WIKI scheduler"), "{explain}");
    let list = s.run(&["job", "list"]);
    assert!(list.contains("WIKI scheduler"), "{list}");
    let clusters: serde_json::Value =
        serde_json::from_str(&s.run(&["cluster", "list", "-o", "json"])).unwrap();
    let c = &clusters[0];
    assert_eq!(
        (&c["state"], &c["policy"], &c["queued"]),
        (&"up".into(), &"wiki".into(), &1.into()),
        "{c}"
    );

    let jobs = rt.block_on(maui.get_jobs()).unwrap();
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    let w = &jobs[0];
    assert_eq!(w.id, id.to_string());
    assert_eq!(w.state, JobState::Idle);
    assert_eq!((w.tasks, w.wclimit_secs), (2, 60));
    assert_eq!(w.user, "admin");
    assert!(!w.group.is_empty());

    // Refusals that name what is wrong and change nothing.
    let r = refused(rt.block_on(maui.start_job(&id.to_string(), &tasklist(&["p1", "p9"]))));
    assert!(r.contains("p9"), "{r}");
    let r = refused(rt.block_on(maui.start_job(&id.to_string(), &tasklist(&["p1"]))));
    assert!(r.contains("asks 2"), "{r}");
    let r = refused(rt.block_on(maui.start_job("999", &tasklist(&["p1", "p2"]))));
    assert!(r.contains("999"), "{r}");
    assert_eq!(s.show(id)["state"], "pending");

    // STARTJOB runs it on exactly p1 and p3.
    rt.block_on(maui.start_job(&id.to_string(), &tasklist(&["p1", "p3"])))
        .unwrap();
    let j = s.wait_job(id, "running", Duration::from_secs(10), |j| {
        j["state"] == "running"
    });
    let written = wait_for("the job's processors", Duration::from_secs(10), || {
        std::fs::read_to_string(&out)
            .ok()
            .filter(|t| t.ends_with('\n'))
    });
    assert_eq!(written.trim(), "1,3", "{j}");
    let nodes = rt.block_on(maui.get_nodes()).unwrap();
    let busy: Vec<&str> = nodes
        .iter()
        .filter(|n| n.state == NodeState::Busy)
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(busy, ["p1", "p3"]);
    let w = rt.block_on(maui.get_jobs()).unwrap().remove(0);
    assert_eq!(w.state, JobState::Running);
    assert_eq!(w.tasklist, ["p1", "p3"]);

    // A second job cannot take a busy processor; the refusal names it.
    let second = s.submit(&[
        "--cluster",
        "maui",
        "-n",
        "1",
        "-t",
        "60s",
        "--",
        "sleep",
        "30",
    ]);
    let r = refused(rt.block_on(maui.start_job(&second.to_string(), &tasklist(&["p3"]))));
    assert!(r.contains("p3"), "{r}");

    // A job waiting for a dependency is held for Maui, and a STARTJOB cannot pass its gate.
    let after = format!("afterok:{id}");
    let dependent = s.submit(&[
        "--cluster",
        "maui",
        "-n",
        "1",
        "-t",
        "60s",
        "--dependency",
        &after,
        "--",
        "true",
    ]);
    let held = rt.block_on(maui.get_jobs()).unwrap();
    let held = held.iter().find(|j| j.id == dependent.to_string()).unwrap();
    assert_eq!(held.state, JobState::Hold, "{held:?}");
    let r = refused(rt.block_on(maui.start_job(&dependent.to_string(), &tasklist(&["p0"]))));
    assert!(r.contains("Hold"), "{r}");
    assert_eq!(s.show(dependent)["state"], "pending");

    // Suspend and resume.
    rt.block_on(maui.suspend_job(&id.to_string())).unwrap();
    s.wait_job(id, "suspended", Duration::from_secs(10), |j| {
        j["suspended"] == true
    });
    let w = rt.block_on(maui.get_jobs()).unwrap();
    assert_eq!(
        w.iter().find(|j| j.id == id.to_string()).unwrap().state,
        JobState::Suspended
    );
    refused(rt.block_on(maui.suspend_job(&id.to_string())));
    rt.block_on(maui.resume_job(&id.to_string())).unwrap();
    s.wait_job(id, "resumed", Duration::from_secs(10), |j| {
        j["suspended"] == false
    });

    // A restart keeps the running job running on its processors and the queued one queued.
    s.sigterm(Duration::from_secs(20)).expect("stopped");
    s.launch();
    let addr = wiki_addr(&s);
    let maui = WikiClient::new(addr.clone(), Key::new(KEY), "root");
    let jobs = rt.block_on(maui.get_jobs()).unwrap();
    let first = jobs.iter().find(|j| j.id == id.to_string()).unwrap();
    assert_eq!(first.state, JobState::Running, "{jobs:?}");
    assert_eq!(first.tasklist, ["p1", "p3"]);
    let queued = jobs.iter().find(|j| j.id == second.to_string()).unwrap();
    assert_eq!(queued.state, JobState::Idle);
    assert_eq!(s.show(second)["state"], "pending");
    rt.block_on(maui.start_job(&second.to_string(), &tasklist(&["p0"])))
        .unwrap();
    s.wait_job(second, "running", Duration::from_secs(10), |j| {
        j["state"] == "running"
    });

    // CANCELJOB ends both; they are reported removed, their processors idle again.
    for j in [id, second] {
        rt.block_on(maui.cancel_job(&j.to_string(), CancelType::Admin))
            .unwrap();
    }
    for j in [id, second] {
        let v = s.wait_final(j, Duration::from_secs(20));
        assert_eq!(v["state"], "cancelled", "{v}");
    }
    let jobs = rt.block_on(maui.get_jobs()).unwrap();
    assert!(
        jobs.iter().all(|j| j.state == JobState::Removed),
        "{jobs:?}"
    );
    let nodes = rt.block_on(maui.get_nodes()).unwrap();
    assert!(
        nodes.iter().all(|n| n.state == NodeState::Idle),
        "{nodes:?}"
    );
    // Each ran once, through the restart: one process start, one attempt directory each.
    assert_eq!(common::lines(&out), ["1,3"]);
    let mut attempts: Vec<String> = std::fs::read_dir(s.dir.join("clusters/maui"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    attempts.sort();
    assert_eq!(attempts, [format!("{id}.0"), format!("{second}.0")]);
}

#[test]
fn malformed_requests_are_refused_and_the_server_keeps_serving() {
    let (s, _key) = server();
    let addr = wiki_addr(&s);
    let key = Key::new(KEY);
    let now = common::now();
    let good = |data: &str, ts: i64| Frame::new(ts, "root", data).encode(key).unwrap();

    // A bad checksum.
    let mut bytes = good("CMD=GETNODES ARG=0:ALL", now);
    let ck = 9 + 3; // "00000069\n" then "CK="
    bytes[ck] = if bytes[ck] == b'0' { b'1' } else { b'0' };
    let dt = raw(&addr, &bytes);
    assert!(dt.starts_with("SC=-1"), "{dt}");
    assert!(dt.to_lowercase().contains("checksum"), "{dt}");

    // A timestamp two hours old.
    let dt = raw(&addr, &good("CMD=GETNODES ARG=0:ALL", now - 7200));
    assert!(dt.starts_with("SC=-1"), "{dt}");

    // A wrong key.
    let other = Frame::new(now, "root", "CMD=GETNODES ARG=0:ALL")
        .encode(Key::new(KEY + 1))
        .unwrap();
    assert!(raw(&addr, &other).starts_with("SC=-1"));

    // An unknown command, an unknown job, a size field that is not a size.
    let dt = raw(&addr, &good("CMD=FROBNICATE ARG=1", now));
    assert!(dt.starts_with("SC=-1") && dt.contains("FROBNICATE"), "{dt}");
    let dt = raw(&addr, &good("CMD=CANCELJOB ARG=12345 TYPE=ADMIN", now));
    assert!(dt.starts_with("SC=-1") && dt.contains("12345"), "{dt}");
    let dt = raw(&addr, &good("CMD=SUSPENDJOB ARG=nope", now));
    assert!(dt.starts_with("SC=-1"), "{dt}");
    let dt = raw(&addr, b"0000000x\nCK=0 TS=0 AUTH=x DT=y");
    assert!(dt.starts_with("SC=-1"), "{dt}");

    // A peer not in the list: the same request from 127.0.0.2.
    let rt = rt();
    let reply = rt.block_on(async {
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.bind("127.0.0.2:0".parse().unwrap()).unwrap();
        let mut stream = sock.connect(addr.parse().unwrap()).await.unwrap();
        use tokio::io::AsyncWriteExt;
        stream
            .write_all(&good("CMD=GETNODES ARG=0:ALL", now))
            .await
            .unwrap();
        let body = foresight_rm::wiki::read_frame(&mut stream).await.unwrap();
        Frame::decode_body(&body, key, common::now()).unwrap().data
    });
    assert!(
        reply.starts_with("SC=-1") && reply.contains("127.0.0.2"),
        "{reply}"
    );

    // Still serving, and nothing changed.
    let maui = WikiClient::new(addr, key, "root");
    let nodes = rt.block_on(maui.get_nodes()).unwrap();
    assert_eq!(nodes.len(), 4);
    let reply = rt
        .block_on(maui.call(&foresight_rm::wiki::Request::GetJobs {
            since: 0,
            select: foresight_rm::wiki::Selection::All,
        }))
        .unwrap();
    assert_eq!(reply, Reply::Jobs(vec![]));
}
