//! The routes a site on another host calls (`/grid/v1/...`): it connects out to the
//! centre, says hello, fetches its commands with a long poll, answers them, pushes its
//! clusters' state, fetches the input files the centre offers it, and puts the files of
//! its parts the centre asks for. Each request names
//! its site and is signed with that site's token (`foresight_rm::grid::sign`); a site
//! reaches only its own mailbox, clusters and files.

use crate::api::{AppState, Params};
use crate::runtime::grid_centre::SiteLink;
use crate::state::refusal::Refusal;
use axum::extract::{FromRequest, Request, State};
use axum::routing::{get, post, MethodRouter};
use axum::Json;
use foresight_core::ClusterId;
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
        (
            "/grid/v1/files/{job}/{attempt}/{cluster}/{name}",
            get(file).put(put_file),
        ),
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
        state
            .first_use_of_nonce(&format!("site {site}"), &nonce)
            .await?;
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
        parts: s.wanted_from(&site.site),
        lease_seconds: link.mailbox.lease().as_secs(),
        mailbox: link.mailbox.epoch(),
    }))
}

#[derive(Deserialize)]
struct Fetch {
    /// The mailbox the site was welcomed to (none from an older site).
    mailbox: Option<u64>,
    #[serde(default)]
    after: u64,
    #[serde(default)]
    wait: u64,
}

#[derive(Deserialize)]
struct Named {
    mailbox: Option<u64>,
}

impl Signed {
    /// Refuses a request naming a mailbox other than the one this centre keeps for the
    /// site: its numbers are another mailbox's (this centre restarted, or took over).
    fn in_mailbox(&self, s: &AppState, named: Option<u64>) -> Result<(), Refusal> {
        if self.link(s).mailbox.is_named(named) {
            return Ok(());
        }
        Err(Refusal::conflict(format!(
            "mailbox {} of site {} is not this centre's (it restarted, or took over from \
             another): say hello again",
            named.unwrap_or_default(),
            self.site
        )))
    }
}

async fn commands(
    State(s): State<AppState>,
    Params(f): Params<Fetch>,
    site: Signed,
) -> Result<Json<Vec<Command>>, Refusal> {
    site.in_mailbox(&s, f.mailbox)?;
    let wait = Duration::from_secs(f.wait.min(MAX_WAIT_SECS));
    Ok(Json(site.link(&s).mailbox.commands(f.after, wait).await))
}

async fn answers(
    State(s): State<AppState>,
    Params(n): Params<Named>,
    site: Signed,
) -> Result<Json<serde_json::Value>, Refusal> {
    site.in_mailbox(&s, n.mailbox)?;
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

/// The cluster here that is the signing site's cluster `cluster`: a site reaches the
/// files of no other site's clusters (403).
fn lent_cluster(s: &AppState, site: &Signed, cluster: &str) -> Result<ClusterId, Refusal> {
    s.site_cluster(&site.site, cluster).ok_or_else(|| {
        Refusal::forbidden(
            "cluster",
            format!("site {} lends no cluster {cluster} here", site.site),
        )
    })
}

/// An input file the centre offers this site for part `(job, attempt)` on its cluster
/// `cluster`, from the byte a `Range: bytes=N-` names (206), or whole (200). Another site's
/// files are not found: each site's outbox is its own.
async fn file(
    State(s): State<AppState>,
    axum::extract::Path((job, attempt, cluster, name)): axum::extract::Path<(
        u64,
        u32,
        String,
        String,
    )>,
    headers: axum::http::HeaderMap,
    site: Signed,
) -> Result<axum::response::Response, Refusal> {
    foresight_rm::grid::FileOffer::check_name(&name)
        .map_err(|e| Refusal::invalid("name", e.to_string()))?;
    lent_cluster(&s, &site, &cluster)?;
    let path = s.outbox_of(&site.site, &cluster, job, attempt).join(&name);
    let not_offered = || {
        Refusal::not_found(format!(
            "no input {name} of job {job}.{attempt} for this site"
        ))
    };
    serve_ranged(&path, &headers, not_offered).await
}

/// The file at `path`, from the byte a `Range: bytes=N-` in `headers` names (206), or whole
/// (200); `not_offered` when it is not there. Sites fetching from their centre and peer
/// sites fetching a job's input from its holder are served by this one function.
pub(crate) async fn serve_ranged(
    path: &std::path::Path,
    headers: &axum::http::HeaderMap,
    not_offered: impl Fn() -> Refusal,
) -> Result<axum::response::Response, Refusal> {
    use axum::http::{header, StatusCode};
    use axum::response::IntoResponse;
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let mut f = tokio::fs::File::open(path)
        .await
        .map_err(|_| not_offered())?;
    let len = f.metadata().await.map_err(|_| not_offered())?.len();
    let from = match headers.get(header::RANGE).and_then(|v| v.to_str().ok()) {
        None => None,
        Some(r) => Some(
            r.strip_prefix("bytes=")
                .and_then(|r| r.strip_suffix('-'))
                .and_then(|n| n.parse::<u64>().ok())
                .ok_or_else(|| {
                    Refusal::invalid("range", format!("only bytes=N- is served, got {r:?}"))
                })?,
        ),
    };
    let start = from.unwrap_or(0);
    if start > len {
        return Ok((
            StatusCode::RANGE_NOT_SATISFIABLE,
            [(header::CONTENT_RANGE, format!("bytes */{len}"))],
        )
            .into_response());
    }
    f.seek(std::io::SeekFrom::Start(start))
        .await
        .map_err(|e| Refusal::conflict(format!("{}: {e}", path.display())))?;
    let chunks = futures::stream::unfold(f.take(len - start), |mut f| async move {
        let mut buf = vec![0u8; 1 << 16];
        match f.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok::<_, std::io::Error>(axum::body::Bytes::from(buf)), f))
            }
            Err(e) => Some((Err(e), f)),
        }
    });
    let body = axum::body::Body::from_stream(chunks);
    let length = (header::CONTENT_LENGTH, (len - start).to_string());
    Ok(match from {
        Some(_) => (
            StatusCode::PARTIAL_CONTENT,
            [
                length,
                (
                    header::CONTENT_RANGE,
                    format!("bytes {start}-{}/{len}", len.saturating_sub(1)),
                ),
            ],
            body,
        )
            .into_response(),
        None => (StatusCode::OK, [length], body).into_response(),
    })
}

/// Where a chunk of an upload goes in its file, and what the whole file is.
#[derive(Deserialize)]
struct ChunkAt {
    offset: u64,
    total: u64,
    sha256: String,
}

/// A chunk of a file of part `(job, attempt)` on this site's cluster `cluster`, which the
/// centre asked the site to send (`name`: its path under the part's working directory,
/// percent-encoded as one segment): the bytes the centre holds of that file after it. A
/// chunk beyond them is not written; the site goes on from there.
async fn put_file(
    State(s): State<AppState>,
    axum::extract::Path((job, attempt, cluster, name)): axum::extract::Path<(
        u64,
        u32,
        String,
        String,
    )>,
    axum::extract::Query(at): axum::extract::Query<ChunkAt>,
    site: Signed,
) -> Result<Json<serde_json::Value>, Refusal> {
    let here = lent_cluster(&s, &site, &cluster)?;
    let chunk = crate::runtime::grid_uploads::Chunk {
        path: &name,
        offset: at.offset,
        total: at.total,
        sha256: &at.sha256,
        bytes: &site.body,
    };
    let have = s.receive_chunk(here, (job, attempt), chunk).await?;
    Ok(Json(serde_json::json!({ "have": have })))
}
