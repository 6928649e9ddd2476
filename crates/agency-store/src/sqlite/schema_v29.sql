-- Migration 29: a pipeline's library (issue 31, seed 001's memory system):
-- what its Retriever recalls and its PatternObserver compares with —
-- portfolio examples (one per finished run, with its Gatekeeper score),
-- lessons and playbooks — each with the text it is found by.
CREATE TABLE pipeline_library (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    pipeline    TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('example', 'lesson', 'playbook')),
    run         TEXT,
    title       TEXT NOT NULL,
    text        TEXT NOT NULL,
    score       INTEGER,
    data        TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
-- A run is in its pipeline's portfolio once.
CREATE UNIQUE INDEX pipeline_library_run ON pipeline_library (pipeline, kind, run)
    WHERE run IS NOT NULL;
CREATE INDEX pipeline_library_recent ON pipeline_library (pipeline, kind, created_at, seq);

-- Full-text index over the text, external content, kept in step by the
-- triggers below (same tokenizer as handlers' memory).
CREATE VIRTUAL TABLE pipeline_library_fts USING fts5(
    text,
    content = 'pipeline_library', content_rowid = 'seq',
    tokenize = 'porter unicode61'
);
CREATE TRIGGER pipeline_library_fts_insert AFTER INSERT ON pipeline_library BEGIN
    INSERT INTO pipeline_library_fts (rowid, text) VALUES (new.seq, new.text);
END;
CREATE TRIGGER pipeline_library_fts_delete AFTER DELETE ON pipeline_library BEGIN
    INSERT INTO pipeline_library_fts (pipeline_library_fts, rowid, text)
        VALUES ('delete', old.seq, old.text);
END;
CREATE TRIGGER pipeline_library_fts_update AFTER UPDATE OF text ON pipeline_library BEGIN
    INSERT INTO pipeline_library_fts (pipeline_library_fts, rowid, text)
        VALUES ('delete', old.seq, old.text);
    INSERT INTO pipeline_library_fts (rowid, text) VALUES (new.seq, new.text);
END;
