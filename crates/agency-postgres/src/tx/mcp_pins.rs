//! [`McpPinTx`] on PostgreSQL.
#![allow(unused_variables)]

use agency_core::Timestamp;
use agency_store::mcp_pins::{McpPinChangeRow, McpPinRow, PinChangeStatus};
use agency_store::tx::McpPinTx;
use agency_store::tx::R;

use crate::PgTx;
use crate::convert::unported;

impl McpPinTx for PgTx<'_> {
    fn mcp_pin_sealed(&mut self, server: &str) -> R<bool> {
        Err(unported("mcp_pin_sealed"))
    }
    fn mcp_pin_seal(&mut self, server: &str, at: Timestamp) -> R<()> {
        Err(unported("mcp_pin_seal"))
    }
    fn mcp_pin(&mut self, server: &str, tool: &str) -> R<Option<McpPinRow>> {
        Err(unported("mcp_pin"))
    }
    fn put_mcp_pin(&mut self, pin: &McpPinRow) -> R<()> {
        Err(unported("put_mcp_pin"))
    }
    fn mcp_pins(&mut self, server: Option<&str>) -> R<Vec<McpPinRow>> {
        Err(unported("mcp_pins"))
    }
    fn insert_mcp_pin_change(&mut self, change: &McpPinChangeRow) -> R<()> {
        Err(unported("insert_mcp_pin_change"))
    }
    fn mcp_pin_change(&mut self, id: &str) -> R<Option<McpPinChangeRow>> {
        Err(unported("mcp_pin_change"))
    }
    fn mcp_pin_open_change(
        &mut self,
        server: &str,
        tool: &str,
        new_hash: &str,
        old_hash: Option<&str>,
    ) -> R<Option<McpPinChangeRow>> {
        Err(unported("mcp_pin_open_change"))
    }
    fn mcp_pin_changes(
        &mut self,
        status: Option<PinChangeStatus>,
        tool: Option<(&str, &str)>,
        limit: usize,
    ) -> R<Vec<McpPinChangeRow>> {
        Err(unported("mcp_pin_changes"))
    }
    fn set_mcp_pin_change_status(
        &mut self,
        id: &str,
        status: PinChangeStatus,
        at: Timestamp,
    ) -> R<()> {
        Err(unported("set_mcp_pin_change_status"))
    }
}
