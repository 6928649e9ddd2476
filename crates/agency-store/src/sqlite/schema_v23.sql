-- Migration 23: notices (issue 28). A message Agency itself wrote (a
-- stall, an approval request or decision, a budget reached, a quarantined
-- MCP tool, an undelivered message, changed MCP servers) is marked, so
-- listings show it as from "agency" rather than from the handler in whose
-- name it was sent (its `from_party`, kept for replies and grants).
-- 0 for everything before this migration.
ALTER TABLE messages ADD COLUMN notice INTEGER NOT NULL DEFAULT 0;

-- `agency inbox --all`: a party's delivered mail, acknowledged or not,
-- newest first.
CREATE INDEX messages_received ON messages (to_party, delivered_at, id)
    WHERE delivered_at IS NOT NULL;
