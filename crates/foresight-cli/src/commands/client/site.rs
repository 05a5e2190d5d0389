//! `foresight site`: the sites whose dispatchers share the global queue (dispatcher mode),
//! with their leases.

use super::{Client, Connection};
use crate::format::OutOnly;
use crate::moment::when;
use crate::table::table;
use anyhow::Result;
use clap::Subcommand;
use foresight_api::SiteView;

/// Site commands.
#[derive(Subcommand)]
pub enum SiteCommand {
    /// List the sites sharing the global queue, up or down by their dispatchers' leases
    /// (administrators; a service in dispatcher mode).
    List(OutOnly),
}

/// Runs `site list`.
pub fn site_list(conn: &Connection, o: OutOnly) -> Result<()> {
    let c = Client::new(conn)?;
    let sites: Vec<SiteView> = c.get("/sites", &[])?;
    o.out.output.print(&sites, || sites_table(&sites))
}

/// A lease for people: how long it still holds (`4.2s left`), or how long ago it ran out
/// (`expired 12.0s ago`), to the tenth of a second.
pub(crate) fn lease_text(left_ms: i64) -> String {
    let tenths = |ms: i64| format!("{}.{}s", ms / 1000, ms % 1000 / 100);
    if left_ms > 0 {
        format!("{} left", tenths(left_ms))
    } else {
        format!("expired {} ago", tenths(left_ms.saturating_neg()))
    }
}

/// The `site list` table.
fn sites_table(sites: &[SiteView]) -> String {
    let rows: Vec<Vec<String>> = sites
        .iter()
        .map(|s| {
            vec![
                s.name.clone(),
                s.id.to_string(),
                s.state.to_string(),
                lease_text(s.lease_left_ms),
                when(Some(s.heartbeat_at)),
                s.max_procs.to_string(),
                s.claimed.to_string(),
                s.running.to_string(),
                s.bids.to_string(),
                s.url.clone(),
            ]
        })
        .collect();
    table(
        &[
            "NAME",
            "ID",
            "STATE",
            "LEASE",
            "HEARTBEAT",
            "MAX_PROCS",
            "CLAIMED",
            "RUNNING",
            "BIDS",
            "URL",
        ],
        &rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_says_how_long_it_holds_or_since_when_it_ran_out() {
        assert_eq!(lease_text(4_250), "4.2s left");
        assert_eq!(lease_text(61_000), "61.0s left");
        assert_eq!(lease_text(0), "expired 0.0s ago");
        assert_eq!(lease_text(-12_090), "expired 12.0s ago");
        assert_eq!(lease_text(i64::MIN), "expired 9223372036854775.8s ago");
    }

    #[test]
    fn the_table_shows_each_site_with_its_lease() {
        let site = |name: &str, id, left: i64| SiteView {
            name: name.into(),
            id,
            state: foresight_api::SiteState::of_lease(left > 0),
            url: format!("http://{name}:8080"),
            started_at: 0,
            heartbeat_at: 0,
            lease_ms: 1500,
            lease_left_ms: left,
            max_procs: 4,
            max_tariff: 1.0,
            claimed: 1,
            running: 2,
            bids: 3,
        };
        let t = sites_table(&[site("a", 0, 1200), site("b", 1, -3000)]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        assert!(lines[0].starts_with("NAME  ID  STATE  LEASE"), "{t}");
        assert!(lines[1].starts_with("a     0   up     1.2s left"), "{t}");
        assert!(
            lines[2].starts_with("b     1   down   expired 3.0s ago"),
            "{t}"
        );
        assert!(
            lines[2].ends_with("4          1        2        3     http://b:8080"),
            "{t}"
        );
    }
}
