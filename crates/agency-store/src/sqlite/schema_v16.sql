-- Migration 16: applied organisations (issue 12 item 5, `agency up`).
-- An organisation is an Agency Model stood up as standing handlers under
-- the root handler. Keyed by name, so applying a changed model again
-- finds the handlers it made before.
CREATE TABLE orgs (
    name        TEXT PRIMARY KEY,
    -- The model last applied (JSON) and its BLAKE3: the old definitions a
    -- re-apply compares with, field by field.
    model_json  TEXT NOT NULL,
    model_hash  TEXT NOT NULL,
    -- The top agency's executive agent's handler.
    executive   TEXT NOT NULL,
    applied_at  INTEGER NOT NULL,
    -- Set by `agency down`; cleared by the next `agency up`.
    retired_at  INTEGER
);
-- One row per agent ever stood up: (org, agent) keeps its handler for
-- good, so an agent removed and added back (or `down` then `up`) gets its
-- handler, state document and history back.
CREATE TABLE org_agents (
    org         TEXT NOT NULL,
    agent       TEXT NOT NULL,
    agency      TEXT NOT NULL,
    handler     TEXT NOT NULL UNIQUE,
    -- BLAKE3 of the agent's effective definition: equal means unchanged.
    def_hash    TEXT NOT NULL,
    -- "builtin", "claude-code", "command", or NULL (the daemon's).
    runtime     TEXT,
    status      TEXT NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (org, agent)
);
-- The capabilities an organisation granted (tools, capability strings,
-- reporting lines and connections as mail capabilities), so a re-apply
-- revokes exactly those it no longer wants and nothing the user granted
-- by hand. `holder` is an agent name, or '' for the root handler; `key`
-- names the resource with agents by name (`mail:@Name`, `mail:@root`).
CREATE TABLE org_grants (
    org         TEXT NOT NULL,
    holder      TEXT NOT NULL,
    key         TEXT NOT NULL,
    level       INTEGER NOT NULL,
    capability  INTEGER NOT NULL,
    PRIMARY KEY (org, holder, key)
);
-- The standing instructions of a handler's agents: a final section of the
-- system prompt, the same for every agent of the handler.
CREATE TABLE handler_standing (
    handler     TEXT PRIMARY KEY,
    text        TEXT NOT NULL,
    set_at      INTEGER NOT NULL
);
