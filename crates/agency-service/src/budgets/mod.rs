//! Budgets on handlers: the user sets limits on a
//! handler's subtree ([`Service::budget_set`]), reads spend against limit
//! as a tree ([`Service::budget_show`]), pauses a subtree by hand
//! ([`Service::budget_pause`]) and resumes a paused subtree
//! ([`Service::budget_resume`]); Agency's MCP tools charge each call
//! ([`Service::tool_call_charge`]); the daemon's supervisor asks whether a
//! handler is paused ([`Service::budget_paused`]).
//!
//! The checks and the running totals are the ledger (`budgets/ledger.rs`);
//! a boss's budget carved for an underling on delegation is
//! `budgets/carve.rs`.

pub(crate) mod carve;
pub(crate) mod ledger;
pub(crate) mod metering;

use std::collections::BTreeMap;

use agency_api::EventKind;
use agency_core::{HandlerId, Principal, Timestamp};
use agency_store::{BudgetLimits, BudgetPause, BudgetRow, BudgetSpend, HandlerStatus, Tx};

use self::ledger::{Kind, charge_tool_call, elapsed, paused_by, tool_call_charge_due};
use crate::Result;
use crate::error::ServiceError;
use crate::event_log::Record;
use crate::events::Event;
use crate::service::{Caller, Service, System, authenticate};
use crate::views::PausedView;
pub use agency_api::{BudgetNode, PauseReport, ResumeReport};

pub use agency_api::PAUSED_BY_USER;

fn is_hand_pause(p: &BudgetPause) -> bool {
    p.reason.starts_with(PAUSED_BY_USER)
}

fn paused_of(b: &BudgetRow) -> Option<PausedView> {
    b.paused.as_ref().map(|p| PausedView {
        by: b.handler,
        reason: p.reason.clone(),
        since: p.at,
    })
}

/// The paused budget nearest above `handler` (its own first), if any;
/// none for a handler that does not exist (a listing shows what it can).
pub(crate) fn paused_over(tx: &mut dyn Tx, handler: HandlerId) -> Result<Option<PausedView>> {
    if tx.handler(handler)?.is_none() {
        return Ok(None);
    }
    Ok(match paused_by(tx, handler)? {
        Some(by) => tx.budget_of(by)?.as_ref().and_then(paused_of),
        None => None,
    })
}

/// Refuse negative limits, naming the handler and the kind.
pub(crate) fn validate(handler: HandlerId, limits: &BudgetLimits, doing: &str) -> Result<()> {
    for kind in Kind::ALL {
        if let Some(v) = kind.limit(limits)
            && v < 0
        {
            return Err(ServiceError::invalid(format!(
                "failed to {doing} of handler {handler}: the {} limit is negative ({v}); give zero or more",
                kind.name()
            )));
        }
    }
    Ok(())
}

fn require_user(tx: &mut dyn Tx, who: Principal, doing: &str) -> Result<()> {
    if !matches!(authenticate(tx, who)?, Caller::User) {
        return Err(ServiceError::denied(format!(
            "failed to {doing}: only the user does that"
        )));
    }
    Ok(())
}

impl Service {
    /// The user: set (replace) the limits on `handler`'s subtree. A limit
    /// left out is no limit of that kind; all left out removes the budget.
    /// Setting limits continues a paused subtree and re-arms the 80%
    /// notices; a consumption limit at or under what the subtree already
    /// spent pauses it at once (the row returned says so). The
    /// wall clock keeps counting from when the budget was first set.
    pub fn budget_set(
        &self,
        who: Principal,
        handler: HandlerId,
        limits: BudgetLimits,
    ) -> Result<BudgetRow> {
        validate(handler, &limits, "set the budget")?;
        self.write(|op| {
            require_user(op.tx, who, &format!("set the budget of handler {handler}"))?;
            if op.tx.handler(handler)?.is_none() {
                return Err(ServiceError::not_found("handler", handler));
            }
            let old = op.tx.budget_of(handler)?;
            let mut row = BudgetRow {
                handler,
                limits,
                set_at: old.as_ref().map_or(op.now, |b| b.set_at),
                carved_by: None,
                // New limits lift a pause by a reached limit, not one the
                // user made by hand: only `resume` lifts that.
                paused: old
                    .as_ref()
                    .and_then(|b| b.paused.clone())
                    .filter(is_hand_pause),
                warned: 0,
            };
            if limits.is_empty() && row.paused.is_none() {
                op.tx.delete_budget(handler)?;
            } else {
                op.tx.set_budget(&row)?;
                // A limit at or under what the subtree already spent
                // pauses it now (with the notice every pause sends), not
                // silently at its next call: the answer says so, and
                // `handlers` and `status` show it at once.
                let spent = op.tx.budget_spend_of(handler)?;
                if let Some(what) = reached_at_set(&row, &spent, op.now) {
                    ledger::pause(op, handler, &what)?;
                    row = op.tx.budget_of(handler)?.unwrap_or(row);
                }
            }
            if old.is_some_and(|b| b.paused.is_some()) && row.paused.is_none() {
                op.emit(Event::BudgetResumed { handler });
                crate::pipelines::budgets_lifted(op)?;
            }
            Ok(row)
        })
    }

    /// The user: pause `handler`'s subtree by hand, as a reached budget
    /// would (no new model calls, agent starts or delegations; calls in
    /// flight finish) until `resume` ([`Service::budget_resume`]); new
    /// limits do not lift it. `note` says why, for the log and the
    /// listings.
    pub fn budget_pause(
        &self,
        who: Principal,
        handler: HandlerId,
        note: Option<&str>,
    ) -> Result<PauseReport> {
        let note = note.map(str::trim).filter(|n| !n.is_empty());
        if let Some(n) = note
            && (n.chars().count() > 500 || n.chars().any(char::is_control))
        {
            return Err(ServiceError::invalid(format!(
                "failed to pause handler {handler}: the note must be one line of at most 500 characters"
            )));
        }
        self.write(|op| {
            require_user(op.tx, who, &format!("pause handler {handler}"))?;
            let rows = op.tx.handler_subtree(handler)?;
            if rows.is_empty() {
                return Err(ServiceError::not_found("handler", handler));
            }
            let ids: Vec<HandlerId> = rows.iter().map(|r| r.id).collect();
            let live_agents = op.tx.live_agents_of(&ids)?.len() as i64;
            let old = op.tx.budget_of(handler)?;
            if old.as_ref().is_some_and(|b| b.paused.is_some()) {
                return Ok(PauseReport {
                    handler,
                    paused: false,
                    live_agents,
                });
            }
            let reason = match note {
                Some(n) => format!("{PAUSED_BY_USER}: {n}"),
                None => PAUSED_BY_USER.to_owned(),
            };
            let row = match old {
                Some(mut b) => {
                    b.paused = Some(BudgetPause {
                        at: op.now,
                        reason: reason.clone(),
                    });
                    b
                }
                None => BudgetRow {
                    handler,
                    limits: BudgetLimits::default(),
                    set_at: op.now,
                    carved_by: None,
                    paused: Some(BudgetPause {
                        at: op.now,
                        reason: reason.clone(),
                    }),
                    warned: 0,
                },
            };
            op.tx.set_budget(&row)?;
            op.record(
                Record::new(
                    EventKind::BudgetPaused,
                    Some(handler),
                    format!("{reason}; subtree paused"),
                )
                .data(serde_json::json!({ "reason": reason, "by_hand": true })),
            );
            Ok(PauseReport {
                handler,
                paused: true,
                live_agents,
            })
        })
    }

    /// The user: continue the paused budgets of `handler`'s subtree (itself
    /// included) as they are; pending work is scheduled again.
    pub fn budget_resume(&self, who: Principal, handler: HandlerId) -> Result<ResumeReport> {
        self.write(|op| {
            require_user(op.tx, who, &format!("resume handler {handler}"))?;
            let rows = op.tx.handler_subtree(handler)?;
            if rows.is_empty() {
                return Err(ServiceError::not_found("handler", handler));
            }
            let mut resumed = Vec::new();
            for r in rows {
                if let Some(mut b) = op.tx.budget_of(r.id)?
                    && b.paused.is_some()
                {
                    b.paused = None;
                    if b.limits.is_empty() {
                        // It held only a pause by hand.
                        op.tx.delete_budget(r.id)?;
                    } else {
                        op.tx.set_budget(&b)?;
                    }
                    resumed.push(r.id);
                }
            }
            let mut paused_above = Vec::new();
            let boss = op.tx.handler(handler)?.and_then(|r| r.boss);
            if let Some(boss) = boss {
                for r in ledger::chain(op.tx, boss)? {
                    if op.tx.budget_of(r.id)?.is_some_and(|b| b.paused.is_some()) {
                        paused_above.push(r.id);
                    }
                }
            }
            if !resumed.is_empty() {
                op.emit(Event::BudgetResumed { handler });
                crate::pipelines::budgets_lifted(op)?;
            }
            Ok(ResumeReport {
                resumed,
                paused_above,
            })
        })
    }

    /// The user: the budgets of `root`'s subtree (default: everything) as
    /// a tree of subtree spend against each limit.
    pub fn budget_show(&self, who: Principal, root: Option<HandlerId>) -> Result<BudgetNode> {
        let now = self.clock.now();
        self.read(|tx| {
            require_user(tx, who, "read budgets")?;
            let (root, rows) = metering::subtree_of(tx, root)?;
            let ids: Vec<HandlerId> = rows.iter().map(|r| r.id).collect();
            let mut live: BTreeMap<HandlerId, i64> = BTreeMap::new();
            for a in tx.live_agents_of(&ids)? {
                *live.entry(a.handler).or_default() += 1;
            }
            let mut kids: BTreeMap<HandlerId, Vec<HandlerId>> = BTreeMap::new();
            let mut status = BTreeMap::new();
            for r in &rows {
                status.insert(r.id, r.status);
                if r.id != root
                    && let Some(b) = r.boss
                {
                    kids.entry(b).or_default().push(r.id);
                }
            }
            let mut seen = std::collections::BTreeSet::new();
            node(tx, root, &kids, &status, &live, now, &mut seen)
        })
    }

    /// Whether a tool call by `who` must be charged, i.e. whether
    /// [`Service::tool_call_charge`] would write (a tool-call or
    /// wall-clock limit on the caller's chain). A read only: the MCP layer
    /// runs a read tool inline on its async worker when nothing is due and
    /// sends the call to the blocking pool when the charge must be written.
    pub fn tool_call_charge_due(&self, who: Principal) -> Result<bool> {
        let now = self.clock.now();
        self.read(|tx| {
            let handler = authenticate(tx, who)?.require_handler("call a tool")?.id;
            tool_call_charge_due(tx, handler, now)
        })
    }

    /// Agency's MCP tools: charge one tool call of the calling agent to its
    /// handler's subtree and every budget above it. `Ok(Some(notice))`: an
    /// 80% notice to add to the tool's result. Refused (`quota`) at the
    /// tool-call limit.
    pub fn tool_call_charge(&self, who: Principal) -> Result<Option<String>> {
        if !self.tool_call_charge_due(who)? {
            return Ok(None);
        }
        self.write(|op| {
            let handler = authenticate(op.tx, who)?.require_handler("call a tool")?.id;
            charge_tool_call(op, handler)
        })?
    }
}

/// The first consumption limit of `b` that the spend already reached
/// (as the ledger would find it at the next call), said as a pause reason.
fn reached_at_set(b: &BudgetRow, spent: &BudgetSpend, now: Timestamp) -> Option<String> {
    Kind::ALL
        .into_iter()
        .filter(|k| k.pauses())
        .find_map(|kind| {
            let limit = kind.limit(&b.limits)?;
            if kind == Kind::WallClock {
                let used = elapsed(b, now);
                return (used >= limit)
                    .then(|| format!("{} limit {limit}, elapsed {used}", kind.name()));
            }
            let used = kind.spent(spent)?;
            (used >= limit).then(|| {
                format!(
                    "{} limit {limit}, spent {used} (set at or under what was spent)",
                    kind.name()
                )
            })
        })
}

fn node(
    tx: &mut dyn Tx,
    h: HandlerId,
    kids: &BTreeMap<HandlerId, Vec<HandlerId>>,
    status: &BTreeMap<HandlerId, HandlerStatus>,
    live: &BTreeMap<HandlerId, i64>,
    now: Timestamp,
    seen: &mut std::collections::BTreeSet<HandlerId>,
) -> Result<BudgetNode> {
    seen.insert(h);
    let mut children = Vec::new();
    let mut live_agents = live.get(&h).copied().unwrap_or(0);
    for &c in kids.get(&h).map(Vec::as_slice).unwrap_or(&[]) {
        if seen.contains(&c) {
            continue; // a corrupt boss cycle stays finite
        }
        let child = node(tx, c, kids, status, live, now, seen)?;
        live_agents += child.live_agents;
        children.push(child);
    }
    let budget = tx.budget_of(h)?;
    Ok(BudgetNode {
        handler: h,
        status: status.get(&h).copied().unwrap_or(HandlerStatus::Active),
        limits: budget.as_ref().map(|b| b.limits),
        spent: tx.budget_spend_of(h)?,
        live_agents,
        elapsed_ms: budget.as_ref().map(|b| elapsed(b, now)),
        paused: budget.as_ref().and_then(|b| b.paused.clone()),
        carved_by: budget.as_ref().and_then(|b| b.carved_by),
        children,
    })
}

impl System {
    /// Daemon (`agency status`): every paused budget, oldest pause first.
    pub fn budget_pauses(&self) -> Result<Vec<PausedView>> {
        self.read(|tx| Ok(tx.paused_budgets()?.iter().filter_map(paused_of).collect()))
    }

    /// Daemon: whether a paused budget (on the handler or above it) keeps
    /// agents of `handler` from starting; the budget's handler if so.
    pub fn budget_paused(&self, handler: HandlerId) -> Result<Option<HandlerId>> {
        self.read(|tx| paused_by(tx, handler))
    }

    /// The daemon at start: no call is in flight, so a reservation left by
    /// a previous daemon that died mid-call would only hold budget forever.
    pub fn budget_clear_reservations(&self) -> Result<usize> {
        self.write(|op| Ok(op.tx.clear_budget_reservations()?))
    }
}
