//! [`LeaseTx`]: who owns each handler's work when several daemons share
//! one store: leases on the database's own clock, with fencing tokens.

use agency_core::{HandlerId, Timestamp};

use super::R;
use crate::leases::{LeaseOwnerRow, LeaseRow};

/// Handler leases. Times are the database's own clock ([`db_now`]), so
/// every daemon sharing a database measures leases on one clock; a lease
/// is expired when `expires_at <= db_now()`. Rows are never deleted.
///
/// The invariant: a handler's token only grows, and it grows on every
/// change of owner and every claim of an expired lease, so at most one
/// owner ever holds a given (handler, token), and a write made under an
/// old token is refused by [`lease_holds`] in the writer's own
/// transaction (writes are serialised).
///
/// `ttl_ms < 0` or an empty owner is refused (`StoreError::Backend`)
/// before anything is read.
///
/// [`db_now`]: LeaseTx::db_now
/// [`lease_holds`]: LeaseTx::lease_holds
pub trait LeaseTx {
    /// The database's clock, in milliseconds since the Unix epoch (read
    /// afresh on each call, not the transaction's start).
    fn db_now(&mut self) -> R<Timestamp>;

    /// Claim `handler`'s lease for `owner` until `db_now() + ttl_ms`. It
    /// is taken when it has no row (token 1), when its row has expired
    /// (token + 1, whoever held it, `owner` included), or when `owner`
    /// holds it unexpired (same token, `claimed_at` kept: an extension).
    /// A claim that changes the owner or takes an expired lease sets
    /// `claimed_at` to now. `None`, and nothing changes, when another
    /// owner holds it unexpired. Returns the row as it now is.
    fn claim_lease(&mut self, handler: HandlerId, owner: &str, ttl_ms: i64) -> R<Option<LeaseRow>>;

    /// Extend to `db_now() + ttl_ms` every unexpired lease `owner` holds,
    /// tokens unchanged, and return them ordered by handler. A lease taken
    /// over by another owner, released, or expired (even if nobody took it
    /// yet: it is up for grabs, and claiming it again gives a new token) is
    /// not among them: that is how a daemon learns it no longer holds it.
    fn renew_leases(&mut self, owner: &str, ttl_ms: i64) -> R<Vec<LeaseRow>>;

    /// Release a lease: when `owner` holds `handler`'s lease with `token`
    /// and it has not expired, it expires now (token kept, so the next
    /// claim's is higher) and the answer is true; otherwise nothing
    /// changes and the answer is false (another owner or token, already
    /// released or lapsed, no row).
    fn release_lease(&mut self, handler: HandlerId, owner: &str, token: i64) -> R<bool>;

    /// `handler`'s lease row, expired or not.
    fn lease(&mut self, handler: HandlerId) -> R<Option<LeaseRow>>;

    /// The lease rows whose owner is `owner` (expired ones too), ordered by
    /// handler.
    fn leases_of(&mut self, owner: &str) -> R<Vec<LeaseRow>>;

    /// The lease rows of `handlers` that have one (expired ones too),
    /// ordered by handler: one read for a page of handlers.
    fn leases_for(&mut self, handlers: &[HandlerId]) -> R<Vec<LeaseRow>>;

    /// Every owner holding an unexpired lease, with how many it holds and
    /// when the last of them expires, ordered by owner.
    fn lease_owners(&mut self) -> R<Vec<LeaseOwnerRow>>;

    /// The expired lease rows (`expires_at <= db_now()`), ordered by
    /// (expires_at, handler), at most `limit`: the sweeper's work list.
    fn expired_leases(&mut self, limit: usize) -> R<Vec<LeaseRow>>;

    /// The fence: whether `handler`'s lease row has exactly `token`,
    /// whatever its expiry. A write made as the owner checks it inside its
    /// own transaction; false means someone else took the lease since.
    fn lease_holds(&mut self, handler: HandlerId, token: i64) -> R<bool>;
}
