//! The decentralized grid for operators: `GET /api/v1/sites` (the sites sharing the global
//! queue, with their dispatchers' leases) and `GET /api/v1/auctions` (the global jobs on
//! offer, with their auctions), read from the shared store by any dispatcher. A service in
//! mode single has neither: it answers 409 naming its mode, never an empty list that would
//! look like a grid with no sites.

use crate::api::{Caller, Params};
use crate::runtime::Service;
use crate::state::refusal::Refusal;
use crate::state::stored::ToApi;
use axum::extract::State;
use axum::Json;
use foresight_api::{AuctionView, SiteView};
use serde::Deserialize;
use std::sync::Arc;

/// The refusal of a service that is not a peer dispatcher.
fn alone() -> Refusal {
    Refusal::conflict(
        "this service runs alone (mode = \"single\"): sites and auctions exist only in \
         dispatcher mode (server start --mode dispatcher --site NAME)",
    )
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
    Ok(Json(sites.iter().map(ToApi::to_api).collect()))
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
    Ok(Json(auctions.into_iter().map(ToApi::to_api).collect()))
}
