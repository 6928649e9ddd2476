//! The budget ledger (DESIGN §6 "budgets are a ledger,
//! not a counter"): every charge — a model call's reservation and its
//! settlement, a tool call, an agent spawn, a delegation — is checked
//! against the budget of the acting handler and of every ancestor, and
//! added to the running totals (`budget_spend`) of the handler and every
//! ancestor, in the one write transaction of the operation it guards. A
//! check therefore reads one totals row per budget on the chain instead of
//! summing the subtree.
//!
//! Two kinds of limit:
//! - *Consumption* (tokens, cost, model calls, tool calls, spawns,
//!   wall-clock time): when the subtree's settled spend reaches the limit,
//!   the budget **pauses** its subtree: no new model calls, no spawns, no
//!   delegations, until the user raises a limit or resumes it (calls in
//!   flight finish and settle). The boss that carved the budget, or the
//!   user, gets a mail. A call whose worst case merely does not fit what
//!   is left is refused without pausing.
//! - *Structure* (handlers, delegation depth, live agents): the delegation
//!   or spawn that would pass it is refused; nothing pauses.
//!
//! Tool calls are charged but not stopped by a pause (only by the
//! tool-call limit itself), so a paused agent can still save its state.

use crate::event_log::Record;
use agency_api::EventKind;
use std::collections::{BTreeSet, HashMap};

use agency_core::{AgentId, HandlerId, MailTarget, Timestamp};
use agency_store::{BudgetLimits, BudgetPause, BudgetRow, BudgetSpend, HandlerRow, Tx};

use crate::Result;
use crate::error::ServiceError;
use crate::service::{Caller, Op};

/// The kinds of limit, in the order they are checked and shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Tokens,
    Usd,
    Calls,
    ToolCalls,
    Spawns,
    LiveAgents,
    Handlers,
    Depth,
    WallClock,
}

impl Kind {
    pub const ALL: [Kind; 9] = [
        Kind::Tokens,
        Kind::Usd,
        Kind::Calls,
        Kind::ToolCalls,
        Kind::Spawns,
        Kind::LiveAgents,
        Kind::Handlers,
        Kind::Depth,
        Kind::WallClock,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Tokens => "tokens",
            Kind::Usd => "micro-USD",
            Kind::Calls => "model calls",
            Kind::ToolCalls => "tool calls",
            Kind::Spawns => "agent spawns",
            Kind::LiveAgents => "live agents",
            Kind::Handlers => "handlers",
            Kind::Depth => "delegation depth",
            Kind::WallClock => "wall-clock milliseconds",
        }
    }

    /// The `agency budget set` option that sets it.
    pub fn flag(self) -> &'static str {
        match self {
            Kind::Tokens => "--tokens",
            Kind::Usd => "--usd",
            Kind::Calls => "--calls",
            Kind::ToolCalls => "--tool-calls",
            Kind::Spawns => "--spawns",
            Kind::LiveAgents => "--live-agents",
            Kind::Handlers => "--handlers",
            Kind::Depth => "--depth",
            Kind::WallClock => "--wall-clock",
        }
    }

    /// The bit of `BudgetRow::warned` for its 80% notice.
    pub fn bit(self) -> i64 {
        1 << (self as i64)
    }

    pub fn limit(self, l: &BudgetLimits) -> Option<i64> {
        match self {
            Kind::Tokens => l.tokens,
            Kind::Usd => l.micro_usd,
            Kind::Calls => l.calls,
            Kind::ToolCalls => l.tool_calls,
            Kind::Spawns => l.spawns,
            Kind::LiveAgents => l.live_agents,
            Kind::Handlers => l.handlers,
            Kind::Depth => l.depth,
            Kind::WallClock => l.wall_clock_ms,
        }
    }

    /// Consumption kinds pause the subtree when spent; structure kinds
    /// only refuse the action that would pass them.
    pub fn pauses(self) -> bool {
        !matches!(self, Kind::LiveAgents | Kind::Handlers | Kind::Depth)
    }

    /// Settled spend of an additive kind (None for the others).
    pub fn spent(self, s: &BudgetSpend) -> Option<i64> {
        match self {
            Kind::Tokens => Some(s.tokens),
            Kind::Usd => Some(s.micro_usd),
            Kind::Calls => Some(s.calls),
            Kind::ToolCalls => Some(s.tool_calls),
            Kind::Spawns => Some(s.spawns),
            Kind::Handlers => Some(s.handlers),
            Kind::LiveAgents | Kind::Depth | Kind::WallClock => None,
        }
    }

    /// What model calls in flight hold of it.
    pub fn in_flight(self, s: &BudgetSpend) -> i64 {
        match self {
            Kind::Tokens => s.reserved_tokens,
            Kind::Usd => s.reserved_micro_usd,
            Kind::Calls => s.reserved_calls,
            _ => 0,
        }
    }
}

/// What one action adds to the ledger, and what it needs to fit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Charge {
    /// Added to the running totals once admitted.
    pub delta: BudgetSpend,
    /// A spawn: one more live agent in the subtree.
    pub spawn: bool,
    /// A delegation: one more handler one level below the acting one.
    pub delegation: bool,
    /// Stopped by a paused budget (model calls, spawns, delegations);
    /// tool calls are not, so a paused agent can save its state.
    pub blocked_by_pause: bool,
}

/// A handler and every ancestor, nearest first (finite even if a corrupt
/// boss column made a cycle), read in one statement.
pub(crate) fn chain(tx: &mut dyn Tx, handler: HandlerId) -> Result<Vec<HandlerRow>> {
    let rows = tx.handler_chain(handler)?;
    if rows.is_empty() {
        return Err(ServiceError::not_found("handler", handler));
    }
    complete(rows, BTreeSet::new())
}

/// [`chain`] from a handler's row already read in this transaction.
pub(crate) fn chain_from(tx: &mut dyn Tx, first: HandlerRow) -> Result<Vec<HandlerRow>> {
    let Some(boss) = first.boss else {
        return Ok(vec![first]);
    };
    let rows = tx.handler_chain(boss)?;
    if rows.is_empty() {
        return Err(ServiceError::not_found("handler", boss));
    }
    let seen = BTreeSet::from([first.id]);
    let mut out = vec![first];
    out.extend(complete(rows, seen)?);
    Ok(out)
}

/// A chain as the store gave it, cut where a handler of `seen` comes again
/// (a cycle); a boss missing from the store is an error, as it was when
/// the chain was walked a row at a time.
fn complete(rows: Vec<HandlerRow>, mut seen: BTreeSet<HandlerId>) -> Result<Vec<HandlerRow>> {
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        if !seen.insert(row.id) {
            return Ok(out);
        }
        out.push(row);
    }
    if let Some(missing) = out.last().and_then(|r| r.boss)
        && !seen.contains(&missing)
    {
        return Err(ServiceError::not_found("handler", missing));
    }
    Ok(out)
}

/// A budget on the chain with its subtree's totals; `below` is how many
/// levels the acting handler is below the budget's handler.
pub(crate) struct Held {
    pub budget: BudgetRow,
    pub spend: BudgetSpend,
    pub below: i64,
}

pub(crate) fn held(tx: &mut dyn Tx, rows: &[HandlerRow]) -> Result<Vec<Held>> {
    held_by(tx, rows.iter().map(|r| r.id))
}

/// [`held`] of a chain given by its handlers' ids, the acting one first.
pub(crate) fn held_by(
    tx: &mut dyn Tx,
    chain: impl IntoIterator<Item = HandlerId>,
) -> Result<Vec<Held>> {
    let ids: Vec<HandlerId> = chain.into_iter().collect();
    // One read for the whole chain; kept in the chain's order.
    let mut found: HashMap<HandlerId, (BudgetRow, BudgetSpend)> = tx
        .budgets_with_spend(&ids)?
        .into_iter()
        .map(|(b, s)| (b.handler, (b, s)))
        .collect();
    let mut out = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        // A row without limits still holds while paused by hand.
        if let Some((budget, spend)) = found.remove(id)
            && (!budget.limits.is_empty() || budget.paused.is_some())
        {
            out.push(Held {
                budget,
                spend,
                below: i as i64,
            });
        }
    }
    Ok(out)
}

/// Milliseconds since the budget was set.
pub(crate) fn elapsed(b: &BudgetRow, now: Timestamp) -> i64 {
    now.0.saturating_sub(b.set_at.0).max(0)
}

/// Why an action was refused: the error for the caller, and the budget to
/// pause when its limit is reached (not merely too small for this action).
pub(crate) struct Refusal {
    pub error: ServiceError,
    pub pause: Option<(HandlerId, String)>,
}

/// Check `charge` for `handler` against every budget on its chain and,
/// if all have room, add it to the running totals of the handler and every
/// ancestor. `Ok(Err(refusal))` when refused: the caller records the pause
/// with [`refuse`] and commits, so the pause and its mail are kept.
pub(crate) fn admit(
    op: &mut Op<'_>,
    handler: HandlerId,
    charge: &Charge,
    action: &str,
) -> Result<std::result::Result<(), Refusal>> {
    let rows = chain(op.tx, handler)?;
    admit_on(op, &rows, charge, action)
}

/// [`admit`] for the chain `rows` (the acting handler first), already read
/// in this transaction.
pub(crate) fn admit_on(
    op: &mut Op<'_>,
    rows: &[HandlerRow],
    charge: &Charge,
    action: &str,
) -> Result<std::result::Result<(), Refusal>> {
    for h in held(op.tx, rows)? {
        if let Some(r) = check(op, &h, charge, action)? {
            return Ok(Err(r));
        }
    }
    let ids: Vec<HandlerId> = rows.iter().map(|r| r.id).collect();
    if charge.delta != BudgetSpend::default() {
        op.tx.budget_spend_add(&ids, &charge.delta)?;
    }
    Ok(Ok(()))
}

fn check(op: &mut Op<'_>, h: &Held, charge: &Charge, action: &str) -> Result<Option<Refusal>> {
    let holder = h.budget.handler;
    if charge.blocked_by_pause
        && let Some(p) = &h.budget.paused
    {
        return Ok(Some(Refusal {
            error: ServiceError::Quota(format!(
                "failed to {action}: the subtree of handler {holder} is paused by its budget ({}); \
                 save your state and stop; the user continues it by raising the limit \
                 (agency budget set {holder} …) or with agency resume {holder}",
                p.reason
            )),
            pause: None,
        }));
    }
    for kind in Kind::ALL {
        let Some(limit) = kind.limit(&h.budget.limits) else {
            continue;
        };
        let (spent, in_flight, this) = match kind {
            Kind::WallClock => {
                if !charge.blocked_by_pause {
                    continue;
                }
                (elapsed(&h.budget, op.now), 0, 0)
            }
            Kind::Depth => {
                if !charge.delegation {
                    continue;
                }
                (h.below, 0, 1)
            }
            Kind::LiveAgents => {
                if !charge.spawn {
                    continue;
                }
                (live_in_subtree(op.tx, holder)?, 0, 1)
            }
            _ => {
                let this = match kind {
                    Kind::Tokens => charge.delta.reserved_tokens + charge.delta.tokens,
                    Kind::Usd => charge.delta.reserved_micro_usd + charge.delta.micro_usd,
                    Kind::Calls => charge.delta.reserved_calls + charge.delta.calls,
                    Kind::ToolCalls => charge.delta.tool_calls,
                    Kind::Spawns => charge.delta.spawns,
                    Kind::Handlers => charge.delta.handlers,
                    _ => 0,
                };
                if this <= 0 {
                    continue;
                }
                let spent = kind.spent(&h.spend).unwrap_or(0);
                (spent, kind.in_flight(&h.spend), this)
            }
        };
        let over = match kind {
            Kind::WallClock => spent >= limit,
            _ => spent.saturating_add(in_flight).saturating_add(this) > limit,
        };
        if !over {
            continue;
        }
        // Reached (not merely too small for this action): pause.
        let reached = kind.pauses() && spent >= limit;
        let what = if kind == Kind::WallClock {
            format!("{} limit {limit}, elapsed {spent}", kind.name())
        } else if kind == Kind::Depth {
            format!(
                "{} limit {limit}: the new handler would be {} levels below it",
                kind.name(),
                spent + 1
            )
        } else {
            format!(
                "{} limit {limit}, spent {spent}, in flight {in_flight}, this needs {this}",
                kind.name()
            )
        };
        let next = if reached {
            "save your state and stop; the subtree is paused until the user raises the limit \
             or resumes it"
                .to_owned()
        } else if kind.pauses() {
            "ask for less (e.g. a smaller max_tokens), or save your state and stop; \
             ask your boss or the user to raise it"
                .to_owned()
        } else {
            "do this work yourself or with the agents you have; ask your boss or the user \
             to raise it"
                .to_owned()
        };
        return Ok(Some(Refusal {
            error: ServiceError::Quota(format!(
                "failed to {action}: budget of handler {holder} reached: {what}; {next} \
                 (agency budget set {holder} {} …)",
                kind.flag()
            )),
            pause: reached.then_some((holder, what)),
        }));
    }
    Ok(None)
}

/// Agents live in `holder`'s subtree (the store holds at most one per
/// handler). Read only for a spawn under a live-agents limit.
fn live_in_subtree(tx: &mut dyn Tx, holder: HandlerId) -> Result<i64> {
    let ids: Vec<HandlerId> = tx.handler_subtree(holder)?.iter().map(|r| r.id).collect();
    Ok(tx.live_agents_of(&ids)?.len() as i64)
}

/// Record a refusal's pause (if any) and hand back its error for the
/// caller to return after committing.
pub(crate) fn refuse(op: &mut Op<'_>, r: Refusal) -> Result<ServiceError> {
    if let Some((holder, what)) = r.pause {
        pause(op, holder, &what)?;
    }
    Ok(r.error)
}

/// Pause `holder`'s subtree (once: an already paused budget keeps its
/// first reason) and mail the boss that carved it, or the user.
pub(crate) fn pause(op: &mut Op<'_>, holder: HandlerId, what: &str) -> Result<()> {
    let Some(mut b) = op.tx.budget_of(holder)? else {
        return Ok(());
    };
    if b.paused.is_some() {
        return Ok(());
    }
    b.paused = Some(BudgetPause {
        at: op.now,
        reason: what.to_owned(),
    });
    op.tx.set_budget(&b)?;
    op.record(
        Record::new(
            EventKind::BudgetPaused,
            Some(holder),
            format!("budget reached: {what}; subtree paused"),
        )
        .data(serde_json::json!({ "reason": what, "carved_by": b.carved_by })),
    );
    let row = op
        .tx
        .handler(holder)?
        .ok_or_else(|| ServiceError::not_found("handler", holder))?;
    let to = b.carved_by.map_or(MailTarget::User, MailTarget::Handler);
    let how = match b.carved_by {
        None => format!(
            "To continue, raise the limit (agency budget set {holder} … or POST /v1/budgets/{holder}) \
             or resume it as it is (agency resume {holder}, or POST /v1/budgets/{holder}/resume)."
        ),
        Some(_) => format!(
            "You carved this budget when you delegated to it. Only the user can raise it or resume \
             the subtree (agency budget set {holder} …, agency resume {holder}): tell the user, \
             or reclaim the work (force_stop) and do it yourself."
        ),
    };
    let body = format!(
        "The budget of handler {holder} is reached: {what}.\n\nIts subtree is paused: no new \
         model calls, agent starts or delegations; calls in flight finish.\n\n{how}"
    );
    // In the paused handler's name, like any report to its boss; no agent
    // of it may be live, so the author has no agent id.
    let caller = Caller::Handler {
        row,
        agent: AgentId(uuid::Uuid::nil()),
    };
    op.notice(
        &caller,
        to,
        &format!("Budget reached: handler {holder}"),
        &body,
    );
    Ok(())
}

/// After spend was added (a settled model call): pause every budget on
/// `chain` (handler ids, the acting handler first) whose consumption limit
/// the settled spend has now reached.
pub(crate) fn pause_reached(op: &mut Op<'_>, chain: &[HandlerId]) -> Result<()> {
    for h in held_by(op.tx, chain.iter().copied())? {
        if h.budget.paused.is_some() {
            continue;
        }
        for kind in [Kind::Tokens, Kind::Usd, Kind::Calls] {
            if let (Some(limit), Some(spent)) = (kind.limit(&h.budget.limits), kind.spent(&h.spend))
                && spent >= limit
            {
                let what = format!("{} limit {limit}, spent {spent}", kind.name());
                pause(op, h.budget.handler, &what)?;
                break;
            }
        }
    }
    Ok(())
}

/// The use and the limit of `kind` on budget `b` if it is at or past 80%
/// and the agents were not told yet.
fn notice_due(
    b: &BudgetRow,
    spend: &BudgetSpend,
    kind: Kind,
    now: Timestamp,
) -> Option<(i64, i64)> {
    let limit = kind.limit(&b.limits)?;
    if limit <= 0 || b.warned & kind.bit() != 0 {
        return None;
    }
    let used = match kind {
        Kind::WallClock => elapsed(b, now),
        _ => kind.spent(spend)? + kind.in_flight(spend),
    };
    (used.saturating_mul(5) >= limit.saturating_mul(4)).then_some((used, limit))
}

/// Whether a tool call of `handler` has to take the write path of
/// [`charge_tool_call`]: a budget on its chain limits tool calls or
/// wall-clock time (the call may reach them), or owes an 80% notice.
/// Otherwise the call changes nothing a budget reads, and the durable
/// commit a charge costs is skipped on Agency's hottest path; so tool calls
/// count toward a subtree's total while a tool-call limit is above it.
pub(crate) fn tool_call_charge_due(
    tx: &mut dyn Tx,
    handler: HandlerId,
    now: Timestamp,
) -> Result<bool> {
    let rows = chain(tx, handler)?;
    for h in held(tx, &rows)? {
        let b = &h.budget;
        if Kind::ToolCalls.limit(&b.limits).is_some() || Kind::WallClock.limit(&b.limits).is_some()
        {
            return Ok(true);
        }
        if Kind::ALL
            .iter()
            .any(|&k| notice_due(b, &h.spend, k, now).is_some())
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The 80% notices due on `handler`'s chain: one line per kind of a
/// budget whose spend (with what is in flight) passed 80% of its limit
/// since its last notice; each is marked shown, so an agent reads it once
/// per crossing (raising the limit re-arms it).
pub(crate) fn notices(op: &mut Op<'_>, handler: HandlerId) -> Result<Option<String>> {
    let rows = chain(op.tx, handler)?;
    let mut lines = Vec::new();
    for h in held(op.tx, &rows)? {
        let mut b = h.budget;
        let before = b.warned;
        for kind in Kind::ALL {
            if let Some((used, limit)) = notice_due(&b, &h.spend, kind, op.now) {
                b.warned |= kind.bit();
                lines.push(format!(
                    "budget of handler {}: {} used {used} of {limit} ({} left)",
                    b.handler,
                    kind.name(),
                    (limit - used).max(0)
                ));
            }
        }
        if b.warned != before {
            op.tx.set_budget(&b)?;
        }
    }
    if lines.is_empty() {
        return Ok(None);
    }
    Ok(Some(format!(
        "[budget notice] 80% or more of a limit is used: {}. Plan to finish, and save your state \
         before it runs out: at the limit your subtree pauses.",
        lines.join("; ")
    )))
}

/// Charge one tool call of `handler` (Agency's MCP tools call this; the
/// daemon's tool-call admission calls it too, inside its own write
/// transaction, before it allows a call). `Ok(Ok(notice))`: charged, with
/// the 80% notice to show the agent if one is due. `Ok(Err(e))`: refused
/// by the tool-call limit; the pause it may have caused is recorded in
/// `op`, so the caller must commit its transaction and return `e`.
pub(crate) fn charge_tool_call(
    op: &mut Op<'_>,
    handler: HandlerId,
) -> Result<std::result::Result<Option<String>, ServiceError>> {
    let charge = Charge {
        delta: BudgetSpend {
            tool_calls: 1,
            ..BudgetSpend::default()
        },
        ..Charge::default()
    };
    match admit(op, handler, &charge, "call a tool")? {
        Ok(()) => Ok(Ok(notices(op, handler)?)),
        Err(r) => Ok(Err(refuse(op, r)?)),
    }
}

/// Admit one agent spawn for `handler` (a paused subtree, the spawn and
/// live-agent limits refuse it); same contract as [`charge_tool_call`].
pub(crate) fn charge_spawn(
    op: &mut Op<'_>,
    handler: HandlerId,
) -> Result<std::result::Result<(), ServiceError>> {
    let charge = Charge {
        delta: BudgetSpend {
            spawns: 1,
            ..BudgetSpend::default()
        },
        spawn: true,
        blocked_by_pause: true,
        ..Charge::default()
    };
    match admit(
        op,
        handler,
        &charge,
        &format!("start an agent for handler {handler}"),
    )? {
        Ok(()) => Ok(Ok(())),
        Err(r) => Ok(Err(refuse(op, r)?)),
    }
}

/// Whether a paused budget on `handler`'s chain keeps it from running
/// (the supervisor does not start agents for it).
pub(crate) fn paused_by(tx: &mut dyn Tx, handler: HandlerId) -> Result<Option<HandlerId>> {
    let rows = chain(tx, handler)?;
    for r in &rows {
        if let Some(b) = tx.budget_of(r.id)?
            && b.paused.is_some()
        {
            return Ok(Some(r.id));
        }
    }
    Ok(None)
}
