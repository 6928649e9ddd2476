//! The automatic retention policy: the daemon runs the service's `gc` as
//! the user once after start and then every `retention.gc_interval_hours`
//! (`agency gc` runs the same operation on demand). Collection is safe
//! beside live writes (see `agency_service::gc`), so it needs no pause.

use std::sync::Arc;
use std::time::Duration;

use agency_core::Principal;
use agency_service::System;
use tokio::task::JoinHandle;

/// Start the periodic collection; `None` when `interval_hours` is 0.
pub(crate) fn spawn(svc: Arc<System>, interval_hours: u32) -> Option<JoinHandle<()>> {
    if interval_hours == 0 {
        return None;
    }
    let period = Duration::from_secs(u64::from(interval_hours) * 3600);
    Some(tokio::spawn(async move {
        loop {
            let s = svc.clone();
            // A failed run (a full disk, say) is retried at the next
            // period; fsck reports nothing it could have left half done,
            // because every step is its own transaction or a blob removal.
            let _ = tokio::task::spawn_blocking(move || s.gc(Principal::User, false)).await;
            tokio::time::sleep(period).await;
        }
    }))
}
