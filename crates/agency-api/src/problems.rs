//! Problems on the wire: what `agency problems`, `GET /v1/problems` and
//! the dashboard's "needs you" show of the stuck signals Agency found.

use agency_core::{AgentId, HandlerId, Timestamp};
use serde::{Deserialize, Serialize};

use crate::open_enum::open_enum;

open_enum! {
    /// Which signal it is.
    pub enum ProblemKind {
        /// A handler with work and no progress for `[watch] stuck_after_minutes`.
        Stuck = "stuck",
        /// One agent called the same tool with the same arguments three
        /// times in a row.
        ToolLoop = "tool_loop",
        /// Five or more failed model calls of one agent within a minute.
        RetryStorm = "retry_storm",
        /// A subtree used 80% or more of a limit of its budget.
        BudgetNear = "budget_near",
        /// An approval pending longer than `[watch] approval_stale_after_minutes`.
        ApprovalStale = "approval_stale",
        /// A run recorded as live whose process is gone.
        RunGone = "run_gone",
        /// Mail refused for lack of a connection.
        MailRefused = "mail_refused",
    }
}

/// One episode of a problem: open from its first detection until its
/// condition clears.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    pub id: i64,
    pub kind: ProblemKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handler: Option<HandlerId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handler_title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentId>,
    /// What was found, in one line, and what to do.
    pub summary: String,
    /// The facts it was found on (per kind).
    pub detail: serde_json::Value,
    pub opened_at: Timestamp,
    /// The latest detection.
    pub seen_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_at: Option<Timestamp>,
}
