-- Migration 13: approval gates (issue 11 item 4). A tool call the policy
-- (or an `each_use` capability) says to ask about becomes a durable
-- request, bound to (handler, tool, BLAKE3 hash of the canonical JSON
-- arguments). At most one pending request per binding (the partial unique
-- index); an approved one is consumed by the call it allows in the same
-- transaction that admits the call.
CREATE TABLE approvals (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    handler      TEXT NOT NULL,
    agent        TEXT NOT NULL,
    tool         TEXT NOT NULL,
    args_hash    TEXT NOT NULL,
    args         TEXT NOT NULL,
    reason       TEXT NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'consumed')),
    always       INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    decided_at   INTEGER,
    decided_by   TEXT,
    deny_reason  TEXT,
    consumed_at  INTEGER
);
CREATE UNIQUE INDEX approvals_one_pending ON approvals (handler, tool, args_hash)
    WHERE status = 'pending';
CREATE INDEX approvals_by_binding ON approvals (handler, tool, args_hash, status);
CREATE INDEX approvals_by_status ON approvals (status, id);
-- Capabilities granted with `approval = "each_use"`: every call that uses
-- one is asked about, whatever the policy says. A side table keeps the
-- capability rows as they were; a grant derived from a marked capability
-- is marked too.
CREATE TABLE capability_approval (
    capability  INTEGER PRIMARY KEY REFERENCES capabilities (id),
    mode        TEXT NOT NULL CHECK (mode IN ('each_use'))
);
