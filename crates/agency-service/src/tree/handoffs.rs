//! Bounded loops (seed 003's step budgets): a chain of
//! work that hands itself on — mail from one handler to another,
//! delegations — carries a hop count, and `[limits] max_handoffs` bounds
//! it, so two agents bouncing work between them, or an organisation that
//! keeps delegating, stops with a clear error instead of looping. The
//! depth of a chain is bounded by `max_delegation_depth` (`quotas.rs`) and
//! by budgets' depth limits (`budgets/ledger.rs`).
//!
//! A handler's hop count is that of the last message or delegation it got
//! from another handler; the user's message starts a new chain at 0.

use agency_core::{HandlerId, Limits};

use crate::Result;
use crate::error::ServiceError;
use crate::service::{Caller, Op};

/// Record one hand-off from `from` to handler `to` (refused past the
/// limit; the caller's transaction then rolls back).
pub(crate) fn hand_off(
    op: &mut Op<'_>,
    limits: &Limits,
    from: &Caller,
    to: HandlerId,
    what: &str,
) -> Result<()> {
    let hops = match from {
        Caller::User => 0,
        Caller::Handler { row, .. } if row.id == to => return Ok(()),
        Caller::Handler { row, .. } => {
            let hops = op.tx.handler_hops(row.id)?.saturating_add(1);
            let max = i64::try_from(limits.max_handoffs).unwrap_or(i64::MAX);
            if hops > max {
                return Err(ServiceError::Quota(format!(
                    "failed to {what}: this chain of work has already been handed on {} times \
                     (limit limits.max_handoffs = {max} in agency.toml); stop handing it on: \
                     finish it yourself, or report to your boss with what you have",
                    hops - 1
                )));
            }
            hops
        }
    };
    op.tx.set_handler_hops(to, hops)?;
    Ok(())
}
