-- Migration 28: typed calls between agents (issue 31, item 1). One row
-- per `agent_call`: who called which verb of whom, the envelope's step
-- budget and hop count, the mail that carried the request and, once the
-- callee answered, the mail that carried the reply and the reply itself
-- (its output or error, as JSON). Message ids are not
-- foreign keys: retention may drop old mail while the call's record stays.
CREATE TABLE agent_calls (
    id              TEXT PRIMARY KEY,
    conversation    TEXT NOT NULL,
    parent          TEXT,
    caller          TEXT NOT NULL,
    caller_agent    TEXT NOT NULL,
    callee          TEXT NOT NULL,
    org             TEXT NOT NULL,
    agent           TEXT NOT NULL,
    verb            TEXT NOT NULL,
    hops            INTEGER NOT NULL CHECK (hops >= 1),
    steps_left      INTEGER NOT NULL CHECK (steps_left >= 0),
    request_message TEXT NOT NULL UNIQUE,
    reply_message   TEXT UNIQUE,
    reply           TEXT,
    status          TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    answered_at     INTEGER
);
CREATE INDEX agent_calls_conversation ON agent_calls (conversation, created_at, id);
CREATE INDEX agent_calls_open_to ON agent_calls (callee, created_at, id)
    WHERE status = 'pending';
