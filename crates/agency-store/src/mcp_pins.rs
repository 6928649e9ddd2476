//! Rows of the pinned tool definitions of extra MCP servers
//! (migration 15). The rules — what is pinned when, what counts as a
//! change, who approves — are the service's (`agency-service`'s
//! `mcp_pins.rs`); these are plain rows.

use agency_core::{HandlerId, Timestamp};
use serde::{Deserialize, Serialize};

/// One tool of one server as Agency last saw it, and the definition the
/// user (or the first listing) approved. Definitions are canonical JSON
/// text; hashes are BLAKE3 hex of that text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpPinRow {
    pub server: String,
    pub tool: String,
    /// `None`: never approved (a tool that appeared after the first
    /// listing, waiting for the user).
    pub approved_hash: Option<String>,
    pub approved_def: Option<String>,
    pub approved_at: Option<Timestamp>,
    /// The definition of the latest listing that showed the tool.
    pub seen_hash: String,
    pub seen_at: Timestamp,
}

/// Where a change stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PinChangeStatus {
    /// Waiting for the user; the tool is quarantined meanwhile.
    Pending,
    /// The user approved it: its definition is the pinned one (or was,
    /// until a later approval).
    Approved,
    /// The user refused it: the tool stays quarantined while the server
    /// presents this definition.
    Rejected,
    /// Another change of the same tool was approved first.
    Superseded,
}

impl PinChangeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PinChangeStatus::Pending => "pending",
            PinChangeStatus::Approved => "approved",
            PinChangeStatus::Rejected => "rejected",
            PinChangeStatus::Superseded => "superseded",
        }
    }

    pub fn parse(s: &str) -> Option<PinChangeStatus> {
        Some(match s {
            "pending" => PinChangeStatus::Pending,
            "approved" => PinChangeStatus::Approved,
            "rejected" => PinChangeStatus::Rejected,
            "superseded" => PinChangeStatus::Superseded,
            _ => return None,
        })
    }
}

/// A definition of a tool that differs from its approved one, as put to
/// the user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpPinChangeRow {
    /// A UUID: what `agency mcp approve` (and later `agency approve`) names.
    pub id: String,
    pub server: String,
    pub tool: String,
    /// The approved definition it replaces (`None`: a new tool).
    pub old_hash: Option<String>,
    pub old_def: Option<String>,
    pub new_hash: String,
    pub new_def: String,
    pub seen_at: Timestamp,
    /// The handler whose agent's listing showed it first.
    pub seen_by: Option<HandlerId>,
    pub status: PinChangeStatus,
    pub decided_at: Option<Timestamp>,
}
