-- Migration 31: handler leases, for several daemons sharing one store.
-- One row per handler whose work a daemon claimed: the owner, the fencing
-- token (1 at the first claim, one more each time the lease changes owner
-- or is taken after it expired) and when it expires, in milliseconds on
-- the database's clock. Rows are never deleted: a released lease is an
-- expired row, and its token is kept so the next one is higher.
CREATE TABLE handler_leases (
    handler     TEXT PRIMARY KEY,
    owner       TEXT NOT NULL,
    token       INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    claimed_at  INTEGER NOT NULL
);
-- The sweeper's expired leases, oldest first.
CREATE INDEX handler_leases_expiry ON handler_leases (expires_at, handler);
-- A daemon's own leases (renewal).
CREATE INDEX handler_leases_owner ON handler_leases (owner, handler);
