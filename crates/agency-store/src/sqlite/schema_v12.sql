-- Migration 12: the model upstream a handler's agents use (issue 11 item
-- 1, "the model per handler may differ"): the name of a `[models.NAME]`
-- of agency.toml, set by the user. A handler without a row uses its
-- nearest boss's, else the runtime's `upstream`.
CREATE TABLE handler_models (
    handler   TEXT PRIMARY KEY,
    upstream  TEXT NOT NULL,
    set_at    INTEGER NOT NULL
);
