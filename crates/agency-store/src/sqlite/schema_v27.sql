-- Migration 27: pipeline runs (issue 31). A run is a handler whose root
-- outcome is the run; each stage has a child outcome and, once it
-- succeeded, its validated artifact as a KB file.
CREATE TABLE pipeline_runs (
    id          TEXT PRIMARY KEY REFERENCES handlers (id) DEFERRABLE INITIALLY DEFERRED,
    pipeline    TEXT NOT NULL,
    model       TEXT NOT NULL,
    input       TEXT NOT NULL,
    level       INTEGER NOT NULL CHECK (level BETWEEN 0 AND 3),
    live_tools  INTEGER NOT NULL CHECK (live_tools IN (0, 1)),
    status      TEXT NOT NULL,
    stage       INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    ended_at    INTEGER
);
CREATE INDEX pipeline_runs_created ON pipeline_runs (created_at, id);
CREATE INDEX pipeline_runs_unfinished ON pipeline_runs (created_at, id)
    WHERE status IN ('running', 'waiting', 'paused');

CREATE TABLE pipeline_stages (
    run             TEXT NOT NULL REFERENCES pipeline_runs (id),
    idx             INTEGER NOT NULL,
    name            TEXT NOT NULL,
    outcome         TEXT NOT NULL REFERENCES outcomes (id) DEFERRABLE INITIALLY DEFERRED,
    status          TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    input_tokens    INTEGER NOT NULL DEFAULT 0,
    output_tokens   INTEGER NOT NULL DEFAULT 0,
    cost_micro_usd  INTEGER NOT NULL DEFAULT 0,
    artifact        TEXT REFERENCES files (id) DEFERRABLE INITIALLY DEFERRED,
    report          TEXT,
    started_at      INTEGER,
    ended_at        INTEGER,
    PRIMARY KEY (run, idx)
);
