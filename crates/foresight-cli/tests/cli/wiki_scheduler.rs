#![allow(clippy::unwrap_used)]
//! Foresight as a WIKI resource manager's scheduler, end to end with two real daemons:
//! daemon A has a cluster of kind `wiki` pointing at daemon B's WIKI server (B's local
//! cluster `maui`, `scheduler = "wiki"`). A's global jobs reach B's queue through B's REST
//! API and start by A's STARTJOB on exactly the processors A names; B's own queued jobs are
//! started by A's pass under the cluster's policy; a cancel on A is a CANCELJOB on B; B
//! going away marks A's cluster down.

use crate::wiki;

use crate::common::{wait_for, Server};
use serde_json::{json, Value};
use std::time::Duration;
use wiki::{first_cluster as cluster_state, wiki_pair};

/// B's jobs, as its administrator sees them.
fn peer_jobs(b: &Server) -> Vec<Value> {
    b.http().jobs()
}

#[test]
fn a_wiki_cluster_schedules_jobs_onto_a_peer_through_its_wiki_server() {
    let (a, mut b, _keys) = wiki_pair(2000);

    // A reads B: four processors, up.
    wait_for("cluster w up", Duration::from_secs(15), || {
        let c = cluster_state(&a);
        (c["state"] == "up" && c["procs"] == 4).then_some(())
    });

    // A global job of 2 processors on A: it reaches B's queue under its part name and is
    // started by A's STARTJOB on the first free processors, p0 and p1.
    let out = a.scratch().join("g.txt");
    let script = format!("echo $FORESIGHT_PROCESSORS > {}; sleep 30", out.display());
    let g = a.http().submit(json!({
        "procs": 2, "walltime": 60, "command": ["sh", "-c", script],
    }));
    let gj = a.wait_job(g, "running", Duration::from_secs(30), |j| {
        j["state"] == "running"
    });
    assert_eq!(gj["parts"][0]["cluster"], "w", "{gj}");
    let peer = wait_for("the part on B", Duration::from_secs(10), || {
        peer_jobs(&b)
            .into_iter()
            .find(|j| j["name"] == format!("foresight-{g}.0") && j["state"] == "running")
    });
    assert_eq!(peer["parts"][0]["cluster"], "maui", "{peer}");
    assert_eq!(peer["parts"][0]["processors"], json!([0, 1]), "{peer}");
    let pid = peer["id"].as_u64().unwrap();

    // B's own queued job (a local job of the cluster) is started by A's pass, on the next
    // free processor.
    let l = b.submit(&[
        "--cluster",
        "maui",
        "-n",
        "1",
        "-t",
        "60s",
        "--",
        "sleep",
        "20",
    ]);
    let lj = b.wait_job(l, "running", Duration::from_secs(15), |j| {
        j["state"] == "running"
    });
    assert_eq!(lj["parts"][0]["processors"], json!([2]), "{lj}");

    // Cancel on A: CANCELJOB on B.
    let (status, body) = a.http().post(&format!("/jobs/{g}/cancel"), &json!({}));
    assert!(status < 300, "{status} {body}");
    b.wait_job(pid, "cancelled on B", Duration::from_secs(15), |j| {
        j["state"] == "cancelled"
    });
    a.wait_job(g, "cancelled on A", Duration::from_secs(15), |j| {
        j["state"] == "cancelled"
    });

    // B goes away: A's cluster is down (a timeout or a refused connection, not a hang), and
    // says why.
    b.sigkill();
    let c = wait_for("cluster w down", Duration::from_secs(15), || {
        let c = cluster_state(&a);
        (c["state"] == "down").then_some(c)
    });
    assert!(
        c["reason"]
            .as_str()
            .unwrap()
            .contains("WIKI resource manager"),
        "{c}"
    );
}
