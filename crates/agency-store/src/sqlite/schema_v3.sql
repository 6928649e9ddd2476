-- Migration 3: what the supervisor records about each agent run, handlers
-- marked stalled, and the indexes that answer "did this agent make
-- progress?" without scanning.
CREATE TABLE agent_runs (
    agent         TEXT PRIMARY KEY NOT NULL REFERENCES agents (id) DEFERRABLE INITIALLY DEFERRED,
    runtime       TEXT NOT NULL,
    prompt_hash   TEXT NOT NULL,
    exit_status   INTEGER,
    tool_calls    INTEGER,
    input_tokens  INTEGER,
    output_tokens INTEGER,
    transcript    TEXT
);

CREATE TABLE handler_stalls (
    handler TEXT PRIMARY KEY NOT NULL REFERENCES handlers (id) DEFERRABLE INITIALLY DEFERRED,
    since   INTEGER NOT NULL,
    reason  TEXT NOT NULL
);

CREATE INDEX kb_audit_by_agent ON kb_audit (agent) WHERE agent IS NOT NULL;
CREATE INDEX outcome_events_by_agent ON outcome_events (agent) WHERE agent IS NOT NULL;
