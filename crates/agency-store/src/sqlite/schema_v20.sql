-- Migration 20: how long a handler's agent stays alive after its work is
-- done, waiting for mail (issue 13 item 6, warm agents). One row per
-- (handler, source): `user` (`agency keep-warm`) and `org` (an applied
-- organisation's `memory.keepWarm`) are kept apart, so clearing the user's
-- setting brings the organisation's back rather than losing it; the user's
-- wins while it exists. No row: the daemon's `[agents]` defaults.
CREATE TABLE handler_keep_warm (
    handler       TEXT NOT NULL,
    source        TEXT NOT NULL CHECK (source IN ('user', 'org')),
    keep_warm_ms  INTEGER NOT NULL CHECK (keep_warm_ms >= 0),
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (handler, source)
);
