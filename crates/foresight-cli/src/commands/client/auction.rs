//! `foresight auction`: the global jobs on offer and their auctions (dispatcher mode): open,
//! closing, closed unsold and waiting to be auctioned again, or queued.

use super::{Client, Connection};
use crate::format::OutputOpt;
use crate::moment::when;
use crate::table::table;
use anyhow::Result;
use clap::{Args, Subcommand};
use foresight_api::{AuctionStage, AuctionView};

/// Auction commands.
#[derive(Subcommand)]
pub enum AuctionCommand {
    /// List the global jobs on offer with their auctions, highest priority first
    /// (administrators; a service in dispatcher mode).
    List(AuctionListOpts),
}

/// Options of `auction list`.
#[derive(Args)]
pub struct AuctionListOpts {
    /// At most this many, highest priority first, then oldest.
    #[arg(long, default_value_t = 1000)]
    limit: u32,
    #[command(flatten)]
    out: OutputOpt,
}

/// Runs `auction list`.
pub fn auction_list(conn: &Connection, o: AuctionListOpts) -> Result<()> {
    let c = Client::new(conn)?;
    let auctions: Vec<AuctionView> = c.get("/auctions", &[("limit", o.limit.to_string())])?;
    o.out.output.print(&auctions, || auctions_table(&auctions))
}

/// What comes next for a job on offer: its auction's close, its reopening after the
/// back-off, or nothing planned (`-`: it waits for a site able to bid).
pub(crate) fn next_text(a: &AuctionView) -> String {
    match (a.stage, a.closes_at, a.back_off_until) {
        (AuctionStage::Reopening, _, Some(t)) => format!("reopens {}", when(Some(t))),
        (AuctionStage::Open | AuctionStage::Closing, Some(t), _) => {
            format!("closes {}", when(Some(t)))
        }
        _ => "-".into(),
    }
}

/// The best bid and its bidder, `-` without one.
fn best_text(a: &AuctionView) -> String {
    match (a.best_bid, &a.best_bidder) {
        (Some(p), Some(site)) => format!("{p:.2} ({site})"),
        (Some(p), None) => format!("{p:.2}"),
        _ => "-".into(),
    }
}

/// The `auction list` table.
fn auctions_table(auctions: &[AuctionView]) -> String {
    let rows: Vec<Vec<String>> = auctions
        .iter()
        .map(|a| {
            vec![
                a.job.to_string(),
                a.user.clone(),
                a.procs.to_string(),
                a.priority.to_string(),
                a.stage.to_string(),
                a.rounds.to_string(),
                a.unsold.to_string(),
                a.bids.to_string(),
                best_text(a),
                next_text(a),
            ]
        })
        .collect();
    table(
        &[
            "JOB", "USER", "PROCS", "PRIORITY", "STATE", "ROUNDS", "UNSOLD", "BIDS", "BEST", "NEXT",
        ],
        &rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offered(stage: AuctionStage) -> AuctionView {
        AuctionView {
            job: 7,
            user: "ann".into(),
            procs: 2,
            priority: 1,
            stage,
            opened_by: None,
            opened_at: None,
            closes_at: None,
            bids: 0,
            best_bid: None,
            best_bidder: None,
            rounds: 0,
            unsold: 0,
            back_off_until: None,
        }
    }

    #[test]
    fn next_says_when_the_auction_closes_or_reopens() {
        let mut a = offered(AuctionStage::Open);
        a.closes_at = Some(100);
        assert_eq!(next_text(&a), format!("closes {}", when(Some(100))));
        a.stage = AuctionStage::Reopening;
        a.back_off_until = Some(200);
        assert_eq!(next_text(&a), format!("reopens {}", when(Some(200))));
        assert_eq!(next_text(&offered(AuctionStage::Unsold)), "-");
        assert_eq!(next_text(&offered(AuctionStage::Queued)), "-");
    }

    #[test]
    fn the_table_names_the_best_bid_and_its_bidder() {
        let mut a = offered(AuctionStage::Open);
        a.bids = 2;
        a.best_bid = Some(3.456);
        a.best_bidder = Some("b".into());
        a.rounds = 2;
        a.unsold = 1;
        let t = auctions_table(&[a, offered(AuctionStage::Queued)]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        assert!(
            lines[0].starts_with("JOB  USER  PROCS  PRIORITY  STATE"),
            "{t}"
        );
        assert!(
            lines[1]
                .starts_with("7    ann   2      1         open    2       1       2     3.46 (b)"),
            "{t}"
        );
        assert!(
            lines[2].ends_with("queued  0       0       0     -         -"),
            "{t}"
        );
    }
}
