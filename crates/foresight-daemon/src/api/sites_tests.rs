//! A service alone (mode single) has no sites and no auctions: `GET /api/v1/sites` and
//! `GET /api/v1/auctions` refuse with 409 naming the mode (never an empty list that would
//! read as a grid with no sites), and `/metrics` has none of the grid's metrics. The routes
//! in dispatcher mode are exercised end to end by the peer tests
//! (`crates/foresight-cli/tests/peer/grid_view.rs`).
#![allow(clippy::unwrap_used)] // tests fail loudly by design

use crate::api::router;
use crate::config::Config;
use crate::runtime::Service;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use foresight_core::time::Time;
use foresight_rm::clock::ManualClock;
use std::sync::Arc;
use tower::ServiceExt;

async fn get(app: &axum::Router, token: &str, path: &str) -> (StatusCode, String) {
    let req = Request::get(path)
        .header("authorization", format!("Bearer {token}"))
        .body(Body::empty())
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn a_service_alone_refuses_sites_and_auctions_naming_its_mode() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg: Config = toml::from_str("[[cluster]]\nname = \"c\"\nprocs = 2\n").unwrap();
    cfg.data_dir = dir.path().to_path_buf();
    let clock = Arc::new(ManualClock::at(Time(1_795_444_200)));
    let (s, token) = Service::open_without_cycles(cfg, clock).await.unwrap();
    let token = token.unwrap();
    let app = router(s.clone());
    for path in [
        "/api/v1/sites",
        "/api/v1/auctions",
        "/api/v1/auctions?limit=5",
    ] {
        let (status, body) = get(&app, &token, path).await;
        assert_eq!(status, StatusCode::CONFLICT, "{path}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["code"], "conflict", "{body}");
        let message = v["message"].as_str().unwrap();
        assert!(
            message.contains("mode = \"single\"") && message.contains("dispatcher mode"),
            "{body}"
        );
    }
    let (status, body) = get(&app, &token, "/api/v1/auctions?limit=x").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("\"field\":\"limit\""), "{body}");
    let (status, metrics) = get(&app, &token, "/metrics").await;
    assert_eq!(status, StatusCode::OK, "{metrics}");
    assert!(metrics.contains("foresight_cycles_total"), "{metrics}");
    assert!(!metrics.contains("foresight_site_up"), "{metrics}");
    assert!(!metrics.contains("foresight_auctions_open"), "{metrics}");
    assert!(
        !metrics.contains("foresight_dispatcher_rounds"),
        "{metrics}"
    );
    s.shutdown().await;
}
