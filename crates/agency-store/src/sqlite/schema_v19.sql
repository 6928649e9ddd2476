-- Migration 19: each handler's memory (issue 13). A memory is a note an
-- agent stored for the later agents of its handler; it is never deleted
-- by an agent, only marked: `forgotten` (memory_forget, or a summary whose
-- condensation the user undid) or `condensed` (replaced by the summary
-- memory `condensed_into`, kept as history). `seq` is the FTS rowid: an
-- INTEGER PRIMARY KEY, because the implicit rowid of a table keyed by
-- text may change on VACUUM and the full-text index would then point at
-- the wrong rows. `changed_at` is when `state` last changed (status shows
-- the last changes from it).
CREATE TABLE memories (
    seq             INTEGER PRIMARY KEY,
    id              TEXT NOT NULL UNIQUE,
    handler         TEXT NOT NULL,
    text            TEXT NOT NULL,
    kind            TEXT,
    tags            TEXT NOT NULL DEFAULT '[]',
    created_at      INTEGER NOT NULL,
    state           TEXT NOT NULL DEFAULT 'live'
                    CHECK (state IN ('live', 'forgotten', 'condensed')),
    changed_at      INTEGER,
    condensed_into  TEXT,
    compaction      TEXT
);
CREATE INDEX memories_handler ON memories (handler, state, created_at);
CREATE INDEX memories_condensed_into ON memories (condensed_into)
    WHERE condensed_into IS NOT NULL;

-- Full-text index over text and tags, external content (the text is stored
-- once, in `memories`), kept in step by the triggers below. Porter stems
-- English words ("deploys" finds "deployed"); unicode61 folds case and
-- diacritics.
CREATE VIRTUAL TABLE memories_fts USING fts5(
    text, tags,
    content = 'memories', content_rowid = 'seq',
    tokenize = 'porter unicode61'
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, text, tags) VALUES (new.seq, new.text, new.tags);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text, tags)
        VALUES ('delete', old.seq, old.text, old.tags);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF text, tags ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text, tags)
        VALUES ('delete', old.seq, old.text, old.tags);
    INSERT INTO memories_fts (rowid, text, tags) VALUES (new.seq, new.text, new.tags);
END;

-- A memory's embedding by one model (optional semantic search): `dims`
-- little-endian f32 values. One per (memory, model): a new model embeds
-- anew without losing the old.
CREATE TABLE memory_embeddings (
    memory  TEXT NOT NULL,
    model   TEXT NOT NULL,
    dims    INTEGER NOT NULL,
    vector  BLOB NOT NULL,
    PRIMARY KEY (memory, model)
);

-- Condensations of a handler's memory: `requested` when Agency asked an
-- agent to condense (a memory past `memory.condense_after`), `done` when
-- an agent condensed (memory_condense), `undone` when the user undid it.
CREATE TABLE memory_compactions (
    id            TEXT PRIMARY KEY,
    handler       TEXT NOT NULL,
    requested_at  INTEGER NOT NULL,
    done_at       INTEGER,
    undone_at     INTEGER,
    status        TEXT NOT NULL CHECK (status IN ('requested', 'done', 'undone')),
    summary       TEXT
);
CREATE INDEX memory_compactions_handler ON memory_compactions (handler, requested_at);
