//! Budgets and costs as clients see them.

use agency_core::HandlerId;
use agency_core::Timestamp;
use agency_core::status::HandlerStatus;
use agency_core::usage::{BudgetLimits, BudgetPause, BudgetSpend, UsageTotals};
use serde::{Deserialize, Serialize};

/// What `agency resume` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumeReport {
    /// Budgets in the handler's subtree (itself included) that were paused
    /// and no longer are.
    pub resumed: Vec<HandlerId>,
    /// Budgets above it that still pause it: resume those too.
    pub paused_above: Vec<HandlerId>,
}

/// What `agency pause` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseReport {
    pub handler: HandlerId,
    /// False when the handler's own budget was already paused (by hand or
    /// by a reached limit): nothing changed.
    pub paused: bool,
    /// Agents live in the subtree now: each finishes its model call in
    /// flight and gets no other.
    pub live_agents: i64,
}

/// One handler in `agency budget show`: its limits (if any) against its
/// subtree's running totals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetNode {
    pub handler: HandlerId,
    pub status: HandlerStatus,
    /// `None`: no budget set on this handler (an ancestor's may still hold).
    pub limits: Option<BudgetLimits>,
    /// The subtree's spend and model calls in flight (at their worst case).
    pub spent: BudgetSpend,
    /// Agents live in the subtree now.
    pub live_agents: i64,
    /// Milliseconds since the budget was set (with a budget).
    pub elapsed_ms: Option<i64>,
    /// Set while a reached limit pauses the subtree.
    pub paused: Option<BudgetPause>,
    /// The boss that carved the budget on delegation; `None`: the user.
    pub carved_by: Option<HandlerId>,
    pub children: Vec<BudgetNode>,
}

/// One handler in `agency cost`: its own calls and its subtree's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CostNode {
    pub handler: HandlerId,
    pub status: HandlerStatus,
    /// The calls of the handler's own agents.
    #[serde(rename = "self")]
    pub own: UsageTotals,
    /// Its own and every underling's, transitively.
    pub subtree: UsageTotals,
    pub children: Vec<CostNode>,
}

/// One handler's costs as a card shows them, read without walking its
/// subtree: its own metered calls and the subtree's running totals that
/// the budget ledger keeps with every charge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandlerCost {
    pub handler: HandlerId,
    /// The calls of the handler's own agents.
    pub own: UsageTotals,
    /// The subtree's settled spend (`tokens` of every kind, `micro_usd`,
    /// `calls`, `tool_calls`…) and what is reserved by calls in flight.
    pub subtree: BudgetSpend,
    /// The budget set on this handler, if any.
    pub limits: Option<BudgetLimits>,
}

/// The budget set on one handler.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    pub handler: HandlerId,
    pub limits: BudgetLimits,
    pub set_at: Timestamp,
    /// The boss that carved it out of its own budget on delegation;
    /// `None`: the user set it.
    #[serde(default)]
    pub carved_by: Option<HandlerId>,
    /// Set when a limit was reached, until a limit is raised or the user
    /// resumes the subtree.
    #[serde(default)]
    pub paused: Option<BudgetPause>,
    /// One bit per kind whose 80% notice was shown to an agent.
    #[serde(default)]
    pub warned: i64,
}
