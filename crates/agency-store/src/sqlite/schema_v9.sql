-- Migration 9: a deferred message that fails its delivery check when it
-- falls due (issue 9 item 2) is dropped, not delivered: the reason is kept
-- so that its receipt says so. Such a row also carries delivered_at and
-- acked_at (the time it was dropped), which take it out of the delivery
-- queue, the inbox and the quotas, and let retention expire it like any
-- closed message; views show it as dropped, never as delivered.
ALTER TABLE messages ADD COLUMN dropped_reason TEXT;
