-- work_product (retirement handover, issue 9 item 3): files by creator and
-- mail by recipient, including acknowledged mail.
CREATE INDEX files_by_creator ON files (created_by) WHERE created_by IS NOT NULL;
CREATE INDEX messages_by_recipient ON messages (to_party);
