//! The decentralized grid as operators see it (`GET /api/v1/sites`, `GET /api/v1/auctions`):
//! the sites whose dispatchers share the global queue, with their leases, and the global
//! jobs on offer, with their auctions. Only a service in dispatcher mode answers them.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A site whose dispatcher shares the global queue, as the shared store has it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SiteView {
    /// The site's name.
    pub name: String,
    /// Its number, fixed at its first registration: equal bids go to the lowest.
    pub id: u32,
    /// `up` while its lease holds, else `down` (its awards and bids no longer count).
    pub state: SiteState,
    /// Where its service answers, as it announced.
    pub url: String,
    /// When its dispatcher last entered the grid.
    pub started_at: i64,
    /// Its last heartbeat.
    pub heartbeat_at: i64,
    /// How long its lease outlives a heartbeat, milliseconds.
    pub lease_ms: u64,
    /// Milliseconds until its lease runs out, by the store's clock; negative once it has.
    pub lease_left_ms: i64,
    /// Processors of its largest cluster, as it advertised (no larger global job can run
    /// there).
    pub max_procs: u32,
    /// The highest base tariff of its clusters, per processor-second.
    pub max_tariff: f64,
    /// Global jobs awarded to it and not yet started.
    pub claimed: u32,
    /// Its jobs running (local and global), as it last recorded them.
    pub running: u32,
    /// Its standing bids in auctions.
    pub bids: u32,
}

/// Whether a site's lease holds: on the wire the words `up` and `down`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SiteState {
    /// Its lease holds: its awards and bids count.
    Up,
    /// Its lease ran out: its awards and bids no longer count.
    Down,
}

impl SiteState {
    /// `Up` while the lease holds, else `Down`.
    pub fn of_lease(alive: bool) -> SiteState {
        if alive {
            SiteState::Up
        } else {
            SiteState::Down
        }
    }

    /// The word, as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            SiteState::Up => "up",
            SiteState::Down => "down",
        }
    }
}

impl std::fmt::Display for SiteState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A global job on offer, and its auction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AuctionView {
    /// The job.
    pub job: u64,
    /// Its owner.
    pub user: String,
    /// Processors it needs.
    pub procs: u32,
    /// Its absolute priority level.
    pub priority: u32,
    /// `open` (bids count until `closes_at`), `closing` (due, being closed), `reopening`
    /// (closed unsold, reopens at `back_off_until`), `unsold` (closed unsold, queued until a
    /// site can bid) or `queued` (not auctioned yet: no site has been able to run it).
    // Named `state` on the wire, as before the stage had a type of its own.
    #[serde(rename = "state")]
    pub stage: AuctionStage,
    /// The site that opened its current or last auction.
    pub opened_by: Option<String>,
    /// When its current or last auction opened.
    pub opened_at: Option<i64>,
    /// When its current auction closes.
    pub closes_at: Option<i64>,
    /// Standing bids of sites that are up.
    pub bids: u32,
    /// The highest of those bids.
    pub best_bid: Option<f64>,
    /// The site that placed it (of equal bids, the lowest site id's; the close's tie rule
    /// decides the winner).
    pub best_bidder: Option<String>,
    /// Auctions opened for it, the current one included.
    pub rounds: u32,
    /// How many of them closed without a valid bid.
    pub unsold: u32,
    /// While `reopening`: when its auction reopens.
    pub back_off_until: Option<i64>,
}

/// Where a global job on offer stands in its auctions: one name for the shared queue's
/// rows and the API's view of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuctionStage {
    /// Not auctioned yet: no site has been able to run it.
    Queued,
    /// In an auction whose bids count until `closes_at`.
    Open,
    /// In an auction that is due, being closed.
    Closing,
    /// Closed unsold; its auction reopens at `back_off_until`.
    Reopening,
    /// Closed unsold; queued until a site can bid.
    Unsold,
}

impl AuctionStage {
    /// Every stage, in the order a job passes them.
    pub const ALL: [AuctionStage; 5] = [
        AuctionStage::Queued,
        AuctionStage::Open,
        AuctionStage::Closing,
        AuctionStage::Reopening,
        AuctionStage::Unsold,
    ];

    /// The stage's name, as the API and the shared queue spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            AuctionStage::Queued => "queued",
            AuctionStage::Open => "open",
            AuctionStage::Closing => "closing",
            AuctionStage::Reopening => "reopening",
            AuctionStage::Unsold => "unsold",
        }
    }

    /// Whether an auction is under way or pending its reopening (its times mean something).
    pub fn in_auction(self) -> bool {
        matches!(
            self,
            AuctionStage::Open | AuctionStage::Closing | AuctionStage::Reopening
        )
    }
}

impl std::fmt::Display for AuctionStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stage is typed, but the wire keeps its field name and words.
    #[test]
    fn an_auction_stage_travels_as_the_same_state_string() {
        let view = AuctionView {
            job: 7,
            user: "ann".into(),
            procs: 2,
            priority: 1,
            stage: AuctionStage::Reopening,
            opened_by: None,
            opened_at: None,
            closes_at: None,
            bids: 0,
            best_bid: None,
            best_bidder: None,
            rounds: 2,
            unsold: 1,
            back_off_until: Some(100),
        };
        let json = serde_json::to_value(&view).unwrap_or_default();
        assert_eq!(json["state"], "reopening", "{json}");
        assert!(json.get("stage").is_none(), "{json}");
        let back: AuctionView = serde_json::from_value(json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, view);
        let names: Vec<String> = AuctionStage::ALL
            .iter()
            .map(|s| serde_json::to_value(s).unwrap_or_default().to_string())
            .collect();
        let shown: Vec<String> = AuctionStage::ALL
            .iter()
            .map(|s| format!("\"{s}\""))
            .collect();
        assert_eq!(names, shown, "as_str and serde spell every stage alike");
    }

    /// A site's state is typed, but the wire keeps the words `up` and `down`.
    #[test]
    fn a_site_state_travels_as_the_same_word() {
        for (alive, word) in [(true, "up"), (false, "down")] {
            let state = SiteState::of_lease(alive);
            assert_eq!(serde_json::to_value(state).unwrap_or_default(), word);
            assert_eq!(state.to_string(), word);
            let back: SiteState = serde_json::from_value(serde_json::Value::from(word))
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(back, state);
        }
        assert!(serde_json::from_value::<SiteState>("gone".into()).is_err());
    }
}
