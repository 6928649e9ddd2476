//! Rows of handler leases (migration 31): which daemon owns each
//! handler's work when several daemons share one store. A handler's work
//! is claimed by one daemon at a time, for a while (`expires_at`, on the
//! database's own clock), under a fencing token that grows each time the
//! lease changes hands or is taken after it expired. Rows are never
//! deleted: a released lease is an expired row, so its token is kept and
//! the next claim's is higher. When a lease may be taken and how long it
//! lasts is the service's; these are plain rows.

use agency_core::{HandlerId, Timestamp};

use crate::error::StoreError;

/// The lease of one handler's work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRow {
    pub handler: HandlerId,
    /// The daemon that holds (or last held) it.
    pub owner: String,
    /// The fencing token: 1 for the first claim, one more each time the
    /// lease changed owner or was taken after it expired. A write made as
    /// the owner checks it is still the row's (`LeaseTx::lease_holds`).
    pub token: i64,
    /// On the database's clock (`LeaseTx::db_now`); the lease is free from
    /// this instant on.
    pub expires_at: Timestamp,
    /// When this token was handed out.
    pub claimed_at: Timestamp,
}

/// One owner's unexpired leases, summed ([`crate::tx::LeaseTx::lease_owners`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseOwnerRow {
    pub owner: String,
    /// Handlers whose lease it holds, unexpired.
    pub handlers: i64,
    /// When the last of them expires, on the database's clock.
    pub expires_at: Timestamp,
}

/// The input rule every backend applies to a lease change: an owner is
/// named (not empty) and a time to live is not negative. `op` says what
/// was being done ("claim the lease of handler …"), for the error.
pub fn check_lease_input(
    owner: &str,
    ttl_ms: Option<i64>,
    op: impl FnOnce() -> String,
) -> Result<(), StoreError> {
    if owner.is_empty() {
        return Err(StoreError::backend(op(), "the lease owner is empty"));
    }
    if let Some(ttl) = ttl_ms
        && ttl < 0
    {
        return Err(StoreError::backend(
            op(),
            format!("the lease time to live is negative ({ttl} ms)"),
        ));
    }
    Ok(())
}
