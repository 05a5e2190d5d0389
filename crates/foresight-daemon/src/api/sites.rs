//! The decentralized grid for operators: `GET /api/v1/sites` (the sites sharing the global
//! queue, with their dispatchers' leases) and `GET /api/v1/auctions` (the global jobs on
//! offer, with their auctions), read from the shared store by any dispatcher. A service in
//! mode single has neither: it answers 409 naming its mode, never an empty list that would
//! look like a grid with no sites.

use crate::api::{Caller, Params};
use crate::runtime::Service;
use crate::state::refusal::Refusal;
use axum::extract::State;
use axum::Json;
use foresight_api::{AuctionView, SiteView};
use foresight_store::{AuctionRecord, SiteRecord};
use serde::Deserialize;
use std::sync::Arc;

/// The refusal of a service that is not a peer dispatcher.
fn alone() -> Refusal {
    Refusal::conflict(
        "this service runs alone (mode = \"single\"): sites and auctions exist only in \
         dispatcher mode (server start --mode dispatcher --site NAME)",
    )
}

/// A site as the API shows it.
fn site_view(r: &SiteRecord) -> SiteView {
    SiteView {
        name: r.site.clone(),
        id: r.id,
        state: if r.alive { "up" } else { "down" }.into(),
        url: r.url.clone(),
        started_at: r.started_at,
        heartbeat_at: r.heartbeat_at,
        lease_ms: r.lease_ms,
        lease_left_ms: r.lease_left_ms,
        max_procs: r.max_procs,
        max_tariff: r.max_tariff,
        claimed: r.claimed,
        running: r.running,
        bids: r.bids,
    }
}

/// A job on offer as the API shows it.
fn auction_view(r: &AuctionRecord) -> AuctionView {
    AuctionView {
        job: r.job,
        user: r.user.clone(),
        procs: r.procs,
        priority: r.priority,
        state: r.stage.clone(),
        opened_by: r.opened_by.clone(),
        opened_at: r.opened_at,
        closes_at: r.closes_at,
        bids: r.bids,
        best_bid: r.best_bid,
        best_bidder: r.best_bidder.clone(),
        rounds: r.rounds,
        unsold: r.unsold,
        back_off_until: r.back_off_until,
    }
}

/// Lists the sites whose dispatchers share the global queue (administrators), by site id:
/// up while their lease holds, down after it ran out, with what they hold and bid.
#[utoipa::path(get, path = "/api/v1/sites",
    responses((status = 200, body = [SiteView]),
              (status = 409, description = "This service runs alone (mode single): it has no sites",
               body = foresight_api::ApiError)))]
pub(crate) async fn list_sites(
    State(s): State<Arc<Service>>,
    caller: Caller,
) -> Result<Json<Vec<SiteView>>, Refusal> {
    caller.admin()?;
    let sites = s.global_queue.sites().await?.ok_or_else(alone)?;
    Ok(Json(sites.iter().map(site_view).collect()))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct AuctionFilter {
    /// At most this many, highest priority first, then oldest (default 1000).
    limit: Option<u32>,
}

/// Lists the global jobs on offer (administrators), highest priority first: in an open
/// auction, closing, closed unsold and waiting to be auctioned again, or queued.
#[utoipa::path(get, path = "/api/v1/auctions", params(AuctionFilter),
    responses((status = 200, body = [AuctionView]),
              (status = 409, description = "This service runs alone (mode single): it has no auctions",
               body = foresight_api::ApiError)))]
pub(crate) async fn list_auctions(
    State(s): State<Arc<Service>>,
    caller: Caller,
    Params(f): Params<AuctionFilter>,
) -> Result<Json<Vec<AuctionView>>, Refusal> {
    caller.admin()?;
    let limit = f.limit.unwrap_or(1000);
    let auctions = s.global_queue.auctions(limit).await?.ok_or_else(alone)?;
    Ok(Json(auctions.iter().map(auction_view).collect()))
}
