-- Migration 10: model calls metered by the daemon's model gateway (issue
-- 11 item 2). One row per call forwarded to an upstream, attributed to the
-- calling agent (its run) and its handler; the cost is computed from the
-- price table at the time of the call, in micro-dollars, so a later price
-- change never rewrites what was spent. `status` is the upstream's HTTP
-- status (0: the upstream could not be reached).
CREATE TABLE model_calls (
    id                 INTEGER PRIMARY KEY,
    at                 INTEGER NOT NULL,
    handler            TEXT NOT NULL,
    agent              TEXT NOT NULL,
    upstream           TEXT NOT NULL,
    api                TEXT NOT NULL,
    model              TEXT NOT NULL,
    stream             INTEGER NOT NULL,
    status             INTEGER NOT NULL,
    input_tokens       INTEGER NOT NULL,
    output_tokens      INTEGER NOT NULL,
    cache_read_tokens  INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL,
    cost_micro_usd     INTEGER NOT NULL
);
CREATE INDEX model_calls_handler ON model_calls (handler, id);
CREATE INDEX model_calls_agent ON model_calls (agent, id);
