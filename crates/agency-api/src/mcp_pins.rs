//! Pins of extra MCP servers' tool definitions, and their changes.

use agency_core::status::PinChangeStatus;
use agency_core::{HandlerId, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One change as the user sees it: both definitions, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpPinChange {
    pub id: String,
    pub server: String,
    pub tool: String,
    pub status: PinChangeStatus,
    /// The approved definition it would replace (`None`: a new tool).
    pub old: Option<Value>,
    pub new: Value,
    pub seen_at: Timestamp,
    pub seen_by: Option<HandlerId>,
    pub decided_at: Option<Timestamp>,
}

/// One tool's pin as the user sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpPinView {
    pub server: String,
    pub tool: String,
    pub state: PinState,
    pub approved_hash: Option<String>,
    pub approved_at: Option<Timestamp>,
    pub seen_hash: String,
    pub seen_at: Timestamp,
}

/// `agency mcp pins`: every pinned tool and every change still waiting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpPinsReport {
    pub pins: Vec<McpPinView>,
    pub pending: Vec<McpPinChange>,
}

/// Whether a pinned tool is usable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PinState {
    /// The definition the server presents is the approved one.
    Approved,
    /// It presents another: the tool is hidden until the user decides.
    Quarantined,
}

impl std::fmt::Display for PinState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(match self {
            PinState::Approved => "approved",
            PinState::Quarantined => "quarantined",
        })
    }
}
