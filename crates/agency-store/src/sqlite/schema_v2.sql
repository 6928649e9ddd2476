-- Migration 2: bearer tokens of agents, and nothing else.
--
-- A token is stored only as its BLAKE3 hash. It names exactly one agent
-- (and so one handler); it stops working when revoked or when its agent
-- ends (the service checks the agent is live on every call).
CREATE TABLE tokens (
    hash       TEXT PRIMARY KEY NOT NULL,
    agent      TEXT NOT NULL REFERENCES agents (id) DEFERRABLE INITIALLY DEFERRED,
    handler    TEXT NOT NULL REFERENCES handlers (id) DEFERRABLE INITIALLY DEFERRED,
    workspace  TEXT,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE INDEX tokens_by_agent ON tokens (agent);
