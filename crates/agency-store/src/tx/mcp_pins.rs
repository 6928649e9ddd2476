//! [`McpPinTx`]: pinned MCP tool definitions and the changes awaiting review.

use agency_core::Timestamp;

use super::R;
use crate::mcp_pins::{McpPinChangeRow, McpPinRow, PinChangeStatus};

/// Pinned MCP tool definitions and the changes awaiting review.
pub trait McpPinTx {
    /// Whether the server's first complete `tools/list` has ended.
    fn mcp_pin_sealed(&mut self, server: &str) -> R<bool>;
    /// Record that the first complete listing ended (kept if already set).
    fn mcp_pin_seal(&mut self, server: &str, at: Timestamp) -> R<()>;
    fn mcp_pin(&mut self, server: &str, tool: &str) -> R<Option<McpPinRow>>;
    /// Insert or replace the pin of (server, tool).
    fn put_mcp_pin(&mut self, pin: &McpPinRow) -> R<()>;
    /// Every pin (of one server, or all), ordered by server and tool.
    fn mcp_pins(&mut self, server: Option<&str>) -> R<Vec<McpPinRow>>;
    fn insert_mcp_pin_change(&mut self, change: &McpPinChangeRow) -> R<()>;
    fn mcp_pin_change(&mut self, id: &str) -> R<Option<McpPinChangeRow>>;
    /// The latest pending or rejected change of a tool to `new_hash`,
    /// measured against the approved `old_hash`.
    fn mcp_pin_open_change(
        &mut self,
        server: &str,
        tool: &str,
        new_hash: &str,
        old_hash: Option<&str>,
    ) -> R<Option<McpPinChangeRow>>;
    /// Changes oldest first, at most `limit`, optionally of one status
    /// and of one (server, tool).
    fn mcp_pin_changes(
        &mut self,
        status: Option<PinChangeStatus>,
        tool: Option<(&str, &str)>,
        limit: usize,
    ) -> R<Vec<McpPinChangeRow>>;
    fn set_mcp_pin_change_status(
        &mut self,
        id: &str,
        status: PinChangeStatus,
        at: Timestamp,
    ) -> R<()>;
}
