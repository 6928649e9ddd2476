//! `GET /v1/agents`: the live agents and the most recent runs.

use agency_core::{AgentId, HandlerId, Timestamp};
use serde::{Deserialize, Serialize};

/// `GET /v1/agents`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentsView {
    pub live: Vec<Agent>,
    pub recent: Vec<Agent>,
}

/// One agent: a run of a handler's agent process (or a minted token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Agent {
    pub id: AgentId,
    pub handler: HandlerId,
    pub started_at: Timestamp,
    pub ended_at: Option<Timestamp>,
    /// Why it ended (exited, force_stopped, reaped, …).
    pub end_reason: Option<String>,
}
