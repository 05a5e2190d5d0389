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
