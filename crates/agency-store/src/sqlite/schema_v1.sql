-- Migration 1: the initial Agency schema.
--
-- Conventions (see sqlite/convert.rs): ids are UUIDs as lowercase hyphenated
-- TEXT, so ORDER BY id matches the ids' string order; timestamps are INTEGER
-- milliseconds since the Unix epoch; enums are their as_str() text; levels are
-- INTEGER (none 0 < read 1 < write 2); booleans are INTEGER 0/1; a NULL
-- handler column means the user (or Agency itself).
--
-- Foreign keys are DEFERRABLE INITIALLY DEFERRED: they are checked at COMMIT,
-- so the service may insert mutually referring rows (a handler and its state
-- document, an outcome and its responsible handler) in any order within one
-- transaction. Columns that only record who acted (created_by, granted_by,
-- agent, ...) carry no foreign key: they are audit facts, not structure.

CREATE TABLE files (
    id             TEXT PRIMARY KEY NOT NULL,
    kind           TEXT NOT NULL,
    description    TEXT NOT NULL,
    owner          TEXT,
    created_at     INTEGER NOT NULL,
    created_by     TEXT,
    latest_version INTEGER NOT NULL DEFAULT 0
);
-- kb_candidates: state documents and audit logs by owner.
CREATE INDEX files_by_owner ON files (owner) WHERE owner IS NOT NULL;

CREATE TABLE versions (
    file       TEXT NOT NULL REFERENCES files (id) DEFERRABLE INITIALLY DEFERRED,
    version    INTEGER NOT NULL,
    hash       TEXT NOT NULL,
    size       INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    handler    TEXT,
    agent      TEXT,
    PRIMARY KEY (file, version)
) WITHOUT ROWID;

CREATE TABLE kb_audit (
    id      INTEGER PRIMARY KEY,
    file    TEXT NOT NULL REFERENCES files (id) DEFERRABLE INITIALLY DEFERRED,
    at      INTEGER NOT NULL,
    handler TEXT,
    agent   TEXT,
    action  TEXT NOT NULL,
    version INTEGER NOT NULL
);
CREATE INDEX kb_audit_by_file ON kb_audit (file, at);

CREATE TABLE handlers (
    id         TEXT PRIMARY KEY NOT NULL,
    boss       TEXT REFERENCES handlers (id) DEFERRABLE INITIALLY DEFERRED,
    status     TEXT NOT NULL,
    state_doc  TEXT NOT NULL REFERENCES files (id) DEFERRABLE INITIALLY DEFERRED,
    audit_log  TEXT NOT NULL REFERENCES files (id) DEFERRABLE INITIALLY DEFERRED,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
-- underlings, handler_subtree, root_handler (boss IS NULL), kb_candidates.
CREATE INDEX handlers_by_boss ON handlers (boss);

CREATE TABLE outcomes (
    id            TEXT PRIMARY KEY NOT NULL,
    title         TEXT NOT NULL,
    description   TEXT NOT NULL,
    status        TEXT NOT NULL,
    status_reason TEXT,
    priority      INTEGER NOT NULL,
    perpetual     INTEGER NOT NULL,
    process_inbox INTEGER NOT NULL,
    responsible   TEXT NOT NULL REFERENCES handlers (id) DEFERRABLE INITIALLY DEFERRED,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
-- outcomes_of (ordered like the method), reassignment, open_process_inbox.
CREATE INDEX outcomes_by_responsible ON outcomes (responsible, priority DESC, created_at);
-- handlers_with_work / has_work: "is there any open, non-perpetual outcome
-- for this handler" is one probe into this small partial index.
-- counts(): open outcomes without reading the table.
CREATE INDEX outcomes_by_status ON outcomes (status);
CREATE INDEX outcomes_open_work ON outcomes (responsible) WHERE status = 'open' AND perpetual = 0;

CREATE TABLE outcome_edges (
    parent TEXT NOT NULL REFERENCES outcomes (id) DEFERRABLE INITIALLY DEFERRED,
    child  TEXT NOT NULL REFERENCES outcomes (id) DEFERRABLE INITIALLY DEFERRED,
    PRIMARY KEY (parent, child)
) WITHOUT ROWID;
-- Walking up the DAG (parents, ancestors, is_descendant_or_self).
CREATE INDEX outcome_edges_up ON outcome_edges (child, parent);

CREATE TABLE outcome_events (
    id      INTEGER PRIMARY KEY,
    outcome TEXT NOT NULL REFERENCES outcomes (id) DEFERRABLE INITIALLY DEFERRED,
    at      INTEGER NOT NULL,
    handler TEXT,
    agent   TEXT,
    action  TEXT NOT NULL,
    detail  TEXT NOT NULL
);
CREATE INDEX outcome_events_by_outcome ON outcome_events (outcome, at);

-- AUTOINCREMENT: capability ids are never reused, so an id in an audit trail
-- always names the same grant.
CREATE TABLE capabilities (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    holder        TEXT NOT NULL REFERENCES handlers (id) DEFERRABLE INITIALLY DEFERRED,
    resource_kind TEXT NOT NULL,
    resource_key  TEXT NOT NULL,
    level         INTEGER NOT NULL,
    delegatable   INTEGER NOT NULL,
    scope         TEXT REFERENCES outcomes (id) DEFERRABLE INITIALLY DEFERRED,
    derived_from  INTEGER REFERENCES capabilities (id) DEFERRABLE INITIALLY DEFERRED,
    granted_by    TEXT,
    origin        TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    revoked_at    INTEGER
);
CREATE INDEX capabilities_live_by_holder ON capabilities (holder, resource_kind, resource_key)
    WHERE revoked_at IS NULL;
CREATE INDEX capabilities_live_by_scope ON capabilities (scope) WHERE revoked_at IS NULL;
-- The revocation cascade follows derived_from downwards.
CREATE INDEX capabilities_by_derived_from ON capabilities (derived_from);
CREATE INDEX capabilities_by_resource ON capabilities (resource_kind, resource_key);

CREATE TABLE messages (
    id           TEXT PRIMARY KEY NOT NULL,
    file         TEXT NOT NULL REFERENCES files (id) DEFERRABLE INITIALLY DEFERRED,
    from_party   TEXT NOT NULL,
    to_party     TEXT NOT NULL,
    subject      TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    deliver_at   INTEGER NOT NULL,
    delivered_at INTEGER,
    acked_at     INTEGER
);
-- due_messages / next_due: only undelivered mail, in delivery order.
CREATE INDEX messages_due ON messages (deliver_at, id) WHERE delivered_at IS NULL;
-- inbox / inbox_count: only unacknowledged mail, in inbox order.
CREATE INDEX messages_inbox ON messages (to_party, delivered_at, id) WHERE acked_at IS NULL;
CREATE INDEX messages_outbox ON messages (from_party, created_at);

CREATE TABLE agents (
    id         TEXT PRIMARY KEY NOT NULL,
    handler    TEXT NOT NULL REFERENCES handlers (id) DEFERRABLE INITIALLY DEFERRED,
    started_at INTEGER NOT NULL,
    ended_at   INTEGER,
    end_reason TEXT
);
-- At most one live agent per handler: enforced here, reported as
-- StoreError::Unique by insert_agent.
CREATE UNIQUE INDEX agents_one_live_per_handler ON agents (handler) WHERE ended_at IS NULL;
CREATE INDEX agents_by_start ON agents (started_at);

CREATE TABLE handler_log (
    id      INTEGER PRIMARY KEY,
    handler TEXT NOT NULL REFERENCES handlers (id) DEFERRABLE INITIALLY DEFERRED,
    at      INTEGER NOT NULL,
    agent   TEXT,
    summary TEXT NOT NULL
);
CREATE INDEX handler_log_by_handler ON handler_log (handler, at);
