//! The web dashboard's JSON (`/dashboard/api/…`) and the login URL
//! `agency dashboard` asks the daemon for. The dashboard's pages read
//! these; the other views they show are the REST API's own types.

use agency_core::usage::{BudgetLimits, BudgetSpend, UsageTotals};
use agency_core::{HandlerId, Timestamp};
use serde::{Deserialize, Serialize};

use crate::{Approval, HandlerView, McpPinChange, PausedView, Problem, RunView};

/// `POST /v1/dashboard/login`: a one-time URL that opens a dashboard
/// session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DashboardLogin {
    pub url: String,
    /// When the URL stops working if it was not used.
    pub expires_at: Timestamp,
}

/// `GET /dashboard/api/session`: what the page needs to act.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DashboardSession {
    /// Sent back as `X-CSRF-Token` with every POST.
    pub csrf: String,
}

/// "Needs you": everything that waits for the user, one list per reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NeedsYou {
    /// Tool calls waiting for a decision, oldest first.
    pub approvals: Vec<Approval>,
    /// Handlers no agent is started for until the user writes (or stops
    /// them).
    pub stalled: Vec<StalledHandler>,
    /// Subtrees a reached budget limit paused.
    pub paused: Vec<PausedSubtree>,
    /// Recent runs that did not end normally.
    pub failed_runs: Vec<RunView>,
    /// Pipeline runs that stopped at a stage and wait for the user: failed
    /// recently, or paused by a budget.
    #[serde(default)]
    pub stopped_pipelines: Vec<crate::PipelineRunSummary>,
    /// Extra MCP servers' tool definitions that changed and are hidden
    /// until the user approves them.
    pub mcp_changes: Vec<McpPinChange>,
    /// Lessons a pipeline learned that wait for the user's approval
    /// (tool-policy and permission lessons), oldest first.
    #[serde(default)]
    pub lessons: Vec<crate::LessonView>,
    /// Open problems (`agency problems`): stuck signals, oldest first.
    pub problems: Vec<Problem>,
    /// Handler titles of the handlers named above.
    pub titles: Vec<HandlerTitle>,
}

/// One stalled handler.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StalledHandler {
    pub handler: HandlerId,
    pub title: String,
    pub reason: String,
}

/// One paused subtree: the handler whose budget is paused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PausedSubtree {
    pub handler: HandlerId,
    pub title: String,
    pub pause: PausedView,
    pub limits: Option<BudgetLimits>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandlerTitle {
    pub handler: HandlerId,
    pub title: String,
}

/// The Organisation page: a card per handler.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrgPage {
    pub cards: Vec<OrgCard>,
    /// More handlers exist than the page shows.
    pub truncated: bool,
}

/// One handler's card.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrgCard {
    pub handler: HandlerView,
    /// The live agent and when it started.
    pub live_since: Option<Timestamp>,
    /// The last event about this handler.
    pub last_activity: Option<Timestamp>,
    pub own: UsageTotals,
    /// The subtree's running totals, as its budget counts them.
    pub subtree: BudgetSpend,
    /// The budget set on this handler, if any.
    pub limits: Option<BudgetLimits>,
    /// The model its agents use (`None`: the runtime's default).
    pub model: Option<String>,
}

/// A run's page: the run, its timeline from the event log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunDetail {
    pub run: RunView,
    pub timeline: Vec<crate::Event>,
}

/// Costs per model and per day, from the metered calls' events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CostBreakdown {
    pub by_model: Vec<CostRow>,
    pub by_day: Vec<CostRow>,
    /// Model calls read to build the breakdown.
    pub calls: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CostRow {
    pub key: String,
    pub calls: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_micro_usd: i64,
}
