-- Migration 25: problems. One row per episode of a stuck signal (a
-- handler with work and no progress, a tool called in a loop, a retry
-- storm, a budget nearly spent, an approval left waiting, a live run
-- whose process is gone, mail refused for lack of a connection), open
-- until its condition clears. At most one open episode per key: a signal
-- seen again while open is the same episode (told once, not a flood).
CREATE TABLE problems (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    kind      TEXT NOT NULL,
    key       TEXT NOT NULL,
    handler   TEXT,
    agent     TEXT,
    summary   TEXT NOT NULL,
    detail    TEXT NOT NULL,
    opened_at INTEGER NOT NULL,
    seen_at   INTEGER NOT NULL,
    closed_at INTEGER
);
CREATE UNIQUE INDEX problems_open_key ON problems (key) WHERE closed_at IS NULL;
