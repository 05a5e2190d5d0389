//! The routes a site on another host calls (`/grid/v1/...`): it connects out to the
//! centre, says hello, fetches its commands with a long poll, answers them and pushes its
//! clusters' state. Each request names its site and carries that site's token; a site
//! reaches only its own mailbox and clusters.

use crate::api::{AppState, Body, Params};
use crate::runtime::grid_centre::SiteLink;
use crate::state::refusal::Refusal;
use axum::extract::{FromRequestParts, State};
use axum::http::header;
use axum::http::request::Parts;
use axum::routing::{get, post, MethodRouter};
use axum::Json;
use foresight_rm::grid::{
    Answer, Command, Hello, SiteSnapshot, Welcome, MAX_WAIT_SECS, SITE_HEADER,
};
use serde::Deserialize;
use std::time::Duration;

/// The routes, under `/grid/v1`.
pub(crate) fn routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    vec![
        ("/grid/v1/hello", post(hello)),
        ("/grid/v1/commands", get(commands)),
        ("/grid/v1/answers", post(answers)),
        ("/grid/v1/snapshots", post(snapshots)),
    ]
}

/// The site a request comes from, its token checked.
pub(crate) struct SiteCaller(String);

impl FromRequestParts<AppState> for SiteCaller {
    type Rejection = Refusal;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Refusal> {
        let site = parts
            .headers
            .get(SITE_HEADER)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| Refusal::unauthenticated(format!("missing '{SITE_HEADER}: <site>'")))?;
        let token = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| Refusal::unauthenticated("missing 'Authorization: Bearer <token>'"))?;
        let hash = crate::runtime::users::token_hash(token.trim());
        // One answer for an unknown site and a wrong token: a caller learns no site's name.
        match state.sites.get(site) {
            Some(link) if same(&link.token_hash, &hash) => Ok(SiteCaller(site.to_owned())),
            _ => Err(Refusal::unauthenticated(
                "unknown site or wrong token for it",
            )),
        }
    }
}

/// Compares two hashes in time independent of where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

impl SiteCaller {
    fn link<'a>(&self, s: &'a AppState) -> &'a SiteLink {
        &s.sites[&self.0]
    }
}

async fn hello(
    State(s): State<AppState>,
    site: SiteCaller,
    Body(h): Body<Hello>,
) -> Result<Json<Welcome>, Refusal> {
    if h.site != site.0 {
        return Err(Refusal::forbidden(
            "site",
            format!("site {} says hello as {}", site.0, h.site),
        ));
    }
    let link = site.link(&s);
    for c in &link.clusters {
        if !h.clusters.iter().any(|l| &l.name == c) {
            tracing::warn!(site = %site.0, cluster = %c, "the site does not lend a cluster configured here");
        }
    }
    tracing::info!(site = %site.0, clusters = h.clusters.len(), "site connected");
    let last_seq = link.mailbox.hello(h);
    Ok(Json(Welcome {
        instance: s.cfg.instance.clone(),
        last_seq,
    }))
}

#[derive(Deserialize)]
struct Fetch {
    #[serde(default)]
    after: u64,
    #[serde(default)]
    wait: u64,
}

async fn commands(
    State(s): State<AppState>,
    site: SiteCaller,
    Params(f): Params<Fetch>,
) -> Result<Json<Vec<Command>>, Refusal> {
    let wait = Duration::from_secs(f.wait.min(MAX_WAIT_SECS));
    Ok(Json(site.link(&s).mailbox.commands(f.after, wait).await))
}

async fn answers(
    State(s): State<AppState>,
    site: SiteCaller,
    Body(a): Body<Vec<Answer>>,
) -> Result<Json<serde_json::Value>, Refusal> {
    let awaited = site.link(&s).mailbox.answer(a);
    Ok(Json(serde_json::json!({ "awaited": awaited })))
}

async fn snapshots(
    State(s): State<AppState>,
    site: SiteCaller,
    Body(snaps): Body<Vec<SiteSnapshot>>,
) -> Result<Json<serde_json::Value>, Refusal> {
    let link = site.link(&s);
    if let Some(other) = snaps.iter().find(|x| !link.clusters.contains(&x.cluster)) {
        return Err(Refusal::forbidden(
            "cluster",
            format!("site {} lends no cluster {} here", site.0, other.cluster),
        ));
    }
    link.mailbox.snapshots(snaps);
    Ok(Json(serde_json::json!({})))
}
