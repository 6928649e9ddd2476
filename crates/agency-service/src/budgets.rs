//! Budgets on handlers (issue 11 item 3, model calls): the user sets
//! limits on a handler's subtree ([`Service::budget_set`]) and reads spend
//! against limit as a tree ([`Service::budget_show`]); the gateway's
//! reservation ([`Service::model_call_reserve`]) checks them through
//! [`reserve`].
//!
//! Budgets are a ledger, not a counter (DESIGN §6): a call reserves its
//! worst case from its handler and every ancestor with a limit in the same
//! write transaction that checks them, and settling replaces the
//! reservation by the actual usage. Parallel agents under one cap can
//! therefore overspend only by what their calls use beyond the worst case
//! they declared, never by racing each other.

use std::collections::BTreeSet;

use agency_core::{AgentId, HandlerId, Principal};
use agency_store::{
    BudgetLimits, BudgetReservationRow, BudgetRow, HandlerStatus, ReservedTotals, Tx, UsageTotals,
};
use serde::{Deserialize, Serialize};

use crate::Result;
use crate::error::ServiceError;
use crate::metering::CostNode;
use crate::service::{Caller, Op, Service, authenticate};

/// One handler in `agency budget show`: its limits (if any) against its
/// subtree's spend and reservations in flight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetNode {
    pub handler: HandlerId,
    pub status: HandlerStatus,
    /// `None`: no budget set on this handler (an ancestor's may still hold).
    pub limits: Option<BudgetLimits>,
    /// What the subtree's recorded model calls used.
    pub spent: UsageTotals,
    /// The subtree's calls in flight, at their worst case.
    pub reserved: ReservedTotals,
    pub children: Vec<BudgetNode>,
}

impl Service {
    /// The user: set (replace) the limits on `handler`'s subtree. A limit
    /// left out is no limit of that kind; all left out removes the budget.
    pub fn budget_set(
        &self,
        who: Principal,
        handler: HandlerId,
        limits: BudgetLimits,
    ) -> Result<BudgetRow> {
        for (what, v) in [
            ("tokens", limits.tokens),
            ("cost", limits.micro_usd),
            ("calls", limits.calls),
        ] {
            if let Some(v) = v
                && v < 0
            {
                return Err(ServiceError::invalid(format!(
                    "failed to set the budget of handler {handler}: the {what} limit is negative ({v}); give zero or more"
                )));
            }
        }
        self.write(|op| {
            if !matches!(authenticate(op.tx, who)?, Caller::User) {
                return Err(ServiceError::denied(format!(
                    "failed to set the budget of handler {handler}: only the user sets budgets"
                )));
            }
            if op.tx.handler(handler)?.is_none() {
                return Err(ServiceError::not_found("handler", handler));
            }
            let row = BudgetRow {
                handler,
                limits,
                set_at: op.now,
            };
            op.tx.set_budget(&row)?;
            Ok(row)
        })
    }

    /// The user: the budgets of `root`'s subtree (default: everything) as
    /// a tree of subtree spend and reservations against each limit.
    pub fn budget_show(&self, who: Principal, root: Option<HandlerId>) -> Result<BudgetNode> {
        let cost = self.cost_tree(who, root)?;
        self.read(|tx| budget_node(tx, cost))
    }

    /// The daemon at start: no call is in flight, so a reservation left by
    /// a previous daemon that died mid-call would only hold budget forever.
    pub fn budget_clear_reservations(&self) -> Result<usize> {
        self.write(|op| Ok(op.tx.clear_budget_reservations()?))
    }
}

fn budget_node(tx: &mut dyn Tx, cost: CostNode) -> Result<BudgetNode> {
    let mut children = Vec::with_capacity(cost.children.len());
    let mut reserved = tx.budget_reserved_of(&[cost.handler])?;
    for c in cost.children {
        let child = budget_node(tx, c)?;
        reserved.calls += child.reserved.calls;
        reserved.tokens += child.reserved.tokens;
        reserved.micro_usd += child.reserved.micro_usd;
        children.push(child);
    }
    Ok(BudgetNode {
        handler: cost.handler,
        status: cost.status,
        limits: tx.budget_of(cost.handler)?.map(|b| b.limits),
        spent: cost.subtree,
        reserved,
        children,
    })
}

/// The worst case of one call, as the gateway estimated it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct WorstCase {
    pub tokens: i64,
    pub micro_usd: i64,
}

/// Check the call against the budget of `handler` and every ancestor and,
/// if every one has room, record its reservation (returned: the ledger id
/// the settlement releases). Runs inside the reserving write transaction.
pub(crate) fn reserve(
    op: &mut Op<'_>,
    handler: HandlerId,
    agent: AgentId,
    worst: WorstCase,
) -> Result<i64> {
    let mut seen = BTreeSet::new();
    let mut next = Some(handler);
    while let Some(h) = next {
        if !seen.insert(h) {
            break; // a corrupt boss cycle: every handler on it was checked
        }
        let row = op
            .tx
            .handler(h)?
            .ok_or_else(|| ServiceError::not_found("handler", h))?;
        next = row.boss;
        let Some(budget) = op.tx.budget_of(h)? else {
            continue;
        };
        if budget.limits.is_empty() {
            continue;
        }
        check(op.tx, h, &budget.limits, worst)?;
    }
    Ok(op.tx.insert_budget_reservation(&BudgetReservationRow {
        at: op.now,
        handler,
        agent,
        tokens: worst.tokens,
        micro_usd: worst.micro_usd,
    })?)
}

fn check(tx: &mut dyn Tx, h: HandlerId, limits: &BudgetLimits, worst: WorstCase) -> Result<()> {
    let ids: Vec<HandlerId> = tx.handler_subtree(h)?.iter().map(|r| r.id).collect();
    let mut spent = UsageTotals::default();
    for t in tx.model_usage_of(&ids)? {
        spent.add(&t);
    }
    let reserved = tx.budget_reserved_of(&ids)?;
    let checks = [
        (
            "tokens",
            "--tokens",
            limits.tokens,
            spent.usage.total(),
            reserved.tokens,
            worst.tokens,
        ),
        (
            "micro-USD",
            "--usd",
            limits.micro_usd,
            spent.cost_micro_usd,
            reserved.micro_usd,
            worst.micro_usd,
        ),
        (
            "model calls",
            "--calls",
            limits.calls,
            spent.calls,
            reserved.calls,
            1,
        ),
    ];
    for (what, flag, limit, spent, in_flight, this) in checks {
        let Some(limit) = limit else { continue };
        if spent.saturating_add(in_flight).saturating_add(this) > limit {
            return Err(ServiceError::Quota(format!(
                "failed to call the model: budget of handler {h} reached: {what} limit {limit}, \
                 spent {spent}, in flight {in_flight}, this call needs up to {this}; \
                 save your state and stop; ask your boss or the user to raise it \
                 (agency budget set {h} {flag} …)"
            )));
        }
    }
    Ok(())
}
