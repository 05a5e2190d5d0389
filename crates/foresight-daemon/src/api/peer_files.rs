//! The routes another peer dispatcher's site calls to fetch a global job's input this site
//! holds (`/peer/v1/inputs/...`, see `runtime::peer_inputs`): each request is signed with
//! the calling site's key from the shared database, and served only to the site the job is
//! awarded to.

use crate::api::AppState;
use crate::runtime::peer_inputs::{PeerLink, PeerRequest};
use crate::state::refusal::Refusal;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::routing::{get, post, MethodRouter};
use axum::Json;
use foresight_rm::grid::{sign, FileOffer, SITE_HEADER};

/// The routes, under `/peer/v1`.
pub(crate) fn routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    vec![
        (
            "/peer/v1/inputs/{job}/{index}",
            post(offer).delete(drop_offer),
        ),
        ("/peer/v1/inputs/{job}/{index}/{name}", get(file)),
    ]
}

/// A request of another site, its signature checked (it carries no body).
pub(crate) struct PeerSigned {
    site: String,
}

impl FromRequestParts<AppState> for PeerSigned {
    type Rejection = Refusal;

    async fn from_request_parts(parts: &mut Parts, s: &AppState) -> Result<Self, Refusal> {
        let header = |name: &str| {
            parts
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| Refusal::unauthenticated(format!("missing header {name}")))
        };
        let path = parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path(), |p| p.as_str());
        let req = PeerRequest {
            site: header(SITE_HEADER)?,
            timestamp: header(sign::TIMESTAMP_HEADER)?,
            nonce: header(sign::NONCE_HEADER)?,
            signature: header(sign::SIGNATURE_HEADER)?,
            method: parts.method.as_str(),
            path,
        };
        link(s)?.verify(&req, s.now().secs()).await?;
        s.first_use_of_nonce(&format!("peer {}", req.site), req.nonce)
            .await?;
        Ok(PeerSigned {
            site: req.site.to_owned(),
        })
    }
}

/// This site's peer link: only a dispatcher has one.
fn link(s: &AppState) -> Result<&PeerLink, Refusal> {
    s.peer_link().ok_or_else(|| {
        Refusal::conflict("this service is no peer dispatcher (mode = \"dispatcher\")")
    })
}

/// Reads input `index` of job `job` for the signing site, which must be the job's winner:
/// its name, size and SHA-256, to fetch next.
async fn offer(
    State(s): State<AppState>,
    axum::extract::Path((job, index)): axum::extract::Path<(u64, usize)>,
    peer: PeerSigned,
) -> Result<Json<FileOffer>, Refusal> {
    let a = link(&s)?.granted(&peer.site, job, index).await?;
    Ok(Json(s.offer_input(&peer.site, &a, index).await?))
}

/// Removes this site's copy of input `index` of job `job` offered to the signing site,
/// which has it now (or gave up): its own copy, whether it still holds the award or not.
async fn drop_offer(
    State(s): State<AppState>,
    axum::extract::Path((job, index)): axum::extract::Path<(u64, usize)>,
    peer: PeerSigned,
) -> Result<Json<serde_json::Value>, Refusal> {
    link(&s)?;
    let dir = s.peer_outbox(&peer.site, job, index);
    let _ = tokio::fs::remove_dir_all(&dir).await;
    Ok(Json(serde_json::json!({})))
}

/// Input `index` of job `job` as offered to the signing site, ranged.
async fn file(
    State(s): State<AppState>,
    axum::extract::Path((job, index, name)): axum::extract::Path<(u64, usize, String)>,
    headers: axum::http::HeaderMap,
    peer: PeerSigned,
) -> Result<axum::response::Response, Refusal> {
    FileOffer::check_name(&name).map_err(|e| Refusal::invalid("name", e.to_string()))?;
    link(&s)?.granted(&peer.site, job, index).await?;
    let path = s.peer_outbox(&peer.site, job, index).join(&name);
    let not_offered = || {
        Refusal::not_found(format!(
            "no input {name} of job {job} offered to site {}",
            peer.site
        ))
    };
    crate::api::grid::serve_ranged(&path, &headers, not_offered).await
}
