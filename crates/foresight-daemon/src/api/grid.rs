//! The routes a site on another host calls (`/grid/v1/...`): it connects out to the
//! centre, says hello, fetches its commands with a long poll, answers them and pushes its
//! clusters' state. Each request names its site and is signed with that site's token
//! (`foresight_rm::grid::sign`); a site reaches only its own mailbox and clusters.

use crate::api::{AppState, Params};
use crate::runtime::grid_centre::SiteLink;
use crate::state::refusal::Refusal;
use axum::extract::{FromRequest, Request, State};
use axum::routing::{get, post, MethodRouter};
use axum::Json;
use foresight_rm::grid::{
    sign, Answer, Command, Hello, SiteSnapshot, Welcome, MAX_WAIT_SECS, SITE_HEADER,
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

/// A request of a site, its signature checked, with its body.
pub(crate) struct Signed {
    site: String,
    body: axum::body::Bytes,
}

/// Most bytes a site's request may carry (answers with output chunks, snapshots).
const MAX_BODY: usize = 64 << 20;

impl FromRequest<AppState> for Signed {
    type Rejection = Refusal;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Refusal> {
        let (parts, body) = req.into_parts();
        let header = |name: &str| {
            parts
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
                .ok_or_else(|| Refusal::unauthenticated(format!("missing header {name}")))
        };
        let site = header(SITE_HEADER)?;
        let timestamp = header(sign::TIMESTAMP_HEADER)?;
        let nonce = header(sign::NONCE_HEADER)?;
        let signature = header(sign::SIGNATURE_HEADER)?;
        let method = parts.method.as_str().to_owned();
        let path = parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path().to_owned(), |p| p.as_str().to_owned());
        drop(parts);
        let body = axum::body::to_bytes(body, MAX_BODY)
            .await
            .map_err(|e| Refusal::invalid("body", e.to_string()))?;
        // One answer for an unknown site and a bad signature: a caller learns no site's name.
        let refused = |why: String| {
            tracing::warn!(site = %site, "a request of a site refused: {why}");
            Refusal::unauthenticated("unknown site, or a request not signed by it")
        };
        let Some(link) = state.sites.get(&site) else {
            return Err(refused("no such site".into()));
        };
        link.verifier
            .verify(
                &link.token,
                &site,
                state.now().secs(),
                &timestamp,
                &nonce,
                &signature,
                &method,
                &path,
                &body,
            )
            .map_err(|e| refused(e.to_string()))?;
        Ok(Signed { site, body })
    }
}

impl Signed {
    fn link<'a>(&self, s: &'a AppState) -> &'a SiteLink {
        &s.sites[&self.site]
    }

    /// The body as JSON of `T`.
    fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, Refusal> {
        serde_json::from_slice(&self.body).map_err(|e| Refusal::invalid("body", e.to_string()))
    }
}

async fn hello(State(s): State<AppState>, site: Signed) -> Result<Json<Welcome>, Refusal> {
    let h: Hello = site.json()?;
    if h.site != site.site {
        return Err(Refusal::forbidden(
            "site",
            format!("site {} says hello as {}", site.site, h.site),
        ));
    }
    let link = site.link(&s);
    for c in &link.clusters {
        if !h.clusters.iter().any(|l| &l.name == c) {
            tracing::warn!(site = %site.site, cluster = %c, "the site does not lend a cluster configured here");
        }
    }
    tracing::info!(site = %site.site, clusters = h.clusters.len(), "site connected");
    Ok(Json(Welcome {
        instance: s.cfg.instance.clone(),
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
    Params(f): Params<Fetch>,
    site: Signed,
) -> Result<Json<Vec<Command>>, Refusal> {
    let wait = Duration::from_secs(f.wait.min(MAX_WAIT_SECS));
    Ok(Json(site.link(&s).mailbox.commands(f.after, wait).await))
}

async fn answers(
    State(s): State<AppState>,
    site: Signed,
) -> Result<Json<serde_json::Value>, Refusal> {
    let a: Vec<Answer> = site.json()?;
    let awaited = site.link(&s).mailbox.answer(a);
    Ok(Json(serde_json::json!({ "awaited": awaited })))
}

async fn snapshots(
    State(s): State<AppState>,
    site: Signed,
) -> Result<Json<serde_json::Value>, Refusal> {
    let snaps: Vec<SiteSnapshot> = site.json()?;
    let link = site.link(&s);
    if let Some(other) = snaps.iter().find(|x| !link.clusters.contains(&x.cluster)) {
        return Err(Refusal::forbidden(
            "cluster",
            format!("site {} lends no cluster {} here", site.site, other.cluster),
        ));
    }
    link.mailbox.snapshots(snaps);
    Ok(Json(serde_json::json!({})))
}
