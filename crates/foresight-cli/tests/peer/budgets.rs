//! A limited budget shared by peer dispatchers on real processes: local jobs submitted at
//! two sites at once cannot together commit more than the budget, and what a local job
//! held comes back at its end but for what it really cost.
#![allow(clippy::unwrap_used)]

use crate::peer;

use crate::common::*;
use peer::*;
use serde_json::{json, Value};
use std::time::Duration;

/// eve's budget fits one local job's worst case (2 processors × 60 s × tariff) but not
/// two. Each round she submits one at site a and one at site b at the same moment: exactly
/// one is accepted and the other refused with 402 naming the budget; once the accepted job
/// ends, the budget is its start less that job's real charge, exactly.
#[test]
fn local_jobs_at_two_sites_cannot_together_overspend_a_shared_budget() {
    let store = foresight_testkit::postgres::database();
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let peers: Vec<Peer> = ["a", "b"]
        .iter()
        .map(|s| Peer::start(&root, s, &store, 2))
        .collect();
    let admin = Http::new(&peers[0].url, &admin_token(&peers[0]));
    let (_, clusters) = admin.get("/clusters");
    let tariff = clusters[0]["tariff"].as_f64().unwrap();
    assert!(tariff > 0.0, "{clusters}");
    let worst = tariff * 2.0 * 60.0;
    let start = worst * 1.5;
    let (status, created) = admin.post("/users", &json!({ "name": "eve", "budget": start }));
    assert_eq!(status, 201, "{created}");
    let token = created["token"].as_str().unwrap().to_string();
    let mut left = start;
    for round in 0..3 {
        let answers: Vec<(usize, u16, Value)> = std::thread::scope(|s| {
            let tasks: Vec<_> = peers
                .iter()
                .enumerate()
                .map(|(k, p)| {
                    let token = token.clone();
                    s.spawn(move || {
                        let mut body = job_body(2, 60, &["sleep", "1"]);
                        body["cluster"] = json!(format!("{}-c", p.site));
                        let (status, v) = Http::new(&p.url, &token).post("/jobs", &body);
                        (k, status, v)
                    })
                })
                .collect();
            tasks.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let accepted: Vec<_> = answers.iter().filter(|a| a.1 == 201).collect();
        let refused: Vec<_> = answers.iter().filter(|a| a.1 != 201).collect();
        assert_eq!(accepted.len(), 1, "round {round}: {answers:?}");
        let (_, status, why) = refused[0];
        assert_eq!(*status, 402, "round {round}: {why}");
        let text = why.to_string();
        assert!(text.contains("budget") && text.contains("eve"), "{text}");
        let (k, _, v) = accepted[0];
        let id = v["id"].as_u64().unwrap();
        let http = Http::new(&peers[*k].url, &token);
        let done = wait_for("the accepted job to end", Duration::from_secs(30), || {
            let (_, j) = http.get(&format!("/jobs/{id}"));
            (j["state"] == "completed").then_some(j)
        });
        let charged = done["charged"].as_f64().unwrap();
        assert!(charged > 0.0 && charged <= worst, "{done}");
        left -= charged;
        wait_for("eve's budget settled", Duration::from_secs(10), || {
            let (budget, _) = shared_budget(&store, "eve");
            ((budget - left).abs() < 1e-6).then_some(())
        });
        // Topped up to fit one job again (and not two) for the next round.
        let (status, v) = admin.post("/users/eve/budget", &json!({ "set": start }));
        assert_eq!(status, 200, "{v}");
        left = start;
    }
}

/// A workflow's tasks are local jobs of the site it is submitted at: with a limited budget
/// each takes its worst case (processors × walltime × its mapped cluster's tariff) from the
/// shared budget as the workflow is stored, all or none, so another site admits nothing
/// that budget no longer covers; a workflow over the budget is refused with 402 as a
/// submission of local jobs is; and at the tasks' ends the holds settle to their charges.
#[test]
fn a_workflows_tasks_hold_their_worst_case_in_the_shared_budget() {
    let store = foresight_testkit::postgres::database();
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let a = Peer::start(&root, "a", &store, 2);
    let b = Peer::start(&root, "b", &store, 2);
    let admin = Http::new(&a.url, &admin_token(&a));
    let (_, clusters) = admin.get("/clusters");
    let tariff = clusters[0]["tariff"].as_f64().unwrap();
    assert!(tariff > 0.0, "{clusters}");
    // Two tasks of 1 processor × 60 s: together the worst case of one 2-processor job.
    let worst = tariff * 2.0 * 60.0;
    let start = worst * 1.5;
    let (status, created) = admin.post("/users", &json!({ "name": "eve", "budget": start }));
    assert_eq!(status, 201, "{created}");
    let token = created["token"].as_str().unwrap().to_string();
    let (on_a, on_b) = (Http::new(&a.url, &token), Http::new(&b.url, &token));
    let task = |name: &str| json!({"name": name, "command": ["sleep", "1"], "walltime": 60});
    let wf = json!({"name": "w", "tasks": [task("A"), task("B")],
                    "edges": [{"from": "A", "to": "B"}]});
    let (status, v) = on_a.post("/workflows", &wf);
    assert_eq!(status, 201, "{v}");
    let jobs: Vec<u64> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j.as_u64().unwrap())
        .collect();
    // Both tasks' holds left the shared budget with the workflow.
    let (left, _) = shared_budget(&store, "eve");
    assert!((left - (start - worst)).abs() < 1e-6, "{left} of {start}");
    // What is left covers neither a local job of the same worst case at b, nor the same
    // workflow there: each refused whole, with the figures.
    let mut body = job_body(2, 60, &["true"]);
    body["cluster"] = json!("b-c");
    let (status, v) = on_b.post("/jobs", &body);
    assert_eq!(status, 402, "{v}");
    let (status, v) = on_b.post("/workflows", &wf);
    assert_eq!(status, 402, "{v}");
    // Refused by b's copy of the budget if it has followed already, else by the shared one.
    let text = v["message"].as_str().unwrap_or_default();
    assert!(
        text.contains(&format!("2 jobs together may cost {worst:.2} at worst"))
            || text.contains(&format!(
                "the 2 local jobs submitted may cost {worst:.2} at worst (processors × walltime \
                 × their cluster's tariff)"
            )),
        "{v}"
    );
    assert!(text.contains("of eve"), "{v}");
    let (_, list) = on_b.get("/workflows");
    assert_eq!(list, json!([]), "{list}");
    // At their ends the holds settle: the budget is its start less what the tasks cost.
    let mut charged = 0.0;
    for id in &jobs {
        let done = wait_for("the task to end", Duration::from_secs(60), || {
            let (_, j) = on_a.get(&format!("/jobs/{id}"));
            (j["state"] == "completed").then_some(j)
        });
        let c = done["charged"].as_f64().unwrap();
        assert!(c > 0.0 && c <= worst / 2.0, "{done}");
        charged += c;
    }
    wait_for("eve's budget settled", Duration::from_secs(10), || {
        let (budget, _) = shared_budget(&store, "eve");
        ((budget - (start - charged)).abs() < 1e-6).then_some(())
    });
}
