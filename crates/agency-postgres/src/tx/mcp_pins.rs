//! [`McpPinTx`] on PostgreSQL: pinned tool definitions of extra MCP
//! servers (`mcp_pin_servers`, `mcp_pins`, `mcp_pin_changes`).

use agency_core::Timestamp;
use agency_store::StoreError;
use agency_store::mcp_pins::{McpPinChangeRow, McpPinRow, PinChangeStatus};
use agency_store::tx::McpPinTx;
use agency_store::tx::R;
use tokio_postgres::Row;

use crate::PgTx;
use crate::convert::*;

macro_rules! pin_cols {
    () => {
        "server, tool, approved_hash, approved_def, approved_at, seen_hash, seen_at"
    };
}

fn pin_row(r: &Row) -> R<McpPinRow> {
    Ok(McpPinRow {
        server: col(r, 0, "pin server")?,
        tool: col(r, 1, "pin tool")?,
        approved_hash: col(r, 2, "pin approved hash")?,
        approved_def: col(r, 3, "pin approved definition")?,
        approved_at: col_opt_ts(r, 4, "pin approved at")?,
        seen_hash: col(r, 5, "pin seen hash")?,
        seen_at: col_ts(r, 6, "pin seen at")?,
    })
}

macro_rules! change_cols {
    () => {
        "id, server, tool, old_hash, old_def, new_hash, new_def, seen_at, seen_by, status, decided_at"
    };
}

fn change_row(r: &Row) -> R<McpPinChangeRow> {
    let status: String = col(r, 9, "pin change status")?;
    Ok(McpPinChangeRow {
        id: col(r, 0, "pin change id")?,
        server: col(r, 1, "pin change server")?,
        tool: col(r, 2, "pin change tool")?,
        old_hash: col(r, 3, "pin change old hash")?,
        old_def: col(r, 4, "pin change old definition")?,
        new_hash: col(r, 5, "pin change new hash")?,
        new_def: col(r, 6, "pin change new definition")?,
        seen_at: col_ts(r, 7, "pin change seen at")?,
        seen_by: col_opt_id(r, 8, "pin change seen by")?,
        status: PinChangeStatus::parse(&status)
            .ok_or_else(|| StoreError::corrupt("pin change status", status))?,
        decided_at: col_opt_ts(r, 10, "pin change decided at")?,
    })
}

impl McpPinTx for PgTx<'_> {
    fn mcp_pin_sealed(&mut self, server: &str) -> R<bool> {
        query_value(
            self.conn,
            "SELECT EXISTS (SELECT 1 FROM mcp_pin_servers
                            WHERE server = $1 AND sealed_at IS NOT NULL)",
            &[&server],
            || format!("read whether MCP server {server}'s tools are pinned"),
        )
    }

    fn mcp_pin_seal(&mut self, server: &str, at: Timestamp) -> R<()> {
        execute(
            self.conn,
            "INSERT INTO mcp_pin_servers AS s (server, sealed_at) VALUES ($1, $2)
             ON CONFLICT (server) DO UPDATE SET sealed_at = COALESCE(s.sealed_at, EXCLUDED.sealed_at)",
            &[&server, &at.0],
            || format!("record the first listing of MCP server {server}"),
        )
        .map(drop)
    }

    fn mcp_pin(&mut self, server: &str, tool: &str) -> R<Option<McpPinRow>> {
        query_opt(
            self.conn,
            concat!(
                "SELECT ",
                pin_cols!(),
                " FROM mcp_pins WHERE server = $1 AND tool = $2"
            ),
            &[&server, &tool],
            || format!("read the pin of tool {tool} of MCP server {server}"),
            pin_row,
        )
    }

    fn put_mcp_pin(&mut self, p: &McpPinRow) -> R<()> {
        execute(
            self.conn,
            "INSERT INTO mcp_pins (server, tool, approved_hash, approved_def, approved_at,
                                   seen_hash, seen_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (server, tool) DO UPDATE SET approved_hash = EXCLUDED.approved_hash,
               approved_def = EXCLUDED.approved_def, approved_at = EXCLUDED.approved_at,
               seen_hash = EXCLUDED.seen_hash, seen_at = EXCLUDED.seen_at",
            &[
                &p.server,
                &p.tool,
                &p.approved_hash,
                &p.approved_def,
                &p.approved_at.map(|t| t.0),
                &p.seen_hash,
                &p.seen_at.0,
            ],
            || format!("pin tool {} of MCP server {}", p.tool, p.server),
        )
        .map(drop)
    }

    fn mcp_pins(&mut self, server: Option<&str>) -> R<Vec<McpPinRow>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                pin_cols!(),
                " FROM mcp_pins WHERE $1::TEXT IS NULL OR server = $1 ORDER BY server, tool"
            ),
            &[&server],
            || "list the pinned MCP tools".to_owned(),
            pin_row,
        )
    }

    fn insert_mcp_pin_change(&mut self, ch: &McpPinChangeRow) -> R<()> {
        execute(
            self.conn,
            "INSERT INTO mcp_pin_changes (id, server, tool, old_hash, old_def, new_hash, new_def,
                                          seen_at, seen_by, status, decided_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            &[
                &ch.id,
                &ch.server,
                &ch.tool,
                &ch.old_hash,
                &ch.old_def,
                &ch.new_hash,
                &ch.new_def,
                &ch.seen_at.0,
                &opt_text(ch.seen_by),
                &ch.status.as_str(),
                &ch.decided_at.map(|t| t.0),
            ],
            || {
                format!(
                    "record a change of tool {} of MCP server {}",
                    ch.tool, ch.server
                )
            },
        )
        .map(drop)
    }

    fn mcp_pin_change(&mut self, id: &str) -> R<Option<McpPinChangeRow>> {
        query_opt(
            self.conn,
            concat!(
                "SELECT ",
                change_cols!(),
                " FROM mcp_pin_changes WHERE id = $1"
            ),
            &[&id],
            || format!("read MCP tool change {id}"),
            change_row,
        )
    }

    /// The latest undecided or rejected change of a tool to `new_hash` from
    /// `old_hash` (the approved one it was measured against).
    fn mcp_pin_open_change(
        &mut self,
        server: &str,
        tool: &str,
        new_hash: &str,
        old_hash: Option<&str>,
    ) -> R<Option<McpPinChangeRow>> {
        query_opt(
            self.conn,
            concat!(
                "SELECT ",
                change_cols!(),
                " FROM mcp_pin_changes
                 WHERE server = $1 AND tool = $2 AND new_hash = $3
                   AND old_hash IS NOT DISTINCT FROM $4::TEXT
                   AND status IN ('pending', 'rejected')
                 ORDER BY seen_at DESC, id DESC LIMIT 1"
            ),
            &[&server, &tool, &new_hash, &old_hash],
            || format!("look up changes of tool {tool} of MCP server {server}"),
            change_row,
        )
    }

    /// Changes, oldest first, at most `limit`: those of one status, or all;
    /// of one server and tool, or of all.
    fn mcp_pin_changes(
        &mut self,
        status: Option<PinChangeStatus>,
        tool: Option<(&str, &str)>,
        max: usize,
    ) -> R<Vec<McpPinChangeRow>> {
        let (server, name) = tool.unzip();
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                change_cols!(),
                " FROM mcp_pin_changes
                 WHERE ($1::TEXT IS NULL OR status = $1)
                   AND ($2::TEXT IS NULL OR (server = $2 AND tool = $3))
                 ORDER BY seen_at, id LIMIT $4"
            ),
            &[
                &status.map(PinChangeStatus::as_str),
                &server,
                &name,
                &limit(max),
            ],
            || "list the changes of MCP tools".to_owned(),
            change_row,
        )
    }

    fn set_mcp_pin_change_status(
        &mut self,
        id: &str,
        status: PinChangeStatus,
        at: Timestamp,
    ) -> R<()> {
        let changed = execute(
            self.conn,
            "UPDATE mcp_pin_changes SET status = $2, decided_at = $3 WHERE id = $1",
            &[&id, &status.as_str(), &at.0],
            || format!("decide MCP tool change {id}"),
        )?;
        require_row(changed, || format!("decide MCP tool change {id}"))
    }
}
