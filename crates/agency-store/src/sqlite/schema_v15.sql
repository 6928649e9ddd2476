-- Migration 15: pinned tool definitions of extra MCP servers (issue 11
-- item 5). A server's tools are pinned at its first complete `tools/list`;
-- a later definition that differs (or a tool first seen after that
-- listing) is a change the user approves before agents see the tool.
CREATE TABLE mcp_pin_servers (
    server     TEXT PRIMARY KEY,
    -- When the first complete listing ended: tools seen after it are new
    -- and need approval. NULL while the first listing is still paging.
    sealed_at  INTEGER
);
-- One row per (server, tool) ever listed. The tool is usable only while
-- the definition last seen is the approved one.
CREATE TABLE mcp_pins (
    server         TEXT NOT NULL,
    tool           TEXT NOT NULL,
    approved_hash  TEXT,
    approved_def   TEXT,
    approved_at    INTEGER,
    seen_hash      TEXT NOT NULL,
    seen_at        INTEGER NOT NULL,
    PRIMARY KEY (server, tool)
);
-- Each definition that differs from the approved one, as the user is
-- asked about it: pending until approved, rejected, or superseded by the
-- approval of another change of the same tool.
CREATE TABLE mcp_pin_changes (
    id          TEXT PRIMARY KEY,
    server      TEXT NOT NULL,
    tool        TEXT NOT NULL,
    old_hash    TEXT,
    old_def     TEXT,
    new_hash    TEXT NOT NULL,
    new_def     TEXT NOT NULL,
    seen_at     INTEGER NOT NULL,
    seen_by     TEXT,
    status      TEXT NOT NULL,
    decided_at  INTEGER
);
CREATE INDEX mcp_pin_changes_tool ON mcp_pin_changes (server, tool, new_hash);
CREATE INDEX mcp_pin_changes_status ON mcp_pin_changes (status, seen_at);
