//! Rows of the pinned tool definitions of extra MCP servers
//! (migration 15). The rules — what is pinned when, what counts as a
//! change, who approves — are the service's (`agency-service`'s
//! `mcp_pins.rs`); these are plain rows.

pub use agency_core::status::PinChangeStatus;
use agency_core::{HandlerId, Timestamp};

/// One tool of one server as Agency last saw it, and the definition the
/// user (or the first listing) approved. Definitions are canonical JSON
/// text; hashes are BLAKE3 hex of that text.
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// A definition of a tool that differs from its approved one, as put to
/// the user.
#[derive(Debug, Clone, PartialEq, Eq)]
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
