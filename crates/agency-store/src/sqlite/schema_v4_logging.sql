-- Migration 4 (logging): each agent run's captured stdout/stderr (bounded
-- by the daemon: head and tail, the middle cut and marked) as a blob.
ALTER TABLE agent_runs ADD COLUMN log TEXT;
