-- Migration 18: the tools of applied organisations (issue 12 item 4). One
-- row per tool, named as agents see it (`tool:NAME`); names are unique
-- across every organisation, so the name is the key. `def_json` is the
-- Agency Model's `Tool` as JSON (the daemon runs it from there);
-- `def_hash` is BLAKE3 of that text, to tell a changed definition.
CREATE TABLE org_tools (
    name        TEXT PRIMARY KEY,
    org         TEXT NOT NULL,
    def_json    TEXT NOT NULL,
    def_hash    TEXT NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX org_tools_org ON org_tools (org, name);
