//! Rows of the tools of applied organisations (migration
//! 16). What a tool is and who may call it are the service's
//! (`agency-service`'s `org_tools.rs`); these are plain rows.

use agency_core::Timestamp;

/// One tool of one organisation: its definition (the Agency Model's
/// `Tool`) as JSON text and the BLAKE3 hex of that text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrgToolRow {
    /// Unique across every organisation: the MCP tool name and `tool:NAME`.
    pub name: String,
    /// The organisation (top-level agency) that defines it.
    pub org: String,
    pub def_json: String,
    pub def_hash: String,
    pub updated_at: Timestamp,
}
