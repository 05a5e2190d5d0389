//! What one site needs to fetch a job's input from another over the network: each site's
//! announced address and signing key (`dispatchers.url`, `dispatchers.peer_key`), and which
//! site a global job is awarded to, so that the holder of an input serves it only to the
//! winner (`migrations/postgres/0013_peer_keys.sql`).

use crate::{decode, JobRecord, Result, SharedQueue};
use sqlx::Row;

/// Another site as a requester or a holder sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// The address its service announced (`http(s)://host:port`).
    pub url: String,
    /// The key its requests are signed with; `None` before it first registered with one.
    pub key: Option<String>,
}

/// A global job as its input's holder checks a fetch of it.
#[derive(Clone, Debug)]
pub struct Awarded {
    /// The site it is awarded to (or runs at), if any.
    pub site: Option<String>,
    /// Its place in the global queue (`claimed` and `started` may fetch).
    pub state: String,
    /// Its record as submitted (its inputs, its Unix account).
    pub record: JobRecord,
}

impl Awarded {
    /// Whether `site` may fetch this job's inputs: only the site it is awarded to, while
    /// the award stands (claimed or started there).
    pub fn may_fetch(&self, site: &str) -> bool {
        self.site.as_deref() == Some(site) && matches!(self.state.as_str(), "claimed" | "started")
    }
}

impl SharedQueue {
    /// This site's signing key: `fresh` at its first registration with one, the kept one
    /// after (a restart keeps it, so that requests in flight still verify).
    pub async fn peer_key(&self, fresh: &str) -> Result<String> {
        sqlx::query_scalar(
            "UPDATE dispatchers SET peer_key = COALESCE(peer_key, $2) WHERE site = $1 \
             RETURNING peer_key",
        )
        .bind(self.site())
        .bind(fresh)
        .fetch_one(&self.pool)
        .await
        .map_err(self.db())
    }

    /// Site `site`'s address and key; `None` when no such site ever registered.
    pub async fn peer(&self, site: &str) -> Result<Option<Peer>> {
        let row = sqlx::query("SELECT url, peer_key FROM dispatchers WHERE site = $1")
            .bind(site)
            .fetch_optional(&self.pool)
            .await
            .map_err(self.db())?;
        Ok(row.map(|r| Peer {
            url: r.get(0),
            key: r.get(1),
        }))
    }

    /// Global job `id` with the site it is awarded to; `None` when it is no global job.
    pub async fn awarded(&self, id: u64) -> Result<Option<Awarded>> {
        let row = sqlx::query(
            "SELECT g.site, g.state, j.data FROM global_jobs g JOIN jobs j ON j.id = g.job_id \
             WHERE g.job_id = $1",
        )
        .bind(id as i64)
        .fetch_optional(&self.pool)
        .await
        .map_err(self.db())?;
        row.map(|r| {
            let mut record: JobRecord = decode("jobs", id.to_string(), &r.get::<String, _>(2))?;
            record.id = id;
            Ok(Awarded {
                site: r.get(0),
                state: r.get(1),
                record,
            })
        })
        .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn awarded(site: Option<&str>, state: &str) -> Awarded {
        Awarded {
            site: site.map(Into::into),
            state: state.into(),
            record: JobRecord::default(),
        }
    }

    #[test]
    fn only_the_site_a_job_is_awarded_to_may_fetch_its_inputs() {
        assert!(awarded(Some("b"), "claimed").may_fetch("b"));
        assert!(awarded(Some("b"), "started").may_fetch("b"));
        assert!(
            !awarded(Some("b"), "started").may_fetch("c"),
            "another site"
        );
        assert!(!awarded(Some("b"), "done").may_fetch("b"), "ended");
        assert!(!awarded(None, "queued").may_fetch("b"), "not awarded");
        assert!(
            !awarded(Some("b"), "auction").may_fetch("b"),
            "on sale again"
        );
    }
}
