-- Migration 24: the event log. One row per state change the service
-- makes and per step of a live run, appended in the transaction of the
-- change it records. AUTOINCREMENT: a sequence number is never reused,
-- also after `gc` removed the newest rows' elders, so a reader's cursor
-- stays valid. No foreign keys: an event outlives nothing it names, and
-- rows it names are never deleted anyway.
CREATE TABLE events (
    seq     INTEGER PRIMARY KEY AUTOINCREMENT,
    at      INTEGER NOT NULL,
    kind    TEXT NOT NULL,
    handler TEXT,
    agent   TEXT,
    outcome TEXT,
    summary TEXT NOT NULL,
    data    TEXT NOT NULL
);
-- A handler's (or a subtree's) events after a cursor.
CREATE INDEX events_by_handler ON events (handler, seq);
-- Retention: the oldest events first.
CREATE INDEX events_by_at ON events (at);
