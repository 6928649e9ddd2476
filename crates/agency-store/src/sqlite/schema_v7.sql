-- Migration 7 (quotas): the indexes that let quotas be checked and
-- retention be applied without scanning a table. Each quota count stops at
-- the limit (LIMIT inside the count), so it costs at most that many index
-- entries of one handler.

-- Deferred messages a handler scheduled that are not yet delivered.
CREATE INDEX messages_pending_by_sender ON messages (from_party) WHERE delivered_at IS NULL;
-- Retention: acknowledged mail in acknowledgement order.
CREATE INDEX messages_acked ON messages (acked_at, id) WHERE acked_at IS NOT NULL;
-- Retention: the envelopes that carry a body file.
CREATE INDEX messages_by_file ON messages (file);
-- KB files a handler created, by kind.
CREATE INDEX files_by_creator ON files (created_by, kind) WHERE created_by IS NOT NULL;
-- Outcomes a handler created (their "created" history event).
CREATE INDEX outcome_events_created_by ON outcome_events (handler) WHERE action = 'created';
-- Active handlers of a subtree: walk only active children.
CREATE INDEX handlers_active_by_boss ON handlers (boss) WHERE status = 'active';
-- Blob garbage collection: "does any version row point at this blob?"
CREATE INDEX versions_by_hash ON versions (hash);
