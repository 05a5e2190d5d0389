//! A standby service: it waits for the store the active service holds and takes it over
//! when that service stops or dies, so that no single machine's loss stops the grid. The
//! database decides who is active: its lock belongs to the active service's session, and
//! ends with it (a killed process's connection is closed by its kernel; a machine that
//! vanishes is noticed by the server's TCP keepalives).

use foresight_store::{Holder, Store, StoreError, StoreLocation};
use std::sync::Arc;
use std::time::Duration;

/// How often a standby tries the store's lock: a take-over waits at most this much past
/// the active service's end.
const TRY_EVERY: Duration = Duration::from_millis(250);

/// How long a standby waits between tries while the database cannot be reached.
const UNREACHABLE_PAUSE: Duration = Duration::from_secs(2);

/// The store at `location` for `holder`; when `standby`, waits while another service holds
/// it, and while the database cannot be reached (it may be failing over itself). A bad
/// location or a failed migration ends the wait: waiting would not mend them.
pub(crate) async fn take_store(
    location: &StoreLocation,
    holder: &Holder,
    standby: bool,
) -> Result<Arc<dyn Store>, StoreError> {
    let mut waiting_for = None;
    loop {
        match foresight_store::open_by(location, holder).await {
            Err(StoreError::InUse { holder: active, .. }) if standby => {
                if waiting_for.as_ref() != Some(&active) {
                    tracing::info!(active = %active, "standing by: the store is held by the active service");
                    println!("standing by for {active}");
                    waiting_for = Some(active);
                }
                tokio::time::sleep(TRY_EVERY).await;
            }
            Err(e @ (StoreError::Unreachable { .. } | StoreError::Database { .. })) if standby => {
                tracing::warn!("standing by: {e}; trying again");
                tokio::time::sleep(UNREACHABLE_PAUSE).await;
            }
            Err(e) => return Err(e),
            Ok(store) => {
                if let Some(active) = waiting_for {
                    tracing::warn!(previous = %active, "taking over: the active service is gone");
                    println!("taking over from {active}");
                }
                return Ok(store);
            }
        }
    }
}
