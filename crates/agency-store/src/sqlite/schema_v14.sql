-- Migration 14: budgets as a ledger over more kinds (issue 11 items 3, 7).
-- New limits on a handler's subtree (NULL: no limit of that kind): tool
-- calls, agent spawns, live agents, handlers delegated to, delegation
-- depth below the budget's handler, and wall-clock time since `set_at`.
ALTER TABLE budgets ADD COLUMN max_tool_calls    INTEGER;
ALTER TABLE budgets ADD COLUMN max_spawns        INTEGER;
ALTER TABLE budgets ADD COLUMN max_live_agents   INTEGER;
ALTER TABLE budgets ADD COLUMN max_handlers      INTEGER;
ALTER TABLE budgets ADD COLUMN max_depth         INTEGER;
ALTER TABLE budgets ADD COLUMN max_wall_clock_ms INTEGER;
-- The boss that carved this budget out of its own on delegation (it gets
-- the pause mail); NULL: the user set it.
ALTER TABLE budgets ADD COLUMN carved_by         TEXT;
-- Set when a limit was reached: the subtree is paused (no new model calls,
-- no spawns) until the user raises a limit or resumes it.
ALTER TABLE budgets ADD COLUMN paused_at         INTEGER;
ALTER TABLE budgets ADD COLUMN paused_reason     TEXT;
-- Bit per kind whose 80% notice an agent of the subtree has been shown.
ALTER TABLE budgets ADD COLUMN warned            INTEGER NOT NULL DEFAULT 0;

-- The ledger's running totals: one row per handler holding its whole
-- subtree's spend and reservations in flight, updated in the same write
-- transaction as what they count, for the handler and every ancestor, so
-- that a check reads one row per budget instead of summing the subtree.
CREATE TABLE budget_spend (
    handler            TEXT PRIMARY KEY NOT NULL,
    tokens             INTEGER NOT NULL DEFAULT 0,
    micro_usd          INTEGER NOT NULL DEFAULT 0,
    calls              INTEGER NOT NULL DEFAULT 0,
    tool_calls         INTEGER NOT NULL DEFAULT 0,
    spawns             INTEGER NOT NULL DEFAULT 0,
    handlers           INTEGER NOT NULL DEFAULT 0,
    reserved_tokens    INTEGER NOT NULL DEFAULT 0,
    reserved_micro_usd INTEGER NOT NULL DEFAULT 0,
    reserved_calls     INTEGER NOT NULL DEFAULT 0
);

-- Backfill from what is recorded: each handler's own model calls, agents
-- and existing underlings, added to it and every ancestor.
CREATE TEMP TABLE budget_anc AS
WITH RECURSIVE anc (h, a, n) AS (
    SELECT id, id, 0 FROM handlers
    UNION ALL
    SELECT anc.h, handlers.boss, anc.n + 1 FROM anc JOIN handlers ON handlers.id = anc.a
    WHERE handlers.boss IS NOT NULL AND anc.n < 10000
)
SELECT h, a FROM anc;
INSERT INTO budget_spend (handler, tokens, micro_usd, calls, spawns, handlers)
SELECT budget_anc.a,
       COALESCE(SUM(own.tokens), 0), COALESCE(SUM(own.micro_usd), 0), COALESCE(SUM(own.calls), 0),
       COALESCE(SUM(own.spawns), 0), SUM(CASE WHEN budget_anc.h = budget_anc.a THEN 0 ELSE 1 END)
FROM budget_anc JOIN (
    SELECT handlers.id AS h,
        (SELECT COALESCE(SUM(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens), 0)
           FROM model_calls WHERE model_calls.handler = handlers.id) AS tokens,
        (SELECT COALESCE(SUM(cost_micro_usd), 0) FROM model_calls WHERE model_calls.handler = handlers.id) AS micro_usd,
        (SELECT COUNT(*) FROM model_calls WHERE model_calls.handler = handlers.id) AS calls,
        (SELECT COUNT(*) FROM agents WHERE agents.handler = handlers.id) AS spawns
    FROM handlers
) AS own ON own.h = budget_anc.h
GROUP BY budget_anc.a;
DROP TABLE budget_anc;

-- Bounded loops (issue 11 item 6): each handler's hop count in the chain
-- of work it is on, the hops of the last message or delegation it got from
-- another handler (0 from the user). A hand-off is one hop more than its
-- sender's; `[limits] max_handoffs` bounds it.
CREATE TABLE handler_hops (
    handler TEXT PRIMARY KEY NOT NULL,
    hops    INTEGER NOT NULL
);
