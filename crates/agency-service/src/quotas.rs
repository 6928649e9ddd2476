//! Quotas: how much one handler's agents may make, from `[limits]` in
//! `agency.toml`. A prompt-injected or looping agent must not be able to
//! fill the store or grow the organisation without bound.
//!
//! Each check runs inside the write transaction of the operation it guards
//! (and again in its read-only pre-check where there is one, so a refused
//! caller stores no blob either), with counts from indexed queries that
//! stop at the limit. The user is not bound by quotas: the user is the
//! administrator who sets them.

use agency_core::access::FileKind;
use agency_core::{HandlerId, Limits, MailTarget, OutcomeId};
use agency_store::Tx;

use crate::Result;
use crate::error::ServiceError;

fn refuse(what: String, key: &str, limit: usize, next: &str) -> ServiceError {
    ServiceError::Quota(format!(
        "{what} (limit limits.{key} = {limit} in agency.toml); {next}"
    ))
}

/// A handler may have at most `max_pending_deferred_per_handler` deferred
/// messages waiting for delivery.
pub(crate) fn check_pending_deferred(tx: &mut dyn Tx, l: &Limits, h: HandlerId) -> Result<()> {
    let limit = l.max_pending_deferred_per_handler;
    let n = tx.pending_mail_from(MailTarget::Handler(h), limit)?;
    if n >= limit {
        return Err(refuse(
            format!(
                "failed to schedule mail: handler {h} already has {n} deferred messages waiting for delivery"
            ),
            "max_pending_deferred_per_handler",
            limit,
            "send this message now, or wait until some of them are delivered",
        ));
    }
    Ok(())
}

/// A handler may create at most `max_outcomes_per_handler` outcomes.
pub(crate) fn check_outcomes(tx: &mut dyn Tx, l: &Limits, h: HandlerId) -> Result<()> {
    let limit = l.max_outcomes_per_handler;
    let n = tx.outcomes_created_by(h, limit)?;
    if n >= limit {
        return Err(refuse(
            format!("failed to create outcome: handler {h} has created {n} outcomes"),
            "max_outcomes_per_handler",
            limit,
            "delegate the work to an underling, or ask your boss to have the user raise the limit",
        ));
    }
    Ok(())
}

/// A handler may create at most `max_kb_files_per_handler` KB documents.
pub(crate) fn check_kb_files(tx: &mut dyn Tx, l: &Limits, h: HandlerId) -> Result<()> {
    let limit = l.max_kb_files_per_handler;
    let n = tx.files_created_by(h, FileKind::Document, limit)?;
    if n >= limit {
        return Err(refuse(
            format!("failed to create KB file: handler {h} has created {n} KB files"),
            "max_kb_files_per_handler",
            limit,
            "write new versions of files you have instead of creating more, or ask your boss to have the user raise the limit",
        ));
    }
    Ok(())
}

/// Delegating `outcome` from `boss` activates one more handler below it:
/// it must not be deeper than `max_delegation_depth` below the root
/// handler, and no subtree it joins may then hold more than
/// `max_handlers_per_subtree` active handlers. Subtrees nest, so the
/// subtree of the topmost handler above (the root handler's, the whole
/// organisation) is the largest it joins: checking that one checks all.
pub(crate) fn check_new_handler(
    tx: &mut dyn Tx,
    l: &Limits,
    boss: HandlerId,
    outcome: OutcomeId,
) -> Result<()> {
    let max_depth = l.max_delegation_depth;
    // Walk up from the boss; the walk is bounded by the limit (and so
    // finite even if a corrupt boss column made a cycle).
    let mut top = boss;
    let mut boss_depth = 0usize;
    while let Some(up) = tx.handler(top)?.and_then(|r| r.boss) {
        boss_depth += 1;
        top = up;
        if boss_depth >= max_depth {
            return Err(refuse(
                format!(
                    "failed to delegate outcome {outcome}: handler {boss} is {boss_depth} or more levels below the root handler, so a handler it delegates to would be deeper than allowed"
                ),
                "max_delegation_depth",
                max_depth,
                "do this work yourself, or report to your boss that it needs a shallower organisation",
            ));
        }
    }
    let max = l.max_handlers_per_subtree;
    let n = tx.active_subtree_size(top, max)?;
    if n >= max {
        return Err(refuse(
            format!(
                "failed to delegate outcome {outcome}: the subtree of handler {top} already has {n} active handlers"
            ),
            "max_handlers_per_subtree",
            max,
            "do this work yourself or with your existing underlings; finished or stopped handlers no longer count",
        ));
    }
    Ok(())
}
