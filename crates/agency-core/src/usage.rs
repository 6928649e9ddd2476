//! Counts of what work consumed and what a budget allows: model tokens,
//! calls, cost, and the limits and running spend of a handler subtree.

use serde::{Deserialize, Serialize};

use crate::Timestamp;

/// Tokens of one call or a sum of calls. Input excludes cached input:
/// cache reads and cache writes are counted apart, as they are priced apart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_read_tokens: i64,
    pub cache_write_tokens: i64,
}

impl TokenUsage {
    /// Every token of every kind.
    pub fn total(&self) -> i64 {
        self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens
    }

    pub fn add(&mut self, other: &TokenUsage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
    }
}

/// The sum of a handler's own model calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageTotals {
    pub calls: i64,
    pub usage: TokenUsage,
    /// The priced calls' cost: calls counted in `unpriced_calls` add 0.
    pub cost_micro_usd: i64,
    /// Calls of a model without a price: their cost is unknown, not 0.
    #[serde(default)]
    pub unpriced_calls: i64,
    /// Calls charged at their reservation (final usage never read).
    #[serde(default)]
    pub estimated_calls: i64,
}

impl UsageTotals {
    pub fn add(&mut self, other: &UsageTotals) {
        self.calls += other.calls;
        self.usage.add(&other.usage);
        self.cost_micro_usd += other.cost_micro_usd;
        self.unpriced_calls += other.unpriced_calls;
        self.estimated_calls += other.estimated_calls;
    }
}

/// Limits on a handler's subtree; `None`: no limit of
/// that kind. A limit left out of a JSON body is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BudgetLimits {
    /// Tokens of every kind (input, output, cache reads and writes).
    pub tokens: Option<i64>,
    pub micro_usd: Option<i64>,
    /// Model calls.
    pub calls: Option<i64>,
    /// Tool calls (Agency's MCP tools and every tool admitted by the daemon).
    pub tool_calls: Option<i64>,
    /// Agents started for handlers of the subtree.
    pub spawns: Option<i64>,
    /// Agents live at once in the subtree.
    pub live_agents: Option<i64>,
    /// Delegations to handlers below the budget's handler (a handler
    /// delegated to again counts again).
    pub handlers: Option<i64>,
    /// Levels of handlers below the budget's handler.
    pub depth: Option<i64>,
    /// Milliseconds of wall-clock time since the budget was set.
    pub wall_clock_ms: Option<i64>,
}

impl BudgetLimits {
    pub fn is_empty(&self) -> bool {
        self == &BudgetLimits::default()
    }
}

/// Why and since when a budget's subtree is paused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetPause {
    pub at: Timestamp,
    pub reason: String,
}

/// The ledger's running totals of one handler's whole subtree: what was
/// spent and what model calls in flight hold at their worst case.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetSpend {
    pub tokens: i64,
    pub micro_usd: i64,
    pub calls: i64,
    pub tool_calls: i64,
    pub spawns: i64,
    pub handlers: i64,
    pub reserved_tokens: i64,
    pub reserved_micro_usd: i64,
    pub reserved_calls: i64,
}
