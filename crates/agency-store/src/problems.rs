//! Rows of the problems Agency found (migration 25): one row per episode
//! of a stuck signal, open until the condition clears. What counts as a
//! problem and when it clears is the service's (`problems/`); these are
//! plain rows.

use agency_core::{AgentId, HandlerId, Timestamp};

/// One episode of a problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProblemRow {
    /// Assigned by the store.
    pub id: i64,
    /// `stuck`, `tool_loop`, `retry_storm`, `budget_near`,
    /// `approval_stale`, `run_gone`, `mail_refused`.
    pub kind: String,
    /// What makes two detections the same episode (at most one open row
    /// per key).
    pub key: String,
    pub handler: Option<HandlerId>,
    pub agent: Option<AgentId>,
    pub summary: String,
    /// JSON object: the facts it was found on.
    pub detail: String,
    pub opened_at: Timestamp,
    /// The latest detection of this episode.
    pub seen_at: Timestamp,
    pub closed_at: Option<Timestamp>,
}
