//! Budgets on delegation: a delegation is charged to the
//! boss's chain (one more handler, one level deeper), and a boss may give
//! its new underling a budget carved out of its own remaining budget,
//! never more.
//!
//! What remains of a budget of handler A, per kind, is its limit minus the
//! subtree's spend, minus what model calls in flight hold, minus what A's
//! subtree has already carved and not yet spent (for each carved budget
//! nearest below A with a limit of that kind: its limit minus its own
//! spend). A carve must fit what remains of every budget on the boss's
//! chain with a limit of that kind. Live agents, depth and wall-clock time
//! are not shares: a carved live-agent limit must not exceed the holder's,
//! a carved depth must stay within the holder's depth, and a carved wall
//! clock within the holder's time left.

use std::collections::BTreeMap;

use agency_core::{HandlerId, OutcomeId};
use agency_store::{BudgetLimits, BudgetRow, BudgetSpend, HandlerRow, Tx};

use crate::Result;
use crate::budgets::ledger::{Charge, Held, Kind, admit, chain, elapsed, held, refuse};
use crate::error::ServiceError;
use crate::service::Op;

/// Charge a delegation by `boss` (one more handler in every subtree above,
/// one level deeper): refused by a paused budget and by the handlers and
/// depth limits. `Ok(Err(e))`: refused; commit and return `e` (a wall
/// clock reached records its pause).
pub(crate) fn admit_delegation(
    op: &mut Op<'_>,
    boss: HandlerId,
    outcome: OutcomeId,
) -> Result<std::result::Result<(), ServiceError>> {
    let charge = Charge {
        delta: BudgetSpend {
            handlers: 1,
            ..BudgetSpend::default()
        },
        delegation: true,
        blocked_by_pause: true,
        ..Charge::default()
    };
    match admit(op, boss, &charge, &format!("delegate outcome {outcome}"))? {
        Ok(()) => Ok(Ok(())),
        Err(r) => Ok(Err(refuse(op, r)?)),
    }
}

/// A reactivated handler that moves to a new boss takes its subtree's
/// totals with it: off the old boss's chain, onto the new one's (which
/// [`admit_delegation`] already charged for the handler itself).
pub(crate) fn move_subtree(
    op: &mut Op<'_>,
    moved: HandlerId,
    old_boss: Option<HandlerId>,
    new_boss: HandlerId,
) -> Result<()> {
    if old_boss == Some(new_boss) {
        return Ok(());
    }
    let s = op.tx.budget_spend_of(moved)?;
    if let Some(old) = old_boss {
        let ids: Vec<HandlerId> = chain(op.tx, old)?.iter().map(|r| r.id).collect();
        let mut minus = negate(&s);
        minus.handlers -= 1; // the handler itself was counted there
        op.tx.budget_spend_add(&ids, &minus)?;
    }
    let ids: Vec<HandlerId> = chain(op.tx, new_boss)?.iter().map(|r| r.id).collect();
    op.tx.budget_spend_add(&ids, &s)?;
    Ok(())
}

fn negate(s: &BudgetSpend) -> BudgetSpend {
    BudgetSpend {
        tokens: -s.tokens,
        micro_usd: -s.micro_usd,
        calls: -s.calls,
        tool_calls: -s.tool_calls,
        spawns: -s.spawns,
        handlers: -s.handlers,
        reserved_tokens: -s.reserved_tokens,
        reserved_micro_usd: -s.reserved_micro_usd,
        reserved_calls: -s.reserved_calls,
    }
}

/// Check that `limits` fits what remains of every budget on `boss`'s
/// chain (after [`admit_delegation`] charged this delegation), and set it
/// on the new underling `u` as carved by `boss`.
pub(crate) fn carve(
    op: &mut Op<'_>,
    boss: HandlerId,
    u: HandlerId,
    outcome: OutcomeId,
    limits: &BudgetLimits,
) -> Result<()> {
    crate::budgets::validate(u, limits, "carve the budget")?;
    let rows = chain(op.tx, boss)?;
    for h in held(op.tx, &rows)? {
        for kind in Kind::ALL {
            let (Some(want), Some(limit)) = (kind.limit(limits), kind.limit(&h.budget.limits))
            else {
                continue;
            };
            let left = remaining(op, &h, kind, limit)?;
            if want > left {
                return Err(ServiceError::Quota(format!(
                    "failed to delegate outcome {outcome} with a budget: {} {want} is more than \
                     the {left} left in the budget of handler {} ({} limit {limit}); carve at \
                     most {left}, or leave that limit out",
                    kind.name(),
                    h.budget.handler,
                    kind.name()
                )));
            }
        }
    }
    if !limits.is_empty() {
        op.tx.set_budget(&BudgetRow {
            handler: u,
            limits: *limits,
            set_at: op.now,
            carved_by: Some(boss),
            paused: None,
            warned: 0,
        })?;
    }
    Ok(())
}

fn remaining(op: &mut Op<'_>, h: &Held, kind: Kind, limit: i64) -> Result<i64> {
    Ok(match kind {
        Kind::LiveAgents => limit,
        // The new handler is `below + 1` levels under the holder.
        Kind::Depth => limit - h.below - 1,
        Kind::WallClock => limit - elapsed(&h.budget, op.now),
        _ => {
            let spent = kind.spent(&h.spend).unwrap_or(0) + kind.in_flight(&h.spend);
            limit - spent - outstanding(op.tx, h.budget.handler, kind)?
        }
    }
    .max(0))
}

/// What budgets carved below `holder` (the nearest with a limit of
/// `kind` on each path) still hold unspent.
fn outstanding(tx: &mut dyn Tx, holder: HandlerId, kind: Kind) -> Result<i64> {
    let rows: Vec<HandlerRow> = tx.handler_subtree(holder)?;
    let mut kids: BTreeMap<HandlerId, Vec<HandlerId>> = BTreeMap::new();
    for r in &rows {
        if r.id != holder
            && let Some(b) = r.boss
        {
            kids.entry(b).or_default().push(r.id);
        }
    }
    let mut total = 0i64;
    let mut stack: Vec<HandlerId> = kids.get(&holder).cloned().unwrap_or_default();
    let mut seen = std::collections::BTreeSet::new();
    while let Some(n) = stack.pop() {
        if !seen.insert(n) {
            continue;
        }
        if let Some(b) = tx.budget_of(n)?
            && b.carved_by.is_some()
            && let Some(limit) = kind.limit(&b.limits)
        {
            let s = tx.budget_spend_of(n)?;
            let used = kind.spent(&s).unwrap_or(0) + kind.in_flight(&s);
            total += (limit - used).max(0);
            continue;
        }
        stack.extend(kids.get(&n).cloned().unwrap_or_default());
    }
    Ok(total)
}
