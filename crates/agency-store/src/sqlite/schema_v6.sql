-- Migration 6 (caps): work_product (retirement handover, issue 9 item 3)
-- finds mail by recipient, including acknowledged mail; files by creator
-- use migration 7's files_by_creator (created_by, kind).
CREATE INDEX messages_by_recipient ON messages (to_party);
