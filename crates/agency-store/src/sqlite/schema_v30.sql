-- Migration 30: lessons a pipeline learned (seed 001's learning loop).
-- A lesson's row is its current version; its KB file (same id) holds every
-- version. `lesson_log` is its history and evidence: proposals (with the
-- run each came from), recalls by runs, helpful/harmful marks, admission,
-- rejection, retirement, rollback.
CREATE TABLE lessons (
    -- The full-text index's key: an explicit integer key survives VACUUM.
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    pipeline        TEXT NOT NULL,
    key             TEXT NOT NULL,
    title           TEXT NOT NULL,
    scope_kind      TEXT NOT NULL,
    scope           TEXT NOT NULL,
    trigger_text    TEXT NOT NULL,
    advice          TEXT NOT NULL,
    counterexample  TEXT,
    state           TEXT NOT NULL,
    reason          TEXT,
    version         INTEGER NOT NULL,
    recalled        INTEGER NOT NULL DEFAULT 0,
    used            INTEGER NOT NULL DEFAULT 0,
    helpful         INTEGER NOT NULL DEFAULT 0,
    harmful         INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
-- One lesson per title (normalised) in a pipeline: a later proposal of the
-- same title is evidence for it, or an edit of it.
CREATE UNIQUE INDEX lessons_key ON lessons (pipeline, key);
CREATE INDEX lessons_state ON lessons (pipeline, state, updated_at);
CREATE INDEX lessons_recent ON lessons (updated_at, id);

CREATE VIRTUAL TABLE lessons_fts USING fts5(
    title, trigger_text, advice,
    content = 'lessons', content_rowid = 'seq',
    tokenize = 'porter unicode61'
);
CREATE TRIGGER lessons_fts_insert AFTER INSERT ON lessons BEGIN
    INSERT INTO lessons_fts (rowid, title, trigger_text, advice)
        VALUES (new.seq, new.title, new.trigger_text, new.advice);
END;
CREATE TRIGGER lessons_fts_delete AFTER DELETE ON lessons BEGIN
    INSERT INTO lessons_fts (lessons_fts, rowid, title, trigger_text, advice)
        VALUES ('delete', old.seq, old.title, old.trigger_text, old.advice);
END;
CREATE TRIGGER lessons_fts_update AFTER UPDATE OF title, trigger_text, advice ON lessons BEGIN
    INSERT INTO lessons_fts (lessons_fts, rowid, title, trigger_text, advice)
        VALUES ('delete', old.seq, old.title, old.trigger_text, old.advice);
    INSERT INTO lessons_fts (rowid, title, trigger_text, advice)
        VALUES (new.seq, new.title, new.trigger_text, new.advice);
END;

CREATE TABLE lesson_log (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    lesson      TEXT NOT NULL REFERENCES lessons (id),
    action      TEXT NOT NULL,
    run         TEXT,
    version     INTEGER NOT NULL,
    detail      TEXT NOT NULL,
    at          INTEGER NOT NULL
);
CREATE INDEX lesson_log_lesson ON lesson_log (lesson, seq);
CREATE INDEX lesson_log_run ON lesson_log (run, action) WHERE run IS NOT NULL;

-- Judge checks: a scoring stage's rubric and grader, checked against the
-- pipeline's anchors before they judge a run (passed, flagged for the
-- user, or accepted by the user).
CREATE TABLE judge_checks (
    pipeline    TEXT NOT NULL,
    rubric      TEXT NOT NULL,
    grader      TEXT NOT NULL,
    state       TEXT NOT NULL,
    detail      TEXT NOT NULL,
    at          INTEGER NOT NULL,
    PRIMARY KEY (pipeline, rubric, grader)
);
CREATE INDEX judge_checks_recent ON judge_checks (at, pipeline);
