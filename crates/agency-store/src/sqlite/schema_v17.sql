-- Migration 17: talking to an agency from outside (issue 12 items 6-7).
--
-- A reply names the message it answers: set only when the sender received
-- that message (the service checks), so an answer cannot be forged.
ALTER TABLE messages ADD COLUMN in_reply_to TEXT;

-- API keys, one agency each. Only the BLAKE3 of the secret is kept; the
-- prefix is the secret's first characters, for telling keys apart.
CREATE TABLE org_keys (
    id          TEXT PRIMARY KEY,
    agency      TEXT NOT NULL,
    key_hash    TEXT NOT NULL UNIQUE,
    prefix      TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);
CREATE INDEX org_keys_agency ON org_keys (agency, created_at);

-- Each message an outside party sent to an agency, the mail that carried
-- it to the executive handler, and the executive's reply once it came.
CREATE TABLE org_messages (
    id                TEXT PRIMARY KEY,
    agency            TEXT NOT NULL,
    conversation      TEXT NOT NULL,
    mail_message_id   TEXT NOT NULL UNIQUE,
    text              TEXT NOT NULL,
    reply_text        TEXT,
    reply_message_id  TEXT,
    status            TEXT NOT NULL,
    created_at        INTEGER NOT NULL,
    answered_at       INTEGER
);
-- A conversation is read in the order its messages were stored (rowid,
-- which this index carries).
CREATE INDEX org_messages_conversation ON org_messages (conversation);
