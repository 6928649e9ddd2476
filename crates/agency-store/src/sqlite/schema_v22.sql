-- Migration 22: the agency API key that sent each message from outside
-- (issue 27), so that a key's messages not yet answered can be counted in
-- the transaction that would add one (`agency_api.max_pending_per_key`).
-- NULL: sent by the user (the admin token), whom no such cap binds, or
-- before this migration.
ALTER TABLE org_messages ADD COLUMN key_id TEXT;
CREATE INDEX org_messages_pending_by_key ON org_messages (key_id)
    WHERE status = 'pending';
