//! `foresight cluster`: the clusters and their load.

use super::{Client, Connection};
use crate::format::OutOnly;
use crate::table::{printable, table};
use anyhow::Result;
use clap::Subcommand;
use foresight_api::ClusterInfo;

/// Cluster commands.
#[derive(Subcommand)]
pub enum ClusterCommand {
    /// List clusters with their load.
    List(OutOnly),
}

/// Runs `cluster list`.
pub fn cluster_list(conn: &Connection, o: OutOnly) -> Result<()> {
    let c = Client::new(conn)?;
    let cs: Vec<ClusterInfo> = c.get("/clusters", &[])?;
    o.out.output.print(&cs, || clusters_table(&cs))
}

/// The `cluster list` table, then why each cluster not up is what it is.
fn clusters_table(cs: &[ClusterInfo]) -> String {
    let rows: Vec<Vec<String>> = cs
        .iter()
        .map(|c| {
            vec![
                c.name.clone(),
                c.kind.clone(),
                c.state.clone(),
                c.procs.to_string(),
                c.busy.to_string(),
                c.running.to_string(),
                c.queued.to_string(),
                c.policy.clone(),
                c.tariff.to_string(),
            ]
        })
        .collect();
    let mut s = table(
        &[
            "NAME", "KIND", "STATE", "PROCS", "BUSY", "RUNNING", "QUEUED", "POLICY", "TARIFF",
        ],
        &rows,
    );
    for c in cs.iter().filter(|c| c.reason.is_some()) {
        s.push_str(&format!(
            "{} is {}: {}\n",
            printable(&c.name),
            printable(&c.state),
            printable(c.reason.as_deref().unwrap_or(""))
        ));
    }
    s
}
