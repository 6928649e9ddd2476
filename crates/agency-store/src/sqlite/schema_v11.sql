-- Migration 11: budgets on handlers (issue 11 item 3). A limit holds for
-- the handler's whole subtree; NULL means no limit of that kind. Tokens
-- count every kind (input, output, cache reads and writes); cost is in
-- micro-dollars, as in `model_calls`.
CREATE TABLE budgets (
    handler        TEXT PRIMARY KEY,
    max_tokens     INTEGER,
    max_micro_usd  INTEGER,
    max_calls      INTEGER,
    set_at         INTEGER NOT NULL
);
-- The ledger of model calls in flight: a call reserves its worst case
-- before it is forwarded and the row is replaced by the call's
-- `model_calls` row when it settles, in one transaction. A limit is
-- checked against the subtree's spend plus these rows, so parallel calls
-- cannot overspend by more than what is in flight.
CREATE TABLE budget_reservations (
    id         INTEGER PRIMARY KEY,
    at         INTEGER NOT NULL,
    handler    TEXT NOT NULL,
    agent      TEXT NOT NULL,
    tokens     INTEGER NOT NULL,
    micro_usd  INTEGER NOT NULL
);
CREATE INDEX budget_reservations_handler ON budget_reservations (handler);
